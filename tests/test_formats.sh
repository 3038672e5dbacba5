#!/bin/bash
# Parses every report format with real parsers: tests/report_dump writes
# ra_report and ra_checkpoint_report in each format (tags and labels with
# quotes, backslashes, newlines, control bytes, UTF-8 and invalid UTF-8) and
# prints the figures they must hold; Python's json module and an exposition
# parser check the documents against those figures, and promtool (Debian
# package prometheus) validates every Prometheus file. The reports printed
# at exit (REGIONALLOC_STATS, REGIONALLOC_CHECKPOINTS) go through the same.
# Exit status: 0 pass, 1 fail, 77 skip (python3 or promtool missing outside
# CI; with CI=true a missing tool is a failure).
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
dump=$builddir/tests/report_dump
tests_dir=${abs_top_srcdir:-$(dirname "${BASH_SOURCE[0]}")/..}/tests

need python3 python3 || exit 77
have_promtool=0
need promtool prometheus && have_promtool=1

need_built "$dump" "make check builds it"
make_tmp test_formats
reset_env

# Three runs: plain, then with the exit reports in JSON and in Prometheus.
mkdir "$tmp/plain" "$tmp/json" "$tmp/prom"
if ! "$dump" "$tmp/plain" >"$tmp/facts" 2>"$tmp/dump.err"; then
    fail "report_dump exited with $?"
    cat "$tmp/dump.err"
    exit 1
fi
for fmt in json prom; do
    [ $fmt = json ] && long=json || long=prometheus
    if ! REGIONALLOC_STATS=$tmp/$fmt/exit-report.$fmt \
        REGIONALLOC_CHECKPOINTS=$tmp/$fmt/exit-checkpoints.$fmt \
        REGIONALLOC_STATS_FORMAT=$long \
        "$dump" "$tmp/$fmt" >"$tmp/facts.$fmt" 2>"$tmp/dump.err"; then
        fail "report_dump ($long reports at exit) exited with $?"
        cat "$tmp/dump.err"
        exit 1
    fi
    if [ -s "$tmp/dump.err" ]; then
        fail "report_dump ($long reports at exit) wrote on stderr"
        cat "$tmp/dump.err"
    fi
done

# -- promtool: every exposition must be valid and lint-clean ------------------
if [ $have_promtool = 1 ]; then
    for f in "$tmp"/plain/*.prom "$tmp"/prom/*.prom; do
        if out=$(promtool check metrics <"$f" 2>&1); then
            echo "ok: promtool check metrics < ${f#"$tmp"/}"
        else
            fail "promtool check metrics < ${f#"$tmp"/}:"
            printf '%s\n' "$out" | head -n 20
        fi
    done
fi

# -- Python: documents parsed for real, figures compared --------------------------
if ! PYTHONPATH=$tests_dir python3 - "$tmp" <<'EOF'; then
import codecs, json, re, sys
from listing_rule import listing

top = sys.argv[1]
problems = []


def check(cond, what):
    if not cond:
        problems.append(what)


# Names and labels as bytes; what each format decodes to (regionalloc(3),
# ESCAPING): JSON keeps valid UTF-8 and turns every other byte into the
# code point of the same value; Prometheus keeps valid UTF-8 apart from
# control characters other than newline, and writes those and every other
# byte as the four characters \xNN.
codecs.register_error("ra_byte_as_char",
                      lambda e: ("".join(chr(b) for b in e.object[e.start:e.end]), e.end))
codecs.register_error("ra_byte_as_text",
                      lambda e: ("".join("\\x%02x" % b for b in e.object[e.start:e.end]), e.end))


def as_json(raw):
    return raw.decode("utf-8", "ra_byte_as_char")


def as_prometheus(raw):
    s = raw.decode("utf-8", "ra_byte_as_text")
    return "".join("\\x%02x" % ord(c) if (ord(c) < 0x20 and c != "\n") or ord(c) == 0x7f
                   else c for c in s)


def unhex(h):
    return b"" if h == "-" else bytes.fromhex(h)


def exact(obj, key):
    """The bytes of a name or label: its key_hex where the JSON string
    lost them (the name is not UTF-8), else the string's UTF-8."""
    if key + "_hex" in obj:
        return bytes.fromhex(obj[key + "_hex"])
    return obj[key].encode("utf-8")


def is_utf8(raw):
    try:
        raw.decode("utf-8", "strict")
        return True
    except UnicodeDecodeError:
        return False


def check_exact(path, obj, key, raw):
    """obj's key (and key_hex) give back raw, with key_hex where, and only
    where, raw is not UTF-8."""
    check(exact(obj, key) == raw and (key + "_hex" in obj) == (not is_utf8(raw)),
          path + ": %s %r (hex %r), want the bytes %r" %
          (key, obj[key], obj.get(key + "_hex"), raw))


# Blocks each tag holds (none freed, no purge asked), from the facts.
blocks = {}


def read_facts(path):
    tags, cps = {}, []
    for line in open(path, encoding="ascii"):
        w = line.split()
        if w[0] == "tag":
            tags[int(w[1])] = (unhex(w[2]), int(w[3]))
            blocks[int(w[1])] = int(w[4])
        elif w[0] == "checkpoint":
            cps.append((int(w[1]), unhex(w[2]), [int(x) for x in w[3:]]))
    return tags, cps


SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="')
ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def parse_exposition(path):
    """{(name, frozenset(labels.items())): value}, strictly."""
    samples = {}
    # Strict UTF-8: the exposition format allows nothing else.
    for line in open(path, encoding="utf-8", errors="strict").read().splitlines():
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        name, i, labels = m.group(1), m.end(), {}
        if line[i] == "{":
            i += 1
            while line[i] != "}":
                m = LABEL.match(line, i)
                key, i, val = m.group(1), m.end(), []
                while line[i] != '"':
                    if line[i] == "\\":
                        val.append(ESCAPES[line[i + 1]])  # KeyError: bad escape
                        i += 2
                    else:
                        val.append(line[i])
                        i += 1
                i += 1
                labels[key] = "".join(val)
                if line[i] == ",":
                    i += 1
            i += 1
        key = (name, frozenset(labels.items()))
        check(key not in samples, "%s: duplicate series %r" % (path, key))
        samples[key] = float(line[i:].strip())
    return samples


def load_json(path):
    return json.load(open(path, encoding="utf-8", errors="strict"))


# name_hex besides, where the name is not UTF-8.
TAG_KEYS = {"id", "born", "name", "allocated", "active", "resident", "rss",
            "metadata", "rss_at_ns", "mapped",
            "peak_mapped", "dirty", "muzzy", "retained", "reserved", "nmalloc",
            "ndalloc", "purges", "limit", "soft_limit", "limit_failures",
            "arenas", "priority", "parent", "parent_id", "tree"}
UNTAGGED_KEYS = TAG_KEYS - {"id", "born", "name", "rss", "metadata", "rss_at_ns",
                            "peak_mapped", "reserved", "limit",
                            "soft_limit", "limit_failures", "arenas", "priority",
                            "parent", "parent_id", "tree"}
CP_TAG_KEYS = {"id", "born", "name", "parent", "parent_id"}
CP_KEYS = {"seq", "label", "time_ns", "phase_ns", "tagged_allocated", "allocated",
           "active", "resident", "mapped", "rss", "peak_rss", "peak_rss_since",
           "tag_allocated"}


def check_report_json(path, tags):
    d = load_json(path)
    check(d["schema"] == "regionalloc-report-1" and d["enabled"] is True, path + ": header")
    check(set(d) == {"schema", "enabled", "time_ns", "tags", "top", "rest", "untagged",
                     "library", "leftovers", "regions_lost", "process", "memory_limit"},
          path + ": top-level keys %s" % sorted(d))
    # Every tag listed, nothing rolled up.
    check(d["top"] is None and d["rest"] == [], path + ": top %r, rest %r" % (d["top"], d["rest"]))
    # No limit in make check (REGIONALLOC_CGROUP_FS points nowhere).
    check(d["memory_limit"] == {"limit": 0, "in_effect": False,
                                "source": "none", "resident": 0,
                                "level": "none", "given_back": 0, "refusals": 0},
          path + ": memory_limit %r" % d["memory_limit"])
    check(len(d["tags"]) == len(tags), path + ": %d tags" % len(d["tags"]))
    for t in d["tags"]:
        raw, allocated = tags[t["id"]]
        check(set(t) - {"name_hex"} == TAG_KEYS, path + ": tag keys %s" % sorted(t))
        check(t["name"] == as_json(raw), path + ": name %r, want %r" % (t["name"], as_json(raw)))
        check_exact(path, t, "name", raw)
        check(t["allocated"] == allocated,
              path + ": %r allocated %d, want %d" % (t["name"], t["allocated"], allocated))
        check(all(isinstance(t[k], int) and t[k] >= 0
                  for k in TAG_KEYS - {"name", "parent", "parent_id", "tree"}),
              path + ": non-integer figure in %r" % t)
        # Nothing here sets one.
        check(t["priority"] == 0, path + ": %r priority %r" % (t["name"], t["priority"]))
        # These tags are all top-level, without children: their subtree
        # is themselves.
        check(t["parent"] is None and t.get("parent_id", 0) is None,
              path + ": %r has a parent (or no parent_id)" % t["name"])
        check(t["born"] >= 1, path + ": %r born %r" % (t["name"], t["born"]))
        check(all(t["tree"][k] == t[k] for k in
                  ("allocated", "active", "resident", "mapped", "dirty",
                   "nmalloc", "ndalloc")),
              path + ": %r tree differs from its own figures: %r" % (t["name"], t))
        check(t["nmalloc"] == blocks[t["id"]] and t["ndalloc"] == 0 and t["purges"] == 0,
              path + ": %r counts %d/%d/%d, want %d/0/0" %
              (t["name"], t["nmalloc"], t["ndalloc"], t["purges"], blocks[t["id"]]))
        check(t["allocated"] <= t["active"] and t["active"] + t["dirty"] <= t["mapped"] <=
              t["peak_mapped"] <= t["reserved"] and t["retained"] <= t["reserved"],
              path + ": %r figures out of order: %r" % (t["name"], t))
        # Every block was written whole: its pages are resident.
        check(t["rss"] >= t["allocated"], path + ": %r rss below allocated" % t["name"])
        check(t["reserved"] == d["tags"][0]["reserved"] and
              t["reserved"] & (t["reserved"] - 1) == 0 and t["reserved"] >= 4 << 20,
              path + ": %r reserved %d" % (t["name"], t["reserved"]))
        check(t["muzzy"] == 0, path + ": a tag has no lazy purge, muzzy %d" % t["muzzy"])
    check(set(d["untagged"]) == UNTAGGED_KEYS, path + ": untagged keys")
    u = d["untagged"]
    check(u["allocated"] <= u["active"] <= u["mapped"] and u["ndalloc"] <= u["nmalloc"] and
          u["purges"] == 0, path + ": untagged figures %r" % u)
    # jemalloc's totals are the sums over its arenas: the tags' and the
    # untagged ones, read at the same refresh.
    for k in ("allocated", "active"):
        check(d["process"][k] == sum(t[k] for t in d["tags"]) + u[k],
              path + ": process %s %d is not the tags' and untagged sum" % (k, d["process"][k]))
    check(set(d["library"]) == {"allocated"} and
          0 < d["library"]["allocated"] <= d["untagged"]["allocated"],
          path + ": library %r, within untagged" % d["library"])
    # What destroys left live (check_report checks the figure itself).
    check(isinstance(d["regions_lost"], int) and d["regions_lost"] == 0,
          path + ": regions_lost %r" % d["regions_lost"])
    check(set(d["leftovers"]) == {"allocated"} and
          isinstance(d["leftovers"]["allocated"], int) and d["leftovers"]["allocated"] >= 0,
          path + ": leftovers %r" % d["leftovers"])
    check(set(d["process"]) == {"allocated", "active", "resident", "mapped", "rss",
                                "rss_anon", "rss_file", "page_tables", "parts",
                                "parts_over", "parts_at_ns", "jemalloc_measured",
                                "cgroup"},
          path + ": process keys")
    check(d["process"]["allocated"] >= sum(a for _, a in tags.values()),
          path + ": process allocated below the tags' sum")


def check_checkpoints_json(path, tags, cps, extra_last=None):
    d = load_json(path)
    check(d["schema"] == "regionalloc-checkpoints-1" and d["enabled"] is True, path + ": header")
    want = len(cps) + (1 if extra_last else 0)
    check(d["capacity"] == 1024 and d["recorded"] == want and d["dropped"] == 0,
          path + ": counts")
    check([(t["id"], t["name"]) for t in d["tags"]] ==
          [(i, as_json(tags[i][0])) for i in sorted(tags)], path + ": tags")
    for t in d["tags"]:
        check(set(t) - {"name_hex"} == CP_TAG_KEYS and t["parent"] is None and
              t.get("parent_id", 0) is None, path + ": tag %r" % t)
        check_exact(path, t, "name", tags[t["id"]][0])
    # A tag's creation count: ascending with the ids, as none was recycled.
    borns = [t.get("born", 0) for t in d["tags"]]
    check(borns == sorted(set(borns)) and all(b >= 1 for b in borns), path + ": born %r" % borns)
    got = d["checkpoints"]
    check(len(got) == want, path + ": %d checkpoints" % len(got))
    prev = 0
    for c, (seq, label, allocated) in zip(got, cps + ([extra_last] if extra_last else [])):
        check(set(c) - {"label_hex"} == CP_KEYS, path + ": checkpoint keys %s" % sorted(c))
        check(c["seq"] == seq, path + ": seq %d, want %d" % (c["seq"], seq))
        check(c["label"] == as_json(label), path + ": label %r" % c["label"])
        check_exact(path, c, "label", label)
        # Ids past the named tags are report_dump's tag tree, destroyed
        # before exit: null, as every destroyed id's figure is.
        check(c["tag_allocated"][:len(allocated)] == allocated and
              all(v is None for v in c["tag_allocated"][len(allocated):]),
              path + ": checkpoint %d tag_allocated %r, want %r" % (seq, c["tag_allocated"], allocated))
        check(c["tagged_allocated"] == sum(allocated), path + ": tagged_allocated")
        check(c["allocated"] >= c["tagged_allocated"], path + ": allocated < tagged")
        check(c["peak_rss"] >= c["rss"] > 0, path + ": peak_rss < rss")
        check(c["peak_rss_since"] in ("phase", "start"), path + ": peak_rss_since")
        check(c["time_ns"] > prev and c["phase_ns"] == c["time_ns"] - prev,
              path + ": time %d after %d, phase %d" % (c["time_ns"], prev, c["phase_ns"]))
        prev = c["time_ns"]


def check_report_prom(path, tags):
    s = parse_exposition(path)
    for raw, allocated in tags.values():
        key = ("regionalloc_tag_allocated_bytes", frozenset({("tag", as_prometheus(raw))}))
        check(s.get(key) == allocated,
              path + ": %r allocated %r, want %d" % (as_prometheus(raw), s.get(key), allocated))
        key = ("regionalloc_tag_priority", frozenset({("tag", as_prometheus(raw))}))
        check(s.get(key) == 0, path + ": %r priority %r" % (as_prometheus(raw), s.get(key)))
    names = {lbl for (n, l) in s if n == "regionalloc_tag_allocated_bytes" for lbl in l}
    check(len(names) == len(tags), path + ": %d distinct tag labels" % len(names))
    for n in ("regionalloc_untagged_allocated_bytes", "regionalloc_process_rss_bytes",
              "regionalloc_jemalloc_allocated_bytes", "regionalloc_tag_purges_total",
              "regionalloc_memory_limit_bytes", "regionalloc_memory_pressure_level",
              "regionalloc_memory_given_back_bytes_total",
              "regionalloc_memory_pressure_refusals_total", "regionalloc_leftover_bytes"):
        check(any(k[0] == n for k in s), path + ": no " + n)


def check_checkpoints_prom(path, tags, cps, extra_last=None):
    s = parse_exposition(path)
    rows = cps + ([extra_last] if extra_last else [])
    check(s.get(("regionalloc_checkpoints_recorded_total", frozenset())) == len(rows),
          path + ": recorded_total")
    for seq, label, allocated in rows:
        common = {("seq", str(seq)), ("checkpoint", as_prometheus(label))}
        for tag_id, value in enumerate(allocated, 1):
            key = ("regionalloc_checkpoint_tag_allocated_bytes",
                   frozenset(common | {("tag", as_prometheus(tags[tag_id][0]))}))
            check(s.get(key) == value,
                  path + ": checkpoint %d tag %d: %r, want %d" % (seq, tag_id, s.get(key), value))
        key = ("regionalloc_checkpoint_tagged_allocated_bytes", frozenset(common))
        check(s.get(key) == sum(allocated), path + ": checkpoint %d tagged" % seq)


def check_text(path, nlines):
    raw = open(path, "rb").read()
    text = raw.decode("utf-8", errors="strict")
    check(not any(ord(c) < 0x20 and c != "\n" or ord(c) == 0x7f for c in text),
          path + ": a raw control character")
    # A two-line footnote follows the phase table where the kernel refuses
    # to reset the peak RSS.
    lines = text.count("\n") - (2 if "\n* peak_rss: " in text else 0)
    check(lines == nlines, path + ": %d lines, want %d" % (lines, nlines))


for run in ("plain", "json", "prom"):
    tags, cps = read_facts("%s/facts%s" % (top, "" if run == "plain" else "." + run))
    d = "%s/%s/" % (top, run)
    check_report_json(d + "report.json", tags)
    check_checkpoints_json(d + "checkpoints.json", tags, cps)
    check_report_prom(d + "report.prom", tags)
    check_checkpoints_prom(d + "checkpoints.prom", tags, cps)
    # header, tags, rule, untagged, library, total
    # The table (a header, the tags, a rule, untagged, library, total)
    # and the process's two lines under it.
    check_text(d + "report.txt", len(tags) + 7)
    check_text(d + "checkpoints.txt", len(cps) + 1)
    empty = load_json(d + "checkpoints-empty.json")
    check(empty["recorded"] == 0 and empty["checkpoints"] == [] and empty["tags"] == [],
          d + "checkpoints-empty.json")
    parse_exposition(d + "checkpoints-empty.prom")
    # At exit: the same figures (nothing was freed), plus the "exit" row.
    last = (len(cps) + 1, b"exit", cps[-1][2])
    if run == "json":
        check_report_json(d + "exit-report.json", tags)
        check_checkpoints_json(d + "exit-checkpoints.json", tags, cps, last)
    elif run == "prom":
        check_report_prom(d + "exit-report.prom", tags)
        check_checkpoints_prom(d + "exit-checkpoints.prom", tags, cps, last)

# Tag trees (report_dump's tree-root, tree-a, tree-b, tree-aa): parents,
# each tag before its children, subtree totals the sums of the tags' own
# figures, and the exposition's info and tree series agreeing with them.
TREE = {"tree-root": None, "tree-a": "tree-root", "tree-b": "tree-root",
        "tree-aa": "tree-a"}
SUMMED = ("allocated", "active", "resident", "mapped", "dirty", "nmalloc",
          "ndalloc")
for run in ("plain", "json", "prom"):
    d = top + "/" + run + "/"
    doc = load_json(d + "tree.json")
    tags = [t for t in doc["tags"] if t["name"] in TREE]
    check(len(tags) == 4, d + "tree.json: %d tree tags" % len(tags))
    by = {t["name"]: t for t in tags}
    order = [t["name"] for t in doc["tags"]]
    for name, parent in TREE.items():
        t = by.get(name)
        if t is None:
            continue
        check(t["parent"] == parent,
              "tree.json: %s's parent %r, want %r" % (name, t["parent"], parent))
        check(t.get("parent_id", 0) == (by[parent]["id"] if parent else None),
              "tree.json: %s's parent_id %r, want %s's id" % (name, t.get("parent_id"), parent))
        if parent is not None:
            check(order.index(parent) < order.index(name),
                  "tree.json: %s listed before its parent" % name)
        below = [n for n in TREE if n == name or
                 TREE[n] == name or (TREE[n] and TREE[TREE[n]] == name)]
        for k in SUMMED:
            want = sum(by[n][k] for n in below if n in by)
            check(t["tree"][k] == want,
                  "tree.json: %s tree.%s %d, want %d" % (name, k, t["tree"][k], want))
        check(t["tree"]["peak_mapped"] >= t["tree"]["mapped"],
              "tree.json: %s's subtree peak below its mapped" % name)
    prom = open(d + "tree.prom", encoding="utf-8").read()
    for name, parent in TREE.items():
        line = 'regionalloc_tag_info{tag="%s",parent="%s"} 1' % (name, parent or "")
        check(("\n" + line + "\n") in prom, "tree.prom: no line %s" % line)
        if name in by:
            line = 'regionalloc_tree_allocated_bytes{tag="%s"} %d' % (
                name, by[name]["tree"]["allocated"])
            check(("\n" + line + "\n") in prom, "tree.prom: no line %s" % line)

# Tags listed or rolled up (report_dump's top-*): the largest by their
# subtrees' resident bytes, ties to the earlier in the tree's order, a tag
# named "(rest)" and its subtree never listed; the others rolled up under
# the nearest listed tag above them, every figure that adds up summed; in
# the exposition, a series tag="(rest)" that keeps each such family's sum,
# and the tags, untagged and the process adding up in every document.
ROLLED = ("allocated", "active", "resident", "rss", "metadata", "mapped", "dirty", "muzzy",
          "retained", "nmalloc", "ndalloc", "purges", "limit_failures", "arenas")
SUMMED_FAMILIES = {"regionalloc_tag_" + f for f in (
    "allocated_bytes", "active_bytes", "resident_bytes", "rss_bytes", "metadata_bytes",
    "mapped_bytes",
    "dirty_bytes", "allocations_total", "frees_total", "purges_total",
    "limit_failures_total", "arenas")}
d = top + "/plain/"
full = load_json(d + "top-all.json")
every = full["tags"]
check(full["top"] is None and full["rest"] == [] and
      any(t["name"] == "(rest)" for t in every), "top-all.json: top %r, rest %r" % (full["top"], full["rest"]))
all_prom = parse_exposition(d + "top-all.prom")
for n in ("3", "0"):
    cut = load_json(d + "top-%s.json" % n)
    where = "top-%s.json" % n
    want, groups, by = listing(full, int(n))
    got = [t["id"] for t in cut["tags"]]
    check(set(got) == want and cut["top"] == int(n),
          "%s: listed %s, want %s (top %r)" % (where, got, sorted(want), cut["top"]))
    check(got == [t["id"] for t in every if t["id"] in want], where + ": not in the tree's order")
    check(all(t == by[t["id"]] for t in cut["tags"]),
          where + ": a listed tag's figures differ from top-all.json's")
    check(sorted((r["parent_id"] or 0) for r in cut["rest"]) == sorted(groups),
          where + ": roll-ups under %s, want %s" % ([r["parent_id"] for r in cut["rest"]], list(groups)))
    for r in cut["rest"]:
        g = groups.get(r["parent_id"] or 0, [])
        check(set(r) == {"parent", "parent_id", "tags"} | set(ROLLED), where + ": roll-up keys %s" % sorted(r))
        check(r["tags"] == len(g) and all(r[k] == sum(t[k] for t in g) for k in ROLLED),
              where + ": the roll-up under %r: %r, want the sums of %s" % (r["parent"], r, [t["name"] for t in g]))
        check(r["parent"] == (by[r["parent_id"]]["name"] if r["parent_id"] else None),
              where + ": a roll-up's parent %r" % r["parent"])
    if 0 in groups:
        check(cut["rest"][-1]["parent_id"] is None, where + ": the top level's roll-up is not last")
    prom = parse_exposition(d + "top-%s.prom" % n)
    for f in sorted({k[0] for k in all_prom if k[0].startswith("regionalloc_tag_")}):
        rest = (f, frozenset({("tag", "(rest)")}))
        whole = sum(v for k, v in all_prom.items() if k[0] == f)
        if f in SUMMED_FAMILIES:
            check(rest in prom and sum(v for k, v in prom.items() if k[0] == f) == whole,
                  "top-%s.prom: %s sums to %r, %r without ?top" %
                  (n, f, sum(v for k, v in prom.items() if k[0] == f), whole))
        else:
            check(rest not in prom, "top-%s.prom: %s has a (rest) series" % (n, f))
    listed_names = {by[i]["name"] for i in want}
    check({dict(k[1])["tag"] for k in prom if k[0] == "regionalloc_tag_info"} == listed_names,
          "top-%s.prom: tag_info for %s" % (n, sorted(dict(k[1])["tag"] for k in prom if k[0] == "regionalloc_tag_info")))
    check(prom.get(("regionalloc_rest_tags", frozenset())) == len(every) - len(want),
          "top-%s.prom: regionalloc_rest_tags %r" % (n, prom.get(("regionalloc_rest_tags", frozenset()))))
for n in ("all", "3", "0"):
    prom = parse_exposition(d + "top-%s.prom" % n)
    tagged = sum(v for k, v in prom.items() if k[0] == "regionalloc_tag_allocated_bytes")
    check(tagged + prom[("regionalloc_untagged_allocated_bytes", frozenset())] ==
          prom[("regionalloc_jemalloc_allocated_bytes", frozenset())],
          "top-%s.prom: tags and untagged do not add up to the process" % n)
check("regionalloc_rest_tags" not in {k[0] for k in all_prom}, "top-all.prom: a rest count")
# Text: the listed tags, a row per roll-up named as the JSON's, in its order.
cut = load_json(d + "top-3.json")
rows = open(d + "top-3.txt", encoding="utf-8").read().splitlines()
# The rows between the header and the rule (untagged, library, total and
# the process's two lines follow it).
names = [r.strip().split("  ")[0] for r in rows[1:-6]]
want = [t["name"] for t in cut["tags"]]
want_rest = ["(%d more under %s)" % (r["tags"], r["parent"]) if r["parent"] else
             "(%d more tag%s)" % (r["tags"], "" if r["tags"] == 1 else "s") for r in cut["rest"]]
check(sorted(names) == sorted(want + want_rest) and names[-1] == want_rest[-1],
      "top-3.txt: rows %s, want %s and %s" % (names, want, want_rest))
check(len(open(d + "top-all.txt").read().splitlines()) == len(every) + 7, "top-all.txt: not every tag")

for p in problems:
    print("FAIL: " + p)
if not problems:
    print("ok: JSON and exposition documents parsed; every figure and name as expected")
sys.exit(1 if problems else 0)
EOF
    failures=$((failures + 1))
fi

finish

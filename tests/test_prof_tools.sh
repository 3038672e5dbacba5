#!/bin/bash
# Reads the profiler's outputs with the tools they are written for:
# tests/prof_dump_demo profiles three call sites under two tags at
# interval 1 (exact figures) and writes each format; then
#   - the folded stacks must be lines `tag:<name>;<frame>;... <bytes>` that
#     flamegraph.pl, inferno and speedscope read, one per live site, with
#     the sites' names and exact live bytes;
#   - `jeprof --text` (Debian libjemalloc-dev) must read the heap_v2 dump,
#     name the three sites and total their live bytes (and, with
#     --alloc_space, every byte allocated);
#   - the pprof file must be gzip (gzip -t) and a profile.proto that a small
#     decoder below (python3, no packages) checks field by field: sample
#     types, period, tag labels, locations, functions, mappings, figures;
#     each mapping of a file must carry the file's GNU build ID, as
#     `readelf -n` (binutils) reads it from the file, or none when it has
#     none;
#   - `go tool pprof -top` (Debian golang-go) must read it and show each
#     site's exact live and allocated bytes.
# Exit status: 0 pass, 1 fail, 77 skip (python3, jeprof or readelf missing
# outside CI; with CI=true a missing tool is a failure).
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
demo=$builddir/tests/prof_dump_demo

need python3 python3 || exit 77
have_readelf=0
need readelf binutils && have_readelf=1
have_jeprof=0
need jeprof libjemalloc-dev && need perl perl && have_jeprof=1

need_built "$demo" "make check builds it"
make_tmp test_prof_tools
reset_env

if ! "$demo" "$tmp" >"$tmp/facts" 2>"$tmp/demo.err"; then
    fail "prof_dump_demo exited with $?"
    cat "$tmp/demo.err"
    exit 1
fi
sites=$(awk '$1 == "site" { print $2 }' "$tmp/facts")

# -- folded stacks -------------------------------------------------------------
# A frame is "function (file:line)", "function+0xOFF" or "object+0xOFF":
# it may hold spaces, never ';'.
if bad=$(grep -Ev '^tag:[^;]+(;[^;]+)+ [0-9]+$' "$tmp/demo.folded"); then
    fail "demo.folded: lines that are not folded stacks:"
    printf '%s\n' "$bad" | head -n 5
fi
# Names, tags and figures: checked with the other formats below.

# -- jeprof ----------------------------------------------------------------------
# jeprof --text prints "Total: <n> B", then one line per function:
# flat flat% sum% cum cum% name.
check_jeprof() {
    local mode=$1 column=$2 total=0 out site want got before=$failures
    if ! out=$(jeprof --text --show_bytes "--$mode" "$demo" "$tmp/demo.heap" 2>"$tmp/jeprof.err"); then
        fail "jeprof --text --$mode exited with $?:"
        head -n 20 "$tmp/jeprof.err"
        return
    fi
    for site in $sites; do
        want=$(awk -v s="$site" -v c="$column" '$1 == "site" && $2 == s { print $c }' "$tmp/facts")
        got=$(printf '%s\n' "$out" | awk -v s="$site" '$6 == s { print $1 }')
        total=$((total + want))
        if [ "$got" != "$want" ]; then
            fail "jeprof --$mode: $site: '$got' bytes, want $want"
            printf '%s\n' "$out" | head -n 20
        fi
    done
    if ! printf '%s\n' "$out" | grep -qx "Total: $total B"; then
        fail "jeprof --$mode: no 'Total: $total B'"
        printf '%s\n' "$out" | head -n 5
    elif [ "$failures" = "$before" ]; then
        echo "ok: jeprof --text --$mode names every site, total $total B"
    fi
}
if [ $have_jeprof = 1 ]; then
    check_jeprof inuse_space 4
    check_jeprof alloc_space 6
fi

# -- pprof: gzip, then a profile.proto decoded by hand ------------------------------
if ! gzip -t "$tmp/demo.pb.gz" 2>"$tmp/gzip.err"; then
    fail "gzip -t demo.pb.gz: $(cat "$tmp/gzip.err")"
fi

if ! python3 - "$tmp" "$have_readelf" <<'EOF'; then
import gzip, os, re, subprocess, sys

top, have_readelf = sys.argv[1], sys.argv[2] == "1"
libdw = os.environ.get("RA_LIBDW") == "1"
problems = []


def check(cond, what):
    if not cond:
        problems.append(what)


sys.path.insert(0, os.path.join(os.environ.get("abs_top_srcdir", "."), "tests"))
from pprof_decode import message  # noqa: E402


def read_facts(path):
    tags, sites = {}, {}
    for line in open(path, encoding="ascii"):
        w = line.split()
        if w[0] == "tag":
            tags[int(w[1])] = bytes.fromhex(w[2]).decode()
        elif w[0] == "site":
            sites[w[1]] = (int(w[2]),) + tuple(int(x) for x in w[3:])
    return tags, sites


tags, sites = read_facts(top + "/facts")

# -- the folded file: one line per site, its tag's name without ';' and ' '.
folded = {}
for line in open(top + "/demo.folded", encoding="utf-8"):
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")
    leaf = re.split(r"[+ ]", frames[-1])[0]
    folded[leaf] = (frames[0], int(count))
    # With libdw, the site's own file and line (see prof_dump_demo.c).
    if libdw and leaf.startswith("demo_site_"):
        check(re.fullmatch(r"\w+ \(prof_dump_demo\.c:\d+\)", frames[-1]),
              "folded: leaf %r has no file:line" % frames[-1])
for name, (tag, live, nlive, alloc, nalloc) in sites.items():
    want = "tag:" + re.sub("[; ]", "_", tags[tag])
    check(folded.get(name) == (want, live),
          "folded: %s: %r, want %r" % (name, folded.get(name), (want, live)))
check(len(folded) == len(sites), "folded: %d lines, want %d" % (len(folded), len(sites)))

# -- the tree: each site under its tag, with its live bytes and blocks.
tree, cur = {}, None
for line in open(top + "/demo.tree", encoding="utf-8"):
    line = line.rstrip("\n")
    if line.startswith("tag "):
        cur = line[4:]
    m = re.match(r"^ [|\\]-- ([^+ ]+)(?:\+0x[0-9a-f]+| \([^)]*\))"
                 r" \((\d+), #(\d+)\)$", line)
    if m:
        tree[m.group(1)] = (cur, int(m.group(2)), int(m.group(3)))
for name, (tag, live, nlive, alloc, nalloc) in sites.items():
    want = (tags[tag], live, nlive)
    check(tree.get(name) == want, "tree: %s: %r, want %r" % (name, tree.get(name), want))

# -- pprof
raw = gzip.open(top + "/demo.pb.gz").read()
P = message(raw, repeated=(1, 2, 3, 4, 5, 6, 13))
strings = [s.decode("utf-8") for s in P[6]]
check(strings and strings[0] == "", "string_table[0] is not empty")


def s(i):
    return strings[i]


def value_type(b):
    m = message(b)
    return (s(m.get(1, 0)), s(m.get(2, 0)))


check([value_type(b) for b in P[1]] ==
      [("alloc_objects", "count"), ("alloc_space", "bytes"),
       ("inuse_objects", "count"), ("inuse_space", "bytes")],
      "sample types %r" % [value_type(b) for b in P[1]])
check(value_type(P.get(11, b"")) == ("space", "bytes"), "period_type")
check(P.get(12) == 1, "period %r, want 1" % P.get(12))
check(s(P.get(14, 0)) == "inuse_space", "default_sample_type")

mappings = {}
for b in P[3]:
    m = message(b)
    mappings[m[1]] = m
    check(m.get(2, 0) < m.get(3, 0), "mapping %d: empty range" % m[1])
    check(s(m.get(5, 0)) != "", "mapping %d: no file name" % m[1])
check(sorted(mappings) == list(range(1, len(mappings) + 1)), "mapping ids")
check(mappings and s(mappings[1][5]).endswith("/prof_dump_demo"),
      "mapping 1 is not the program: %r" % (mappings and s(mappings[1][5])))


def file_build_id(path):
    """The file's GNU build ID as readelf -n prints it (lowercase hex), ""
    when it has none, None when readelf cannot read it."""
    r = subprocess.run(["readelf", "-n", path], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    m = re.search(r"^\s*Build ID: ([0-9a-f]+)$", r.stdout, re.M)
    return m.group(1) if m else ""


# Build IDs: every mapping of a file that has one carries it, and only it.
# [vdso] and [vsyscall] have no file to compare with.
if have_readelf:
    want_id, named, before = {}, set(), len(problems)
    for i, m in sorted(mappings.items()):
        path, got = s(m.get(5, 0)), s(m.get(6, 0))
        if not os.path.isfile(path):
            continue
        if path not in want_id:
            want_id[path] = file_build_id(path)
        want = want_id[path]
        if want is None:
            check(False, "readelf -n %s failed" % path)
            continue
        check(got == want, "mapping %d (%s): build ID %r, readelf -n: %r"
              % (i, os.path.basename(path), got, want))
        if want and got == want:
            named.add(path)
    for name in ("prof_dump_demo", "libregionalloc.so"):
        paths = [p for p in want_id if re.search("/" + re.escape(name) + r"(\.[0-9.]*)?$", p)]
        check(paths, "no mapping of %s" % name)
        for p in paths:
            check(want_id[p], "%s has no build ID to compare" % p)
            if p in named:
                print("ok: mapping of %s: build ID %s, as readelf -n reads it"
                      % (os.path.basename(p), want_id[p]))
    if want_id and len(problems) == before:
        print("ok: %d of %d mapped files have a build ID, and their mappings carry it"
              % (len(named), len(want_id)))

functions, files = {}, {}
for b in P[5]:
    m = message(b)
    functions[m[1]] = s(m.get(2, 0))
    files[m[1]] = s(m.get(4, 0))
locations = {}
for b in P[4]:
    m = message(b, repeated=(4,))
    lines = [message(l) for l in m[4]]
    check(m.get(2, 0) == 0 or m[2] in mappings, "location %d: no mapping" % m[1])
    if m.get(2, 0):
        mp = mappings[m[2]]
        check(mp[2] <= m.get(3, 0) < mp[3], "location %d outside its mapping" % m[1])
    check(all(l.get(1) in functions for l in lines), "location %d: no function" % m[1])
    locations[m[1]] = [functions[l[1]] for l in lines if l.get(1) in functions]
    # With libdw, a site's Function has its source file and its Line a line.
    if libdw and lines and locations[m[1]][-1].startswith("demo_site_"):
        l = lines[-1]
        check(files.get(l.get(1)).endswith("/prof_dump_demo.c") and l.get(2, 0) > 0,
              "location %d (%s): file %r, line %r" % (m[1], locations[m[1]][-1],
                                                      files.get(l.get(1)), l.get(2)))

by_site, labels = {}, set()
for b in P[2]:
    m = message(b, repeated=(3,), packed=(1, 2))
    check(len(m[2]) == 4, "sample with %d values" % len(m[2]))
    check(all(l in locations for l in m[1]), "sample: unknown location")
    lbl = [message(x) for x in m[3]]
    check([s(x.get(1, 0)) for x in lbl] == ["tag"], "sample labels %r" % lbl)
    tag = s(lbl[0].get(2, 0)) if lbl else None
    labels.add(tag)
    leaf = locations[m[1][0]] if m[1] else []
    if leaf:
        by_site[leaf[0]] = (tag, m[2][2], m[2][3], m[2][0], m[2][1])
check(labels == set(tags.values()), "tag labels %r, want %r" % (labels, set(tags.values())))
for name, (tag, live, nlive, alloc, nalloc) in sites.items():
    want = (tags[tag], nlive, live, nalloc, alloc)
    check(by_site.get(name) == want, "pprof: %s: %r, want %r" % (name, by_site.get(name), want))

for p in problems:
    print("FAIL: " + p)
if not problems:
    print("ok: folded, tree and profile.proto hold every site, tag and figure")
sys.exit(1 if problems else 0)
EOF
    failures=$((failures + 1))
fi

# -- go tool pprof, if Go is there ---------------------------------------------------
# pprof -top -unit=B prints "Showing nodes accounting for <n>B, ...", then
# flat flat% sum% cum cum% name, with "<n>B" figures.
check_pprof() {
    local index=$1 column=$2 total=0 out site want got ok=1
    if ! out=$(go tool pprof -top -unit=B "-sample_index=$index" "$demo" "$tmp/demo.pb.gz" 2>"$tmp/pprof.err"); then
        fail "go tool pprof -top -sample_index=$index exited with an error:"
        head -n 20 "$tmp/pprof.err"
        return
    fi
    for site in $sites; do
        want=$(awk -v s="$site" -v c="$column" '$1 == "site" && $2 == s { print $c }' "$tmp/facts")
        got=$(printf '%s\n' "$out" | awk -v s="$site" '$6 == s { print $1 }')
        total=$((total + want))
        if [ "$got" != "${want}B" ]; then
            fail "go tool pprof -sample_index=$index: $site: '$got', want ${want}B"
            ok=0
        fi
    done
    if ! printf '%s\n' "$out" | grep -q "accounting for ${total}B, 100% of ${total}B total"; then
        fail "go tool pprof -sample_index=$index: total is not ${total}B"
        ok=0
    fi
    if [ $ok = 1 ]; then
        echo "ok: go tool pprof -top -sample_index=$index names every site, total ${total}B"
    else
        printf '%s\n' "$out" | head -n 20
    fi
}
if need go golang-go; then
    check_pprof inuse_space 4
    check_pprof alloc_space 6
fi

finish

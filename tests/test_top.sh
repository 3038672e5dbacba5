#!/bin/bash
# Runs regionalloc-top against tests/shm_publisher, whose tags hold exactly
# known figures: one table, JSON, the list of publishers, rates, stale
# segments and --clean, the live view's end; then against crafted segments
# (truncated, lying, torn forever, links, FIFOs), each of which must be
# rejected with exit status 1 and one line, never a crash; then bad
# options. Nothing here asserts on speed: every wait is generous and polls.
# Run by make check with abs_top_builddir set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
top=$builddir/tools/regionalloc-top
publisher=$builddir/tests/shm_publisher
need_built "$top"
need_built "$publisher"

reset_env
unset REGIONALLOC_SHM REGIONALLOC_SHM_INTERVAL
export LC_ALL=C
if [ ! -d /dev/shm ] || [ ! -w /dev/shm ]; then
    skip "no writable /dev/shm"
fi

make_tmp test_top
publishers=
killed=
# Ends what the test started and removes the segment of the publisher it
# killed, whatever happened.
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    # shellcheck disable=SC2086 # a list of pids
    end_processes $publishers
    [ -n "$killed" ] && rm -f "/dev/shm/regionalloc.$killed"
    rm -rf "$tmp"
}
trap cleanup EXIT

# forget PID: PID is no longer a running publisher to end at exit.
forget() {
    local p rest=
    for p in $publishers; do
        [ "$p" = "$1" ] || rest="$rest $p"
    done
    publishers=$rest
}

# The number of publications the segment of pid $1 shows, or nothing.
publications() {
    "$top" --once "$1" 2>/dev/null |
        sed -n 's/^pid [0-9]* (.*): \([0-9]*\) publications.*/\1/p'
}

# start_publisher NAME [LIMIT]: starts tests/shm_publisher (under a memory
# limit of LIMIT bytes, 64 GiB if not given) in the background as
# $pid, and returns once its segment shows a publication made after its
# tags were in place, and their pages measured. base is read after
# "ready": publication base + 1 may have begun before it, base + 2 begins
# after base + 1 is out. Up to a minute each: a loaded machine is slow,
# not broken.
start_publisher() {
    local out=$tmp/$1.out base='' n i
    REGIONALLOC_SHM=1 REGIONALLOC_SHM_INTERVAL=100ms "$publisher" 600 ${2:+"$2"} \
        >"$out" 2>"$tmp/$1.err" &
    pid=$!
    publishers="$publishers $pid"
    for ((i = 0; i < 600; i++)); do
        if grep -qs '^ready$' "$out"; then
            base=$(publications "$pid")
            [ -n "$base" ] && break
        fi
        sleep 0.1
    done
    [ -n "$base" ] || { fail "$1: no segment in a minute"; return 1; }
    for ((i = 0; i < 600; i++)); do
        n=$(publications "$pid")
        [ -n "$n" ] && [ "$n" -ge $((base + 2)) ] && break
        sleep 0.1
    done
    [ "$i" -lt 600 ] || { fail "$1: its segment was not refreshed in a minute"; return 1; }
    # The library's thread measures the regions one after another, on a
    # budget: on a loaded machine the first publications come before it has
    # reached the cache's 8 MiB, and the process line's tags read less.
    for ((i = 0; i < 600; i++)); do
        tags_measured "$pid" && return 0
        sleep 0.1
    done
    fail "$1: its tags' 9 MiB not measured in a minute"
    return 1
}

# tags_measured PID: true once the process line's tags part holds the
# publisher's 9 MiB of tags (cache and sessions, written to).
tags_measured() {
    "$top" --once "$1" 2>/dev/null | awk '
        /^process: / { for (i = 1; i < NF; i++)
                           if ($i == "tags" && $(i + 2) == "MiB" && $(i + 1) >= 9)
                               found = 1 }
        END { exit !found }'
}

# waits_for PID: waits up to a minute for a background process to end, and
# returns its exit status (124 if it did not end).
waits_for() {
    local i
    for ((i = 0; i < 600; i++)); do
        if ! kill -0 "$1" 2>/dev/null; then
            wait "$1"
            return $?
        fi
        sleep 0.1
    done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 124
}

# shows FILE PATTERN: waits up to a minute for a line matching PATTERN
# (extended regex) in FILE. Returns 1 if none came.
shows() {
    local i
    for ((i = 0; i < 600; i++)); do
        grep -Eq -- "$2" "$1" && return 0
        sleep 0.1
    done
    return 1
}

start_publisher first || finish
pid1=$pid
segment1=/dev/shm/regionalloc.$pid1

# -- one table ------------------------------------------------------------------
expect_status 0 "--once" "$top" --once "$pid1"
cat "$tmp/out"
grep -q "^pid $pid1 (shm_publisher): [0-9]* publications, every 100ms" \
    "$tmp/out" || fail "--once: no header line naming pid $pid1"
grep -q '^untagged .* allocated; process .* allocated, .* mapped, .* rss' \
    "$tmp/out" || fail "--once: no totals line"
# The process's parts, the two lines of the library's text report.
grep -Eq '^process: rss_anon [0-9.]+ [KMG]?i?B = tags [0-9.]+ MiB \+ untagged [0-9.]+ [KMG]?i?B \+ metadata [0-9.]+ [KMG]?i?B \+ library [0-9.]+ [KMG]?i?B \+ other [0-9.]+ [KMG]?i?B( \(the named parts exceed it by [0-9.]+ [KMG]?i?B\))?( \(jemalloc.s mappings not seen: untagged is its estimate, metadata in it\))?$' "$tmp/out" ||
    fail "--once: no process: line of the parts"
# Without the override the library does not see jemalloc's mappings, and
# says so; with it, it does.
if [ "${RA_OVERRIDE:-1}" = 1 ]; then
    ! grep -q "mappings not seen" "$tmp/out" ||
        fail "--once: the override's build says jemalloc's mappings are not seen"
else
    grep -q "^process: .* (jemalloc's mappings not seen" "$tmp/out" ||
        fail "--once: no note that untagged is jemalloc's estimate"
fi
grep -Eq '^         rss_file [0-9.]+ [KMG]?i?B, page tables [0-9.]+ [KMG]?i?B' "$tmp/out" ||
    fail "--once: no second process: line"
grep -Eq '^cache +8\.0 MiB ' "$tmp/out" || fail "--once: cache is not 8.0 MiB"
grep -Eq '^sessions +1\.0 MiB .* 16\.0 MiB$' "$tmp/out" ||
    fail "--once: sessions is not 1.0 MiB with a 16.0 MiB limit"
grep -Eq '^odd "name"\\x5c\\x09\\xff\\xc3\\xa9 +128\.0 KiB ' "$tmp/out" ||
    fail "--once: the odd name is not shown escaped"
grep -q scratch "$tmp/out" && fail "--once: shows the destroyed tag"
grep -Eq '^memory limit 64\.0 GiB \(call\): resident [0-9.]+ [KMG]?i?B, pressure none; given back 0 B, 0 allocations refused$' "$tmp/out" ||
    fail "--once: no memory limit line: $(grep -i limit "$tmp/out")"
grep -Eq '^cache( +[^ ]+ [KMG]?i?B){4} +- +- +- *$' "$tmp/out" ||
    fail "--once without --interval: rates are not '-'"
grep -q $'\033' "$tmp/out" && fail "--once: escape sequences in the output"
[ -s "$tmp/err" ] && fail "--once: stderr not empty: $(cat "$tmp/err")"
first_tags=$(sed -n '/^TAG /,$p' "$tmp/out" | sed -n '2,$s/ .*//p' | tr '\n' ' ')
[ "$first_tags" = "cache sessions odd " ] ||
    fail "--once: rows '$first_tags', expected cache first (largest)"
expect_status 0 "--sort name" "$top" --once --sort name "$pid1"
order=$(sed -n '/^TAG /,$p' "$tmp/out" | sed -n '2,$s/ .*//p' | tr '\n' ' ')
[ "$order" = "cache odd sessions " ] || fail "--sort name: rows '$order'"
expect_status 0 "--sort mapped" "$top" --once -s mapped "$pid1"

# -- rates ----------------------------------------------------------------------
# Two reads a second apart see two publications of a 100 ms publisher,
# unless the machine starves it for a whole second: then the rates are
# '-', and the reads are taken again.
for ((i = 0; i < 10; i++)); do
    expect_status 0 "--once --interval 1" "$top" --once --interval 1 "$pid1"
    grep -Eq '^cache .* - +- +- *$' "$tmp/out" || break
done
grep -Eq '^cache .* 0 B/s +0/s +- *$' "$tmp/out" ||
    fail "--once --interval 1: cache's rates are not 0 B/s and 0/s: $(grep ^cache "$tmp/out")"
grep -Eq '^sessions .* 0 B/s +0/s ' "$tmp/out" ||
    fail "--once --interval 1: sessions' rates are not 0"

# -- JSON -------------------------------------------------------------------------
expect_status 0 "--json" "$top" --json "$pid1"
cp "$tmp/out" "$tmp/doc.json"
if need python3 python3; then
    python3 - "$tmp/doc.json" "$pid1" <<'EOF' || fail "--json: wrong document"
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
FIGURES = ["allocated", "active", "resident", "rss", "mapped", "peak_mapped",
           "dirty", "muzzy", "retained", "reserved", "nmalloc", "ndalloc",
           "purges", "limit", "soft_limit", "limit_failures"]
bad = []
def expect(what, got, want):
    if got != want:
        bad.append("%s: %r, expected %r" % (what, got, want))
expect("pid", doc["pid"], int(sys.argv[2]))
expect("stale", doc["stale"], False)
expect("interval_ns", doc["interval_ns"], 100000000)
for key in ("published", "age_ns", "library_allocated", "leftovers_allocated"):
    if not isinstance(doc[key], int) or doc[key] < 0:
        bad.append("%s: %r" % (key, doc[key]))
expect("untagged members", sorted(doc["untagged"]), sorted(FIGURES))
# The process's parts, keyed as the library's JSON report keys them.
PARTS = ["rss_anon", "rss_file", "page_tables", "parts", "parts_over",
         "parts_at_ns", "jemalloc_measured", "cgroup"]
expect("process members", sorted(doc["process"]), sorted(FIGURES + PARTS))
proc = doc["process"]
expect("parts members", sorted(proc["parts"]),
       sorted(["tags", "untagged", "metadata", "library", "other"]))
if proc["parts_at_ns"] <= 0 or proc["parts_at_ns"] > doc["time_ns"]:
    bad.append("parts_at_ns %r, time_ns %r" % (proc["parts_at_ns"], doc["time_ns"]))
if proc["parts"]["tags"] < 8388608 + 1048576 + 131072:
    bad.append("parts.tags below the tags' blocks: %r" % proc["parts"])
tags = {t["name"]: t for t in doc["tags"]}
for t in doc["tags"]:
    expect("members of " + t["name"], sorted(t),
           sorted(FIGURES + ["id", "name", "parent", "priority", "metadata",
                             "rss_at_ns"]))
    if not 0 < t["rss_at_ns"] <= doc["time_ns"] or t["metadata"] > t["rss"]:
        bad.append("kernel count of %s: %r" % (t["name"], t))
    expect("parent of " + t["name"], t["parent"], None)
expect("tag names", sorted(tags), sorted(["cache", "sessions", 'odd "name"\\\t\u00ff\u00e9']))
expect("ids", [t["id"] for t in doc["tags"]], [1, 3, 4])
expect("odd.allocated", tags.get('odd "name"\\\t\u00ff\u00e9', {}).get("allocated"), 131072)
cache, sessions = tags.get("cache", {}), tags.get("sessions", {})
expect("cache.allocated", cache.get("allocated"), 8388608)
expect("cache.nmalloc", cache.get("nmalloc"), 8)
expect("cache.limit", cache.get("limit"), 0)
expect("sessions.allocated", sessions.get("allocated"), 1048576)
expect("sessions.nmalloc", sessions.get("nmalloc"), 4)
expect("sessions.limit", sessions.get("limit"), 16777216)
expect("sessions.soft_limit", sessions.get("soft_limit"), 8388608)
expect("sessions.limit_failures", sessions.get("limit_failures"), 0)
expect("sessions.priority", sessions.get("priority"), -1)
expect("cache.priority", cache.get("priority"), 7)
limit = doc["memory_limit"]
expect("memory_limit members", sorted(limit),
       sorted(["limit", "in_effect", "source", "resident", "level",
               "given_back", "refusals"]))
expect("memory_limit.limit", limit.get("limit"), 64 << 30)
expect("memory_limit.in_effect", limit.get("in_effect"), True)
expect("memory_limit.source", limit.get("source"), "call")
expect("memory_limit.level", limit.get("level"), "none")
expect("memory_limit.refusals", limit.get("refusals"), 0)
if cache.get("mapped", 0) < 8388608 or cache.get("rss", 0) < 8388608:
    bad.append("cache mapped/rss below its 8 MiB: %r" % cache)
if doc["process"]["allocated"] < 8388608 + 1048576 + 131072:
    bad.append("process.allocated below the tags' sum")
for b in bad:
    print("FAIL: --json: " + b)
sys.exit(1 if bad else 0)
EOF
fi

# regionalloc report PID: the process's parts add up to its RssAnon, but
# where the named parts exceed it, by the report's own parts_over.
expect_status 0 "report --format=json" "$builddir/tools/regionalloc" report \
    "$pid1" --format=json
if need python3 python3; then
    python3 -c '
import json, sys
p = json.load(open(sys.argv[1], encoding="utf-8"))["process"]
parts, over = p["parts"], p["parts_over"]
assert sorted(parts) == sorted(["tags", "untagged", "metadata", "library",
                                "other"]), parts
assert p["rss_anon"] > 0 and p["parts_at_ns"] > 0, p
assert sum(parts.values()) == p["rss_anon"] + over, (parts, p["rss_anon"], over)
assert over == 0 or parts["other"] == 0, (parts, over)
' "$tmp/out" || fail "report --format=json: the parts do not add up: $(cat "$tmp/out")"
fi

# -- a memory limit at or above the address space --------------------------------
# Kept as given (2^64 - 1 here), none in effect: the table says so, the
# JSON document has in_effect false, Prometheus' gauge the number.
if start_publisher unbounded 18446744073709551615; then
    pid3=$pid
    expect_status 0 "--once, unbounded" "$top" --once "$pid3"
    grep -Eq '^memory limit [0-9.]+ [KMGTPE]?i?B \(call\): none in effect \(at or above the address space\)$' "$tmp/out" ||
        fail "--once: no 'none in effect' line: $(grep -i limit "$tmp/out")"
    expect_status 0 "--json, unbounded" "$top" --json "$pid3"
    grep -q '"memory_limit": {"limit": 18446744073709551615, "in_effect": false, "source": "call", ' "$tmp/out" ||
        fail "--json: the limit not as given and not in effect: $(grep memory_limit "$tmp/out")"
    expect_status 0 "report --format prometheus, unbounded" \
        "$builddir/tools/regionalloc" report "$pid3" --format prometheus
    grep -qx 'regionalloc_memory_limit_bytes 18446744073709551615' "$tmp/out" &&
        grep -qx 'regionalloc_memory_pressure_level 0' "$tmp/out" ||
        fail "report --format prometheus: $(grep memory_ "$tmp/out")"
    kill -TERM "$pid3"
    waits_for "$pid3" >/dev/null
    forget "$pid3"
fi

# -- the list of publishers, stale segments, --clean ------------------------------
expect_status 0 "the list" "$top"
cat "$tmp/out"
# No HTTP server in the publisher: "-" in the HTTP column.
grep -Eq "^ *$pid1 +shm_publisher +3 +9\.1 MiB +[0-9.]+s +-$" "$tmp/out" ||
    fail "the list: no live row for $pid1"

# A publisher killed by SIGKILL runs no exit handler: its segment stays.
start_publisher second || finish
pid2=$pid
kill -KILL "$pid2"
wait "$pid2" 2>/dev/null
killed=$pid2
forget "$pid2"
[ -f "/dev/shm/regionalloc.$pid2" ] || fail "no segment left by a killed process"
expect_status 0 "the list with a stale segment" "$top"
grep -Eq "^ *$pid2 .* stale" "$tmp/out" || fail "the list: $pid2 not stale"
grep -Eq "^ *$pid1 .*stale" "$tmp/out" && fail "the list: $pid1 marked stale"

# --clean runs on copies, so that it judges only files this test made (other
# tests may run at the same time and have their own segments): the live
# one, the killed one's, a copy of the live one under a live process's name
# (it names another process: stale), a link named after a dead process
# (never followed nor removed), and names that are not segments.
# A copy taken while the publisher writes has seq odd forever: copies are
# made of one that reads whole.
mkdir "$tmp/snap"
for ((i = 0; i < 100; i++)); do
    cp "$segment1" "$tmp/snap/regionalloc.$pid1"
    "$top" --once --dir "$tmp/snap" "$pid1" >/dev/null 2>&1 && break
done
snap=$tmp/snap/regionalloc.$pid1
( : ) &
dead=$!
wait "$dead"
mkdir "$tmp/clean"
cp "$snap" "$tmp/clean/regionalloc.$pid1"
cp "/dev/shm/regionalloc.$pid2" "$tmp/clean/regionalloc.$pid2"
# A fallback name (when another user's file holds the usual one).
cp "/dev/shm/regionalloc.$pid2" "$tmp/clean/regionalloc.$pid2.Ab3xYz"
cp "$snap" "$tmp/clean/regionalloc.$$"
cp "$snap" "$tmp/target"
ln -s "$tmp/target" "$tmp/clean/regionalloc.$dead"
cp "$snap" "$tmp/clean/regionalloc.0$dead"
cp "$snap" "$tmp/clean/other.$dead"
cp "$snap" "$tmp/clean/regionalloc.$dead.new"
rm -f "/dev/shm/regionalloc.$pid2"
expect_status 0 "--clean" "$top" --clean --dir "$tmp/clean"
cat "$tmp/out"
grep -q "^removed $tmp/clean/regionalloc.$pid2 (process $pid2 is gone)$" \
    "$tmp/out" || fail "--clean: did not say it removed $pid2's segment"
grep -q "^removed $tmp/clean/regionalloc.$$ (it names pid $pid1)$" \
    "$tmp/out" || fail "--clean: did not remove the segment naming another pid"
grep -q "^removed $tmp/clean/regionalloc.$pid2.Ab3xYz (process $pid2 is gone)$" \
    "$tmp/out" || fail "--clean: did not say it removed $pid2's fallback"
[ -e "$tmp/clean/regionalloc.$pid2" ] && fail "--clean: $pid2's segment left"
[ -e "$tmp/clean/regionalloc.$pid2.Ab3xYz" ] && fail "--clean: $pid2's fallback left"
[ -e "$tmp/clean/regionalloc.$$" ] && fail "--clean: mislabelled segment left"
[ -f "$tmp/clean/regionalloc.$pid1" ] || fail "--clean: removed a live segment"
[ -L "$tmp/clean/regionalloc.$dead" ] || fail "--clean: removed a link"
[ -f "$tmp/target" ] || fail "--clean: removed a link's target"
for f in "regionalloc.0$dead" "other.$dead" "regionalloc.$dead.new"; do
    [ -f "$tmp/clean/$f" ] || fail "--clean: removed $f, not a segment"
done
[ -f "$segment1" ] || fail "--clean --dir: touched /dev/shm"

# -- the live view ------------------------------------------------------------------
# Not a terminal: no keys, the view ends on a signal or the process's exit.
# Each signal waits for the first frame, drawn once the view is set up.
"$top" --interval 0.2 "$pid1" </dev/null >"$tmp/live1" 2>&1 &
viewer=$!
shows "$tmp/live1" '^cache +8\.0 MiB ' || fail "live view: no cache row"
# One line of the process's parts, as the library's text report has it;
# the kernel's other figures are --once's.
grep -Eq '^process: rss_anon [0-9.]+ [KMG]?i?B = tags [0-9.]+ [KMG]?i?B \+ untagged [0-9.]+ [KMG]?i?B \+ metadata [0-9.]+ [KMG]?i?B \+ library [0-9.]+ [KMG]?i?B \+ other [0-9.]+ [KMG]?i?B' "$tmp/live1" ||
    fail "live view: no process: line of the parts"
grep -q '^ *rss_file ' "$tmp/live1" && fail "live view: the parts' second line"
kill -TERM "$viewer"
waits_for "$viewer"
rc=$?
[ "$rc" = 0 ] || fail "live view: exit $rc on SIGTERM, expected 0"
grep -q $'\033\\[H\033\\[2J' "$tmp/live1" || fail "live view: no screen refresh"

# On a terminal of 8 rows the table has room for 2: cache, and one line
# for the other two tags with their figures summed (1 MiB + 128 KiB), as
# the library's text report rolls up the tags it does not list.
/usr/bin/python3 - "$top" "$pid1" >"$tmp/small" 2>&1 <<'EOF' || fail "live view on 8 rows: $(cat "$tmp/small")"
import fcntl, os, pty, re, select, signal, struct, sys, termios, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "--interval", "0.2", sys.argv[2]])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 8, 120, 0, 0))
out, deadline = b"", time.time() + 60
rest = re.compile(rb"\n\(2 more tags\) +1\.1 MiB +[^ ]+ [KMG]?i?B +[^ ]+ [KMG]?i?B +[^ ]+ [KMG]?i?B +- +- +-\r?\n")
while time.time() < deadline and not rest.search(out):
    if select.select([fd], [], [], 1)[0]:
        try:
            out += os.read(fd, 65536)
        except OSError:
            break
os.kill(pid, signal.SIGTERM)
os.waitpid(pid, 0)
frame = out.split(b"\033[H\033[2J")[-1].decode(errors="replace")
if not rest.search(out) or not re.search(r"\ncache +8\.0 MiB ", frame) or "sessions" in frame:
    print("no frame of cache and '(2 more tags)' summed:\n" + frame)
    sys.exit(1)
EOF

"$top" --interval 0.2 "$pid1" </dev/null >"$tmp/live2" 2>&1 &
viewer=$!
shows "$tmp/live2" '^cache ' || fail "live view: no first frame"
kill -TERM "$pid1"
waits_for "$pid1"
rc=$?
forget "$pid1"
[ "$rc" = 0 ] || fail "the publisher: exit $rc on SIGTERM"
waits_for "$viewer"
rc=$?
[ "$rc" = 0 ] || fail "live view: exit $rc when the process exited, expected 0"
grep -q "^process $pid1 has exited" "$tmp/live2" ||
    fail "live view: did not say the process exited: $(tail -1 "$tmp/live2")"
[ -e "$segment1" ] && fail "the segment outlived its process's exit"

# -- no segment ---------------------------------------------------------------------
expect_status 1 "a pid that does not publish" "$top" --once "$pid1"
grep -q "^regionalloc-top: $segment1: no such segment" "$tmp/err" ||
    fail "no segment: unclear message: $(cat "$tmp/err")"
expect_status 1 "--json of a pid that does not publish" "$top" --json "$pid1"
mkdir "$tmp/empty"
expect_status 0 "the list of an empty directory" "$top" --dir "$tmp/empty"
grep -q "^no process publishes" "$tmp/out" || fail "empty list: no message"
expect_status 1 "a directory that does not exist" "$top" --dir "$tmp/none"

# -- crafted segments ------------------------------------------------------------
# Each case is a directory holding one file, regionalloc.<this shell's pid>
# (a live process, so the list reports the file instead of calling it
# stale).
need python3 python3 || finish
python3 - "$tmp/crafted" "$$" <<'EOF' || { fail "cannot craft the segments"; finish; }
import os, random, struct, sys
root, pid = sys.argv[1], int(sys.argv[2])
HEADER = "=8sIIIIQiIQQQQ16Q16QQ64s48x14QIIQ64x"
RECORD = "=II64s16QII8xQQQ16x"
assert struct.calcsize(HEADER) == 640 and struct.calcsize(RECORD) == 256
# Version 2's, whose header a reader of version 3 must refuse clearly.
HEADER_2 = "=8sIIIIQiIQQQQ16Q16QQ64s112x"
RECORD_2 = "=II64s16QII48x"
def figures(allocated):
    return [allocated] + [0] * 15
# rss_anon, rss_file, page_tables, tags, untagged, metadata, library,
# other, over, at_ns, cgroup current, anon, file, limit; flags.
NO_PARTS = [0] * 14 + [0]
def header(capacity=4, nrecords=2, magic=b"RAllocS\0", version=3,
           header_size=640, record_size=256, seq=10, hpid=pid,
           http=b"127.0.0.1:4242", parts=NO_PARTS, time_ns=0):
    return struct.pack(HEADER, magic, version, header_size, record_size,
                       capacity, seq, hpid, nrecords, 100000000, 5, 1, 1,
                       *figures(1000), *figures(5000), 100, http,
                       *parts, 0, time_ns)
def record(i, name, live=True, allocated=4096, rid=None, parent=0, depth=None,
           metadata=0, rss_at_ns=0):
    return struct.pack(RECORD, i + 1 if rid is None else rid,
                       1 if live else 0, name, *figures(allocated), parent,
                       (1 if live else 0) if depth is None else depth,
                       metadata, rss_at_ns, 5)
def segment(names=(b"alpha", b"beta"), capacity=4, records=None, **kw):
    recs = records if records is not None else [
        record(i, n) for i, n in enumerate(names)]
    recs = recs + [record(i, b"", live=False, allocated=0)
                   for i in range(len(recs), capacity)]
    return header(capacity=capacity, nrecords=len(names), **kw) + b"".join(recs)
def segment_2():
    head = struct.pack(HEADER_2, b"RAllocS\0", 2, 512, 256, 4, 10, pid, 1,
                       100000000, 5, 1, 1, *figures(1000), *figures(5000),
                       100, b"")
    return head + struct.pack(RECORD_2, 1, 1, b"old", *figures(4096), 0, 1) \
        + bytes(3 * 256)
MIB, KIB = 1 << 20, 1 << 10
# Named parts over RssAnon by 768 KiB, in a cgroup without a limit.
PARTS = [8 * MIB, 3 * MIB, 128 * KIB, 6 * MIB, 2 * MIB, 512 * KIB,
         256 * KIB, 0, 768 * KIB, 1000, 20 * MIB, 12 * MIB, 8 * MIB, 0, 3]
random.seed(42)
odd_names = [bytes(random.choice(range(1, 256)) for _ in range(63))
             for _ in range(4)] + [b"\x01\x1f\x7f\x80\xc0\xed\xa0\x80\xf4\x90"]
cases = {
    "good": segment(),
    "good-names": segment(names=odd_names, capacity=8),
    "empty": b"",
    "short": bytes(100),
    "header-only-short": segment()[:639],
    "bad-magic": segment(magic=b"NOTRALLC"),
    "bad-version": segment(version=1),
    "version-2": segment_2(),
    "parts": segment(parts=PARTS, time_ns=1000 + 3 * 10**9, records=[
        record(0, b"alpha", metadata=8192, rss_at_ns=500),
        record(1, b"beta", rss_at_ns=0)]),
    "http-without-nul": segment(http=b"x" * 64),
    "tree": segment(names=(b"tenant", b"query", b"other"), records=[
        record(0, b"tenant", allocated=1 << 20),
        record(1, b"query", allocated=3 << 20, parent=1, depth=2),
        record(2, b"other", allocated=4096)]),
    "bad-parent": segment(records=[record(0, b"a"),
                                   record(1, b"b", parent=7, depth=2)]),
    "parent-cycle": segment(records=[record(0, b"a", parent=2, depth=2),
                                     record(1, b"b", parent=1, depth=2)]),
    "bad-header-size": segment(header_size=256),
    "bad-record-size": segment(record_size=128),
    "capacity-past-end": segment()[:640 + 3 * 256],
    "capacity-huge": header(capacity=0xffffffff, nrecords=0),
    "nrecords-past-capacity": header(capacity=2, nrecords=3) + record(0, b"a")
        + record(1, b"b"),
    "name-without-nul": segment(records=[record(0, b"x" * 64), record(1, b"b")]),
    "wrong-id": segment(records=[record(0, b"a"), record(1, b"b", rid=7)]),
    "random": bytes(random.getrandbits(8) for _ in range(640 + 4 * 256)),
    "odd-seq": segment(seq=7),
    "other-pid": segment(hpid=1),
}
for name, data in cases.items():
    os.makedirs(os.path.join(root, name))
    with open(os.path.join(root, name, "regionalloc.%d" % pid), "wb") as f:
        f.write(data)
EOF
crafted=$tmp/crafted
mkdir "$crafted/directory" "$crafted/directory/regionalloc.$$"
mkdir "$crafted/fifo" && mkfifo "$crafted/fifo/regionalloc.$$"
mkdir "$crafted/symlink" &&
    ln -s "$crafted/good/regionalloc.$$" "$crafted/symlink/regionalloc.$$"

# Valid crafted segments: whatever the name bytes, JSON that parses.
expect_status 0 "a valid crafted segment" timeout 60 "$top" --once --dir "$crafted/good" "$$"
grep -Eq '^alpha +4\.0 KiB ' "$tmp/out" || fail "crafted: no alpha row"
# A region the kernel has not counted yet (rss_at_ns 0) shows "-" as RSS,
# as in the library's text report; a counted one its bytes, 0 B included.
expect_status 0 "kernel counts" timeout 60 "$top" --once --dir "$crafted/parts" "$$"
grep -Eq '^alpha +4\.0 KiB +0 B ' "$tmp/out" && grep -Eq '^beta +4\.0 KiB +- ' "$tmp/out" ||
    fail "kernel counts: $(grep -E '^(alpha|beta) ' "$tmp/out")"
# --tree: the child under its parent, the parent with its subtree's figures.
expect_status 0 "a tree" timeout 60 "$top" --once --tree --dir "$crafted/tree" "$$"
grep -Eq '^tenant +4\.0 MiB ' "$tmp/out" || fail "--tree: tenant's row is not its subtree's 4 MiB: $(cat "$tmp/out")"
grep -Eq '^  query +3\.0 MiB ' "$tmp/out" || fail "--tree: query not indented under tenant: $(cat "$tmp/out")"
[ "$(grep -n '^tenant' "$tmp/out" | cut -d: -f1)" -lt "$(grep -n '^  query' "$tmp/out" | cut -d: -f1)" ] ||
    fail "--tree: query before its parent"
expect_status 0 "a tree, JSON" timeout 60 "$top" --json --dir "$crafted/tree" "$$"
python3 -c '
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
by = {t["name"]: t for t in doc["tags"]}
assert by["query"]["parent"] == by["tenant"]["id"] and by["tenant"]["parent"] is None, doc
assert doc["http"] == "127.0.0.1:4242", doc["http"]
' "$tmp/out" || fail "--json: parents wrong"
expect_status 0 "names of any bytes" timeout 60 "$top" --json --dir "$crafted/good-names" "$$"
python3 -c '
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
assert len(doc["tags"]) == 5, doc["tags"]
' "$tmp/out" || fail "names of any bytes: not valid JSON"
expect_status 0 "names of any bytes, as a table" timeout 60 "$top" --once --dir "$crafted/good-names" "$$"
LC_ALL=C grep -q '[^ -~]' "$tmp/out" && fail "a table shows a byte outside printable ASCII"

# The process's parts of a crafted segment, exactly as the library's own
# reports write them: the text's two lines, JSON's keys, Prometheus'
# families (regionalloc report reads the segment itself for those).
expect_status 0 "parts, as a table" timeout 60 "$top" --once --dir "$crafted/parts" "$$"
grep -qxF 'process: rss_anon 8.0 MiB = tags 6.0 MiB + untagged 2.0 MiB + metadata 512.0 KiB + library 256.0 KiB + other 0 B (the named parts exceed it by 768.0 KiB)' "$tmp/out" ||
    fail "parts: no process: line: $(grep -A1 '^process:' "$tmp/out")"
grep -qxF '         rss_file 3.0 MiB, page tables 128.0 KiB, cgroup 20.0 MiB (anon 12.0 MiB, file 8.0 MiB) of no limit' "$tmp/out" ||
    fail "parts: no second process: line: $(grep -A1 '^process:' "$tmp/out")"
expect_status 0 "parts, JSON" timeout 60 "$top" --json --dir "$crafted/parts" "$$"
python3 -c '
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
p, M, K = doc["process"], 1 << 20, 1 << 10
assert doc["time_ns"] == 3000001000, doc["time_ns"]
assert p["rss_anon"] == 8 * M and p["rss_file"] == 3 * M and p["page_tables"] == 128 * K, p
assert p["parts"] == {"tags": 6 * M, "untagged": 2 * M, "metadata": 512 * K,
                      "library": 256 * K, "other": 0}, p["parts"]
assert list(p["parts"]) == ["tags", "untagged", "metadata", "library", "other"]
assert p["parts_over"] == 768 * K and p["parts_at_ns"] == 1000, p
assert p["jemalloc_measured"] is True, p
assert p["cgroup"] == {"current": 20 * M, "anon": 12 * M, "file": 8 * M, "limit": 0}, p
by = {t["name"]: t for t in doc["tags"]}
assert by["alpha"]["metadata"] == 8192 and by["alpha"]["rss_at_ns"] == 500, by
assert by["beta"]["rss_at_ns"] == 0, by
' "$tmp/out" || fail "parts, JSON: $(cat "$tmp/out")"
expect_status 0 "parts, Prometheus" timeout 60 "$builddir/tools/regionalloc" \
    report "$$" --dir "$crafted/parts" --format prometheus
for line in 'regionalloc_process_resident_bytes{part="tags"} 6291456' \
    'regionalloc_process_resident_bytes{part="untagged"} 2097152' \
    'regionalloc_process_resident_bytes{part="metadata"} 524288' \
    'regionalloc_process_resident_bytes{part="library"} 262144' \
    'regionalloc_process_resident_bytes{part="other"} 0' \
    'regionalloc_process_rss_anon_bytes 8388608' \
    'regionalloc_process_rss_file_bytes 3145728' \
    'regionalloc_process_page_tables_bytes 131072' \
    'regionalloc_process_parts_over_bytes 786432' \
    'regionalloc_cgroup_current_bytes 20971520' \
    'regionalloc_cgroup_anon_bytes 12582912' \
    'regionalloc_cgroup_file_bytes 8388608' \
    'regionalloc_cgroup_limit_bytes 0' \
    'regionalloc_tag_metadata_bytes{tag="alpha"} 8192' \
    'regionalloc_tag_rss_unmeasured 1' \
    'regionalloc_tag_rss_oldest_age_seconds 3.000000500'; do
    grep -qxF "$line" "$tmp/out" || fail "parts, Prometheus: no '$line'"
done
# Without a cgroup, no cgroup family, as in the process's /metrics.
expect_status 0 "no cgroup, Prometheus" timeout 60 "$builddir/tools/regionalloc" \
    report "$$" --dir "$crafted/good" --format prometheus
grep -q '^regionalloc_cgroup_' "$tmp/out" && fail "no cgroup: a cgroup family"
grep -qxF 'regionalloc_process_resident_bytes{part="tags"} 0' "$tmp/out" ||
    fail "no cgroup: no parts family"

# check_rejected CASE WHY: the segment in CASE is rejected by one table, by
# JSON and by the list, each time with exit status 1 (not a signal's
# 128+n, nor the 124 of a hang) and one line naming the file and WHY.
check_rejected() {
    local dir=$crafted/$1 mode
    for mode in --once --json list; do
        if [ "$mode" = list ]; then
            timeout 60 "$top" --dir "$dir" >"$tmp/out" 2>"$tmp/err"
        else
            timeout 60 "$top" "$mode" --dir "$dir" "$$" >"$tmp/out" 2>"$tmp/err"
        fi
        rc=$?
        [ "$rc" = 1 ] || { fail "$1 ($mode): exit $rc, expected 1"; continue; }
        [ "$(wc -l <"$tmp/err")" = 1 ] ||
            fail "$1 ($mode): not one line on stderr: $(cat "$tmp/err")"
        grep -q "^regionalloc-top: $dir/regionalloc.$$: .*$2" "$tmp/err" ||
            fail "$1 ($mode): message '$(cat "$tmp/err")' does not say '$2'"
    done
}
check_rejected empty "empty file"
check_rejected short "too short"
check_rejected header-only-short "too short"
check_rejected bad-magic "bad magic"
check_rejected http-without-nul "http address without a NUL"
check_rejected bad-parent "record 1: parent 7 past nrecords"
check_rejected parent-cycle "is not a live tag one level up"
check_rejected bad-header-size "header_size 256"
check_rejected bad-record-size "record_size 128"
check_rejected capacity-past-end "capacity 4 needs 1664 bytes, the file has 1408"
check_rejected capacity-huge "capacity 4294967295 needs"
check_rejected nrecords-past-capacity "nrecords 3 exceeds capacity 2"
check_rejected name-without-nul "record 0: name without a NUL"
check_rejected wrong-id "record 1 has id 7, expected 2"
check_rejected random "bad magic"
check_rejected odd-seq "no consistent copy"
check_rejected directory "not a regular file"
check_rejected fifo "not a regular file"
check_rejected symlink "symbolic link, not followed"
# A segment of another version (a process of an older or a newer library)
# is refused with one line, and listed with why it is not read: the list
# of the others still succeeds.
for case in bad-version:1 version-2:2; do
    dir=$crafted/${case%:*} version=${case#*:}
    for mode in --once --json; do
        expect_status 1 "${case%:*} ($mode)" timeout 60 "$top" "$mode" --dir "$dir" "$$"
        [ "$(wc -l <"$tmp/err")" = 1 ] &&
            grep -q "^regionalloc-top: $dir/regionalloc.$$: version $version, this reader knows 3$" "$tmp/err" ||
            fail "${case%:*} ($mode): $(cat "$tmp/err")"
    done
    expect_status 0 "${case%:*} (list)" timeout 60 "$top" --dir "$dir"
    grep -Eq "^ *$$ .*\(version $version, this reader knows 3\)$" "$tmp/out" ||
        fail "${case%:*} (list): no row saying the version: $(cat "$tmp/out")"
done
expect_status 1 "a segment naming another pid" "$top" --once --dir "$crafted/other-pid" "$$"
grep -q "names pid 1, not $$" "$tmp/err" || fail "other pid: $(cat "$tmp/err")"
expect_status 0 "the list with a segment naming another pid" "$top" --dir "$crafted/other-pid"
grep -Eq "^ *$$ .* stale$" "$tmp/out" || fail "the list: a segment naming another pid is not stale"

# -- options --------------------------------------------------------------------
for bad in "--sort size 1" "--interval 0 1" "--interval x 1" "--interval" \
    "--frobnicate" "1 2" "abc" "0" "-5" "--json" "--clean 1" \
    "99999999999"; do
    # shellcheck disable=SC2086 # word splitting wanted
    "$top" $bad >/dev/null 2>"$tmp/err"
    rc=$?
    [ "$rc" = 2 ] || fail "'$bad': exit $rc, expected 2"
    grep -q "^usage: regionalloc-top" "$tmp/err" || fail "'$bad': no usage on stderr"
done
expect_status 0 "--help" "$top" --help
grep -q -- "--interval" "$tmp/out" || fail "--help does not describe --interval"

finish

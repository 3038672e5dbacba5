#!/bin/bash
# The process's parts held against the kernel in real programs, each run
# under the built `regionalloc run` and holding its memory until its
# standard input ends, then read from its JSON report at exit (a detail
# report: every part counted then, at rest), and once from a live report
# over HTTP (what the library's thread counted, after one sweep at rest):
#   - python3 building ~100 MB of small objects, in the main thread and in
#     8 threads it names, with pymalloc (PYTHONMALLOC=pymalloc, which run
#     keeps) and with PYTHONMALLOC=malloc (what run gives python3 else);
#   - tests/parts_threads.c: 64 named threads, 1 MiB each, a tag each, at
#     exit and live;
#   - sqlite3 filling a table in memory;
#   - redis-server with 50,000 keys set by redis-cli.
# For each: the five parts (tags, untagged, metadata, library, other) less
# parts_over are the report's rss_anon, which is the kernel's RssAnon of the
# program read just before it was let go (within 1 MiB + 2%, what exiting
# touches); parts_over, the process's resident total and every row's
# resident and rss are within RssAnon + 1 MiB + 2%; page_tables is
# reported. Where everything goes through malloc, other (what no part
# names) is within 4 MiB + 2% of RssAnon plus the threads' stacks (the
# threads counted from /proc/PID/status, each as large as the main
# thread's resident stack); with pymalloc, whose arenas Python maps itself,
# other is most of RssAnon: the arenas are the process's other memory, no
# part of the allocator's. Each case prints its figures as a line
# "# NAME: rss_anon=... tags=... untagged=... metadata=... library=...
# other=... over=... resident=... (+N% of rss_anon)", kept in the log.
# A program not installed is a skip (in CI a failure: scripts/deps.sh
# installs it). Exit status: 0 pass, 1 fail, 77 skip.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
srcdir=${abs_top_srcdir:-${top_srcdir:-}}
case $srcdir in
/*) ;;
"") srcdir=$builddir ;;
*) srcdir=$(pwd)/$srcdir ;;
esac
ra=$builddir/tools/regionalloc
need_built "$ra"
[ -e "$builddir/.libs/libregionalloc.so" ] || skip "shared library not built"
[ "${RA_OVERRIDE:-1}" = 1 ] || skip "built with --disable-override: nothing to preload, and jemalloc's mappings are not seen"
[ -r /proc/self/pagemap ] || skip "no /proc/self/pagemap: the parts are not counted"
need /usr/bin/python3 python3 || exit 77
make_tmp test_parts_run
reset_env
unset LD_PRELOAD REGIONALLOC_THREAD_TAGS REGIONALLOC_HTTP REGIONALLOC_SHM \
    PYTHONMALLOC MALLOC_CONF
export LC_ALL=C
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT

# -- running a program held --------------------------------------------------------
# hold NAME CMD...: runs CMD under regionalloc run, its report at exit in
# $tmp/NAME.json, its output in $tmp/NAME.out; its standard input a pipe
# the test holds (fd 3) until let_go closes it. run's options: run_opts.
run_opts=()
hold() {
    local name=$1
    shift
    rm -f "$tmp/stdin"
    mkfifo "$tmp/stdin" || exit 1
    exec 3<>"$tmp/stdin"
    "$ra" run "${run_opts[@]}" --report="$tmp/$name.json" --format json -- "$@" \
        <"$tmp/stdin" >"$tmp/$name.out" 2>"$tmp/$name.err" 3>&- &
    pid=$!
}

# ready NAME: waits for the program's "ready" line; false (failed) if it
# ended first or took a minute.
ready() {
    local i
    for ((i = 0; i < 600; i++)); do
        grep -qsx ready "$tmp/$1.out" && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    fail "$1: never ready: $(tail -3 "$tmp/$1.err")"
    exec 3>&-
    end_processes "$pid"
    pid=
    return 1
}

# kernel PID: the kernel's RssAnon of PID and its threads' stacks, in
# bytes ("RSS_ANON STACKS"): Threads times the main thread's resident
# stack (a thread's stack is not told from other mappings in smaps).
kernel() {
    local anon threads stack
    anon=$(awk '/^RssAnon:/ { print $2 * 1024 }' "/proc/$1/status")
    threads=$(awk '/^Threads:/ { print $2 }' "/proc/$1/status")
    stack=$(awk '/\[stack\]$/ { s = 1; next } s && /^Rss:/ { print $2 * 1024; exit }' "/proc/$1/smaps")
    echo "$anon $((threads * ${stack:-0}))"
}

# let_go: ends the program's standard input, and waits for it to exit.
let_go() {
    exec 3>&-
    wait "$pid"
    pid=
}

cat >"$tmp/check.py" <<'PY'
"""check.py REPORT NAME RSS_ANON STACKS OTHER [PREFIX COUNT]: the parts of
REPORT's process (the test's header says what is held); OTHER "small": what
no part names is within 4 MiB + 2% of RssAnon plus STACKS, "most": it is
over half of RssAnon; PREFIX COUNT: COUNT tags named PREFIX... Prints the
figures, then each failed check; exits 1 if one failed."""
import json, sys

MIB = 1 << 20
report, name, kernel, stacks, other = sys.argv[1:6]
kernel, stacks = int(kernel), int(stacks)
d = json.load(open(report))
p = d["process"]
parts = p["parts"]
anon, over = p["rss_anon"], p["parts_over"]
slack = MIB + anon // 50
named = sum(parts[k] for k in ("tags", "untagged", "metadata", "library"))
print("# %s: rss_anon=%d tags=%d untagged=%d metadata=%d library=%d other=%d"
      " over=%d resident=%d (%+.1f%% of rss_anon)"
      % (name, anon, parts["tags"], parts["untagged"], parts["metadata"],
         parts["library"], parts["other"], over, p["resident"],
         100.0 * (p["resident"] - anon) / anon if anon else 0))
bad = []
if abs(anon - kernel) > slack:
    bad.append("rss_anon %d, the kernel's RssAnon %d" % (anon, kernel))
if named + parts["other"] - over != anon:
    bad.append("the parts %d + other %d - over %d are not rss_anon %d"
               % (named, parts["other"], over, anon))
if over > slack:
    bad.append("the named parts exceed rss_anon by %d" % over)
if p["page_tables"] <= 0:
    bad.append("no page_tables")
rows = [("process resident", p["resident"]),
        ("untagged resident", d["untagged"]["resident"])]
for t in d["tags"]:
    rows += [("tag %s resident" % t["name"], t["resident"]),
             ("tag %s rss" % t["name"], t["rss"])]
bad += ["%s %d above rss_anon %d + 1 MiB + 2%%" % (what, n, anon)
        for what, n in rows if n > anon + slack]
if other == "small" and parts["other"] > 4 * MIB + anon // 50 + stacks:
    bad.append("other %d above 4 MiB + 2%% of rss_anon + stacks %d"
               % (parts["other"], stacks))
if other == "most" and parts["other"] <= anon // 2:
    bad.append("other %d not most of rss_anon" % parts["other"])
if len(sys.argv) > 6:
    prefix, count = sys.argv[6], int(sys.argv[7])
    have = sum(t["name"].startswith(prefix) for t in d["tags"])
    if have != count:
        bad.append("%d tags named %s..., want %d" % (have, prefix, count))
for b in bad:
    print("%s: %s" % (name, b))
sys.exit(1 if bad else 0)
PY

# judge NAME RSS_ANON STACKS OTHER [PREFIX COUNT]: checks the report at
# exit of the program NAME (check.py), RSS_ANON and STACKS what the kernel
# counted of it just before it was let go (kernel).
judge() {
    local name=$1 anon=$2 stacks=$3 other=$4
    shift 4
    if [ ! -s "$tmp/$name.json" ]; then
        fail "$name: no report at exit: $(tail -3 "$tmp/$name.err")"
    elif /usr/bin/python3 "$tmp/check.py" "$tmp/$name.json" "$name" "$anon" "$stacks" "$other" "$@" >"$tmp/check.out" 2>&1; then
        cat "$tmp/check.out"
        echo "ok: $name: the parts add up to RssAnon, every resident within it, other $other"
    else
        cat "$tmp/check.out"
        fail "$name: the parts do not hold (above)"
    fi
}

# parts NAME OTHER [PREFIX COUNT]: lets the held program go and judges
# its report.
parts() {
    local name=$1 anon stacks
    shift
    read -r anon stacks < <(kernel "$pid")
    let_go
    judge "$name" "$anon" "$stacks" "$@"
}

# -- python3: pymalloc and malloc, in the main thread and in named threads ---------
# ~100 MB of small objects (lists of ints, strings and tuples), built in
# the main thread or in THREADS threads it names (threading's names are not
# the kernel's: prctl), which then wait; held past the interpreter's
# finalization (one reference more), so that the report at exit sees them.
cat >"$tmp/objects.py" <<'PY'
import ctypes, sys, threading
threads = int(sys.argv[1])
libc = ctypes.CDLL(None)
held, built = [], threading.Barrier(threads + 1)
def build(n, name=None):
    if name:
        libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME
    held.append([[i, str(i) * 3, (i, -i)] for i in range(n)])
    if name:
        built.wait()
        threading.Event().wait()
total = 300000
if threads:
    for k in range(threads):
        threading.Thread(target=build, args=(total // threads, "py-%02d" % k),
                         daemon=True).start()
    built.wait()
else:
    build(total)
ctypes.pythonapi.Py_IncRef(ctypes.py_object(held))
print("ready", flush=True)
sys.stdin.read()
PY
for alloc in pymalloc malloc; do
    for threads in 0 8; do
        name=python3-$alloc
        [ $threads = 0 ] || name=$name-${threads}threads
        other=small
        [ $alloc = pymalloc ] && other=most
        hold "$name" env PYTHONMALLOC=$alloc /usr/bin/python3 "$tmp/objects.py" $threads
        ready "$name" || continue
        if [ $threads = 0 ]; then
            parts "$name" $other
        else
            parts "$name" $other py- $threads
        fi
    done
done

# -- 64 named threads --------------------------------------------------------------
if ${CC:-cc} -O1 -o "$tmp/parts_threads" "$srcdir/tests/parts_threads.c" -lpthread 2>"$tmp/cc.err"; then
    hold threads-64 "$tmp/parts_threads"
    ready threads-64 && parts threads-64 small worker 64
else
    fail "cannot build tests/parts_threads.c: $(cat "$tmp/cc.err")"
fi

# -- live: the library's thread's counts --------------------------------------------
# The same program, its report asked over HTTP (no detail: nothing counted
# on the report's time) once the library's thread has counted every tag
# and the parts since the program held its blocks (rss_at_ns, parts_at_ns
# past a first report's time_ns): at rest after one sweep, the parts add
# up as in the report at exit.
if [ "${RA_HTTP:-1}" != 1 ]; then
    not_built "HTTP (--without-http): the live report"
elif need curl curl && [ -x "$tmp/parts_threads" ]; then
    run_opts=(--http)
    hold threads-64-http "$tmp/parts_threads"
    run_opts=()
    if ready threads-64-http; then
        url=$(sed -n 's|^regionalloc: serving \(http://[^ ]*/debug/regionalloc/\) (pid [0-9]*)$|\1|p' "$tmp/threads-64-http.err")
        live=$tmp/threads-64-live.json
        since=
        for ((i = 0; i < 600; i++)); do
            curl -s "${url}report?format=json" >"$live"
            [ -n "$since" ] || since=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["time_ns"])' "$live" 2>/dev/null)
            [ -n "$since" ] && /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
since = int(sys.argv[2])
counted = [d["process"]["parts_at_ns"]] + [t["rss_at_ns"] for t in d["tags"]]
sys.exit(0 if min(counted) > since else 1)' "$live" "$since" 2>/dev/null && break
            sleep 0.1
        done
        read -r anon stacks < <(kernel "$pid")
        let_go
        if [ "$i" = 600 ]; then
            fail "threads-64-live: the tags and parts not all counted after a minute: $(head -c 300 "$live")"
        else
            echo "# threads-64-live: every tag and part counted after $i reports"
            judge threads-64-live "$anon" "$stacks" small worker 64
        fi
    fi
fi

# -- sqlite3 -----------------------------------------------------------------------
# 200,000 rows of 100 bytes in a database in memory; its page cache grows
# to hold them.
if need sqlite3 sqlite3; then
    hold sqlite3 sqlite3 :memory:
    cat >&3 <<'SQL'
PRAGMA cache_size = -400000;
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
INSERT INTO t SELECT x, printf('%0100d', x) FROM c;
SELECT 'ready';
SQL
    ready sqlite3 && parts sqlite3 small
fi

# -- redis-server ------------------------------------------------------------------
# On a socket of its own; 50,000 keys set through redis-cli's pipe mode,
# then SHUTDOWN NOSAVE (redis exits through exit(), with its keys).
if need redis-server redis-server && need redis-cli redis-tools; then
    sock=$tmp/redis.sock
    "$ra" run --report="$tmp/redis-server.json" --format json -- redis-server --port 0 \
        --unixsocket "$sock" --save '' --appendonly no --daemonize no \
        >"$tmp/redis-server.out" 2>"$tmp/redis-server.err" </dev/null &
    pid=$!
    for ((i = 0; i < 600; i++)); do
        [ "$(redis-cli -s "$sock" ping 2>/dev/null)" = PONG ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ "$(redis-cli -s "$sock" ping 2>/dev/null)" != PONG ]; then
        fail "redis-server: never answered: $(tail -3 "$tmp/redis-server.out")"
        end_processes "$pid"
    else
        for ((i = 1; i <= 50000; i++)); do
            echo "SET key:$i value-$i-of-the-test"
        done | redis-cli -s "$sock" --pipe >"$tmp/pipe.out" 2>&1
        keys=$(redis-cli -s "$sock" dbsize)
        [ "$keys" = 50000 ] || fail "redis-server: $keys keys, want 50000: $(tail -2 "$tmp/pipe.out")"
        read -r anon stacks < <(kernel "$pid")
        redis-cli -s "$sock" shutdown nosave >/dev/null 2>&1
        wait "$pid"
        judge redis-server "$anon" "$stacks" small
    fi
    pid=
fi

finish

#!/bin/bash
# Runs every benchmark in bench/ and prints one table, the targets (of the
# allocation paths, and of the hooks and profiler) judged from the numbers it
# just measured, and the machine it ran on.
#
#   bench/run.sh [--quick] [--raw FILE] BENCH_BINARY_DIR
#
# `make bench` calls it with the build tree's bench/ directory
# (`make bench BENCH_ARGS=--quick` for a smoke run). --quick does a twentieth
# of the work in one process with 3 rounds: it checks that everything runs,
# its numbers are only indicative. --raw FILE also writes the aggregated rows
# as tab-separated text.
#
# Environment: BENCH_PROCS processes per timing program (default 5),
# BENCH_ROUNDS timed rounds per process (default 5), BENCH_SCALE work
# multiplier (default 1), BENCH_TIMEOUT seconds before a program is killed
# (default 300), RA_SKIP_DEPS=1 to never apt-get the optional bench packages
# (libmimalloc-dev, heaptrack; see scripts/deps.sh).
#
# Every timing program runs BENCH_PROCS times: a process's cost depends on
# its address layout (glibc's ring varies from 17 to 29 ns per op between
# runs with ASLR, and is steady without), so one process is one sample. A
# row's median is the median of the per-process medians; its ratio is the
# median of the per-process ratios to jemalloc measured in the same process
# (alternating rounds), or, for rows from a process without a jemalloc
# baseline (glibc, memory), the median over the jemalloc row's median of the
# same workload. The range is the lowest and highest single round seen.
set -u

usage() {
    echo "usage: $0 [--quick] [--raw FILE] BENCH_BINARY_DIR" >&2
    exit 2
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
quick=0
raw_out=
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1; shift ;;
        --raw) [ $# -ge 2 ] || usage; raw_out=$2; shift 2 ;;
        -*) usage ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] || usage
bindir=$(cd "$1" 2>/dev/null && pwd) || { echo "bench: no directory $1" >&2; exit 2; }
command_line="bench/run.sh $( [ $quick = 1 ] && printf -- '--quick ')$1"
[ -n "${BENCH_VIA:-}" ] && command_line="$BENCH_VIA (runs $command_line)"

if [ $quick = 1 ]; then
    export BENCH_SCALE=${BENCH_SCALE:-0.05} BENCH_ROUNDS=${BENCH_ROUNDS:-3}
    procs=${BENCH_PROCS:-1}
else
    export BENCH_ROUNDS=${BENCH_ROUNDS:-5}
    procs=${BENCH_PROCS:-5}
fi

# Optional packages: install when missing (unless RA_SKIP_DEPS=1); the
# contenders they provide are reported as not installed otherwise.
if [ -r "$here/../scripts/deps.sh" ]; then
    # shellcheck source=../scripts/deps.sh
    . "$here/../scripts/deps.sh"
    ra_install_bench_deps >&2 ||
        echo "bench: optional packages not installed; going on without them" >&2
fi

limit=${BENCH_TIMEOUT:-300}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ra-bench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
raw=$tmp/raw
: >"$raw"
start_s=$(date +%s)
load_at_start=$(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null)

note() {
    printf 'note\t%s\n' "$*" >>"$raw"
}

# run_cmd NAME COMMAND...: one process; its rows and notes go to $raw, its
# stderr to ours. A failure is noted under NAME and the run goes on.
run_cmd() {
    local name=$1 rc
    shift
    timeout "$limit" "$@" >"$tmp/out"
    rc=$?
    grep -E $'^(row|note)\t' "$tmp/out" >>"$raw"
    if [ $rc -eq 124 ]; then
        note "$name: killed after $limit s"
        return 1
    elif [ $rc -ne 0 ]; then
        note "$name: failed (exit status $rc)"
        return 1
    fi
}

# run_one PROGRAM ARGS...: run_cmd for a program of the bench directory.
run_one() {
    local prog=$1
    shift
    if [ ! -x "$bindir/$prog" ]; then
        note "$prog: not built"
        return 1
    fi
    run_cmd "$prog $*" "$bindir/$prog" "$@"
}

# timed PROGRAM: BENCH_PROCS processes.
timed() {
    local p
    for ((p = 1; p <= procs; p++)); do
        echo "bench: $1 (process $p of $procs)" >&2
        run_one "$@"
    done
}

# -- timing -------------------------------------------------------------------
for prog in ring ring_glibc threads threads_glibc realloc_growth \
            realloc_growth_glibc tag_switch tag_ops lifetime http_scrape; do
    timed "$prog"
done
# Reading the figures as tags grow (30, 300 and 3,000 tags of one block),
# and an idle process of 3,000 tags publishing the live segment.
for n in 30 300 3000; do
    timed reads "$n"
done
run_one reads --idle 3000
# The untagged row's read with 3,000 threads alive (it sums every thread's).
run_one reads --threads 3000
# The allocation bench again with the live stats segment published every
# second by a thread of the library: rows of their own (the suffix).
REGIONALLOC_SHM=1 BENCH_WORKLOAD_SUFFIX=", stats segment on" timed ring
# Tags by calling object: a pushed tag against nothing pushed, off and on.
timed by_library
REGIONALLOC_TAG_BY=library timed by_library
# Many tags: 256 cycled through by one thread, 300 by each of 16 threads.
REGIONALLOC_MAX_TAGS=512 timed tag_cycle
REGIONALLOC_MAX_TAGS=512 timed pairs
# A hot tag on 8 and 16 threads: its pool of arenas against one arena, then
# the same under jemalloc's own answer inside an arena, bin shards (which
# apply to every arena of the process), as rows of their own.
# Tag trees: a commit's cost by depth, a subtree budget raced at its limit.
timed tree
for t in 8 16; do
    timed hot_tag "$t"
    MALLOC_CONF=bin_shards:1-256:4 BENCH_WORKLOAD_SUFFIX=", bin_shards 4" \
        timed hot_tag "$t"
    timed hot_tag "$t" pairs
done
# A tag's life against mimalloc's heap and jemalloc's arena.<i>.reset: one
# contender per process, the processes alternating (the first contender
# moves along at each pass), so no contender's heap shares a process with
# another's. Ratios are of the medians over processes.
life=(reset reset+purge tags mimalloc)
for ((p = 1; p <= procs; p++)); do
    echo "bench: tag_life (pass $p of $procs)" >&2
    for ((k = 0; k < ${#life[@]}; k++)); do
        run_one tag_life "${life[(p + k) % ${#life[@]}]}"
    done
    # The same life beside 3,000 live tags nobody uses (tenants, long
    # queries): it should cost what it costs beside none.
    REGIONALLOC_MAX_TAGS=3100 run_one tag_life tags 3000
done

# -- memory: one contender per process, so each RSS delta is its own ------
echo "bench: memory" >&2
for c in jemalloc untagged tagged mimalloc tracker; do
    run_one blocks "$c"
done
run_one blocks_glibc glibc
for c in tagged mimalloc; do
    run_one empty_tags "$c"
done
for c in jemalloc untagged tagged; do
    run_one phases "$c"
done

# -- memory pressure: waves under a 200 MiB limit and without one, in turn ---
# (bench/waves.c). The run without a limit faults in 200 MiB of new pages a
# wave and keeps what it frees resident until jemalloc's decay: it is the
# longer one.
wave_procs=3
[ $quick = 1 ] && wave_procs=1
for ((p = 1; p <= wave_procs; p++)); do
    echo "bench: waves (process $p of $wave_procs)" >&2
    run_one waves limit
    run_one waves nolimit
done

# -- profiler: heaptrack on the same glibc binary, whole process --------------
# ring_glibc --profile NAME runs the 8-256 ring with glibc's malloc only,
# reported as NAME; the same command runs alone and under heaptrack, in turn.
profile_rounds=3
[ $quick = 1 ] && profile_rounds=2
if command -v heaptrack >/dev/null 2>&1 && [ -x "$bindir/ring_glibc" ]; then
    echo "bench: heaptrack" >&2
    wl="ring 8-256 B, whole process (profiler run)"
    wall_row() { # CONTENDER T0_NS T1_NS
        awk -v w="$wl" -v c="$1" -v a="$2" -v b="$3" \
            'BEGIN { s = (b - a) / 1e9; printf "row\t%s\t%s\t%.3f\ts\t-\t%.3f\t%.3f\n", w, c, s, s, s }' >>"$raw"
    }
    for ((p = 1; p <= 3; p++)); do
        t0=$(date +%s%N)
        BENCH_ROUNDS=$profile_rounds run_one ring_glibc --profile "glibc malloc, profiler baseline" &&
            wall_row "ring_glibc alone" "$t0" "$(date +%s%N)"
        t0=$(date +%s%N)
        BENCH_ROUNDS=$profile_rounds timeout "$limit" heaptrack -o "$tmp/heaptrack.$p" \
            "$bindir/ring_glibc" --profile "glibc malloc + heaptrack" \
            >"$tmp/ht.out" 2>"$tmp/ht.err"
        rc=$?
        t1=$(date +%s%N)
        grep -E $'^(row|note)\t' "$tmp/ht.out" >>"$raw"
        if [ $rc -ne 0 ]; then
            note "heaptrack run failed (exit status $rc): $(tail -n 1 "$tmp/ht.err")"
        elif ! grep -q $'^row\t' "$tmp/ht.out"; then
            note "heaptrack run printed no results: $(tail -n 1 "$tmp/ht.err")"
        else
            wall_row "ring_glibc under heaptrack" "$t0" "$t1"
        fi
        rm -f "$tmp"/heaptrack."$p"*
    done
else
    note "heaptrack: not installed (Debian: apt-get install heaptrack)"
fi

# -- the demo, whole process: tagged against --untagged, in turn --------------
# Each pair's ratio goes in the tagged row; the untagged row is the
# baseline of the workload (ratio 1).
indexer=$bindir/../examples/indexer
wall_ns() { # COMMAND...: its wall time in ns, or a failure
    local t0
    t0=$(date +%s%N)
    timeout "$limit" "$@" >/dev/null 2>&1 || return 1
    echo $(( $(date +%s%N) - t0 ))
}
demo_pairs=5
[ $quick = 1 ] && demo_pairs=1
if [ -x "$indexer" ] && [ -d /usr/include ]; then
    echo "bench: the demo, whole process" >&2
    wl="the demo (indexer), whole process"
    "$indexer" >/dev/null 2>&1 # the page cache, for both
    for ((p = 1; p <= demo_pairs; p++)); do
        # The order alternates from pair to pair.
        if [ $((p % 2)) = 1 ]; then
            t_untagged=$(wall_ns "$indexer" --untagged) && t_tagged=$(wall_ns "$indexer")
        else
            t_tagged=$(wall_ns "$indexer") && t_untagged=$(wall_ns "$indexer" --untagged)
        fi || { note "examples/indexer failed or was killed after $limit s"; break; }
        awk -v w="$wl" -v a="$t_tagged" -v b="$t_untagged" 'BEGIN {
            printf "row\t%s\t%s\t%.3f\ts\t1.000\t%.3f\t%.3f\n", w, "indexer --untagged (baseline)", b / 1e9, b / 1e9, b / 1e9
            printf "row\t%s\t%s\t%.3f\ts\t%.4f\t%.3f\t%.3f\n", w, "indexer (tagged)", a / 1e9, a / b, a / 1e9, a / 1e9
        }' >>"$raw"
    done
else
    note "examples/indexer: not built, or no /usr/include"
fi

# -- a tag per request, whole process: examples/requests --compare -------------
# 200,000 requests of 1 KiB bodies (137 small allocations each) on 2
# threads, tagged then untagged, each run in a process of its own; rows of
# throughput and of the resident set at the end of each run.
requests=$bindir/../examples/requests
req_runs=3
[ $quick = 1 ] && req_runs=1
if [ -x "$requests" ]; then
    echo "bench: examples/requests --compare" >&2
    n=200000
    [ $quick = 1 ] && n=20000
    for ((p = 1; p <= req_runs; p++)); do
        timeout "$limit" "$requests" --compare --requests $n --min-body 1K \
            --max-body 1K --threads 2 >"$tmp/req" 2>&1 ||
            { note "examples/requests --compare failed: $(tail -n 1 "$tmp/req")"; break; }
        awk '
            /^-- a tag per request/ { who = "tagged" }
            /^-- untagged/ { who = "untagged" }
            /^throughput:/ { tput[who] = $2 }
            /^resident set:/ { rss[who] = $3 }
            END {
                w = "requests, 1 KiB bodies, 2 threads (examples/requests)"
                printf "row\t%s\t%s\t%.0f\treq/s\t-\t%.0f\t%.0f\n", w, "untagged", tput["untagged"], tput["untagged"], tput["untagged"]
                printf "row\t%s\t%s\t%.0f\treq/s\t-\t%.0f\t%.0f\n", w, "a tag per request", tput["tagged"], tput["tagged"], tput["tagged"]
                w = "requests: resident set at the end (examples/requests)"
                printf "row\t%s\t%s\t%.1f\tMiB\t1.000\t%.1f\t%.1f\n", w, "untagged (baseline)", rss["untagged"], rss["untagged"], rss["untagged"]
                printf "row\t%s\t%s\t%.1f\tMiB\t%.4f\t%.1f\t%.1f\n", w, "a tag per request", rss["tagged"], rss["tagged"] / rss["untagged"], rss["tagged"], rss["tagged"]
            }' "$tmp/req" >>"$raw"
    done
else
    note "examples/requests: not built"
fi

# -- start-up, whole process: the library preloaded, against the jemalloc it
# links preloaded alone and against nothing (bench/startup.c), the three in
# turn; python3's runs are longer, a quarter as many.
ra_so=$bindir/../.libs/libregionalloc.so
je_so=$(ldd "$ra_so" 2>/dev/null | awk '$1 ~ /^libjemalloc/ { print $3; exit }')
if [ -x "$bindir/startup" ] && [ -f "$ra_so" ] && [ -n "$je_so" ]; then
    for ((p = 1; p <= procs; p++)); do
        echo "bench: startup (process $p of $procs)" >&2
        run_one startup /bin/true "$ra_so" "$je_so" /bin/true
        if [ -x /usr/bin/python3 ]; then
            BENCH_SCALE=$(awk -v s="${BENCH_SCALE:-1}" 'BEGIN { print s / 4 }') \
                run_one startup "python3 -c pass" "$ra_so" "$je_so" \
                /usr/bin/python3 -c pass
        fi
    done
else
    note "start-up: bench/startup, the shared library or the jemalloc it links not found"
fi

# -- Python: a request loop under the module (bench/python_requests.py) -------
# The arms in one process (PYTHONMALLOC=malloc, the library preloaded, the
# module from the build tree), BENCH_PROCS such processes; then the same
# loop untagged in a process per allocator and round, BENCH_PROCS times.
# Debian's python3 only; without it, or the module, a note.
py=/usr/bin/python3
if [ ! -x "$py" ]; then
    note "python requests: $py not installed"
elif [ ! -f "$ra_so" ]; then
    note "python requests: the shared library not found"
else
    for ((p = 1; p <= procs; p++)); do
        echo "bench: python requests (process $p of $procs)" >&2
        PYTHONMALLOC=malloc LD_PRELOAD=$ra_so PYTHONPATH=$bindir/../bindings/python \
            run_cmd "python_requests.py" "$py" "$here/python_requests.py"
        run_cmd "python_requests.py --allocators" env -u LD_PRELOAD -u PYTHONMALLOC \
            "$py" "$here/python_requests.py" --allocators "$ra_so"
    done
fi

elapsed=$(( $(date +%s) - start_s ))

# -- machine ----------------------------------------------------------------------
pkgver() {
    dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "?"
}
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
debian=$(cat /etc/debian_version 2>/dev/null || echo "not Debian")
commit=$(git -C "$here/.." describe --always --dirty 2>/dev/null || echo "?")
echo "libregionalloc benchmarks ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit)"
echo "machine: $(nproc) CPUs, ${cpu:-unknown CPU}, Linux $(uname -r), Debian $debian"
echo "         jemalloc $(pkgver libjemalloc2), mimalloc $(pkgver libmimalloc2.0)," \
     "heaptrack $(pkgver heaptrack), $(gcc --version 2>/dev/null | head -n 1)"
echo "run:     $procs process(es) x $BENCH_ROUNDS rounds per timing program," \
     "BENCH_SCALE=${BENCH_SCALE:-1}, ${elapsed} s, load average at start $load_at_start"
echo

# -- the table and the targets -------------------------------------------------------
awk -F '\t' -v raw_out="$raw_out" '
function median(a, n,    i, j, t, b) {
    for (i = 1; i <= n; i++) b[i] = a[i]
    for (i = 2; i <= n; i++) {
        t = b[i]
        for (j = i - 1; j >= 1 && b[j] > t; j--) b[j + 1] = b[j]
        b[j + 1] = t
    }
    return n % 2 ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
}
function num(x) { return x < 1 ? sprintf("%.3f", x) : x < 100 ? sprintf("%.2f", x) : sprintf("%.1f", x) }
function key(w, c) { return w SUBSEP c }
function has(w, c) { return (key(w, c) in med) }
function ratio_of(w, c) { return has(w, c) && ratio[key(w, c)] != "" ? ratio[key(w, c)] : "" }
function target(desc, measured, ok) {
    printf "  %-7s %-58s %s\n", ok == "" ? "n/a" : ok ? "MET" : "MISSED", desc, measured
}
function ratio_target(desc, w, c, limit,    r) {
    r = ratio_of(w, c)
    if (r == "") target(desc, "not measured", "")
    else target(desc, sprintf("%.3fx (%s vs %s %s)", r, num(med[key(w, c)]),
                              num(med[key(w, JE)]), unit[key(w, c)]), r <= limit)
}
function ns_target(desc, w, c, limit,    v) {
    if (!has(w, c)) { target(desc, "not measured", ""); return }
    v = med[key(w, c)]
    target(desc, sprintf("%s %s", num(v), unit[key(w, c)]), v <= limit)
}
# The median over processes of the ratio of contender a to contender b of
# workload w, each measured against jemalloc in the same process: a / b per
# process, since both rows of a process share its jemalloc median. "" when
# either row has no ratio.
function pair_ratio(w, a, b,    ka, kb, n, i, q) {
    ka = key(w, a); kb = key(w, b)
    if (!(ka in nr) || !(kb in nr)) return ""
    n = nr[ka] < nr[kb] ? nr[ka] : nr[kb]
    for (i = 1; i <= n; i++) q[i] = r[ka, i] / r[kb, i]
    return median(q, n)
}
function pair_target(desc, w, a, b, limit,    x) {
    x = pair_ratio(w, a, b)
    if (x == "") target(desc, "not measured", "")
    else target(desc, sprintf("%.3fx (%s vs %s %s)", x, num(med[key(w, a)]),
                              num(med[key(w, b)]), unit[key(w, a)]), x <= limit)
}
# The quotient of the medians of contenders a and b of workload w, for
# contenders measured in processes of their own.
function med_target(desc, w, a, b, limit,    x) {
    if (!has(w, a) || !has(w, b)) { target(desc, "not measured", ""); return }
    x = med[key(w, a)] / med[key(w, b)]
    target(desc, sprintf("%.3fx (%s vs %s %s)", x, num(med[key(w, a)]),
                         num(med[key(w, b)]), unit[key(w, a)]), x <= limit)
}
function faster_target(desc, w, other,    a, b) {
    if (!has(w, TAG) || !has(w, other)) {
        target(desc, (key(w, other) in why) ? other ": " why[key(w, other)] : "not measured", "")
        return
    }
    a = med[key(w, TAG)]; b = med[key(w, other)]
    target(desc, sprintf("%s vs %s ns (%.2fx)", num(a), num(b), a / b), a < b)
}
BEGIN { JE = "jemalloc, own symbols (baseline)"; TAG = "libregionalloc tagged" }
$1 == "note" { if (!($2 in noted)) { noted[$2] = 1; notes[++nnotes] = $2 }; next }
$1 != "row" { next }
{
    k = key($2, $3)
    if (!($2 in wseen)) { wseen[$2] = 1; worder[++nw] = $2 }
    if (!(k in seen)) { seen[k] = 1; wk[$2, ++wn[$2]] = k; wl[k] = $2; ct[k] = $3 }
    if ($3 ~ /\(baseline\)$/) wbase[$2] = $3
    if ($4 == "n/a") { why[k] = $5; next }
    unit[k] = $5
    v[k, ++nv[k]] = $4 + 0
    if ($6 != "-") r[k, ++nr[k]] = $6 + 0
    if (!(k in lo) || $7 + 0 < lo[k]) lo[k] = $7 + 0
    if (!(k in hi) || $8 + 0 > hi[k]) hi[k] = $8 + 0
}
END {
    # Rows grouped by workload, both in order of first appearance.
    for (i = 1; i <= nw; i++)
        for (j = 1; j <= wn[worder[i]]; j++) order[++nk] = wk[worder[i], j]
    for (i = 1; i <= nk; i++) {
        k = order[i]
        if (!(k in nv)) continue
        delete a; for (j = 1; j <= nv[k]; j++) a[j] = v[k, j]
        med[k] = median(a, nv[k])
        ratio[k] = ""
        if (k in nr) {
            delete a; for (j = 1; j <= nr[k]; j++) a[j] = r[k, j]
            ratio[k] = median(a, nr[k])
        }
    }
    for (i = 1; i <= nk; i++) {
        k = order[i]
        b = key(wl[k], (wl[k] in wbase) ? wbase[wl[k]] : JE)
        if ((k in med) && ratio[k] == "" && (b in med) && med[b] > 0 && unit[b] == unit[k])
            ratio[k] = med[k] / med[b]
    }
    fmt = "%-46s %-34s %10s %-8s %7s  %s\n"
    printf fmt, "workload", "contender", "median", "unit", "x base", "range"
    printf fmt, "--------", "---------", "------", "----", "----------", "-----"
    last = ""
    for (i = 1; i <= nk; i++) {
        k = order[i]
        w = wl[k] == last ? "" : wl[k]
        if (w != "" && last != "") print ""
        last = wl[k]
        if (!(k in med)) { printf fmt, w, ct[k], "n/a", "", "", why[k]; continue }
        printf fmt, w, ct[k], num(med[k]), unit[k],
               ratio[k] == "" ? "-" : sprintf("%.2f", ratio[k]),
               lo[k] == hi[k] ? "" : num(lo[k]) "-" num(hi[k])
        if (raw_out != "")
            printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", wl[k], ct[k], med[k], unit[k],
                   ratio[k], lo[k], hi[k] >raw_out
    }

    print ""
    print "x base: the median over processes of the ratio to the baseline measured in"
    print "the same process: jemalloc, or the contender marked (baseline); for rows from"
    print "other processes (glibc, memory), the median over the jemalloc median. Under"
    print "noise it can differ from the quotient of the medians shown. range: the fastest"
    print "and slowest single round in any process."

    R256 = "ring 8-256 B, 1 thread"; R4K = "ring 8-4096 B, 1 thread"
    SW = "ring 8-256 B, push/pop 1 of 4 tags per 10 ops"
    print ""
    print "targets (the allocation paths), judged from the medians above:"
    ratio_target("tagged malloc+free <= 1.25x jemalloc, ring 8-256", R256, TAG, 1.25)
    ratio_target("tagged malloc+free <= 1.25x jemalloc, ring 8-4096", R4K, TAG, 1.25)
    ratio_target("untagged (override) <= 1.05x jemalloc, ring 8-256", R256, "libregionalloc untagged", 1.05)
    ratio_target("untagged (override) <= 1.05x jemalloc, ring 8-4096", R4K, "libregionalloc untagged", 1.05)
    ratio_target("2 threads, cross-thread frees, tagged <= 1.5x jemalloc",
                 "2 threads, producer mallocs, consumer frees", TAG, 1.5)
    ns_target("ra_tag_of <= 1 ns", "ra_tag_of alone", "libregionalloc ra_tag_of", 1)
    ns_target("push+pop <= 3 ns", "tag push+pop alone", "libregionalloc push+pop", 3)
    ratio_target("RSS of 10M 16-byte blocks, tagged, within 2% of jemalloc",
                 "10M live 16-byte blocks: RSS per block", TAG, 1.02)
    faster_target("tagged faster than header tracker, ring 8-256", R256, "header tracker")
    faster_target("tagged faster than header tracker, ring 8-4096", R4K, "header tracker")
    faster_target("tagged faster than header tracker, push/pop per 10", SW, "header tracker")
    faster_target("tagged faster than mimalloc heap API, ring 8-256", R256, "mimalloc heap API")
    faster_target("tagged faster than mimalloc heap API, ring 8-4096", R4K, "mimalloc heap API")
    faster_target("tagged faster than mimalloc heap API, push/pop per 10", SW, "mimalloc heap API")

    # Hooks and profiler: the tagged ring with the profiler on (its own rounds only),
    # over the plain tagged rounds of the same processes; and the plain
    # tagged rounds, which run with no hook and the profiler off between
    # the instrumented ones, against jemalloc: the bound they met before
    # hooks and the profiler existed (the targets of the allocation paths).
    HOOK = "tagged + 1 no-op hook"; PROF = "tagged, profiler at 512 KiB"
    print ""
    print "targets (hooks and profiler), judged from the medians above:"
    pair_target("profiling at 512 KiB <= 1.05x the unprofiled tagged pair", R256, PROF, TAG, 1.05)
    pair_target("one no-op hook <= 2x the tagged pair", R256, HOOK, TAG, 2)
    ratio_target("no hooks, no profiler: tagged path unchanged (<= 1.25x)", R256, TAG, 1.25)

    # Tag lifetime and budgets: reset against freeing one by one and
    # purging, a recycled tag against a fresh one, the ring with a budget on
    # its tag against without (each pair measured in the same processes).
    D6 = "drop 10^6 blocks of 16-64 B"; RESET = "tagged: ra_tag_reset"
    FREED = "tagged: free one by one + ra_tag_purge"
    CR = "ra_tag_create alone"; CRU = "ra_tag_create + first malloc/free"
    FRESH = "ra_tag_create, a fresh tag"; RECYCLED = "ra_tag_create, a recycled tag"
    BUDGET = "tagged, with a budget"
    print ""
    print "targets (tag lifetime and budgets), judged from the medians above:"
    pair_target("ra_tag_reset <= 0.10x free one by one + purge, 10^6 blocks", D6, RESET, FREED, 0.10)
    pair_target("recycled ra_tag_create <= 0.05x a fresh one", CR, RECYCLED, FRESH, 0.05)
    pair_target("a budget on the tag: <= 1.02x without, ring 8-256", R256, BUDGET, TAG, 1.02)
    pair_target("a budget on the tag: <= 1.02x without, ring 8-4096", R4K, BUDGET, TAG, 1.02)

    # Many tags: a thread cycling through them, many threads each with
    # many, an empty tag, and the demo as a whole process.
    TC = "cycling through N tags, 64 ops a visit"
    MC = "cycling through N mimalloc heaps, 64 ops"
    PM = "16 threads x 300 tags: memory per idle pair"
    PT = "16 threads x 300 tags: ns per malloc+free"
    IDX = "the demo (indexer), whole process"
    print ""
    print "targets (many tags), judged from the medians above:"
    pair_target("cycling through 64 tags <= 1.25x one tag", TC, "64 tags", "1 tag (baseline)", 1.25)
    pair_target("cycling through 256 tags <= 1.5x one tag", TC, "256 tags", "1 tag (baseline)", 1.5)
    ns_target("an empty tag (one malloc/free) <= 64 KiB resident",
              "256 empty tags: RSS per tag", TAG, 64)
    ns_target("memory per idle (thread, tag) pair <= 8 KiB", PM, TAG, 8)
    pair_target("16 x 300 pairs <= 1.25x 16 x 1, per malloc+free", PT, "16 x 300 tags", "16 x 1 tag", 1.25)
    pair_target("the demo, tagged <= 1.02x --untagged, whole process", IDX,
                "indexer (tagged)", "indexer --untagged (baseline)", 1.02)

    # A tag per request, against a mimalloc heap per request and against
    # jemalloc arena.<i>.reset (the floor; bench/README.md explains it).
    LT = "libregionalloc tag per request"; LM = "mimalloc heap per request"
    LR = "jemalloc arena.<i>.reset (baseline)"
    print ""
    print "targets (a tag per request), judged from the medians above:"
    for (n = 10; n <= 1000; n *= 10) {
        LW = "a tag\047s life: create, " n " blocks of 16-256 B, destroy"
        med_target(sprintf("a tag\047s life, %d blocks <= %sx mimalloc heap", n, n < 1000 ? "1.0" : "1.5"),
                   LW, LT, LM, n < 1000 ? 1.0 : 1.5)
        med_target(sprintf("a tag\047s life, %d blocks <= 1.5x arena.<i>.reset (floor)", n),
                   LW, LT, LR, 1.5)
    }
    RQ = "requests, 1 KiB bodies, 2 threads (examples/requests)"
    RR = "requests: resident set at the end (examples/requests)"
    if (has(RQ, "a tag per request") && has(RQ, "untagged")) {
        tp = med[key(RQ, "a tag per request")]; up = med[key(RQ, "untagged")]
        target("a tag per request: >= 0.9x untagged requests/s, 2 threads",
               sprintf("%.3fx (%.0f vs %.0f req/s)", tp / up, tp, up), tp >= 0.9 * up)
    } else target("a tag per request: >= 0.9x untagged requests/s, 2 threads", "not measured", "")
    pair_target("a tag per request: resident set <= 1.1x untagged", RR,
                "a tag per request", "untagged (baseline)", 1.1)

    # Memory pressure: the waves under a 200 MiB limit, and the same run
    # without one (bench/waves.c).
    WP = "waves: peak RSS over 200 MiB"; WL = "200 MiB limit"; WN = "no limit"
    WC = "waves: library threads\047 CPU over the process\047s"
    print ""
    print "targets (memory pressure), judged from the medians above:"
    if (has(WP, WL) && has(WP, WN))
        target("waves: peak RSS <= 1.05x a 200 MiB limit, where without it the peak is above",
               sprintf("%.3fx with, %.3fx without", med[key(WP, WL)], med[key(WP, WN)]),
               med[key(WP, WL)] <= 1.05 && med[key(WP, WN)] > 1)
    else target("waves: peak RSS <= 1.05x a 200 MiB limit", "not measured", "")
    ns_target("waves: giving back (the library\047s threads) <= 5% of the process\047s CPU",
              WC, WL, 5)

    print ""
    print "targets (reading at allocator speed), judged from the medians above:"
    for (n = 30; n <= 3000; n *= 10) {
        ns_target(sprintf("one ra_tag_stats <= 2 us, %d tags", n), n " tags: one ra_tag_stats", TAG, 2)
        ns_target(sprintf("a Prometheus report <= 3 us per tag, %d tags", n), n " tags: a Prometheus report", TAG, 3)
        ns_target(sprintf("a checkpoint <= 3 us per tag, %d tags", n), n " tags: a checkpoint", TAG, 3)
    }
    ns_target("idle, 3,000 tags, REGIONALLOC_SHM=1 <= 0.5% of a core",
              "3000 tags: idle process, REGIONALLOC_SHM=1", TAG, 0.5)

    print ""
    print "targets (hot tags: a pool of arenas, frees that go home), judged from the medians above:"
    ratio_target("2 threads, cross-thread frees, tagged <= 0.35x jemalloc",
                 "2 threads, producer mallocs, consumer frees", TAG, 0.35)
    for (t = 8; t <= 16; t *= 2) {
        HW = "hot tag, " t " threads in a ring, each freeing the last\047s blocks"
        HK = t / 4; HP = "tagged, a pool of " HK " arenas"; H1 = "tagged, one arena"
        pair_target(sprintf("hot tag, %d threads: pool <= 1.05x one arena, per block", t),
                    HW, HP, H1, 1.05)
        ns_target(sprintf("hot tag, %d threads: busiest of %d arenas <= %.0f%% of bin-lock ops", t, HK, 120 / HK),
                  HW ": busiest arena\047s share of bin-lock operations, warm threads", HP, 120 / HK)
        ns_target(sprintf("hot tag, %d threads, pool: <= 12.7 bin-lock ops per 1,000 blocks", t),
                  HW ": bin-lock operations per 1,000 blocks, warm threads", HP, 12.7)
        HW = "hot tag, " t " threads as " t / 2 " producer/consumer pairs"
        ns_target(sprintf("hot tag, %d pairs, one arena: <= 12.7 bin-lock ops per 1,000 blocks", t / 2),
                  HW ": bin-lock operations per 1,000 blocks, warm threads", H1, 12.7)
    }

    SU = "start-up, /bin/true, whole process"
    SP = "start-up, python3 -c pass: peak RSS over jemalloc\047s"
    PRE = "libregionalloc, LD_PRELOAD"
    print ""
    print "targets (start-up, the library preloaded), judged from the medians above:"
    pair_target("/bin/true preloaded <= 1.2x jemalloc preloaded alone", SU, PRE,
                "jemalloc, LD_PRELOAD (baseline)", 1.2)
    ns_target("python3 -c pass: peak RSS <= 1 MB (1,000 KiB) over jemalloc\047s", SP, PRE, 1000)

    # Python: a request loop under the module, each arm against untagged in
    # the same process, tracemalloc beside as the anchor.
    PW = "python requests (dicts, lists, strings, json, a buffer, numpy)"
    PB = "untagged (baseline)"; PE = "python: entering and leaving a tag (with tag: pass less an empty loop)"
    print ""
    print "targets (Python, the module), judged from the medians above:"
    pair_target("a tag per request (1 of 16) <= 1.05x untagged", PW,
                "a tag per request (1 of 16 tags)", PB, 1.05)
    x = pair_ratio(PW, "tracemalloc on (the anchor)", PB)
    if (x != "")
        printf "  %-7s %-58s %.3fx\n", "anchor", "tracemalloc on, the same requests", x
    ns_target("entering and leaving a tag <= 0.5 us", PE, "regionalloc.Tag", 500)

    print ""
    print "other findings:"
    x = pair_ratio(PW, "a tag created and destroyed per request", PB)
    PD = "python: destroys refused (EBUSY), a tag per request"
    if (x != "" && has(PD, "at the request\047s end") && has(PD, "after a gc.collect()"))
        printf "  python, a tag created and destroyed per request: %.3fx untagged; destroys refused %.2f%% at the request\047s end, %.2f%% after a gc.collect()\n",
               x, med[key(PD, "at the request\047s end")], med[key(PD, "after a gc.collect()")]
    PA = "python requests, untagged, a process per allocator and round"
    PM = "PYTHONMALLOC=malloc, libregionalloc preloaded"
    x = pair_ratio(PA, PM, "pymalloc, libregionalloc preloaded")
    if (x != "")
        printf "  python, library preloaded: PYTHONMALLOC=malloc %.3fx pymalloc\n", x
    x = pair_ratio(PA, PM, "PYTHONMALLOC=malloc, glibc malloc")
    y = pair_ratio(PA, "pymalloc, libregionalloc preloaded", "pymalloc, glibc malloc (baseline)")
    if (x != "" && y != "")
        printf "  python: the library %.3fx glibc malloc with PYTHONMALLOC=malloc, %.3fx with pymalloc\n", x, y
    x = ratio_of(PA, PM)
    if (x != "")
        printf "  python: PYTHONMALLOC=malloc and the library %.3fx Python as Debian ships it (pymalloc, glibc)\n", x
    x = pair_ratio(MC, "64 mimalloc heaps", "1 mimalloc heap (baseline)")
    y = pair_ratio(MC, "256 mimalloc heaps", "1 mimalloc heap (baseline)")
    if (x != "" && y != "")
        printf "  mimalloc heaps on the same visits: 64 heaps %.2fx one heap, 256 heaps %.2fx\n", x, y
    if (has(PM, "mimalloc, 16 x 300 heaps"))
        printf "  mimalloc, 16 threads x 300 heaps: %s KiB per idle pair\n", num(med[key(PM, "mimalloc, 16 x 300 heaps")])
    x = pair_ratio(PT, "mimalloc, 16 x 300 heaps", "mimalloc, 16 x 1 heap")
    if (x != "")
        printf "  mimalloc, 16 x 300 heaps: %.2fx 16 x 1 heap per malloc+free\n", x
    x = pair_ratio(PT, "16 x 250 tags (4,000 pairs)", "16 x 1 tag")
    if (x != "")
        printf "  16 x 250 tags (within the 4,093 tcache ids): %.2fx 16 x 1\n", x
    # The publisher of the stats segment runs in processes of its own: a
    # comparison across processes, which their address layouts alone move
    # by about 10%, so a finding, not a verdict.
    SHM = R256 ", stats segment on"
    r1 = ratio_of(SHM, TAG); r0 = ratio_of(R256, TAG)
    if (r1 != "" && r0 != "")
        printf "  stats segment at 1 s: tagged ring 8-256 %.3fx jemalloc with it, %.3fx without (other processes)\n", r1, r0
    M = "/metrics with 256 tags"
    if (has(M, "GET /metrics over loopback"))
        printf "  a /metrics scrape with 256 tags: %s ms (%s ms to write the report itself)\n",
               num(med[key(M, "GET /metrics over loopback")]),
               num(med[key(M, "ra_report(prometheus) in memory (baseline)")])
    split("drop 10^5 blocks of 16-64 B|drop 10^7 blocks of 16-64 B|drop 10^6 blocks of 8-256 B", drops, "|")
    for (i = 1; i <= 3; i++) {
        x = pair_ratio(drops[i], RESET, FREED)
        if (x != "")
            printf "  %s: ra_tag_reset %.2fx free one by one + purge (%s vs %s ns/block)\n",
                   drops[i], x, num(med[key(drops[i], RESET)]), num(med[key(drops[i], FREED)])
    }
    x = pair_ratio(CRU, RECYCLED, FRESH)
    if (x != "")
        printf "  with its first malloc/free, a recycled tag starts in %.2fx the time of a fresh one (%s vs %s us)\n",
               x, num(med[key(CRU, RECYCLED)]), num(med[key(CRU, FRESH)])
    P = "ring 8-256 B, whole process (profiler run)"
    if (has(R256, "glibc malloc + heaptrack") && has(R256, "glibc malloc, profiler baseline"))
        printf "  heaptrack: %.1fx the time per malloc+free of the same binary without it (%s vs %s ns)\n",
               med[key(R256, "glibc malloc + heaptrack")] / med[key(R256, "glibc malloc, profiler baseline")],
               num(med[key(R256, "glibc malloc + heaptrack")]), num(med[key(R256, "glibc malloc, profiler baseline")])
    if (has(P, "ring_glibc under heaptrack") && has(P, "ring_glibc alone"))
        printf "  heaptrack: %.1fx the whole-process wall time (%s vs %s s)\n",
               med[key(P, "ring_glibc under heaptrack")] / med[key(P, "ring_glibc alone")],
               num(med[key(P, "ring_glibc under heaptrack")]), num(med[key(P, "ring_glibc alone")])
    D = "phases: RSS after drop+purge"
    if (has(D, TAG) && has(D, "libregionalloc untagged"))
        printf "  phases: RSS after drop+purge %s MiB tagged vs %s MiB untagged (%.2fx)\n",
               num(med[key(D, TAG)]), num(med[key(D, "libregionalloc untagged")]),
               med[key(D, TAG)] / med[key(D, "libregionalloc untagged")]
    for (i = 1; i <= nnotes; i++) print "  note: " notes[i]
}' "$raw"

echo
echo "command: $command_line   (BENCH_PROCS=$procs BENCH_ROUNDS=$BENCH_ROUNDS BENCH_SCALE=${BENCH_SCALE:-1})"

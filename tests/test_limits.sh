#!/bin/bash
# The memory limit's values, as the library and the tool read them: one
# parser (src/sizes.c) in both, held to one table of cases
# (tests/memory_limits.table).
#   - each value of the table, as REGIONALLOC_MEMORY_LIMIT of a program the
#     library is preloaded into: a good one is the limit the JSON report
#     shows, in effect or not as the table says, with nothing on stderr; a
#     bad one is one line naming the variable, and the cgroup's limit
#     (a fake cgroupfs of 1 GiB) in force instead;
#   - the same value as `regionalloc run --memory-limit`: a good one the
#     same report, a bad one exit 2 with the option, the value, the
#     parser's reason and the usage, the program never run;
#   - a limit at or above the address space (16000000T) is none in effect:
#     sort and python3, whose main threads are tagged by name, run as
#     without it, and the text report says so.
# (--limits, --prof and the other options: tests/test_options.sh.)
# Exit status: 0 pass, 1 fail, 77 skip.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
ra=$builddir/tools/regionalloc
lib=$builddir/.libs/libregionalloc.so
table=${abs_top_srcdir:-${top_srcdir:-.}}/tests/memory_limits.table
need_built "$ra"
[ -e "$lib" ] || skip "shared library not built"
[ "${RA_OVERRIDE:-1}" = 1 ] || skip "built with --disable-override: nothing to preload"
[ -r "$table" ] || { echo "FAIL: $table not found"; exit 1; }
need /usr/bin/python3 python3 || exit 77
make_tmp test_limits
reset_env
unset LD_PRELOAD REGIONALLOC_THREAD_TAGS REGIONALLOC_HTTP REGIONALLOC_SHM \
    REGIONALLOC_MEMORY_LIMIT
export LC_ALL=C

# A cgroupfs of one cgroup, the process's own (its "0::" line), limited to
# 1 GiB: what a percentage is of, and the default a bad value leaves.
own=$(sed -n 's/^0:://p' /proc/self/cgroup)
if [ -n "$own" ]; then
    cg=$tmp/cgroupfs
    mkdir -p "$cg$own" && touch "$cg/cgroup.controllers" &&
        echo 1073741824 >"$cg$own/memory.max" && echo max >"$cg$own/memory.high"
    default=1073741824
else
    echo "note: no cgroup v2 line in /proc/self/cgroup: percentages read as no limit"
    cg=/nonexistent-cgroupfs
    default=0
fi
export REGIONALLOC_CGROUP_FS=$cg

# report_is FILE LIMIT IN_EFFECT SOURCE: the JSON report's memory_limit.
report_is() {
    /usr/bin/python3 - "$@" <<'EOF'
import json, sys
path, limit, in_effect, source = sys.argv[1:]
m = json.load(open(path))["memory_limit"]
want = {"limit": int(limit), "in_effect": in_effect == "yes", "source": source}
got = {k: m.get(k) for k in want}
if got != want:
    print(f"got {got}, want {want}")
    sys.exit(1)
EOF
}

# -- the table: the library and the tool ----------------------------------------
cases=0
while IFS='|' read -r value limit effect; do
    case $value in '#'*) continue ;; esac
    [ -n "$limit" ] || continue
    cases=$((cases + 1))
    case $value in
    *%) [ "$default" = 0 ] && [ "$limit" != bad ] && limit=0 effect=no ;;
    esac
    rm -f "$tmp/lib.json" "$tmp/tool.json"
    # The library alone: the variable, the library preloaded.
    LD_PRELOAD=$lib REGIONALLOC_MEMORY_LIMIT=$value REGIONALLOC_STATS=$tmp/lib.json \
        REGIONALLOC_STATS_FORMAT=json /bin/true 2>"$tmp/lib.err"
    lib_rc=$?
    # The tool: the option, the program never run on a bad value.
    "$ra" run --no-shm --no-thread-tags --report="$tmp/tool.json" --format json \
        --memory-limit "$value" -- /bin/true 2>"$tmp/tool.err"
    tool_rc=$?
    if [ "$limit" = bad ]; then
        lines=$(wc -l <"$tmp/lib.err")
        if [ $lib_rc = 0 ] && [ "$lines" = 1 ] &&
            grep -qF "REGIONALLOC_MEMORY_LIMIT=\"$value\" is invalid" "$tmp/lib.err" &&
            why=$(report_is "$tmp/lib.json" "$default" "$([ "$default" = 0 ] && echo no || echo yes)" \
                "$([ "$default" = 0 ] && echo none || echo cgroup)"); then
            :
        else
            fail "library, '$value': status $lib_rc, stderr: $(cat "$tmp/lib.err") ${why:-}"
            continue
        fi
        if [ $tool_rc = 2 ] && [ ! -e "$tmp/tool.json" ] &&
            [ "$(head -n 1 "$tmp/tool.err")" = "regionalloc: --memory-limit '$value': $(sed -n 's/.* is invalid (\(.*\)); using the default.*/\1/p' "$tmp/lib.err")" ] &&
            grep -q '^usage: regionalloc' "$tmp/tool.err"; then
            echo "ok: '$value' refused by both: $(head -n 1 "$tmp/tool.err")"
        else
            fail "tool, '$value': status $tool_rc, stderr: $(head -n 2 "$tmp/tool.err")"
        fi
        continue
    fi
    if [ $lib_rc = 0 ] && [ ! -s "$tmp/lib.err" ] &&
        why=$(report_is "$tmp/lib.json" "$limit" "$effect" environment) &&
        [ $tool_rc = 0 ] && [ ! -s "$tmp/tool.err" ] &&
        why=$(report_is "$tmp/tool.json" "$limit" "$effect" environment); then
        echo "ok: '$value' taken by both: limit $limit, in effect: $effect"
    else
        fail "'$value': library status $lib_rc, tool status $tool_rc, stderr: $(cat "$tmp/lib.err" "$tmp/tool.err") ${why:-}"
    fi
done <"$table"
[ $cases -ge 30 ] || fail "only $cases cases read from $table"

# -- a limit above the address space is none in effect ------------------------------
# Every thread is tagged by its name (--thread-tags' default): with the
# limit taken as one, every tag creation was refused, sort died with
# "memory exhausted" and python3 with "Fatal Python error".
want=$(sort /etc/passwd)
got=$("$ra" run --memory-limit 16000000T -- sort /etc/passwd 2>"$tmp/err")
rc=$?
if [ $rc = 0 ] && [ "$got" = "$want" ] && [ ! -s "$tmp/err" ]; then
    echo "ok: run --memory-limit 16000000T -- sort /etc/passwd"
else
    fail "sort under 16000000T: status $rc, stderr: $(head -n 3 "$tmp/err")"
fi
"$ra" run --memory-limit 18446744073709551615 --report="$tmp/report.txt" -- \
    /usr/bin/python3 -c 'x = [bytes(1000) for i in range(10000)]' 2>"$tmp/err"
rc=$?
if [ $rc = 0 ] && [ ! -s "$tmp/err" ] &&
    grep -q '^memory limit .* (environment): none in effect (at or above the address space)$' "$tmp/report.txt"; then
    echo "ok: python3 under 2^64 - 1 bytes: runs, the report says the limit is none in effect"
else
    fail "python3 under 2^64 - 1: status $rc, stderr: $(head -n 3 "$tmp/err"), report: $(grep 'memory limit' "$tmp/report.txt")"
fi
finish

#!/bin/bash
# Runs examples/pressure (a sheddable cache beside requests that must not
# fail, under a memory limit set with ra_memory_limit_set) as a user runs
# it: every request is served, the process's peak resident set stays
# within 5% of the limit although the cache alone would grow to 2.5 times
# it, the pressure callback evicted from the cache, and the report shows
# the limit; bad options are refused. Nothing here asserts on speed. Run by
# make check with abs_top_builddir set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
pressure=$builddir/examples/pressure
need_built "$pressure"

reset_env
export LC_ALL=C

make_tmp test_pressure

# 5,000 requests insert 64 KiB each: 312 MiB of cache without the limit.
if ! "$pressure" --limit 128M --requests 5000 >"$tmp/out" 2>"$tmp/err"; then
    fail "pressure exited with status $?"
fi
cat "$tmp/out"
grep -qx 'requests: 5000, failed: 0' "$tmp/out" ||
    fail "not every request served: $(grep '^requests' "$tmp/out")"
peak=$(sed -n 's/^limit: 128 MiB, peak resident: [0-9]* MiB (\([0-9.]*\)x)$/\1/p' "$tmp/out")
awk -v p="$peak" 'BEGIN { exit !(p != "" && p <= 1.05) }' ||
    fail "peak resident set ${peak}x the limit, above 1.05x"
callbacks=$(sed -n 's/^cache: .*, callbacks: \([0-9]*\), evicted by them: \([0-9]*\)$/\1 \2/p' "$tmp/out")
read -r calls evicted <<<"$callbacks"
[ "${calls:-0}" -ge 1 ] && [ "${evicted:-0}" -ge 1 ] ||
    fail "the callback never evicted: '$callbacks'"
grep -qE '^memory limit 128\.0 MiB \(call\): resident [0-9.]+ [KMG]i?B, pressure (none|high); given back [0-9.]+ [KMG]?i?B, [0-9]+ allocations refused$' "$tmp/out" ||
    fail "no memory limit line in the report"
grep -qE '^requests +[^ ]+ .* 0 +1 ' "$tmp/out" ||
    fail "the requests tag shows refusals: $(grep '^requests ' "$tmp/out")"
[ -s "$tmp/err" ] && fail "stderr not empty: $(cat "$tmp/err")"

for bad in "--limit 1M" "--limit lots" "--requests 0" "--requests x" "extra"; do
    # shellcheck disable=SC2086 # word splitting wanted
    "$pressure" $bad >/dev/null 2>"$tmp/err"
    rc=$?
    [ "$rc" = 2 ] || fail "'$bad': exit $rc, expected 2"
    [ -s "$tmp/err" ] || fail "'$bad': nothing on stderr"
done
finish

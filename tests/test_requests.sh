#!/bin/bash
# Runs examples/requests (a tag per request, with a budget, destroyed at the
# request's end) with few requests: every request is served or rejected, the
# budget holds, destroyed tags' slots are reused, and bad options are
# refused; each request's own count of its allocations and frees agrees
# with its tag's (the program exits 1 otherwise), and --compare runs the
# same work tagged and untagged. Run by make check with abs_top_builddir
# set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
requests=$builddir/examples/requests
need_built "$requests"

reset_env
export LC_ALL=C

make_tmp test_requests

# The value after "key " on the line starting with prefix.
field() {
    grep -- "^$1" "$tmp/out" | sed -n "s/.*$2 \([0-9.]*\).*/\1/p"
}

# Two threads, and room for only two tags alive at once: 400 requests fit
# because each destroyed tag's slot serves the next.
if ! REGIONALLOC_MAX_TAGS=2 "$requests" --requests 400 --threads 2 \
    --budget 4M --max-body 2M >"$tmp/out" 2>"$tmp/err"; then
    fail "requests exited with status $?"
    cat "$tmp/err"
fi
cat "$tmp/out"
served=$(sed -n 's/^served: \([0-9]*\),.*/\1/p' "$tmp/out")
rejected=$(sed -n 's/.*rejected over budget: \([0-9]*\),.*/\1/p' "$tmp/out")
if [ -z "$served" ] || [ -z "$rejected" ]; then
    fail "no 'served: N, rejected over budget: M' line"
else
    [ $((served + rejected)) = 400 ] ||
        fail "served $served + rejected $rejected != 400 requests"
    # Bodies up to 2 MiB need about 8 MiB: the large ones pass a 4 MiB
    # budget, the small ones fit.
    [ "$rejected" -gt 0 ] || fail "no request rejected with a 4 MiB budget"
    [ "$served" -gt 0 ] || fail "no request served"
fi
max=$(field "peak mapped per request" max)
awk -v m="$max" 'BEGIN { exit !(m > 0 && m <= 4.0) }' ||
    fail "peak mapped per request $max MiB: not within the 4 MiB budget"
ids=$(sed -n 's/^tag ids used: \([0-9]*\)$/\1/p' "$tmp/out")
[ "$ids" = 1 ] || [ "$ids" = 2 ] || fail "tag ids used: '$ids', expected 1 or 2"
grep -qE '^ra_tag_create: [12] fresh, mean [0-9.]+ us; [0-9]+ recycled' \
    "$tmp/out" || fail "no ra_tag_create line with at most 2 fresh tags"
grep -qE '^allocations per request: mean [0-9.]+ \(exact' "$tmp/out" ||
    fail "no exact 'allocations per request' line"
[ -s "$tmp/err" ] && fail "stderr not empty: $(cat "$tmp/err")"

# -- tagged against untagged -----------------------------------------------------
# Small requests only: both runs serve the same work, none rejected.
if ! "$requests" --compare --requests 2000 --min-body 1K --max-body 4K \
    >"$tmp/out" 2>"$tmp/err"; then
    fail "requests --compare exited with status $?"
    cat "$tmp/err"
fi
cat "$tmp/out"
[ "$(grep -c '^served: 2000, rejected over budget: 0' "$tmp/out")" = 2 ] ||
    fail "--compare: not two runs serving all 2000 requests"
grep -q '^-- untagged' "$tmp/out" || fail "--compare: no untagged run"
grep -qE '^-- resident set, tagged over untagged: [0-9.]+x at the end' \
    "$tmp/out" || fail "--compare: no resident set comparison"
[ "$(grep -c '^resident set: [0-9.]* MiB at the end' "$tmp/out")" = 2 ] ||
    fail "--compare: not two resident set lines"
[ -s "$tmp/err" ] && fail "--compare: stderr not empty: $(cat "$tmp/err")"

# -- errors ---------------------------------------------------------------------
for bad in "--requests 0" "--threads 65" "--budget lots" "--max-body 0" \
    "--min-body 8M --max-body 1M" "extra" "--untagged --compare"; do
    # shellcheck disable=SC2086 # word splitting wanted
    "$requests" $bad >/dev/null 2>"$tmp/err"
    rc=$?
    [ "$rc" = 2 ] || fail "'$bad': exit $rc, expected 2"
done
REGIONALLOC=0 "$requests" --requests 1 >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] || fail "pass-through mode: exit $rc, expected 1"
grep -q "pass-through" "$tmp/err" || fail "pass-through mode: no message"
"$requests" --help >"$tmp/help" || fail "--help: exit $?"
grep -q -- "--budget" "$tmp/help" || fail "--help does not describe --budget"

finish

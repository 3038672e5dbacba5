#!/bin/bash
# Runs examples/tenants (tenants with budgets serving queries as child tags
# with budgets of their own, on worker threads): it must end with every
# tenant's subtree peak within its budget (the program checks it and exits 1
# otherwise), the busy tenant's queries refused while the others are served,
# and bad options refused. Run by make check with abs_top_builddir set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
tenants=$builddir/examples/tenants
need_built "$tenants"

reset_env
export LC_ALL=C

make_tmp test_tenants

if ! "$tenants" --threads 4 --queries 400 >"$tmp/out" 2>"$tmp/err"; then
    fail "tenants exited with status $?"
    cat "$tmp/err"
fi
cat "$tmp/out"
grep -q "^no tenant's subtree ever held more than its budget$" "$tmp/out" ||
    fail "no verdict line"
[ -s "$tmp/err" ] && fail "stderr not empty: $(cat "$tmp/err")"
# Every tenant served queries; all 400 are accounted for.
total=0
for t in 0 1 2 3; do
    line=$(grep "^tenant-$t " "$tmp/out")
    served=$(echo "$line" | awk '{print $2}')
    by_tenant=$(echo "$line" | awk '{print $3}')
    by_query=$(echo "$line" | awk '{print $4}')
    peak=$(echo "$line" | awk '{print $5}')
    [ "${served:-0}" -gt 0 ] || fail "tenant-$t served nothing"
    awk -v p="$peak" 'BEGIN { exit !(p <= 24.0) }' ||
        fail "tenant-$t peak $peak MiB over its 24 MiB budget"
    total=$((total + served + by_tenant + by_query))
done
[ "$total" = 400 ] || fail "served and refused add up to $total, not 400"

# One thread: queries never overlap, so no tenant's subtree fills.
"$tenants" --threads 1 --queries 100 >"$tmp/one" 2>&1 || fail "one thread: exit $?"
awk '/^tenant-/ && $3 != 0 { bad = 1 } END { exit bad }' "$tmp/one" ||
    fail "one thread: a tenant refused a query: $(cat "$tmp/one")"

for bad in "--tenants 1" "--threads 0" "--query-budget lots" "extra" \
    "--tenant-budget 1M"; do
    # shellcheck disable=SC2086 # word splitting wanted
    "$tenants" $bad >/dev/null 2>"$tmp/err"
    rc=$?
    [ "$rc" = 2 ] || fail "'$bad': exit $rc, expected 2"
done

finish

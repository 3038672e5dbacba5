#!/bin/bash
# The system calls a tag's life makes, counted by strace: a system call
# that the kernel refuses once (naming a region with PR_SET_VMA on a kernel
# without CONFIG_ANON_VMA_NAME, say) is not made again on every tag
# creation or checkpoint; the probe is once per process. Run by make check with
# abs_top_builddir, top_srcdir and CC set.
# Exit status: 0 pass, 1 fail, 77 skip (strace missing outside CI).
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
libdir=$builddir/.libs
srcdir=${top_srcdir:-$builddir}
case $srcdir in
/*) ;;
*) srcdir=$(pwd)/$srcdir ;;
esac
[ -e "$libdir/libregionalloc.so" ] || skip "$libdir/libregionalloc.so not found"
need strace strace || exit 77

make_tmp test_syscalls
reset_env

cat >"$tmp/cycles.c" <<'EOF'
/* argv[1] cycles: create a tag (recycled after the first), allocate under
 * it, take a checkpoint, destroy it. */
#include <stdlib.h>

#include <regionalloc.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;

    for (int i = 0; i < n; i++) {
        ra_tag_t tag = ra_tag_create(i % 2 ? "odd" : "even");
        ra_free(ra_malloc_tag(tag, 100));
        if (tag == RA_TAG_NONE || ra_checkpoint("cycle") != 0 ||
            ra_tag_destroy(tag) != 0)
            return 1;
    }
    return 0;
}
EOF
# shellcheck disable=SC2086
${CC:-cc} ${CFLAGS:-} -I"$srcdir/include" -o "$tmp/cycles" "$tmp/cycles.c" \
    ${LDFLAGS:-} -L"$libdir" -Wl,-rpath,"$libdir" -lregionalloc ||
    { echo "FAIL: cannot build the test program"; exit 1; }

# failed_calls CYCLES: "count name" of each system call that failed in a
# run of CYCLES cycles, into $tmp/failed.CYCLES.
failed_calls() {
    strace -f -qq -e status=failed -o "$tmp/trace.$1" "$tmp/cycles" "$1" ||
        fail "the program failed under strace ($1 cycles)"
    awk '{ sub(/\(.*/, "", $2); print $2 }' "$tmp/trace.$1" | sort | uniq -c |
        awk '{ print $2, $1 }' | sort >"$tmp/failed.$1"
}

# What fails once (the loader's search of its paths, a probe) fails as
# often in either run; what fails on every cycle grows with the cycles.
failed_calls 100
failed_calls 300
echo "failed system calls in 100 and in 300 create/allocate/destroy cycles:"
join -a 1 -a 2 -e 0 -o 0,1.2,2.2 "$tmp/failed.100" "$tmp/failed.300" |
    while read -r name few many; do
        echo "  $name: $few, $many"
        if [ "$((many - few))" -gt 10 ]; then
            echo "FAIL: $name fails on every cycle"
        fi
    done | tee "$tmp/summary"
grep -q '^FAIL' "$tmp/summary" && failures=$((failures + 1))
finish

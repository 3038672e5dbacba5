#!/bin/bash
# Links a small C++ program against libregionalloc in three orders relative
# to libjemalloc (which exports malloc and operator new too). With
# -lregionalloc alone or first, new[] and malloc must be tagged. With
# -ljemalloc first the dynamic linker binds every malloc and operator new of
# the process to jemalloc before it looks at us, which no shared library can
# change; there the library must say so on stderr instead of silently
# counting nothing. Run by make check with abs_top_builddir,
# top_srcdir and CXX (and optionally CXXFLAGS, LDFLAGS, JEMALLOC_LIBS,
# RA_OVERRIDE) set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
builddir=${abs_top_builddir:-} # empty outside make check: skipped below
srcdir=${top_srcdir:-}
libdir=$builddir/.libs
cxx=${CXX:-}
jemalloc=${JEMALLOC_LIBS:--ljemalloc}
# shellcheck disable=SC2086  # splitting trims the spaces make leaves
set -- $jemalloc
jemalloc="$*"

if [ -z "$builddir" ] || [ ! -e "$libdir/libregionalloc.so" ]; then
    skip "$libdir/libregionalloc.so not found (shared library not built)"
fi
[ -n "$cxx" ] || skip "CXX is empty (no C++ compiler)"
[ "${RA_OVERRIDE:-1}" = 1 ] ||
    skip "built with --disable-override: malloc and new are not replaced"
# A relative top_srcdir is relative to the build directory make runs in.
case $srcdir in
/*) ;;
"") srcdir=$builddir ;;
*) srcdir=$(pwd)/$srcdir ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_linkorder.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/linkorder.cc" <<'EOF'
// Exits 0 when new[] and malloc made under a pushed tag belong to it.
#include <cstdio>
#include <cstdlib>

#include <regionalloc.h>

int main()
{
    ra_tag_t tag = ra_tag_create("linkorder");
    if (tag == RA_TAG_NONE || ra_tag_push(tag) != 0) {
        std::perror("linkorder: cannot create and push a tag");
        return 2;
    }
    int *array = new int[100];
    void *block = std::malloc(100);
    ra_tag_pop(tag);
    if (block == nullptr) {
        std::perror("linkorder: malloc");
        return 2;
    }
    ra_tag_t array_tag = ra_tag_of(array);
    ra_tag_t block_tag = ra_tag_of(block);
    std::printf("new int[100]: tag %u, malloc(100): tag %u (want %u)\n",
                array_tag, block_tag, tag);
    delete[] array;
    std::free(block);
    return array_tag == tag && block_tag == tag ? 0 : 1;
}
EOF

# Compiles once; links per order.
# shellcheck disable=SC2086  # CXX, CXXFLAGS and LDFLAGS are word lists
if ! $cxx ${CXXFLAGS:-} -I"$srcdir/include" -c "$tmp/linkorder.cc" \
    -o "$tmp/linkorder.o"; then
    echo "FAIL: cannot compile the test program with $cxx"
    exit 1
fi

failed=0
n=0
orders=("-lregionalloc" "-lregionalloc $jemalloc" "$jemalloc -lregionalloc")
# What each order must do: tag, or warn about the binding.
expect=(tagged tagged warned)
for order in "${orders[@]}"; do
    n=$((n + 1))
    exe=$tmp/linkorder$n
    # shellcheck disable=SC2086
    if ! $cxx ${CXXFLAGS:-} -o "$exe" "$tmp/linkorder.o" ${LDFLAGS:-} \
        -L"$libdir" -Wl,-rpath,"$libdir" $order; then
        echo "FAIL: [$order] does not link"
        failed=1
        continue
    fi
    needed=$(readelf -d "$exe" 2>/dev/null |
        sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
    # A clean environment for the library: defaults, no report.
    out=$(env -u REGIONALLOC -u REGIONALLOC_MAX_TAGS \
        -u REGIONALLOC_REGION_SIZE -u REGIONALLOC_STATS \
        -u REGIONALLOC_STATS_FORMAT -u REGIONALLOC_CHECKPOINTS -u LD_PRELOAD \
        "$exe" 2>&1)
    rc=$?
    if [ "${expect[$((n - 1))]}" = warned ]; then
        if [ "$rc" = 1 ] &&
            printf '%s\n' "$out" | grep -q "malloc is bound to .*libjemalloc"; then
            echo "PASS: [$order] untagged, and the library warned on stderr"
        else
            echo "FAIL: [$order] exit $rc: expected untagged allocations and" \
                "the link-order warning"
            printf '%s\n' "$out" | sed 's/^/    /'
            failed=1
        fi
    elif [ "$rc" = 0 ]; then
        echo "PASS: [$order] $out"
    else
        echo "FAIL: [$order] exit $rc: allocations made under a pushed" \
            "tag are untagged"
        printf '%s\n' "$out" | sed 's/^/    /'
        echo "    NEEDED, in search order: $needed"
        failed=1
    fi
done

# Loaded after the C library: a preloaded library that depends on
# libregionalloc puts it behind libc in the search order, so malloc is
# glibc's. The library must say so once, at load, naming what malloc is
# bound to, even in a program that never calls it.
printf 'int regionalloc_dependent;\n' >"$tmp/dep.c"
# shellcheck disable=SC2086
if ! ${CC:-cc} ${CFLAGS:-} -shared -fPIC -o "$tmp/libdep.so" "$tmp/dep.c" \
    ${LDFLAGS:-} -Wl,--no-as-needed -L"$libdir" -Wl,-rpath,"$libdir" \
    -lregionalloc; then
    echo "FAIL: cannot build a library that depends on libregionalloc"
    failed=1
else
    out=$(env -u REGIONALLOC -u REGIONALLOC_STATS -u REGIONALLOC_CHECKPOINTS \
        LD_PRELOAD="$tmp/libdep.so" /bin/true 2>&1)
    rc=$?
    lines=$(printf '%s\n' "$out" | grep -c "malloc is bound to")
    if [ "$rc" = 0 ] && [ "$lines" = 1 ] &&
        printf '%s\n' "$out" | grep "malloc is bound to" | grep -q "libc"; then
        echo "PASS: [loaded after libc] the library warned once: $out"
    else
        echo "FAIL: [loaded after libc] exit $rc, expected one line naming" \
            "libc as the owner of malloc:"
        printf '%s\n' "$out" | sed 's/^/    /'
        failed=1
    fi
fi
# A program that is not position-independent and takes malloc's address
# (as Debian's python3 does): its symbol table gives malloc a value, the
# address of a PLT stub in the executable, although the symbol is
# undefined there and every call reaches libregionalloc. Nothing must be
# said, and malloc must be tagged.
cat >"$tmp/nopie.c" <<'EOF'
/* Exits 0 when malloc, called through a pointer taken in a non-PIE
 * executable, serves a pushed tag. */
#include <stdio.h>
#include <stdlib.h>

#include <regionalloc.h>

void *(*volatile take_address)(size_t);

int main(void)
{
    ra_tag_t tag = ra_tag_create("nopie");
    void *p;

    /* Taken in code, not data: non-PIC code needs the canonical PLT. */
    take_address = malloc;
    if (tag == RA_TAG_NONE || ra_tag_push(tag) != 0)
        return 2;
    p = take_address(64);
    ra_tag_pop(tag);
    printf("malloc through its address: tag %u (want %u)\n", ra_tag_of(p),
           tag);
    return ra_tag_of(p) == tag ? 0 : 1;
}
EOF
# shellcheck disable=SC2086
if ! ${CC:-cc} ${CFLAGS:-} -fno-pie -no-pie -I"$srcdir/include" \
    -o "$tmp/nopie" "$tmp/nopie.c" ${LDFLAGS:-} -L"$libdir" \
    -Wl,-rpath,"$libdir" -lregionalloc; then
    echo "FAIL: cannot build a non-PIE program"
    failed=1
elif ! readelf --dyn-syms -W "$tmp/nopie" |
    grep -qE ' 0*[1-9a-f][0-9a-f]* +0 FUNC +GLOBAL +DEFAULT +UND malloc'; then
    echo "FAIL: [non-PIE] the program has no PLT stub as malloc's value:" \
        "it would test nothing"
    failed=1
else
    out=$(env -u REGIONALLOC -u REGIONALLOC_STATS -u REGIONALLOC_CHECKPOINTS \
        "$tmp/nopie" 2>"$tmp/nopie.err")
    rc=$?
    if [ "$rc" = 0 ] && [ ! -s "$tmp/nopie.err" ]; then
        echo "PASS: [non-PIE, malloc's address taken] $out, nothing on stderr"
    else
        echo "FAIL: [non-PIE, malloc's address taken] exit $rc: $out; stderr:"
        sed 's/^/    /' "$tmp/nopie.err"
        failed=1
    fi
fi

# The system's own programs, as a Debian user runs them (not a python3
# that PATH finds first, which may be another build): Debian's python3 is
# not position-independent and takes malloc's address.
for prog in /usr/bin/python3 /usr/bin/perl; do
    [ -x "$prog" ] || continue
    case $prog in
    */python3) args=(-c 'import sys; sys.exit(0)') ;;
    *) args=(-e 'exit 0') ;;
    esac
    err=$(env -u REGIONALLOC -u REGIONALLOC_STATS -u REGIONALLOC_CHECKPOINTS \
        LD_PRELOAD="$libdir/libregionalloc.so" "$prog" "${args[@]}" 2>&1 \
        >/dev/null)
    rc=$?
    if [ "$rc" = 0 ] && [ -z "$err" ]; then
        echo "PASS: [LD_PRELOAD $prog] nothing on stderr"
    else
        echo "FAIL: [LD_PRELOAD $prog] exit $rc, stderr:"
        printf '%s\n' "$err" | sed 's/^/    /'
        failed=1
    fi
done
exit "$failed"

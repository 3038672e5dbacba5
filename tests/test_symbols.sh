#!/bin/bash
# Checks the dynamic symbol table of libregionalloc.so: it exports the public
# API (ra_*), the two helpers RA_TAG_SCOPE expands to, and, unless built with
# --disable-override (RA_OVERRIDE=0), the malloc family and C++ operator
# new/delete; nothing else. Every function of include/regionalloc.h must be
# there. It neither links nor names a symbol of what it loads only when
# asked (libmicrohttpd, libdw and theirs). Run by make check with
# abs_top_builddir (and RA_OVERRIDE) set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
lib=$builddir/.libs/libregionalloc.so
override=${RA_OVERRIDE:-1}

[ -e "$lib" ] || skip "$lib not found (shared library not built)"
command -v nm >/dev/null 2>&1 || skip "nm not found"

# The public functions (include/regionalloc.h), RA_TAG_SCOPE's helpers,
# and the reports and checkpoints (section 5).
api="ra_tag_create ra_tag_lookup ra_tag_name ra_tag_count ra_tag_push
ra_tag_pop ra_tag_current ra_tag_of ra_malloc ra_calloc ra_realloc ra_free
ra_free_sized ra_aligned_alloc ra_posix_memalign ra_malloc_usable_size
ra_malloc_tag ra_tag_stats ra_tag_usage ra_tag_purge ra_purge_all ra_thread_flush
ra_enabled ra__tag_scope_begin ra__tag_scope_end
ra_report ra_report_top ra_checkpoint ra_checkpoint_report ra_tag_rss
ra_tag_reset ra_tag_destroy ra_tag_set_limit ra_tag_get_limit
ra_http_start ra_http_stop"

# The replaced allocator (regionalloc(3), drop-in malloc), and jemalloc's non-standard
# functions that programs call on blocks from malloc.
malloc_family="malloc calloc realloc free aligned_alloc posix_memalign
memalign valloc pvalloc malloc_usable_size reallocarray free_sized
free_aligned_sized mallocx rallocx xallocx sallocx dallocx sdallocx nallocx"

# The thread functions stood in front of for tags by thread name, the
# limit functions, before which the library gives back address space, and
# mmap and munmap, through which it knows where jemalloc's memory lies, and
# dlclose, which makes the tags by calling object forget the closed object.
thread_family="pthread_create pthread_setname_np prctl setrlimit setrlimit64
prlimit prlimit64 mmap munmap dlclose"

# Every operator new/delete of C++17 (LP64 manglings: size_t is m).
cxx_operators="_Znwm _Znam _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t
_ZnwmSt11align_val_t _ZnamSt11align_val_t
_ZnwmSt11align_val_tRKSt9nothrow_t _ZnamSt11align_val_tRKSt9nothrow_t
_ZdlPv _ZdaPv _ZdlPvRKSt9nothrow_t _ZdaPvRKSt9nothrow_t _ZdlPvm _ZdaPvm
_ZdlPvSt11align_val_t _ZdaPvSt11align_val_t
_ZdlPvSt11align_val_tRKSt9nothrow_t _ZdaPvSt11align_val_tRKSt9nothrow_t
_ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t"

if ! nm_out=$(nm -D --defined-only "$lib"); then
    echo "FAIL: nm -D --defined-only $lib failed"
    exit 1
fi
# "address type name[@version]" -> name
exported=$(printf '%s\n' "$nm_out" |
    awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u)

is_malloc_family() {
    local f
    for f in $malloc_family $thread_family; do
        [ "$f" = "$1" ] && return 0
    done
    return 1
}

allowed() {
    local sym=$1
    case $sym in
    ra__tag_scope_begin | ra__tag_scope_end | ra__layout | ra__tag_stack | ra__tags_published | ra__tag_live) return 0 ;;
    ra__*) return 1 ;;          # cross-file internals stay hidden
    ra_*) return 0 ;;
    esac
    [ "$override" = 1 ] || return 1
    is_malloc_family "$sym" && return 0
    case $sym in
    _Znw* | _Zna* | _Zdl* | _Zda*) return 0 ;;
    esac
    return 1
}

failed=0
unexpected=""
for sym in $exported; do
    allowed "$sym" || unexpected="$unexpected $sym"
done
if [ -n "$unexpected" ]; then
    echo "FAIL: $lib exports symbols outside the API (RA_OVERRIDE=$override):"
    for sym in $unexpected; do
        echo "    $sym"
    done
    failed=1
fi

has() {
    printf '%s\n' "$exported" | grep -qxF -- "$1"
}

# Every function the header declares, so that one added there and left
# out of the export list fails here, not in a caller's link.
header=${abs_top_srcdir:-$(dirname "${BASH_SOURCE[0]}")/..}/include/regionalloc.h
declared=$(sed -n 's/^RA_EXPORT [^(]*[ *]\(ra_[a-z0-9_]*\)(.*/\1/p' "$header")
if [ "$(printf '%s\n' "$declared" | grep -c .)" -lt 50 ]; then
    echo "FAIL: found $(printf '%s\n' "$declared" | grep -c .) functions in $header, expected 50 or more"
    failed=1
fi

missing=""
required="$api $declared"
[ "$override" = 1 ] && required="$required $malloc_family $thread_family $cxx_operators"
for sym in $required; do
    has "$sym" || missing="$missing $sym"
done
if [ -n "$missing" ]; then
    echo "FAIL: $lib does not export (RA_OVERRIDE=$override):"
    for sym in $missing; do
        echo "    $sym"
    done
    failed=1
fi

if [ "$override" != 1 ]; then
    # --disable-override: the allocator must not be replaced at all.
    leaked=""
    for sym in $malloc_family $thread_family; do
        has "$sym" && leaked="$leaked $sym"
    done
    if [ -n "$leaked" ]; then
        echo "FAIL: built without the override but exports:$leaked"
        failed=1
    fi
fi

# What the library loads only when asked (src/load.c) it neither links nor
# calls by name: a program that never serves HTTP or names a frame meets
# none of their symbols.
needed=$(${OBJDUMP:-objdump} -p "$lib" 2>/dev/null | awk '$1 == "NEEDED" { print $2 }')
if [ -z "$needed" ]; then
    echo "FAIL: objdump -p $lib lists no NEEDED entry (objdump missing?)"
    failed=1
fi
for dep in $needed; do
    case $dep in
    libmicrohttpd.* | libgnutls.* | libdw.* | libelf.*)
        echo "FAIL: $lib links $dep, which it loads when first needed"
        failed=1
        ;;
    esac
done
undefined=$(nm -D --undefined-only "$lib" | awk '{ sub(/@.*/, "", $2); print $2 }' |
    grep -E '^(MHD_|dwfl_|dwarf_|elf_|gnutls_)')
if [ -n "$undefined" ]; then
    echo "FAIL: $lib calls by name what it loads when first needed:" $undefined
    failed=1
fi

count=$(printf '%s\n' "$exported" | grep -c .)
if [ "$failed" = 0 ]; then
    echo "PASS: $count exported symbols, all in the API" \
        "(RA_OVERRIDE=$override)"
fi
exit "$failed"

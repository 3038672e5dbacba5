#!/bin/bash
# The libraries the library loads only when asked: a preloaded program that
# never serves HTTP, names a frame or dumps a profile maps none of
# libmicrohttpd, gnutls, libdw or libelf; REGIONALLOC_HTTP (here through
# regionalloc run --http) loads the first two, a profile dumped at exit the
# last two when the profiler starts; a library that is there but unusable
# costs one line on stderr and nothing else. The checks of a running
# program (a dump, ra_http_start, a pushed tag) are in tests/check_http.c
# and tests/check_prof_dump.c. Run by make check with abs_top_builddir, CC,
# RA_HTTP, RA_LIBDW, RA_MHD_SONAME and RA_DW_SONAME set.
# Exit status: 0 pass, 1 fail, 77 skip (no shared library built).
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
lib=$builddir/.libs/libregionalloc.so
tool=$builddir/tools/regionalloc
[ -f "$lib" ] || skip "$lib not found (static-only build?)"
need_built "$tool"

make_tmp test_loading
reset_env
unset REGIONALLOC_HTTP LD_LIBRARY_PATH
export LC_ALL=C

# The loaded objects' file names, one a line, of the program's run with the
# environment given: from the dynamic linker's own account (LD_DEBUG), so
# that what the program never prints is seen too.
objects_of() {
    env "$@" LD_DEBUG=files /bin/true 2>&1 |
        sed -n 's|.*file=\([^ ]*\) \[0\];  generating link map|\1|p' |
        sed 's|.*/||' | sort -u
}

# The objects /proc/self/maps names in a run of cat /proc/self/maps after
# ARG... (variables, or a command that runs what follows it), one a line;
# stderr in $tmp/err.
mapped_in_cat() {
    env "$@" cat /proc/self/maps 2>"$tmp/err" |
        awk '$6 ~ /\// { n = split($6, p, "/"); print p[n] }' | sort -u
}

# names_any STEM... < LIST: whether a name of LIST is STEM followed by '.'
# or '-' (libdw.so.1, libdw-0.188.so).
names_any() {
    local list stem
    list=$(cat)
    for stem in "$@"; do
        printf '%s\n' "$list" | grep -q "^$stem[.-]" && return 0
    done
    return 1
}

lazy="libmicrohttpd libgnutls libdw libelf"

# -- a program that asks for nothing -------------------------------------------
objects_of LD_PRELOAD="$lib" >"$tmp/true"
if [ ! -s "$tmp/true" ]; then
    fail "LD_DEBUG=files printed no object for /bin/true"
elif names_any $lazy <"$tmp/true"; then
    fail "a preloaded /bin/true loads what it never uses: $(tr '\n' ' ' <"$tmp/true")"
else
    echo "ok: a preloaded /bin/true loads $(wc -l <"$tmp/true") objects, none of $lazy"
fi
mapped_in_cat "$tool" run -- >"$tmp/run"
if ! grep -q '^libregionalloc' "$tmp/run"; then
    fail "regionalloc run -- cat: the library is not mapped: $(head -3 "$tmp/err")"
elif names_any $lazy <"$tmp/run"; then
    fail "regionalloc run -- cat maps what it never uses: $(tr '\n' ' ' <"$tmp/run")"
else
    echo "ok: regionalloc run -- cat maps none of $lazy"
fi
mapped_in_cat LD_PRELOAD="$lib" REGIONALLOC_PROF=64k >"$tmp/prof"
if names_any libdw libelf <"$tmp/prof"; then
    fail "the profiler without a dump at exit loads libdw"
else
    echo "ok: the profiler alone loads no libdw"
fi

# -- what asks for them ------------------------------------------------------------
if [ "${RA_HTTP:-1}" = 1 ]; then
    mapped_in_cat "$tool" run --http=127.0.0.1:0 -- >"$tmp/http"
    if names_any libmicrohttpd <"$tmp/http" && names_any libgnutls <"$tmp/http"; then
        echo "ok: regionalloc run --http loads libmicrohttpd and gnutls"
    else
        fail "regionalloc run --http: libmicrohttpd or gnutls not mapped: $(head -3 "$tmp/err")"
    fi
else
    not_built "the HTTP endpoints"
fi
if [ "${RA_LIBDW:-1}" = 1 ]; then
    mapped_in_cat LD_PRELOAD="$lib" REGIONALLOC_PROF=64k \
        REGIONALLOC_PROF_DUMP="$tmp/cat.heap" >"$tmp/dump"
    if names_any libdw <"$tmp/dump" && names_any libelf <"$tmp/dump"; then
        echo "ok: a profile dumped at exit loads libdw and libelf at the start"
    else
        fail "REGIONALLOC_PROF_DUMP: libdw or libelf not mapped before the exit"
    fi
    [ -s "$tmp/cat.heap" ] || fail "REGIONALLOC_PROF_DUMP: no dump at exit"
else
    not_built "libdw"
fi

# -- a library there but unusable ------------------------------------------------
# An empty file first in the search path (dlopen: "file too short"), and a
# shared object of the same name that lacks the functions (dlsym): one line
# each, naming the library, and the program runs as it would without it.
need_built "$(command -v "${CC:-cc}")" "a C compiler"
echo 'int ra_test_nothing_here;' >"$tmp/empty.c"
# unusable KIND SONAME STEM VAR...: runs cat with a KIND ("empty" or
# "lacking") SONAME first in LD_LIBRARY_PATH and VAR... set.
unusable() {
    local kind=$1 soname=$2 stem=$3 dir=$tmp/$1-$3
    shift 3
    mkdir -p "$dir"
    if [ "$kind" = empty ]; then
        : >"$dir/$soname"
    else
        ${CC:-cc} -shared -fPIC -Wl,-soname,"$soname" -o "$dir/$soname" \
            "$tmp/empty.c" || { fail "cannot build a shared object"; return; }
    fi
    mapped_in_cat LD_LIBRARY_PATH="$dir" LD_PRELOAD="$lib" "$@" >"$tmp/maps"
    if [ "$(wc -l <"$tmp/err")" != 1 ] ||
        ! grep -q "^regionalloc: cannot load $soname, which " "$tmp/err"; then
        fail "$stem, $kind: not one line on stderr: $(head -3 "$tmp/err")"
    elif ! grep -q '^libc[.-]' "$tmp/maps"; then
        fail "$stem, $kind: cat printed no maps"
    elif names_any "$stem" <"$tmp/maps"; then
        fail "$stem, $kind: still mapped after the failure"
    else
        echo "ok: $stem, $kind: $(cat "$tmp/err")"
    fi
}
if [ "${RA_HTTP:-1}" = 1 ]; then
    for kind in empty lacking; do
        unusable $kind "${RA_MHD_SONAME:-libmicrohttpd.so.12}" libmicrohttpd \
            REGIONALLOC_HTTP=127.0.0.1:0
    done
fi
if [ "${RA_LIBDW:-1}" = 1 ]; then
    for kind in empty lacking; do
        rm -f "$tmp/cat.heap"
        unusable $kind "${RA_DW_SONAME:-libdw.so.1}" libdw REGIONALLOC_PROF=64k \
            REGIONALLOC_PROF_DUMP="$tmp/cat.heap"
        [ -s "$tmp/cat.heap" ] || fail "libdw, $kind: no dump at exit"
    done
fi
finish

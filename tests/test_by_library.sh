#!/bin/bash
# Tags by calling object (REGIONALLOC_TAG_BY=library, regionalloc run
# --by-library) on a program and three shared libraries of the test's own
# (tests/by_library/run_*.c*): libbylib_linked.so (C, linked), libbylib_cxx.so
# (C++, linked, operator new) and libbylib_loaded_a.so, dlopened then
# dlclosed before libbylib_loaded_b.so (the same code) is loaded, maybe
# at a's addresses. Each holds known live bytes through malloc, calloc,
# realloc, posix_memalign, aligned_alloc or operator new, and the JSON
# report must show each object's tag under libraries holding exactly
# them (tests/by_library_check.py):
#   - under LD_PRELOAD with REGIONALLOC_TAG_BY=library, and under the
#     built `regionalloc run --by-library`, which tags no thread by name;
#   - with --thread-tags=bylib-worker=workers too: that thread's bytes
#     under workers, the others' by object;
#   - a block the program reallocates stays its library's, one it frees
#     leaves it; strdup's block is libc's; a pushed tag wins;
#   - threads count in their objects; a forked child's report has its
#     own bytes on top of the parent's;
#   - `regionalloc report PID` (JSON and text) and `regionalloc top
#     --once PID` show the objects' tags of the running program.
# Run by make check with abs_top_builddir, top_srcdir, CC and CXX set.
# Exit status: 0 pass, 1 fail, 77 skip.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
srcdir=${abs_top_srcdir:-${top_srcdir:-.}}
ra=$builddir/tools/regionalloc
lib=$builddir/.libs/libregionalloc.so
need_built "$ra"
[ -e "$lib" ] || skip "shared library not built"
[ "${RA_OVERRIDE:-1}" = 1 ] || skip "built with --disable-override: no tags by object"
need python3 python3 || exit 77
make_tmp test_by_library
reset_env
unset LD_PRELOAD REGIONALLOC_THREAD_TAGS REGIONALLOC_TAG_BY REGIONALLOC_HTTP \
    REGIONALLOC_SHM
export LC_ALL=C
pid=
trap '[ -n "$pid" ] && end_processes "$pid"; rm -rf "$tmp"' EXIT

# -- the program and its libraries ----------------------------------------------------
d=$tmp/bin
mkdir -p "$d"
build() { # WHAT CMD...: runs a compiler; fails and ends the test if it fails
    local what=$1
    shift
    "$@" 2>"$tmp/cc.err" && return 0
    fail "cannot build $what: $(head -5 "$tmp/cc.err")"
    finish
}
cc=${CC:-cc}
cxx=${CXX:-c++}
# shellcheck disable=SC2086  # CC and CXX may carry words
build libbylib_linked.so $cc -O1 -shared -fPIC -Wl,-soname,libbylib_linked.so \
    -o "$d/libbylib_linked.so" "$srcdir/tests/by_library/run_linked.c"
# shellcheck disable=SC2086
build libbylib_cxx.so $cxx -O1 -std=c++17 -shared -fPIC \
    -Wl,-soname,libbylib_cxx.so -o "$d/libbylib_cxx.so" "$srcdir/tests/by_library/run_cxx.cc"
for x in a b; do
    # shellcheck disable=SC2086
    build "libbylib_loaded_$x.so" $cc -O1 -shared -fPIC \
        -Wl,-soname,"libbylib_loaded_$x.so" -o "$d/libbylib_loaded_$x.so" \
        "$srcdir/tests/by_library/run_loaded.c"
done
# shellcheck disable=SC2086
build bylib_main $cc -O1 -I"$srcdir/include" -o "$d/bylib_main" \
    "$srcdir/tests/by_library/run_main.c" -L"$d" -lbylib_linked -lbylib_cxx \
    -Wl,-rpath,"$d" -ldl -lpthread

# -- the environment run makes --------------------------------------------------------
# run_env OPTIONS...: the program's REGIONALLOC_TAG_BY and _THREAD_TAGS.
run_env() {
    # shellcheck disable=SC2016  # the program's shell expands them
    "$ra" run --no-shm "$@" -- /bin/sh -c \
        'echo "${REGIONALLOC_TAG_BY-unset} ${REGIONALLOC_THREAD_TAGS-unset}"' \
        2>"$tmp/env.err"
}
expect_env() { # WANT OPTIONS...
    local want=$1 got
    shift
    got=$(run_env "$@")
    [ "$got" = "$want" ] && echo "ok: run $*: '$got'" ||
        fail "run $*: TAG_BY, THREAD_TAGS '$got', want '$want': $(head -1 "$tmp/env.err")"
}
expect_env 'library unset' --by-library
expect_env 'library w=x' --by-library --thread-tags=w=x
expect_env 'library *' --thread-tags --by-library
expect_env 'library unset' --by-library --no-thread-tags
expect_env 'unset *'

# check_report FILE MODE WHAT: the report FILE as by_library_check.py's MODE.
check_report() {
    if python3 "$srcdir/tests/by_library_check.py" "$1" "$2" "$d" >"$tmp/check.out" 2>&1; then
        echo "ok: $3"
    else
        fail "$3:"
        grep -v '^ok:' "$tmp/check.out" | sed 's/^/    /'
    fi
}

# run_batch NAME MODE WHAT CMD...: runs CMD (the program to its end), then
# checks its report at exit $tmp/NAME.json and its child's.
run_batch() {
    local name=$1 mode=$2 what=$3
    shift 3
    "$@" "$d" "$tmp/$name.child.json" </dev/null >"$tmp/$name.out" 2>"$tmp/$name.err"
    local rc=$?
    if [ "$rc" != 0 ] || ! grep -q '^ready' "$tmp/$name.out"; then
        fail "$what: exit $rc: $(head -5 "$tmp/$name.err")"
        return
    fi
    check_report "$tmp/$name.json" "$mode" "$what"
    check_report "$tmp/$name.child.json" "$mode,child" "$what: the forked child's report"
    # Whether dlclose and dlopen gave b a's addresses, the case that a
    # stale cache would get wrong: the loader's choice, which the test
    # cannot force; without it the test ends as a skip, not a pass.
    grep -q '^ready reused' "$tmp/$name.out" ||
        not_built "$what: libbylib_loaded_b.so mapped where a was"
}

run_batch env objects "REGIONALLOC_TAG_BY=library" \
    env LD_PRELOAD="$lib" REGIONALLOC_TAG_BY=library \
    REGIONALLOC_STATS="$tmp/env.json" REGIONALLOC_STATS_FORMAT=json "$d/bylib_main"
run_batch run objects "run --by-library" \
    "$ra" run --no-shm --by-library --report="$tmp/run.json" --format json -- "$d/bylib_main"
run_batch workers workers "run --by-library --thread-tags=bylib-worker=workers" \
    "$ra" run --no-shm --by-library --thread-tags=bylib-worker=workers \
    --report="$tmp/workers.json" --format json -- "$d/bylib_main"

# No tag left after libraries and two objects': the others share libraries,
# and the report says how many.
expect_status 0 "REGIONALLOC_MAX_TAGS=3" env REGIONALLOC_MAX_TAGS=3 \
    "$ra" run --no-shm --by-library --report="$tmp/shared.json" --format json \
    -- "$d/bylib_main" "$d" "$tmp/shared.child.json" </dev/null &&
    check_report "$tmp/shared.json" shared "REGIONALLOC_MAX_TAGS=3: the objects share libraries"

# shows_objects WHAT CMD...: CMD's table names libraries and each object's tag.
shows_objects() {
    local what=$1 name ok=1
    shift
    if ! "$@" >"$tmp/table.txt" 2>&1; then
        fail "$what: $(head -3 "$tmp/table.txt")"
        return
    fi
    for name in libraries libraries/bylib_main libraries/libbylib_linked.so \
        libraries/libbylib_cxx.so libraries/libbylib_loaded_a.so \
        libraries/libbylib_loaded_b.so; do
        # A whole name: "libraries " is the parent's row, not a child's.
        grep -qE -- "(^| )${name//./\\.}( |\$)" "$tmp/table.txt" && continue
        fail "$what: no $name in: $(head -c 900 "$tmp/table.txt")"
        ok=0
    done
    [ "$ok" = 0 ] || echo "ok: $what names libraries and the objects' tags"
}

# -- report PID and top, live -----------------------------------------------------------
mkfifo "$tmp/in"
"$ra" run --by-library -- "$d/bylib_main" "$d" "$tmp/live.child.json" \
    <"$tmp/in" >"$tmp/live.out" 2>"$tmp/live.err" &
pid=$!
exec 3>"$tmp/in" # the program holds its bytes until this ends
for ((i = 0; i < 100; i++)); do
    grep -q '^ready' "$tmp/live.out" && break
    sleep 0.1
done
if ! grep -q '^ready' "$tmp/live.out"; then
    fail "run --by-library, live: not ready: $(head -5 "$tmp/live.err")"
else
    # The segment is published once a second: wait for one with the
    # objects' tags, then check what report PID reads from it.
    for ((i = 0; i < 50; i++)); do
        "$ra" report "$pid" --format json >"$tmp/live.json" 2>"$tmp/report.err" &&
            python3 "$srcdir/tests/by_library_check.py" "$tmp/live.json" objects,live "$d" \
                >/dev/null 2>&1 && break
        sleep 0.2
    done
    check_report "$tmp/live.json" objects,live "report $pid --format json"
    shows_objects "report $pid (text)" "$ra" report "$pid"
    shows_objects "top --once --tree $pid" "$ra" top --once --tree "$pid"
fi
exec 3>&-
wait "$pid"
rc=$?
pid=
[ "$rc" = 0 ] || fail "run --by-library, live: exit $rc: $(head -5 "$tmp/live.err")"

finish

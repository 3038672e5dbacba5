#!/bin/bash
# Builds libregionalloc and runs the whole test suite: the Check suites and
# shell tests, a second pass under UBSan, a third with the invariants
# checked (--enable-debug), the suites whose threads share
# state (threads, hooks, http, the threaded cases of lifetime and limit,
# the return stacks and the pool's binding) under ThreadSanitizer, a build
# with --disable-override and --without-http,
# cppcheck, a smoke run of the benchmarks, and make distcheck. Builds out of tree in build/, build-ubsan/,
# build-debug/, build-tsan/ and build-nooverride/; safe to run repeatedly.
# JOBS (default: number of CPUs) sets make's parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}

. scripts/deps.sh
ra_install_deps

step() { printf '\n=== %s\n' "$*"; }

# Prints the logs of failed tests (test-suite.log collects them).
show_failures() {
    local dir=$1
    if [ -f "$dir/test-suite.log" ]; then
        cat "$dir/test-suite.log"
    else
        cat "$dir"/tests/*.log 2>/dev/null || true
    fi
}

# An in-tree configure makes every VPATH build fail ("source directory
# already configured"); refuse instead of guessing what to delete.
if [ -f config.status ] || [ -f Makefile ]; then
    echo "test.sh: the source tree was configured in place; run 'make distclean'" >&2
    echo "test.sh: here first (builds go to build*/ directories)." >&2
    exit 1
fi

step "bootstrap"
./bootstrap

step "build (build/, --enable-werror)"
mkdir -p build
(cd build && "$top/configure" --enable-werror)
make -C build -j"$jobs"

step "make check"
make -C build -j"$jobs" check || { show_failures build; exit 1; }

step "make lint (cppcheck, man page)"
make -C build lint

step "bench smoke run: every benchmark program runs (no figure judged)"
# A twentieth of a twentieth of the work, one process, one round: the
# figures mean nothing, but a program that fails or is not built shows.
BENCH_SCALE=0.01 BENCH_ROUNDS=1 RA_SKIP_DEPS=1 \
    make -C build bench BENCH_ARGS=--quick >build/bench-smoke.txt
if grep -E '^  note: .*(failed|killed after|not built)' build/bench-smoke.txt; then
    echo "test.sh: a benchmark program failed (build/bench-smoke.txt)" >&2
    exit 1
fi

step "UBSan build and make check (build-ubsan/)"
mkdir -p build-ubsan
(cd build-ubsan && "$top/configure" --enable-ubsan --enable-werror)
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    make -C build-ubsan -j"$jobs" check || { show_failures build-ubsan; exit 1; }

step "debug build and make check (build-debug/): the invariants checked"
mkdir -p build-debug
(cd build-debug && "$top/configure" --enable-debug --enable-werror)
make -C build-debug -j"$jobs" check || { show_failures build-debug; exit 1; }

step "ThreadSanitizer build (build-tsan/): the suites whose threads share state"
mkdir -p build-tsan
(cd build-tsan && "$top/configure" --enable-tsan --disable-override \
    --enable-werror)
# suite[:case]: a whole suite, or the test case of it that runs threads.
tsan_runs=(check_threads check_hooks check_lifetime:threads check_limit:hard
    check_limit:soft check_http check_pool check_tree:race unit/check_returns
    unit/check_returns_stacks unit/check_outbox unit/check_pool:threads
    "check_lifetime:kept pages" "check_lifetime:own ids"
    check_lifetime:leftovers unit/check_leftovers check_stats:live
    "check_stats:live pool" check_stats:untagged)
# shellcheck disable=SC2046  # one target a word
make -C build-tsan -j"$jobs" $(printf 'tests/%s\n' "${tsan_runs[@]%%:*}" | sort -u)
for run in "${tsan_runs[@]}"; do
    suite=${run%%:*}
    case_env=()
    # An empty CK_RUN_CASE would run no case at all: set it only with one
    # (an array: a case's name may hold spaces).
    [ "$suite" != "$run" ] && case_env=("CK_RUN_CASE=${run#*:}")
    env TSAN_OPTIONS="suppressions=$top/tests/tsan.supp halt_on_error=1 die_after_fork=0" \
        CK_EXCLUDE_TAGS="multithreaded-fork exact-stderr" \
        "${case_env[@]}" \
        "build-tsan/tests/$suite" || {
        echo "test.sh: $run failed under ThreadSanitizer" >&2
        exit 1
    }
done

step "--disable-override --without-http build and make check (build-nooverride/)"
mkdir -p build-nooverride
(cd build-nooverride && "$top/configure" --disable-override --without-http \
    --enable-werror)
make -C build-nooverride -j"$jobs" check || {
    show_failures build-nooverride
    exit 1
}

step "make distcheck"
make -C build -j"$jobs" distcheck || {
    for d in build/libregionalloc-*/_build/sub; do
        [ -d "$d" ] && show_failures "$d"
    done
    exit 1
}

step "all tests passed"

#!/bin/bash
# Installs the Debian packages needed to build and test libregionalloc, only
# when one of them is missing (so it is a no-op on a prepared machine).
#
# Source it and call ra_install_build_deps (the demo) or ra_install_deps
# (the tests too), or run it directly (the latter).
# Honours RA_SKIP_DEPS=1 (never touch apt; just warn about what is missing).

# What building the library and running the demo need (scripts/demo.sh),
# as dpkg names (gcc, g++ and make come as build-essential). zlib1g-dev:
# the profiler's pprof output is gzip-compressed; libmicrohttpd-dev: the
# HTTP endpoints, libdw-dev: the profile's frames named with functions and
# lines (both optional to the build, installed so that they are there),
# python3-dev: the headers of the system's Python 3, for the Python module
# `regionalloc` that the build makes in bindings/python/.
RA_BUILD_CHECK=(gcc g++ make autoconf automake libtool pkg-config
                libjemalloc-dev zlib1g-dev libmicrohttpd-dev libdw-dev
                python3-dev)
# What the test command adds (scripts/test.sh, CI): Check for the suites,
# cppcheck for make lint, python3 to parse the JSON reports, prometheus for
# promtool and the scrape test, curl for the HTTP tests, gdb (a real program
# that names its threads) for the tags by thread name, git for make
# distcheck's tree, cargo and rustc for the Rust binding (Debian's 1.63,
# the crate's rust-version), strace to count the system calls that fail,
# chromium (and a font for its screenshots) to test the dashboard,
# /debug/regionalloc/, in a real browser, golang-go for `go tool pprof` on
# the profile's pprof output, binutils' strip for a binary without symbols,
# libc6-dbg (the C library's debug file, found by build ID) for its static
# functions' names, sqlite3 and redis-server (redis-tools' redis-cli fills
# it) for real programs whose parts the reports name, python3-numpy for the
# Python module's tests of numpy arrays' data counted in their tag.
RA_TEST_CHECK=(check cppcheck python3 prometheus curl gdb git cargo rustc
               strace chromium fonts-dejavu-core golang-go binutils libc6-dbg
               sqlite3 redis-server redis-tools python3-numpy)

# Prints those of the given packages that are not installed, one a line.
ra_missing_of() {
    local pkg status
    for pkg in "$@"; do
        status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
        case $status in
            ii*) ;;
            *) printf '%s\n' "$pkg" ;;
        esac
    done
}

# Installs the given packages with apt-get, through sudo when not root;
# honours RA_SKIP_DEPS=1. $1 says what they are for, in messages.
ra_apt_install() {
    local what=$1 sudo=()
    shift
    if [ "${RA_SKIP_DEPS:-0}" = 1 ]; then
        echo "deps: RA_SKIP_DEPS=1, not installing $what" >&2
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            echo "deps: not root and no sudo; install $what with:" >&2
            echo "  apt-get install $*" >&2
            return 1
        fi
    fi
    "${sudo[@]}" apt-get update &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "$@"
}

# Installs the given missing packages (checked with ra_missing_of) as one
# apt-get call; $1 says what they are for.
ra_install_missing() {
    local what=$1 missing
    shift
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "deps: not a Debian system (no dpkg-query); install by hand:" \
             "$*" >&2
        return 0
    fi
    missing=$(ra_missing_of "$@")
    [ -z "$missing" ] && return 0
    # shellcheck disable=SC2086  # one package a word, on one line
    echo "deps: missing Debian packages for $what:" $missing >&2
    # shellcheck disable=SC2086,SC2046
    ra_apt_install "$what" $(ra_install_names $missing)
}

# The packages to install for the missing ones given: the build tools come
# as build-essential.
ra_install_names() {
    local pkg
    for pkg in "$@"; do
        case $pkg in
            gcc | g++ | make) echo build-essential ;;
            *) echo "$pkg" ;;
        esac
    done | sort -u
}

# The demo: what building the library and running it needs.
ra_install_build_deps() {
    ra_install_missing "the build" "${RA_BUILD_CHECK[@]}"
}

# The test command: the build and the tests.
ra_install_deps() {
    ra_install_missing "the build and the tests" "${RA_BUILD_CHECK[@]}" \
        "${RA_TEST_CHECK[@]}"
}

# Optional, for bench/ only (`make bench`): the mimalloc contender and the
# heaptrack profiler run. Never installed by ra_install_deps, so the build,
# the tests and CI do not need them; bench/run.sh calls
# ra_install_bench_deps and skips what is still missing.
RA_BENCH_DEPS=(libmimalloc-dev heaptrack)

ra_install_bench_deps() {
    ra_install_missing "the optional bench packages" "${RA_BENCH_DEPS[@]}"
}

# Run directly: install.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    ra_install_deps
fi

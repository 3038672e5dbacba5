#!/bin/bash
# Installs the Debian packages needed to build and test libregionalloc, only
# when one of them is missing (so it is a no-op on a prepared machine).
#
# Source it and call ra_install_deps, or run it directly.
# Honours RA_SKIP_DEPS=1 (never touch apt; just warn about what is missing).

# Packages whose presence is checked; dpkg names. python3 parses the JSON
# reports in make check (tests/test_indexer.sh, tests/test_formats.sh);
# prometheus brings promtool, which test_formats.sh needs to validate the
# Prometheus reports (without it the test fails in CI, skips elsewhere);
# zlib1g-dev: the profiler's pprof output is gzip-compressed.
RA_DEPS_CHECK=(gcc g++ make autoconf automake libtool pkg-config
               libjemalloc-dev zlib1g-dev check cppcheck python3 prometheus)
# What is installed when any of them is missing.
RA_DEPS_INSTALL=(build-essential autoconf automake libtool pkg-config
                 libjemalloc-dev zlib1g-dev check cppcheck python3 git
                 prometheus)

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

ra_missing_deps() {
    ra_missing_of "${RA_DEPS_CHECK[@]}"
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

ra_install_deps() {
    local missing
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "deps: not a Debian system (no dpkg-query); install by hand:" \
             "${RA_DEPS_INSTALL[*]}" >&2
        return 0
    fi
    missing=$(ra_missing_deps)
    [ -z "$missing" ] && return 0
    # shellcheck disable=SC2086  # one package a word, on one line
    echo "deps: missing Debian packages:" $missing >&2
    ra_apt_install "the build and test packages" "${RA_DEPS_INSTALL[@]}"
}

# Optional, for bench/ only (`make bench`): the mimalloc contender and the
# heaptrack profiler run. Never installed by ra_install_deps, so the build,
# the tests and CI do not need them; bench/run.sh calls
# ra_install_bench_deps and skips what is still missing.
RA_BENCH_DEPS=(libmimalloc-dev heaptrack)

ra_install_bench_deps() {
    local missing
    command -v dpkg-query >/dev/null 2>&1 || return 0
    missing=$(ra_missing_of "${RA_BENCH_DEPS[@]}")
    [ -z "$missing" ] && return 0
    # shellcheck disable=SC2086  # one package a word
    echo "deps: optional bench packages missing:" $missing >&2
    # shellcheck disable=SC2086
    ra_apt_install "the optional bench packages" $missing
}

# Run directly: install.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    ra_install_deps
fi

# shellcheck shell=bash
# tests/testlib.sh: what the shell tests share, sourced by each right after
# `set -u`. Sets builddir (the build tree: make check passes
# abs_top_builddir), failures and missing; defines fail, skip, lacking,
# not_built, need, need_built, make_tmp, expect_status, end_processes,
# reset_env and finish. Not a test itself.

# shellcheck disable=SC2034  # read by the tests that source this
builddir=${abs_top_builddir:-${top_builddir:-$(pwd)}}

# fail MESSAGE...: reports one failed check and counts it; the test goes on.
failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# skip MESSAGE...: the whole test cannot run here; exits 77 (automake's skip).
skip() {
    echo "SKIP: $*"
    exit 77
}

# lacking WHAT PACKAGE: something a check needs is not installed (Debian
# package PACKAGE); in CI that is a failure (exit 1), elsewhere the check
# is not run and the test ends as a skip (finish), never as a pass.
missing=
lacking() {
    if [ "${CI:-}" = true ]; then
        echo "FAIL: $1 not installed (Debian package $2; scripts/deps.sh installs it)"
        exit 1
    fi
    echo "SKIP: $1 not installed (Debian: apt-get install $2)"
    missing="$missing $1"
}

# not_built WHAT: the build leaves out what a check needs (a configure
# option): the check is not run, and the test ends as a skip (finish).
not_built() {
    echo "SKIP: $1 (not in this build)"
    missing="$missing $1"
}

# need PROGRAM PACKAGE: whether PROGRAM is installed; when it is not,
# lacking says so.
need() {
    if command -v "$1" >/dev/null 2>&1; then
        return 0
    fi
    lacking "$1" "$2"
    return 1
}

# need_built PROGRAM [WHY]: exits 1 unless PROGRAM, a part of the build the
# test runs, is there.
need_built() {
    if [ ! -x "$1" ]; then
        echo "FAIL: $1 not built${2:+ ($2)}"
        exit 1
    fi
}

# make_tmp NAME: a scratch directory in $tmp, removed at exit.
make_tmp() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
    trap 'rm -rf "$tmp"' EXIT
}

# expect_status WANT WHAT CMD...: runs CMD, its output in $tmp/out and
# $tmp/err; fails (saying WHAT) unless it exits with status WANT.
expect_status() {
    local want=$1 what=$2 rc
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" = "$want" ] || {
        fail "$what: exit $rc, expected $want: $(head -3 "$tmp/err")"
        return 1
    }
}

# start_example_server NAME [ENV=VALUE...] -- [ARGS...]: runs $server
# (examples/server) on a port of the kernel's choice, its output in
# $tmp/NAME.out and .err; sets server_pid and url (http://127.0.0.1:PORT),
# or fails and returns 1 when it never says where it serves.
start_example_server() {
    local name=$1 i envs=()
    shift
    while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    [ "$#" -gt 0 ] && shift
    : >"$tmp/$name.out" # before the server's shell opens it, for the sed below
    # shellcheck disable=SC2154 # $server: the calling test's
    env "${envs[@]}" "$server" --listen 127.0.0.1:0 "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" &
    server_pid=$!
    url=
    for ((i = 0; i < 200; i++)); do
        url=$(sed -n '1s|^serving \(http://[^/]*\)/metrics$|\1|p' "$tmp/$name.out")
        [ -n "$url" ] && return 0
        sleep 0.1
    done
    fail "$name: the server did not say where it serves: $(cat "$tmp/$name.err")"
    return 1
}

# end_processes PID...: asks each of the test's background processes to
# end (SIGTERM) and waits for them, whatever became of them.
end_processes() {
    local p
    for p in "$@"; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in "$@"; do
        wait "$p" 2>/dev/null
    done
}

# reset_env: the library's own variables at their defaults, apart from what
# a run sets.
reset_env() {
    unset REGIONALLOC REGIONALLOC_MAX_TAGS REGIONALLOC_REGION_SIZE \
        REGIONALLOC_STATS REGIONALLOC_STATS_FORMAT REGIONALLOC_CHECKPOINTS \
        REGIONALLOC_PROF REGIONALLOC_PROF_DUMP REGIONALLOC_LIMITS
}

# finish: the exit status of a test that counts with fail and need: 1 if a
# check failed, 77 if every check ran passed but some could not run for a
# missing tool, else 0.
finish() {
    if [ "$failures" != 0 ]; then
        echo "$failures checks failed"
        exit 1
    fi
    if [ -n "$missing" ]; then
        echo "SKIP: the rest passed, but not checked without:$missing"
        exit 77
    fi
    echo "all checks passed"
    exit 0
}

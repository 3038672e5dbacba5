#!/bin/bash
# The dashboard (GET /debug/regionalloc/) in a real browser: Debian's
# headless Chromium, driven over the DevTools protocol by
# tests/dashboard_check.py (with the system's /usr/bin/python3), loads the
# dashboard from examples/server and checks what it shows with JavaScript
# off and live (see dashboard_check.py);
# then again with 300 tags more (--many), of which it lists 50.
# The screenshots are kept when DASHBOARD_SHOTS names a directory. Run by make
# check with abs_top_builddir set.
# Exit status: 0 pass, 1 fail, 77 skip (a tool missing outside CI).
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
server=$builddir/examples/server
checks=${abs_top_srcdir:-$(dirname "${BASH_SOURCE[0]}")/..}/tests/dashboard_check.py
need_built "$server"
need chromium chromium || exit 77
need /usr/bin/python3 python3 || exit 77

reset_env
export LC_ALL=C
make_tmp test_dashboard
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT

# start_server NAME [ENV=VALUE...] -- ARGS...: start_example_server, as
# $pid; ends the test when the server never says where it serves.
start_server() {
    local rc=0
    start_example_server "$@" || rc=1
    pid=$server_pid
    [ "$rc" = 0 ] || finish
}

# fake_cgroup DIR MAX: a cgroupfs in DIR of one cgroup, the process's own
# (its "0::" line), of 5 GiB (4 GiB anon, 1 GiB file) and memory.max MAX,
# for the figures beside the bar of the process's parts
# (REGIONALLOC_CGROUP_FS). Without a cgroup v2 line the process is in none.
fake_cgroup() {
    local own
    own=$(sed -n 's/^0:://p' /proc/self/cgroup)
    [ -n "$own" ] || return 0
    mkdir -p "$1$own" && touch "$1/cgroup.controllers" &&
        echo 5368709120 >"$1$own/memory.current" &&
        printf 'anon 4294967296\nfile 1073741824\n' >"$1$own/memory.stat" &&
        echo "$2" >"$1$own/memory.max"
}
fake_cgroup "$tmp/cgroupfs" 8589934592
fake_cgroup "$tmp/cgroupfs-max" max

# The sessions pass their soft limit at once, the workers reach their hard
# one (their allocations then fail, which the workers take in their stride);
# the memory limit is the environment's, not the cgroup's.
# --binary-names: a tag whose name is not UTF-8, with a child, and the
# UTF-8 name that JSON reads the first as.
start_server server REGIONALLOC_THREAD_TAGS='worker-*=workers' \
    REGIONALLOC_LIMITS='sessions=48M/4M,workers=3M' \
    REGIONALLOC_MEMORY_LIMIT=64G REGIONALLOC_CGROUP_FS="$tmp/cgroupfs" -- --binary-names

# Three samples for the chart before the browser comes.
for ((i = 0; i < 100; i++)); do
    grep -q '"seq": 3,' <(curl -s "$url/debug/regionalloc/history") && break
    sleep 0.2
done

shots=${DASHBOARD_SHOTS:-$tmp}
mkdir -p "$shots"
/usr/bin/python3 "$checks" "$url" "$shots" || fail "the dashboard in Chromium: see above"
kill -0 "$pid" 2>/dev/null || fail "the server died: $(cat "$tmp/server.err")"
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null

# Hundreds of tags: the dashboard lists the 50 largest and rolls the others up.
start_server many REGIONALLOC_MAX_TAGS=400 REGIONALLOC_CGROUP_FS="$tmp/cgroupfs-max" -- --many 300
/usr/bin/python3 "$checks" "$url" "$shots" --many || fail "the dashboard of 300 tags in Chromium: see above"
kill -0 "$pid" 2>/dev/null || fail "the server with --many died: $(cat "$tmp/many.err")"
finish

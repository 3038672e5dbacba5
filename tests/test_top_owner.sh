#!/bin/bash
# Segments of the wrong user (doc/shm.md, "Names"). Any local user can
# make a file under the name of another user's process's segment in the
# shared /dev/shm, and a dead process's file stays there when the system
# gives its pid to a process of another user. Such a file must not stand
# in for the process's segment, as read by root too: the readers refuse it
# (one line naming its owner and the process's), the list says so, and
# --clean leaves it to its owner, for whom it is stale. Nor may it keep the
# process from publishing: a process of another user (nobody) publishes
# under a fallback name, having removed the one a dead process of its own
# user left, and the readers show its own figures; a process of root's
# replaces the file. Needs root, to make files of other users. Run by make
# check with abs_top_builddir set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
top=$builddir/tools/regionalloc-top
tool=$builddir/tools/regionalloc
publisher=$builddir/tests/shm_publisher
need_built "$top"
need_built "$tool"
need_built "$publisher"

reset_env
unset REGIONALLOC_SHM REGIONALLOC_SHM_INTERVAL
export LC_ALL=C
[ "$(id -u)" = 0 ] || skip "not root: cannot make files of other users"
if [ ! -d /dev/shm ] || [ ! -w /dev/shm ]; then
    skip "no writable /dev/shm"
fi
need python3 python3 || finish
need setpriv util-linux || finish

nobody=65534
other=12345 # a third user, who owns no process
make_tmp test_top_owner
chmod 755 "$tmp"
started=
planted=
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    local p
    # shellcheck disable=SC2086 # a list of pids
    end_processes $started
    for p in $planted; do
        rm -f "/dev/shm/regionalloc.$p" "/dev/shm/regionalloc.$p".??????
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

# What nobody runs: copies it can reach, whatever the build tree's modes.
mkdir "$tmp/bin"
if [ -x "$builddir/tests/.libs/shm_publisher" ]; then
    cp "$builddir/tests/.libs/shm_publisher" "$builddir"/.libs/libregionalloc.so* \
        "$tmp/bin/"
else
    cp "$publisher" "$tmp/bin/"
fi
cp "$top" "$tmp/bin/"
chmod -R a+rX "$tmp/bin"
as_nobody=(setpriv "--reuid=$nobody" "--regid=$nobody" --clear-groups
    env LD_LIBRARY_PATH="$tmp/bin")

# plant FILE PID UID: a valid segment of pid PID in FILE, owned by UID, whose
# one tag, "planted", holds 777777 bytes.
plant() {
    python3 - "$@" <<'EOF' || fail "cannot plant $1"
import os, struct, sys
path, pid, uid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
HEADER = "=8sIIIIQiIQQQQ16Q16QQ64s240x"
RECORD = "=II64s16QII48x"
assert struct.calcsize(HEADER) == 640 and struct.calcsize(RECORD) == 256
header = struct.pack(HEADER, b"RAllocS\0", 3, 640, 256, 4, 10, pid, 1,
                     100000000, 5, 1, 1, *([0] * 32), 0, b"")
record = struct.pack(RECORD, 1, 1, b"planted", *([777777] + [0] * 15), 0, 1)
with open(path, "wb") as f:
    f.write(header + record + bytes(3 * 256))
os.chown(path, uid, uid)
EOF
}

# start_held NAME CMD...: starts CMD in the background as $pid, held until
# release NAME, so that files can be planted under its pid before it runs.
start_held() {
    local name=$1
    shift
    mkfifo "$tmp/$name.go"
    (
        read -r _ <"$tmp/$name.go"
        exec "$@"
    ) >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pid=$!
    started="$started $pid"
}
release() {
    echo >"$tmp/$1.go"
}

# published PID: waits (a minute at most: a loaded machine is slow, not
# broken) until the segment of PID, read as the readers find it, shows the
# publisher's cache tag.
published() {
    local i
    for ((i = 0; i < 600; i++)); do
        "$tool" report --format prometheus "$1" 2>/dev/null |
            grep -q '^regionalloc_tag_allocated_bytes{tag="cache"}' && return 0
        sleep 0.1
    done
    fail "$1: its own figures never showed: $(cat "$tmp"/*.err)"
    return 1
}

# -- the readers -----------------------------------------------------------------
# A file of nobody's under the name of a live process of root's.
sleep 600 &
victim=$!
started="$started $victim"
mkdir -m 1777 "$tmp/planted"
plant "$tmp/planted/regionalloc.$victim" "$victim" "$nobody"
refusal="$tmp/planted/regionalloc.$victim: owned by uid $nobody, not by the user of process $victim (uid 0): not its segment"
for mode in --once --json; do
    expect_status 1 "a file of another user ($mode)" \
        "$top" "$mode" --dir "$tmp/planted" "$victim"
    [ "$(cat "$tmp/err")" = "regionalloc-top: $refusal" ] ||
        fail "$mode: said '$(cat "$tmp/err")'"
    grep -q planted "$tmp/out" && fail "$mode: shows the planted figures"
done
expect_status 1 "a file of another user (prometheus)" \
    "$tool" report --format prometheus --dir "$tmp/planted" "$victim"
[ "$(cat "$tmp/err")" = "regionalloc: $refusal" ] ||
    fail "prometheus: said '$(cat "$tmp/err")'"
grep -q planted "$tmp/out" && fail "prometheus: shows the planted figures"
expect_status 0 "the list with a file of another user" "$top" --dir "$tmp/planted"
grep -Eq "^ *$victim .*\(owned by uid $nobody, .*: not its segment\)$" "$tmp/out" ||
    fail "the list: $(cat "$tmp/out")"
# For its owner, it is stale: the pid is another user's process's now.
expect_status 0 "--clean, root" "$top" --clean --dir "$tmp/planted"
grep -q "^kept $tmp/planted/regionalloc.$victim: stale, but another user's$" \
    "$tmp/out" || fail "--clean, root: $(cat "$tmp/out")"
expect_status 0 "--clean, nobody" "${as_nobody[@]}" "$tmp/bin/regionalloc-top" \
    --clean --dir "$tmp/planted"
grep -q "^removed $tmp/planted/regionalloc.$victim (process $victim is uid 0's)$" \
    "$tmp/out" || fail "--clean, nobody: $(cat "$tmp/out")"

# -- a publisher of nobody's -----------------------------------------------------
# Another user's file under its name, and the fallback a dead process of
# nobody's with the same pid left.
start_held nobody "${as_nobody[@]}" REGIONALLOC_SHM=1 REGIONALLOC_SHM_INTERVAL=100ms \
    "$tmp/bin/shm_publisher" 600
p=$pid
planted="$planted $p"
plant "/dev/shm/regionalloc.$p" "$p" "$other"
plant "/dev/shm/regionalloc.$p.AAAAAA" "$p" "$nobody"
release nobody
if published "$p"; then
    grep -q "no stats segment" "$tmp/nobody.err" &&
        fail "nobody's publisher: $(cat "$tmp/nobody.err")"
    [ -e "/dev/shm/regionalloc.$p.AAAAAA" ] &&
        fail "nobody's publisher kept the fallback a dead process left"
    mine=$(find /dev/shm -maxdepth 1 -name "regionalloc.$p.??????" -user $nobody)
    [ "$(echo "$mine" | wc -w)" = 1 ] || fail "nobody's fallbacks: '$mine'"
    expect_status 0 "report of nobody's publisher" \
        "$tool" report --format prometheus "$p"
    grep -q '^regionalloc_tag_allocated_bytes{tag="cache"} 8388608$' "$tmp/out" ||
        fail "report: not the publisher's figures: $(head -5 "$tmp/out")"
    grep -q planted "$tmp/out" && fail "report: the planted figures"
    expect_status 0 "top --once of nobody's publisher" "$top" --once "$p"
    grep -Eq '^cache +8\.0 MiB ' "$tmp/out" || fail "--once: $(cat "$tmp/out")"
    expect_status 0 "the list" "$top"
    [ "$(grep -Ec "^ *$p " "$tmp/out")" = 1 ] || fail "the list: $p not once"
    grep -Eq "^ *$p +shm_publisher +3 +9\.1 MiB " "$tmp/out" ||
        fail "the list: $(grep -E "^ *$p " "$tmp/out")"
    kill -TERM "$p"
    wait "$p"
    [ -e "$mine" ] && fail "nobody's publisher left $mine at exit"
fi
[ -f "/dev/shm/regionalloc.$p" ] || fail "the other user's file went"

# -- a publisher of root's -------------------------------------------------------
# It replaces the file of nobody's under its name.
start_held root env REGIONALLOC_SHM=1 REGIONALLOC_SHM_INTERVAL=100ms \
    "$publisher" 600
p=$pid
planted="$planted $p"
plant "/dev/shm/regionalloc.$p" "$p" "$nobody"
release root
if published "$p"; then
    [ "$(stat -c %u "/dev/shm/regionalloc.$p")" = 0 ] ||
        fail "root's publisher did not take its name"
    expect_status 0 "report of root's publisher" \
        "$tool" report --format prometheus "$p"
    grep -q planted "$tmp/out" && fail "root's report: the planted figures"
fi

finish

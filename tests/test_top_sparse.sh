#!/bin/bash
# Planted sparse segments (doc/shm.md, "Trust nothing"). A file that costs
# its maker nothing (a header, then ftruncate) can claim a million records,
# sixteen million, or the 4000 a library may write without any of them
# written. Every reader (regionalloc-top's table, JSON and list, and
# regionalloc report's Prometheus text) must refuse each with exit status 1
# and one line naming the check, in small bounded memory: its peak resident
# set stays within 8 MiB of its peak on a small good segment (the most a
# library writes is 1 MiB of records), and it fills none of the file's
# holes (tmpfs gives a hole that is read a page of its own). The files are
# in a directory of the test's own in /dev/shm, the tmpfs segments live in.
# Run by make check with abs_top_builddir set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
top=$builddir/tools/regionalloc-top
tool=$builddir/tools/regionalloc
need_built "$top"
need_built "$tool"

reset_env
export LC_ALL=C
if [ ! -d /dev/shm ] || [ ! -w /dev/shm ]; then
    skip "no writable /dev/shm"
fi
need python3 python3 || finish
tmp=$(mktemp -d /dev/shm/regionalloc-test-sparse.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT

# Each case is a directory holding one file, regionalloc.<this shell's
# pid> (a live process of the file's user).
python3 - "$tmp" "$$" <<'EOF' || { fail "cannot plant the segments"; finish; }
import os, struct, sys
root, pid = sys.argv[1], int(sys.argv[2])
HEADER = "=8sIIIIQiIQQQQ16Q16QQ64s240x"
RECORD = "=II64s16QII48x"
assert struct.calcsize(HEADER) == 640 and struct.calcsize(RECORD) == 256
def header(capacity, nrecords):
    return struct.pack(HEADER, b"RAllocS\0", 3, 640, 256, capacity, 10, pid,
                       nrecords, 100000000, 5, 1, 1, *([0] * 32), 0, b"")
def plant(case, data, size):
    os.makedirs(os.path.join(root, case))
    fd = os.open(os.path.join(root, case, "regionalloc.%d" % pid),
                 os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    os.ftruncate(fd, size)
    os.close(fd)
good = header(4, 2) + b"".join(
    struct.pack(RECORD, i + 1, 1, b"tag%d" % i, *([4096] + [0] * 15), 0, 1)
    for i in range(2)) + bytes(2 * 256)
plant("good", good, len(good))
for case, n in (("million", 1000000), ("sixteen-million", 16000000),
                ("unwritten", 4000)):
    plant(case, header(n, n), 640 + 256 * n)
plant("headless", b"", 640 + 256 * 4000)
EOF

# peak CMD...: runs CMD, its output in $tmp/out and $tmp/err; prints its
# peak resident set in KiB, then its exit status.
peak() {
    python3 -c '
import resource, subprocess, sys
with open(sys.argv[1], "wb") as out, open(sys.argv[2], "wb") as err:
    rc = subprocess.call(sys.argv[3:], stdout=out, stderr=err)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)
' "$tmp/out" "$tmp/err" "$@"
}

# read_case CASE MODE: runs the reader MODE names on CASE's directory.
read_case() {
    local dir=$tmp/$1
    case $2 in
    once) peak "$top" --once --dir "$dir" "$$" ;;
    json) peak "$top" --json --dir "$dir" "$$" ;;
    list) peak "$top" --dir "$dir" ;;
    prometheus) peak "$tool" report --format prometheus --dir "$dir" "$$" ;;
    esac
}

modes="once json list prometheus"
base=0
for mode in $modes; do
    read -r kib rc < <(read_case good "$mode")
    [ "$rc" = 0 ] || fail "good ($mode): exit $rc: $(cat "$tmp/err")"
    [ "$kib" -gt "$base" ] && base=$kib
done
echo "peak on a good segment: $base KiB"

# check_planted CASE WHY: every reader refuses CASE with one line saying
# WHY, within the bound, and the file's blocks stay as many.
check_planted() {
    local file=$tmp/$1/regionalloc.$$ blocks mode kib rc
    blocks=$(stat -c %b "$file")
    for mode in $modes; do
        read -r kib rc < <(read_case "$1" "$mode")
        echo "$1 ($mode): exit $rc, peak $kib KiB"
        [ "$rc" = 1 ] || fail "$1 ($mode): exit $rc, expected 1"
        [ "$(wc -l <"$tmp/err")" = 1 ] ||
            fail "$1 ($mode): not one line on stderr: $(head -c 300 "$tmp/err")"
        grep -Eq "^regionalloc(-top)?: $file: .*$2" "$tmp/err" ||
            fail "$1 ($mode): message '$(cat "$tmp/err")' does not say '$2'"
        [ "$kib" -le $((base + 8192)) ] ||
            fail "$1 ($mode): peak resident set $kib KiB, more than $base + 8192"
    done
    [ "$(stat -c %b "$file")" = "$blocks" ] ||
        fail "$1: the readers filled holes: $blocks blocks, now $(stat -c %b "$file")"
}
check_planted million "capacity 1000000 exceeds 4000, the most records a library writes"
check_planted sixteen-million "capacity 16000000 exceeds 4000"
check_planted unwritten "a hole where its 4000 records in use should be: never written"
check_planted headless "a hole where its header should be: never written"

finish

#!/bin/bash
# Runs ordinary programs with LD_PRELOAD=libregionalloc.so and without it:
# stdout, stderr and exit status must be the same. Also checks that
# REGIONALLOC_STATS=stderr prints the per-tag report of a preloaded program,
# and REGIONALLOC_CHECKPOINTS=stderr its checkpoint table.
# Exit status: 0 pass, 1 fail, 77 skip (no shared library built).
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
lib=$builddir/.libs/libregionalloc.so
[ -f "$lib" ] || skip "$lib not found (static-only build?)"

make_tmp test_preload

# The baseline and the preloaded run see the same environment apart from
# LD_PRELOAD; the library's own variables are left at their defaults.
reset_env
export LC_ALL=C PYTHONHASHSEED=0

ran=0

# compare NAME COMMAND...: runs COMMAND twice, plain and preloaded, and
# compares what the two runs printed and returned.
compare() {
    local name=$1 plain_rc preload_rc
    shift
    "$@" >"$tmp/plain.out" 2>"$tmp/plain.err"
    plain_rc=$?
    LD_PRELOAD=$lib "$@" >"$tmp/preload.out" 2>"$tmp/preload.err"
    preload_rc=$?
    ran=$((ran + 1))
    if [ "$plain_rc" != "$preload_rc" ]; then
        fail "$name: exit status $plain_rc plain, $preload_rc preloaded"
        sed 's/^/  preloaded stderr: /' "$tmp/preload.err" | head -n 20
        return
    fi
    if ! cmp -s "$tmp/plain.out" "$tmp/preload.out"; then
        fail "$name: stdout differs"
        diff "$tmp/plain.out" "$tmp/preload.out" | head -n 20
        return
    fi
    if ! cmp -s "$tmp/plain.err" "$tmp/preload.err"; then
        fail "$name: stderr differs"
        diff "$tmp/plain.err" "$tmp/preload.err" | head -n 20
        return
    fi
    if [ ! -s "$tmp/plain.out" ] && [ "$plain_rc" = 0 ]; then
        fail "$name: printed nothing, nothing was compared"
        return
    fi
    echo "ok: $name (exit $plain_rc, $(wc -c <"$tmp/plain.out") bytes)"
}

# 50,000 lines of pseudo-random words and numbers, the same on every run.
awk 'BEGIN {
    srand(42)
    for (i = 0; i < 50000; i++) {
        w = ""
        n = 3 + int(rand() * 12)
        for (j = 0; j < n; j++)
            w = w sprintf("%c", 97 + int(rand() * 26))
        printf "%s,%d,%.6f\n", w, int(rand() * 1000000), rand() * 1000
    }
}' >"$tmp/lines.txt" || { echo "FAIL: cannot generate input"; exit 1; }

if need sort coreutils; then
    compare "sort" sort "$tmp/lines.txt"
    compare "sort -t, -k2,2n -u" sort -t, -k2,2n -u "$tmp/lines.txt"
    compare "sort of a missing file" sort "$tmp/no-such-file"
fi

# The system's python3, as a Debian user runs it: not one that PATH finds
# first (a position-independent build, say), since Debian's executable
# differs in what matters here (it is not position-independent and takes
# malloc's address).
if need /usr/bin/python3 python3; then
    compare "/usr/bin/python3 dict/list work" /usr/bin/python3 -c '
import hashlib, sys
words = {}
for i in range(200000):
    key = "k%d" % ((i * 7919) % 150001)
    words.setdefault(key, []).append(i)
items = sorted((k, len(v), sum(v)) for k, v in words.items())
blob = "\n".join("%s %d %d" % t for t in items).encode()
big = [bytes(range(256)) * (i % 64 + 1) for i in range(3000)]
print(len(items), hashlib.sha256(blob).hexdigest())
print(sum(len(b) for b in big), hashlib.sha256(b"".join(big)).hexdigest())
with open(sys.argv[1]) as f:
    print(hashlib.sha256(f.read().encode()).hexdigest())
' "$tmp/lines.txt"
fi

if need git git; then
    compare "git --version" git --version
    compare "git hash-object" git hash-object "$tmp/lines.txt"
fi

# Pipelines run with pipefail, so that a stage that fails under the
# library fails the run; no stage stops reading early (head would make
# sort's exit status depend on timing).
if need awk gawk && need seq coreutils; then
    compare "bash pipeline" bash -o pipefail -c \
        'seq 1 100000 | awk "{ s += \$1 * \$1 } END { print s }" | tr 0-9 a-j &&
         cut -d, -f1 "$1" | sort | uniq -c | sort -rn | sed -n 1,20p' \
        bash "$tmp/lines.txt"
fi

if [ -d /usr/include ]; then
    compare "ls -la /usr/include | wc -l" bash -o pipefail -c \
        'ls -la /usr/include | wc -l'
fi

# report_check NAME EXPECTED_STDOUT_FILE COMMAND...: runs COMMAND preloaded
# with REGIONALLOC_STATS=stderr; the per-tag report must be on stderr and
# stdout must be what the program prints anyway.
report_check() {
    local name=$1 expected=$2 rc
    shift 2
    ran=$((ran + 1))
    REGIONALLOC_STATS=stderr LD_PRELOAD=$lib "$@" \
        >"$tmp/report.out" 2>"$tmp/report.err"
    rc=$?
    if [ "$rc" != 0 ]; then
        fail "$name: exited with $rc"
    elif ! grep -q "^untagged " "$tmp/report.err"; then
        fail "$name: no per-tag report on stderr"
        sed 's/^/  stderr: /' "$tmp/report.err" | head -n 20
    elif ! cmp -s "$expected" "$tmp/report.out"; then
        fail "$name: the report changed stdout"
    else
        echo "ok: $name; the report:"
        sed 's/^/  /' "$tmp/report.err"
    fi
}

# bash leaves through exit(), so destructors run (dash calls _exit).
echo hello >"$tmp/hello.txt"
report_check "REGIONALLOC_STATS=stderr (bash)" "$tmp/hello.txt" \
    bash -c 'echo hello'

# GNU coreutils close stdout and stderr in an atexit handler (gnulib's
# close_stdout), which runs before shared-library destructors: a report
# written to fd 2 from a destructor is lost unless the library kept its own
# descriptor for it.
if need sort coreutils; then
    sort "$tmp/lines.txt" >"$tmp/sorted.txt"
    report_check "REGIONALLOC_STATS=stderr (sort, closes stderr at exit)" \
        "$tmp/sorted.txt" sort "$tmp/lines.txt"
fi

# A preloaded program takes no checkpoint of its own: the table still has
# the row the library adds at exit, with the whole run's peak RSS.
if need sort coreutils; then
    ran=$((ran + 1))
    REGIONALLOC_CHECKPOINTS=stderr LD_PRELOAD=$lib sort "$tmp/lines.txt" \
        >"$tmp/cp.out" 2>"$tmp/cp.err"
    rc=$?
    if [ "$rc" != 0 ]; then
        fail "REGIONALLOC_CHECKPOINTS=stderr (sort): exited with $rc"
    elif ! head -n 1 "$tmp/cp.err" | grep -q "^ *phase  *elapsed .* peak_rss  *checkpoint$" ||
        ! sed -n 2p "$tmp/cp.err" | grep -q "  exit$"; then
        fail "REGIONALLOC_CHECKPOINTS=stderr (sort): no checkpoint table on stderr"
        sed 's/^/  stderr: /' "$tmp/cp.err" | head -n 20
    elif ! cmp -s "$tmp/sorted.txt" "$tmp/cp.out"; then
        fail "REGIONALLOC_CHECKPOINTS=stderr (sort): the table changed stdout"
    else
        echo "ok: REGIONALLOC_CHECKPOINTS=stderr (sort); the table:"
        sed 's/^/  /' "$tmp/cp.err"
    fi
fi

echo "$ran checks run"
finish

#!/bin/bash
# `regionalloc run` gives a Python program PYTHONMALLOC=malloc, so that
# its objects' blocks are malloc's, the library's, rather than pymalloc's
# arenas; checked with the system's /usr/bin/python3:
#   - it reaches python3 found on PATH, /usr/bin/python3 and the file it
#     links to (python3.11), a symbolic link of another name, a copy of
#     the interpreter under another name (an ELF that exports
#     Py_BytesMain), a program that embeds Python (gdb links libpython3),
#     scripts whose #! line names python3, directly, through env and
#     through env -S, and env running python3 (options, NAME=VALUE first);
#   - not /bin/sh, a non-Python ELF (printenv), env running sh, nor a
#     Python that a shell starts; run --help says so; the user's PYTHONMALLOC (pymalloc, or empty) is kept; not
#     set when the interpreter's own options ignore the environment (-E,
#     -I, -IS, -Es, in a #! line too), but set when -E is the script's;
#     malloc_debug in the development mode (-X dev, PYTHONDEVMODE), whose
#     debug hooks stay on;
#   - the program's stderr and exit status are byte for byte those of the
#     same program run without run, and with the user's own PYTHONMALLOC;
#   - an empty, garbage, truncated or corrupted file (an ELF whose tables
#     point out of the file, a FIFO) named as the program fails as it did
#     without the feature, exec's error, and run does not crash or hang;
#   - it matters: a million small objects are a million of the library's
#     mallocs (its report's nmalloc) and pymalloc has no arena, where with
#     PYTHONMALLOC=pymalloc they are neither.
# Exit status: 0 pass, 1 fail, 77 skip.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
ra=$builddir/tools/regionalloc
py=/usr/bin/python3
need_built "$ra"
[ -e "$builddir/.libs/libregionalloc.so" ] || skip "shared library not built"
[ -x "$py" ] || skip "$py not installed (Debian: apt-get install python3)"
make_tmp test_run_python
reset_env
unset LD_PRELOAD PYTHONMALLOC PYTHONDEVMODE REGIONALLOC_THREAD_TAGS \
    REGIONALLOC_HTTP REGIONALLOC_SHM
export LC_ALL=C PATH=/usr/bin:/bin
show='import os; print(repr(os.environ.get("PYTHONMALLOC")))'
real=$(readlink -f "$py")

# check WANT WHAT CMD...: CMD's output (its last line) is WANT.
check() {
    local want=$1 what=$2 got
    shift 2
    got=$("$@" 2>"$tmp/err" | tail -1)
    if [ "$got" = "$want" ]; then
        echo "ok: $what: $got"
    else
        fail "$what: PYTHONMALLOC $got, want $want ($(head -c 300 "$tmp/err"))"
    fi
}

# script NAME LINE: an executable script $tmp/NAME with that #! line that
# prints its PYTHONMALLOC.
script() {
    printf '#!%s\n%s\n' "$2" "$show" >"$tmp/$1"
    chmod +x "$tmp/$1"
}

# -- which program is Python -------------------------------------------------------
check "'malloc'" "python3 on PATH" "$ra" run -- python3 -c "$show"
check "'malloc'" "$py" "$ra" run -- "$py" -c "$show"
check "'malloc'" "$real" "$ra" run -- "$real" -c "$show"
ln -s "$py" "$tmp/interp"
check "'malloc'" "a link named interp" "$ra" run -- "$tmp/interp" -c "$show"
cp "$real" "$tmp/interp-copy"
check "'malloc'" "a copy named interp-copy (exports Py_BytesMain)" \
    "$ra" run -- "$tmp/interp-copy" -c "$show"
mkdir "$tmp/bin"
ln -s "$py" "$tmp/bin/app"
check "'malloc'" "a link found on PATH" env PATH="$tmp/bin:$PATH" "$ra" run -- app -c "$show"
script direct "$py"
check "'malloc'" "#!$py" "$ra" run -- "$tmp/direct"
# Named env: a script all the same, not taken for env itself.
script env '/usr/bin/env python3'
check "'malloc'" "#!/usr/bin/env python3" "$ra" run -- "$tmp/env"
script split '/usr/bin/env -S python3 -u'
check "'malloc'" "#!/usr/bin/env -S python3 -u" "$ra" run -- "$tmp/split"
if need gdb gdb; then
    check "'malloc'" "gdb (links libpython3)" "$ra" run -- gdb -nx -batch -ex "python $show"
fi
# shellcheck disable=SC2016 # expanded by the program's shell
check unset "/bin/sh" "$ra" run -- /bin/sh -c 'echo "${PYTHONMALLOC-unset}"'
# printenv prints LC_ALL, then PYTHONMALLOC when it is set: its last line
# is C only when run ran it and left PYTHONMALLOC unset.
check C "a non-Python ELF (printenv)" env LC_ALL=C "$ra" run -- /usr/bin/printenv LC_ALL PYTHONMALLOC
check "'malloc'" "env python3" "$ra" run -- env python3 -c "$show"
check None "env -u X FOO=1 python3 -E" "$ra" run -- /usr/bin/env -u X FOO=1 python3 -E -c "$show"
# shellcheck disable=SC2016 # expanded by the program's shell
check unset "env sh" "$ra" run -- env sh -c 'echo "${PYTHONMALLOC-unset}"'
check None "python3 started by a shell" "$ra" run -- /bin/sh -c "$py -c '$show'"

if "$ra" run --help | grep -q 'PYTHONMALLOC=malloc'; then
    echo "ok: run --help says so"
else
    fail "run --help does not mention PYTHONMALLOC=malloc"
fi

# -- what the user and the interpreter's options say ------------------------------
check "'pymalloc'" "PYTHONMALLOC=pymalloc kept" env PYTHONMALLOC=pymalloc "$ra" run -- "$py" -c "$show"
check "''" "PYTHONMALLOC= kept" env PYTHONMALLOC= "$ra" run -- "$py" -c "$show"
for opts in -E -I -IS -Es "-W ignore -E" "-Xutf8 -I" "-bE"; do
    # shellcheck disable=SC2086 # the options, one a word
    check None "$py $opts" "$ra" run -- "$py" $opts -c "import os; print(os.environ.get('PYTHONMALLOC'))"
done
check "'malloc'" "-E after -c is the script's" "$ra" run -- "$py" -c "$show" -E
check "'malloc'" "-WE: -W's value" "$ra" run -- "$py" -WE -c "$show"
check "'malloc'" "-cE...: the command" "$ra" run -- "$py" "-c$show" -E
script isolated "$py -I"
check None "#!$py -I" "$ra" run -- "$tmp/isolated"
script split_e '/usr/bin/env -S python3 -E'
check None "#!/usr/bin/env -S python3 -E" "$ra" run -- "$tmp/split_e"
hooks='import os, _testcapi; print(os.environ.get("PYTHONMALLOC"), _testcapi.pymem_getallocatorsname())'
if "$py" -c 'import _testcapi' 2>/dev/null; then
    check "malloc_debug malloc_debug" "-X dev: malloc with the debug hooks" "$ra" run -- "$py" -X dev -c "$hooks"
    check "malloc_debug malloc_debug" "PYTHONDEVMODE=1" env PYTHONDEVMODE=1 "$ra" run -- "$py" -c "$hooks"
    check "malloc malloc" "no development mode" "$ra" run -- "$py" -c "$hooks"
else
    lacking "python3's _testcapi" libpython3-testsuite
fi

# -- the program's stderr and status, unchanged ----------------------------------------
prog='import sys, warnings; print(repr(__import__("os").environ.get("PYTHONMALLOC")))
warnings.warn("a warning"); sys.stderr.write("a line\n"); 1/0'
"$py" -c "$prog" >"$tmp/plain.out" 2>"$tmp/plain.err"
plain=$?
"$ra" run -- "$py" -c "$prog" >"$tmp/run.out" 2>"$tmp/run.err"
rc=$?
PYTHONMALLOC=pymalloc "$ra" run -- "$py" -c "$prog" >"$tmp/kept.out" 2>"$tmp/kept.err"
kept=$?
if [ "$(cat "$tmp/run.out")" = "'malloc'" ] && [ $rc = "$plain" ] && [ $kept = "$plain" ] &&
    cmp -s "$tmp/plain.err" "$tmp/run.err" && cmp -s "$tmp/plain.err" "$tmp/kept.err"; then
    echo "ok: stderr ($(wc -c <"$tmp/run.err") bytes) and status $rc, as without run"
else
    fail "stderr or status changed: $plain/$rc/$kept, $(cat "$tmp/run.out"); diff: $(diff "$tmp/plain.err" "$tmp/run.err" | head -5)"
fi

# -- files that are no program ---------------------------------------------------------
# corrupt NAME OFFSET BYTES: a copy of the interpreter, BYTES (printf's
# escapes) written at OFFSET, not executable: run reads it all the same,
# and exec refuses it (status 126).
corrupt() {
    cp "$real" "$tmp/$1"
    # shellcheck disable=SC2059 # BYTES are printf escapes
    printf "$3" | dd of="$tmp/$1" bs=1 seek="$2" conv=notrunc status=none ||
        fail "corrupt $1: cannot write at $2"
    chmod 644 "$tmp/$1"
}
# The file offsets of the interpreter's dynamic section and GNU hash table.
read -r dynamic gnu_hash < <("$py" - "$real" <<'EOF'
import struct, sys
with open(sys.argv[1], "rb") as f:
    data = f.read()
phoff, = struct.unpack_from("<Q", data, 32)
phnum, = struct.unpack_from("<H", data, 56)
ph = [struct.unpack_from("<IIQQQQ", data, phoff + 56 * i) for i in range(phnum)]
dyn = next(p[2] for p in ph if p[0] == 2)
tags = dict(struct.unpack_from("<qQ", data, dyn + 16 * i) for i in range(64))
addr = tags[0x6ffffef5]
print(dyn, next(p[2] + addr - p[3] for p in ph if p[0] == 1 and p[3] <= addr < p[3] + p[5]))
EOF
)
# Without them the corrupted copies below would be plain copies, which
# pass whatever run does.
case "$dynamic.$gnu_hash" in
*[!0-9.]* | .* | *.) fail "no dynamic section or GNU hash table found in $real" ;;
esac
: >"$tmp/empty"
head -c 1000 /dev/zero | tr '\0' 'x' >"$tmp/garbage"
head -c 64 "$real" >"$tmp/header-only"
head -c 4096 "$real" >"$tmp/truncated-4k"
head -c $((dynamic + 24)) "$real" >"$tmp/truncated-dynamic"
# What exec does not refuse is run by the shell, as execvp does; the
# truncated copies would be run until they crash, so exec refuses them.
chmod 755 "$tmp/empty" "$tmp/garbage" "$tmp/header-only"
chmod 644 "$tmp/truncated-4k" "$tmp/truncated-dynamic"
corrupt phnum 56 '\377\377'
corrupt phoff 32 '\377\377\377\377\377\377\377\177'
corrupt dynamic-far $((dynamic + 8)) '\377\377\377\377\377\377\377\177'
corrupt no-buckets "$gnu_hash" '\0\0\0\0'
corrupt symoffset-0 $((gnu_hash + 4)) '\0\0\0\0'
corrupt huge-bloom $((gnu_hash + 8)) '\377\377\377\377'
mkfifo "$tmp/fifo"
chmod 755 "$tmp/fifo"
for f in empty garbage header-only truncated-4k truncated-dynamic phnum phoff \
    dynamic-far no-buckets symoffset-0 huge-bloom fifo; do
    # In $tmp: the shell that runs what exec does not refuse may write
    # files named after the garbage it reads (make distcheck's build tree
    # must stay clean).
    (cd "$tmp" && timeout 20 "$ra" run -- "$tmp/$f" </dev/null \
        >"$tmp/bad.out" 2>"$tmp/bad.err")
    rc=$?
    (cd "$tmp" && PYTHONMALLOC=pymalloc timeout 20 "$ra" run -- "$tmp/$f" \
        </dev/null >"$tmp/was.out" 2>"$tmp/was.err")
    was=$?
    if [ $rc = $was ] && [ $rc -lt 128 ] && cmp -s "$tmp/bad.err" "$tmp/was.err"; then
        echo "ok: $f: status $rc, as before: $(head -1 "$tmp/bad.err")"
    else
        fail "$f: status $rc (before: $was): $(head -c 300 "$tmp/bad.err")"
    fi
done

# -- it matters: a million objects, a million of the library's mallocs -----------------
# mallocs PYTHONMALLOC: the sum of nmalloc over the tags and untagged in
# the report at exit of a program that makes a million small objects.
mallocs() {
    env ${1:+PYTHONMALLOC=$1} "$ra" run --report="$tmp/r.json" --format json -- \
        "$py" -c 'x = [object() for i in range(1000000)]' &&
        "$py" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(sum(t["nmalloc"] for t in d["tags"]) + d["untagged"]["nmalloc"])' "$tmp/r.json"
}
# arenas PYTHONMALLOC: pymalloc's arenas in sys._debugmallocstats().
arenas() {
    env ${1:+PYTHONMALLOC=$1} "$ra" run -- "$py" -c 'import sys; sys._debugmallocstats()' 2>&1 |
        grep -c 'arenas allocated total'
}
if [ "${RA_OVERRIDE:-1}" = 1 ]; then
    n=$(mallocs "")
    k=$(mallocs pymalloc)
    if [ "${n:-0}" -ge 1000000 ] && [ "${k:-0}" -gt 0 ] && [ "$k" -lt 1000000 ]; then
        echo "ok: a million objects: $n of the library's mallocs ($k with pymalloc)"
    else
        fail "a million objects: ${n:-no report} of the library's mallocs, want >= 1000000 (${k:-no report} with pymalloc, want fewer)"
    fi
    n=$(arenas "")
    k=$(arenas pymalloc)
    if [ "$n" = 0 ] && [ "$k" = 1 ]; then
        echo "ok: no pymalloc arena under run (one report of them with pymalloc)"
    else
        fail "pymalloc's arenas under run: $n reports, want 0 ($k with pymalloc, want 1)"
    fi
else
    not_built "the library as malloc (built with --disable-override)"
fi
finish

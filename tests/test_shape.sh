#!/bin/bash
# The shape check (scripts/shape.sh, run by make lint): the source tree
# passes it; in a small tree of planted files, a C file of 601 lines (in
# tools/ and in bindings/python/), a function of 61 (in src/ and in
# bindings/python/), an internal.h of 401, a design document of 900 and a
# state floor with too few assertions each fail it with a line of their
# own, naming the file, the line and the figure; a table of 70 lines (both
# ways the house writes one), a function of 60, a file of 600 and an
# assertion-free file on a floor outside the state pass; a tree without the
# drawing is bad input.
# Run by make check with top_srcdir set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
srcdir=${top_srcdir:-}
[ -n "$srcdir" ] || skip "run by make check (top_srcdir unset)"
case $srcdir in
/*) ;;
*) srcdir=$builddir/$srcdir ;;
esac
check="$srcdir/scripts/shape.sh"

make_tmp shape

expect_status 0 "the source tree" "$BASH" "$check" "$srcdir" || cat "$tmp/out"
grep -q 'functions within 60.*assertions per 1,000 lines' "$tmp/out" ||
    fail "no summary on success: $(cat "$tmp/out")"

# lines N [TEXT]: N lines of TEXT (a statement by default).
lines() {
    local i
    for ((i = 0; i < $1; i++)); do
        echo "${2:-    x++;}"
    done
}

# The base tree: the real drawing in a short design document, a state
# file with 2 assertions in 20 lines (one ra__assert_held) and one in a
# comment that does not count, and small files elsewhere.
base=$tmp/base
mkdir -p "$base/src" "$base/tools" "$base/doc"
{
    echo "Calls go down."
    echo
    awk '/Calls go down/ { seen = 1; next }
         seen && /^```/ { print; if (inblock) exit; inblock = 1; next }
         inblock' "$srcdir/doc/design.md"
} > "$base/doc/design.md"
{
    echo "/* Floor: pairs. Planted by test_shape.sh. */"
    echo "/* ra__assert(x) in a comment is not an assertion. */"
    echo "static int x;"
    echo "void"
    echo "checked(void)"
    echo "{"
    echo "    ra__assert(x >= 0);"
    echo "    if (x) ra__assert_held(&x);"
    lines 11
    echo "}"
} > "$base/src/pair.c"
[ "$(wc -l < "$base/src/pair.c")" = 20 ] || fail "pair.c is not 20 lines"
{ echo "/* Floor: region. Planted. */"; lines 9 "/* */"; } > "$base/src/region.c"
{ echo "/* Prototypes. */"; lines 9 "/* */"; } > "$base/src/internal.h"
{ echo "/* A tool. */"; lines 599 "/* */"; } > "$base/tools/tool.c"

# shape NAME: copies the base tree to tmp/NAME (its path in $t), for a plant.
shape() {
    t=$tmp/$1
    cp -R "$base" "$t"
}

# function FILE NAME BODY: appends a function of BODY lines to FILE.
function_of() {
    { echo "static int"; echo "$2(void)"; echo "{"; lines "$3"; echo "}"; } >> "$1"
}

# expect NAME MESSAGE: the check of tmp/NAME exits 1 and says, of the
# violations, MESSAGE only.
expect() {
    local out rc
    out=$("$BASH" "$check" "$tmp/$1" 2>&1)
    rc=$?
    [ "$rc" = 1 ] || fail "$1: exit $rc, not 1: $out"
    case $out in
    *"shape: $2"*) ;;
    *) fail "$1: \"$2\" is not said: $out" ;;
    esac
    if [ "$(echo "$out" | grep -c -v '^shape:   ')" != 2 ] ||
        ! echo "$out" | grep -q '^shape: 1 violations$'; then
        fail "$1: more than its violation is said: $out"
    fi
}

# The base passes; 600 lines in a file, 60 in a function are within.
out=$("$BASH" "$check" "$base" 2>&1) || fail "the planted base: $out"
echo "$out"
case $out in
*"4 C files within 600"*"1 functions within 60"*"100.0 assertions per 1,000 lines (2 in 20)"*) ;;
*) fail "the base's figures: $out" ;;
esac

# A C file of 601 lines.
shape big
echo "/* one more */" >> "$t/tools/tool.c"
expect big "tools/tool.c:601: 601 lines, at most 600"

# The Python module's files are C files too: one of 601 lines, and a
# function of 61 lines in its header.
shape binding
mkdir -p "$t/bindings/python"
{ echo "/* A module. */"; lines 600 "/* */"; } > "$t/bindings/python/module.c"
expect binding "bindings/python/module.c:601: 601 lines, at most 600"
shape binding_function
mkdir -p "$t/bindings/python"
function_of "$t/bindings/python/module.h" too_long 61
expect binding_function "bindings/python/module.h:2: function too_long, 61 lines, at most 60"

# A function of 61 lines, beside one of 60.
shape long
{ echo "/* Floor: region. Planted. */"; echo "static int x;"; } > "$t/src/long.c"
function_of "$t/src/long.c" within 60
function_of "$t/src/long.c" too_long 61
expect long "src/long.c:68: function too_long, 61 lines, at most 60"

# Tables of 70 lines, written both ways: not functions.
shape table
{
    echo "/* Floor: region. Planted. */"
    echo "static const int numbers[] = {"
    lines 70 "    1,"
    echo "};"
    echo "static const struct { int a; } pairs[] ="
    echo "{"
    lines 70 "    { 1 },"
    echo "};"
} > "$t/src/table.c"
out=$("$BASH" "$check" "$t" 2>&1) ||
    fail "tables of 70 lines count as functions: $out"

# internal.h of 401 lines, and region.c of 501.
shape header
lines 391 "/* */" >> "$t/src/internal.h"
expect header "src/internal.h:401: 401 lines, at most 400"
shape region
lines 491 "/* */" >> "$t/src/region.c"
expect region "src/region.c:501: 501 lines, at most 500"

# The design document at 900 lines; 899 pass.
shape design
n=$(wc -l < "$t/doc/design.md")
lines $((899 - n)) "Text." >> "$t/doc/design.md"
"$BASH" "$check" "$t" > "$tmp/out" 2>&1 || fail "a design of 899 lines: $(cat "$tmp/out")"
echo "Text." >> "$t/doc/design.md"
expect design "doc/design.md:900: 900 lines, fewer than 900"

# A file of 400 lines on the budgets floor, without an assertion: 2 in 420
# lines. The same on the backend floor, outside the state, passes.
shape sparse
{ echo "/* Floor: backend. Planted. */"; lines 399 "/* */"; } > "$t/src/outside.c"
"$BASH" "$check" "$t" > "$tmp/out" 2>&1 ||
    fail "a file outside the state counts: $(cat "$tmp/out")"
{ echo "/* Floor: budgets. Planted. */"; lines 399 "/* */"; } > "$t/src/sparse.c"
expect sparse "the state floor: 4.8 assertions per 1,000 lines (2 in 420, 2 files), at least 10"
"$BASH" "$check" "$t" 2>&1 | grep -q '^shape:   src/sparse.c: 0 assertions in 400 lines, 0.0 per 1,000$' ||
    fail "the sparse file's own figure is not printed"

# Bad input: no drawing, no tree.
shape nodrawing
echo "# no drawing" > "$t/doc/design.md"
expect_status 2 "no drawing" "$BASH" "$check" "$t"
grep -q 'no floors between' "$tmp/err" || fail "no drawing: not said: $(cat "$tmp/err")"
expect_status 2 "no tree" "$BASH" "$check" "$tmp/none"
expect_status 2 "no argument" "$BASH" "$check"
grep -q '^usage: shape.sh' "$tmp/err" || fail "no argument: no usage: $(cat "$tmp/err")"

finish

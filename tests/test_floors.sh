#!/bin/bash
# The floor check (scripts/floors.sh, run by make lint): the library's own
# objects pass it; an up-call planted beside them fails it, naming the
# caller, the callee and the symbol, and so do two planted files that call
# each other and three that call each other round (a circle of any length
# fails, printed with one symbol per edge); a call within a floor and a call
# down pass; a file with no floor, or a floor the drawing lacks, is bad
# input.
# Run by make check with abs_top_builddir, top_srcdir and CC set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
srcdir=${top_srcdir:-}
case $srcdir in
/*) ;;
*) srcdir=$builddir/$srcdir ;;
esac
check="$srcdir/scripts/floors.sh"
design="$srcdir/doc/design.md"
cc=${CC:-cc}
export NM=${NM:-nm}

[ -n "${top_srcdir:-}" ] || skip "run by make check (top_srcdir unset)"
[ -f "$builddir/src/libregionalloc_core_la-region.lo" ] ||
    { echo "FAIL: the core's objects are not built"; exit 1; }

# The core's pairs, as make lint builds them.
pairs=()
for src in "$srcdir"/src/*.c "$srcdir"/src/*.cc; do
    base=$(basename "$src")
    obj="$builddir/src/libregionalloc_core_la-${base%.*}.lo"
    [ -f "$obj" ] && pairs+=("$src=$obj")
done
[ "${#pairs[@]}" -gt 20 ] || fail "only ${#pairs[@]} objects of the core found"

out=$("$BASH" "$check" "$design" "${pairs[@]}" 2>&1)
rc=$?
[ "$rc" = 0 ] || fail "the library's own objects: exit $rc: $out"
case $out in
*"none up, no circle"*) ;;
*) fail "no summary on success: $out" ;;
esac

make_tmp floors

# plant NAME FLOOR CALLS: tmp/NAME.c on FLOOR calling the function CALLS of
# the core (base floor: ra__init is first_use.c's), compiled to tmp/NAME.o.
plant() {
    printf '/* Floor: %s. Planted by test_floors.sh. */\n' "$2" > "$tmp/$1.c"
    printf 'extern int %s(void);\nint planted_%s(void) { return %s(); }\n' \
        "$3" "$1" "$3" >> "$tmp/$1.c"
    "$cc" -c -o "$tmp/$1.o" "$tmp/$1.c" || fail "cannot compile $1.c"
}

# An up-call from the bottom (OS) into the base floor.
plant up OS ra__init
out=$("$BASH" "$check" "$design" "${pairs[@]}" "$tmp/up.c=$tmp/up.o" 2>&1)
rc=$?
[ "$rc" = 1 ] || fail "a planted up-call: exit $rc, not 1: $out"
case $out in
*"up.c (OS) calls up into first_use.c (base): ra__init"*) ;;
*) fail "the planted up-call is not named: $out" ;;
esac
case $out in
*"1 up-calls in 1 file pairs"*) ;;
*) fail "the count is not 1 up-call: $out" ;;
esac

# calling NAME FLOOR CALLEE: tmp/NAME.c on FLOOR defining NAME and calling
# CALLEE, planted ones that the core does not define, compiled.
calling() {
    printf '/* Floor: %s. Planted. */\nextern int %s(void);\nint %s(void) { return %s(); }\n' \
        "$2" "$3" "$1" "$3" > "$tmp/$1.c"
    "$cc" -c -o "$tmp/$1.o" "$tmp/$1.c" || fail "cannot compile $1.c"
}

# Two files of one floor that call each other: a circle of two.
calling knot_a base knot_b
calling knot_b base knot_a
out=$("$BASH" "$check" "$design" "$tmp/knot_a.c=$tmp/knot_a.o" "$tmp/knot_b.c=$tmp/knot_b.o" 2>&1)
rc=$?
[ "$rc" = 1 ] || fail "a planted knot: exit $rc, not 1: $out"
case $out in
*"a circle: knot_a.c -(knot_b)-> knot_b.c -(knot_a)-> knot_a.c"*) ;;
*) fail "the planted knot is not named: $out" ;;
esac

# Three files of one floor that call each other round, beside the core's
# objects (none of whose pairs calls each other): a circle of three, every
# edge named by its symbol, and nothing else said to be in it.
calling round_a base round_b
calling round_b base round_c
calling round_c base round_a
out=$("$BASH" "$check" "$design" "${pairs[@]}" "$tmp/round_a.c=$tmp/round_a.o" \
    "$tmp/round_b.c=$tmp/round_b.o" "$tmp/round_c.c=$tmp/round_c.o" 2>&1)
rc=$?
[ "$rc" = 1 ] || fail "a planted circle of three: exit $rc, not 1: $out"
echo "$out" | grep -v '^floors: 1 circles$' | tee "$tmp/round.out"
case $out in
*"3 files call each other round (round_a.c round_b.c round_c.c); a circle: round_a.c -(round_b)-> round_b.c -(round_c)-> round_c.c -(round_a)-> round_a.c"*) ;;
*) fail "the planted circle of three is not named: $out" ;;
esac
[ "$(wc -l < "$tmp/round.out")" = 1 ] ||
    fail "more than the planted circle is reported: $out"
# Taken apart (round_c calls down instead of round), it passes.
calling round_c base ra__config
"$BASH" "$check" "$design" "${pairs[@]}" "$tmp/round_a.c=$tmp/round_a.o" \
    "$tmp/round_b.c=$tmp/round_b.o" "$tmp/round_c.c=$tmp/round_c.o" \
    > "$tmp/out" 2>&1 || fail "a chain of three calls fails: $(cat "$tmp/out")"

# A call down (from the lifecycle) and one within the floor pass.
plant down lifecycle ra__init
plant same base ra__init
"$BASH" "$check" "$design" "${pairs[@]}" "$tmp/down.c=$tmp/down.o" \
    "$tmp/same.c=$tmp/same.o" > "$tmp/out" 2>&1 ||
    fail "a call down or within a floor fails: $(cat "$tmp/out")"

# The order is the drawing's: swapped floors make the planted call go up.
sed 's/^ base /  xase /; s/^ OS /  base /' "$design" |
    sed 's/^  xase / OS /; s/^  base / base /' > "$tmp/swapped.md"
"$BASH" "$check" "$tmp/swapped.md" "$tmp/up.c=$tmp/up.o" \
    "$srcdir/src/first_use.c=$builddir/src/libregionalloc_core_la-first_use.lo" \
    > "$tmp/out" 2>&1
[ $? = 0 ] || fail "with OS drawn above base, OS calling base is down: $(cat "$tmp/out")"

# Bad input: a file with no floor, a floor not drawn, no drawing.
printf 'int planted_none(void) { return 0; }\n' > "$tmp/none.c"
"$cc" -c -o "$tmp/none.o" "$tmp/none.c"
"$BASH" "$check" "$design" "$tmp/none.c=$tmp/none.o" > "$tmp/out" 2>&1
[ $? = 2 ] || fail "a file with no floor: not exit 2: $(cat "$tmp/out")"
grep -q 'no "Floor:"' "$tmp/out" || fail "no floor: not said: $(cat "$tmp/out")"
plant odd attic ra__init
"$BASH" "$check" "$design" "$tmp/odd.c=$tmp/odd.o" > "$tmp/out" 2>&1
[ $? = 2 ] || fail "an undrawn floor: not exit 2: $(cat "$tmp/out")"
printf '# no drawing\n' > "$tmp/empty.md"
"$BASH" "$check" "$tmp/empty.md" "$tmp/up.c=$tmp/up.o" > "$tmp/out" 2>&1
[ $? = 2 ] || fail "no drawing: not exit 2: $(cat "$tmp/out")"
"$BASH" "$check" "$design" > "$tmp/out" 2>&1
[ $? = 2 ] || fail "no objects: not exit 2"

finish

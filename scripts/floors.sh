#!/bin/bash
# The floor check: calls only go down.
#
#   floors.sh doc/design.md SOURCE=OBJECT...
#
# OBJECT may be a libtool object (.lo): its PIC object is read, or its
# non-PIC one when it has none.
# The floors' order, top first, is the drawing under "Calls go down" in
# doc/design.md (the first fenced block after that line): each line that starts
# with one space and a word names a floor. A source file's floor is the
# first word after "Floor:" on its first line. Every symbol an object leaves
# undefined that another object of the list defines is a call from the one
# source to the other; it fails the check when the callee's floor is above
# the caller's. Calls within a floor are allowed, in one direction: two
# files that call each other (a knot) fail it too. Prints every up-call and
# knot and exits 1 if there is one, 2 on bad input, 0 otherwise.
set -euo pipefail

usage() { echo "usage: floors.sh doc/design.md SOURCE=OBJECT..." >&2; exit 2; }
[ $# -ge 2 ] || usage
design=$1
shift

NM=${NM:-nm}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The floors, top first, one per line.
awk '
	/Calls go down/ { seen = 1; next }
	seen && /^```/ { if (inblock) exit; inblock = 1; next }
	inblock && /^ [A-Za-z]+( |$)/ { print $1 }
' "$design" > "$tmp/order"
if [ ! -s "$tmp/order" ]; then
	echo "floors: no drawing under \"Calls go down\" in $design" >&2
	exit 2
fi

floor_rank() { # FLOOR: 1 for the top floor, empty when not drawn
	awk -v f="$1" '$1 == f { print NR; exit }' "$tmp/order"
}

: > "$tmp/files"   # source floor rank
: > "$tmp/defs"    # symbol source
: > "$tmp/uses"    # source symbol
bad=0
for pair in "$@"; do
	src=${pair%%=*}
	obj=${pair#*=}
	[ "$src" != "$pair" ] || usage
	case $obj in
	*.lo)
		o=$(sed -n "s/^pic_object='\(.*\)'$/\1/p" "$obj" 2>/dev/null || true)
		[ -n "$o" ] && [ "$o" != none ] ||
			o=$(sed -n "s/^non_pic_object='\(.*\)'$/\1/p" "$obj" 2>/dev/null || true)
		obj=$(dirname "$obj")/$o
		;;
	esac
	if [ ! -r "$src" ] || [ ! -f "$obj" ]; then
		echo "floors: cannot read $src or $obj" >&2
		exit 2
	fi
	floor=$(head -n 1 "$src" | sed -n 's/.*Floor: *\([A-Za-z]*\).*/\1/p')
	name=$(basename "$src")
	if [ -z "$floor" ]; then
		echo "floors: $name: no \"Floor:\" on its first line" >&2
		bad=1
		continue
	fi
	rank=$(floor_rank "$floor")
	if [ -z "$rank" ]; then
		echo "floors: $name: floor \"$floor\" is not in $design's drawing" >&2
		bad=1
		continue
	fi
	echo "$name $floor $rank" >> "$tmp/files"
	$NM -P -g --defined-only "$obj" |
		awk -v n="$name" '$2 != "U" && $2 != "w" && $2 != "v" { print $1, n }' >> "$tmp/defs"
	$NM -P -u "$obj" | awk -v n="$name" '{ print n, $1 }' >> "$tmp/uses"
done
[ "$bad" = 0 ] || exit 2

# Join each use with its definition and the two floors; print the up-calls.
awk '
	FILENAME == ARGV[1] { floor[$1] = $2; rank[$1] = $3; next }
	FILENAME == ARGV[2] { def[$1] = $2; next }
	{
		caller = $1; sym = $2
		if (!(sym in def)) next
		callee = def[sym]
		calls++
		if (!((caller " " callee) in edge))
			edge[caller " " callee] = sym
		if (rank[callee] < rank[caller]) {
			printf "floors: %s (%s) calls up into %s (%s): %s\n",
			    caller, floor[caller], callee, floor[callee], sym
			n++
			pairs[caller " " callee] = 1
		}
	}
	END {
		for (e in edge) {
			split(e, f, " ")
			if (f[1] < f[2] && ((f[2] " " f[1]) in edge)) {
				printf "floors: %s and %s call each other: %s, %s\n",
				    f[1], f[2], edge[e], edge[f[2] " " f[1]]
				knots++
			}
		}
		for (p in pairs) np++
		if (n || knots) {
			if (n)
				printf "floors: %d up-calls in %d file pairs\n", n, np
			if (knots)
				printf "floors: %d knots\n", knots
			exit 1
		}
		printf "floors: %d calls between the files, none up, no knot\n", calls
	}
' "$tmp/files" "$tmp/defs" "$tmp/uses"

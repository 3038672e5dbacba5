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
# the caller's. Calls within a floor are allowed, in one direction: any
# circle of calls between files, of any length, fails it too (a file in it
# calls, through the others, itself). Prints every up-call and one circle
# per knot of files that reach each other, and exits 1 if there is one, 2
# on bad input, 0 otherwise.
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

# Join each use with its definition and the two floors; print the up-calls,
# then every circle of calls between files: in each strongly connected
# component of the call graph (Tarjan), the shortest circle through its
# first file in name order, one symbol per edge.
awk '
	FILENAME == ARGV[1] { floor[$1] = $2; rank[$1] = $3; next }
	FILENAME == ARGV[2] { def[$1] = $2; next }
	{
		caller = $1; sym = $2
		if (!(sym in def)) next
		callee = def[sym]
		if (callee == caller) next
		calls++
		if (!((caller " " callee) in edge)) {
			edge[caller " " callee] = sym
			out[caller] = out[caller] " " callee
		} else if (sym < edge[caller " " callee]) {
			edge[caller " " callee] = sym
		}
		if (rank[callee] < rank[caller]) {
			printf "floors: %s (%s) calls up into %s (%s): %s\n",
			    caller, floor[caller], callee, floor[callee], sym
			n++
			pairs[caller " " callee] = 1
		}
	}
	# Tarjan: comp[v] is the component of v; ncomp counts them.
	function connect(v,    k, w, ws, nw) {
		index_[v] = low[v] = next_index++
		stack[++top] = v; on[v] = 1
		nw = split(out[v], ws, " ")
		for (k = 1; k <= nw; k++) {
			w = ws[k]
			if (!(w in index_)) {
				connect(w)
				if (low[w] < low[v]) low[v] = low[w]
			} else if ((w in on) && index_[w] < low[v]) {
				low[v] = index_[w]
			}
		}
		if (low[v] == index_[v]) {
			ncomp++
			do {
				w = stack[top--]; delete on[w]
				comp[w] = ncomp; size[ncomp]++
			} while (w != v)
		}
	}
	# The shortest circle from s back to s within its component (BFS).
	function circle(s,    q, head, tail, v, k, w, ws, nw, from, path, x) {
		head = 1; tail = 0; q[++tail] = s
		while (head <= tail) {
			v = q[head++]
			nw = split(out[v], ws, " ")
			for (k = 1; k <= nw; k++) {
				w = ws[k]
				if (comp[w] != comp[s]) continue
				if (w == s) {
					path = v " -(" edge[v " " s] ")-> " s
					for (x = v; x != s; x = from[x])
						path = from[x] " -(" edge[from[x] " " x] ")-> " path
					return path
				}
				if (!(w in from)) { from[w] = v; q[++tail] = w }
			}
		}
		return ""
	}
	END {
		for (e in edge) {
			split(e, f, " ")
			files[f[1]]; files[f[2]]
		}
		nf = 0
		for (v in files) names[++nf] = v
		# Sorted, so that the output does not depend on the order awk keeps.
		for (i = 2; i <= nf; i++)
			for (j = i; j > 1 && names[j - 1] > names[j]; j--) {
				t = names[j]; names[j] = names[j - 1]; names[j - 1] = t
			}
		for (i = 1; i <= nf; i++)
			if (!(names[i] in index_)) connect(names[i])
		for (i = 1; i <= nf; i++) {
			c = comp[names[i]]
			if (size[c] < 2 || (c in shown)) continue
			shown[c] = 1
			members = ""
			for (j = i; j <= nf; j++)
				if (comp[names[j]] == c)
					members = members (members == "" ? "" : " ") names[j]
			printf "floors: %d files call each other round (%s); a circle: %s\n",
			    size[c], members, circle(names[i])
			circles++
		}
		for (p in pairs) np++
		if (n || circles) {
			if (n)
				printf "floors: %d up-calls in %d file pairs\n", n, np
			if (circles)
				printf "floors: %d circles\n", circles
			exit 1
		}
		printf "floors: %d calls between the files, none up, no circle\n", calls
	}
' "$tmp/files" "$tmp/defs" "$tmp/uses"

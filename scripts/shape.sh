#!/bin/bash
# The shape check: files, functions and the design document within their
# sizes, and the state floor checked by assertions.
#
#   shape.sh [-v] TOP
#
# TOP is the source tree. The C files are src/*.c, src/*.cc, src/*.h,
# tools/*.c, tools/*.h, bindings/python/*.c and bindings/python/*.h. A function is a block from a "{" at column 0 to
# the next "}" at column 0, as the house style writes them; its length is
# the lines between the two. A block closed by "};" is a table (an array's
# or a struct's initialiser, or a type), not a function.
# The state floor's files are those whose first line names, after "Floor:",
# one of the state's sub-floors: the floors drawn under "Calls go down" in
# doc/design.md after the line that starts " ---- state", down to the floor
# named below_state here. A floor added inside the state is so counted with
# no change here; only the floor under the state is named.
# An assertion is a call of ra__assert or of a ra__assert_* (ra__assert_held,
# ...) that starts a statement, outside comments; ra__assert_fail, which the
# macro calls, is not one. The figure is over all the state's files
# together; -v, or a figure below the least, prints each file's too.
# Prints one line per violation (file:line and the figure; for a file, its
# first line over), exits 1 if there is one, 2 on bad input, 0 with a
# one-line summary otherwise.
set -euo pipefail

# The limits doc/design.md ("The floors") gives as rules; the only copy
# the check reads.
file_most=600           # lines of any C file ...
file_own="src/internal.h=400 src/region.c=500"  # ... but these
function_most=60        # lines of a function's body
design_under=900        # doc/design.md's lines are fewer
asserts_least=10        # assertions per 1,000 lines of the state floor
below_state=backend     # the first floor drawn under the state's

usage() { echo "usage: shape.sh [-v] TOP" >&2; exit 2; }
verbose=0
if [ "${1:-}" = -v ]; then
	verbose=1
	shift
fi
[ $# = 1 ] || usage
top=$1
design=$top/doc/design.md
if [ ! -d "$top/src" ] || [ ! -r "$design" ]; then
	echo "shape: $top has no src/ or no doc/design.md" >&2
	exit 2
fi

files=()
for f in "$top"/src/*.c "$top"/src/*.cc "$top"/src/*.h "$top"/tools/*.c "$top"/tools/*.h \
	"$top"/bindings/python/*.c "$top"/bindings/python/*.h; do
	[ -f "$f" ] && files+=("$f")
done
[ "${#files[@]}" -gt 0 ] || { echo "shape: no C files under $top" >&2; exit 2; }

# The state's sub-floors, one per line.
state=$(awk -v below="$below_state" '
	/Calls go down/ { seen = 1; next }
	seen && /^```/ { if (inblock) exit; inblock = 1; next }
	inblock && /^ -+ state/ { instate = 1; next }
	instate && /^ [A-Za-z]+( |$)/ { if ($1 == below) { found = 1; exit } print $1 }
	END { if (!found) exit 1 }
' "$design") || true
if [ -z "$state" ] || ! grep -q "^ $below_state\( \|$\)" "$design"; then
	echo "shape: $design: no floors between \" ---- state\" and \"$below_state\" in the drawing under \"Calls go down\"" >&2
	exit 2
fi
state_files=()
for f in "${files[@]}"; do
	floor=$(head -n 1 "$f" | sed -n 's/.*Floor: *\([A-Za-z]*\).*/\1/p')
	[ -n "$floor" ] && grep -qx "$floor" <<< "$state" && state_files+=("$f")
done
if [ "${#state_files[@]}" = 0 ]; then
	echo "shape: no file on the state's floors (${state//$'\n'/ })" >&2
	exit 2
fi

# One awk over every C file: the files' and the functions' lengths, then
# the state's files again for their assertions.
awk -v top="$top/" -v most="$file_most" -v own="$file_own" \
    -v fmost="$function_most" -v least="$asserts_least" -v verbose="$verbose" \
    -v design="$design" -v dunder="$design_under" -v nstate="${#state_files[@]}" '
	function rel(f) { return index(f, top) == 1 ? substr(f, length(top) + 1) : f }
	function file_done(f,    lim) {
		if (f == "") return
		lim = (rel(f) in limit) ? limit[rel(f)] : most
		if (lines > lim) {
			printf "shape: %s:%d: %d lines, at most %d\n", rel(f), lim + 1, lines, lim
			n++
		}
		nfiles++
	}
	BEGIN {
		k = split(own, o, " ")
		for (i = 1; i <= k; i++) {
			split(o[i], kv, "="); limit[kv[1]] = kv[2]
			owns = owns (i > 1 ? ", " : "") kv[1] " " kv[2]
		}
		pass = 1
	}
	pass == 1 && FNR == 1 { file_done(cur); cur = FILENAME; lines = 0; start = 0 }
	pass == 1 {
		lines++
		if (/^[A-Za-z_].*[A-Za-z0-9_]\(/ && start == 0) {
			s = $0; sub(/\(.*/, "", s); sub(/.*[^A-Za-z0-9_]/, "", s)
			name = s; nameline = FNR
		}
		if (/^\{/) {
			start = FNR
			table = (prev ~ /=[ \t]*$/)
			if (nameline == 0) { name = "?"; nameline = FNR }
		} else if (/^\}/ && start) {
			len = FNR - start - 1
			if (!table && !/^\};/) {
				nfunc++
				if (len > fmost) {
					printf "shape: %s:%d: function %s, %d lines, at most %d\n",
					    rel(FILENAME), nameline, name, len, fmost
					n++
				}
			}
			start = 0; nameline = 0
		} else if (/^[^ \t#\/*]/ && start == 0 && !/\(/) {
			nameline = 0
		}
		prev = $0
		next
	}
	# Pass 2: the state floor, comments taken out.
	FNR == 1 { sfile[++ns] = FILENAME; incomment = 0 }
	{
		slines[ns]++
		line = ""; s = $0
		while (s != "") {
			if (incomment) {
				i = index(s, "*/")
				if (!i) { s = ""; break }
				s = substr(s, i + 2); incomment = 0
			} else {
				i = index(s, "/*")
				if (!i) { line = line s; break }
				line = line substr(s, 1, i - 1) " "; s = substr(s, i + 2); incomment = 1
			}
		}
		while (match(line, /ra__assert[A-Za-z0-9_]*[ \t]*\(/)) {
			callee = substr(line, RSTART, RLENGTH); before = substr(line, 1, RSTART - 1)
			line = substr(line, RSTART + RLENGTH)
			sub(/[ \t]+$/, "", before)
			if (callee ~ /^ra__assert_fail/) continue
			if (before == "" && $0 ~ /^[ \t]/ || before ~ /[;{}):]$/ || before ~ /(^|[^A-Za-z0-9_])else$/)
				sasserts[ns]++
		}
	}
	END {
		file_done(cur)
		dl = 0
		while ((getline l < design) > 0) dl++
		if (dl >= dunder) {
			printf "shape: %s:%d: %d lines, fewer than %d\n", rel(design), dunder, dl, dunder
			n++
		}
		for (i = 1; i <= ns; i++) { tl += slines[i]; ta += sasserts[i] }
		per = tl ? ta * 1000 / tl : 0
		low = per < least
		if (low) {
			printf "shape: the state floor: %.1f assertions per 1,000 lines (%d in %d, %d files), at least %d\n",
			    per, ta, tl, ns, least
			n++
		}
		if (low || verbose)
			for (i = 1; i <= ns; i++)
				printf "shape:   %s: %d assertions in %d lines, %.1f per 1,000\n",
				    rel(sfile[i]), sasserts[i], slines[i], sasserts[i] * 1000 / slines[i]
		if (n) {
			printf "shape: %d violations\n", n
			exit 1
		}
		printf "shape: %d C files within %d lines (%s), %d functions within %d, the state floor %.1f assertions per 1,000 lines (%d in %d), %s %d lines\n",
		    nfiles, most, owns, nfunc, fmost, per, ta, tl, rel(design), dl
	}
' "${files[@]}" pass=2 "${state_files[@]}"

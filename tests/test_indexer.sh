#!/bin/bash
# Runs examples/indexer (the demo) on a small generated tree: the summary's
# counts against the tree's known identifiers, the checkpoint table's phases
# in order, the --json document (parsed with python3) against the bytes read,
# --untagged, and the errors. Run by make check with abs_top_builddir set.
# Exit status: 0 pass, 1 fail, 77 skip (python3 missing and CI not set; the
# other checks still run first).
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
indexer=$builddir/examples/indexer
need_built "$indexer"

reset_env
export LC_ALL=C

make_tmp test_indexer
# chmod first: rm cannot enter the unreadable directory.
trap 'chmod -R u+rwx "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# -- the tree -----------------------------------------------------------------
# Indexed identifiers and their counts: alpha 7, beta 4, d 3, delta 3,
# gamma 3, ALPHA_MAX 2, B_H 2, then c, epsilon, gamma2, main, s, t once each
# (13 distinct, 30 occurrences). Not indexed: comments, strings and character
# constants (L"delta" too), keywords, directive names, "defined" in #if, and
# <omega.h>.
tree=$tmp/tree
mkdir -p "$tree/sub/nested"
cat >"$tree/a.c" <<'EOF'
/* alpha alpha alpha: comments are not indexed
   beta beta */
#include <omega.h>
#include "omega.h"
#define ALPHA_MAX 10 // gamma in a line comment
static int alpha(int beta) { return beta + 1; }
int gamma = 0x1fUL, gamma2 = 1.5e-3;
struct delta { int alpha; };
const char *s = "alpha beta gamma", *t = L"delta";
char c = '\'';
int main(void)
{
    struct delta d;
    d.alpha = alpha(gamma) + ALPHA_MAX;
    return d.alpha + epsilon;
}
EOF
cat >"$tree/sub/nested/b.h" <<'EOF'
#ifndef B_H
#  define B_H
#if defined(alpha) && defined beta
extern int alpha, beta, gamma, delta;
#endif
#endif
EOF
: >"$tree/empty.c"
printf 'ab\0cd' >"$tree/sub/object.o"   # binary: skipped
mkfifo "$tree/sub/fifo"                 # special: skipped, never opened
ln -s a.c "$tree/link.c"                # not followed
ln -s .. "$tree/sub/loop"               # a loop, were it followed
files=3
bytes=$(($(wc -c <"$tree/a.c") + $(wc -c <"$tree/sub/nested/b.h")))
unreadable=0
if [ "$(id -u)" != 0 ]; then
    # Root reads everything; for anyone else these are skipped and counted.
    echo "alpha alpha" >"$tree/secret.c"
    chmod 000 "$tree/secret.c"
    mkdir "$tree/locked"
    echo "alpha" >"$tree/locked/hidden.c"
    chmod 000 "$tree/locked"
    unreadable=2
fi
skipped=$((unreadable + 4))
top='top identifiers: alpha 7, beta 4, d 3, delta 3, gamma 3'

# -- the text report ------------------------------------------------------------
out=$tmp/out
if ! "$indexer" "$tree" >"$out" 2>"$tmp/err"; then
    fail "indexer $tree exited with status $?"
    cat "$tmp/err"
fi
cat "$out"
summary="indexed $tree: $files files, $bytes bytes ($bytes B), $skipped skipped"
summary="$summary ($unreadable unreadable, 2 symlinks not followed, 1 special,"
summary="$summary 1 binary, 0 over --max-bytes)"
grep -qxF -- "$summary" "$out" || fail "no summary line '$summary'"
grep -qxF -- "$top" "$out" || fail "no line '$top'"
grep -qxF -- "117 tokens, 30 identifiers, 13 distinct" "$out" ||
    fail "token counts differ from '117 tokens, 30 identifiers, 13 distinct'"
[ -s "$tmp/err" ] && fail "stderr not empty: $(cat "$tmp/err")"
# The drop is a reset by default, and both times are said.
drop_line='^drop and purge: [0-9.]+ ms \(ra_tag_reset of source and tokens: [0-9.]+ ms, then ra_tag_purge of source and tokens: [0-9.]+ ms\)$'
grep -qE -- "$drop_line" "$out" || fail "no line matching '$drop_line'"

# The checkpoint rows, in phase order.
prev=0
for label in "after read" "after tokenize" "after index" "after drop" \
    "after purge"; do
    line=$(grep -n -- "$label\$" "$out" | head -n 1 | cut -d: -f1)
    if [ -z "$line" ]; then
        fail "no checkpoint row '$label'"
    elif [ "$line" -le "$prev" ]; then
        fail "checkpoint '$label' (line $line) out of order"
    else
        prev=$line
    fi
done

# -- --untagged -------------------------------------------------------------------
if ! "$indexer" --untagged "$tree" >"$tmp/untagged" 2>"$tmp/err"; then
    fail "indexer --untagged exited with status $?"
    cat "$tmp/err"
fi
grep -qxF -- "$top" "$tmp/untagged" || fail "--untagged: no line '$top'"
grep -q "after purge\$" "$tmp/untagged" || fail "--untagged: no 'after purge' row"
grep -qE '^drop and purge: .*\(free one block at a time: .*, then ra_purge_all: ' \
    "$tmp/untagged" || fail "--untagged: no drop line saying free and ra_purge_all"

# -- --drop=free ------------------------------------------------------------------
if ! "$indexer" --drop=free "$tree" >"$tmp/free" 2>"$tmp/err"; then
    fail "indexer --drop=free exited with status $?"
    cat "$tmp/err"
fi
grep -qxF -- "$top" "$tmp/free" || fail "--drop=free: no line '$top'"
grep -qE '^drop and purge: .*\(free one block at a time: .*, then ra_tag_purge of source and tokens: ' \
    "$tmp/free" || fail "--drop=free: no drop line saying free one at a time"

# -- errors and limits ------------------------------------------------------------
"$indexer" "$tmp/does-not-exist" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 2 ] || fail "nonexistent directory: exit $rc, expected 2"
grep -q "does-not-exist" "$tmp/err" || fail "nonexistent directory: no message"
"$indexer" "$tree/a.c" >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] || fail "a file as the directory: exit $rc, expected 2"
"$indexer" --max-bytes lots "$tree" >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] || fail "--max-bytes lots: exit $rc, expected 2"
"$indexer" --no-such-option >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] || fail "--no-such-option: exit $rc, expected 2"
"$indexer" --drop=sometimes "$tree" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 2 ] || fail "--drop=sometimes: exit $rc, expected 2"
grep -q "sometimes" "$tmp/err" || fail "--drop=sometimes: not named in the message"
"$indexer" --untagged --drop=reset "$tree" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 2 ] || fail "--untagged --drop=reset: exit $rc, expected 2"
"$indexer" --help >"$tmp/help" 2>&1 || fail "--help: exit $?"
grep -q -- "--untagged" "$tmp/help" || fail "--help does not describe --untagged"
# A budget of 10 bytes admits the empty file only.
if "$indexer" --max-bytes 10 "$tree" >"$tmp/budget" 2>&1; then
    grep -qF "indexed $tree: 1 files, 0 bytes" "$tmp/budget" ||
        fail "--max-bytes 10: $(grep indexed "$tmp/budget")"
    grep -q "2 over --max-bytes" "$tmp/budget" ||
        fail "--max-bytes 10: the two files are not counted as over budget"
else
    fail "--max-bytes 10: exit $?"
fi

# -- --json -------------------------------------------------------------------------
if ! "$indexer" --json "$tree" >"$tmp/json" 2>"$tmp/err"; then
    fail "indexer --json exited with status $?"
    cat "$tmp/err"
fi
grep -qxF -- "$top" "$tmp/err" || fail "--json: the summary is not on stderr"
if ! command -v python3 >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
        fail "python3 not found (needed to parse --json; CI=true)"
    elif [ "$failures" = 0 ]; then
        echo "SKIP: python3 not found, --json not parsed (other checks passed)"
        exit 77
    fi
else
    python3 - "$tmp/json" "$bytes" <<'EOF' || fail "--json: see above"
import json, sys

path, tree_bytes = sys.argv[1], int(sys.argv[2])
with open(path) as f:
    doc = json.load(f)  # one document, nothing else on stdout

problems = []
rows = doc["checkpoints"]
labels = [r["label"] for r in rows]
want = ["after read", "after tokenize", "after index", "after drop",
        "after purge"]
if labels != want:
    problems.append("labels %r, expected %r" % (labels, want))

# doc/json.md: "tags" lists every live tag once; element i of a
# checkpoint's "tag_allocated" is tag id i + 1's, for the ids handed out
# when it was taken.
position = {t["name"]: t["id"] - 1 for t in doc["tags"]}

def allocated(row, name):
    i = position[name]
    return row["tag_allocated"][i] if i < len(row["tag_allocated"]) else 0

by_label = dict(zip(labels, rows))
try:
    got = allocated(by_label["after read"], "source")
    if got < tree_bytes:
        problems.append("source allocated after read %d < %d bytes read"
                        % (got, tree_bytes))
    for label in ("after drop", "after purge"):
        for tag in ("source", "tokens"):
            got = allocated(by_label[label], tag)
            if got != 0:
                problems.append("%s allocated %s: %d, expected 0"
                                % (tag, label, got))
    if allocated(by_label["after purge"], "index") <= 0:
        problems.append("index allocated after purge is 0")
except KeyError as e:
    problems.append("missing key %s" % e)

for p in problems:
    print("FAIL: --json: " + p)
print("--json: %d checkpoints, labels %s" % (len(rows), labels))
sys.exit(1 if problems else 0)
EOF
fi

if [ "$failures" = 0 ]; then
    echo "PASS: indexer on a generated tree"
    exit 0
fi
echo "$failures failure(s)"
exit 1

#!/bin/bash
# The man page documents every public function: each is named in its NAME
# section and has an alias page (doc/man3/<name>.3, ".so man3/regionalloc.3")
# that the build installs, so that "man <function>" finds the page; and
# each alias resolves to the page (soelim, as man does). Run by make check
# with top_srcdir set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
srcdir=${top_srcdir:-.}
case $srcdir in
/*) ;;
*) srcdir=$(pwd)/$srcdir ;;
esac
page=$srcdir/doc/regionalloc.3
header=$srcdir/include/regionalloc.h
[ -f "$page" ] && [ -f "$header" ] || { echo "FAIL: no $page or $header"; exit 1; }

make_tmp test_man
mkdir -p "$tmp/man3"
cp "$page" "$srcdir"/doc/man3/*.3 "$tmp/man3/"

# The NAME section: from .SH NAME to the next .SH, as one line.
name_section=$(sed -n '/^\.SH NAME/,/^\.SH /p' "$page" | tr '\n' ' ')
functions=$(sed -n 's/^RA_EXPORT [^;(]*\b\(ra_[a-z][a-z_]*\)(.*/\1/p' "$header" | sort -u)
[ -n "$functions" ] || { echo "FAIL: no function found in $header"; exit 1; }

n=0
for f in $functions RA_TAG_SCOPE; do
    n=$((n + 1))
    printf '%s\n' "$name_section" | grep -Eq "(^|[ ,])$f([ ,]|$)" ||
        fail "$f is not in the NAME section of regionalloc(3)"
    alias=$tmp/man3/$f.3
    if [ ! -f "$alias" ]; then
        fail "$f has no alias page doc/man3/$f.3"
        continue
    fi
    if [ "$(cat "$alias")" != ".so man3/regionalloc.3" ]; then
        fail "doc/man3/$f.3 is not \".so man3/regionalloc.3\""
        continue
    fi
    if need soelim groff-base; then
        (cd "$tmp" && soelim "man3/$f.3") | grep -q '^\.TH REGIONALLOC 3' ||
            fail "man3/$f.3 does not resolve to regionalloc(3)"
    fi
done
echo "$n names checked"
finish

#!/bin/bash
# Frames named as a person reads them: tests/named_sites.c, built here as a
# user builds a program (-O1 -g, no -rdynamic: its static functions are in
# .symtab only), allocates from static functions, one inlined into its
# caller, one through the C library's strdup, and writes its profile. Then:
#   - the folded stacks and the text tree name every function with its
#     file and line (the lines the program prints), the inlined function
#     inside its caller, main, and strdup in the C library;
#   - with libc6-dbg installed (a debug file by build ID), the C library's
#     static __libc_start_call_main is named too;
#   - the same program stripped falls back to "named_sites+0x<offset>";
#   - `go tool pprof -top -lines` prints the names, with the source files'
#     full paths and lines, from the pprof output with the binary moved
#     away.
# Run by make check (CC, abs_top_builddir, top_srcdir, RA_LIBDW set).
# Exit status: 0 pass, 1 fail, 77 skip.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
srcdir=${abs_top_srcdir:-${top_srcdir:-}}
libdir=$builddir/.libs
[ "${RA_LIBDW:-1}" = 1 ] || skip "built --without-libdw: frames are named by dladdr"
[ -e "$libdir/libregionalloc.so" ] || skip "$libdir/libregionalloc.so not built"
[ "${RA_OVERRIDE:-1}" = 1 ] || skip "built with --disable-override: strdup's malloc is not ours"
case $srcdir in
/*) ;;
"") srcdir=$builddir ;;
*) srcdir=$(pwd)/$srcdir ;;
esac
need strip binutils || exit 77
need /usr/bin/python3 python3 || exit 77
make_tmp test_frame_names
reset_env
export LC_ALL=C

mkdir "$tmp/bin" "$tmp/out" "$tmp/stripped"
if ! ${CC:-cc} -O1 -g -I"$srcdir/include" -o "$tmp/bin/named_sites" \
    "$srcdir/tests/named_sites.c" -L"$libdir" -lregionalloc \
    -Wl,-rpath,"$libdir" 2>"$tmp/cc.err"; then
    fail "cannot build named_sites: $(cat "$tmp/cc.err")"
    finish
fi
if ! "$tmp/bin/named_sites" "$tmp/out" >"$tmp/facts" 2>"$tmp/run.err"; then
    fail "named_sites exited with an error: $(cat "$tmp/run.err")"
    finish
fi
line_of() { awk -v f="$1" '$1 == "line" && $2 == f { print $3 }' "$tmp/facts"; }

# -- the folded stacks ----------------------------------------------------------
# Each stack outermost first; the frames of one stack, one a line.
folded=$tmp/out/names.folded
frames_of() { # SUBSTRING: the frames of the stack whose innermost has it
    awk -v s="$1" 'index($0, s) { sub(/ [0-9]+$/, ""); n = split($0, f, ";"); for (i = 1; i <= n; i++) print f[i]; exit }' "$folded"
}
expect_frame() { # FILE LABEL FRAME: FILE has the line FRAME exactly
    if grep -qxF -- "$3" "$1"; then
        echo "ok: $2: $3"
    else
        fail "$2: no frame '$3' in:"
        sed 's/^/    /' "$1" | head -n 30
    fi
}
frames_of "parse_record (" >"$tmp/parse"
expect_frame "$tmp/parse" "folded, a static function" \
    "parse_record (named_sites.c:$(line_of parse_record))"
if grep -q '^main (named_sites\.c:[0-9][0-9]*)$' "$tmp/parse"; then
    echo "ok: folded: main named with its line"
else
    fail "folded: main not named with its line in: $(tr '\n' ';' <"$tmp/parse")"
fi

# The inlined function is a frame of its own, under the function it is in.
frames_of "fill_index (" >"$tmp/index"
expect_frame "$tmp/index" "folded, an inlined function" \
    "fill_index (named_sites.c:$(line_of fill_index))"
expect_frame "$tmp/index" "folded, the function it is inlined in" \
    "build_index (named_sites.c:$(line_of build_index))"
if [ "$(grep -n '' "$tmp/index" | grep -F 'build_index (' | cut -d: -f1)" -lt \
     "$(grep -n '' "$tmp/index" | grep -F 'fill_index (' | cut -d: -f1)" ]; then
    echo "ok: folded: fill_index inside build_index"
else
    fail "folded: fill_index is not under build_index: $(tr '\n' ';' <"$tmp/index")"
fi

# strdup: the C library's, named from its dynamic symbols at least.
frames_of "copy_name (" >"$tmp/copy"
expect_frame "$tmp/copy" "folded, the caller of strdup" \
    "copy_name (named_sites.c:$(line_of copy_name))"
if grep -Eq '^(__)?strdup' "$tmp/copy"; then
    echo "ok: folded: a frame in the C library: $(grep -E '^(__)?strdup' "$tmp/copy")"
else
    fail "folded: strdup not named in: $(tr '\n' ';' <"$tmp/copy")"
fi

# With the C library's debug file (libc6-dbg, found by build ID), its
# static functions are named too.
libc=$(ldd "$tmp/bin/named_sites" | awk '$1 ~ /^libc\.so/ { print $3 }')
id=$(readelf -n "$libc" 2>/dev/null | awk '/Build ID/ { print $3 }')
if [ -n "$id" ] && [ -e "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ]; then
    if grep -q '^__libc_start_call_main (' "$tmp/parse"; then
        echo "ok: folded: the C library's static __libc_start_call_main, from its debug file"
    else
        fail "folded: __libc_start_call_main not named though libc6-dbg is installed: $(tr '\n' ';' <"$tmp/parse")"
    fi
else
    lacking "the debug file of $libc" libc6-dbg
fi

# -- the text tree ----------------------------------------------------------------
tree=$tmp/out/names.tree
for want in "parse_record (named_sites.c:$(line_of parse_record))" \
    "fill_index (named_sites.c:$(line_of fill_index)) inlined in build_index (named_sites.c:$(line_of build_index))"; do
    if grep -qF -- "$want" "$tree"; then
        echo "ok: tree: $want"
    else
        fail "tree: no '$want' in:"
        head -n 30 "$tree"
    fi
done

# -- stripped: offsets --------------------------------------------------------------
strip -o "$tmp/stripped/named_sites" "$tmp/bin/named_sites"
if "$tmp/stripped/named_sites" "$tmp/stripped" >/dev/null 2>"$tmp/run.err"; then
    first=$(awk 'NR == 1 { sub(/ [0-9]+$/, ""); print }' "$tmp/stripped/names.folded")
    if grep -q 'parse_record\|build_index\|named_sites\.c' "$tmp/stripped/names.folded"; then
        fail "stripped: a name the stripped binary does not have: $first"
    elif grep -Eq ';named_sites\+0x[0-9a-f]+(;|$)' <<<"$first"; then
        echo "ok: stripped: its frames are named_sites+0x<offset>"
    else
        fail "stripped: no named_sites+0x<offset> frame in: $first"
    fi
else
    fail "the stripped named_sites exited with an error: $(cat "$tmp/run.err")"
fi

# -- go tool pprof, the binary moved away -------------------------------------------
if need go golang-go; then
    rm -rf "$tmp/bin"
    if out=$(HOME=$tmp go tool pprof -top -lines -nodefraction=0 "$tmp/out/names.pb.gz" 2>"$tmp/pprof.err"); then
        for f in parse_record fill_index build_index copy_name; do
            want="$f [^ ]*/named_sites\.c:$(line_of "$f")( |$)"
            if grep -Eq -- "$want" <<<"$out"; then
                echo "ok: go tool pprof -top -lines: $want"
            else
                fail "go tool pprof -top -lines: no '$want' in:"
                printf '%s\n' "$out" | head -n 20
            fi
        done
    else
        fail "go tool pprof -top -lines exited with an error: $(head -n 5 "$tmp/pprof.err")"
    fi
fi
finish

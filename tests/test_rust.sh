#!/bin/bash
# The Rust binding (bindings/rust) against this build tree's library:
# cargo test (unit tests, the global-allocator test, the documentation's
# examples), the churn bench compiled, and examples/queries run, whose
# per-query figures must be exact. Debian's cargo first, with Debian 12's
# rustc: the crate's rust-version. Run by make check with abs_top_srcdir
# and abs_top_builddir set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
srcdir=${abs_top_srcdir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
crate=$srcdir/bindings/rust
libdir=$builddir/.libs
[ -e "$libdir/libregionalloc.so" ] || {
    echo "FAIL: $libdir/libregionalloc.so not built"
    exit 1
}

# The first cargo found: Debian's (rustc 1.63, the crate's rust-version,
# so that a newer feature fails here), the one on PATH, rustup's.
cargo=
for c in /usr/bin/cargo "$(command -v cargo 2>/dev/null)" \
    /root/.cargo/bin/cargo "${HOME:-/nonexistent}/.cargo/bin/cargo"; do
    if [ -n "$c" ] && [ -x "$c" ]; then
        cargo=$c
        break
    fi
done
[ -n "$cargo" ] || need cargo cargo || exit 77
if [ "$cargo" = /usr/bin/cargo ] && [ -x /usr/bin/rustc ]; then
    # Else a rustup rustc earlier on PATH would build for Debian's cargo.
    export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
fi
rustc=${RUSTC:-$(dirname "$cargo")/rustc}
[ -x "$rustc" ] || rustc=rustc
echo "cargo: $cargo ($("$cargo" --version)), rustc: $("$rustc" --version)"

reset_env
export LC_ALL=C
make_tmp test_rust
# The build tree holds cargo's output (make clean removes it); the
# source tree is only read, as make distcheck wants.
export CARGO_TARGET_DIR=$builddir/bindings/rust/target
export REGIONALLOC_LIB_DIR=$libdir
manifest=(--manifest-path "$crate/Cargo.toml")

if ! "$cargo" test --offline "${manifest[@]}" >"$tmp/test" 2>&1; then
    cat "$tmp/test"
    fail "cargo test"
else
    grep -E '^(     Running|   Doc-tests|test result:)' "$tmp/test"
fi
# A unit-test binary, the global-allocator test, the doc tests: each ran
# and passed, none was filtered out or ignored.
ok=$(grep -c '^test result: ok\. [1-9][0-9]* passed; 0 failed; 0 ignored' "$tmp/test")
[ "$ok" -ge 3 ] || fail "$ok test binaries passed, expected 3 or more"

"$cargo" check --offline --quiet "${manifest[@]}" --bench churn >"$tmp/check" 2>&1 ||
    { cat "$tmp/check"; fail "cargo check --bench churn"; }

if ! "$cargo" run --offline --quiet "${manifest[@]}" --example queries \
    >"$tmp/out" 2>"$tmp/err"; then
    cat "$tmp/err"
    fail "cargo run --example queries"
fi
cat "$tmp/out"
# The bytes after "allocated " on the line of query $1.
allocated() {
    sed -n "s/^query $1: allocated \([0-9]*\) B .*/\1/p" "$tmp/out"
}
for q in parse index typecheck; do
    n=$(allocated "$q")
    if [ -z "$n" ] || [ "$n" = 0 ]; then
        fail "query $q: no 'allocated N B' line with N > 0"
    fi
    grep -q "^query $q: after \(drop\|reset\) 0 B; tag destroyed$" "$tmp/out" ||
        fail "query $q: its tag does not end empty and destroyed"
done
sum=$(sed -n 's/^  check: the result.s [0-9]* blocks sum to \([0-9]*\) B$/\1/p' "$tmp/out")
if [ -z "$sum" ] || [ "$sum" != "$(allocated parse)" ]; then
    fail "query parse: allocated $(allocated parse) B, its result's blocks sum to '$sum' B"
fi

finish

#!/bin/bash
# The Python module (bindings/python) under the system's Python: every
# tests/python/test_*.py, each a unittest script, run with this build's
# library preloaded, PYTHONMALLOC=malloc (every object through malloc)
# and the build's bindings/python first on the path. Skips (77) when the
# module is not built (no Python headers, --without-python) or numpy is
# missing. Built with --disable-override (RA_OVERRIDE=0), the library is
# not the process's malloc even preloaded: only the checks of a process
# without the allocator run (test_api.py's NotTheAllocator). Run by make
# check with abs_top_srcdir, abs_top_builddir, PYTHON and RA_OVERRIDE set.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
srcdir=${abs_top_srcdir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
python=${PYTHON:-/usr/bin/python3}
override=${RA_OVERRIDE:-1}
lib=$builddir/.libs/libregionalloc.so
modules=$builddir/bindings/python

[ -x "$python" ] || skip "$python not found"
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))') ||
    skip "$python cannot tell its modules' suffix"
[ -e "$modules/regionalloc$suffix" ] ||
    skip "the Python module is not built ($modules/regionalloc$suffix: configure found no Python headers, or --without-python)"
[ -e "$lib" ] || {
    echo "FAIL: $lib not built"
    exit 1
}
"$python" -c 'import numpy' 2>/dev/null || {
    lacking numpy python3-numpy
    finish
}

reset_env
unset PYTHONSTARTUP PYTHONHOME PYTHONINSPECT
export PYTHONPATH=$modules PYTHONMALLOC=malloc PYTHONDONTWRITEBYTECODE=1
export RA_TEST_LIBRARY=$lib

# run FILE [ARGS...]: one script under the library, its verdict echoed.
run() {
    local file=$1
    shift
    echo "== ${file#"$srcdir"/} $*"
    if ! LD_PRELOAD=$lib "$python" "$file" -v "$@" 2>&1; then
        fail "${file#"$srcdir"/} $*"
    fi
}

if [ "$override" != 1 ]; then
    run "$srcdir/tests/python/test_api.py" NotTheAllocator
    finish
fi
found=0
for file in "$srcdir"/tests/python/test_*.py; do
    [ -e "$file" ] || continue
    found=$((found + 1))
    run "$file"
done
[ "$found" -gt 0 ] || fail "no tests/python/test_*.py"
finish

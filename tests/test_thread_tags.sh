#!/bin/bash
# Tags by thread name in a real, unmodified multi-threaded program: gdb,
# whose DWARF readers run on worker threads it names "gdb worker N", under
# LD_PRELOAD with REGIONALLOC_THREAD_TAGS. Its exit report (JSON) must show
# the workers' allocations under their tag and the main thread's under a
# tag named after it. Run by make check with abs_top_builddir set.
# Exit status: 0 pass, 1 fail, 77 skip (gdb or python3 missing outside CI,
# or a library built without the malloc override, which tags by name need).
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
lib=$builddir/.libs/libregionalloc.so
need_built "$lib"
[ "${RA_OVERRIDE:-1}" = 1 ] || skip "built with --disable-override: no tags by thread name"
need gdb gdb || exit 77
need python3 python3 || exit 77

reset_env
make_tmp test_thread_tags

# Two workers whatever the machine's CPUs; the library (with its debug
# information) is the file they read.
REGIONALLOC_THREAD_TAGS='gdb worker*=gdb-workers,*' \
REGIONALLOC_STATS=$tmp/stats.json REGIONALLOC_STATS_FORMAT=json \
LD_PRELOAD=$lib gdb -nx -batch -iex 'maint set worker-threads 2' \
    -ex 'info functions ra_tag_reset' "$lib" >"$tmp/gdb.out" 2>"$tmp/gdb.err"
rc=$?
[ "$rc" = 0 ] || fail "gdb under LD_PRELOAD exited with $rc: $(tail -3 "$tmp/gdb.err")"
grep -q 'ra_tag_reset' "$tmp/gdb.out" || fail "gdb did not find ra_tag_reset: $(cat "$tmp/gdb.out")"
python3 - "$tmp/stats.json" <<'PY' || fail "the exit report: see above"
import json, sys
tags = {t["name"]: t for t in json.load(open(sys.argv[1]))["tags"]}
print("tags:", {n: t["nmalloc"] for n, t in tags.items()})
ok = True
for name in ("gdb-workers", "gdb"):
    if name not in tags or tags[name]["nmalloc"] == 0:
        print("FAIL: no allocations under the tag %r" % name)
        ok = False
sys.exit(0 if ok else 1)
PY

finish

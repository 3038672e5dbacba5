#!/bin/bash
# `regionalloc run`, `top` and `report` as a user runs them: on the
# system's own programs (/bin/sh, /usr/bin/python3) and on a small C
# program built here that names a thread "worker" and holds 1 MiB in it.
#   - the exit status and a deadly signal come through unchanged;
#   - an existing LD_PRELOAD is kept, the library appended;
#   - --report=FILE --format json writes the report at exit;
#   - --http prints the dashboard's URL on stderr, which serves /metrics;
#   - `regionalloc report PID --format prometheus`, read from the live
#     segment, agrees with that process's own /metrics on the worker's
#     tag; `--format json` and `text` read it too;
#   - --no-shm publishes no segment;
#   - --memory-limit puts the limit in force (the JSON report's);
#   - the program is watched, not its children (a report, a server, a
#     segment: the program's alone), whichever exits last, unless
#     --children: then each child's report is at FILE.PID, or on stderr
#     with its pid before each line;
#   - a report or a line on a stderr whose reader has gone raises no
#     SIGPIPE: the program's exit status, and the tool's own, come through;
#   - a library in a directory with a space or a colon is preloaded all
#     the same, or run exits 127 saying so;
#   - bad options and commands exit 2 with a usage line.
# Exit status: 0 pass, 1 fail, 77 skip.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
ra=$builddir/tools/regionalloc
need_built "$ra"
[ -e "$builddir/.libs/libregionalloc.so" ] || skip "shared library not built"
[ "${RA_OVERRIDE:-1}" = 1 ] || skip "built with --disable-override: nothing to preload"
need /usr/bin/python3 python3 || exit 77
need curl curl || exit 77
make_tmp test_run
reset_env
unset LD_PRELOAD REGIONALLOC_THREAD_TAGS REGIONALLOC_HTTP REGIONALLOC_SHM
export LC_ALL=C
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT

# -- exit status and signals ------------------------------------------------------
"$ra" run -- /bin/sh -c 'exit 7'
rc=$?
[ $rc = 7 ] && echo "ok: exit status 7 passed through" || fail "exit status: $rc, want 7"
"$ra" run -- /bin/sh -c 'kill -TERM $$'
rc=$?
[ $rc = 143 ] && echo "ok: SIGTERM passed through (status 143)" || fail "a SIGTERM: status $rc, want 143"
"$ra" run -- /nonexistent/program 2>"$tmp/err"
rc=$?
[ $rc = 127 ] && grep -q 'nonexistent' "$tmp/err" && echo "ok: a missing program: 127" ||
    fail "a missing program: status $rc, stderr: $(cat "$tmp/err")"

# -- LD_PRELOAD -----------------------------------------------------------------------
zlib=$(ldconfig -p | awk '/libz\.so\.1 .*x86-64/ { print $NF; exit }')
[ -n "$zlib" ] || zlib=$(ldconfig -p | awk '/libz\.so\.1 / { print $NF; exit }')
got=$(LD_PRELOAD=$zlib "$ra" run -- /usr/bin/python3 -c 'import os; print(os.environ["LD_PRELOAD"])')
case $got in
"$zlib:"*libregionalloc.so.*) echo "ok: LD_PRELOAD kept and appended: $got" ;;
*) fail "LD_PRELOAD: '$got', want $zlib:...libregionalloc.so.N" ;;
esac
got=$("$ra" run -- /usr/bin/python3 -c 'import os; print(os.environ.get("REGIONALLOC_THREAD_TAGS"), os.environ.get("REGIONALLOC_SHM"))')
[ "$got" = "* 1" ] && echo "ok: thread tags * and the segment on by default" ||
    fail "defaults: '$got', want '* 1'"

# -- the report at exit ---------------------------------------------------------------
"$ra" run --report="$tmp/report.json" --format json -- /usr/bin/python3 -c 'x = [bytes(1000) for i in range(1000)]'
if /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if "tags" in d else 1)' "$tmp/report.json" 2>"$tmp/err"; then
    echo "ok: --report=FILE --format json: a JSON report with tags"
else
    fail "--report: $(head -c 300 "$tmp/report.json" 2>/dev/null) $(cat "$tmp/err")"
fi

# -- --memory-limit: the limit in force, from the environment --------------------------
"$ra" run --memory-limit 64G --report="$tmp/limit.json" --format json -- /usr/bin/python3 -c 'pass'
if /usr/bin/python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["memory_limit"]
sys.exit(0 if m["limit"] == 64 << 30 and m["source"] == "environment" else 1)' "$tmp/limit.json" 2>"$tmp/err"; then
    echo "ok: --memory-limit 64G: the report's limit, from the environment"
else
    fail "--memory-limit: $(head -c 300 "$tmp/limit.json" 2>/dev/null) $(cat "$tmp/err")"
fi

# -- --http and report PID ------------------------------------------------------------
cat >"$tmp/worker.c" <<'EOF'
/* Holds 1 MiB in a thread named "worker" until killed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *work(void *arg)
{
    (void)arg;
    for (int i = 0; i < 16; i++)
        memset(malloc(65536), 1, 65536);
    puts("ready");
    fflush(stdout);
    for (;;)
        pause();
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, work, NULL);
    pthread_setname_np(t, "worker");
    pthread_join(t, NULL);
    return 0;
}
EOF
if ! ${CC:-cc} -O1 -o "$tmp/worker" "$tmp/worker.c" -lpthread 2>"$tmp/cc.err"; then
    fail "cannot build the worker: $(cat "$tmp/cc.err")"
    finish
fi
if [ "${RA_HTTP:-1}" = 1 ]; then
    "$ra" run --http --memory-limit 64G -- "$tmp/worker" >"$tmp/worker.out" 2>"$tmp/worker.err" &
    pid=$!
    url=
    for ((i = 0; i < 100; i++)); do
        url=$(sed -n 's|^regionalloc: serving \(http://[^ ]*\)debug/regionalloc/ (pid [0-9]*)$|\1|p' "$tmp/worker.err")
        [ -n "$url" ] && grep -q ready "$tmp/worker.out" && break
        sleep 0.1
    done
    if [ -z "$url" ]; then
        fail "--http: no URL on stderr: $(cat "$tmp/worker.err")"
    elif ! grep -q "(pid $pid)" "$tmp/worker.err"; then
        fail "--http: the URL's line names another pid than $pid: $(cat "$tmp/worker.err")"
    else
        echo "ok: --http printed ${url}debug/regionalloc/"
        metric() { grep "^regionalloc_tag_allocated_bytes{tag=\"worker\"} " | awk '{ print $2 }'; }
        want=$(curl -s "${url}metrics" | metric)
        got=
        # The segment is published once a second: wait for one after the
        # worker's blocks.
        for ((i = 0; i < 50; i++)); do
            got=$("$ra" report "$pid" --format prometheus | metric)
            [ -n "$want" ] && [ "$got" = "$want" ] && break
            sleep 0.2
        done
        if [ -n "$want" ] && [ "$want" -ge 1048576 ] && [ "$got" = "$want" ]; then
            echo "ok: report $pid --format prometheus agrees with /metrics: worker $got B"
        else
            fail "report PID: worker '$got' B where /metrics says '$want' B"
        fi
        # The families that do not move while the worker waits: equal.
        steady='^regionalloc_(memory_limit_bytes|memory_pressure_level|tag_priority\{tag="worker"\}|tag_limit_bytes\{tag="worker"\}) '
        want=$(curl -s "${url}metrics" | grep -E "$steady" | sort)
        got=$("$ra" report "$pid" --format prometheus | grep -E "$steady" | sort)
        if [ "$(echo "$want" | wc -l)" = 4 ] && [ "$got" = "$want" ] &&
            echo "$got" | grep -qx 'regionalloc_memory_limit_bytes 68719476736'; then
            echo "ok: report $pid --format prometheus agrees with /metrics on the memory limit and the priority"
        else
            fail "report PID: '$got' where /metrics says '$want'"
        fi
        if "$ra" report "$pid" --format json | /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin); sys.exit(0 if any(t["name"] == "worker" for t in d["tags"]) else 1)'; then
            echo "ok: report $pid --format json names the worker"
        else
            fail "report PID --format json: no worker"
        fi
        if "$ra" report "$pid" | grep -q worker; then
            echo "ok: report $pid (text) names the worker"
        else
            fail "report PID: the text has no worker"
        fi
    fi
    kill "$pid"
    wait "$pid" 2>/dev/null
    pid=
else
    not_built "HTTP (--without-http): --http"
fi

"$ra" run --no-shm -- /bin/sh -c 'test -e /dev/shm/regionalloc.$$ && exit 1; exit 0' ||
    fail "--no-shm: the program published a segment"
"$ra" run -- /bin/sh -c 'sleep 1.5; test -e /dev/shm/regionalloc.$$' &&
    echo "ok: the segment published by default, not with --no-shm" ||
    fail "run: no segment published by default"

# -- the program, not its children ------------------------------------------------------
# The program is bash or python3 (they leave through exit(): dash's
# _exit runs no destructor, so writes no report), its child python3 or
# bash: each process's main thread is tagged by its name, which tells
# whose report it is.
"$ra" run --report --format json -- /bin/bash -c '/usr/bin/python3 -c "x = 1" & wait $!' 2>"$tmp/err"
if [ "$(grep -c '"schema": "regionalloc-report-1"' "$tmp/err")" = 1 ] && grep -q '"name": "bash"' "$tmp/err"; then
    echo "ok: a background child writes no report of its own"
else
    fail "run --report: want bash's report alone on stderr: $(head -c 600 "$tmp/err")"
fi
# The program forks and exits; its child waits for that (EOF on a pipe
# the parent held), then runs bash, which exits last. The pipe to cat
# ends when bash has (it holds stdout): nothing is left running.
cat >"$tmp/orphan.py" <<'PY'
import os
r, w = os.pipe()
if os.fork() == 0:
    os.close(w)
    os.read(r, 1)
    os.execv("/bin/bash", ["bash", "-c", "x=$(echo 1); exit 0"])
PY
"$ra" run --report="$tmp/last.txt" -- /usr/bin/python3 "$tmp/orphan.py" | cat
if grep -q '^python3 ' "$tmp/last.txt" && ! grep -q '^bash ' "$tmp/last.txt"; then
    echo "ok: --report=FILE holds the program's report, though its child exited last"
else
    fail "--report=FILE: want python3's report: $(head -c 600 "$tmp/last.txt")"
fi
# A child forked without exec writes none either, %p or not.
cat >"$tmp/fork.py" <<'PY'
import os, sys
pid = os.fork()
if pid == 0:
    x = [bytes(1000) for i in range(1000)]
    sys.exit(0)
os.waitpid(pid, 0)
print(pid)
PY
forked=$("$ra" run --report="$tmp/forked.%p" -- /usr/bin/python3 "$tmp/fork.py")
if [ -n "$forked" ] && [ ! -e "$tmp/forked.$forked" ] && [ "$(ls "$tmp" | grep -c '^forked\.')" = 1 ]; then
    echo "ok: a forked child writes no report, even to a path with %p"
else
    fail "a forked child: $(ls "$tmp" | grep '^forked\.' | tr '\n' ' ') (child $forked)"
fi
got=$("$ra" run -- /bin/bash -c '/usr/bin/python3 -c "import os; print(os.path.exists(f\"/dev/shm/regionalloc.{os.getpid()}\"))" & wait $!')
[ "$got" = False ] && echo "ok: a child publishes no segment" ||
    fail "a child of the program published a segment ($got)"
if [ "${RA_HTTP:-1}" = 1 ]; then
    serving() { grep -c '^regionalloc: serving http://' "$1"; }
    "$ra" run --http -- /bin/bash -c '/usr/bin/python3 -c pass & wait $!; echo $$ >"$0"' "$tmp/bash.pid" 2>"$tmp/err"
    if [ "$(serving "$tmp/err")" = 1 ] && grep -q "(pid $(cat "$tmp/bash.pid"))" "$tmp/err"; then
        echo "ok: --http: the program's server alone"
    else
        fail "--http: want bash's server alone: $(cat "$tmp/err")"
    fi
    echo 'int x;' >"$tmp/x.c"
    "$ra" run --http -- ${CC:-cc} -c "$tmp/x.c" -o "$tmp/x.o" 2>"$tmp/err"
    [ "$(serving "$tmp/err")" = 1 ] && echo "ok: --http -- cc: one server" ||
        fail "--http -- cc: $(cat "$tmp/err")"
    "$ra" run --http --children -- /bin/bash -c '/usr/bin/python3 -c pass & wait $!' 2>"$tmp/err"
    [ "$(serving "$tmp/err")" = 2 ] && echo "ok: --http --children: a server each" ||
        fail "--http --children: want two servers: $(cat "$tmp/err")"
fi

# -- --children: each child's report its own --------------------------------------------
child=$("$ra" run --children --report="$tmp/tree.txt" -- /bin/bash -c '/usr/bin/python3 -c "import os; print(os.getpid())" & wait $!')
if [ -n "$child" ] && grep -q '^bash ' "$tmp/tree.txt" && grep -q '^python3 ' "$tmp/tree.txt.$child" &&
    [ "$(ls "$tmp" | grep -c '^tree\.txt')" = 2 ]; then
    echo "ok: --children: the program's report at FILE, the child's at FILE.$child"
else
    fail "--children: $(ls "$tmp" | grep '^tree\.txt' | tr '\n' ' ') (child $child)"
fi
forked=$("$ra" run --children --report="$tmp/fork.txt" -- /usr/bin/python3 "$tmp/fork.py")
if [ -n "$forked" ] && [ -s "$tmp/fork.txt" ] && grep -q '^python3 ' "$tmp/fork.txt.$forked"; then
    echo "ok: --children: a forked child's report at FILE.PID"
else
    fail "--children: no report of the forked child $forked: $(ls "$tmp" | grep '^fork\.txt' | tr '\n' ' ')"
fi
child=$("$ra" run --children --report -- /bin/bash -c '/usr/bin/python3 -c "import os; print(os.getpid())" & wait $!' 2>"$tmp/err")
if [ -n "$child" ] && grep -q "^\[pid $child\] python3 " "$tmp/err" && grep -q '^bash ' "$tmp/err" &&
    ! grep -q '^python3 ' "$tmp/err" && ! grep -q "^\[pid $child\] bash " "$tmp/err"; then
    echo "ok: --children --report: the child's lines on stderr start with [pid $child]"
else
    fail "--children on stderr: $(head -c 800 "$tmp/err")"
fi

# -- SIGPIPE: a reader that has gone -----------------------------------------------------
# gone WHAT WANT ARGS...: runs ARGS with stderr on a pipe whose read end
# is closed (`ARGS 2>&1 | grep -q x` once grep has exited), SIGPIPE at
# its default action, and checks the exit status (-N: killed by signal N).
cat >"$tmp/gone.py" <<'PY'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
print(subprocess.run(sys.argv[1:], stderr=w).returncode)
PY
gone() {
    local what=$1 want=$2 got
    shift 2
    got=$(/usr/bin/python3 "$tmp/gone.py" "$@")
    [ "$got" = "$want" ] && echo "ok: $what, its reader gone: exit $want" ||
        fail "$what, its reader gone: exit $got, want $want"
}
lib=$builddir/.libs/libregionalloc.so
gone "--report on stderr" 0 "$ra" run --report -- /bin/true
gone "--report --format json" 0 "$ra" run --report --format json -- /bin/bash -c 'exit 0'
gone "--checkpoints on stderr" 0 "$ra" run --checkpoints -- /bin/true
gone "REGIONALLOC_STATS=stderr" 0 env LD_PRELOAD="$lib" REGIONALLOC_STATS=stderr /bin/true
gone "the program's own status" 3 env LD_PRELOAD="$lib" REGIONALLOC_STATS=stderr \
    REGIONALLOC_CHECKPOINTS=stderr /bin/bash -c 'exit 3'
gone "a warning" 0 env LD_PRELOAD="$lib" REGIONALLOC_SHM_INTERVAL=often REGIONALLOC_SHM=1 /bin/true
[ "${RA_HTTP:-1}" = 1 ] && gone "--http's line" 0 "$ra" run --http -- /bin/true
gone "run's line on a missing program" 127 "$ra" run -- /nonexistent/program
gone "run's usage" 2 "$ra" run --bogus -- /bin/true
# run ignores SIGPIPE for its own lines: the program gets it back.
"$ra" run -- /bin/bash -c 'kill -PIPE $$; exit 3'
rc=$?
[ $rc = 141 ] && echo "ok: the program's SIGPIPE at its default action (status 141)" ||
    fail "the program's SIGPIPE: status $rc, want 141 (left ignored by run?)"

# -- a library path with a space or a colon ---------------------------------------------
# The tool and the library as installed under a prefix with a space (or
# a colon); the links go to a TMPDIR of the test's. The program, grep,
# finds the library in its own maps when it is preloaded.
soname=$(ls "$builddir/.libs" | grep -E '^libregionalloc\.so\.[0-9]+$')
mkdir -p "$tmp/a b/bin" "$tmp/a b/lib" "$tmp/c:d" "$tmp/links"
cp "$ra" "$tmp/a b/bin/"
cp -L "$builddir/.libs/$soname" "$tmp/a b/lib/"
cp -L "$builddir/.libs/$soname" "$tmp/c:d/"
watched() { # WHAT VAR=VALUE...: run, under env VAR=VALUE..., watches grep
    local what=$1 rc
    shift
    env "$@" "$tmp/a b/bin/regionalloc" run -- /bin/grep -q libregionalloc /proc/self/maps 2>"$tmp/err"
    rc=$?
    [ $rc = 0 ] && echo "ok: $what: preloaded" ||
        fail "$what: status $rc (1: not preloaded): $(cat "$tmp/err")"
}
watched "the install under 'a b/'" TMPDIR="$tmp/links"
watched "REGIONALLOC_LIBRARY with a colon" TMPDIR="$tmp/links" REGIONALLOC_LIBRARY="$tmp/c:d/$soname"
link=$(TMPDIR="$tmp/links" "$tmp/a b/bin/regionalloc" run -- /usr/bin/python3 -c 'import os; print(os.environ["LD_PRELOAD"])')
if [ "$(readlink "$link")" = "$tmp/a b/lib/$soname" ] && [ "$(dirname "$link")" = "$tmp/links/regionalloc-$(id -u)" ]; then
    echo "ok: LD_PRELOAD names a link in \$TMPDIR/regionalloc-UID: $(basename "$link")"
else
    fail "LD_PRELOAD: '$link' -> '$(readlink "$link")'"
fi
# Through a link of the user's own with no space: its real path will do.
mkdir "$tmp/real" && cp -L "$builddir/.libs/$soname" "$tmp/real/" && ln -s "$tmp/real" "$tmp/re al"
got=$(REGIONALLOC_LIBRARY="$tmp/re al/$soname" "$ra" run -- /usr/bin/python3 -c 'import os; print(os.environ["LD_PRELOAD"])')
[ "$got" = "$(cd "$tmp/real" && pwd -P)/$soname" ] && echo "ok: a path with a space whose real path has none: that" ||
    fail "REGIONALLOC_LIBRARY through a link: LD_PRELOAD '$got'"
TMPDIR=/nonexistent/dir "$tmp/a b/bin/regionalloc" run -- /bin/true 2>"$tmp/err"
rc=$?
if [ $rc = 127 ] && grep -qF "cannot preload $tmp/a b/" "$tmp/err"; then
    echo "ok: no link can be made: exit 127, naming the library"
else
    fail "no link: status $rc, stderr: $(cat "$tmp/err")"
fi

# -- bad usage ---------------------------------------------------------------------------
bad() { # WHAT ARGS...: exits 2 with a usage line
    local what=$1 rc
    shift
    "$ra" "$@" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ $rc = 2 ] && grep -q '^usage: regionalloc' "$tmp/err"; then
        echo "ok: $what: exit 2 and the usage"
    else
        fail "$what: status $rc, stderr: $(head -n 2 "$tmp/err")"
    fi
}
bad "no command"
bad "an unknown command" frob
bad "run without a program" run --http
bad "an unknown option" run --bogus -- /bin/true
bad "a bad --format" run --format xml -- /bin/true
bad "a bad --prof" run --prof=lots -- /bin/true
bad "a bad --memory-limit" run --memory-limit 101% -- /bin/true
bad "a --memory-limit of 0" run --memory-limit 0 -- /bin/true
bad "report without a pid" report
bad "report with a bad pid" report 12x
"$ra" run --help | grep -q -- '--thread-tags' && echo "ok: run --help" || fail "run --help"
"$ra" top --help | grep -q 'usage: regionalloc-top' && echo "ok: top is regionalloc-top" ||
    fail "top --help is not regionalloc-top's"
finish

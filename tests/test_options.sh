#!/bin/bash
# The options of `regionalloc run` that set the library's variables, as
# the library and the tool read them: one syntax (src/sizes.c,
# src/values.c, src/http_address.c) in both, held to one table of cases
# (tests/run_options.table).
#   - each value of the table as the option's variable of a program the
#     library is preloaded into: taken without a word, or one line naming
#     the variable and the table's reason, or (an empty value or list)
#     read as unset, without a word;
#   - the same value as the option of `regionalloc run`: a value the
#     library takes runs the program; any other is exit 2, "regionalloc:
#     OPTION 'VALUE': WHY" with the library's reason (a list's entry at
#     fault rather than the whole list), the usage, and the program never
#     run;
#   - --http on a port another socket listens on: the library's bind
#     fails, and the tool refuses it with the same reason; an address that
#     is not a loopback one, taken by both under
#     REGIONALLOC_HTTP_ALLOW_REMOTE=1;
#   - built without the HTTP endpoints: --http refused as the library says.
# Exit status: 0 pass, 1 fail, 77 skip.
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
ra=$builddir/tools/regionalloc
lib=$builddir/.libs/libregionalloc.so
table=${abs_top_srcdir:-${top_srcdir:-.}}/tests/run_options.table
no_http="this build has no HTTP endpoints (configured --without-http, or libmicrohttpd was missing)"
need_built "$ra"
[ -e "$lib" ] || skip "shared library not built"
[ "${RA_OVERRIDE:-1}" = 1 ] || skip "built with --disable-override: nothing to preload"
[ -r "$table" ] || { echo "FAIL: $table not found"; exit 1; }
make_tmp test_options
reset_env
unset LD_PRELOAD REGIONALLOC_THREAD_TAGS REGIONALLOC_HTTP REGIONALLOC_SHM \
    REGIONALLOC_MEMORY_LIMIT REGIONALLOC_HTTP_ALLOW_REMOTE
export LC_ALL=C

# expand VALUE: VALUE with each {N*TEXT} written out.
expand() {
    local v=$1 out='' spaces
    while [[ $v =~ ^([^{]*)\{([0-9]+)\*([^}]*)\}(.*)$ ]]; do
        printf -v spaces '%*s' "${BASH_REMATCH[2]}" ''
        out+=${BASH_REMATCH[1]}${spaces// /"${BASH_REMATCH[3]}"}
        v=${BASH_REMATCH[4]}
    done
    printf '%s' "$out$v"
}

# variable_of OPTION: the library's variable the option sets.
variable_of() {
    case $1 in
    --thread-tags) echo REGIONALLOC_THREAD_TAGS ;;
    --http) echo REGIONALLOC_HTTP ;;
    --report) echo REGIONALLOC_STATS ;;
    --checkpoints) echo REGIONALLOC_CHECKPOINTS ;;
    --format) echo REGIONALLOC_STATS_FORMAT ;;
    --prof) echo REGIONALLOC_PROF ;;
    --limits) echo REGIONALLOC_LIMITS ;;
    *) echo "unknown option $1" >&2; exit 1 ;;
    esac
}

# library_says VAR FILE: the reason in the library's line about VAR (a bad
# value, a list's bad entry, or a server that could not start).
library_says() {
    sed -n -e "s/^regionalloc: $1=\"[^\"]*\" is invalid (\(.*\)); using the default .*\$/\1/p" \
        -e "s/^regionalloc: $1: entry \".*\" is invalid (\(.*\)); ignored\$/\1/p" \
        -e "s/^regionalloc: $1=\".*\": \(.*\); no server\$/\1/p" "$2"
}

# check_case OPTION VALUE LIBRARY WHY: the library and the tool over one
# case (the table's fields, VALUE written out).
check_case() {
    local option=$1 value=$2 library=$3 want=$4 var lib_rc tool_rc lines got shown what
    var=$(variable_of "$option")
    rm -rf "$tmp/lib" "$tmp/tool"
    mkdir "$tmp/lib" "$tmp/tool"
    (cd "$tmp/lib" && env LD_PRELOAD="$lib" "$var=$value" /bin/true) 2>"$tmp/lib.err"
    lib_rc=$?
    (cd "$tmp/tool" && "$ra" run --no-shm --no-thread-tags "$option=$value" -- \
        /usr/bin/touch ran) >/dev/null 2>"$tmp/tool.err"
    tool_rc=$?
    lines=$(grep -c "^regionalloc: $var[=:]" "$tmp/lib.err")
    got=$(library_says "$var" "$tmp/lib.err")
    shown=$(sed -n "s/^regionalloc: $var: entry \"\(.*\)\" is invalid (.*\$/\1/p" "$tmp/lib.err")
    shown=${shown:-$value}
    what="$option '$(printf '%.80s' "$value")'"
    if [ $lib_rc != 0 ] ||
        { [ "$library" = warns ] && { [ "$lines" != 1 ] || [ "$got" != "$want" ]; }; } ||
        { [ "$library" != warns ] && [ "$lines" != 0 ]; }; then
        fail "$what: the library (status $lib_rc) should say $library${want:+ ($want)}: $(head -c 400 "$tmp/lib.err")"
        return
    fi
    if [ "$library" = takes ]; then
        if [ $tool_rc = 0 ] && [ -e "$tmp/tool/ran" ] &&
            ! grep -q '^usage:\|^regionalloc: --\|^regionalloc: REGIONALLOC_' "$tmp/tool.err"; then
            echo "ok: $what taken by both"
        else
            fail "$what: the tool (status $tool_rc) should take it: $(head -n 2 "$tmp/tool.err")"
        fi
    elif [ $tool_rc = 2 ] && [ ! -e "$tmp/tool/ran" ] &&
        [ "$(head -n 1 "$tmp/tool.err")" = "regionalloc: $option '$shown': $want" ] &&
        grep -q '^usage: regionalloc' "$tmp/tool.err"; then
        echo "ok: $what refused by the tool ($want); the library $([ "$library" = warns ] && echo "says the same" || echo "reads it as unset")"
    else
        fail "$what: the tool (status $tool_rc) should refuse it ($want): $(head -n 2 "$tmp/tool.err")"
    fi
}

# -- the table: the library and the tool ---------------------------------------
cases=0
while IFS='|' read -r option value library why; do
    case $option in '#'* | '') continue ;; esac
    cases=$((cases + 1))
    # Built without the endpoints, a well-formed address gets as far as
    # the server's start, which says so.
    if [ "$option" = --http ] && [ "${RA_HTTP:-1}" = 0 ]; then
        case $library:$why in
        takes: | *:'not a loopback'* | *:'the host does not resolve')
            library=warns why=$no_http ;;
        esac
    fi
    check_case "$option" "$(expand "$value")" "$library" "$why"
done <"$table"
[ $cases -ge 60 ] || fail "only $cases cases read from $table"

# -- --http: what only the socket can tell -------------------------------------------
if [ "${RA_HTTP:-1}" = 1 ] && need /usr/bin/python3 python3; then
    # A port another socket listens on: the library's bind fails, and so
    # does the tool's, before the program runs.
    coproc holder { /usr/bin/python3 -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
sys.stdin.read()'; }
    read -r port <&"${holder[0]}"
    check_case --http "127.0.0.1:$port" warns "Address already in use"
    eval "exec ${holder[1]}>&-"
    wait "$holder_PID"
    REGIONALLOC_HTTP_ALLOW_REMOTE=1 check_case --http 0.0.0.0:0 takes ''
fi
finish

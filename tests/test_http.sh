#!/bin/bash
# The HTTP endpoints against the clients a fleet runs: curl; promtool check
# metrics on what /metrics serves; the pprof of /debug/pprof/heap decoded
# (tests/pprof_decode.py) for its per-tag labels and ?tag=; the JSON
# reports parsed; garbage and oversized requests from a raw socket while
# the server keeps serving; requests libmicrohttpd would leave unanswered,
# answered at once, and slow or flooding clients (slow heads, bodies that
# never end) that hold up no other; an unmodified program (sleep) served under
# LD_PRELOAD with REGIONALLOC_HTTP; and a real Prometheus server that
# scrapes examples/server and answers a PromQL query with the bytes the
# program holds. Run by make check with abs_top_builddir set.
# Exit status: 0 pass, 1 fail, 77 skip (a tool missing outside CI).
set -u

# shellcheck source=tests/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
server=$builddir/examples/server
lib=$builddir/.libs/libregionalloc.so
decoder_dir=${abs_top_srcdir:-$(dirname "${BASH_SOURCE[0]}")/..}/tests
need_built "$server"
need curl curl || exit 77
need python3 python3 || exit 77
have_prometheus=0
need promtool prometheus && need prometheus prometheus && have_prometheus=1

reset_env
export LC_ALL=C
make_tmp test_http
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT

# start_server NAME [ENV=VALUE...] -- [ARGS...]: start_example_server,
# its pid ended at exit.
start_server() {
    local rc=0
    start_example_server "$@" || rc=1
    pids+=("$server_pid")
    return "$rc"
}

# code METHOD URL [CURL-ARGS...]: the HTTP status.
code() {
    local method=$1 target=$2
    shift 2
    curl -s -o /dev/null -w '%{http_code}' -X "$method" "$@" "$target"
}

# serves URL PATTERN: waits (up to 20 s) until URL answers a page with a
# line that matches PATTERN.
serves() {
    local i
    for ((i = 0; i < 100; i++)); do
        curl -s "$1" | grep -q -- "$2" && return 0
        sleep 0.2
    done
    return 1
}

# A port nobody listens on now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# -- curl, promtool ---------------------------------------------------------------
start_server plain || exit 1
curl -s -D "$tmp/headers" -o "$tmp/metrics" "$url/metrics" ||
    fail "curl $url/metrics failed"
grep -qi '^Content-Type: text/plain; version=0.0.4' "$tmp/headers" ||
    fail "/metrics: Content-Type: $(grep -i content-type "$tmp/headers")"
grep -qx 'regionalloc_tag_allocated_bytes{tag="cache"} 16777216' "$tmp/metrics" ||
    fail "/metrics: the cache's 16 MiB not found"
if [ "$have_prometheus" = 1 ]; then
    promtool check metrics <"$tmp/metrics" >"$tmp/promtool.out" 2>&1 ||
        fail "promtool check metrics: $(cat "$tmp/promtool.out")"
fi

# -- the reports, parsed ------------------------------------------------------------
curl -s -o "$tmp/report.json" "$url/debug/regionalloc/report?format=json"
curl -s -o "$tmp/checkpoints.json" "$url/debug/regionalloc/checkpoints?format=json"
python3 - "$tmp/report.json" "$tmp/checkpoints.json" <<'EOF' || fail "JSON reports: see above"
import json, sys
report = json.load(open(sys.argv[1]))
cache = [t for t in report["tags"] if t["name"] == "cache"]
assert len(cache) == 1 and cache[0]["allocated"] == 16777216, cache
assert json.load(open(sys.argv[2]))["schema"] == "regionalloc-checkpoints-1"
EOF
[ "$(code GET "$url/debug/regionalloc/report?format=text")" = 200 ] ||
    fail "report?format=text is not 200"

# -- ?top: the largest tags listed, the others rolled up ----------------------------
# The example's tags: app (a parent holding nothing itself), its children
# cache (16 MiB) and sessions (less). Two listed: app and the cache.
for path in /metrics "/debug/regionalloc/report?format=json&" \
    "/debug/regionalloc/report?" /debug/regionalloc/; do
    case $path in *\? | *\&) sep= ;; *) sep='?' ;; esac
    for v in x -1 1.5 %203 "" 18446744073709551615 99999999999999999999 ALL; do
        [ "$(code GET "$url$path${sep}top=$v")" = 400 ] ||
            fail "$path${sep}top=$v is not 400"
    done
    [ "$(code GET "$url$path${sep}top")" = 400 ] || fail "$path${sep}top is not 400"
    for v in 0 2 all 18446744073709551614; do
        [ "$(code GET "$url$path${sep}top=$v")" = 200 ] ||
            fail "$path${sep}top=$v is not 200"
    done
done
curl -s "$url/metrics?top=x" | grep -qx 'top must be a number of tags or all, not "x"' ||
    fail "/metrics?top=x does not say why"
curl -s -o "$tmp/top.prom" "$url/metrics?top=2"
grep -q '^regionalloc_tag_allocated_bytes{tag="(rest)"} [1-9]' "$tmp/top.prom" ||
    fail "/metrics?top=2: no (rest) series holding the sessions"
[ "$(grep -c '^regionalloc_tag_allocated_bytes{' "$tmp/top.prom")" = 3 ] ||
    fail "/metrics?top=2: not 2 tags and the rest: $(grep '^regionalloc_tag_allocated_bytes{' "$tmp/top.prom")"
grep -qx 'regionalloc_tag_allocated_bytes{tag="cache"} 16777216' "$tmp/top.prom" ||
    fail "/metrics?top=2: the cache is not listed"
grep -qx 'regionalloc_rest_tags 1' "$tmp/top.prom" || fail "/metrics?top=2: not one tag rolled up"
if [ "$have_prometheus" = 1 ]; then
    promtool check metrics <"$tmp/top.prom" >"$tmp/promtool.out" 2>&1 ||
        fail "promtool check metrics (?top=2): $(cat "$tmp/promtool.out")"
fi
curl -s -o "$tmp/top.json" "$url/debug/regionalloc/report?format=json&top=1"
curl -s -o "$tmp/top.txt" "$url/debug/regionalloc/report?top=1"
python3 - "$tmp/top.json" "$tmp/top.txt" <<'EOF' || fail "?top=1: see above"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["top"] == 1 and [t["name"] for t in d["tags"]] == ["app"], (d["top"], d["tags"])
assert [(r["parent"], r["tags"]) for r in d["rest"]] == [("app", 2)], d["rest"]
lines = open(sys.argv[2]).read().splitlines()
assert [l.strip().split("  ")[0] for l in lines[1:3]] == ["app", "(2 more under app)"], lines
assert lines[2].startswith("  (2 more under app)"), lines
EOF

# -- pprof ---------------------------------------------------------------------------
curl -s -o "$tmp/heap.pb.gz" "$url/debug/pprof/heap" || fail "curl heap failed"
curl -s -o "$tmp/sessions.pb.gz" "$url/debug/pprof/heap?tag=sessions"
PYTHONPATH=$decoder_dir python3 - "$tmp/heap.pb.gz" "$tmp/sessions.pb.gz" "$server" <<'EOF' ||
import os, sys
from pprof_decode import profile
whole = profile(open(sys.argv[1], "rb").read())
one = profile(open(sys.argv[2], "rb").read())
problems = []
tags = {s["labels"].get("tag") for s in whole["samples"]}
if not {"cache", "sessions"} <= tags:
    problems.append("whole profile: tags %r, want cache and sessions" % tags)
if not one["samples"] or {s["labels"].get("tag") for s in one["samples"]} != {"sessions"}:
    problems.append("?tag=sessions: tags %r" % {s["labels"].get("tag") for s in one["samples"]})
main = [m for m in whole["mappings"] if os.path.basename(m["filename"]).endswith("server")]
if not main or not main[0]["build_id"]:
    problems.append("no build ID on the program's mapping: %r" % whole["mappings"][:2])
for p in problems:
    print("FAIL: pprof: " + p)
print("pprof: %d samples, tags %s" % (len(whole["samples"]), sorted(t for t in tags if t)))
sys.exit(1 if problems else 0)
EOF
    fail "pprof: see above"

# -- bad requests -------------------------------------------------------------------
[ "$(code GET "$url/nowhere")" = 404 ] || fail "/nowhere is not 404"
[ "$(code GET "$url/debug/pprof/heap?tag=nobody")" = 404 ] || fail "?tag=nobody is not 404"
[ "$(code GET "$url/debug/regionalloc/report?format=xml")" = 400 ] || fail "format=xml is not 400"
[ "$(code PUT "$url/metrics")" = 405 ] || fail "PUT /metrics is not 405"
[ "$(code GET "$url/debug/pprof/heap?tag")" = 400 ] || fail "?tag (no value) is not 400"
[ "$(code GET "$url/debug/pprof/heap?tag=")" = 400 ] || fail "?tag= is not 400"
# DNS rebinding: a name of the attacker's that resolves to 127.0.0.1.
[ "$(code GET "$url/metrics" -H 'Host: evil.example')" = 403 ] ||
    fail "/metrics for Host: evil.example is not 403"
[ "$(code GET "$url/metrics" -H "Host: localhost:${url##*:}")" = 200 ] ||
    fail "/metrics for Host: localhost:PORT is not 200"
[ "$(code POST "$url/debug/regionalloc/purge?tag=cache")" = 405 ] ||
    fail "purge without REGIONALLOC_HTTP_WRITE is not 405"
python3 - "${url##*:}" <<'EOF' || fail "raw socket: see above"
import os, socket, sys
port = int(sys.argv[1])
def send(data):
    # The server may answer and close before all is sent: whatever came
    # back is the answer.
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    out = b""
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
    finally:
        s.close()
    return out
for data in [os.urandom(4096), b"\r\n" * 1000, b"GET /" + b"a" * (1 << 20),
             b"GET /metrics HTTP/1.1\r\nX: " + b"b" * (1 << 20),
             b"POST /metrics HTTP/1.1\r\nContent-Length: 99999999\r\n\r\nabc"]:
    answer = send(data)
    status = answer.split(b" ")[1] if answer.startswith(b"HTTP/1.") else b"none"
    if status not in (b"none", b"400", b"404", b"405", b"413", b"414", b"431", b"505"):
        print("FAIL: garbage answered %r" % answer[:60])
        sys.exit(1)
    ok = send(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    if not ok.startswith(b"HTTP/1.1 200"):
        print("FAIL: /metrics after garbage: %r" % ok[:60])
        sys.exit(1)
print("raw socket: 5 kinds of garbage, served after each")
EOF
# What the server must answer at once, without the client closing its
# side; clients stalled in their headers, which must leave room for
# another; and a refused client that floods, which must hold up no one.
/usr/bin/python3 - "${url##*:}" <<'EOF' || fail "answered at once: see above"
import socket, sys, threading, time
port = int(sys.argv[1])
def status(data, timeout):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        answer = s.recv(256)
    except OSError:
        answer = b""
    s.close()
    return answer.split(b" ")[1] if answer.startswith(b"HTTP/1.") else b"none"
problems = []
for data, want in [(b" GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", b"400"),
                   (b" \r\n\r\n", b"400"),
                   (b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
                    b"Transfer-Encoding: xchunked\r\n\r\n", b"501"),
                   (b"GET /debug/regionalloc/history?since=5%00 HTTP/1.1\r\n"
                    b"Host: localhost\r\n\r\n", b"400"),
                   (b"\r\nGET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", b"200")]:
    got = status(data, 5)
    if got != want:
        problems.append("%r: %s, not %s" % (data[:40], got.decode(), want.decode()))
stalled = []
for _ in range(20):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Sl")
    stalled.append(s)
time.sleep(0.2)
got = status(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", 5)
if got != b"200":
    problems.append("a client after 20 stalled in their headers: %s" % got.decode())
for s in stalled:
    s.close()
done = []
def flood():
    s = socket.create_connection(("127.0.0.1", port))
    junk = b"garbage\r\n" + b"x" * (1 << 20)
    start = time.time()
    try:
        while time.time() - start < 20:
            s.send(junk)
    except OSError:
        pass
    s.close()
    done.append(time.time() - start)
t = threading.Thread(target=flood)
t.start()
time.sleep(0.2)
got = status(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", 2)
t.join()
if got != b"200":
    problems.append("a client during a flood: %s" % got.decode())
if not done or done[0] > 10:
    problems.append("the flood went on for %.1f s" % (done[0] if done else -1))
for p in problems:
    print("FAIL: " + p)
print("answered at once: 5 requests, a client after 20 stalled ones, one during a flood")
sys.exit(1 if problems else 0)
EOF

# -- the opt-in purge, and tags by thread name ---------------------------------------
start_server write REGIONALLOC_HTTP_WRITE=1 \
    'REGIONALLOC_THREAD_TAGS=worker-*=workers' || exit 1
[ "$(code POST "$url/debug/regionalloc/purge?tag=sessions" \
    -H 'X-Regionalloc-Write: 1')" = 200 ] ||
    fail "purge with REGIONALLOC_HTTP_WRITE=1 and the write header is not 200"
# What a page in a browser sends cross-site: no custom header; or the
# Host of a rebound name.
[ "$(code POST "$url/debug/regionalloc/purge?tag=sessions" \
    -H 'Origin: http://evil.example')" = 403 ] ||
    fail "a cross-site purge (no X-Regionalloc-Write) is not 403"
[ "$(code POST "$url/debug/regionalloc/purge?tag=sessions" \
    -H 'X-Regionalloc-Write: 1' -H 'Host: evil.example')" = 403 ] ||
    fail "a purge with a foreign Host is not 403"
if curl -s -D - -o /dev/null -X OPTIONS \
    -H 'Origin: http://evil.example' \
    -H 'Access-Control-Request-Method: POST' \
    -H 'Access-Control-Request-Headers: x-regionalloc-write' \
    "$url/debug/regionalloc/purge?tag=sessions" | grep -qi '^access-control-allow'; then
    fail "a preflight was granted"
fi
# Bodies that never end, on more connections than the server's 16 places:
# a Content-Length far past what comes, chunks that never end, a purge with
# a body. No endpoint reads a body: each is answered at its head while its
# client holds the connection open, and curl is answered 200 after them
# (before, they held the places, and curl got 503 after 30 s). A wait of
# 10 s for each answer is a cap, not a measure.
python3 - "${url##*:}" "$url" <<'EOF' || fail "slow bodies: see above"
import socket, subprocess, sys
port, url = int(sys.argv[1]), sys.argv[2]
kinds = [(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
          b"Content-Length: 100000\r\n\r\nx", b"200"),
         (b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n100\r\nab", b"200"),
         (b"POST /debug/regionalloc/purge?tag=sessions HTTP/1.1\r\n"
          b"Host: localhost\r\nX-Regionalloc-Write: 1\r\n"
          b"Content-Length: 100000\r\n\r\nx", b"200")]
slow, problems = [], []
for i in range(20):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(kinds[i % 3][0])
    slow.append(s)
for i, s in enumerate(slow):
    try:
        answer = s.recv(256)
    except OSError as e:
        answer = str(e).encode()
    status = answer.split(b" ")[1] if answer.startswith(b"HTTP/1.") else b"none"
    if status != kinds[i % 3][1]:
        problems.append("slow body %d: %r" % (i, answer[:40]))
got = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                      "--max-time", "10", url + "/metrics"],
                     capture_output=True, text=True).stdout
if got != "200":
    problems.append("curl after 20 slow bodies: %s" % got)
for s in slow:
    s.close()
for p in problems:
    print("FAIL: " + p)
print("slow bodies: 20 answered at their heads, then curl")
sys.exit(1 if problems else 0)
EOF
# Tags by thread name stand in front of pthread_setname_np: override only.
if [ "${RA_OVERRIDE:-1}" = 1 ]; then
    serves "$url/metrics" '^regionalloc_tag_allocated_bytes{tag="workers"} [1-9]' ||
        fail "the worker threads' tag \"workers\" never held memory"
fi

# -- an unmodified program: sleep under LD_PRELOAD, served by REGIONALLOC_HTTP ----------
port=$(free_port)
REGIONALLOC_HTTP=127.0.0.1:$port LD_PRELOAD=$lib sleep 30 2>"$tmp/sleep.err" &
pids+=($!)
serves "http://127.0.0.1:$port/metrics" '^regionalloc_untagged_allocated_bytes ' ||
    fail "sleep under LD_PRELOAD: no /metrics on port $port: $(cat "$tmp/sleep.err")"

# -- the page: curl gets it, an HTML parser finds the example's tags ----------------
[ "$(code GET "$url/debug/regionalloc")" = 301 ] || fail "/debug/regionalloc is not a redirect"
curl -s -L -o "$tmp/page.html" -w '%{content_type}' "$url/debug/regionalloc" >"$tmp/page.type" ||
    fail "curl -L $url/debug/regionalloc failed"
grep -q '^text/html' "$tmp/page.type" || fail "the page is $(cat "$tmp/page.type")"
/usr/bin/python3 - "$tmp/page.html" <<'PY' || fail "the page does not parse as the tag table"
import html.parser, sys

class Rows(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.external = [], []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-tag" in a:
            self.tags.append(a["data-tag"])
        for k in ("src", "href"):
            if a.get(k, "").startswith(("http:", "https:", "//")):
                self.external.append(a[k])

p = Rows()
p.feed(open(sys.argv[1], encoding="utf-8").read())
assert {"cache", "sessions"} <= set(p.tags), p.tags
assert not p.external, p.external
print("page: rows for", ", ".join(p.tags))
PY

# -- port 0, found again: the live segment and regionalloc-top say where ----------
top=$builddir/tools/regionalloc-top
if [ -x "$top" ]; then
    REGIONALLOC_HTTP=127.0.0.1:0 REGIONALLOC_SHM=1 REGIONALLOC_SHM_INTERVAL=50ms \
        LD_PRELOAD=$lib sleep 30 2>"$tmp/port0.err" &
    sleeper=$!
    pids+=($sleeper)
    served=
    for ((i = 0; i < 100; i++)); do
        served=$("$top" 2>/dev/null |
            awk -v p="$sleeper" '$1 == p { for (f = 2; f <= NF; f++)
                if ($f ~ /^127\.0\.0\.1:[0-9]+$/) print $f }')
        [ -n "$served" ] && break
        sleep 0.1
    done
    if [ -z "$served" ]; then
        fail "regionalloc-top lists no HTTP address for $sleeper: $("$top" 2>&1)"
    else
        serves "http://$served/metrics" '^regionalloc_untagged_allocated_bytes ' ||
            fail "the address regionalloc-top listed, $served, serves no /metrics"
        http=$("$top" --json "$sleeper" | python3 -c 'import json, sys; print(json.load(sys.stdin)["http"])')
        [ "$http" = "$served" ] || fail "--json says http $http, the list $served"
        echo "port 0 found: regionalloc-top lists $served, which serves /metrics"
    fi
    # Killed, it cannot remove its segment: --clean does.
    kill "$sleeper" 2>/dev/null
    wait "$sleeper" 2>/dev/null
    "$top" --clean >/dev/null 2>&1
else
    fail "$top not built"
fi

# -- a real Prometheus server scrapes the example -----------------------------------------
if [ "$have_prometheus" = 1 ]; then
    target=${url#http://}
    cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: regionalloc
    static_configs:
      - targets: ["$target"]
  - job_name: top
    params:
      top: ["2"]
    static_configs:
      - targets: ["$target"]
EOF
    pport=$(free_port)
    # promql QUERY: the value of the query's first result ("" if none).
    promql() {
        curl -s "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" |
            python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
    }
    prometheus --config.file="$tmp/prometheus.yml" \
        --storage.tsdb.path="$tmp/tsdb" \
        --web.listen-address="127.0.0.1:$pport" >"$tmp/prometheus.log" 2>&1 &
    pids+=($!)
    answer=
    query='count_over_time(regionalloc_tag_allocated_bytes{tag="cache"}[1m])'
    for ((i = 0; i < 120; i++)); do
        answer=$(curl -s "http://127.0.0.1:$pport/api/v1/query" \
            --data-urlencode "query=$query" || true)
        if python3 -c 'import json, sys; r = json.loads(sys.argv[1])["data"]["result"]; sys.exit(0 if r and float(r[0]["value"][1]) >= 2 else 1)' "$answer" 2>/dev/null; then
            break
        fi
        answer=
        sleep 0.5
    done
    if [ -z "$answer" ]; then
        fail "Prometheus did not scrape $target twice: $(tail -3 "$tmp/prometheus.log")"
    else
        value=$(curl -s "http://127.0.0.1:$pport/api/v1/query" \
            --data-urlencode 'query=regionalloc_tag_allocated_bytes{tag="cache"}' |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')
        [ "$value" = 16777216 ] ||
            fail "Prometheus says the cache holds '$value' bytes, want 16777216"
        echo "prometheus: scraped $target, regionalloc_tag_allocated_bytes{tag=\"cache\"} = $value"
        # The job that asks ?top=2: two tags and the rest, which keeps
        # the family's sum: with untagged, the process's, in each scrape.
        for ((i = 0; i < 60; i++)); do
            n=$(promql 'count(regionalloc_tag_allocated_bytes{job="top"})')
            [ "$n" = 3 ] && break
            sleep 0.5
        done
        [ "$n" = 3 ] || fail "Prometheus holds $n series of the ?top=2 job, want 3"
        rest=$(promql 'regionalloc_tag_allocated_bytes{job="top",tag="(rest)"}')
        gap=$(promql 'sum by (job) (regionalloc_tag_allocated_bytes{job="top"})
            + on (job) regionalloc_untagged_allocated_bytes{job="top"}
            - on (job) regionalloc_jemalloc_allocated_bytes{job="top"}')
        { [ -n "$rest" ] && [ "$rest" != 0 ] && [ "$gap" = 0 ]; } ||
            fail "Prometheus, ?top=2: (rest) holds '$rest', tags + untagged - process = '$gap'"
        echo "prometheus: ?top=2 scraped as 3 series, (rest) = $rest, the sum whole"
    fi
fi

finish

"""The dashboard (GET /debug/regionalloc/) in a real browser (headless
Chromium over the DevTools protocol, tests/cdp.py), against a running
examples/server: what it shows with JavaScript off, then live: the tags
and figures that /metrics serves, the bar of the process's parts (its
RssAnon) and its cgroup's figures as the JSON report they were drawn
from, and as a report held on its way and made to say that the parts
exceed RssAnon, the chart's points, the allocation sites
of the profile, the checkpoints, sorting and picking a tag by mouse clicks
with no reload, the budget bars' colours, no request to another host, a
narrow window, and screenshots that are not blank.

Usage: dashboard_check.py BASE_URL OUT_DIR [--many]   (BASE_URL: http://127.0.0.1:PORT)
With --many, against a server run with --many (hundreds of tags), it
checks the listing instead: the 50 tags whose subtrees hold the most
resident bytes (as computed here from the JSON report of every tag), a
row per roll-up of the others with their figures summed, each after the
listed children of its tag, the budget bars against the largest listed
tag, with JavaScript off and live, sorted, and with ?top=all and ?top=0.
Otherwise the server runs with REGIONALLOC_LIMITS giving "sessions" a soft limit it
passes and "workers" a hard limit it reaches; its "cache" and "sessions"
are children of "app" (a tag tree); and with --binary-names, which adds a
tag named by the bytes FF FE "-bin" (not UTF-8) with a child "bin-part",
and the UTF-8 tag "\u00ff\u00fe-bin" that JSON reads the first one's name
as: the page must link, pick and nest them by their bytes and ids. Prints
one line per failed check; exit status 1 if any failed."""

import base64
import json
import os
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdp  # noqa: E402
from listing_rule import listing  # noqa: E402

base, out_dir = sys.argv[1], sys.argv[2]
many = sys.argv[3:] == ["--many"]
dashboard = base + "/debug/regionalloc/"
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)
    return ok


def fetch(path):
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return r.read().decode()


def metrics():
    """{(family, tag): value} of the per-tag series /metrics serves, the
    label's escapes undone: a byte that is not UTF-8 is then the text \\xNN,
    as the page shows it."""
    out = {}
    for m in re.finditer(r'^(regionalloc_tag_\w+)\{tag="((?:[^"\\]|\\.)*)"\} (\d+)$',
                         fetch("/metrics"), re.M):
        tag = re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1), m.group(2))
        out[(m.group(1), tag)] = int(m.group(3))
    return out


# --binary-names: as the page shows them (escape.c's text style), and their
# names' exact bytes as a query value.
BIN, PART, TWIN = "\\xff\\xfe-bin", "bin-part", "\u00ff\u00fe-bin"
BIN_URL, TWIN_URL = "%FF%FE-bin", "%C3%BF%C3%BE-bin"
# Tags whose figures never change while the server runs.
STILL = ("cache", "app", BIN, PART, TWIN)


ROWS = """Array.from(document.querySelectorAll('#tags tbody tr[data-id]')).map(function (tr) {
  var c = tr.cells;
  return {name: tr.dataset.tag, id: Number(tr.dataset.id), parent: Number(tr.dataset.parent),
          indent: c[0].style.paddingLeft, selected: tr.classList.contains('selected'),
          allocated: Number(c[1].dataset.bytes), resident: Number(c[2].dataset.bytes),
          mapped: Number(c[3].dataset.bytes), bar: c[5].querySelector('.bar').className,
          text: c[1].textContent};
})"""

def tree_order(rows, key=None, desc=False):
    """The rows as the page orders them: each tag before its children,
    siblings by key (id order without one)."""
    kids = {}
    for r in rows:
        kids.setdefault(r["parent"], []).append(r)
    out = []

    def walk(parent):
        for r in sorted(kids.get(parent, []),
                        key=lambda r: (r[key] if key else 0, r["id"]), reverse=desc):
            out.append(r["name"])
            walk(r["id"])
    walk(0)
    return out


def check_tree(rows, where):
    """cache and sessions under app, bin-part under the tag that is not
    UTF-8 (not under the one whose JSON name reads the same), indented;
    the tree's order."""
    by = {r["name"]: r for r in rows}
    app = by.get("app", {}).get("id")
    check(app and by.get("cache", {}).get("parent") == app and by.get("sessions", {}).get("parent") == app
          and by["app"]["parent"] == 0,
          "%s: not the tree app > cache, sessions: %s" % (where, rows))
    check(by.get("cache", {}).get("indent") == "24px" and by.get("app", {}).get("indent") == "6px",
          "%s: the children are not indented under their parent: %s" % (where, rows))
    binary = by.get(BIN, {}).get("id")
    check(binary and by.get(PART, {}).get("parent") == binary and by[BIN]["parent"] == 0 and
          by.get(TWIN, {}).get("parent") == 0 and by[TWIN]["id"] != binary,
          "%s: not the tree %s > %s beside %s: %s" % (where, BIN, PART, TWIN, rows))
    check(by.get(PART, {}).get("indent") == "24px" and by.get(BIN, {}).get("indent") == "6px",
          "%s: %s is not indented under %s: %s" % (where, PART, BIN, rows))
    check([r["name"] for r in rows] == tree_order(rows), "%s: not in the tree's order: %s" % (where, rows))


def profile_links(b, name):
    """The profile links of the row of the tag shown as name."""
    return b.evaluate("Array.from(document.querySelectorAll('#tags tbody tr')).filter(function (tr) {"
                      "return tr.dataset.tag === %s; }).map(function (tr) {"
                      "return Array.from(tr.querySelectorAll('td.profile a')).map(function (a) {"
                      "return a.href; }); })[0] || []" % json.dumps(name))


def check_links(b, where):
    """The profile links of a tag that is not UTF-8 (its own and its
    subtree's) and of its UTF-8 look-alike carry their exact bytes, and
    serve a profile."""
    heap = base + "/debug/pprof/heap?"
    for name, want in ((BIN, [heap + "tag=" + BIN_URL, heap + "tree=" + BIN_URL]),
                       (TWIN, [heap + "tag=" + TWIN_URL])):
        links = profile_links(b, name)
        check(links == want, "%s: %s's profile links %s, want %s" % (where, name, links, want))
        for link in links:
            with urllib.request.urlopen(link, timeout=30) as r:
                check(r.status == 200 and r.read(2) == b"\x1f\x8b", "%s: %s is no gzip profile" % (where, link))


def failed_responses(b):
    """The page's requests of the server's documents that it did not
    answer with 200."""
    return [(e["params"]["response"]["status"], e["params"]["response"]["url"]) for e in b.events
            if e["method"] == "Network.responseReceived" and e["params"]["response"]["status"] != 200
            and e["params"]["response"]["url"].startswith(base + "/debug/")]


def check_pick_binary(b, bin_id):
    """A click on the row of the tag that is not UTF-8 (id bin_id, as the
    server's static page says) picks it: the address names its bytes, the
    chart and the sites are its own (the sites' bytes those of its folded
    profile), and no request fails."""
    b.click("tr[data-id=\"%d\"] td.tag" % bin_id)
    try:
        b.wait_for("document.querySelector('#flame .frame') !== null && "
                   "document.querySelector('#flame .frame').dataset.name === %s" % json.dumps("tag:" + BIN), 30)
    except TimeoutError:
        check(False, "pick %s: the sites shown: %s" % (BIN, b.evaluate("document.getElementById('flame').textContent")))
    folded = fetch("/debug/regionalloc/profile?tag=" + BIN_URL)
    want = sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines() if line)
    got = b.evaluate("Number(document.querySelector('#flame .frame').dataset.bytes)")
    check(want >= 1 << 20 and got == want, "pick %s: the sites hold %s bytes, its profile %d" % (BIN, got, want))
    check(b.evaluate("location.hash") == "#tag=" + BIN_URL,
          "pick %s: the address says %s" % (BIN, b.evaluate("location.hash")))
    check(b.evaluate("document.getElementById('chart-title').textContent") == "tag " + BIN,
          "pick %s: the chart is %r's" % (BIN, b.evaluate("document.getElementById('chart-title').textContent")))
    check([r["name"] for r in b.evaluate(ROWS) if r["selected"]] == [BIN], "pick %s: not the selected row" % BIN)
    b.evaluate("window.__polls = Number(document.body.dataset.polls); true")
    b.wait_for("Number(document.body.dataset.polls) >= window.__polls + 1", 30)
    check(b.evaluate("document.getElementById('status').textContent").startswith("live"),
          "pick %s: the page stopped polling: %s" % (BIN, b.evaluate("document.getElementById('status').textContent")))
    asked = [e["params"]["request"]["url"] for e in b.events if e["method"] == "Network.requestWillBeSent"]
    for path in ("/debug/regionalloc/profile?tag=" + BIN_URL, "/debug/regionalloc/history?since="):
        check(any(u.startswith(base + path) and u.endswith("tag=" + BIN_URL) for u in asked),
              "pick %s: no request for %s...tag=%s" % (BIN, path, BIN_URL))
    check(failed_responses(b) == [], "pick %s: requests failed: %s" % (BIN, failed_responses(b)))


# -- the process's parts ------------------------------------------------------

PARTS = ["tags", "untagged", "metadata", "library", "other"]
REPORT = "/debug/regionalloc/report?format=json"

# The bar of the process's parts as the page shows it, the report's time
# it is from (0 on the static page), or null without a bar.
PARTS_SHOWN = """(function () {
  var bar = document.getElementById('parts-bar'), cg = document.getElementById('cgroup');
  if (!bar) return null;
  function fig(id) {
    var e = document.getElementById(id);
    return e ? {bytes: Number(e.dataset.bytes), text: e.textContent} : null;
  }
  function each(sel) {
    return Array.from(document.querySelectorAll(sel)).map(function (e) {
      return {part: e.dataset.part, bytes: Number(e.dataset.bytes), text: e.textContent,
              title: e.title, width: e.getBoundingClientRect().width};
    });
  }
  var over = document.getElementById('parts-over');
  return {time_ns: Number(document.body.dataset.timeNs || 0), width: bar.getBoundingClientRect().width,
          segments: each('#parts-bar .part'), legend: each('#parts-legend [data-part]'),
          rss_anon: fig('rss-anon'), rss_file: fig('rss-file'), page_tables: fig('page-tables'),
          parts_over: fig('parts-over-bytes'), over_shown: !!over && !over.hidden,
          over_text: over ? over.textContent : null,
          cgroup: !cg || cg.hidden ? null : {current: fig('cgroup-current'), limit: fig('cgroup-limit')}};
})()"""

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def reads_as(text, n):
    """Whether text says n bytes as the page writes a size: in bytes below
    1 KiB, else to a tenth of the largest unit it holds one of."""
    m = re.fullmatch(r"(\d+(?:\.\d)?) (B|KiB|MiB|GiB)", text or "")
    if m is None:
        return False
    unit = UNITS[m.group(2)]
    if unit == 1:
        return n < 1024 and m.group(1) == str(n)
    return unit <= n and (unit == 1 << 30 or n < unit << 10) and abs(float(m.group(1)) * unit - n) <= unit / 20 + 1


def check_parts(shown, want, where):
    """The bar of the process's parts: its five segments, in order, fill
    its width, each in proportion to its part; each part's bytes in the
    legend and the segment's title; the parts add up to RssAnon and, where
    they exceed it, the bytes of the line that says so, shown only then.
    With want (the report's process object that the page drew), every
    figure is the report's."""
    if not check(shown, "%s: no bar of the process's parts" % where):
        return
    segs, legend = shown["segments"], shown["legend"]
    if not check([x["part"] for x in segs] == PARTS and [x["part"] for x in legend] == PARTS,
                 "%s: the bar's segments %s and legend %s, want %s" % (where, segs, legend, PARTS)):
        return
    total = sum(x["width"] for x in segs)
    check(abs(total - shown["width"]) <= max(1, shown["width"] / 200),
          "%s: the segments are %.2f px wide together, the bar %.2f px" % (where, total, shown["width"]))
    whole = sum(x["bytes"] for x in segs)
    for seg, key in zip(segs, legend):
        check(seg["bytes"] == key["bytes"] and reads_as(key["text"], key["bytes"]) and
              seg["title"] == "%s: %s" % (seg["part"], key["text"]),
              "%s: %s is %d bytes in the bar (%r), %d in the legend (%r)" %
              (where, seg["part"], seg["bytes"], seg["title"], key["bytes"], key["text"]))
        check(whole and abs(seg["width"] - shown["width"] * seg["bytes"] / whole) <= 1,
              "%s: %s's segment %.2f px of %.2f, its part %d bytes of %d" %
              (where, seg["part"], seg["width"], shown["width"], seg["bytes"], whole))
    figures = ("rss_anon", "rss_file", "page_tables", "parts_over")
    if not check(all(shown[k] for k in figures), "%s: figures missing beside the bar: %s" % (where, shown)):
        return
    for k in figures:
        check(reads_as(shown[k]["text"], shown[k]["bytes"]), "%s: %s reads %s" % (where, k, shown[k]))
    over = shown["parts_over"]["bytes"]
    check(whole == shown["rss_anon"]["bytes"] + over,
          "%s: the parts add up to %d, RssAnon %d and over it %d" % (where, whole, shown["rss_anon"]["bytes"], over))
    check(shown["over_shown"] == (over > 0) and
          shown["over_text"] == "named parts exceed RssAnon by " + shown["parts_over"]["text"],
          "%s: the line %r %s with the parts %d bytes over RssAnon" %
          (where, shown["over_text"], "shown" if shown["over_shown"] else "hidden", over))
    if want is None:
        return
    got = {x["part"]: x["bytes"] for x in segs}
    check(got == want["parts"], "%s: the parts %s, the report's %s" % (where, got, want["parts"]))
    for k in figures:
        check(shown[k]["bytes"] == want[k], "%s: %s %d, the report's %d" % (where, k, shown[k]["bytes"], want[k]))
    check_cgroup(shown, want["cgroup"], where)


def check_cgroup(shown, cg, where):
    """The cgroup's figures beside the bar as the report's cgroup object
    (None: shown not at all); a limit of 0 reads "no limit"."""
    if not check(shown and (shown["cgroup"] is None) == (cg is None),
                 "%s: the cgroup shown %s, the report's %s" % (where, shown and shown["cgroup"], cg)):
        return
    if cg is None:
        return
    cur, lim = shown["cgroup"]["current"], shown["cgroup"]["limit"]
    check(cur and lim and cur["bytes"] == cg["current"] and reads_as(cur["text"], cur["bytes"]) and
          lim["bytes"] == cg["limit"] and
          (lim["text"] == "no limit" if cg["limit"] == 0 else reads_as(lim["text"], lim["bytes"])),
          "%s: the cgroup %s, the report's %s" % (where, shown["cgroup"], cg))


def body_text(result):
    """The text of a response body as the DevTools protocol gives it."""
    return base64.b64decode(result["body"]).decode() if result.get("base64Encoded") else result["body"]


def report_shown(b, time_ns):
    """The JSON report of time_ns that the page received, as it received
    it (the DevTools protocol keeps the bodies), or None."""
    for e in reversed(b.events):
        if e["method"] != "Network.responseReceived" or REPORT not in e["params"]["response"]["url"]:
            continue
        try:
            r = json.loads(body_text(b.call("Network.getResponseBody", requestId=e["params"]["requestId"])))
        except (RuntimeError, ValueError):
            continue  # not loaded yet, or no longer kept
        if r["time_ns"] == time_ns:
            return r
    return None


def parts_once(b, after, where):
    """The bar as shown once the page shows a report later than after
    (nanoseconds), or None."""
    try:
        return b.wait_for("(function () { var s = %s; return s && s.time_ns > %d ? s : null; })()"
                          % (PARTS_SHOWN, after), 30)
    except TimeoutError:
        check(False, "%s: no bar of a report after %d ns: %s" % (where, after, b.evaluate(PARTS_SHOWN)))
    return None


def check_parts_live(b, after, where):
    """The bar against the report that the page drew it from; returns
    that report's time."""
    shown = parts_once(b, after, where)
    if shown is None:
        return after
    want = report_shown(b, shown["time_ns"])
    if check(want, "%s: the page shows a report of %d ns that it never received" % (where, shown["time_ns"])):
        check_parts(shown, want["process"], where)
    return shown["time_ns"]


def check_parts_held(b):
    """What the server here does not give: named parts that exceed
    RssAnon. The DevTools protocol holds a report on its way to the page
    and makes its process so (the parts add up to RssAnon and 3 MiB more,
    other is 0), its cgroup one of no limit; the page shows that, the over
    line under the bar, until its next report, which is held until the
    page has been read. Returns the report's time."""
    b.call("Fetch.enable", patterns=[{"urlPattern": "*" + REPORT + "*", "requestStage": "Response"}])
    mark = len(b.events)
    paused = b.wait_event("Fetch.requestPaused", mark, 30)["params"]
    report = json.loads(body_text(b.call("Fetch.getResponseBody", requestId=paused["requestId"])))
    p = report["process"]
    p["parts"]["library"] += p["parts"]["other"] + (3 << 20)
    p["parts"]["other"] = 0
    p["parts_over"] = 3 << 20
    p["cgroup"] = {"current": 7 << 30, "anon": 6 << 30, "file": 1 << 30, "limit": 0}
    b.call("Fetch.fulfillRequest", requestId=paused["requestId"], responseCode=200,
           responseHeaders=[{"name": "Content-Type", "value": "application/json"}],
           body=base64.b64encode(json.dumps(report).encode()).decode())
    try:
        shown = b.wait_for("(function () { var s = %s; return s && s.time_ns === %d ? s : null; })()"
                           % (PARTS_SHOWN, report["time_ns"]), 30)
    except TimeoutError:
        shown = None
        check(False, "parts over RssAnon: the page never showed the held report: %s" % b.evaluate(PARTS_SHOWN))
    if shown:
        check_parts(shown, p, "parts over RssAnon")
    for e in b.events[mark:]:
        if e["method"] == "Fetch.requestPaused" and e["params"]["requestId"] != paused["requestId"]:
            b.call("Fetch.continueRequest", requestId=e["params"]["requestId"])
    b.call("Fetch.disable")
    return report["time_ns"]


# -- many tags: the listing ---------------------------------------------------

ALL_ROWS = """Array.from(document.querySelectorAll('#tags tbody tr')).map(function (tr) {
  var c = tr.cells, bar = c[5] && c[5].querySelector('.bar');
  return {rest: tr.dataset.rest !== undefined, name: tr.dataset.tag || c[0].textContent,
          id: Number(tr.dataset.id || 0), parent: Number(tr.dataset.parent || 0),
          tags: Number(tr.dataset.tags || 0), allocated: Number(c[1].dataset.bytes),
          mapped: Number(c[3].dataset.bytes), tree: Number(c[4].dataset.bytes),
          bar: bar ? bar.style.width : null, indent: c[0].style.paddingLeft};
})"""


def under(by, tag_id, parent):
    """Whether the tag tag_id is parent's descendant (parent 0: always)."""
    p = by[tag_id]["parent_id"] if tag_id else None
    while p is not None and p != parent:
        p = by[p]["parent_id"]
    return parent == 0 or p == parent


def check_listing(rows, full, top, where):
    """The rows as the rule lists them: the tags, the roll-ups (named,
    indented, summed, in their place, without a bar), the bars of the tags
    against the largest listed one."""
    want, groups, by = listing(full, top)
    listed = [r for r in rows if not r["rest"]]
    rest = [r for r in rows if r["rest"]]
    check({r["id"] for r in listed} == want,
          "%s: %d tags listed, want %d; extra %s, missing %s" %
          (where, len(listed), len(want), sorted(r["name"] for r in listed if r["id"] not in want),
           sorted(by[i]["name"] for i in want - {r["id"] for r in listed})))
    check({r["parent"]: r["tags"] for r in rest} == {p: len(g) for p, g in groups.items()},
          "%s: roll-ups %s, want %s" % (where, {r["parent"]: r["tags"] for r in rest},
                                        {p: len(g) for p, g in groups.items()}))
    check(len(listed) + sum(r["tags"] for r in rest) == len(full["tags"]),
          "%s: %d listed and %d rolled up of %d tags" %
          (where, len(listed), sum(r["tags"] for r in rest), len(full["tags"])))
    for i, r in enumerate(rows):
        if not r["rest"]:
            continue
        g, p = groups.get(r["parent"], []), r["parent"]
        depth = 0
        while p:
            depth, p = depth + 1, by[p]["parent_id"]
        n = "{:,}".format(r["tags"])
        name = ("(%s more under %s)" % (n, by[r["parent"]]["name"]) if r["parent"]
                else "(%s more tag%s)" % (n, "" if r["tags"] == 1 else "s"))
        check(r["name"] == name and r["indent"] == "%dpx" % (6 + 18 * depth),
              "%s: a roll-up row reads %r at %s, want %r at %dpx" % (where, r["name"], r["indent"], name, 6 + 18 * depth))
        # The sessions' figures move between two reads; the others' do not.
        still = [t for t in g if t["name"] != "sessions"]
        exact = len(still) == len(g)
        check(r["mapped"] == r["tree"] and r["bar"] is None and
              all((r[k] == sum(t[k] for t in g)) if exact else (r[k] > sum(t[k] for t in still))
                  for k in ("allocated", "mapped")),
              "%s: %s holds %r, want the sums of its tags" % (where, name, r))
        # After its tag and the listed tags under it, before any other.
        j = i - 1
        while j >= 0 and rows[j]["id"] != r["parent"] and r["parent"]:
            check(under(by, rows[j]["id"] or rows[j]["parent"], r["parent"]) or
                  (rows[j]["rest"] and rows[j]["parent"] == r["parent"]),
                  "%s: %s is not under %s's tag" % (where, rows[j]["name"], name))
            j -= 1
        if i + 1 < len(rows):
            nxt = rows[i + 1]
            check(r["parent"] and not under(by, nxt["id"] or nxt["parent"], r["parent"]),
                  "%s: %s is followed by %s (%s)" % (where, name, nxt["name"], "under its tag"
                                                     if r["parent"] else "the top level's is last"))
    widest = max([r["mapped"] for r in listed] or [0])
    bars = [(r["name"], r["bar"], "%d%%" % (r["mapped"] * 100 // widest)) for r in listed]
    check(all(got == want for _, got, want in bars),
          "%s: bars not against the largest listed tag: %s" % (where, [b for b in bars if b[1] != b[2]]))


def check_many(b):
    full = json.loads(fetch("/debug/regionalloc/report?format=json"))
    check(len(full["tags"]) >= 300 and full["top"] is None, "many: %d tags in the report" % len(full["tags"]))
    # JavaScript off: the server's listing.
    b.call("Emulation.setScriptExecutionDisabled", value=True)
    b.open(dashboard)
    b.wait_for("document.readyState === 'complete' && !!document.getElementById('tags')")
    check_listing(b.evaluate(ALL_ROWS), full, 50, "static page")
    check(b.evaluate("document.getElementById('listed').textContent").startswith("The 50 tags whose subtrees"),
          "static page: the note on the listing reads %r" % b.evaluate("document.getElementById('listed').textContent"))
    shown = b.evaluate(PARTS_SHOWN)
    check_parts(shown, None, "many, static page")
    check_cgroup(shown, full["process"]["cgroup"], "many, static page")
    for top, n in (("all", len(full["tags"])), ("0", 0)):
        b.open(dashboard + "?top=" + top)
        b.wait_for("document.readyState === 'complete' && !!document.getElementById('tags')")
        check_listing(b.evaluate(ALL_ROWS), full, n, "static page, ?top=" + top)
    b.call("Emulation.setScriptExecutionDisabled", value=False)
    # Live: the JSON report of the 50 largest, every 2 s.
    b.open(dashboard)
    b.wait_for("Number(document.body.dataset.polls) >= 2", 60)
    check_listing(b.evaluate(ALL_ROWS), full, 50, "live")
    asked = [e["params"]["request"]["url"] for e in b.events if e["method"] == "Network.requestWillBeSent"]
    check(any(u == base + "/debug/regionalloc/report?format=json&top=50" for u in asked),
          "live: the page did not ask for the 50 largest: %s" % [u for u in asked if "report" in u])
    check(b.evaluate("document.getElementById('listed').textContent").startswith("The 50 tags whose subtrees"),
          "live: the note on the listing reads %r" % b.evaluate("document.getElementById('listed').textContent"))
    # Sorted by a column: siblings move, each roll-up stays after them.
    b.click("th[data-key=allocated]")
    check_listing(b.evaluate(ALL_ROWS), full, 50, "live, sorted")
    b.evaluate("window.__polls = Number(document.body.dataset.polls); true")
    b.wait_for("Number(document.body.dataset.polls) >= window.__polls + 1", 30)
    check_listing(b.evaluate(ALL_ROWS), full, 50, "live, sorted, polled again")
    check(failed_responses(b) == [], "live: requests failed: %s" % failed_responses(b))
    b.open(dashboard + "?top=0")
    b.wait_for("Number(document.body.dataset.polls) >= 1", 60)
    check_listing(b.evaluate(ALL_ROWS), full, 0, "live, ?top=0")
    b.resize(1280, 800)
    b.open(dashboard)
    b.wait_for("Number(document.body.dataset.polls) >= 1", 60)
    b.screenshot(os.path.join(out_dir, "dashboard-many.png"))


b = cdp.Browser()
try:
    b.call("Network.enable")
    if many:
        check_many(b)
        sys.exit(1 if failures else 0)

    # -- JavaScript off: the server's static table -------------------------
    b.call("Emulation.setScriptExecutionDisabled", value=True)
    b.open(dashboard)
    b.wait_for("document.readyState === 'complete' && !!document.getElementById('tags')")
    static = b.evaluate(ROWS)
    tags = sorted({t for (_, t) in metrics()})
    check_tree(static, "static page")
    bin_id = {r["name"]: r["id"] for r in static}.get(BIN, 0)
    check(sorted(r["name"] for r in static) == tags,
          "static page: tags %s, /metrics has %s" % ([r["name"] for r in static], tags))
    check(b.evaluate("document.getElementById('live').hidden"),
          "static page: the live part (chart, sites) shows without its script")
    check("cache filled" in b.evaluate("document.getElementById('checkpoints').textContent"),
          "static page: no checkpoint table")
    check(all(re.match(r"^\d+(\.\d)? (B|KiB|MiB|GiB)$", r["text"]) for r in static),
          "static page: figures not in B/KiB/MiB/GiB: %s" % [r["text"] for r in static])
    check_links(b, "static page")
    # The cgroup's files never change while the server runs (test_dashboard.sh).
    shown = b.evaluate(PARTS_SHOWN)
    check_parts(shown, None, "static page")
    check_cgroup(shown, json.loads(fetch(REPORT))["process"]["cgroup"], "static page")
    # The server runs under REGIONALLOC_MEMORY_LIMIT=64G (test_dashboard.sh).
    check(b.evaluate("document.getElementById('memory-limit').textContent") == " Memory limit 64.0 GiB.",
          "static page: the memory limit reads %r"
          % b.evaluate("document.getElementById('memory-limit').textContent"))
    b.call("Emulation.setScriptExecutionDisabled", value=False)

    # -- the whole process: the limit as a line on its chart ----------------
    b.open(dashboard)
    try:
        b.wait_for("document.querySelector('#chart line.limit') !== null", 30)
    except TimeoutError:
        pass  # said below
    check(b.evaluate("(function () { var l = document.querySelector('#chart line.limit');"
                     "return l ? Number(l.getAttribute('data-bytes')) : 0; })()") == 64 << 30,
          "process: no line at the memory limit on the chart")
    check(b.evaluate("document.getElementById('memory-limit').textContent")
          == " Memory limit 64.0 GiB (environment), pressure none.",
          "process: the memory limit reads %r"
          % b.evaluate("document.getElementById('memory-limit').textContent"))
    b.open("about:blank")  # else #tag=cache would only move in this page
    b.wait_for("location.href === 'about:blank'")

    # -- live ------------------------------------------------------------
    b.open(dashboard + "#tag=cache")
    b.wait_for("Number(document.body.dataset.polls) >= 2", 60)
    b.wait_for("document.querySelector('#flame .frame') !== null", 30)
    before = metrics()
    rows = b.evaluate(ROWS)
    after = metrics()
    check(sorted(r["name"] for r in rows) == tags,
          "live: tags %s, /metrics has %s" % ([r["name"] for r in rows], tags))
    check_tree(rows, "live")
    for r in rows:
        for fig in ("allocated", "mapped"):
            fam = "regionalloc_tag_%s_bytes" % fig
            lo = min(before[(fam, r["name"])], after[(fam, r["name"])])
            hi = max(before[(fam, r["name"])], after[(fam, r["name"])])
            # The page's figures are from its last refresh, at most one
            # period (2 s) before: the cache, app (which holds nothing
            # itself) and the binary names never change, the others move
            # by what two seconds of the server's work make.
            if r["name"] in STILL:
                check(r[fig] == lo == hi, "live: %s %s %d, /metrics %d..%d" % (r["name"], fig, r[fig], lo, hi))
            else:
                check(0 < r[fig] and lo / 2 <= r[fig] <= hi * 2,
                      "live: %s %s %d, /metrics %d..%d" % (r["name"], fig, r[fig], lo, hi))
    check([r["name"] for r in rows if r["selected"]] == ["cache"],
          "live: #tag=cache did not pick the cache: %s" % rows)
    check(b.evaluate("document.getElementById('status').textContent").startswith("live"),
          "live: the status line does not say the page is live")

    # The process's parts: as the report the page drew them from, then
    # over RssAnon and in a cgroup, then as the next report again.
    check_parts_live(b, 0, "parts")
    check_parts_live(b, check_parts_held(b), "parts after the held report")

    # The numbers change in place: the same row element, new text.
    b.evaluate("window.__sessionsRow = document.querySelector('tr[data-tag=\"sessions\"]'); "
               "window.__sessionsText = __sessionsRow.textContent; "
               "window.__polls = Number(document.body.dataset.polls); true")
    b.wait_for("Number(document.body.dataset.polls) >= window.__polls + 2", 30)
    check(b.evaluate("document.querySelector('tr[data-tag=\"sessions\"]') === window.__sessionsRow"),
          "live: the sessions row was replaced, not updated in place")
    check(b.evaluate("document.querySelector('tr[data-tag=\"sessions\"]').textContent !== window.__sessionsText"),
          "live: the sessions row's figures never changed")

    # The chart: the cache's samples, as many points as samples.
    history = json.loads(fetch("/debug/regionalloc/history"))
    chart = b.evaluate("Array.from(document.querySelectorAll('#chart polyline')).map(function (p) {"
                       "return {cls: p.getAttribute('class'), n: Number(p.dataset.points),"
                       "pairs: p.getAttribute('points').trim().split(/\\s+/).filter(Boolean).length};})")
    check(sorted(c["cls"] for c in chart) == ["allocated", "mapped"], "chart: lines %s" % chart)
    check(all(c["n"] >= 3 and c["n"] == c["pairs"] for c in chart), "chart: points %s" % chart)
    cache_id = {r["name"]: r["id"] for r in rows}["cache"]
    cache_samples = [t["allocated"] for s in history["samples"] for t in s["tags"] if t["id"] == cache_id]
    check(cache_samples and set(cache_samples) == {16 << 20},
          "history: the cache's allocated bytes %s" % sorted(set(cache_samples)))
    check("16.0 MiB allocated" in b.evaluate("document.getElementById('chart-now').textContent"),
          "chart: the cache's last sample is not 16.0 MiB allocated")

    # Each row's trend, and its links to pprof (a subtree's for a parent).
    trend = b.evaluate("(function(){var p=document.querySelector('tr[data-tag=\"cache\"] td.trend polyline');"
                       "return p ? Number(p.dataset.points) : 0;})()")
    check(trend >= 3, "trend: the cache's has %d points" % trend)
    links = b.evaluate("Array.from(document.querySelectorAll('tr[data-tag=\"app\"] td.profile a'))"
                       ".map(function (a) { return a.href; })")
    check(links == [base + "/debug/pprof/heap?tag=app", base + "/debug/pprof/heap?tree=app"],
          "links: app's profile links %s" % links)
    for link in links:
        with urllib.request.urlopen(link, timeout=30) as r:
            check(r.status == 200 and r.read(2) == b"\x1f\x8b", "links: %s is no gzip profile" % link)
    check_links(b, "live")

    # The allocation sites: every frame of the cache's stacks.
    frames = set(b.evaluate("Array.from(document.querySelectorAll('#flame .frame')).map(function (f) {"
                            "return f.dataset.name;})"))
    folded = fetch("/debug/regionalloc/profile?tag=cache")
    wanted = {f for line in folded.splitlines() for f in line.rsplit(" ", 1)[0].split(";")[1:]}
    check("tag:cache" in frames and wanted and wanted <= frames,
          "sites: the page shows %s, the profile has %s" % (sorted(frames), sorted(wanted)))
    if os.environ.get("RA_LIBDW", "1") == "1":
        # Named by libdw: make_app, static, where the cache is filled, and
        # main, each with its line in server.c.
        for fn in ("make_app", "main"):
            check(any(re.fullmatch(fn + r" \(server\.c:[0-9]+\)", f) for f in frames),
                  "sites: no '%s (server.c:N)' among %s" % (fn, sorted(frames)))
    else:
        check(any(f.startswith("main+") for f in frames),
              "sites: main, where the cache is filled, is not among %s" % sorted(frames))

    # The checkpoints, as a table.
    labels = b.evaluate("Array.from(document.querySelectorAll('#checkpoints td.label')).map(function (td) {"
                        "return td.textContent;})")
    check(labels[:1] == ["cache filled"], "checkpoints: labels %s" % labels)
    heads = b.evaluate("Array.from(document.querySelectorAll('#checkpoints th')).map(function (th) {"
                       "return th.textContent;})")
    check(BIN in heads and TWIN in heads, "checkpoints: the tags' columns %s" % heads)

    # The budgets: past the soft limit warning-coloured, at the hard one red.
    for tag, colour in (("sessions", "warn"), ("workers", "full")):
        try:
            b.wait_for("document.querySelector('tr[data-tag=\"%s\"] .bar').className === 'bar %s'"
                       % (tag, colour), 30)
        except TimeoutError:
            check(False, "budget: %s's bar is not %s: %s" % (tag, colour, b.evaluate(ROWS)))

    # Sorting and picking, by mouse, with no reload.
    b.evaluate("window.__kept = 42")
    # Siblings sort; children stay under their parent.
    b.click("th[data-key=allocated]")
    rows = b.evaluate(ROWS)
    check([r["name"] for r in rows] == tree_order(rows, "allocated", True),
          "sort: allocated, largest first: %s" % rows)
    b.click("th[data-key=allocated]")
    rows = b.evaluate(ROWS)
    check([r["name"] for r in rows] == tree_order(rows, "allocated"),
          "sort: allocated, smallest first: %s" % rows)
    b.click("th[data-key=name]")
    rows = b.evaluate(ROWS)
    check([r["name"] for r in rows] == tree_order(rows, "name"), "sort: by name: %s" % rows)
    b.click("tr[data-tag=sessions] td.tag")
    b.wait_for("document.querySelector('#flame .frame') !== null && "
               "document.querySelector('#flame .frame').dataset.name === 'tag:sessions'", 30)
    check(b.evaluate("location.hash") == "#tag=sessions", "pick: the address does not name sessions")
    check(b.evaluate("document.getElementById('chart-title').textContent") == "tag sessions",
          "pick: the chart is not the sessions'")
    check([r["name"] for r in b.evaluate(ROWS) if r["selected"]] == ["sessions"],
          "pick: the sessions row is not the selected one")
    check(b.evaluate("window.__kept") == 42, "pick: the page was reloaded")
    b.wait_for("Number(document.querySelector('#chart polyline').dataset.points) >= 1", 30)
    if bin_id:
        check_pick_binary(b, bin_id)
    check(b.evaluate("window.__kept") == 42, "pick %s: the page was reloaded" % BIN)

    # The address of that pick opens the page with the tag picked.
    b.open("about:blank")
    b.wait_for("location.href === 'about:blank'")
    b.open(dashboard + "#tag=" + BIN_URL)
    try:
        b.wait_for("Number(document.body.dataset.polls) >= 1 && "
                   "document.querySelector('#tags tbody tr.selected') !== null", 30)
    except TimeoutError:
        pass
    check([r["name"] for r in b.evaluate(ROWS) if r["selected"]] == [BIN],
          "#tag=%s: the rows picked: %s" % (BIN_URL, [r["name"] for r in b.evaluate(ROWS) if r["selected"]]))

    # Nothing asked of another host.
    urls = [e["params"]["request"]["url"] for e in b.events
            if e["method"] == "Network.requestWillBeSent"]
    check(urls and all(u.startswith(base + "/") for u in urls),
          "requests elsewhere: %s" % [u for u in urls if not u.startswith(base + "/")])

    # Screenshots at 1280x800 and in a narrow window, which the page fits.
    for name, width, height in (("dashboard-1280x800.png", 1280, 800), ("dashboard-narrow.png", 420, 800)):
        b.resize(width, height)
        time.sleep(0.5)
        if width < 700:
            check(b.evaluate("document.documentElement.scrollWidth <= window.innerWidth"),
                  "narrow: the page is wider than a %d px window" % width)
        path = os.path.join(out_dir, name)
        b.evaluate("window.scrollTo(0, 0); true")
        b.screenshot(path)
        w, h, pixels = cdp.png_pixels(path)
        colours, inked = set(), 0
        for row in pixels[::4]:
            for px in row[::4]:
                colours.add(px)
                inked += px != (255, 255, 255)
        share = inked / ((len(pixels[::4])) * len(pixels[0][::4]))
        check((w, h) == (width, height) and len(colours) >= 8 and share >= 0.02,
              "%s: %dx%d, %d colours, %.1f%% not white" % (name, w, h, len(colours), 100 * share))
        print("%s: %dx%d, %d colours, %.1f%% not white" % (name, w, h, len(colours), 100 * share))
finally:
    b.close()

sys.exit(1 if failures else 0)

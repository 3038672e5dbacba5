// The live half of GET /debug/regionalloc/: it polls the server's JSON
// (the report, the history of samples, the checkpoints, a tag's folded
// allocation sites), updates the table's numbers in place, sorts it, lets
// one pick a tag (#tag=NAME in the address) and draws the chart and the
// icicle of that tag's sites. The server wrote the same table without it.
// A tag is its id (rows, parents, the pick) and the exact bytes of its
// name (links, shown as the server shows them): a name that is not UTF-8
// reads in the JSON like another, so it comes with its bytes (name_hex).
// The table lists the tags the server listed (the table's data-top: the
// report's ?top) and a row per roll-up of the others, under the listed
// tag they sit under (its id in data-rest; 0: the top level).
"use strict";
(function () {
  var REFRESH_MS = 2000;
  var CHART_H = 200, CHART_PAD = 72;
  var state = {
    tags: {},        // id -> the report's tag object
    rows: {},        // id -> <tr>
    restRows: {},    // the listed tag's id (0: the top level) -> its roll-up's <tr>
    restOf: {},      // the same id -> the report's roll-up
    sortKey: null,   // null: the tree's order
    sortDesc: false,
    selected: 0,     // tag id; 0: the whole process
    limit: 0,        // the memory limit in effect, in bytes (0: none)
    wantKey: null,   // from #tag=NAME (as queryValue), until the report has it
    samples: [],
    byTag: {},       // id -> its points (indexSamples)
    taken: 0,
    polls: 0,
    sitesFor: null
  };

  function $(id) { return document.getElementById(id); }

  // As the server writes them: "812 B", "1.0 KiB", "60.8 MiB", "2.5 GiB".
  function human(n) {
    var units = ["KiB", "MiB", "GiB"], u = -1;
    if (n < 1024) return n + " B";
    while (n >= 1024 && u < units.length - 1) { n /= 1024; u++; }
    return n.toFixed(1) + " " + units[u];
  }

  function humanNs(ns) {
    var s = ns / 1e9;
    if (s < 1) return (ns / 1e6).toFixed(1) + " ms";
    if (s < 120) return s.toFixed(1) + " s";
    return (s / 60).toFixed(1) + " min";
  }

  function get(url, asJson) {
    return fetch(url, {cache: "no-store"}).then(function (r) {
      if (!r.ok) {
        return r.text().then(function (t) {
          var e = new Error(t.trim() || r.statusText);
          e.status = r.status;
          throw e;
        });
      }
      return asJson ? r.json() : r.text();
    });
  }

  // -- names: arbitrary bytes ----------------------------------------------

  var encoder = new TextEncoder(), decoder = new TextDecoder();

  // A name's or label's bytes: hex when the JSON gives them (the name is
  // not UTF-8), else the string's UTF-8, which the JSON then keeps exact.
  function bytesOf(str, hex) {
    if (typeof hex !== "string") return Array.from(encoder.encode(str));
    var out = [];
    for (var i = 0; i + 1 < hex.length; i += 2) out.push(parseInt(hex.substr(i, 2), 16));
    return out;
  }

  function hex2(c, upper) {
    var h = (c < 16 ? "0" : "") + c.toString(16);
    return upper ? h.toUpperCase() : h;
  }

  // As a URL's query value, as dashboard.c writes its links: unreserved bytes
  // as they are, every other one as %XX. Also a tag's key: the exact bytes.
  function queryValue(bytes) {
    return bytes.map(function (c) {
      var ch = String.fromCharCode(c);
      return /^[A-Za-z0-9._~-]$/.test(ch) ? ch : "%" + hex2(c, true);
    }).join("");
  }

  // The bytes of a query value or an address's fragment: %XX decoded,
  // the rest as UTF-8 (a browser may show it so). decodeURIComponent would
  // throw on a byte that is not UTF-8.
  function bytesOfQuery(s) {
    var out = [];
    s.split(/(%[0-9A-Fa-f]{2})/).forEach(function (part) {
      if (/^%[0-9A-Fa-f]{2}$/.test(part)) out.push(parseInt(part.slice(1), 16));
      else Array.prototype.push.apply(out, encoder.encode(part));
    });
    return out;
  }

  // The length of the well-formed UTF-8 sequence at b[i], or 0 (a stray
  // byte, an overlong form, a surrogate, past U+10FFFF, cut), as escape.c.
  function utf8Length(b, i) {
    var c = b[i], lo = 0x80, hi = 0xbf;
    function cont(k) { return k < b.length && (b[k] & 0xc0) === 0x80; }
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) return cont(i + 1) ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
      if (c === 0xe0) lo = 0xa0; else if (c === 0xed) hi = 0x9f;
      return b[i + 1] >= lo && b[i + 1] <= hi && cont(i + 2) ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
      if (c === 0xf0) lo = 0x90; else if (c === 0xf4) hi = 0x8f;
      return b[i + 1] >= lo && b[i + 1] <= hi && cont(i + 2) && cont(i + 3) ? 4 : 0;
    }
    return 0;
  }

  // As the server shows a name (escape.c's text style, the static page's):
  // valid UTF-8 as it is, \\ \n \t \r, other control bytes, DEL and the
  // bytes that are not UTF-8 as \xNN. Two names never show the same.
  function textOf(b) {
    var named = {0x5c: "\\\\", 0x0a: "\\n", 0x09: "\\t", 0x0d: "\\r"}, out = "", i = 0;
    while (i < b.length) {
      var n = utf8Length(b, i), c = b[i];
      if (n > 1) {
        out += decoder.decode(new Uint8Array(b.slice(i, i + n)));
        i += n;
        continue;
      }
      i++;
      if (named[c]) out += named[c];
      else if (n === 0 || c < 0x20 || c === 0x7f) out += "\\x" + hex2(c, false);
      else out += String.fromCharCode(c);
    }
    return out;
  }

  // A tag of the report with its name's forms: key (its exact bytes as a
  // query value, for links and #tag=) and shown (as the server shows it).
  function nameTag(t) {
    var bytes = bytesOf(t.name, t.name_hex);
    t.key = queryValue(bytes);
    t.shown = textOf(bytes);
    return t;
  }

  function setBytes(cell, n) {
    cell.dataset.bytes = String(n);
    cell.textContent = human(n);
  }

  // -- the table ------------------------------------------------------------

  // As the server colours them (dashboard.c): red from 95% of the hard limit.
  function budgetClass(t) {
    if (t.limit && t.tree.mapped >= t.limit - t.limit / 20) return "full";
    if (t.soft_limit && t.tree.mapped >= t.soft_limit) return "warn";
    return "used";
  }

  function fillBudget(cell, t, widest) {
    var whole = t.limit || widest, value = t.limit ? t.tree.mapped : t.mapped;
    var pct = whole ? Math.min(100, Math.floor(value * 100 / whole)) : 0;
    var track = document.createElement("span"), bar = document.createElement("span");
    track.className = "track";
    bar.className = "bar " + budgetClass(t);
    bar.style.width = pct + "%";
    track.appendChild(bar);
    cell.textContent = "";
    cell.appendChild(track);
    cell.appendChild(document.createTextNode(" " + (t.limit ? human(t.limit) : "none")));
    cell.dataset.bytes = String(t.limit);
  }

  var COLUMNS = ["allocated", "resident", "mapped", "tree", "budget", "trend", "profile"];

  // A row is kept per id while its data-tag, the name as the server shows
  // it (the static page's too), stays the same.
  function rowFor(t) {
    var tr = state.rows[t.id];
    if (tr && tr.dataset.tag === t.shown) return tr;
    if (tr) tr.parentNode.removeChild(tr); // a recycled id: another tag
    tr = document.createElement("tr");
    var name = document.createElement("td");
    name.className = "tag";
    tr.appendChild(name);
    COLUMNS.forEach(function (c) {
      var td = document.createElement("td");
      td.className = c;
      tr.appendChild(td);
    });
    state.rows[t.id] = tr;
    return tr;
  }

  // The tag's own profile for pprof, and its subtree's when it has
  // children, listed or rolled up.
  function fillProfileLinks(cell, t) {
    var name = t.key, hasKids = !!state.restOf[t.id];
    for (var id in state.tags) if (state.tags[id].parentId === t.id) hasKids = true;
    if (cell.dataset.for === name + (hasKids ? "/" : "")) return;
    cell.dataset.for = name + (hasKids ? "/" : "");
    cell.textContent = "";
    [["pprof", "tag"], ["subtree", "tree"]].forEach(function (l, i) {
      if (i === 1 && !hasKids) return;
      var a = document.createElement("a");
      a.href = "/debug/pprof/heap?" + l[1] + "=" + name;
      a.textContent = l[0];
      if (i === 1) cell.appendChild(document.createTextNode(" "));
      cell.appendChild(a);
    });
  }

  function depthOf(t) {
    var d = 1;
    for (var p = t.parentId; p && state.tags[p] && d < 16; p = state.tags[p].parentId) d++;
    return d;
  }

  function sortValue(t, key) {
    if (key === "name") return t.shown;
    if (key === "tree") return t.tree.mapped;
    if (key === "budget") return t.limit ? t.tree.mapped / t.limit : -1;
    return t[key];
  }

  // The rows in the tree's order: each tag before its children, siblings
  // by the chosen column, the roll-up under a tag after its children.
  function rowsInOrder() {
    var kids = {}, out = [];
    Object.keys(state.tags).forEach(function (id) {
      var t = state.tags[id], p = state.tags[t.parentId] ? t.parentId : 0;
      (kids[p] = kids[p] || []).push(t);
    });
    function cmp(a, b) {
      if (state.sortKey === null) return a.id - b.id;
      var x = sortValue(a, state.sortKey), y = sortValue(b, state.sortKey);
      var c = x < y ? -1 : x > y ? 1 : a.id - b.id;
      return state.sortDesc ? -c : c;
    }
    (function walk(p) {
      (kids[p] || []).sort(cmp).forEach(function (t) { out.push(state.rows[t.id]); walk(t.id); });
      if (state.restRows[p]) out.push(state.restRows[p]);
    })(0);
    return out;
  }

  // Kept rows are moved, not made again.
  function placeRows() {
    var body = $("tags").tBodies[0];
    rowsInOrder().forEach(function (tr) { body.appendChild(tr); });
  }

  // As the server names a roll-up (listing.c): "(2,950 more tags)" at the
  // top level, "(412 more under sessions)" under a listed tag.
  function restName(r) {
    var n = r.tags.toLocaleString("en-US"), p = state.tags[r.parent_id];
    return p ? "(" + n + " more under " + p.shown + ")"
      : "(" + n + " more tag" + (r.tags === 1 ? "" : "s") + ")";
  }

  // The roll-ups' rows: their tags' figures summed, no budget, trend or
  // profile of their own.
  function showRest(report) {
    var seen = {};
    state.restOf = {};
    (report.rest || []).forEach(function (r) {
      var key = String(r.parent_id || 0), tr = state.restRows[key];
      if (!tr) {
        tr = state.restRows[key] = document.createElement("tr");
        tr.className = "rest";
        ["tag"].concat(COLUMNS).forEach(function (c) {
          var td = document.createElement("td");
          td.className = c;
          tr.appendChild(td);
        });
      }
      seen[key] = true;
      state.restOf[key] = r;
      tr.dataset.rest = tr.dataset.parent = key;
      tr.dataset.tags = String(r.tags);
      tr.cells[0].textContent = restName(r);
      tr.cells[0].style.paddingLeft =
        (6 + 18 * (state.tags[key] ? depthOf(state.tags[key]) : 0)) + "px";
      setBytes(tr.cells[1], r.allocated);
      setBytes(tr.cells[2], r.resident);
      setBytes(tr.cells[3], r.mapped);
      setBytes(tr.cells[4], r.mapped);
    });
    Object.keys(state.restRows).forEach(function (key) {
      if (seen[key]) return;
      var tr = state.restRows[key];
      if (tr.parentNode) tr.parentNode.removeChild(tr);
      delete state.restRows[key];
    });
    var rolled = (report.rest || []).reduce(function (n, r) { return n + r.tags; }, 0);
    $("listed").textContent = rolled ? "The " + report.top + " tags whose subtrees hold the most " +
      "resident memory, and the others rolled up; ?top=N or ?top=all lists more." : "";
  }

  // The memory limit (0: none), its source and level, as the report has
  // them: a line on the process's chart, and words beside its figures. A
  // limit at or above the address space is none in effect: no line (it
  // would flatten the chart), and words that say so.
  function showLimit(report) {
    var m = report.memory_limit || {limit: 0};
    var inEffect = m.limit && m.in_effect !== false;
    state.limit = inEffect ? m.limit : 0;
    $("memory-limit").textContent = !m.limit ? ""
      : inEffect
      ? " Memory limit " + human(m.limit) + " (" + m.source + "), pressure " + m.level + "."
      : " Memory limit " + human(m.limit) + " (" + m.source + "): none in effect.";
  }

  // The bars of tags without a limit are against the largest listed tag's
  // mapped bytes, as the server draws them.
  function showTags(report) {
    var body = $("tags").tBodies[0], widest = 0, seen = {};
    showLimit(report);
    state.tags = {};
    report.tags.forEach(function (t) {
      nameTag(t);
      t.parentId = t.parent_id || 0; // null at the top level
      state.tags[t.id] = t;
      if (t.mapped > widest) widest = t.mapped;
    });
    showRest(report);
    report.tags.forEach(function (t) {
      var tr = rowFor(t), c = tr.cells;
      seen[t.id] = true;
      tr.dataset.tag = t.shown;
      tr.dataset.id = String(t.id);
      tr.dataset.parent = String(t.parentId);
      c[0].textContent = t.shown;
      c[0].style.paddingLeft = (6 + 18 * (depthOf(t) - 1)) + "px";
      setBytes(c[1], t.allocated);
      setBytes(c[2], t.resident);
      setBytes(c[3], t.mapped);
      setBytes(c[4], t.tree.mapped);
      fillBudget(c[5], t, widest);
      fillProfileLinks(c[7], t);
      tr.classList.toggle("selected", t.id === state.selected);
    });
    placeRows();
    Array.prototype.slice.call(body.rows).forEach(function (tr) {
      if (tr.dataset.rest === undefined && !seen[tr.dataset.id]) {
        delete state.rows[tr.dataset.id];
        body.removeChild(tr);
      }
    });
    if (report.tags.length === 0 && !(report.rest || []).length) {
      var tr = document.createElement("tr"), td = document.createElement("td");
      td.colSpan = 8;
      td.textContent = "no tags";
      tr.appendChild(td);
      body.appendChild(tr);
    }
    setBytes($("process-allocated"), report.process.allocated);
    setBytes($("process-resident"), report.process.resident);
    setBytes($("untagged-allocated"), report.untagged.allocated);
    showParts(report.process);
    document.body.dataset.timeNs = String(report.time_ns);
  }

  // -- the process's parts -------------------------------------------------

  var PARTS = ["tags", "untagged", "metadata", "library", "other"];

  // The parts of the process's RssAnon (the report's process object), as
  // the server draws them (dashboard.c): one bar whose whole is their sum, which
  // is RssAnon unless the named parts exceed it (a line under it then says
  // by how much); beside it the kernel's other figures, and the cgroup's.
  function showParts(p) {
    var whole = 0, cg = p.cgroup;
    PARTS.forEach(function (k) { whole += p.parts[k]; });
    PARTS.forEach(function (k) {
      var seg = $("parts-bar").querySelector("[data-part=" + k + "]");
      seg.dataset.bytes = String(p.parts[k]);
      seg.style.width = (whole ? p.parts[k] * 100 / whole : 0) + "%";
      seg.title = k + ": " + human(p.parts[k]);
      setBytes($("parts-legend").querySelector("[data-part=" + k + "]"), p.parts[k]);
    });
    setBytes($("rss-anon"), p.rss_anon);
    setBytes($("parts-over-bytes"), p.parts_over);
    $("parts-over").hidden = !p.parts_over;
    setBytes($("rss-file"), p.rss_file);
    setBytes($("page-tables"), p.page_tables);
    $("cgroup").hidden = !cg;
    if (!cg) return;
    setBytes($("cgroup-current"), cg.current);
    setBytes($("cgroup-limit"), cg.limit);
    if (!cg.limit) $("cgroup-limit").textContent = "no limit";
  }

  function adoptServerRows() {
    var body = $("tags").tBodies[0];
    Array.prototype.slice.call(body.rows).forEach(function (tr) {
      if (tr.dataset.id) state.rows[tr.dataset.id] = tr;
      else if (tr.dataset.rest !== undefined) state.restRows[tr.dataset.rest] = tr;
      else body.removeChild(tr);
    });
  }

  function markSorted() {
    Array.prototype.forEach.call($("tags").tHead.rows[0].cells, function (th) {
      th.classList.remove("sorted-asc", "sorted-desc");
      if (th.dataset.key && th.dataset.key === state.sortKey)
        th.classList.add(state.sortDesc ? "sorted-desc" : "sorted-asc");
    });
  }

  // -- picking a tag --------------------------------------------------------

  // The picked tag, or null for the whole process.
  function selectedTag() {
    return state.tags[state.selected] || null;
  }

  function select(id) {
    state.selected = id;
    var t = selectedTag();
    history.replaceState(null, "", t ? "#tag=" + t.key : "#");
    Array.prototype.forEach.call($("tags").tBodies[0].rows, function (tr) {
      tr.classList.toggle("selected", Number(tr.dataset.id) === id);
    });
    $("chart-title").textContent = t ? "tag " + t.shown : "the whole process";
    drawChart();
    loadSites();
  }

  function pickFromHash() {
    var m = /^#tag=(.*)$/.exec(location.hash);
    state.wantKey = m ? queryValue(bytesOfQuery(m[1])) : null;
  }

  function resolveWanted() {
    if (state.wantKey === null) return false;
    for (var id in state.tags) {
      if (state.tags[id].key === state.wantKey) {
        state.wantKey = null;
        select(Number(id));
        return true;
      }
    }
    return false;
  }

  // -- the chart ------------------------------------------------------------

  // An SVG element as markup (set as the chart's innerHTML, which parses it
  // as SVG); attrs and text are the page's own numbers and words.
  function svg(tag, attrs, text) {
    var out = "<" + tag;
    for (var k in attrs) out += " " + k + "=\"" + attrs[k] + "\"";
    return out + (text === undefined ? "/>" : ">" + text + "</" + tag + ">");
  }

  // A tag's figures in each sample (the newest holder of its id; a recycled
  // id's earlier tag is another), or with id 0 the process's.
  function seriesOf(id) {
    if (id === 0) {
      return state.samples.map(function (s) {
        return {t: s.time_ns, allocated: s.allocated, mapped: s.mapped};
      });
    }
    return state.byTag[id] || [];
  }

  // The samples by tag id, once per new samples: each id's points of its
  // newest holder (the born of its last point), oldest first.
  function indexSamples() {
    var by = {};
    state.samples.forEach(function (s) {
      s.tags.forEach(function (x) {
        var list = by[x.id];
        if (list && list.born !== x.born) list = null; // the id was recycled
        if (!list) { list = by[x.id] = []; list.born = x.born; }
        list.push({t: s.time_ns, allocated: x.allocated, mapped: x.mapped});
      });
    });
    state.byTag = by;
  }

  // Drawn at the width it is shown, so that its text keeps its size in a
  // narrow window.
  function drawChart() {
    var chart = $("chart"), pts = seriesOf(state.selected), top = 1, i;
    var CHART_W = Math.max(240, Math.min(1200, chart.parentNode.clientWidth || 900));
    var parts = [];
    chart.setAttribute("viewBox", "0 0 " + CHART_W + " " + CHART_H);
    var now = pts.length ? pts[pts.length - 1].t : 0;
    var span = Math.max(60e9, pts.length ? now - pts[0].t : 0);
    pts.forEach(function (p) { top = Math.max(top, p.allocated, p.mapped); });
    // The whole process's chart holds the limit, however far above.
    var limit = state.selected ? 0 : state.limit || 0;
    top = Math.max(top, limit) * 1.1;
    var plotW = CHART_W - CHART_PAD - 8, plotH = CHART_H - 24;
    for (i = 0; i <= 4; i++) {
      var y = 6 + plotH * i / 4;
      parts.push(svg("line", {"class": "grid", x1: CHART_PAD, x2: CHART_W - 8, y1: y, y2: y}));
      parts.push(svg("text", {"class": "axis", x: CHART_PAD - 4, y: y + 4, "text-anchor": "end"},
                            human(Math.round(top * (4 - i) / 4))));
    }
    parts.push(svg("text", {"class": "axis", x: CHART_PAD, y: CHART_H - 4}, "-" + humanNs(span)));
    parts.push(svg("text", {"class": "axis", x: CHART_W - 8, y: CHART_H - 4, "text-anchor": "end"}, "now"));
    ["mapped", "allocated"].forEach(function (key) {
      var coords = pts.map(function (p) {
        var x = CHART_PAD + plotW * (1 - (now - p.t) / span);
        var y = 6 + plotH * (1 - p[key] / top);
        return x.toFixed(1) + "," + y.toFixed(1);
      });
      parts.push(svg("polyline", {"class": key, points: coords.join(" "),
                                  "data-points": coords.length}));
    });
    if (limit) {
      var ly = (6 + plotH * (1 - limit / top)).toFixed(1);
      parts.push(svg("line", {"class": "limit", x1: CHART_PAD, x2: CHART_W - 8, y1: ly, y2: ly,
                              "data-bytes": limit}));
      parts.push(svg("text", {"class": "axis limit", x: CHART_W - 8, y: ly - 4, "text-anchor": "end"},
                     "memory limit " + human(limit)));
    }
    chart.innerHTML = parts.join("");
    var last = pts[pts.length - 1];
    $("chart-now").textContent = last
      ? "now: " + human(last.allocated) + " allocated, " + human(last.mapped) + " mapped; " + pts.length + " samples"
      : "no samples yet";
  }

  // Each row's trend: its tag's allocated bytes over the kept samples (the
  // tags a sample holds: the largest, and the picked one).
  function drawTrends() {
    Object.keys(state.rows).forEach(function (id) {
      var pts = seriesOf(Number(id)), cell = state.rows[id].cells[6], top = 1;
      if (!cell) return;
      pts.forEach(function (p) { top = Math.max(top, p.allocated); });
      var t0 = pts.length ? pts[0].t : 0, span = pts.length > 1 ? pts[pts.length - 1].t - t0 : 1;
      var coords = pts.map(function (p) {
        return (2 + 76 * (p.t - t0) / span).toFixed(1) + "," + (16 - 14 * p.allocated / top).toFixed(1);
      });
      cell.innerHTML = "<svg class=\"trend\" viewBox=\"0 0 80 18\" width=\"80\" height=\"18\">" +
        (coords.length > 1 ? svg("polyline", {points: coords.join(" "), "data-points": coords.length}) : "") +
        "</svg>";
      cell.title = pts.length > 1 ? "allocated over the last " + humanNs(span) : "not sampled (not among the largest tags)";
    });
  }

  function loadHistory() {
    var t = selectedTag(), url = "history?since=" + state.taken;
    if (t) url += "&tag=" + t.key;
    return get(url, true).then(function (h) {
      if (h.taken < state.taken) state.samples = []; // a restarted server
      state.samples = state.samples.concat(h.samples).slice(-h.capacity);
      state.taken = h.taken;
      indexSamples();
      drawChart();
      drawTrends();
    });
  }

  // -- the icicle of allocation sites --------------------------------------

  function parseFolded(text, skipFirst) {
    var root = {name: "all", value: 0, kids: {}};
    text.split("\n").forEach(function (line) {
      var sp = line.lastIndexOf(" ");
      if (sp <= 0) return;
      var bytes = Number(line.slice(sp + 1)), frames = line.slice(0, sp).split(";");
      if (!(bytes > 0)) return;
      if (skipFirst) frames.shift();
      var node = root;
      root.value += bytes;
      frames.forEach(function (f) {
        node = node.kids[f] = node.kids[f] || {name: f, value: 0, kids: {}};
        node.value += bytes;
      });
    });
    return root;
  }

  function drawSites(root, title) {
    var box = $("flame"), depth = 0;
    box.textContent = "";
    if (root.value === 0) {
      box.style.height = "";
      box.textContent = "no live sampled blocks in " + title;
      return;
    }
    (function place(node, x, d) {
      var w = node.value / root.value;
      if (w < 0.003) return;
      var kids = Object.keys(node.kids).map(function (k) { return node.kids[k]; });
      var div = document.createElement("div");
      div.className = kids.length ? "frame" : "frame leaf";
      div.style.left = (x * 100) + "%";
      div.style.width = (w * 100) + "%";
      div.style.top = (d * 18) + "px";
      div.textContent = node.name;
      div.title = node.name + ": " + human(node.value) + " (" + (w * 100).toFixed(1) + "%)";
      div.dataset.name = node.name;
      div.dataset.bytes = String(node.value);
      box.appendChild(div);
      depth = Math.max(depth, d + 1);
      kids.sort(function (a, b) { return b.value - a.value; }).forEach(function (k) {
        place(k, x, d + 1);
        x += k.value / root.value;
      });
    })(root, 0, 0);
    box.style.height = (depth * 18) + "px";
  }

  function loadSites() {
    var t = selectedTag(), key = t ? t.key : null;
    var title = t ? "tag " + t.shown : "every tag";
    var url = "profile" + (t ? "?tag=" + key : "");
    state.sitesFor = key;
    $("flame-title").textContent = title;
    return get(url, false).then(function (text) {
      if (state.sitesFor !== key) return;
      var root = parseFolded(text, t !== null);
      root.name = t ? "tag:" + t.shown : "all";
      drawSites(root, title);
    }, function (e) {
      if (state.sitesFor !== key) return;
      $("flame").style.height = "";
      $("flame").textContent = e.status === 503
        ? "The profiler is off: start it with REGIONALLOC_PROF or ra_prof_start() to see the allocation sites here."
        : "cannot read the profile: " + e.message;
    });
  }

  // -- the checkpoints ------------------------------------------------------

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function showCheckpoints(c) {
    var box = $("checkpoints"), shown = c.checkpoints.slice(-20);
    var tags = c.tags.slice(0, 8), table = document.createElement("table");
    var head = document.createElement("tr");
    ["#", "label", "at", "phase", "allocated", "tagged", "rss"].forEach(function (h) {
      var th = document.createElement("th");
      th.textContent = h;
      if (h === "label") th.className = "label";
      head.appendChild(th);
    });
    tags.forEach(function (t) {
      var th = document.createElement("th");
      th.textContent = nameTag(t).shown;
      head.appendChild(th);
    });
    table.appendChild(document.createElement("thead")).appendChild(head);
    var body = table.appendChild(document.createElement("tbody"));
    shown.forEach(function (p) {
      var tr = body.appendChild(document.createElement("tr"));
      cell(tr, String(p.seq));
      cell(tr, textOf(bytesOf(p.label, p.label_hex)), "label");
      cell(tr, humanNs(p.time_ns));
      cell(tr, humanNs(p.phase_ns));
      setBytes(cell(tr, ""), p.allocated);
      setBytes(cell(tr, ""), p.tagged_allocated);
      setBytes(cell(tr, ""), p.rss);
      tags.forEach(function (t) {
        var v = p.tag_allocated[t.id - 1]; // element i is tag id i + 1
        if (v === null || v === undefined) cell(tr, "-");
        else setBytes(cell(tr, ""), v);
      });
    });
    box.textContent = "";
    if (shown.length === 0) {
      box.textContent = "No checkpoints yet: ra_checkpoint(label) takes one.";
      return;
    }
    var note = document.createElement("p");
    note.className = "muted";
    note.textContent = c.recorded + " taken" + (c.recorded > shown.length ? ", the last " + shown.length + " shown" : "") +
      (c.tags.length > tags.length ? "; the first " + tags.length + " tags' columns" : "");
    var wrap = document.createElement("div");
    wrap.className = "scroll";
    wrap.appendChild(table);
    box.appendChild(wrap);
    box.appendChild(note);
  }

  // -- polling --------------------------------------------------------------

  // The table and the samples every time; the checkpoints and the sites,
  // which change slowly, every fifth time (and the sites when a tag is
  // picked).
  function refresh() {
    var slow = state.polls % 5 === 0;
    var parts = [get("report?format=json&top=" + ($("tags").dataset.top || "50"), true).then(function (r) {
      showTags(r);
      if (resolveWanted()) return; // select() loads the tag's sites
      if (state.selected && !state.tags[state.selected]) select(0);
      else if (slow) loadSites();
    })];
    if (slow) parts.push(get("checkpoints?format=json", true).then(showCheckpoints));
    return Promise.all(parts).then(function () {
      return loadHistory();
    }).then(function () {
      state.polls++;
      document.body.dataset.polls = String(state.polls);
      $("status").textContent = "live: updated " + new Date().toLocaleTimeString() +
        ", every " + REFRESH_MS / 1000 + " s";
    }, function (e) {
      $("status").textContent = "cannot reach the server (" + e.message + "); the figures are the last read";
    });
  }

  function start() {
    adoptServerRows();
    Array.prototype.forEach.call($("tags").tHead.rows[0].cells, function (th) {
      if (!th.dataset.key) return;
      th.title = "sort by " + th.textContent;
      th.addEventListener("click", function () {
        var key = th.dataset.key;
        if (state.sortKey === key) {
          if (state.sortDesc === (key !== "name")) state.sortDesc = !state.sortDesc;
          else state.sortKey = null; // the third click: the tree's order again
        } else {
          state.sortKey = key;
          state.sortDesc = key !== "name";
        }
        markSorted();
        placeRows();
      });
    });
    $("tags").tBodies[0].addEventListener("click", function (ev) {
      if (ev.target.closest("a")) return; // a link, not a pick
      var tr = ev.target.closest("tr");
      if (!tr || !tr.dataset.id) return;
      var id = Number(tr.dataset.id);
      select(state.selected === id ? 0 : id);
    });
    window.addEventListener("resize", drawChart);
    window.addEventListener("hashchange", function () {
      pickFromHash();
      if (!resolveWanted() && state.wantKey === null) select(0);
    });
    $("live").hidden = false;
    pickFromHash();
    refresh();
    setInterval(refresh, REFRESH_MS);
  }

  start();
})();

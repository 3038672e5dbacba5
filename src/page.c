/* Floor: services. GET /debug/regionalloc/: one self-contained HTML page of
 * the tags (as a tree), with each tag's allocated, resident and mapped
 * bytes and its budget as numbers and bars, and links to every other
 * endpoint. Everything is inline: the page asks nothing of any other host.
 * It is a static table, readable with JavaScript off. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "output.h"

static void out_html(struct ra__out *o, const char *s)
{
    char buf[RA__ESCAPED_MAX];

    ra__escape(buf, sizeof buf, s, RA__ESCAPE_HTML);
    ra__out_str(o, buf);
}

static void out_bytes(struct ra__out *o, uint64_t bytes)
{
    char buf[32];

    ra__out_str(o, ra__human_bytes(buf, sizeof buf, bytes));
}

static void out_u64(struct ra__out *o, uint64_t v)
{
    char buf[24];

    snprintf(buf, sizeof buf, "%" PRIu64, v);
    ra__out_str(o, buf);
}

/* A bar: value as a share of whole, in whole percent (0 to 100). */
static void out_bar(struct ra__out *o, const char *class_name, uint64_t value,
                    uint64_t whole)
{
    uint64_t pct = whole == 0 ? 0 : value >= whole ? 100 : value * 100 / whole;

    ra__out_str(o, "<span class=\"bar ");
    ra__out_str(o, class_name);
    ra__out_str(o, "\" style=\"width:");
    out_u64(o, pct);
    ra__out_str(o, "%\"></span>");
}

static const char style[] =
    "<style>"
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}"
    "h1{font-size:1.3em}table{border-collapse:collapse;width:100%}"
    "th,td{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:right;"
    "white-space:nowrap}th:first-child,td:first-child{text-align:left}"
    "td.tag{font-family:ui-monospace,monospace}"
    ".track{background:#eee;width:10em;height:.6em;display:inline-block}"
    ".bar{display:block;height:.6em}.bar.used{background:#4a7}.bar.warn{background:#d93}"
    ".bar.full{background:#c33}nav a{margin-right:1em}"
    "@media (max-width:700px){.track{width:4em}th,td{padding:.2em}}"
    "</style>";

/* The budget bar: mapped against the hard limit, warning-coloured past the
 * soft limit and red at the hard one; without a limit, mapped against the
 * largest tag's. */
static void out_budget(struct ra__out *o, const struct ra__usage *u,
                       uint64_t widest)
{
    const char *cls = "used";
    uint64_t whole = u->limit != 0 ? u->limit : widest;

    if (u->limit != 0 && u->tree.mapped >= u->limit)
        cls = "full";
    else if (u->soft_limit != 0 && u->tree.mapped >= u->soft_limit)
        cls = "warn";
    ra__out_str(o, "<span class=\"track\">");
    out_bar(o, cls, u->limit != 0 ? u->tree.mapped : u->mapped, whole);
    ra__out_str(o, "</span> ");
    if (u->limit != 0)
        out_bytes(o, u->limit);
    else
        ra__out_str(o, "none");
}

static void out_row(struct ra__out *o, const struct ra__usage *u,
                    uint64_t widest)
{
    ra__out_str(o, "<tr data-tag=\"");
    out_html(o, u->name);
    ra__out_str(o, "\"><td class=\"tag\" style=\"padding-left:");
    out_u64(o, 6 + 18 * (uint64_t)(u->depth > 0 ? u->depth - 1 : 0));
    ra__out_str(o, "px\">");
    out_html(o, u->name);
    ra__out_str(o, "</td><td class=\"allocated\">");
    out_bytes(o, u->allocated);
    ra__out_str(o, "</td><td class=\"resident\">");
    out_bytes(o, u->resident);
    ra__out_str(o, "</td><td class=\"mapped\">");
    out_bytes(o, u->mapped);
    ra__out_str(o, "</td><td class=\"tree\">");
    out_bytes(o, u->tree.mapped);
    ra__out_str(o, "</td><td class=\"budget\">");
    out_budget(o, u, widest);
    ra__out_str(o, "</td></tr>\n");
}

static const char links[] =
    "<nav><a href=\"/metrics\">/metrics</a>"
    "<a href=\"/debug/regionalloc/report\">report</a>"
    "<a href=\"/debug/regionalloc/report?format=json\">report (JSON)</a>"
    "<a href=\"/debug/regionalloc/checkpoints\">checkpoints</a>"
    "<a href=\"/debug/pprof/heap\">profile (pprof)</a></nav>\n";

int ra__page_write(struct ra__out *o)
{
    struct ra__snapshot snap;
    uint64_t widest = 0;

    if (ra__snapshot_take(&snap))
        return ENOMEM;
    for (unsigned r = 1; r <= snap.ntags; r++)
        if (snap.rows[r].mapped > widest)
            widest = snap.rows[r].mapped;
    ra__out_str(o, "<!DOCTYPE html>\n<html lang=\"en\"><head>"
                   "<meta charset=\"utf-8\">"
                   "<meta name=\"viewport\" content=\"width=device-width\">"
                   "<title>regionalloc</title>");
    ra__out_str(o, style);
    ra__out_str(o, "</head><body>\n<h1>Memory by tag</h1>\n");
    ra__out_str(o, links);
    ra__out_str(o, "<p>Process: ");
    out_bytes(o, snap.global.allocated);
    ra__out_str(o, " allocated, ");
    out_bytes(o, snap.process_rss);
    ra__out_str(o, " resident; untagged ");
    out_bytes(o, snap.rows[0].allocated);
    ra__out_str(o, " allocated.</p>\n<table id=\"tags\"><thead><tr>"
                   "<th>tag</th><th>allocated</th><th>resident</th>"
                   "<th>mapped</th><th>subtree mapped</th><th>budget</th>"
                   "</tr></thead><tbody>\n");
    for (unsigned r = 1; r <= snap.ntags; r++)
        out_row(o, &snap.rows[snap.order[r]], widest);
    if (snap.ntags == 0)
        ra__out_str(o, "<tr><td colspan=\"6\">no tags</td></tr>\n");
    ra__out_str(o, "</tbody></table>\n</body></html>\n");
    ra__snapshot_free(&snap);
    return 0;
}

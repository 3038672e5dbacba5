/* Floor: services. The dashboard, GET /debug/regionalloc/: one
 * self-contained HTML document of the process's RssAnon as a bar of its
 * parts, the tags (as a tree), with each tag's allocated, resident and
 * mapped bytes and its budget as numbers and bars, the checkpoint table,
 * and links to every other endpoint, written here as a static document
 * readable with JavaScript off. Its script (dashboard.js, inline like its
 * style) makes it live: it polls the server's JSON, updates the numbers in
 * place, sorts, picks a tag, and draws the chart of the samples
 * (history.c) and the icicle of a tag's allocation sites. The dashboard
 * asks nothing of any other host. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

static void out_html(struct ra__out *o, const char *s)
{
    char buf[RA__ESCAPED_MAX];

    ra__escape(buf, sizeof buf, s, RA__ESCAPE_HTML);
    ra__out_str(o, buf);
}

static void out_u64(struct ra__out *o, uint64_t v)
{
    char buf[24];

    snprintf(buf, sizeof buf, "%" PRIu64, v);
    ra__out_str(o, buf);
}

static void out_bytes(struct ra__out *o, uint64_t bytes)
{
    char buf[RA__HUMAN_MAX];

    ra__out_str(o, ra__human_bytes(buf, sizeof buf, bytes));
}

/* A figure the script updates: its exact bytes in data-bytes, which a
 * test compares with /metrics, and the human-readable text. */
static void out_figure(struct ra__out *o, const char *element,
                       const char *attrs, uint64_t bytes)
{
    ra__out_str(o, "<");
    ra__out_str(o, element);
    ra__out_str(o, attrs);
    ra__out_str(o, " data-bytes=\"");
    out_u64(o, bytes);
    ra__out_str(o, "\">");
    out_bytes(o, bytes);
    ra__out_str(o, "</");
    ra__out_str(o, element);
    ra__out_str(o, ">");
}

/* Text of any length (a report) as the content of an element, its lines
 * kept: not ra__escape, which is for names (bounded, newlines escaped). */
static void out_html_text(struct ra__out *o, const char *s, size_t len)
{
    size_t from = 0;

    for (size_t i = 0; i < len; i++) {
        const char *entity = s[i] == '<'   ? "&lt;"
                             : s[i] == '>' ? "&gt;"
                             : s[i] == '&' ? "&amp;"
                                           : NULL;
        if (entity == NULL)
            continue;
        ra__out_write(o, s + from, i - from);
        ra__out_str(o, entity);
        from = i + 1;
    }
    ra__out_write(o, s + from, len - from);
}

/* s as a URL's query value: unreserved bytes as they are, the others as
 * %XX (which leaves nothing to escape for HTML). */
static void out_query_value(struct ra__out *o, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        char enc[3] = {'%', hex[c >> 4], hex[c & 15]};
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
            (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
            c == '~')
            ra__out_write(o, s, 1);
        else
            ra__out_write(o, enc, sizeof enc);
    }
}

/* The links to the tag's profile for pprof, and its subtree's when it has
 * children. */
static void out_profile_links(struct ra__out *o, const struct ra__usage *u,
                              bool has_children)
{
    ra__out_str(o, "<td class=\"profile\"><a href=\"/debug/pprof/heap?tag=");
    out_query_value(o, u->name);
    ra__out_str(o, "\">pprof</a>");
    if (has_children) {
        ra__out_str(o, " <a href=\"/debug/pprof/heap?tree=");
        out_query_value(o, u->name);
        ra__out_str(o, "\">subtree</a>");
    }
    ra__out_str(o, "</td>");
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

/* dashboard_style and dashboard_script: src/dashboard.css and
 * src/dashboard.js as C strings (made by the build, src/embed.sed). */
#include "dashboard_assets.inc"

/* The budget bar: the subtree's mapped bytes against the hard limit,
 * warning-coloured past the soft limit and red from 95% of the hard one (a
 * tag refuses an allocation before it reaches its limit exactly: the next
 * extent would pass it); without a limit, the tag's mapped bytes against
 * the largest tag's. */
static void out_budget(struct ra__out *o, const struct ra__usage *u,
                       uint64_t widest)
{
    const char *cls = "used";
    uint64_t whole = u->limit != 0 ? u->limit : widest;

    if (u->limit != 0 && u->tree.mapped >= u->limit - u->limit / 20)
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

/* The name cell, indented 18 px a level under its parent. */
static void out_name_cell(struct ra__out *o, unsigned depth, const char *html)
{
    ra__out_str(o, "<td class=\"tag\" style=\"padding-left:");
    out_u64(o, 6 + 18 * (uint64_t)(depth > 0 ? depth - 1 : 0));
    ra__out_str(o, "px\">");
    ra__out_str(o, html);
    ra__out_str(o, "</td>");
}

static void out_figures(struct ra__out *o, const struct ra__usage *u)
{
    out_figure(o, "td", " class=\"allocated\"", u->allocated);
    out_figure(o, "td", " class=\"resident\"", u->resident);
    out_figure(o, "td", " class=\"mapped\"", u->mapped);
    out_figure(o, "td", " class=\"tree\"", u->tree.mapped);
}

static void out_row(struct ra__out *o, const struct ra__usage *u,
                    ra_tag_t parent, bool has_children, uint64_t widest)
{
    char name[RA__ESCAPED_MAX];

    ra__out_str(o, "<tr data-tag=\"");
    out_html(o, u->name);
    ra__out_str(o, "\" data-id=\"");
    out_u64(o, u->id);
    ra__out_str(o, "\" data-parent=\"");
    out_u64(o, parent);
    ra__out_str(o, "\">");
    ra__escape(name, sizeof name, u->name, RA__ESCAPE_HTML);
    out_name_cell(o, u->depth, name);
    out_figures(o, u);
    ra__out_str(o, "<td class=\"budget\" data-bytes=\"");
    out_u64(o, u->limit);
    ra__out_str(o, "\">");
    out_budget(o, u, widest);
    ra__out_str(o, "</td><td class=\"trend\"></td>");
    out_profile_links(o, u, has_children);
    ra__out_str(o, "</tr>\n");
}

/* A roll-up's row: the tags not listed under a listed one (data-rest, its
 * id; 0: the top level), their figures summed, no budget, trend or
 * profile of their own. */
static void out_rest_row(struct ra__out *o, const struct ra__snapshot *snap,
                         const struct ra__rollup *ru)
{
    char name[RA__ROLLUP_NAME_MAX];
    uint64_t parent = ru->parent_row != 0 ? snap->rows[ru->parent_row].id : 0;

    ra__out_str(o, "<tr class=\"rest\" data-rest=\"");
    out_u64(o, parent);
    ra__out_str(o, "\" data-parent=\"");
    out_u64(o, parent);
    ra__out_str(o, "\" data-tags=\"");
    out_u64(o, ru->tags);
    ra__out_str(o, "\">");
    ra__rollup_name(name, sizeof name, snap, ru, RA__ESCAPE_HTML);
    out_name_cell(o, ru->depth, name);
    out_figures(o, &ru->sum);
    ra__out_str(o, "<td class=\"budget\"></td><td class=\"trend\"></td>"
                   "<td class=\"profile\"></td></tr>\n");
}

/* The table's rows, as the listing lists them: the budget bars of tags
 * without a limit against the largest listed tag's mapped bytes (a
 * roll-up's sum is no tag's). */
static void out_rows(struct ra__out *o, const struct ra__snapshot *snap,
                     const struct ra__listing *l)
{
    uint64_t widest = 0;

    for (unsigned r = 1; r <= snap->ntags; r++)
        if (l->listed[r] && snap->rows[r].mapped > widest)
            widest = snap->rows[r].mapped;
    for (unsigned i = 0; i < l->nlines; i++) {
        unsigned r = l->lines[i].row;
        const struct ra__usage *u = &snap->rows[r];
        if (r == 0)
            out_rest_row(o, snap, &l->rollups[l->lines[i].rollup]);
        else
            out_row(o, u,
                    u->parent_row != 0 ? snap->rows[u->parent_row].id : 0,
                    l->has_children[r], widest);
    }
    if (snap->ntags == 0)
        ra__out_str(o, "<tr><td colspan=\"8\">no tags</td></tr>\n");
}

static const char links[] =
    "<nav><a href=\"/metrics\">/metrics</a>"
    "<a href=\"/debug/regionalloc/report\">report</a>"
    "<a href=\"/debug/regionalloc/report?format=json\">report (JSON)</a>"
    "<a href=\"/debug/regionalloc/checkpoints\">checkpoints</a>"
    "<a href=\"/debug/regionalloc/checkpoints?format=json\">checkpoints "
    "(JSON)</a>"
    "<a href=\"/debug/pprof/heap\">profile (pprof)</a>"
    "<a href=\"/debug/regionalloc/profile\">allocation sites (folded)</a>"
    "<a href=\"/debug/regionalloc/history\">samples (JSON)</a></nav>\n";

/* The checkpoint table as the text report writes it; the script replaces
 * it with a table. */
static int out_checkpoints(struct ra__out *o)
{
    struct ra__checkpoint_set set;
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    if (ra__checkpoint_copy(&set))
        return ENOMEM;
    f = open_memstream(&text, &len);
    if (f != NULL) {
        struct ra__out t = RA__OUT_INIT(f, false);
        ra__checkpoint_write(&t, RA_FORMAT_TEXT, &set);
        bool cut = ra__out_finish(&t) != 0;
        if (fclose(f) != 0 || cut)
            len = 0;
    }
    ra__checkpoint_set_free(&set);
    if (f == NULL)
        return ENOMEM;
    ra__out_str(o, "<div id=\"checkpoints\"><pre>");
    out_html_text(o, text, len);
    ra__out_str(o, "</pre></div>\n");
    free(text);
    return 0;
}

static const char live_parts[] =
    "<section id=\"live\" hidden>\n"
    "<h2>The last minutes: <span id=\"chart-title\">the whole process"
    "</span></h2>\n<p><span class=\"key allocated\">allocated</span>"
    "<span class=\"key mapped\">mapped</span><span id=\"chart-now\" "
    "class=\"muted\"></span></p>\n<svg id=\"chart\" role=\"img\" "
    "aria-label=\"allocated and mapped bytes over time\"></svg>\n"
    "<h2>Allocation sites: <span id=\"flame-title\">every tag</span></h2>\n"
    "<p class=\"muted\">Live sampled bytes by call stack, callers above "
    "callees; pick a tag in the table to see its own.</p>\n"
    "<div id=\"flame\"></div>\n</section>\n";

/* The table's head: data-top, how many tags its script asks the report
 * for ("all": every tag). */
static void out_table_head(struct ra__out *o, size_t top)
{
    ra__out_str(o, "<div class=\"scroll\"><table id=\"tags\" data-top=\"");
    if (top == RA_REPORT_ALL_TAGS)
        ra__out_str(o, "all");
    else
        out_u64(o, top);
    ra__out_str(o, "\"><thead><tr><th data-key=\"name\">tag</th>"
                   "<th data-key=\"allocated\">allocated</th>"
                   "<th data-key=\"resident\">resident</th>"
                   "<th data-key=\"mapped\">mapped</th>"
                   "<th data-key=\"tree\">subtree mapped</th>"
                   "<th data-key=\"budget\">budget</th>"
                   "<th>last minutes</th><th>profile</th>"
                   "</tr></thead><tbody>\n");
}

/* Under the table, when tags are rolled up: which ones are listed. */
static void out_listed_note(struct ra__out *o, const struct ra__listing *l)
{
    ra__out_str(o, "<p id=\"listed\" class=\"muted\">");
    if (l->rest.tags != 0)
        ra__out_fmt(o,
                    "The %zu tags whose subtrees hold the most resident "
                    "memory, and the others rolled up; ?top=N or ?top=all "
                    "lists more.",
                    l->top);
    ra__out_str(o, "</p>\n");
}

/* The parts of the process's RssAnon, in the bar's order, as the JSON
 * report names them. */
static const char *const part_names[] = {"tags", "untagged", "metadata",
                                         "library", "other"};
#define NPARTS (sizeof part_names / sizeof part_names[0])

/* The bar of the parts, each a segment as wide as its share of whole
 * (their sum), in hundredths of a percent rounded where the running sum
 * ends, so that the widths add up to 100% exactly. */
static void out_parts_bar(struct ra__out *o, const uint64_t *v,
                          uint64_t whole)
{
    uint64_t sum = 0, from = 0;

    ra__out_str(o, "<div id=\"parts-bar\" class=\"parts-bar\">");
    for (size_t i = 0; i < NPARTS; i++) {
        char h[RA__HUMAN_MAX];
        uint64_t to;
        sum += v[i];
        to = whole == 0 ? 0
                        : (uint64_t)((double)sum * 10000.0 / (double)whole +
                                     0.5);
        ra__out_fmt(o,
                    "<span class=\"part part-%s\" data-part=\"%s\" "
                    "data-bytes=\"%" PRIu64 "\" title=\"%s: %s\" "
                    "style=\"width:%" PRIu64 ".%02" PRIu64 "%%\"></span>",
                    part_names[i], part_names[i], v[i], part_names[i],
                    ra__human_bytes(h, sizeof h, v[i]), (to - from) / 100,
                    (to - from) % 100);
        from = to;
    }
    ra__out_str(o, "</div>\n");
}

/* Beside the bar: the kernel's other figures of the process, and its
 * cgroup's (hidden when it is in none). */
static void out_parts_side(struct ra__out *o,
                           const struct ra__process_parts *p)
{
    ra__out_str(o, "<p class=\"parts-side\">RssFile ");
    out_figure(o, "span", " id=\"rss-file\"", p->rss_file);
    ra__out_str(o, "<br>page tables ");
    out_figure(o, "span", " id=\"page-tables\"", p->page_tables);
    ra__out_str(o, "<span id=\"cgroup\"");
    ra__out_str(o, p->in_cgroup ? "><br>cgroup " : " hidden><br>cgroup ");
    out_figure(o, "span", " id=\"cgroup-current\"", p->cgroup_current);
    ra__out_str(o, " of ");
    if (p->cgroup_limit != 0)
        out_figure(o, "span", " id=\"cgroup-limit\"", p->cgroup_limit);
    else
        ra__out_str(o, "<span id=\"cgroup-limit\" data-bytes=\"0\">"
                       "no limit</span>");
    ra__out_str(o, "</span></p>\n");
}

/* The process's RssAnon as one bar of its parts, their whole their sum:
 * RssAnon, or more where the named parts exceed it (other is then 0), which
 * a line under the bar says. Each part's name and size in the legend. */
static void out_process_parts(struct ra__out *o,
                              const struct ra__process_parts *p)
{
    const uint64_t v[NPARTS] = {p->tags, p->untagged, p->metadata,
                                p->library, p->other};
    uint64_t whole = 0;

    for (size_t i = 0; i < NPARTS; i++)
        whole += v[i];
    ra__out_str(o, "<div id=\"parts\" class=\"parts\"><div "
                   "class=\"parts-main\"><p>RssAnon ");
    out_figure(o, "span", " id=\"rss-anon\"", p->rss_anon);
    ra__out_str(o, ", by part:</p>\n");
    out_parts_bar(o, v, whole);
    ra__out_str(o, "<p id=\"parts-legend\">");
    for (size_t i = 0; i < NPARTS; i++) {
        char attrs[32];
        snprintf(attrs, sizeof attrs, " data-part=\"%s\"", part_names[i]);
        ra__out_fmt(o,
                    "<span class=\"legend\"><span class=\"swatch part-%s\">"
                    "</span>%s ",
                    part_names[i], part_names[i]);
        out_figure(o, "span", attrs, v[i]);
        ra__out_str(o, "</span> ");
    }
    ra__out_str(o, "</p>\n<p id=\"parts-over\" class=\"over\"");
    ra__out_str(o, p->over != 0 ? ">" : " hidden>");
    ra__out_str(o, "named parts exceed RssAnon by ");
    out_figure(o, "span", " id=\"parts-over-bytes\"", p->over);
    ra__out_str(o, "</p></div>\n");
    out_parts_side(o, p);
    ra__out_str(o, "</div>\n");
}

int ra__dashboard_write(struct ra__out *o, size_t top)
{
    struct ra__snapshot snap;
    struct ra__listing l;
    int err;

    if (ra__snapshot_take(&snap, false))
        return ENOMEM;
    if (ra__listing_make(&l, &snap, top)) {
        ra__snapshot_free(&snap);
        return ENOMEM;
    }
    ra__out_str(o, "<!DOCTYPE html>\n<html lang=\"en\"><head>"
                   "<meta charset=\"utf-8\">"
                   "<meta name=\"viewport\" content=\"width=device-width\">"
                   "<title>regionalloc</title><style>");
    ra__out_str(o, dashboard_style);
    ra__out_str(o, "</style></head><body>\n<h1>Memory by tag</h1>\n");
    ra__out_str(o, links);
    ra__out_str(o, "<p>Process: ");
    out_figure(o, "span", " id=\"process-allocated\"", snap.global.allocated);
    ra__out_str(o, " allocated, ");
    out_figure(o, "span", " id=\"process-resident\"", snap.global.resident);
    ra__out_str(o, " resident; untagged ");
    out_figure(o, "span", " id=\"untagged-allocated\"",
               snap.rows[0].allocated);
    ra__out_str(o, " allocated.<span id=\"memory-limit\">");
    if (snap.pressure.limit != 0) {
        char limit[RA__HUMAN_MAX];
        ra__out_fmt(o, " Memory limit %s%s.",
                    ra__human_bytes(limit, sizeof limit, snap.pressure.limit),
                    ra__limit_in_effect(snap.pressure.limit)
                        ? ""
                        : ": none in effect");
    }
    ra__out_str(o, "</span> <span id=\"status\" class=\"muted\">"
                   "A static page: with JavaScript on, it updates itself."
                   "</span></p>\n");
    out_process_parts(o, &snap.parts);
    out_table_head(o, top);
    out_rows(o, &snap, &l);
    ra__out_str(o, "</tbody></table></div>\n");
    out_listed_note(o, &l);
    ra__listing_free(&l);
    ra__snapshot_free(&snap);
    ra__out_str(o, live_parts);
    ra__out_str(o, "<h2>Checkpoints</h2>\n");
    err = out_checkpoints(o);
    if (err != 0)
        return err;
    ra__out_str(o, "<script>");
    ra__out_str(o, dashboard_script);
    ra__out_str(o, "</script>\n</body></html>\n");
    return 0;
}

/* Floor: services. The text report: the table of every tag's usage and
 * the lines under it (the process's parts, the kernel's counts, leftovers,
 * lost regions, the memory limit). */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "output.h"
#include "report_names.h"

static const char *const text_headers[] = {
    "tag",     "allocated", "active",  "resident", "kernel_rss",
    "mapped",  "peak_mapped", "dirty", "nmalloc",  "ndalloc",
    "limit",   "soft_limit",  "limit_failures", "arenas",
    "tree_allocated", "tree_mapped"};
#define TEXT_COLS (sizeof text_headers / sizeof text_headers[0])

/* Columns 1..: u's figures; only tags have a kernel RSS (once the kernel
 * counted their regions), subtrees and arenas, and only a tag of its own a
 * peak and budgets ("-" otherwise). */
static void fill_usage(struct ra__table_row *row, const struct ra__usage *u,
                       enum ra__row_kind kind)
{
    bool tagged = kind != RA__ROW_UNTAGGED, own = kind == RA__ROW_TAG;

    ra__cell_bytes(row->cell[1], u->allocated);
    ra__cell_bytes(row->cell[2], u->active);
    ra__cell_bytes(row->cell[3], u->resident);
    if (kind == RA__ROW_ROLLUP || (tagged && u->rss_at_ns != 0))
        ra__cell_bytes(row->cell[4], u->rss);
    else
        ra__cell_text(row->cell[4], "-");
    ra__cell_bytes(row->cell[5], u->mapped);
    if (own)
        ra__cell_bytes(row->cell[6], u->peak_mapped);
    else
        ra__cell_text(row->cell[6], "-");
    ra__cell_bytes(row->cell[7], u->dirty);
    ra__cell_count(row->cell[8], u->nmalloc);
    ra__cell_count(row->cell[9], u->ndalloc);
    /* Budgets are a tag's; "-" where none is set. */
    if (own && u->limit != 0)
        ra__cell_bytes(row->cell[10], u->limit);
    else
        ra__cell_text(row->cell[10], "-");
    if (own && u->soft_limit != 0)
        ra__cell_bytes(row->cell[11], u->soft_limit);
    else
        ra__cell_text(row->cell[11], "-");
    if (tagged) {
        ra__cell_count(row->cell[12], u->limit_failures);
        ra__cell_count(row->cell[13], u->arenas);
        ra__cell_bytes(row->cell[14], u->tree.allocated);
        ra__cell_bytes(row->cell[15], u->tree.mapped);
    } else {
        for (size_t c = 12; c < TEXT_COLS; c++)
            ra__cell_text(row->cell[c], "-");
    }
}

/* The table's rows: the snapshot's, as its listing lists them. */
struct text_rows {
    const struct ra__snapshot *snap;
    const struct ra__listing *l;
};

/* Columns 0..: a line of the listing, its name indented two spaces a
 * level under its parent. */
static void fill_line(struct ra__table_row *row, const struct text_rows *t,
                      const struct ra__line *line)
{
    const struct ra__rollup *ru = &t->l->rollups[line->rollup];
    const struct ra__usage *u =
        line->row != 0 ? &t->snap->rows[line->row] : &ru->sum;
    unsigned depth = line->row != 0 ? u->depth : ru->depth;
    unsigned indent = 2 * (depth > 0 ? depth - 1 : 0);

    memset(row->cell[0], ' ', indent);
    if (line->row != 0)
        ra__cell_name(row->cell[0] + indent, u->name);
    else
        ra__rollup_name(row->cell[0] + indent, RA__CELL_MAX - indent,
                        t->snap, ru, RA__ESCAPE_TEXT);
    fill_usage(row, u, line->row != 0 ? RA__ROW_TAG : RA__ROW_ROLLUP);
}

/* The total row: jemalloc's own totals for the process (allocated and
 * active are the sums of the rows above; resident and mapped also count
 * its metadata outside the arenas) and the process's RSS from the kernel. */
static void fill_total(struct ra__table_row *row, const struct ra__snapshot *snap)
{
    uint64_t dirty = 0;

    for (ra_tag_t t = 0; t <= snap->ntags; t++)
        dirty += snap->rows[t].dirty;
    ra__cell_text(row->cell[0], "total");
    ra__cell_bytes(row->cell[1], snap->global.allocated);
    ra__cell_bytes(row->cell[2], snap->global.active);
    ra__cell_bytes(row->cell[3], snap->global.resident);
    ra__cell_bytes(row->cell[4], snap->process_rss);
    ra__cell_bytes(row->cell[5], snap->global.mapped);
    ra__cell_text(row->cell[6], "-");
    ra__cell_bytes(row->cell[7], dirty);
    for (size_t c = 8; c < TEXT_COLS; c++)
        ra__cell_text(row->cell[c], "-");
}

/* The library's own memory: allocated only (its pages are the untagged
 * arenas'). */
static void fill_library(struct ra__table_row *row, const struct ra__snapshot *snap)
{
    ra__cell_text(row->cell[0], "library");
    ra__cell_bytes(row->cell[1], snap->library);
    for (size_t c = 2; c < TEXT_COLS; c++)
        ra__cell_text(row->cell[c], "-");
}

/* Rows: the header, one per line of the listing (a tag, or the tags rolled
 * up under one), a rule, untagged, the library's part of it, total. The
 * rule keeps a tag named "untagged", "library" or "total" apart from the
 * summary rows. */
static void fill_text_row(void *ctx, size_t r, struct ra__table_row *row)
{
    const struct text_rows *t = ctx;
    const struct ra__snapshot *snap = t->snap;
    size_t n = t->l->nlines;

    if (r == 0) {
        for (size_t c = 0; c < TEXT_COLS; c++)
            ra__cell_text(row->cell[c], text_headers[c]);
    } else if (r <= n) {
        fill_line(row, t, &t->l->lines[r - 1]);
    } else if (r == n + 1) {
        row->rule = true;
    } else if (r == n + 2) {
        ra__cell_text(row->cell[0], "untagged");
        fill_usage(row, &snap->rows[0], RA__ROW_UNTAGGED);
    } else if (r == n + 3) {
        fill_library(row, snap);
    } else {
        fill_total(row, snap);
    }
}

/* Under the table, when there is a memory limit: one line, which says so
 * when the limit is none in effect (at or above the address space). */
static void write_text_pressure(struct ra__out *o,
                                const struct ra__pressure_figures *p)
{
    char limit[RA__HUMAN_MAX], resident[RA__HUMAN_MAX], given[RA__HUMAN_MAX];

    if (p->limit == 0)
        return;
    if (!ra__limit_in_effect(p->limit)) {
        ra__out_fmt(o,
                    "memory limit %s (%s): none in effect (at or above "
                    "the address space)\n",
                    ra__human_bytes(limit, sizeof limit, p->limit),
                    ra__limit_source_name(p->source));
        return;
    }
    ra__out_fmt(o,
                "memory limit %s (%s): resident %s, pressure %s; given back "
                "%s, %" PRIu64 " allocations refused\n",
                ra__human_bytes(limit, sizeof limit, p->limit),
                ra__limit_source_name(p->source),
                ra__human_bytes(resident, sizeof resident, p->resident),
                ra__pressure_level_name(p->level),
                ra__human_bytes(given, sizeof given, p->given_back),
                p->refusals);
}

/* Under the table, when destroys left blocks live: they are in no row. */
static void write_text_leftovers(struct ra__out *o, uint64_t bytes)
{
    char left[RA__HUMAN_MAX];

    if (bytes != 0)
        ra__out_fmt(o,
                    "left live by destroyed tags: %s (freed at their slots' "
                    "next reset)\n",
                    ra__human_bytes(left, sizeof left, bytes));
}

/* Under the table, when the kernel's counts of the regions (kernel_rss)
 * are not all fresh: tags the library's thread has not counted yet, or
 * counts more than two of its rounds old. */
#define FRESH_NS 2000000000u

static void write_text_measured(struct ra__out *o,
                                const struct ra__snapshot *snap)
{
    char oldest[RA__HUMAN_MAX];

    if (snap->rss_unmeasured == 0 && snap->rss_oldest_age_ns <= FRESH_NS)
        return;
    ra__human_ns(oldest, sizeof oldest, snap->rss_oldest_age_ns);
    ra__out_fmt(o, "kernel_rss: counted by the kernel up to %s ago", oldest);
    if (snap->rss_unmeasured != 0)
        ra__out_fmt(o, "; not yet for %" PRIu64 " (-)",
                    snap->rss_unmeasured);
    ra__out_fmt(o, "\n");
}

/* Under the table: the parts of the process's RssAnon, which add up to
 * it, and the kernel's other figures of the process. */
static void write_text_parts(struct ra__out *o,
                             const struct ra__process_parts *p)
{
    char h[8][RA__HUMAN_MAX];

    ra__out_fmt(o, RA_PARTS_TEXT,
                ra__human_bytes(h[0], sizeof h[0], p->rss_anon),
                ra__human_bytes(h[1], sizeof h[1], p->tags),
                ra__human_bytes(h[2], sizeof h[2], p->untagged),
                ra__human_bytes(h[3], sizeof h[3], p->metadata),
                ra__human_bytes(h[4], sizeof h[4], p->library),
                ra__human_bytes(h[5], sizeof h[5], p->other));
    if (p->over != 0)
        ra__out_fmt(o, RA_PARTS_TEXT_OVER,
                    ra__human_bytes(h[6], sizeof h[6], p->over));
    if (!p->jemalloc_measured)
        ra__out_fmt(o, RA_PARTS_TEXT_ESTIMATE);
    ra__out_fmt(o, RA_PARTS_TEXT_KERNEL,
                ra__human_bytes(h[0], sizeof h[0], p->rss_file),
                ra__human_bytes(h[1], sizeof h[1], p->page_tables));
    if (p->in_cgroup)
        ra__out_fmt(o, RA_PARTS_TEXT_CGROUP,
                    ra__human_bytes(h[2], sizeof h[2], p->cgroup_current),
                    ra__human_bytes(h[3], sizeof h[3], p->cgroup_anon),
                    ra__human_bytes(h[4], sizeof h[4], p->cgroup_file),
                    p->cgroup_limit != 0
                        ? ra__human_bytes(h[5], sizeof h[5], p->cgroup_limit)
                        : RA_PARTS_TEXT_NO_LIMIT);
    ra__out_fmt(o, "\n");
}

/* Under the table, while other mappings hold regions' space. */
static void write_text_regions_lost(struct ra__out *o, uint64_t lost)
{
    if (lost != 0)
        ra__out_fmt(o,
                    "regions lost: %" PRIu64 " (another mapping holds their "
                    "space; taken back once it is free)\n",
                    lost);
}

void ra__report_text(struct ra__out *o, const struct ra__snapshot *snap,
                     const struct ra__listing *l)
{
    struct text_rows rows = {snap, l};
    struct ra__table table = {
        .ncols = TEXT_COLS,
        .left = 1u,
        .nrows = (size_t)l->nlines + 5,
        .fill = fill_text_row,
        .ctx = &rows,
    };

    ra__table_write(o, &table);
    write_text_parts(o, &snap->parts);
    write_text_measured(o, snap);
    write_text_leftovers(o, snap->leftovers);
    write_text_regions_lost(o, snap->regions_lost);
    write_text_pressure(o, &snap->pressure);
}

/* Floor: services. ra_report: every tag's usage now, as a table, a JSON
 * document or a Prometheus exposition; and the reports printed at exit when
 * REGIONALLOC_STATS or REGIONALLOC_CHECKPOINTS ask for them. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output.h"
#include "report_names.h"

/* The memory limit's source and level, as the reports name them. */
static const char *const limit_sources[] = {"none", "call", "environment",
                                            "cgroup"};
static const char *const pressure_levels[] = {"none", "high", "limit"};


/* -- text ------------------------------------------------------------------ */

static const char *const text_headers[] = {
    "tag",     "allocated", "active",  "resident", "kernel_rss",
    "mapped",  "peak_mapped", "dirty", "nmalloc",  "ndalloc",
    "limit",   "soft_limit",  "limit_failures", "arenas",
    "tree_allocated", "tree_mapped"};
#define TEXT_COLS (sizeof text_headers / sizeof text_headers[0])

/* What a row of the table shows: a tag, the tags a roll-up stands for, or
 * the untagged arenas. */
enum row_kind { ROW_TAG, ROW_ROLLUP, ROW_UNTAGGED };

/* Columns 1..: u's figures; only tags have a kernel RSS (once the kernel
 * counted their regions), subtrees and arenas, and only a tag of its own a
 * peak and budgets ("-" otherwise). */
static void fill_usage(struct ra__table_row *row, const struct ra__usage *u,
                       enum row_kind kind)
{
    bool tagged = kind != ROW_UNTAGGED, own = kind == ROW_TAG;

    ra__cell_bytes(row->cell[1], u->allocated);
    ra__cell_bytes(row->cell[2], u->active);
    ra__cell_bytes(row->cell[3], u->resident);
    if (kind == ROW_ROLLUP || (tagged && u->rss_at_ns != 0))
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
    fill_usage(row, u, line->row != 0 ? ROW_TAG : ROW_ROLLUP);
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
        fill_usage(row, &snap->rows[0], ROW_UNTAGGED);
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
                    limit_sources[p->source]);
        return;
    }
    ra__out_fmt(o,
                "memory limit %s (%s): resident %s, pressure %s; given back "
                "%s, %" PRIu64 " allocations refused\n",
                ra__human_bytes(limit, sizeof limit, p->limit),
                limit_sources[p->source],
                ra__human_bytes(resident, sizeof resident, p->resident),
                pressure_levels[p->level],
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

static void write_text(struct ra__out *o, const struct ra__snapshot *snap,
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

/* -- JSON and Prometheus: the fields, named once ----------------------------- */

#define USAGE_FIELD(f) offsetof(struct ra__usage, f)

static uint64_t usage_field(const struct ra__usage *u, size_t offset)
{
    uint64_t v;

    memcpy(&v, (const char *)u + offset, sizeof v);
    return v;
}

static const struct {
    const char *key;
    size_t offset;
    bool untagged; /* also in the "untagged" object */
    bool summed;   /* also in a roll-up (a sum that means something) */
} json_fields[] = {
    {"allocated", USAGE_FIELD(allocated), true, true},
    {"active", USAGE_FIELD(active), true, true},
    {"resident", USAGE_FIELD(resident), true, true},
    {"rss", USAGE_FIELD(rss), false, true},
    {"metadata", USAGE_FIELD(metadata), false, true},
    {"rss_at_ns", USAGE_FIELD(rss_at_ns), false, false},
    {"mapped", USAGE_FIELD(mapped), true, true},
    {"peak_mapped", USAGE_FIELD(peak_mapped), false, false},
    {"dirty", USAGE_FIELD(dirty), true, true},
    {"muzzy", USAGE_FIELD(muzzy), true, true},
    {"retained", USAGE_FIELD(retained), true, true},
    {"reserved", USAGE_FIELD(reserved), false, false},
    {"nmalloc", USAGE_FIELD(nmalloc), true, true},
    {"ndalloc", USAGE_FIELD(ndalloc), true, true},
    {"purges", USAGE_FIELD(purges), true, true},
    {"limit", USAGE_FIELD(limit), false, false},
    {"soft_limit", USAGE_FIELD(soft_limit), false, false},
    {"limit_failures", USAGE_FIELD(limit_failures), false, true},
    {"arenas", USAGE_FIELD(arenas), false, true},
};
#define NJSON_FIELDS (sizeof json_fields / sizeof json_fields[0])

static void write_json_usage(struct ra__emitter *e, const char *key,
                             const struct ra__usage *u, enum row_kind kind)
{
    if (key != NULL)
        ra__json_object_begin(e, key, true);
    for (size_t f = 0; f < NJSON_FIELDS; f++)
        if (kind == ROW_TAG ||
            (kind == ROW_UNTAGGED ? json_fields[f].untagged
                                  : json_fields[f].summed))
            ra__json_u64(e, json_fields[f].key,
                         usage_field(u, json_fields[f].offset));
    if (key != NULL)
        ra__json_object_end(e);
}

/* A tag's parent, or the tag a roll-up is under, the row parent_row (0:
 * the top level, null): by name as the first schema had it and by id,
 * which tells tags apart where names do not (a name that is not UTF-8
 * reads like another). */
static void write_json_parent(struct ra__emitter *e,
                              const struct ra__snapshot *snap,
                              unsigned parent_row)
{
    if (parent_row != 0) {
        ra__json_str(e, "parent", snap->rows[parent_row].name);
        ra__json_u64(e, "parent_id", snap->rows[parent_row].id);
    } else {
        ra__json_null(e, "parent");
        ra__json_null(e, "parent_id");
    }
}

/* Tag trees: a tag's parent and its subtree's totals. */
static void write_json_tree(struct ra__emitter *e,
                            const struct ra__snapshot *snap,
                            const struct ra__usage *u)
{
    const struct ra__tree_totals *t = &u->tree;

    write_json_parent(e, snap, u->parent_row);
    ra__json_object_begin(e, "tree", true);
    ra__json_u64(e, "allocated", t->allocated);
    ra__json_u64(e, "active", t->active);
    ra__json_u64(e, "resident", t->resident);
    ra__json_u64(e, "mapped", t->mapped);
    ra__json_u64(e, "peak_mapped", t->peak_mapped);
    ra__json_u64(e, "dirty", t->dirty);
    ra__json_u64(e, "nmalloc", t->nmalloc);
    ra__json_u64(e, "ndalloc", t->ndalloc);
    ra__json_object_end(e);
}

/* The memory limit (pressure.c): as given, whether it is in effect, where
 * it came from, the resident set at the watcher's last look, the level,
 * what the rises gave back and refused. */
static void write_json_pressure(struct ra__emitter *e,
                                const struct ra__pressure_figures *p)
{
    ra__json_object_begin(e, "memory_limit", true);
    ra__json_u64(e, "limit", p->limit);
    ra__json_bool(e, "in_effect", ra__limit_in_effect(p->limit));
    ra__json_str(e, "source", limit_sources[p->source]);
    ra__json_u64(e, "resident", p->resident);
    ra__json_str(e, "level", pressure_levels[p->level]);
    ra__json_u64(e, "given_back", p->given_back);
    ra__json_u64(e, "refusals", p->refusals);
    ra__json_object_end(e);
}

/* The process as the kernel counts it, and the parts of its RssAnon. */
static void write_json_parts(struct ra__emitter *e,
                             const struct ra__process_parts *p)
{
    ra__json_u64(e, "rss_anon", p->rss_anon);
    ra__json_u64(e, "rss_file", p->rss_file);
    ra__json_u64(e, "page_tables", p->page_tables);
    ra__json_object_begin(e, "parts", true);
#define PART(field) ra__json_u64(e, #field, p->field);
    RA_PARTS_LIST(PART)
#undef PART
    ra__json_object_end(e);
    ra__json_u64(e, "parts_over", p->over);
    ra__json_u64(e, "parts_at_ns", p->at_ns);
    ra__json_bool(e, "jemalloc_measured", p->jemalloc_measured);
    if (!p->in_cgroup) {
        ra__json_null(e, "cgroup");
        return;
    }
    ra__json_object_begin(e, "cgroup", true);
    ra__json_u64(e, "current", p->cgroup_current);
    ra__json_u64(e, "anon", p->cgroup_anon);
    ra__json_u64(e, "file", p->cgroup_file);
    ra__json_u64(e, "limit", p->cgroup_limit);
    ra__json_object_end(e);
}

/* The tags listed, in the tree's order; then how many were asked for
 * (null: every tag) and the roll-ups of the others, each under its listed
 * tag (or the top level), in the order the text shows them. */
static void write_json_tags(struct ra__emitter *e,
                            const struct ra__snapshot *snap,
                            const struct ra__listing *l)
{
    ra__json_array_begin(e, "tags", false);
    for (unsigned i = 0; i < l->nlines; i++) {
        const struct ra__usage *u = &snap->rows[l->lines[i].row];
        if (l->lines[i].row == 0)
            continue;
        ra__json_object_begin(e, NULL, true);
        ra__json_u64(e, "id", u->id);
        ra__json_u64(e, "born", u->born);
        ra__json_bytes(e, "name", "name_hex", u->name);
        write_json_usage(e, NULL, u, ROW_TAG);
        ra__json_i64(e, "priority", u->priority);
        write_json_tree(e, snap, u);
        ra__json_object_end(e);
    }
    ra__json_array_end(e);
    if (l->cut)
        ra__json_u64(e, "top", l->top);
    else
        ra__json_null(e, "top");
    ra__json_array_begin(e, "rest", false);
    for (unsigned i = 0; i < l->nlines; i++) {
        const struct ra__rollup *ru = &l->rollups[l->lines[i].rollup];
        if (l->lines[i].row != 0)
            continue;
        ra__json_object_begin(e, NULL, true);
        write_json_parent(e, snap, ru->parent_row);
        ra__json_u64(e, "tags", ru->tags);
        write_json_usage(e, NULL, &ru->sum, ROW_ROLLUP);
        ra__json_object_end(e);
    }
    ra__json_array_end(e);
}

static void write_json(struct ra__emitter *e, const struct ra__snapshot *snap,
                       const struct ra__listing *l)
{
    ra__json_object_begin(e, NULL, false);
    ra__json_str(e, "schema", "regionalloc-report-1");
    ra__json_bool(e, "enabled", true);
    ra__json_u64(e, "time_ns", snap->time_ns);
    write_json_tags(e, snap, l);
    write_json_usage(e, "untagged", &snap->rows[0], ROW_UNTAGGED);
    ra__json_object_begin(e, "library", true);
    ra__json_u64(e, "allocated", snap->library);
    ra__json_object_end(e);
    ra__json_object_begin(e, "leftovers", true);
    ra__json_u64(e, "allocated", snap->leftovers);
    ra__json_object_end(e);
    ra__json_u64(e, "regions_lost", snap->regions_lost);
    ra__json_object_begin(e, "process", true);
    ra__json_u64(e, "allocated", snap->global.allocated);
    ra__json_u64(e, "active", snap->global.active);
    ra__json_u64(e, "resident", snap->global.resident);
    ra__json_u64(e, "mapped", snap->global.mapped);
    ra__json_u64(e, "rss", snap->process_rss);
    write_json_parts(e, &snap->parts);
    ra__json_object_end(e);
    write_json_pressure(e, &snap->pressure);
    ra__json_object_end(e);
}

/* Metric families of the tags and the untagged arenas (report_names.h).
 * summed: with ?top, the tags not listed are one series tag="(rest)"
 * there, their sum. */
static const struct {
    const char *tag_name, *untagged_name, *type, *help;
    size_t offset;
    bool summed;
} prom_families[] = {
#define FAMILY(name, untagged, type, help, field, summed)                     \
    {name, untagged, type, help, USAGE_FIELD(field), summed},
    RA_TAG_FAMILIES(FAMILY)
#undef FAMILY
};

/* Tag trees: the per-tag series above stay additive (a tag's own blocks);
 * each tag's parent is an info series, and subtree totals have names of
 * their own, so that no sum over tags counts a block twice. */
static void write_prometheus_tree(struct ra__emitter *e,
                                  const struct ra__snapshot *snap,
                                  const struct ra__listing *l,
                                  const struct ra__prom_values *names)
{
    static const struct {
        const char *name, *help;
        size_t offset;
    } tree[] = {
        {"regionalloc_tree_allocated_bytes",
         "Bytes in live blocks of the tag and its descendants.",
         offsetof(struct ra__tree_totals, allocated)},
        {"regionalloc_tree_mapped_bytes",
         "Bytes mapped by the tag and its descendants (what a hard limit "
         "on the tag bounds).",
         offsetof(struct ra__tree_totals, mapped)},
        {"regionalloc_tree_peak_mapped_bytes",
         "High-water mark of the subtree's committed bytes.",
         offsetof(struct ra__tree_totals, peak_mapped)},
    };

    ra__prom_family(e, "regionalloc_tag_info", "gauge",
                    "A tag and its parent (\"\" at the top level).");
    for (unsigned r = 1; r <= snap->ntags; r++) {
        const struct ra__usage *u = &snap->rows[r];
        if (!l->listed[r])
            continue;
        struct ra__prom_label labels[2] = {
            {"tag", u->name},
            {"parent",
             u->parent_row != 0 ? snap->rows[u->parent_row].name : ""}};
        ra__prom_sample(e, "regionalloc_tag_info", labels, 2, 1);
    }
    for (size_t f = 0; f < sizeof tree / sizeof tree[0]; f++) {
        ra__prom_family(e, tree[f].name, "gauge", tree[f].help);
        for (unsigned r = 1; r <= snap->ntags; r++) {
            uint64_t v;
            if (!l->listed[r])
                continue;
            memcpy(&v, (const char *)&snap->rows[r].tree + tree[f].offset,
                   sizeof v);
            ra__prom_sample_value(e, tree[f].name, "tag", names, r,
                                  (int64_t)v, false);
        }
    }
}

/* The process's parts, one series a part of one family (they sum to the
 * process's RssAnon), the kernel's figures beside them, and the cgroup's
 * when there is one. */
static void write_prometheus_parts(struct ra__emitter *e,
                                   const struct ra__process_parts *p)
{
    const struct {
        const char *part;
        uint64_t bytes;
    } parts[] = {
#define PART(field) {#field, p->field},
        RA_PARTS_LIST(PART)
#undef PART
    };
    const struct {
        const char *name, *help;
        uint64_t value;
    } kernel[] = {
#define KERNEL(name, help, field) {name, help, p->field},
        RA_PARTS_KERNEL_FAMILIES(KERNEL)
#undef KERNEL
    };
    const struct {
        const char *name;
        uint64_t value;
    } cgroup[] = {
#define CGROUP(name, field) {name, p->field},
        RA_PARTS_CGROUP_FAMILIES(CGROUP)
#undef CGROUP
    };

    ra__prom_family(e, RA_PARTS_FAMILY, "gauge", RA_PARTS_FAMILY_HELP);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        struct ra__prom_label part = {"part", parts[i].part};
        ra__prom_sample(e, RA_PARTS_FAMILY, &part, 1, parts[i].bytes);
    }
    for (size_t i = 0; i < sizeof kernel / sizeof kernel[0]; i++) {
        ra__prom_family(e, kernel[i].name, "gauge", kernel[i].help);
        ra__prom_sample(e, kernel[i].name, NULL, 0, kernel[i].value);
    }
    for (size_t i = 0; p->in_cgroup && i < sizeof cgroup / sizeof cgroup[0];
         i++) {
        ra__prom_family(e, cgroup[i].name, "gauge", RA_PARTS_CGROUP_HELP);
        ra__prom_sample(e, cgroup[i].name, NULL, 0, cgroup[i].value);
    }
}

/* The per-tag families: a series per listed tag, in id order, and with
 * ?top the roll-up's where a sum means something, and how many tags it
 * holds. */
static void write_prometheus_tags(struct ra__emitter *e,
                                  const struct ra__snapshot *snap,
                                  const struct ra__listing *l,
                                  const struct ra__prom_values *names)
{
    const struct ra__prom_label rest = {"tag", RA__REST_NAME};

    for (size_t f = 0; f < sizeof prom_families / sizeof prom_families[0];
         f++) {
        ra__prom_family(e, prom_families[f].tag_name, prom_families[f].type,
                        prom_families[f].help);
        for (unsigned r = 1; r <= snap->ntags; r++)
            if (l->listed[r])
                ra__prom_sample_value(
                    e, prom_families[f].tag_name, "tag", names, r,
                    (int64_t)usage_field(&snap->rows[r],
                                         prom_families[f].offset),
                    false);
        if (l->cut && prom_families[f].summed)
            ra__prom_sample(e, prom_families[f].tag_name, &rest, 1,
                            usage_field(&l->rest.sum,
                                        prom_families[f].offset));
    }
    /* Signed: the table above holds counts and bytes. */
    ra__prom_family(e, "regionalloc_tag_priority", "gauge",
                    "The tag's priority under memory pressure (lower gives "
                    "way first; negative: refused at high).");
    for (unsigned r = 1; r <= snap->ntags; r++)
        if (l->listed[r])
            ra__prom_sample_value(e, "regionalloc_tag_priority", "tag", names,
                                  r, snap->rows[r].priority, true);
    if (!l->cut)
        return;
    ra__prom_family(e, "regionalloc_rest_tags", "gauge",
                    "Live tags not listed (?top=N), whose figures are the "
                    "tag=\"(rest)\" series.");
    ra__prom_sample(e, "regionalloc_rest_tags", NULL, 0, l->rest.tags);
}

static const char *row_name(const void *snap, unsigned r)
{
    return ((const struct ra__snapshot *)snap)->rows[r].name;
}

/* false: the report is written; true: the library had no memory for the
 * escaped names. */
static bool write_prometheus(struct ra__emitter *e,
                             const struct ra__snapshot *snap,
                             const struct ra__listing *l)
{
    const size_t nfamilies = sizeof prom_families / sizeof prom_families[0];
    const struct {
        const char *name, *help;
        uint64_t value;
    } process[] = {
        /* The names of when these were jemalloc's stats.*: scrapers keep
         * their queries. */
        {"regionalloc_jemalloc_allocated_bytes",
         "Allocated bytes of the whole process: the tags' and untagged.",
         snap->global.allocated},
        {"regionalloc_jemalloc_active_bytes",
         "Active bytes of the whole process: the tags' and untagged.",
         snap->global.active},
        {"regionalloc_jemalloc_resident_bytes",
         "Resident bytes of the whole process as the rows estimate them.",
         snap->global.resident},
        {"regionalloc_jemalloc_mapped_bytes",
         "Mapped bytes of the whole process: the tags' and untagged.",
         snap->global.mapped},
        {"regionalloc_process_rss_bytes",
         "Resident bytes of the process (/proc/self/statm).",
         snap->process_rss},
        {"regionalloc_library_allocated_bytes",
         "Bytes the library holds for itself (thread state, tables, "
         "reports), part of the untagged figures.",
         snap->library},
        {"regionalloc_leftover_bytes",
         "Bytes of blocks destroyed tags left live, nobody's until their "
         "slot's next reset frees them; in no tag's or untagged figures.",
         snap->leftovers},
        {"regionalloc_tag_rss_unmeasured",
         "Live tags whose regions the kernel has not counted yet.",
         snap->rss_unmeasured},
        {"regionalloc_regions_lost",
         "Regions another mapping holds the space of: that many fewer tags "
         "can be had until it is freed.",
         snap->regions_lost},
        {"regionalloc_memory_limit_bytes",
         "The memory limit the process is held under (0: none; 2^56 "
         "or more: none in effect).",
         snap->pressure.limit},
        {"regionalloc_memory_pressure_level",
         "0 below high, 1 at high (90% of the limit), 2 at the limit.",
         (uint64_t)snap->pressure.level},
    };
    const struct {
        const char *name, *help;
        uint64_t value;
    } pressure_counters[] = {
        {"regionalloc_memory_given_back_bytes_total",
         "Bytes the resident set fell by when pressure gave pages back.",
         snap->pressure.given_back},
        {"regionalloc_memory_pressure_refusals_total",
         "Allocations refused because of memory pressure.",
         snap->pressure.refusals},
    };

    struct ra__prom_values names;

    if (ra__prom_values_make(&names, snap->ntags + 1, row_name, snap))
        return true;
    write_prometheus_tags(e, snap, l, &names);
    for (size_t f = 0; f < nfamilies; f++) {
        if (prom_families[f].untagged_name == NULL)
            continue;
        ra__prom_family(e, prom_families[f].untagged_name,
                        prom_families[f].type, prom_families[f].help);
        ra__prom_sample(e, prom_families[f].untagged_name, NULL, 0,
                        usage_field(&snap->rows[0], prom_families[f].offset));
    }
    for (size_t p = 0; p < sizeof process / sizeof process[0]; p++) {
        ra__prom_family(e, process[p].name, "gauge", process[p].help);
        ra__prom_sample(e, process[p].name, NULL, 0, process[p].value);
    }
    ra__prom_family(e, "regionalloc_tag_rss_oldest_age_seconds", "gauge",
                    "How long ago the kernel last counted the region of the "
                    "tag counted longest ago (0: none counted).");
    ra__prom_sample_seconds(e, "regionalloc_tag_rss_oldest_age_seconds", NULL,
                            0, snap->rss_oldest_age_ns);
    for (size_t p = 0; p < sizeof pressure_counters / sizeof pressure_counters[0];
         p++) {
        ra__prom_family(e, pressure_counters[p].name, "counter",
                        pressure_counters[p].help);
        ra__prom_sample(e, pressure_counters[p].name, NULL, 0,
                        pressure_counters[p].value);
    }
    write_prometheus_parts(e, &snap->parts);
    write_prometheus_tree(e, snap, l, &names);
    ra__prom_values_free(&names);
    return false;
}

int ra__report_write(struct ra__out *o, ra_format_t fmt, size_t top)
{
    struct ra__emitter e;
    struct ra__snapshot snap;
    struct ra__listing l;
    bool detail = (fmt & RA_REPORT_DETAIL) != 0, failed = false;

    fmt &= ~RA_REPORT_DETAIL;
    if (ra__snapshot_take(&snap, detail)) {
        errno = ENOMEM;
        return -1;
    }
    if (ra__listing_make(&l, &snap, top)) {
        ra__snapshot_free(&snap);
        errno = ENOMEM;
        return -1;
    }
    ra__emit_init(&e, o);
    switch (fmt) {
    case RA_FORMAT_JSON:
        write_json(&e, &snap, &l);
        break;
    case RA_FORMAT_PROMETHEUS:
        failed = write_prometheus(&e, &snap, &l);
        break;
    default:
        write_text(o, &snap, &l);
        break;
    }
    ra__listing_free(&l);
    ra__snapshot_free(&snap);
    if (failed)
        errno = ENOMEM;
    return failed ? -1 : 0;
}

size_t ra__report_top_default(ra_format_t fmt)
{
    return fmt == RA_FORMAT_TEXT ? RA__TOP_TEXT : RA_REPORT_ALL_TAGS;
}

int ra_report_top(FILE *out, ra_format_t fmt, size_t top)
{
    struct ra__out o = RA__OUT_INIT(out, true);
    int rc;

    if (ra__out_check_args(out, fmt & ~RA_REPORT_DETAIL) != 0)
        return -1;
    ra__quiet_begin();
    rc = ra__report_write(&o, fmt, top);
    if (rc == 0)
        rc = ra__out_finish(&o);
    ra__quiet_end();
    return rc;
}

int ra_report(FILE *out, ra_format_t fmt)
{
    return ra_report_top(out, fmt,
                         ra__report_top_default(fmt & ~RA_REPORT_DETAIL));
}

/* -- at exit ----------------------------------------------------------------- */

/* A private copy of fd 2 for the reports, taken when the library is loaded:
 * programs such as GNU coreutils close stderr in an atexit handler, which
 * runs before library destructors. */
static int report_fd = -1;
/* The process that loaded the library: it started the program, or exec'd.
 * A child it forks inherits the value, and so knows it is a child. */
static pid_t loaded_by;

void ra__report_at_load(void)
{
    loaded_by = getpid();
    /* Only the variables are peeked at here; the configuration is still
     * read at first use. */
    if (ra__config_peek_is("REGIONALLOC_STATS", "stderr") ||
        ra__config_peek_is("REGIONALLOC_CHECKPOINTS", "stderr"))
        report_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
}

/* Whether path (a report's "stderr" or file path) holds a %p. */
static bool names_pid(const char *path)
{
    for (const char *p = path; *p != '\0'; p++) {
        if (p[0] == '%' && p[1] == 'p')
            return true;
        if (p[0] == '%' && p[1] == '%')
            p++;
    }
    return false;
}

/* The process that loaded the library writes every report it is asked
 * for; a forked child only those whose path holds its pid, so that its
 * report never replaces or repeats the parent's. Under regionalloc run the
 * program writes them, its children only when they are watched too. */
static bool reports_here(enum ra__watch watch, const char *path)
{
    if (path[0] == '\0' || watch == RA__WATCH_NONE)
        return false;
    return watch == RA__WATCH_CHILD || loaded_by == 0 ||
           getpid() == loaded_by || names_pid(path);
}

/* Writes path into out (len bytes) with %p replaced by this process's pid
 * and %% by %; any other % stays; a watched child's (child) ends in
 * ".PID". Returns true when it does not fit. */
static bool expand_path(char *out, size_t len, const char *path, bool child)
{
    size_t n = 0;
    int w;

    for (const char *p = path; *p != '\0'; p++) {
        w = 1;
        if (p[0] == '%' && p[1] == 'p') {
            w = snprintf(out + n, len - n, "%ld", (long)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            out[n] = '%';
            p++;
        } else {
            out[n] = *p;
        }
        if (w < 0 || (size_t)w >= len - n)
            return true;
        n += (size_t)w;
    }
    out[n] = '\0';
    w = child ? snprintf(out + n, len - n, ".%ld", (long)getpid()) : 0;
    return w < 0 || (size_t)w >= len - n;
}

/* The exit reports' streams: at most one on the kept stderr and one file
 * (both reports go to the same stream when they name the same place). A
 * watched child's lines on stderr start with its pid (prefix; "" for the
 * program). */
struct exit_streams {
    FILE *err;
    FILE *file;
    bool child;
    char prefix[32];
    char file_path[4096];
};

/* Returns the stream for path ("stderr" or a file, %p expanded), opening
 * it once, or NULL after one line on stderr naming var. A child's stderr
 * is written a line at a time: lines of the tree's processes never mix. */
static FILE *exit_stream(struct exit_streams *st, const char *var,
                         const char *path)
{
    char expanded[4096], msg[512];

    if (strcmp(path, "stderr") == 0) {
        if (st->err == NULL && report_fd >= 0) {
            st->err = fdopen(report_fd, "w");
            if (st->err != NULL && st->child)
                setvbuf(st->err, NULL, _IOLBF, 0);
        }
        return st->err != NULL ? st->err : stderr;
    }
    if (expand_path(expanded, sizeof expanded, path, st->child)) {
        snprintf(msg, sizeof msg, "regionalloc: %s: path too long: %.400s",
                 var, path);
        ra__warn(msg);
        return NULL;
    }
    if (st->file != NULL && strcmp(st->file_path, expanded) == 0)
        return st->file;
    if (st->file != NULL)
        fclose(st->file);
    st->file = fopen(expanded, "we");
    memcpy(st->file_path, expanded, sizeof expanded);
    if (st->file != NULL)
        return st->file;
    snprintf(msg, sizeof msg, "regionalloc: %s: cannot open %.400s: %s", var,
             expanded, strerror(errno));
    ra__warn(msg);
    return NULL;
}

/* What an exit report says in pass-through mode, in each format. */
static void write_pass_through(struct ra__out *o, ra_format_t fmt,
                               const char *what, const char *schema)
{
    struct ra__emitter e;

    if (fmt == RA_FORMAT_JSON) {
        ra__emit_init(&e, o);
        ra__json_object_begin(&e, NULL, true);
        ra__json_str(&e, "schema", schema);
        ra__json_bool(&e, "enabled", false);
        ra__json_object_end(&e);
    } else {
        ra__out_fmt(o, "%sregionalloc: pass-through mode, no %s\n",
                    fmt == RA_FORMAT_PROMETHEUS ? "# " : "", what);
    }
}

/* REGIONALLOC_PROF_DUMP's format, from the file name's suffix. */
static ra_prof_format_t prof_format_of(const char *path)
{
    static const struct {
        const char *suffix;
        ra_prof_format_t format;
    } suffixes[] = {
        {".folded", RA_PROF_FOLDED},
        {".pb.gz", RA_PROF_PPROF},
        {".heap", RA_PROF_HEAP_V2},
    };
    size_t len = strlen(path);

    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t n = strlen(suffixes[i].suffix);
        if (len >= n && strcmp(path + len - n, suffixes[i].suffix) == 0)
            return suffixes[i].format;
    }
    return RA_PROF_TREE;
}

/* The prefix of out's lines: a watched child's pid on stderr. */
static const char *line_prefix(const struct exit_streams *st, FILE *out)
{
    return st->child && (out == st->err || out == stderr) ? st->prefix
                                                           : NULL;
}

static void write_stats_at_exit(const struct exit_streams *st, FILE *out,
                                ra_format_t fmt, bool tagging)
{
    struct ra__out o = RA__OUT_INIT(out, false);

    o.prefix = line_prefix(st, out);
    if (!tagging)
        write_pass_through(&o, fmt, "per-tag statistics",
                           "regionalloc-report-1");
    else if (ra__report_write(&o, fmt | RA_REPORT_DETAIL,
                              ra__report_top_default(fmt)) != 0)
        return;
    ra__out_finish(&o);
}

static void write_checkpoints_at_exit(const struct exit_streams *st,
                                      FILE *out, ra_format_t fmt,
                                      bool tagging)
{
    struct ra__out o = RA__OUT_INIT(out, false);
    struct ra__checkpoint_set set;

    o.prefix = line_prefix(st, out);
    if (!tagging) {
        write_pass_through(&o, fmt, "checkpoints",
                           "regionalloc-checkpoints-1");
    } else {
        if (ra__checkpoint_copy(&set))
            return;
        ra__checkpoint_write(&o, fmt, &set);
        ra__checkpoint_set_free(&set);
    }
    ra__out_finish(&o);
}

static void write_prof_at_exit(const struct exit_streams *st, FILE *out,
                               const char *path)
{
    struct ra__out o = RA__OUT_INIT(out, false);

    o.prefix = line_prefix(st, out);
    ra__prof_dump_write(&o, prof_format_of(path), RA_TAG_ALL);
}

/* The reports, once their streams are open. */
static void write_at_exit(struct exit_streams *st, bool stats,
                          bool checkpoints, bool prof, bool tagging)
{
    const struct ra__config *config = ra__config();
    FILE *out;

    if (stats) {
        out = exit_stream(st, "REGIONALLOC_STATS", config->stats_path);
        if (out != NULL)
            write_stats_at_exit(st, out, config->stats_format, tagging);
    }
    if (checkpoints) {
        out = exit_stream(st, "REGIONALLOC_CHECKPOINTS",
                          config->checkpoints_path);
        if (out != NULL)
            write_checkpoints_at_exit(st, out, config->stats_format,
                                      tagging);
    }
    if (prof && tagging) {
        out = exit_stream(st, "REGIONALLOC_PROF_DUMP",
                          config->prof_dump_path);
        if (out != NULL)
            write_prof_at_exit(st, out, config->prof_dump_path);
    }
}

/* The whole of it is the library's own work: its streams and their
 * buffers belong to no tag and are not reported to hooks. Its writes
 * raise no SIGPIPE: a program whose stderr reader has gone exits as it
 * would have without the library. */
void ra__report_at_exit(void)
{
    const struct ra__config *config = ra__config();
    enum ra__watch watch = ra__config_watch();
    struct exit_streams st = {NULL, NULL, watch == RA__WATCH_CHILD, "", ""};
    struct ra__sigpipe_hold hold;
    bool stats = reports_here(watch, config->stats_path);
    bool checkpoints = reports_here(watch, config->checkpoints_path);
    bool prof = reports_here(watch, config->prof_dump_path);
    bool tagging;

    if (!stats && !checkpoints && !prof)
        return;
    ra__quiet_begin();
    tagging = ra__init();
    /* The exiting thread's caches would otherwise count as allocated. */
    ra_thread_flush();
    /* A last row for the state at exit, taken before the reports open
     * their streams: a program that takes no checkpoint of its own
     * (LD_PRELOAD) still gets one, with its peak RSS, which it leaves
     * alone for the parent's wait4. */
    if (checkpoints && tagging)
        ra__checkpoint_take("exit", false);
    snprintf(st.prefix, sizeof st.prefix, "[pid %ld] ", (long)getpid());
    ra__sigpipe_hold(&hold);
    write_at_exit(&st, stats, checkpoints, prof, tagging);
    if (st.err != NULL)
        fclose(st.err);
    if (st.file != NULL)
        fclose(st.file);
    ra__sigpipe_release(&hold);
    ra__quiet_end();
}

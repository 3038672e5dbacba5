/* The checkpoint report: the phase table (text), the JSON document and the
 * Prometheus exposition of every kept checkpoint, written from a copy of the
 * ring (no lock held while the caller's FILE runs). */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"

/* Past this many tags the table shows the largest ones and "other". */
#define SHOWN_TAGS_MAX 8u

/* Fixed columns after the tag columns, before the label. */
static const char *const tail_headers[] = {"tagged", "allocated", "active",
                                           "resident", "mapped", "rss"};

struct phase_table {
    const struct ra__checkpoint_set *set;
    unsigned shown[SHOWN_TAGS_MAX]; /* tag ids, ascending */
    unsigned nshown;
    bool other;       /* a column for the tags not shown */
    bool star;        /* a kept peak counts since the process's start */
};


/* Picks the tag columns: every tag when they fit, else the SHOWN_TAGS_MAX
 * with the largest allocated over the kept checkpoints (ties: the older
 * tag), in id order. */
static void choose_tags(struct phase_table *pt, unsigned ntags)
{
    size_t *tag_max = pt->set->tag_max;

    pt->nshown = 0;
    pt->other = ntags > SHOWN_TAGS_MAX;
    if (!pt->other) {
        for (unsigned t = 1; t <= ntags; t++)
            pt->shown[pt->nshown++] = t;
        return;
    }
    memset(tag_max, 0, sizeof tag_max[0] * (ntags + 1));
    for (size_t i = 0; i < pt->set->kept; i++) {
        const struct ra__checkpoint *cp = &pt->set->items[i];
        for (unsigned t = 1; t <= cp->ntags; t++)
            if (cp->tag_allocated[t - 1] > tag_max[t])
                tag_max[t] = cp->tag_allocated[t - 1];
    }
    while (pt->nshown < SHOWN_TAGS_MAX) {
        unsigned best = 0;
        for (unsigned t = 1; t <= ntags; t++) {
            bool taken = false;
            for (unsigned k = 0; k < pt->nshown; k++)
                taken |= pt->shown[k] == t;
            if (!taken && (best == 0 || tag_max[t] > tag_max[best]))
                best = t;
        }
        pt->shown[pt->nshown++] = best;
    }
    /* Insertion sort: id order reads like the program's phases. */
    for (unsigned i = 1; i < pt->nshown; i++)
        for (unsigned k = i; k > 0 && pt->shown[k - 1] > pt->shown[k]; k--) {
            unsigned tmp = pt->shown[k];
            pt->shown[k] = pt->shown[k - 1];
            pt->shown[k - 1] = tmp;
        }
}

static unsigned table_columns(const struct phase_table *pt)
{
    return 2 + pt->nshown + (pt->other ? 1 : 0) +
           (unsigned)(sizeof tail_headers / sizeof tail_headers[0]) + 2;
}

static void put_cell(char *cell, const char *text)
{
    snprintf(cell, RA__CELL_MAX, "%s", text);
}

static void fill_header(const struct phase_table *pt,
                        struct ra__table_row *row)
{
    unsigned c = 0;

    put_cell(row->cell[c++], "phase");
    put_cell(row->cell[c++], "elapsed");
    for (unsigned k = 0; k < pt->nshown; k++)
        ra__escape(row->cell[c++], RA__CELL_MAX, ra_tag_name(pt->shown[k]),
                   RA__ESCAPE_TEXT);
    if (pt->other)
        put_cell(row->cell[c++], "other");
    for (size_t k = 0; k < sizeof tail_headers / sizeof tail_headers[0]; k++)
        put_cell(row->cell[c++], tail_headers[k]);
    put_cell(row->cell[c++], pt->star ? "peak_rss*" : "peak_rss");
    put_cell(row->cell[c], "checkpoint");
}

static void fill_bytes(char *cell, size_t bytes)
{
    ra__human_bytes(cell, RA__CELL_MAX, bytes);
}

static void fill_checkpoint(const struct phase_table *pt,
                            const struct ra__checkpoint *cp,
                            struct ra__table_row *row)
{
    unsigned c = 0, others = cp->ntags;
    size_t rest = cp->tagged;

    ra__human_ns(row->cell[c++], RA__CELL_MAX, cp->phase_ns);
    ra__human_ns(row->cell[c++], RA__CELL_MAX, cp->time_ns);
    for (unsigned k = 0; k < pt->nshown; k++, c++) {
        unsigned t = pt->shown[k];
        /* "-": the tag did not exist yet. */
        if (t > cp->ntags) {
            put_cell(row->cell[c], "-");
            continue;
        }
        fill_bytes(row->cell[c], cp->tag_allocated[t - 1]);
        rest -= cp->tag_allocated[t - 1];
        others--;
    }
    if (pt->other) {
        if (others == 0)
            put_cell(row->cell[c], "-");
        else
            fill_bytes(row->cell[c], rest);
        c++;
    }
    fill_bytes(row->cell[c++], cp->tagged);
    fill_bytes(row->cell[c++], cp->global.allocated);
    fill_bytes(row->cell[c++], cp->global.active);
    fill_bytes(row->cell[c++], cp->global.resident);
    fill_bytes(row->cell[c++], cp->global.mapped);
    fill_bytes(row->cell[c++], cp->rss);
    fill_bytes(row->cell[c++], cp->peak_rss);
    ra__escape(row->cell[c], RA__CELL_MAX, cp->label, RA__ESCAPE_TEXT);
}

static void fill_phase_row(void *ctx, size_t r, struct ra__table_row *row)
{
    const struct phase_table *pt = ctx;

    if (r == 0)
        fill_header(pt, row);
    else
        fill_checkpoint(pt, &pt->set->items[r - 1], row);
}

static void write_text(struct ra__out *o, const struct ra__checkpoint_set *set)
{
    struct phase_table pt = {.set = set};
    uint64_t dropped = set->recorded - set->kept;
    struct ra__table table;

    choose_tags(&pt, set->ntags);
    for (size_t i = 0; i < set->kept; i++)
        pt.star |= set->items[i].peak_since_start;
    table = (struct ra__table){
        .ncols = table_columns(&pt),
        .left = 1u << (table_columns(&pt) - 1),
        .nrows = set->kept + 1,
        .fill = fill_phase_row,
        .ctx = &pt,
    };
    if (dropped > 0)
        ra__out_fmt(o, "(%" PRIu64 " earlier checkpoints dropped: the last "
                    "%u are kept)\n", dropped, RA__CHECKPOINTS_KEPT);
    ra__table_write(o, &table);
    if (pt.star)
        ra__out_str(o, "* peak_rss: peak since the process started where "
                       "the kernel refused to reset it\n"
                       "  (/proc/self/clear_refs); elsewhere the peak "
                       "within the phase.\n");
}

/* -- JSON ------------------------------------------------------------------ */

static void json_u64(struct ra__out *o, const char *key, uint64_t v)
{
    ra__out_fmt(o, "\"%s\": %" PRIu64 ", ", key, v);
}

static void write_json_checkpoint(struct ra__out *o,
                                  const struct ra__checkpoint *cp)
{
    ra__out_fmt(o, "    {\"seq\": %" PRIu64 ", \"label\": ", cp->seq);
    ra__out_json_string(o, cp->label);
    ra__out_str(o, ", ");
    json_u64(o, "time_ns", cp->time_ns);
    json_u64(o, "phase_ns", cp->phase_ns);
    json_u64(o, "tagged_allocated", cp->tagged);
    json_u64(o, "allocated", cp->global.allocated);
    json_u64(o, "active", cp->global.active);
    json_u64(o, "resident", cp->global.resident);
    json_u64(o, "mapped", cp->global.mapped);
    json_u64(o, "rss", cp->rss);
    json_u64(o, "peak_rss", cp->peak_rss);
    ra__out_fmt(o, "\"peak_rss_since\": \"%s\", \"tag_allocated\": [",
                cp->peak_since_start ? "start" : "phase");
    for (unsigned t = 1; t <= cp->ntags; t++) {
        if (t > 1)
            ra__out_str(o, ", ");
        ra__out_u64(o, cp->tag_allocated[t - 1]);
    }
    ra__out_str(o, "]}");
}

static void write_json(struct ra__out *o, const struct ra__checkpoint_set *set)
{
    size_t kept = set->kept;
    uint64_t recorded = set->recorded;
    unsigned ntags = ra__tag_published();

    ra__out_fmt(o, "{\n  \"schema\": \"regionalloc-checkpoints-1\",\n"
                "  \"enabled\": true,\n  \"capacity\": %u,\n"
                "  \"recorded\": %" PRIu64 ",\n  \"dropped\": %" PRIu64
                ",\n  \"tags\": [",
                RA__CHECKPOINTS_KEPT, recorded, recorded - kept);
    for (ra_tag_t t = 1; t <= ntags; t++) {
        ra__out_fmt(o, "%s\n    {\"id\": %u, \"name\": ", t > 1 ? "," : "",
                    t);
        ra__out_json_string(o, ra_tag_name(t));
        ra__out_str(o, "}");
    }
    ra__out_str(o, ntags > 0 ? "\n  ],\n  \"checkpoints\": ["
                             : "],\n  \"checkpoints\": [");
    for (size_t i = 0; i < kept; i++) {
        ra__out_str(o, i > 0 ? ",\n" : "\n");
        write_json_checkpoint(o, &set->items[i]);
    }
    ra__out_str(o, kept > 0 ? "\n  ]\n}\n" : "]\n}\n");
}

/* -- Prometheus ------------------------------------------------------------ */

/* Writes name{seq="…",checkpoint="…": the start of a sample, to which the
 * caller adds any further label and "} value". */
static void prom_open(struct ra__out *o, const char *name,
                      const struct ra__checkpoint *cp)
{
    char label[RA__ESCAPED_MAX];

    ra__escape(label, sizeof label, cp->label, RA__ESCAPE_PROMETHEUS);
    ra__out_fmt(o, "%s{seq=\"%" PRIu64 "\",checkpoint=\"", name, cp->seq);
    ra__out_str(o, label);
    ra__out_str(o, "\"");
}

static void prom_seconds(struct ra__out *o, uint64_t ns)
{
    ra__out_fmt(o, "} %" PRIu64 ".%09" PRIu64 "\n", ns / 1000000000u,
                ns % 1000000000u);
}

static const struct {
    const char *name, *help;
    size_t offset; /* of a size_t in struct ra__checkpoint */
} byte_families[] = {
    {"regionalloc_checkpoint_tagged_allocated_bytes",
     "Sum of the tags' allocated bytes at the checkpoint.",
     offsetof(struct ra__checkpoint, tagged)},
    {"regionalloc_checkpoint_allocated_bytes",
     "jemalloc's stats.allocated at the checkpoint (whole process).",
     offsetof(struct ra__checkpoint, global.allocated)},
    {"regionalloc_checkpoint_active_bytes",
     "jemalloc's stats.active at the checkpoint.",
     offsetof(struct ra__checkpoint, global.active)},
    {"regionalloc_checkpoint_resident_bytes",
     "jemalloc's stats.resident at the checkpoint.",
     offsetof(struct ra__checkpoint, global.resident)},
    {"regionalloc_checkpoint_mapped_bytes",
     "jemalloc's stats.mapped at the checkpoint.",
     offsetof(struct ra__checkpoint, global.mapped)},
    {"regionalloc_checkpoint_rss_bytes",
     "Resident bytes of the process (/proc/self/statm) at the checkpoint.",
     offsetof(struct ra__checkpoint, rss)},
};

static size_t field(const struct ra__checkpoint *cp, size_t offset)
{
    size_t v;

    memcpy(&v, (const char *)cp + offset, sizeof v);
    return v;
}

static void write_prometheus(struct ra__out *o,
                             const struct ra__checkpoint_set *set)
{
    size_t kept = set->kept;
    uint64_t recorded = set->recorded;

    ra__out_prom_family(o, "regionalloc_checkpoints_recorded_total",
                        "counter", "Checkpoints taken since the start.");
    ra__out_fmt(o, "regionalloc_checkpoints_recorded_total %" PRIu64 "\n",
                recorded);
    ra__out_prom_family(o, "regionalloc_checkpoints_dropped_total", "counter",
                        "Oldest checkpoints dropped from the ring of 1024.");
    ra__out_fmt(o, "regionalloc_checkpoints_dropped_total %" PRIu64 "\n",
                recorded - kept);

    ra__out_prom_family(o, "regionalloc_checkpoint_elapsed_seconds", "gauge",
                        "Time from the library's load to the checkpoint.");
    for (size_t i = 0; i < kept; i++) {
        const struct ra__checkpoint *cp = &set->items[i];
        prom_open(o, "regionalloc_checkpoint_elapsed_seconds", cp);
        prom_seconds(o, cp->time_ns);
    }
    ra__out_prom_family(o, "regionalloc_checkpoint_phase_seconds", "gauge",
                        "Time from the previous checkpoint (or the load).");
    for (size_t i = 0; i < kept; i++) {
        const struct ra__checkpoint *cp = &set->items[i];
        prom_open(o, "regionalloc_checkpoint_phase_seconds", cp);
        prom_seconds(o, cp->phase_ns);
    }

    ra__out_prom_family(o, "regionalloc_checkpoint_tag_allocated_bytes",
                        "gauge", "Bytes in the tag's live blocks at the "
                                 "checkpoint.");
    for (size_t i = 0; i < kept; i++) {
        const struct ra__checkpoint *cp = &set->items[i];
        for (ra_tag_t t = 1; t <= cp->ntags; t++) {
            char tag[RA__ESCAPED_MAX];
            ra__escape(tag, sizeof tag, ra_tag_name(t),
                       RA__ESCAPE_PROMETHEUS);
            prom_open(o, "regionalloc_checkpoint_tag_allocated_bytes", cp);
            ra__out_str(o, ",tag=\"");
            ra__out_str(o, tag);
            ra__out_fmt(o, "\"} %zu\n", cp->tag_allocated[t - 1]);
        }
    }

    for (size_t f = 0; f < sizeof byte_families / sizeof byte_families[0];
         f++) {
        ra__out_prom_family(o, byte_families[f].name, "gauge",
                            byte_families[f].help);
        for (size_t i = 0; i < kept; i++) {
            const struct ra__checkpoint *cp = &set->items[i];
            prom_open(o, byte_families[f].name, cp);
            ra__out_fmt(o, "} %zu\n", field(cp, byte_families[f].offset));
        }
    }

    ra__out_prom_family(o, "regionalloc_checkpoint_peak_rss_bytes", "gauge",
                        "Peak resident bytes of the process within the "
                        "phase (since=\"phase\") or since its start "
                        "(since=\"start\": the peak could not be reset).");
    for (size_t i = 0; i < kept; i++) {
        const struct ra__checkpoint *cp = &set->items[i];
        prom_open(o, "regionalloc_checkpoint_peak_rss_bytes", cp);
        ra__out_fmt(o, ",since=\"%s\"} %zu\n",
                    cp->peak_since_start ? "start" : "phase", cp->peak_rss);
    }
}

void ra__checkpoint_write(struct ra__out *o, ra_format_t fmt,
                          const struct ra__checkpoint_set *set)
{
    switch (fmt) {
    case RA_FORMAT_JSON:
        write_json(o, set);
        break;
    case RA_FORMAT_PROMETHEUS:
        write_prometheus(o, set);
        break;
    default:
        write_text(o, set);
        break;
    }
}

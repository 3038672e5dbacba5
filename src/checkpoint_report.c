/* Floor: services. The checkpoint report: the phase table (text), the JSON
 * document and the Prometheus exposition of every kept checkpoint, written
 * from a copy of the ring (no lock held while the caller's FILE runs). */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "output.h"

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


/* Picks the tag columns, among the tags alive now: every one when they
 * fit, else the SHOWN_TAGS_MAX with the largest allocated over the kept
 * checkpoints (ties: the older tag), in id order. "other" gathers the
 * rest, and the figures of tags gone. */
static void choose_tags(struct phase_table *pt)
{
    const struct ra__checkpoint_set *set = pt->set;
    size_t *tag_max = set->tag_max;
    unsigned live = 0;
    bool past = false; /* a figure of a tag gone, which only "other" shows */

    memset(tag_max, 0, sizeof tag_max[0] * (set->ntags + 1));
    for (size_t i = 0; i < set->kept; i++) {
        const struct ra__checkpoint *cp = &set->items[i];
        for (unsigned t = 1; t <= cp->ntags; t++)
            if (!ra__checkpoint_figure_current(set, cp, t))
                past = true;
            else if (cp->tag_allocated[t - 1] > tag_max[t])
                tag_max[t] = cp->tag_allocated[t - 1];
    }
    for (unsigned t = 1; t <= set->ntags; t++)
        live += set->holders[t].live;
    pt->nshown = 0;
    pt->other = live > SHOWN_TAGS_MAX || past;
    while (pt->nshown < SHOWN_TAGS_MAX && pt->nshown < live) {
        unsigned best = 0;
        for (unsigned t = 1; t <= set->ntags; t++) {
            bool taken = !set->holders[t].live;
            for (unsigned k = 0; k < pt->nshown && !taken; k++)
                taken = pt->shown[k] == t;
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

static void fill_header(const struct phase_table *pt,
                        struct ra__table_row *row)
{
    unsigned c = 0;

    ra__cell_text(row->cell[c++], "phase");
    ra__cell_text(row->cell[c++], "elapsed");
    for (unsigned k = 0; k < pt->nshown; k++)
        ra__cell_name(row->cell[c++], pt->set->holders[pt->shown[k]].name);
    if (pt->other)
        ra__cell_text(row->cell[c++], "other");
    for (size_t k = 0; k < sizeof tail_headers / sizeof tail_headers[0]; k++)
        ra__cell_text(row->cell[c++], tail_headers[k]);
    ra__cell_text(row->cell[c++], pt->star ? "peak_rss*" : "peak_rss");
    ra__cell_text(row->cell[c], "checkpoint");
}

static void fill_checkpoint(const struct phase_table *pt,
                            const struct ra__checkpoint *cp,
                            struct ra__table_row *row)
{
    unsigned c = 0, others = cp->ntags;
    size_t rest = cp->tagged;

    ra__cell_ns(row->cell[c++], cp->phase_ns);
    ra__cell_ns(row->cell[c++], cp->time_ns);
    for (unsigned k = 0; k < pt->nshown; k++, c++) {
        unsigned t = pt->shown[k];
        /* "-": the tag did not exist yet (its id may have served a tag
         * since gone, whose figure goes to "other"). */
        if (!ra__checkpoint_figure_current(pt->set, cp, t)) {
            ra__cell_text(row->cell[c], "-");
            continue;
        }
        ra__cell_bytes(row->cell[c], cp->tag_allocated[t - 1]);
        rest -= cp->tag_allocated[t - 1];
        others--;
    }
    if (pt->other) {
        if (others == 0)
            ra__cell_text(row->cell[c], "-");
        else
            ra__cell_bytes(row->cell[c], rest);
        c++;
    }
    ra__cell_bytes(row->cell[c++], cp->tagged);
    ra__cell_bytes(row->cell[c++], cp->global.allocated);
    ra__cell_bytes(row->cell[c++], cp->global.active);
    ra__cell_bytes(row->cell[c++], cp->global.resident);
    ra__cell_bytes(row->cell[c++], cp->global.mapped);
    ra__cell_bytes(row->cell[c++], cp->rss);
    ra__cell_bytes(row->cell[c++], cp->peak_rss);
    ra__cell_name(row->cell[c], cp->label);
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

    choose_tags(&pt);
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

static void write_json_checkpoint(struct ra__emitter *e,
                                  const struct ra__checkpoint_set *set,
                                  const struct ra__checkpoint *cp)
{
    ra__json_object_begin(e, NULL, true);
    ra__json_u64(e, "seq", cp->seq);
    ra__json_bytes(e, "label", "label_hex", cp->label);
    ra__json_u64(e, "time_ns", cp->time_ns);
    ra__json_u64(e, "phase_ns", cp->phase_ns);
    ra__json_u64(e, "tagged_allocated", cp->tagged);
    ra__json_u64(e, "allocated", cp->global.allocated);
    ra__json_u64(e, "active", cp->global.active);
    ra__json_u64(e, "resident", cp->global.resident);
    ra__json_u64(e, "mapped", cp->global.mapped);
    ra__json_u64(e, "rss", cp->rss);
    ra__json_u64(e, "peak_rss", cp->peak_rss);
    ra__json_str(e, "peak_rss_since", cp->peak_since_start ? "start"
                                                             : "phase");
    ra__json_array_begin(e, "tag_allocated", true);
    /* null: a figure of a tag gone (destroyed, its id perhaps recycled). */
    for (unsigned t = 1; t <= cp->ntags; t++)
        if (ra__checkpoint_figure_current(set, cp, t))
            ra__json_u64(e, NULL, cp->tag_allocated[t - 1]);
        else
            ra__json_null(e, NULL);
    ra__json_array_end(e);
    ra__json_object_end(e);
}

/* A live tag of the set: its id, its creation count (which tells it from
 * an earlier holder of the id, as the history's samples do), its name and
 * its parent, by name and by id, null at the top level (or when the
 * parent went between the two reads). */
static void write_json_tag(struct ra__emitter *e,
                           const struct ra__checkpoint_set *set, ra_tag_t t)
{
    ra_tag_t p = set->holders[t].parent;

    ra__json_object_begin(e, NULL, true);
    ra__json_u64(e, "id", t);
    ra__json_u64(e, "born", set->holders[t].born);
    ra__json_bytes(e, "name", "name_hex", set->holders[t].name);
    if (p != RA_TAG_NONE && p <= set->nholders && set->holders[p].live) {
        ra__json_str(e, "parent", set->holders[p].name);
        ra__json_u64(e, "parent_id", p);
    } else {
        ra__json_null(e, "parent");
        ra__json_null(e, "parent_id");
    }
    ra__json_object_end(e);
}

static void write_json(struct ra__emitter *e,
                       const struct ra__checkpoint_set *set)
{
    ra__json_object_begin(e, NULL, false);
    ra__json_str(e, "schema", "regionalloc-checkpoints-1");
    ra__json_bool(e, "enabled", true);
    ra__json_u64(e, "capacity", RA__CHECKPOINTS_KEPT);
    ra__json_u64(e, "recorded", set->recorded);
    ra__json_u64(e, "dropped", set->recorded - set->kept);
    ra__json_array_begin(e, "tags", false);
    for (ra_tag_t t = 1; t <= set->nholders; t++)
        if (set->holders[t].live)
            write_json_tag(e, set, t);
    ra__json_array_end(e);
    ra__json_array_begin(e, "checkpoints", false);
    for (size_t i = 0; i < set->kept; i++)
        write_json_checkpoint(e, set, &set->items[i]);
    ra__json_array_end(e);
    ra__json_object_end(e);
}

/* -- Prometheus ------------------------------------------------------------ */

/* A checkpoint's labels: seq="<n>", checkpoint="<label>", and room for one
 * more. */
struct checkpoint_labels {
    char seq[24];
    struct ra__prom_label labels[3];
};

static const struct ra__prom_label *labels_of(struct checkpoint_labels *l,
                                              const struct ra__checkpoint *cp)
{
    snprintf(l->seq, sizeof l->seq, "%" PRIu64, cp->seq);
    l->labels[0] = (struct ra__prom_label){"seq", l->seq};
    l->labels[1] = (struct ra__prom_label){"checkpoint", cp->label};
    return l->labels;
}

static const struct {
    const char *name, *help;
    size_t offset; /* of a size_t in struct ra__checkpoint */
} byte_families[] = {
    {"regionalloc_checkpoint_tagged_allocated_bytes",
     "Sum of the tags' allocated bytes at the checkpoint.",
     offsetof(struct ra__checkpoint, tagged)},
    {"regionalloc_checkpoint_allocated_bytes",
     "Allocated bytes of the whole process at the checkpoint.",
     offsetof(struct ra__checkpoint, global.allocated)},
    {"regionalloc_checkpoint_active_bytes",
     "Active bytes of the whole process at the checkpoint.",
     offsetof(struct ra__checkpoint, global.active)},
    {"regionalloc_checkpoint_resident_bytes",
     "Resident bytes of the whole process at the checkpoint, as estimated.",
     offsetof(struct ra__checkpoint, global.resident)},
    {"regionalloc_checkpoint_mapped_bytes",
     "Mapped bytes of the whole process at the checkpoint.",
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

/* Each tag's allocated bytes at each checkpoint, where the figure is the
 * tag's that holds its id now. */
static void write_prometheus_tags(struct ra__emitter *e,
                                  const struct ra__checkpoint_set *set)
{
    struct checkpoint_labels l;

    ra__prom_family(e, "regionalloc_checkpoint_tag_allocated_bytes", "gauge",
                    "Bytes in the tag's live blocks at the checkpoint.");
    for (size_t i = 0; i < set->kept; i++) {
        const struct ra__checkpoint *cp = &set->items[i];
        for (ra_tag_t t = 1; t <= cp->ntags; t++) {
            if (!ra__checkpoint_figure_current(set, cp, t))
                continue;
            labels_of(&l, cp);
            l.labels[2] =
                (struct ra__prom_label){"tag", set->holders[t].name};
            ra__prom_sample(e, "regionalloc_checkpoint_tag_allocated_bytes",
                            l.labels, 3, cp->tag_allocated[t - 1]);
        }
    }
}

static void write_prometheus(struct ra__emitter *e,
                             const struct ra__checkpoint_set *set)
{
    struct checkpoint_labels l;

    ra__prom_family(e, "regionalloc_checkpoints_recorded_total", "counter",
                    "Checkpoints taken since the start.");
    ra__prom_sample(e, "regionalloc_checkpoints_recorded_total", NULL, 0,
                    set->recorded);
    ra__prom_family(e, "regionalloc_checkpoints_dropped_total", "counter",
                    "Oldest checkpoints dropped from the ring of 1024.");
    ra__prom_sample(e, "regionalloc_checkpoints_dropped_total", NULL, 0,
                    set->recorded - set->kept);

    ra__prom_family(e, "regionalloc_checkpoint_elapsed_seconds", "gauge",
                    "Time from the library's load to the checkpoint.");
    for (size_t i = 0; i < set->kept; i++)
        ra__prom_sample_seconds(e, "regionalloc_checkpoint_elapsed_seconds",
                                labels_of(&l, &set->items[i]), 2,
                                set->items[i].time_ns);
    ra__prom_family(e, "regionalloc_checkpoint_phase_seconds", "gauge",
                    "Time from the previous checkpoint (or the load).");
    for (size_t i = 0; i < set->kept; i++)
        ra__prom_sample_seconds(e, "regionalloc_checkpoint_phase_seconds",
                                labels_of(&l, &set->items[i]), 2,
                                set->items[i].phase_ns);

    write_prometheus_tags(e, set);

    for (size_t f = 0; f < sizeof byte_families / sizeof byte_families[0];
         f++) {
        ra__prom_family(e, byte_families[f].name, "gauge",
                        byte_families[f].help);
        for (size_t i = 0; i < set->kept; i++)
            ra__prom_sample(e, byte_families[f].name,
                            labels_of(&l, &set->items[i]), 2,
                            field(&set->items[i], byte_families[f].offset));
    }

    ra__prom_family(e, "regionalloc_checkpoint_peak_rss_bytes", "gauge",
                    "Peak resident bytes of the process within the phase "
                    "(since=\"phase\") or since its start (since=\"start\": "
                    "the peak could not be reset).");
    for (size_t i = 0; i < set->kept; i++) {
        const struct ra__checkpoint *cp = &set->items[i];
        labels_of(&l, cp);
        l.labels[2] = (struct ra__prom_label){
            "since", cp->peak_since_start ? "start" : "phase"};
        ra__prom_sample(e, "regionalloc_checkpoint_peak_rss_bytes", l.labels,
                        3, cp->peak_rss);
    }
}

void ra__checkpoint_write(struct ra__out *o, ra_format_t fmt,
                          const struct ra__checkpoint_set *set)
{
    struct ra__emitter e;

    ra__emit_init(&e, o);
    switch (fmt) {
    case RA_FORMAT_JSON:
        write_json(&e, set);
        break;
    case RA_FORMAT_PROMETHEUS:
        write_prometheus(&e, set);
        break;
    default:
        write_text(o, set);
        break;
    }
}

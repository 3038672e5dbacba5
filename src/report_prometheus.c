/* Floor: services. The Prometheus report (text exposition format 0.0.4):
 * the tags' families (report_names.h), their tree, the untagged arenas',
 * the process's figures and parts, the memory limit's. */
#include <stddef.h>
#include <string.h>

#include "output.h"
#include "report_names.h"

/* Metric families of the tags and the untagged arenas (report_names.h).
 * summed: with ?top, the tags not listed are one series tag="(rest)"
 * there, their sum. */
static const struct {
    const char *tag_name, *untagged_name, *type, *help;
    size_t offset;
    bool summed;
} prom_families[] = {
#define FAMILY(name, untagged, type, help, field, summed)                     \
    {name, untagged, type, help, RA__USAGE_FIELD(field), summed},
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
                    (int64_t)ra__usage_field(&snap->rows[r],
                                         prom_families[f].offset),
                    false);
        if (l->cut && prom_families[f].summed)
            ra__prom_sample(e, prom_families[f].tag_name, &rest, 1,
                            ra__usage_field(&l->rest.sum,
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

/* A family of one series, without labels, per figure. */
struct figure {
    const char *name, *help;
    uint64_t value;
};

static void write_figures(struct ra__emitter *e, const char *type,
                          const struct figure *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ra__prom_family(e, f[i].name, type, f[i].help);
        ra__prom_sample(e, f[i].name, NULL, 0, f[i].value);
    }
}

/* The process's figures, the library's own and the memory limit's. */
static void write_prometheus_process(struct ra__emitter *e,
                                     const struct ra__snapshot *snap)
{
    const struct figure process[] = {
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

    write_figures(e, "gauge", process, sizeof process / sizeof process[0]);
}

/* What the memory limit's pressure did so far. */
static void write_prometheus_pressure(struct ra__emitter *e,
                                      const struct ra__snapshot *snap)
{
    const struct figure counters[] = {
        {"regionalloc_memory_given_back_bytes_total",
         "Bytes the resident set fell by when pressure gave pages back.",
         snap->pressure.given_back},
        {"regionalloc_memory_pressure_refusals_total",
         "Allocations refused because of memory pressure.",
         snap->pressure.refusals},
    };

    write_figures(e, "counter", counters,
                  sizeof counters / sizeof counters[0]);
}

/* false: the report is written; true: the library had no memory for the
 * escaped names. */
bool ra__report_prometheus(struct ra__emitter *e,
                           const struct ra__snapshot *snap,
                           const struct ra__listing *l)
{
    const size_t nfamilies = sizeof prom_families / sizeof prom_families[0];
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
                        ra__usage_field(&snap->rows[0],
                                        prom_families[f].offset));
    }
    write_prometheus_process(e, snap);
    ra__prom_family(e, "regionalloc_tag_rss_oldest_age_seconds", "gauge",
                    "How long ago the kernel last counted the region of the "
                    "tag counted longest ago (0: none counted).");
    ra__prom_sample_seconds(e, "regionalloc_tag_rss_oldest_age_seconds", NULL,
                            0, snap->rss_oldest_age_ns);
    write_prometheus_pressure(e, snap);
    write_prometheus_parts(e, &snap->parts);
    write_prometheus_tree(e, snap, l, &names);
    ra__prom_values_free(&names);
    return false;
}

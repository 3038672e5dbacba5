/* regionalloc report's Prometheus text, written from a copy of the live
 * segment with the names, labels and order of the process's own /metrics
 * (report_names.h; report_prometheus.c, the library's source). */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "regionalloc.h"
#include "report_names.h"

/* A label value as Prometheus' text format wants it: \\, \" and \n
 * escaped; other control bytes as the text \xNN, as the library writes
 * them. */
static void print_label(const char *name, size_t size)
{
    for (size_t i = 0; i < size && name[i] != '\0'; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '\\' || c == '"')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\\\x%02x", c);
        else
            putchar(c);
    }
}

/* The process's parts, with the names, labels and order of its /metrics
 * (report_names.h); the cgroup's when it is in one. */
static void print_prometheus_parts(const struct ra_shm_parts *p)
{
    printf("# TYPE " RA_PARTS_FAMILY " gauge\n");
#define PART(field)                                                           \
    printf(RA_PARTS_FAMILY "{part=\"" #field "\"} %" PRIu64 "\n", p->field);
    RA_PARTS_LIST(PART)
#undef PART
#define KERNEL(name, help, field)                                             \
    printf("# TYPE " name " gauge\n" name " %" PRIu64 "\n", p->field);
    RA_PARTS_KERNEL_FAMILIES(KERNEL)
#undef KERNEL
    if (!(p->flags & RA_SHM_PARTS_CGROUP))
        return;
#define CGROUP(name, field)                                                   \
    printf("# TYPE " name " gauge\n" name " %" PRIu64 "\n", p->field);
    RA_PARTS_CGROUP_FAMILIES(CGROUP)
#undef CGROUP
}

/* How the kernel's counts of the tags' regions stand, as the process's
 * /metrics has it: the live tags not counted yet, and the age of the
 * count taken longest ago (0: none counted), in seconds. */
static void print_prometheus_counts(const struct segment_copy *c)
{
    uint64_t unmeasured = 0, oldest = UINT64_MAX, age = 0;

    for (uint32_t r = 0; r < c->header.nrecords; r++) {
        const struct ra_shm_record *rec = &c->records[r];
        if (!(rec->flags & RA_SHM_RECORD_LIVE))
            continue;
        if (rec->rss_at_ns == 0)
            unmeasured++;
        else if (rec->rss_at_ns < oldest)
            oldest = rec->rss_at_ns;
    }
    if (oldest != UINT64_MAX && c->header.time_ns > oldest)
        age = c->header.time_ns - oldest;
    printf("# TYPE regionalloc_tag_rss_unmeasured gauge\n"
           "regionalloc_tag_rss_unmeasured %" PRIu64 "\n"
           "# TYPE regionalloc_tag_rss_oldest_age_seconds gauge\n"
           "regionalloc_tag_rss_oldest_age_seconds %" PRIu64 ".%09" PRIu64
           "\n",
           unmeasured, age / 1000000000u, age % 1000000000u);
}

/* Where a record holds the field of each per-tag family (report_names.h):
 * in its figures but metadata; 0 for arenas, which the segment lacks. The
 * untagged figures are at the same offsets in the header's. */
enum {
#define IN_FIGURES(f) IN_RECORD_##f = offsetof(struct ra_shm_record, figures.f)
    IN_FIGURES(allocated), IN_FIGURES(active), IN_FIGURES(resident),
    IN_FIGURES(rss), IN_FIGURES(mapped), IN_FIGURES(peak_mapped),
    IN_FIGURES(dirty), IN_FIGURES(nmalloc), IN_FIGURES(ndalloc),
    IN_FIGURES(purges), IN_FIGURES(limit), IN_FIGURES(soft_limit),
    IN_FIGURES(limit_failures),
#undef IN_FIGURES
    IN_RECORD_metadata = offsetof(struct ra_shm_record, metadata),
    IN_RECORD_arenas = 0,
};

/* The per-tag families of the process's /metrics, and their untagged
 * twins (NULL: none). */
static const struct family {
    const char *tag, *untagged, *type;
    size_t offset;
} families[] = {
#define FAMILY(name, untagged, type, help, field, summed)                     \
    {name, untagged, type, IN_RECORD_##field},
    RA_TAG_FAMILIES(FAMILY)
#undef FAMILY
};
#define NFAMILIES (sizeof families / sizeof families[0])

/* The sample of rec in a per-tag family: its name with its tag label. */
static void print_tag_sample(const char *family,
                             const struct ra_shm_record *rec)
{
    printf("%s{tag=\"", family);
    print_label(rec->name, sizeof rec->name);
    fputs("\"} ", stdout);
}

/* Each per-tag family the segment has, a sample per live tag, then the
 * tags' priorities. */
static void print_tag_families(const struct segment_copy *c)
{
    uint64_t v;

    for (size_t f = 0; f < NFAMILIES; f++) {
        if (families[f].offset == 0)
            continue;
        printf("# TYPE %s %s\n", families[f].tag, families[f].type);
        for (uint32_t r = 0; r < c->header.nrecords; r++) {
            const struct ra_shm_record *rec = &c->records[r];
            if (!(rec->flags & RA_SHM_RECORD_LIVE))
                continue;
            memcpy(&v, (const char *)rec + families[f].offset, sizeof v);
            print_tag_sample(families[f].tag, rec);
            printf("%" PRIu64 "\n", v);
        }
    }
    printf("# TYPE regionalloc_tag_priority gauge\n");
    for (uint32_t r = 0; r < c->header.nrecords; r++) {
        const struct ra_shm_record *rec = &c->records[r];
        if (!(rec->flags & RA_SHM_RECORD_LIVE))
            continue;
        print_tag_sample("regionalloc_tag_priority", rec);
        printf("%" PRId32 "\n", rec->priority);
    }
}

/* The untagged twins of the per-tag families, from the header's untagged
 * figures. */
static void print_untagged_families(const struct segment_copy *c)
{
    uint64_t v;

    for (size_t f = 0; f < NFAMILIES; f++) {
        if (families[f].untagged == NULL)
            continue;
        memcpy(&v,
               (const char *)&c->header.untagged + families[f].offset -
                   offsetof(struct ra_shm_record, figures),
               sizeof v);
        printf("# TYPE %s %s\n%s %" PRIu64 "\n", families[f].untagged,
               families[f].type, families[f].untagged, v);
    }
}

/* The process's own families: jemalloc's, the library's and the memory
 * limit's. */
static void print_process_families(const struct segment_copy *c)
{
    printf("# TYPE regionalloc_jemalloc_allocated_bytes gauge\n"
           "regionalloc_jemalloc_allocated_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_jemalloc_active_bytes gauge\n"
           "regionalloc_jemalloc_active_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_jemalloc_resident_bytes gauge\n"
           "regionalloc_jemalloc_resident_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_jemalloc_mapped_bytes gauge\n"
           "regionalloc_jemalloc_mapped_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_process_rss_bytes gauge\n"
           "regionalloc_process_rss_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_library_allocated_bytes gauge\n"
           "regionalloc_library_allocated_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_leftover_bytes gauge\n"
           "regionalloc_leftover_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_memory_limit_bytes gauge\n"
           "regionalloc_memory_limit_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_memory_pressure_level gauge\n"
           "regionalloc_memory_pressure_level %" PRIu32 "\n"
           "# TYPE regionalloc_memory_given_back_bytes_total counter\n"
           "regionalloc_memory_given_back_bytes_total %" PRIu64 "\n"
           "# TYPE regionalloc_memory_pressure_refusals_total counter\n"
           "regionalloc_memory_pressure_refusals_total %" PRIu64 "\n",
           c->header.process.allocated, c->header.process.active,
           c->header.process.resident, c->header.process.mapped,
           c->header.process.rss, c->header.library_allocated,
           c->header.leftovers_allocated, c->header.pressure.limit,
           c->header.pressure.level, c->header.pressure.given_back,
           c->header.pressure.refusals);
}

void print_prometheus(const struct segment_copy *c)
{
    print_tag_families(c);
    print_untagged_families(c);
    print_process_families(c);
    print_prometheus_counts(c);
    print_prometheus_parts(&c->header.parts);
}

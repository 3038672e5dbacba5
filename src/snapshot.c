/* Floor: services. A snapshot of every live tag's figures after one
 * statistics refresh: what the reports show, and what the live stats segment
 * publishes. */
#include <string.h>

#include "output.h"

static void read_usage(ra_tag_t tag, struct ra__usage *u)
{
    ra_tag_stats_t s;
    size_t rss = 0, hard = 0, soft = 0;
    uint64_t failures = 0;

    ra__stats_read(tag, &s);
    /* mincore reads the kernel's page tables, not jemalloc's statistics:
     * no refresh involved. 0 if it fails. */
    if (tag != RA_TAG_NONE && ra_tag_rss(tag, &rss) != 0)
        rss = 0;
    if (tag != RA_TAG_NONE)
        ra__limit_read(tag, &hard, &soft, &failures);
    *u = (struct ra__usage){
        .id = tag,
        .allocated = s.allocated, .active = s.active,
        .resident = s.resident, .rss = rss, .mapped = s.mapped,
        .peak_mapped = s.peak_mapped, .dirty = s.dirty, .muzzy = s.muzzy,
        .retained = s.retained, .reserved = s.reserved,
        .nmalloc = s.nmalloc, .ndalloc = s.ndalloc,
        .purges = ra__stats_purges(tag),
        .limit = hard, .soft_limit = soft, .limit_failures = failures,
        .arenas = tag != RA_TAG_NONE ? ra__pool_count(tag) : 0,
    };
}

bool ra__snapshot_take(struct ra__snapshot *snap)
{
    unsigned published = ra__tag_published();
    char name[RA_TAG_NAME_MAX + 1];

    /* Allocated before the refresh, so that the figures include it. */
    snap->rows = ra__meta_alloc((published + 1) * sizeof *snap->rows);
    if (snap->rows == NULL)
        return true;
    snap->time_ns = ra__clock_ns();
    ra__stats_refresh();
    read_usage(RA_TAG_NONE, &snap->rows[0]);
    snap->ntags = 0;
    for (ra_tag_t t = 1; t <= published; t++) {
        struct ra__usage *u = &snap->rows[snap->ntags + 1];
        if (!ra__tag_identity(t, name, NULL))
            continue;
        read_usage(t, u);
        memcpy(u->name, name, sizeof name);
        snap->ntags++;
    }
    ra__stats_global(&snap->global);
    snap->process_rss = ra__proc_rss();
    snap->library = ra__meta_held();
    return false;
}


void ra__snapshot_free(struct ra__snapshot *snap)
{
    ra__meta_free(snap->rows);
    snap->rows = NULL;
}

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

/* The row of the live tag id, or 0. */
static unsigned row_of(const struct ra__snapshot *snap, ra_tag_t id)
{
    for (unsigned r = 1; r <= snap->ntags; r++)
        if (snap->rows[r].id == id)
            return r;
    return 0;
}

static void add_to_tree(struct ra__tree_totals *t, const struct ra__usage *u)
{
    t->allocated += u->allocated;
    t->active += u->active;
    t->resident += u->resident;
    t->mapped += u->mapped;
    t->dirty += u->dirty;
    t->nmalloc += u->nmalloc;
    t->ndalloc += u->ndalloc;
}

/* Appends row r and, after it, its subtree, to snap->order. */
static void order_from(struct ra__snapshot *snap, unsigned r, unsigned *n)
{
    snap->order[++*n] = r;
    for (unsigned c = 1; c <= snap->ntags; c++)
        if (snap->rows[c].parent_row == r)
            order_from(snap, c, n);
}

/* Tag trees: parents, depths, subtree totals and the tree order. A tag
 * whose parent has no row (destroyed between the two reads) is shown at
 * the top level. Returns true when there is no memory for the order. */
static bool link_rows(struct ra__snapshot *snap)
{
    unsigned n = 0;

    snap->order = ra__meta_alloc((snap->ntags + 1) * sizeof *snap->order);
    if (snap->order == NULL)
        return true;
    for (unsigned r = 1; r <= snap->ntags; r++) {
        ra_tag_t parent = ra_tag_parent(snap->rows[r].id);
        snap->rows[r].parent_row =
            parent == RA_TAG_NONE ? 0 : row_of(snap, parent);
    }
    for (unsigned r = 1; r <= snap->ntags; r++) {
        unsigned depth = 0;
        for (unsigned a = r; a != 0 && depth <= RA_TAG_DEPTH_MAX;
             a = snap->rows[a].parent_row) {
            add_to_tree(&snap->rows[a].tree, &snap->rows[r]);
            depth++;
        }
        snap->rows[r].depth = depth;
        snap->rows[r].tree.peak_mapped =
            ra__region_tree_peak(snap->rows[r].id - 1);
    }
    for (unsigned r = 1; r <= snap->ntags; r++)
        if (snap->rows[r].parent_row == 0)
            order_from(snap, r, &n);
    return false;
}

bool ra__snapshot_take(struct ra__snapshot *snap)
{
    unsigned published = ra__tag_published();
    char name[RA_TAG_NAME_MAX + 1];

    /* Allocated before the refresh, so that the figures include it. */
    snap->order = NULL;
    snap->rows = ra__meta_calloc(published + 1, sizeof *snap->rows);
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
    if (link_rows(snap)) {
        ra__snapshot_free(snap);
        return true;
    }
    return false;
}


void ra__snapshot_free(struct ra__snapshot *snap)
{
    ra__meta_free(snap->rows);
    ra__meta_free(snap->order);
    snap->rows = NULL;
    snap->order = NULL;
}

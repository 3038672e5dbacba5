/* Floor: services. A snapshot of every live tag's figures, in one pass
 * over the tags (after one statistics refresh when detail is asked): what
 * the reports show, and what the live stats segment publishes. */
#include <string.h>

#include "budget.h"
#include "ends.h"
#include "measure.h"
#include "output.h"
#include "tags.h"

/* Of a snapshot's time, what it may spend having the kernel count the
 * regions of tags never counted yet (new since the library's thread last
 * looked): a one-off report then shows every tag of a small process, and
 * no report waits longer than this for them. */
#define FIRST_COUNTS_NS 1000000u

static void read_usage(ra_tag_t tag, struct ra__usage *u, bool detail,
                       uint64_t counts_until)
{
    ra_tag_stats_t s;
    struct ra__measure m = {0, 0, 0, 0};
    size_t hard = 0, soft = 0;
    uint64_t failures = 0;

    ra__stats_read(tag, &s, detail);
    /* The kernel's count as the library's thread last took it: no report
     * reads the page tables of every region (measure.c). */
    if (tag != RA_TAG_NONE) {
        if (!ra__measure_read(tag, &m) && ra__clock_ns() < counts_until &&
            !ra__measure_tag(tag, &m))
            ra__stats_read(tag, &s, detail); /* resident: the count */
        ra__budget_read(tag, &hard, &soft, &failures);
    }
    *u = (struct ra__usage){
        .id = tag,
        .allocated = s.allocated, .active = s.active,
        .resident = s.resident, .rss = m.resident, .mapped = s.mapped,
        .metadata = m.metadata, .rss_at_ns = m.at_ns,
        .peak_mapped = s.peak_mapped, .dirty = s.dirty, .muzzy = s.muzzy,
        .retained = s.retained, .reserved = s.reserved,
        .nmalloc = s.nmalloc, .ndalloc = s.ndalloc,
        .purges = ra__stats_purges(tag),
        .limit = hard, .soft_limit = soft, .limit_failures = failures,
        .arenas = tag != RA_TAG_NONE ? ra__pool_count(tag) : 0,
        .priority = tag != RA_TAG_NONE ? ra__budget_priority(tag) : 0,
    };
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

/* What link_rows needs besides the rows, in one allocation: the row of
 * each id (0: none), and each row's first child and next sibling. */
struct links {
    unsigned *row_of_id, *first_child, *next_sibling;
};

/* Appends row r and, after it, its subtree to snap->order; a row already
 * placed is not placed again, so that no order can loop. */
static void order_from(struct ra__snapshot *snap, const struct links *l,
                       bool *placed, unsigned r, unsigned *n)
{
    if (placed[r])
        return;
    placed[r] = true;
    snap->order[++*n] = r;
    for (unsigned c = l->first_child[r]; c != 0; c = l->next_sibling[c])
        order_from(snap, l, placed, c, n);
}

/* Tag trees: parents, depths, subtree totals and the tree order, from the
 * parents of one view of the registry (ra__tag_holders), in which every
 * parent named is live: a tree, whatever was recycled meanwhile. A tag
 * whose parent has no row (its figures were an heir's, dropped) is shown
 * at the top level. Returns true when there is no memory. */
static bool link_rows(struct ra__snapshot *snap,
                      const struct ra__tag_holder *holders, unsigned nids)
{
    unsigned rows = snap->ntags + 1, n = 0;
    unsigned *scratch = ra__meta_calloc((size_t)nids + 1 + 2 * (size_t)rows,
                                        sizeof *scratch);
    bool *placed = ra__meta_calloc(rows, sizeof *placed);
    struct links l;

    snap->order = ra__meta_alloc(rows * sizeof *snap->order);
    if (scratch == NULL || placed == NULL || snap->order == NULL) {
        ra__meta_free(scratch);
        ra__meta_free(placed);
        return true;
    }
    l = (struct links){scratch, scratch + nids + 1, scratch + nids + 1 + rows};
    for (unsigned r = 1; r < rows; r++)
        l.row_of_id[snap->rows[r].id] = r;
    /* From the last row up: each list of children comes out in id order. */
    for (unsigned r = rows - 1; r >= 1; r--) {
        unsigned p = l.row_of_id[holders[snap->rows[r].id].parent];
        snap->rows[r].parent_row = p;
        l.next_sibling[r] = l.first_child[p];
        l.first_child[p] = r;
    }
    for (unsigned r = 1; r < rows; r++) {
        unsigned depth = 0;
        for (unsigned a = r; a != 0 && depth <= RA_TAG_DEPTH_MAX;
             a = snap->rows[a].parent_row) {
            add_to_tree(&snap->rows[a].tree, &snap->rows[r]);
            depth++;
        }
        snap->rows[r].depth = depth;
        snap->rows[r].tree.peak_mapped =
            ra__budget_tree_peak(snap->rows[r].id);
    }
    for (unsigned c = l.first_child[0]; c != 0; c = l.next_sibling[c])
        order_from(snap, &l, placed, c, &n);
    ra__assert(n == snap->ntags);
    ra__meta_free(scratch);
    ra__meta_free(placed);
    return false;
}

/* The rows of the tags live in view, with their names from it; then the
 * rows whose id changed holder while their figures were read (destroyed,
 * maybe recycled) are dropped: figures are a holder's, not its heir's. */
static void read_rows(struct ra__snapshot *snap,
                      const struct ra__tag_holder *view, unsigned nids,
                      struct ra__tag_holder *after, bool detail)
{
    uint64_t counts_until = ra__clock_ns() + FIRST_COUNTS_NS;
    unsigned kept = 0;

    snap->ntags = 0;
    for (ra_tag_t t = 1; t <= nids; t++) {
        struct ra__usage *u = &snap->rows[snap->ntags + 1];
        if (!view[t].live)
            continue;
        read_usage(t, u, detail, counts_until);
        u->born = view[t].born;
        memcpy(u->name, view[t].name, sizeof u->name);
        snap->ntags++;
    }
    ra__tag_holders(after, nids);
    for (unsigned r = 1; r <= snap->ntags; r++) {
        ra_tag_t t = snap->rows[r].id;
        if (after[t].live && after[t].born == view[t].born)
            snap->rows[++kept] = snap->rows[r];
    }
    snap->ntags = kept;
}

/* The process's figures: its rows'; and how old their kernel counts are. */
static void add_up(struct ra__snapshot *snap)
{
    uint64_t oldest = UINT64_MAX;

    snap->global = (struct ra__global_stats){0};
    snap->rss_unmeasured = 0;
    for (unsigned r = 1; r <= snap->ntags; r++) {
        uint64_t at = snap->rows[r].rss_at_ns;
        if (at == 0)
            snap->rss_unmeasured++;
        else if (at < oldest)
            oldest = at;
    }
    snap->rss_oldest_age_ns = oldest != UINT64_MAX && snap->time_ns > oldest
                                  ? snap->time_ns - oldest
                                  : 0;
    for (unsigned r = 0; r <= snap->ntags; r++) {
        const struct ra__usage *u = &snap->rows[r];
        snap->global.allocated += u->allocated;
        snap->global.active += u->active;
        snap->global.resident += u->resident;
        snap->global.mapped += u->mapped;
    }
}

/* The parts of the process's RssAnon, from the kernel's counts (parts.c,
 * measure.c): the tags' regions (a destroyed tag's slot keeps its pages in
 * its region too); the untagged arenas' extents, less the library's own
 * blocks in them; jemalloc's metadata outside the regions; the library's
 * blocks and its page table; and what no part names. Where jemalloc's
 * mappings are not seen (a build without the override), untagged is the
 * untagged row's resident, jemalloc's estimate, and metadata 0. */
static void name_parts(struct ra__snapshot *snap)
{
    struct ra__process_parts *o = &snap->parts;
    struct ra__parts p;
    uint64_t blocks, named;

    ra__parts_read(&p);
    *o = (struct ra__process_parts){
        .rss_anon = p.rss_anon, .rss_file = p.rss_file,
        .page_tables = p.page_tables, .tags = ra__measure_regions(),
        .metadata = p.metadata, .at_ns = p.at_ns,
        .jemalloc_measured = p.mappings_known != 0,
        .in_cgroup = p.in_cgroup != 0,
        .cgroup_current = p.cgroup_current, .cgroup_anon = p.cgroup_anon,
        .cgroup_file = p.cgroup_file, .cgroup_limit = p.cgroup_limit,
    };
    if (!o->jemalloc_measured)
        p.extents = snap->rows[0].resident;
    blocks = snap->library < p.extents ? snap->library : p.extents;
    o->untagged = p.extents - blocks;
    o->library = blocks + p.page_table;
    named = o->tags + o->untagged + o->metadata + o->library;
    o->other = o->rss_anon > named ? o->rss_anon - named : 0;
    o->over = named > o->rss_anon ? named - o->rss_anon : 0;
}

bool ra__snapshot_take(struct ra__snapshot *snap, bool detail)
{
    unsigned published = ra__tag_published(), nids;
    struct ra__tag_holder *view;
    bool failed;

    /* Allocated before the figures are read, so that they include it; not
     * zeroed: every row read is written whole, every holder in view by
     * ra__tag_holders, and a zeroed allocation of jemalloc's large sizes
     * gives its pages back to have them zeroed by the kernel, which a
     * report then faults in again (a sixth of its time with 3,000 tags). */
    snap->order = NULL;
    snap->rows = ra__meta_alloc((published + 1) * sizeof *snap->rows);
    view = ra__meta_alloc(2 * ((size_t)published + 1) * sizeof *view);
    if (snap->rows == NULL || view == NULL) {
        ra__meta_free(view);
        ra__snapshot_free(snap);
        return true;
    }
    nids = ra__tag_holders(view, published);
    ra__measure_start();
    /* The untagged row and the process's parts read the kernel's counts:
     * the first report of the process has them taken now, once. */
    ra__measure_parts_once();
    snap->time_ns = ra__clock_ns();
    if (detail)
        ra__stats_refresh();
    read_usage(RA_TAG_NONE, &snap->rows[0], detail, 0);
    read_rows(snap, view, nids, view + published + 1, detail);
    add_up(snap);
    snap->process_rss = ra__proc_rss();
    snap->library = ra__meta_held();
    snap->leftovers = ra__leftovers_total();
    name_parts(snap);
    snap->regions_lost = ra__tag_passed_over();
    ra__pressure_read(&snap->pressure);
    failed = link_rows(snap, view, nids);
    ra__meta_free(view);
    if (failed)
        ra__snapshot_free(snap);
    return failed;
}


void ra__snapshot_free(struct ra__snapshot *snap)
{
    ra__meta_free(snap->rows);
    ra__meta_free(snap->order);
    snap->rows = NULL;
    snap->order = NULL;
}

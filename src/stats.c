/* Floor: API. Per-tag usage (ra_tag_stats and ra_tag_usage, from the
 * library's own counts and the live figures of jemalloc and the region;
 * ra_stats_refresh and the refreshed figures that detail reports show;
 * ra_tag_rss, from the kernel; ra_tag_of) and purge (ra_tag_purge,
 * ra_purge_all), with the count of purges each tag was asked for. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend.h"
#include "budget.h"
#include "internal.h"
#include "ends.h"
#include "measure.h"
#include "region.h"

/* Purges asked through the public calls, per tag; [0] is the untagged
 * arenas. Reports show them as counters (regionalloc_tag_purges_total). */
static _Atomic uint64_t purges[RA__MAX_TAGS_LIMIT + 1];

static void count_purge(ra_tag_t tag)
{
    atomic_fetch_add_explicit(&purges[tag], 1, memory_order_relaxed);
}

uint64_t ra__stats_purges(ra_tag_t tag)
{
    return atomic_load_explicit(&purges[tag], memory_order_relaxed);
}

/* The byte figures of *one added to *out (an arena's into a tag's, a
 * tag's into its subtree's). */
#define ADD_SIZES(out, one)                                                 \
    do {                                                                    \
        (out)->allocated += (one)->allocated;                               \
        (out)->active += (one)->active;                                     \
        (out)->resident += (one)->resident;                                 \
        (out)->mapped += (one)->mapped;                                     \
        (out)->retained += (one)->retained;                                 \
        (out)->dirty += (one)->dirty;                                       \
        (out)->muzzy += (one)->muzzy;                                       \
    } while (0)

static bool arena_is_tagged(unsigned arena)
{
    return ra__pool_owner(arena) != RA_TAG_NONE;
}

/* The untagged side has no counters of the library's (its fast path is
 * jemalloc's own): allocated is jemalloc's own per-thread counts, less
 * the tags' (untagged.c), live; active is live; the rest is jemalloc's as
 * of the last refresh, its counts the arenas' block movements, which
 * thread caches batch. */
/* The untagged arenas' resident as the kernel last counted it (parts.c:
 * their extents, the library's blocks among them); where the library
 * does not see jemalloc's mappings, jemalloc's upper bound, no higher than
 * the process's RssAnon at the last count, or now before the first count
 * (the library's thread makes it within a round of its start). Never
 * above what the kernel counts the process. */
static void untagged_resident(ra_tag_stats_t *out)
{
    struct ra__parts p;
    struct ra__proc_status now;

    ra__parts_read(&p);
    if (p.at_ns == 0) {
        if (!ra__proc_status(&now) && out->resident > now.rss_anon)
            out->resident = now.rss_anon;
        return;
    }
    if (p.mappings_known)
        out->resident = p.extents;
    else if (out->resident > p.rss_anon)
        out->resident = p.rss_anon;
}

static void add_untagged(ra_tag_stats_t *out)
{
    unsigned n = ra__be_arena_count();
    size_t allocated;

    for (unsigned a = 0; a < n; a++) {
        struct ra__be_arena_stats one;
        if (arena_is_tagged(a) || ra__be_arena_stats(a, &one))
            continue;
        ADD_SIZES(out, &one);
        out->active += ra__be_arena_active(a) - one.active;
        out->nmalloc += one.nmalloc;
        out->ndalloc += one.ndalloc;
    }
    if (!ra__untagged_allocated(&allocated))
        out->allocated = allocated;
    untagged_resident(out);
}

/* RA_TAG_NONE stands for untagged memory here. */
static int check_tag(ra_tag_t tag)
{
    return ra__check_call(tag == RA_TAG_NONE || ra__tag_valid(tag));
}

void ra__stats_refresh(void)
{
    ra__be_refresh();
    ra__measure_all();
}

/* What jemalloc's refreshed statistics say of the tag's arenas, in place
 * of the estimates: pages and metadata as jemalloc counts them; resident
 * too when the kernel has not counted the region (measured: false). */
static void read_refreshed(ra_tag_t tag, ra_tag_stats_t *out, bool measured)
{
    ra_tag_stats_t arenas = {0};

    for (unsigned k = 0, n = ra__pool_count(tag); k < n; k++) {
        struct ra__be_arena_stats one;
        if (!ra__be_arena_stats(ra__pool_arena(tag, k), &one))
            ADD_SIZES(&arenas, &one);
    }
    out->active = arenas.active;
    /* jemalloc's resident is an upper bound of the pages it gave out (it
     * counts pages never touched) and misses metadata touched since its
     * count: the kernel's stands where there is one. */
    if (!measured)
        out->resident = arenas.resident < arenas.mapped ? arenas.resident
                                                        : arenas.mapped;
    out->mapped = arenas.mapped;
    out->dirty = arenas.dirty;
    out->muzzy = arenas.muzzy;
    out->retained = arenas.retained;
}

/* The kernel's count of a region at its last measure, followed since by
 * what the region committed (mapped now against then): pages committed
 * since count until the next measure says whether they were touched, and
 * what was given back lowers it only as far as mapped now (a purge on the
 * caller's thread measures again: ra_tag_purge, ra_tag_reset). */
static uint64_t followed(const struct ra__measure *m, uint64_t mapped)
{
    uint64_t now = m->resident +
                   (mapped > m->mapped ? mapped - m->mapped : 0);

    return now < mapped ? now : mapped;
}

/* The figures of tag from what the library and jemalloc keep live: the
 * counts (exact), the arenas' active pages (exact), the region's commits
 * (mapped, exact) and its carving; the rest follows, with the bounds the
 * man page states: a committed page is active, metadata or dirty (the
 * region purges only by force: nothing is muzzy), the carved rest is
 * retained. resident is the kernel's count of the region's pages at its
 * last measure (measure.c), followed since; before the first, an
 * estimate: a page is resident as jemalloc counts it when it is active,
 * dirty or metadata jemalloc had touched at the arena's last refresh
 * read. */
static bool read_live(ra_tag_t tag, ra_tag_stats_t *out)
{
    struct ra__counts c;
    struct ra__measure m;
    uintptr_t start, end;
    size_t metadata = ra__region_metadata(tag), metadata_resident = 0;

    ra__thread_counts(tag, &c);
    out->allocated = c.allocated;
    out->nmalloc = c.nmalloc;
    out->ndalloc = c.ndalloc;
    for (unsigned k = 0, n = ra__pool_count(tag); k < n; k++) {
        unsigned arena = ra__pool_arena(tag, k);
        out->active += ra__be_arena_active(arena);
        metadata_resident += ra__be_arena_metadata_resident(arena);
    }
    out->mapped = ra__budget_committed(tag);
    out->dirty = out->mapped > out->active + metadata
                     ? out->mapped - out->active - metadata
                     : 0;
    out->resident = out->active + out->dirty +
                    (metadata_resident < metadata ? metadata_resident
                                                  : metadata);
    if (out->resident > out->mapped)
        out->resident = out->mapped;
    if (ra__measure_read(tag, &m))
        out->resident = followed(&m, out->mapped);
    ra__region_carved(tag, &start, &end);
    out->retained = end - start > out->mapped ? end - start - out->mapped : 0;
    return m.at_ns != 0;
}

void ra__stats_read(ra_tag_t tag, ra_tag_stats_t *out, bool refreshed)
{
    bool measured;

    memset(out, 0, sizeof *out);
    if (tag == RA_TAG_NONE) {
        add_untagged(out);
        return;
    }
    measured = read_live(tag, out);
    if (refreshed)
        read_refreshed(tag, out, measured);
    out->reserved = (size_t)1 << ra__layout.shift;
    out->peak_mapped = ra__budget_peak(tag);
}

size_t ra__stats_allocated(ra_tag_t tag)
{
    struct ra__counts c;

    ra__thread_counts(tag, &c);
    return c.allocated;
}

size_t ra__stats_mapped(ra_tag_t tag)
{
    return ra__budget_committed(tag);
}

void ra__stats_add_total(struct ra__global_stats *total,
                         const ra_tag_stats_t *row)
{
    total->allocated += row->allocated;
    total->active += row->active;
    total->resident += row->resident;
    total->mapped += row->mapped;
}

int ra_stats_refresh(void)
{
    if (check_tag(RA_TAG_NONE) != 0)
        return -1;
    ra__stats_refresh();
    return 0;
}

int ra_tag_stats(ra_tag_t tag, ra_tag_stats_t *out)
{
    if (out == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (check_tag(tag) != 0)
        return -1;
    ra__measure_start();
    ra__stats_read(tag, out, false);
    return 0;
}

void ra__stats_forget(ra_tag_t tag)
{
    /* Most tags were never purged: their line stays as it is. */
    if (atomic_load_explicit(&purges[tag], memory_order_relaxed) != 0)
        atomic_store_explicit(&purges[tag], 0, memory_order_relaxed);
}

int ra_tag_stats_tree(ra_tag_t tag, ra_tag_stats_t *out)
{
    unsigned count;

    if (out == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (ra__check_call(ra__tag_valid(tag)) != 0)
        return -1;
    ra__measure_start();
    memset(out, 0, sizeof *out);
    count = ra__tag_published();
    for (ra_tag_t t = 1; t <= count; t++) {
        ra_tag_stats_t one;
        if (!ra__tag_in_subtree(t, tag))
            continue;
        ra__stats_read(t, &one, false);
        ADD_SIZES(out, &one);
        out->reserved += one.reserved;
        out->nmalloc += one.nmalloc;
        out->ndalloc += one.ndalloc;
    }
    /* The subtree's own high-water mark, not a sum of its tags' peaks. */
    out->peak_mapped = ra__budget_tree_peak(tag);
    return 0;
}

int ra_tag_usage(ra_tag_t tag, ra_tag_usage_t *out)
{
    struct ra__counts c;

    if (out == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (ra__check_call(ra__tag_valid(tag)) != 0)
        return -1;
    ra__thread_counts(tag, &c);
    out->mapped = ra__budget_committed(tag);
    out->peak_mapped = ra__budget_peak(tag);
    out->nmalloc = c.nmalloc;
    out->ndalloc = c.ndalloc;
    out->allocated = c.allocated;
    return 0;
}

/* What a purge gave back shows at once: the kernel's count of each tag
 * of root's subtree, taken again on the caller's time. */
static void measure_subtree(ra_tag_t root)
{
    unsigned count = ra__tag_published();

    for (ra_tag_t t = 1; t <= count; t++)
        if (ra__tag_in_subtree(t, root))
            (void)ra__measure_tag(t, NULL);
}

int ra_tag_purge(ra_tag_t tag)
{
    unsigned n;

    if (check_tag(tag) != 0)
        return -1;
    count_purge(tag);
    if (tag != RA_TAG_NONE) {
        /* What earlier holders of the slots left live, when nobody uses
         * the tag (leftovers.c), then what the caches keep. */
        ra__leftovers_reclaim_subtree(tag);
        ra__purge_subtree(tag);
        measure_subtree(tag);
        return 0;
    }
    ra__be_flush_thread_cache();
    n = ra__be_arena_count();
    for (unsigned a = 0; a < n; a++)
        if (!arena_is_tagged(a))
            ra__be_arena_purge(a);
    return 0;
}

int ra_purge_all(void)
{
    unsigned count;

    if (check_tag(RA_TAG_NONE) != 0)
        return -1;
    count = ra__tag_published();
    for (ra_tag_t t = 0; t <= count; t++)
        count_purge(t);
    /* Ids threads own keep caches that only their threads reach: parked
     * (their blocks onto the return stacks, which the flush drains) and
     * queued, they are in reach of what follows. */
    ra__purge_owned(false);
    ra_thread_flush();
    /* Blocks destroys left live in idle slots (leftovers.c) are freed. */
    ra__leftovers_reclaim_all();
    /* What destroyed tags' slots keep for their next holders too,
     * recycled or not: every page the process can give back. */
    for (ra_tag_t t = 1; t <= count; t++)
        ra__pairs_flush_parked(t);
    ra__be_arena_purge(RA__BE_ALL_ARENAS);
    ra__measure_all();
    return 0;
}

int ra_tag_rss(ra_tag_t tag, size_t *bytes)
{
    struct ra__measure m;

    if (tag == RA_TAG_NONE || !ra__tag_valid(tag) || bytes == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (!ra__init()) {
        errno = ENOTSUP;
        return -1;
    }
    /* On the caller's time, and kept for the reports. */
    if (ra__measure_tag(tag, &m))
        return -1;
    *bytes = m.resident;
    return 0;
}

ra_tag_t(ra_tag_of)(const void *ptr)
{
    return ra__tag_of_addr(ptr);
}

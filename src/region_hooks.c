/* Floor: region. The regions and their extent hooks: what jemalloc calls,
 * under its own locks, to get, commit, decommit and purge an arena's
 * extents in a tag's region. Each hook runs "inside an extent hook"
 * (lock.h): what it takes ranks above RA__RANK_EXTENT_HOOK. */
#include <errno.h>
#include <sys/mman.h>

#include "backend.h"

#include "internal.h"
#include "region.h"

/* The hooks struct is the first member so that a hook finds its region from
 * the extent_hooks_t pointer jemalloc passes back. It must outlive the arena:
 * the table is static and regions are never torn down. */
struct region {
    extent_hooks_t hooks;
    struct ra__carving carving;
    /* Bytes of its arenas' metadata blocks (ra__region_metadata). */
    _Atomic size_t metadata;
};

static struct region regions[RA__MAX_TAGS_LIMIT];

/* What the region's commits are counted against (budget.c's, handed by
 * the first ra__region_open, before any hook can run): every commit and
 * decommit of the hooks reaches it. */
static const struct ra__commit_ops *commits;

/* jemalloc's metadata (its base allocator's blocks) comes through the
 * hooks as whole committed huge pages, at no address asked, huge-page
 * aligned: extents of blocks are asked page-aligned (opt.retain's growth)
 * or at the blocks' own alignment. */
#define METADATA_ALIGN ((size_t)2 << 20)

static bool looks_like_metadata(const void *new_addr, size_t size,
                                size_t alignment, bool commit)
{
    return new_addr == NULL && commit && alignment >= METADATA_ALIGN &&
           size % METADATA_ALIGN == 0;
}

static struct region *region_of_hooks(extent_hooks_t *hooks)
{
    return (struct region *)(void *)hooks;
}

static ra_tag_t tag_of_region(const struct region *r)
{
    return (ra_tag_t)(r - regions) + 1;
}

static bool region_contains(const struct region *r, const void *addr,
                            size_t size)
{
    uintptr_t a = (uintptr_t)addr;
    return a >= r->carving.start && a <= r->carving.end &&
           size <= r->carving.end - a;
}

/* extent_alloc's work, inside the hook. */
static void *carve_for(struct region *r, void *new_addr, size_t size,
                       size_t alignment, bool *zero, const bool *commit)
{
    uintptr_t addr;

    /* Fresh pages are writable for good (see extent_commit) and, never
     * touched before, read as zero. Whether jemalloc counts them committed
     * is its choice: growth asks for uncommitted space and commits what it
     * uses, and only that counts towards peak_mapped and the budget. The
     * commitment is taken first, so that a refusal carves nothing. */
    if (*commit && !commits->commit(tag_of_region(r), size)) {
        /* A budget or the memory limit: an arena that cannot be made
         * for it fails with ENOMEM, not as if jemalloc had no index. */
        ra__region_refused(ENOMEM);
        return NULL;
    }
    /* jemalloc grows (uncommitted) after a recycled extent's commit was
     * refused, and keeps a grown extent whose commit fails: every refused
     * attempt would strand fresh address space until the region ran out.
     * The grown extent's commit would be refused as well: carve nothing. */
    if (!*commit && commits->refused(tag_of_region(r)))
        return NULL;
    addr = ra__carve_extent(&r->carving, (uintptr_t)new_addr, size,
                            alignment);
    if (addr == 0) {
        if (*commit)
            commits->uncommit(tag_of_region(r), size);
        return NULL;
    }
    *zero = true;
    /* Base blocks are kept for the arena's life: never uncounted. */
    if (looks_like_metadata(new_addr, size, alignment, *commit)) {
        atomic_fetch_add_explicit(&r->metadata, size, memory_order_relaxed);
        ra__metadata_block_add(tag_of_region(r), addr, size);
    }
    return (void *)addr;
}

static void *extent_alloc(extent_hooks_t *hooks, void *new_addr, size_t size,
                          size_t alignment, bool *zero, bool *commit,
                          unsigned arena_ind)
{
    void *p;

    (void)arena_ind;
    ra__extent_hook_enter();
    p = carve_for(region_of_hooks(hooks), new_addr, size, alignment, zero,
                  commit);
    ra__extent_hook_leave();
    return p;
}

/* Opting out of dalloc makes jemalloc retain the extent for reuse: the region
 * is never unmapped piecemeal. */
static bool extent_dalloc(extent_hooks_t *hooks, void *addr, size_t size,
                          bool committed, unsigned arena_ind)
{
    (void)hooks; (void)addr; (void)size; (void)committed; (void)arena_ind;
    ra__extent_hook_enter();
    ra__extent_hook_leave();
    return true;
}

/* Called only if an arena is destroyed: give the pages back, keep the
 * address space reserved. */
static void extent_destroy(extent_hooks_t *hooks, void *addr, size_t size,
                           bool committed, unsigned arena_ind)
{
    (void)hooks; (void)committed; (void)arena_ind;
    ra__extent_hook_enter();
    madvise(addr, size, MADV_DONTNEED);
    ra__extent_hook_leave();
}

/* Carved memory stays readable and writable for good, so the region is one
 * writable mapping rather than a patchwork of protections (the kernel limits
 * mappings per process). Decommit returns the pages to the OS at once
 * (MADV_DONTNEED: they read as zero next time) and commit has nothing left
 * to do but count: physical pages come back on first touch. */
static bool extent_commit(extent_hooks_t *hooks, void *addr, size_t size,
                          size_t offset, size_t length, unsigned arena_ind)
{
    bool refused;

    (void)addr; (void)size; (void)offset; (void)arena_ind;
    ra__extent_hook_enter();
    refused = !commits->commit(tag_of_region(region_of_hooks(hooks)), length);
    ra__extent_hook_leave();
    return refused;
}

static bool extent_decommit(extent_hooks_t *hooks, void *addr, size_t size,
                            size_t offset, size_t length, unsigned arena_ind)
{
    bool failed;

    (void)size; (void)arena_ind;
    ra__extent_hook_enter();
    failed = madvise((char *)addr + offset, length, MADV_DONTNEED) != 0;
    if (!failed)
        commits->uncommit(tag_of_region(region_of_hooks(hooks)), length);
    ra__extent_hook_leave();
    return failed;
}

/* Forced purge is the only purge (no lazy MADV_FREE): ra_tag_purge() must
 * show in RSS at once. */
static bool extent_purge_forced(extent_hooks_t *hooks, void *addr,
                                size_t size, size_t offset, size_t length,
                                unsigned arena_ind)
{
    bool failed;

    (void)hooks; (void)size; (void)arena_ind;
    ra__extent_hook_enter();
    failed = madvise((char *)addr + offset, length, MADV_DONTNEED) != 0;
    ra__extent_hook_leave();
    return failed;
}

static bool extent_split(extent_hooks_t *hooks, void *addr, size_t size,
                         size_t size_a, size_t size_b, bool committed,
                         unsigned arena_ind)
{
    bool outside;

    (void)size_a; (void)size_b; (void)committed; (void)arena_ind;
    ra__extent_hook_enter();
    outside = !region_contains(region_of_hooks(hooks), addr, size);
    ra__extent_hook_leave();
    return outside;
}

static bool extent_merge(extent_hooks_t *hooks, void *addr_a, size_t size_a,
                         void *addr_b, size_t size_b, bool committed,
                         unsigned arena_ind)
{
    struct region *r = region_of_hooks(hooks);
    bool outside;

    (void)committed; (void)arena_ind;
    ra__extent_hook_enter();
    outside = !region_contains(r, addr_a, size_a) ||
              !region_contains(r, addr_b, size_b);
    ra__extent_hook_leave();
    return outside;
}

void ra__regions_count_through(const struct ra__commit_ops *ops)
{
    /* Set once, under the registry's ids_lock as every open is, before any
     * region is carved from; every tag hands the same. */
    ra__assert_rank_held(RA__RANK_IDS);
    if (commits == NULL)
        commits = ops;
    ra__assert(commits == ops);
}

void ra__regions_init(unsigned n, uintptr_t base, unsigned shift,
                      size_t region_size)
{
    for (unsigned i = 0; i < n; i++) {
        struct region *r = &regions[i];
        r->hooks = (extent_hooks_t){
            .alloc = extent_alloc,
            .dalloc = extent_dalloc,
            .destroy = extent_destroy,
            .commit = extent_commit,
            .decommit = extent_decommit,
            .purge_lazy = NULL,
            .purge_forced = extent_purge_forced,
            .split = extent_split,
            .merge = extent_merge,
        };
        ra__carving_init(&r->carving, base + ((uintptr_t)i << shift),
                         region_size);
    }
}

struct ra__carving *ra__region_carving(ra_tag_t tag)
{
    return &regions[tag - 1].carving;
}

struct extent_hooks_s *ra__region_hooks(ra_tag_t tag)
{
    return &regions[tag - 1].hooks;
}

size_t ra__region_metadata(ra_tag_t tag)
{
    return atomic_load_explicit(&regions[tag - 1].metadata,
                                memory_order_relaxed);
}

/* Floor: backend. Extent hooks for jemalloc's automatic arenas (the
 * untagged ones), each of which does what jemalloc's own does, by calling
 * it; alloc also says, while jemalloc's maps the extent, that the mapping
 * is an extent's (mappings.c), so that the untagged arenas' memory is told
 * apart from jemalloc's metadata, which its bases map without hooks. An
 * arena gets them when a thread starts on it (the thread's arena is
 * chosen then, before the thread allocates), the main thread's and the
 * oversize arena at the process's start. */
#include <stdatomic.h>
#include <stdio.h>

#define RA__MALLCTL_ALLOWED
#include "backend.h"
#include "internal.h"

/* jemalloc's own hooks (the automatic arenas all have the same), read
 * when the first arena is given these. */
static extent_hooks_t *_Atomic original;

static extent_hooks_t *orig(void)
{
    return atomic_load_explicit(&original, memory_order_acquire);
}

static void *hooked_alloc(extent_hooks_t *h, void *new_addr, size_t size,
                          size_t alignment, bool *zero, bool *commit,
                          unsigned arena_ind)
{
    bool was = ra__mapping_extent;
    void *p;

    (void)h;
    ra__mapping_extent = true;
    p = orig()->alloc(orig(), new_addr, size, alignment, zero, commit,
                      arena_ind);
    ra__mapping_extent = was;
    return p;
}

static bool hooked_dalloc(extent_hooks_t *h, void *addr, size_t size,
                          bool committed, unsigned arena_ind)
{
    (void)h;
    return orig()->dalloc == NULL ||
           orig()->dalloc(orig(), addr, size, committed, arena_ind);
}

static void hooked_destroy(extent_hooks_t *h, void *addr, size_t size,
                           bool committed, unsigned arena_ind)
{
    (void)h;
    if (orig()->destroy != NULL)
        orig()->destroy(orig(), addr, size, committed, arena_ind);
}

static bool hooked_commit(extent_hooks_t *h, void *addr, size_t size,
                          size_t offset, size_t length, unsigned arena_ind)
{
    (void)h;
    return orig()->commit == NULL ||
           orig()->commit(orig(), addr, size, offset, length, arena_ind);
}

static bool hooked_decommit(extent_hooks_t *h, void *addr, size_t size,
                            size_t offset, size_t length, unsigned arena_ind)
{
    (void)h;
    return orig()->decommit == NULL ||
           orig()->decommit(orig(), addr, size, offset, length, arena_ind);
}

static bool hooked_purge_lazy(extent_hooks_t *h, void *addr, size_t size,
                              size_t offset, size_t length,
                              unsigned arena_ind)
{
    (void)h;
    return orig()->purge_lazy == NULL ||
           orig()->purge_lazy(orig(), addr, size, offset, length, arena_ind);
}

static bool hooked_purge_forced(extent_hooks_t *h, void *addr, size_t size,
                                size_t offset, size_t length,
                                unsigned arena_ind)
{
    (void)h;
    return orig()->purge_forced == NULL ||
           orig()->purge_forced(orig(), addr, size, offset, length,
                                arena_ind);
}

static bool hooked_split(extent_hooks_t *h, void *addr, size_t size,
                         size_t size_a, size_t size_b, bool committed,
                         unsigned arena_ind)
{
    (void)h;
    return orig()->split == NULL ||
           orig()->split(orig(), addr, size, size_a, size_b, committed,
                         arena_ind);
}

static bool hooked_merge(extent_hooks_t *h, void *addr_a, size_t size_a,
                         void *addr_b, size_t size_b, bool committed,
                         unsigned arena_ind)
{
    (void)h;
    return orig()->merge == NULL ||
           orig()->merge(orig(), addr_a, size_a, addr_b, size_b, committed,
                         arena_ind);
}

/* Whose pointer jemalloc keeps for the arena's life: static. */
static extent_hooks_t hooks = {
    hooked_alloc,      hooked_dalloc,       hooked_destroy,
    hooked_commit,     hooked_decommit,     hooked_purge_lazy,
    hooked_purge_forced, hooked_split,      hooked_merge,
};

/* jemalloc's own hooks noted, and ours made like them: an operation they
 * do not have (NULL: a lazy purge where the OS has none), ours do not
 * have either, so that jemalloc does not try it. Once, under the first
 * hook() (the process's start, before any other thread). */
static void take_original(extent_hooks_t *old)
{
    if (old->dalloc == NULL)
        hooks.dalloc = NULL;
    if (old->destroy == NULL)
        hooks.destroy = NULL;
    if (old->commit == NULL)
        hooks.commit = NULL;
    if (old->decommit == NULL)
        hooks.decommit = NULL;
    if (old->purge_lazy == NULL)
        hooks.purge_lazy = NULL;
    if (old->purge_forced == NULL)
        hooks.purge_forced = NULL;
    if (old->split == NULL)
        hooks.split = NULL;
    if (old->merge == NULL)
        hooks.merge = NULL;
    atomic_store_explicit(&original, old, memory_order_release);
}

/* Which automatic arenas have them (jemalloc has at most 4 x CPUs). */
#define HOOKED_MAX 4096u
static atomic_bool hooked[HOOKED_MAX];

static void hook(unsigned arena)
{
    char name[64];
    extent_hooks_t *old = NULL, *mine = &hooks;
    size_t len = sizeof(extent_hooks_t *);

    if (arena >= HOOKED_MAX ||
        atomic_exchange_explicit(&hooked[arena], true, memory_order_relaxed))
        return;
    snprintf(name, sizeof name, "arena.%u.extent_hooks", arena);
    if (mallctl(name, &old, &len, NULL, 0) != 0 || old == NULL ||
        old == &hooks) {
        atomic_store_explicit(&hooked[arena], false, memory_order_relaxed);
        return;
    }
    /* Every automatic arena starts with jemalloc's own: the first one seen
     * is theirs, and an arena that has others (a program's) keeps them. */
    if (orig() == NULL)
        take_original(old);
    if (old != orig() ||
        mallctl(name, NULL, NULL, &mine, sizeof(extent_hooks_t *)) != 0)
        atomic_store_explicit(&hooked[arena], false, memory_order_relaxed);
}

void ra__untagged_hook_thread_arena(void)
{
    unsigned arena;
    size_t len = sizeof arena;

    /* Nothing to tell apart where jemalloc's mappings are not noted
     * (pass-through mode, a build without the override). */
    if (!ra__mappings_known())
        return;
    /* Reading it chooses the thread's arena (and makes it, the first
     * time): the thread has allocated nothing from it yet. */
    if (mallctl("thread.arena", &arena, &len, NULL, 0) == 0)
        hook(arena);
}

void ra__untagged_hook_oversize_arena(void)
{
    size_t threshold = 0, len = sizeof threshold;
    unsigned narenas = 0;
    size_t nlen = sizeof narenas;
    void *p;

    if (mallctl("opt.oversize_threshold", &threshold, &len, NULL, 0) != 0 ||
        threshold == 0 ||
        mallctl("opt.narenas", &narenas, &nlen, NULL, 0) != 0)
        return;
    /* jemalloc makes the oversize arena at the first such block; one made
     * and freed now (never touched: no page of it is resident) makes it,
     * and its index is the first after the automatic ones. What it maps
     * meanwhile is noted an extent's: the extent will serve later blocks;
     * the arena's base (a few pages resident) is counted with it. */
    ra__mapping_extent = true;
    p = ra__je_mallocx(threshold, MALLOCX_TCACHE_NONE);
    if (p != NULL)
        ra__je_dallocx(p, MALLOCX_TCACHE_NONE);
    ra__mapping_extent = false;
    hook(narenas);
}

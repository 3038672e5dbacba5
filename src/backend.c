/* Floor: backend. jemalloc's control interface (mallctl) as the library
 * uses it: arenas, explicit thread caches, statistics, size classes and
 * options. The only caller of mallctl; the allocation functions themselves
 * are backend.h's inlines. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define RA__MALLCTL_ALLOWED
#include "backend.h"

/* mallctl of a name made with a format and an unsigned (an arena's
 * index). */
static int ctl_arena(const char *fmt, unsigned arena, void *out, size_t *len,
                     void *in, size_t inlen)
{
    char name[96];

    snprintf(name, sizeof name, fmt, arena);
    return mallctl(name, out, len, in, inlen);
}

static size_t arena_size(const char *fmt, unsigned arena)
{
    size_t v = 0, len = sizeof v;

    return ctl_arena(fmt, arena, &v, &len, NULL, 0) == 0 ? v : 0;
}

static uint64_t arena_u64(const char *fmt, unsigned arena)
{
    uint64_t v = 0;
    size_t len = sizeof v;

    return ctl_arena(fmt, arena, &v, &len, NULL, 0) == 0 ? v : 0;
}

bool ra__be_option(const char *name)
{
    bool on = false;
    size_t len = sizeof on;

    return mallctl(name, &on, &len, NULL, 0) == 0 && on;
}

int ra__be_arena_create(extent_hooks_t *hooks, size_t grow_limit)
{
    unsigned arena;
    size_t len = sizeof arena;
    int rc = mallctl("arenas.create", &arena, &len, &hooks,
                     sizeof(extent_hooks_t *));

    if (rc != 0) {
        errno = rc;
        return -1;
    }
    /* Without opt.retain jemalloc asks for each extent as needed, never a
     * series, and refuses the setting. */
    if (ra__be_option("opt.retain"))
        ctl_arena("arena.%u.retain_grow_limit", arena, NULL, NULL,
                  &grow_limit, sizeof grow_limit);
    return (int)arena;
}

/* A mallctl name of the form "arena.<i>.<verb>", translated once into its
 * MIB (the string form costs a printf and a walk of jemalloc's name tree:
 * two thirds of an empty tag's reset), then called with the arena's index
 * in its second place. */
struct arena_verb {
    const char *name; /* with arena 0 */
    /* Atomic: racing first callers store the same values. */
    _Atomic size_t mib[3];
    atomic_bool ready;
};

static struct arena_verb purge_verb = {.name = "arena.0.purge"};
static struct arena_verb reset_verb = {.name = "arena.0.reset"};
static struct arena_verb decay_verb = {.name = "arena.0.decay"};

static bool arena_do(struct arena_verb *v, unsigned arena)
{
    size_t mib[3], len = 3;

    if (!atomic_load_explicit(&v->ready, memory_order_acquire)) {
        if (mallctlnametomib(v->name, mib, &len) != 0 || len != 3)
            return true;
        for (unsigned i = 0; i < 3; i++)
            atomic_store_explicit(&v->mib[i], mib[i], memory_order_relaxed);
        atomic_store_explicit(&v->ready, true, memory_order_release);
    }
    for (unsigned i = 0; i < 3; i++)
        mib[i] = atomic_load_explicit(&v->mib[i], memory_order_relaxed);
    mib[1] = arena;
    return mallctlbymib(mib, 3, NULL, NULL, NULL, 0) != 0;
}

bool ra__be_arena_purge(unsigned arena)
{
    return arena_do(&purge_verb, arena);
}

bool ra__be_arena_reset(unsigned arena)
{
    return arena_do(&reset_verb, arena);
}

bool ra__be_arena_decay(unsigned arena)
{
    return arena_do(&decay_verb, arena);
}

unsigned ra__be_arena_count(void)
{
    unsigned n = 0;
    size_t len = sizeof n;

    mallctl("arenas.narenas", &n, &len, NULL, 0);
    return n;
}

size_t ra__be_page(void)
{
    size_t page = 0, len = sizeof page;

    mallctl("arenas.page", &page, &len, NULL, 0);
    return page;
}

void ra__be_refresh(void)
{
    uint64_t epoch = 1;
    size_t len = sizeof epoch;

    mallctl("epoch", &epoch, &len, &epoch, sizeof epoch);
}

size_t ra__be_arena_allocated(unsigned arena)
{
    return arena_size("stats.arenas.%u.small.allocated", arena) +
           arena_size("stats.arenas.%u.large.allocated", arena);
}

size_t ra__be_arena_mapped(unsigned arena)
{
    return arena_size("stats.arenas.%u.mapped", arena);
}

bool ra__be_arena_stats(unsigned arena, struct ra__be_arena_stats *out)
{
    size_t page = ra__be_page(), pactive, len = sizeof pactive;

    *out = (struct ra__be_arena_stats){0};
    if (ctl_arena("stats.arenas.%u.pactive", arena, &pactive, &len, NULL,
                  0) != 0)
        return true;
    out->active = pactive * page;
    out->allocated = ra__be_arena_allocated(arena);
    out->resident = arena_size("stats.arenas.%u.resident", arena);
    out->mapped = ra__be_arena_mapped(arena);
    out->retained = arena_size("stats.arenas.%u.retained", arena);
    out->dirty = arena_size("stats.arenas.%u.pdirty", arena) * page;
    out->muzzy = arena_size("stats.arenas.%u.pmuzzy", arena) * page;
    out->nmalloc = arena_u64("stats.arenas.%u.small.nmalloc", arena) +
                   arena_u64("stats.arenas.%u.large.nmalloc", arena);
    out->ndalloc = arena_u64("stats.arenas.%u.small.ndalloc", arena) +
                   arena_u64("stats.arenas.%u.large.ndalloc", arena);
    return false;
}

void ra__be_totals(size_t *allocated, size_t *active, size_t *resident,
                   size_t *mapped)
{
    static const char *const names[] = {"stats.allocated", "stats.active",
                                        "stats.resident", "stats.mapped"};
    size_t *fields[] = {allocated, active, resident, mapped};

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t len = sizeof *fields[i];
        *fields[i] = 0;
        mallctl(names[i], fields[i], &len, NULL, 0);
    }
}

bool ra__be_tcache_create(unsigned *id)
{
    size_t len = sizeof *id;

    return mallctl("tcache.create", id, &len, NULL, 0) != 0;
}

void ra__be_tcache_flush(unsigned id)
{
    mallctl("tcache.flush", NULL, NULL, &id, sizeof id);
}

void ra__be_tcache_destroy(unsigned id)
{
    mallctl("tcache.destroy", NULL, NULL, &id, sizeof id);
}

void ra__be_flush_thread_cache(void)
{
    mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
}

bool ra__be_caches = true;
size_t ra__be_oversize = (size_t)8 << 20;
unsigned ra__small_max;
unsigned ra__nbins;
uint8_t ra__size_bin[RA__SIZE_BIN_ENTRIES];
size_t ra__bin_size[RA__MAX_BINS];

/* Reads jemalloc's small size classes into the tables the fast path uses:
 * the bin of every size up to the largest small class, in 8-byte steps
 * (classes are multiples of 8, so rounding a size up to 8 keeps its bin).
 * Leaves them empty (no front caches) when they are not as expected. */
static void read_size_classes(void)
{
    size_t sizes[RA__MAX_BINS];
    unsigned n = 0;
    size_t len = sizeof n;

    if (mallctl("arenas.nbins", &n, &len, NULL, 0) != 0 || n == 0)
        return;
    if (n > RA__MAX_BINS)
        n = RA__MAX_BINS;
    for (unsigned i = 0; i < n; i++) {
        len = sizeof sizes[i];
        if (ctl_arena("arenas.bin.%u.size", i, &sizes[i], &len, NULL, 0) !=
                0 ||
            (sizes[i] & 7) != 0 || (i > 0 && sizes[i] <= sizes[i - 1]))
            return;
    }
    if ((sizes[n - 1] >> 3) >= RA__SIZE_BIN_ENTRIES)
        return;
    for (unsigned i = 0; i < n; i++)
        ra__bin_size[i] = sizes[i];
    for (unsigned i = 0, step = 0; step <= sizes[n - 1] >> 3; step++) {
        while (sizes[i] < (size_t)step << 3)
            i++;
        ra__size_bin[step] = (uint8_t)i;
    }
    ra__nbins = n;
    ra__small_max = (unsigned)sizes[n - 1];
}

void ra__be_start(void)
{
    size_t oversize, len = sizeof oversize;

    /* 0 turns jemalloc's oversize arena off: so nothing is oversize. */
    if (mallctl("opt.oversize_threshold", &oversize, &len, NULL, 0) == 0)
        ra__be_oversize = oversize != 0 ? oversize : SIZE_MAX;
    /* MALLOC_CONF=tcache:false: no (thread, tag) pair caches either. */
    ra__be_caches = ra__be_option("opt.tcache");
    if (ra__be_caches)
        read_size_classes();
}

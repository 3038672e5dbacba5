/* Floor: backend. jemalloc's control interface (mallctl) as the library
 * uses it: arenas, explicit thread caches, statistics, size classes and
 * options. The only caller of mallctl; the allocation functions themselves
 * are backend.h's inlines. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define RA__MALLCTL_ALLOWED
#include "backend.h"

/* Every call of mallctl is a call into jemalloc, under its control lock
 * and, for an arena's creation, purge, reset or decay, its arenas' locks,
 * under which it calls the extent hooks: the caller holds no lock that the
 * hooks could wait for (lock.h's RA__RANK_JEMALLOC). */
static int ctl(const char *name, void *out, size_t *len, void *in,
               size_t inlen)
{
    ra__assert_may_call_jemalloc();
    return mallctl(name, out, len, in, inlen);
}

static int ctl_by_mib(const size_t *mib, size_t miblen, void *out,
                      size_t *len, void *in, size_t inlen)
{
    ra__assert_may_call_jemalloc();
    return mallctlbymib(mib, miblen, out, len, in, inlen);
}

static int ctl_name_to_mib(const char *name, size_t *mib, size_t *len)
{
    ra__assert_may_call_jemalloc();
    return mallctlnametomib(name, mib, len);
}

/* mallctl of a name made with a format and an unsigned (an arena's
 * index), for what is called once per arena. */
static int ctl_arena(const char *fmt, unsigned arena, void *out, size_t *len,
                     void *in, size_t inlen)
{
    char name[96];

    snprintf(name, sizeof name, fmt, arena);
    return ctl(name, out, len, in, inlen);
}

bool ra__be_option(const char *name)
{
    bool on = false;
    size_t len = sizeof on;

    return ctl(name, &on, &len, NULL, 0) == 0 && on;
}

int ra__be_arena_create(extent_hooks_t *hooks, size_t grow_limit)
{
    unsigned arena;
    size_t len = sizeof arena;
    int rc = ctl("arenas.create", &arena, &len, &hooks,
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

/* The string form of a name costs a printf and a walk of jemalloc's name
 * tree (two thirds of an empty tag's reset; most of a report's time per
 * tag): each is translated once. n's MIB into mib; its length, or 0 with
 * *rc what jemalloc said. */
static size_t mib_of(struct ra__be_name *n, size_t *mib, int *rc)
{
    size_t len = RA__BE_NAME_PARTS;

    if (!atomic_load_explicit(&n->ready, memory_order_acquire)) {
        *rc = ctl_name_to_mib(n->name, mib, &len);
        if (*rc != 0)
            return 0;
        for (size_t i = 0; i < len; i++)
            atomic_store_explicit(&n->mib[i], mib[i], memory_order_relaxed);
        atomic_store_explicit(&n->len, len, memory_order_relaxed);
        atomic_store_explicit(&n->ready, true, memory_order_release);
    }
    len = atomic_load_explicit(&n->len, memory_order_relaxed);
    for (size_t i = 0; i < len; i++)
        mib[i] = atomic_load_explicit(&n->mib[i], memory_order_relaxed);
    return len;
}

int ra__be_by_arena(struct ra__be_name *n, unsigned arena, void *out,
                    size_t *outlen, void *in, size_t inlen)
{
    size_t mib[RA__BE_NAME_PARTS], len;
    int rc = 0;

    if ((len = mib_of(n, mib, &rc)) == 0)
        return rc;
    mib[n->at] = arena;
    return ctl_by_mib(mib, len, out, outlen, in, inlen);
}

/* A name without an index, read by its MIB (n->at unused). */
static int read_by_mib(struct ra__be_name *n, void *out, size_t outlen)
{
    size_t mib[RA__BE_NAME_PARTS], len;
    int rc = 0;

    if ((len = mib_of(n, mib, &rc)) == 0)
        return rc;
    return ctl_by_mib(mib, len, out, &outlen, NULL, 0);
}

static struct ra__be_name purge_verb = {.name = "arena.0.purge", .at = 1};
static struct ra__be_name reset_verb = {.name = "arena.0.reset", .at = 1};
static struct ra__be_name decay_verb = {.name = "arena.0.decay", .at = 1};

static bool arena_do(struct ra__be_name *v, unsigned arena)
{
    return ra__be_by_arena(v, arena, NULL, NULL, NULL, 0) != 0;
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

    ctl("arenas.narenas", &n, &len, NULL, 0);
    return n;
}

size_t ra__be_page(void)
{
    size_t page = 0, len = sizeof page;

    ctl("arenas.page", &page, &len, NULL, 0);
    return page;
}

/* Read at every thread's start (untagged.c): by MIB. */
static struct ra__be_name allocatedp = {.name = "thread.allocatedp"};
static struct ra__be_name deallocatedp = {.name = "thread.deallocatedp"};

bool ra__be_thread_counters(const uint64_t **allocated,
                            const uint64_t **deallocated)
{
    uint64_t *a = NULL, *d = NULL;

    if (read_by_mib(&allocatedp, &a, sizeof a) != 0 ||
        read_by_mib(&deallocatedp, &d, sizeof d) != 0 || a == NULL ||
        d == NULL)
        return true;
    *allocated = a;
    *deallocated = d;
    return false;
}

bool ra__be_tcache_create(unsigned *id)
{
    size_t len = sizeof *id;

    return ctl("tcache.create", id, &len, NULL, 0) != 0;
}

void ra__be_tcache_flush(unsigned id)
{
    ctl("tcache.flush", NULL, NULL, &id, sizeof id);
}

void ra__be_tcache_destroy(unsigned id)
{
    ctl("tcache.destroy", NULL, NULL, &id, sizeof id);
}

void ra__be_flush_thread_cache(void)
{
    ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
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

    if (ctl("arenas.nbins", &n, &len, NULL, 0) != 0 || n == 0)
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
    if (ctl("opt.oversize_threshold", &oversize, &len, NULL, 0) == 0)
        ra__be_oversize = oversize != 0 ? oversize : SIZE_MAX;
    /* MALLOC_CONF=tcache:false: no (thread, tag) pair caches either. */
    ra__be_caches = ra__be_option("opt.tcache");
    if (ra__be_caches)
        read_size_classes();
}

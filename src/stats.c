/* Per-tag usage read from jemalloc's mallctl statistics, and purge. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ra_jemalloc.h"

#include "internal.h"

/* MALLCTL_ARENAS_ALL: the index that names every arena at once. */
#define ALL_ARENAS 4096u

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

static int ctl_read(const char *fmt, unsigned arena, void *out, size_t len)
{
    char name[96];
    size_t got = len;

    snprintf(name, sizeof name, fmt, arena);
    return mallctl(name, out, &got, NULL, 0);
}

static size_t arena_size(const char *fmt, unsigned arena)
{
    size_t v = 0;
    return ctl_read(fmt, arena, &v, sizeof v) == 0 ? v : 0;
}

static uint64_t arena_u64(const char *fmt, unsigned arena)
{
    uint64_t v = 0;
    return ctl_read(fmt, arena, &v, sizeof v) == 0 ? v : 0;
}

/* Adds arena's figures to *out. Returns true when the arena has no stats
 * (never initialized, or destroyed). */
static bool add_arena(unsigned arena, size_t page, ra_tag_stats_t *out)
{
    size_t pactive;

    if (ctl_read("stats.arenas.%u.pactive", arena, &pactive,
                 sizeof pactive) != 0)
        return true;
    out->active += pactive * page;
    out->allocated += arena_size("stats.arenas.%u.small.allocated", arena) +
                      arena_size("stats.arenas.%u.large.allocated", arena);
    out->resident += arena_size("stats.arenas.%u.resident", arena);
    out->mapped += arena_size("stats.arenas.%u.mapped", arena);
    out->retained += arena_size("stats.arenas.%u.retained", arena);
    out->dirty += arena_size("stats.arenas.%u.pdirty", arena) * page;
    out->muzzy += arena_size("stats.arenas.%u.pmuzzy", arena) * page;
    return false;
}

static bool arena_is_tagged(unsigned arena)
{
    unsigned count = ra__tag_published();

    for (unsigned t = 1; t <= count; t++)
        if (ra__tag_arena[t] == arena)
            return true;
    return false;
}

static unsigned arena_count(void)
{
    unsigned n = 0;
    size_t len = sizeof n;

    mallctl("arenas.narenas", &n, &len, NULL, 0);
    return n;
}

/* The untagged side has no per-thread counters (its fast path is jemalloc's
 * own): its counts are the arenas' block movements, which thread caches
 * batch. */
static void add_untagged(size_t page, ra_tag_stats_t *out)
{
    unsigned n = arena_count();

    for (unsigned a = 0; a < n; a++) {
        if (arena_is_tagged(a) || add_arena(a, page, out))
            continue;
        out->nmalloc += arena_u64("stats.arenas.%u.small.nmalloc", a) +
                        arena_u64("stats.arenas.%u.large.nmalloc", a);
        out->ndalloc += arena_u64("stats.arenas.%u.small.ndalloc", a) +
                        arena_u64("stats.arenas.%u.large.ndalloc", a);
    }
}

/* RA_TAG_NONE stands for untagged memory here. */
static int check_tag(ra_tag_t tag)
{
    return ra__check_call(tag == RA_TAG_NONE || ra__tag_valid(tag));
}

void ra__stats_refresh(void)
{
    uint64_t epoch = 1;
    size_t len = sizeof epoch;

    mallctl("epoch", &epoch, &len, &epoch, sizeof epoch);
}

void ra__stats_read(ra_tag_t tag, ra_tag_stats_t *out)
{
    size_t page = 0, len = sizeof page;

    mallctl("arenas.page", &page, &len, NULL, 0);
    memset(out, 0, sizeof *out);
    if (tag == RA_TAG_NONE) {
        add_untagged(page, out);
        return;
    }
    add_arena(ra__tag_arena[tag], page, out);
    out->reserved = (size_t)1 << ra__layout.shift;
    out->peak_mapped = ra__region_peak_committed(tag - 1);
    ra__thread_counts(tag, &out->nmalloc, &out->ndalloc);
}

size_t ra__stats_allocated(ra_tag_t tag)
{
    unsigned arena = ra__tag_arena[tag];

    return arena_size("stats.arenas.%u.small.allocated", arena) +
           arena_size("stats.arenas.%u.large.allocated", arena);
}

void ra__stats_global(struct ra__global_stats *out)
{
    static const char *const names[] = {"stats.allocated", "stats.active",
                                        "stats.resident", "stats.mapped"};
    size_t *fields[] = {&out->allocated, &out->active, &out->resident,
                        &out->mapped};

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t len = sizeof *fields[i];
        *fields[i] = 0;
        mallctl(names[i], fields[i], &len, NULL, 0);
    }
}

int ra_tag_stats(ra_tag_t tag, ra_tag_stats_t *out)
{
    if (out == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (check_tag(tag) != 0)
        return -1;
    /* One refresh per call: jemalloc's epoch is not cheap (doc/design.md, jemalloc facts). */
    ra__stats_refresh();
    ra__stats_read(tag, out);
    return 0;
}

/* arena.<arena>.<verb>, a mallctl that reads and writes nothing. */
static bool arena_do(const char *verb, unsigned arena)
{
    char name[64];

    snprintf(name, sizeof name, "arena.%u.%s", arena, verb);
    return mallctl(name, NULL, NULL, NULL, 0) != 0;
}

bool ra__stats_purge_arena(unsigned arena)
{
    return arena_do("purge", arena);
}

bool ra__stats_reset_arena(unsigned arena)
{
    return arena_do("reset", arena);
}

void ra__stats_forget(ra_tag_t tag)
{
    atomic_store_explicit(&purges[tag], 0, memory_order_relaxed);
}

int ra_tag_purge(ra_tag_t tag)
{
    unsigned n;

    if (check_tag(tag) != 0)
        return -1;
    count_purge(tag);
    if (tag != RA_TAG_NONE) {
        /* Blocks cached by this thread keep their pages: return them first. */
        ra__thread_flush_tag(tag);
        ra__stats_purge_arena(ra__tag_arena[tag]);
        return 0;
    }
    mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    n = arena_count();
    for (unsigned a = 0; a < n; a++)
        if (!arena_is_tagged(a))
            ra__stats_purge_arena(a);
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
    ra_thread_flush();
    ra__stats_purge_arena(ALL_ARENAS);
    return 0;
}

/* Floor: backend. jemalloc's statistics as the library reads them: the
 * refresh (epoch) and the figures it gives, by cached MIB; and the one
 * figure jemalloc keeps live per arena, its count of active pages, read
 * through its address. */
#include <errno.h>

#define RA__MALLCTL_ALLOWED
#include "backend.h"

void ra__be_refresh(void)
{
    uint64_t epoch = 1;
    size_t len = sizeof epoch;

    ra__assert_may_call_jemalloc();
    mallctl("epoch", &epoch, &len, &epoch, sizeof epoch);
}

static size_t page_size(void)
{
    static _Atomic size_t page;
    size_t p = atomic_load_explicit(&page, memory_order_relaxed);

    if (p == 0) {
        p = ra__be_page();
        atomic_store_explicit(&page, p, memory_order_relaxed);
    }
    return p;
}

/* stats.arenas.<i>.*: the index is the MIB's third part. */
#define ARENA_STAT(field) {.name = "stats.arenas.0." field, .at = 2}
static struct ra__be_name stat_pactive = ARENA_STAT("pactive");
static struct ra__be_name stat_pdirty = ARENA_STAT("pdirty");
static struct ra__be_name stat_pmuzzy = ARENA_STAT("pmuzzy");
static struct ra__be_name stat_mapped = ARENA_STAT("mapped");
static struct ra__be_name stat_retained = ARENA_STAT("retained");
static struct ra__be_name stat_resident = ARENA_STAT("resident");
static struct ra__be_name stat_small_allocated = ARENA_STAT("small.allocated");
static struct ra__be_name stat_large_allocated = ARENA_STAT("large.allocated");
static struct ra__be_name stat_small_nmalloc = ARENA_STAT("small.nmalloc");
static struct ra__be_name stat_large_nmalloc = ARENA_STAT("large.nmalloc");
static struct ra__be_name stat_small_ndalloc = ARENA_STAT("small.ndalloc");
static struct ra__be_name stat_large_ndalloc = ARENA_STAT("large.ndalloc");

/* jemalloc declares its byte figures size_t and its counts uint64_t: one
 * reader serves both. 0 when the arena has no statistics. */
_Static_assert(sizeof(size_t) == sizeof(uint64_t), "64-bit figures");

static uint64_t stat_of(struct ra__be_name *n, unsigned arena)
{
    uint64_t v = 0;
    size_t len = sizeof v;

    return ra__be_by_arena(n, arena, &v, &len, NULL, 0) == 0 ? v : 0;
}

/* Each arena's metadata pages known resident (jemalloc's resident less
 * its active, dirty and muzzy pages) at its last refresh that the library
 * read, by index: the live resident estimate's part for metadata, which
 * only grows. */
#define ARENAS_MAX 4096u
static _Atomic size_t metadata_resident_of[ARENAS_MAX];

bool ra__be_arena_stats(unsigned arena, struct ra__be_arena_stats *out)
{
    size_t page = page_size(), pactive, len = sizeof pactive;

    *out = (struct ra__be_arena_stats){0};
    if (ra__be_by_arena(&stat_pactive, arena, &pactive, &len, NULL, 0) != 0)
        return true;
    out->active = pactive * page;
    out->allocated = ra__be_arena_allocated(arena);
    out->resident = stat_of(&stat_resident, arena);
    out->mapped = ra__be_arena_mapped(arena);
    out->retained = stat_of(&stat_retained, arena);
    out->dirty = stat_of(&stat_pdirty, arena) * page;
    out->muzzy = stat_of(&stat_pmuzzy, arena) * page;
    out->metadata_resident =
        out->resident > out->active + out->dirty + out->muzzy
            ? out->resident - out->active - out->dirty - out->muzzy
            : 0;
    if (arena < ARENAS_MAX)
        atomic_store_explicit(&metadata_resident_of[arena],
                              out->metadata_resident, memory_order_relaxed);
    out->nmalloc = stat_of(&stat_small_nmalloc, arena) +
                   stat_of(&stat_large_nmalloc, arena);
    out->ndalloc = stat_of(&stat_small_ndalloc, arena) +
                   stat_of(&stat_large_ndalloc, arena);
    return false;
}

/* Each arena's live page count, by index (jemalloc allows 4095 arenas):
 * NULL until looked up. The counts live as long as their arenas, which
 * are never destroyed. */
static _Atomic(const size_t *) pactive_of[ARENAS_MAX];
static struct ra__be_name pactivep = {
    .name = "experimental.arenas.0.pactivep", .at = 2};

static const size_t *look_up_pactive(unsigned arena)
{
    const size_t *p = NULL;
    size_t len = sizeof p;
    int rc = ra__be_by_arena(&pactivep, arena, &p, &len, NULL, 0);
    struct ra__be_arena_stats figures;

    if (rc == ENOENT) {
        /* An arena created since the last refresh. */
        ra__be_refresh();
        rc = ra__be_by_arena(&pactivep, arena, &p, &len, NULL, 0);
    }
    if (rc != 0 || p == NULL)
        return NULL;
    ra__be_arena_stats(arena, &figures); /* its metadata_resident_of */
    atomic_store_explicit(&pactive_of[arena], p, memory_order_release);
    return p;
}

size_t ra__be_arena_metadata_resident(unsigned arena)
{
    return arena < ARENAS_MAX
               ? atomic_load_explicit(&metadata_resident_of[arena],
                                      memory_order_relaxed)
               : 0;
}

size_t ra__be_arena_active(unsigned arena)
{
    const size_t *p;

    if (arena >= ARENAS_MAX)
        return 0;
    p = atomic_load_explicit(&pactive_of[arena], memory_order_acquire);
    if (p == NULL && (p = look_up_pactive(arena)) == NULL)
        return 0;
    /* jemalloc's own atomic counter, updated as pages change hands. */
    return __atomic_load_n(p, __ATOMIC_RELAXED) * page_size();
}

size_t ra__be_arena_allocated(unsigned arena)
{
    return stat_of(&stat_small_allocated, arena) +
           stat_of(&stat_large_allocated, arena);
}

size_t ra__be_arena_mapped(unsigned arena)
{
    return stat_of(&stat_mapped, arena);
}


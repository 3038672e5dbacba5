/* Floor: budgets. A tag's pool of arenas: every arena of it carves from the
 * tag's one region (ra_tag_of, budgets and the profiler see one tag), and
 * each (thread, tag) pair allocates through one of them, so that the
 * threads of a tag shared by many cores do not all queue on one arena's
 * bin locks (doc/design.md, hot tags). A tag starts with one arena; the
 * pool grows as pairs are made, and is recycled with the tag's slot. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "backend.h"
#include "internal.h"
#include "budget.h"
#include "region.h"

struct pool {
    /* arenas[0, n) are made (arenas[0] is ra__tag_arena's); n only grows,
     * published with release after the entry it covers. */
    _Atomic unsigned n;
    /* ra_tag_set_arenas: the most arenas new pairs are bound among (0:
     * the configuration's). Reset when the slot is recycled. */
    unsigned bound;
    /* jemalloc refused an arena: no more tries for this holder. */
    bool stuck;
    /* bound or stuck set since the slot was last recycled: a recycle with
     * nothing to undo (every request's tag) takes no lock. */
    atomic_bool changed;
    uint16_t arenas[RA__POOL_MAX];
    /* Pairs bound to each arena (under pool_lock). */
    unsigned load[RA__POOL_MAX];
};

static struct pool pools[RA__MAX_TAGS_LIMIT + 1];
/* The tag of each arena index (0: not a tag's). */
static _Atomic uint16_t arena_tag[RA__BE_ALL_ARENAS];
/* Growth and binding; jemalloc's own locks are taken under it (an
 * arena's creation), none of the library's. */
static struct ra__mutex pool_lock = RA__MUTEX_INIT(RA__RANK_POOL);

/* jemalloc allows 4095 arena indices; a pool never takes one that a tag
 * yet to be created would need. */
#define ARENA_INDICES 4095u

void ra__pool_prefork(void)
{
    ra__lock(&pool_lock);
}

void ra__pool_postfork(void)
{
    ra__unlock(&pool_lock);
}

unsigned ra__tag_arena[RA__MAX_TAGS_LIMIT + 1];

void ra__pool_start(ra_tag_t tag, unsigned arena)
{
    struct pool *p = &pools[tag];

    /* Invariant 10: an arena is one tag's, for good. */
    ra__assert(arena < RA__BE_ALL_ARENAS &&
               ra__pool_owner(arena) == RA_TAG_NONE);
    ra__tag_arena[tag] = arena;
    p->arenas[0] = (uint16_t)arena;
    atomic_store_explicit(&arena_tag[arena], (uint16_t)tag,
                          memory_order_release);
    atomic_store_explicit(&p->n, 1, memory_order_release);
}

unsigned ra__pool_count(ra_tag_t tag)
{
    return atomic_load_explicit(&pools[tag].n, memory_order_acquire);
}

unsigned ra__pool_arena(ra_tag_t tag, unsigned k)
{
    return pools[tag].arenas[k];
}

ra_tag_t ra__pool_owner(unsigned arena)
{
    if (arena >= RA__BE_ALL_ARENAS)
        return RA_TAG_NONE;
    return atomic_load_explicit(&arena_tag[arena], memory_order_acquire);
}

/* The most arenas the tag's pool may have now. */
static unsigned bound_of(const struct pool *p)
{
    unsigned bound = p->bound != 0 ? p->bound : ra__config()->tag_arenas;

    return bound > RA__POOL_MAX ? RA__POOL_MAX : bound;
}

/* With pool_lock held: whether one more arena leaves jemalloc the indices
 * that the tags yet to be created need. */
static bool may_grow(void)
{
    unsigned unborn = ra__config()->max_tags - ra__region_count();

    ra__assert_held(&pool_lock);
    return ra__be_arena_count() + unborn + 1 < ARENA_INDICES;
}

/* One more arena carving from region idx, whose page table part is mapped.
 * Returns its index, or -1 with errno as ra__pool_first_arena. */
static int make_arena(ra_tag_t tag)
{
    int arena;

    ra__region_refusal_clear();
    arena = ra__be_arena_create(ra__region_hooks(tag),
                                ra__region_grow_limit());
    if (arena < 0) {
        /* jemalloc says EAGAIN when it has no arena index left, and when
         * the new arena's metadata could not be had: the carving says why
         * (the limit's ENOMEM, or another mapping's EEXIST). */
        int refusal = ra__region_refusal();
        errno = refusal != 0 ? refusal : errno == EAGAIN ? ENOSPC : errno;
    }
    return arena;
}

int ra__pool_first_arena(ra_tag_t tag, const struct ra__commit_ops *commits)
{
    int arena = -1;

    ra__assert_rank_held(RA__RANK_IDS);
    if (ra__region_open(tag, commits) != 0) {
        if (errno != EEXIST)
            return -1;
    } else if ((arena = make_arena(tag)) < 0 && errno != EEXIST) {
        return -1;
    }
    ra__region_publish(tag);
    if (arena < 0)
        errno = EEXIST;
    return arena;
}

int ra__pool_take_back(ra_tag_t tag)
{
    int arena;

    ra__assert_rank_held(RA__RANK_IDS);
    if (ra__region_reopen(tag) != 0)
        return -1;
    arena = make_arena(tag);
    if (arena < 0 && errno == EEXIST)
        return -1;
    return arena;
}

/* With pool_lock held: one more arena for the tag's pool, or false. */
static bool grow(ra_tag_t tag)
{
    struct pool *p = &pools[tag];
    unsigned n = atomic_load_explicit(&p->n, memory_order_relaxed);
    int arena;

    ra__assert_held(&pool_lock);
    if (p->stuck || !may_grow())
        return false;
    ra__assert(tag - 1 < ra__region_count());
    arena = make_arena(tag);
    if (arena < 0) {
        p->stuck = true;
        atomic_store_explicit(&p->changed, true, memory_order_relaxed);
        return false;
    }
    ra__assert(n < RA__POOL_MAX &&
               ra__pool_owner((unsigned)arena) == RA_TAG_NONE);
    p->arenas[n] = (uint16_t)arena;
    p->load[n] = 0;
    atomic_store_explicit(&arena_tag[arena], (uint16_t)tag,
                          memory_order_release);
    atomic_store_explicit(&p->n, n + 1, memory_order_release);
    return true;
}

unsigned ra__pool_bind(ra_tag_t tag, bool budget_allows)
{
    struct pool *p = &pools[tag];
    unsigned n, pairs = 0, best = 0, within;

    if (ra__pool_count(tag) == 0)
        return ra__tag_arena[tag]; /* pass-through mode: no arena */
    ra__lock(&pool_lock);
    n = atomic_load_explicit(&p->n, memory_order_relaxed);
    within = bound_of(p) < n ? bound_of(p) : n;
    for (unsigned k = 0; k < within; k++)
        pairs += p->load[k];
    /* One more pair than the arenas may take: one more arena. */
    if (pairs + 1 > within * ra__config()->threads_per_arena &&
        within == n && n < bound_of(p) && budget_allows && grow(tag))
        within = ++n;
    for (unsigned k = 1; k < within; k++)
        if (p->load[k] < p->load[best])
            best = k;
    p->load[best]++;
    ra__assert(best < n && ra__pool_owner(p->arenas[best]) == tag);
    ra__unlock(&pool_lock);
    return p->arenas[best];
}

unsigned ra__pool_quietest(ra_tag_t tag)
{
    struct pool *p = &pools[tag];
    unsigned n = ra__pool_count(tag), best = 0;

    if (n == 0)
        return ra__tag_arena[tag];
    ra__lock(&pool_lock);
    for (unsigned k = 1; k < n && k < bound_of(p); k++)
        if (p->load[k] < p->load[best])
            best = k;
    ra__unlock(&pool_lock);
    return p->arenas[best];
}

void ra__pool_unbind(ra_tag_t tag, unsigned arena)
{
    struct pool *p = &pools[tag];
    unsigned n = ra__pool_count(tag);

    ra__lock(&pool_lock);
    for (unsigned k = 0; k < n; k++)
        if (p->arenas[k] == arena && p->load[k] > 0) {
            p->load[k]--;
            break;
        }
    ra__unlock(&pool_lock);
}

void ra__pool_recycle(ra_tag_t tag)
{
    /* Set under pool_lock, by calls on the tag (or its pairs' binding)
     * that have all returned: the destroy's caller saw them happen. */
    if (!atomic_load_explicit(&pools[tag].changed, memory_order_relaxed))
        return;
    ra__lock(&pool_lock);
    pools[tag].bound = 0;
    pools[tag].stuck = false;
    atomic_store_explicit(&pools[tag].changed, false, memory_order_relaxed);
    ra__unlock(&pool_lock);
}

/* verb (an arena.<i>.* of backend.c's) on every arena of the pool. */
static void each_arena(ra_tag_t tag, bool (*verb)(unsigned arena))
{
    unsigned n = ra__pool_count(tag);

    for (unsigned k = 0; k < n; k++) {
        /* Invariant 10: a pool's arenas are its tag's alone. */
        ra__assert(ra__pool_owner(pools[tag].arenas[k]) == tag);
        verb(pools[tag].arenas[k]);
    }
}

void ra__pool_purge(ra_tag_t tag)
{
    each_arena(tag, ra__be_arena_purge);
}

void ra__pool_reset(ra_tag_t tag)
{
    each_arena(tag, ra__be_arena_reset);
}

void ra__pool_decay(ra_tag_t tag)
{
    each_arena(tag, ra__be_arena_decay);
}

void ra__pool_set_bound(ra_tag_t tag, unsigned max)
{
    ra__lock(&pool_lock);
    pools[tag].bound = max > RA__POOL_MAX ? RA__POOL_MAX : max;
    atomic_store_explicit(&pools[tag].changed, true, memory_order_relaxed);
    ra__unlock(&pool_lock);
}

unsigned ra__pool_arenas(ra_tag_t tag, unsigned *out, unsigned cap)
{
    unsigned n = ra__pool_count(tag);

    for (unsigned k = 0; k < n && k < cap; k++)
        out[k] = pools[tag].arenas[k];
    return n;
}

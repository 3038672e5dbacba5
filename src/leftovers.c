/* Floor: ends. What destroyed tags leave live in their slots, and the
 * resets of a slot, which free them. A destroy that finds a few blocks
 * still live (a request that let its end free them) does not reset the
 * arena: jemalloc's reset walks every bin and frees every slab, and the
 * next holder then makes each slab again, which was most of a small tag's
 * life (bench/tag_life: 2.8 us a life of 10 blocks, 1.1 us with
 * leftovers). The blocks stay allocated in jemalloc's eyes, so nothing
 * hands them out again; they are forgotten by the counts, and freed all at
 * once by the first reset of the slot: a destroy with more live, a
 * ra_tag_reset of a later holder, or here, once the slot has been idle for
 * LEFTOVER_IDLE_NS, when ra_purge_all asks, and whenever they would
 * charge a holder that cannot free them: a budget set on it, a purge of
 * it, a refused allocation's retry, the memory limit's give-back, its
 * creation in a tag tree. The reset of a live holder is only made when
 * nothing of it is live and nobody else has used it (pairs_end.c holds it
 * still): else they stay until one of the others. Bounded per slot and
 * over the process; none are left in a tag tree or beside a hard limit,
 * whose commits must stay the holder's own. */
#include <pthread.h>
#include <stdatomic.h>

#include "budget.h"
#include "internal.h"
#include "tags.h"
#include "pairs.h"
#include "ends.h"

#define LEFTOVER_SLOT_MAX ((size_t)64 << 10)
#define LEFTOVER_TOTAL_MAX ((size_t)8 << 20)
/* An idle slot's leftovers are reclaimed after this long: a server's
 * request slots come back within it, and a slot nobody took since then
 * gives back its pages as decay would (doc/design.md, a tag's end). */
#define LEFTOVER_IDLE_NS 1000000000u
/* The idle slots' decay, one slot at a time, at most this often: it was a
 * mallctl on every destroy. */
#define DECAY_EVERY_NS 1000000u

/* One reclaim at a time, and none across a fork (the return stacks' gates
 * must all be open in a child): taken after lifetime.c's fork gate. */
static struct ra__mutex reclaim_lock = RA__MUTEX_INIT(RA__RANK_RECLAIM);
/* Under leftover_lock, a leaf: bytes left live in each slot, their sum,
 * and when each slot's last holder was destroyed. */
static struct ra__mutex leftover_lock = RA__MUTEX_INIT(RA__RANK_LEFTOVER);
static size_t left[RA__MAX_TAGS_LIMIT + 1];
/* Read without the lock too: most calls that may reclaim find none. */
static _Atomic size_t left_total;
static uint64_t idle_since[RA__MAX_TAGS_LIMIT + 1];
/* When the last decay step began: read by every destroy, so no lock. */
static _Atomic uint64_t decayed_at;

size_t ra__leftovers_allowance(ra_tag_t tag)
{
    size_t slot_allowance, total_allowance;

    if (ra__budget_parent(tag) != RA_TAG_NONE || ra__budget_any_hard())
        return 0;
    ra__lock(&leftover_lock);
    slot_allowance = LEFTOVER_SLOT_MAX - left[tag];
    total_allowance = LEFTOVER_TOTAL_MAX -
                      atomic_load_explicit(&left_total, memory_order_relaxed);
    ra__unlock(&leftover_lock);
    return slot_allowance < total_allowance ? slot_allowance
                                            : total_allowance;
}

void ra__leftovers_add(ra_tag_t tag, size_t bytes)
{
    ra__lock(&leftover_lock);
    left[tag] += bytes;
    atomic_fetch_add_explicit(&left_total, bytes, memory_order_relaxed);
    ra__assert(atomic_load(&left_total) >= left[tag]);
    idle_since[tag] = ra__clock_ns();
    ra__unlock(&leftover_lock);
}

void ra__leftovers_forget(ra_tag_t tag)
{
    ra__lock(&leftover_lock);
    /* The total is the sum of the slots'. */
    ra__assert(atomic_load(&left_total) >= left[tag]);
    atomic_fetch_sub_explicit(&left_total, left[tag], memory_order_relaxed);
    left[tag] = 0;
    idle_since[tag] = ra__clock_ns();
    ra__unlock(&leftover_lock);
}

/* With reclaim_lock held, the threads' caches of the tag wiped and nobody
 * able to use its slot: its arenas reset, whatever they held. */
static void reset_arenas(ra_tag_t tag)
{
    ra__assert_held(&reclaim_lock);
    ra__returns_close(tag);
    ra__pool_reset(tag);
    ra__returns_open(tag);
    ra__leftovers_forget(tag);
}

/* An idle slot's leftovers freed, and its pages given back: the reset of
 * a dead tag. The id is out of the registry's queue meanwhile (no creation
 * takes it), then queued again. The parked pairs' caches hold free blocks
 * of the arena that the reset frees too: forgotten first. */
static bool reclaim_idle(ra_tag_t tag)
{
    if (!ra__tag_take_free(tag))
        return false;
    /* Invariant 13: a dead tag's arenas are reset only out of the queue. */
    ra__assert(!ra__tag_valid(tag));
    ra__pairs_wipe(tag);
    reset_arenas(tag);
    ra__pool_purge(tag);
    ra__tag_release_id(tag);
    return true;
}

/* A live holder's: only while pairs_end.c holds it still. The pages stay,
 * free, the holder's kept pages: the caller purges them when it purges
 * (a budget below them, ra_tag_purge, a refusal's retry), and a holder
 * that keeps them allocates into them without a fault. */
static bool reclaim_held(ra_tag_t tag)
{
    if (!ra__pairs_hold(tag))
        return false;
    reset_arenas(tag);
    ra__pairs_unhold(tag);
    return true;
}

static bool has_leftovers(ra_tag_t tag)
{
    bool some;

    ra__lock(&leftover_lock);
    some = left[tag] != 0;
    ra__unlock(&leftover_lock);
    return some;
}

bool ra__leftovers_reclaim(ra_tag_t tag)
{
    bool done = false;

    if (atomic_load_explicit(&left_total, memory_order_relaxed) == 0 ||
        !has_leftovers(tag))
        return false;
    ra__lock(&reclaim_lock);
    /* Another reclaim may have been first; and each path checks again,
     * under its own lock, whether the tag is live. */
    if (has_leftovers(tag))
        done = ra__tag_valid(tag) ? reclaim_held(tag) : reclaim_idle(tag);
    ra__unlock(&reclaim_lock);
    return done;
}

void ra__leftovers_reclaim_subtree(ra_tag_t root)
{
    unsigned count;

    if (atomic_load_explicit(&left_total, memory_order_relaxed) == 0)
        return;
    count = ra__tag_published();
    for (ra_tag_t t = 1; t <= count; t++)
        if (ra__tag_in_subtree(t, root))
            ra__leftovers_reclaim(t);
}

void ra__leftovers_reset(ra_tag_t tag)
{
    ra__lock(&reclaim_lock);
    ra__pairs_wipe(tag);
    reset_arenas(tag);
    ra__pool_purge(tag);
    ra__unlock(&reclaim_lock);
}

void ra__leftovers_decay_one(void)
{
    uint64_t now = ra__clock_ns();
    uint64_t last = atomic_load_explicit(&decayed_at, memory_order_relaxed);
    ra_tag_t idle;
    bool stale;

    if (last + DECAY_EVERY_NS > now ||
        !atomic_compare_exchange_strong_explicit(&decayed_at, &last, now,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    /* Ids their threads have left unused for a second are queued first,
     * where this decay, and any creation, reaches them. */
    ra__purge_owned(true);
    idle = ra__tag_next_idle();
    if (idle == RA_TAG_NONE)
        return;
    ra__lock(&leftover_lock);
    /* A slot left after now (another thread's clock ran later) is not
     * stale: the difference would wrap. */
    stale = left[idle] != 0 && idle_since[idle] + LEFTOVER_IDLE_NS <= now;
    ra__unlock(&leftover_lock);
    if (stale)
        ra__leftovers_reclaim(idle);
    else
        ra__pool_decay(idle);
}

void ra__leftovers_reclaim_all(void)
{
    unsigned count = ra__tag_published();

    for (ra_tag_t t = 1; t <= count; t++)
        ra__leftovers_reclaim(t);
}

size_t ra__leftovers_total(void)
{
    return atomic_load_explicit(&left_total, memory_order_relaxed);
}

void ra__leftovers_prefork(void)
{
    ra__lock(&reclaim_lock);
}

void ra__leftovers_prefork_leaf(void)
{
    ra__lock(&leftover_lock);
}

void ra__leftovers_postfork(void)
{
    ra__unlock(&leftover_lock);
    ra__unlock(&reclaim_lock);
}

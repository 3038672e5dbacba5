/* Floor: pairs. A (thread, tag) pair's life: its states and the one
 * function of each transition, each ending in a check of the pair's
 * invariant in the debug build (doc/design.md, "A pair's life").
 *
 *   UNUSED    not set up: no caches, not among the tag's users; what a
 *             thread's zeroed slots read.
 *   ACTIVE    its owner uses it: alloc_flags (the fast paths' cached word)
 *             names its arena and tcache; it may allocate (a front cache)
 *             or only free (its frees go through the thread's outbox).
 *   PARKED    a destroy that left nothing live kept it for the slot's next
 *             holder: no front-cache block, every bin's capacity 0,
 *             alloc_flags 0; only its tcache keeps blocks.
 *   FLUSHING  parked, its tcache flushed by another thread (a purge).
 *   HELD      parked, held still by another thread for a reset of a live
 *             tag (leftovers.c).
 *
 *   UNUSED -> ACTIVE              ra__pair_start        (owner)
 *   ACTIVE -> ACTIVE, allocating  ra__pair_start_allocating (owner)
 *   ACTIVE -> ACTIVE, its tcache  ra__pair_take_tcache  (owner)
 *   ACTIVE -> ACTIVE, a consumer's tcache  ra__pair_adopt_tcache (owner)
 *   ACTIVE -> PARKED              ra__pair_park         (any, lock)
 *   PARKED -> ACTIVE              ra__pair_unpark       (owner, no lock)
 *   PARKED -> FLUSHING -> PARKED  ra__pair_flush_parked (any, lock)
 *   PARKED -> HELD                ra__pair_hold         (any, lock)
 *   HELD -> PARKED                ra__pair_unhold       (the holder, lock)
 *   ACTIVE|PARKED -> ACTIVE anew  ra__pair_restart      (any, lock)
 *   ACTIVE|PARKED -> UNUSED       ra__pair_leave        (any, lock)
 *
 * "lock" is threads_lock (users.c); "any" a thread that may not be the
 * owner, whose caller promises the owner does not use the pair meanwhile
 * (its tag is ending, or the owner is exiting), except that the owner may
 * wait in ra__pair_unpark for a FLUSHING or HELD pair to be PARKED again.
 * Only these functions write the state and alloc_flags. */
#include <sched.h>

#include "backend.h"
#include "budget.h"

#include "internal.h"
#include "pairs.h"

static enum ra__pair_state state_of(const struct ra__tag_slot *s)
{
    return (enum ra__pair_state)atomic_load_explicit(&s->state,
                                                     memory_order_acquire);
}

static bool parked(enum ra__pair_state st)
{
    return st == RA__PAIR_PARKED || st == RA__PAIR_FLUSHING ||
           st == RA__PAIR_HELD;
}

/* The pair's invariant, by state; the debug build aborts where it breaks.
 * Read by the thread that made the transition, before it lets the pair
 * go (a store another thread may act on comes after the check). */
static void check_pair(const struct ra__tag_slot *s, enum ra__pair_state st)
{
    ra__assert(st <= RA__PAIR_HELD);
    /* The cached word: non-zero exactly while active. */
    ra__assert((s->alloc_flags != 0) == (st == RA__PAIR_ACTIVE));
    /* Only a pair that allocates has a front cache, and only such a pair
     * weighs in its tag's pool. */
    ra__assert(s->bins == NULL || s->allocates);
    ra__assert(!s->busy || s->allocates);
    ra__assert(s->misses <= RA__TCACHE_AFTER_MISSES);
    if (st == RA__PAIR_UNUSED) {
        ra__assert(s->bins == NULL && !s->allocates && s->made_before == 0);
        ra__assert(atomic_load_explicit(&s->nmalloc, memory_order_relaxed) ==
                       0 &&
                   atomic_load_explicit(&s->bytes, memory_order_relaxed) ==
                       0);
        return;
    }
    /* Set up: listed among the tag's users. */
    ra__assert(s->users_prev != NULL && *s->users_prev == s);
    if (st == RA__PAIR_ACTIVE)
        ra__assert(s->alloc_flags == (RA__ARENA_FLAGS(s->arena) |
                                      ra__be_tcache_flags(s->tcache)));
    if (s->bins != NULL)
        for (unsigned bin = 0; bin < ra__nbins; bin++) {
            ra__assert(s->bins[bin].count <= s->bins[bin].cap);
            /* Invariant 11: parked, nothing cached, every bin seen full
             * and empty. */
            ra__assert(!parked(st) || s->bins[bin].cap == 0);
        }
}

static void set_state(struct ra__tag_slot *s, enum ra__pair_state st,
                      memory_order order)
{
    atomic_store_explicit(&s->state, (uint8_t)st, order);
}

/* The pair allocates from arena through its cache. */
static void bind_to(struct ra__tag_slot *s, unsigned arena)
{
    s->arena = (uint16_t)arena;
    s->alloc_flags =
        RA__ARENA_FLAGS(arena) | ra__be_tcache_flags(s->tcache);
    /* Invariant 2: the pair never reaches jemalloc's automatic cache. */
    ra__assert(RA__NAMES_TCACHE(s->alloc_flags));
}

/* The pair as it starts, and starts over: no tcache until it is busy
 * (ra__slot_miss_slow), bound to arena. */
static void start_uncached(struct ra__tag_slot *s, unsigned arena)
{
    set_state(s, RA__PAIR_ACTIVE, memory_order_relaxed);
    s->tcache = RA__NO_TCACHE;
    /* MALLOC_CONF=tcache:false: never a tcache, nothing to count. */
    s->misses = ra__be_caches ? 0 : RA__TCACHE_AFTER_MISSES;
    bind_to(s, arena);
}

enum ra__pair_state ra__pair_state(const struct ra__tag_slot *s)
{
    return state_of(s);
}

/* Without a tcache until the pair is busy (ra__slot_miss_slow). A pair
 * made by a free (a consumer of another thread's blocks) gets no front
 * cache: its frees go home through the thread's outbox (outbox.c), and
 * it puts no load on an arena of its own, nor takes the library's memory. */
void ra__pair_start(struct ra__tag_slot *s, ra_tag_t tag, bool allocating)
{
    /* MALLOC_CONF=tcache:false: no pair reaches for a tcache, and every
     * one that allocates weighs on its arena from its first block. */
    bool busy = allocating && !ra__be_caches;

    check_pair(s, state_of(s));
    ra__assert(state_of(s) == RA__PAIR_UNUSED);
    if (allocating)
        s->bins = ra__fc_bins_make();
    start_uncached(s, busy ? ra__pool_bind(tag,
                                           ra__budget_allows_growth(tag))
                           : ra__pool_quietest(tag));
    s->allocates = allocating;
    s->busy = busy;
    ra__threads_lock();
    ra__users_add(s, tag);
    check_pair(s, RA__PAIR_ACTIVE);
    ra__threads_unlock();
}

/* A pair made by a free starts to allocate: it gets its front cache, on
 * the pool's quietest arena, or, busy already (its frees took it to a
 * tcache), joins the pool's count. What its outbox holds of the tag goes
 * home first: only pairs that do not allocate use the outbox, and a
 * destroy looks in theirs alone. Under the lock: a destroy of the tag, on
 * another thread, walks the pair's bins. */
void ra__pair_start_allocating(struct ra__tag_slot *s, ra_tag_t tag)
{
    struct ra__fc_bin *bins = ra__fc_bins_make();
    bool busy = s->misses >= RA__TCACHE_AFTER_MISSES;
    unsigned arena = busy ? ra__pool_bind(tag, ra__budget_allows_growth(tag))
                          : ra__pool_quietest(tag);

    ra__assert(state_of(s) == RA__PAIR_ACTIVE && !s->allocates);
    ra__outbox_flush(ra__thread, tag, true);

    ra__threads_lock();
    s->bins = bins;
    s->allocates = true;
    s->busy = busy;
    bind_to(s, arena);
    check_pair(s, RA__PAIR_ACTIVE);
    ra__threads_unlock();
}

/* The pair reached for a tcache (tcache: what jemalloc gave, or
 * RA__NO_TCACHE): busy, an allocating pair weighs in its tag's pool from
 * now on, on the arena the pool then picks (one more arena when those it
 * has are full), rather than from its first block: with a pair counted
 * from its first block, 16 threads visiting 300 tags each grew every
 * tag's pool to a second arena, about 100 KiB a tag, for threads that
 * never shared a tag at the same time. Its blocks stay where they are:
 * the tag's, whatever arena of the pool made them. The creation is under
 * threads_lock: a reset of the tag, from any thread, flushes the slot's
 * tcache under it. */
void ra__pair_take_tcache(struct ra__tag_slot *s, ra_tag_t tag,
                          unsigned tcache)
{
    unsigned arena = s->arena;

    ra__assert(state_of(s) == RA__PAIR_ACTIVE && tcache <= RA__NO_TCACHE);
    if (s->allocates && !s->busy)
        arena = ra__pool_bind(tag, ra__budget_allows_growth(tag));
    ra__threads_lock();
    s->tcache = (uint16_t)tcache;
    s->busy = s->allocates;
    bind_to(s, arena);
    check_pair(s, RA__PAIR_ACTIVE);
    ra__threads_unlock();
}

bool ra__pair_adopt_tcache(struct ra__tag_slot *s, unsigned tcache)
{
    bool taken = false;

    ra__threads_lock();
    /* A destroy of the tag may have parked the pair or started it over
     * since the send: it is then the next holder's, which takes its own. */
    if (state_of(s) == RA__PAIR_ACTIVE && !s->allocates &&
        s->tcache == RA__NO_TCACHE) {
        s->tcache = (uint16_t)tcache;
        /* Busy: its first allocation joins the pool's count
         * (ra__pair_start_allocating), and no miss asks for another. */
        s->misses = RA__TCACHE_AFTER_MISSES;
        bind_to(s, s->arena);
        check_pair(s, RA__PAIR_ACTIVE);
        taken = true;
    }
    ra__threads_unlock();
    return taken;
}

/* Called with threads_lock held. Its front cache's blocks go onto the
 * tag's return stacks (which anyone drains, and the next refill takes
 * whole), or when they are full through the pair's tcache; every bin's
 * capacity goes to 0 and alloc_flags to 0, so that the owner's next use
 * of the pair, from any path, goes through ra__pair_unpark first. */
void ra__pair_park(struct ra__tag_slot *s, ra_tag_t tag)
{
    ra__threads_assert_held();
    ra__assert(state_of(s) == RA__PAIR_ACTIVE);
    if (s->bins != NULL)
        for (unsigned bin = 0; bin < ra__nbins; bin++) {
            struct ra__fc_bin *b = &s->bins[bin];
            unsigned bound =
                RA__RETURNS_BINS * ra__fc_cap(ra__bin_size[bin]);
            while (b->count != 0) {
                unsigned n = b->count < RA__FC_SLOTS / 2 ? b->count
                                                         : RA__FC_SLOTS / 2;
                if (!ra__returns_push(tag, bin, b->items + b->count - n, n,
                                      bound))
                    break;
                b->count -= n;
            }
            ra__fc_give_back(s, bin, b->count);
            b->cap = 0;
        }
    s->alloc_flags = 0;
    check_pair(s, RA__PAIR_PARKED);
    set_state(s, RA__PAIR_PARKED, memory_order_release);
}

/* The owner takes its parked pair back, as it finds it: a flush of its
 * tcache or a hold by another thread is waited for, a matter of
 * microseconds to milliseconds. No lock: a request's first use of a
 * recycled slot must not queue behind every other thread's. */
void ra__pair_unpark(struct ra__tag_slot *s)
{
    uint8_t want = RA__PAIR_PARKED;

    while (!atomic_compare_exchange_weak_explicit(
        &s->state, &want, RA__PAIR_ACTIVE, memory_order_acquire,
        memory_order_relaxed)) {
        ra__assert(parked((enum ra__pair_state)want));
        want = RA__PAIR_PARKED;
        sched_yield();
    }
    bind_to(s, s->arena);
    check_pair(s, RA__PAIR_ACTIVE);
}

/* Called with threads_lock held. jemalloc keeps the id and builds the
 * tcache again at its next use, so the owner's flags stay right. */
void ra__pair_flush_parked(struct ra__tag_slot *s)
{
    uint8_t want = RA__PAIR_PARKED;

    ra__threads_assert_held();
    if (s->tcache == RA__NO_TCACHE ||
        !atomic_compare_exchange_strong_explicit(
            &s->state, &want, RA__PAIR_FLUSHING, memory_order_acquire,
            memory_order_relaxed))
        return;
    ra__fc_flush_tcache(s->tcache);
    check_pair(s, RA__PAIR_FLUSHING);
    set_state(s, RA__PAIR_PARKED, memory_order_release);
}

/* Called with threads_lock held. */
bool ra__pair_hold(struct ra__tag_slot *s)
{
    uint8_t want = RA__PAIR_PARKED;

    ra__threads_assert_held();
    if (!atomic_compare_exchange_strong_explicit(
            &s->state, &want, RA__PAIR_HELD, memory_order_acquire,
            memory_order_relaxed))
        return false;
    check_pair(s, RA__PAIR_HELD);
    return true;
}

/* Called with threads_lock held, by the holder. */
void ra__pair_unhold(struct ra__tag_slot *s)
{
    ra__threads_assert_held();
    if (atomic_load_explicit(&s->state, memory_order_relaxed) !=
        RA__PAIR_HELD)
        return;
    check_pair(s, RA__PAIR_HELD);
    set_state(s, RA__PAIR_PARKED, memory_order_release);
}

/* Called with threads_lock held: a destroyed tag's pair starts again as a
 * new one for the slot's next holder: no tcache (the next holder takes one
 * only once busy: rebuilding a flushed one at every request cost a 32 KiB
 * zeroed allocation and its page faults), refills from a few blocks, no
 * misses, no counts. Its front cache was forgotten (ra__fc_forget). */
void ra__pair_restart(struct ra__tag_slot *s, ra_tag_t tag)
{
    ra__threads_assert_held();
    ra__assert(state_of(s) == RA__PAIR_ACTIVE ||
               state_of(s) == RA__PAIR_PARKED);
    if (s->tcache != RA__NO_TCACHE)
        ra__be_tcache_destroy(s->tcache);
    /* Busy again only once it reaches for a tcache again (without caches,
     * busy for good). */
    if (s->busy && ra__be_caches) {
        ra__pool_unbind(tag, s->arena);
        s->busy = false;
    }
    start_uncached(s, s->arena);
    s->made_before = 0;
    if (s->bins != NULL)
        for (unsigned bin = 0; bin < ra__nbins; bin++) {
            ra__assert(s->bins[bin].count == 0);
            s->bins[bin].fill = 0;
        }
    check_pair(s, RA__PAIR_ACTIVE);
}

/* Called with threads_lock held: the pair leaves its tag for good, its
 * blocks given back and its counts kept as an exited thread's: at the
 * thread's exit, or at a destroy of a tag it sat idle in for its holder's
 * whole life (so that a tag's slots are those of the threads that use
 * it, and a thread visits many tags without keeping a pair in each). */
void ra__pair_leave(struct ra__tag_slot *s, ra_tag_t tag)
{
    ra__threads_assert_held();
    ra__assert(state_of(s) == RA__PAIR_ACTIVE ||
               state_of(s) == RA__PAIR_PARKED);
    ra__fc_flush(s);
    if (s->tcache != RA__NO_TCACHE)
        ra__be_tcache_destroy(s->tcache);
    if (s->busy)
        ra__pool_unbind(tag, s->arena);
    ra__fc_bins_free(s->bins);
    ra__orphans_adopt(s, tag);
    s->bins = NULL;
    s->alloc_flags = 0;
    s->tcache = RA__NO_TCACHE;
    s->allocates = false;
    s->busy = false;
    s->made_before = 0;
    /* Last: the tag's users without this slot may leave another thread's
     * the only one, which then counts and ends the tag without the lock
     * (lone): the pair must be gone whole by then, its counts the
     * orphans'. Left first, a thread's exit hid all its counts from such
     * a reader (ra_tag_usage on the tag's other user) until it adopted
     * them. */
    ra__users_remove(s, tag);
    check_pair(s, RA__PAIR_UNUSED);
    set_state(s, RA__PAIR_UNUSED, memory_order_release);
}

/* Called with threads_lock held, or by the owner of a tag's only pair
 * (ra__own_end). Not a transition: the state stays. */
void ra__pair_new_holder(struct ra__tag_slot *s)
{
    uint64_t made = s->made_before +
                    atomic_load_explicit(&s->nmalloc, memory_order_relaxed);

    s->made_before = made > UINT32_MAX ? UINT32_MAX : (uint32_t)made;
    atomic_store_explicit(&s->nmalloc, 0, memory_order_relaxed);
    atomic_store_explicit(&s->ndalloc, 0, memory_order_relaxed);
    atomic_store_explicit(&s->bytes, 0, memory_order_relaxed);
    check_pair(s, state_of(s));
}

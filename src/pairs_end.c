/* Floor: ends. What a tag's end, a reset and a purge do to every
 * thread's pairs of the tag: the end parks, restarts or lets go of each
 * pair; a wipe empties their caches before the arenas are reset; a hold
 * keeps a live but unused tag still for such a reset; and a flush gives
 * back what the parked pairs' tcaches keep. Beside purge.c and
 * leftovers.c, which call it. */
#include "internal.h"
#include "pairs.h"
#include "ends.h"

/* Whether the pair did nothing for the tag's holder now ending. */
static bool idle_pair(const struct ra__tag_slot *s)
{
    return atomic_load_explicit(&s->nmalloc, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&s->ndalloc, memory_order_relaxed) == 0;
}

/* Called with threads_lock held: whether the tag's counts, over its
 * pairs and its orphans, are all 0. */
static bool counts_zero(ra_tag_t tag)
{
    struct ra__counts c;

    ra__threads_assert_held();
    ra__users_counts(ra__users_first(tag), false, tag, &c);
    return c.nmalloc == 0 && c.ndalloc == 0 && c.allocated == 0;
}

/* Called with threads_lock held: every pair's counts start again from 0
 * for the slot's next holder, and so do the orphans'. */
static void new_holder(ra_tag_t tag)
{
    ra__threads_assert_held();
    for (struct ra__tag_slot *s = ra__users_first(tag); s != NULL;
         s = s->users_next)
        ra__pair_new_holder(s);
    ra__orphans_forget(tag);
}

/* Called with threads_lock held: whether every pair of the tag left is
 * PARKED (an end that kept what the caches hold). */
static bool all_parked(ra_tag_t tag)
{
    ra__threads_assert_held();
    for (struct ra__tag_slot *s = ra__users_first(tag); s != NULL;
         s = s->users_next)
        if (ra__pair_state(s) != RA__PAIR_PARKED)
            return false;
    return true;
}

/* Called with threads_lock held, nothing of the tag live (or no more than
 * the caller leaves): what the caches hold are free blocks of the slot's
 * arena, the next holder's as much as this one's. They stay, tcaches with
 * them, and the arena is not reset; but only in the pairs this holder
 * used. The others have been idle for a holder's life at least: they give
 * their blocks back and leave the tag, or with a tag per request every
 * thread would end up holding caches for every slot (threads x slots
 * pairs, each with a tcache: examples/requests on 8 threads held twice the
 * untagged resident set). */
static void end_keeping(ra_tag_t tag)
{
    ra__threads_assert_held();
    /* Blocks a consumer freed are on their way home: they go on, now, to
     * where a purge of the next holder reaches, and the pairs are left
     * alone only once every send is home (a sender may be freeing through
     * its pair's tcache, outbox.c). A pair that allocates has none there
     * (ra__pair_start_allocating), and a request's destroy does not walk
     * its thread's outbox. */
    for (struct ra__tag_slot *s = ra__users_first(tag); s != NULL;
         s = s->users_next)
        if (!s->allocates)
            ra__outbox_flush(ra__users_thread(s, tag), tag, false);
    ra__returns_quiesce(tag);
    for (struct ra__tag_slot *s = ra__users_first(tag), *next; s != NULL;
         s = next) {
        next = s->users_next;
        if (idle_pair(s))
            ra__pair_leave(s, tag);
        else
            ra__pair_park(s, tag);
    }
    ra__assert(all_parked(tag));
    new_holder(tag);
}

/* Called with threads_lock held, blocks of the tag live: its arenas will
 * be reset, which frees what every cache of the tag holds. */
static void end_resetting(ra_tag_t tag)
{
    ra__threads_assert_held();
    /* Before any tcache of the tag goes: a consumer's send in flight may
     * be freeing through its pair's. */
    ra__returns_fence(tag);
    for (struct ra__tag_slot *s = ra__users_first(tag), *next; s != NULL;
         s = next) {
        next = s->users_next;
        ra__fc_forget(s);
        if (idle_pair(s))
            ra__pair_leave(s, tag);
    }
    new_holder(tag);
    for (struct ra__tag_slot *s = ra__users_first(tag); s != NULL;
         s = s->users_next)
        ra__pair_restart(s, tag);
}

bool ra__pairs_end(ra_tag_t tag, size_t leave, size_t *left)
{
    struct ra__counts c;
    bool reset;

    ra__threads_lock();
    ra__users_counts(ra__users_first(tag), false, tag, &c);
    /* No thread uses the tag now (the caller's promise): every free
     * counted was of a block whose allocation is counted. */
    ra__assert(c.nmalloc >= c.ndalloc);
    *left = c.nmalloc == c.ndalloc ? 0 : c.allocated;
    reset = c.nmalloc != c.ndalloc && c.allocated > leave;
    if (reset)
        end_resetting(tag);
    else
        end_keeping(tag);
    /* Invariant: an ended tag's counts start again from 0. */
    ra__assert(counts_zero(tag));
    ra__threads_unlock();
    return reset;
}

/* Called with threads_lock held, the tag's sends fenced: every cache of
 * the tag emptied before its arenas are reset, and its counts say every
 * block was freed. */
static void wipe_locked(ra_tag_t tag)
{
    struct ra__counts c;

    ra__threads_assert_held();
    ra__users_counts(ra__users_first(tag), false, tag, &c);
    for (struct ra__tag_slot *s = ra__users_first(tag); s != NULL;
         s = s->users_next) {
        ra__fc_forget(s);
        ra__fc_flush_tcache(s->tcache);
    }
    /* Every block that was live is freed now. */
    ra__orphans_all_freed(tag, &c);
}

void ra__pairs_wipe(ra_tag_t tag)
{
    /* Before any tcache of the tag goes: a consumer's send in flight may
     * be freeing through its pair's. */
    ra__returns_fence(tag);
    ra__threads_lock();
    wipe_locked(tag);
    ra__threads_unlock();
}

/* -- a live tag held still ---------------------------------------------
 * A live tag's slot may hold blocks nobody owns (leftovers.c), which only a
 * reset of its arenas frees, and a reset is safe only while no block of
 * the tag is live and no thread allocates under it or frees into it:
 * ra_tag_reset's caller promises that, a budget's or a purge's does not.
 * So the library holds the tag still itself, and only when it can: every
 * pair of the tag but the caller's is parked (the holder's last destroy
 * parked it and nobody used it since), and each is turned to
 * RA__PAIR_HELD, which its owner's ra__pair_unpark waits out; a thread
 * without a pair must take threads_lock to make one (ra__pair_start) or
 * to start allocating in one (ra__pair_start_allocating), which the hold
 * keeps; and a thread without a slot (exiting) is inside no allocation or
 * free of the tag (ra__orphan_begin waits while it is held). The caller's
 * own pair is its own business: it is not allocating. */

/* Called with threads_lock held: the pairs a hold turned to HELD are
 * parked again. */
static void unhold_pairs(ra_tag_t tag)
{
    ra__threads_assert_held();
    for (struct ra__tag_slot *s = ra__users_first(tag); s != NULL;
         s = s->users_next)
        ra__pair_unhold(s);
}

/* Called with threads_lock held: the tag's pairs other than the caller's
 * (mine) held if they are all parked; false, with none held, else. */
static bool hold_pairs(ra_tag_t tag, const struct ra__tag_slot *mine)
{
    ra__threads_assert_held();
    for (struct ra__tag_slot *s = ra__users_first(tag); s != NULL;
         s = s->users_next)
        if (s != mine && !ra__pair_hold(s)) {
            unhold_pairs(tag);
            return false;
        }
    return true;
}

void ra__pairs_unhold(ra_tag_t tag)
{
    /* Invariant 13: the reset was made under this hold. */
    ra__assert(ra__orphans_held(tag));
    unhold_pairs(tag);
    ra__orphans_unhold(tag);
    ra__threads_unlock();
}

bool ra__pairs_hold(ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;
    const struct ra__tag_slot *mine =
        ts != NULL && tag < ts->nslots ? &ts->slots[tag] : NULL;
    struct ra__counts c;

    ra__threads_lock();
    /* Live when the lock was taken: a destroy that kills it from here on
     * ends it only after this hold (its end takes the lock, or finds the
     * destroying thread's pair active, which this hold refuses), and a
     * dead tag's slot is the registry's (leftovers.c resets an idle one
     * out of its queue). */
    if (!ra__orphans_hold(tag) || !ra__tag_valid(tag) ||
        !hold_pairs(tag, mine)) {
        ra__orphans_unhold(tag);
        ra__threads_unlock();
        return false;
    }
    ra__users_counts(ra__users_first(tag), false, tag, &c);
    if (c.nmalloc != c.ndalloc) {
        ra__pairs_unhold(tag);
        return false;
    }
    /* Sends of the tag come only from pairs that free without allocating,
     * all held or the caller's: none is in flight, and a batch an outbox
     * kept is stale after this fence. */
    ra__returns_fence(tag);
    wipe_locked(tag);
    return true;
}

void ra__pairs_flush_parked(ra_tag_t tag)
{
    ra__threads_lock();
    for (struct ra__tag_slot *s = ra__users_first(tag); s != NULL;
         s = s->users_next)
        ra__pair_flush_parked(s);
    ra__threads_unlock();
}

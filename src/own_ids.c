/* Floor: pairs. Threads' own ids: a tag that ended alone on its thread
 * (its pair the tag's only one, nothing live) keeps its id for that
 * thread's next creation, until another thread takes it away.
 *
 * A tag per request lives and ends on one thread. When its destroy finds
 * that nothing is live and that the calling thread's pair is the tag's
 * only one, the pair stays as it is, its front cache full of the slot's
 * free blocks, and the id is the thread's own: the thread's next creation
 * takes it back (newest first), with its region, arena and caches warm,
 * and neither end takes a lock of all threads nor moves a block. Handed
 * out through the registry's queue instead, the id went to whichever
 * thread created next: each end parked the pair (its blocks onto the
 * return stacks) for a holder on another CPU, and 2 threads serving
 * requests ran each cycle 3x slower than one (2.4 against 6.3 us for 130
 * blocks). owner says whose an id is (the thread's state, or NULL): the
 * owner takes an id back (ra__own_reuse), and another thread takes it
 * away (ra__own_seize: when the ids run out, at ra_purge_all, or once it
 * has been idle for a second), each by a compare-and-swap, so exactly one
 * of them has it. The one who takes it away parks the owner's pair under
 * threads_lock, as a destroy that hands the id to the queue does: the
 * owner's state lives until its exit takes that lock. */
#include <stdalign.h>

#include "internal.h"
#include "pairs.h"

#define OWN_IDLE_NS 1000000000u
/* How many ids one look at the idle ones reads. */
#define OWN_SCAN 64u

/* A line an id: each request's end and creation write its id's. */
static struct owned {
    alignas(64) _Atomic(struct ra__thread_state *) owner;
    _Atomic uint64_t since; /* ra__clock_coarse_ns */
} owned[RA__MAX_TAGS_LIMIT + 1];
/* This thread's own ids, oldest first; an id another thread took away
 * stays listed until the owner's next look finds it gone. */
static RA__TLS ra_tag_t own_ids[RA__OWN_MAX];
static RA__TLS unsigned own_count;

bool ra__own_end(ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;
    struct ra__tag_slot *s;
    struct ra__counts c;

    if (ts == NULL || own_count == RA__OWN_MAX)
        return false;
    s = &ts->slots[tag];
    if (!ra__users_lone(ts, tag) ||
        ra__pair_state(s) != RA__PAIR_ACTIVE || !s->allocates ||
        s->bins == NULL)
        return false;
    /* The slot alone, with the counts of threads without one. */
    ra__users_counts(s, true, tag, &c);
    if (c.nmalloc != c.ndalloc)
        return false;
    ra__pair_new_holder(s);
    ra__orphans_forget(tag);
    return true;
}

void ra__own_keep(ra_tag_t tag)
{
    /* Invariant 12: dead, and nobody's yet. */
    ra__assert(own_count < RA__OWN_MAX && ra__thread != NULL &&
               !ra__tag_valid(tag) &&
               atomic_load_explicit(&owned[tag].owner,
                                    memory_order_relaxed) == NULL);
    /* Its pair stays active: only the owner's next creation uses it. */
    ra__assert(ra__pair_state(&ra__thread->slots[tag]) == RA__PAIR_ACTIVE);
    own_ids[own_count++] = tag;
    atomic_store_explicit(&owned[tag].since, ra__clock_coarse_ns(),
                          memory_order_relaxed);
    atomic_store_explicit(&owned[tag].owner, ra__thread, memory_order_release);
}

ra_tag_t ra__own_reuse(void)
{
    struct ra__thread_state *ts = ra__thread;

    while (own_count > 0) {
        ra_tag_t tag = own_ids[--own_count];
        struct ra__thread_state *want = ts;
        if (atomic_compare_exchange_strong_explicit(
                &owned[tag].owner, &want, NULL, memory_order_acquire,
                memory_order_relaxed))
            return tag;
    }
    return RA_TAG_NONE;
}

/* Called with threads_lock held: tag, owned by o, is taken away from it
 * (false when o took it back first) and o's pair parked. */
static bool seize_one(ra_tag_t tag, struct ra__thread_state *o)
{
    ra__threads_assert_held();
    if (!atomic_compare_exchange_strong_explicit(&owned[tag].owner, &o, NULL,
                                                 memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    ra__pair_park(&o->slots[tag], tag);
    return true;
}

unsigned ra__own_seize(ra_tag_t *out, unsigned cap, bool idle_only)
{
    static unsigned cursor;
    unsigned count = ra__config()->max_tags, n = 0;
    unsigned look = idle_only ? OWN_SCAN : count;
    uint64_t now = idle_only ? ra__clock_coarse_ns() : 0;

    ra__threads_lock();
    for (unsigned i = 0; i < look && n < cap; i++) {
        ra_tag_t tag = cursor++ % count + 1;
        struct ra__thread_state *o =
            atomic_load_explicit(&owned[tag].owner, memory_order_relaxed);
        /* An id owned since after now (its owner's clock ran later) is
         * not idle either. */
        if (o == NULL ||
            (idle_only && atomic_load_explicit(&owned[tag].since,
                                               memory_order_relaxed) +
                                  OWN_IDLE_NS >
                              now))
            continue;
        if (seize_one(tag, o))
            out[n++] = tag;
    }
    ra__threads_unlock();
    ra__assert(n <= cap);
    return n;
}

bool ra__own_has_owner(ra_tag_t tag)
{
    return atomic_load_explicit(&owned[tag].owner, memory_order_relaxed) !=
           NULL;
}

unsigned ra__own_drop_all(struct ra__thread_state *ts, ra_tag_t *out)
{
    unsigned n = 0;

    ra__threads_assert_held();
    while (own_count > 0) {
        ra_tag_t tag = own_ids[--own_count];
        struct ra__thread_state *want = ts;
        if (atomic_compare_exchange_strong_explicit(
                &owned[tag].owner, &want, NULL, memory_order_relaxed,
                memory_order_relaxed))
            out[n++] = tag;
    }
    ra__assert(n <= RA__OWN_MAX);
    return n;
}

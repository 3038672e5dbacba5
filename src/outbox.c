/* Floor: pairs. A thread's outbox: the small blocks it frees of tags it
 * does not allocate in (a consumer of the blocks another thread makes),
 * gathered by (tag, bin) and sent home to the tag's return stacks a batch
 * at a time, where the tag's allocating threads look first. The thread's
 * slot of such a tag has no front cache of its own, so a free never
 * allocates: the outbox is part of the thread's state, made once a thread
 * (thread.c). A batch is sent when it is full, when another (tag, bin)
 * needs its way, when the thread flushes or ends, and when its tag is
 * destroyed (by the destroying thread: the batch's blocks are then the
 * slot's next holder's, and must be where a purge reaches); one that
 * waited across a reset of its tag is dropped (returns.c), its blocks gone
 * with the arena's.
 *
 * Who sends a batch takes it first: a compare-and-swap of the way's tag
 * to WAY_BUSY, which the owner's displacing or flushing and a destroy on
 * another thread may race for. The owner's appends need none: it appends
 * only blocks of a tag it frees, and nobody frees blocks of a tag while it
 * is destroyed (the caller's promise), which also orders the appends
 * before the destroy's look. */
#include <sched.h>
#include <string.h>

#include "backend.h"
#include "internal.h"
#include "pairs.h"

#define WAY_BUSY ((ra_tag_t)-1)

static struct ra__outbox_way *ways(struct ra__thread_state *ts)
{
    return (struct ra__outbox_way *)&ts->slots[ts->nslots];
}

size_t ra__outbox_size(void)
{
    return RA__OUTBOX_WAYS * sizeof(struct ra__outbox_way);
}

/* The way's tag, once no sender holds it (a copy of 32 pointers). */
static ra_tag_t way_tag(struct ra__outbox_way *w)
{
    ra_tag_t t;

    while ((t = atomic_load_explicit(&w->tag, memory_order_acquire)) ==
           WAY_BUSY)
        sched_yield();
    return t;
}

/* Takes the way's batch of tag seen, unless another sender did. The way
 * is held until the batch is counted at the tag's gate: a destroy that
 * sends the tag's batches then waits for this one to be home
 * (ra__returns_quiesce) before it parks or forgets the pair whose tcache
 * it may go through. Then the way is free again before the batch leaves:
 * sending may allocate the library's records, and whatever that frees on
 * the owner's thread may come back to this way.
 *
 * A batch the tag's stack has no room for (its producers descheduled
 * while their consumers free) goes to jemalloc: on the owner's thread
 * through the pair's tcache, which frees a bin's worth under one lock,
 * where block by block each took the bin's lock (bench/hot_tag 8 pairs:
 * 1-140 bin-lock operations per 1,000 blocks from one run to the next).
 * Returns whether it did so without a tcache: the pair then takes one
 * (ra__slot_send_overflowed, out of the gate: it takes the threads'
 * lock, which a destroy holds while it waits at the gate). */
static bool send(struct ra__thread_state *ts, struct ra__outbox_way *w,
                 ra_tag_t seen, bool owner)
{
    void *items[RA__OUTBOX_BATCH];
    unsigned bin, n;
    int flags = MALLOCX_TCACHE_NONE;
    bool entered, overflowed;

    if (!atomic_compare_exchange_strong_explicit(&w->tag, &seen, WAY_BUSY,
                                                 memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    bin = w->bin;
    n = w->n;
    /* A way holds one (tag, bin)'s batch, within its bound. */
    ra__assert(seen != RA_TAG_NONE && seen != WAY_BUSY &&
               n <= w->max && w->max <= RA__OUTBOX_BATCH);
    memcpy(items, w->items, n * sizeof items[0]);
    /* Invariant 14: the batch goes on only if its stamp is still the
     * tag's count of resets, inside the gate (ra__returns_enter). */
    entered = n != 0 && ra__returns_enter(seen, w->stamp);
    w->n = 0;
    atomic_store_explicit(&w->tag, RA_TAG_NONE, memory_order_release);
    if (!entered)
        return false;
    /* Read inside the gate: a destroy or reset changes the pair's tcache
     * only once no send is in it. */
    if (owner)
        flags = ra__be_tcache_flags(ts->slots[seen].tcache);
    overflowed = ra__returns_send(seen, bin, items, n, flags);
    ra__returns_leave(seen);
    return overflowed && owner && flags == MALLOCX_TCACHE_NONE;
}

ra_tag_t ra__outbox_put(struct ra__thread_state *ts, ra_tag_t tag,
                        unsigned bin, void *ptr)
{
    /* One tag's bins, jemalloc's 36, fall in different ways, and the small
     * classes of three consecutive tags too. */
    struct ra__outbox_way *w = &ways(ts)[(tag * 21u + bin) % RA__OUTBOX_WAYS];
    uint32_t resets = ra__returns_resets(tag);
    ra_tag_t seen, over = RA_TAG_NONE;

    /* Another batch's way, or this one's from before a reset of the tag
     * (which the send then drops); looked at again after a send, which
     * may have filled it anew. No other thread takes an empty way. */
    while ((seen = way_tag(w)) != tag || w->bin != bin ||
           w->stamp != resets) {
        if (seen != RA_TAG_NONE) {
            if (send(ts, w, seen, true))
                over = seen;
            continue;
        }
        w->bin = bin;
        w->stamp = resets;
        w->max = ra__fc_cap(ra__bin_size[bin]) / 2; /* <= the batch */
        ra__assert(w->max >= 1 && w->max <= RA__OUTBOX_BATCH);
        w->n = 0;
        atomic_store_explicit(&w->tag, tag, memory_order_release);
    }
    /* Invariant 14: the batch's blocks are of its tag and class, all
     * freed since its stamp; it is sent before it is full. */
    ra__assert(ra_tag_of(ptr) == tag && w->stamp == resets &&
               w->bin == bin && w->n < w->max);
    w->items[w->n++] = ptr;
    if (w->n >= w->max && send(ts, w, tag, true))
        over = tag;
    return over;
}

void ra__outbox_flush(struct ra__thread_state *ts, ra_tag_t tag,
                      bool owner)
{
    for (unsigned i = 0; i < RA__OUTBOX_WAYS; i++) {
        struct ra__outbox_way *w = &ways(ts)[i];
        ra_tag_t seen = way_tag(w);
        if (seen != RA_TAG_NONE && (tag == RA_TAG_NONE || seen == tag))
            send(ts, w, seen, owner);
        /* Only the owner fills a way: once it sent a tag's batch, or
         * another sender took it, the way is not that tag's. */
        ra__assert(!owner || tag == RA_TAG_NONE ||
                   atomic_load_explicit(&w->tag, memory_order_relaxed) !=
                       tag);
    }
}

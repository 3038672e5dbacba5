/* Floor: pairs. Each tag's users (its pairs over the threads, and the one
 * thread whose pair is its only one), the counts of threads without a
 * pair (orphans), the calling thread's state (ra__thread, which thread.c
 * makes), and threads_lock, which guards the users lists, every thread's
 * pairs against other threads, and the list of threads. */
#include <sched.h>
#include <stdalign.h>

#include "internal.h"

RA__TLS struct ra__thread_state *ra__thread;

static struct ra__mutex threads_lock = RA__MUTEX_INIT(RA__RANK_THREADS);

/* Counts of exited threads and of requests served without a slot, as a
 * slot's (bytes modulo 2^64), a line a tag: ids side by side are often
 * two threads' requests. */
static struct orphans {
    alignas(64) _Atomic uint64_t nmalloc;
    _Atomic uint64_t ndalloc;
    _Atomic uint64_t bytes;
    /* Allocations, reallocations and frees of the tag on threads without
     * a slot, in flight (ra__orphan_begin). */
    _Atomic unsigned busy;
} orphans[RA__MAX_TAGS_LIMIT + 1];
/* The tag a reset holds still (ra__pairs_hold), or RA_TAG_NONE. */
static _Atomic ra_tag_t holding;

/* Each tag's slots, over the threads that have one (under threads_lock):
 * a reset or destroy visits the threads that used the tag, not every
 * thread of the process. When a tag has one slot, lone says whose it is
 * (NULL otherwise), read without the lock: a thread whose slot is a tag's
 * only one may end the tag, or count it, alone (ra__own_end,
 * ra__thread_counts), since no other thread adds a slot to a tag it
 * neither allocates in nor holds a block of. */
static struct ra__tag_slot *users[RA__MAX_TAGS_LIMIT + 1];
static unsigned nusers[RA__MAX_TAGS_LIMIT + 1];
static _Atomic(struct ra__thread_state *) lone[RA__MAX_TAGS_LIMIT + 1];

void ra__threads_lock(void)
{
    ra__lock(&threads_lock);
}

void ra__threads_unlock(void)
{
    ra__unlock(&threads_lock);
}

#ifdef RA_DEBUG
void ra__threads_assert_held(void)
{
    ra__assert_held(&threads_lock);
}
#endif

struct ra__thread_state *ra__users_thread(struct ra__tag_slot *s,
                                          ra_tag_t tag)
{
    return (struct ra__thread_state *)((char *)(s - tag) -
                                       offsetof(struct ra__thread_state,
                                                slots));
}

static void set_lone(ra_tag_t tag)
{
    atomic_store_explicit(&lone[tag],
                          nusers[tag] == 1 ? ra__users_thread(users[tag], tag)
                                           : NULL,
                          memory_order_release);
}

void ra__users_add(struct ra__tag_slot *s, ra_tag_t tag)
{
    ra__threads_assert_held();
    /* A slot is listed once: it joins at its pair's start only. */
    ra__assert(s != users[tag] && s->users_prev == NULL);
    s->users_next = users[tag];
    s->users_prev = &users[tag];
    if (users[tag] != NULL)
        users[tag]->users_prev = &s->users_next;
    users[tag] = s;
    nusers[tag]++;
    set_lone(tag);
}

void ra__users_remove(struct ra__tag_slot *s, ra_tag_t tag)
{
    ra__threads_assert_held();
    ra__assert(nusers[tag] > 0 && *s->users_prev == s);
    /* Its counts are the orphans' already: a lone reader (no lock) that
     * finds the slot gone finds them there, never in neither place. */
    ra__assert(atomic_load_explicit(&s->nmalloc, memory_order_relaxed) ==
                   0 &&
               atomic_load_explicit(&s->ndalloc, memory_order_relaxed) ==
                   0 &&
               atomic_load_explicit(&s->bytes, memory_order_relaxed) == 0);
    *s->users_prev = s->users_next;
    if (s->users_next != NULL)
        s->users_next->users_prev = s->users_prev;
    s->users_next = NULL;
    s->users_prev = NULL;
    nusers[tag]--;
    /* The list and its length agree. */
    ra__assert((nusers[tag] == 0) == (users[tag] == NULL));
    set_lone(tag);
}

struct ra__tag_slot *ra__users_first(ra_tag_t tag)
{
    ra__threads_assert_held();
    return users[tag];
}

bool ra__users_lone(const struct ra__thread_state *ts, ra_tag_t tag)
{
    return ts != NULL &&
           atomic_load_explicit(&lone[tag], memory_order_acquire) == ts;
}

void ra__count_orphan(ra_tag_t tag, bool alloc, size_t size)
{
    atomic_fetch_add_explicit(alloc ? &orphans[tag].nmalloc
                                    : &orphans[tag].ndalloc,
                              1, memory_order_relaxed);
    atomic_fetch_add_explicit(&orphans[tag].bytes,
                              alloc ? size : -(uint64_t)size,
                              memory_order_relaxed);
}

void ra__orphans_adopt(struct ra__tag_slot *s, ra_tag_t tag)
{
    ra__threads_assert_held();
    atomic_fetch_add_explicit(&orphans[tag].nmalloc,
                              atomic_exchange_explicit(&s->nmalloc, 0,
                                                       memory_order_relaxed),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&orphans[tag].ndalloc,
                              atomic_exchange_explicit(&s->ndalloc, 0,
                                                       memory_order_relaxed),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&orphans[tag].bytes,
                              atomic_exchange_explicit(&s->bytes, 0,
                                                       memory_order_relaxed),
                              memory_order_relaxed);
}

void ra__orphans_all_freed(ra_tag_t tag, const struct ra__counts *c)
{
    ra__assert(c->nmalloc >= c->ndalloc);
    atomic_fetch_add_explicit(&orphans[tag].ndalloc, c->nmalloc - c->ndalloc,
                              memory_order_relaxed);
    atomic_fetch_sub_explicit(&orphans[tag].bytes, c->allocated,
                              memory_order_relaxed);
}

void ra__orphans_forget(ra_tag_t tag)
{
    struct orphans *o = &orphans[tag];

    /* Most tags never had an orphan count: their line is left as it is. */
    if (atomic_load_explicit(&o->nmalloc, memory_order_relaxed) != 0 ||
        atomic_load_explicit(&o->ndalloc, memory_order_relaxed) != 0 ||
        atomic_load_explicit(&o->bytes, memory_order_relaxed) != 0) {
        atomic_store_explicit(&o->nmalloc, 0, memory_order_relaxed);
        atomic_store_explicit(&o->ndalloc, 0, memory_order_relaxed);
        atomic_store_explicit(&o->bytes, 0, memory_order_relaxed);
    }
}

void ra__users_counts(const struct ra__tag_slot *first, bool only,
                      ra_tag_t tag, struct ra__counts *out)
{
    uint64_t m = atomic_load_explicit(&orphans[tag].nmalloc,
                                      memory_order_relaxed);
    uint64_t d = atomic_load_explicit(&orphans[tag].ndalloc,
                                      memory_order_relaxed);
    uint64_t bytes = atomic_load_explicit(&orphans[tag].bytes,
                                          memory_order_relaxed);

    /* A walk of the list needs the lock; one slot alone is its owner's. */
    if (!only)
        ra__threads_assert_held();
    for (const struct ra__tag_slot *s = first; s != NULL;
         s = only ? NULL : s->users_next) {
        m += atomic_load_explicit(&s->nmalloc, memory_order_relaxed);
        d += atomic_load_explicit(&s->ndalloc, memory_order_relaxed);
        bytes += atomic_load_explicit(&s->bytes, memory_order_relaxed);
    }
    out->nmalloc = m;
    out->ndalloc = d;
    /* A block one thread made and another freed, read between the two
     * threads' counts, may show its free first: never below nothing. */
    out->allocated = (int64_t)bytes < 0 ? 0 : (size_t)bytes;
}

/* -- orphans in flight, and the hold -----------------------------------
 * A thread without a slot (exiting) is inside no allocation or free of a
 * held tag: it counts itself in orphans[].busy first, and waits while the
 * tag is held (holding), each side writing before it reads the other's
 * word (sequentially consistent atomics). */

void ra__orphan_begin(ra_tag_t tag)
{
    _Atomic unsigned *busy = &orphans[tag].busy;

    atomic_fetch_add(busy, 1);
    while (atomic_load(&holding) == tag) {
        atomic_fetch_sub(busy, 1);
        /* A reset of the arenas: microseconds to a few milliseconds. */
        while (atomic_load_explicit(&holding, memory_order_relaxed) == tag)
            sched_yield();
        atomic_fetch_add(busy, 1);
    }
}

void ra__orphan_end(ra_tag_t tag)
{
    atomic_fetch_sub_explicit(&orphans[tag].busy, 1, memory_order_release);
}

bool ra__orphans_hold(ra_tag_t tag)
{
    ra__threads_assert_held();
    /* One hold at a time: the lock is kept from here to its release. */
    ra__assert(atomic_load_explicit(&holding, memory_order_relaxed) ==
               RA_TAG_NONE);
    atomic_store(&holding, tag);
    return atomic_load(&orphans[tag].busy) == 0;
}

bool ra__orphans_held(ra_tag_t tag)
{
    return atomic_load_explicit(&holding, memory_order_relaxed) == tag;
}

void ra__orphans_unhold(ra_tag_t tag)
{
    ra__threads_assert_held();
    ra__assert(ra__orphans_held(tag));
    atomic_store(&holding, RA_TAG_NONE);
}

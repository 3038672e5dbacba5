/* Floor: pairs. A thread's state: its slots (one pair per tag, pair.c),
 * made at its first tagged request and released at its exit; the list of
 * threads; the flushes of a thread's caches; a tag's counts over its
 * pairs. */
#include <pthread.h>

#include "backend.h"

#include "internal.h"
#include "tags.h"
#include "pairs.h"

/* Set while this thread sets up its state: allocations it causes (glibc's
 * pthread_setspecific may call calloc) are served uncached, not recursively. */
static RA__TLS bool tls_busy;
/* Set once this thread's state was released at exit: later tagged requests
 * go uncached instead of creating state nobody would release. */
static RA__TLS bool tls_exited;

/* Every thread that has a state, under threads_lock (users.c). */
static struct ra__thread_state all_threads = {
    .prev = &all_threads, .next = &all_threads, .nslots = 0};

void ra__thread_prefork(void)
{
    ra__threads_lock();
}

void ra__thread_postfork_parent(void)
{
    ra__threads_unlock();
}

void ra__thread_postfork_child(void)
{
    /* The child has only the forking thread; the other threads' states stay
     * listed (their counts still belong to the totals) but are never freed. */
    ra__threads_unlock();
}

/* Whether every pair of ts is UNUSED: a state about to be freed. */
static bool all_unused(const struct ra__thread_state *ts)
{
    for (unsigned t = 1; t < ts->nslots; t++)
        if (ra__pair_state(&ts->slots[t]) != RA__PAIR_UNUSED)
            return false;
    return true;
}

void ra__thread_exit(void)
{
    struct ra__thread_state *ts = ra__thread;
    ra_tag_t own[RA__OWN_MAX];
    unsigned nown;

    tls_exited = true;
    if (ts == NULL)
        return;
    ra__thread = NULL;
    /* Before the drains below, which then take its batches too. */
    ra__outbox_flush(ts, RA_TAG_NONE, true);
    /* Destroying a tcache flushes it: the thread's blocks reach their arenas
     * and the id is free for another thread. */
    ra__threads_lock();
    nown = ra__own_drop_all(ts, own);
    for (unsigned t = 1; t < ts->nslots; t++) {
        struct ra__tag_slot *s = &ts->slots[t];
        if (ra__pair_state(s) == RA__PAIR_UNUSED)
            continue;
        /* What this thread left for the tag's other threads goes too: a
         * thread's end makes the figures of its tags exact. */
        ra__returns_drain(t);
        ra__pair_leave(s, t);
    }
    ra__assert(all_unused(ts));
    RA__RING_UNLINK(ts);
    ra__threads_unlock();
    ra__meta_free(ts);
    /* Its own ids' slots are clean now: anyone's to take. */
    for (unsigned i = 0; i < nown; i++)
        ra__tag_release_id(own[i]);
}

static struct ra__thread_state *create_thread_state(void)
{
    unsigned nslots = ra__config()->max_tags + 1;
    size_t size = sizeof(struct ra__thread_state) +
                  nslots * sizeof(struct ra__tag_slot) + ra__outbox_size();
    struct ra__thread_state *ts;

    /* A thread the library did not see start (one that began before it
     * was loaded, or without its pthread_create) is counted from here. */
    ra__untagged_thread_start();
    ts = ra__meta_calloc(1, size);
    if (ts == NULL)
        return NULL;
    ts->nslots = nslots;
    if (ra__thread_exit_arm()) {
        ra__meta_free(ts);
        return NULL;
    }
    ra__threads_lock();
    RA__RING_PUSH(&all_threads, ts);
    ra__threads_unlock();
    ra__thread = ts;
    /* Zeroed: every pair UNUSED. */
    ra__assert(ts->nslots < 2 ||
               ra__pair_state(&ts->slots[1]) == RA__PAIR_UNUSED);
    return ts;
}

struct ra__tag_slot *ra__thread_slot_slow(ra_tag_t tag, bool allocating)
{
    struct ra__thread_state *ts = ra__thread;

    if (tls_busy || tls_exited)
        return NULL;
    tls_busy = true;
    /* Whatever glibc allocates for us meanwhile is the library's. */
    ra__tag_suspend();
    if (ts == NULL)
        ts = create_thread_state();
    if (ts != NULL) {
        struct ra__tag_slot *s = &ts->slots[tag];
        enum ra__pair_state st = ra__pair_state(s);
        if (st == RA__PAIR_UNUSED)
            ra__pair_start(s, tag, allocating);
        else if (st != RA__PAIR_ACTIVE)
            ra__pair_unpark(s);
        if (allocating && !s->allocates)
            ra__pair_start_allocating(s, tag);
        ra__assert(ra__pair_state(s) == RA__PAIR_ACTIVE);
    }
    ra__tag_resume();
    tls_busy = false;
    return ts == NULL ? NULL : &ts->slots[tag];
}

void ra_thread_flush(void)
{
    struct ra__thread_state *ts = ra__thread;

    ra__be_flush_thread_cache();
    if (ts != NULL) {
        ra__outbox_flush(ts, RA_TAG_NONE, true);
        ra__threads_lock();
        for (unsigned t = 1; t < ts->nslots; t++)
            if (ra__pair_state(&ts->slots[t]) != RA__PAIR_UNUSED)
                ra__fc_flush(&ts->slots[t]);
        ra__threads_unlock();
    }
    /* What threads left for each other too, whoever calls: every figure
     * exact after it. */
    ra__returns_drain_all();
}

void ra__thread_flush_tag(ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;

    if (ts == NULL || tag >= ts->nslots)
        return;
    ra__outbox_flush(ts, tag, true);
    /* The slot is read under the lock too: a destroy of the tag, on
     * another thread, starts the pair over under it (ra__pair_restart),
     * and this thread may flush a tag it does not use (a purge of a
     * subtree). */
    ra__threads_lock();
    if (ra__pair_state(&ts->slots[tag]) != RA__PAIR_UNUSED)
        ra__fc_flush(&ts->slots[tag]);
    ra__threads_unlock();
}

void ra__thread_counts(ra_tag_t tag, struct ra__counts *out)
{
    struct ra__thread_state *ts = ra__thread;

    /* The caller's slot is the tag's only one (a request reading its own
     * tag): no other slot to sum, and none can come (ra__users_lone). */
    if (ra__users_lone(ts, tag)) {
        ra__users_counts(&ts->slots[tag], true, tag, out);
        return;
    }
    ra__threads_lock();
    ra__users_counts(ra__users_first(tag), false, tag, out);
    ra__threads_unlock();
}

/* Floor: API. A tag's end: ra_tag_reset frees every block of a tag at once,
 * across threads; ra_tag_destroy also retires the tag, and its id, region
 * and arena serve a later ra_tag_create. */
#include <errno.h>
#include <pthread.h>

#include "backend.h"
#include "budget.h"
#include "instruments.h"
#include "internal.h"
#include "thread_tags.h"

/* One reset or destroy of a tag at a time, each tag's own: ending it walks
 * its slots and closes its return stacks' gate, which only one may do at
 * once; the ends of different tags share no lock of ours, so a tag per
 * request does not queue its destroys behind one another. A reset or
 * destroy holds one tag's lock at a time (of each tag of its subtree in
 * turn), so no two of them wait for each other. All-zero mutexes are
 * glibc's default ones. */
static pthread_mutex_t ending[RA__MAX_TAGS_LIMIT + 1];

/* Frees every block of tag. The caller promised that no thread allocates
 * under the tag or frees one of its blocks meanwhile; what the threads'
 * caches hold is the library's business: forgotten (front caches) or
 * flushed (tcaches) before jemalloc discards the arena's allocations, so
 * that no block comes back twice. A reset gives the pages back. */
static void reset_tag(ra_tag_t tag)
{
    ra__thread_wipe_tag(tag);
    ra__prof_forget(tag, false);
    ra__returns_close(tag);
    ra__pool_reset(tag);
    ra__returns_open(tag);
    ra__pool_purge(tag);
}

/* A destroy also forgets the tag's counts, profile, purges, peak and
 * budget. Its slot keeps its pages, dirty: the next holder allocates into
 * them without a fault, and decay or a purge gives them back. When the
 * program freed every block itself (a request that cleaned up), there is
 * nothing to reset: the threads' caches keep their blocks for the next
 * holder, which then allocates without a call into jemalloc (doc/design.md,
 * a tag's end). */
static void end_tag(ra_tag_t tag)
{
    bool live = ra__thread_end_tag(tag);

    ra__prof_forget(tag, true);
    if (live) {
        ra__returns_close(tag);
        ra__pool_reset(tag);
        ra__returns_open(tag);
    }
    /* A cache, not a hoard: past jemalloc's oversize threshold (8 MiB),
     * what jemalloc itself would give back at once untagged, the slot
     * keeps nothing (a big request's end pays the purge, as its frees
     * would have untagged). */
    if (ra__budget_committed(tag) > ra__be_oversize)
        ra__purge_kept(tag);
    ra__stats_forget(tag);
    ra__budget_forget(tag);
}

/* No end runs across a fork: a child would find a tag half reset and its
 * gate closed for good. The forking thread takes every id's lock, all
 * RA__MAX_TAGS_LIMIT of them: reading REGIONALLOC_MAX_TAGS here would read
 * the configuration at a fork, before a child's own environment, and the
 * ids published so far may grow meanwhile. 4,000 free mutexes are tens of
 * microseconds, a fork's cost and not a request's. */
void ra__lifetime_prefork(void)
{
    for (unsigned t = 1; t <= RA__MAX_TAGS_LIMIT; t++)
        ra__lock(&ending[t]);
}

void ra__lifetime_postfork(void)
{
    for (unsigned t = RA__MAX_TAGS_LIMIT; t >= 1; t--)
        ra__unlock(&ending[t]);
}

/* The pages a destroyed tag's slot keeps are a cache for its next holder;
 * jemalloc decays an arena's unused pages only as the arena is used, so a
 * slot that no holder takes would keep them for good. A destroy makes one
 * idle slot's arena decay (round robin over the idle slots), at most once
 * per DECAY_INTERVAL_NS over the process: pages unused for longer than
 * dirty_decay_ms (10 s by default) go back. At a tag per request a decay
 * at every destroy was a mallctl and a walk of the arena's decay state on
 * every request's time; at most 1,000 a second still visit each of 4,000
 * idle slots every 4 s, well within the 10 s they may keep their pages. */
#define DECAY_INTERVAL_NS 1000000u

static void decay_one_idle(void)
{
    static _Atomic uint64_t last_ns;
    uint64_t now = ra__clock_ns();
    uint64_t last = atomic_load_explicit(&last_ns, memory_order_relaxed);
    ra_tag_t idle;

    if (now - last < DECAY_INTERVAL_NS ||
        !atomic_compare_exchange_strong_explicit(&last_ns, &last, now,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    idle = ra__tag_next_idle();
    if (idle != RA_TAG_NONE)
        ra__pool_decay(idle);
}

static bool subtree_on_my_stack(ra_tag_t root, ra_tag_t *subtree);

/* Room for a subtree: every id that may be handed out. On the stack, not
 * in a static array under a lock of all tags: 1 KiB at the default
 * REGIONALLOC_MAX_TAGS, 16 KiB at its bound. */
#define SUBTREE_ROOM (ra__config()->max_tags + 1)

/* Ends one tag of root's subtree (end: reset_tag or retire_tag) under the
 * tag's own lock. A reset (check) skips a tag that is no longer in the
 * subtree: a concurrent destroy killed it (and ends it itself), and its id
 * may already be another tag's. A destroy ends the tags it killed. */
static void end_one(ra_tag_t tag, ra_tag_t root, void (*end)(ra_tag_t),
                    bool check)
{
    ra__lock(&ending[tag]);
    if (!check || ra__tag_in_subtree(tag, root))
        end(tag);
    ra__unlock(&ending[tag]);
}

int ra_tag_reset(ra_tag_t tag)
{
    ra_tag_t subtree[SUBTREE_ROOM];
    unsigned n;

    if (ra__check_call(ra__tag_valid(tag)) != 0)
        return -1;
    /* A tag the caller has pushed, or a thread's base tag, is in use: its
     * next allocation would land in the tag just emptied (nothing done, as
     * for a destroy). */
    if (subtree_on_my_stack(tag, subtree)) {
        errno = EBUSY;
        return -1;
    }
    n = ra__tag_subtree(tag, subtree);
    if (ra__thread_tags_base_in(subtree, n)) {
        errno = EBUSY;
        return -1;
    }
    for (unsigned i = 0; i < n; i++)
        end_one(subtree[i], tag, reset_tag, true);
    return 0;
}

static bool on_my_stack(ra_tag_t tag)
{
    for (unsigned d = 1; d <= ra__tag_stack.depth; d++)
        if (ra__tag_stack.items[d] == tag)
            return true;
    return false;
}

/* Whether a tag of root's subtree is on the caller's stack; subtree is
 * room for it. */
static bool subtree_on_my_stack(ra_tag_t root, ra_tag_t *subtree)
{
    unsigned n = ra__tag_subtree(root, subtree);

    for (unsigned i = 0; i < n; i++)
        if (on_my_stack(subtree[i]))
            return true;
    return false;
}

/* A destroyed tag's end, for its next holder: its id goes back last. */
static void retire_tag(ra_tag_t tag)
{
    end_tag(tag);
    ra__pool_recycle(tag);
    ra__tag_release_id(tag);
}

int ra_tag_destroy(ra_tag_t tag)
{
    ra_tag_t subtree[SUBTREE_ROOM];
    unsigned n;
    int rc;

    if (ra__check_call(ra__tag_valid(tag)) != 0)
        return -1;
    if (subtree_on_my_stack(tag, subtree)) {
        errno = EBUSY;
        return -1;
    }
    /* Dead first, the whole subtree at once: from here on every call on
     * them fails, then each is emptied, children before their parent. A
     * thread's base tag (REGIONALLOC_THREAD_TAGS) is in use as much as a
     * pushed one. */
    rc = ra__thread_tags_kill(tag, subtree, &n);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    for (unsigned i = 0; i < n; i++)
        end_one(subtree[i], tag, retire_tag, false);
    decay_one_idle();
    return 0;
}

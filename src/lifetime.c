/* Floor: API. A tag's end: ra_tag_reset frees every block of a tag at once,
 * across threads; ra_tag_destroy also retires the tag, and its id, region
 * and arena serve a later ra_tag_create. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "backend.h"
#include "budget.h"
#include "instruments.h"
#include "internal.h"
#include "thread_tags.h"

/* Two kinds of end. A destroy of a tag without children (every request's
 * tag) touches that tag alone, under the locks of what it empties (the
 * threads', the registry's, the budget's: each held for a step), so such
 * ends run side by side: a lock of all tags on every request's end was
 * what two threads serving requests queued on (examples/requests: most of
 * the futex waits, a destroy 10x slower on 2 threads than on one). A
 * reset, a destroy of a tree, and a fork are exclusive: they hold
 * lifetime_lock, say so in exclusive, and wait for the leaf ends in
 * flight to finish; a leaf end that finds one wanted takes the lock too.
 * Both sides write their word before they read the other's (sequentially
 * consistent atomics), so one of them always sees the other. */
static pthread_mutex_t lifetime_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint exclusive;
static atomic_uint leaf_ends;
/* The subtree an exclusive reset or destroy acts on (tag trees). */
static ra_tag_t subtree[RA__MAX_TAGS_LIMIT];

static void exclusive_begin(void)
{
    ra__lock(&lifetime_lock);
    atomic_fetch_add(&exclusive, 1);
    /* A leaf end lasts microseconds and never waits for this lock. */
    while (atomic_load(&leaf_ends) != 0)
        sched_yield();
}

static void exclusive_end(void)
{
    atomic_fetch_sub(&exclusive, 1);
    ra__unlock(&lifetime_lock);
}

static bool leaf_begin(void)
{
    atomic_fetch_add(&leaf_ends, 1);
    if (atomic_load(&exclusive) == 0)
        return true;
    atomic_fetch_sub(&leaf_ends, 1);
    return false;
}

static void leaf_end(void)
{
    atomic_fetch_sub(&leaf_ends, 1);
}

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
    ra__leftovers_forget(tag); /* earlier holders' too */
}

/* A destroy also forgets the tag's counts, profile, purges, peak and
 * budget. Its slot keeps its pages, dirty: the next holder allocates into
 * them without a fault, and decay or a purge gives them back. When the
 * program freed every block itself (a request that cleaned up), or left
 * only a few live (leftovers.c), there is no reset: the threads' caches
 * keep their blocks for the next holder, which then allocates without a
 * call into jemalloc, and the few stay allocated until a later reset frees
 * them with the rest (doc/design.md, a tag's end). */
static void end_tag(ra_tag_t tag)
{
    size_t left;
    bool reset = ra__thread_end_tag(tag, ra__leftovers_room(tag), &left);

    ra__prof_forget(tag, true);
    if (reset) {
        ra__returns_close(tag);
        ra__pool_reset(tag);
        ra__returns_open(tag);
        ra__leftovers_forget(tag);
    } else {
        ra__leftovers_add(tag, left);
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

/* No end runs at a fork: the child's return stacks' gates are all open,
 * and no id is half released. */
void ra__lifetime_prefork(void)
{
    exclusive_begin();
}

void ra__lifetime_postfork(void)
{
    exclusive_end();
}

static bool subtree_on_my_stack(ra_tag_t root);

int ra_tag_reset(ra_tag_t tag)
{
    unsigned n;

    if (ra__check_call(ra__tag_valid(tag)) != 0)
        return -1;
    exclusive_begin();
    /* A tag the caller has pushed, or a thread's base tag, is in use: its
     * next allocation would land in the tag just emptied (nothing done, as
     * for a destroy). */
    if (subtree_on_my_stack(tag)) {
        exclusive_end();
        errno = EBUSY;
        return -1;
    }
    n = ra__tag_subtree(tag, subtree);
    if (ra__thread_tags_base_in(subtree, n)) {
        exclusive_end();
        errno = EBUSY;
        return -1;
    }
    for (unsigned i = 0; i < n; i++)
        reset_tag(subtree[i]);
    exclusive_end();
    return 0;
}

static bool on_my_stack(ra_tag_t tag)
{
    for (unsigned d = 1; d <= ra__tag_stack.depth; d++)
        if (ra__tag_stack.items[d] == tag)
            return true;
    return false;
}

/* With the lifetime lock held: whether a tag of root's subtree is on the
 * caller's stack. */
static bool subtree_on_my_stack(ra_tag_t root)
{
    unsigned n;

    /* Nothing pushed (a request's tag popped before its destroy): nothing
     * to find, and the registry need not gather the subtree a second time
     * (the kill does). A thread's base tag is checked by the kill. */
    if (ra__tag_stack.depth == 0)
        return false;
    n = ra__tag_subtree(root, subtree);

    for (unsigned i = 0; i < n; i++)
        if (on_my_stack(subtree[i]))
            return true;
    return false;
}

/* A destroy of a tag without children, beside other such ends: 0 or an
 * errno when done (or refused), -1 when the tag has children (or gained
 * one meanwhile), or an exclusive end runs: the caller takes the lock. */
static int destroy_leaf(ra_tag_t tag)
{
    int rc;

    if (!leaf_begin())
        return -1;
    if (on_my_stack(tag)) {
        leaf_end();
        return EBUSY;
    }
    rc = ra__thread_tags_kill_leaf(tag);
    if (rc == 0) {
        end_tag(tag);
        ra__pool_recycle(tag);
        ra__tag_release_id(tag);
        ra__leftovers_decay_one();
    }
    leaf_end();
    return rc;
}

int ra_tag_destroy(ra_tag_t tag)
{
    unsigned n;
    int rc;

    if (ra__check_call(ra__tag_valid(tag)) != 0)
        return -1;
    rc = destroy_leaf(tag);
    if (rc > 0)
        errno = rc;
    if (rc >= 0)
        return rc == 0 ? 0 : -1;
    exclusive_begin();
    if (subtree_on_my_stack(tag)) {
        exclusive_end();
        errno = EBUSY;
        return -1;
    }
    /* Dead first, the whole subtree at once: from here on every call on
     * them fails, then each is emptied, children before their parent. A
     * thread's base tag (REGIONALLOC_THREAD_TAGS) is in use as much as a
     * pushed one. */
    rc = ra__thread_tags_kill(tag, subtree, &n);
    if (rc != 0) {
        exclusive_end();
        errno = rc;
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        end_tag(subtree[i]);
        ra__pool_recycle(subtree[i]);
        ra__tag_release_id(subtree[i]);
        ra__leftovers_decay_one();
    }
    exclusive_end();
    return 0;
}

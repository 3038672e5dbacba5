/* Floor: API. A tag's life: ra_tag_create and ra_tag_create_in make one
 * (with an id of the calling thread's own when it has one), ra_tag_reset
 * frees every block of a tag at once, across threads, and ra_tag_destroy
 * also retires the tag, whose id, region and arena serve a later
 * creation. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>

#include "backend.h"
#include "budget.h"
#include "instruments.h"
#include "internal.h"
#include "tags.h"
#include "pairs.h"
#include "ends.h"
#include "api.h"
#include "measure.h"
#include "thread_tags.h"
#include "by_library.h"

/* Two kinds of end. A destroy of a tag without children (every request's
 * tag) touches that tag alone, under the locks of what it empties, each
 * held for a step, and none when the calling thread's pair is the tag's
 * only one (ra__own_end), so such ends run side by side: a lock of
 * all tags on every request's end was what two threads serving requests
 * queued on (examples/requests: most of the futex waits, a destroy 10x
 * slower on 2 threads than on one). A reset, a destroy of a tree, and a
 * fork are exclusive: they hold lifetime_lock, say so in exclusive, and
 * wait for the leaf ends in flight to finish; a leaf end that finds one
 * wanted takes the lock too. Both sides write their word before they read
 * the other's (sequentially consistent atomics), so one of them always
 * sees the other. A leaf end counts itself on a line of its thread's (one
 * of LEAF_LINES, threads spread over them in turn), not on one line of
 * all threads', and an exclusive end waits for each line to read 0 once:
 * a leaf end that counts itself on a line after that sees the exclusive
 * end and backs off. */
#define LEAF_LINES 64u
static struct ra__mutex lifetime_lock = RA__MUTEX_INIT(RA__RANK_LIFETIME);
static atomic_uint exclusive;
static struct {
    alignas(64) atomic_uint ends;
} leaf_lines[LEAF_LINES];
static atomic_uint lines_given;
static RA__TLS unsigned tls_line; /* the line's index + 1; 0: none yet */
/* The subtree an exclusive reset or destroy acts on (tag trees). */
static ra_tag_t subtree[RA__MAX_TAGS_LIMIT];

static void exclusive_begin(void)
{
    ra__lock(&lifetime_lock);
    atomic_fetch_add(&exclusive, 1);
    /* A leaf end lasts microseconds and never waits for this lock. */
    for (unsigned i = 0; i < LEAF_LINES; i++)
        while (atomic_load(&leaf_lines[i].ends) != 0)
            sched_yield();
}

static void exclusive_end(void)
{
    atomic_fetch_sub(&exclusive, 1);
    ra__unlock(&lifetime_lock);
}

static atomic_uint *my_line(void)
{
    if (RA__UNLIKELY(tls_line == 0))
        tls_line = atomic_fetch_add_explicit(&lines_given, 1,
                                             memory_order_relaxed) %
                       LEAF_LINES +
                   1;
    return &leaf_lines[tls_line - 1].ends;
}

static bool leaf_begin(void)
{
    atomic_uint *line = my_line();

    atomic_fetch_add(line, 1);
    if (atomic_load(&exclusive) == 0)
        return true;
    atomic_fetch_sub(line, 1);
    return false;
}

static void leaf_end(void)
{
    atomic_fetch_sub(my_line(), 1);
}

/* -- creation ------------------------------------------------------------ */

/* A tag tree's budgets count its tags' commits (tag: what the creation
 * under parent gave, or RA_TAG_NONE): a recycled slot's leftovers
 * (leftovers.c) would charge every ancestor for blocks nobody can free.
 * They are freed as the child starts, before anybody used it; when they
 * did not fit an ancestor's hard limit (ENOMEM), every idle slot's are,
 * and the creation tries once more. */
static ra_tag_t into_tree(ra_tag_t tag, ra_tag_t parent, const char *name)
{
    if (tag != RA_TAG_NONE) {
        ra__leftovers_reclaim(tag);
        return tag;
    }
    if (errno != ENOMEM || ra__leftovers_total() == 0)
        return RA_TAG_NONE;
    ra__leftovers_reclaim_all();
    return ra__purge_create(parent, name, false, NULL);
}

/* A tag's creation takes an id of the calling thread's own first (one its
 * last destroys ended alone: its caches warm, no lock of all threads on
 * either end), and when no id is left anywhere, takes one away from the
 * thread that owns it rather than fail. */
static ra_tag_t create(ra_tag_t parent, const char *name, bool anywhere)
{
    ra_tag_t own = ra__own_reuse();
    ra_tag_t tag = ra__purge_create(parent, name, anywhere, &own), taken;

    if (tag == RA_TAG_NONE && errno == ENOSPC &&
        ra__own_seize(&taken, 1, false) == 1) {
        ra__tag_release_id(taken);
        tag = ra__purge_create(parent, name, anywhere, NULL);
    }
    /* The new arena's first pages were refused by the memory limit: what
     * the process frees goes back, and one more try, as an allocation. */
    if (tag == RA_TAG_NONE && errno == ENOMEM &&
        ra__budget_refused_by_pressure()) {
        ra__give_back_after_refusal(RA_TAG_NONE);
        tag = ra__purge_create(parent, name, anywhere, NULL);
    }
    if (parent != RA_TAG_NONE)
        tag = into_tree(tag, parent, name);
    if (own != RA_TAG_NONE)
        ra__own_keep(own);
    return tag;
}

ra_tag_t ra_tag_create(const char *name)
{
    return create(RA_TAG_NONE, name, true);
}

ra_tag_t ra_tag_create_in(ra_tag_t parent, const char *name)
{
    return create(parent, name, false);
}

/* -- the ends ------------------------------------------------------------ */

/* Frees every block of tag. The caller promised that no thread allocates
 * under the tag or frees one of its blocks meanwhile; what the threads'
 * caches hold is the library's business: forgotten (front caches) or
 * flushed (tcaches) before jemalloc discards the arena's allocations, so
 * that no block comes back twice. A reset gives the pages back. */
static void reset_tag(ra_tag_t tag)
{
    ra__prof_forget(tag, false);
    ra__leftovers_reset(tag); /* earlier holders' leftovers too */
}

/* What a destroy forgets of a tag, whatever its slot keeps: its purges,
 * peak, budget and pool bound. A cache, not a hoard: past jemalloc's
 * oversize threshold (8 MiB), what jemalloc itself would give back at once
 * untagged, the slot keeps nothing (a big request's end pays the purge, as
 * its frees would have untagged). */
static void forget_tag(ra_tag_t tag)
{
    ra__prof_forget(tag, true);
    if (ra__budget_committed(tag) > ra__be_oversize)
        ra__purge_kept(tag);
    ra__stats_forget(tag);
    ra__budget_forget(tag);
    ra__pool_recycle(tag);
}

/* A destroy also forgets the tag's counts and profile. Its slot keeps its
 * pages, dirty: the next holder allocates into them without a fault, and
 * decay or a purge gives them back. When the program freed every block
 * itself (a request that cleaned up), or left only a few live
 * (leftovers.c), there is no reset: the threads' caches keep their blocks
 * for the next holder, which then allocates without a call into jemalloc,
 * and the few stay allocated until a later reset frees them with the rest
 * (doc/design.md, a tag's end). Then the id is queued for any creation. */
static void end_tag(ra_tag_t tag)
{
    size_t left;
    bool reset = ra__pairs_end(tag, ra__leftovers_allowance(tag), &left);

    if (reset) {
        ra__returns_close(tag);
        ra__pool_reset(tag);
        ra__returns_open(tag);
        ra__leftovers_forget(tag);
    } else {
        ra__leftovers_add(tag, left);
    }
    forget_tag(tag);
    ra__tag_release_id(tag);
}

/* The end of a tag that the calling thread alone used and left nothing
 * live in: its pair stays as it is, and the id is the thread's own, for
 * its next creation. False when it is not such a tag. */
static bool end_own(ra_tag_t tag)
{
    if (!ra__own_end(tag))
        return false;
    forget_tag(tag);
    ra__own_keep(tag);
    return true;
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

void ra__lifetime_postfork_child(void)
{
    unsigned count = ra__tag_published();

    exclusive_end();
    for (ra_tag_t t = 1; t <= count; t++)
        if (!ra__own_has_owner(t) && ra__tag_in_limbo(t))
            ra__tag_release_id(t);
}

static bool subtree_on_my_stack(ra_tag_t root);

/* Tags by calling object ("libraries" and each object's, top-level and
 * its children): every thread allocates into them without a push, for as
 * long as the process lives, and their blocks are the objects' own. A
 * reset or destroy of one is refused (EBUSY), as a thread's base tag's. */
static bool held_by_objects(ra_tag_t tag)
{
    if (!ra__by_library_holds(tag))
        return false;
    errno = EBUSY;
    return true;
}

int ra_tag_reset(ra_tag_t tag)
{
    unsigned n;

    if (ra__check_call(ra__tag_valid(tag)) != 0 || held_by_objects(tag))
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
    /* The pages the reset gave back show at once (measure.c). */
    for (unsigned i = 0; i < n; i++)
        (void)ra__measure_tag(subtree[i], NULL);
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

    ra__assert_held(&lifetime_lock);
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
        if (!end_own(tag))
            end_tag(tag);
        ra__leftovers_decay_one();
    }
    leaf_end();
    return rc;
}

int ra_tag_destroy(ra_tag_t tag)
{
    unsigned n;
    int rc;

    if (ra__check_call(ra__tag_valid(tag)) != 0 || held_by_objects(tag))
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
        ra__leftovers_decay_one();
    }
    exclusive_end();
    return 0;
}

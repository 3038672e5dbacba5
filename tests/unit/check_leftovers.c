/* Suite "leftovers (unit)": what destroys left live in a slot, freed by a
 * reset of the slot under a later holder that holds nothing, and what may
 * not meet that reset.
 *
 * A thread without a slot (exiting) allocates and frees uncached, and
 * counts after it made the block or before it gave it back: a reset of an
 * unused holder that read the counts in between would free the block under
 * it. The tests force that interleaving: the test replaces jemalloc's
 * mallocx and dallocx with spies that, on such a thread, wait between the
 * block and its count for the other thread's purge of the holder (a
 * bounded wait: with the gate the purge does not reset, and returns), and
 * the link wraps ra__be_arena_reset to see a reset begin meanwhile. A
 * reset then is the defect, whether or not jemalloc crashes after it. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "backend.h"
#include "budget.h"
#include "ends.h"
#include "internal.h"
#include "testutil.h"

#define LEFT_BLOCKS 8
#define BLOCK 64
/* How long the thread without a slot waits for the purge. */
#define HOLD_MS 300

bool __real_ra__be_arena_reset(unsigned arena);

static ra_tag_t watched = RA_TAG_NONE;
static pthread_t orphan;
static void *(*real_mallocx)(size_t, int);
static void (*real_dallocx)(void *, int);
static _Atomic bool waiting, purged;
static _Atomic unsigned late_resets;
static void *_Atomic freeing; /* the block the orphan's free holds */
static bool hold_allocation;   /* or the allocation is held */

static void wait_for(_Atomic bool *flag, unsigned ms)
{
    struct timespec pause = {0, 1000000};

    for (unsigned i = 0; (ms == 0 || i < ms) && !atomic_load(flag); i++)
        nanosleep(&pause, NULL);
}

/* ra_tag_reset's thread, held in its reset of the arena (resetter), and
 * the resets of the watched arena under way. */
static __thread bool is_resetter;
static _Atomic bool resetting;
static _Atomic unsigned resets_under_way, resets_at_once;

bool __wrap_ra__be_arena_reset(unsigned arena)
{
    bool mine = watched != RA_TAG_NONE && ra__pool_owner(arena) == watched;
    bool failed;

    if (mine && atomic_load(&waiting))
        atomic_fetch_add(&late_resets, 1);
    if (mine && atomic_fetch_add(&resets_under_way, 1) != 0)
        atomic_fetch_add(&resets_at_once, 1);
    if (mine && is_resetter) {
        atomic_store(&resetting, true);
        wait_for(&purged, HOLD_MS);
    }
    failed = __real_ra__be_arena_reset(arena);
    if (mine)
        atomic_fetch_sub(&resets_under_way, 1);
    return failed;
}

/* Between the block and its count, or its count and its free. */
static void hold_the_orphan(void)
{
    atomic_store(&waiting, true);
    wait_for(&purged, HOLD_MS);
    atomic_store(&waiting, false);
}

static void *spy_mallocx(size_t size, int flags)
{
    void *p = real_mallocx(size, flags);

    if (p != NULL && hold_allocation && pthread_equal(pthread_self(), orphan) &&
        ra_tag_of(p) == watched)
        hold_the_orphan();
    return p;
}

static void spy_dallocx(void *ptr, int flags)
{
    if (ptr == atomic_load(&freeing) && pthread_equal(pthread_self(), orphan))
        hold_the_orphan();
    real_dallocx(ptr, flags);
}

/* A tag that leaves LEFT_BLOCKS blocks live and is destroyed (no hard
 * limit exists: they stay in the slot), then the next holder of its id,
 * used by nobody. */
static ra_tag_t holder_with_leftovers(void)
{
    ra_tag_t tag = tu_tag_create("request"), next;

    for (unsigned i = 0; i < LEFT_BLOCKS; i++)
        ck_assert_ptr_nonnull(ra_malloc_tag(tag, BLOCK));
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    ck_assert_uint_ge(ra__leftovers_total(), LEFT_BLOCKS * BLOCK);
    next = tu_tag_create("holder");
    ck_assert_uint_eq(next, tag);
    return next;
}

enum orphan_does { ALLOCATES, FREES };

struct world {
    ra_tag_t holder;
    enum orphan_does does;
    void *block; /* the holder's one block, made and freed by the orphan */
};

static void *be_an_orphan(void *arg)
{
    struct world *w = arg;

    /* What the thread's end does: from here on it has no slot, and its
     * tagged requests go uncached. */
    ra__thread_exit();
    w->block = ra_malloc_tag(w->holder, BLOCK);
    if (w->does == FREES) {
        atomic_store(&freeing, w->block);
        ra_free(w->block);
    }
    return NULL;
}

/* The orphan allocates (or, having allocated, frees) the holder's only
 * block while this thread purges the holder, which would reset the slot
 * to free the leftovers if it counted nothing live. */
static void race(enum orphan_does does)
{
    struct world w = {holder_with_leftovers(), does, NULL};
    unsigned late;

    real_mallocx = atomic_load(&ra__je.mallocx_fn);
    real_dallocx = atomic_load(&ra__je.dallocx_fn);
    atomic_store(&ra__je.mallocx_fn, spy_mallocx);
    atomic_store(&ra__je.dallocx_fn, spy_dallocx);
    watched = w.holder;
    hold_allocation = does == ALLOCATES;
    ck_assert_int_eq(pthread_create(&orphan, NULL, be_an_orphan, &w), 0);
    wait_for(&waiting, 0);
    ck_assert_int_eq(ra_tag_purge(w.holder), 0);
    atomic_store(&purged, true);
    ck_assert_int_eq(pthread_join(orphan, NULL), 0);
    watched = RA_TAG_NONE;
    late = atomic_load(&late_resets);
    ck_assert_msg(late == 0, "%u reset(s) of the slot under the orphan", late);
    ck_assert_ptr_nonnull(w.block);
    /* Once the orphan is done, nothing keeps them. */
    if (does == ALLOCATES)
        ra_free(w.block);
    ck_assert_int_eq(ra_tag_purge(w.holder), 0);
    ck_assert_uint_eq(ra__leftovers_total(), 0);
}

START_TEST(test_leftovers_unit_no_reset_meets_an_orphan_allocation)
{
    race(ALLOCATES);
}
END_TEST

START_TEST(test_leftovers_unit_no_reset_meets_an_orphan_free)
{
    race(FREES);
}
END_TEST

static void *reset_it(void *arg)
{
    is_resetter = true;
    ck_assert_int_eq(ra_tag_reset(*(ra_tag_t *)arg), 0);
    return NULL;
}

/* ra_tag_reset of a holder that nobody used, and a purge of it on another
 * thread that would free its leftovers with a reset of its own: one after
 * the other (the purge, held off while the reset runs, then finds
 * nothing left), never two resets of the arena at once, whose second
 * would open the return stacks' gate under the first. */
START_TEST(test_leftovers_unit_a_reset_and_a_reclaim_take_turns)
{
    ra_tag_t holder = holder_with_leftovers();
    pthread_t resetter;
    unsigned at_once;

    watched = holder;
    ck_assert_int_eq(pthread_create(&resetter, NULL, reset_it, &holder), 0);
    wait_for(&resetting, 0);
    ck_assert_int_eq(ra_tag_purge(holder), 0);
    atomic_store(&purged, true);
    ck_assert_int_eq(pthread_join(resetter, NULL), 0);
    watched = RA_TAG_NONE;
    at_once = atomic_load(&resets_at_once);
    ck_assert_msg(at_once == 0, "%u reset(s) of the arena at once", at_once);
    ck_assert_uint_eq(ra__leftovers_total(), 0);
}
END_TEST

/* The memory limit's give-back (a refused allocation's pass over every
 * tag) frees leftovers too: an idle slot's, and a holder's that nobody
 * used. */
START_TEST(test_leftovers_unit_give_back_frees_them)
{
    ra_tag_t holder = holder_with_leftovers();

    ra__give_back_by_priority(0, false);
    ck_assert_uint_eq(ra__leftovers_total(), 0);
    ck_assert_int_eq(ra_tag_destroy(holder), 0);

    holder = holder_with_leftovers();
    ck_assert_int_eq(ra_tag_destroy(holder), 0);
    ck_assert_uint_ge(ra__leftovers_total(), LEFT_BLOCKS * BLOCK);
    ra__give_back_by_priority(0, false);
    ck_assert_uint_eq(ra__leftovers_total(), 0);
}
END_TEST

static Suite *leftovers_suite(void)
{
    Suite *s = suite_create("leftovers (unit)");
    TCase *race_case = tcase_create("orphans against resets");
    TCase *give_back = tcase_create("give-back");

    tcase_set_timeout(race_case, 60);
    tcase_add_test(race_case,
                   test_leftovers_unit_no_reset_meets_an_orphan_allocation);
    tcase_add_test(race_case, test_leftovers_unit_no_reset_meets_an_orphan_free);
    tcase_add_test(race_case, test_leftovers_unit_a_reset_and_a_reclaim_take_turns);
    suite_add_tcase(s, race_case);
    tcase_add_test(give_back, test_leftovers_unit_give_back_frees_them);
    suite_add_tcase(s, give_back);
    return s;
}

int main(void)
{
    return tu_run_suite(leftovers_suite());
}

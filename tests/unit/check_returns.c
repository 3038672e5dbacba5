/* Suite "returns (unit)": a tag's return stacks, and what may empty them
 * while a reset or a destroy discards the tag's arenas.
 *
 * A drain takes a stack whole and frees its blocks one by one; a reset
 * that ran in between would find the stack empty and reset the arena under
 * the drain. The tests force that interleaving: the link wraps
 * ra__pairs_wipe and ra__pairs_end (the reset's and the
 * destroy's first step) and ra__be_arena_reset, and the test replaces
 * jemalloc's sdallocx with a spy; the drain, once it holds blocks of the
 * tag, waits for the reset to finish (a bounded wait: with the gate the
 * reset cannot finish, and waits for the drain instead). A block freed by
 * a drain after the arena's reset began is the defect, whether or not
 * jemalloc then crashes. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "budget.h"
#include "internal.h"
#include "testutil.h"

#define BLOCK 64
#define NBLOCKS 600
/* How long each side waits for the other before it goes on alone. */
#define HOLD_MS 300

bool __real_ra__be_arena_reset(unsigned arena);
void __real_ra__pairs_wipe(ra_tag_t tag);
bool __real_ra__pairs_end(ra_tag_t tag, size_t leave, size_t *left);

enum drain_by { BY_FLUSH, BY_PURGE_ALL, BY_EXIT, BY_BUDGET };

static ra_tag_t watched = RA_TAG_NONE;
static pthread_t drainer;
static void *drainer_own_block; /* freed by the drainer itself, not drained */
static void (*real_sdallocx)(void *, size_t, int);
static _Atomic bool drainer_ready, caches_passed, taken, reset_began, reset_done;
static _Atomic unsigned late_frees, drained;

static void wait_for(_Atomic bool *flag, unsigned ms)
{
    struct timespec pause = {0, 1000000};

    for (unsigned i = 0; (ms == 0 || i < ms) && !atomic_load(flag); i++)
        nanosleep(&pause, NULL);
}

static void spy_sdallocx(void *ptr, size_t size, int flags)
{
    if (watched != RA_TAG_NONE && ptr != drainer_own_block &&
        ra_tag_of(ptr) == watched && pthread_equal(pthread_self(), drainer)) {
        atomic_fetch_add(&drained, 1);
        if (!atomic_exchange(&taken, true))
            wait_for(&reset_done, HOLD_MS);
        if (atomic_load(&reset_began))
            atomic_fetch_add(&late_frees, 1);
    }
    real_sdallocx(ptr, size, flags);
}

/* The reset's (or destroy's) first step is over: let the drainer go, and
 * give it the time to take the stacks. */
static void after_caches(void)
{
    atomic_store(&caches_passed, true);
    wait_for(&taken, HOLD_MS);
}

void __wrap_ra__pairs_wipe(ra_tag_t tag)
{
    __real_ra__pairs_wipe(tag);
    if (tag == watched)
        after_caches();
}

bool __wrap_ra__pairs_end(ra_tag_t tag, size_t leave, size_t *left)
{
    bool live = __real_ra__pairs_end(tag, leave, left);

    if (tag == watched)
        after_caches();
    return live;
}

bool __wrap_ra__be_arena_reset(unsigned arena)
{
    if (watched != RA_TAG_NONE && ra__pool_owner(arena) == watched)
        atomic_store(&reset_began, true);
    return __real_ra__be_arena_reset(arena);
}

struct world {
    ra_tag_t parent, x, y;
    void *live; /* one block of x left to the reset */
    enum drain_by by;
};

static void *produce(void *arg)
{
    struct world *w = arg;
    void **blocks = malloc(NBLOCKS * sizeof *blocks);

    tu_tag_push(w->x);
    for (unsigned i = 0; i < NBLOCKS; i++)
        blocks[i] = ra_malloc(BLOCK);
    w->live = ra_malloc(BLOCK);
    tu_tag_pop(w->x);
    return blocks;
}

/* x's return stack of the class, filled by this thread's frees of blocks
 * another thread made (its front cache overflows onto the stack). */
static void fill_returns(struct world *w)
{
    pthread_t t;
    void **blocks;

    ck_assert_int_eq(pthread_create(&t, NULL, produce, w), 0);
    ck_assert_int_eq(pthread_join(t, (void **)&blocks), 0);
    for (unsigned i = 0; i < NBLOCKS; i++)
        ra_free(blocks[i]);
    free(blocks);
}

static void *drain(void *arg)
{
    struct world *w = arg;

    /* A thread that uses tags, not x. */
    ra_free(ra_malloc_tag(w->y, BLOCK));
    /* The exit drains only the tags it freed a block of; the budget's
     * path flushes this thread's own caches of x too. */
    if (w->by == BY_EXIT || w->by == BY_BUDGET)
        ra_free(drainer_own_block);
    /* From here on this thread touches no block of x (the reset's
     * contract). */
    atomic_store(&drainer_ready, true);
    wait_for(&caches_passed, 0);
    switch (w->by) {
    case BY_FLUSH:
        ra_thread_flush();
        break;
    case BY_PURGE_ALL:
        ck_assert_int_eq(ra_purge_all(), 0);
        break;
    case BY_EXIT:
        break;
    case BY_BUDGET:
        /* Refused by the parent's budget: the retry purges its subtree,
         * x's stacks included. */
        tu_tag_push(w->y);
        ck_assert_ptr_null(ra_malloc(8 << 20));
        tu_tag_pop(w->y);
        break;
    }
    return NULL;
}

static void make_world(struct world *w, enum drain_by by)
{
    w->by = by;
    w->parent = tu_tag_create("parent");
    w->x = ra_tag_create_in(w->parent, "x");
    w->y = ra_tag_create_in(w->parent, "y");
    ck_assert_uint_ne(w->x, RA_TAG_NONE);
    ck_assert_uint_ne(w->y, RA_TAG_NONE);
    drainer_own_block = ra_malloc_tag(w->x, BLOCK);
    ck_assert_ptr_nonnull(drainer_own_block);
    fill_returns(w);
    if (by == BY_BUDGET) {
        /* Room for a little more, not for what the sibling asks. */
        ra_tag_limit_t limit = {0, 0, NULL, NULL};
        limit.hard = ra__budget_tree(w->parent) + (1 << 20);
        ck_assert_int_eq(ra_tag_set_limit(w->parent, &limit), 0);
    }
    real_sdallocx = atomic_load(&ra__je.sdallocx_fn);
    atomic_store(&ra__je.sdallocx_fn, spy_sdallocx);
}

/* ends: ra_tag_reset or ra_tag_destroy of x, while another thread drains
 * by; w is x's world, for what the caller checks next. */
static void race(enum drain_by by, int (*ends)(ra_tag_t), struct world *w)
{
    make_world(w, by);
    ck_assert_int_eq(pthread_create(&drainer, NULL, drain, w), 0);
    wait_for(&drainer_ready, 0);
    watched = w->x;
    ck_assert_int_eq(ends(w->x), 0);
    atomic_store(&reset_done, true);
    ck_assert_int_eq(pthread_join(drainer, NULL), 0);
    watched = RA_TAG_NONE;
    ck_assert_msg(atomic_load(&taken), "the drain took nothing of the tag");
    ck_assert_uint_eq(atomic_load(&late_frees), 0);
}

START_TEST(test_returns_unit_reset_waits_for_a_flush)
{
    struct world w;

    race(BY_FLUSH, ra_tag_reset, &w);
}
END_TEST

START_TEST(test_returns_unit_reset_waits_for_purge_all)
{
    struct world w;

    race(BY_PURGE_ALL, ra_tag_reset, &w);
}
END_TEST

START_TEST(test_returns_unit_reset_waits_for_an_exit)
{
    struct world w;

    race(BY_EXIT, ra_tag_reset, &w);
}
END_TEST

START_TEST(test_returns_unit_reset_waits_for_a_refused_sibling)
{
    struct world w;

    race(BY_BUDGET, ra_tag_reset, &w);
}
END_TEST

START_TEST(test_returns_unit_destroy_waits_for_a_flush)
{
    struct world w;

    race(BY_FLUSH, ra_tag_destroy, &w);
}
END_TEST

START_TEST(test_returns_unit_destroy_waits_for_an_exit)
{
    struct world w;

    race(BY_EXIT, ra_tag_destroy, &w);
}
END_TEST

START_TEST(test_returns_unit_destroy_waits_for_a_refused_sibling)
{
    struct world w;

    race(BY_BUDGET, ra_tag_destroy, &w);
}
END_TEST

/* After the race, the tag's blocks are new and distinct: none of the
 * reset's blocks came back twice. */
START_TEST(test_returns_unit_blocks_after_the_race_are_distinct)
{
    enum { N = 4 * NBLOCKS };
    void **blocks = malloc(N * sizeof *blocks);
    struct world w;

    race(BY_FLUSH, ra_tag_reset, &w);
    for (unsigned i = 0; i < N; i++) {
        blocks[i] = ra_malloc_tag(w.x, BLOCK);
        ck_assert_ptr_nonnull(blocks[i]);
        memset(blocks[i], (int)(i & 0xff), BLOCK);
    }
    for (unsigned i = 0; i < N; i++)
        ck_assert_uint_eq(((unsigned char *)blocks[i])[BLOCK - 1], i & 0xff);
    for (unsigned i = 0; i < N; i++)
        ra_free(blocks[i]);
    free(blocks);
}
END_TEST

/* Without a reset a drain gives every block back. */
START_TEST(test_returns_unit_a_drain_gives_the_stacks_back)
{
    struct world w;
    size_t before, after;

    make_world(&w, BY_FLUSH);
    drainer = pthread_self();
    watched = w.x;
    before = tu_jemalloc_allocated(w.x);
    ra_thread_flush();
    after = tu_jemalloc_allocated(w.x);
    watched = RA_TAG_NONE;
    ck_assert_uint_gt(atomic_load(&drained), 0);
    ck_assert_uint_eq(before - after, (size_t)atomic_load(&drained) * BLOCK);
}
END_TEST

static Suite *returns_suite(void)
{
    Suite *s = suite_create("returns (unit)");
    TCase *race_case = tcase_create("drains against resets");
    TCase *basics = tcase_create("drains");

    tcase_set_timeout(race_case, 60);
    tcase_add_test(race_case, test_returns_unit_reset_waits_for_a_flush);
    tcase_add_test(race_case, test_returns_unit_reset_waits_for_purge_all);
    tcase_add_test(race_case, test_returns_unit_reset_waits_for_an_exit);
    tcase_add_test(race_case,
                   test_returns_unit_reset_waits_for_a_refused_sibling);
    tcase_add_test(race_case, test_returns_unit_destroy_waits_for_a_flush);
    tcase_add_test(race_case, test_returns_unit_destroy_waits_for_an_exit);
    tcase_add_test(race_case,
                   test_returns_unit_destroy_waits_for_a_refused_sibling);
    tcase_add_test(race_case,
                   test_returns_unit_blocks_after_the_race_are_distinct);
    suite_add_tcase(s, race_case);
    tcase_add_test(basics, test_returns_unit_a_drain_gives_the_stacks_back);
    suite_add_tcase(s, basics);
    return s;
}

int main(void)
{
    return tu_run_suite(returns_suite());
}

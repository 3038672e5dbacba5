/* Suite "pair (unit)": a (thread, tag) pair's life, one transition at a
 * time (pair.c): its state byte and the fast paths' cached word
 * (alloc_flags) move together, a parked pair serves its owner's next
 * request after it unparks, a hold refuses a pair that is not parked, a
 * pair that leaves its tag keeps its counts in the tag's, even to a reader
 * without the lock while its thread exits, and the debug build catches a
 * cached word that disagrees with the state, and a slot that leaves its
 * tag's users with its counts. */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "backend.h"
#include "internal.h"
#include "pairs.h"
#include "testutil.h"

#define BLOCK 48

static struct ra__tag_slot *my_slot(ra_tag_t tag)
{
    ck_assert_ptr_nonnull(ra__thread);
    return &ra__thread->slots[tag];
}

/* A block of tag, made on the calling thread. */
static void *tagged_block(ra_tag_t tag)
{
    void *p;

    tu_tag_push(tag);
    p = ra_malloc(BLOCK);
    tu_tag_pop(tag);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(ra_tag_of(p), tag);
    return p;
}

/* The calling thread's slot of tag, its pair started by a block made and
 * freed. */
static struct ra__tag_slot *used_slot(ra_tag_t tag)
{
    ra_free(tagged_block(tag));
    return my_slot(tag);
}

static void park(ra_tag_t tag)
{
    ra__threads_lock();
    ra__pair_park(my_slot(tag), tag);
    ra__threads_unlock();
}

START_TEST(test_pair_unit_a_first_allocation_starts_the_pair)
{
    ra_tag_t tag = tu_tag_create("pair");
    struct ra__tag_slot *s;

    ck_assert(ra__thread == NULL ||
              ra__pair_state(&ra__thread->slots[tag]) == RA__PAIR_UNUSED);
    s = used_slot(tag);
    ck_assert_uint_eq(ra__pair_state(s), RA__PAIR_ACTIVE);
    ck_assert_int_ne(s->alloc_flags, 0);
    ck_assert(s->allocates);
}
END_TEST

START_TEST(test_pair_unit_a_parked_pair_unparks_at_its_next_request)
{
    ra_tag_t tag = tu_tag_create("pair");
    struct ra__tag_slot *s;
    void *p;

    ra_free(tagged_block(tag));
    park(tag);
    s = my_slot(tag);
    ck_assert_uint_eq(ra__pair_state(s), RA__PAIR_PARKED);
    ck_assert_int_eq(s->alloc_flags, 0);
    for (unsigned bin = 0; bin < ra__nbins; bin++) {
        ck_assert_uint_eq(s->bins[bin].cap, 0);
        ck_assert_uint_eq(s->bins[bin].count, 0);
    }
    /* The fast path sees the bin empty, the refill unparks. */
    p = tagged_block(tag);
    ck_assert_uint_eq(ra__pair_state(s), RA__PAIR_ACTIVE);
    ck_assert_int_ne(s->alloc_flags, 0);
    ra_free(p);
}
END_TEST

START_TEST(test_pair_unit_only_a_parked_pair_is_held_or_flushed)
{
    ra_tag_t tag = tu_tag_create("pair");
    struct ra__tag_slot *s;

    s = used_slot(tag);
    ra__threads_lock();
    ck_assert(!ra__pair_hold(s)); /* active: refused */
    ck_assert_uint_eq(ra__pair_state(s), RA__PAIR_ACTIVE);
    ra__pair_park(s, tag);
    ck_assert(ra__pair_hold(s));
    ck_assert_uint_eq(ra__pair_state(s), RA__PAIR_HELD);
    ck_assert(!ra__pair_hold(s)); /* one hold at a time */
    ra__pair_flush_parked(s);     /* a held pair is the holder's */
    ck_assert_uint_eq(ra__pair_state(s), RA__PAIR_HELD);
    ra__pair_unhold(s);
    ck_assert_uint_eq(ra__pair_state(s), RA__PAIR_PARKED);
    ra__pair_unhold(s); /* nothing for a pair not held */
    ra__pair_flush_parked(s);
    ck_assert_uint_eq(ra__pair_state(s), RA__PAIR_PARKED);
    ck_assert_int_eq(s->alloc_flags, 0);
    ra__threads_unlock();
}
END_TEST

START_TEST(test_pair_unit_a_pair_that_leaves_keeps_its_counts_in_the_tag)
{
    ra_tag_t tag = tu_tag_create("pair");
    void *p[3];
    struct ra__tag_slot *s;
    struct ra__counts c;

    for (unsigned i = 0; i < 3; i++)
        p[i] = tagged_block(tag);
    ra_free(p[0]);
    s = my_slot(tag);
    ra__threads_lock();
    ra__pair_leave(s, tag);
    ra__threads_unlock();
    ck_assert_uint_eq(ra__pair_state(s), RA__PAIR_UNUSED);
    ck_assert_int_eq(s->alloc_flags, 0);
    ck_assert_ptr_null(s->bins);
    ra__thread_counts(tag, &c);
    ck_assert_uint_eq(c.nmalloc, 3);
    ck_assert_uint_eq(c.ndalloc, 1);
    /* A free starts it again, as a pair that only frees. */
    ra_free(p[1]);
    ra_free(p[2]);
    ck_assert_uint_eq(ra__pair_state(s), RA__PAIR_ACTIVE);
    ck_assert(!s->allocates);
    ra__thread_counts(tag, &c);
    ck_assert_uint_eq(c.nmalloc, 3);
    ck_assert_uint_eq(c.ndalloc, 3);
}
END_TEST

/* -- a thread's exit, stopped in its pair's leave ------------------------
 * The link wraps ra__users_remove: the worker's exit (ra__thread_exit,
 * through ra__pair_leave) is held just after its slot left the tag's
 * users, while the main thread, the tag's other user and now its only
 * one (lone), reads the tag without the lock. That is what Python's
 * Thread.join allows: it returns before the thread's key destructors,
 * the library's exit, have run. Every call of the worker has returned,
 * so its counts must be there. */
void __real_ra__users_remove(struct ra__tag_slot *s, ra_tag_t tag);

static _Thread_local bool exit_watched;
static pthread_barrier_t exit_held, exit_release;

void __wrap_ra__users_remove(struct ra__tag_slot *s, ra_tag_t tag)
{
    __real_ra__users_remove(s, tag);
    if (!exit_watched)
        return;
    exit_watched = false;
    pthread_barrier_wait(&exit_held);
    pthread_barrier_wait(&exit_release);
}

struct exit_worker {
    ra_tag_t tag;
    bool gives; /* the small block is the main thread's to free */
    void *kept, *given;
    pthread_barrier_t made;
};

/* Makes a block it keeps and a small one, which it frees or the main
 * thread does, then ends once the main thread says so. */
static void *exit_worker_run(void *arg)
{
    struct exit_worker *w = arg;

    w->kept = ra_malloc_tag(w->tag, 300000);
    w->given = ra_malloc_tag(w->tag, BLOCK);
    exit_watched = w->kept != NULL && w->given != NULL;
    if (!w->gives)
        ra_free(w->given);
    pthread_barrier_wait(&w->made);
    /* The main thread reads the tag before the exit holds the lock. */
    pthread_barrier_wait(&w->made);
    return NULL;
}

/* What the main thread reads while the worker's exit is held. */
struct exit_look {
    bool lone, own_end;
    ra_tag_usage_t usage;
    ra_tag_stats_t stats;
};

/* Runs a worker of a new tag to its held exit, looks (own_end: tries the
 * destroy's lone end, which must refuse a tag with a live block), lets
 * it go, checks that the lone end was refused and that the exit left the
 * counts as they were before it (in before), and returns the tag. */
static ra_tag_t look_at_held_exit(bool own_end, ra_tag_usage_t *before,
                                  struct exit_look *l)
{
    ra_tag_t tag = tu_tag_create("pair-exit");
    struct exit_worker w = {.tag = tag, .gives = !own_end};
    ra_tag_usage_t after;
    pthread_t t;

    ck_assert_int_eq(pthread_barrier_init(&w.made, NULL, 2), 0);
    ck_assert_int_eq(pthread_barrier_init(&exit_held, NULL, 2), 0);
    ck_assert_int_eq(pthread_barrier_init(&exit_release, NULL, 2), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, exit_worker_run, &w), 0);
    pthread_barrier_wait(&w.made);
    ck_assert_ptr_nonnull(w.kept);
    ck_assert_ptr_nonnull(w.given);
    /* The main thread's pair: a consumer of the worker's block (as
     * Python's main thread drops a thread's objects), or, for the lone
     * end, one that allocates and frees its own, its counts even. */
    if (own_end)
        ra_free(tagged_block(tag));
    else
        ra_free(w.given);
    ck_assert_int_eq(ra_tag_usage(tag, before), 0);
    /* The worker returns and exits; held once its slot left the users. */
    pthread_barrier_wait(&w.made);
    pthread_barrier_wait(&exit_held);
    l->lone = ra__users_lone(ra__thread, tag);
    /* Only a lone reader skips threads_lock, which the held exit holds. */
    if (l->lone) {
        ck_assert_int_eq(ra_tag_usage(tag, &l->usage), 0);
        ck_assert_int_eq(ra_tag_stats(tag, &l->stats), 0);
        l->own_end = own_end && ra__own_end(tag);
    }
    pthread_barrier_wait(&exit_release);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(pthread_barrier_destroy(&w.made), 0);
    ck_assert_int_eq(pthread_barrier_destroy(&exit_held), 0);
    ck_assert_int_eq(pthread_barrier_destroy(&exit_release), 0);
    ck_assert_msg(l->lone, "the main thread is not the tag's only user");
    ck_assert_msg(!l->own_end, "the destroy's lone end took the tag, with "
                               "the exiting thread's block live");
    ck_assert_int_eq(ra_tag_usage(tag, &after), 0);
    ck_assert_uint_eq(after.nmalloc, before->nmalloc);
    ck_assert_uint_eq(after.ndalloc, before->ndalloc);
    ck_assert_uint_eq(after.allocated, before->allocated);
    return tag;
}

START_TEST(test_pair_unit_an_exiting_threads_counts_stay_in_the_tag)
{
    ra_tag_usage_t before;
    struct exit_look l;

    look_at_held_exit(false, &before, &l);
    ck_assert_uint_eq(before.nmalloc, 2);
    ck_assert_uint_eq(before.ndalloc, 1);
    ck_assert_uint_gt(before.allocated, 300000);
    ck_assert_msg(l.usage.nmalloc == before.nmalloc &&
                      l.usage.ndalloc == before.ndalloc &&
                      l.usage.allocated == before.allocated,
                  "while the thread exits, ra_tag_usage shows nmalloc %llu "
                  "ndalloc %llu allocated %zu, not %llu %llu %zu",
                  (unsigned long long)l.usage.nmalloc,
                  (unsigned long long)l.usage.ndalloc, l.usage.allocated,
                  (unsigned long long)before.nmalloc,
                  (unsigned long long)before.ndalloc, before.allocated);
    ck_assert_msg(l.stats.nmalloc == before.nmalloc &&
                      l.stats.ndalloc == before.ndalloc &&
                      l.stats.allocated == before.allocated,
                  "while the thread exits, ra_tag_stats shows nmalloc %llu "
                  "allocated %zu", (unsigned long long)l.stats.nmalloc,
                  l.stats.allocated);
}
END_TEST

START_TEST(test_pair_unit_an_exiting_threads_live_block_keeps_its_tag)
{
    ra_tag_usage_t before;
    struct exit_look l;
    ra_tag_t tag = look_at_held_exit(true, &before, &l);

    /* Refused its lone end, it ends the whole way. */
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
}
END_TEST

#ifdef RA_DEBUG
START_TEST(test_pair_unit_a_slot_leaving_the_users_with_its_counts_aborts)
{
    ra_tag_t tag = tu_tag_create("pair");
    struct ra__tag_slot *s;

    s = used_slot(tag);
    /* Its counts still the slot's: a lone reader would miss them. */
    ra__threads_lock();
    ra__users_remove(s, tag);
}
END_TEST
#endif

#ifdef RA_DEBUG
START_TEST(test_pair_unit_a_cached_word_against_its_state_aborts)
{
    ra_tag_t tag = tu_tag_create("pair");
    struct ra__tag_slot *s;

    s = used_slot(tag);
    /* Active, yet the fast paths would see it parked. */
    s->alloc_flags = 0;
    ra__threads_lock();
    ra__pair_new_holder(s);
}
END_TEST
#endif

static Suite *pair_suite(void)
{
    Suite *s = suite_create("pair (unit)");
    TCase *transitions = tcase_create("transitions");

    tcase_add_test(transitions,
                   test_pair_unit_a_first_allocation_starts_the_pair);
    tcase_add_test(transitions,
                   test_pair_unit_a_parked_pair_unparks_at_its_next_request);
    tcase_add_test(transitions,
                   test_pair_unit_only_a_parked_pair_is_held_or_flushed);
    tcase_add_test(
        transitions,
        test_pair_unit_a_pair_that_leaves_keeps_its_counts_in_the_tag);
    tcase_add_test(transitions,
                   test_pair_unit_an_exiting_threads_counts_stay_in_the_tag);
    tcase_add_test(
        transitions,
        test_pair_unit_an_exiting_threads_live_block_keeps_its_tag);
#ifdef RA_DEBUG
    tcase_add_test_raise_signal(
        transitions, test_pair_unit_a_cached_word_against_its_state_aborts,
        SIGABRT);
    tcase_add_test_raise_signal(
        transitions,
        test_pair_unit_a_slot_leaving_the_users_with_its_counts_aborts,
        SIGABRT);
#endif
    suite_add_tcase(s, transitions);
    return s;
}

int main(void)
{
    unsetenv("REGIONALLOC");
    unsetenv("REGIONALLOC_MAX_TAGS");
    unsetenv("REGIONALLOC_LIMITS");
    unsetenv("REGIONALLOC_THREAD_TAGS");
    return tu_run_suite(pair_suite());
}

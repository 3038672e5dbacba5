/* Suite "pair (unit)": a (thread, tag) pair's life, one transition at a
 * time (pair.c): its state byte and the fast paths' cached word
 * (alloc_flags) move together, a parked pair serves its owner's next
 * request after it unparks, a hold refuses a pair that is not parked, a
 * pair that leaves its tag keeps its counts in the tag's, and the debug
 * build catches a cached word that disagrees with the state. */
#include <check.h>
#include <signal.h>
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
    ra_free(tagged_block(tag));
    s = my_slot(tag);
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

    ra_free(tagged_block(tag));
    s = my_slot(tag);
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

#ifdef RA_DEBUG
START_TEST(test_pair_unit_a_cached_word_against_its_state_aborts)
{
    ra_tag_t tag = tu_tag_create("pair");
    struct ra__tag_slot *s;

    ra_free(tagged_block(tag));
    s = my_slot(tag);
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
#ifdef RA_DEBUG
    tcase_add_test_raise_signal(
        transitions, test_pair_unit_a_cached_word_against_its_state_aborts,
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

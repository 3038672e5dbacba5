/* Suite "thread tags (unit)": naming another thread while it exits.
 *
 * Naming a thread finds its entry, makes the tag (no lock held: the
 * registry's is taken, a purge may run) and then gives the base. The test
 * forces the thread's exit into that gap: the link wraps ra__tag_create,
 * which lets the named thread return and joins it before it makes the tag,
 * and ra__tag_set_base, which must then never be asked to write the base
 * of the thread that is gone (its entry and its stack were freed). */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "thread_tags.h"
#include "testutil.h"

ra_tag_t __real_ra__tag_create(ra_tag_t parent, const char *name,
                               bool anywhere, ra_tag_t *own);
void __real_ra__tag_set_base(struct ra__tag_thread *t, ra_tag_t tag);

static pthread_t victim;
static _Atomic bool victim_named, victim_may_go, victim_gone;
static _Atomic unsigned writes_to_the_gone;
static _Atomic bool watching = true;

static void *named_then_gone(void *arg)
{
    (void)arg;
    ra__thread_tags_named(pthread_self(), "victim");
    atomic_store(&victim_named, true);
    while (!atomic_load(&victim_may_go))
        sched_yield();
    return NULL;
}

ra_tag_t __wrap_ra__tag_create(ra_tag_t parent, const char *name,
                               bool anywhere, ra_tag_t *own)
{
    if (strcmp(name, "renamed") == 0 && !atomic_load(&victim_gone)) {
        atomic_store(&victim_may_go, true);
        ck_assert_int_eq(pthread_join(victim, NULL), 0);
        atomic_store(&victim_gone, true);
    }
    return __real_ra__tag_create(parent, name, anywhere, own);
}

void __wrap_ra__tag_set_base(struct ra__tag_thread *t, ra_tag_t tag)
{
    /* Whatever t is now (the freed entry may hold anything), a base given
     * after the thread is gone is the defect: never written. */
    if (atomic_load(&watching) && atomic_load(&victim_gone) &&
        t != ra__tag_thread_self()) {
        atomic_fetch_add(&writes_to_the_gone, 1);
        return;
    }
    __real_ra__tag_set_base(t, tag);
}

START_TEST(test_thread_tags_unit_naming_a_thread_that_exits_meanwhile)
{
    ck_assert(ra__thread_tags_on());
    ck_assert_int_eq(pthread_create(&victim, NULL, named_then_gone, NULL),
                     0);
    while (!atomic_load(&victim_named))
        sched_yield();
    ck_assert_uint_ne(ra_tag_lookup("victim"), RA_TAG_NONE);
    ra__thread_tags_named(victim, "renamed");
    unsigned bad;

    ck_assert(atomic_load(&victim_gone));
    bad = atomic_load(&writes_to_the_gone);
    ck_assert_msg(bad == 0, "%u base(s) written to a thread that exited", bad);
    /* The tag was made (the rename raced the exit, not the rule). */
    ck_assert_uint_ne(ra_tag_lookup("renamed"), RA_TAG_NONE);
}
END_TEST

static _Atomic bool renamed;
static _Atomic ra_tag_t seen;

static void *named_then_renamed(void *arg)
{
    (void)arg;
    ra__thread_tags_named(pthread_self(), "before");
    atomic_store(&victim_named, true);
    while (!atomic_load(&renamed))
        sched_yield();
    atomic_store(&seen, ra_tag_current());
    return NULL;
}

/* A thread that lives on takes the new base as before. */
START_TEST(test_thread_tags_unit_a_live_thread_takes_its_new_base)
{
    pthread_t t;

    /* The wrapper joins nothing, and lets every base through. */
    atomic_store(&victim_gone, true);
    atomic_store(&watching, false);
    ck_assert_int_eq(pthread_create(&t, NULL, named_then_renamed, NULL), 0);
    while (!atomic_load(&victim_named))
        sched_yield();
    ra__thread_tags_named(t, "after");
    atomic_store(&renamed, true);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_uint_ne(ra_tag_lookup("after"), RA_TAG_NONE);
    ck_assert_uint_eq(atomic_load(&seen), ra_tag_lookup("after"));
}
END_TEST

static Suite *thread_tags_suite(void)
{
    Suite *s = suite_create("thread tags (unit)");
    TCase *tc = tcase_create("renames");

    tcase_add_test(tc, test_thread_tags_unit_naming_a_thread_that_exits_meanwhile);
    tcase_add_test(tc, test_thread_tags_unit_a_live_thread_takes_its_new_base);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* Read at the library's first use, in each test's child. */
    setenv("REGIONALLOC_THREAD_TAGS", "*", 1);
    return tu_run_suite(thread_tags_suite());
}

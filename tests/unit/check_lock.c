/* Suite "lock (unit)": the debug build's check of the library's locks
 * (src/lock.h, src/lock.c): a lock taken out of rank order, a lock said to
 * be held that is not, a call into jemalloc or an extent hook entered
 * under a lock that the hooks rank above, a call into the dynamic loader
 * under a lock an allocation may take, and user code run under a lock,
 * each abort naming the locks; the orders the library keeps pass.
 *
 * A lock order that two threads take the other way round deadlocks only
 * when they meet; the check finds the inversion on one thread, every run.
 * The planted inversion is the library's own: the link wraps
 * ra__pool_first_arena, which tag.c calls with a stripe of the registry
 * and its ids lock held, so that a test can look a name up there (a
 * stripe, ranked below the ids). Each abort runs in a child of the test,
 * whose stderr is read for the names. A release build has no check: the
 * program says so and exits 77 (skipped). */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "region.h"
#include "testutil.h"

#ifdef RA_DEBUG

int __real_ra__pool_first_arena(ra_tag_t tag);

/* Set by a test: the wrapped call looks a name up under tag.c's locks. */
static bool plant_inversion;

int __wrap_ra__pool_first_arena(ra_tag_t tag)
{
    if (plant_inversion)
        (void)ra_tag_lookup("another name");
    return __real_ra__pool_first_arena(tag);
}

/* Runs fn in a child with stderr on a pipe: true when the child died of
 * SIGABRT and its stderr holds each of the words (NULL ends them). */
static bool aborts_saying(void (*fn)(void), const char *w1, const char *w2)
{
    char out[4096];
    size_t len = 0;
    ssize_t n;
    int fds[2], status;
    pid_t pid;

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    while (len < sizeof out - 1 &&
           (n = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    fprintf(stderr, "child said: %s", out);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
           strstr(out, "lock check") != NULL &&
           (w1 == NULL || strstr(out, w1) != NULL) &&
           (w2 == NULL || strstr(out, w2) != NULL);
}

static void create_with_lookup_inside(void)
{
    plant_inversion = true;
    (void)ra_tag_create("planted");
}

START_TEST(test_lock_unit_library_inversion_aborts_naming_both)
{
    ck_assert(aborts_saying(create_with_lookup_inside, "STRIPE", "IDS"));
}
END_TEST

START_TEST(test_lock_unit_without_the_plant_creation_passes)
{
    ra_tag_t t = ra_tag_create("not planted");

    ck_assert_uint_ne(t, RA_TAG_NONE);
    ck_assert_int_eq(ra_tag_destroy(t), 0);
}
END_TEST

/* ra__region_give_back is called with the registry's ids lock held. */
static void give_back_without_ids(void)
{
    (void)ra__region_give_back();
}

START_TEST(test_lock_unit_library_lock_not_held_aborts)
{
    ck_assert(aborts_saying(give_back_without_ids, "no lock held of rank",
                            "region.c"));
}
END_TEST

static struct ra__mutex pool_like = RA__MUTEX_INIT(RA__RANK_POOL);
static struct ra__mutex threads_like = RA__MUTEX_INIT(RA__RANK_THREADS);
static struct ra__mutex grow_like = RA__MUTEX_INIT(RA__RANK_GROW);
static struct ra__spin family[2] = {RA__SPIN_INIT(RA__RANK_STRIPE),
                                    RA__SPIN_INIT(RA__RANK_STRIPE)};

static void assert_held_unheld(void)
{
    ra__assert_held(&pool_like);
}

START_TEST(test_lock_unit_assert_held_on_unheld_aborts)
{
    ck_assert(aborts_saying(assert_held_unheld, "not held", "POOL"));
}
END_TEST

static void take_out_of_order(void)
{
    ra__lock(&pool_like);
    ra__lock(&threads_like);
}

START_TEST(test_lock_unit_inversion_aborts_naming_both)
{
    ck_assert(aborts_saying(take_out_of_order, "taking THREADS", "POOL"));
}
END_TEST

static void family_downwards(void)
{
    ra__spin_lock(&family[1]);
    ra__spin_lock(&family[0]);
}

START_TEST(test_lock_unit_one_rank_downwards_aborts)
{
    ck_assert(aborts_saying(family_downwards, "STRIPE", NULL));
}
END_TEST

static void jemalloc_under_grow(void)
{
    ra__lock(&grow_like);
    ra__assert_may_call_jemalloc();
}

START_TEST(test_lock_unit_jemalloc_under_a_hook_lock_aborts)
{
    ck_assert(aborts_saying(jemalloc_under_grow, "calling into jemalloc",
                            "GROW"));
}
END_TEST

static void jemalloc_inside_hook(void)
{
    ra__extent_hook_enter();
    ra__assert_may_call_jemalloc();
}

START_TEST(test_lock_unit_jemalloc_inside_a_hook_aborts)
{
    ck_assert(aborts_saying(jemalloc_inside_hook, "calling into jemalloc",
                            "inside an extent hook"));
}
END_TEST

static void hook_under_grow(void)
{
    ra__lock(&grow_like);
    ra__extent_hook_enter();
}

START_TEST(test_lock_unit_hook_under_a_hook_lock_aborts)
{
    ck_assert(aborts_saying(hook_under_grow, "inside an extent hook",
                            "GROW"));
}
END_TEST

/* dlsym, dladdr, dl_iterate_phdr or dlopen under a lock an allocation may
 * take: a constructor, run inside dlopen under the loader's lock, could
 * allocate and wait for it. */
static void loader_under_pool(void)
{
    ra__lock(&pool_like);
    ra__assert_may_call_loader();
}

START_TEST(test_lock_unit_loader_under_an_allocation_lock_aborts)
{
    ck_assert(aborts_saying(loader_under_pool,
                            "calling into the dynamic loader", "POOL"));
}
END_TEST

static void user_code_under_pool(void)
{
    ra__lock(&pool_like);
    ra__assert_no_lock_held();
}

START_TEST(test_lock_unit_user_code_under_a_lock_aborts)
{
    ck_assert(aborts_saying(user_code_under_pool, "user code", "POOL"));
}
END_TEST

static void remake_held(void)
{
    ra__lock(&pool_like);
    ra__mutex_remake(&pool_like);
}

START_TEST(test_lock_unit_making_anew_a_held_lock_aborts)
{
    ck_assert(aborts_saying(remake_held, "making anew", "POOL"));
}
END_TEST

START_TEST(test_lock_unit_the_order_passes)
{
    ra__assert_may_call_loader();
    ra__spin_lock(&family[0]);
    ra__spin_lock(&family[1]);
    ra__lock(&threads_like);
    ra__lock(&pool_like);
    ra__assert_may_call_jemalloc();
    ra__extent_hook_enter();
    ra__lock(&grow_like);
    ra__assert_held(&pool_like);
    ra__assert_held(&family[0]);
    ra__assert_rank_held(RA__RANK_THREADS);
    ra__unlock(&grow_like);
    ra__extent_hook_leave();
    /* Released out of order: the list keeps the rest. */
    ra__unlock(&threads_like);
    ra__assert_held(&pool_like);
    ra__assert_not_held(&threads_like);
    ra__unlock(&pool_like);
    ra__spin_unlock(&family[0]);
    ra__spin_unlock(&family[1]);
    ra__assert_not_held(&family[1]);
    ra__assert_not_held(&pool_like);
    ra__assert_no_lock_held();
}
END_TEST

static Suite *lock_suite(void)
{
    Suite *s = suite_create("lock (unit)");
    TCase *tc = tcase_create("ranks and ownership");

    tcase_add_test(tc, test_lock_unit_library_inversion_aborts_naming_both);
    tcase_add_test(tc, test_lock_unit_without_the_plant_creation_passes);
    tcase_add_test(tc, test_lock_unit_library_lock_not_held_aborts);
    tcase_add_test(tc, test_lock_unit_assert_held_on_unheld_aborts);
    tcase_add_test(tc, test_lock_unit_inversion_aborts_naming_both);
    tcase_add_test(tc, test_lock_unit_one_rank_downwards_aborts);
    tcase_add_test(tc, test_lock_unit_jemalloc_under_a_hook_lock_aborts);
    tcase_add_test(tc, test_lock_unit_jemalloc_inside_a_hook_aborts);
    tcase_add_test(tc, test_lock_unit_hook_under_a_hook_lock_aborts);
    tcase_add_test(tc, test_lock_unit_loader_under_an_allocation_lock_aborts);
    tcase_add_test(tc, test_lock_unit_user_code_under_a_lock_aborts);
    tcase_add_test(tc, test_lock_unit_making_anew_a_held_lock_aborts);
    tcase_add_test(tc, test_lock_unit_the_order_passes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(lock_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#else

/* The wrap's target, for the link: a release build calls the real one. */
int __real_ra__pool_first_arena(ra_tag_t tag);
int __wrap_ra__pool_first_arena(ra_tag_t tag);

int __wrap_ra__pool_first_arena(ra_tag_t tag)
{
    return __real_ra__pool_first_arena(tag);
}

int main(void)
{
    printf("SKIP: the lock checks are in the debug build only "
           "(./configure --enable-debug)\n");
    return 77;
}

#endif

/* Suite "by library (unit)": a thread's first allocation from an object
 * while another thread makes that object's tag waits for the tag, and
 * lands in it, not in "libraries".
 *
 * The link wraps ra__purge_create, where the making thread holds the
 * table of objects' lock: the first creation of the dlopened test
 * library's tag lets a second thread allocate from that library, and
 * goes on only once the second thread has found the lock held and is
 * waiting for it (the wrapped pthread_mutex_lock tries it first, and says
 * so), or has had its block already. Both orders are forced: no timing.
 * And the library's own work (a quiet section) stays untagged, and a
 * thread's cache goes with the thread, and is made once when arming the
 * thread-exit key allocates (ra__thread_exit_arm wrapped). */
#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "ends.h"
#include "hot_state.h"
#include "testutil.h"

#define LOADED_TAG "libraries/libbylib_loaded.so"

ra_tag_t __real_ra__purge_create(ra_tag_t parent, const char *name,
                                 bool anywhere, ra_tag_t *own);
int __real_pthread_mutex_lock(pthread_mutex_t *m);

typedef void alloc_fn(int e, size_t size, void **out);

static alloc_fn *loaded_alloc;
/* The making thread's gap is armed once, for the loaded library's tag. */
static _Atomic bool armed, second_go, second_waits, second_done;
/* The second thread's locks are watched: a lock found held is said. */
static _Thread_local bool watched;
static void *second_block;

int __wrap_pthread_mutex_lock(pthread_mutex_t *m);
int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
    if (watched) {
        if (pthread_mutex_trylock(m) == 0)
            return 0;
        atomic_store(&second_waits, true);
    }
    return __real_pthread_mutex_lock(m);
}

ra_tag_t __wrap_ra__purge_create(ra_tag_t parent, const char *name,
                                 bool anywhere, ra_tag_t *own);
ra_tag_t __wrap_ra__purge_create(ra_tag_t parent, const char *name,
                                 bool anywhere, ra_tag_t *own)
{
    if (strcmp(name, LOADED_TAG) == 0 && atomic_exchange(&armed, false)) {
        atomic_store(&second_go, true);
        while (!atomic_load(&second_waits) && !atomic_load(&second_done))
            sched_yield();
    }
    return __real_ra__purge_create(parent, name, anywhere, own);
}

static void *second_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&second_go))
        sched_yield();
    watched = true;
    loaded_alloc(0, 100, &second_block);
    watched = false;
    atomic_store(&second_done, true);
    return NULL;
}

static const char *tag_name(const void *p)
{
    const char *name = ra_tag_name(ra_tag_of(p));

    return name != NULL ? name : "(no tag)";
}

/* The dlopened test library loaded, its entry in loaded_alloc. */
static int load_loaded(void)
{
    void *h = dlopen(BYLIB_DIR "/libbylib_loaded.so", RTLD_NOW);

    TU_REQUIRE(h != NULL);
    loaded_alloc = (alloc_fn *)dlsym(h, "bylib_alloc");
    TU_REQUIRE(loaded_alloc != NULL);
    return 0;
}

/* Run with REGIONALLOC_TAG_BY=library. */
static int child_waits(void)
{
    pthread_t t;
    void *first;

    TU_REQUIRE(load_loaded() == 0);
    TU_REQUIRE(pthread_create(&t, NULL, second_thread, NULL) == 0);
    atomic_store(&armed, true);
    loaded_alloc(0, 100, &first);
    TU_REQUIRE(pthread_join(t, NULL) == 0);
    TU_REQUIRE(first != NULL && second_block != NULL);
    printf("first in %s, second in %s\n", tag_name(first),
           tag_name(second_block));
    TU_REQUIRE(strcmp(tag_name(first), LOADED_TAG) == 0);
    TU_REQUIRE(strcmp(tag_name(second_block), LOADED_TAG) == 0);
    /* Both orders were forced: the second thread found the lock held. */
    TU_REQUIRE(!atomic_load(&armed) && atomic_load(&second_waits));
    free(first);
    free(second_block);
    return 0;
}

/* The library's own work (a quiet section: a report's, a server
 * thread's, a dlopen of its own) allocates untagged, whatever code calls
 * the entry: it is the library's memory, not an object's. */
static int child_quiet(void)
{
    void *p, *q;

    TU_REQUIRE(load_loaded() == 0);
    /* Cached first, so that the quiet one would be a hit. */
    loaded_alloc(0, 100, &p);
    TU_REQUIRE(p != NULL && strcmp(tag_name(p), LOADED_TAG) == 0);
    ra__quiet_begin();
    loaded_alloc(0, 100, &q);
    ra__quiet_end();
    TU_REQUIRE(q != NULL);
    printf("quiet block in %s\n", tag_name(q));
    TU_REQUIRE(ra_tag_of(q) == RA_TAG_NONE);
    free(p);
    free(q);
    return 0;
}

static void *allocate_once(void *arg)
{
    void *p;

    (void)arg;
    loaded_alloc(0, 100, &p);
    free(p);
    return NULL;
}

/* The library's memory before and after n threads of fn, one after
 * another, in a process with the dlopened test library loaded and a first
 * thread's tags and tables made. */
static int held_across_threads(void *(*fn)(void *), int n, size_t *before,
                               size_t *after)
{
    pthread_t t;

    TU_REQUIRE(load_loaded() == 0);
    TU_REQUIRE(pthread_create(&t, NULL, allocate_once, NULL) == 0);
    TU_REQUIRE(pthread_join(t, NULL) == 0);
    *before = ra__meta_held();
    for (int i = 0; i < n; i++) {
        TU_REQUIRE(pthread_create(&t, NULL, fn, NULL) == 0);
        TU_REQUIRE(pthread_join(t, NULL) == 0);
    }
    *after = ra__meta_held();
    return 0;
}

/* Each thread's cache from return address to tag is made at its first
 * miss, in the library's own memory, and goes at its exit: a thousand
 * threads leave the library's memory as they found it. */
static int child_thread_exit(void)
{
    enum { THREADS = 1000 };
    size_t before, after;

    TU_REQUIRE(held_across_threads(allocate_once, THREADS, &before,
                                   &after) == 0);
    printf("library's memory: %zu bytes before, %zu after %d threads\n",
           before, after, THREADS);
    /* Far less than a cache a thread. */
    TU_REQUIRE(after <= before + 16 * 1024);
    return 0;
}

/* Set in the thread of child_arm_allocates: the wrapped arming of the
 * thread-exit key allocates first, as glibc's pthread_setspecific does on a
 * thread's first value for a key of index 32 or more, before it stores
 * anything, so that each nested arming allocates again. */
#define ARM_DEPTH_MAX 8
static _Thread_local bool arm_allocates, armed_here;
static _Thread_local int arm_depth;
static _Atomic int arm_deepest;

bool __real_ra__thread_exit_arm(void);
bool __wrap_ra__thread_exit_arm(void);
bool __wrap_ra__thread_exit_arm(void)
{
    bool failed;

    if (arm_allocates && !armed_here && arm_depth < ARM_DEPTH_MAX) {
        void *volatile block;

        arm_depth++;
        if (arm_depth > atomic_load(&arm_deepest))
            atomic_store(&arm_deepest, arm_depth);
        block = malloc(32);
        free(block);
        arm_depth--;
    }
    failed = __real_ra__thread_exit_arm();
    if (arm_allocates && !failed)
        armed_here = true;
    return failed;
}

static void *allocate_with_allocating_arm(void *arg)
{
    arm_allocates = true;
    return allocate_once(arg);
}

/* An allocation that arming the key makes finds the thread's cache being
 * made, rather than make another and arm again, without end. */
static int child_arm_allocates(void)
{
    enum { THREADS = 10 };
    size_t before, after;

    TU_REQUIRE(held_across_threads(allocate_with_allocating_arm, THREADS,
                                   &before, &after) == 0);
    printf("arming nested %d deep; library's memory: %zu bytes before, %zu "
           "after %d threads\n",
           atomic_load(&arm_deepest), before, after, THREADS);
    TU_REQUIRE(atomic_load(&arm_deepest) < ARM_DEPTH_MAX);
    /* A cache left behind is 1 KiB; the tables of the library's own may
     * grow once by a few records. */
    TU_REQUIRE(after <= before + 512);
    return 0;
}

static const struct tu_child children[] = {
    {"waits", child_waits},
    {"quiet", child_quiet},
    {"thread_exit", child_thread_exit},
    {"arm_allocates", child_arm_allocates},
    {NULL, NULL}};

static const char *const env_on[] = {"REGIONALLOC_TAG_BY=library", NULL};

static void run_child(const char *name)
{
    char err[4096];
    int status = tu_exec_self(env_on, name, err, sizeof err);

    ck_assert_msg(status == 0, "child %s: status %d, stderr: %s", name,
                  status, err);
}

START_TEST(test_by_library_first_allocation_waits_for_the_tag_being_made)
{
    run_child("waits");
}
END_TEST

START_TEST(test_by_library_thread_cache_released_at_exit)
{
    run_child("thread_exit");
}
END_TEST

START_TEST(test_by_library_cache_made_once_when_arming_allocates)
{
    run_child("arm_allocates");
}
END_TEST

START_TEST(test_by_library_library_work_stays_untagged)
{
    run_child("quiet");
}
END_TEST

static Suite *by_library_unit_suite(void)
{
    Suite *s = suite_create("by library (unit)");
    TCase *tc = tcase_create("race");

    tcase_add_test(tc,
                   test_by_library_first_allocation_waits_for_the_tag_being_made);
    suite_add_tcase(s, tc);
    tc = tcase_create("the library's own");
    tcase_add_test(tc, test_by_library_library_work_stays_untagged);
    tcase_add_test(tc, test_by_library_thread_cache_released_at_exit);
    tcase_add_test(tc, test_by_library_cache_made_once_when_arming_allocates);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    tu_child_main(argc, argv, children);
    return tu_run_suite(by_library_unit_suite());
}

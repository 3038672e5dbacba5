/* Suite "untagged (unit)": the untagged row's count (src/untagged.c), to
 * the byte.
 *
 * The count is every thread's jemalloc counters less what the library took
 * from jemalloc for tags, kept where it calls jemalloc for a tag. A call
 * it misses, or counts at a size jemalloc does not, shifts the untagged
 * row for good; the public suite (check_stats) holds the row within its
 * stated slack, this one to the byte: tagged traffic through every path
 * that reaches jemalloc moves the count by the library's own memory
 * (untagged, ra__meta_held) and by nothing else. The rest is what the
 * count owes to threads and processes: a thread's exit, with what its
 * destructors free in later rounds, and a fork, whose child keeps the
 * blocks of the threads that did not follow it. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RA__MALLCTL_ALLOWED
#include "paths.h"
#include "testutil.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* jemalloc's answers of where a thread's counters are: asking builds
 * jemalloc's whole control tree, which a process that never reads a
 * figure should not pay for at start (--wrap=ra__be_thread_counters). */
static atomic_uint asked;
bool __real_ra__be_thread_counters(const uint64_t **allocated,
                                   const uint64_t **deallocated);
bool __wrap_ra__be_thread_counters(const uint64_t **allocated,
                                   const uint64_t **deallocated);
bool __wrap_ra__be_thread_counters(const uint64_t **allocated,
                                   const uint64_t **deallocated)
{
    atomic_fetch_add(&asked, 1);
    return __real_ra__be_thread_counters(allocated, deallocated);
}

/* As main() found them, before anything but the library's load ran. */
static unsigned asked_at_start;
static enum ra__untagged_state state_at_start;

static inline size_t counted(void)
{
    size_t bytes = 0;

    ck_assert(!ra__untagged_allocated(&bytes));
    return bytes;
}

#ifndef RA_TSAN
/* What the count says beyond the library's own memory. */
static int64_t beyond_meta(void)
{
    return (int64_t)counted() - (int64_t)ra__meta_held();
}

/* The blocks a consumer thread frees (its outbox, then the return stacks
 * or jemalloc through its tcache, once busy): more of one class than a
 * stack holds. */
#define CONSUMED 40000
static void *consumed[CONSUMED];

static void *idle(void *arg)
{
    return arg;
}

static void *consume(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < CONSUMED; i++)
        ra_free(consumed[i]);
    return NULL;
}

/* Tagged blocks of every kind, made and freed on this thread (front
 * caches filled, overflowed onto the return stacks and into the pair's
 * tcache; large and oversize blocks; realloc moved), and a block resized
 * in place (xallocx) both ways. */
static void traffic(ra_tag_t tag)
{
    void *p = ra_malloc_tag(tag, 20000);

    ck_assert(tu_tag_traffic(tag, 10));
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_ge(ra__resize_in_place(p, 24000, 0, 0), 20000);
    ck_assert_uint_le(ra__resize_in_place(p, 16400, 0, 0), 20480);
    ra_free(p);
}

static void on_block(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)ctx, (void)tag, (void)ptr, (void)size;
}

/* Tagged traffic with the profiler sampling every block, then with a hook
 * installed. */
static void traffic_instrumented(ra_tag_t tag)
{
    static const ra_hooks_t hooks = {on_block, on_block, NULL};
    int hook;

    ck_assert_int_eq(ra_prof_start(1), 0);
    traffic(tag);
    ck_assert_int_eq(ra_prof_stop(), 0);
    hook = ra_hooks_install(&hooks);
    ck_assert_int_ge(hook, 0);
    traffic(tag);
    ck_assert_int_eq(ra_hooks_remove(hook), 0);
}

START_TEST(test_untagged_unit_tagged_traffic_moves_only_the_library)
{
    ra_tag_t tag = tu_tag_create("traffic"), gone;
    int64_t before;

    /* What a first use allocates for good, first: the library's tables
     * and the thread's state, the unwinder's (the profiler's stacks), and
     * the C library's for a thread's stack (which it keeps for the next). */
    traffic(tag);
    traffic_instrumented(tag);
    tu_run_threads(1, idle, NULL);
    ra_thread_flush();
    before = beyond_meta();

    traffic(tag);
    ra_thread_flush();
    ck_assert_int_eq(beyond_meta(), before);

    traffic_instrumented(tag);
    ra_thread_flush();
    ck_assert_int_eq(beyond_meta(), before);

    tu_tag_push(tag);
    for (size_t i = 0; i < CONSUMED; i++)
        ck_assert_ptr_nonnull(consumed[i] = ra_malloc(64));
    tu_tag_pop(tag);
    tu_run_threads(1, consume, NULL);
    ra_thread_flush();
    ck_assert_int_eq(beyond_meta(), before);

    /* A reset and a destroy free without jemalloc's counters: they count
     * what they free on neither side. */
    tu_tag_push(tag);
    for (size_t i = 0; i < 100; i++)
        ck_assert_ptr_nonnull(ra_malloc(i % 2 ? 300 : 300 * KIB));
    tu_tag_pop(tag);
    ck_assert_int_eq(ra_tag_reset(tag), 0);
    gone = tu_tag_create("leftovers");
    ck_assert_ptr_nonnull(ra_malloc_tag(gone, 100));
    ck_assert_int_eq(ra_tag_destroy(gone), 0);
    ra_thread_flush();
    ck_assert_int_eq(ra_purge_all(), 0);
    ck_assert_int_eq(beyond_meta(), before);
}
END_TEST
#endif

#ifdef RA_OVERRIDE
/* A thread counts to the byte through its exit, and what a destructor of
 * its own frees in a later round (after the library's thread end, and
 * after the first round of its last step) counts too. */
static pthread_key_t late_key;
static void *late_block;

static void late_destructor(void *value)
{
    /* The first round arms the key again: the free comes in the second,
     * after the library's last step ran once. */
    if (value == (void *)1) {
        pthread_setspecific(late_key, (void *)2);
        return;
    }
    ra_free(late_block);
}

static void *late_worker(void *arg)
{
    (void)arg;
    ck_assert_ptr_nonnull(late_block = ra_malloc(5 * MIB));
    pthread_setspecific(late_key, (void *)1);
    return NULL;
}

static void *holder(void *arg)
{
    *(void **)arg = ra_malloc(3 * MIB);
    return NULL;
}

START_TEST(test_untagged_unit_threads_count_through_their_exit)
{
    void *held = NULL;
    size_t before;

    ck_assert_int_eq(pthread_key_create(&late_key, late_destructor), 0);
    /* The thread stacks that follow come from the C library's cache. */
    tu_run_threads(1, holder, &held);
    ra_free(held);
    before = counted();
    tu_run_threads(1, holder, &held);
    ck_assert_uint_eq(counted(), before + ra_malloc_usable_size(held));
    ra_free(held);
    ck_assert_uint_eq(counted(), before);
    tu_run_threads(1, late_worker, NULL);
    ck_assert_uint_eq(counted(), before);
}
END_TEST

/* Each thread's record points at its own counters, where jemalloc says
 * they are: the first threads ask jemalloc, the later ones find them at
 * the distance the first ones showed. */
static void *where(void *arg)
{
    uint64_t *a = NULL, *d = NULL;
    size_t len = sizeof a;

    (void)arg;
    if (mallctl("thread.allocatedp", &a, &len, NULL, 0) != 0 ||
        mallctl("thread.deallocatedp", &d, &len, NULL, 0) != 0 ||
        ra__untagged_self.state != RA__UNTAGGED_LISTED ||
        ra__untagged_self.allocated != a ||
        ra__untagged_self.deallocated != d)
        return (void *)1;
    return NULL;
}

START_TEST(test_untagged_unit_threads_find_their_own_counters)
{
    for (int i = 0; i < 4; i++) {
        pthread_t thread;
        void *wrong = (void *)1;
        ck_assert_int_eq(pthread_create(&thread, NULL, where, NULL), 0);
        ck_assert_int_eq(pthread_join(thread, &wrong), 0);
        ck_assert_msg(wrong == NULL, "thread %d: its record is not its own",
                      i);
    }
    ck_assert_ptr_null(where(NULL));
}
END_TEST

/* A thread holds blocks at the fork: the child keeps them, and its count
 * with them; freed there, they leave the child's count. */
static pthread_barrier_t fork_barrier;

static void *fork_holder(void *arg)
{
    *(void **)arg = ra_malloc(6 * MIB);
    pthread_barrier_wait(&fork_barrier); /* made */
    pthread_barrier_wait(&fork_barrier); /* forked */
    return NULL;
}

START_TEST(test_untagged_unit_a_child_keeps_the_other_threads_blocks)
{
    pthread_t thread;
    void *held = NULL;
    size_t before;
    pid_t pid;
    int status;

    ck_assert_int_eq(pthread_barrier_init(&fork_barrier, NULL, 2), 0);
    ck_assert_int_eq(pthread_create(&thread, NULL, fork_holder, &held), 0);
    pthread_barrier_wait(&fork_barrier);
    before = counted();
    pid = fork();
    if (pid == 0) {
        size_t size = ra_malloc_usable_size(held);
        if (counted() != before)
            _exit(1);
        ra_free(held);
        _exit(counted() == before - size ? 0 : 2);
    }
    ck_assert_int_gt(pid, 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the child's count: status %d", status);
    pthread_barrier_wait(&fork_barrier);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ra_free(held);
}
END_TEST
#endif

#ifdef RA_OVERRIDE
/* The loading thread of a process with no other is listed at load but
 * asks jemalloc only when first needed: its first read here. Its blocks
 * made before count all the same (jemalloc counts from the thread's
 * start). */
START_TEST(test_untagged_unit_the_loading_thread_asks_when_first_needed)
{
    void *before = malloc(4 * MIB);
    size_t all;

    ck_assert_uint_eq(asked_at_start, 0);
    ck_assert_int_eq(state_at_start, RA__UNTAGGED_UNFOUND);
    ck_assert_ptr_nonnull(before);
    memset(before, 1, 4 * MIB);
    ck_assert_uint_eq(atomic_load(&asked), 0);
    all = counted();
    ck_assert_uint_eq(atomic_load(&asked), 1);
    ck_assert_int_eq(ra__untagged_self.state, RA__UNTAGGED_LISTED);
    ck_assert_uint_ge(all, 4 * MIB);
    free(before);
    ck_assert_uint_le(counted(), all - 4 * MIB);
}
END_TEST

/* Before the process's second thread is made, the maker's counters are
 * found: from then on the row is read on any thread. */
static void *read_row(void *arg)
{
    *(size_t *)arg = counted();
    return NULL;
}

START_TEST(test_untagged_unit_a_second_thread_finds_the_maker_counted)
{
    void *before = malloc(8 * MIB);
    pthread_t thread;
    size_t seen = 0;

    ck_assert_ptr_nonnull(before);
    ck_assert_int_eq(pthread_create(&thread, NULL, read_row, &seen), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ck_assert_uint_ge(seen, 8 * MIB);
    free(before);
}
END_TEST
#endif

static Suite *untagged_suite(void)
{
    Suite *s = suite_create("untagged (unit)");
    TCase *tc = tcase_create("count");

    tcase_set_timeout(tc, 60);
#ifndef RA_TSAN
    /* ThreadSanitizer's build takes the library's own memory from the
     * sanitizer's malloc, which jemalloc's counters do not see. */
    tcase_add_test(tc, test_untagged_unit_tagged_traffic_moves_only_the_library);
#endif
#ifdef RA_OVERRIDE
    /* Built without the override, the library sees no thread start. */
    tcase_add_test(tc, test_untagged_unit_the_loading_thread_asks_when_first_needed);
    tcase_add_test(tc, test_untagged_unit_a_second_thread_finds_the_maker_counted);
    tcase_add_test(tc, test_untagged_unit_threads_find_their_own_counters);
    tcase_add_test(tc, test_untagged_unit_threads_count_through_their_exit);
    tcase_add_test(tc, test_untagged_unit_a_child_keeps_the_other_threads_blocks);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    asked_at_start = atomic_load(&asked);
    state_at_start = ra__untagged_self.state;
    return tu_run_suite(untagged_suite());
}

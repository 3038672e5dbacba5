/* Suite "pool": a tag's pool of arenas. Threads that share a tag are spread
 * over several arenas, all carving from the tag's one region, and every
 * figure, reset, destroy and budget covers the pool as it covered one
 * arena. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include "regionalloc.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)
#define THREADS 8u
#define BLOCKS 2000u /* per thread and round */

/* Worker threads never call Check (a passing assertion allocates under the
 * pushed tag, a failing one exits): they count errors. */
static _Atomic unsigned errors;
static pthread_barrier_t barrier;
static ra_tag_t shared_tag;

struct block {
    void *p;
    size_t size;
};
/* blocks[i] are thread i's of the current round. */
static struct block blocks[THREADS][BLOCKS];

/* 8 threads under one tag, at most 2 per arena, up to 8 arenas: the pool
 * grows to 4 arenas (this machine may have 2 CPUs, the default bound). */
static void pool_environment(void)
{
    ck_assert_int_eq(setenv("REGIONALLOC_THREADS_PER_ARENA", "2", 1), 0);
    ck_assert_int_eq(setenv("REGIONALLOC_TAG_ARENAS", "8", 1), 0);
}

/* Each worker's index, from 0: tu_run_threads gives them one argument. */
static _Atomic unsigned next_index;

static unsigned thread_index(void *arg)
{
    (void)arg;
    return atomic_fetch_add(&next_index, 1) % THREADS;
}

static size_t block_size(unsigned i, unsigned k)
{
    static const size_t sizes[] = {8, 16, 48, 96, 200, 512, 1500, 4096, 9000,
                                   40000};
    return sizes[(i * 7 + k) % (sizeof sizes / sizeof sizes[0])];
}

/* Thread i makes its round's blocks under the shared tag, each filled with
 * a pattern of its own. */
static void make_blocks(unsigned i, unsigned round)
{
    /* Busy first: the pool counts the pairs that are. */
    if (!tu_make_busy(shared_tag) || ra_tag_push(shared_tag) != 0)
        atomic_fetch_add(&errors, 1);
    for (unsigned k = 0; k < BLOCKS; k++) {
        size_t size = block_size(i, k);
        void *p = ra_malloc(size);
        if (p == NULL || ra_tag_of(p) != shared_tag) {
            atomic_fetch_add(&errors, 1);
            ra_free(p);
            p = NULL;
        } else {
            tu_fill_pattern(p, size, i * 100000 + k + round);
        }
        blocks[i][k] = (struct block){p, size};
    }
    if (ra_tag_pop(shared_tag) != 0)
        atomic_fetch_add(&errors, 1);
}

static void check_blocks(unsigned i, unsigned round)
{
    for (unsigned k = 0; k < BLOCKS; k++) {
        const struct block *b = &blocks[i][k];
        if (b->p != NULL &&
            tu_check_pattern(b->p, b->size, i * 100000 + k + round) !=
                b->size)
            atomic_fetch_add(&errors, 1);
    }
}

/* Frees the even blocks of thread (i + 1) % THREADS: every free is of a
 * block another thread made. */
static void free_neighbours_even(unsigned i)
{
    unsigned j = (i + 1) % THREADS;

    for (unsigned k = 0; k < BLOCKS; k += 2) {
        ra_free(blocks[j][k].p);
        blocks[j][k].p = NULL;
    }
}

static unsigned pool_arenas(ra_tag_t tag, unsigned out[64])
{
    int n = ra_tag_arenas(tag, out, 64);

    ck_assert_int_ge(n, 1);
    return (unsigned)n;
}

static unsigned arena_of(void *p)
{
    unsigned arena;
    size_t len = sizeof arena;

    ck_assert_int_eq(mallctl("arenas.lookup", &arena, &len, &p, sizeof p), 0);
    return arena;
}

static bool in_pool(unsigned arena, const unsigned *pool, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        if (pool[k] == arena)
            return true;
    return false;
}

/* The live blocks' sizes as jemalloc counts them. */
static size_t live_bytes(uint64_t *count)
{
    size_t sum = 0;

    *count = 0;
    for (unsigned i = 0; i < THREADS; i++)
        for (unsigned k = 0; k < BLOCKS; k++)
            if (blocks[i][k].p != NULL) {
                sum += ra_malloc_usable_size(blocks[i][k].p);
                (*count)++;
            }
    return sum;
}

static void *cross_frees_worker(void *arg)
{
    unsigned i = thread_index(arg);

    make_blocks(i, 0);
    pthread_barrier_wait(&barrier);
    free_neighbours_even(i);
    ra_thread_flush();
    return NULL;
}

START_TEST(test_pool_threads_spread_over_arenas_exactly)
{
    unsigned pool[64], n, used[64] = {0}, nused = 0;
    ra_tag_stats_t st;
    uint64_t live;
    size_t bytes;

    ra_tag_stats_t untagged_before;

    pool_environment();
    shared_tag = tu_tag_create("hot");
    untagged_before = tu_tag_stats(RA_TAG_NONE);
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    tu_run_threads(THREADS, cross_frees_worker, NULL);
    ck_assert_uint_eq(atomic_load(&errors), 0);

    n = pool_arenas(shared_tag, pool);
    ck_assert_uint_eq(n, 4); /* 8 threads, 2 per arena */
    for (unsigned i = 0; i < THREADS; i++)
        for (unsigned k = 0; k < BLOCKS; k++) {
            void *p = blocks[i][k].p;
            unsigned a;
            if (p == NULL)
                continue;
            ck_assert_uint_eq(ra_tag_of(p), shared_tag);
            a = arena_of(p);
            ck_assert_msg(in_pool(a, pool, n), "arena %u not the tag's", a);
            if (!in_pool(a, used, nused))
                used[nused++] = a;
        }
    ck_assert_uint_ge(nused, 2);

    /* Every thread flushed and exited: the pool's sum is exact. */
    bytes = live_bytes(&live);
    st = tu_tag_stats(shared_tag);
    ck_assert_uint_eq(st.allocated, bytes);
    ck_assert_uint_eq(st.nmalloc - st.ndalloc, live);
    ck_assert_uint_eq(st.nmalloc,
                      (uint64_t)THREADS * (BLOCKS + TU_BUSY_BLOCKS));
    /* The pool's arenas are the tag's, not untagged memory's: the untagged
     * figure grew by the threads' own state at most. */
    ck_assert_uint_lt(tu_tag_stats(RA_TAG_NONE).allocated,
                      untagged_before.allocated + bytes / 8);
}
END_TEST

START_TEST(test_pool_one_thread_one_arena)
{
    unsigned pool[64];
    ra_tag_t tag;
    void *p;

    pool_environment();
    tag = tu_tag_create("alone");
    tu_tag_push(tag);
    p = ra_malloc(100);
    tu_tag_pop(tag);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(pool_arenas(tag, pool), 1);
    ck_assert_uint_eq(arena_of(p), pool[0]);
    ra_free(p);
}
END_TEST

static void *touch_worker(void *arg)
{
    (void)arg;
    if (!tu_make_busy(shared_tag))
        atomic_fetch_add(&errors, 1);
    /* Alive together: each thread's busy pair counts while it lives. */
    pthread_barrier_wait(&barrier);
    return NULL;
}

START_TEST(test_pool_set_arenas_one_keeps_one_arena)
{
    unsigned pool[64];

    pool_environment();
    shared_tag = tu_tag_create("single");
    ck_assert_int_eq(ra_tag_set_arenas(shared_tag, 1), 0);
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    tu_run_threads(THREADS, touch_worker, NULL);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    ck_assert_uint_eq(pool_arenas(shared_tag, pool), 1);
}
END_TEST

START_TEST(test_pool_bound_is_the_configured_one)
{
    unsigned pool[64];

    ck_assert_int_eq(setenv("REGIONALLOC_THREADS_PER_ARENA", "1", 1), 0);
    ck_assert_int_eq(setenv("REGIONALLOC_TAG_ARENAS", "3", 1), 0);
    shared_tag = tu_tag_create("three");
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    tu_run_threads(THREADS, touch_worker, NULL);
    ck_assert_uint_eq(pool_arenas(shared_tag, pool), 3);
    /* A larger bound of its own lets it grow on. */
    ck_assert_int_eq(ra_tag_set_arenas(shared_tag, 5), 0);
    tu_run_threads(THREADS, touch_worker, NULL);
    ck_assert_uint_eq(pool_arenas(shared_tag, pool), 5);
    ck_assert_uint_eq(atomic_load(&errors), 0);
}
END_TEST

/* Threads that only free a tag's blocks put no load on its pool: one
 * maker and eight freers, one thread per arena, stay on one arena. */
static void *free_one_of_mine(void *arg)
{
    unsigned i = thread_index(arg);

    ra_free(blocks[0][i].p);
    pthread_barrier_wait(&barrier);
    return NULL;
}

START_TEST(test_pool_threads_that_only_free_do_not_grow_it)
{
    unsigned pool[64];

    ck_assert_int_eq(setenv("REGIONALLOC_THREADS_PER_ARENA", "1", 1), 0);
    ck_assert_int_eq(setenv("REGIONALLOC_TAG_ARENAS", "8", 1), 0);
    shared_tag = tu_tag_create("made here, freed there");
    tu_tag_push(shared_tag);
    for (unsigned i = 0; i < THREADS; i++)
        blocks[0][i].p = ra_malloc(48);
    tu_tag_pop(shared_tag);
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    tu_run_threads(THREADS, free_one_of_mine, NULL);
    ck_assert_uint_eq(pool_arenas(shared_tag, pool), 1);
    /* Allocating threads do: each alive one takes an arena of its own. */
    tu_run_threads(THREADS, touch_worker, NULL);
    ck_assert_uint_eq(pool_arenas(shared_tag, pool), THREADS);
    ck_assert_uint_eq(atomic_load(&errors), 0);
}
END_TEST

/* Threads that visit a tag, making a few blocks each, do not grow its
 * pool, alive together or not: the pool counts pairs busy enough to take
 * a tcache. */
static void *visit_worker(void *arg)
{
    void *p[100];

    (void)arg;
    for (unsigned k = 0; k < 100; k++)
        if ((p[k] = ra_malloc_tag(shared_tag, 16 + k)) == NULL)
            atomic_fetch_add(&errors, 1);
    pthread_barrier_wait(&barrier);
    for (unsigned k = 0; k < 100; k++)
        ra_free(p[k]);
    return NULL;
}

START_TEST(test_pool_visiting_threads_do_not_grow_it)
{
    unsigned pool[64];

    ck_assert_int_eq(setenv("REGIONALLOC_THREADS_PER_ARENA", "1", 1), 0);
    ck_assert_int_eq(setenv("REGIONALLOC_TAG_ARENAS", "8", 1), 0);
    shared_tag = tu_tag_create("visited");
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    tu_run_threads(THREADS, visit_worker, NULL);
    ck_assert_uint_eq(pool_arenas(shared_tag, pool), 1);
    /* Busy threads do, one arena each here. */
    tu_run_threads(THREADS, touch_worker, NULL);
    ck_assert_uint_eq(pool_arenas(shared_tag, pool), THREADS);
    ck_assert_uint_eq(atomic_load(&errors), 0);
}
END_TEST

START_TEST(test_pool_calls_check_their_arguments)
{
    unsigned out[2];
    ra_tag_t tag;

    pool_environment();
    tag = tu_tag_create("args");
    TU_FAILS_WITH(ra_tag_set_arenas(tag, 0), EINVAL);
    TU_FAILS_WITH(ra_tag_set_arenas(RA_TAG_NONE, 2), EINVAL);
    TU_FAILS_WITH(ra_tag_set_arenas(tag + 1000, 2), EINVAL);
    TU_FAILS_WITH(ra_tag_arenas(tag, NULL, 1), EINVAL);
    TU_FAILS_WITH(ra_tag_arenas(RA_TAG_NONE, out, 2), EINVAL);
    /* cap 0: the count alone. */
    ck_assert_int_eq(ra_tag_arenas(tag, NULL, 0), 1);
    ck_assert_int_eq(ra_tag_set_arenas(tag, 1000), 0); /* clamped to 64 */
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    TU_FAILS_WITH(ra_tag_arenas(tag, out, 2), EINVAL);
    TU_FAILS_WITH(ra_tag_set_arenas(tag, 2), EINVAL);
}
END_TEST

START_TEST(test_pool_pass_through_mode_fails_cleanly)
{
    unsigned out[2];
    ra_tag_t tag;

    ck_assert_int_eq(setenv("REGIONALLOC", "0", 1), 0);
    tag = tu_tag_create("off");
    TU_FAILS_WITH(ra_tag_arenas(tag, out, 2), ENOTSUP);
    TU_FAILS_WITH(ra_tag_set_arenas(tag, 2), ENOTSUP);
}
END_TEST

/* Threads that stay alive holding caches while the main thread resets or
 * destroys the tag, then allocate again: no block twice, none overwritten. */
static _Atomic int verb; /* 1: reset, 2: destroy and create again */

static void *verb_worker(void *arg)
{
    unsigned i = thread_index(arg);

    make_blocks(i, 0);
    pthread_barrier_wait(&barrier);
    /* Half freed into this thread's caches, half left live. */
    free_neighbours_even(i);
    pthread_barrier_wait(&barrier);
    /* The main thread resets or destroys here. */
    pthread_barrier_wait(&barrier);
    make_blocks(i, 1);
    pthread_barrier_wait(&barrier);
    check_blocks(i, 1);
    return NULL;
}

static int by_pointer(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a;
    uintptr_t y = (uintptr_t) * (void *const *)b;

    return x < y ? -1 : x > y;
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct block *)a)->p;
    uintptr_t y = (uintptr_t)((const struct block *)b)->p;

    return x < y ? -1 : x > y;
}

static void *verb_main(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    if (atomic_load(&verb) == 1) {
        if (ra_tag_reset(shared_tag) != 0)
            atomic_fetch_add(&errors, 1);
    } else {
        ra_tag_t old = shared_tag;
        if (ra_tag_destroy(old) != 0)
            atomic_fetch_add(&errors, 1);
        shared_tag = ra_tag_create("hot again");
        if (shared_tag != old) /* the slot, its pool with it, is recycled */
            atomic_fetch_add(&errors, 1);
    }
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    return NULL;
}

static void run_verb_under_threads(int which)
{
    pthread_t workers[THREADS], leader;
    static struct block all[THREADS * BLOCKS];
    unsigned pool[64], n, total = 0;
    ra_tag_stats_t st;

    pool_environment();
    atomic_store(&verb, which);
    shared_tag = tu_tag_create("hot");
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, THREADS + 1), 0);
    for (unsigned i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&workers[i], NULL, verb_worker,
                                        NULL), 0);
    ck_assert_int_eq(pthread_create(&leader, NULL, verb_main, NULL), 0);
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(workers[i], NULL);
    pthread_join(leader, NULL);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    n = pool_arenas(shared_tag, pool);
    ck_assert_uint_eq(n, 4);

    for (unsigned i = 0; i < THREADS; i++)
        for (unsigned k = 0; k < BLOCKS; k++)
            if (blocks[i][k].p != NULL)
                all[total++] = blocks[i][k];
    ck_assert_uint_eq(total, THREADS * BLOCKS);
    qsort(all, total, sizeof all[0], by_address);
    for (unsigned k = 0; k + 1 < total; k++)
        ck_assert_msg((uintptr_t)all[k].p + all[k].size <=
                          (uintptr_t)all[k + 1].p,
                      "blocks %p and %p overlap", all[k].p, all[k + 1].p);
    /* Only the second round is live, counted, and held: the verb freed
     * the first round's blocks in every arena of the pool. */
    st = tu_tag_stats(shared_tag);
    ck_assert_uint_eq(st.nmalloc - st.ndalloc, total);
    {
        uint64_t live;
        ck_assert_uint_eq(st.allocated, live_bytes(&live));
    }
}

START_TEST(test_pool_reset_under_threads_hands_no_block_out_twice)
{
    run_verb_under_threads(1);
}
END_TEST

START_TEST(test_pool_destroy_under_threads_hands_no_block_out_twice)
{
    run_verb_under_threads(2);
}
END_TEST

START_TEST(test_pool_recycled_with_its_slot)
{
    unsigned before[64], after[64], n;
    ra_tag_t tag;

    pool_environment();
    shared_tag = tu_tag_create("hot");
    ck_assert_int_eq(ra_tag_set_arenas(shared_tag, 2), 0);
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    tu_run_threads(THREADS, touch_worker, NULL);
    n = pool_arenas(shared_tag, before);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ra_tag_destroy(shared_tag), 0);
    tag = tu_tag_create("next holder");
    ck_assert_uint_eq(tag, shared_tag);
    ck_assert_uint_eq(pool_arenas(tag, after), n);
    ck_assert_int_eq(memcmp(before, after, n * sizeof before[0]), 0);
    /* The bound of the last holder is gone: this one grows to 4. */
    shared_tag = tag;
    tu_run_threads(THREADS, touch_worker, NULL);
    ck_assert_uint_eq(pool_arenas(tag, after), 4);
    ck_assert_uint_eq(atomic_load(&errors), 0);
}
END_TEST

/* A hard limit bounds the pool's sum: threads racing to fill it never see
 * the region's committed bytes above it. */
#define BUDGET (48 * MIB)
static _Atomic bool filling_done;
static _Atomic unsigned refused;

static void *fill_worker(void *arg)
{
    unsigned i = thread_index(arg);
    unsigned k = 0;

    if (ra_tag_push(shared_tag) != 0)
        atomic_fetch_add(&errors, 1);
    /* Every thread's pair is made busy (and the pool grown) before any
     * fills. */
    if (!tu_make_busy(shared_tag))
        atomic_fetch_add(&errors, 1);
    pthread_barrier_wait(&barrier);
    while (k < BLOCKS) {
        void *p = ra_malloc(64 << 10);
        if (p == NULL) {
            atomic_fetch_add(&refused, 1);
            break;
        }
        memset(p, 1, 64 << 10);
        blocks[i][k++] = (struct block){p, 64 << 10};
    }
    if (ra_tag_pop(shared_tag) != 0)
        atomic_fetch_add(&errors, 1);
    return NULL;
}

static void *sampler(void *arg)
{
    (void)arg;
    while (!atomic_load(&filling_done)) {
        ra_tag_usage_t u;
        if (ra_tag_usage(shared_tag, &u) != 0 || u.mapped > BUDGET)
            atomic_fetch_add(&errors, 1);
    }
    return NULL;
}

START_TEST(test_pool_budget_bounds_the_pool_sum)
{
    ra_tag_limit_t limit = {.hard = BUDGET};
    pthread_t s;
    ra_tag_usage_t u;
    unsigned pool[64];

    pool_environment();
    shared_tag = tu_tag_create("bounded");
    ck_assert_int_eq(ra_tag_set_limit(shared_tag, &limit), 0);
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    ck_assert_int_eq(pthread_create(&s, NULL, sampler, NULL), 0);
    tu_run_threads(THREADS, fill_worker, NULL);
    atomic_store(&filling_done, true);
    pthread_join(s, NULL);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    ck_assert_uint_ge(atomic_load(&refused), 1);
    ck_assert_uint_ge(pool_arenas(shared_tag, pool), 2);
    ck_assert_int_eq(ra_tag_usage(shared_tag, &u), 0);
    ck_assert_uint_le(u.peak_mapped, BUDGET);
}
END_TEST

START_TEST(test_pool_small_budget_keeps_one_arena)
{
    ra_tag_limit_t limit = {.hard = 6 * MIB};
    unsigned pool[64];

    pool_environment();
    shared_tag = tu_tag_create("tight");
    ck_assert_int_eq(ra_tag_set_limit(shared_tag, &limit), 0);
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    tu_run_threads(THREADS, touch_worker, NULL);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    /* Each arena's metadata would eat the budget of its blocks. */
    ck_assert_uint_eq(pool_arenas(shared_tag, pool), 1);
}
END_TEST

/* A child forked while threads grow a pool can make threads of its own. */
static void *grow_worker(void *arg)
{
    (void)arg;
    for (unsigned r = 0; r < 50; r++) {
        if (ra_tag_push(shared_tag) != 0)
            atomic_fetch_add(&errors, 1);
        ra_free(ra_malloc(32));
        if (ra_tag_pop(shared_tag) != 0)
            atomic_fetch_add(&errors, 1);
    }
    return NULL;
}

static void *spawn_growers(void *arg)
{
    (void)arg;
    for (unsigned r = 0; r < 20; r++) {
        pthread_t t;
        if (pthread_create(&t, NULL, grow_worker, NULL) == 0)
            pthread_join(t, NULL);
    }
    return NULL;
}

START_TEST(test_pool_fork_while_growing)
{
    pthread_t t;
    pid_t pid;
    int status;

    pool_environment();
    shared_tag = tu_tag_create("forked");
    ck_assert_int_eq(pthread_create(&t, NULL, spawn_growers, NULL), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pthread_t u[4];
        for (unsigned i = 0; i < 4; i++)
            if (pthread_create(&u[i], NULL, grow_worker, NULL) != 0)
                _exit(2);
        for (unsigned i = 0; i < 4; i++)
            pthread_join(u[i], NULL);
        _exit(atomic_load(&errors) == 0 &&
                      ra_tag_arenas(shared_tag, NULL, 0) >= 1
                  ? 0
                  : 1);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    pthread_join(t, NULL);
    ck_assert_uint_eq(atomic_load(&errors), 0);
}
END_TEST

/* -- blocks freed by another thread go home without jemalloc -------------- */
/* A producer and a consumer in lock step: the producer makes a batch of
 * 64-byte blocks, the consumer frees it, the producer makes the next.
 * What the consumer's front cache cannot hold reaches the producer's
 * refills through the tag's return stacks, not through jemalloc. */
#define STEPS 1000u
#define STEP_BLOCKS 32u
static void *step_blocks[STEP_BLOCKS];
static _Atomic unsigned step_made, step_freed;
/* Whether the two threads flush their caches once done. */
static bool flush_at_end;

/* Done; maybe flushed; the main thread looks between the last two. */
static void lockstep_end(void)
{
    pthread_barrier_wait(&barrier);
    if (flush_at_end)
        ra_thread_flush();
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
}

static void *lockstep_producer(void *arg)
{
    (void)arg;
    if (ra_tag_push(shared_tag) != 0)
        atomic_fetch_add(&errors, 1);
    for (unsigned r = 0; r < STEPS; r++) {
        while (atomic_load(&step_freed) != r)
            sched_yield();
        for (unsigned k = 0; k < STEP_BLOCKS; k++)
            if ((step_blocks[k] = ra_malloc(64)) == NULL)
                atomic_fetch_add(&errors, 1);
        atomic_store(&step_made, r + 1);
    }
    if (ra_tag_pop(shared_tag) != 0)
        atomic_fetch_add(&errors, 1);
    lockstep_end();
    return NULL;
}

static void *lockstep_consumer(void *arg)
{
    (void)arg;
    for (unsigned r = 0; r < STEPS; r++) {
        while (atomic_load(&step_made) != r + 1)
            sched_yield();
        /* The last batch stays live. */
        if (r + 1 < STEPS)
            for (unsigned k = 0; k < STEP_BLOCKS; k++)
                ra_free(step_blocks[k]);
        atomic_store(&step_freed, r + 1);
    }
    lockstep_end();
    return NULL;
}

/* jemalloc's count of 64-byte blocks handed out by the tag's arenas. */
static uint64_t jemalloc_bin_nmalloc(ra_tag_t tag, size_t size)
{
    unsigned pool[64], n = pool_arenas(tag, pool), nbins, bin = 0;
    uint64_t epoch = 1, sum = 0;
    size_t len = sizeof nbins;
    char name[96];

    ck_assert_int_eq(mallctl("epoch", NULL, NULL, &epoch, sizeof epoch), 0);
    ck_assert_int_eq(mallctl("arenas.nbins", &nbins, &len, NULL, 0), 0);
    for (; bin < nbins; bin++) {
        size_t bin_size;
        len = sizeof bin_size;
        snprintf(name, sizeof name, "arenas.bin.%u.size", bin);
        ck_assert_int_eq(mallctl(name, &bin_size, &len, NULL, 0), 0);
        if (bin_size == size)
            break;
    }
    ck_assert_uint_lt(bin, nbins);
    for (unsigned k = 0; k < n; k++) {
        uint64_t v;
        len = sizeof v;
        snprintf(name, sizeof name, "stats.arenas.%u.bins.%u.nmalloc",
                 pool[k], bin);
        ck_assert_int_eq(mallctl(name, &v, &len, NULL, 0), 0);
        sum += v;
    }
    return sum;
}

static void run_lockstep(pthread_t *p, pthread_t *c)
{
    shared_tag = tu_tag_create("producer-consumer");
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, 3), 0);
    ck_assert_int_eq(pthread_create(p, NULL, lockstep_producer, NULL), 0);
    ck_assert_int_eq(pthread_create(c, NULL, lockstep_consumer, NULL), 0);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    ck_assert_uint_eq(atomic_load(&errors), 0);
}

static void end_lockstep(pthread_t p, pthread_t c)
{
    pthread_barrier_wait(&barrier);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
}

START_TEST(test_pool_remote_frees_come_home_without_jemalloc)
{
    pthread_t p, c;
    uint64_t from_jemalloc;

    run_lockstep(&p, &c);
    from_jemalloc = jemalloc_bin_nmalloc(shared_tag, 64);
    /* 32,000 blocks made; without the return stacks every one of them
     * came from jemalloc (measured: 32,000 and more). */
    ck_assert_msg(from_jemalloc < STEPS * STEP_BLOCKS / 10,
                  "%llu of %u blocks came from jemalloc",
                  (unsigned long long)from_jemalloc, STEPS * STEP_BLOCKS);
    end_lockstep(p, c);
}
END_TEST

/* Both threads alive, each flushed once: allocated is exact, the stacks
 * drained with the caches. */
START_TEST(test_pool_remote_frees_exact_after_flush)
{
    pthread_t p, c;
    ra_tag_stats_t st;
    size_t live = 0;

    flush_at_end = true;
    run_lockstep(&p, &c);
    for (unsigned k = 0; k < STEP_BLOCKS; k++)
        live += ra_malloc_usable_size(step_blocks[k]);
    st = tu_tag_stats(shared_tag);
    ck_assert_uint_eq(st.allocated, live);
    ck_assert_uint_eq(st.nmalloc - st.ndalloc, STEP_BLOCKS);
    end_lockstep(p, c);
}
END_TEST

/* A makes 200 blocks, B frees them all: B's front cache keeps at most a
 * bin's worth, the tag's stack of the class takes the next 64 (its bound),
 * jemalloc the rest; nobody takes the stack back. Three barriers of A, B
 * and the main thread: made, freed, looked at. */
/* The end of make_200 and free_200: freed (the second barrier), a flush
 * when asked, looked at by the main thread. */
static void looked_at(void)
{
    pthread_barrier_wait(&barrier);
    if (flush_at_end)
        ra_thread_flush();
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
}

static void *make_200(void *arg)
{
    (void)arg;
    if (ra_tag_push(shared_tag) != 0)
        atomic_fetch_add(&errors, 1);
    for (unsigned k = 0; k < 200; k++)
        if ((blocks[0][k].p = ra_malloc(64)) == NULL)
            atomic_fetch_add(&errors, 1);
    if (ra_tag_pop(shared_tag) != 0)
        atomic_fetch_add(&errors, 1);
    pthread_barrier_wait(&barrier);
    looked_at();
    return NULL;
}

static void *free_200(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&barrier);
    for (unsigned k = 0; k < 200; k++)
        ra_free(blocks[0][k].p);
    looked_at();
    return NULL;
}

/* _i: 0, the main thread purges the tag; 1, both threads flush; 2,
 * neither: their exits must drain the stacks. */
START_TEST(test_pool_remote_frees_drained_by_purge_flush_and_exit)
{
    pthread_t a, b;
    ra_tag_stats_t after;
    size_t before_cached;

    flush_at_end = _i == 1;
    shared_tag = tu_tag_create("stacked");
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, 3), 0);
    ck_assert_int_eq(pthread_create(&a, NULL, make_200, NULL), 0);
    ck_assert_int_eq(pthread_create(&b, NULL, free_200, NULL), 0);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    /* The stack's 64 blocks are allocated to jemalloc until drained. */
    before_cached = tu_jemalloc_allocated(shared_tag);
    if (_i == 0)
        ck_assert_int_eq(ra_tag_purge(shared_tag), 0);
    pthread_barrier_wait(&barrier);
    after = tu_tag_stats(shared_tag);
    ck_assert_uint_eq(after.allocated, 0); /* exact, flushed or not */
    if (_i == 0)
        ck_assert_uint_ge(before_cached - tu_jemalloc_allocated(shared_tag),
                          64 * 64);
    if (_i == 1) /* flushed, alive: nothing cached */
        ck_assert_uint_eq(tu_jemalloc_allocated(shared_tag), 0);
    pthread_barrier_wait(&barrier);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    after = tu_tag_stats(shared_tag);
    ck_assert_uint_eq(after.allocated, 0);
    ck_assert_uint_eq(after.nmalloc, 200);
    ck_assert_uint_eq(after.ndalloc, 200);
}
END_TEST

START_TEST(test_pool_remote_frees_forgotten_by_reset)
{
    pthread_t p, c;
    static void *again[4096];
    ra_tag_stats_t st;

    run_lockstep(&p, &c);
    /* The live batch and everything on the stacks go at once. */
    ck_assert_int_eq(ra_tag_reset(shared_tag), 0);
    end_lockstep(p, c);
    st = tu_tag_stats(shared_tag);
    ck_assert_uint_eq(st.allocated, 0);
    /* No block comes out twice: 4096 distinct, each 64 bytes apart at
     * least. */
    tu_tag_push(shared_tag);
    for (unsigned k = 0; k < 4096; k++)
        again[k] = ra_malloc(64);
    tu_tag_pop(shared_tag);
    qsort(again, 4096, sizeof again[0], by_pointer);
    for (unsigned k = 0; k + 1 < 4096; k++)
        ck_assert_uint_ge((uintptr_t)again[k + 1] - (uintptr_t)again[k], 64);
}
END_TEST

static Suite *pool_suite(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pool_threads_spread_over_arenas_exactly);
    tcase_add_test(tc, test_pool_one_thread_one_arena);
    tcase_add_test(tc, test_pool_set_arenas_one_keeps_one_arena);
    tcase_add_test(tc, test_pool_bound_is_the_configured_one);
    tcase_add_test(tc, test_pool_threads_that_only_free_do_not_grow_it);
    tcase_add_test(tc, test_pool_visiting_threads_do_not_grow_it);
    tcase_add_test(tc, test_pool_calls_check_their_arguments);
    tcase_add_test(tc, test_pool_pass_through_mode_fails_cleanly);
    tcase_add_test(tc, test_pool_reset_under_threads_hands_no_block_out_twice);
    tcase_add_test(tc, test_pool_destroy_under_threads_hands_no_block_out_twice);
    tcase_add_test(tc, test_pool_recycled_with_its_slot);
    tcase_add_test(tc, test_pool_budget_bounds_the_pool_sum);
    tcase_add_test(tc, test_pool_small_budget_keeps_one_arena);
    suite_add_tcase(s, tc);
    tc = tcase_create("returns");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pool_remote_frees_come_home_without_jemalloc);
    tcase_add_test(tc, test_pool_remote_frees_exact_after_flush);
    tcase_add_loop_test(tc, test_pool_remote_frees_drained_by_purge_flush_and_exit,
                        0, 3);
    tcase_add_test(tc, test_pool_remote_frees_forgotten_by_reset);
    suite_add_tcase(s, tc);
    tc = tcase_create("fork");
    /* ThreadSanitizer cannot follow a fork while threads run. */
    tcase_set_tags(tc, "multithreaded-fork");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pool_fork_while_growing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(pool_suite());
}

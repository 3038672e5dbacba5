/* Two threads, cross-thread frees: a producer allocates (under a tag, for
 * the tagged contenders) blocks of 8-256 bytes in batches of 256 and hands
 * each batch through a lock-free single-producer single-consumer queue to a
 * consumer that frees them. One op is one malloc plus its remote free; the
 * time is wall time from both threads starting to the last free. Built
 * twice: bench/threads and bench/threads_glibc. */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>

#include "contenders.h"
#ifndef BENCH_GLIBC
#include <regionalloc.h>
#endif

#define BATCH 256
#define SLOTS 64 /* batches in flight */
#define NSIZES 4096

/* Batches live in static memory, not in any contender's heap. */
static struct {
    alignas(64) _Atomic uint64_t head; /* batches published by the producer */
    alignas(64) _Atomic uint64_t tail; /* batches freed by the consumer */
    alignas(64) _Atomic unsigned ready;
    _Atomic int go;
    void *slot[SLOTS][BATCH];
} queue;

static size_t sizes[NSIZES];
static uint64_t nbatches;

/* enter runs in the producer before the clock starts, leave after the
 * consumer's last free. */
struct contender_ops {
    void *(*produce)(void *);
    void *(*consume)(void *);
};

static void spin(unsigned *n)
{
    if (++*n % 256 == 0)
        sched_yield(); /* the machine may have fewer cores than threads */
    else
        __builtin_ia32_pause();
}

static void wait_for_start(void)
{
    unsigned n = 0;

    atomic_fetch_add(&queue.ready, 1);
    while (!atomic_load_explicit(&queue.go, memory_order_acquire))
        spin(&n);
}

BENCH_INLINE void produce(bench_alloc_fn m)
{
    unsigned n = 0;
    uint64_t k = 0;

    for (uint64_t b = 0; b < nbatches; b++) {
        void **batch = queue.slot[b % SLOTS];
        while (b - atomic_load_explicit(&queue.tail, memory_order_acquire) >=
               SLOTS)
            spin(&n);
        for (unsigned i = 0; i < BATCH; i++, k++) {
            void *p = m(sizes[k & (NSIZES - 1)]);
            if (p == NULL)
                bench_die("out of memory");
            *(volatile char *)p = 1;
            batch[i] = p;
        }
        atomic_store_explicit(&queue.head, b + 1, memory_order_release);
    }
}

BENCH_INLINE void consume(bench_free_fn f)
{
    unsigned n = 0;

    for (uint64_t b = 0; b < nbatches; b++) {
        void **batch = queue.slot[b % SLOTS];
        while (atomic_load_explicit(&queue.head, memory_order_acquire) <= b)
            spin(&n);
        for (unsigned i = 0; i < BATCH; i++)
            f(batch[i]);
        atomic_store_explicit(&queue.tail, b + 1, memory_order_release);
    }
}

/* The producer must outlive the frees of its blocks for the contenders
 * whose teardown (pop, heap delete) should see them all freed. */
static void wait_until_drained(void)
{
    unsigned n = 0;

    while (atomic_load_explicit(&queue.tail, memory_order_acquire) < nbatches)
        spin(&n);
}

static void nothing(void)
{
}

#define DEFINE_CONTENDER(name, m, f, enter_fn, leave_fn)                      \
    static void *produce_##name(void *arg)                                   \
    {                                                                        \
        (void)arg;                                                           \
        enter_fn();                                                          \
        wait_for_start();                                                    \
        produce(m);                                                          \
        wait_until_drained();                                                \
        leave_fn();                                                          \
        return NULL;                                                         \
    }                                                                        \
    static void *consume_##name(void *arg)                                   \
    {                                                                        \
        (void)arg;                                                           \
        wait_for_start();                                                    \
        consume(f);                                                          \
        return NULL;                                                         \
    }                                                                        \
    static const struct contender_ops ops_##name = {produce_##name,          \
                                                    consume_##name};

DEFINE_CONTENDER(process, alloc_process, free_process, nothing, nothing)

#ifndef BENCH_GLIBC
DEFINE_CONTENDER(jemalloc, alloc_jemalloc, free_jemalloc, nothing, nothing)

static ra_tag_t tag;

static void push_tag(void)
{
    if (ra_tag_push(tag) != 0)
        bench_die("ra_tag_push");
    bench_check_tagged(tag);
}

static void pop_tag(void)
{
    ra_tag_pop(tag);
}

/* A mimalloc heap belongs to the thread that made it: the producer. */
static void new_heap(void)
{
    bench_mi_heap = bench_mi.heap_new();
    if (bench_mi_heap == NULL)
        bench_die("mi_heap_new");
}

static void delete_heap(void)
{
    bench_mi.heap_delete(bench_mi_heap);
    bench_mi_heap = NULL;
}

static void push_tracker(void)
{
    tracker_push(1);
}

static void pop_tracker(void)
{
    tracker_pop(1);
}

DEFINE_CONTENDER(tagged, alloc_process, free_process, push_tag, pop_tag)
DEFINE_CONTENDER(mimalloc, alloc_mimalloc, free_mimalloc, new_heap,
                 delete_heap)
DEFINE_CONTENDER(tracker, alloc_tracker, free_tracker, push_tracker,
                 pop_tracker)
#endif

/* ns per op, from releasing both threads to the consumer's last free. */
static double run_pair(void *arg)
{
    const struct contender_ops *ops = arg;
    pthread_t producer, consumer;
    unsigned n = 0;
    double t0, t1;

    atomic_store(&queue.head, 0);
    atomic_store(&queue.tail, 0);
    atomic_store(&queue.ready, 0);
    atomic_store(&queue.go, 0);
    if (pthread_create(&producer, NULL, ops->produce, NULL) != 0 ||
        pthread_create(&consumer, NULL, ops->consume, NULL) != 0)
        bench_die("pthread_create");
    while (atomic_load(&queue.ready) < 2)
        spin(&n);
    t0 = bench_now_ns();
    atomic_store_explicit(&queue.go, 1, memory_order_release);
    pthread_join(consumer, NULL);
    t1 = bench_now_ns();
    pthread_join(producer, NULL);
    return (t1 - t0) / (nbatches * BATCH);
}

int main(void)
{
    const char *workload = "2 threads, producer mallocs, consumer frees";

    bench_open_contenders();
    bench_fill_sizes(sizes, NSIZES, 54321, 256);
    nbatches = bench_scaled(2000000, 100 * BATCH) / BATCH;
    {
#ifdef BENCH_GLIBC
        struct bench_contender c[] = {
            {NAME_GLIBC, run_pair, (void *)&ops_process, NULL},
        };
#else
        struct bench_contender c[] = {
            {NAME_JEMALLOC, run_pair, (void *)&ops_jemalloc, NULL},
            {NAME_UNTAGGED, run_pair, (void *)&ops_process, NULL},
            {NAME_TAGGED, run_pair, (void *)&ops_tagged, NULL},
            {NAME_MIMALLOC, run_pair, (void *)&ops_mimalloc, bench_mi_missing},
            {NAME_TRACKER, run_pair, (void *)&ops_tracker, NULL},
        };
        if ((tag = ra_tag_create("bench-threads")) == RA_TAG_NONE)
            bench_die("ra_tag_create");
#endif
        bench_compare(workload, "ns/op", c, sizeof c / sizeof c[0],
                      BASELINE_JEMALLOC);
    }
    return 0;
}

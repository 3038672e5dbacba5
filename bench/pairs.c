/* Many (thread, tag) pairs: 16 threads, each using 300 tags in turn (a
 * visit: push, 64 malloc+free of 8-256 bytes, pop). Two figures:
 *   - the memory the pairs hold once idle: RSS after every thread has
 *     visited every tag and waits, threads alive, nothing flushed, minus
 *     the RSS before, per pair;
 *   - the steady cost (the thread's CPU time) per malloc+free of the
 *     visits, against the same loop on one tag per thread (16 pairs), and
 *     on 250 tags (4,000 pairs): all within jemalloc's 4,093 explicit
 *     tcaches, so that 300 against 250 shows what the busy pairs left
 *     without one (if any) cost.
 * The same with mimalloc's heaps (each thread makes 300 heaps of its own,
 * mi_heap_new, and visits them), for what an allocator with a heap per
 * (thread, tag) pays for the same working set.
 * Run with REGIONALLOC_MAX_TAGS of at least 301 (run.sh does). */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <regionalloc.h>

#include "contenders.h"

#define THREADS 16
#define TAGS 300
/* 16 x 250 = 4,000 pairs: within jemalloc's 4,093 explicit tcaches (minus
 * the few other users), to tell the cost of pairs left without one from
 * the cost of the working set. */
#define TAGS_CACHED 250
#define PER_VISIT 64

static ra_tag_t tags[TAGS];
static size_t sizes[PER_VISIT];
static pthread_barrier_t warm, go, done;
static unsigned ntags_used;
static uint64_t rounds;
static double thread_ns[THREADS];

/* The calling thread's CPU time: 16 threads share 2 processors, and time
 * spent waiting for one is not the allocator's. */
static double thread_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void visit(ra_tag_t tag)
{
    void *blocks[PER_VISIT];

    if (ra_tag_push(tag) != 0)
        bench_die("ra_tag_push");
    for (unsigned i = 0; i < PER_VISIT; i++) {
        if ((blocks[i] = malloc(sizes[i])) == NULL)
            bench_die("out of memory");
        *(volatile char *)blocks[i] = 1;
    }
    for (unsigned i = 0; i < PER_VISIT; i++)
        free(blocks[i]);
    ra_tag_pop(tag);
}

static void visit_heap(mi_heap_t *heap)
{
    void *blocks[PER_VISIT];

    for (unsigned i = 0; i < PER_VISIT; i++) {
        if ((blocks[i] = bench_mi.heap_malloc(heap, sizes[i])) == NULL)
            bench_die("out of memory");
        *(volatile char *)blocks[i] = 1;
    }
    for (unsigned i = 0; i < PER_VISIT; i++)
        bench_mi.free(blocks[i]);
}

static bool use_mimalloc;

/* Visit t of thread id: its t-th tag, or heap. */
static void visit_nth(unsigned id, unsigned t, mi_heap_t **heaps)
{
    if (use_mimalloc)
        visit_heap(heaps[t]);
    else
        visit(tags[(t + id) % TAGS]);
}

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    mi_heap_t *heaps[TAGS];
    double t0;

    for (unsigned t = 0; use_mimalloc && t < ntags_used; t++)
        if ((heaps[t] = bench_mi.heap_new()) == NULL)
            bench_die("mi_heap_new");
    for (unsigned t = 0; t < ntags_used; t++)
        visit_nth(id, t, heaps);
    pthread_barrier_wait(&warm);
    pthread_barrier_wait(&go);
    t0 = thread_cpu_ns();
    for (uint64_t r = 0; r < rounds; r++)
        for (unsigned t = 0; t < ntags_used; t++)
            visit_nth(id, t, heaps);
    thread_ns[id] = (thread_cpu_ns() - t0) /
                    (double)(rounds * ntags_used * PER_VISIT);
    pthread_barrier_wait(&done);
    for (unsigned t = 0; use_mimalloc && t < ntags_used; t++)
        bench_mi.heap_delete(heaps[t]);
    return NULL;
}

/* One run with each thread using ntags tags: the RSS the pairs hold when
 * warm and idle (KiB per pair) in *kib, the median thread's ns per op. */
static double run(unsigned ntags, double *kib)
{
    pthread_t th[THREADS];
    size_t before = bench_rss_bytes(), idle;

    ntags_used = ntags;
    pthread_barrier_init(&warm, NULL, THREADS + 1);
    pthread_barrier_init(&go, NULL, THREADS + 1);
    pthread_barrier_init(&done, NULL, THREADS + 1);
    for (unsigned i = 0; i < THREADS; i++)
        if (pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i) != 0)
            bench_die("pthread_create");
    pthread_barrier_wait(&warm);
    idle = bench_rss_bytes();
    *kib = (double)(idle - before) / 1024.0 / (THREADS * ntags);
    pthread_barrier_wait(&go);
    pthread_barrier_wait(&done);
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&warm);
    pthread_barrier_destroy(&go);
    pthread_barrier_destroy(&done);
    return bench_median(thread_ns, THREADS);
}

int main(void)
{
    double kib1, kib_some, kib_many, ns1, ns_some, ns_many;

    bench_open_contenders();
    if (!ra_enabled())
        bench_die("pass-through mode: no tags");
    for (unsigned i = 0; i < TAGS; i++) {
        char name[32];
        snprintf(name, sizeof name, "pair-%u", i);
        if ((tags[i] = ra_tag_create(name)) == RA_TAG_NONE)
            bench_die("ra_tag_create (REGIONALLOC_MAX_TAGS >= 301?)");
    }
    bench_fill_sizes(sizes, PER_VISIT, 777, 256);
    /* The pairs of a run stay after it (threads exit, their caches are
     * given back; arenas, tags and their dirty pages stay): the one-tag
     * run first, then the one whose memory is reported. */
    rounds = bench_scaled(3000, 10);
    ns1 = run(1, &kib1);
    rounds = bench_scaled(30, 2);
    ns_many = run(TAGS, &kib_many);
    ns_some = run(TAGS_CACHED, &kib_some);
    bench_row("16 threads x 300 tags: memory per idle pair",
              "libregionalloc tagged",
              kib_many, "KiB/pair", -1, kib_many, kib_many);
    bench_row("16 threads x 300 tags: ns per malloc+free", "16 x 1 tag",
              ns1, "ns/op", 1.0, ns1, ns1);
    bench_row("16 threads x 300 tags: ns per malloc+free",
              "16 x 250 tags (4,000 pairs)", ns_some,
              "ns/op", ns_some / ns1, ns_some, ns_some);
    bench_row("16 threads x 300 tags: ns per malloc+free", "16 x 300 tags",
              ns_many, "ns/op", ns_many / ns1, ns_many, ns_many);
    if (bench_mi_missing != NULL) {
        bench_row_missing("16 threads x 300 tags: memory per idle pair",
                          "mimalloc, 16 x 300 heaps", bench_mi_missing);
        return 0;
    }
    use_mimalloc = true;
    rounds = bench_scaled(3000, 10);
    ns1 = run(1, &kib1);
    rounds = bench_scaled(30, 2);
    ns_many = run(TAGS, &kib_many);
    bench_row("16 threads x 300 tags: memory per idle pair",
              "mimalloc, 16 x 300 heaps", kib_many, "KiB/pair", -1, kib_many,
              kib_many);
    bench_row("16 threads x 300 tags: ns per malloc+free",
              "mimalloc, 16 x 1 heap", ns1, "ns/op", 1.0, ns1, ns1);
    bench_row("16 threads x 300 tags: ns per malloc+free",
              "mimalloc, 16 x 300 heaps", ns_many, "ns/op", ns_many / ns1,
              ns_many, ns_many);
    return 0;
}

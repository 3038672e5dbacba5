/* A hot tag: N threads (argv[1], 8 or 16) in a ring, all under one tag
 * (or, with argv[2] "pairs", N / 2 producer/consumer pairs).
 * Each makes blocks of 8-256 B in batches of 256 and hands each batch
 * through a lock-free queue of its own to the next thread of the ring,
 * which frees them, while it frees the batches of the thread before it:
 * every thread allocates, and every block is made on one thread and freed
 * on another, the commonest server pattern. One op is one malloc plus its
 * remote free; the time is wall time from all threads starting to the last
 * free, over all threads' blocks. Contenders: jemalloc's own malloc (its
 * automatic arenas, threads spread over 4 per CPU: the baseline); the tag
 * held to one arena (ra_tag_set_arenas 1); the tag's pool of K arenas, K =
 * threads / 4 (REGIONALLOC_THREADS_PER_ARENA's default).
 *
 * After the timed rounds, one more round of each tagged contender is
 * watched through jemalloc's mutex statistics of the tag's
 * arenas
 * (stats.arenas.<i>.bins.<j>.mutex.num_ops and num_wait, summed over the
 * bins): bin-lock operations per 1,000 blocks, and the busiest arena's
 * share of them. Run under MALLOC_CONF=binshards:... (bench/run.sh does)
 * the same rows show jemalloc's own answer inside one arena. */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <regionalloc.h>

#include "contenders.h"

#define BATCH 256
#define SLOTS 16 /* batches in flight per pair */
#define NSIZES 4096
#define MAX_THREADS 16

struct queue {
    alignas(64) _Atomic uint64_t head; /* batches published */
    alignas(64) _Atomic uint64_t tail; /* batches freed */
    void *slot[SLOTS][BATCH];
};

static struct queue queues[MAX_THREADS];
static size_t sizes[NSIZES];
static uint64_t nbatches; /* per producing thread */
static unsigned nthreads;
/* argv[2] "pairs": even threads only make blocks, each odd one only frees
 * the blocks of the thread before it. */
static bool pairs_mode;

static bool produces(unsigned index)
{
    return !pairs_mode || index % 2 == 0;
}

static unsigned producers(void)
{
    return pairs_mode ? nthreads / 2 : nthreads;
}

/* Each contender has its crew of threads, made at its first round and
 * kept: the threads of a server live long, and so their (thread, tag)
 * pairs have grown busy enough for tcaches of their own, and no thread's
 * exit (which flushes its caches) falls inside a round. */
struct contender {
    bench_alloc_fn m;
    bench_free_fn f;
    ra_tag_t tag; /* RA_TAG_NONE: jemalloc's own */
    bool started;
    pthread_barrier_t start, end; /* the crew and the main thread */
    pthread_t threads[MAX_THREADS];
};

struct worker {
    struct contender *c;
    struct queue *q;
    unsigned index;
};

static struct worker workers[3][MAX_THREADS];
static unsigned ncrews;

static void spin(unsigned *n)
{
    if (++*n % 128 == 0)
        sched_yield(); /* the machine may have fewer cores than threads */
    else
        __builtin_ia32_pause();
}


/* Frees the next batch of q if one is published; returns whether. */
static bool consume_one(const struct worker *w, struct queue *q,
                        uint64_t *next)
{
    void **batch;

    if (*next >= nbatches ||
        atomic_load_explicit(&q->head, memory_order_acquire) <= *next)
        return false;
    batch = q->slot[*next % SLOTS];
    for (unsigned i = 0; i < BATCH; i++)
        w->c->f(batch[i]);
    atomic_store_explicit(&q->tail, ++*next, memory_order_release);
    return true;
}

/* One round of one thread of the ring. */
static void ring_round(const struct worker *w, uint64_t *k)
{
    struct queue *out = w->q;
    struct queue *in = &queues[(w->index + nthreads - 1) % nthreads];
    uint64_t freed = pairs_mode && produces(w->index) ? nbatches : 0;
    unsigned n = 0;

    for (uint64_t b = 0; b < nbatches && produces(w->index); b++) {
        void **batch = out->slot[b % SLOTS];
        while (b - atomic_load_explicit(&out->tail, memory_order_acquire) >=
               SLOTS)
            if (!consume_one(w, in, &freed))
                spin(&n);
        for (unsigned i = 0; i < BATCH; i++, ++*k) {
            void *p = w->c->m(sizes[*k & (NSIZES - 1)]);
            if (p == NULL)
                bench_die("out of memory");
            *(volatile char *)p = 1;
            batch[i] = p;
        }
        atomic_store_explicit(&out->head, b + 1, memory_order_release);
        consume_one(w, in, &freed);
    }
    while (freed < nbatches)
        if (!consume_one(w, in, &freed))
            spin(&n);
}

static void *ring_thread(void *arg)
{
    const struct worker *w = arg;
    uint64_t k = (uint64_t)w->index * 977;

    if (w->c->tag != RA_TAG_NONE && ra_tag_push(w->c->tag) != 0)
        bench_die("ra_tag_push");
    for (;;) {
        pthread_barrier_wait(&w->c->start);
        ring_round(w, &k);
        pthread_barrier_wait(&w->c->end);
    }
    return NULL;
}

static void start_crew(struct contender *c)
{
    struct worker *w = workers[ncrews++];

    if (pthread_barrier_init(&c->start, NULL, nthreads + 1) != 0 ||
        pthread_barrier_init(&c->end, NULL, nthreads + 1) != 0)
        bench_die("pthread_barrier_init");
    for (unsigned i = 0; i < nthreads; i++) {
        w[i] = (struct worker){c, &queues[i], i};
        if (pthread_create(&c->threads[i], NULL, ring_thread, &w[i]) != 0)
            bench_die("pthread_create");
    }
    c->started = true;
}

/* ns per block over all threads, from the round's start to its last
 * free. The crew's threads never end (the process does, at exit). */
static double run_ring(void *arg)
{
    struct contender *c = arg;
    double t0, t1;

    if (!c->started)
        start_crew(c);
    for (unsigned i = 0; i < nthreads; i++) {
        atomic_store(&queues[i].head, 0);
        atomic_store(&queues[i].tail, 0);
    }
    t0 = bench_now_ns();
    pthread_barrier_wait(&c->start);
    pthread_barrier_wait(&c->end);
    t1 = bench_now_ns();
    return (t1 - t0) / ((double)nbatches * BATCH * producers());
}

/* -- jemalloc's mutex statistics of a tag's arenas ------------------------- */
struct lock_counts {
    uint64_t ops[64], waits[64]; /* by arena of the pool */
    uint64_t moved; /* blocks through the bins, in or out, over the pool */
    unsigned narenas;
};

static uint64_t je_u64(const char *fmt, unsigned a, unsigned b)
{
    char name[128];
    uint64_t v = 0;
    size_t len = sizeof v;

    snprintf(name, sizeof name, fmt, a, b);
    if (bench_je.mallctl(name, &v, &len, NULL, 0) != 0)
        bench_die(name);
    return v;
}

static void read_locks(ra_tag_t tag, struct lock_counts *out)
{
    unsigned arenas[64], nbins;
    size_t len = sizeof nbins;
    uint64_t epoch = 1;
    int n = ra_tag_arenas(tag, arenas, 64);

    if (n < 1 || bench_je.mallctl("epoch", NULL, NULL, &epoch,
                                  sizeof epoch) != 0 ||
        bench_je.mallctl("arenas.nbins", &nbins, &len, NULL, 0) != 0)
        bench_die("jemalloc's statistics");
    memset(out, 0, sizeof *out);
    out->narenas = (unsigned)n;
    for (int k = 0; k < n; k++)
        for (unsigned b = 0; b < nbins; b++) {
            out->ops[k] += je_u64("stats.arenas.%u.bins.%u.mutex.num_ops",
                                  arenas[k], b);
            out->waits[k] += je_u64("stats.arenas.%u.bins.%u.mutex.num_wait",
                                    arenas[k], b);
            out->moved += je_u64("stats.arenas.%u.bins.%u.nmalloc", arenas[k],
                                 b) +
                          je_u64("stats.arenas.%u.bins.%u.ndalloc", arenas[k],
                                 b);
        }
}

/* What one block costs through a bin lock, uncontended: jemalloc's mallocx
 * and dallocx on the tag's arena with no thread cache, one thread, each a
 * lock taken and what is done under it (ns per block moved). */
static double bin_lock_cost(ra_tag_t tag)
{
    unsigned arena;
    unsigned n = (unsigned)bench_scaled(1000000, 10000);
    double t0, t1;

    if (ra_tag_arenas(tag, &arena, 1) < 1)
        bench_die("ra_tag_arenas");
    t0 = bench_now_ns();
    for (unsigned i = 0; i < n; i++) {
        void *p = bench_je.mallocx(sizes[i & (NSIZES - 1)],
                                   JE_ARENA(arena) | JE_TCACHE_NONE);
        if (p == NULL)
            bench_die("mallocx");
        bench_je.dallocx(p, JE_TCACHE_NONE);
    }
    t1 = bench_now_ns();
    return (t1 - t0) / (2.0 * n);
}

/* One more round of a warm crew, watched: lock operations per 1,000
 * blocks, waits, and the busiest arena's share. */
static void watch(const char *workload, const char *name,
                  struct contender *c)
{
    struct lock_counts locks[2];
    const struct lock_counts *before = &locks[0], *after = &locks[1];
    uint64_t ops = 0, waits = 0, busiest = 0;
    double blocks = (double)nbatches * BATCH * producers();
    char w[160];

    double ns, moved, cost, cores, per_core;

    read_locks(c->tag, &locks[0]);
    ns = run_ring(c);
    read_locks(c->tag, &locks[1]);
    for (unsigned k = 0; k < after->narenas; k++) {
        uint64_t o =
            after->ops[k] - (k < before->narenas ? before->ops[k] : 0);
        uint64_t x =
            after->waits[k] - (k < before->narenas ? before->waits[k] : 0);
        ops += o;
        waits += x;
        if (o > busiest)
            busiest = o;
    }
    snprintf(w, sizeof w,
             "%s: bin-lock operations per 1,000 blocks, warm threads",
             workload);
    bench_row(w, name, 1000.0 * ops / blocks, "ops", -1, 0, 0);
    snprintf(w, sizeof w, "%s: bin-lock waits per 1,000 blocks, warm threads",
             workload);
    bench_row(w, name, 1000.0 * waits / blocks, "waits", -1, 0, 0);
    snprintf(w, sizeof w,
             "%s: busiest arena's share of bin-lock operations, warm threads",
             workload);
    bench_row(w, name, ops != 0 ? 100.0 * busiest / ops : 0, "%", -1, 0, 0);
    bench_note("%s, %s: %u arena(s), %llu bin-lock operations, %llu waits",
               workload, name, after->narenas, (unsigned long long)ops,
               (unsigned long long)waits);

    /* The model (doc/design.md): one arena's bins are busy for
     * moved/block x cost of each core's blocks; a core makes a block every
     * per_core ns; the arena saturates at per_core / (moved/block x cost)
     * cores, a pool of K spread evenly at K times that. */
    moved = (double)(after->moved - before->moved) / blocks;
    cost = bin_lock_cost(c->tag);
    cores = (double)sysconf(_SC_NPROCESSORS_ONLN);
    per_core = ns * (cores < producers() ? cores : producers());
    snprintf(w, sizeof w, "%s: blocks through the bins per 1,000 blocks",
             workload);
    bench_row(w, name, 1000.0 * moved, "blocks", -1, 0, 0);
    bench_note("%s, %s: model: a core makes a block every %.1f ns; %.4f of "
               "blocks pass the bins at %.1f ns each (one thread, no tcache): "
               "one arena saturates at %.0f cores, a pool of %u at %.0f",
               workload, name, per_core, moved, cost,
               per_core / (moved * cost), after->narenas,
               after->narenas * per_core / (moved * cost));
}

int main(int argc, char **argv)
{
    static struct contender je = {.m = alloc_jemalloc, .f = free_jemalloc};
    static struct contender one = {.m = alloc_process, .f = free_process};
    static struct contender pool = {.m = alloc_process, .f = free_process};
    unsigned k;
    char workload[96], pool_name[64];

    nthreads = argc > 1 ? (unsigned)atoi(argv[1]) : 8;
    pairs_mode = argc > 2 && strcmp(argv[2], "pairs") == 0;
    if (nthreads < 2 || nthreads > MAX_THREADS || nthreads % 2 != 0 ||
        (argc > 2 && !pairs_mode))
        bench_die("usage: hot_tag THREADS [pairs] (2 to 16, even)");
    /* REGIONALLOC_THREADS_PER_ARENA's default: 4 allocating threads. */
    k = producers() / 4 < 1 ? 1 : producers() / 4;
    bench_open_contenders();
    bench_fill_sizes(sizes, NSIZES, 4242, 256);
    nbatches = bench_scaled(200000, 20 * BATCH) / BATCH;
    if ((one.tag = ra_tag_create("hot, one arena")) == RA_TAG_NONE ||
        (pool.tag = ra_tag_create("hot, pool")) == RA_TAG_NONE ||
        ra_tag_set_arenas(one.tag, 1) != 0 ||
        ra_tag_set_arenas(pool.tag, k) != 0)
        bench_die("ra_tag_create");
    if (pairs_mode)
        snprintf(workload, sizeof workload,
                 "hot tag, %u threads as %u producer/consumer pairs",
                 nthreads, nthreads / 2);
    else
        snprintf(workload, sizeof workload,
                 "hot tag, %u threads in a ring, each freeing the last's "
                 "blocks",
                 nthreads);
    snprintf(pool_name, sizeof pool_name, "tagged, a pool of %u arena%s", k,
             k == 1 ? "" : "s");
    {
        struct bench_contender c[] = {
            {NAME_JEMALLOC, run_ring, &je, bench_je_missing},
            {"tagged, one arena", run_ring, &one, NULL},
            {pool_name, run_ring, &pool, NULL},
        };
        bench_compare(workload, "ns/op", c, sizeof c / sizeof c[0],
                      BASELINE_JEMALLOC);
    }
    watch(workload, "tagged, one arena", &one);
    watch(workload, pool_name, &pool);
    return 0;
}

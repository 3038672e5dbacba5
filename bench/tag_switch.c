/* Tag push/pop every 10 allocations: the ring of ring.c (1024 live blocks,
 * 8-256 bytes), where each group of 10 steps runs under one of 4 tags in
 * turn: push, 10 x (free + malloc), pop. One op is one free+malloc, the
 * push/pop shared by 10 of them. The baseline is jemalloc's malloc/free
 * with nothing to switch; mimalloc switches the heap it allocates from, the
 * tracker pushes its own tag. */
#include <stdio.h>

#include <regionalloc.h>

#include "contenders.h"

#define RING 1024
#define NSIZES 4096
#define GROUP 10
#define NTAGS 4

static size_t sizes[NSIZES];
static uint64_t ops;
static ra_tag_t tags[NTAGS];
static mi_heap_t *heaps[NTAGS];

BENCH_INLINE double switch_run(bench_alloc_fn m, bench_free_fn f,
                               void (*enter)(unsigned), void (*leave)(unsigned))
{
    void *ring[RING];
    uint64_t i = 0;
    double t0, t1;

    for (unsigned k = 0; k < RING; k++) {
        enter(k % NTAGS);
        if ((ring[k] = m(sizes[k])) == NULL)
            bench_die("out of memory");
        leave(k % NTAGS);
    }
    t0 = bench_now_ns();
    for (uint64_t g = 0; g < ops / GROUP; g++) {
        unsigned t = g % NTAGS;
        enter(t);
        for (unsigned j = 0; j < GROUP; j++, i++)
            bench_ring_step(&ring[i & (RING - 1)], sizes[i & (NSIZES - 1)], m,
                            f);
        leave(t);
    }
    t1 = bench_now_ns();
    for (unsigned k = 0; k < RING; k++)
        f(ring[k]);
    return (t1 - t0) / i;
}

static void enter_none(unsigned t)
{
    (void)t;
}

static void enter_tag(unsigned t)
{
    if (ra_tag_push(tags[t]) != 0)
        bench_die("ra_tag_push");
}

static void leave_tag(unsigned t)
{
    ra_tag_pop(tags[t]);
}

static void enter_heap(unsigned t)
{
    bench_mi_heap = heaps[t];
}

static void enter_tracker(unsigned t)
{
    tracker_push(t + 1);
}

static void leave_tracker(unsigned t)
{
    tracker_pop(t + 1);
}

static double run_jemalloc(void *arg)
{
    (void)arg;
    return switch_run(alloc_jemalloc, free_jemalloc, enter_none, enter_none);
}

static double run_tagged(void *arg)
{
    (void)arg;
    return switch_run(alloc_process, free_process, enter_tag, leave_tag);
}

static double run_mimalloc(void *arg)
{
    (void)arg;
    return switch_run(alloc_mimalloc, free_mimalloc, enter_heap, enter_none);
}

static double run_tracker(void *arg)
{
    (void)arg;
    return switch_run(alloc_tracker, free_tracker, enter_tracker,
                      leave_tracker);
}

int main(void)
{
    struct bench_contender c[] = {
        {NAME_JEMALLOC, run_jemalloc, NULL, NULL},
        {NAME_TAGGED, run_tagged, NULL, NULL},
        {NAME_MIMALLOC, run_mimalloc, NULL, NULL},
        {NAME_TRACKER, run_tracker, NULL, NULL},
    };

    bench_open_contenders();
    c[2].missing = bench_mi_missing;
    for (unsigned t = 0; t < NTAGS; t++) {
        char name[32];
        snprintf(name, sizeof name, "bench-switch-%u", t);
        if ((tags[t] = ra_tag_create(name)) == RA_TAG_NONE)
            bench_die("ra_tag_create");
        ra_tag_push(tags[t]);
        bench_check_tagged(tags[t]);
        ra_tag_pop(tags[t]);
        if (!bench_mi_missing && (heaps[t] = bench_mi.heap_new()) == NULL)
            bench_die("mi_heap_new");
    }
    bench_fill_sizes(sizes, NSIZES, 12345, 256);
    ops = bench_scaled(2000000, 10000);
    bench_compare("ring 8-256 B, push/pop 1 of 4 tags per 10 ops", "ns/op",
                  c, sizeof c / sizeof c[0], 0);
    return 0;
}

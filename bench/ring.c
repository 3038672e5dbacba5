/* Single thread, a ring of 1024 live blocks: each step frees the oldest
 * block and allocates a new one, sizes 8-256 and 8-4096 bytes. One op is one
 * free plus one malloc. Built twice: bench/ring (linked with libregionalloc)
 * and bench/ring_glibc (plain glibc malloc, for the glibc contender and the
 * heaptrack runs: `ring_glibc --profile NAME` runs the 8-256 mix with the
 * glibc contender called NAME). The 8-256 mix also runs the tagged pair
 * instrumented: with one no-op hook installed, and with the
 * sampling profiler on at a 512 KiB mean interval, each only during its own
 * rounds, so the plain tagged rounds in between run with neither. Both
 * mixes also run the tagged pair with a budget on the tag (hard and soft
 * limits it never reaches, set for that contender's rounds only). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "contenders.h"
#ifndef BENCH_GLIBC
#include <regionalloc.h>
#endif

#define RING 1024
#define NSIZES 4096 /* sizes are precomputed: no division in the loop */

static size_t sizes[NSIZES];
static uint64_t ops;

/* ns per free+malloc. The ring is filled before the clock starts, so every
 * timed step frees a live block. */
BENCH_INLINE double ring_run(bench_alloc_fn m, bench_free_fn f)
{
    void *ring[RING];
    double t0, t1;

    for (unsigned i = 0; i < RING; i++)
        if ((ring[i] = m(sizes[i])) == NULL)
            bench_die("out of memory");
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < ops; i++)
        bench_ring_step(&ring[i & (RING - 1)], sizes[i & (NSIZES - 1)], m, f);
    t1 = bench_now_ns();
    for (unsigned i = 0; i < RING; i++)
        f(ring[i]);
    return (t1 - t0) / ops;
}

BENCH_DEFINE_RUNS(ring_run, alloc)

#ifndef BENCH_GLIBC
static void noop_hook(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)ctx; (void)tag; (void)ptr; (void)size;
}

/* The tagged pair with one hook that does nothing: the cost of the hook
 * machinery itself. Installed for this round only. */
static double run_tagged_hooked(void *arg)
{
    ra_hooks_t hooks = {noop_hook, noop_hook, NULL};
    int id = ra_hooks_install(&hooks);
    double r;

    if (id < 0)
        bench_die("ra_hooks_install");
    r = run_tagged(arg);
    if (ra_hooks_remove(id) != 0)
        bench_die("ra_hooks_remove");
    return r;
}

/* The tagged pair while the profiler samples every 512 KiB on average (a
 * sample per ~4000 ops of this mix). Started for this round only; the
 * samples it takes are freed within the round, so the profile stays small
 * (one stack per sampling site). */
static double run_tagged_profiled(void *arg)
{
    double r;

    if (ra_prof_start((size_t)512 << 10) != 0)
        bench_die("ra_prof_start");
    r = run_tagged(arg);
    if (ra_prof_stop() != 0)
        bench_die("ra_prof_stop");
    return r;
}

/* The tagged pair while the tag has a budget it never reaches: what a
 * limit costs the allocation paths. Set for this round only. */
static double run_tagged_budgeted(void *arg)
{
    ra_tag_t tag = *(ra_tag_t *)arg;
    ra_tag_limit_t limit = {(size_t)32 << 30, (size_t)16 << 30, NULL, NULL};
    double r;

    if (ra_tag_set_limit(tag, &limit) != 0)
        bench_die("ra_tag_set_limit");
    r = run_tagged(arg);
    if (ra_tag_set_limit(tag, NULL) != 0)
        bench_die("ra_tag_set_limit");
    return r;
}
#endif

/* profile_name: only the process malloc, reported under that name (the
 * heaptrack runs of ring_glibc). instrumented: also the tagged pair with a
 * hook and with the profiler on. */
static void bench_mix(const char *workload, size_t max, const char *profile_name,
                      bool instrumented)
{
#ifdef BENCH_GLIBC
    struct bench_contender c[] = {
        {NAME_GLIBC, run_process, NULL, NULL},
    };
#else
    static ra_tag_t tag;
    struct bench_contender c[] = {
        {NAME_JEMALLOC, run_jemalloc, NULL, NULL},
        {NAME_UNTAGGED, run_process, NULL, NULL},
        {NAME_TAGGED, run_tagged, &tag, NULL},
        {NAME_TAGGED_BUDGET, run_tagged_budgeted, &tag, NULL},
        {NAME_TAGGED_HOOK, run_tagged_hooked, &tag, NULL},
        {NAME_TAGGED_PROF, run_tagged_profiled, &tag, NULL},
        {NAME_MIMALLOC, run_mimalloc, NULL, bench_mi_missing},
        {NAME_TRACKER, run_tracker, NULL, NULL},
    };
    if (tag == RA_TAG_NONE && (tag = ra_tag_create("bench-ring")) == RA_TAG_NONE)
        bench_die("ra_tag_create");
#endif
    bench_fill_sizes(sizes, NSIZES, 12345, max);
    if (profile_name != NULL) {
        struct bench_contender p = {profile_name, run_process, NULL, NULL};
        bench_compare(workload, "ns/op", &p, 1, -1);
    } else {
        unsigned n = sizeof c / sizeof c[0];
#ifndef BENCH_GLIBC
        /* Without the instrumented contenders (4 and 5), the rest close
         * up. */
        if (!instrumented) {
            c[4] = c[6];
            c[5] = c[7];
            n -= 2;
        }
#else
        (void)instrumented;
#endif
        bench_compare(workload, "ns/op", c, n, BASELINE_JEMALLOC);
    }
}

int main(int argc, char **argv)
{
    bench_open_contenders();
#ifndef BENCH_GLIBC
    if (!bench_mi_missing)
        bench_mi_heap = bench_mi.heap_new();
#endif
    if (argc == 3 && strcmp(argv[1], "--profile") == 0) {
        ops = bench_scaled(1000000, 1000);
        bench_mix("ring 8-256 B, 1 thread", 256, argv[2], false);
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--profile CONTENDER-NAME]\n", argv[0]);
        return 2;
    }
    ops = bench_scaled(2000000, 10000);
    bench_mix("ring 8-256 B, 1 thread", 256, NULL, true);
    bench_mix("ring 8-4096 B, 1 thread", 4096, NULL, false);
    return 0;
}

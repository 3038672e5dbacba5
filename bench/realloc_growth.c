/* realloc growth: 16 buffers grown in turn by half their size (16 bytes,
 * 32, 56, ... up to 64 KiB), then freed and started again, as vectors and
 * string builders do. One op is one realloc (the restart's free included);
 * the last byte is written after each growth. Built twice:
 * bench/realloc_growth and bench/realloc_growth_glibc. */
#include "contenders.h"
#ifndef BENCH_GLIBC
#include <regionalloc.h>
#endif

#define LIVE 16
#define START 16
#define LIMIT (64 * 1024)

static uint64_t ops;

BENCH_INLINE double grow_run(bench_realloc_fn r, bench_free_fn f)
{
    struct {
        void *p;
        size_t n;
    } buf[LIVE] = {{0}};
    double t0, t1;

    /* Staggered starting sizes: the 16 buffers are not all copied at once. */
    for (unsigned i = 0; i < LIVE; i++) {
        size_t n = START;
        for (unsigned k = 0; k < i; k++)
            n += n / 2;
        if ((buf[i].p = r(NULL, n)) == NULL)
            bench_die("out of memory");
        buf[i].n = n;
    }
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < ops; i++) {
        unsigned b = i & (LIVE - 1);
        size_t n;
        if (buf[b].n >= LIMIT) {
            f(buf[b].p);
            buf[b].p = NULL;
            n = START;
        } else {
            n = buf[b].n + buf[b].n / 2;
        }
        if ((buf[b].p = r(buf[b].p, n)) == NULL)
            bench_die("out of memory");
        ((volatile char *)buf[b].p)[n - 1] = 1;
        buf[b].n = n;
    }
    t1 = bench_now_ns();
    for (unsigned i = 0; i < LIVE; i++)
        f(buf[i].p);
    return (t1 - t0) / ops;
}

BENCH_DEFINE_RUNS(grow_run, realloc)

int main(void)
{
    const char *workload = "realloc growth 16 B-64 KiB, 1 thread";

    bench_open_contenders();
    ops = bench_scaled(300000, 10000);
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
            {NAME_MIMALLOC, run_mimalloc, NULL, bench_mi_missing},
            {NAME_TRACKER, run_tracker, NULL, NULL},
        };
        if ((tag = ra_tag_create("bench-realloc")) == RA_TAG_NONE)
            bench_die("ra_tag_create");
        if (!bench_mi_missing)
            bench_mi_heap = bench_mi.heap_new();
#endif
        bench_compare(workload, "ns/op", c, sizeof c / sizeof c[0],
                      BASELINE_JEMALLOC);
    }
    return 0;
}

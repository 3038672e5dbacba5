/* bench/: the allocators under test as small inline malloc/free/realloc
 * functions. Workloads are written once as always_inline functions taking
 * these as constant arguments, so every contender gets its own copy of the
 * loop calling its allocator the way a user would: jemalloc and mimalloc
 * through a pointer taken from their library (like a PLT call), the process
 * malloc (libregionalloc's override, or glibc's in the glibc build) by name,
 * the tracker by a direct call into tracker.c. */
#ifndef BENCH_CONTENDERS_H
#define BENCH_CONTENDERS_H

#include <stdlib.h>

#include "benchutil.h"

#define BENCH_INLINE static inline __attribute__((always_inline))

typedef void *(*bench_alloc_fn)(size_t);
typedef void (*bench_free_fn)(void *);
typedef void *(*bench_realloc_fn)(void *, size_t);

/* jemalloc's own malloc/free: the baseline. */
static inline void *alloc_jemalloc(size_t n) { return bench_je.malloc(n); }
static inline void free_jemalloc(void *p) { bench_je.free(p); }
static inline void *realloc_jemalloc(void *p, size_t n)
{
    return bench_je.realloc(p, n);
}

/* The process malloc: libregionalloc's (untagged, or tagged when a tag is
 * pushed), or glibc's in the *_glibc programs. */
static inline void *alloc_process(size_t n) { return malloc(n); }
static inline void free_process(void *p) { free(p); }
static inline void *realloc_process(void *p, size_t n)
{
    return realloc(p, n);
}

#ifndef BENCH_GLIBC
#include <regionalloc.h>

#include "tracker.h"

/* mimalloc's heap API on the heap the workload selected, as a program with
 * one heap per category would call it. */
static inline void *alloc_mimalloc(size_t n)
{
    return bench_mi.heap_malloc(bench_mi_heap, n);
}
static inline void free_mimalloc(void *p) { bench_mi.free(p); }
static inline void *realloc_mimalloc(void *p, size_t n)
{
    return bench_mi.heap_realloc(bench_mi_heap, p, n);
}

/* Dies unless a block allocated now lands in tag: a tagged contender that
 * is not really tagged would make its numbers meaningless. Outside timing. */
static inline void bench_check_tagged(ra_tag_t tag)
{
    void *p = malloc(64);

    if (p == NULL)
        bench_die("out of memory");
    if (ra_enabled() && ra_tag_of(p) != tag)
        bench_die("a block allocated under a tag is not in its region");
    free(p);
}

static inline void *alloc_tracker(size_t n) { return tracker_malloc(n); }
static inline void free_tracker(void *p) { tracker_free(p); }
static inline void *realloc_tracker(void *p, size_t n)
{
    return tracker_realloc(p, n);
}
#endif

/* One step of a ring of live blocks: frees the block in *slot and puts a new
 * one of n bytes there, touched so the allocation is not elided. */
BENCH_INLINE void bench_ring_step(void **slot, size_t n, bench_alloc_fn m,
                                  bench_free_fn f)
{
    void *p;

    f(*slot);
    p = m(n);
    if (p == NULL)
        bench_die("out of memory");
    *(volatile char *)p = 1;
    *slot = p;
}

/* BENCH_DEFINE_RUNS(WORK, KIND): the run functions bench_compare calls, for
 * a workload written once as `BENCH_INLINE double WORK(fn, free_fn)` taking
 * the KIND_* functions above (KIND: alloc or realloc). Defines run_process
 * and, outside the glibc build, run_jemalloc, run_tagged (arg: a ra_tag_t *,
 * pushed for the pass and checked to be in effect), run_mimalloc and
 * run_tracker (under tracker tag 1): each its own copy of the loop. */
#define BENCH_DEFINE_RUNS(WORK, KIND)                                      \
    static double run_process(void *arg)                                   \
    {                                                                      \
        (void)arg;                                                         \
        return WORK(KIND##_process, free_process);                         \
    }                                                                      \
    BENCH_DEFINE_RUNS_RA(WORK, KIND)

#ifdef BENCH_GLIBC
#define BENCH_DEFINE_RUNS_RA(WORK, KIND)
#else
#define BENCH_DEFINE_RUNS_RA(WORK, KIND)                                   \
    static double run_jemalloc(void *arg)                                  \
    {                                                                      \
        (void)arg;                                                         \
        return WORK(KIND##_jemalloc, free_jemalloc);                       \
    }                                                                      \
                                                                           \
    static double run_tagged(void *arg)                                    \
    {                                                                      \
        ra_tag_t tag = *(ra_tag_t *)arg;                                   \
        double r;                                                          \
                                                                           \
        if (ra_tag_push(tag) != 0)                                         \
            bench_die("ra_tag_push");                                      \
        bench_check_tagged(tag);                                           \
        r = WORK(KIND##_process, free_process);                            \
        ra_tag_pop(tag);                                                   \
        return r;                                                          \
    }                                                                      \
                                                                           \
    static double run_mimalloc(void *arg)                                  \
    {                                                                      \
        (void)arg;                                                         \
        return WORK(KIND##_mimalloc, free_mimalloc);                       \
    }                                                                      \
                                                                           \
    static double run_tracker(void *arg)                                   \
    {                                                                      \
        double r;                                                          \
                                                                           \
        (void)arg;                                                         \
        tracker_push(1);                                                   \
        r = WORK(KIND##_tracker, free_tracker);                            \
        tracker_pop(1);                                                    \
        return r;                                                          \
    }
#endif

/* Opens jemalloc's and mimalloc's handles; without jemalloc's own malloc
 * there is no baseline, which is fatal. The glibc build opens neither: a
 * dlopen'ed jemalloc (which needs GLIBC_TUNABLES for its static TLS) slowed
 * glibc's malloc in the same process from 18 to 29 ns per op in the ring,
 * so its rows carry no ratio and run.sh divides them by the jemalloc row of
 * the same workload from the libregionalloc program. */
static inline void bench_open_contenders(void)
{
#ifndef BENCH_GLIBC
    if (!bench_open_jemalloc())
        bench_die(bench_je_missing);
    if (!bench_open_mimalloc())
        bench_note("mimalloc: %s", bench_mi_missing);
    if (!ra_enabled())
        bench_note("libregionalloc is in pass-through mode: nothing is tagged");
#endif
}

/* Index of the jemalloc baseline in the contender arrays: first, or none in
 * the glibc build. */
#ifdef BENCH_GLIBC
#define BASELINE_JEMALLOC (-1)
#else
#define BASELINE_JEMALLOC 0
#endif

/* Contender names, the same in every program so run.sh can match rows. */
#define NAME_JEMALLOC "jemalloc, own symbols (baseline)"
#define NAME_UNTAGGED "libregionalloc untagged"
#define NAME_TAGGED "libregionalloc tagged"
#define NAME_MIMALLOC "mimalloc heap API"
#define NAME_TRACKER "header tracker"
#define NAME_GLIBC "glibc malloc (own process)"
/* ring 8-256 only: the tagged pair instrumented (hooks, profiler). */
#define NAME_TAGGED_HOOK "tagged + 1 no-op hook"
#define NAME_TAGGED_PROF "tagged, profiler at 512 KiB"
#define NAME_TAGGED_BUDGET "tagged, with a budget"

#endif /* BENCH_CONTENDERS_H */

/* The tag operations alone: ra_tag_of on live tagged blocks (ns per call)
 * and ra_tag_push + ra_tag_pop (ns per pair), next to the header tracker's
 * equivalents (a header read; a thread-local push and pop) and to the same
 * loop calling empty out-of-line functions: the floor for any call that is
 * not inlined, loop included. */
#include <regionalloc.h>

#include "contenders.h"

#define NBLOCKS 64 /* blocks of 16..79 bytes, all live while timed */

static void *blocks[NBLOCKS];
static void *tracked[NBLOCKS];
static ra_tag_t tag;
static uint64_t calls;

/* noipa: the compiler must call these, not fold what they return. */
__attribute__((noinline, noipa)) static unsigned empty_tag_of(const void *p)
{
    (void)p;
    return 1;
}

__attribute__((noinline, noipa)) static int empty_push_pop(unsigned tag)
{
    (void)tag;
    return 0;
}

/* The library's inline fast paths (ra_tag_of, ra_tag_push and ra_tag_pop
 * are macros) as functions the timed loops below can take: passed as
 * constants into an always_inline loop, they are inlined again. */
static inline unsigned inline_tag_of(const void *p) { return ra_tag_of(p); }
static inline int inline_push(unsigned t) { return ra_tag_push(t); }
static inline int inline_pop(unsigned t) { return ra_tag_pop(t); }

/* ns per call of of() on the live blocks v; dies with what unless the tags
 * sum to expect. */
BENCH_INLINE double time_tag_of(unsigned (*of)(const void *), void *const *v,
                                uint64_t expect, const char *what)
{
    uint64_t sum = 0;
    const uint64_t n = calls; /* a local: the loop need not reload it */
    double t0, t1;

    t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++)
        sum += of(v[i & (NBLOCKS - 1)]);
    t1 = bench_now_ns();
    if (sum != expect)
        bench_die(what);
    return (t1 - t0) / n;
}

/* ns per push(t) + pop(t) pair; dies with what if either fails. */
BENCH_INLINE double time_push_pop(int (*push)(unsigned), int (*pop)(unsigned),
                                  unsigned t, const char *what)
{
    int err = 0;
    const uint64_t n = calls; /* a local: the loop need not reload it */
    double t0, t1;

    t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        err |= push(t);
        err |= pop(t);
    }
    t1 = bench_now_ns();
    if (err)
        bench_die(what);
    return (t1 - t0) / n;
}

static double run_empty_tag_of(void *arg)
{
    (void)arg;
    return time_tag_of(empty_tag_of, blocks, calls, "empty_tag_of");
}

static double run_empty_push_pop(void *arg)
{
    (void)arg;
    return time_push_pop(empty_push_pop, empty_push_pop, 1, "empty_push_pop");
}

static double run_tag_of(void *arg)
{
    (void)arg;
    return time_tag_of(inline_tag_of, blocks, calls * tag,
                       "ra_tag_of returned the wrong tag");
}

static double run_tracker_tag_of(void *arg)
{
    (void)arg;
    return time_tag_of(tracker_tag_of, tracked, calls,
                       "tracker_tag_of returned the wrong tag");
}

static double run_push_pop(void *arg)
{
    (void)arg;
    return time_push_pop(inline_push, inline_pop, tag,
                         "ra_tag_push/ra_tag_pop failed");
}

static double run_tracker_push_pop(void *arg)
{
    (void)arg;
    return time_push_pop(tracker_push, tracker_pop, 1,
                         "tracker_push/tracker_pop failed");
}

int main(void)
{
    struct bench_contender of[] = {
        {"libregionalloc ra_tag_of", run_tag_of, NULL, NULL},
        {"header tracker: read the header", run_tracker_tag_of, NULL, NULL},
        {"(floor) empty out-of-line call", run_empty_tag_of, NULL, NULL},
    };
    struct bench_contender pp[] = {
        {"libregionalloc push+pop", run_push_pop, NULL, NULL},
        {"header tracker push+pop", run_tracker_push_pop, NULL, NULL},
        {"(floor) 2 empty out-of-line calls", run_empty_push_pop, NULL, NULL},
    };

    bench_open_contenders();
    if ((tag = ra_tag_create("bench-tag-ops")) == RA_TAG_NONE)
        bench_die("ra_tag_create");
    ra_tag_push(tag);
    tracker_push(1);
    for (unsigned i = 0; i < NBLOCKS; i++) {
        blocks[i] = malloc(16 + i);
        tracked[i] = tracker_malloc(16 + i);
        if (blocks[i] == NULL || tracked[i] == NULL)
            bench_die("out of memory");
    }
    tracker_pop(1);
    ra_tag_pop(tag);
    calls = bench_scaled(20000000, 100000);
    bench_compare("ra_tag_of alone", "ns/call", of, 3, -1);
    bench_compare("tag push+pop alone", "ns/pair", pp, 3, -1);
    for (unsigned i = 0; i < NBLOCKS; i++) {
        free(blocks[i]);
        tracker_free(tracked[i]);
    }
    return 0;
}

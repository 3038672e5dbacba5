/* One thread cycling through many tags, caches warm: each visit pushes a
 * tag, makes 64 mallocs of 8-256 bytes and frees them, and pops it; the
 * visits go round 1, 8, 64 or 256 tags. One op is one malloc+free. What it
 * measures is the cost of a (thread, tag) pair's working set: with one tag
 * everything stays in the first level cache; with 256 the pairs' caches,
 * counters and blocks are spread over many lines and pages. The baseline is
 * the same loop on one tag. The same visits over mimalloc heaps (one heap
 * per tag, mi_heap_malloc) show what any allocator with a heap per tag pays
 * for the blocks of each heap living on pages of their own. Run with
 * REGIONALLOC_MAX_TAGS of at least 257 (run.sh does). */
#include <stdio.h>
#include <stdlib.h>

#include <regionalloc.h>

#include "contenders.h"

#define PER_VISIT 64
#define MAX_CYCLE 256

static ra_tag_t tags[MAX_CYCLE];
static mi_heap_t *heaps[MAX_CYCLE];
static size_t sizes[PER_VISIT];
static uint64_t visits;

static double cycle_tags(void *arg)
{
    unsigned ntags = (unsigned)(uintptr_t)arg;
    void *blocks[PER_VISIT];
    double t0 = bench_now_ns();

    for (uint64_t v = 0; v < visits; v++) {
        ra_tag_t tag = tags[v % ntags];
        if (ra_tag_push(tag) != 0)
            bench_die("ra_tag_push");
        for (unsigned i = 0; i < PER_VISIT; i++) {
            blocks[i] = malloc(sizes[i]);
            if (blocks[i] == NULL)
                bench_die("out of memory");
            *(volatile char *)blocks[i] = 1;
        }
        for (unsigned i = 0; i < PER_VISIT; i++)
            free(blocks[i]);
        ra_tag_pop(tag);
    }
    return (bench_now_ns() - t0) / (double)(visits * PER_VISIT);
}

static double cycle_heaps(void *arg)
{
    unsigned nheaps = (unsigned)(uintptr_t)arg;
    void *blocks[PER_VISIT];
    double t0 = bench_now_ns();

    for (uint64_t v = 0; v < visits; v++) {
        mi_heap_t *heap = heaps[v % nheaps];
        for (unsigned i = 0; i < PER_VISIT; i++) {
            blocks[i] = bench_mi.heap_malloc(heap, sizes[i]);
            if (blocks[i] == NULL)
                bench_die("out of memory");
            *(volatile char *)blocks[i] = 1;
        }
        for (unsigned i = 0; i < PER_VISIT; i++)
            bench_mi.free(blocks[i]);
    }
    return (bench_now_ns() - t0) / (double)(visits * PER_VISIT);
}

#define CONTENDERS(run, what, missing)                                  \
    {                                                                   \
        {"1 " what " (baseline)", run, (void *)(uintptr_t)1, missing},  \
        {"8 " what "s", run, (void *)(uintptr_t)8, missing},            \
        {"64 " what "s", run, (void *)(uintptr_t)64, missing},          \
        {"256 " what "s", run, (void *)(uintptr_t)256, missing},        \
    }

int main(void)
{
    struct bench_contender t[] = CONTENDERS(cycle_tags, "tag", NULL);

    bench_open_contenders();
    if (!ra_enabled())
        bench_die("pass-through mode: no tags");
    /* After bench_open_contenders: whether mimalloc is there. */
    struct bench_contender h[] =
        CONTENDERS(cycle_heaps, "mimalloc heap", bench_mi_missing);
    for (unsigned i = 0; i < MAX_CYCLE; i++) {
        char name[32];
        snprintf(name, sizeof name, "cycle-%u", i);
        if ((tags[i] = ra_tag_create(name)) == RA_TAG_NONE)
            bench_die("ra_tag_create (REGIONALLOC_MAX_TAGS >= 257?)");
        if (bench_mi_missing == NULL &&
            (heaps[i] = bench_mi.heap_new()) == NULL)
            bench_die("mi_heap_new");
    }
    bench_fill_sizes(sizes, PER_VISIT, 12345, 256);
    visits = bench_scaled(100000, 500);
    bench_compare("cycling through N tags, 64 ops a visit", "ns/op", t,
                  sizeof t / sizeof t[0], 0);
    bench_compare("cycling through N mimalloc heaps, 64 ops", "ns/op", h,
                  sizeof h / sizeof h[0], 0);
    return 0;
}

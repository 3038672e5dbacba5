/* Memory per live block: 10 million 16-byte blocks, all live, allocated by
 * one contender in a process of its own (`blocks CONTENDER`), so the RSS
 * delta from /proc/self/statm is that contender's alone. Prints bytes of RSS
 * per live block; run.sh divides by jemalloc's. Built twice: bench/blocks
 * (jemalloc, untagged, tagged, mimalloc, tracker) and bench/blocks_glibc
 * (glibc). The blocks stay live until exit: nothing is freed, nothing is
 * kept but the count, so the pointer array costs nothing. */
#include <stdio.h>
#include <string.h>

#include "contenders.h"
#ifndef BENCH_GLIBC
#include <regionalloc.h>
#endif

#define BLOCK 16

static const char *workload = "10M live 16-byte blocks: RSS per block";

/* Fixed costs (lazy initialisation, a tag's arena, a heap) are not counted:
 * *before is read after one block has been allocated and freed. */
BENCH_INLINE void allocate(bench_alloc_fn m, bench_free_fn f, uint64_t n,
                           size_t *before)
{
    f(m(BLOCK));
    *before = bench_rss_bytes();
    for (uint64_t i = 0; i < n; i++) {
        void *p = m(BLOCK);
        if (p == NULL)
            bench_die("out of memory");
        *(volatile char *)p = 1;
    }
}

int main(int argc, char **argv)
{
    const char *who = argc == 2 ? argv[1] : "";
    const char *name;
    uint64_t n = bench_scaled(10000000, 100000);
    size_t before = 0, after;

    bench_open_contenders();
#ifdef BENCH_GLIBC
    if (strcmp(who, "glibc") == 0) {
        name = NAME_GLIBC;
        allocate(alloc_process, free_process, n, &before);
    }
#else
    if (strcmp(who, "jemalloc") == 0) {
        name = NAME_JEMALLOC;
        allocate(alloc_jemalloc, free_jemalloc, n, &before);
    } else if (strcmp(who, "untagged") == 0) {
        name = NAME_UNTAGGED;
        allocate(alloc_process, free_process, n, &before);
    } else if (strcmp(who, "tagged") == 0) {
        ra_tag_t tag = ra_tag_create("bench-blocks");
        name = NAME_TAGGED;
        if (tag == RA_TAG_NONE || ra_tag_push(tag) != 0)
            bench_die("ra_tag_create/ra_tag_push");
        bench_check_tagged(tag);
        allocate(alloc_process, free_process, n, &before);
        ra_tag_pop(tag);
    } else if (strcmp(who, "mimalloc") == 0) {
        name = NAME_MIMALLOC;
        if (bench_mi_missing) {
            bench_row_missing(workload, name, bench_mi_missing);
            return 0;
        }
        bench_mi_heap = bench_mi.heap_new();
        allocate(alloc_mimalloc, free_mimalloc, n, &before);
    } else if (strcmp(who, "tracker") == 0) {
        name = NAME_TRACKER;
        tracker_push(1);
        allocate(alloc_tracker, free_tracker, n, &before);
        tracker_pop(1);
    }
#endif
    else {
        fprintf(stderr, "usage: %s CONTENDER\n", argv[0]);
        return 2;
    }
    after = bench_rss_bytes();
    if (before == 0 || after < before)
        bench_die("cannot read /proc/self/statm");
    bench_row(workload, name, (double)(after - before) / n, "B/block", -1,
              (double)(after - before) / n, (double)(after - before) / n);
    return 0;
}

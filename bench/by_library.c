/* Tags by calling object (REGIONALLOC_TAG_BY=library): what an allocation
 * made with no tag pushed costs, against the same allocation under a
 * pushed tag. One op is one malloc and its free, in batches of 256 blocks
 * of 8-256 bytes (the batch is made, then freed), on one thread. Both
 * contenders run in one process, in alternating rounds:
 *
 * - "pushed tag": the blocks go to a tag pushed for the round (the
 *   baseline);
 * - "by library": nothing pushed; with REGIONALLOC_TAG_BY=library the
 *   blocks go to "libraries/by_library", this program's tag, through the
 *   thread's cache from return address to tag; without it they are
 *   untagged (jemalloc's own path).
 *
 * Run it both ways (bench/run.sh does): with the variable, the row's ratio
 * and the note's difference are the feature's cost per allocation; without
 * it, the pushed tag's own figure is the one with the feature off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <regionalloc.h>

#include "benchutil.h"

#define BATCH 256
#define NSIZES 4096

static size_t sizes[NSIZES];
static uint64_t ops;
static ra_tag_t pushed;

static double batches(void)
{
    void *blocks[BATCH];
    uint64_t i = 0;
    double t0 = bench_now_ns();

    while (i < ops) {
        for (unsigned k = 0; k < BATCH; k++, i++)
            if ((blocks[k] = malloc(sizes[i & (NSIZES - 1)])) == NULL)
                bench_die("out of memory");
        for (unsigned k = 0; k < BATCH; k++)
            free(blocks[k]);
    }
    return (bench_now_ns() - t0) / (double)i;
}

static double run_pushed(void *arg)
{
    double ns;

    (void)arg;
    if (ra_tag_push(pushed) != 0)
        bench_die("ra_tag_push");
    ns = batches();
    ra_tag_pop(pushed);
    return ns;
}

static double run_by_library(void *arg)
{
    (void)arg;
    return batches();
}

int main(void)
{
    const char *by = getenv("REGIONALLOC_TAG_BY");
    bool on = by != NULL && strcmp(by, "library") == 0;
    struct bench_contender c[] = {
        {"pushed tag", run_pushed, NULL, NULL},
        {on ? "by library" : "untagged", run_by_library, NULL, NULL},
    };

    ops = bench_scaled(20000000, BATCH);
    ops -= ops % BATCH;
    bench_fill_sizes(sizes, NSIZES, 48, 256);
    pushed = ra_tag_create("pushed");
    if (pushed == RA_TAG_NONE)
        bench_die("ra_tag_create");
    bench_compare(on ? "by_library on" : "by_library off", "ns/op", c, 2, 0);
    if (on) {
        ra_tag_t mine = ra_tag_lookup("libraries/by_library");
        bench_note("by_library on: the blocks' tag %s",
                   mine != RA_TAG_NONE ? "libraries/by_library"
                                       : "NOT FOUND (not tagged by library)");
    }
    return 0;
}

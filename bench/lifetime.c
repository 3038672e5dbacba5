/* A tag's end and beginning.
 *
 * drop: N live blocks, written, of 16-64 bytes (N = 10^5, 10^6, 10^7: the
 * tokens, nodes and small strings a phase leaves behind) and of 8-256
 * bytes (N = 10^6), freed one by one and purged, against ra_tag_reset of
 * their tag (which purges too). One op is one block dropped; allocating
 * and writing them is not timed. The baseline frees jemalloc's own blocks
 * with its own free, flushes its thread cache and purges every arena.
 *
 * create: ra_tag_create alone, and with one malloc/free under the new tag
 * (its first use: a slab, and the thread's cache for the tag, which a
 * destroy flushed and jemalloc builds again), for a tag never seen and for
 * one that recycles a destroyed tag's id, region and arena; the baseline
 * is jemalloc's own arenas.create (and a mallocx/dallocx in the new
 * arena). One op is one tag (or arena); destroying is not timed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <regionalloc.h>

#include "contenders.h"

#define KEPT_TAGS 32            /* tags per create pass */

static size_t nblocks, min_size, max_size;
static void **blocks;
static ra_tag_t drop_tag;

static size_t block_size(size_t i)
{
    return min_size + (i * 2654435761u >> 7) % (max_size - min_size + 1);
}

/* The blocks are written, as a program's are: their pages are resident,
 * and giving them back costs what it costs. */
static void fill(bench_alloc_fn m)
{
    for (size_t i = 0; i < nblocks; i++) {
        size_t size = block_size(i);
        if ((blocks[i] = m(size)) == NULL)
            bench_die("out of memory");
        memset(blocks[i], 0x5a, size);
    }
}

static double drop_jemalloc(void *arg)
{
    double t0;

    (void)arg;
    fill(alloc_jemalloc);
    t0 = bench_now_ns();
    for (size_t i = 0; i < nblocks; i++)
        bench_je.free(blocks[i]);
    bench_je_purge_all();
    return (bench_now_ns() - t0) / (double)nblocks;
}

/* Allocates the blocks under the drop tag. */
static void fill_tagged(void)
{
    if (ra_tag_push(drop_tag) != 0)
        bench_die("ra_tag_push");
    bench_check_tagged(drop_tag);
    fill(alloc_process);
    ra_tag_pop(drop_tag);
}

static double drop_free_and_purge(void *arg)
{
    double t0;

    (void)arg;
    fill_tagged();
    t0 = bench_now_ns();
    for (size_t i = 0; i < nblocks; i++)
        free(blocks[i]);
    /* What a program without ra_tag_reset does to give the pages back. */
    ra_thread_flush();
    if (ra_tag_purge(drop_tag) != 0)
        bench_die("ra_tag_purge");
    return (bench_now_ns() - t0) / (double)nblocks;
}

static double drop_reset(void *arg)
{
    double t0;

    (void)arg;
    fill_tagged();
    t0 = bench_now_ns();
    if (ra_tag_reset(drop_tag) != 0)
        bench_die("ra_tag_reset");
    return (bench_now_ns() - t0) / (double)nblocks;
}

static void bench_drop(size_t n, size_t min, size_t max, const char *workload)
{
    struct bench_contender c[] = {
        {NAME_JEMALLOC, drop_jemalloc, NULL, NULL},
        {"tagged: free one by one + ra_tag_purge", drop_free_and_purge, NULL,
         NULL},
        {"tagged: ra_tag_reset", drop_reset, NULL, NULL},
    };

    nblocks = n;
    min_size = min;
    max_size = max;
    blocks = malloc(n * sizeof *blocks);
    if (blocks == NULL)
        bench_die("out of memory");
    bench_compare(workload, "ns/block", c, sizeof c / sizeof c[0],
                  BASELINE_JEMALLOC);
    free(blocks);
}

/* -- create ------------------------------------------------------------------ */

static unsigned fresh_count;
static ra_tag_t recycled[KEPT_TAGS];
static bool with_first_use;

/* One malloc/free under tag, when the workload counts a tag's first use. */
static void first_use(ra_tag_t tag)
{
    if (!with_first_use)
        return;
    if (ra_tag_push(tag) != 0)
        bench_die("ra_tag_push");
    free(malloc(16));
    ra_tag_pop(tag);
}

static double create_jemalloc(void *arg)
{
    double t0 = bench_now_ns();

    (void)arg;
    for (unsigned i = 0; i < KEPT_TAGS; i++) {
        unsigned arena;
        size_t len = sizeof arena;
        void *p;
        if (bench_je.mallctl("arenas.create", &arena, &len, NULL, 0) != 0)
            bench_die("arenas.create");
        if (!with_first_use)
            continue;
        p = bench_je.mallocx(16, JE_ARENA(arena) | JE_TCACHE_NONE);
        if (p == NULL)
            bench_die("mallocx");
        bench_je.dallocx(p, JE_TCACHE_NONE);
    }
    return (bench_now_ns() - t0) / 1e3 / KEPT_TAGS;
}

/* Tags never seen: each pass creates KEPT_TAGS more, kept alive, so that no
 * destroyed id is there to recycle. */
static double create_fresh(void *arg)
{
    double t0 = bench_now_ns();

    (void)arg;
    for (unsigned i = 0; i < KEPT_TAGS; i++) {
        char name[32];
        ra_tag_t tag;
        snprintf(name, sizeof name, "fresh-%u", fresh_count++);
        if ((tag = ra_tag_create(name)) == RA_TAG_NONE)
            bench_die("ra_tag_create");
        first_use(tag);
    }
    return (bench_now_ns() - t0) / 1e3 / KEPT_TAGS;
}

/* The same KEPT_TAGS slots each pass: destroyed (not timed), then created
 * again, which recycles them, and left alive for the next pass. */
static double create_recycled(void *arg)
{
    static unsigned generation;
    double t0;

    (void)arg;
    for (unsigned i = 0; i < KEPT_TAGS; i++)
        if (recycled[i] != RA_TAG_NONE && ra_tag_destroy(recycled[i]) != 0)
            bench_die("ra_tag_destroy");
    generation++;
    t0 = bench_now_ns();
    for (unsigned i = 0; i < KEPT_TAGS; i++) {
        char name[32];
        snprintf(name, sizeof name, "recycled-%u-%u", generation, i);
        if ((recycled[i] = ra_tag_create(name)) == RA_TAG_NONE)
            bench_die("ra_tag_create");
        first_use(recycled[i]);
    }
    return (bench_now_ns() - t0) / 1e3 / KEPT_TAGS;
}

static void bench_create(bool first_use_too, const char *workload)
{
    struct bench_contender c[] = {
        {NAME_JEMALLOC, create_jemalloc, NULL, NULL},
        {"ra_tag_create, a fresh tag", create_fresh, NULL, NULL},
        {"ra_tag_create, a recycled tag", create_recycled, NULL, NULL},
    };

    with_first_use = first_use_too;
    bench_compare(workload, "us/tag", c, sizeof c / sizeof c[0],
                  BASELINE_JEMALLOC);
}

int main(void)
{
    /* Room for every fresh tag of every pass (2 workloads x up to 8 passes
     * x 32); before the library reads its environment. */
    setenv("REGIONALLOC_MAX_TAGS", "1024", 0);
    bench_open_contenders();
    if (!ra_enabled())
        bench_die("pass-through mode: there are no tags to reset");
    if ((drop_tag = ra_tag_create("bench-drop")) == RA_TAG_NONE)
        bench_die("ra_tag_create");
    bench_drop(bench_scaled(100000, 1000), 16, 64,
               "drop 10^5 blocks of 16-64 B");
    bench_drop(bench_scaled(1000000, 1000), 16, 64,
               "drop 10^6 blocks of 16-64 B");
    bench_drop(bench_scaled(10000000, 1000), 16, 64,
               "drop 10^7 blocks of 16-64 B");
    bench_drop(bench_scaled(1000000, 1000), 8, 256,
               "drop 10^6 blocks of 8-256 B");
    bench_create(false, "ra_tag_create alone");
    bench_create(true, "ra_tag_create + first malloc/free");
    return 0;
}

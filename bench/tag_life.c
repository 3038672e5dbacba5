/* A tag's whole life, as a server with a tag per request lives it: each
 * cycle creates a tag (recycled after the first destroys), makes B blocks
 * of 16-256 bytes under it and writes them, and destroys the tag made 8
 * cycles before (so 8 requests are in flight). B = 10, 100, 1000. One op
 * is one cycle.
 *
 *   tag_life [reset|reset+purge|tags|mimalloc] [IDLE]
 *
 * IDLE (tags only): that many other tags are created first and stay live,
 * never used, as a server's tenants or long queries are beside its
 * requests' tags (REGIONALLOC_MAX_TAGS must leave room for them); the
 * workload's name says so. A tag's create and destroy should not cost
 * more among 3,000 tags than among 8.
 *
 * With no argument every contender runs in this process, in alternating
 * rounds; with one, only that one, for bench/run.sh to alternate
 * processes (a contender's cost then owes nothing to another's heap). The contenders do the same work with what they have:
 * mimalloc a heap per request (mi_heap_new, mi_heap_malloc,
 * mi_heap_destroy), jemalloc an arena per request slot (mallocx with the
 * arena, uncached, then arena.<i>.reset, with and without a purge). The
 * baseline is jemalloc's arena.<i>.reset alone: what a tag's end cannot
 * cost less than without a reset that skips jemalloc's walk of its bins
 * and extents. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <regionalloc.h>

#include "contenders.h"

#define IN_FLIGHT 8
#define MAX_BLOCKS 1000

static size_t sizes[MAX_BLOCKS];
static unsigned nblocks;
static uint64_t cycles;
static ra_tag_t live[IN_FLIGHT];
static mi_heap_t *heaps[IN_FLIGHT];
static unsigned arenas[IN_FLIGHT];
static char suffix[48]; /* the workload's, with idle tags */

static void touch(void *p, size_t size)
{
    if (p == NULL)
        bench_die("out of memory");
    memset(p, 0x5a, size < 64 ? size : 64);
}

static double life_tags(void *arg)
{
    static const char *const names[IN_FLIGHT] = {
        "life-0", "life-1", "life-2", "life-3",
        "life-4", "life-5", "life-6", "life-7"};
    double t0 = bench_now_ns();

    (void)arg;
    for (uint64_t c = 0; c < cycles; c++) {
        unsigned slot = (unsigned)(c % IN_FLIGHT);
        ra_tag_t tag;
        if (live[slot] != RA_TAG_NONE && ra_tag_destroy(live[slot]) != 0)
            bench_die("ra_tag_destroy");
        if ((tag = ra_tag_create(names[slot])) == RA_TAG_NONE ||
            ra_tag_push(tag) != 0)
            bench_die("ra_tag_create");
        for (unsigned i = 0; i < nblocks; i++)
            touch(malloc(sizes[i]), sizes[i]);
        ra_tag_pop(tag);
        live[slot] = tag;
    }
    return (bench_now_ns() - t0) / (double)cycles / 1000.0;
}

static double life_heaps(void *arg)
{
    double t0 = bench_now_ns();

    (void)arg;
    for (uint64_t c = 0; c < cycles; c++) {
        unsigned slot = (unsigned)(c % IN_FLIGHT);
        mi_heap_t *heap;
        if (heaps[slot] != NULL)
            bench_mi.heap_destroy(heaps[slot]);
        if ((heap = bench_mi.heap_new()) == NULL)
            bench_die("mi_heap_new");
        for (unsigned i = 0; i < nblocks; i++)
            touch(bench_mi.heap_malloc(heap, sizes[i]), sizes[i]);
        heaps[slot] = heap;
    }
    return (bench_now_ns() - t0) / (double)cycles / 1000.0;
}

static void arena_do(unsigned arena, const char *verb)
{
    char name[64];

    snprintf(name, sizeof name, "arena.%u.%s", arena, verb);
    if (bench_je.mallctl(name, NULL, NULL, NULL, 0) != 0)
        bench_die(name);
}

static double life_arenas(bool purge)
{
    double t0 = bench_now_ns();

    for (uint64_t c = 0; c < cycles; c++) {
        unsigned slot = (unsigned)(c % IN_FLIGHT);
        int flags = JE_ARENA(arenas[slot]) | JE_TCACHE_NONE;
        arena_do(arenas[slot], "reset");
        if (purge)
            arena_do(arenas[slot], "purge");
        for (unsigned i = 0; i < nblocks; i++)
            touch(bench_je.mallocx(sizes[i], flags), sizes[i]);
    }
    return (bench_now_ns() - t0) / (double)cycles / 1000.0;
}

static double life_arenas_reset(void *arg)
{
    (void)arg;
    return life_arenas(false);
}

static double life_arenas_reset_purge(void *arg)
{
    (void)arg;
    return life_arenas(true);
}

static struct bench_contender contenders[] = {
    {"jemalloc arena.<i>.reset (baseline)", life_arenas_reset, NULL, NULL},
    {"jemalloc arena.<i>.reset + purge", life_arenas_reset_purge, NULL, NULL},
    {"libregionalloc tag per request", life_tags, NULL, NULL},
    {"mimalloc heap per request", life_heaps, NULL, NULL},
};
static const char *const contender_args[] = {"reset", "reset+purge", "tags",
                                             "mimalloc"};
#define NCONTENDERS (sizeof contenders / sizeof contenders[0])

static void bench_life(unsigned b, struct bench_contender *c, unsigned n)
{
    char workload[128];

    nblocks = b;
    cycles = bench_scaled(b >= 1000 ? 4000 : 20000, 100);
    snprintf(workload, sizeof workload,
             "a tag's life: create, %u blocks of 16-256 B, destroy%s", b,
             suffix);
    bench_compare(workload, "us/cycle", c, n, n == NCONTENDERS ? 0 : -1);
}

#define USAGE "usage: tag_life [reset|reset+purge|tags|mimalloc] [IDLE]"

/* IDLE tags, live and never used, beside the requests' tags. */
static void make_idle_tags(const char *arg)
{
    char *end, name[32];
    unsigned long idle = strtoul(arg, &end, 10);

    if (*arg == '\0' || *end != '\0')
        bench_die(USAGE);
    for (unsigned long i = 0; i < idle; i++) {
        snprintf(name, sizeof name, "idle-%lu", i);
        if (ra_tag_create(name) == RA_TAG_NONE)
            bench_die("ra_tag_create of an idle tag (REGIONALLOC_MAX_TAGS?)");
    }
    snprintf(suffix, sizeof suffix, ", among %lu idle tags", idle);
}

int main(int argc, char **argv)
{
    struct bench_contender *c = contenders;
    unsigned n = NCONTENDERS;

    if (argc > 3)
        bench_die(USAGE);
    for (unsigned i = 0; argc >= 2 && i < NCONTENDERS; i++)
        if (strcmp(argv[1], contender_args[i]) == 0) {
            c = &contenders[i];
            n = 1;
        }
    if ((argc >= 2 && n != 1) ||
        (argc == 3 && c != &contenders[2]))
        bench_die(USAGE);
    bench_open_contenders();
    contenders[3].missing = bench_mi_missing;
    if (!ra_enabled())
        bench_die("pass-through mode: no tags");
    for (unsigned i = 0; i < IN_FLIGHT; i++) {
        size_t len = sizeof arenas[i];
        if (bench_je.mallctl("arenas.create", &arenas[i], &len, NULL, 0) != 0)
            bench_die("arenas.create");
    }
    for (unsigned i = 0; i < MAX_BLOCKS; i++)
        sizes[i] = 16 + (i * 2654435761u >> 9) % 241;
    if (argc == 3)
        make_idle_tags(argv[2]);
    bench_life(10, c, n);
    bench_life(100, c, n);
    bench_life(1000, c, n);
    return 0;
}

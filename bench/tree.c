/* Tag trees: what a budget up the chain costs where it is paid, at commit.
 *
 * commit at depth D: a tag at depth 1 (top level), 2, 4 or 8, each of its
 * ancestors with a hard limit far above what it holds (so every level's
 * check runs), takes 64 blocks of 256 KiB, each committed fresh, then is
 * reset (which purges: the next round commits again). One op is one
 * 256 KiB block; the baseline is the top-level tag. The allocation fast
 * paths are not involved: a front-cache hit commits nothing.
 *
 * racing at the limit: 2 threads, each allocating 256 KiB blocks until one
 * is refused, then freeing all and starting over, under one tag with a hard
 * limit of 32 MiB (flat, the baseline), or each under its own child of a
 * parent with that limit (the subtree's budget, exact). One op is one
 * allocation attempt, refused or not. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <regionalloc.h>

#include "contenders.h"

#define BLOCK ((size_t)256 << 10)
#define ROUND_BLOCKS 64
#define LIMIT ((size_t)32 << 20)

static ra_tag_t chain[4]; /* the tags at depth 1, 2, 4 and 8 */
static unsigned rounds;

static double commit_at(void *arg)
{
    ra_tag_t tag = *(ra_tag_t *)arg;
    void *p[ROUND_BLOCKS];
    double t = 0;

    for (unsigned r = 0; r < rounds; r++) {
        double t0 = bench_now_ns();
        for (unsigned i = 0; i < ROUND_BLOCKS; i++)
            if ((p[i] = ra_malloc_tag(tag, BLOCK)) == NULL)
                bench_die("ra_malloc_tag");
        t += bench_now_ns() - t0;
        if (ra_tag_reset(tag) != 0)
            bench_die("ra_tag_reset");
    }
    return t / ((double)rounds * ROUND_BLOCKS);
}

/* Tags at depths 1 to 8 in one chain; each ancestor has a hard limit. */
static void make_chain(void)
{
    ra_tag_limit_t roomy = {.hard = (size_t)1 << 36};
    ra_tag_t t = RA_TAG_NONE;
    char name[32];

    for (unsigned d = 1; d <= 8; d++) {
        snprintf(name, sizeof name, "bench-tree-depth-%u", d);
        t = ra_tag_create_in(t, name);
        if (t == RA_TAG_NONE || (d < 8 && ra_tag_set_limit(t, &roomy) != 0))
            bench_die("ra_tag_create_in");
        if (d == 1)
            chain[0] = t;
        else if (d == 2)
            chain[1] = t;
        else if (d == 4)
            chain[2] = t;
        else if (d == 8)
            chain[3] = t;
    }
}

/* -- two threads racing at a limit ------------------------------------------ */
static ra_tag_t racer_tags[2];
static uint64_t attempts_per_thread;

static void *racer(void *arg)
{
    ra_tag_t tag = racer_tags[(uintptr_t)arg];
    void *held[LIMIT / BLOCK + 1];
    unsigned n = 0;

    for (uint64_t a = 0; a < attempts_per_thread; a++) {
        void *p = n < sizeof held / sizeof held[0] ? ra_malloc_tag(tag, BLOCK)
                                                   : NULL;
        if (p != NULL) {
            held[n++] = p;
            continue;
        }
        while (n > 0)
            ra_free(held[--n]);
    }
    while (n > 0)
        ra_free(held[--n]);
    return NULL;
}

static double race(void *arg)
{
    const ra_tag_t *tags = arg;
    pthread_t t[2];
    double t0;

    racer_tags[0] = tags[0];
    racer_tags[1] = tags[1];
    t0 = bench_now_ns();
    for (uintptr_t i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, racer, (void *)i) != 0)
            bench_die("pthread_create");
    for (unsigned i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return (bench_now_ns() - t0) / (2.0 * attempts_per_thread);
}

int main(void)
{
    ra_tag_limit_t limit = {.hard = LIMIT};
    static ra_tag_t flat[2], tree[2], parent;

    bench_open_contenders();
    rounds = (unsigned)bench_scaled(200, 4);
    attempts_per_thread = bench_scaled(200000, 2000);
    make_chain();
    {
        struct bench_contender c[] = {
            {"depth 1, a top-level tag (baseline)", commit_at, &chain[0], NULL},
            {"depth 2", commit_at, &chain[1], NULL},
            {"depth 4", commit_at, &chain[2], NULL},
            {"depth 8", commit_at, &chain[3], NULL},
        };
        bench_compare("tag trees: a 256 KiB block committed at depth D",
                      "ns/block", c, sizeof c / sizeof c[0], 0);
    }
    flat[0] = flat[1] = ra_tag_create("bench-tree-flat");
    parent = ra_tag_create("bench-tree-parent");
    if (flat[0] == RA_TAG_NONE || parent == RA_TAG_NONE ||
        ra_tag_set_limit(flat[0], &limit) != 0 ||
        ra_tag_set_limit(parent, &limit) != 0 ||
        (tree[0] = ra_tag_create_in(parent, "bench-tree-child-0")) ==
            RA_TAG_NONE ||
        (tree[1] = ra_tag_create_in(parent, "bench-tree-child-1")) ==
            RA_TAG_NONE)
        bench_die("ra_tag_create");
    {
        struct bench_contender c[] = {
            {"one tag, 32 MiB limit (baseline)", race, flat, NULL},
            {"two children, the parent's 32 MiB limit", race, tree, NULL},
        };
        bench_compare("tag trees: 2 threads racing at a 32 MiB limit",
                      "ns/attempt", c, sizeof c / sizeof c[0], 0);
    }
    return 0;
}

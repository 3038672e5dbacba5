/* malloc+free cost: jemalloc's own functions vs libregionalloc untagged and
 * tagged, same process, same workload, alternating rounds; prints medians
 * and ratios to jemalloc. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <regionalloc.h>

#define RING 1024
#define OPS 4000000
#define ROUNDS 7

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);

static malloc_fn je_malloc;
static free_fn je_free;
static ra_tag_t bench_tag;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* A ring of live blocks: each step frees the oldest and allocates a new one
 * of a pseudo-random size in [8, max_size]. Returns ns per malloc+free. */
static double run_ring(malloc_fn m, free_fn f, size_t max_size)
{
    void *ring[RING] = {0};
    uint32_t x = 12345;
    double t0, t1;

    t0 = now_ns();
    for (unsigned i = 0; i < OPS; i++) {
        unsigned slot = i % RING;
        x = x * 1664525u + 1013904223u;
        f(ring[slot]);
        ring[slot] = m(8 + (x >> 8) % (max_size - 7));
        if (ring[slot] == NULL)
            abort();
        *(volatile char *)ring[slot] = 1;
    }
    t1 = now_ns();
    for (unsigned i = 0; i < RING; i++)
        f(ring[i]);
    return (t1 - t0) / OPS;
}

static void *tagged_malloc(size_t n)
{
    return malloc(n);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return v[n / 2];
}

static void bench_sizes(size_t max_size)
{
    double je[ROUNDS], un[ROUNDS], tg[ROUNDS];
    double mje, mun, mtg;

    for (unsigned r = 0; r < ROUNDS; r++) {
        je[r] = run_ring(je_malloc, je_free, max_size);
        un[r] = run_ring(malloc, free, max_size);
        ra_tag_push(bench_tag);
        tg[r] = run_ring(tagged_malloc, free, max_size);
        ra_tag_pop(bench_tag);
    }
    mje = median(je, ROUNDS);
    mun = median(un, ROUNDS);
    mtg = median(tg, ROUNDS);
    printf("sizes 8-%-5zu  jemalloc %6.1f ns   untagged %6.1f ns (%.2fx)   "
           "tagged %6.1f ns (%.2fx)\n", max_size, mje, mun, mun / mje, mtg,
           mtg / mje);
}

static void bench_tag_of(void)
{
    void *blocks[64];
    volatile unsigned sink = 0;
    double t0, t1;
    const unsigned n = 50000000;

    ra_tag_push(bench_tag);
    for (unsigned i = 0; i < 64; i++)
        blocks[i] = malloc(16 + i);
    ra_tag_pop(bench_tag);
    t0 = now_ns();
    for (unsigned i = 0; i < n; i++)
        sink += ra_tag_of(blocks[i & 63]);
    t1 = now_ns();
    for (unsigned i = 0; i < 64; i++)
        free(blocks[i]);
    printf("ra_tag_of     %6.2f ns per call\n", (t1 - t0) / n);
    (void)sink;
}

int main(void)
{
    /* jemalloc's own symbols, through a handle to the library itself: the
     * plain names are ours. */
    void *je = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_NOLOAD);

    if (je == NULL)
        je = dlopen("libjemalloc.so.2", RTLD_NOW);
    if (je == NULL) {
        fprintf(stderr, "cannot open libjemalloc.so.2: %s\n", dlerror());
        return 1;
    }
    je_malloc = (malloc_fn)dlsym(je, "malloc");
    je_free = (free_fn)dlsym(je, "free");
    if (je_malloc == NULL || je_free == NULL || (void *)je_malloc == (void *)malloc) {
        fprintf(stderr, "cannot reach jemalloc's own malloc\n");
        return 1;
    }
    bench_tag = ra_tag_create("bench");
    printf("malloc+free pairs, ring of %d live blocks, median of %d rounds of "
           "%d ops\n", RING, ROUNDS, OPS);
    bench_sizes(256);
    bench_sizes(4096);
    bench_tag_of();
    return 0;
}

/* Memory pressure: waves of allocation under a memory limit, one process
 * per run (`waves limit|nolimit`). A working set of 256 MiB in blocks of
 * 1-64 KiB; each wave frees four blocks in five (80% of it, drawn the same
 * in every run) and allocates as much again under a tag of its own, which
 * is destroyed once its last block is freed. A cache that must not grow
 * past what the process may hold: an allocation refused ends its wave's
 * refill, the next wave tries again. With `limit`, ra_memory_limit_set(200
 * MiB) before the first block; with `nolimit`, ra_memory_limit_set(0)
 * (whatever the cgroup says). Prints the peak resident set (the kernel's
 * VmHWM) over 200 MiB, what a wave allocated and the time a GiB of it
 * took, the CPU time of the library's threads (the limit's watcher: the
 * giving back) over the whole process's, and the waves a refusal cut
 * short. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include <regionalloc.h>

#include "benchutil.h"

#define MIB (1024u * 1024u)
#define WORKING_SET (256u * MIB)
#define LIMIT (200u * MIB)
#define MAX_BLOCK (64u * 1024u)
#define MAX_BLOCKS (2u * WORKING_SET / 1024u) /* blocks of 1 KiB at worst */
#define MAX_WAVES 64u

struct block {
    void *p;
    uint32_t size, wave;
};

static struct block blocks[MAX_BLOCKS];
static unsigned nblocks;
static ra_tag_t tags[MAX_WAVES];
static unsigned live_in[MAX_WAVES];
static uint32_t seed = 12345;
static double allocated; /* bytes, over the run */

static uint32_t next_random(void)
{
    seed = seed * 1103515245u + 12345u;
    return seed >> 8;
}

/* Allocates under wave w's tag until the working set is whole again, or
 * the library refuses. Returns the refusals (0 or 1). */
static unsigned refill(unsigned w, size_t *live)
{
    char name[32];

    snprintf(name, sizeof name, "wave-%u", w);
    /* A tag is made in its own region: at the limit, that is refused too. */
    tags[w] = ra_tag_create(name);
    if (tags[w] == RA_TAG_NONE && errno == ENOMEM)
        return 1;
    if (tags[w] == RA_TAG_NONE)
        bench_die("ra_tag_create");
    while (*live < WORKING_SET && nblocks < MAX_BLOCKS) {
        uint32_t size = 1024u + next_random() % (MAX_BLOCK - 1024u);
        void *p = ra_malloc_tag(tags[w], size);
        if (p == NULL)
            return 1;
        memset(p, (int)w, size); /* resident, as a cache's data is */
        blocks[nblocks++] = (struct block){p, size, w};
        live_in[w]++;
        *live += size;
        allocated += size;
    }
    return 0;
}

/* Frees four blocks in five, destroying each wave's tag with its last. */
static void free_most(size_t *live)
{
    unsigned kept = 0;

    for (unsigned i = 0; i < nblocks; i++) {
        struct block b = blocks[i];
        if (next_random() % 5 == 0) {
            blocks[kept++] = b;
            continue;
        }
        ra_free(b.p);
        *live -= b.size;
        if (--live_in[b.wave] == 0 && ra_tag_destroy(tags[b.wave]) != 0)
            bench_die("ra_tag_destroy");
    }
    nblocks = kept;
}

static double cpu_ns(int who)
{
    struct rusage ru;

    getrusage(who, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

int main(int argc, char **argv)
{
    const char *who = argc == 2 ? argv[1] : "";
    bool limited = strcmp(who, "limit") == 0;
    unsigned waves = (unsigned)bench_scaled(20, 4), refused = 0;
    const char *name = limited ? "200 MiB limit" : "no limit";
    double t0, wall, threads_cpu, all_cpu;
    size_t live = 0;

    if (!limited && strcmp(who, "nolimit") != 0) {
        fprintf(stderr, "usage: waves limit|nolimit\n");
        return 2;
    }
    if (waves > MAX_WAVES)
        waves = MAX_WAVES;
    if (ra_memory_limit_set(limited ? LIMIT : 0) != 0)
        bench_die("ra_memory_limit_set");
    t0 = bench_now_ns();
    all_cpu = cpu_ns(RUSAGE_SELF);
    threads_cpu = all_cpu - cpu_ns(RUSAGE_THREAD);
    refused += refill(0, &live);
    for (unsigned w = 1; w < waves; w++) {
        free_most(&live);
        refused += refill(w, &live);
    }
    wall = bench_now_ns() - t0;
    all_cpu = cpu_ns(RUSAGE_SELF) - all_cpu;
    threads_cpu = cpu_ns(RUSAGE_SELF) - cpu_ns(RUSAGE_THREAD) - threads_cpu;
    bench_row("waves: peak RSS over 200 MiB", name,
              (double)bench_peak_rss_bytes() / LIMIT, "x", -1, 0, 0);
    bench_row("waves: MiB allocated a wave", name, allocated / waves / MIB,
              "MiB", -1, 0, 0);
    bench_row("waves: time per GiB allocated", name,
              wall / (allocated / (1024.0 * MIB)) / 1e6, "ms", -1, 0, 0);
    bench_row("waves: library threads' CPU over the process's", name,
              100.0 * threads_cpu / all_cpu, "%", -1, 0, 0);
    bench_row("waves: waves cut short by a refusal", name, refused, "waves",
              -1, 0, 0);
    return 0;
}

/* A service under a memory limit: a cache that may give way beside
 * requests that must not fail.
 *
 *   pressure [--limit SIZE] [--requests N]
 *
 * The process holds itself under SIZE (default 128M) with
 * ra_memory_limit_set. The cache ("cache", priority -1: sheddable) keeps
 * 64 KiB entries and grows with every request until the library refuses
 * it: at high (90% of the limit) its allocations fail, so it stops growing
 * there and evicts its oldest entry instead. The pressure callback, called
 * once per rise on the library's thread, evicts half the cache, whose
 * pages the library then gives back. Requests ("requests", priority 10)
 * allocate 16 blocks of 4-64 KiB each, and are refused only at
 * the limit, which the cache's refusals keep them from reaching: every
 * request is served. Prints what happened and exits 1 if a request
 * failed. The program allocates through ra_malloc_tag and ra_free so that
 * it is tagged in a build without the malloc override too. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <regionalloc.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define ENTRY_SIZE (64 * KIB)
#define MAX_ENTRIES 65536
#define REQUEST_BLOCKS 16

static const char *progname = "pressure";

/* The cache: a ring of entries, oldest first, under its own lock (the
 * callback evicts from the library's thread while requests insert). */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static void *entries[MAX_ENTRIES];
static unsigned oldest, count;
static ra_tag_t cache_tag;
static uint64_t evicted_by_callback, refused_inserts, callbacks;

static void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", progname, what, strerror(errno));
    exit(2);
}

/* With cache_lock held. */
static void evict_oldest(void)
{
    ra_free(entries[oldest]);
    oldest = (oldest + 1) % MAX_ENTRIES;
    count--;
}

/* A new entry, or the oldest one made room for it when the library
 * refuses the cache more memory. */
static void cache_insert(unsigned seq)
{
    void *p = ra_malloc_tag(cache_tag, ENTRY_SIZE);

    pthread_mutex_lock(&cache_lock);
    if (p == NULL) {
        refused_inserts++;
        if (count > 0)
            evict_oldest();
    } else if (count == MAX_ENTRIES) {
        ra_free(p);
    } else {
        memset(p, (int)(seq & 0xff), ENTRY_SIZE);
        entries[(oldest + count) % MAX_ENTRIES] = p;
        count++;
    }
    pthread_mutex_unlock(&cache_lock);
}

/* On the library's thread, outside its locks: half the cache goes. */
static void on_pressure(void *ctx, ra_pressure_t level, size_t current,
                        size_t limit)
{
    (void)ctx;
    (void)level;
    (void)current;
    (void)limit;
    pthread_mutex_lock(&cache_lock);
    callbacks++;
    for (unsigned n = count / 2; n > 0; n--) {
        evict_oldest();
        evicted_by_callback++;
    }
    pthread_mutex_unlock(&cache_lock);
}

/* One request: blocks of 4-64 KiB, written, then freed. Returns false
 * when one was refused. */
static bool serve(ra_tag_t tag, uint32_t *seed)
{
    void *blocks[REQUEST_BLOCKS];
    bool ok = true;

    for (unsigned i = 0; i < REQUEST_BLOCKS; i++) {
        size_t size;
        *seed = *seed * 1103515245u + 12345u;
        size = 4 * KIB + (*seed >> 8) % (60 * KIB);
        blocks[i] = ra_malloc_tag(tag, size);
        if (blocks[i] == NULL)
            ok = false;
        else
            memset(blocks[i], 1, size);
    }
    for (unsigned i = 0; i < REQUEST_BLOCKS; i++)
        ra_free(blocks[i]);
    return ok;
}

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long n;

    errno = 0;
    n = strtoull(s, &end, 10);
    if (errno != 0 || end == s || n == 0)
        return 0;
    switch (*end) {
    case 'K': n <<= 10; end++; break;
    case 'M': n <<= 20; end++; break;
    case 'G': n <<= 30; end++; break;
    default: break;
    }
    return *end == '\0' ? (size_t)n : 0;
}

/* The kernel's high-water mark of the resident set. */
static size_t peak_rss(void)
{
    char line[128];
    size_t kib = 0;
    FILE *f = fopen("/proc/self/status", "re");

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmHWM: %zu kB", &kib) == 1)
            break;
    fclose(f);
    return kib * KIB;
}

int main(int argc, char **argv)
{
    size_t limit = 128 * MIB;
    unsigned requests = 5000, failed = 0;
    uint32_t seed = 1;
    ra_tag_t requests_tag;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            limit = parse_size(argv[++i]);
        } else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc) {
            char *end;
            requests = (unsigned)strtoul(argv[++i], &end, 10);
            if (*end != '\0')
                requests = 0;
        } else {
            fprintf(stderr,
                    "usage: %s [--limit SIZE] [--requests N]\n", progname);
            return 2;
        }
    }
    if (limit < 32 * MIB || requests == 0) {
        fprintf(stderr, "%s: a limit of 32M at least and some requests\n",
                progname);
        return 2;
    }
    cache_tag = ra_tag_create("cache");
    requests_tag = ra_tag_create("requests");
    if (cache_tag == RA_TAG_NONE || requests_tag == RA_TAG_NONE)
        die("ra_tag_create");
    if (ra_tag_set_priority(cache_tag, -1) != 0 ||
        ra_tag_set_priority(requests_tag, 10) != 0)
        die("ra_tag_set_priority");
    if (ra_pressure_callback(on_pressure, NULL) != 0)
        die("ra_pressure_callback");
    if (ra_memory_limit_set(limit) != 0)
        die("ra_memory_limit_set");

    for (unsigned r = 0; r < requests; r++) {
        cache_insert(r);
        if (!serve(requests_tag, &seed))
            failed++;
    }

    pthread_mutex_lock(&cache_lock);
    printf("limit: %zu MiB, peak resident: %zu MiB (%.2fx)\n", limit / MIB,
           peak_rss() / MIB, (double)peak_rss() / (double)limit);
    printf("requests: %u, failed: %u\n", requests, failed);
    printf("cache: %u entries (%zu MiB), refused inserts: %llu, "
           "callbacks: %llu, evicted by them: %llu\n",
           count, count * ENTRY_SIZE / MIB,
           (unsigned long long)refused_inserts,
           (unsigned long long)callbacks,
           (unsigned long long)evicted_by_callback);
    pthread_mutex_unlock(&cache_lock);
    ra_report(stdout, RA_FORMAT_TEXT);
    return failed == 0 ? 0 : 1;
}

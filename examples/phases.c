/* Demo: build data under three tags in phases, drop one phase, purge it, and
 * print the per-tag table after each phase. Plain malloc/free are tagged by
 * whatever tag is pushed, as a third-party library's would be. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <regionalloc.h>

#define NWORDS 400000
#define NBUCKETS 65536

struct word {
    struct word *next;
    char text[];
};

struct posting {
    struct posting *next;
    unsigned word;
};

static const char *human(char *buf, size_t len, size_t bytes)
{
    if (bytes < 1024)
        snprintf(buf, len, "%zu B", bytes);
    else if (bytes < (size_t)1 << 20)
        snprintf(buf, len, "%.1f KiB", bytes / 1024.0);
    else
        snprintf(buf, len, "%.1f MiB", bytes / (1024.0 * 1024.0));
    return buf;
}

static size_t process_rss(void)
{
    unsigned long size, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return resident * (size_t)sysconf(_SC_PAGESIZE);
}

static void print_table(const char *phase, ra_tag_t *tags, unsigned ntags)
{
    char a[32], b[32], c[32], d[32];
    ra_tag_stats_t s;

    printf("\n== %s (process RSS %s)\n", phase,
           human(a, sizeof a, process_rss()));
    printf("%-10s %12s %12s %12s %12s %10s %10s\n", "tag", "allocated",
           "active", "resident", "mapped", "nmalloc", "ndalloc");
    for (unsigned i = 0; i <= ntags; i++) {
        ra_tag_t t = i < ntags ? tags[i] : RA_TAG_NONE;
        if (ra_tag_stats(t, &s) != 0) {
            perror("ra_tag_stats");
            exit(1);
        }
        printf("%-10s %12s %12s %12s %12s %10llu %10llu\n", ra_tag_name(t),
               human(a, sizeof a, s.allocated), human(b, sizeof b, s.active),
               human(c, sizeof c, s.resident), human(d, sizeof d, s.mapped),
               (unsigned long long)s.nmalloc, (unsigned long long)s.ndalloc);
    }
}

/* Phase 1: "parse" text into a list of words (malloc'd strings). */
static struct word *parse_words(void)
{
    struct word *head = NULL;
    char buf[64];

    for (unsigned i = 0; i < NWORDS; i++) {
        int len = snprintf(buf, sizeof buf, "identifier_%u_%x", i % 50000,
                           i * 2654435761u);
        struct word *w = malloc(sizeof *w + (size_t)len + 1);
        if (w == NULL) {
            perror("malloc");
            exit(1);
        }
        memcpy(w->text, buf, (size_t)len + 1);
        w->next = head;
        head = w;
    }
    return head;
}

static unsigned hash(const char *s)
{
    unsigned h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

/* Phase 2: an "index" from word hash to postings. */
static struct posting **build_index(const struct word *words)
{
    struct posting **buckets = calloc(NBUCKETS, sizeof *buckets);
    unsigned n = 0;

    if (buckets == NULL) {
        perror("calloc");
        exit(1);
    }
    for (const struct word *w = words; w != NULL; w = w->next, n++) {
        struct posting *p = malloc(sizeof *p);
        unsigned b = hash(w->text) % NBUCKETS;
        if (p == NULL) {
            perror("malloc");
            exit(1);
        }
        p->word = n;
        p->next = buckets[b];
        buckets[b] = p;
    }
    return buckets;
}

static void free_words(struct word *w)
{
    while (w != NULL) {
        struct word *next = w->next;
        free(w);
        w = next;
    }
}

int main(void)
{
    ra_tag_t tags[3];
    struct word *words;
    struct posting **index;
    char *cache;

    tags[0] = ra_tag_create("parse");
    tags[1] = ra_tag_create("index");
    tags[2] = ra_tag_create("cache");
    if (tags[0] == RA_TAG_NONE || tags[1] == RA_TAG_NONE ||
        tags[2] == RA_TAG_NONE) {
        perror("ra_tag_create");
        return 1;
    }
    if (!ra_enabled())
        printf("regionalloc is in pass-through mode (REGIONALLOC=0?)\n");

    {
        RA_TAG_SCOPE(tags[0]);
        words = parse_words();
    }
    print_table("after parse: 400k words under \"parse\"", tags, 3);

    {
        RA_TAG_SCOPE(tags[1]);
        index = build_index(words);
    }
    {
        RA_TAG_SCOPE(tags[2]);
        cache = malloc(32 << 20);
        if (cache == NULL)
            return 1;
        memset(cache, 1, 32 << 20);
    }
    print_table("after index + 32 MiB cache", tags, 3);

    /* free() needs no tag: each block goes back to the tag that owns it. */
    free_words(words);
    print_table("after freeing the words (pages still held)", tags, 3);

    ra_tag_purge(tags[0]);
    print_table("after ra_tag_purge(parse): pages back to the OS", tags, 3);

    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct posting *p = index[b], *next; p != NULL; p = next) {
            next = p->next;
            free(p);
        }
    free(index);
    free(cache);
    ra_purge_all();
    print_table("after freeing everything and ra_purge_all()", tags, 3);
    return 0;
}

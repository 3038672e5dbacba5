/* Helper of tests/test_formats.sh (not a test by itself): creates tags with
 * awkward names, allocates known amounts under them, takes checkpoints and
 * writes every report in every format into the directory given as argv[1]:
 *
 *   report.{txt,json,prom}             ra_report
 *   checkpoints.{txt,json,prom}        ra_checkpoint_report
 *   checkpoints-empty.{json,prom}      ra_checkpoint_report before any
 *   tree.{json,prom}                   ra_report with a tag tree
 *   top-all.{txt,json,prom}            ra_report_top, every tag (a tree,
 *                                      and a tag named "(rest)" with a
 *                                      child, besides the tags above)
 *   top-3.{txt,json,prom}              the same, the 3 largest listed
 *   top-0.{json,prom}                  the same, none listed
 *
 * On stdout it prints what the documents must say, one fact per line, for
 * the script to compare with what a real parser reads from them:
 *
 *   tag <id> <name as hex bytes> <allocated> <blocks allocated, none freed>
 *   checkpoint <seq> <label as hex bytes> <allocated of tag 1> ... of tag n
 *
 * Exit status 0, or 1 after a message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <regionalloc.h>

/* Awkward on purpose: see the escaping rules in regionalloc(3). The first
 * two are what every reader expects; "untagged" must not be confused with
 * the untagged arenas. */
static const char *const names[] = {
    "plain",
    "with space",
    "untagged",
    "quote\" back\\slash",
    "percent %s %n %%",
    "new\nline\ttab\rcr\x01\x1f\x7f",
    "utf8 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
    "bad \xff\xfe \xc0\xaf \xed\xa0\x80 \xe2\x82",
    "label\\x41 looks escaped",
};
#define NTAGS (sizeof names / sizeof names[0])

static const char *const labels[] = {
    "start", "after \"alloc\" 100%", "line\nbreak \xff", "",
};
#define NLABELS (sizeof labels / sizeof labels[0])

static size_t allocated[NTAGS];
static unsigned nblocks[NTAGS];
static void *blocks[NTAGS][8];

static void print_hex(const char *s)
{
    if (*s == '\0')
        printf("-");
    for (; *s != '\0'; s++)
        printf("%02x", (unsigned char)*s);
}

static int fail(const char *what)
{
    perror(what);
    return 1;
}

/* Writes report(fmt) to dir/file. Returns 0 or 1. */
static int dump(const char *dir, const char *file,
                int (*report)(FILE *, ra_format_t), ra_format_t fmt)
{
    char path[4096];
    FILE *f;
    int rc;

    snprintf(path, sizeof path, "%s/%s", dir, file);
    f = fopen(path, "w");
    if (f == NULL)
        return fail(path);
    rc = report(f, fmt);
    if (fclose(f) != 0 || rc != 0)
        return fail(file);
    return 0;
}

/* Allocates (phase + 1) * (id) blocks of 1000 + id bytes under each tag. */
static void allocate_phase(ra_tag_t *tags, unsigned phase)
{
    for (size_t i = 0; i < NTAGS; i++) {
        void *p = ra_malloc_tag(tags[i], 1000 * (phase + 1) + i);
        if (p == NULL) {
            perror("ra_malloc_tag");
            exit(1);
        }
        memset(p, 0x11, 1000 * (phase + 1) + i);
        blocks[i][phase] = p;
        allocated[i] += ra_malloc_usable_size(p);
        nblocks[i]++;
    }
}

static void print_checkpoint(unsigned seq, const char *label)
{
    printf("checkpoint %u ", seq);
    print_hex(label);
    for (size_t i = 0; i < NTAGS; i++)
        printf(" %zu", allocated[i]);
    printf("\n");
}

/* A tag tree (tree-root, its children tree-a and tree-b, tree-a's child
 * tree-aa), blocks in each, its reports in tree.json and tree.prom; then
 * destroyed, so that the reports at exit see only the tags above. */
static int dump_tree(const char *dir)
{
    static const struct {
        const char *name;
        int parent; /* index in this table, -1: top level */
        size_t bytes;
    } tree[] = {{"tree-root", -1, 5000},
                {"tree-a", 0, 70000},
                {"tree-b", 0, 300},
                {"tree-aa", 1, 2000000}};
    ra_tag_t t[4];
    int failed;

    for (unsigned i = 0; i < 4; i++) {
        t[i] = ra_tag_create_in(tree[i].parent < 0 ? RA_TAG_NONE
                                                   : t[tree[i].parent],
                                tree[i].name);
        if (t[i] == RA_TAG_NONE)
            return fail("ra_tag_create_in");
        if (ra_malloc_tag(t[i], tree[i].bytes) == NULL)
            return fail("ra_malloc_tag");
    }
    ra_thread_flush();
    failed = dump(dir, "tree.json", ra_report, RA_FORMAT_JSON) |
             dump(dir, "tree.prom", ra_report, RA_FORMAT_PROMETHEUS);
    if (ra_tag_destroy(t[0]) != 0)
        return fail("ra_tag_destroy");
    return failed;
}

static size_t top_asked;

static int report_top(FILE *f, ra_format_t fmt)
{
    return ra_report_top(f, fmt, top_asked);
}

/* Writes top-N.{txt,json,prom} ("all" for RA_REPORT_ALL_TAGS). */
static int dump_top(const char *dir, size_t top, const char *n)
{
    static const struct {
        const char *suffix;
        ra_format_t fmt;
    } formats[] = {{"txt", RA_FORMAT_TEXT},
                   {"json", RA_FORMAT_JSON},
                   {"prom", RA_FORMAT_PROMETHEUS}};
    char file[64];
    int failed = 0;

    top_asked = top;
    for (size_t f = 0; f < 3; f++) {
        snprintf(file, sizeof file, "top-%s.%s", n, formats[f].suffix);
        failed |= dump(dir, file, report_top, formats[f].fmt);
    }
    return failed;
}

/* Tags listed or rolled up: a tree (top-root, its children top-a, top-b
 * and top-c, top-a's child top-aa), a tag named "(rest)" with a child
 * larger than every other tag, with blocks in each; their reports with
 * every tag, the 3 largest and none listed; then destroyed. */
static int dump_listings(const char *dir)
{
    static const struct {
        const char *name;
        int parent; /* index in this table, -1: top level */
        size_t bytes;
    } tags[] = {{"top-root", -1, 1000},     {"top-a", 0, 300000},
                {"top-b", 0, 50000},        {"top-c", 0, 20000},
                {"top-aa", 1, 700000},      {"(rest)", -1, 3000},
                {"rest-child", 5, 4000000}};
    ra_tag_t t[7];
    int failed;

    for (unsigned i = 0; i < 7; i++) {
        void *p;
        t[i] = ra_tag_create_in(tags[i].parent < 0 ? RA_TAG_NONE
                                                   : t[tags[i].parent],
                                tags[i].name);
        if (t[i] == RA_TAG_NONE)
            return fail("ra_tag_create_in");
        if ((p = ra_malloc_tag(t[i], tags[i].bytes)) == NULL)
            return fail("ra_malloc_tag");
        memset(p, 0x22, tags[i].bytes);
    }
    ra_thread_flush();
    /* The kernel counts every region now: the three listings see the same
     * figures (the library's thread would count them between two). */
    if (ra_stats_refresh() != 0)
        return fail("ra_stats_refresh");
    failed = dump_top(dir, RA_REPORT_ALL_TAGS, "all") |
             dump_top(dir, 3, "3") | dump_top(dir, 0, "0");
    if (ra_tag_destroy(t[0]) != 0 || ra_tag_destroy(t[5]) != 0)
        return fail("ra_tag_destroy");
    return failed;
}

int main(int argc, char **argv)
{
    ra_tag_t tags[NTAGS];
    int failed = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    if (!ra_enabled()) {
        fprintf(stderr, "%s: libregionalloc is in pass-through mode\n",
                argv[0]);
        return 1;
    }
    failed |= dump(argv[1], "checkpoints-empty.json", ra_checkpoint_report,
                   RA_FORMAT_JSON);
    failed |= dump(argv[1], "checkpoints-empty.prom", ra_checkpoint_report,
                   RA_FORMAT_PROMETHEUS);
    for (size_t i = 0; i < NTAGS; i++) {
        tags[i] = ra_tag_create(names[i]);
        if (tags[i] != i + 1)
            return fail("ra_tag_create");
    }
    for (unsigned c = 0; c < NLABELS; c++) {
        if (c > 0)
            allocate_phase(tags, c);
        /* Exact figures: nothing of the tags sits in this thread's cache. */
        ra_thread_flush();
        if (ra_checkpoint(labels[c]) != 0)
            return fail("ra_checkpoint");
        print_checkpoint(c + 1, labels[c]);
    }
    for (size_t i = 0; i < NTAGS; i++) {
        printf("tag %zu ", i + 1);
        print_hex(names[i]);
        printf(" %zu %u\n", allocated[i], nblocks[i]);
    }
    /* The untagged row is jemalloc's as of the last refresh: checked
     * against the library's own memory, it must be now's. */
    if (ra_stats_refresh() != 0)
        return fail("ra_stats_refresh");
    failed |= dump(argv[1], "report.txt", ra_report, RA_FORMAT_TEXT);
    failed |= dump(argv[1], "report.json", ra_report, RA_FORMAT_JSON);
    failed |= dump(argv[1], "report.prom", ra_report, RA_FORMAT_PROMETHEUS);
    failed |= dump(argv[1], "checkpoints.txt", ra_checkpoint_report,
                   RA_FORMAT_TEXT);
    failed |= dump(argv[1], "checkpoints.json", ra_checkpoint_report,
                   RA_FORMAT_JSON);
    failed |= dump(argv[1], "checkpoints.prom", ra_checkpoint_report,
                   RA_FORMAT_PROMETHEUS);
    failed |= dump_tree(argv[1]);
    failed |= dump_listings(argv[1]);
    return failed;
}

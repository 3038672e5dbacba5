/* Suite "parts": the process's RssAnon and the parts the reports name in
 * it (tags, untagged, metadata, library, other), each held against what
 * the kernel counts at rest, once ra_stats_refresh() has had every part
 * counted: they add up to RssAnon, what no part names stays small in a
 * program that allocates through malloc only, and each part moves by what
 * the program touched in it, not by what it only allocated or read. Where
 * the library does not see jemalloc's mappings (built without the
 * override), the untagged part is jemalloc's estimate: the program exits
 * 77 before the suite, a skip. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "regionalloc.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

struct parts {
    uint64_t rss_anon, tags, untagged, metadata, library, other, over;
};

/* The number after "key": in the JSON report's text, or UINT64_MAX. */
static uint64_t number_after(const char *json, const char *key)
{
    char k[64];
    const char *at;

    snprintf(k, sizeof k, "\"%s\": ", key);
    at = strstr(json, k);
    return at == NULL ? UINT64_MAX : strtoull(at + strlen(k), NULL, 10);
}

/* The parts add up to RssAnon, the kernel's figure of the same moment
 * within what the report itself touched (its rows and its text: 4 MiB
 * with 3,000 tags), and other is within
 * 4 MiB + 2% plus the threads' stacks (this program's: the main one and
 * the library's, 8 MiB of address space each, a few pages touched). */
static void adds_up(const struct parts *p)
{
    uint64_t named = p->tags + p->untagged + p->metadata + p->library;
    uint64_t kernel = tu_rss_anon_bytes();

    ck_assert_uint_eq(p->over, 0);
    ck_assert_uint_eq(named + p->other, p->rss_anon);
    ck_assert_uint_le(p->rss_anon, kernel + MIB + kernel / 50);
    ck_assert_uint_ge(p->rss_anon + MIB + kernel / 50, kernel);
    ck_assert_uint_le(p->other, 4 * MIB + p->rss_anon / 50 + MIB);
}

/* The parts at rest: every region and mapping counted now; they add up
 * (adds_up). */
static struct parts parts_now(void)
{
    struct parts p;
    char *json, *process;

    ck_assert_int_eq(ra_stats_refresh(), 0);
    json = tu_report_string(ra_report, RA_FORMAT_JSON);
    process = strstr(json, "\"process\": ");
    ck_assert_ptr_nonnull(process);
    p = (struct parts){
        number_after(process, "rss_anon"), number_after(process, "tags"),
        number_after(process, "untagged"), number_after(process, "metadata"),
        number_after(process, "library"), number_after(process, "other"),
        number_after(process, "parts_over")};
    free(json);
    ck_assert_uint_ne(p.rss_anon, UINT64_MAX);
    ck_assert_uint_ne(p.other, UINT64_MAX);
    adds_up(&p);
    return p;
}

static double mib(uint64_t b)
{
    return (double)b / (double)MIB;
}

static void show(const char *when, const struct parts *p)
{
    fprintf(stderr,
            "%s: rss_anon %.1f = tags %.1f + untagged %.1f + metadata %.1f "
            "+ library %.1f + other %.1f (over %.1f) MiB; RssAnon now %.1f\n",
            when, mib(p->rss_anon), mib(p->tags), mib(p->untagged),
            mib(p->metadata), mib(p->library), mib(p->other), mib(p->over),
            mib(tu_rss_anon_bytes()));
}

START_TEST(test_parts_add_up_at_rest)
{
    struct parts p = parts_now();

    show("at rest", &p);
    ck_assert_uint_gt(p.metadata, 0);
    ck_assert_uint_gt(p.library, 0);
}
END_TEST

/* Untagged blocks from 16 B to 256 MiB: written, the untagged part grows
 * by what was written; only allocated, or only read (the zero page), it
 * does not; freed, it falls back. */
START_TEST(test_parts_untagged_counts_what_is_touched)
{
    static const size_t sizes[] = {16, 4096, MIB, 4 * MIB, 64 * MIB,
                                   256 * MIB};
    size_t total = 0;
    char *blocks[sizeof sizes / sizeof sizes[0]];
    volatile char sink = 0;
    struct parts before = parts_now(), untouched, read, written, freed;

    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        blocks[i] = malloc(sizes[i]);
        ck_assert_ptr_nonnull(blocks[i]);
        total += sizes[i];
    }
    untouched = parts_now();
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t j = 0; j < sizes[i]; j += 4096)
            sink += ((volatile char *)blocks[i])[j];
    (void)sink;
    read = parts_now();
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        memset(blocks[i], 1, sizes[i]);
    written = parts_now();
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        free(blocks[i]);
    ck_assert_int_eq(ra_purge_all(), 0);
    freed = parts_now();
    show("before", &before);
    show("allocated", &untouched);
    show("read", &read);
    show("written", &written);
    show("freed", &freed);
    ck_assert_uint_lt(untouched.untagged, before.untagged + 2 * MIB);
    ck_assert_uint_lt(read.untagged, before.untagged + 2 * MIB);
    ck_assert_uint_ge(written.untagged, before.untagged + total - MIB);
    ck_assert_uint_le(written.untagged, before.untagged + total + 4 * MIB);
    ck_assert_uint_lt(freed.untagged, before.untagged + 2 * MIB);
}
END_TEST

/* Blocks mapped and never touched (256 MiB untagged, 256 MiB under a tag):
 * no row's resident, nor the process's total, is above what the kernel
 * counts (RssAnon + 1 MiB + 2%), with or without a refresh of jemalloc's
 * statistics. */
START_TEST(test_parts_no_resident_above_the_kernels)
{
    ra_tag_t tag = tu_tag_create("untouched");
    void *u = malloc(256 * MIB), *t = ra_malloc_tag(tag, 256 * MIB);
    ra_tag_stats_t untagged, tagged;
    uint64_t bound;
    char *json;

    ck_assert_ptr_nonnull(u);
    ck_assert_ptr_nonnull(t);
    (void)parts_now(); /* every count taken, and a refresh */
    bound = tu_rss_anon_bytes() + MIB + tu_rss_anon_bytes() / 50;
    untagged = tu_tag_stats(RA_TAG_NONE);
    tagged = tu_tag_stats(tag);
    json = tu_report_string(ra_report, RA_FORMAT_JSON);
    fprintf(stderr, "untouched: untagged resident %.1f, tag %.1f, process "
                    "%.1f MiB; bound %.1f MiB\n",
            mib(untagged.resident), mib(tagged.resident),
            mib(number_after(strstr(json, "\"process\": "), "resident")),
            mib(bound));
    ck_assert_uint_le(untagged.resident, bound);
    ck_assert_uint_le(tagged.resident, bound);
    ck_assert_uint_le(untagged.resident + tagged.resident, bound);
    ck_assert_uint_le(number_after(strstr(json, "\"process\": "), "resident"),
                      bound);
    free(json);
    free(u);
    ra_free(t);
}
END_TEST

/* The profiler on (its samples and tables are the library's memory), 64
 * MiB written under a tag and untagged, then the tag reset, then
 * destroyed: the parts add up at every step (parts_now), and the tags'
 * part falls by what the reset and the destroy gave back. */
START_TEST(test_parts_add_up_profiled_and_after_reset_and_destroy)
{
    enum { BLOCKS = 16384, SIZE = 4096 };
    static void *tagged[BLOCKS], *untagged[BLOCKS];
    ra_tag_t tag = tu_tag_create("profiled");
    struct parts full, reset, destroyed;

    ck_assert_int_eq(ra_prof_start(64 * 1024), 0);
    for (unsigned i = 0; i < BLOCKS; i++) {
        tagged[i] = ra_malloc_tag(tag, SIZE);
        untagged[i] = malloc(SIZE);
        ck_assert_ptr_nonnull(tagged[i]);
        ck_assert_ptr_nonnull(untagged[i]);
        memset(tagged[i], 1, SIZE);
        memset(untagged[i], 1, SIZE);
    }
    full = parts_now();
    ck_assert_int_eq(ra_tag_reset(tag), 0);
    reset = parts_now();
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    destroyed = parts_now();
    show("profiled", &full);
    show("after the reset", &reset);
    show("after the destroy", &destroyed);
    ck_assert_uint_ge(full.tags, (uint64_t)BLOCKS * SIZE);
    ck_assert_uint_ge(full.untagged, (uint64_t)BLOCKS * SIZE - MIB);
    ck_assert_uint_le(reset.tags + (uint64_t)BLOCKS * SIZE, full.tags + MIB);
    ck_assert_uint_le(destroyed.tags, reset.tags);
    ck_assert_int_eq(ra_prof_stop(), 0);
    for (unsigned i = 0; i < BLOCKS; i++)
        free(untagged[i]);
}
END_TEST

#define THREADS 16

static void *touch_8_mib(void *arg)
{
    char *p = malloc(8 * MIB);

    (void)arg;
    if (p != NULL)
        memset(p, 2, 8 * MIB);
    return p;
}

/* Threads allocate from arenas of their own (jemalloc gives each thread
 * one of its automatic arenas): every one's memory is untagged, not other. */
START_TEST(test_parts_threads_arenas_are_untagged)
{
    pthread_t threads[THREADS];
    void *blocks[THREADS];
    struct parts before = parts_now(), during;

    for (unsigned i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, touch_8_mib, NULL),
                         0);
    for (unsigned i = 0; i < THREADS; i++) {
        ck_assert_int_eq(pthread_join(threads[i], &blocks[i]), 0);
        ck_assert_ptr_nonnull(blocks[i]);
    }
    during = parts_now();
    show("16 threads, 8 MiB each", &during);
    ck_assert_uint_ge(during.untagged, before.untagged + THREADS * 8 * MIB);
    for (unsigned i = 0; i < THREADS; i++)
        free(blocks[i]);
}
END_TEST

/* A tag's pages are the tags' part; a destroyed tag's slot keeps them
 * (the tags' regions hold them) until a purge gives them back. */
START_TEST(test_parts_tags_count_their_regions)
{
    ra_tag_t tag = tu_tag_create("parts");
    struct parts before = parts_now(), full, destroyed, purged;
    char *p = ra_malloc_tag(tag, 128 * MIB);

    ck_assert_ptr_nonnull(p);
    memset(p, 3, 128 * MIB);
    full = parts_now();
    ra_free(p);
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    destroyed = parts_now();
    ck_assert_int_eq(ra_purge_all(), 0);
    purged = parts_now();
    show("a tag of 128 MiB", &full);
    show("destroyed", &destroyed);
    show("purged", &purged);
    ck_assert_uint_ge(full.tags, before.tags + 128 * MIB);
    ck_assert_uint_lt(full.untagged, before.untagged + 2 * MIB);
    ck_assert_uint_lt(purged.tags, before.tags + 4 * MIB);
}
END_TEST

/* 3,000 tags: their arenas' metadata is in the tags' part, the radix
 * tree's leaves jemalloc takes for their regions in metadata, as the
 * kernel counts them (mostly untouched, where jemalloc counts 2 MiB a
 * tag): other stays small, and no row's resident is above the kernel's.
 * main() makes the room (MANY_TAGS, smaller regions). */
#define MANY_TAGS 3000
START_TEST(test_parts_many_tags_add_up)
{
    enum { N = MANY_TAGS };
    static void *blocks[N];
    struct parts p;
    ra_tag_stats_t untagged;
    uint64_t bound;

    for (unsigned i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "many-%u", i);
        blocks[i] = ra_malloc_tag(tu_tag_create(name), 1000);
        ck_assert_ptr_nonnull(blocks[i]);
    }
    p = parts_now();
    show("3,000 tags", &p);
    bound = tu_rss_anon_bytes() + MIB + tu_rss_anon_bytes() / 50;
    ck_assert_int_eq(ra_tag_stats(RA_TAG_NONE, &untagged), 0);
    ck_assert_uint_le(untagged.resident, bound);
    ck_assert_uint_le(p.tags + p.untagged + p.metadata + p.library, bound);
    /* jemalloc's own figure would be 2 MiB a tag here. */
    ck_assert_uint_lt(p.metadata, (uint64_t)N * 128 * 1024);
    for (unsigned i = 0; i < N; i++)
        ra_free(blocks[i]);
}
END_TEST

static Suite *parts_suite(void)
{
    Suite *s = suite_create("parts");
    TCase *tc = tcase_create("at rest");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_parts_add_up_at_rest);
    tcase_add_test(tc, test_parts_untagged_counts_what_is_touched);
    tcase_add_test(tc, test_parts_no_resident_above_the_kernels);
    tcase_add_test(tc, test_parts_add_up_profiled_and_after_reset_and_destroy);
    tcase_add_test(tc, test_parts_threads_arenas_are_untagged);
    tcase_add_test(tc, test_parts_tags_count_their_regions);
    tcase_add_test(tc, test_parts_many_tags_add_up);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    char *json = NULL;
    size_t len = 0;
    FILE *f;
    int rc;
    bool measured;

    (void)argc;
    /* Room for 3,000 tags, read at the library's first use: once, in a
     * process of its own. */
    if (getenv("CHECK_PARTS_ROOM") == NULL) {
        char n[16];
        snprintf(n, sizeof n, "%u", MANY_TAGS + 64);
        setenv("CHECK_PARTS_ROOM", "1", 1);
        setenv("REGIONALLOC_MAX_TAGS", n, 1);
        setenv("REGIONALLOC_REGION_SIZE", "4G", 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    f = open_memstream(&json, &len);
    rc = f != NULL ? ra_report(f, RA_FORMAT_JSON) : -1;
    if (f != NULL)
        fclose(f);
    measured = rc == 0 && json != NULL &&
               strstr(json, "\"jemalloc_measured\": true") != NULL;
    if (rc != 0)
        fprintf(stderr, "ra_report: %s\n", strerror(errno));
    free(json);
    if (!measured) {
        printf("SKIP: the library does not see jemalloc's mappings in this "
               "build (--disable-override): untagged is an estimate\n");
        return 77;
    }
    return tu_run_suite(parts_suite());
}

/* Suite "report": ra_report in its three formats, the escaping of tag names
 * in each, how the JSON documents (the checkpoints' too) tell tags apart,
 * its errors, and the reports printed at exit (REGIONALLOC_STATS,
 * REGIONALLOC_STATS_FORMAT). Tests/test_formats.sh parses the outputs with
 * real parsers (Python's json, promtool). */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include "regionalloc.h"
#include "testutil.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static char err[16384];

static char *report(ra_format_t fmt)
{
    return tu_report_string(ra_report, fmt);
}

/* The value after the first occurrence of context in doc, which must be
 * there, as an unsigned number. */
static uint64_t number_after(const char *doc, const char *context)
{
    const char *p = strstr(doc, context);

    ck_assert_msg(p != NULL, "\"%s\" not found in:\n%s", context, doc);
    return strtoull(p + strlen(context), NULL, 10);
}

/* Terminal columns of the line at s (up to '\n'): one per UTF-8
 * character. */
static size_t line_width(const char *s)
{
    size_t w = 0;

    for (; *s != '\0' && *s != '\n'; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

/* Allocates size bytes under tag and returns the usable size. */
static size_t alloc_under(ra_tag_t tag, size_t size, void **out)
{
    *out = ra_malloc_tag(tag, size);
    ck_assert_ptr_nonnull(*out);
    memset(*out, 0x5a, size);
    return ra_malloc_usable_size(*out);
}

/* -- text ------------------------------------------------------------------- */

START_TEST(test_report_text_has_a_row_per_tag_then_untagged_and_total)
{
    char *text;
    const char *line;
    unsigned n = 0;
    static const char *const starts[] = {
        "tag ",      "parse ", "index ", "-----",      "untagged ",
        "library ", "total ", "process: ", "         rss_file "};

    tu_tag_create("parse");
    tu_tag_create("index");
    /* The kernel counts the new tags' regions now, not at the library's
     * thread's next round: no line under the table says they are not. */
    ck_assert_int_eq(ra_stats_refresh(), 0);
    text = report(RA_FORMAT_TEXT);
    ck_assert_uint_eq(tu_count_lines(text), 9);
    for (line = text; *line != '\0'; line = strchr(line, '\n') + 1, n++)
        ck_assert_msg(strncmp(line, starts[n], strlen(starts[n])) == 0,
                      "line %u does not start with \"%s\":\n%s", n,
                      starts[n], text);
    ck_assert_ptr_nonnull(strstr(text, "allocated"));
    ck_assert_ptr_nonnull(strstr(text, "kernel_rss"));
    ck_assert_ptr_nonnull(strstr(text, "peak_mapped"));
    free(text);
}
END_TEST

START_TEST(test_report_text_lines_are_aligned)
{
    char *text;
    size_t width = 0;

    tu_tag_create("a");
    tu_tag_create(TU_NASTY);
    tu_tag_create("a-much-longer-tag-name");
    ck_assert_int_eq(ra_stats_refresh(), 0);
    text = report(RA_FORMAT_TEXT);
    /* The table's lines, to its total row; the process's lines under it
     * are sentences. */
    for (const char *line = text;
         *line != '\0' && strncmp(line, "process: ", 9) != 0;
         line = strchr(line, '\n') + 1) {
        if (width == 0)
            width = line_width(line);
        ck_assert_msg(line_width(line) == width,
                      "line of width %zu, not %zu:\n%s", line_width(line),
                      width, text);
    }
    free(text);
}
END_TEST

START_TEST(test_report_text_uses_human_units)
{
    ra_tag_t t = tu_tag_create("units");
    void *p;
    char *text;

    tu_tag_create("empty");
    alloc_under(t, 3 * MIB, &p);
    ra_thread_flush();
    text = report(RA_FORMAT_TEXT);
    ck_assert_msg(strstr(text, "\nunits  ") != NULL, "%s", text);
    ck_assert_msg(strstr(text, " 3.0 MiB ") != NULL, "%s", text);
    ck_assert_msg(strstr(text, " 0 B ") != NULL, "%s", text);
    free(text);
    ra_free(p);
}
END_TEST

/* -- many tags: the largest listed, the rest rolled up ------------------------------ */

#define MANY 60

static size_t top_asked;

static int report_with_top(FILE *f, ra_format_t fmt)
{
    return ra_report_top(f, fmt, top_asked);
}

static char *report_top(ra_format_t fmt, size_t top)
{
    top_asked = top;
    return tu_report_string(report_with_top, fmt);
}

/* MANY tags "many-00" .. "many-59", tag i holding one block of (i + 1) x
 * 16 KiB, written: their resident bytes rise with i (the 10 smallest are
 * many-00 .. many-09, each of the others a size class above them). Each
 * tag's allocated into allocated[i]; returns their sum for i < below. */
static uint64_t make_many(uint64_t allocated[MANY], unsigned below)
{
    uint64_t sum = 0;

    for (unsigned i = 0; i < MANY; i++) {
        char name[16];
        void *p;
        snprintf(name, sizeof name, "many-%02u", i);
        allocated[i] = alloc_under(tu_tag_create(name), (i + 1) * 16 * KIB, &p);
        if (i < below)
            sum += allocated[i];
    }
    ra_thread_flush();
    /* Every region counted by the kernel now: the tags rank by what it
     * counts, not some by jemalloc's estimate until the library's thread
     * has counted them. */
    ck_assert_int_eq(ra_stats_refresh(), 0);
    return sum;
}

/* The sum of the samples of family (a tag family: "name{") in prom. */
static uint64_t family_sum(const char *prom, const char *family)
{
    char start[128];
    uint64_t sum = 0;

    snprintf(start, sizeof start, "\n%s{", family);
    for (const char *p = strstr(prom, start); p != NULL;
         p = strstr(p + 1, start))
        sum += strtoull(strchr(strchr(p, '}'), ' ') + 1, NULL, 10);
    return sum;
}

START_TEST(test_report_text_lists_the_50_largest_and_one_line_for_the_rest)
{
    uint64_t allocated[MANY], rest = make_many(allocated, 10);
    char *text = report(RA_FORMAT_TEXT), want[64];

    /* The header, 50 tags, the rest, the rule, untagged, library, total,
     * and the process's two lines. */
    ck_assert_msg(tu_count_lines(text) == 1 + 50 + 1 + 4 + 2,
                  "%u lines, want 58:\n%.3000s", tu_count_lines(text), text);
    for (unsigned i = 0; i < MANY; i++) {
        snprintf(want, sizeof want, "\nmany-%02u ", i);
        ck_assert_msg((strstr(text, want) != NULL) == (i >= 10),
                      "many-%02u: listed %d, want %d", i, i < 10, i >= 10);
    }
    /* The size classes of 16 KiB .. 160 KiB, 160 KiB twice. */
    ck_assert_uint_eq(rest, 896 * KIB);
    ck_assert_msg(strstr(text, "\n(10 more tags)  896.0 KiB ") != NULL,
                  "no \"(10 more tags)  896.0 KiB\" in\n%.3000s", text);
    ck_assert_msg(strstr(text, "\n(10 more tags) ") <
                      strstr(text, "\n-----"),
                  "the rest after the rule:\n%.3000s", text);
    free(text);
    text = report_top(RA_FORMAT_TEXT, RA_REPORT_ALL_TAGS);
    ck_assert_msg(tu_count_lines(text) == 1 + MANY + 4 + 2,
                  "%u lines, want 67:\n%.3000s", tu_count_lines(text), text);
    ck_assert_ptr_null(strstr(text, "more tag"));
    free(text);
}
END_TEST

START_TEST(test_report_json_lists_every_tag_unless_told)
{
    /* Each tag's block is written whole, 16 KiB more than the one before:
     * what the kernel counts resident ranks them (many-48 .. many-55 share
     * a size class, but not their written pages). */
    static const unsigned listed[] = {55, 56, 57, 58, 59};
    uint64_t allocated[MANY], rest = make_many(allocated, MANY);
    char *json = report(RA_FORMAT_JSON);

    ck_assert_uint_eq(tu_count_of(json, "\"name\": \"many-"), MANY);
    ck_assert_msg(strstr(json, "\"top\": null,\n  \"rest\": [],") != NULL,
                  "%s", json);
    free(json);
    json = report_top(RA_FORMAT_JSON, 5);
    ck_assert_uint_eq(tu_count_of(json, "\"name\": \"many-"), 5);
    for (unsigned i = 0; i < 5; i++) {
        char want[32];
        snprintf(want, sizeof want, "\"name\": \"many-%02u\"", listed[i]);
        ck_assert_msg(strstr(json, want) != NULL, "%s not listed", want);
        rest -= allocated[listed[i]];
    }
    ck_assert_ptr_nonnull(strstr(json, "\"top\": 5,"));
    ck_assert_uint_eq(number_after(json, "{\"parent\": null, \"parent_id\": "
                                         "null, \"tags\": "),
                      MANY - 5);
    ck_assert_uint_eq(number_after(json, "\"tags\": 55, \"allocated\": "),
                      rest);
    free(json);
}
END_TEST

/* With ?top, a family whose series add up keeps its sum: the tags not
 * listed are one series tag="(rest)". Peaks, limits, priorities and
 * subtrees, which do not add up, have none. */
START_TEST(test_report_prometheus_rest_series_keeps_each_family_whole)
{
    static const char *const summed[] = {
        "regionalloc_tag_allocated_bytes", "regionalloc_tag_active_bytes",
        "regionalloc_tag_resident_bytes", "regionalloc_tag_mapped_bytes",
        "regionalloc_tag_dirty_bytes", "regionalloc_tag_allocations_total",
        "regionalloc_tag_frees_total", "regionalloc_tag_purges_total",
        "regionalloc_tag_limit_failures_total", "regionalloc_tag_arenas"};
    static const char *const apart[] = {
        "regionalloc_tag_peak_mapped_bytes", "regionalloc_tag_limit_bytes",
        "regionalloc_tag_soft_limit_bytes", "regionalloc_tag_priority",
        "regionalloc_tag_info", "regionalloc_tree_allocated_bytes"};
    uint64_t allocated[MANY];
    char *all, *top, rest[128];

    make_many(allocated, 0);
    all = report(RA_FORMAT_PROMETHEUS);
    top = report_top(RA_FORMAT_PROMETHEUS, 5);
    ck_assert_ptr_null(strstr(all, "(rest)"));
    ck_assert_ptr_null(strstr(all, "regionalloc_rest_tags"));
    for (size_t f = 0; f < sizeof summed / sizeof summed[0]; f++) {
        snprintf(rest, sizeof rest, "\n%s{tag=\"(rest)\"} ", summed[f]);
        ck_assert_msg(strstr(top, rest) != NULL, "no %s", rest + 1);
        ck_assert_msg(family_sum(top, summed[f]) == family_sum(all, summed[f]),
                      "%s: %" PRIu64 " with ?top, %" PRIu64 " without",
                      summed[f], family_sum(top, summed[f]),
                      family_sum(all, summed[f]));
        ck_assert_uint_eq(tu_count_of(top, summed[f]), 2 + 5 + 1);
    }
    for (size_t f = 0; f < sizeof apart / sizeof apart[0]; f++) {
        snprintf(rest, sizeof rest, "\n%s{tag=\"(rest)\"", apart[f]);
        ck_assert_msg(strstr(top, rest) == NULL, "%s", rest + 1);
        ck_assert_uint_eq(tu_count_of(top, apart[f]), 2 + 5);
    }
    ck_assert_uint_eq(number_after(top, "\nregionalloc_rest_tags "), MANY - 5);
    free(all);
    free(top);
}
END_TEST

/* A tag named "(rest)" is rolled up where the rest is, into the one series
 * of that name; listed with the others where nothing is. */
START_TEST(test_report_tag_named_rest_is_rolled_up)
{
    ra_tag_t t = tu_tag_create("(rest)");
    void *p, *q;
    size_t big = alloc_under(t, 8 * MIB, &p);
    size_t small = alloc_under(tu_tag_create("small"), 1000, &q);
    char *prom;

    tu_tag_create("empty");
    ra_thread_flush();
    prom = report_top(RA_FORMAT_PROMETHEUS, 1);
    ck_assert_uint_eq(tu_count_of(prom, "regionalloc_tag_allocated_bytes{tag=\"(rest)\"}"), 1);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_tag_allocated_bytes"
                                         "{tag=\"(rest)\"} "),
                      big + 0);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_tag_allocated_bytes"
                                         "{tag=\"small\"} "),
                      small);
    free(prom);
    prom = report(RA_FORMAT_PROMETHEUS);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_tag_allocated_bytes"
                                         "{tag=\"(rest)\"} "),
                      big);
    ck_assert_ptr_null(strstr(prom, "regionalloc_rest_tags"));
    free(prom);
    ra_free(p);
    ra_free(q);
}
END_TEST

START_TEST(test_report_top_checks_its_arguments)
{
    FILE *f = tmpfile();

    ck_assert_ptr_nonnull(f);
    errno = 0;
    ck_assert_int_eq(ra_report_top(NULL, RA_FORMAT_TEXT, 5), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_report_top(f, (ra_format_t)3, 5), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_int_eq(ftell(f), 0);
    fclose(f);
}
END_TEST

/* -- JSON and Prometheus: the figures ------------------------------------------ */

START_TEST(test_report_json_shows_exact_allocated_after_flush)
{
    ra_tag_t a = tu_tag_create("json-a"), b = tu_tag_create("json-b");
    void *p[3];
    size_t want_a, want_b;
    char *json;

    want_a = alloc_under(a, 100, &p[0]) + alloc_under(a, 2 * MIB, &p[1]);
    want_b = alloc_under(b, 40 * KIB, &p[2]);
    ra_thread_flush();
    json = report(RA_FORMAT_JSON);
    ck_assert_uint_eq(number_after(json, "\"name\": \"json-a\", "
                                         "\"allocated\": "), want_a);
    ck_assert_uint_eq(number_after(json, "\"name\": \"json-b\", "
                                         "\"allocated\": "), want_b);
    ck_assert_ptr_nonnull(strstr(json, "\"schema\": \"regionalloc-report-1\""));
    ck_assert_ptr_nonnull(strstr(json, "\"untagged\": {\"allocated\": "));
    ck_assert_ptr_nonnull(strstr(json, "\"process\": {\"allocated\": "));
    free(json);
    for (size_t i = 0; i < 3; i++)
        ra_free(p[i]);
}
END_TEST

START_TEST(test_report_prometheus_shows_exact_allocated_after_flush)
{
    ra_tag_t a = tu_tag_create("prom-a");
    void *p;
    size_t want = alloc_under(a, 5000, &p);
    char *prom;

    ra_thread_flush();
    prom = report(RA_FORMAT_PROMETHEUS);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_tag_allocated_bytes"
                                         "{tag=\"prom-a\"} "), want);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_tag_allocations_total"
                                         "{tag=\"prom-a\"} "), 1);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_tag_frees_total"
                                         "{tag=\"prom-a\"} "), 0);
    free(prom);
    ra_free(p);
}
END_TEST

/* Every family has HELP then TYPE, then only its own samples, and appears
 * once. */
START_TEST(test_report_prometheus_families_are_whole_with_help_and_type)
{
    char *prom, *save = NULL, *line;
    char family[128] = "", seen[64][128];
    unsigned nseen = 0, nsamples = 0;
    bool expect_type = false;

    tu_tag_create("x");
    tu_tag_create("y");
    prom = report(RA_FORMAT_PROMETHEUS);
    for (line = strtok_r(prom, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# HELP ", 7) == 0) {
            ck_assert(!expect_type);
            ck_assert_uint_lt(nseen, 64);
            sscanf(line + 7, "%127s", family);
            for (unsigned i = 0; i < nseen; i++)
                ck_assert_msg(strcmp(seen[i], family) != 0,
                              "family %s twice", family);
            strcpy(seen[nseen++], family);
            expect_type = true;
        } else if (strncmp(line, "# TYPE ", 7) == 0) {
            char name[128], type[32];
            ck_assert(expect_type);
            ck_assert_int_eq(sscanf(line + 7, "%127s %31s", name, type), 2);
            ck_assert_str_eq(name, family);
            ck_assert_msg(strcmp(type, "gauge") == 0 ||
                              strcmp(type, "counter") == 0,
                          "type %s", type);
            ck_assert_int_eq(strcmp(type, "counter") == 0,
                             strlen(name) > 6 &&
                                 strcmp(name + strlen(name) - 6, "_total") ==
                                     0);
            expect_type = false;
        } else {
            size_t n = strlen(family);
            ck_assert(!expect_type);
            ck_assert_msg(strncmp(line, family, n) == 0 &&
                              (line[n] == '{' || line[n] == ' '),
                          "sample \"%s\" outside its family %s", line,
                          family);
            nsamples++;
        }
    }
    /* 16 tag families (the priority and the metadata among them) x 2
     * tags, 8 untagged, 10 process-wide (the library's own memory, what
     * destroys left live, the regions lost, the tags not counted by the
     * kernel yet and the age of the oldest count among them), the memory
     * limit's 4 (limit, level, given back, refusals), the process's parts
     * (one family of 5 series) and the kernel's 4 beside them (no cgroup:
     * make check points its root nowhere), and the tree's 4 (info and
     * three subtree totals) x 2 tags. */
    ck_assert_uint_eq(nseen, 16 + 8 + 10 + 4 + 5 + 4);
    ck_assert_uint_eq(nsamples, 16 * 2 + 8 + 10 + 4 + 5 + 4 + 4 * 2);
    free(prom);
}
END_TEST

/* A tag may be called "untagged": the untagged arenas have families of
 * their own, so neither hides the other. */
START_TEST(test_report_prometheus_untagged_is_its_own_family)
{
    ra_tag_t t = tu_tag_create("untagged");
    void *p;
    size_t want = alloc_under(t, 4096, &p);
    char *prom;

    ra_thread_flush();
    prom = report(RA_FORMAT_PROMETHEUS);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_tag_allocated_bytes"
                                         "{tag=\"untagged\"} "), want);
    ck_assert_ptr_nonnull(strstr(prom, "\nregionalloc_untagged_allocated_bytes "));
    ck_assert_ptr_nonnull(strstr(prom, "\nregionalloc_process_rss_bytes "));
    ck_assert_ptr_nonnull(strstr(prom, "\nregionalloc_jemalloc_mapped_bytes "));
    free(prom);
    ra_free(p);
}
END_TEST

START_TEST(test_report_counts_purges_per_tag)
{
    ra_tag_t a = tu_tag_create("purged"), b = tu_tag_create("kept");
    char *prom;

    ck_assert_int_eq(ra_tag_purge(a), 0);
    ck_assert_int_eq(ra_tag_purge(a), 0);
    ck_assert_int_eq(ra_tag_purge(RA_TAG_NONE), 0);
    ck_assert_int_eq(ra_purge_all(), 0);
    (void)b;
    prom = report(RA_FORMAT_PROMETHEUS);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_tag_purges_total"
                                         "{tag=\"purged\"} "), 3);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_tag_purges_total"
                                         "{tag=\"kept\"} "), 1);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_untagged_purges_total "),
                      2);
    free(prom);
}
END_TEST

/* jemalloc's epoch is not cheap (doc/design.md, jemalloc facts): a report
 * takes none, and one asked for detail takes one, whatever the number of
 * tags and formats' passes. */
START_TEST(test_report_refreshes_statistics_only_for_detail)
{
    static const ra_format_t formats[] = {RA_FORMAT_TEXT, RA_FORMAT_JSON,
                                          RA_FORMAT_PROMETHEUS};

    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        tu_tag_create(name);
    }
    /* The first read of a new arena's live page count takes a refresh. */
    free(report(RA_FORMAT_TEXT));
    for (size_t f = 0; f < 3; f++) {
        uint64_t before = tu_jemalloc_epoch();
        char *out = report(formats[f]);
        ck_assert_uint_eq(tu_jemalloc_epoch() - before, 0);
        free(out);
        before = tu_jemalloc_epoch();
        out = report((ra_format_t)(formats[f] | RA_REPORT_DETAIL));
        ck_assert_uint_eq(tu_jemalloc_epoch() - before, 1);
        free(out);
    }
}
END_TEST

/* The report's own memory (its snapshot, the stream's buffer) is not
 * charged to the tag the caller has pushed. */
/* "library" is what the library holds for itself: a thread that uses a
 * tag adds its state (one slot per tag possible, and the front cache of the
 * tag), which its exit gives back. */
static uint64_t library_allocated(void)
{
    char *json = report(RA_FORMAT_JSON);
    uint64_t v = number_after(json, "\"library\": {\"allocated\": ");

    free(json);
    return v;
}

static void *nothing(void *arg)
{
    return arg;
}

static void *use_a_tag(void *arg)
{
    ra_tag_t tag = *(ra_tag_t *)arg;
    uint64_t *during = (uint64_t *)arg + 1;

    ra_free(ra_malloc_tag(tag, 16));
    *during = library_allocated();
    return NULL;
}

START_TEST(test_report_library_memory_follows_thread_state)
{
    static uint64_t args[2];
    ra_tag_t tag = tu_tag_create("library");
    uint64_t before, after;
    pthread_t thread;

    memcpy(&args[0], &tag, sizeof tag);
    /* The record a thread's start takes is kept for the next one. */
    ck_assert_int_eq(pthread_create(&thread, NULL, nothing, NULL), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    before = library_allocated();
    ck_assert_int_eq(pthread_create(&thread, NULL, use_a_tag, args), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    after = library_allocated();
    /* The thread's state: at least a slot per possible tag (256 of 40
     * bytes and more) and its front cache bins. */
    ck_assert_uint_ge(args[1], before + 256 * 40);
    ck_assert_uint_eq(after, before);
}
END_TEST

/* A destroy that finds a few blocks live (at most 64 KiB, leftovers.c)
 * leaves them allocated, nobody's: they are in no row, so every format
 * shows them apart, until ra_purge_all frees them with their slot's
 * reset. */
START_TEST(test_report_shows_what_destroys_left_live)
{
    ra_tag_t tag = tu_tag_create("leaves");
    void *a, *b;
    size_t left = alloc_under(tag, 100, &a) + alloc_under(tag, 3000, &b);
    char *json, *prom, *text;
    uint64_t before;

    json = report(RA_FORMAT_JSON);
    before = number_after(json, "\"leftovers\": {\"allocated\": ");
    free(json);
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    json = report(RA_FORMAT_JSON);
    prom = report(RA_FORMAT_PROMETHEUS);
    text = report(RA_FORMAT_TEXT);
    ck_assert_uint_eq(number_after(json, "\"leftovers\": {\"allocated\": "),
                      before + left);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_leftover_bytes "),
                      before + left);
    ck_assert_ptr_nonnull(strstr(text, "left live by destroyed tags: "));
    free(json);
    free(prom);
    free(text);

    ck_assert_int_eq(ra_purge_all(), 0);
    json = report(RA_FORMAT_JSON);
    prom = report(RA_FORMAT_PROMETHEUS);
    text = report(RA_FORMAT_TEXT);
    ck_assert_uint_eq(number_after(json, "\"leftovers\": {\"allocated\": "),
                      0);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_leftover_bytes "), 0);
    ck_assert_ptr_null(strstr(text, "left live by destroyed tags"));
    free(json);
    free(prom);
    free(text);
}
END_TEST

/* The slot's next holder, which nobody used yet, frees them at its purge:
 * every format stops showing them. */
START_TEST(test_report_leftovers_go_with_a_purge_of_the_holder)
{
    ra_tag_t tag = tu_tag_create("leaves"), next;
    void *a;
    size_t left = alloc_under(tag, 100, &a);
    char *json, *text;
    uint64_t before;

    json = report(RA_FORMAT_JSON);
    before = number_after(json, "\"leftovers\": {\"allocated\": ");
    free(json);
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    next = tu_tag_create("next");
    ck_assert_uint_eq(next, tag);
    json = report(RA_FORMAT_JSON);
    ck_assert_uint_eq(number_after(json, "\"leftovers\": {\"allocated\": "),
                      before + left);
    free(json);
    ck_assert_int_eq(ra_tag_purge(next), 0);
    json = report(RA_FORMAT_JSON);
    text = report(RA_FORMAT_TEXT);
    ck_assert_uint_eq(number_after(json, "\"leftovers\": {\"allocated\": "),
                      before);
    if (before == 0)
        ck_assert_ptr_null(strstr(text, "left live by destroyed tags"));
    free(json);
    free(text);
    ck_assert_int_eq(ra_tag_destroy(next), 0);
}
END_TEST

START_TEST(test_report_own_memory_is_untagged)
{
    ra_tag_t t = tu_tag_create("pushed");
    ra_tag_stats_t before, after;
    FILE *f = tmpfile(); /* its buffer is allocated at the first write */
    int rc;

    ck_assert_ptr_nonnull(f);
    ra_thread_flush();
    before = tu_tag_stats(t);
    tu_tag_push(t);
    rc = ra_report(f, RA_FORMAT_TEXT) | ra_report(f, RA_FORMAT_JSON) |
         ra_report(f, RA_FORMAT_PROMETHEUS);
    tu_tag_pop(t);
    ck_assert_int_eq(rc, 0);
    ra_thread_flush();
    after = tu_tag_stats(t);
    ck_assert_uint_eq(after.allocated, before.allocated);
    ck_assert_uint_eq(after.nmalloc, before.nmalloc);
    fclose(f);
}
END_TEST

/* -- escaping --------------------------------------------------------------------- */

START_TEST(test_report_escapes_names_in_text)
{
    char *text;

    tu_tag_create(TU_NASTY);
    text = report(RA_FORMAT_TEXT);
    ck_assert_msg(strstr(text, "\n" TU_NASTY_TEXT "  ") != NULL, "%s", text);
    free(text);
}
END_TEST

START_TEST(test_report_escapes_names_in_json)
{
    char *json;

    tu_tag_create(TU_NASTY);
    json = report(RA_FORMAT_JSON);
    ck_assert_msg(strstr(json, "\"name\": \"" TU_NASTY_JSON "\", ") != NULL,
                  "%s", json);
    free(json);
}
END_TEST

/* Every per-tag family writes the same escaped label, a signed value
 * (a priority under 0) with its sign. */
START_TEST(test_report_escapes_names_in_prometheus)
{
    static const char *const lines[] = {
        "\nregionalloc_tag_allocated_bytes{tag=\"" TU_NASTY_PROMETHEUS
        "\"} 0\n",
        "\nregionalloc_tag_priority{tag=\"" TU_NASTY_PROMETHEUS "\"} -3\n",
        "\nregionalloc_tag_info{tag=\"" TU_NASTY_PROMETHEUS
        "\",parent=\"\"} 1\n",
        "\nregionalloc_tree_allocated_bytes{tag=\"" TU_NASTY_PROMETHEUS
        "\"} 0\n"};
    char *prom;

    ck_assert_int_eq(ra_tag_set_priority(tu_tag_create(TU_NASTY), -3), 0);
    prom = report(RA_FORMAT_PROMETHEUS);
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        ck_assert_msg(strstr(prom, lines[i]) != NULL, "no %s in %s",
                      lines[i] + 1, prom);
    free(prom);
}
END_TEST

/* The longest name, every byte escaped with the longest escape (JSON's
 * \u00NN), is written whole. */
START_TEST(test_report_escapes_longest_name_whole)
{
    char name[RA_TAG_NAME_MAX + 1], want[6 * RA_TAG_NAME_MAX + 16];
    char *json, *prom;
    size_t n = 0;

    memset(name, 0xff, RA_TAG_NAME_MAX);
    name[RA_TAG_NAME_MAX] = '\0';
    tu_tag_create(name);
    json = report(RA_FORMAT_JSON);
    n = (size_t)snprintf(want, sizeof want, "\"name\": \"");
    for (int i = 0; i < RA_TAG_NAME_MAX; i++)
        n += (size_t)snprintf(want + n, sizeof want - n, "\\u00ff");
    snprintf(want + n, sizeof want - n, "\", ");
    ck_assert_msg(strstr(json, want) != NULL, "%s", json);
    prom = report(RA_FORMAT_PROMETHEUS);
    n = (size_t)snprintf(want, sizeof want, "{tag=\"");
    for (int i = 0; i < RA_TAG_NAME_MAX; i++)
        n += (size_t)snprintf(want + n, sizeof want - n, "\\\\xff");
    snprintf(want + n, sizeof want - n, "\"} ");
    ck_assert_msg(strstr(prom, want) != NULL, "%s", prom);
    free(json);
    free(prom);
}
END_TEST

/* The text's process lines say when the untagged part is jemalloc's
 * estimate: a build without the override does not see jemalloc's
 * mappings. */
START_TEST(test_report_text_says_when_untagged_is_an_estimate)
{
    char *text = report(RA_FORMAT_TEXT), *json = report(RA_FORMAT_JSON);
    bool measured = strstr(json, "\"jemalloc_measured\": true") != NULL;

#ifdef RA_OVERRIDE
    ck_assert(measured);
#else
    ck_assert(!measured);
#endif
    ck_assert_ptr_nonnull(strstr(text, "\nprocess: rss_anon "));
    ck_assert_msg((strstr(text, "jemalloc's mappings not seen") != NULL) ==
                      !measured,
                  "%s", text);
    free(text);
    free(json);
}
END_TEST

/* -- JSON: tags told apart by id and bytes ---------------------------------------- */

/* The line of doc's tag object named name (as JSON writes it), which must
 * be tag id's; a string to free(). */
static char *tag_line(const char *doc, const char *name, ra_tag_t id)
{
    char *line = tu_json_tag_line(doc, name), want[32];

    snprintf(want, sizeof want, "{\"id\": %u, ", id);
    ck_assert_msg(strncmp(strchr(line, '{'), want, strlen(want)) == 0,
                  "not id %u: %s", id, line);
    return line;
}

/* A name that is not UTF-8 and the UTF-8 name that JSON reads it as, the
 * first with a child: the tags of doc (a report or the checkpoints) hold
 * in JSON the same string "\u00ff\u00fe-bin", so the one that is not UTF-8
 * carries its bytes (name_hex) and the child names its parent by id. */
static void check_binary_names(const char *doc, ra_tag_t bin, ra_tag_t part,
                               ra_tag_t twin)
{
    static const char top[] = "\"parent\": null, \"parent_id\": null";
    char want[128], *line;

    line = tag_line(doc, "\\u00ff\\u00fe-bin", bin);
    ck_assert_msg(strstr(line, "\"name\": \"\\u00ff\\u00fe-bin\", "
                               "\"name_hex\": \"fffe2d62696e\", ") != NULL &&
                      strstr(line, top) != NULL,
                  "%s", line);
    free(line);
    line = tag_line(doc, "bin-part", part);
    snprintf(want, sizeof want,
             "\"parent\": \"\\u00ff\\u00fe-bin\", \"parent_id\": %u", bin);
    ck_assert_msg(strstr(line, want) != NULL, "no %s in %s", want, line);
    free(line);
    /* Valid UTF-8 needs no bytes beside it. */
    line = tag_line(doc, "\xc3\xbf\xc3\xbe-bin", twin);
    ck_assert_msg(strstr(line, top) != NULL, "%s", line);
    free(line);
    ck_assert_msg(tu_count_of(doc, "\"name_hex\"") == 1, "%s", doc);
}

/* The tags check_binary_names looks for: the name that is not UTF-8, its
 * child, the UTF-8 name that JSON reads the first one's as. */
static void make_binary_names(ra_tag_t tags[3])
{
    tags[0] = tu_tag_create("\xff\xfe-bin");
    tags[1] = ra_tag_create_in(tags[0], "bin-part");
    ck_assert_uint_ne(tags[1], RA_TAG_NONE);
    tags[2] = tu_tag_create("\xc3\xbf\xc3\xbe-bin");
}

START_TEST(test_report_json_tells_tags_apart_by_id_and_bytes)
{
    ra_tag_t t[3];
    char *json;

    make_binary_names(t);
    json = report(RA_FORMAT_JSON);
    check_binary_names(json, t[0], t[1], t[2]);
    free(json);
}
END_TEST

/* A recycled id is another tag: the usage report says so by its creation
 * count. */
START_TEST(test_report_json_tells_a_recycled_id_by_its_birth)
{
    ra_tag_t first = tu_tag_create("first"), next;
    char *json, *line;

    ck_assert_int_eq(ra_tag_destroy(first), 0);
    next = tu_tag_create("next");
    ck_assert_uint_eq(next, first);
    json = report(RA_FORMAT_JSON);
    line = tu_json_tag_line(json, "next");
    ck_assert_ptr_nonnull(line);
    ck_assert_msg(strstr(line, "\"born\": 2, ") != NULL, "%s", line);
    free(line);
    free(json);
}
END_TEST

/* The checkpoints' tags too, with their creation counts; and a label that
 * is not UTF-8 carries its bytes. */
START_TEST(test_report_checkpoint_json_tells_tags_apart_by_id_and_bytes)
{
    ra_tag_t t[3];
    char *json;

    make_binary_names(t);
    ck_assert_int_eq(ra_checkpoint("caf\xe9"), 0);
    json = tu_report_string(ra_checkpoint_report, RA_FORMAT_JSON);
    check_binary_names(json, t[0], t[1], t[2]);
    ck_assert_msg(tu_count_of(json, "\"born\": ") == 3, "%s", json);
    ck_assert_msg(strstr(json, "\"label\": \"caf\\u00e9\", "
                               "\"label_hex\": \"636166e9\", ") != NULL,
                  "%s", json);
    free(json);
}
END_TEST

/* -- errors ------------------------------------------------------------------------ */

START_TEST(test_report_null_file_is_einval)
{
    errno = 0;
    ck_assert_int_eq(ra_report(NULL, RA_FORMAT_TEXT), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_report_bad_format_is_einval)
{
    FILE *f = tmpfile();

    ck_assert_ptr_nonnull(f);
    errno = 0;
    ck_assert_int_eq(ra_report(f, (ra_format_t)3), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_report(f, (ra_format_t)-1), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_int_eq(ftell(f), 0);
    fclose(f);
}
END_TEST

START_TEST(test_report_read_only_file_is_eio)
{
    static const ra_format_t formats[] = {RA_FORMAT_TEXT, RA_FORMAT_JSON,
                                          RA_FORMAT_PROMETHEUS};
    FILE *f = fopen("/dev/null", "r");

    ck_assert_ptr_nonnull(f);
    tu_tag_create("t");
    for (size_t i = 0; i < 3; i++) {
        errno = 0;
        ck_assert_int_eq(ra_report(f, formats[i]), -1);
        ck_assert_int_eq(errno, EIO);
    }
    fclose(f);
}
END_TEST

static int child_report_in_pass_through(void)
{
    FILE *f = tmpfile();

    TU_REQUIRE(f != NULL);
    TU_REQUIRE(ra_enabled() == 0);
    errno = 0;
    TU_REQUIRE(ra_report(f, RA_FORMAT_TEXT) == -1 && errno == ENOTSUP);
    errno = 0;
    TU_REQUIRE(ra_report(f, RA_FORMAT_JSON) == -1 && errno == ENOTSUP);
    /* The arguments are checked first. */
    errno = 0;
    TU_REQUIRE(ra_report(NULL, RA_FORMAT_TEXT) == -1 && errno == EINVAL);
    TU_REQUIRE(ftell(f) == 0);
    fclose(f);
    return 0;
}

START_TEST(test_report_in_pass_through_mode_is_enotsup)
{
    static const char *const env[] = {"REGIONALLOC=0", NULL};
    int status = tu_run_with_env(env, child_report_in_pass_through, err,
                                 sizeof err);

    ck_assert_msg(status == 0, "child exited with %d; stderr: %s", status,
                  err);
}
END_TEST

/* -- at exit ---------------------------------------------------------------------- */

/* Creates a tag holding one block of 1000 bytes (usable 1024) and leaves
 * through exit(0). */
static int child_exit_with_a_block(void)
{
    ra_tag_t t = ra_tag_create("reported-tag");

    TU_REQUIRE(t == 1);
    TU_REQUIRE(ra_malloc_tag(t, 1000) != NULL);
    exit(0);
}

/* Creates MANY tags as make_many does and leaves through exit(0). */
static int child_exit_with_many_tags(void)
{
    for (unsigned i = 0; i < MANY; i++) {
        char name[16];
        ra_tag_t t;
        snprintf(name, sizeof name, "many-%02u", i);
        void *p;
        TU_REQUIRE((t = ra_tag_create(name)) != RA_TAG_NONE);
        /* Written: what is resident ranks the tags, and a block only
         * allocated is not. */
        TU_REQUIRE((p = ra_malloc_tag(t, (i + 1) * 16 * KIB)) != NULL);
        memset(p, 1, (i + 1) * 16 * KIB);
    }
    exit(0);
}

/* Runs the child named child under the environment entries of vars (plus
 * REGIONALLOC_STATS=<a temporary file>) and returns the file's contents
 * (free() it). */
static char *exit_report_of(const char *child, const char *const vars[])
{
    char path[4096], setting[4200];
    const char *dir = getenv("TMPDIR");
    const char *env[8];
    size_t n = 0, len = 0;
    char *buf = NULL;
    FILE *f;
    int fd, status;

    snprintf(path, sizeof path, "%s/check_report.XXXXXX",
             dir != NULL && dir[0] != '\0' ? dir : "/tmp");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    snprintf(setting, sizeof setting, "REGIONALLOC_STATS=%s", path);
    env[n++] = setting;
    for (size_t i = 0; vars[i] != NULL && n + 1 < 8; i++)
        env[n++] = vars[i];
    env[n] = NULL;
    status = tu_exec_self(env, child, err, sizeof err);
    ck_assert_msg(status == 0, "child exited with %d; stderr: %s", status,
                  err);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(getdelim(&buf, &len, '\0', f) > 0, 1);
    fclose(f);
    unlink(path);
    return buf;
}

static char *exit_report_file(const char *const vars[])
{
    return exit_report_of("exit_with_a_block", vars);
}

/* The report at exit lists tags as ra_report does: the 50 largest in
 * text, every one in JSON. */
START_TEST(test_report_at_exit_lists_as_ra_report_does)
{
    static const char *const text[] = {NULL};
    static const char *const json[] = {"REGIONALLOC_STATS_FORMAT=json", NULL};
    char *out = exit_report_of("exit_with_many_tags", text);

    ck_assert_msg(tu_count_of(out, "\nmany-") == 50, "%u tags listed, want 50",
                  tu_count_of(out, "\nmany-"));
    ck_assert_msg(strstr(out, "\nmany-09 ") == NULL, "many-09 listed");
    ck_assert_msg(strstr(out, "\n(10 more tags) ") != NULL,
                  "no line \"(10 more tags)\" in\n%.3000s", out);
    free(out);
    out = exit_report_of("exit_with_many_tags", json);
    ck_assert_uint_eq(tu_count_of(out, "\"name\": \"many-"), MANY);
    ck_assert_ptr_nonnull(strstr(out, "\"top\": null,"));
    free(out);
}
END_TEST

START_TEST(test_report_at_exit_default_format_is_text)
{
    static const char *const vars[] = {NULL};
    char *out = exit_report_file(vars);

    ck_assert_msg(strncmp(out, "tag ", 4) == 0, "%s", out);
    ck_assert_msg(strstr(out, "\nreported-tag  ") != NULL, "%s", out);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
    free(out);
}
END_TEST

START_TEST(test_report_at_exit_in_json)
{
    static const char *const vars[] = {"REGIONALLOC_STATS_FORMAT=json", NULL};
    char *out = exit_report_file(vars);

    ck_assert_msg(strncmp(out, "{\n  \"schema\": \"regionalloc-report-1\"",
                          36) == 0,
                  "%s", out);
    /* The exiting thread's cache was flushed: allocated is exact. */
    ck_assert_uint_eq(number_after(out, "\"name\": \"reported-tag\", "
                                        "\"allocated\": "),
                      1024);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
    free(out);
}
END_TEST

START_TEST(test_report_at_exit_in_prometheus)
{
    static const char *const vars[] = {
        "REGIONALLOC_STATS_FORMAT=prometheus", NULL};
    char *out = exit_report_file(vars);

    ck_assert_msg(strncmp(out, "# HELP ", 7) == 0, "%s", out);
    ck_assert_uint_eq(number_after(out, "\nregionalloc_tag_allocated_bytes"
                                        "{tag=\"reported-tag\"} "),
                      1024);
    free(out);
}
END_TEST

START_TEST(test_report_at_exit_in_json_to_stderr)
{
    static const char *const env[] = {"REGIONALLOC_STATS=stderr",
                                      "REGIONALLOC_STATS_FORMAT=json", NULL};

    ck_assert_int_eq(tu_exec_self(env, "exit_with_a_block", err, sizeof err),
                     0);
    ck_assert_msg(strncmp(err, "{\n", 2) == 0, "stderr: %s", err);
    ck_assert_msg(strstr(err, "\"name\": \"reported-tag\"") != NULL,
                  "stderr: %s", err);
}
END_TEST

START_TEST(test_report_at_exit_in_pass_through_mode_per_format)
{
    static const char *const text[] = {"REGIONALLOC=0", NULL};
    static const char *const json[] = {"REGIONALLOC=0",
                                       "REGIONALLOC_STATS_FORMAT=json", NULL};
    static const char *const prom[] = {
        "REGIONALLOC=0", "REGIONALLOC_STATS_FORMAT=prometheus", NULL};
    char *out;

    out = exit_report_file(text);
    ck_assert_str_eq(out, "regionalloc: pass-through mode, no per-tag "
                          "statistics\n");
    free(out);
    out = exit_report_file(json);
    ck_assert_str_eq(out, "{\"schema\": \"regionalloc-report-1\", "
                          "\"enabled\": false}\n");
    free(out);
    out = exit_report_file(prom);
    ck_assert_str_eq(out, "# regionalloc: pass-through mode, no per-tag "
                          "statistics\n");
    free(out);
}
END_TEST

START_TEST(test_report_at_exit_bad_format_warns_and_writes_text)
{
    static const char *const vars[] = {"REGIONALLOC_STATS_FORMAT=yaml", NULL};
    char *out = exit_report_file(vars);

    ck_assert_msg(strncmp(out, "tag ", 4) == 0, "%s", out);
    ck_assert_msg(tu_count_lines(err) == 1, "want one line, got: %s", err);
    ck_assert_msg(strstr(err, "REGIONALLOC_STATS_FORMAT=") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "default text") != NULL, "%s", err);
    free(out);
}
END_TEST


/* An unmodified program that forks before it makes any call of the
 * library (malloc aside): the child outlives the parent (it waits for the
 * parent's end of a pipe to close), then exits through exit(). The parent
 * creates tag "parent", allocates under it and exits. */
static int child_fork_before_first_use(void)
{
    int fds[2];
    pid_t pid;
    void *p;
    ra_tag_t tag;

    TU_REQUIRE(pipe(fds) == 0);
    pid = fork();
    TU_REQUIRE(pid >= 0);
    if (pid == 0) {
        char c;
        close(fds[1]);
        while (read(fds[0], &c, 1) > 0)
            ;
        free(malloc(100));
        exit(0);
    }
    close(fds[0]);
    tag = ra_tag_create("parent");
    TU_REQUIRE(tag != RA_TAG_NONE);
    TU_REQUIRE(ra_tag_push(tag) == 0);
    p = ra_malloc(1000);
    TU_REQUIRE(p != NULL);
    TU_REQUIRE(ra_tag_pop(tag) == 0);
    exit(0);
}

/* Leaves through exit(0) with tag "held" still pushed, holding ten blocks
 * of 128 bytes (a size class: usable 128). */
static int child_exit_with_the_tag_pushed(void)
{
    ra_tag_t tag = ra_tag_create("held");

    TU_REQUIRE(tag != RA_TAG_NONE);
    TU_REQUIRE(ra_tag_push(tag) == 0);
    for (int i = 0; i < 10; i++)
        TU_REQUIRE(ra_malloc(128) != NULL);
    exit(0);
}

#define PEAK_BYTES (64 * MIB)

/* Touches PEAK_BYTES, gives them back to the OS, and exits. (ra_malloc:
 * the compiler may drop a malloc, memset and free of plain malloc.) */
static int child_peak_then_exit(void)
{
    char *p = ra_malloc(PEAK_BYTES);

    TU_REQUIRE(p != NULL);
    memset(p, 1, PEAK_BYTES);
    TU_REQUIRE(ra_malloc_usable_size(p) >= PEAK_BYTES && p[PEAK_BYTES / 2]);
    ra_free(p);
    TU_REQUIRE(ra_purge_all() == 0);
    exit(0);
}

/* A fresh temporary directory (removed by remove_dir). */
static void make_dir(char *path, size_t len)
{
    const char *dir = getenv("TMPDIR");

    snprintf(path, len, "%s/check_report.XXXXXX",
             dir != NULL && dir[0] != '\0' ? dir : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(path));
}

static void remove_dir(const char *path)
{
    char cmd[4200];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    ck_assert_int_eq(system(cmd), 0);
}

/* -- "processes" ------------------------------------------------------------------
 * The exit reports come from the process that started the program (or
 * exec'd); a forked child reports only when the path has %p, so that its
 * report lands in a file of its own. */

START_TEST(test_report_forked_child_does_not_report_to_stderr)
{
    static const char *const env[] = {
        "REGIONALLOC_STATS=stderr", "REGIONALLOC_CHECKPOINTS=stderr",
        "REGIONALLOC_STATS_FORMAT=json", NULL};
    int status = tu_exec_self(env, "fork_before_first_use", err, sizeof err);

    ck_assert_msg(status == 0, "exit %d; stderr: %s", status, err);
    ck_assert_uint_eq(tu_count_of(err, "\"schema\": \"regionalloc-report-1\""),
                      1);
    ck_assert_uint_eq(
        tu_count_of(err, "\"schema\": \"regionalloc-checkpoints-1\""), 1);
    ck_assert_msg(strstr(err, "\"name\": \"parent\"") != NULL, "%s", err);
}
END_TEST

START_TEST(test_report_forked_child_does_not_overwrite_the_files)
{
    char dir[4096], stats[4200], checkpoints[4200], prof[4200];
    char env_stats[4300], env_checkpoints[4300], env_prof[4300];
    const char *env[] = {env_stats, env_checkpoints, env_prof,
                         "REGIONALLOC_PROF=1",
                         "REGIONALLOC_STATS_FORMAT=json", NULL};
    char *out;
    int status;

    make_dir(dir, sizeof dir);
    snprintf(stats, sizeof stats, "%s/stats.json", dir);
    snprintf(checkpoints, sizeof checkpoints, "%s/checkpoints.json", dir);
    snprintf(prof, sizeof prof, "%s/profile.folded", dir);
    snprintf(env_stats, sizeof env_stats, "REGIONALLOC_STATS=%s", stats);
    snprintf(env_checkpoints, sizeof env_checkpoints,
             "REGIONALLOC_CHECKPOINTS=%s", checkpoints);
    snprintf(env_prof, sizeof env_prof, "REGIONALLOC_PROF_DUMP=%s", prof);
    status = tu_exec_self(env, "fork_before_first_use", err, sizeof err);
    ck_assert_msg(status == 0, "exit %d; stderr: %s", status, err);
    out = tu_read_file(stats);
    ck_assert_msg(strstr(out, "\"name\": \"parent\"") != NULL, "%s", out);
    free(out);
    out = tu_read_file(checkpoints);
    ck_assert_msg(strstr(out, "\"parent\"") != NULL, "%s", out);
    free(out);
    out = tu_read_file(prof);
    ck_assert_msg(strstr(out, "tag:parent;") != NULL, "%s", out);
    free(out);
    remove_dir(dir);
}
END_TEST

/* The pid of the nth file (in name order) called "<prefix><pid>" in dir,
 * or 0 when there is none. */
static unsigned long pid_of_file(const char *dir, const char *prefix,
                                 unsigned nth)
{
    char cmd[4400], line[256];
    unsigned long pid = 0;
    FILE *ls;

    snprintf(cmd, sizeof cmd, "ls '%s' | grep -F '%s' | sort", dir, prefix);
    ls = popen(cmd, "r");
    ck_assert_ptr_nonnull(ls);
    for (unsigned i = 0; fgets(line, sizeof line, ls) != NULL; i++)
        if (i == nth)
            pid = strtoul(line + strlen(prefix), NULL, 10);
    pclose(ls);
    return pid;
}

START_TEST(test_report_pid_in_the_path_gives_each_process_its_file)
{
    char dir[4096], env_stats[4300], env_checkpoints[4300], path[4400];
    const char *env[] = {env_stats, env_checkpoints,
                         "REGIONALLOC_STATS_FORMAT=json", NULL};
    unsigned with_parent = 0;
    int status;

    make_dir(dir, sizeof dir);
    snprintf(env_stats, sizeof env_stats, "REGIONALLOC_STATS=%s/stats.%%p",
             dir);
    snprintf(env_checkpoints, sizeof env_checkpoints,
             "REGIONALLOC_CHECKPOINTS=%s/cp.%%%%.%%p", dir);
    status = tu_exec_self(env, "fork_before_first_use", err, sizeof err);
    ck_assert_msg(status == 0, "exit %d; stderr: %s", status, err);
    for (unsigned i = 0; i < 2; i++) {
        unsigned long pid = pid_of_file(dir, "stats.", i);
        char *out;
        ck_assert_msg(pid != 0, "stats file %u missing", i);
        snprintf(path, sizeof path, "%s/stats.%lu", dir, pid);
        out = tu_read_file(path);
        ck_assert_uint_eq(
            tu_count_of(out, "\"schema\": \"regionalloc-report-1\""), 1);
        with_parent += strstr(out, "\"name\": \"parent\"") != NULL;
        free(out);
        pid = pid_of_file(dir, "cp.%.", i);
        ck_assert_msg(pid != 0, "checkpoint file %u missing", i);
    }
    ck_assert_uint_eq(pid_of_file(dir, "stats.", 2), 0);
    /* The child forked before the parent created its tag. */
    ck_assert_uint_eq(with_parent, 1);
    remove_dir(dir);
}
END_TEST

/* -- "exit report's own memory" ---------------------------------------------- */

START_TEST(test_report_exit_stream_is_not_charged_to_the_pushed_tag)
{
    char dir[4096], path[4200], setting[4300];
    const char *env[] = {setting, "REGIONALLOC_STATS_FORMAT=json", NULL};
    char *out;
    int status;

    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/stats.json", dir);
    snprintf(setting, sizeof setting, "REGIONALLOC_STATS=%s", path);
    status = tu_exec_self(env, "exit_with_the_tag_pushed", err, sizeof err);
    ck_assert_msg(status == 0, "exit %d; stderr: %s", status, err);
    out = tu_read_file(path);
    ck_assert_uint_eq(
        number_after(out, "\"name\": \"held\", \"allocated\": "), 1280);
    ck_assert_uint_eq(number_after(out, "\"nmalloc\": "), 10);
    free(out);
    remove_dir(dir);
}
END_TEST

/* The last ("exit") checkpoint does not reset the kernel's peak RSS, which
 * the parent's wait4 (time -v) reads. */
START_TEST(test_report_exit_checkpoint_keeps_the_peak_rss)
{
    static const char *const env[] = {"REGIONALLOC_CHECKPOINTS=/dev/null",
                                      NULL};
    struct rusage usage;
    int status = tu_exec_self(env, "peak_then_exit", err, sizeof err);

    ck_assert_msg(status == 0, "exit %d; stderr: %s", status, err);
    ck_assert_int_eq(getrusage(RUSAGE_CHILDREN, &usage), 0);
    ck_assert_msg((size_t)usage.ru_maxrss * KIB >= PEAK_BYTES,
                  "peak RSS %ld KiB, below the %zu MiB touched",
                  usage.ru_maxrss, PEAK_BYTES / MIB);
}
END_TEST

static Suite *report_suite(void)
{
    Suite *s = suite_create("report");
    TCase *tc;

    tc = tcase_create("text table");
    tcase_add_test(tc, test_report_text_has_a_row_per_tag_then_untagged_and_total);
    tcase_add_test(tc, test_report_text_lines_are_aligned);
    tcase_add_test(tc, test_report_text_uses_human_units);
    suite_add_tcase(s, tc);

    tc = tcase_create("many tags");
    tcase_add_test(tc, test_report_text_lists_the_50_largest_and_one_line_for_the_rest);
    tcase_add_test(tc, test_report_json_lists_every_tag_unless_told);
    tcase_add_test(tc, test_report_prometheus_rest_series_keeps_each_family_whole);
    tcase_add_test(tc, test_report_tag_named_rest_is_rolled_up);
    tcase_add_test(tc, test_report_top_checks_its_arguments);
    suite_add_tcase(s, tc);

    tc = tcase_create("figures");
    tcase_add_test(tc, test_report_json_shows_exact_allocated_after_flush);
    tcase_add_test(tc,
                   test_report_prometheus_shows_exact_allocated_after_flush);
    tcase_add_test(tc,
                   test_report_prometheus_families_are_whole_with_help_and_type);
    tcase_add_test(tc, test_report_prometheus_untagged_is_its_own_family);
    tcase_add_test(tc, test_report_text_says_when_untagged_is_an_estimate);
    tcase_add_test(tc, test_report_counts_purges_per_tag);
    tcase_add_test(tc, test_report_refreshes_statistics_only_for_detail);
    tcase_add_test(tc, test_report_own_memory_is_untagged);
    tcase_add_test(tc, test_report_library_memory_follows_thread_state);
    tcase_add_test(tc, test_report_shows_what_destroys_left_live);
    tcase_add_test(tc, test_report_leftovers_go_with_a_purge_of_the_holder);
    suite_add_tcase(s, tc);

    tc = tcase_create("escaping");
    tcase_add_test(tc, test_report_escapes_names_in_text);
    tcase_add_test(tc, test_report_escapes_names_in_json);
    tcase_add_test(tc, test_report_escapes_names_in_prometheus);
    tcase_add_test(tc, test_report_escapes_longest_name_whole);
    suite_add_tcase(s, tc);

    tc = tcase_create("tags told apart");
    tcase_add_test(tc, test_report_json_tells_tags_apart_by_id_and_bytes);
    tcase_add_test(tc, test_report_json_tells_a_recycled_id_by_its_birth);
    tcase_add_test(tc,
                   test_report_checkpoint_json_tells_tags_apart_by_id_and_bytes);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_report_null_file_is_einval);
    tcase_add_test(tc, test_report_bad_format_is_einval);
    tcase_add_test(tc, test_report_read_only_file_is_eio);
    tcase_add_test(tc, test_report_in_pass_through_mode_is_enotsup);
    suite_add_tcase(s, tc);

    tc = tcase_create("at exit");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_report_at_exit_default_format_is_text);
    tcase_add_test(tc, test_report_at_exit_in_json);
    tcase_add_test(tc, test_report_at_exit_in_prometheus);
    tcase_add_test(tc, test_report_at_exit_in_json_to_stderr);
    tcase_add_test(tc, test_report_at_exit_in_pass_through_mode_per_format);
    tcase_add_test(tc, test_report_at_exit_bad_format_warns_and_writes_text);
    tcase_add_test(tc, test_report_at_exit_lists_as_ra_report_does);
    tcase_add_test(tc, test_report_exit_stream_is_not_charged_to_the_pushed_tag);
    tcase_add_test(tc, test_report_exit_checkpoint_keeps_the_peak_rss);
    suite_add_tcase(s, tc);

    tc = tcase_create("processes");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_report_forked_child_does_not_report_to_stderr);
    tcase_add_test(tc, test_report_forked_child_does_not_overwrite_the_files);
    tcase_add_test(tc, test_report_pid_in_the_path_gives_each_process_its_file);
    suite_add_tcase(s, tc);

    return s;
}

int main(int argc, char **argv)
{
    static const struct tu_child children[] = {
        {"exit_with_a_block", child_exit_with_a_block},
        {"exit_with_many_tags", child_exit_with_many_tags},
        {"fork_before_first_use", child_fork_before_first_use},
        {"exit_with_the_tag_pushed", child_exit_with_the_tag_pushed},
        {"peak_then_exit", child_peak_then_exit},
        {NULL, NULL},
    };

    tu_child_main(argc, argv, children);
    return tu_run_suite(report_suite());
}

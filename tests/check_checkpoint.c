/* Suite "checkpoint": ra_checkpoint and ra_checkpoint_report against ground
 * truth (bytes allocated in a phase, time, peak RSS), the ring of 1024, the
 * phase table's columns, labels, errors, threads and fork, and the report
 * printed at exit (REGIONALLOC_CHECKPOINTS). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include "regionalloc.h"
#include "testutil.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define NS_PER_MS 1000000u

static char err[16384];

static char *checkpoints(ra_format_t fmt)
{
    return tu_report_string(ra_checkpoint_report, fmt);
}

static void checkpoint(const char *label)
{
    ck_assert_msg(ra_checkpoint(label) == 0, "ra_checkpoint(\"%s\"): errno %d",
                  label != NULL ? label : "(null)", errno);
}

/* The value after the first occurrence of context at or after doc, which
 * must be there, as an unsigned number. */
static uint64_t number_after(const char *doc, const char *context)
{
    const char *p = strstr(doc, context);

    ck_assert_msg(p != NULL, "\"%s\" not found in:\n%s", context, doc);
    return strtoull(p + strlen(context), NULL, 10);
}

/* The line of the JSON document json that holds checkpoint seq. */
static const char *json_checkpoint(const char *json, uint64_t seq)
{
    char key[64];
    const char *p;

    snprintf(key, sizeof key, "    {\"seq\": %llu, ", (unsigned long long)seq);
    p = strstr(json, key);
    ck_assert_msg(p != NULL, "no checkpoint %llu in:\n%s",
                  (unsigned long long)seq, json);
    return p;
}

/* Element i of the "tag_allocated" array of the checkpoint line cp. */
static uint64_t tag_allocated(const char *cp, unsigned i)
{
    const char *p = strstr(cp, "\"tag_allocated\": [");
    char *end;

    ck_assert_ptr_nonnull(p);
    p += strlen("\"tag_allocated\": [");
    for (unsigned k = 0; k < i; k++) {
        p = strchr(p, ',');
        ck_assert_msg(p != NULL && p < strchr(cp, '\n'), "no element %u", i);
        p++;
    }
    return strtoull(p, &end, 10);
}

/* Number of elements of the "tag_allocated" array of the line cp. */
static unsigned tag_count(const char *cp)
{
    const char *p = strstr(cp, "\"tag_allocated\": [");
    unsigned n = 0;

    ck_assert_ptr_nonnull(p);
    p += strlen("\"tag_allocated\": [");
    if (*p == ']')
        return 0;
    for (n = 1; *p != ']'; p++)
        n += *p == ',';
    return n;
}

/* Lines of a text report, without the two of the footnote that follows the
 * table where the kernel refuses to reset the peak RSS. */
static unsigned table_lines(const char *text)
{
    unsigned n = tu_count_lines(text);

    return strstr(text, "\n* peak_rss: ") != NULL ? n - 2 : n;
}

/* Line n (0-based) of text, as a pointer into it. */
static const char *nth_line(const char *text, unsigned n)
{
    const char *p = text;

    for (unsigned i = 0; i < n; i++) {
        p = strchr(p, '\n');
        ck_assert_msg(p != NULL, "no line %u in:\n%s", n, text);
        p++;
    }
    return p;
}

/* Whether the line at row (up to '\n') ends with two blanks and label. */
static bool row_ends_with(const char *row, const char *label)
{
    size_t len = strcspn(row, "\n"), n = strlen(label);

    return len >= n + 2 && strncmp(row + len - n - 2, "  ", 2) == 0 &&
           strncmp(row + len - n, label, n) == 0;
}

/* Allocates n blocks of size bytes under tag into blocks; returns the
 * usable bytes. Makes no assertion between allocations. */
static size_t alloc_blocks(ra_tag_t tag, void **blocks, size_t n, size_t size)
{
    size_t bytes = 0, failed = 0;

    for (size_t i = 0; i < n; i++) {
        blocks[i] = ra_malloc_tag(tag, size);
        if (blocks[i] == NULL) {
            failed++;
            continue;
        }
        memset(blocks[i], 0x33, size);
        bytes += ra_malloc_usable_size(blocks[i]);
    }
    ck_assert_uint_eq(failed, 0);
    return bytes;
}

static void free_blocks(void **blocks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ra_free(blocks[i]);
}

/* -- ground truth ------------------------------------------------------------ */

/* A phase that allocates a known number of bytes under a tag shows exactly
 * them once the thread's cache is flushed; freeing them shows 0. */
START_TEST(test_checkpoint_rows_match_allocations_exactly)
{
    static const size_t sizes[] = {24, 4000, 70000, MIB + 1};
    ra_tag_t t = tu_tag_create("phase"), u = tu_tag_create("bystander");
    void *blocks[64], *other;
    size_t want = 0, other_want;
    char *json, *prom, key[160];
    const char *cp;

    ra_thread_flush();
    checkpoint("empty");
    for (size_t i = 0; i < 64; i++)
        want += alloc_blocks(t, &blocks[i], 1, sizes[i % 4]);
    other_want = alloc_blocks(u, &other, 1, 12345);
    ra_thread_flush();
    checkpoint("allocated");
    free_blocks(blocks, 64);
    ra_thread_flush();
    checkpoint("freed");

    json = checkpoints(RA_FORMAT_JSON);
    cp = json_checkpoint(json, 1);
    ck_assert_uint_eq(tag_count(cp), 2);
    ck_assert_uint_eq(tag_allocated(cp, 0), 0);
    ck_assert_uint_eq(tag_allocated(cp, 1), 0);
    ck_assert_uint_eq(number_after(cp, "\"tagged_allocated\": "), 0);
    cp = json_checkpoint(json, 2);
    ck_assert_uint_eq(tag_allocated(cp, 0), want);
    ck_assert_uint_eq(tag_allocated(cp, 1), other_want);
    ck_assert_uint_eq(number_after(cp, "\"tagged_allocated\": "),
                      want + other_want);
    ck_assert_uint_ge(number_after(cp, "\"allocated\": "), want + other_want);
    cp = json_checkpoint(json, 3);
    ck_assert_uint_eq(tag_allocated(cp, 0), 0);
    ck_assert_uint_eq(tag_allocated(cp, 1), other_want);

    prom = checkpoints(RA_FORMAT_PROMETHEUS);
    snprintf(key, sizeof key, "\nregionalloc_checkpoint_tag_allocated_bytes"
             "{seq=\"2\",checkpoint=\"allocated\",tag=\"phase\"} %zu\n", want);
    ck_assert_msg(strstr(prom, key) != NULL, "no %s in:\n%s", key, prom);
    ck_assert_ptr_nonnull(strstr(prom, "\nregionalloc_checkpoint_tag_"
                                       "allocated_bytes{seq=\"3\",checkpoint="
                                       "\"freed\",tag=\"phase\"} 0\n"));
    free(json);
    free(prom);
    ra_free(other);
}
END_TEST

/* jemalloc's epoch is not cheap (doc/design.md, jemalloc facts): a
 * checkpoint and its report take none. */
START_TEST(test_checkpoint_takes_no_refresh)
{
    uint64_t before, after;
    size_t len = sizeof before;
    char *out;

    for (int i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        tu_tag_create(name);
    }
    /* The first read of a new arena's live page count takes a refresh. */
    checkpoint("warm");
    ck_assert_int_eq(mallctl("epoch", &before, &len, NULL, 0), 0);
    checkpoint("one");
    ck_assert_int_eq(mallctl("epoch", &after, &len, NULL, 0), 0);
    ck_assert_uint_eq(after, before);
    out = checkpoints(RA_FORMAT_JSON);
    ck_assert_int_eq(mallctl("epoch", &before, &len, NULL, 0), 0);
    ck_assert_uint_eq(before, after);
    free(out);
}
END_TEST

/* A checkpoint's own memory (the ring's per-tag arrays) is untagged, even
 * with a tag pushed, and bounded once the ring is full. */
START_TEST(test_checkpoint_memory_is_untagged_and_bounded)
{
    ra_tag_t t = tu_tag_create("pushed");
    ra_tag_stats_t s;
    size_t full, later;
    int failed = 0;

    tu_tag_push(t);
    for (int i = 0; i < 1100; i++)
        failed |= ra_checkpoint("under a pushed tag");
    tu_tag_pop(t);
    ck_assert_int_eq(failed, 0);
    ra_thread_flush();
    s = tu_tag_stats(t);
    ck_assert_uint_eq(s.allocated, 0);
    ck_assert_uint_eq(s.nmalloc, 0);

    full = tu_tag_stats(RA_TAG_NONE).allocated;
    for (int i = 0; i < 1100; i++)
        failed |= ra_checkpoint("ring full");
    ra_thread_flush();
    later = tu_tag_stats(RA_TAG_NONE).allocated;
    ck_assert_int_eq(failed, 0);
    ck_assert_msg(later <= full + 64 * KIB,
                  "untagged memory grew from %zu to %zu bytes", full, later);
}
END_TEST

/* -- time ----------------------------------------------------------------------- */

START_TEST(test_checkpoint_phase_within_elapsed_and_both_monotonic)
{
    uint64_t prev = 0;
    char *json;

    for (int i = 0; i < 20; i++) {
        tu_sleep_ms(2);
        checkpoint("tick");
    }
    json = checkpoints(RA_FORMAT_JSON);
    for (uint64_t seq = 1; seq <= 20; seq++) {
        const char *cp = json_checkpoint(json, seq);
        uint64_t elapsed = number_after(cp, "\"time_ns\": ");
        uint64_t phase = number_after(cp, "\"phase_ns\": ");

        ck_assert_uint_le(phase, elapsed);
        ck_assert_uint_gt(elapsed, prev);
        ck_assert_uint_eq(phase, elapsed - prev);
        if (seq > 1)
            ck_assert_uint_ge(phase, 2 * NS_PER_MS);
        prev = elapsed;
    }
    free(json);
}
END_TEST

/* Time zero is the library's load, before this test began. */
START_TEST(test_checkpoint_elapsed_counts_from_library_load)
{
    char *json;

    tu_sleep_ms(30);
    checkpoint("after 30 ms");
    json = checkpoints(RA_FORMAT_JSON);
    ck_assert_uint_ge(number_after(json, "\"time_ns\": "), 30 * NS_PER_MS);
    free(json);
}
END_TEST

START_TEST(test_checkpoint_text_shows_human_durations)
{
    char *text;
    const char *row;

    tu_sleep_ms(20);
    checkpoint("slow");
    text = checkpoints(RA_FORMAT_TEXT);
    row = nth_line(text, 1);
    /* "20 ms" .. "999 ms" or "1.00 s" and up: never raw nanoseconds. */
    ck_assert_msg(strstr(row, " ms  ") != NULL || strstr(row, " s  ") != NULL,
                  "%s", text);
    free(text);
}
END_TEST

/* -- the ring --------------------------------------------------------------------- */

START_TEST(test_checkpoint_ring_drops_the_oldest_past_1024_and_says_so)
{
    char label[32], *json, *text, *prom;
    const char *p;
    unsigned n = 0;
    int failed = 0;

    for (int i = 1; i <= 1030; i++) {
        snprintf(label, sizeof label, "cp %d", i);
        failed |= ra_checkpoint(label);
    }
    ck_assert_int_eq(failed, 0);

    json = checkpoints(RA_FORMAT_JSON);
    ck_assert_uint_eq(number_after(json, "\"recorded\": "), 1030);
    ck_assert_uint_eq(number_after(json, "\"dropped\": "), 6);
    for (p = json; (p = strstr(p, "    {\"seq\": ")) != NULL; p++)
        n++;
    ck_assert_uint_eq(n, 1024);
    ck_assert_ptr_nonnull(strstr(json, "\n    {\"seq\": 7, \"label\": \"cp 7\""));
    ck_assert_ptr_nonnull(
        strstr(json, "\n    {\"seq\": 1030, \"label\": \"cp 1030\""));
    ck_assert_ptr_null(strstr(json, "\"label\": \"cp 6\""));

    text = checkpoints(RA_FORMAT_TEXT);
    ck_assert_msg(strncmp(text, "(6 earlier checkpoints dropped: the last "
                                "1024 are kept)\n", 56) == 0,
                  "%.200s", text);
    ck_assert_uint_eq(table_lines(text), 1 + 1 + 1024);
    ck_assert_msg(strstr(nth_line(text, 2), "  cp 7\n") != NULL, "%.400s",
                  text);

    prom = checkpoints(RA_FORMAT_PROMETHEUS);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_checkpoints_"
                                         "dropped_total "), 6);
    ck_assert_uint_eq(number_after(prom, "\nregionalloc_checkpoints_"
                                         "recorded_total "), 1030);
    ck_assert_ptr_null(strstr(prom, "{seq=\"6\","));
    ck_assert_ptr_nonnull(strstr(prom, "{seq=\"7\",checkpoint=\"cp 7\"}"));
    free(json);
    free(text);
    free(prom);
}
END_TEST

START_TEST(test_checkpoint_report_without_checkpoints)
{
    char *text = checkpoints(RA_FORMAT_TEXT);
    char *json = checkpoints(RA_FORMAT_JSON);

    ck_assert_uint_eq(tu_count_lines(text), 1);
    ck_assert_msg(strncmp(text, "phase  elapsed  ", 16) == 0, "%s", text);
    ck_assert_uint_eq(number_after(json, "\"recorded\": "), 0);
    ck_assert_ptr_nonnull(strstr(json, "\"checkpoints\": []\n}\n"));
    free(text);
    free(json);
}
END_TEST

/* -- labels -------------------------------------------------------------------------- */

START_TEST(test_checkpoint_labels_null_empty_and_long)
{
    char longest[101], utf8[66], want[80];
    char *json;

    memset(longest, 'x', 100);
    longest[100] = '\0';
    /* 62 bytes, then a 2-byte character across the 63-byte limit. */
    memset(utf8, 'a', 62);
    memcpy(utf8 + 62, "\xc3\xa9", 3);
    checkpoint(NULL);
    checkpoint("");
    checkpoint(longest);
    checkpoint(utf8);
    json = checkpoints(RA_FORMAT_JSON);
    ck_assert_ptr_nonnull(strstr(json_checkpoint(json, 1), "\"label\": \"\", "));
    ck_assert_ptr_nonnull(strstr(json_checkpoint(json, 2), "\"label\": \"\", "));
    snprintf(want, sizeof want, "\"label\": \"%.63s\", ", longest);
    ck_assert_ptr_nonnull(strstr(json_checkpoint(json, 3), want));
    /* Cut before the character, not inside it. */
    snprintf(want, sizeof want, "\"label\": \"%.62s\", ", utf8);
    ck_assert_ptr_nonnull(strstr(json_checkpoint(json, 4), want));
    free(json);
}
END_TEST

START_TEST(test_checkpoint_escapes_labels_and_tags_in_every_format)
{
    char *text, *json, *prom;

    tu_tag_create(TU_NASTY);
    checkpoint(TU_NASTY);
    text = checkpoints(RA_FORMAT_TEXT);
    /* The tag's column header and the label, last on its row. */
    ck_assert_msg(strstr(text, "  " TU_NASTY_TEXT "  ") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "  " TU_NASTY_TEXT "\n") != NULL, "%s", text);
    json = checkpoints(RA_FORMAT_JSON);
    /* The name is not UTF-8: its bytes come beside it. */
    ck_assert_msg(strstr(json, "{\"id\": 1, \"born\": 1, \"name\": \""
                               TU_NASTY_JSON "\", \"name_hex\": \"7370") !=
                      NULL,
                  "%s", json);
    ck_assert_msg(strstr(json, "\", \"parent\": null, \"parent_id\": null}") !=
                      NULL,
                  "%s", json);
    ck_assert_msg(strstr(json, "\"label\": \"" TU_NASTY_JSON "\", ") != NULL,
                  "%s", json);
    prom = checkpoints(RA_FORMAT_PROMETHEUS);
    ck_assert_msg(strstr(prom, "\nregionalloc_checkpoint_tag_allocated_bytes"
                               "{seq=\"1\",checkpoint=\"" TU_NASTY_PROMETHEUS
                               "\",tag=\"" TU_NASTY_PROMETHEUS "\"} 0\n") !=
                      NULL,
                  "%s", prom);
    free(text);
    free(json);
    free(prom);
}
END_TEST

/* -- the phase table ------------------------------------------------------------------- */

/* Splits the header line of text into its words. Returns their number. */
static unsigned header_words(const char *text, char words[][64], unsigned max)
{
    char line[1024], *save = NULL, *w;
    size_t len = strcspn(text, "\n");
    unsigned n = 0;

    ck_assert_uint_lt(len, sizeof line);
    memcpy(line, text, len);
    line[len] = '\0';
    for (w = strtok_r(line, " ", &save); w != NULL && n < max;
         w = strtok_r(NULL, " ", &save))
        snprintf(words[n++], 64, "%s", w);
    return n;
}

/* Past 8 tags: the 8 with the largest allocated over the kept checkpoints,
 * in id order, and "other" for the rest. */
START_TEST(test_checkpoint_table_shows_eight_largest_tags_and_other)
{
    /* Blocks of 64 KiB per tag in the second phase; tag 1 held 24 in the
     * first and none in the second, so its largest is 24. */
    static const size_t units[10] = {9, 1, 8, 7, 2, 6, 5, 4, 3, 10};
    static const char *const want[] = {
        "phase", "elapsed", "t0", "t1", "t2", "t3", "t5", "t6", "t7", "t9",
        "other", "tagged", "allocated", "active", "resident", "mapped",
        "rss", "peak_rss", "checkpoint"};
    ra_tag_t tags[10];
    void *blocks[64], *early[24];
    char words[32][64], *text;
    size_t used = 0;
    unsigned n;

    for (int i = 0; i < 10; i++) {
        char name[8];
        snprintf(name, sizeof name, "t%d", i);
        tags[i] = tu_tag_create(name);
    }
    alloc_blocks(tags[1], early, 24, 64 * KIB);
    ra_thread_flush();
    checkpoint("first");
    free_blocks(early, 24);
    for (int i = 0; i < 10; i++) {
        alloc_blocks(tags[i], blocks + used, units[i], 64 * KIB);
        used += units[i];
    }
    ra_thread_flush();
    checkpoint("second");

    text = checkpoints(RA_FORMAT_TEXT);
    n = header_words(text, words, 32);
    ck_assert_uint_eq(n, sizeof want / sizeof want[0]);
    /* peak_rss* where the kernel refuses to reset the peak. */
    if (strcmp(words[n - 2], "peak_rss*") == 0)
        words[n - 2][8] = '\0';
    for (unsigned i = 0; i < n; i++)
        ck_assert_str_eq(words[i], want[i]);
    /* other: t4 and t8, 2 + 3 blocks of 64 KiB, in the second phase; t1
     * shows in the first. */
    ck_assert_msg(strstr(nth_line(text, 2), "  320.0 KiB  ") != NULL, "%s",
                  text);
    ck_assert_msg(strstr(nth_line(text, 1), "  1.5 MiB  ") != NULL, "%s",
                  text);
    free(text);
    free_blocks(blocks, used);
}
END_TEST

/* Where a tag did not exist yet, its column shows "-". */
START_TEST(test_checkpoint_table_marks_tags_created_later)
{
    const char *header, *row;
    size_t end;
    char *text;

    tu_tag_create("early");
    checkpoint("before");
    tu_tag_create("late");
    checkpoint("after");
    text = checkpoints(RA_FORMAT_TEXT);
    header = text;
    end = (size_t)(strstr(header, " late ") - header) + 5;
    row = nth_line(text, 1);
    ck_assert_msg(row[end - 1] == '-' && row[end - 2] == ' ', "%s", text);
    row = nth_line(text, 2);
    ck_assert_msg(strncmp(row + end - 3, "0 B", 3) == 0, "%s", text);
    free(text);
}
END_TEST

/* A destroyed tag's figures are nobody's now: no column, no JSON name, no
 * Prometheus series carries them, even once its id serves another tag;
 * the table adds them to "other", JSON says null. */
START_TEST(test_checkpoint_figures_of_destroyed_tags_are_not_their_heirs)
{
    static const char *const want[] = {
        "phase", "elapsed", "heir", "other", "tagged", "allocated", "active",
        "resident", "mapped", "rss", "peak_rss", "checkpoint"};
    ra_tag_t gone = tu_tag_create("gone"), heir;
    void *blocks[32];
    char words[32][64], *text, *json, *prom;
    unsigned n;

    alloc_blocks(gone, blocks, 16, 64 * KIB);
    ra_thread_flush();
    checkpoint("one");
    ck_assert_int_eq(ra_tag_destroy(gone), 0);
    heir = tu_tag_create("heir");
    ck_assert_uint_eq(heir, gone);
    alloc_blocks(heir, blocks, 32, 64 * KIB);
    ra_thread_flush();
    checkpoint("two");

    text = checkpoints(RA_FORMAT_TEXT);
    n = header_words(text, words, 32);
    ck_assert_uint_eq(n, sizeof want / sizeof want[0]);
    if (strcmp(words[n - 2], "peak_rss*") == 0)
        words[n - 2][8] = '\0';
    for (unsigned i = 0; i < n; i++)
        ck_assert_str_eq(words[i], want[i]);
    /* heir, other, tagged: */
    n = header_words(nth_line(text, 1), words, 32);
    ck_assert_msg(strcmp(words[4], "-") == 0 &&
                      strcmp(words[5], "1.0") == 0 &&
                      strcmp(words[7], "1.0") == 0, "%s", text);
    n = header_words(nth_line(text, 2), words, 32);
    ck_assert_msg(strcmp(words[4], "2.0") == 0 && strcmp(words[6], "-") == 0 &&
                      strcmp(words[7], "2.0") == 0, "%s", text);
    free(text);

    json = checkpoints(RA_FORMAT_JSON);
    /* The heir of id 1 was created after the first tag and after the
     * first checkpoint: a larger creation number than both. */
    {
        const char *head = "\"tags\": [\n    {\"id\": 1, \"born\": ";
        const char *at = strstr(json, head);
        char *end;
        unsigned long long born;

        ck_assert_msg(at != NULL, "%s", json);
        born = strtoull(at + strlen(head), &end, 10);
        ck_assert_msg(born > 1, "%s", json);
        const char *rest = ", \"name\": \"heir\", \"parent\": null, "
                           "\"parent_id\": null}\n  ],";
        ck_assert_msg(strncmp(end, rest, strlen(rest)) == 0, "%s", json);
    }
    ck_assert_msg(strstr(json_checkpoint(json, 1), "\"tag_allocated\": [null]}")
                      != NULL, "%s", json);
    ck_assert_uint_eq(tag_allocated(json_checkpoint(json, 2), 0), 2 * MIB);
    free(json);

    prom = checkpoints(RA_FORMAT_PROMETHEUS);
    ck_assert_msg(strstr(prom, "tag=\"gone\"") == NULL, "%s", prom);
    ck_assert_msg(strstr(prom, "regionalloc_checkpoint_tag_allocated_bytes{"
                               "seq=\"1\"") == NULL, "%s", prom);
    ck_assert_uint_eq(
        number_after(prom, "regionalloc_checkpoint_tag_allocated_bytes{seq="
                           "\"2\",checkpoint=\"two\",tag=\"heir\"} "),
        2 * MIB);
    free(prom);

    /* Destroyed and not yet recycled: gone from every format too. */
    ck_assert_int_eq(ra_tag_destroy(heir), 0);
    json = checkpoints(RA_FORMAT_JSON);
    ck_assert_msg(strstr(json, "\"tags\": [],") != NULL, "%s", json);
    ck_assert_msg(strstr(json_checkpoint(json, 2), "\"tag_allocated\": [null]}")
                      != NULL, "%s", json);
    free(json);
    text = checkpoints(RA_FORMAT_TEXT);
    ck_assert_msg(strstr(text, "heir") == NULL, "%s", text);
    free(text);
}
END_TEST

/* Right-aligned columns sized to their content: every row's label starts
 * where the header's "checkpoint" does. */
START_TEST(test_checkpoint_table_columns_are_aligned)
{
    static const char *const labels[] = {"first", "second phase", "3"};
    void *p;
    size_t col;
    char *text;

    tu_tag_create("x");
    checkpoint(labels[0]);
    p = ra_malloc_tag(ra_tag_lookup("x"), 3 * MIB);
    ck_assert_ptr_nonnull(p);
    checkpoint(labels[1]);
    ra_free(p);
    checkpoint(labels[2]);
    text = checkpoints(RA_FORMAT_TEXT);
    col = (size_t)(strstr(text, "checkpoint\n") - text);
    for (unsigned i = 0; i < 3; i++) {
        const char *row = nth_line(text, i + 1);
        ck_assert_msg(strncmp(row + col, labels[i], strlen(labels[i])) == 0 &&
                          row[col - 1] == ' ' && row[col - 2] == ' ' &&
                          row[col - 3] != ' ',
                      "row %u not aligned:\n%s", i + 1, text);
    }
    free(text);
}
END_TEST

/* -- peak RSS -------------------------------------------------------------------------- */

/* Whether this process may reset its peak RSS (it then is reset). */
static bool can_reset_peak(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    bool ok;

    if (fd < 0)
        return false;
    ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}

/* A 64 MiB spike, freed and purged within a phase, shows in that phase's
 * peak and not in the next one's (where the kernel lets the peak be reset;
 * elsewhere the table says the peak counts from the start). */
START_TEST(test_checkpoint_peak_rss_is_per_phase)
{
    bool reset = can_reset_peak();
    ra_tag_t t = tu_tag_create("spike");
    uint64_t spike_peak, spike_rss, calm_peak;
    char *json, *text;
    const char *cp;
    void *p;

    checkpoint("start");
    p = ra_malloc_tag(t, 64 * MIB);
    ck_assert_ptr_nonnull(p);
    memset(p, 1, 64 * MIB);
    ra_free(p);
    ck_assert_int_eq(ra_tag_purge(t), 0);
    checkpoint("spike");
    checkpoint("calm");

    json = checkpoints(RA_FORMAT_JSON);
    for (uint64_t seq = 1; seq <= 3; seq++) {
        cp = json_checkpoint(json, seq);
        ck_assert_uint_ge(number_after(cp, "\"peak_rss\": "),
                          number_after(cp, "\"rss\": "));
    }
    cp = json_checkpoint(json, 2);
    spike_peak = number_after(cp, "\"peak_rss\": ");
    spike_rss = number_after(cp, "\"rss\": ");
    ck_assert_uint_ge(spike_peak, spike_rss + 48 * MIB);
    calm_peak = number_after(json_checkpoint(json, 3), "\"peak_rss\": ");
    text = checkpoints(RA_FORMAT_TEXT);
    if (reset) {
        ck_assert_uint_lt(calm_peak + 32 * MIB, spike_peak);
        ck_assert_ptr_nonnull(strstr(cp, "\"peak_rss_since\": \"phase\""));
        ck_assert_msg(strstr(text, " peak_rss ") != NULL, "%s", text);
        ck_assert_ptr_null(strstr(text, "peak_rss*"));
    } else {
        ck_assert_uint_ge(calm_peak, spike_peak);
        ck_assert_ptr_nonnull(strstr(cp, "\"peak_rss_since\": \"start\""));
        ck_assert_msg(strstr(text, " peak_rss* ") != NULL, "%s", text);
        ck_assert_msg(strstr(text, "\n* peak_rss: peak since the process "
                                   "started") != NULL,
                      "%s", text);
    }
    free(json);
    free(text);
}
END_TEST

/* -- errors ------------------------------------------------------------------------------- */

START_TEST(test_checkpoint_report_null_file_or_bad_format_is_einval)
{
    FILE *f = tmpfile();

    ck_assert_ptr_nonnull(f);
    checkpoint("one");
    errno = 0;
    ck_assert_int_eq(ra_checkpoint_report(NULL, RA_FORMAT_TEXT), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_checkpoint_report(f, (ra_format_t)3), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_checkpoint_report(f, (ra_format_t)-1), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_int_eq(ftell(f), 0);
    fclose(f);
}
END_TEST

START_TEST(test_checkpoint_report_read_only_file_is_eio)
{
    static const ra_format_t formats[] = {RA_FORMAT_TEXT, RA_FORMAT_JSON,
                                          RA_FORMAT_PROMETHEUS};
    FILE *f = fopen("/dev/null", "r");

    ck_assert_ptr_nonnull(f);
    checkpoint("one");
    for (size_t i = 0; i < 3; i++) {
        errno = 0;
        ck_assert_int_eq(ra_checkpoint_report(f, formats[i]), -1);
        ck_assert_int_eq(errno, EIO);
    }
    fclose(f);
}
END_TEST

static int child_checkpoint_in_pass_through(void)
{
    FILE *f = tmpfile();

    TU_REQUIRE(f != NULL);
    TU_REQUIRE(ra_enabled() == 0);
    errno = 0;
    TU_REQUIRE(ra_checkpoint("x") == -1 && errno == ENOTSUP);
    errno = 0;
    TU_REQUIRE(ra_checkpoint_report(f, RA_FORMAT_TEXT) == -1 &&
               errno == ENOTSUP);
    errno = 0;
    TU_REQUIRE(ra_checkpoint_report(NULL, RA_FORMAT_TEXT) == -1 &&
               errno == EINVAL);
    TU_REQUIRE(ftell(f) == 0);
    fclose(f);
    return 0;
}

START_TEST(test_checkpoint_in_pass_through_mode_is_enotsup)
{
    static const char *const env[] = {"REGIONALLOC=0", NULL};
    int status = tu_run_with_env(env, child_checkpoint_in_pass_through, err,
                                 sizeof err);

    ck_assert_msg(status == 0, "child exited with %d; stderr: %s", status,
                  err);
}
END_TEST

/* -- threads and fork --------------------------------------------------------------------- */

#define THREAD_CHECKPOINTS 200

static void *take_checkpoints(void *arg)
{
    intptr_t failed = 0;

    (void)arg;
    for (int i = 0; i < THREAD_CHECKPOINTS; i++)
        failed |= ra_checkpoint("thread") != 0;
    return (void *)failed;
}

START_TEST(test_checkpoint_threads_get_consecutive_seqs_in_time_order)
{
    uint64_t prev = 0;
    char *json;

    tu_tag_create("shared");
    tu_run_threads(4, take_checkpoints, NULL);
    json = checkpoints(RA_FORMAT_JSON);
    ck_assert_uint_eq(number_after(json, "\"recorded\": "),
                      4 * THREAD_CHECKPOINTS);
    for (uint64_t seq = 1; seq <= 4 * THREAD_CHECKPOINTS; seq++) {
        uint64_t t = number_after(json_checkpoint(json, seq), "\"time_ns\": ");
        ck_assert_uint_ge(t, prev);
        prev = t;
    }
    free(json);
}
END_TEST

static volatile int keep_going = 1;

static void *checkpoint_until_told(void *arg)
{
    (void)arg;
    while (keep_going)
        ra_checkpoint("busy");
    return NULL;
}

/* The ring's lock is never inherited held: a child forked while another
 * thread takes checkpoints can take and report its own. */
START_TEST(test_checkpoint_works_in_a_child_forked_mid_checkpoint)
{
    pthread_t busy;

    checkpoint("parent");
    ck_assert_int_eq(pthread_create(&busy, NULL, checkpoint_until_told, NULL),
                     0);
    for (int i = 0; i < 20; i++) {
        int status;
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            FILE *f = fopen("/dev/null", "w");
            int rc = ra_checkpoint("child") |
                     ra_checkpoint_report(f, RA_FORMAT_TEXT);
            _exit(rc == 0 ? 0 : 1);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    keep_going = 0;
    ck_assert_int_eq(pthread_join(busy, NULL), 0);
}
END_TEST

/* -- at exit --------------------------------------------------------------------------------- */

/* Takes two checkpoints under a tag and leaves through exit(0). */
static int child_two_checkpoints(void)
{
    ra_tag_t t = ra_tag_create("exit-tag");

    TU_REQUIRE(t == 1);
    TU_REQUIRE(ra_malloc_tag(t, 1000) != NULL);
    TU_REQUIRE(ra_checkpoint("one") == 0);
    TU_REQUIRE(ra_checkpoint("two") == 0);
    exit(0);
}

/* A temporary file's path in path (size 4096). */
static void temp_path(char *path)
{
    const char *dir = getenv("TMPDIR");
    int fd;

    snprintf(path, 4096, "%s/check_checkpoint.XXXXXX",
             dir != NULL && dir[0] != '\0' ? dir : "/tmp");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

/* The contents of path, which is then removed (free() the result). */
static char *slurp(const char *path)
{
    char *buf = tu_read_file(path);

    unlink(path);
    return buf;
}

START_TEST(test_checkpoint_table_written_at_exit_with_a_last_row)
{
    char path[4096], setting[4200], *out;
    const char *env[] = {setting, NULL};

    temp_path(path);
    snprintf(setting, sizeof setting, "REGIONALLOC_CHECKPOINTS=%s", path);
    ck_assert_int_eq(tu_exec_self(env, "two_checkpoints", err, sizeof err), 0);
    out = slurp(path);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
    ck_assert_msg(table_lines(out) == 4, "%s", out);
    ck_assert_msg(strstr(out, " exit-tag ") != NULL, "%s", out);
    ck_assert_msg(row_ends_with(nth_line(out, 1), "one"), "%s", out);
    ck_assert_msg(row_ends_with(nth_line(out, 2), "two"), "%s", out);
    ck_assert_msg(row_ends_with(nth_line(out, 3), "exit"), "%s", out);
    free(out);
}
END_TEST

START_TEST(test_checkpoint_report_at_exit_to_stderr_in_prometheus)
{
    static const char *const env[] = {
        "REGIONALLOC_CHECKPOINTS=stderr",
        "REGIONALLOC_STATS_FORMAT=prometheus", NULL};

    ck_assert_int_eq(tu_exec_self(env, "two_checkpoints", err, sizeof err), 0);
    ck_assert_msg(strstr(err, "\nregionalloc_checkpoint_tag_allocated_bytes"
                              "{seq=\"3\",checkpoint=\"exit\",tag=\"exit-tag\"}"
                              " 1024\n") != NULL,
                  "stderr: %s", err);
    ck_assert_uint_eq(number_after(err, "\nregionalloc_checkpoints_recorded_"
                                        "total "), 3);
}
END_TEST

/* REGIONALLOC_STATS and REGIONALLOC_CHECKPOINTS naming one file get both
 * reports, one after the other. */
START_TEST(test_checkpoint_and_stats_reports_share_a_file)
{
    char path[4096], stats[4200], cps[4200], *out;
    const char *env[] = {stats, cps, "REGIONALLOC_STATS_FORMAT=json", NULL};

    temp_path(path);
    snprintf(stats, sizeof stats, "REGIONALLOC_STATS=%s", path);
    snprintf(cps, sizeof cps, "REGIONALLOC_CHECKPOINTS=%s", path);
    ck_assert_int_eq(tu_exec_self(env, "two_checkpoints", err, sizeof err), 0);
    out = slurp(path);
    ck_assert_msg(strncmp(out, "{\n  \"schema\": \"regionalloc-report-1\"",
                          36) == 0,
                  "%s", out);
    ck_assert_msg(strstr(out, "}\n{\n  \"schema\": \"regionalloc-checkpoints-"
                              "1\"") != NULL,
                  "%s", out);
    free(out);
}
END_TEST

START_TEST(test_checkpoint_unwritable_path_at_exit_warns_once)
{
    static const char *const env[] = {
        "REGIONALLOC_CHECKPOINTS=/nonexistent-dir/x", NULL};

    ck_assert_int_eq(tu_exec_self(env, "two_checkpoints", err, sizeof err), 0);
    ck_assert_msg(tu_count_lines(err) == 1, "want one line, got: %s", err);
    ck_assert_msg(strncmp(err, "regionalloc: REGIONALLOC_CHECKPOINTS: ", 38) ==
                      0,
                  "line: %s", err);
    ck_assert_msg(strstr(err, "/nonexistent-dir/x") != NULL, "line: %s", err);
}
END_TEST

static int child_exit_in_pass_through(void)
{
    TU_REQUIRE(ra_enabled() == 0);
    exit(0);
}

START_TEST(test_checkpoint_at_exit_in_pass_through_mode)
{
    static const char *const env[] = {"REGIONALLOC_CHECKPOINTS=stderr",
                                      "REGIONALLOC=0", NULL};

    ck_assert_int_eq(tu_exec_self(env, "exit_in_pass_through", err,
                                  sizeof err),
                     0);
    ck_assert_str_eq(err, "regionalloc: pass-through mode, no checkpoints\n");
}
END_TEST

static Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc;

    tc = tcase_create("ground truth");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_checkpoint_rows_match_allocations_exactly);
    tcase_add_test(tc, test_checkpoint_takes_no_refresh);
    tcase_add_test(tc, test_checkpoint_memory_is_untagged_and_bounded);
    suite_add_tcase(s, tc);

    tc = tcase_create("time");
    tcase_add_test(tc, test_checkpoint_phase_within_elapsed_and_both_monotonic);
    tcase_add_test(tc, test_checkpoint_elapsed_counts_from_library_load);
    tcase_add_test(tc, test_checkpoint_text_shows_human_durations);
    suite_add_tcase(s, tc);

    tc = tcase_create("ring of 1024");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_checkpoint_ring_drops_the_oldest_past_1024_and_says_so);
    tcase_add_test(tc, test_checkpoint_report_without_checkpoints);
    suite_add_tcase(s, tc);

    tc = tcase_create("labels");
    tcase_add_test(tc, test_checkpoint_labels_null_empty_and_long);
    tcase_add_test(tc, test_checkpoint_escapes_labels_and_tags_in_every_format);
    suite_add_tcase(s, tc);

    tc = tcase_create("phase table");
    tcase_add_test(tc, test_checkpoint_table_shows_eight_largest_tags_and_other);
    tcase_add_test(tc, test_checkpoint_table_marks_tags_created_later);
    tcase_add_test(tc,
                   test_checkpoint_figures_of_destroyed_tags_are_not_their_heirs);
    tcase_add_test(tc, test_checkpoint_table_columns_are_aligned);
    suite_add_tcase(s, tc);

    tc = tcase_create("peak rss");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_checkpoint_peak_rss_is_per_phase);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_checkpoint_report_null_file_or_bad_format_is_einval);
    tcase_add_test(tc, test_checkpoint_report_read_only_file_is_eio);
    tcase_add_test(tc, test_checkpoint_in_pass_through_mode_is_enotsup);
    suite_add_tcase(s, tc);

    tc = tcase_create("threads and fork");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc,
                   test_checkpoint_threads_get_consecutive_seqs_in_time_order);
    tcase_add_test(tc, test_checkpoint_works_in_a_child_forked_mid_checkpoint);
    suite_add_tcase(s, tc);

    tc = tcase_create("at exit");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_checkpoint_table_written_at_exit_with_a_last_row);
    tcase_add_test(tc, test_checkpoint_report_at_exit_to_stderr_in_prometheus);
    tcase_add_test(tc, test_checkpoint_and_stats_reports_share_a_file);
    tcase_add_test(tc, test_checkpoint_unwritable_path_at_exit_warns_once);
    tcase_add_test(tc, test_checkpoint_at_exit_in_pass_through_mode);
    suite_add_tcase(s, tc);

    return s;
}

int main(int argc, char **argv)
{
    static const struct tu_child children[] = {
        {"two_checkpoints", child_two_checkpoints},
        {"exit_in_pass_through", child_exit_in_pass_through},
        {NULL, NULL},
    };

    tu_child_main(argc, argv, children);
    return tu_run_suite(checkpoint_suite());
}

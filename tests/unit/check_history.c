/* Suite "history (unit)": the ring of samples the page's chart draws
 * (history.c): bounded, in order across its wrap, ?since, the largest tags
 * and the watched one, the library's own memory, nothing once stopped. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "testutil.h"
#include "unitutil.h"

#define KIB ((size_t)1 << 10)
#define CAPACITY 240 /* the ring's, as the document says */
#define TAGS_PER_SAMPLE 32

static char *history_since(uint64_t since)
{
    struct unit_out u;

    uo_open(&u);
    ck_assert_int_eq(ra__history_write(&u.out, since), 0);
    return uo_text(&u);
}

/* The value of "key": N in text, which must hold it. */
static uint64_t field(const char *text, const char *key)
{
    char quoted[64];
    const char *at;

    snprintf(quoted, sizeof quoted, "\"%s\": ", key);
    at = strstr(text, quoted);
    ck_assert_msg(at != NULL, "no %s in %.200s", key, text);
    return strtoull(at + strlen(quoted), NULL, 10);
}

/* The samples' lines ({"seq": ...}), in order, into lines (at most max). */
static unsigned sample_lines(char *text, char **lines, unsigned max)
{
    unsigned n = 0;

    for (char *line = strtok(text, "\n"); line != NULL;
         line = strtok(NULL, "\n"))
        if (strstr(line, "{\"seq\": ") != NULL && n < max)
            lines[n++] = line;
    return n;
}

/* More samples than the ring holds: the newest CAPACITY, consecutive;
 * ?since gives those after it, none past the newest. */
START_TEST(test_history_unit_ring_wraps_in_order)
{
    ra_tag_t tag = tu_tag_create("sampled");
    void *p = ra_malloc_tag(tag, 256 * KIB);
    char *text, *lines[CAPACITY + 1];
    uint64_t taken, later;
    unsigned n;

    ck_assert_ptr_nonnull(p);
    ck_assert(!ra__history_start());
    for (unsigned i = 0; i < CAPACITY + 17; i++)
        ra__history_sample();
    text = history_since(0);
    ck_assert_ptr_nonnull(
        strstr(text, "\"schema\": \"regionalloc-history-1\""));
    ck_assert_uint_eq(field(text, "capacity"), CAPACITY);
    taken = field(text, "taken");
    ck_assert_uint_ge(taken, CAPACITY + 17);
    n = sample_lines(text, lines, CAPACITY + 1);
    ck_assert_uint_eq(n, CAPACITY);
    for (unsigned i = 0; i < n; i++) {
        char id[32];
        ck_assert_uint_eq(field(lines[i], "seq"), taken - CAPACITY + 1 + i);
        snprintf(id, sizeof id, "{\"id\": %u, ", tag);
        ck_assert_msg(strstr(lines[i], id) != NULL, "%s", lines[i]);
    }
    free(text);

    /* The server's sampler runs meanwhile (a sample a second): a document
     * may hold samples taken since the last one. */
    text = history_since(taken - 5);
    later = field(text, "taken");
    ck_assert_uint_ge(later, taken);
    n = sample_lines(text, lines, CAPACITY + 1);
    ck_assert_uint_eq(n, later - (taken - 5));
    ck_assert_uint_eq(field(lines[0], "seq"), taken - 4);
    ck_assert_uint_eq(field(lines[n - 1], "seq"), later);
    free(text);
    text = history_since(UINT64_MAX);
    ck_assert_uint_eq(sample_lines(text, lines, CAPACITY + 1), 0);
    free(text);
    ra__history_stop();
    ra_free(p);
}
END_TEST

/* A sample holds the largest tags by mapped bytes, and the watched one
 * however small; the tag's figure is its allocated bytes. */
START_TEST(test_history_unit_largest_and_watched)
{
    enum { NTAGS = TAGS_PER_SAMPLE + 8 };
    ra_tag_t tags[NTAGS], small;
    void *blocks[NTAGS];
    char *text, *lines[CAPACITY + 1], want[64];
    unsigned n;

    for (unsigned i = 0; i < NTAGS; i++) {
        char name[32];
        snprintf(name, sizeof name, "big-%u", i);
        tags[i] = tu_tag_create(name);
        blocks[i] = ra_malloc_tag(tags[i], (i + 1) * 1024 * KIB);
        ck_assert_ptr_nonnull(blocks[i]);
    }
    small = tu_tag_create("small");
    ck_assert(!ra__history_start());
    ra__history_sample();
    text = history_since(0);
    n = sample_lines(text, lines, CAPACITY + 1);
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_eq(tu_count_of(lines[n - 1], "{\"id\": "), TAGS_PER_SAMPLE - 1);
    snprintf(want, sizeof want, "{\"id\": %u, ", small);
    ck_assert_ptr_null(strstr(lines[n - 1], want));
    /* The largest is there with its allocated bytes. */
    snprintf(want, sizeof want, "\"allocated\": %zu",
             (size_t)NTAGS * 1024 * KIB);
    ck_assert_msg(strstr(lines[n - 1], want) != NULL, "%s", lines[n - 1]);
    free(text);

    /* A sample the server's sampler began before the watch may land
     * last: a few tries, each a sample of ours. */
    ra__history_watch(small);
    snprintf(want, sizeof want, "{\"id\": %u, ", small);
    for (unsigned tries = 0;; tries++) {
        bool watched;
        ra__history_sample();
        text = history_since(0);
        n = sample_lines(text, lines, CAPACITY + 1);
        watched = strstr(lines[n - 1], want) != NULL;
        if (watched || tries == 4) {
            ck_assert_msg(watched, "%s", lines[n - 1]);
            ck_assert_uint_eq(tu_count_of(lines[n - 1], "{\"id\": "),
                              TAGS_PER_SAMPLE);
            free(text);
            break;
        }
        free(text);
    }
    ra__history_stop();
    for (unsigned i = 0; i < NTAGS; i++)
        ra_free(blocks[i]);
}
END_TEST

/* The ring is the library's memory while it runs, and gone after; a
 * stopped history takes no sample and serves none. */
START_TEST(test_history_unit_memory_and_stop)
{
    size_t before = ra__meta_held(), during;
    char *text, *lines[2];

    ck_assert(!ra__history_start());
    during = ra__meta_held();
    ck_assert_uint_ge(during - before, CAPACITY * TAGS_PER_SAMPLE * 32);
    ra__history_sample();
    ra__history_stop();
    ck_assert_uint_le(ra__meta_held(), during - CAPACITY * TAGS_PER_SAMPLE * 32);
    ra__history_sample();
    text = history_since(0);
    ck_assert_uint_eq(field(text, "taken"), 0);
    ck_assert_uint_eq(sample_lines(text, lines, 2), 0);
    free(text);
    /* And it starts again, from the first sample. */
    ck_assert(!ra__history_start());
    ra__history_sample();
    text = history_since(0);
    ck_assert_uint_ge(field(text, "taken"), 1);
    free(text);
    ra__history_stop();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("history (unit)");
    TCase *tc = tcase_create("ring");

    tcase_add_test(tc, test_history_unit_ring_wraps_in_order);
    tcase_add_test(tc, test_history_unit_largest_and_watched);
    tcase_add_test(tc, test_history_unit_memory_and_stop);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

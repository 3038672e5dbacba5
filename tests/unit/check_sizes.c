/* Suite "sizes (unit)": the syntax of the sizes users give (src/sizes.c,
 * which the library and tools/regionalloc share): sizes, the memory
 * limit over the table tests/memory_limits.table (which
 * tests/test_limits.sh also runs the library and the tool over), budget
 * entries; and sizes.h's arithmetic at 0, 1, 2^63 - 1, 2^63 and
 * 2^64 - 1. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sizes.h"
#include "testutil.h"

#define TOP ((size_t)1 << 63)

/* -- sizes ------------------------------------------------------------------ */

static const struct {
    const char *text;
    size_t value;
} good[] = {
    {"0", 0},
    {"1", 1},
    {"4096", 4096},
    {"4K", 4096},
    {"4k", 4096},
    {"4KiB", 4096},
    {"4kib", 4096},
    {"4KB", 4096},
    {"16M", (size_t)16 << 20},
    {"64G", (size_t)64 << 30},
    {"2T", (size_t)2 << 40},
    {"7B", 7},
    {"9223372036854775807", TOP - 1},
    {"9223372036854775808", TOP},
    {"18446744073709551615", SIZE_MAX},
    {"16777215T", (size_t)16777215 << 40},
    {"00000000000000000000000000001K", 1024},
};

static const char *const bad[] = {
    "",        "K",     "-1",   " 1",   "1 ",  "1X",  "1KK", "1Kx",
    "1iB",     "0x10",  "1.5M", "+4",   "4K ", "1e3", "5iB", "1P",
    "18446744073709551616", /* SIZE_MAX + 1 */
    "16777216T",            /* 2^64 */
    "20000000T",
    "99999999999999999999999G",
    "99999999999999999999999",
};

START_TEST(test_sizes_unit_sizes_parse)
{
    size_t out = 12345;

    ck_assert_msg(ra__parse_size(good[_i].text, &out) == NULL,
                  "%s rejected", good[_i].text);
    ck_assert_uint_eq(out, good[_i].value);
}
END_TEST

START_TEST(test_sizes_unit_bad_sizes_are_rejected_untouched)
{
    size_t out = 12345;

    ck_assert_msg(ra__parse_size(bad[_i], &out) != NULL, "\"%s\" accepted",
                  bad[_i]);
    ck_assert_uint_eq(out, 12345);
}
END_TEST

/* An overflow says so; a bad suffix after too many digits is a syntax
 * error. */
START_TEST(test_sizes_unit_overflow_is_named)
{
    size_t out;

    ck_assert_str_eq(ra__parse_size("20000000T", &out),
                     "more than 2^64 - 1 bytes");
    ck_assert_str_eq(ra__parse_size("99999999999999999999999", &out),
                     "more than 2^64 - 1 bytes");
    ck_assert_str_ne(ra__parse_size("99999999999999999999999X", &out),
                     "more than 2^64 - 1 bytes");
}
END_TEST

/* -- the memory limit, over the shared table ----------------------------------- */

START_TEST(test_sizes_unit_memory_limits_as_the_table_says)
{
    FILE *f = tu_open_source("tests/memory_limits.table");
    char line[256];
    unsigned cases = 0;

    ck_assert_msg(f != NULL, "tests/memory_limits.table not found");
    while (fgets(line, sizeof line, f) != NULL) {
        char *value = line, *limit, *effect;
        size_t bytes = 7, shown;
        unsigned percent = 7;
        const char *why;
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || (limit = strchr(line, '|')) == NULL)
            continue;
        *limit++ = '\0';
        effect = strchr(limit, '|');
        ck_assert_ptr_nonnull(effect);
        *effect++ = '\0';
        why = ra__parse_memory_limit(value, &bytes, &percent);
        cases++;
        if (strcmp(limit, "bad") == 0) {
            ck_assert_msg(why != NULL, "\"%s\" accepted", value);
            ck_assert_msg(bytes == 7 && percent == 7, "\"%s\" touched",
                          value);
            continue;
        }
        ck_assert_msg(why == NULL, "\"%s\" rejected: %s", value, why);
        ck_assert_msg((bytes == 0) != (percent == 0), "\"%s\"", value);
        /* A percentage as the library takes it of a 1 GiB cgroup. */
        shown = percent != 0 ? ra__size_percent((size_t)1 << 30, percent)
                             : bytes;
        ck_assert_msg(shown == strtoull(limit, NULL, 10),
                      "\"%s\": %zu, not %s", value, shown, limit);
        ck_assert_msg(ra__limit_in_effect(shown) ==
                          (strcmp(effect, "yes") == 0),
                      "\"%s\": in effect?", value);
    }
    fclose(f);
    ck_assert_uint_ge(cases, 30);
}
END_TEST

/* -- budget entries -------------------------------------------------------------- */

START_TEST(test_sizes_unit_budget_entries)
{
    static const char ok[] = "cache=18446744073709551615/9223372036854775808";
    size_t name_len = 0, hard = 0, soft = 0;

    ck_assert_ptr_null(
        ra__parse_budget(ok, strlen(ok), &name_len, &hard, &soft));
    ck_assert_uint_eq(name_len, 5);
    ck_assert_uint_eq(hard, SIZE_MAX);
    ck_assert_uint_eq(soft, TOP);
    /* No NUL needed: the length ends the entry (a list's comma). */
    ck_assert_ptr_null(ra__parse_budget("a=1/1,b=junk", 5, &name_len, &hard,
                                        &soft));
    ck_assert_uint_eq(hard, 1);
    ck_assert_uint_eq(soft, 1);
    ck_assert_ptr_null(ra__parse_budget("a=0/5G", 6, &name_len, &hard,
                                        &soft));
    ck_assert_uint_eq(hard, 0);
    ck_assert_uint_eq(soft, (size_t)5 << 30);
}
END_TEST

static const char *const bad_budgets[] = {
    "cache",       "=5M",        "a=",          "a=5M/",      "a=/5M",
    "a=1/2",       "a=5iB",      "a=20000000T", "a=1G/2G",    "a= 1G",
    "a=1G/1G/1G",  "a=9223372036854775807/9223372036854775808",
    "a1234567890123456789012345678901234567890123456789012345678901234=1",
};

START_TEST(test_sizes_unit_bad_budget_entries_are_rejected_untouched)
{
    size_t name_len = 7, hard = 7, soft = 7;
    const char *e = bad_budgets[_i];

    ck_assert_msg(ra__parse_budget(e, strlen(e), &name_len, &hard, &soft) !=
                      NULL,
                  "\"%s\" accepted", e);
    ck_assert(name_len == 7 && hard == 7 && soft == 7);
}
END_TEST

/* -- the arithmetic -------------------------------------------------------------- */

START_TEST(test_sizes_unit_arithmetic_saturates)
{
    ck_assert_uint_eq(ra__size_add(0, 0), 0);
    ck_assert_uint_eq(ra__size_add(1, TOP - 1), TOP);
    ck_assert_uint_eq(ra__size_add(TOP, TOP), SIZE_MAX);
    ck_assert_uint_eq(ra__size_add(SIZE_MAX, 1), SIZE_MAX);
    ck_assert_uint_eq(ra__size_add(SIZE_MAX, SIZE_MAX), SIZE_MAX);
    ck_assert_uint_eq(ra__size_sub(0, 1), 0);
    ck_assert_uint_eq(ra__size_sub(1, SIZE_MAX), 0);
    ck_assert_uint_eq(ra__size_sub(TOP, 1), TOP - 1);
    ck_assert_uint_eq(ra__size_sub(SIZE_MAX, TOP), TOP - 1);
    ck_assert_uint_eq(ra__size_percent(0, 100), 0);
    ck_assert_uint_eq(ra__size_percent(1, 100), 1);
    ck_assert_uint_eq(ra__size_percent(1, 99), 0);
    ck_assert_uint_eq(ra__size_percent(TOP - 1, 100), TOP - 1);
    ck_assert_uint_eq(ra__size_percent(TOP, 50), TOP / 2);
    ck_assert_uint_eq(ra__size_percent(SIZE_MAX, 100), SIZE_MAX);
    ck_assert_uint_eq(ra__size_percent(SIZE_MAX, 1), SIZE_MAX / 100);
    ck_assert_uint_eq(ra__size_percent(SIZE_MAX, 90),
                      SIZE_MAX / 100 * 90 + 15 * 90 / 100);
}
END_TEST

START_TEST(test_sizes_unit_limit_in_effect_below_the_address_space)
{
    ck_assert(!ra__limit_in_effect(0));
    ck_assert(ra__limit_in_effect(1));
    ck_assert(ra__limit_in_effect(RA__ADDRESS_SPACE - 1));
    ck_assert(!ra__limit_in_effect(RA__ADDRESS_SPACE));
    ck_assert(!ra__limit_in_effect(TOP - 1));
    ck_assert(!ra__limit_in_effect(TOP));
    ck_assert(!ra__limit_in_effect(SIZE_MAX));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sizes (unit)");
    TCase *tc = tcase_create("sizes");

    tcase_add_loop_test(tc, test_sizes_unit_sizes_parse, 0,
                        sizeof good / sizeof good[0]);
    tcase_add_loop_test(tc, test_sizes_unit_bad_sizes_are_rejected_untouched,
                        0, sizeof bad / sizeof bad[0]);
    tcase_add_test(tc, test_sizes_unit_overflow_is_named);
    suite_add_tcase(s, tc);
    tc = tcase_create("memory limit");
    tcase_add_test(tc, test_sizes_unit_memory_limits_as_the_table_says);
    suite_add_tcase(s, tc);
    tc = tcase_create("budgets");
    tcase_add_test(tc, test_sizes_unit_budget_entries);
    tcase_add_loop_test(
        tc, test_sizes_unit_bad_budget_entries_are_rejected_untouched, 0,
        sizeof bad_budgets / sizeof bad_budgets[0]);
    suite_add_tcase(s, tc);
    tc = tcase_create("arithmetic");
    tcase_add_test(tc, test_sizes_unit_arithmetic_saturates);
    tcase_add_test(tc, test_sizes_unit_limit_in_effect_below_the_address_space);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

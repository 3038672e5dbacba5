/* Suite "config (unit)": the size syntax of REGIONALLOC_REGION_SIZE,
 * REGIONALLOC_MAX_TAGS and REGIONALLOC_PROF. */
#include <check.h>
#include <signal.h>
#include <stdint.h>

#include "internal.h"
#include "testutil.h"

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
    {"18446744073709551615", SIZE_MAX},
    {"16777215T", (size_t)16777215 << 40},
};

static const char *const bad[] = {
    "",        "K",     "-1",   " 1",   "1 ",  "1X",  "1KK", "1Kx",
    "1iB",     "0x10",  "1.5M", "+4",   "4K ", "1e3",
    "18446744073709551616", /* SIZE_MAX + 1 */
    "16777216T",            /* 2^64 */
    "99999999999999999999999G",
};

START_TEST(test_config_unit_sizes_parse)
{
    size_t out = 12345;

    ck_assert_msg(!ra__parse_size(good[_i].text, &out), "%s rejected",
                  good[_i].text);
    ck_assert_uint_eq(out, good[_i].value);
}
END_TEST

START_TEST(test_config_unit_bad_sizes_are_rejected_untouched)
{
    size_t out = 12345;

    ck_assert_msg(ra__parse_size(bad[_i], &out), "\"%s\" accepted", bad[_i]);
    ck_assert_uint_eq(out, 12345);
}
END_TEST

/* ra__assert in a debug build (--enable-debug): a broken invariant aborts
 * with one line naming it; elsewhere the check is compiled out, and the
 * condition is not even evaluated. */
static int evaluated;

static int broken(void)
{
    evaluated++;
    return 0;
}

#ifdef RA_DEBUG
START_TEST(test_config_unit_broken_invariant_aborts_naming_it)
{
    ra__assert(broken() == 1);
}
END_TEST
#else
START_TEST(test_config_unit_assertions_are_compiled_out)
{
    ra__assert(broken() == 1);
    ck_assert_int_eq(evaluated, 0);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("config (unit)");
    TCase *tc = tcase_create("sizes");

    tcase_add_loop_test(tc, test_config_unit_sizes_parse, 0,
                        sizeof good / sizeof good[0]);
    tcase_add_loop_test(tc, test_config_unit_bad_sizes_are_rejected_untouched,
                        0, sizeof bad / sizeof bad[0]);
    suite_add_tcase(s, tc);
    tc = tcase_create("assertions");
#ifdef RA_DEBUG
    tcase_add_test_raise_signal(
        tc, test_config_unit_broken_invariant_aborts_naming_it, SIGABRT);
#else
    tcase_add_test(tc, test_config_unit_assertions_are_compiled_out);
#endif
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

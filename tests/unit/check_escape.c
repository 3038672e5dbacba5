/* Suite "escape (unit)": names and labels made safe for each format. */
#include <check.h>
#include <string.h>

#include "output.h"
#include "testutil.h"

static const struct {
    enum ra__escape_style style;
    const char *want;
} nasty[] = {
    {RA__ESCAPE_TEXT, TU_NASTY_TEXT},
    {RA__ESCAPE_JSON, TU_NASTY_JSON},
    {RA__ESCAPE_PROMETHEUS, TU_NASTY_PROMETHEUS},
};

START_TEST(test_escape_unit_every_awkward_byte_per_style)
{
    char buf[RA__ESCAPED_MAX];
    size_t n = ra__escape(buf, sizeof buf, TU_NASTY, nasty[_i].style);

    ck_assert_str_eq(buf, nasty[_i].want);
    ck_assert_uint_eq(n, strlen(nasty[_i].want));
}
END_TEST

START_TEST(test_escape_unit_plain_names_are_unchanged)
{
    char buf[RA__ESCAPED_MAX];

    for (int style = RA__ESCAPE_TEXT; style <= RA__ESCAPE_PROMETHEUS;
         style++) {
        ck_assert_uint_eq(ra__escape(buf, sizeof buf, "parse-2.tokens_x",
                                     (enum ra__escape_style)style),
                          16);
        ck_assert_str_eq(buf, "parse-2.tokens_x");
    }
}
END_TEST

/* A buffer too small: cut before the escape that does not fit, never in
 * its middle, and always terminated. */
START_TEST(test_escape_unit_cut_before_an_escape)
{
    char buf[8];

    /* Room for 6 bytes: "abcde" and not the 2 of \". */
    ck_assert_uint_eq(ra__escape(buf, 7, "abcde\"fg", RA__ESCAPE_JSON), 5);
    ck_assert_str_eq(buf, "abcde");
    /* Room for 7: "abcd", \" and "f". */
    ck_assert_uint_eq(ra__escape(buf, 8, "abcd\"fg", RA__ESCAPE_JSON), 7);
    ck_assert_str_eq(buf, "abcd\\\"f");
    ck_assert_uint_eq(ra__escape(buf, 1, "abc", RA__ESCAPE_TEXT), 0);
    ck_assert_str_eq(buf, "");
}
END_TEST

/* The longest name escapes whole into RA__ESCAPED_MAX bytes. */
START_TEST(test_escape_unit_longest_name_fits)
{
    char name[RA_TAG_NAME_MAX + 1], buf[RA__ESCAPED_MAX];

    memset(name, '\x01', RA_TAG_NAME_MAX);
    name[RA_TAG_NAME_MAX] = '\0';
    ck_assert_uint_eq(ra__escape(buf, sizeof buf, name, RA__ESCAPE_JSON),
                      6 * RA_TAG_NAME_MAX);
}
END_TEST

START_TEST(test_escape_unit_text_width_counts_characters)
{
    ck_assert_uint_eq(ra__text_width(""), 0);
    ck_assert_uint_eq(ra__text_width("tag"), 3);
    ck_assert_uint_eq(ra__text_width("\xc3\xa9t\xc3\xa9"), 3);
    ck_assert_uint_eq(ra__text_width("\xf0\x9f\x98\x80!"), 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("escape (unit)");
    TCase *tc = tcase_create("styles");

    tcase_add_loop_test(tc, test_escape_unit_every_awkward_byte_per_style, 0,
                        3);
    tcase_add_test(tc, test_escape_unit_plain_names_are_unchanged);
    tcase_add_test(tc, test_escape_unit_cut_before_an_escape);
    tcase_add_test(tc, test_escape_unit_longest_name_fits);
    tcase_add_test(tc, test_escape_unit_text_width_counts_characters);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

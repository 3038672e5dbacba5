/* Suite "format (unit)": human units and the aligned text table. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "testutil.h"
#include "unitutil.h"

static const struct {
    uint64_t bytes;
    const char *want;
} bytes[] = {
    {0, "0 B"},
    {1023, "1023 B"},
    {1024, "1.0 KiB"},
    {1536, "1.5 KiB"},
    {(uint64_t)60800 << 10, "59.4 MiB"},
    {(uint64_t)5 << 29, "2.5 GiB"},
    {(uint64_t)3 << 40, "3072.0 GiB"},
};

static const struct {
    uint64_t ns;
    const char *want;
} durations[] = {
    {250000, "0.25 ms"},
    {150000000, "150 ms"},
    {1210000000, "1.21 s"},
    {42000000000, "42.0 s"},
    {3600000000000, "3600 s"},
};

START_TEST(test_format_unit_human_bytes)
{
    char buf[RA__HUMAN_MAX];

    ck_assert_str_eq(ra__human_bytes(buf, sizeof buf, bytes[_i].bytes),
                     bytes[_i].want);
}
END_TEST

START_TEST(test_format_unit_human_durations)
{
    char buf[RA__HUMAN_MAX];

    ck_assert_str_eq(ra__human_ns(buf, sizeof buf, durations[_i].ns),
                     durations[_i].want);
}
END_TEST

/* A table of three rows: a header, a rule, a row with a wide character;
 * the first column left-aligned, the others right-aligned. */
static void fill(void *ctx, size_t row, struct ra__table_row *out)
{
    static const char *const cells[3][3] = {
        {"tag", "allocated", "n"},
        {NULL, NULL, NULL},
        {"\xc3\xa9t\xc3\xa9", "1.0 KiB", "12345"},
    };

    (void)ctx;
    if (row == 1) {
        out->rule = true;
        return;
    }
    for (unsigned c = 0; c < 3; c++)
        ra__cell_text(out->cell[c], cells[row][c]);
}

START_TEST(test_format_unit_table_aligns_columns)
{
    struct ra__table t = {3, 1u, 3, fill, NULL};
    struct unit_out u;
    char *text;

    uo_open(&u);
    ra__table_write(&u.out, &t);
    text = uo_text(&u);
    ck_assert_str_eq(text, "tag  allocated      n\n"
                           "---------------------\n"
                           "\xc3\xa9t\xc3\xa9    1.0 KiB  12345\n");
    free(text);
}
END_TEST

/* A write that fails is kept and said once, at the end. */
START_TEST(test_format_unit_failed_write_is_eio)
{
    FILE *f = fopen("/dev/null", "r");
    struct ra__out o = RA__OUT_INIT(f, false);

    ck_assert_ptr_nonnull(f);
    ra__out_str(&o, "x");
    ra__out_fmt(&o, "%d", 42);
    errno = 0;
    ck_assert_int_eq(ra__out_finish(&o), -1);
    ck_assert_int_eq(errno, EIO);
    fclose(f);
}
END_TEST

/* A watched child's report on the stderr its tree shares: every line
 * starts with its pid, however the writes cut the lines, and a line cut
 * at the end gets no second prefix when it goes on. */
START_TEST(test_format_unit_prefix_starts_every_line)
{
    static const char head[] = "[pid 42] tag  allocated\n"
                               "[pid 42] work 1.0 KiB\n"
                               "[pid 42] \n"
                               "[pid 42] last";
    const size_t n = RA__OUT_BUF + 100;
    struct unit_out u;
    char *text, *tail = malloc(n);

    ck_assert_ptr_nonnull(tail);
    memset(tail, 'x', n);
    uo_open(&u);
    u.out.prefix = "[pid 42] ";
    ra__out_str(&u.out, "tag  allocated\nwork ");
    ra__out_str(&u.out, "1.0 KiB\n\nlast");
    /* Past the buffer: written straight through, the line going on. */
    ra__out_write(&u.out, tail, n);
    ra__out_str(&u.out, "\nend\n");
    text = uo_text(&u);
    ck_assert_int_eq(strncmp(text, head, sizeof head - 1), 0);
    ck_assert_int_eq(memcmp(text + sizeof head - 1, tail, n), 0);
    ck_assert_str_eq(text + sizeof head - 1 + n, "\n[pid 42] end\n");
    free(tail);
    free(text);
}
END_TEST

START_TEST(test_format_unit_round_count)
{
    ck_assert_uint_eq(ra__round_count(-3.0), 0);
    ck_assert_uint_eq(ra__round_count(0.49), 0);
    ck_assert_uint_eq(ra__round_count(0.5), 1);
    ck_assert_uint_eq(ra__round_count(41.5), 42);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("format (unit)");
    TCase *tc = tcase_create("units");

    tcase_add_loop_test(tc, test_format_unit_human_bytes, 0,
                        sizeof bytes / sizeof bytes[0]);
    tcase_add_loop_test(tc, test_format_unit_human_durations, 0,
                        sizeof durations / sizeof durations[0]);
    tcase_add_test(tc, test_format_unit_round_count);
    suite_add_tcase(s, tc);
    tc = tcase_create("output");
    tcase_add_test(tc, test_format_unit_table_aligns_columns);
    tcase_add_test(tc, test_format_unit_failed_write_is_eio);
    tcase_add_test(tc, test_format_unit_prefix_starts_every_line);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

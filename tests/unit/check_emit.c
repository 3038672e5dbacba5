/* Suite "emit (unit)": the writer of the reports' JSON and Prometheus. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "output.h"
#include "testutil.h"
#include "unitutil.h"

/* Block containers put an item a line, inline ones keep them on one;
 * empty containers close at once; the outermost ends its line. */
START_TEST(test_emit_unit_json_nesting)
{
    struct unit_out u;
    struct ra__emitter e;
    char *text;

    uo_open(&u);
    ra__emit_init(&e, &u.out);
    ra__json_object_begin(&e, NULL, false);
    ra__json_str(&e, "schema", "s-1");
    ra__json_bool(&e, "enabled", true);
    ra__json_array_begin(&e, "empty", false);
    ra__json_array_end(&e);
    ra__json_array_begin(&e, "tags", false);
    for (unsigned i = 1; i <= 2; i++) {
        ra__json_object_begin(&e, NULL, true);
        ra__json_u64(&e, "id", i);
        ra__json_array_begin(&e, "v", true);
        ra__json_u64(&e, NULL, 10 * i);
        ra__json_u64(&e, NULL, UINT64_MAX);
        ra__json_array_end(&e);
        ra__json_object_end(&e);
    }
    ra__json_array_end(&e);
    ra__json_object_begin(&e, "one", true);
    ra__json_bool(&e, "off", false);
    ra__json_object_end(&e);
    ra__json_object_end(&e);
    text = uo_text(&u);
    ck_assert_str_eq(text,
                     "{\n"
                     "  \"schema\": \"s-1\",\n"
                     "  \"enabled\": true,\n"
                     "  \"empty\": [],\n"
                     "  \"tags\": [\n"
                     "    {\"id\": 1, \"v\": [10, 18446744073709551615]},\n"
                     "    {\"id\": 2, \"v\": [20, 18446744073709551615]}\n"
                     "  ],\n"
                     "  \"one\": {\"off\": false}\n"
                     "}\n");
    free(text);
}
END_TEST

/* What fill writes in an inline object, as a string to free(). */
static char *inline_object(void (*fill)(struct ra__emitter *e))
{
    struct unit_out u;
    struct ra__emitter e;

    uo_open(&u);
    ra__emit_init(&e, &u.out);
    ra__json_object_begin(&e, NULL, true);
    fill(&e);
    ra__json_object_end(&e);
    return uo_text(&u);
}

static void fill_nasty_string(struct ra__emitter *e)
{
    ra__json_str(e, "name", TU_NASTY);
}

START_TEST(test_emit_unit_json_strings_are_escaped)
{
    char *text = inline_object(fill_nasty_string);

    ck_assert_str_eq(text, "{\"name\": \"" TU_NASTY_JSON "\"}\n");
    free(text);
}
END_TEST

/* Bytes that JSON cannot keep (not UTF-8: a parser reads each such byte
 * as the character of its value) come with their hex beside the string;
 * valid UTF-8, control bytes and escapes included, does not. */
static void fill_byte_strings(struct ra__emitter *e)
{
    ra__json_bytes(e, "name", "name_hex", "\xff\xfe-bin");
    ra__json_bytes(e, "utf8", "utf8_hex",
                   "\xc3\xbf\xc3\xbe-bin\x01\x7f\\u0080");
    ra__json_bytes(e, "nasty", "nasty_hex", TU_NASTY);
    ra__json_bytes(e, "empty", "empty_hex", "");
}

START_TEST(test_emit_unit_json_bytes_beside_strings_that_lose_them)
{
    char *text = inline_object(fill_byte_strings);

    ck_assert_str_eq(text,
                     "{\"name\": \"\\u00ff\\u00fe-bin\", "
                     "\"name_hex\": \"fffe2d62696e\", "
                     "\"utf8\": "
                     "\"\xc3\xbf\xc3\xbe-bin\\u0001\\u007f\\\\u0080\", "
                     "\"nasty\": \"" TU_NASTY_JSON "\", "
                     "\"nasty_hex\": \"73702061636522712573256e5c620a6e09"
                     "74017fc3a9e282acffc0afeda080f09f9880e282\", "
                     "\"empty\": \"\"}\n");
    free(text);
}
END_TEST

START_TEST(test_emit_unit_prometheus_samples)
{
    struct ra__prom_label labels[] = {{"seq", "7"}, {"tag", TU_NASTY}};
    struct unit_out u;
    struct ra__emitter e;
    char *text;

    uo_open(&u);
    ra__emit_init(&e, &u.out);
    ra__prom_family(&e, "x_bytes", "gauge", "Some bytes.");
    ra__prom_sample(&e, "x_bytes", NULL, 0, 12);
    ra__prom_sample(&e, "x_bytes", labels, 2, UINT64_MAX);
    ra__prom_sample_seconds(&e, "x_seconds", labels, 1, 1500000001);
    text = uo_text(&u);
    ck_assert_str_eq(text, "# HELP x_bytes Some bytes.\n"
                           "# TYPE x_bytes gauge\n"
                           "x_bytes 12\n"
                           "x_bytes{seq=\"7\",tag=\"" TU_NASTY_PROMETHEUS
                           "\"} 18446744073709551615\n"
                           "x_seconds{seq=\"7\"} 1.500000001\n");
    free(text);
}
END_TEST

START_TEST(test_emit_unit_cells)
{
    char cell[RA__CELL_MAX];

    ra__cell_text(cell, "-");
    ck_assert_str_eq(cell, "-");
    ra__cell_name(cell, TU_NASTY);
    ck_assert_str_eq(cell, TU_NASTY_TEXT);
    ra__cell_bytes(cell, 1536);
    ck_assert_str_eq(cell, "1.5 KiB");
    ra__cell_count(cell, UINT64_MAX);
    ck_assert_str_eq(cell, "18446744073709551615");
    ra__cell_ns(cell, 150000000);
    ck_assert_str_eq(cell, "150 ms");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("emit (unit)");
    TCase *tc = tcase_create("documents");

    tcase_add_test(tc, test_emit_unit_json_nesting);
    tcase_add_test(tc, test_emit_unit_json_strings_are_escaped);
    tcase_add_test(tc,
                   test_emit_unit_json_bytes_beside_strings_that_lose_them);
    tcase_add_test(tc, test_emit_unit_prometheus_samples);
    tcase_add_test(tc, test_emit_unit_cells);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

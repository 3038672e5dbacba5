/* Suite "prof_dump": ra_prof_dump's errors and the structure of each format
 * on a real profile: call sites of this file, profiled at interval 1 so
 * that every figure is exact. tests/test_prof_tools.sh reads the formats
 * with jeprof, pprof and a protobuf decoder. Linked with -export-dynamic:
 * dladdr names the sites. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "regionalloc.h"
#include "testutil.h"

#define MAX_BLOCKS 256

static void *blocks[MAX_BLOCKS];
static size_t nblocks;

/* No assertion inside a site (a passing one allocates): a NULL is kept
 * for check_blocks. */
#define SITE_ON_NULL(name) (void)0
#include "prof_sites.h"

DEFINE_SITE(prof_site_alpha)
DEFINE_SITE(prof_site_beta)
DEFINE_SITE(prof_site_gamma)

static void check_blocks(void)
{
    for (size_t i = 0; i < nblocks; i++)
        ck_assert_ptr_nonnull(blocks[i]);
}

/* ra_prof_dump(fmt, tag) must fail with err, writing nothing. */
static void expect_error(FILE *f, ra_prof_format_t fmt, ra_tag_t tag,
                         int err)
{
    errno = 0;
    ck_assert_int_eq(ra_prof_dump(f, fmt, tag), -1);
    ck_assert_int_eq(errno, err);
}

/* The standard profile of this suite: tag "a" holds 10 blocks of 1000
 * bytes from prof_site_alpha and 7 of 100 from prof_site_gamma; tag "b" 3
 * of 5000 from prof_site_beta. Exported, like the sites, so that dladdr
 * names it as their caller (Check's test functions are static). */
static ra_tag_t tag_a, tag_b;

__attribute__((noinline)) void profile_three_sites(void);
__attribute__((noinline)) void profile_three_sites(void)
{
    tag_a = tu_tag_create("a");
    tag_b = tu_tag_create("b");
    ck_assert_int_eq(ra_prof_start(1), 0);
    prof_site_alpha(tag_a, 10, 1000);
    prof_site_beta(tag_b, 3, 5000);
    prof_site_gamma(tag_a, 7, 100);
    check_blocks();
    __asm__ volatile("" ::: "memory");
}

/* The folded line of site (its innermost frame) in doc, or NULL. */
static const char *folded_line(const char *doc, const char *site)
{
    const char *p = tu_find_frame(doc, ";", site);

    if (p == NULL)
        return NULL;
    while (p > doc && p[-1] != '\n')
        p--;
    return p;
}

/* The count at the end of the line at line. */
static uint64_t line_count(const char *line)
{
    const char *end = strchr(line, '\n');
    const char *space;

    ck_assert_ptr_nonnull(end);
    for (space = end; space > line && space[-1] != ' '; space--)
        ;
    ck_assert_ptr_ne(space, line);
    return strtoull(space, NULL, 10);
}

/* Check has no ck_assert_ptr_lt. */
#define assert_before(a, b) ck_assert((const char *)(a) < (const char *)(b))

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* -- errors ------------------------------------------------------------------- */

START_TEST(test_prof_dump_rejects_bad_arguments)
{
    FILE *f = fopen("/dev/null", "w");
    ra_tag_t t = tu_tag_create("t");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ra_prof_start(1), 0);
    expect_error(NULL, RA_PROF_FOLDED, RA_TAG_ALL, EINVAL);
    expect_error(f, (ra_prof_format_t)(RA_PROF_HEAP_V2 + 1), RA_TAG_ALL,
                 EINVAL);
    expect_error(f, (ra_prof_format_t)-1, RA_TAG_ALL, EINVAL);
    expect_error(f, RA_PROF_TREE, RA_TAG_NONE, EINVAL);
    expect_error(f, RA_PROF_TREE, t + 1, EINVAL);
    expect_error(f, RA_PROF_TREE, RA_TAG_ALL - 1, EINVAL);
    ck_assert_int_eq(ra_prof_dump(f, RA_PROF_TREE, t), 0);
    ck_assert_int_eq(fclose(f), 0);
}
END_TEST

START_TEST(test_prof_dump_before_start_is_enotsup)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ra_tag_t t = tu_tag_create("t");

    ck_assert_ptr_nonnull(f);
    for (int fmt = RA_PROF_TREE; fmt <= RA_PROF_HEAP_V2; fmt++) {
        expect_error(f, (ra_prof_format_t)fmt, RA_TAG_ALL, ENOTSUP);
        expect_error(f, (ra_prof_format_t)fmt, t, ENOTSUP);
    }
    /* Bad arguments are found first. */
    expect_error(f, RA_PROF_TREE, t + 1, EINVAL);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_uint_eq(len, 0);
    free(buf);
}
END_TEST

START_TEST(test_prof_dump_write_error_is_eio)
{
    profile_three_sites();
    for (int fmt = RA_PROF_TREE; fmt <= RA_PROF_HEAP_V2; fmt++) {
        FILE *full = fopen("/dev/full", "w");
        ck_assert_ptr_nonnull(full);
        expect_error(full, (ra_prof_format_t)fmt, RA_TAG_ALL, EIO);
        fclose(full);
    }
}
END_TEST

START_TEST(test_prof_dump_after_stop_keeps_the_profile)
{
    char *doc;

    profile_three_sites();
    ck_assert_int_eq(ra_prof_stop(), 0);
    /* Not sampled: the profiler is stopped. */
    prof_site_alpha(tag_a, 5, 1000);
    check_blocks();
    doc = tu_prof_dump_string(RA_PROF_FOLDED, RA_TAG_ALL, NULL);
    ck_assert_ptr_nonnull(folded_line(doc, "prof_site_alpha"));
    ck_assert_uint_eq(line_count(folded_line(doc, "prof_site_alpha")),
                      10000);
    free(doc);
}
END_TEST

/* -- folded stacks ---------------------------------------------------------------- */

START_TEST(test_prof_dump_folded_lines_name_sites_with_exact_bytes)
{
    char *doc;
    const char *line;
    unsigned lines;

    profile_three_sites();
    doc = tu_prof_dump_string(RA_PROF_FOLDED, RA_TAG_ALL, NULL);
    lines = tu_count_lines(doc);
    ck_assert_uint_eq(lines, 3);
    line = folded_line(doc, "prof_site_alpha");
    ck_assert_msg(line != NULL && starts_with(line, "tag:a;"), "%s", doc);
    ck_assert_uint_eq(line_count(line), 10 * 1000);
    line = folded_line(doc, "prof_site_beta");
    ck_assert_msg(line != NULL && starts_with(line, "tag:b;"), "%s", doc);
    ck_assert_uint_eq(line_count(line), 3 * 5000);
    line = folded_line(doc, "prof_site_gamma");
    ck_assert_msg(line != NULL && starts_with(line, "tag:a;"), "%s", doc);
    ck_assert_uint_eq(line_count(line), 7 * 100);
    /* The innermost frame ends the stack, right before the count; its
     * caller is just left of it. */
    ck_assert_ptr_nonnull(tu_find_frame(line, ";", "profile_three_sites"));
    assert_before(tu_find_frame(line, ";", "profile_three_sites"),
                  tu_find_frame(line, ";", "prof_site_gamma"));
    /* Every line: the tag, without spaces, then frames (which may hold
     * spaces, never ';'), then a space and the count; no empty frame. */
    for (const char *p = doc; *p != '\0'; p = strchr(p, '\n') + 1) {
        const char *end = strchr(p, '\n'), *semi = strchr(p, ';'), *space;
        ck_assert_ptr_nonnull(end);
        ck_assert_ptr_nonnull(semi);
        assert_before(semi, end);
        ck_assert_ptr_eq(memchr(p, ' ', (size_t)(semi - p)), NULL);
        for (space = end; space > semi && *space != ' '; space--)
            ;
        ck_assert_ptr_ne(space, semi);
        ck_assert_uint_eq(strspn(space + 1, "0123456789"),
                          (size_t)(end - space - 1));
    }
    ck_assert_ptr_null(strstr(doc, ";;"));
    free(doc);
}
END_TEST

START_TEST(test_prof_dump_folded_freed_blocks_leave)
{
    char *doc;

    profile_three_sites();
    /* Half of alpha's blocks, all of beta's. */
    for (size_t i = 0; i < 5; i++)
        ra_free(blocks[i]);
    for (size_t i = 10; i < 13; i++)
        ra_free(blocks[i]);
    doc = tu_prof_dump_string(RA_PROF_FOLDED, RA_TAG_ALL, NULL);
    ck_assert_uint_eq(tu_count_lines(doc), 2);
    ck_assert_uint_eq(line_count(folded_line(doc, "prof_site_alpha")), 5000);
    ck_assert_ptr_null(folded_line(doc, "prof_site_beta"));
    free(doc);
}
END_TEST

START_TEST(test_prof_dump_folded_escapes_tag_names)
{
    ra_tag_t t = tu_tag_create("x y;z\nw\tv");
    char *doc;

    ck_assert_int_eq(ra_prof_start(1), 0);
    prof_site_alpha(t, 2, 64);
    check_blocks();
    doc = tu_prof_dump_string(RA_PROF_FOLDED, t, NULL);
    ck_assert_uint_eq(tu_count_lines(doc), 1);
    /* Escaped as in the text reports (\n, \t), then ';' and ' ' as '_'. */
    ck_assert_msg(starts_with(doc, "tag:x_y_z\\nw\\tv;"), "%s", doc);
    ck_assert_uint_eq(line_count(doc), 128);
    free(doc);
}
END_TEST

START_TEST(test_prof_dump_one_tag_only)
{
    char *doc;

    profile_three_sites();
    doc = tu_prof_dump_string(RA_PROF_FOLDED, tag_b, NULL);
    ck_assert_uint_eq(tu_count_lines(doc), 1);
    ck_assert_msg(starts_with(doc, "tag:b;"), "%s", doc);
    ck_assert_ptr_nonnull(folded_line(doc, "prof_site_beta"));
    free(doc);
}
END_TEST

/* -- tree ----------------------------------------------------------------------------- */

START_TEST(test_prof_dump_tree_has_totals_and_sites_largest_first)
{
    char *doc;
    const char *a, *b, *alpha, *gamma, *beta;

    profile_three_sites();
    doc = tu_prof_dump_string(RA_PROF_TREE, RA_TAG_ALL, NULL);
    ck_assert_msg(starts_with(doc, "tag a\nAll (10700, #17)\n"), "%s", doc);
    a = doc;
    b = strstr(doc, "\n\ntag b\nAll (15000, #3)\n");
    ck_assert_msg(b != NULL, "%s", doc);
    alpha = tu_find_frame(doc, "\n |-- ", "prof_site_alpha");
    gamma = tu_find_frame(doc, "\n \\-- ", "prof_site_gamma");
    beta = tu_find_frame(doc, "\n \\-- ", "prof_site_beta");
    ck_assert_msg(alpha != NULL && gamma != NULL && beta != NULL, "%s", doc);
    assert_before(a, alpha);
    assert_before(alpha, gamma);
    assert_before(gamma, b);
    assert_before(b, beta);
    ck_assert_ptr_nonnull(strstr(alpha, " (10000, #10)\n"));
    assert_before(strstr(alpha, " (10000, #10)\n"), gamma);
    ck_assert_ptr_nonnull(strstr(gamma, " (700, #7)\n"));
    ck_assert_ptr_nonnull(strstr(beta, " (15000, #3)\n"));
    /* A caller with the same figures is the next line, under the site. */
    ck_assert_ptr_nonnull(tu_find_frame(beta, "\n     ", "profile_three_sites"));
    /* No trailing blanks. */
    ck_assert_ptr_null(strstr(doc, " \n"));
    free(doc);
}
END_TEST

START_TEST(test_prof_dump_tree_of_a_tag_without_samples)
{
    ra_tag_t t;
    char *doc;

    profile_three_sites();
    t = tu_tag_create("quiet");
    doc = tu_prof_dump_string(RA_PROF_TREE, t, NULL);
    ck_assert_str_eq(doc, "tag quiet\nAll (0, #0)\n");
    free(doc);
}
END_TEST

/* -- heap_v2 ---------------------------------------------------------------------------- */

START_TEST(test_prof_dump_heap_v2_has_raw_counts_stacks_and_maps)
{
    char *doc;
    const char *p;
    unsigned stacks = 0;

    profile_three_sites();
    ra_free(blocks[0]);
    doc = tu_prof_dump_string(RA_PROF_HEAP_V2, RA_TAG_ALL, NULL);
    ck_assert_msg(starts_with(doc, "heap_v2/1\n"
                                   "  t*: 19: 24700 [20: 25700]\n@ 0x"),
                  "%.300s", doc);
    p = strstr(doc, "\n\nMAPPED_LIBRARIES:\n");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(strstr(p, "r-xp"));
    for (const char *q = strstr(doc, "\n@ 0x"); q != NULL && q < p;
         q = strstr(q + 1, "\n@ 0x")) {
        const char *counts = strchr(q + 1, '\n');
        ck_assert(starts_with(counts, "\n  t*: "));
        stacks++;
    }
    ck_assert_uint_eq(stacks, 3);
    ck_assert_ptr_nonnull(strstr(doc, "\n  t*: 9: 9000 [10: 10000]\n"));
    ck_assert_ptr_nonnull(strstr(doc, "\n  t*: 3: 15000 [3: 15000]\n"));
    ck_assert_ptr_nonnull(strstr(doc, "\n  t*: 7: 700 [7: 700]\n"));
    free(doc);
}
END_TEST

START_TEST(test_prof_dump_heap_v2_header_names_the_interval)
{
    char *doc;

    ck_assert_int_eq(ra_prof_start(65536), 0);
    doc = tu_prof_dump_string(RA_PROF_HEAP_V2, RA_TAG_ALL, NULL);
    ck_assert_msg(starts_with(doc, "heap_v2/65536\n  t*: 0: 0 [0: 0]\n"),
                  "%s", doc);
    free(doc);
}
END_TEST

/* -- pprof -------------------------------------------------------------------------------- */

/* doc (len bytes, gzip) inflated; NUL-terminated; *out_len its length. */
static unsigned char *gunzip(const char *doc, size_t len, size_t *out_len)
{
    z_stream zs;
    size_t cap = 1 << 16;
    unsigned char *out = malloc(cap + 1);
    int rc;

    ck_assert_ptr_nonnull(out);
    memset(&zs, 0, sizeof zs);
    ck_assert_int_eq(inflateInit2(&zs, 15 + 16), Z_OK);
    zs.next_in = (unsigned char *)doc;
    zs.avail_in = (uInt)len;
    do {
        if (zs.total_out == cap) {
            cap *= 2;
            out = realloc(out, cap + 1);
            ck_assert_ptr_nonnull(out);
        }
        zs.next_out = out + zs.total_out;
        zs.avail_out = (uInt)(cap - zs.total_out);
        rc = inflate(&zs, Z_NO_FLUSH);
        ck_assert_msg(rc == Z_OK || rc == Z_STREAM_END, "inflate: %d", rc);
    } while (rc != Z_STREAM_END);
    ck_assert_uint_eq(zs.avail_in, 0);
    *out_len = zs.total_out;
    out[*out_len] = '\0';
    inflateEnd(&zs);
    return out;
}

static bool has_bytes(const unsigned char *doc, size_t len, const char *s)
{
    return memmem(doc, len, s, strlen(s)) != NULL;
}

START_TEST(test_prof_dump_pprof_is_gzip_with_types_tags_and_sites)
{
    static const char *const strings[] = {
        "alloc_objects", "alloc_space", "inuse_objects", "inuse_space",
        "count",         "bytes",       "space",         "tag",
        "prof_site_alpha", "prof_site_beta", "prof_site_gamma"};
    size_t len, raw_len;
    char *doc;
    unsigned char *raw;

    profile_three_sites();
    doc = tu_prof_dump_string(RA_PROF_PPROF, RA_TAG_ALL, &len);
    ck_assert_uint_ge(len, 18);
    ck_assert_uint_eq((unsigned char)doc[0], 0x1f);
    ck_assert_uint_eq((unsigned char)doc[1], 0x8b);
    raw = gunzip(doc, len, &raw_len);
    /* string_table[0] = "": field 6, length 0. */
    ck_assert(has_bytes(raw, raw_len, "\x32"));
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        ck_assert_msg(has_bytes(raw, raw_len, strings[i]), "no \"%s\"",
                      strings[i]);
    /* The tag names as label values: strings "a" and "b" (field 6). */
    ck_assert(has_bytes(raw, raw_len, "\x32\x01" "a"));
    ck_assert(has_bytes(raw, raw_len, "\x32\x01" "b"));
    free(raw);
    free(doc);
}
END_TEST

/* -- loading libdw ------------------------------------------------------------------ */

#ifdef RA_LIBDW
#define LIBDW_SONAME RA_DW_SONAME
#else
#define LIBDW_SONAME "libdw.so.1"
#endif

/* Whether libdw and libelf are both mapped (false: neither is). */
static bool libdw_mapped(void)
{
    bool dw = tu_object_mapped("libdw"), elf = tu_object_mapped("libelf");

    ck_assert_int_eq(dw, elf);
    return dw;
}

/* A process that profiles but names no frame maps neither libdw nor
 * libelf; the first dump loads them (built with libdw). */
START_TEST(test_prof_dump_loads_libdw_at_the_first_dump)
{
    char *doc;

    profile_three_sites();
    ck_assert_msg(!libdw_mapped(), "libdw is mapped before any dump");
    doc = tu_prof_dump_string(RA_PROF_FOLDED, RA_TAG_ALL, NULL);
#ifdef RA_LIBDW
    ck_assert_msg(libdw_mapped(), "a dump did not load libdw");
    ck_assert_ptr_nonnull(strstr(doc, "prof_site_alpha ("));
#else
    ck_assert(!libdw_mapped());
#endif
    free(doc);
}
END_TEST

/* REGIONALLOC_PROF_DUMP: the dump at exit loads nothing, so the profiler's
 * start does. */
static int child_profiler_of_a_dump_at_exit(void)
{
    TU_REQUIRE(!tu_object_mapped("libdw"));
    TU_REQUIRE(ra_prof_start(1) == 0);
#ifdef RA_LIBDW
    TU_REQUIRE(tu_object_mapped("libdw") && tu_object_mapped("libelf"));
#else
    TU_REQUIRE(!tu_object_mapped("libdw"));
#endif
    return 0;
}

START_TEST(test_prof_dump_at_exit_loads_libdw_when_the_profiler_starts)
{
    static const char *const env[] = {"REGIONALLOC_PROF_DUMP=/dev/null",
                                      NULL};
    char err[2048];

    ck_assert_msg(tu_exec_self(env, "dump-at-exit", err, sizeof err) == 0,
                  "%s", err);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
}
END_TEST

/* libdw cannot be loaded: every dump works, its frames named by dladdr
 * (exported functions and offsets, no file or line). */
static int child_dumps_without_libdw(void)
{
    ra_tag_t tag = ra_tag_create("a");
    char *doc = NULL;
    size_t len = 0;

    TU_REQUIRE(tag != RA_TAG_NONE && ra_prof_start(1) == 0);
    prof_site_alpha(tag, 10, 1000);
    for (int i = 0; i < 2; i++) {
        FILE *f = open_memstream(&doc, &len);
        TU_REQUIRE(f != NULL);
        TU_REQUIRE(ra_prof_dump(f, RA_PROF_FOLDED, RA_TAG_ALL) == 0);
        TU_REQUIRE(fclose(f) == 0);
        TU_REQUIRE(strstr(doc, ";prof_site_alpha+0x") != NULL &&
                   strstr(doc, " 10000\n") != NULL);
        free(doc);
    }
    TU_REQUIRE(!tu_object_mapped("libdw"));
    return 0;
}

START_TEST(test_prof_dump_names_frames_by_dladdr_when_libdw_cannot_load)
{
    char err[2048];

    ck_assert_msg(tu_exec_self_with_broken(LIBDW_SONAME, NULL, "without-libdw",
                                           err, sizeof err) == 0,
                  "%s", err);
#ifdef RA_LIBDW
    ck_assert_msg(tu_count_lines(err) == 1 &&
                      strstr(err, "regionalloc: cannot load " RA_DW_SONAME) !=
                          NULL,
                  "stderr: %s", err);
#else
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
#endif
}
END_TEST

static const struct tu_child children[] = {
    {"dump-at-exit", child_profiler_of_a_dump_at_exit},
    {"without-libdw", child_dumps_without_libdw},
    {NULL, NULL},
};

static Suite *prof_dump_suite(void)
{
    Suite *s = suite_create("prof_dump");
    TCase *tc;

    tc = tcase_create("errors");
    tcase_add_test(tc, test_prof_dump_rejects_bad_arguments);
    tcase_add_test(tc, test_prof_dump_before_start_is_enotsup);
    tcase_add_test(tc, test_prof_dump_write_error_is_eio);
    tcase_add_test(tc, test_prof_dump_after_stop_keeps_the_profile);
    suite_add_tcase(s, tc);

    tc = tcase_create("folded stacks");
    tcase_add_test(tc, test_prof_dump_folded_lines_name_sites_with_exact_bytes);
    tcase_add_test(tc, test_prof_dump_folded_freed_blocks_leave);
    tcase_add_test(tc, test_prof_dump_folded_escapes_tag_names);
    tcase_add_test(tc, test_prof_dump_one_tag_only);
    suite_add_tcase(s, tc);

    tc = tcase_create("tree");
    tcase_add_test(tc, test_prof_dump_tree_has_totals_and_sites_largest_first);
    tcase_add_test(tc, test_prof_dump_tree_of_a_tag_without_samples);
    suite_add_tcase(s, tc);

    tc = tcase_create("heap_v2");
    tcase_add_test(tc, test_prof_dump_heap_v2_has_raw_counts_stacks_and_maps);
    tcase_add_test(tc, test_prof_dump_heap_v2_header_names_the_interval);
    suite_add_tcase(s, tc);

    tc = tcase_create("pprof");
    tcase_add_test(tc, test_prof_dump_pprof_is_gzip_with_types_tags_and_sites);
    suite_add_tcase(s, tc);

    tc = tcase_create("loading libdw");
    tcase_add_test(tc, test_prof_dump_loads_libdw_at_the_first_dump);
    suite_add_tcase(s, tc);

    tc = tcase_create("loading libdw, in a new process");
    tcase_add_test(tc,
                   test_prof_dump_at_exit_loads_libdw_when_the_profiler_starts);
    tcase_add_test(tc,
                   test_prof_dump_names_frames_by_dladdr_when_libdw_cannot_load);
    /* Exact about stderr, which a sanitizer's address space changes. */
    tcase_set_tags(tc, "exact-stderr");
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    tu_child_main(argc, argv, children);
    return tu_run_suite(prof_dump_suite());
}

/* Suite "snapshot (unit)": a snapshot is one consistent view of the tag
 * tree, whatever is destroyed and recycled while it is taken.
 *
 * The test recycles a parent and its child into each other's ids in the
 * middle of a snapshot: the link wraps ra__stats_read (the snapshot reads
 * the figures of each tag through it) and ra_tag_parent (which a snapshot
 * that read the parents one by one called), and the first call of either
 * during the test swaps the tree. Read one at a time, the two parents
 * named each other: a cycle, which left entries of the tree order
 * unwritten and the JSON report reading them. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "testutil.h"
#include "unitutil.h"

void __real_ra__stats_read(ra_tag_t tag, ra_tag_stats_t *out);
ra_tag_t __real_ra_tag_parent(ra_tag_t tag);

/* Where the swap happens: while the figures are read, or between two
 * reads of parents (a snapshot that reads them one by one). */
enum { IN_FIGURES, BETWEEN_PARENTS } swap_at;
static bool armed;

/* Ids 1 and 2 as a child and its parent, the other way round from how
 * swap_tree leaves them: destroyed ids are handed out oldest first, and a
 * destroy frees a child's id before its parent's. */
static void make_tree(const char *parent, const char *child)
{
    ra_tag_t p = ra_tag_create(parent);

    ck_assert_uint_ne(p, RA_TAG_NONE);
    ck_assert_uint_ne(ra_tag_create_in(p, child), RA_TAG_NONE);
}

static void swap_tree(void)
{
    armed = false;
    ck_assert_int_eq(ra_tag_destroy(ra_tag_lookup("request")), 0);
    make_tree("next", "next-sub");
}

void __wrap_ra__stats_read(ra_tag_t tag, ra_tag_stats_t *out)
{
    if (armed && swap_at == IN_FIGURES && tag != RA_TAG_NONE)
        swap_tree();
    __real_ra__stats_read(tag, out);
}

ra_tag_t __wrap_ra_tag_parent(ra_tag_t tag)
{
    ra_tag_t parent = __real_ra_tag_parent(tag);

    if (armed && swap_at == BETWEEN_PARENTS)
        swap_tree();
    return parent;
}

/* request (id 2) with its child sub (id 1), the swap armed. */
static void set_up(void)
{
    make_tree("old", "old-sub");
    ck_assert_int_eq(ra_tag_destroy(ra_tag_lookup("old")), 0);
    make_tree("request", "sub");
    ck_assert_uint_eq(ra_tag_lookup("request"), 2);
    ck_assert_uint_eq(ra_tag_parent(1), 2);
    armed = true;
}

/* The order is every row once, each after its parent; no row shows the
 * figures of an id's heir under its holder's name. */
static void check_one_view(void)
{
    struct ra__snapshot snap;
    bool *seen;

    ck_assert(!ra__snapshot_take(&snap, false));
    seen = calloc(snap.ntags + 1, sizeof *seen);
    for (unsigned k = 1; k <= snap.ntags; k++) {
        unsigned r = snap.order[k];
        ck_assert_uint_ge(r, 1);
        ck_assert_uint_le(r, snap.ntags);
        ck_assert(!seen[r]);
        ck_assert(snap.rows[r].parent_row == 0 ||
                  seen[snap.rows[r].parent_row]);
        seen[r] = true;
    }
    if (swap_at == IN_FIGURES) {
        /* Both ids changed holder while the figures were read. */
        ck_assert(!armed);
        for (unsigned r = 1; r <= snap.ntags; r++)
            ck_assert_msg(strcmp(snap.rows[r].name, "request") != 0 &&
                              strcmp(snap.rows[r].name, "sub") != 0,
                          "row %u: %s", r, snap.rows[r].name);
    }
    free(seen);
    ra__snapshot_free(&snap);
}

START_TEST(test_snapshot_unit_recycled_while_figures_are_read)
{
    swap_at = IN_FIGURES;
    set_up();
    check_one_view();
}
END_TEST

START_TEST(test_snapshot_unit_recycled_between_two_parents)
{
    swap_at = BETWEEN_PARENTS;
    set_up();
    check_one_view();
}
END_TEST

START_TEST(test_snapshot_unit_the_json_report_of_a_recycled_tree)
{
    struct unit_out u;
    char *text;

    swap_at = BETWEEN_PARENTS;
    set_up();
    uo_open(&u);
    ra__report_write(&u.out, RA_FORMAT_JSON, RA_REPORT_ALL_TAGS);
    text = uo_text(&u);
    ck_assert_ptr_nonnull(strstr(text, "\"tags\""));
    free(text);
}
END_TEST

/* Without a swap, the tree is the registry's. */
START_TEST(test_snapshot_unit_a_quiet_tree_is_shown_whole)
{
    struct ra__snapshot snap;

    make_tree("request", "sub");
    ck_assert(!ra__snapshot_take(&snap, false));
    ck_assert_uint_eq(snap.ntags, 2);
    ck_assert_uint_eq(snap.order[1], 1);
    ck_assert_str_eq(snap.rows[1].name, "request");
    ck_assert_uint_eq(snap.rows[2].parent_row, 1);
    ck_assert_uint_eq(snap.rows[2].depth, 2);
    ra__snapshot_free(&snap);
}
END_TEST

static Suite *snapshot_suite(void)
{
    Suite *s = suite_create("snapshot (unit)");
    TCase *tc = tcase_create("recycled ids");

    tcase_add_test(tc, test_snapshot_unit_recycled_while_figures_are_read);
    tcase_add_test(tc, test_snapshot_unit_recycled_between_two_parents);
    tcase_add_test(tc, test_snapshot_unit_the_json_report_of_a_recycled_tree);
    tcase_add_test(tc, test_snapshot_unit_a_quiet_tree_is_shown_whole);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(snapshot_suite());
}

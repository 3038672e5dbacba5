/* Suite "listing (unit)": which tags a report lists, over snapshots made
 * by hand: the largest by their subtrees' resident bytes, ties to the
 * earlier in the tree's order, every listed tag's parent listed, the
 * others rolled up under the nearest listed tag above them with their
 * figures summed, and the lines in the order the text shows them. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "testutil.h"
#include "unitutil.h"

#define MAX_ROWS 400

/* A snapshot of n tags (rows 1..n) whose parents are parent[] (rows, 0:
 * the top level; a parent's row below its children's) and whose own
 * resident bytes are resident[]; allocated is 1000 times the row, mapped
 * 10 times resident. */
struct fake {
    struct ra__snapshot snap;
    struct ra__usage rows[MAX_ROWS + 1];
    unsigned order[MAX_ROWS + 1];
};

static void place(struct fake *f, unsigned r, unsigned *n)
{
    f->order[++*n] = r;
    for (unsigned c = 1; c <= f->snap.ntags; c++)
        if (f->rows[c].parent_row == r)
            place(f, c, n);
}

static void make_fake(struct fake *f, unsigned n, const unsigned *parent,
                      const uint64_t *resident)
{
    unsigned placed = 0;

    ck_assert_uint_le(n, MAX_ROWS);
    memset(f, 0, sizeof *f);
    f->snap.ntags = n;
    f->snap.rows = f->rows;
    f->snap.order = f->order;
    for (unsigned r = 1; r <= n; r++) {
        struct ra__usage *u = &f->rows[r];
        u->id = r;
        snprintf(u->name, sizeof u->name, "t%u", r);
        u->parent_row = parent != NULL ? parent[r] : 0;
        u->resident = resident[r];
        u->allocated = 1000 * (uint64_t)r;
        u->mapped = 10 * resident[r];
        u->nmalloc = 1;
        u->peak_mapped = u->limit = 77; /* never summed */
    }
    for (unsigned r = 1; r <= n; r++) {
        unsigned depth = 0;
        for (unsigned a = r; a != 0; a = f->rows[a].parent_row, depth++) {
            f->rows[a].tree.resident += f->rows[r].resident;
            f->rows[a].tree.allocated += f->rows[r].allocated;
        }
        f->rows[r].depth = depth;
    }
    for (unsigned r = 1; r <= n; r++)
        if (f->rows[r].parent_row == 0)
            place(f, r, &placed);
    ck_assert_uint_eq(placed, n);
}

/* The rows of l's lines, a roll-up written as 1000 + its parent's row. */
static void lines_of(const struct ra__listing *l, unsigned *out)
{
    for (unsigned i = 0; i < l->nlines; i++)
        out[i] = l->lines[i].row != 0
                     ? l->lines[i].row
                     : 1000 + l->rollups[l->lines[i].rollup].parent_row;
}

static struct fake fake;
/* The places of fake's rows in the tree's order. */
static unsigned pos[MAX_ROWS + 1];

/* Whether row a ranks above row b: a larger subtree, or as large and
 * earlier. */
static bool ranks_above(unsigned a, unsigned b, const unsigned *place)
{
    uint64_t x = fake.rows[a].tree.resident, y = fake.rows[b].tree.resident;

    return x > y || (x == y && place[a] < place[b]);
}

/* Whether line j of l is under row p: a tag below it, or a roll-up under
 * it or below it. */
static bool line_under(const struct ra__listing *l, unsigned j, unsigned p,
                       const unsigned *parent)
{
    unsigned a = l->lines[j].row != 0
                     ? parent[l->lines[j].row]
                     : l->rollups[l->lines[j].rollup].parent_row;

    while (a != 0 && a != p)
        a = parent[a];
    return a == p;
}

START_TEST(test_listing_unit_every_tag_in_the_trees_order)
{
    static const unsigned parent[] = {0, 0, 1, 0, 3, 1};
    static const uint64_t resident[] = {0, 5, 9, 1, 9, 7};
    struct ra__listing l;

    make_fake(&fake, 5, parent, resident);
    ck_assert(!ra__listing_make(&l, &fake.snap, RA_REPORT_ALL_TAGS));
    ck_assert(!l.cut);
    ck_assert_uint_eq(l.nlines, 5);
    ck_assert_uint_eq(l.nrollups, 0);
    ck_assert_uint_eq(l.rest.tags, 0);
    for (unsigned i = 0; i < 5; i++)
        ck_assert_uint_eq(l.lines[i].row, fake.order[i + 1]);
    ck_assert(l.has_children[1] && l.has_children[3]);
    ck_assert(!l.has_children[2] && !l.has_children[4] && !l.has_children[5]);
    ra__listing_free(&l);
}
END_TEST

START_TEST(test_listing_unit_largest_listed_ties_to_the_earlier)
{
    static const uint64_t resident[] = {0, 5, 9, 1, 9, 7, 3, 7};
    struct ra__listing l;
    unsigned got[16];

    make_fake(&fake, 7, NULL, resident);
    ck_assert(!ra__listing_make(&l, &fake.snap, 3));
    ck_assert(l.cut);
    /* 9, 9, then the first 7: row 5 before row 7. */
    lines_of(&l, got);
    ck_assert_uint_eq(l.nlines, 4);
    ck_assert_uint_eq(got[0], 2);
    ck_assert_uint_eq(got[1], 4);
    ck_assert_uint_eq(got[2], 5);
    ck_assert_uint_eq(got[3], 1000);
    ck_assert_uint_eq(l.rest.tags, 4);
    ck_assert_uint_eq(l.rest.sum.resident, 5 + 1 + 3 + 7);
    ck_assert_uint_eq(l.rest.sum.allocated, 1000 * (1 + 3 + 6 + 7));
    ck_assert_uint_eq(l.rest.sum.mapped, 10 * (5 + 1 + 3 + 7));
    ck_assert_uint_eq(l.rest.sum.nmalloc, 4);
    ck_assert_uint_eq(l.rest.sum.peak_mapped, 0);
    ck_assert_uint_eq(l.rest.sum.limit, 0);
    ck_assert_uint_eq(l.rest.sum.tree.allocated, l.rest.sum.allocated);
    ck_assert_uint_eq(l.rollups[0].depth, 1);
    ra__listing_free(&l);
}
END_TEST

/* app (row 1) holds nothing itself and three children: its subtree ranks
 * it first; with room for two, one child is listed and the other two are
 * rolled up under app, after the child; the top level's roll-up is last. */
START_TEST(test_listing_unit_rolls_up_under_the_listed_parent)
{
    static const unsigned parent[] = {0, 0, 1, 1, 1, 0, 0};
    static const uint64_t resident[] = {0, 0, 50, 40, 30, 100, 1};
    struct ra__listing l;
    unsigned got[16];

    make_fake(&fake, 6, parent, resident);
    ck_assert(!ra__listing_make(&l, &fake.snap, 3));
    lines_of(&l, got);
    ck_assert_uint_eq(l.nlines, 5);
    ck_assert_uint_eq(got[0], 1);
    ck_assert_uint_eq(got[1], 2);
    ck_assert_uint_eq(got[2], 1001);
    ck_assert_uint_eq(got[3], 5);
    ck_assert_uint_eq(got[4], 1000);
    ck_assert_uint_eq(l.rollups[l.lines[2].rollup].tags, 2);
    ck_assert_uint_eq(l.rollups[l.lines[2].rollup].sum.resident, 70);
    ck_assert_uint_eq(l.rollups[l.lines[2].rollup].depth, 2);
    ck_assert_uint_eq(l.rollups[l.lines[4].rollup].tags, 1);
    ck_assert_uint_eq(l.rest.tags, 3);
    ck_assert(l.has_children[1]);
    ra__listing_free(&l);
}
END_TEST

/* Grandchildren not listed roll up with their parent, under the nearest
 * listed tag above both. */
START_TEST(test_listing_unit_rolls_subtrees_up_whole)
{
    static const unsigned parent[] = {0, 0, 1, 2, 2, 3};
    static const uint64_t resident[] = {0, 100, 1, 2, 3, 4};
    struct ra__listing l;
    unsigned got[16];

    make_fake(&fake, 5, parent, resident);
    ck_assert(!ra__listing_make(&l, &fake.snap, 1));
    lines_of(&l, got);
    ck_assert_uint_eq(l.nlines, 2);
    ck_assert_uint_eq(got[0], 1);
    ck_assert_uint_eq(got[1], 1001);
    ck_assert_uint_eq(l.rollups[0].tags, 4);
    ck_assert_uint_eq(l.rollups[0].sum.resident, 1 + 2 + 3 + 4);
    ra__listing_free(&l);
}
END_TEST

START_TEST(test_listing_unit_top_zero_rolls_every_tag_up)
{
    static const unsigned parent[] = {0, 0, 1, 0};
    static const uint64_t resident[] = {0, 8, 4, 2};
    struct ra__listing l;

    make_fake(&fake, 3, parent, resident);
    ck_assert(!ra__listing_make(&l, &fake.snap, 0));
    ck_assert(l.cut);
    ck_assert_uint_eq(l.nlines, 1);
    ck_assert_uint_eq(l.lines[0].row, 0);
    ck_assert_uint_eq(l.rollups[0].parent_row, 0);
    ck_assert_uint_eq(l.rest.tags, 3);
    ck_assert_uint_eq(l.rest.sum.resident, 14);
    ra__listing_free(&l);
}
END_TEST

/* Asked for more than there are: every tag, and a roll-up of nothing. */
START_TEST(test_listing_unit_more_than_there_are_lists_every_tag)
{
    static const uint64_t resident[] = {0, 8, 4, 2};
    struct ra__listing l;

    make_fake(&fake, 3, NULL, resident);
    ck_assert(!ra__listing_make(&l, &fake.snap, 50));
    ck_assert(l.cut);
    ck_assert_uint_eq(l.nlines, 3);
    ck_assert_uint_eq(l.nrollups, 0);
    ck_assert_uint_eq(l.rest.tags, 0);
    ra__listing_free(&l);
}
END_TEST

/* Where the rest is rolled up, a tag named "(rest)" would be taken for the
 * roll-up: it is rolled up, with its subtree, however large. */
START_TEST(test_listing_unit_a_tag_named_rest_is_rolled_up)
{
    static const unsigned parent[] = {0, 0, 1, 0};
    static const uint64_t resident[] = {0, 100, 90, 1};
    struct ra__listing l;

    make_fake(&fake, 3, parent, resident);
    strcpy(fake.rows[1].name, RA__REST_NAME);
    ck_assert(!ra__listing_make(&l, &fake.snap, 2));
    ck_assert_uint_eq(l.nlines, 2);
    ck_assert_uint_eq(l.lines[0].row, 3);
    ck_assert_uint_eq(l.rest.tags, 2);
    ck_assert_uint_eq(l.rest.sum.resident, 190);
    ra__listing_free(&l);
    ck_assert(!ra__listing_make(&l, &fake.snap, RA_REPORT_ALL_TAGS));
    ck_assert_uint_eq(l.nlines, 3);
    ra__listing_free(&l);
}
END_TEST

/* Random trees: the listed tags are min(top, n), a tree, ranked above
 * every tag rolled up; the roll-ups and the listed tags add up to every
 * tag; each roll-up follows the listed subtree of its tag. */
START_TEST(test_listing_unit_random_trees_keep_the_rules)
{
    static unsigned parent[MAX_ROWS + 1];
    static uint64_t resident[MAX_ROWS + 1];
    unsigned seed = 45;

    for (unsigned round = 0; round < 200; round++) {
        unsigned n = 1 + (unsigned)rand_r(&seed) % MAX_ROWS;
        size_t top = (size_t)rand_r(&seed) % (n + 10);
        struct ra__listing l;
        uint64_t resident_sum = 0, listed_sum = 0, rolled_sum = 0;
        unsigned nlisted = 0, rolled = 0, worst = 0, best = 0;
        bool closed = true, placed = true;

        for (unsigned r = 1; r <= n; r++) {
            /* Some chains up to the deepest tree a tag may have. */
            parent[r] = r > 1 && rand_r(&seed) % 3 != 0
                            ? (unsigned)rand_r(&seed) % (r - 1) + 1
                            : 0;
            if (parent[r] != 0 && fake.rows[parent[r]].depth >= 8)
                parent[r] = 0;
            resident[r] = (uint64_t)(rand_r(&seed) % 5) << 12;
            fake.rows[r].depth = parent[r] ? fake.rows[parent[r]].depth + 1 : 1;
        }
        make_fake(&fake, n, parent, resident);
        ck_assert(!ra__listing_make(&l, &fake.snap, top));
        for (unsigned i = 1; i <= n; i++)
            pos[fake.order[i]] = i;
        /* The lowest ranked listed tag and the highest ranked other one
         * (a passing ck_assert costs a message to the runner: none in
         * the loops). */
        for (unsigned r = 1; r <= n; r++) {
            unsigned *end = l.listed[r] ? &worst : &best;
            resident_sum += resident[r];
            if (*end == 0 ||
                (l.listed[r] ? ranks_above(*end, r, pos) : ranks_above(r, *end, pos)))
                *end = r;
            if (!l.listed[r])
                continue;
            nlisted++;
            listed_sum += resident[r];
            closed &= parent[r] == 0 || l.listed[parent[r]];
        }
        ck_assert(closed);
        ck_assert(worst == 0 || best == 0 || ranks_above(worst, best, pos));
        ck_assert_uint_eq(nlisted, top < n ? top : n);
        for (unsigned i = 0; i < l.nrollups; i++) {
            rolled += l.rollups[i].tags;
            rolled_sum += l.rollups[i].sum.resident;
            ck_assert(l.rollups[i].tags > 0);
        }
        ck_assert_uint_eq(rolled, n - nlisted);
        ck_assert_uint_eq(l.rest.tags, n - nlisted);
        ck_assert_uint_eq(listed_sum + rolled_sum, resident_sum);
        ck_assert_uint_eq(l.rest.sum.resident, rolled_sum);
        ck_assert_uint_eq(l.nlines, nlisted + l.nrollups);
        /* A roll-up under a tag: after it and its listed descendants,
         * before any other. */
        for (unsigned i = 0; i < l.nlines; i++) {
            unsigned p;
            if (l.lines[i].row != 0)
                continue;
            p = l.rollups[l.lines[i].rollup].parent_row;
            if (p == 0) {
                ck_assert_uint_eq(i, l.nlines - 1);
                continue;
            }
            for (unsigned j = i; j-- > 0 && l.lines[j].row != p;)
                placed &= line_under(&l, j, p, parent);
            placed &= i > 0;
            if (i + 1 < l.nlines)
                placed &= !line_under(&l, i + 1, p, parent);
        }
        ck_assert(placed);
        ra__listing_free(&l);
    }
}
END_TEST

START_TEST(test_listing_unit_names_its_roll_ups)
{
    static const unsigned parent[] = {0, 0, 1};
    static const uint64_t resident[] = {0, 1, 1};
    char buf[RA__ROLLUP_NAME_MAX];
    struct ra__rollup ru = {.parent_row = 0, .tags = 2950};

    make_fake(&fake, 2, parent, resident);
    ra__rollup_name(buf, sizeof buf, &fake.snap, &ru, RA__ESCAPE_TEXT);
    ck_assert_str_eq(buf, "(2,950 more tags)");
    ru.tags = 1;
    ra__rollup_name(buf, sizeof buf, &fake.snap, &ru, RA__ESCAPE_TEXT);
    ck_assert_str_eq(buf, "(1 more tag)");
    ru.tags = 1234567;
    ra__rollup_name(buf, sizeof buf, &fake.snap, &ru, RA__ESCAPE_TEXT);
    ck_assert_str_eq(buf, "(1,234,567 more tags)");
    strcpy(fake.rows[1].name, "ses<s>\n");
    ru = (struct ra__rollup){.parent_row = 1, .tags = 412};
    ra__rollup_name(buf, sizeof buf, &fake.snap, &ru, RA__ESCAPE_TEXT);
    ck_assert_str_eq(buf, "(412 more under ses<s>\\n)");
    ra__rollup_name(buf, sizeof buf, &fake.snap, &ru, RA__ESCAPE_HTML);
    ck_assert_str_eq(buf, "(412 more under ses&lt;s&gt;\\n)");
}
END_TEST

static Suite *listing_suite(void)
{
    Suite *s = suite_create("listing (unit)");
    TCase *tc = tcase_create("listing");

    tcase_add_test(tc, test_listing_unit_every_tag_in_the_trees_order);
    tcase_add_test(tc, test_listing_unit_largest_listed_ties_to_the_earlier);
    tcase_add_test(tc, test_listing_unit_rolls_up_under_the_listed_parent);
    tcase_add_test(tc, test_listing_unit_rolls_subtrees_up_whole);
    tcase_add_test(tc, test_listing_unit_top_zero_rolls_every_tag_up);
    tcase_add_test(tc, test_listing_unit_more_than_there_are_lists_every_tag);
    tcase_add_test(tc, test_listing_unit_a_tag_named_rest_is_rolled_up);
    tcase_add_test(tc, test_listing_unit_random_trees_keep_the_rules);
    tcase_add_test(tc, test_listing_unit_names_its_roll_ups);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(listing_suite());
}

/* Suite "budget (unit)": the memory limit's headroom and the budgets' growth
 * margin at the sizes' extremes (0, 1, 2^63 - 1, 2^63, 2^64 - 1, the address
 * space, next to the resident set), driven through budget.c's own entry
 * points: the commits the extent hooks report (ra__budget_commits), the
 * headroom and level the watcher sets (ra__budget_set_pressure), its estimate,
 * and the pool's growth check. No tag is created: tags 1 and 2 are slots of
 * budget.c's table, at the top level. Each case runs in a process of its own
 * (Check's fork mode), so that what one leaves is gone at the next. */
#include <check.h>
#include <stdint.h>

#include "budget.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
#define TOP ((size_t)1 << 63)
#define HIGH(limit) ((limit) / 100 * 90)

/* Whether a commit of bytes in tag is let through; given back if so. */
static bool commits(ra_tag_t tag, size_t bytes)
{
    if (!ra__budget_commits.commit(tag, bytes))
        return false;
    ra__budget_commits.uncommit(tag, bytes);
    return true;
}

static void set_pressure(size_t limit, size_t resident)
{
    ra__budget_set_pressure(RA_PRESSURE_NONE, limit, HIGH(limit), resident);
}

/* A limit at or above the address space is none in effect: nothing is
 * refused, and the estimate is that of no limit. Before, the headroom of
 * 2^63 or 2^64 - 1 over a few MiB was negative as an int64_t, and every
 * tagged commit was refused. */
START_TEST(test_budget_unit_limit_above_the_address_space_refuses_nothing)
{
    static const size_t limits[] = {SIZE_MAX, SIZE_MAX - MIB, TOP, TOP - 1,
                                    RA__ADDRESS_SPACE};

    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        set_pressure(limits[i], 4 * MIB);
        ck_assert_msg(commits(1, MIB), "limit %zu refused a commit",
                      limits[i]);
        ck_assert_msg(commits(1, GIB), "limit %zu refused a commit",
                      limits[i]);
        ck_assert(!ra__budget_pressure_on());
        ck_assert_uint_eq(ra__budget_pressure_estimate(), 0);
    }
}
END_TEST

/* The largest limit in effect: its headroom is the limit less the resident
 * set, the estimate the resident set and what was committed since. */
START_TEST(test_budget_unit_largest_limit_in_effect_counts_exactly)
{
    size_t limit = RA__ADDRESS_SPACE - 1;

    set_pressure(limit, 4 * MIB);
    ck_assert(ra__budget_pressure_on());
    ck_assert(ra__budget_commits.commit(1, GIB));
    ck_assert_uint_eq(ra__budget_pressure_estimate(), 4 * MIB + GIB);
    ra__budget_commits.uncommit(1, GIB);
    ck_assert_uint_eq(ra__budget_pressure_estimate(), 4 * MIB);
}
END_TEST

/* Limits of 0 (none) and 1 (everything refused). */
START_TEST(test_budget_unit_limits_of_0_and_1)
{
    set_pressure(0, 4 * MIB);
    ck_assert(commits(1, GIB));
    ck_assert_uint_eq(ra__budget_pressure_estimate(), 0);
    set_pressure(1, 4 * MIB);
    ck_assert(!commits(1, 4096));
    ck_assert_uint_eq(ra__budget_pressure_estimate(), 4 * MIB);
}
END_TEST

/* A resident set read as huge past a small limit (a look never reads one, but
 * the headroom is set from any size_t): the headroom stays negative. Before,
 * -(int64_t)(resident - limit) wrapped to a positive headroom of 1 GiB. */
START_TEST(test_budget_unit_resident_far_past_the_limit_keeps_headroom_negative)
{
    static const size_t residents[] = {TOP - 1, TOP, SIZE_MAX - GIB,
                                       SIZE_MAX};

    for (size_t i = 0; i < sizeof residents / sizeof residents[0]; i++) {
        set_pressure(1, residents[i]);
        ck_assert_msg(!commits(1, MIB), "resident %zu: a commit let through",
                      residents[i]);
        /* The estimate saturates rather than wrapping under the limit. */
        ck_assert_uint_ge(ra__budget_pressure_estimate(), 1u << 30);
        ra__budget_pressure_reset_headroom(residents[i]);
        ck_assert(!commits(1, MIB));
    }
}
END_TEST

/* Next to the resident set: a limit 1 MiB above it holds one 1 MiB commit
 * and not the next; one byte under it holds none; a tag of negative
 * priority stops at high. */
START_TEST(test_budget_unit_limit_next_to_the_resident_set)
{
    size_t resident = 64 * MIB;

    set_pressure(resident + MIB, resident);
    ck_assert(ra__budget_commits.commit(1, MIB));
    ck_assert(!commits(1, 4096));
    ra__budget_commits.uncommit(1, MIB);
    set_pressure(resident - 1, resident);
    ck_assert(!commits(1, 4096));
    /* 100 MiB, high at 90 MiB, resident 89 MiB: 1 MiB to high. */
    ra__budget_set_priority(2, -1);
    set_pressure(100 * MIB, 89 * MIB);
    ck_assert(ra__budget_commits.commit(2, MIB));
    ck_assert(!commits(2, 4096));
    ck_assert(commits(1, 4 * MIB));
    ra__budget_commits.uncommit(2, MIB);
}
END_TEST

/* The pool grows while 8 MiB are free under every hard limit up the
 * chain: no sum to wrap near 2^64 - 1. */
START_TEST(test_budget_unit_growth_margin_saturates)
{
    static const size_t hards[] = {1, TOP - 1, TOP, SIZE_MAX};
    ra_tag_limit_t limit = {0, 0, NULL, NULL};

    for (size_t i = 0; i < sizeof hards / sizeof hards[0]; i++) {
        limit.hard = hards[i];
        ra__budget_set(1, &limit);
        ck_assert(ra__budget_allows_growth(1) == (hards[i] != 1));
    }
    /* 4 MiB left under 2^64 - 1: not enough for an arena. */
    limit.hard = SIZE_MAX;
    ra__budget_set(1, &limit);
    ck_assert(ra__budget_commits.commit(1, SIZE_MAX - 4 * MIB));
    ck_assert(!ra__budget_allows_growth(1));
    ck_assert(!commits(1, 8 * MIB));
    ck_assert(commits(1, 4 * MIB));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("budget (unit)");
    TCase *tc = tcase_create("memory limit");

    tcase_add_test(tc,
                   test_budget_unit_limit_above_the_address_space_refuses_nothing);
    tcase_add_test(tc, test_budget_unit_largest_limit_in_effect_counts_exactly);
    tcase_add_test(tc, test_budget_unit_limits_of_0_and_1);
    tcase_add_test(
        tc,
        test_budget_unit_resident_far_past_the_limit_keeps_headroom_negative);
    tcase_add_test(tc, test_budget_unit_limit_next_to_the_resident_set);
    suite_add_tcase(s, tc);
    tc = tcase_create("budgets");
    tcase_add_test(tc, test_budget_unit_growth_margin_saturates);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

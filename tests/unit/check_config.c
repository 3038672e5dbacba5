/* Suite "config (unit)": the debug build's assertions (the sizes' syntax
 * is tests/unit/check_sizes.c's). */
#include <check.h>
#include <signal.h>

#include "internal.h"
#include "testutil.h"

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
    TCase *tc = tcase_create("assertions");

#ifdef RA_DEBUG
    tcase_add_test_raise_signal(
        tc, test_config_unit_broken_invariant_aborts_naming_it, SIGABRT);
#else
    tcase_add_test(tc, test_config_unit_assertions_are_compiled_out);
#endif
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

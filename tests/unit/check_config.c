/* Suite "config (unit)": which process of a tree is watched
 * (REGIONALLOC_PROGRAM_PID, REGIONALLOC_CHILDREN), and the debug build's
 * assertions (the sizes' syntax is tests/unit/check_sizes.c's). Each test
 * runs in Check's forked child, which reads the environment afresh. */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* What ra__config_watch() says in a child forked after the configuration
 * was read: the pid is compared when asked, not when read. */
static enum ra__watch watch_of_a_child(void)
{
    pid_t pid;
    int status;

    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit((int)ra__config_watch());
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    return (enum ra__watch)WEXITSTATUS(status);
}

/* REGIONALLOC_PROGRAM_PID=pid, REGIONALLOC_CHILDREN unset. */
static void set_program_pid(pid_t pid)
{
    char value[32];

    snprintf(value, sizeof value, "%ld", (long)pid);
    ck_assert_int_eq(setenv("REGIONALLOC_PROGRAM_PID", value, 1), 0);
    ck_assert_int_eq(unsetenv("REGIONALLOC_CHILDREN"), 0);
}

START_TEST(test_config_unit_watch_the_program_not_its_children)
{
    set_program_pid(getpid());
    ck_assert_int_eq(ra__config_watch(), RA__WATCH_PROGRAM);
    ck_assert_int_eq(watch_of_a_child(), RA__WATCH_NONE);
}
END_TEST

START_TEST(test_config_unit_watch_children_when_asked)
{
    set_program_pid(getpid());
    ck_assert_int_eq(setenv("REGIONALLOC_CHILDREN", "1", 1), 0);
    ck_assert_int_eq(ra__config_watch(), RA__WATCH_PROGRAM);
    ck_assert_int_eq(watch_of_a_child(), RA__WATCH_CHILD);
}
END_TEST

/* A process started by the program (exec'd: another pid than the one
 * set) is a child from its load. */
START_TEST(test_config_unit_watch_another_pid_is_a_child)
{
    set_program_pid(getppid());
    ck_assert_int_eq(ra__config_watch(), RA__WATCH_NONE);
}
END_TEST

/* Without the tool, or with a bad value: every process, as before. */
START_TEST(test_config_unit_watch_every_process_without_a_pid)
{
    static const char *const values[] = {NULL, "", "me", "0", "-4", "12x",
                                         "99999999999"};
    const char *v = values[_i];

    ck_assert_int_eq(v != NULL ? setenv("REGIONALLOC_PROGRAM_PID", v, 1)
                               : unsetenv("REGIONALLOC_PROGRAM_PID"),
                     0);
    ck_assert_int_eq(setenv("REGIONALLOC_CHILDREN", "1", 1), 0);
    ck_assert_int_eq(ra__config_watch(), RA__WATCH_PROGRAM);
    ck_assert_int_eq(watch_of_a_child(), RA__WATCH_PROGRAM);
}
END_TEST

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
    tc = tcase_create("watch");
    tcase_add_test(tc, test_config_unit_watch_the_program_not_its_children);
    tcase_add_test(tc, test_config_unit_watch_children_when_asked);
    tcase_add_test(tc, test_config_unit_watch_another_pid_is_a_child);
    tcase_add_loop_test(tc, test_config_unit_watch_every_process_without_a_pid,
                        0, 7);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

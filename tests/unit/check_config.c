/* Suite "config (unit)": the size syntax of REGIONALLOC_REGION_SIZE,
 * REGIONALLOC_MAX_TAGS and REGIONALLOC_PROF; which process of a tree is
 * watched (REGIONALLOC_PROGRAM_PID, REGIONALLOC_CHILDREN). Each test runs
 * in Check's forked child, which reads the environment afresh. */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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
    tc = tcase_create("watch");
    tcase_add_test(tc, test_config_unit_watch_the_program_not_its_children);
    tcase_add_test(tc, test_config_unit_watch_children_when_asked);
    tcase_add_test(tc, test_config_unit_watch_another_pid_is_a_child);
    tcase_add_loop_test(tc, test_config_unit_watch_every_process_without_a_pid,
                        0, 7);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

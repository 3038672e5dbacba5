/* Suite "warn (unit)": the library's own writes raise no SIGPIPE.
 *
 * A warning (and every report the library writes at exit, under the same
 * guard) may go to a pipe whose reader has gone: `prog 2>&1 | grep -q x`.
 * The write must fail with EPIPE and leave the program as it was: no
 * default action ending it, no handler of its run, no SIGPIPE left
 * pending on a thread that blocks it, one the program had pending kept,
 * and the thread's signal mask as it found it. Each test runs in Check's
 * forked child with its stderr on a pipe whose read end is closed. */
#include <check.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "testutil.h"

static int saved_stderr = -1;

static void stderr_to_a_gone_reader(void)
{
    int fds[2];

    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(close(fds[0]), 0);
    saved_stderr = dup(STDERR_FILENO);
    ck_assert_int_ge(saved_stderr, 0);
    ck_assert_int_eq(dup2(fds[1], STDERR_FILENO), STDERR_FILENO);
    close(fds[1]);
}

static void stderr_back(void)
{
    if (saved_stderr >= 0) {
        dup2(saved_stderr, STDERR_FILENO);
        close(saved_stderr);
        saved_stderr = -1;
    }
}

static void warn_to_a_gone_reader(void)
{
    stderr_to_a_gone_reader();
    ra__warn("regionalloc: a warning nobody reads");
    stderr_back();
}

static bool sigpipe_pending(void)
{
    sigset_t set;

    ck_assert_int_eq(sigpending(&set), 0);
    return sigismember(&set, SIGPIPE) == 1;
}

static void block_sigpipe(sigset_t *was)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, &set, was), 0);
}

/* SIGPIPE at its default action: the process would die of it. */
START_TEST(test_warn_unit_gone_reader_does_not_end_the_process)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};

    ck_assert_int_eq(sigaction(SIGPIPE, &dfl, NULL), 0);
    warn_to_a_gone_reader();
    ck_assert(!sigpipe_pending());
}
END_TEST

static volatile sig_atomic_t handled;

static void count_sigpipe(int sig)
{
    (void)sig;
    handled++;
}

START_TEST(test_warn_unit_gone_reader_runs_no_handler)
{
    struct sigaction sa = {.sa_handler = count_sigpipe};

    ck_assert_int_eq(sigaction(SIGPIPE, &sa, NULL), 0);
    warn_to_a_gone_reader();
    ck_assert_int_eq(handled, 0);
}
END_TEST

/* A program that blocks SIGPIPE finds none pending that it did not
 * cause, and its mask as it was. */
START_TEST(test_warn_unit_gone_reader_leaves_no_sigpipe_pending)
{
    sigset_t was, now;

    block_sigpipe(&was);
    warn_to_a_gone_reader();
    ck_assert(!sigpipe_pending());
    ck_assert_int_eq(pthread_sigmask(SIG_SETMASK, NULL, &now), 0);
    ck_assert_int_eq(sigismember(&now, SIGPIPE), 1);
    ck_assert_int_eq(sigismember(&was, SIGPIPE), 0);
}
END_TEST

/* The program's own SIGPIPE, pending before the write, is still there. */
START_TEST(test_warn_unit_keeps_the_programs_pending_sigpipe)
{
    sigset_t was;

    block_sigpipe(&was);
    ck_assert_int_eq(raise(SIGPIPE), 0);
    ck_assert(sigpipe_pending());
    warn_to_a_gone_reader();
    ck_assert(sigpipe_pending());
}
END_TEST

/* A program that ignores SIGPIPE: the write fails, the mask is back. */
START_TEST(test_warn_unit_restores_the_mask_of_an_ignoring_program)
{
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigset_t before, after;

    ck_assert_int_eq(sigaction(SIGPIPE, &ign, NULL), 0);
    ck_assert_int_eq(pthread_sigmask(SIG_SETMASK, NULL, &before), 0);
    warn_to_a_gone_reader();
    ck_assert_int_eq(pthread_sigmask(SIG_SETMASK, NULL, &after), 0);
    ck_assert_int_eq(sigismember(&after, SIGPIPE),
                     sigismember(&before, SIGPIPE));
    ck_assert(!sigpipe_pending());
}
END_TEST

int main(void)
{
    Suite *s = suite_create("warn (unit)");
    TCase *tc = tcase_create("SIGPIPE");

    tcase_add_test(tc, test_warn_unit_gone_reader_does_not_end_the_process);
    tcase_add_test(tc, test_warn_unit_gone_reader_runs_no_handler);
    tcase_add_test(tc, test_warn_unit_gone_reader_leaves_no_sigpipe_pending);
    tcase_add_test(tc, test_warn_unit_keeps_the_programs_pending_sigpipe);
    tcase_add_test(tc,
                   test_warn_unit_restores_the_mask_of_an_ignoring_program);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

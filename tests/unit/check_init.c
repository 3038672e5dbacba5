/* Suite "init (unit)": the lifecycle's fork handlers.
 *
 * A signal handler that forks while the thread runs an outer fork's
 * handlers (glibc's tst-mallocfork2 does it at random) found the library's
 * locks held by that same thread and waited for ever. The test forces the
 * moment: the link wraps ra__pool_prefork, one of the last of the
 * library's prefork steps, which raises the signal once the real one took
 * its lock, so the nested fork starts with nearly every lock of the
 * library's held by the outer one. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "testutil.h"

void __real_ra__pool_prefork(void);

static volatile sig_atomic_t raise_in_prefork, nested_status = -1;

static void fork_in_handler(int sig)
{
    pid_t pid;
    int status;

    (void)sig;
    pid = fork();
    if (pid == 0)
        _exit(7);
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status))
        nested_status = WEXITSTATUS(status);
}

void __wrap_ra__pool_prefork(void)
{
    __real_ra__pool_prefork();
    if (raise_in_prefork) {
        raise_in_prefork = 0;
        raise(SIGUSR1);
    }
}

/* The library in use first: a tag, blocks, the caches made. */
static void use_the_library(void)
{
    ra_tag_t tag = tu_tag_create("work");

    ra_free(ra_malloc_tag(tag, 100));
}

START_TEST(test_init_unit_fork_in_a_handler_during_a_fork)
{
    struct sigaction sa = {.sa_handler = fork_in_handler};
    pid_t pid;
    int status;

    use_the_library();
    ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
    raise_in_prefork = 1;
    pid = fork();
    if (pid == 0) {
        /* Both the outer child and the nested one can use the library. */
        use_the_library();
        _exit(0);
    }
    ck_assert_int_gt(pid, 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(nested_status, 7);
    /* The parent's locks were all given back: it goes on. */
    use_the_library();
    pid = fork();
    if (pid == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
}
END_TEST

static Suite *init_suite(void)
{
    Suite *s = suite_create("init (unit)");
    TCase *tc = tcase_create("fork");

    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_init_unit_fork_in_a_handler_during_a_fork);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(init_suite());
}

/* Floor: OS (the bottom: every floor may warn). The library's own writes
 * to the program's descriptors: one line on stderr for a warning, the
 * guard that keeps any write of the library's from raising SIGPIPE in the
 * program, and the failed assertion that ends the process. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static void sigpipe_only(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGPIPE);
}

static bool sigpipe_pending(void)
{
    sigset_t pending;

    return sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

/* A write to a pipe or socket whose reader has gone raises SIGPIPE in the
 * writing thread: blocked here, it stays pending on this thread (whatever
 * the program's disposition: a blocked signal is never discarded), and the
 * write fails with EPIPE. Whether one was pending already is noted after
 * the block, when no new one can be delivered. Never allocates. */
void ra__sigpipe_hold(struct ra__sigpipe_hold *h)
{
    sigset_t pipe;

    sigpipe_only(&pipe);
    h->restore = pthread_sigmask(SIG_BLOCK, &pipe, &h->mask) == 0;
    h->was_pending = sigpipe_pending();
}

/* The SIGPIPE our writes made is taken off before the mask comes back, so
 * that no handler runs and no default action ends the program for it; one
 * the program had pending before stays (signals of one number do not
 * queue: ours merged into it). A SIGPIPE sent by another process while
 * every thread blocks it would be taken too: a window as short as the
 * write, and a SIGPIPE from kill(2) is no pipe's. */
void ra__sigpipe_release(const struct ra__sigpipe_hold *h)
{
    static const struct timespec now = {0, 0};
    sigset_t pipe;

    if (!h->restore)
        return;
    sigpipe_only(&pipe);
    if (!h->was_pending && sigpipe_pending())
        (void)sigtimedwait(&pipe, NULL, &now);
    (void)pthread_sigmask(SIG_SETMASK, &h->mask, NULL);
}

void ra__warn(const char *msg)
{
    struct ra__sigpipe_hold hold;

    /* write(2) rather than stdio: this runs inside malloc and must not
     * allocate. A short write of a diagnostic is not worth retrying. */
    ra__sigpipe_hold(&hold);
    if (write(STDERR_FILENO, msg, strlen(msg)) >= 0)
        (void)!write(STDERR_FILENO, "\n", 1);
    ra__sigpipe_release(&hold);
}

void ra__assert_fail(const char *cond, const char *file, int line)
{
    char buf[512];
    snprintf(buf, sizeof buf, "regionalloc: %s:%d: assertion failed: %s",
             file, line, cond);
    ra__warn(buf);
    abort();
}

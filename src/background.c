/* Floor: services. The library's background threads (the stats segment's
 * publisher, the HTTP server): started with every signal blocked, so that
 * signals reach the program's own threads, and quiet for their whole life,
 * so that what they allocate (and what the libraries they call allocate for
 * them) is the library's: untagged, never reported to hooks, never sampled,
 * never given a thread's tag. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "internal.h"

RA__TLS bool ra__library_thread;
RA__TLS bool ra__library_spawning;

void ra__become_library_thread(void)
{
    if (ra__library_thread)
        return;
    ra__library_thread = true;
    ra__quiet_begin(); /* never ended: the thread is the library's */
}

struct start {
    void *(*fn)(void *);
    void *arg;
};

static void *run(void *p)
{
    struct start s = *(struct start *)p;

    ra__meta_free(p);
    ra__become_library_thread();
    return s.fn(s.arg);
}

void ra__spawn_begin(sigset_t *old)
{
    sigset_t all;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, old);
    ra__library_spawning = true;
}

void ra__spawn_end(const sigset_t *old)
{
    ra__library_spawning = false;
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

bool ra__background_start(void *(*fn)(void *), void *arg, pthread_t *thread)
{
    struct start *s = ra__meta_alloc(sizeof *s);
    sigset_t old;
    int rc;

    if (s == NULL) {
        errno = ENOMEM;
        return true;
    }
    *s = (struct start){fn, arg};
    /* Through the library's own pthread_create when it exports one: never
     * a thread's tag for this thread. */
    ra__spawn_begin(&old);
    rc = pthread_create(thread, NULL, run, s);
    ra__spawn_end(&old);
    if (rc != 0) {
        ra__meta_free(s);
        errno = rc;
        return true;
    }
    return false;
}

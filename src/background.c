/* Floor: tags. The library's background threads (the stats segment's
 * publisher, the HTTP server): started with every signal blocked, so that
 * signals reach the program's own threads, and quiet for their whole life,
 * so that what they allocate (and what the libraries they call allocate for
 * them) is the library's: untagged, never reported to hooks, never sampled,
 * never given a thread's tag. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "backend.h"
#include "dynsym.h"
#include "internal.h"
#include "tags.h"

RA__TLS bool ra__library_thread;
RA__TLS bool ra__library_spawning;

void ra__become_library_thread(void)
{
    if (ra__library_thread)
        return;
    ra__library_thread = true;
    ra__quiet_begin(); /* never ended: the thread is the library's */
}

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *,
                         void *(*)(void *), void *);

#ifdef RA_OVERRIDE
/* pthread_create is the library's own (override_thread.c): the next
 * definition is the C library's, or an interposer's after ours. */
static void *volatile next_create;
#endif

void ra__thread_create_resolve(void)
{
#ifdef RA_OVERRIDE
    (void)ra__dynsym_next(&next_create, "pthread_create");
#endif
}

/* A thread's stack could not be mapped: an address-space limit lowered
 * from outside (prlimit --pid), which setrlimit's stand-in did not see,
 * may be why. The library gives back what no tag uses and tries again. */
int ra__thread_create(pthread_t *thread, const pthread_attr_t *attr,
                      void *(*fn)(void *), void *arg)
{
#ifdef RA_OVERRIDE
    create_fn real = (create_fn)ra__dynsym_next(&next_create,
                                                "pthread_create");
#else
    /* No stand-in of ours: the name reaches whatever the program binds,
     * a sanitizer's interceptor included (ThreadSanitizer must see every
     * thread start). */
    create_fn real = pthread_create;
#endif
    int rc;

    if (real == NULL)
        return EAGAIN;
    rc = real(thread, attr, fn, arg);
    if (rc == EAGAIN && ra__tag_give_back_address_space())
        rc = real(thread, attr, fn, arg);
    return rc;
}

/* On the starting thread's stack, which it leaves only once the new
 * thread has taken fn and arg: no memory of the library's is in flight
 * when a start returns (a report then counts the library's memory
 * whole). */
struct start {
    void *(*fn)(void *);
    void *arg;
    struct ra__mutex lock;
    pthread_cond_t taken_cond;
    bool taken;
};

static void *run(void *p)
{
    struct start *s = p;
    void *(*fn)(void *) = s->fn;
    void *arg = s->arg;

    /* What it allocates is the library's, and untagged. */
    ra__untagged_thread_start();
    ra__become_library_thread();
    ra__lock(&s->lock);
    s->taken = true;
    pthread_cond_signal(&s->taken_cond);
    ra__unlock(&s->lock);
    return fn(arg);
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
    struct start s = {fn, arg, RA__MUTEX_INIT(RA__RANK_START),
                      PTHREAD_COND_INITIALIZER, false};
    sigset_t old;
    int rc;

    /* Past the library's own pthread_create (ra__thread_create): run()
     * makes the thread the library's before anything else, so no rule
     * gives it a tag. */
    ra__untagged_find_self(); /* the row is read on any thread from now */
    ra__spawn_begin(&old);
    rc = ra__thread_create(thread, NULL, run, &s);
    ra__spawn_end(&old);
    if (rc != 0) {
        errno = rc;
        return true;
    }
    ra__lock(&s.lock);
    while (!s.taken)
        ra__cond_wait(&s.taken_cond, &s.lock);
    ra__unlock(&s.lock);
    pthread_cond_destroy(&s.taken_cond);
    pthread_mutex_destroy(&s.lock.m);
    return false;
}

/* Floor: base. The one thread-exit key, which a module arms for the
 * calling thread when it gives it state to release. What runs at thread
 * exit, and in which order, is the lifecycle's (init.c), which gives it
 * here at load (ra__thread_exit_set). It and first_use.c, beside it on
 * the base floor, call nothing of each other's. */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;

static void (*_Atomic thread_end)(void *);
static void (*_Atomic thread_last)(void);

void ra__thread_exit_set(void (*end)(void *), void (*last)(void))
{
    /* The lifecycle gives both, once, at load. */
    ra__assert(end != NULL && last != NULL);
    atomic_store_explicit(&thread_last, last, memory_order_release);
    atomic_store_explicit(&thread_end, end, memory_order_release);
}

/* The rounds of destructors the C library gives a thread's keys at most:
 * it runs them again while a key holds a value, up to this many times. */
#ifdef PTHREAD_DESTRUCTOR_ITERATIONS
#define ROUNDS PTHREAD_DESTRUCTOR_ITERATIONS
#else
#define ROUNDS 4 /* POSIX's least */
#endif
#ifdef RA_TSAN
/* ThreadSanitizer ends its own state of the thread in the last round (its
 * key, made before the library's, runs first): an atomic of the library's
 * there crashed it. One round short, it still sees them. */
#undef ROUNDS
#define ROUNDS (PTHREAD_DESTRUCTOR_ITERATIONS - 1)
#endif

/* The key's value is the round the thread's destructors are in, from 1
 * (as the key's destructor counts them: one more each time it runs). The
 * thread end runs in the first; the last step runs in every round, and
 * the key is armed again for the next until the last round, so that what
 * the thread frees in other destructors (their keys, made after this one,
 * run after it in each round) is seen by a later one. The last step must
 * bear running more than once, and running no more after a round the C
 * library did not give (a count that starts late). Read at the thread's
 * end, not when the key is made: a module may arm the key before the
 * constructor that gives the functions has run. */
static void run_thread_end(void *armed)
{
    uintptr_t round = (uintptr_t)armed;
    void (*end)(void *) =
        atomic_load_explicit(&thread_end, memory_order_acquire);
    void (*last)(void) =
        atomic_load_explicit(&thread_last, memory_order_acquire);

    /* Rounds count from 1, and the key is armed again only below ROUNDS. */
    ra__assert(round >= 1 && round <= ROUNDS);
    if (round == 1 && end != NULL)
        end(armed);
    if (last != NULL)
        last();
    if (round < ROUNDS)
        pthread_setspecific(exit_key, (void *)(round + 1));
}

/* No key means no thread's state is ever released: a broken process. */
static void make_key(void)
{
    if (pthread_key_create(&exit_key, run_thread_end) != 0)
        abort();
}

bool ra__thread_exit_arm(void)
{
    pthread_once(&key_once, make_key);
    return pthread_getspecific(exit_key) == NULL &&
           pthread_setspecific(exit_key, (void *)1) != 0;
}

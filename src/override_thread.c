/* Floor: API. The thread functions the library stands in front of:
 * pthread_create, so that every new thread counts in the untagged row from
 * its start, so that it can take its base tag from its name
 * (REGIONALLOC_THREAD_TAGS), so that threads a library starts for us
 * (libmicrohttpd's) are the library's own, and so that a stack that an
 * address-space limit refuses gets a second chance; pthread_setname_np and
 * prctl(PR_SET_NAME), so that naming a thread can tag it. Each does what the
 * C library's does, then that. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend.h"
#include "dynsym.h"
#include "internal.h"
#include "tags.h"
#include "thread_tags.h"

typedef int (*setname_fn)(pthread_t, const char *);

struct start {
    void *(*fn)(void *);
    void *arg;
    bool library, tags;
    struct start *next; /* among the spares */
};

/* Start records are kept for the next thread rather than freed: a block
 * of the library's made on one thread and freed on the new one, at every
 * start, made jemalloc zero each new thread's cache with madvise (twice
 * the cost of a thread's start and end that allocates a block, 16 against
 * 32 us of CPU). Taken whole and pushed back (no ABA), lock-free, so a
 * fork never finds them held; spares number the most threads ever started
 * at once. */
static _Atomic(struct start *) spares;

static void give_back(struct start *first, struct start *last)
{
    struct start *head = atomic_load_explicit(&spares, memory_order_relaxed);

    do
        last->next = head;
    while (!atomic_compare_exchange_weak_explicit(
        &spares, &head, first, memory_order_release, memory_order_relaxed));
}

static struct start *take_start(void)
{
    struct start *s = atomic_exchange_explicit(&spares, NULL,
                                               memory_order_acquire);
    struct start *last;

    if (s == NULL)
        return ra__meta_alloc(sizeof *s);
    if (s->next != NULL) {
        for (last = s->next; last->next != NULL; last = last->next)
            ;
        give_back(s->next, last);
    }
    return s;
}

static void *start_thread(void *p)
{
    struct start s = *(struct start *)p;

    give_back(p, p);
    /* In the untagged row for its whole life (jemalloc counts a thread's
     * bytes from its start). */
    ra__untagged_thread_start();
    if (s.library)
        ra__become_library_thread();
    else if (s.tags)
        ra__thread_tags_start_thread();
    return s.fn(s.arg);
}

RA_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                             void *(*fn)(void *), void *arg)
{
    struct start *s = take_start();
    int rc;

    /* Every thread starts here, to be counted; its maker's counters are
     * found first (the row is read on any thread from now on). */
    if (s == NULL)
        return EAGAIN;
    ra__untagged_find_self();
    *s = (struct start){fn, arg, ra__library_spawning, ra__thread_tags_on(),
                        NULL};
    rc = ra__thread_create(thread, attr, start_thread, s);
    if (rc != 0)
        give_back(s, s);
    return rc;
}

/* A thread was named by code at caller. jemalloc names its own threads
 * (its background thread: "jemalloc_bg_thd"): those are the allocator's,
 * like the library's, and no rule tags them. */
static void named(pthread_t thread, const char *name, const void *caller)
{
    if (!ra__thread_tags_on())
        return;
    if (ra__jemalloc_owns(caller)) {
        if (pthread_equal(thread, pthread_self())) {
            ra__thread_tags_leave();
            ra__become_library_thread();
        }
        return;
    }
    ra__thread_tags_named(thread, name);
}

RA_EXPORT int pthread_setname_np(pthread_t thread, const char *name)
{
    static void *volatile cache;
    setname_fn real = (setname_fn)ra__dynsym_next(&cache,
                                                  "pthread_setname_np");
    int rc;

    if (real == NULL)
        return ENOSYS;
    rc = real(thread, name);
    if (rc == 0)
        named(thread, name, __builtin_return_address(0));
    return rc;
}

/* glibc's prctl passes its arguments to the system call as they are. */
RA_EXPORT int prctl(int option, ...)
{
    unsigned long arg[4];
    va_list ap;
    long rc;

    va_start(ap, option);
    for (int i = 0; i < 4; i++)
        /* clang's analyzer loses va_start here (a false report). */
        arg[i] = va_arg(ap, unsigned long); // NOLINT(clang-analyzer-valist.Uninitialized)
    va_end(ap);
    rc = syscall(SYS_prctl, option, arg[0], arg[1], arg[2], arg[3]);
    if (rc == 0 && option == PR_SET_NAME) {
        /* The name as the kernel kept it (15 bytes and a NUL). */
        char name[17] = "";
        if (syscall(SYS_prctl, PR_GET_NAME, (unsigned long)name, 0UL, 0UL,
                    0UL) == 0)
            named(pthread_self(), name, __builtin_return_address(0));
    }
    return (int)rc;
}

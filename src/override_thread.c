/* Floor: API. The thread functions the library stands in front of:
 * pthread_create, so that a new thread can take its base tag from its name
 * (REGIONALLOC_THREAD_TAGS), so that its untagged arena gets the hooks
 * that measure it, so that threads a library starts for us
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
#include "thread_tags.h"

typedef int (*setname_fn)(pthread_t, const char *);

struct start {
    void *(*fn)(void *);
    void *arg;
    bool library;
};

static void *start_thread(void *p)
{
    struct start s = *(struct start *)p;

    /* The thread's untagged arena, chosen now, before the thread
     * allocates, gets the hooks that tell its extents from jemalloc's
     * metadata (untagged_hooks.c). */
    ra__untagged_hook_thread_arena();
    ra__meta_free(p);
    if (s.library)
        ra__become_library_thread();
    else
        ra__thread_tags_start_thread();
    return s.fn(s.arg);
}

RA_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                             void *(*fn)(void *), void *arg)
{
    struct start *s;
    int rc;

    /* Pass-through mode: straight through. */
    if (!ra__library_spawning && !ra__config()->enabled)
        return ra__thread_create(thread, attr, fn, arg);
    s = ra__meta_alloc(sizeof *s);
    if (s == NULL)
        return EAGAIN;
    *s = (struct start){fn, arg, ra__library_spawning};
    rc = ra__thread_create(thread, attr, start_thread, s);
    if (rc != 0)
        ra__meta_free(s);
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

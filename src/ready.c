/* Floor: state (its bottom). Whether the library is ready: its first use
 * (the configuration read, jemalloc's classes read, the reservation made)
 * done once, from any thread, at any time; the check every public call
 * makes first; and the thread-exit key, which a module arms for the
 * calling thread when it gives it state to release. What runs at thread
 * exit, and in which order, is the lifecycle's (init.c), which gives it
 * here at load (ra__thread_exit_set). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "backend.h"
#include "budget.h"
#include "internal.h"
#include "region.h"

atomic_bool ra__tagging;
static pthread_once_t ready_once = PTHREAD_ONCE_INIT;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;

/* MALLOC_CONF options that tag arenas cannot follow, one line each. */
static void warn_about_jemalloc_options(void)
{
    if (!ra__be_option("opt.retain"))
        ra__warn("regionalloc: MALLOC_CONF retain:false does not apply to "
                 "tags: a tag keeps its freed address space reserved (its "
                 "pages still go back to the OS)");
    if (ra__be_option("opt.hpa"))
        ra__warn("regionalloc: MALLOC_CONF hpa:true does not apply to "
                 "tags: jemalloc's huge page allocator serves only arenas "
                 "without extent hooks (untagged memory uses it)");
}

static void get_ready(void)
{
    const struct ra__config *config = ra__config();
    bool tagging = false;

    ra__be_start();
    if (config->enabled)
        tagging = !ra__region_reserve(config->max_tags, config->region_size,
                                      &ra__budget_commits);
    if (tagging)
        warn_about_jemalloc_options();
    atomic_store_explicit(&ra__tagging, tagging, memory_order_release);
}

bool ra__init(void)
{
    if (pthread_once(&ready_once, get_ready) != 0)
        abort();
    return atomic_load_explicit(&ra__tagging, memory_order_acquire);
}

int ra__check_call(bool arguments_valid)
{
    if (!arguments_valid) {
        errno = EINVAL;
        return -1;
    }
    if (!ra__init()) {
        errno = ENOTSUP;
        return -1;
    }
    return 0;
}

int ra_enabled(void)
{
    return ra__init() ? 1 : 0;
}

static void (*_Atomic thread_end)(void *);

void ra__thread_exit_set(void (*end)(void *))
{
    atomic_store_explicit(&thread_end, end, memory_order_release);
}

/* Read at the thread's end, not when the key is made: a module may arm
 * the key before the constructor that gives the function has run. */
static void run_thread_end(void *armed)
{
    void (*end)(void *) =
        atomic_load_explicit(&thread_end, memory_order_acquire);

    if (end != NULL)
        end(armed);
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
           pthread_setspecific(exit_key, &exit_key) != 0;
}

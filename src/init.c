/* The process's start and end (the library's one constructor and
 * destructor), and its first use: configuration, reservation, fork
 * handlers. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

atomic_bool ra__tagging;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* The library's own locks are taken before fork and released on both sides,
 * so a child never inherits one held by a thread that no longer exists.
 * jemalloc does the same for its own. */
static void prefork(void)
{
    /* Outermost first, in the order the library nests them: a checkpoint
     * holds the ring while it reads stats; a reset or destroy holds its
     * lock while it takes the profile's, the registry's, the budgets' and
     * the threads'; a tag's creation holds the registry while it sets a
     * budget. */
    ra__http_prefork();
    ra__checkpoint_prefork();
    ra__lifetime_prefork();
    ra__thread_tags_prefork();
    ra__hooks_prefork();
    ra__prof_prefork();
    ra__tag_prefork();
    ra__limit_prefork();
    ra__thread_prefork();
}

static void postfork_parent(void)
{
    ra__thread_postfork_parent();
    ra__limit_postfork();
    ra__tag_postfork();
    ra__prof_postfork();
    ra__hooks_postfork(false);
    ra__thread_tags_postfork_parent();
    ra__lifetime_postfork();
    ra__checkpoint_postfork();
    ra__http_postfork_parent();
}

static void postfork_child(void)
{
    ra__thread_postfork_child();
    ra__limit_postfork();
    ra__tag_postfork();
    ra__prof_postfork();
    ra__hooks_postfork(true);
    ra__thread_tags_postfork_child();
    ra__lifetime_postfork();
    ra__checkpoint_postfork();
    ra__http_postfork_child();
}

static void init_library(void)
{
    const struct ra__config *config = ra__config();
    bool tagging = false;

    if (config->enabled)
        tagging = !ra__region_reserve(config->max_tags, config->region_size);
    if (pthread_atfork(prefork, postfork_parent, postfork_child) != 0)
        abort();
    ra__thread_init();
    atomic_store_explicit(&ra__tagging, tagging, memory_order_release);
    if (tagging && config->prof_interval != 0)
        ra__prof_begin(config->prof_interval);
}

/* The background services, asked for by the environment, start at load:
 * the one case where the configuration is read then rather than at first
 * use. */
static void start_services(void)
{
    const struct ra__config *config;

    if (secure_getenv("REGIONALLOC_SHM") == NULL &&
        secure_getenv("REGIONALLOC_HTTP") == NULL &&
        secure_getenv("REGIONALLOC_THREAD_TAGS") == NULL)
        return;
    config = ra__config();
    /* The main thread's name is the program's. */
    ra__thread_tags_start_thread();
    if (config->shm)
        ra__shm_start();
    if (config->http_addr[0] != '\0')
        ra__http_start_configured();
}

__attribute__((constructor)) static void process_start(void)
{
    ra__clock_start();
    ra__report_at_load();
    ra__override_check();
    start_services();
}

__attribute__((destructor)) static void process_end(void)
{
    ra__report_at_exit();
    ra__http_at_exit();
    ra__shm_at_exit();
}

bool ra__init(void)
{
    if (pthread_once(&init_once, init_library) != 0)
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

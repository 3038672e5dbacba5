/* Floor: base. The library's first use (the configuration read,
 * jemalloc's classes read, the reservation made) done once, from any
 * thread, at any time, and the check every public call makes first. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "backend.h"
#include "internal.h"
#include "region.h"

atomic_bool ra__tagging;
static pthread_once_t first_use_once = PTHREAD_ONCE_INIT;

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

static void first_use(void)
{
    const struct ra__config *config = ra__config();
    bool tagging = false;

    ra__be_start();
    if (config->enabled)
        tagging = !ra__region_reserve(config->max_tags, config->region_size);
    if (tagging)
        warn_about_jemalloc_options();
    atomic_store_explicit(&ra__tagging, tagging, memory_order_release);
}

bool ra__init(void)
{
    if (pthread_once(&first_use_once, first_use) != 0)
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

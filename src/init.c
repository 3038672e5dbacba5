/* Floor: lifecycle (the top: it calls every floor, none calls it). The
 * process's start and end (the library's one constructor and destructor),
 * fork, and a thread's end, each calling the modules in a stated order.
 * The library's first use is first_use.c's. */
#include <pthread.h>
#include <stdlib.h>

#include "api.h"
#include "backend.h"
#include "budget.h"
#include "by_library.h"
#include "ends.h"
#include "instruments.h"
#include "measure.h"
#include "output.h"
#include "pairs.h"
#include "tags.h"
#include "thread_tags.h"

/* Forks this thread is inside: a signal handler that forks while this
 * thread runs the fork handlers of an outer fork (glibc's tst-mallocfork2)
 * would wait for ever on the locks the outer one holds. The nested fork
 * runs none of them: the outer fork's handlers hold or take them, and
 * release them in the parent and in the child after the handler returns. */
static RA__TLS unsigned fork_depth;

/* The library's own locks are taken before fork and released on both sides,
 * so a child never inherits one held by a thread that no longer exists.
 * jemalloc does the same for its own. */
static void prefork(void)
{
    if (fork_depth++ != 0)
        return;
    /* Outermost first, in the order the library nests them: a checkpoint
     * holds the ring while it reads stats; a reset or destroy holds its
     * lock while it takes the profile's, the registry's, the budgets' and
     * the threads'; a tag's creation holds the registry while it sets a
     * budget; a thread's exit holds the threads' while it leaves its
     * tags' pools. */
    ra__symbols_prefork(); /* never waits */
    ra__http_prefork();
    ra__checkpoint_prefork();
    ra__lifetime_prefork();
    ra__leftovers_prefork();
    ra__thread_tags_prefork();
    ra__hooks_prefork();
    ra__prof_prefork();
    ra__by_library_prefork();
    ra__tag_prefork();
    ra__budget_prefork();
    ra__thread_prefork();
    ra__pool_prefork();
    ra__history_prefork(); /* a leaf */
    ra__pressure_prefork(); /* a leaf */
    ra__leftovers_prefork_leaf();
    ra__measure_prefork(); /* a leaf */
    ra__untagged_prefork(); /* a leaf */
}

static void postfork_parent(void)
{
    if (--fork_depth != 0)
        return;
    ra__untagged_postfork_parent();
    ra__measure_postfork_parent();
    ra__pressure_postfork_parent();
    ra__history_postfork_parent();
    ra__pool_postfork();
    ra__thread_postfork_parent();
    ra__budget_postfork();
    ra__tag_postfork();
    ra__by_library_postfork();
    ra__prof_postfork();
    ra__hooks_postfork(false);
    ra__thread_tags_postfork_parent();
    ra__leftovers_postfork();
    ra__lifetime_postfork();
    ra__checkpoint_postfork();
    ra__http_postfork_parent();
    ra__symbols_postfork_parent();
}

static void postfork_child(void)
{
    if (--fork_depth != 0)
        return;
    ra__mappings_postfork_child();
    ra__untagged_postfork_child();
    ra__measure_postfork_child();
    ra__pressure_postfork_child();
    ra__give_back_postfork_child();
    ra__history_postfork_child();
    ra__returns_postfork_child();
    ra__pool_postfork();
    ra__thread_postfork_child();
    ra__budget_postfork();
    ra__tag_postfork();
    ra__by_library_postfork();
    ra__prof_postfork();
    ra__hooks_postfork(true);
    ra__thread_tags_postfork_child();
    ra__leftovers_postfork();
    ra__lifetime_postfork_child();
    ra__checkpoint_postfork();
    ra__http_postfork_child();
    ra__symbols_postfork_child();
}

/* A thread's end (what the destructor of thread_exit.c's key calls in the
 * first round of the thread's destructors; a module arms the key when it gives
 * the thread state): first its tag stack leaves the named threads (no
 * rename reaches it any more), then its caches and tag state go (they may
 * still dispatch frees), then the spare records it took for the return
 * stacks, last its hooks' reader word. What it allocates afterwards (other
 * destructors) goes uncached. The last step, in that round and each later
 * one (thread_exit.c), takes the thread's jemalloc counts out of the untagged
 * row's sum, with what it freed in the destructors run before. */
static void thread_end(void *armed)
{
    (void)armed;
    ra__thread_tags_thread_exit();
    ra__by_library_thread_exit();
    ra__thread_exit();
    ra__returns_thread_exit();
    ra__hooks_thread_exit();
}

/* jemalloc's mappings outside the regions (mappings.c) noted from the
 * start: its code located, what it mapped before sorted out. Not in
 * pass-through mode, nor where the library does not stand in front of
 * mmap. */
static void start_untagged_measure(void)
{
#ifdef RA_OVERRIDE
    if (ra__config_peek_is("REGIONALLOC", "0"))
        return;
    ra__mappings_start();
#endif
}

/* The background services, asked for by the environment, start at load:
 * the one case where the configuration is read then rather than at first
 * use. A process of a watched program's tree that is not watched itself
 * keeps the allocator and the tags by thread name, and starts nothing
 * that only a report, the server or the segment would read. */
static void start_services(void)
{
    const struct ra__config *config;
    bool watched;

    if (!ra__config_asked_at_load())
        return;
    config = ra__config();
    watched = ra__config_watch() != RA__WATCH_NONE;
    if (watched && config->prof_interval != 0 && ra__init())
        ra__prof_begin(config->prof_interval);
    if (ra__by_library_start())
        ra__instrument_add(RA__INSTRUMENT_LIBRARY);
    /* The main thread's name is the program's. */
    ra__thread_tags_start_thread();
    if (!watched)
        return;
    if (config->shm)
        ra__shm_start();
    if (config->http_addr[0] != '\0')
        ra__http_start_configured();
}

/* Not static: a program linked with the core's archive itself (the unit
 * suites) names it (-Wl,-u) so that the lifecycle is linked in, as it is
 * into the library whole. Nothing calls it. */
void ra__process_start(void);
__attribute__((constructor)) void ra__process_start(void)
{
    ra__thread_create_resolve();
    ra__thread_exit_set(thread_end, ra__untagged_thread_end);
    /* Everything the main thread did since the process began counts. */
    ra__untagged_load_start();
    ra__clock_start();
    ra__report_at_load();
    if (pthread_atfork(prefork, postfork_parent, postfork_child) != 0)
        abort();
    ra__override_check();
    start_untagged_measure();
    start_services();
    ra__pressure_start();
}

__attribute__((destructor)) static void process_end(void)
{
    ra__load_stop(); /* the exit's dump names frames with what is loaded */
    ra__report_at_exit();
    ra__http_at_exit();
    ra__shm_at_exit();
}


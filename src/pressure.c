/* Floor: API. Memory pressure: the process's resident memory held under a
 * limit by giving back and refusing in the right tags. The limit comes
 * from ra_memory_limit_set, else REGIONALLOC_MEMORY_LIMIT (a size, or a
 * percentage of the cgroup's limit), else the cgroup v2 limit the process
 * runs under (memory.high when set, else memory.max), else there is none,
 * and then nothing runs: no thread, and the commits' check is one load of
 * a limit that stays 0 (budget.c). A limit at or above the address space
 * (RA__ADDRESS_SPACE) is kept as given, for ra_memory_limit and the
 * reports, and is none in effect: nothing runs for it either. With a
 * limit in effect, a thread of the library's
 * reads the resident set (/proc/self/statm: one read, some microseconds)
 * every WATCH_NEAR_NS once it is past half the limit, every WATCH_FAR_NS
 * below; at high (90%) it gives back free pages, the tags of lowest
 * priority first (give_back.c), on a rise then everything a purge reaches
 * (the untagged arenas, the caches, what destroys left); it sets the headroom
 * and level the commits read, and on a rise calls the callbacks, outside
 * every lock. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "internal.h"
#include "tags.h"
#include "ends.h"
#include "output.h"

/* 10 ms: an allocation burst faults pages in at a few GB/s at most, so one
 * interval lets the resident set pass high by some tens of MB, which the
 * 10% between high and the limit absorbs for limits from a few hundred MB
 * up; a read of statm every 10 ms is 0.05% of a core. Far below the
 * limit, 100 ms. */
#define WATCH_NEAR_NS 10000000u
#define WATCH_FAR_NS 100000000u
#define HIGH_PERCENT 90u
/* A give-back aims 10% under high: what a pass stops at is some headroom for
 * the next burst, not the edge of high again, whose next commit would
 * start another pass. */
#define TARGET_PERCENT 80u
#define CALLBACKS_MAX 16u

struct callback {
    void (*cb)(void *ctx, ra_pressure_t level, size_t current, size_t limit);
    void *ctx;
};

/* Under pressure_lock: the limit and where it came from, the callbacks,
 * whether the watcher runs, and the condition that wakes it. */
static struct ra__mutex pressure_lock = RA__MUTEX_INIT(RA__RANK_PRESSURE);
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct callback callbacks[CALLBACKS_MAX];
static unsigned ncallbacks;
static bool watcher_runs;
static enum ra__limit_source source;
/* Read by the reports without the lock. */
static _Atomic size_t limit;
static _Atomic size_t resident;
static _Atomic uint64_t rises;

/* -- the cgroup's limit ------------------------------------------------------- */

/* The first line of path as a number of bytes; 0 when it is "max", absent,
 * unreadable or not a size (sizes.c: no sign, nothing that wraps). A
 * number at or above the address space is kept: none in effect. */
static size_t read_limit_file(const char *dir, const char *file)
{
    char path[512], buf[64];
    FILE *f;
    size_t n = 0;

    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >=
        sizeof path)
        return 0;
    f = fopen(path, "re");
    if (f == NULL)
        return 0;
    if (fgets(buf, sizeof buf, f) != NULL) {
        buf[strcspn(buf, "\n")] = '\0';
        if (ra__parse_size(buf, &n) != NULL)
            n = 0;
    }
    fclose(f);
    return n;
}

/* The cgroup v2 limit of the process (its directory: ra__proc_cgroup_dir,
 * under REGIONALLOC_CGROUP_FS when set): memory.high, else memory.max. */
static size_t cgroup_limit(void)
{
    char dir[1024];
    size_t n;

    if (ra__proc_cgroup_dir(ra__config_peek("REGIONALLOC_CGROUP_FS"), dir,
                            sizeof dir))
        return 0;
    n = read_limit_file(dir, "memory.high");
    return n != 0 ? n : read_limit_file(dir, "memory.max");
}

/* -- giving back ---------------------------------------------------------------- */

/* Free pages back to the OS, the tags of lowest priority first, until the
 * resident set is under target (give_back.c). On a rise (full) every tag is
 * purged, threads' caches and kept blocks included, and then whatever a
 * purge reaches (the untagged arenas, what destroys left); on a later look
 * still above high, only the tags whose free pages are worth a purge, so
 * that memory a program frees while above high goes back at the next look
 * rather than at the decay's pace. Returns the resident set after. */
static size_t give_back(size_t target, bool full)
{
    size_t now = ra__give_back_by_priority(target, full), before = now;

    if (now >= target && full) {
        ra_purge_all();
        now = ra__proc_rss();
        ra__give_back_note(before, now);
    }
    return now;
}

/* -- the watcher ------------------------------------------------------------------- */

static ra_pressure_t level_of(size_t rss, size_t lim)
{
    if (lim == 0)
        return RA_PRESSURE_NONE;
    if (rss >= lim)
        return RA_PRESSURE_LIMIT;
    if (rss >= lim / 100 * HIGH_PERCENT)
        return RA_PRESSURE_HIGH;
    return RA_PRESSURE_NONE;
}

/* The callbacks, copied under the lock, called without it. */
static void call_back(ra_pressure_t level, size_t rss, size_t lim)
{
    struct callback copy[CALLBACKS_MAX];
    unsigned n;

    ra__lock(&pressure_lock);
    n = ncallbacks;
    memcpy(copy, callbacks, n * sizeof copy[0]);
    ra__unlock(&pressure_lock);
    ra__assert_no_lock_held();
    for (unsigned i = 0; i < n; i++)
        copy[i].cb(copy[i].ctx, level, rss, lim);
}

/* The commits' headroom and level under lim (0: none) for the resident set
 * rss. */
static void set_headroom(ra_pressure_t level, size_t lim, size_t rss)
{
    ra__budget_set_pressure(level, lim, lim / 100 * HIGH_PERCENT, rss);
}

/* One look: the level from the resident set; at high or above, pages
 * given back first (all of them on a rise), then the commits' headroom and
 * level set from what is left, then, on a rise, the callbacks. */
static void look(size_t lim, ra_pressure_t *shown)
{
    size_t rss = ra__proc_rss(), since = ra__budget_pressure_estimate();
    /* What the commits since the last look stand for counts too: a tag
     * refused for want of headroom is at high, whether or not its pages are
     * touched yet. */
    ra_pressure_t level = level_of(rss > since ? rss : since, lim);

    if (level != RA_PRESSURE_NONE) {
        rss = give_back(lim / 100 * TARGET_PERCENT, level > *shown);
        level = level_of(rss, lim);
    }
    atomic_store_explicit(&resident, rss, memory_order_relaxed);
    set_headroom(level, lim, rss);
    if (level > *shown) {
        atomic_fetch_add_explicit(&rises, 1, memory_order_relaxed);
        call_back(level, rss, lim);
    }
    *shown = level;
}

static void *watch(void *unused)
{
    ra_pressure_t shown = RA_PRESSURE_NONE;

    (void)unused;
    ra__lock(&pressure_lock);
    for (;;) {
        size_t lim = atomic_load_explicit(&limit, memory_order_relaxed);
        struct timespec until;
        size_t rss;
        if (!ra__limit_in_effect(lim)) {
            /* No limit in effect any more: nothing refused, nothing
             * read. */
            shown = RA_PRESSURE_NONE;
            set_headroom(RA_PRESSURE_NONE, 0, 0);
            ra__cond_wait(&wake, &pressure_lock);
            continue;
        }
        ra__unlock(&pressure_lock);
        look(lim, &shown);
        rss = atomic_load_explicit(&resident, memory_order_relaxed);
        clock_gettime(CLOCK_MONOTONIC, &until);
        ra__deadline_add(&until, rss >= lim / 2 ? WATCH_NEAR_NS
                                                : WATCH_FAR_NS);
        ra__lock(&pressure_lock);
        if (atomic_load_explicit(&limit, memory_order_relaxed) == lim)
            ra__cond_timedwait(&wake, &pressure_lock, &until);
    }
    return NULL;
}

/* With pressure_lock held: the limit set, and the watcher started (once,
 * for the first limit in effect) or woken. Returns true, nothing changed,
 * when it cannot start. */
static bool set_limit(size_t bytes, enum ra__limit_source from)
{
    bool watched = ra__limit_in_effect(bytes);
    size_t rss;

    ra__assert_held(&pressure_lock);
    if (watched && !watcher_runs) {
        pthread_t thread;
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_destroy(&wake);
        pthread_cond_init(&wake, &attr);
        pthread_condattr_destroy(&attr);
        if (ra__background_start(watch, NULL, &thread))
            return true;
        pthread_detach(thread);
        watcher_runs = true;
    }
    atomic_store_explicit(&limit, bytes, memory_order_relaxed);
    source = bytes != 0 ? from : RA__LIMIT_NONE;
    /* In force when the call returns: the commits' headroom from the resident
     * set now, not from the watcher's first look. The watcher gives back
     * and calls back at that look. A limit not in effect leaves the
     * commits none. */
    rss = watched ? ra__proc_rss() : 0;
    set_headroom(level_of(rss, watched ? bytes : 0), watched ? bytes : 0,
                 rss);
    pthread_cond_signal(&wake);
    return false;
}

void ra__pressure_start(void)
{
    size_t bytes = 0;
    enum ra__limit_source from = RA__LIMIT_CGROUP;

    if (ra__config_peek_is("REGIONALLOC", "0"))
        return;
    /* The configuration is read at load only when the variable is set: a
     * program may set the others before its first call. */
    if (ra__config_peek_set("REGIONALLOC_MEMORY_LIMIT")) {
        const struct ra__config *c = ra__config();
        from = RA__LIMIT_ENV;
        bytes = c->memory_limit;
        if (c->memory_limit_percent != 0)
            bytes = ra__size_percent(cgroup_limit(),
                                     c->memory_limit_percent);
        else if (bytes == 0)
            from = RA__LIMIT_CGROUP; /* a bad value: the default */
    }
    if (from == RA__LIMIT_CGROUP)
        bytes = cgroup_limit();
    if (bytes == 0)
        return;
    ra__lock(&pressure_lock);
    if (source == RA__LIMIT_NONE && set_limit(bytes, from))
        ra__warn("regionalloc: cannot start the memory limit's thread; "
                 "no limit");
    ra__unlock(&pressure_lock);
}

void ra__pressure_read(struct ra__pressure_figures *out)
{
    ra__lock(&pressure_lock);
    out->source = source;
    ra__unlock(&pressure_lock);
    out->limit = atomic_load_explicit(&limit, memory_order_relaxed);
    out->resident = atomic_load_explicit(&resident, memory_order_relaxed);
    out->level = ra__limit_in_effect(out->limit) ? ra__budget_pressure()
                                                 : RA_PRESSURE_NONE;
    out->given_back = ra__given_back();
    out->refusals = ra__budget_pressure_refusals();
    out->rises = atomic_load_explicit(&rises, memory_order_relaxed);
}

void ra__pressure_prefork(void)
{
    ra__lock(&pressure_lock);
}

void ra__pressure_postfork_parent(void)
{
    ra__unlock(&pressure_lock);
}

/* The watcher is not in a forked child: it keeps the limit as a figure,
 * refuses nothing, and watches again once it calls ra_memory_limit_set. */
void ra__pressure_postfork_child(void)
{
    /* Taken by this thread in prefork: its own to give back. */
    ra__unlock(&pressure_lock);
    pthread_cond_init(&wake, NULL);
    watcher_runs = false;
    set_headroom(RA_PRESSURE_NONE, 0, 0);
}

/* -- the public calls --------------------------------------------------------------- */

int ra_memory_limit_set(size_t bytes)
{
    bool failed;

    if (ra__check_call(true) != 0)
        return -1;
    ra__lock(&pressure_lock);
    failed = set_limit(bytes, RA__LIMIT_CALL);
    ra__unlock(&pressure_lock);
    if (failed) {
        errno = EAGAIN;
        return -1;
    }
    return 0;
}

size_t ra_memory_limit(void)
{
    return atomic_load_explicit(&limit, memory_order_relaxed);
}

int ra_tag_set_priority(ra_tag_t tag, int priority)
{
    if (ra__check_call(ra__tag_valid(tag)) != 0)
        return -1;
    ra__budget_set_priority(tag, priority);
    return 0;
}

int ra_tag_get_priority(ra_tag_t tag, int *out)
{
    if (out == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (ra__check_call(ra__tag_valid(tag)) != 0)
        return -1;
    *out = ra__budget_priority(tag);
    return 0;
}

int ra_pressure_callback(void (*cb)(void *ctx, ra_pressure_t level,
                                    size_t current, size_t limit),
                         void *ctx)
{
    int rc = 0;

    if (cb == NULL) {
        errno = EINVAL;
        return -1;
    }
    ra__lock(&pressure_lock);
    if (ncallbacks == CALLBACKS_MAX)
        rc = ENOSPC;
    else
        callbacks[ncallbacks++] = (struct callback){cb, ctx};
    ra__unlock(&pressure_lock);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return 0;
}

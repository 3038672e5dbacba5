/* Floor: tags. The tags' regions as the kernel counts them, measured off
 * the callers' paths: a thread of the library's measures every region
 * handed out in turn (resident.c: the pages it owns, its arenas' metadata
 * apart), on a budget of CPU time each round, the regions whose pages
 * changed first and every other one once MAX_AGE_NS has passed, then the
 * process's parts (parts.c) with what is left; the reports and
 * ra_tag_stats read the last measure and its age, and never wait for one.
 * ra_tag_rss, ra_stats_refresh and the report at exit measure on the
 * caller's time. */
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "budget.h"
#include "measure.h"
#include "region.h"
#include "tags.h"

/* A round: at most ROUND_BUDGET_NS of the thread's CPU time, every
 * ROUND_NS: 0.2% of a core at most, whatever the number of tags; a
 * process of a few hundred tags has each measured every round. */
#define ROUND_NS 1000000000u
#define ROUND_BUDGET_NS 2000000u
/* A tag whose committed and active pages have not moved since its last
 * measure is measured again after this long: what changes then is only
 * what the program touches of blocks it already had, or the kernel's
 * reclaim. */
#define MAX_AGE_NS (30 * (uint64_t)1000000000u)
/* Base blocks of one region measured apart, at most (a pool of 64 arenas
 * has a few each). */
#define BLOCKS_MAX 256u

/* Per region, by tag id. The figures under a sequence count (odd while a
 * measure writes them); what the sweeper last saw of the tag's pages,
 * its own. */
static struct measured {
    _Atomic uint32_t seq;
    _Atomic uint64_t resident, metadata, at_ns, mapped;
    size_t seen_mapped, seen_active;
} measured[RA__MAX_TAGS_LIMIT + 1];

/* One measure at a time (the sweeper's or a caller's), and pagemap's
 * descriptor, opened at the first and kept: a leaf, held for a region's
 * reading, no user code, no allocation. */
static struct ra__mutex measure_lock = RA__MUTEX_INIT(RA__RANK_MEASURE);
static int pagemap = -1;
static atomic_bool sweeping;
static ra_tag_t cursor;

static void store(ra_tag_t tag, const struct ra__measure *m)
{
    struct measured *e = &measured[tag];
    uint32_t seq = atomic_load_explicit(&e->seq, memory_order_relaxed);

    /* Odd first: an exchange with acquire order keeps the stores below
     * after it (no fence: ThreadSanitizer does not model them). */
    atomic_exchange_explicit(&e->seq, seq + 1, memory_order_acq_rel);
    atomic_store_explicit(&e->resident, m->resident, memory_order_relaxed);
    atomic_store_explicit(&e->metadata, m->metadata, memory_order_relaxed);
    atomic_store_explicit(&e->at_ns, m->at_ns, memory_order_relaxed);
    atomic_store_explicit(&e->mapped, m->mapped, memory_order_relaxed);
    atomic_store_explicit(&e->seq, seq + 2, memory_order_release);
}

/* With measure_lock held: tag's region now. */
static bool measure_locked(ra_tag_t tag, struct ra__measure *out)
{
    struct ra__range blocks[BLOCKS_MAX];
    uintptr_t start, end;
    size_t bytes, mapped;
    unsigned n;

    ra__assert_held(&measure_lock);
    if (pagemap < 0 && (pagemap = ra__resident_open()) < 0)
        return true;
    /* The metadata first, then the region around it: threads of the tag
     * may carve and touch more meanwhile, and what was counted of the
     * metadata (never given back) is then inside what the region's count
     * finds. */
    *out = (struct ra__measure){0, 0, 0, 0};
    n = ra__metadata_blocks(tag, blocks, BLOCKS_MAX);
    for (unsigned i = 0; i < n; i++)
        if (!ra__resident_range(pagemap, blocks[i].start, blocks[i].end,
                                &bytes))
            out->metadata += bytes;
    ra__region_carved(tag, &start, &end);
    mapped = ra__budget_committed(tag);
    if (ra__resident_range(pagemap, start, end, &bytes))
        return true;
    out->resident = bytes;
    out->at_ns = ra__clock_ns();
    out->mapped = mapped;
    /* Only the kernel swapping metadata pages out between the two counts
     * could make it larger: the figure stays a part of the whole. */
    if (out->metadata > out->resident)
        out->metadata = out->resident;
    store(tag, out);
    return false;
}

bool ra__measure_tag(ra_tag_t tag, struct ra__measure *out)
{
    struct ra__measure m;
    bool failed;

    ra__lock(&measure_lock);
    failed = measure_locked(tag, &m);
    ra__unlock(&measure_lock);
    if (!failed && out != NULL)
        *out = m;
    return failed;
}

static bool never_spent(void)
{
    return false;
}

/* A whole pass over the process's parts, on the caller's time, from its
 * start: not on from where the library's thread left one when its round's
 * budget was spent (a busy machine stops it mid-pass), whose counts are
 * of then, and of the mappings of then. */
static void measure_parts_now(void)
{
    ra__lock(&measure_lock);
    ra__parts_restart();
    if (pagemap >= 0 || (pagemap = ra__resident_open()) >= 0)
        while (!ra__parts_measure(pagemap, never_spent))
            ;
    ra__unlock(&measure_lock);
}

void ra__measure_all(void)
{
    unsigned count = ra__tag_published();

    for (ra_tag_t t = 1; t <= count; t++)
        (void)ra__measure_tag(t, NULL);
    measure_parts_now();
}

void ra__measure_parts_once(void)
{
    struct ra__parts p;

    ra__parts_read(&p);
    if (p.at_ns == 0)
        measure_parts_now();
}

uint64_t ra__measure_regions(void)
{
    unsigned count = ra__tag_published();
    uint64_t total = 0;

    for (ra_tag_t t = 1; t <= count; t++)
        total += atomic_load_explicit(&measured[t].resident,
                                      memory_order_relaxed);
    return total;
}

/* -- the sweeper ------------------------------------------------------------- */

static uint64_t cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The sweeper's: whether tag's region is due (its pages moved since its
 * last measure, or that is MAX_AGE_NS old); notes what it saw. */
static bool due(ra_tag_t tag, uint64_t now)
{
    struct measured *e = &measured[tag];
    size_t mapped = ra__budget_committed(tag), active = 0;
    uint64_t at = atomic_load_explicit(&e->at_ns, memory_order_relaxed);

    for (unsigned k = 0, n = ra__pool_count(tag); k < n; k++)
        active += ra__be_arena_active(ra__pool_arena(tag, k));
    if (at != 0 && at + MAX_AGE_NS > now && mapped == e->seen_mapped &&
        active == e->seen_active)
        return false;
    e->seen_mapped = mapped;
    e->seen_active = active;
    return true;
}

/* The sweeper's round: its CPU time at the start. */
static uint64_t round_from;

static bool round_spent(void)
{
    return cpu_ns() - round_from >= ROUND_BUDGET_NS;
}

/* One round: from where the last left off, the regions that are due (a
 * destroyed tag's slot keeps its pages: its region is counted too), until
 * the budget is spent or every region was looked at; then on through the
 * process's parts (parts.c) with what is left. */
static void round_of_measures(void)
{
    uint64_t now = ra__clock_ns();
    unsigned count = ra__tag_published();

    round_from = cpu_ns();
    for (unsigned seen = 0; seen < count && !round_spent(); seen++) {
        cursor = cursor % count + 1;
        if (due(cursor, now) && ra__measure_tag(cursor, NULL))
            return;
    }
    ra__lock(&measure_lock);
    if (pagemap < 0)
        pagemap = ra__resident_open();
    if (pagemap >= 0 && !round_spent())
        (void)ra__parts_measure(pagemap, round_spent);
    ra__unlock(&measure_lock);
}

static void *sweep(void *unused)
{
    struct timespec next;

    (void)unused;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        round_of_measures();
        ra__deadline_add(&next, ROUND_NS);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) ==
               EINTR)
            ;
    }
    return NULL;
}

void ra__measure_start(void)
{
    pthread_t thread;
    bool no = false;

    if (atomic_load_explicit(&sweeping, memory_order_relaxed) ||
        !atomic_compare_exchange_strong(&sweeping, &no, true))
        return;
    if (!ra__background_start(sweep, NULL, &thread))
        pthread_detach(thread);
}

bool ra__measure_read(ra_tag_t tag, struct ra__measure *out)
{
    const struct measured *e = &measured[tag];
    uint32_t seq;

    /* The figures' loads acquire, so that the second load of seq is not
     * done before them. */
    do {
        seq = atomic_load_explicit(&e->seq, memory_order_acquire);
        out->resident = atomic_load_explicit(&e->resident,
                                             memory_order_acquire);
        out->metadata = atomic_load_explicit(&e->metadata,
                                             memory_order_acquire);
        out->at_ns = atomic_load_explicit(&e->at_ns, memory_order_acquire);
        out->mapped = atomic_load_explicit(&e->mapped, memory_order_acquire);
    } while ((seq & 1) != 0 ||
             seq != atomic_load_explicit(&e->seq, memory_order_relaxed));
    return out->at_ns != 0;
}

void ra__measure_prefork(void)
{
    ra__lock(&measure_lock);
}

void ra__measure_postfork_parent(void)
{
    ra__resident_forked();
    ra__unlock(&measure_lock);
}

void ra__measure_postfork_child(void)
{
    ra__resident_forked();
    /* The parent's pagemap: the child reads its own. */
    if (pagemap >= 0)
        close(pagemap);
    pagemap = -1;
    ra__parts_restart();
    atomic_store(&sweeping, false);
    ra__unlock(&measure_lock);
}

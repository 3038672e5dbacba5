/* Floor: budgets. The memory limit's share of each commit (pressure.c
 * sets the limit and watches the resident set): the headroom left under the
 * limit, which every commit takes and every decommit gives back, the tags'
 * priorities that decide who is refused first, and the refusals counted.
 * budget.c asks it before it charges a commit up the tree. */
#include <stdatomic.h>

#include "budget.h"
#include "internal.h"

/* Memory pressure (pressure.c). Without a limit (limit_bytes 0), every
 * commit reads limit_bytes and nothing else. With one, headroom is what may
 * still be committed
 * before the resident set reaches the limit: set at each of the watcher's
 * looks (the limit less the resident set), taken by every commit and
 * given back by every decommit, so that a burst of growth between two
 * looks stops at the limit rather than an interval's worth past it (what
 * it cannot see: untagged growth, and pages committed before a look and
 * first touched after it). Tags of negative priority are refused once the
 * headroom is under high_gap (the resident set past high). pressure: the
 * level of the last look, for the reports. Allocations it refused, and
 * whether this thread's last refusal was its. */
static _Atomic size_t limit_bytes;
static _Atomic int64_t headroom, high_gap;
static _Atomic int pressure;
static _Atomic uint64_t pressure_refusals;
static RA__TLS bool tls_refused_by_pressure;

/* The headroom and the high gap are signed (the headroom goes negative
 * past the limit) and are set from unsigned sizes, the limit under the address
 * space but the resident set whatever it is read as: a look sets them
 * within +-HEADROOM_BOUND, so that what commits take and decommits give back
 * between two looks (never more than the address space) cannot carry them
 * past what an int64_t holds and change their sign. */
#define HEADROOM_BOUND ((int64_t)1 << 62)

/* ra_tag_set_priority's, per tag, until the tag is destroyed. */
static _Atomic int priorities[RA__MAX_TAGS_LIMIT + 1];

void ra__budget_headroom_give(size_t bytes)
{
    if (RA__UNLIKELY(atomic_load_explicit(&limit_bytes,
                                          memory_order_relaxed) != 0))
        atomic_fetch_add_explicit(&headroom, (int64_t)bytes,
                                  memory_order_relaxed);
}

bool ra__budget_headroom_refuses(ra_tag_t tag, size_t bytes)
{
    int64_t left, floor;

    if (RA__LIKELY(atomic_load_explicit(&limit_bytes,
                                        memory_order_relaxed) == 0))
        return false;
    /* A commit is an extent of one region: as an int64_t, it keeps its
     * sign. */
    ra__assert(bytes < (size_t)HEADROOM_BOUND);
    left = atomic_fetch_sub_explicit(&headroom, (int64_t)bytes,
                                     memory_order_relaxed) -
           (int64_t)bytes;
    floor = atomic_load_explicit(&priorities[tag],
                                 memory_order_relaxed) < 0
                ? atomic_load_explicit(&high_gap, memory_order_relaxed)
                : 0;
    if (left >= floor)
        return false;
    ra__budget_headroom_give(bytes);
    tls_refused_by_pressure = true;
    return true;
}

void ra__budget_pressure_refused(bool by_pressure)
{
    tls_refused_by_pressure = by_pressure;
}

void ra__budget_pressure_count_failure(void)
{
    if (tls_refused_by_pressure) {
        tls_refused_by_pressure = false;
        atomic_fetch_add_explicit(&pressure_refusals, 1,
                                  memory_order_relaxed);
    }
}

/* a - b as a headroom: negative when b is the larger, within
 * +-HEADROOM_BOUND. */
static int64_t headroom_between(size_t a, size_t b)
{
    size_t gap = a >= b ? a - b : b - a;
    int64_t bounded =
        gap < (size_t)HEADROOM_BOUND ? (int64_t)gap : HEADROOM_BOUND;

    ra__assert(bounded >= 0 && bounded <= HEADROOM_BOUND);
    return a >= b ? bounded : -bounded;
}

void ra__budget_set_pressure(ra_pressure_t level, size_t limit,
                             size_t high, size_t resident)
{
    /* A limit at or above the address space is none in effect (sizes.h):
     * none here either, whoever passes it. */
    if (!ra__limit_in_effect(limit))
        limit = 0;
    atomic_store_explicit(&headroom, headroom_between(limit, resident),
                          memory_order_relaxed);
    atomic_store_explicit(&high_gap, headroom_between(limit, high),
                          memory_order_relaxed);
    atomic_store_explicit(&pressure, (int)level, memory_order_relaxed);
    /* Last: a commit that sees the limit sees its headroom. */
    atomic_store_explicit(&limit_bytes, limit, memory_order_release);
}

bool ra__budget_pressure_on(void)
{
    return atomic_load_explicit(&limit_bytes, memory_order_relaxed) != 0;
}

void ra__budget_pressure_reset_headroom(size_t resident)
{
    size_t limit = atomic_load_explicit(&limit_bytes, memory_order_relaxed);

    if (limit != 0)
        atomic_store_explicit(&headroom, headroom_between(limit, resident),
                              memory_order_relaxed);
}

/* The limit less the headroom, in size_t: a headroom past the limit
 * (negative) adds to it, up to SIZE_MAX; a headroom above the limit
 * leaves 0. */
size_t ra__budget_pressure_estimate(void)
{
    size_t limit = atomic_load_explicit(&limit_bytes, memory_order_relaxed);
    int64_t left;

    if (limit == 0)
        return 0;
    left = atomic_load_explicit(&headroom, memory_order_relaxed);
    ra__assert(left >= -2 * HEADROOM_BOUND);
    /* -left is safe: the headroom never goes below -2 * HEADROOM_BOUND. */
    return left >= 0 ? ra__size_sub(limit, (size_t)left)
                     : ra__size_add(limit, (size_t)-left);
}

bool ra__budget_refused_by_pressure(void)
{
    return tls_refused_by_pressure;
}

ra_pressure_t ra__budget_pressure(void)
{
    return (ra_pressure_t)atomic_load_explicit(&pressure,
                                               memory_order_relaxed);
}

void ra__budget_set_priority(ra_tag_t tag, int priority)
{
    ra__assert(tag != RA_TAG_NONE && tag <= RA__MAX_TAGS_LIMIT);
    atomic_store_explicit(&priorities[tag], priority, memory_order_relaxed);
}

int ra__budget_priority(ra_tag_t tag)
{
    return atomic_load_explicit(&priorities[tag], memory_order_relaxed);
}

uint64_t ra__budget_pressure_refusals(void)
{
    return atomic_load_explicit(&pressure_refusals, memory_order_relaxed);
}

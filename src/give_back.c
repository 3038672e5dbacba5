/* Floor: ends. Giving back: after an allocation was refused, before its
 * one retry, and on the memory limit watcher's looks. A budget's refusal
 * gets back what a purge reaches of the tag (and of the subtree whose
 * limit refused); the memory limit's gets back the process's free pages,
 * the tags of lowest priority first, until the resident set is under the
 * pressure's target, and sets the commits' headroom from what is left, so
 * that memory a program freed at the limit serves its next allocation
 * without waiting for the watcher's next look. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "backend.h"
#include "budget.h"
#include "internal.h"
#include "ends.h"
#include "region.h"

/* Below this, a tag's free pages are not worth a purge on a pass that is
 * not a rise: a pass over thousands of tags reads their live figures
 * (some hundred ns each) and purges only where pages wait. */
#define WORTH_A_PURGE ((size_t)64 << 10)
static _Atomic uint64_t given_back;
static _Atomic bool passing; /* one refused allocation's pass at a time */

/* The tag's committed pages that hold neither blocks nor metadata. */
static size_t free_pages(ra_tag_t tag)
{
    size_t used = ra__region_metadata(tag);
    size_t committed = ra__budget_committed(tag);

    for (unsigned k = 0, n = ra__pool_count(tag); k < n; k++)
        used += ra__be_arena_active(ra__pool_arena(tag, k));
    return committed > used ? committed - used : 0;
}

static int by_priority(const void *a, const void *b)
{
    int x = ra__budget_priority(*(const ra_tag_t *)a);
    int y = ra__budget_priority(*(const ra_tag_t *)b);

    return (x > y) - (x < y);
}

void ra__give_back_note(size_t before, size_t after)
{
    if (after < before)
        atomic_fetch_add_explicit(&given_back, before - after,
                                  memory_order_relaxed);
}

uint64_t ra__given_back(void)
{
    return atomic_load_explicit(&given_back, memory_order_relaxed);
}

size_t ra__give_back_by_priority(size_t below, bool every)
{
    unsigned count = ra__tag_published();
    ra_tag_t *order = ra__meta_alloc((count + 1) * sizeof *order);
    size_t now = ra__proc_rss(), before = now;
    unsigned n = 0;

    if (order == NULL)
        return now;
    /* What destroyed tags' slots keep for their next holders goes first:
     * nobody holds it (a purge of an id being handed out again meanwhile
     * costs its next holder a fault or two, as ra_purge_all's does). */
    for (ra_tag_t t = 1; t <= count && now >= below; t++) {
        if (ra__tag_valid(t) || ra__pool_count(t) == 0)
            continue;
        /* The blocks destroys left live there too (leftovers.c): their
         * slabs are nobody's, and no purge reaches them. */
        if (!ra__leftovers_reclaim(t) &&
            !every && free_pages(t) < WORTH_A_PURGE)
            continue;
        ra__pairs_flush_parked(t);
        ra__pool_purge(t);
        now = ra__proc_rss();
    }
    for (ra_tag_t t = 1; t <= count; t++)
        if (ra__tag_valid(t))
            order[n++] = t;
    ra__assert(n <= count);
    qsort(order, n, sizeof *order, by_priority);
    for (unsigned i = 0; i < n && now >= below; i++) {
        if (!ra__leftovers_reclaim(order[i]) && !every &&
            free_pages(order[i]) < WORTH_A_PURGE)
            continue;
        ra__purge_kept(order[i]);
        now = ra__proc_rss();
    }
    ra__meta_free(order);
    ra__give_back_note(before, now);
    return now;
}

/* A refused allocation does not know how much it needs given back: its pass
 * gives back every tag's free pages worth a purge, lowest priority first,
 * not only down to the watcher's target. One pass runs at a time: a
 * thread refused while another passes waits for that pass (no lock of
 * ours or jemalloc's is held here) and retries on the headroom it left, so
 * that a storm of refusals at a limit with nothing left to give keeps at
 * most one thread walking the tags. */
static void give_back_under_limit(void)
{
    if (!ra__budget_pressure_on())
        return;
    if (atomic_exchange_explicit(&passing, true, memory_order_acquire)) {
        while (atomic_load_explicit(&passing, memory_order_acquire))
            sched_yield();
        return;
    }
    ra__budget_pressure_reset_headroom(ra__give_back_by_priority(0, false));
    atomic_store_explicit(&passing, false, memory_order_release);
}

/* doc/design.md, jemalloc facts: a bounded arena can fail while dirty pages
 * sit unused. */
void ra__give_back_after_refusal(ra_tag_t tag)
{
    ra_tag_t refused = ra__budget_refused;

    if (ra__budget_refused_by_pressure()) {
        give_back_under_limit();
        return;
    }
    /* A budget's refusal names a tag handed out (its own or an
     * ancestor's), or none. */
    ra__assert(refused == RA_TAG_NONE || refused <= ra__tag_published());
    /* A slot's leftovers first (leftovers.c): freed only when nothing of
     * the tag is live, this allocation aside, and nobody else uses it. */
    ra__leftovers_reclaim(tag);
    ra__purge_kept(tag);
    /* An ancestor's hard limit refused (tag trees): dirty pages anywhere
     * in its subtree count against it. */
    if (refused != RA_TAG_NONE && refused != tag) {
        ra__leftovers_reclaim_subtree(refused);
        ra__purge_subtree(refused);
    }
}

void ra__give_back_postfork_child(void)
{
    atomic_store_explicit(&passing, false, memory_order_relaxed);
}

/* Floor: tags. A tag's ids: which are published and live, the queue of
 * destroyed ones ready for reuse (oldest first), fresh ones handed out
 * with their region and first arena, the regions passed over and taken
 * back, and the give-back of the address space no tag uses. Under
 * ids_lock, which the registry (tag.c) takes under a name's stripe, never
 * the other way. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "budget.h"
#include "internal.h"
#include "region.h"

unsigned ra__tags_published;
unsigned char ra__tag_live[RA__MAX_TAGS_LIMIT + 1];

static struct ra__mutex ids_lock = RA__MUTEX_INIT(RA__RANK_IDS);
/* Under ids_lock: destroyed ids ready for reuse, oldest first (a ring),
 * and which ids are in it; ids passed over for good (new_tag); the ids
 * handed out so far, fresh or passed over (published may lag behind: it
 * moves once a creation is done). */
static unsigned free_ids[RA__MAX_TAGS_LIMIT];
static unsigned free_head, free_count;
static bool queued[RA__MAX_TAGS_LIMIT + 1];
static bool passed_over[RA__MAX_TAGS_LIMIT + 1];
static unsigned handed_out;
/* How many ids are passed over now: written under ids_lock, read by the
 * reports without it. */
static _Atomic unsigned npassed_over;

/* ids published so far rise to tag, never fall. */
void ra__tag_publish(ra_tag_t tag)
{
    unsigned now = __atomic_load_n(&ra__tags_published, __ATOMIC_RELAXED);

    ra__assert(tag != RA_TAG_NONE && tag <= RA__MAX_TAGS_LIMIT);

    while (tag > now &&
           !__atomic_compare_exchange_n(&ra__tags_published, &now, tag, true,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
}

void ra__tag_ids_prefork(void)
{
    ra__lock(&ids_lock);
}

void ra__tag_ids_postfork(void)
{
    ra__unlock(&ids_lock);
}

/* With ids_lock held: the lowest id passed over whose region is free
 * again, with its first arena, or RA_TAG_NONE with errno ENOSPC (none is)
 * or as ra__pool_take_back. Tried only when no fresh id is left, so that
 * the maps are read only by creations that would fail otherwise. */
static ra_tag_t taken_back_tag(void)
{
    ra__assert_held(&ids_lock);
    for (ra_tag_t t = 1;
         t <= handed_out &&
         atomic_load_explicit(&npassed_over, memory_order_relaxed) != 0;
         t++) {
        int arena;
        if (!passed_over[t])
            continue;
        arena = ra__pool_take_back(t);
        if (arena < 0) {
            if (errno == EEXIST)
                continue;
            return RA_TAG_NONE;
        }
        passed_over[t] = false;
        ra__assert(!queued[t] && !ra__tag_live[t]);
        atomic_fetch_sub_explicit(&npassed_over, 1, memory_order_relaxed);
        ra__pool_start(t, (unsigned)arena);
        return t;
    }
    errno = ENOSPC;
    return RA_TAG_NONE;
}

/* With ids_lock held: a new id, with its arena, or RA_TAG_NONE with errno
 * set. An id whose region another mapping took (given-back space, the
 * region's EEXIST) is published dead and passed over: never live, never
 * recycled, failing every call as a destroyed id does, so that one region
 * lost does not stop every creation after it. Once every fresh id is
 * handed out, a creation takes back a region passed over whose space is
 * free again (taken_back_tag). */
static ra_tag_t new_tag(bool tagging)
{
    unsigned count = handed_out;
    int arena, saved = errno;

    ra__assert_held(&ids_lock);
    for (;; count++) {
        if (count >= ra__config()->max_tags) {
            ra_tag_t tag = tagging ? taken_back_tag() : RA_TAG_NONE;
            if (tag != RA_TAG_NONE)
                errno = saved;
            else if (!tagging)
                errno = ENOSPC;
            return tag;
        }
        if (!tagging) {
            handed_out = count + 1;
            return count + 1;
        }
        /* Every id published has its region handed out, and no other. */
        ra__assert(ra__region_count() == count);
        arena = ra__pool_first_arena(count + 1, &ra__budget_commits);
        if (arena >= 0)
            break;
        if (errno != EEXIST)
            return RA_TAG_NONE;
        passed_over[count + 1] = true;
        atomic_fetch_add_explicit(&npassed_over, 1, memory_order_relaxed);
        handed_out = count + 1;
        ra__tag_publish(count + 1);
    }
    errno = saved; /* a region passed over is no error of the caller's */
    ra__pool_start(count + 1, (unsigned)arena);
    handed_out = count + 1;
    return count + 1;
}

/* With ids_lock held: the id destroyed longest ago, its region and arena
 * empty (ra__tag_wipe), or RA_TAG_NONE. */
static ra_tag_t recycled_tag(void)
{
    ra_tag_t tag;

    ra__assert_held(&ids_lock);
    if (free_count == 0)
        return RA_TAG_NONE;
    tag = free_ids[free_head];
    /* Invariant 12: a queued id is neither live nor passed over. */
    ra__assert(queued[tag] && !ra__tag_live[tag] && !passed_over[tag]);
    free_head = (free_head + 1) % RA__MAX_TAGS_LIMIT;
    free_count--;
    queued[tag] = false;
    return tag;
}

/* With ids_lock held: the id destroyed longest ago goes back to the front
 * of the queue (a creation that could not finish). */
static void unrecycle(ra_tag_t tag)
{
    ra__assert_held(&ids_lock);
    ra__assert(!queued[tag] && !ra__tag_live[tag] &&
               free_count < RA__MAX_TAGS_LIMIT);
    free_head = (free_head + RA__MAX_TAGS_LIMIT - 1) % RA__MAX_TAGS_LIMIT;
    free_ids[free_head] = tag;
    free_count++;
    queued[tag] = true;
}

ra_tag_t ra__tag_ids_take(bool tagging)
{
    ra_tag_t tag;

    ra__lock(&ids_lock);
    tag = recycled_tag();
    if (tag == RA_TAG_NONE)
        tag = new_tag(tagging);
    ra__unlock(&ids_lock);
    return tag;
}

void ra__tag_ids_put_back(ra_tag_t tag)
{
    /* Back to the queue's front, a fresh one too: its arena is made, the
     * next creation takes it. */
    ra__lock(&ids_lock);
    unrecycle(tag);
    ra__unlock(&ids_lock);
    ra__tag_publish(tag);
}

bool ra__tag_give_back_address_space(void)
{
    bool given;

    if (!atomic_load_explicit(&ra__tagging, memory_order_acquire))
        return false;
    /* No region is handed to a new tag meanwhile. */
    ra__lock(&ids_lock);
    given = ra__region_give_back();
    ra__unlock(&ids_lock);
    return given;
}

/* The next free id that ra__tag_next_idle names, as a position counted from
 * free_head. */
static unsigned idle_cursor;

void ra__tag_release_id(ra_tag_t tag)
{
    ra__lock(&ids_lock);
    /* Invariant 12: at most one of live, queued, a thread's own. */
    ra__assert(!queued[tag] && !ra__tag_live[tag] && !passed_over[tag] &&
               free_count < RA__MAX_TAGS_LIMIT);
    free_ids[(free_head + free_count) % RA__MAX_TAGS_LIMIT] = tag;
    free_count++;
    queued[tag] = true;
    ra__unlock(&ids_lock);
}

bool ra__tag_take_free(ra_tag_t tag)
{
    bool found = false;

    ra__lock(&ids_lock);
    for (unsigned i = 0; i < free_count && !found; i++) {
        unsigned at = (free_head + i) % RA__MAX_TAGS_LIMIT;
        if (free_ids[at] != tag)
            continue;
        /* The ids after it move up one: the queue keeps its order. */
        for (unsigned j = i; j + 1 < free_count; j++)
            free_ids[(free_head + j) % RA__MAX_TAGS_LIMIT] =
                free_ids[(free_head + j + 1) % RA__MAX_TAGS_LIMIT];
        free_count--;
        queued[tag] = false;
        found = true;
    }
    ra__unlock(&ids_lock);
    return found;
}

unsigned ra__tag_passed_over(void)
{
    return atomic_load_explicit(&npassed_over, memory_order_relaxed);
}

bool ra__tag_in_limbo(ra_tag_t tag)
{
    bool limbo;

    ra__lock(&ids_lock);
    limbo = tag <= __atomic_load_n(&ra__tags_published, __ATOMIC_RELAXED) &&
            !ra__tag_live[tag] && !queued[tag] && !passed_over[tag];
    ra__unlock(&ids_lock);
    return limbo;
}

ra_tag_t ra__tag_next_idle(void)
{
    ra_tag_t tag = RA_TAG_NONE;

    ra__lock(&ids_lock);
    if (free_count != 0) {
        idle_cursor %= free_count;
        tag = free_ids[(free_head + idle_cursor++) % RA__MAX_TAGS_LIMIT];
    }
    ra__unlock(&ids_lock);
    return tag;
}

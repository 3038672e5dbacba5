/* Floor: ends. What a purge can reach of a tag: the calling thread's
 * caches of it, the tcaches of its parked pairs, its return stacks, its
 * pool's dirty pages; the same over a subtree; the ids threads own,
 * queued; and a creation whose recycled slot's kept pages do not fit a
 * budget, purged and tried again. Above the pool, the threads, the stacks
 * and the registry, which it calls in that order, so that none of them
 * calls another back. */
#include "internal.h"
#include "tags.h"
#include "pairs.h"
#include "ends.h"
#include "budget.h"

void ra__purge_kept(ra_tag_t tag)
{
    ra__thread_flush_tag(tag);
    ra__pairs_flush_parked(tag);
    ra__returns_drain(tag);
    ra__pool_purge(tag);
}

void ra__purge_subtree(ra_tag_t root)
{
    unsigned count = ra__tag_published();

    for (ra_tag_t t = 1; t <= count; t++)
        if (ra__tag_in_subtree(t, root))
            ra__purge_kept(t);
}

/* A budget says "does not fit" (ra__budget_attach,
 * ra__budget_config_fits), never purges: the purge is above it, here. */
ra_tag_t ra__purge_create(ra_tag_t parent, const char *name, bool anywhere,
                          ra_tag_t *own)
{
    ra_tag_t unfit = RA_TAG_NONE, purged = RA_TAG_NONE, tag;

    while ((tag = ra__tag_create(parent, name, anywhere, own, &unfit)) ==
               RA_TAG_NONE &&
           unfit != RA_TAG_NONE) {
        /* An id just purged is never found unfit again in a row. */
        ra__assert(unfit != purged);
        ra__purge_kept(unfit);
        purged = unfit;
        (void)purged; /* read by the debug build's check only */
    }
    ra__assert(tag != RA_TAG_NONE || unfit == RA_TAG_NONE);
    return tag;
}

void ra__purge_owned(bool idle_only)
{
    ra_tag_t taken[64];
    unsigned n;

    do {
        n = ra__own_seize(taken, 64, idle_only);
        for (unsigned i = 0; i < n; i++)
            ra__tag_release_id(taken[i]);
    } while (n == 64 && !idle_only);
}

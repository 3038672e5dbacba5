/* Floor: API. A tag's settings, the public calls: its budget
 * (ra_tag_set_limit, ra_tag_get_limit: budget.c keeps it) and its pool's
 * bound (ra_tag_set_arenas, ra_tag_arenas: pool.c's). Each checks its
 * arguments and the tag first, so that the owners below never ask the
 * registry. */
#include <errno.h>

#include "budget.h"
#include "internal.h"
#include "ends.h"

int ra_tag_set_limit(ra_tag_t tag, const ra_tag_limit_t *limit)
{
    bool soft_fits = limit == NULL || limit->hard == 0 ||
                     limit->soft <= limit->hard;

    if (ra__check_call(soft_fits && ra__tag_valid(tag)) != 0)
        return -1;
    /* A budget counts the tag's commits: blocks an earlier holder of the
     * slot left live (leftovers.c) would be charged to a holder that
     * cannot free them. Freed first, when nobody uses the tag yet, for a
     * hard limit (once: destroys leave none beside one), and for a soft
     * limit that what the subtree holds has reached, as its kept pages
     * are purged (below): a soft limit above it would pay a reset at
     * every request that sets one. */
    if (limit != NULL &&
        (limit->hard != 0 ||
         (limit->soft != 0 && ra__budget_tree(tag) >= limit->soft)))
        ra__leftovers_reclaim_subtree(tag);
    /* The slots' kept pages past the new budget go back first (a tag's end
     * does not purge them). */
    if (!ra__budget_fits(tag, limit))
        ra__purge_subtree(tag);
    ra__budget_set(tag, limit);
    return 0;
}

int ra_tag_get_limit(ra_tag_t tag, ra_tag_limit_t *out)
{
    if (out == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (ra__check_call(ra__tag_valid(tag)) != 0)
        return -1;
    ra__budget_get(tag, out);
    return 0;
}

int ra_tag_set_arenas(ra_tag_t tag, unsigned max)
{
    if (ra__check_call(max >= 1 && ra__tag_valid(tag)) != 0)
        return -1;
    ra__pool_set_bound(tag, max);
    return 0;
}

int ra_tag_arenas(ra_tag_t tag, unsigned *out, unsigned cap)
{
    if (ra__check_call((out != NULL || cap == 0) && ra__tag_valid(tag)) != 0)
        return -1;
    return (int)ra__pool_arenas(tag, out, cap);
}

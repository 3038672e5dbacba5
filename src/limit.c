/* Floor: state. Per-tag budgets: ra_tag_set_limit and ra_tag_get_limit,
 * REGIONALLOC_LIMITS, the soft limit's callback and the count of refused
 * allocations. The limits themselves are kept where memory is committed, in
 * the extent hooks (region.c), so that no allocation path pays for them. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "backend.h"
#include "internal.h"

struct budget {
    ra_tag_limit_t limit;
    _Atomic uint64_t failures;
};

static struct budget budgets[RA__MAX_TAGS_LIMIT + 1];
/* Keeps a budget's fields together for readers; never held while user code
 * runs. */
static pthread_mutex_t budget_lock = PTHREAD_MUTEX_INITIALIZER;
/* Set while this thread runs a soft limit's callback: a crossing that the
 * callback's own allocations cause waits until it returns. */
static RA__TLS bool tls_in_callback;

void ra__limit_prefork(void)
{
    ra__lock(&budget_lock);
}

void ra__limit_postfork(void)
{
    ra__unlock(&budget_lock);
}

/* A recycled tag's slot keeps the pages its last holder left (a tag's end
 * does not purge): they must not put the new holder past a budget set on
 * it, so a budget below what the region holds purges them first. */
/* subtree: the tag may have children (not at its creation, which holds
 * the registry's lock: then its own pages are all there is to purge). */
static void set_budget(ra_tag_t tag, const ra_tag_limit_t *limit,
                       bool subtree)
{
    size_t held = ra__region_tree_committed(tag - 1);

    /* The budget bounds the tag's subtree (tag trees). */
    if ((limit->hard != 0 && held > limit->hard) ||
        (limit->soft != 0 && held >= limit->soft)) {
        if (subtree)
            ra__pool_purge_subtree(tag);
        else
            ra__pool_purge_kept(tag);
    }
    ra__lock(&budget_lock);
    budgets[tag].limit = *limit;
    ra__region_set_limit(tag - 1, limit->hard, limit->soft);
    ra__unlock(&budget_lock);
}

static const ra_tag_limit_t no_limit = {0, 0, NULL, NULL};

int ra_tag_set_limit(ra_tag_t tag, const ra_tag_limit_t *limit)
{
    bool soft_fits = limit == NULL || limit->hard == 0 ||
                     limit->soft <= limit->hard;

    if (ra__check_call(soft_fits && ra__tag_valid(tag)) != 0)
        return -1;
    set_budget(tag, limit != NULL ? limit : &no_limit, true);
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
    ra__lock(&budget_lock);
    *out = budgets[tag].limit;
    ra__unlock(&budget_lock);
    return 0;
}

void ra__limit_apply_config(ra_tag_t tag, const char *name)
{
    const struct ra__config *config = ra__config();

    for (unsigned i = 0; i < config->nlimits; i++) {
        const struct ra__limit_entry *e = &config->limits[i];
        if (strcmp(e->name, name) == 0) {
            ra_tag_limit_t limit = {e->hard, e->soft, NULL, NULL};
            set_budget(tag, &limit, false);
        }
    }
}

void ra__limit_forget(ra_tag_t tag)
{
    set_budget(tag, &no_limit, false);
    atomic_store_explicit(&budgets[tag].failures, 0, memory_order_relaxed);
}

void ra__limit_count_failure(ra_tag_t tag)
{
    atomic_fetch_add_explicit(&budgets[tag].failures, 1,
                              memory_order_relaxed);
}

void ra__limit_read(ra_tag_t tag, size_t *hard, size_t *soft,
                    uint64_t *failures)
{
    ra__lock(&budget_lock);
    *hard = budgets[tag].limit.hard;
    *soft = budgets[tag].limit.soft;
    ra__unlock(&budget_lock);
    *failures = atomic_load_explicit(&budgets[tag].failures,
                                     memory_order_relaxed);
}

void ra__limit_fire_soft(void)
{
    ra_tag_t tag;

    if (tls_in_callback)
        return;
    while ((tag = ra__region_take_crossing()) != RA_TAG_NONE) {
        void (*on_soft)(void *, ra_tag_t, size_t);
        void *ctx;
        ra__lock(&budget_lock);
        on_soft = budgets[tag].limit.on_soft;
        ctx = budgets[tag].limit.ctx;
        ra__unlock(&budget_lock);
        if (on_soft == NULL)
            continue;
        tls_in_callback = true;
        on_soft(ctx, tag, ra__region_tree_committed(tag - 1));
        tls_in_callback = false;
    }
}

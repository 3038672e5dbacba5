/* Floor: budgets. Per-tag budgets, in one place: what each tag and its
 * subtree hold committed (the extent hooks report every commit and
 * decommit here, so no allocation path pays for a budget), the charge up
 * the tag tree against each level's hard limit, the soft limits' crossings
 * and callbacks, ra_tag_set_limit and ra_tag_get_limit, REGIONALLOC_LIMITS,
 * the count of refused allocations, and the retry after a refusal (the
 * public calls are settings.c's). The
 * tree's parent links live here too, once: the charge walks them. */
#include <errno.h>
#include <stdalign.h>
#include <sched.h>
#include <string.h>

#include "budget.h"
#include "internal.h"

/* One tag's budget and commit counts, indexed by tag ([0] unused). */
/* Lines of their own: a request's budget is set and forgotten by the
 * thread that holds it, and ids side by side are often two threads'. */
struct budget {
    /* Bytes jemalloc holds committed in the tag's region, and their
     * high-water mark since the tag's creation. */
    alignas(64) _Atomic size_t committed;
    _Atomic size_t peak_committed;
    /* The same over the tag's subtree (the tag and its descendants),
     * charged at every level up the chain where memory is committed;
     * equal to committed for a tag without children. */
    _Atomic size_t tree_committed;
    _Atomic size_t tree_peak;
    /* The parent (RA_TAG_NONE at the top level). Set when the tag is
     * created and cleared when it is destroyed, while nobody allocates
     * under it (the caller's promise). A purge may still give pages back
     * meanwhile (ra_purge_all, an idle slot's decay): linking (below)
     * holds that off, so that what the tag holds moves up the chain or
     * not at all, never half. */
    _Atomic ra_tag_t parent;
    /* The limits on the subtree (0: none): tree_committed never exceeds
     * hard; the first commit that reaches soft while soft_armed is
     * reported once. */
    _Atomic size_t hard, soft;
    /* Bumped when the tag is destroyed: a crossing noted for the old tag
     * and not yet delivered is dropped. */
    _Atomic uint32_t holder;
    atomic_bool soft_armed;
    struct ra__spin linking;
    /* What ra_tag_set_limit was given (callback and context included),
     * under the tag's guard; and the allocations the hard limit refused. */
    ra_tag_limit_t limit;
    _Atomic uint64_t failures;
};

static struct budget budgets[RA__MAX_TAGS_LIMIT + 1] = {
    [0 ... RA__MAX_TAGS_LIMIT] = {.linking = RA__SPIN_INIT(RA__RANK_LINKING)}};
/* Set while this thread runs a soft limit's callback: a crossing that the
 * callback's own allocations cause waits until it returns. */
static RA__TLS bool tls_in_callback;

RA__TLS ra_tag_t ra__budget_refused;
RA__TLS unsigned ra__budget_soft_pending;

/* The soft limits this thread's commits crossed, oldest first, with the
 * holder each was crossed for: delivered by ra__budget_fire_soft once the
 * allocation is back in the library's hands (and after the callback it
 * may be running). A few suffice: a crossing waits only while a callback
 * runs; when they are all taken, a crossing is left armed, to be noted at
 * the tag's next commit. */
#define PENDING_MAX 8
static RA__TLS struct pending_crossing {
    ra_tag_t tag;
    uint32_t holder;
} tls_pending[PENDING_MAX];

/* Keep a limit whole for readers (held for a copy, never while user code
 * runs): tag t's is guards[t % GUARDS], so that a request that sets a
 * budget and ends its tag takes no lock of every tag's, and ids side by
 * side (two threads' requests) take different ones. Spin locks that
 * yield, taken in order at a fork. */
#define GUARDS 64u
static struct {
    alignas(64) struct ra__spin held;
} guards[GUARDS] = {
    [0 ... GUARDS - 1] = {.held = RA__SPIN_INIT(RA__RANK_GUARD)}};

static void guard_lock(ra_tag_t tag)
{
    ra__spin_lock(&guards[tag % GUARDS].held);
}

static void guard_unlock(ra_tag_t tag)
{
    ra__spin_unlock(&guards[tag % GUARDS].held);
}

void ra__budget_prefork(void)
{
    for (unsigned g = 0; g < GUARDS; g++)
        guard_lock(g);
}

void ra__budget_postfork(void)
{
    for (unsigned g = 0; g < GUARDS; g++)
        guard_unlock(g);
}

/* -- the commit counts and the charge up the tree --------------------------- */

static void raise_to(_Atomic size_t *peak_at, size_t now)
{
    size_t peak = atomic_load_explicit(peak_at, memory_order_relaxed);

    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(peak_at, &peak, now,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

static ra_tag_t parent_of(ra_tag_t tag)
{
    return atomic_load_explicit(&budgets[tag].parent, memory_order_acquire);
}

/* Adds bytes to tag's subtree count unless that passes its hard limit.
 * Returns false when refused. */
static bool charge_one(struct budget *b, size_t bytes)
{
    size_t now = atomic_load_explicit(&b->tree_committed,
                                      memory_order_relaxed);
    size_t hard = atomic_load_explicit(&b->hard, memory_order_relaxed);
    size_t next;

    do {
        next = now + bytes;
        if (next < now || (hard != 0 && next > hard))
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
        &b->tree_committed, &now, next, memory_order_relaxed,
        memory_order_relaxed));
    /* Invariant 8: the count never passes the hard limit. */
    ra__assert(hard == 0 || next <= hard);
    return true;
}

/* The soft limit of tag's subtree reached by a commit (now): disarmed, and
 * noted for the calling thread, which runs the callback once the
 * allocation is back in the library's hands. */
static void note_soft(ra_tag_t tag, size_t now)
{
    struct budget *b = &budgets[tag];
    size_t soft = atomic_load_explicit(&b->soft, memory_order_relaxed);

    if (soft != 0 && now >= soft && ra__budget_soft_pending < PENDING_MAX &&
        atomic_exchange_explicit(&b->soft_armed, false, memory_order_relaxed))
        tls_pending[ra__budget_soft_pending++] = (struct pending_crossing){
            tag, atomic_load_explicit(&b->holder, memory_order_relaxed)};
    ra__assert(ra__budget_soft_pending <= PENDING_MAX);
}

/* Charges bytes to the subtree counts from `from` up to the top. On a
 * refusal the levels already charged give them back, the calling thread
 * learns whose limit refused (ra__budget_refused), and false is returned;
 * else each level's peak is raised and its soft limit checked. */
static bool charge_chain(ra_tag_t from, size_t bytes)
{
    ra_tag_t at, refused = RA_TAG_NONE;

    for (at = from; at != RA_TAG_NONE; at = parent_of(at))
        if (!charge_one(&budgets[at], bytes)) {
            refused = at;
            break;
        }
    if (refused != RA_TAG_NONE) {
        for (at = from; at != refused; at = parent_of(at)) {
            size_t had = atomic_fetch_sub_explicit(
                &budgets[at].tree_committed, bytes, memory_order_relaxed);
            /* Given back only what this charge took. */
            ra__assert(had >= bytes);
            (void)had;
        }
        ra__budget_refused = refused;
        ra__budget_pressure_refused(false);
        return false;
    }
    for (at = from; at != RA_TAG_NONE; at = parent_of(at)) {
        size_t now = atomic_load_explicit(&budgets[at].tree_committed,
                                          memory_order_relaxed);
        raise_to(&budgets[at].tree_peak, now);
        note_soft(at, now);
    }
    return true;
}

/* Gives back what was charged; a subtree falling below its soft limit
 * arms it again. */
static void uncharge(ra_tag_t from, size_t bytes)
{
    for (ra_tag_t at = from; at != RA_TAG_NONE; at = parent_of(at)) {
        struct budget *b = &budgets[at];
        size_t had = atomic_fetch_sub_explicit(&b->tree_committed, bytes,
                                               memory_order_relaxed),
               now = had - bytes;
        size_t soft = atomic_load_explicit(&b->soft, memory_order_relaxed);
        /* A subtree gives back no more than it holds. */
        ra__assert(had >= bytes);
        if (soft != 0 && now < soft)
            atomic_store_explicit(&b->soft_armed, true,
                                  memory_order_relaxed);
    }
}

static void link_lock(struct budget *b)
{
    ra__spin_lock_busy(&b->linking);
}

static void link_unlock(struct budget *b)
{
    ra__spin_unlock(&b->linking);
}

/* Counts bytes more committed in tag, once the memory limit's headroom has
 * them, and in the subtree of every tag up
 * its chain, unless that would pass one of their hard limits: then nothing
 * is counted anywhere. Each level's count is taken with its own
 * compare-and-swap against its limit, so no subtree ever holds more than
 * its limit, whatever threads race (tag trees). */
static bool commit(ra_tag_t tag, size_t bytes)
{
    size_t now;

    if (ra__budget_headroom_refuses(tag, bytes)) {
        ra__budget_refused = tag;
        return false;
    }
    if (!charge_chain(tag, bytes)) {
        ra__budget_headroom_give(bytes);
        return false;
    }
    now = atomic_fetch_add_explicit(&budgets[tag].committed, bytes,
                                    memory_order_relaxed) + bytes;
    raise_to(&budgets[tag].peak_committed, now);
    return true;
}

static void uncommit(ra_tag_t tag, size_t bytes)
{
    struct budget *b = &budgets[tag];
    size_t had;

    link_lock(b);
    had = atomic_fetch_sub_explicit(&b->committed, bytes,
                                    memory_order_relaxed);
    /* A decommit gives back what a commit counted. */
    ra__assert(had >= bytes);
    (void)had;
    uncharge(tag, bytes);
    link_unlock(b);
    ra__budget_headroom_give(bytes);
}

/* jemalloc grows (uncommitted) after a recycled extent's commit was
 * refused: whether this thread's last commit in tag was refused by tag's
 * own chain. */
static bool refused_here(ra_tag_t tag)
{
    return ra__budget_refused == tag;
}

const struct ra__commit_ops ra__budget_commits = {commit, uncommit,
                                                  refused_here};

size_t ra__budget_committed(ra_tag_t tag)
{
    return atomic_load_explicit(&budgets[tag].committed,
                                memory_order_relaxed);
}

size_t ra__budget_peak(ra_tag_t tag)
{
    return atomic_load_explicit(&budgets[tag].peak_committed,
                                memory_order_relaxed);
}

size_t ra__budget_tree(ra_tag_t tag)
{
    return atomic_load_explicit(&budgets[tag].tree_committed,
                                memory_order_relaxed);
}

size_t ra__budget_tree_peak(ra_tag_t tag)
{
    return atomic_load_explicit(&budgets[tag].tree_peak,
                                memory_order_relaxed);
}

/* Tag's hard limit (0: none). */
static size_t hard_of(ra_tag_t tag)
{
    return atomic_load_explicit(&budgets[tag].hard, memory_order_relaxed);
}

ra_tag_t ra__budget_parent(ra_tag_t tag)
{
    return parent_of(tag);
}

static bool link_to(ra_tag_t tag, ra_tag_t parent)
{
    struct budget *b = &budgets[tag];
    bool fits = true;

    ra__assert_rank_held(RA__RANK_STRIPE);
    link_lock(b);
    ra__assert(parent_of(tag) == RA_TAG_NONE &&
               ra__budget_tree(tag) == ra__budget_committed(tag));
    /* What the tag holds already (a recycled slot's pages, its arena's
     * metadata) joins every ancestor's subtree, within their limits, as a
     * commit would. */
    if (parent != RA_TAG_NONE) {
        fits = charge_chain(parent, ra__budget_committed(tag));
        if (fits)
            atomic_store_explicit(&b->parent, parent, memory_order_release);
    }
    link_unlock(b);
    return fits;
}

bool ra__budget_attach(ra_tag_t tag, ra_tag_t parent)
{
    if (link_to(tag, parent)) {
        ra__assert(parent_of(tag) == parent);
        return true;
    }
    /* Not this thread's commit refused: nothing for a grow to retry. */
    ra__budget_refused = RA_TAG_NONE;
    errno = ENOMEM;
    return false;
}

/* -- the limits -------------------------------------------------------------- */

/* Sticky: a hard limit counts commits, which a slot's leftovers would
 * hold for a holder that cannot free them (leftovers.c). */
static atomic_bool any_hard;

bool ra__budget_any_hard(void)
{
    return atomic_load_explicit(&any_hard, memory_order_relaxed) ||
           ra__config()->nlimits != 0;
}

static void set_limits(ra_tag_t tag, size_t hard, size_t soft)
{
    struct budget *b = &budgets[tag];

    if (hard != 0)
        atomic_store_explicit(&any_hard, true, memory_order_relaxed);
    atomic_store_explicit(&b->hard, hard, memory_order_relaxed);
    atomic_store_explicit(&b->soft, soft, memory_order_relaxed);
    atomic_store_explicit(&b->soft_armed, ra__budget_tree(tag) < soft,
                          memory_order_relaxed);
}

/* A recycled tag's slot keeps the pages its last holder left (a tag's end
 * does not purge): they must not put the new holder past a budget set on
 * it, so a budget below what the subtree holds does not fit, and its
 * caller purges them first (ra__budget_fits). */
static bool limit_fits(ra_tag_t tag, const ra_tag_limit_t *limit)
{
    size_t held = ra__budget_tree(tag);

    /* The budget bounds the tag's subtree (tag trees). */
    return !((limit->hard != 0 && held > limit->hard) ||
             (limit->soft != 0 && held >= limit->soft));
}

static void set_budget(ra_tag_t tag, const ra_tag_limit_t *limit)
{
    guard_lock(tag);
    budgets[tag].limit = *limit;
    set_limits(tag, limit->hard, limit->soft);
    guard_unlock(tag);
}

static const ra_tag_limit_t no_limit = {0, 0, NULL, NULL};

bool ra__budget_fits(ra_tag_t tag, const ra_tag_limit_t *limit)
{
    return limit == NULL || limit_fits(tag, limit);
}

void ra__budget_set(ra_tag_t tag, const ra_tag_limit_t *limit)
{
    set_budget(tag, limit != NULL ? limit : &no_limit);
}

void ra__budget_get(ra_tag_t tag, ra_tag_limit_t *out)
{
    guard_lock(tag);
    *out = budgets[tag].limit;
    guard_unlock(tag);
}

/* A tag grows its pool only while this much of every hard limit up its
 * chain is free: each arena's metadata (its first 2 MiB block) is committed
 * in the tag's region, charged to every ancestor's subtree, and would
 * otherwise eat the budget of their blocks. */
#define GROW_MARGIN ((size_t)8 << 20)

bool ra__budget_allows_growth(ra_tag_t tag)
{
    for (ra_tag_t at = tag; at != RA_TAG_NONE; at = parent_of(at)) {
        size_t hard = hard_of(at);
        /* What is free under the limit, 0 past it: no sum to wrap. */
        if (hard != 0 &&
            ra__size_sub(hard, ra__budget_tree(at)) < GROW_MARGIN)
            return false;
    }
    return true;
}

/* REGIONALLOC_LIMITS' entries for name, each in turn: visit returns
 * false to stop. Returns whether every visit went on. */
static bool each_configured(ra_tag_t tag, const char *name,
                            bool (*visit)(ra_tag_t, const ra_tag_limit_t *))
{
    const struct ra__config *config = ra__config();

    for (unsigned i = 0; i < config->nlimits; i++) {
        const struct ra__limit_entry *e = &config->limits[i];
        ra_tag_limit_t limit = {e->hard, e->soft, NULL, NULL};
        if (strcmp(e->name, name) == 0 && !visit(tag, &limit))
            return false;
    }
    return true;
}

static bool set_configured(ra_tag_t tag, const ra_tag_limit_t *limit)
{
    set_budget(tag, limit);
    return true;
}

bool ra__budget_config_fits(ra_tag_t tag, const char *name)
{
    return each_configured(tag, name, limit_fits);
}

void ra__budget_apply_config(ra_tag_t tag, const char *name)
{
    ra__assert_rank_held(RA__RANK_STRIPE);
    (void)each_configured(tag, name, set_configured);
}

void ra__budget_forget(ra_tag_t tag)
{
    struct budget *b = &budgets[tag];
    ra_tag_t up;
    size_t held;

    set_budget(tag, &no_limit);
    atomic_store_explicit(&b->failures, 0, memory_order_relaxed);
    ra__budget_set_priority(tag, 0);
    /* A destroyed tag has no children left (they go first): its subtree is
     * itself, and it leaves its ancestors' subtrees with what it holds. */
    link_lock(b);
    up = parent_of(tag);
    held = ra__budget_committed(tag);
    ra__assert(ra__budget_tree(tag) == held);
    atomic_store_explicit(&b->parent, RA_TAG_NONE, memory_order_release);
    if (up != RA_TAG_NONE)
        uncharge(up, held);
    link_unlock(b);
    atomic_store_explicit(&b->peak_committed, held, memory_order_relaxed);
    atomic_store_explicit(&b->tree_peak, held, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->holder, 1, memory_order_relaxed);
}

void ra__budget_count_failure(ra_tag_t tag)
{
    atomic_fetch_add_explicit(&budgets[tag].failures, 1,
                              memory_order_relaxed);
    ra__budget_pressure_count_failure();
}

void ra__budget_read(ra_tag_t tag, size_t *hard, size_t *soft,
                     uint64_t *failures)
{
    guard_lock(tag);
    *hard = budgets[tag].limit.hard;
    *soft = budgets[tag].limit.soft;
    guard_unlock(tag);
    *failures = atomic_load_explicit(&budgets[tag].failures,
                                     memory_order_relaxed);
}

/* -- the soft limits' callbacks, and the retry ------------------------------- */

/* The tag of the oldest crossing not yet delivered (taken off the list),
 * or RA_TAG_NONE when none is left; a crossing of a tag destroyed since is
 * skipped. */
static ra_tag_t take_crossing(void)
{
    while (ra__budget_soft_pending > 0) {
        struct pending_crossing c = tls_pending[0];
        /* A crossing is noted only for a tag with a soft limit. */
        ra__assert(c.tag != RA_TAG_NONE && c.tag <= RA__MAX_TAGS_LIMIT &&
                   ra__budget_soft_pending <= PENDING_MAX);
        ra__budget_soft_pending--;
        memmove(&tls_pending[0], &tls_pending[1],
                ra__budget_soft_pending * sizeof tls_pending[0]);
        if (c.holder == atomic_load_explicit(&budgets[c.tag].holder,
                                             memory_order_relaxed))
            return c.tag;
    }
    return RA_TAG_NONE;
}

void ra__budget_fire_soft(void)
{
    ra_tag_t tag;

    if (tls_in_callback)
        return;
    while ((tag = take_crossing()) != RA_TAG_NONE) {
        void (*on_soft)(void *, ra_tag_t, size_t);
        void *ctx;
        guard_lock(tag);
        on_soft = budgets[tag].limit.on_soft;
        ctx = budgets[tag].limit.ctx;
        guard_unlock(tag);
        if (on_soft == NULL)
            continue;
        ra__assert_no_lock_held();
        tls_in_callback = true;
        on_soft(ctx, tag, ra__budget_tree(tag));
        tls_in_callback = false;
    }
}


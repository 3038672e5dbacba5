/* Floor: budgets. budget.c's declarations: commit counts, the charge up the
 * tree, limits, soft callbacks; budget_pressure.c's: the memory limit's
 * headroom; the paths' inline check of the soft limits; and pool.c's: a tag's
 * pool of arenas. */
#ifndef RA_BUDGET_H
#define RA_BUDGET_H

#include "internal.h"

/* -- budget.c: per-tag budgets and commit counts ---------------------------- */
/* What the region's extent hooks report (handed to ra__region_open by
 * tag.c, through ra__pool_first_arena). */
extern const struct ra__commit_ops ra__budget_commits;
/* What tag's region holds committed and its high-water mark since the
 * tag's creation; the same over its subtree (tag trees). Lock-free. */
size_t ra__budget_committed(ra_tag_t tag);
size_t ra__budget_peak(ra_tag_t tag);
size_t ra__budget_tree(ra_tag_t tag);
size_t ra__budget_tree_peak(ra_tag_t tag);
/* Whether a hard limit was ever set in the process, or REGIONALLOC_LIMITS
 * names any. Lock-free. */
bool ra__budget_any_hard(void);
/* The tree's one record of tag's parent (RA_TAG_NONE at the top level):
 * set by ra__budget_attach, cleared by ra__budget_forget. */
ra_tag_t ra__budget_parent(ra_tag_t tag);
/* Makes tag (being created, nothing allocating under it) a child of
 * parent (RA_TAG_NONE: top level): what it holds joins every ancestor's
 * subtree. Returns false (errno ENOMEM, nothing changed) when it does not
 * fit their budgets: the creation's caller purges the slot's kept pages
 * and tries again (purge.c). Called with the stripes of its name and its
 * parent locked (tag.c). */
bool ra__budget_attach(ra_tag_t tag, ra_tag_t parent);
/* Whether what tag (a slot being recycled) holds fits the budget
 * REGIONALLOC_LIMITS names for name: false when it is past the hard limit
 * or at the soft one, so that the creation's caller purges it first. */
bool ra__budget_config_fits(ra_tag_t tag, const char *name);
/* Sets the budgets REGIONALLOC_LIMITS names for a tag just created (or
 * recycled) under name, fitting or not (the caller purged what it could).
 * Called with the stripe of its name locked. */
void ra__budget_apply_config(ra_tag_t tag, const char *name);
/* Fork handlers for the budgets' guards. */
void ra__budget_prefork(void);
void ra__budget_postfork(void);
/* A destroyed tag: its budget and refusals cleared, it leaves its
 * ancestors' subtrees with what it holds, its peaks start again from
 * that, and crossings of its soft limit not yet delivered are dropped. */
void ra__budget_forget(ra_tag_t tag);
/* Counts an allocation that the tag's hard limit refused. */
void ra__budget_count_failure(ra_tag_t tag);
/* The tag's budget and refusals, for the reports. */
void ra__budget_read(ra_tag_t tag, size_t *hard, size_t *soft,
                     uint64_t *failures);
/* Set by an extent hook of the calling thread: the tag whose hard limit
 * refused a commit (0 when none), and the number of soft limits its
 * commits crossed that are not yet delivered. The allocation paths read
 * them after jemalloc returns. */
extern RA__TLS ra_tag_t ra__budget_refused;
extern RA__TLS unsigned ra__budget_soft_pending;
/* Runs the soft limits' callbacks of the crossings this thread's commits
 * made, each once, oldest first: outside every lock, on the thread whose
 * commit crossed; inside a callback, nothing (the crossings it makes are
 * delivered when it returns). */
void ra__budget_fire_soft(void) __attribute__((noinline, cold));
/* Whether limit (NULL: none) fits what tag's subtree holds: false when
 * it is past the hard limit or at the soft one; ra_tag_set_limit purges
 * the subtree first then. */
bool ra__budget_fits(ra_tag_t tag, const ra_tag_limit_t *limit);
/* settings.c's ra_tag_set_limit (limit NULL: none), set whether it fits
 * or not, and ra_tag_get_limit, checked. */
void ra__budget_set(ra_tag_t tag, const ra_tag_limit_t *limit);
void ra__budget_get(ra_tag_t tag, ra_tag_limit_t *out);
/* Whether the budgets up tag's chain allow one more arena of its
 * pool: 8 MiB free under every hard limit of the tag's and its ancestors'
 * subtrees. */
bool ra__budget_allows_growth(ra_tag_t tag);

/* -- budget_pressure.c: the memory limit's share of each commit ------------- */
/* Memory pressure (pressure.c's watcher sets it at each look): with a
 * limit, commits take their bytes from the headroom left under it (the limit
 * less the resident set at the look) and decommits give them back; a
 * commit that finds no headroom is refused, in a tag of negative priority as
 * soon as the headroom is under the limit less high. limit 0, or at or above
 * the address space (ra__limit_in_effect): none, nothing refused, one load
 * a commit. The headroom saturates: no limit, resident set or commit makes it
 * wrap. Refused like a hard limit's (the tag's limit_failures), and
 * counted apart. Lock-free. */
void ra__budget_set_pressure(ra_pressure_t level, size_t limit, size_t high,
                             size_t resident);
ra_pressure_t ra__budget_pressure(void);
/* Whether there is a limit; the headroom set again from a resident set read
 * since the last look (give_back.c); and whether this thread's last
 * refusal was the pressure's. */
bool ra__budget_pressure_on(void);
/* The resident set the headroom stands for: the last look's, plus what was
 * committed since, less what was decommitted (0 without a limit). */
size_t ra__budget_pressure_estimate(void);
void ra__budget_pressure_reset_headroom(size_t resident);
bool ra__budget_refused_by_pressure(void);
void ra__budget_set_priority(ra_tag_t tag, int priority);
int ra__budget_priority(ra_tag_t tag);
uint64_t ra__budget_pressure_refusals(void);
/* A commit of bytes in tag takes them from the headroom, or is refused
 * (true: nothing taken; this thread's refusal is then the pressure's);
 * a decommit, or a commit refused further on, gives them back. */
bool ra__budget_headroom_refuses(ra_tag_t tag, size_t bytes);
void ra__budget_headroom_give(size_t bytes);
/* Whether this thread's last refusal was the pressure's (budget.c says
 * false when a hard limit refused). */
void ra__budget_pressure_refused(bool by_pressure);
/* An allocation was refused: counted as the pressure's if its refusal
 * was, once. */
void ra__budget_pressure_count_failure(void);

/* -- budget.c: the soft limits' check ---------------------------------------- */
/* After an allocation that jemalloc may have committed memory for: the
 * soft limits' callbacks, if the commit reached one. A thread-local load. */
static inline void ra__budget_check_soft(void)
{
    if (RA__UNLIKELY(ra__budget_soft_pending != 0))
        ra__budget_fire_soft();
}

/* -- pool.c: a tag's pool of arenas ------------------------------------- */
/* Creates the first jemalloc arena of tag's region (ra__region_open, which
 * is handed commits: what the region's commits count against, budget.c's
 * given by tag_ids.c), then publishes the region. Returns the arena, or -1
 * with errno: ENOMEM (a later call may try the same tag again), ENOSPC (jemalloc has no
 * arena index left), EEXIST (the region is passed over: the next call
 * takes tag + 1). Called with the registry's ids_lock held. */
int ra__pool_first_arena(ra_tag_t tag, const struct ra__commit_ops *commits);
/* The first arena of a region passed over (ra__pool_first_arena's EEXIST)
 * whose space is free again: its index, or -1 with errno EEXIST (still
 * another mapping's), ENOMEM or ENOSPC as ra__pool_first_arena. Called
 * with the registry's ids_lock held. */
int ra__pool_take_back(ra_tag_t tag);
/* The pool's first arena, the one ra__tag_arena names: set as the tag's id
 * is first made, before it is published. */
void ra__pool_start(ra_tag_t tag, unsigned arena);
/* The first arena of each created tag's pool, indexed by tag id; 0 in
 * pass-through mode (no arena). Written by ra__pool_start, before the tag
 * id is published; read by the paths. */
extern unsigned ra__tag_arena[RA__MAX_TAGS_LIMIT + 1];
/* Arenas in the tag's pool (0 in pass-through mode), and the k-th: every
 * arena that holds the tag's blocks. Lock-free; the pool only grows. */
unsigned ra__pool_count(ra_tag_t tag);
unsigned ra__pool_arena(ra_tag_t tag, unsigned k);
/* The tag whose pool has arena, or RA_TAG_NONE. O(1). */
ra_tag_t ra__pool_owner(unsigned arena);
/* The arena a new (thread, tag) pair allocates through: the pool's least
 * loaded, after one more arena is made if the pool's arenas already have
 * REGIONALLOC_THREADS_PER_ARENA pairs each, the pool's bound and
 * jemalloc's indices allow, and budget_allows (the caller asks the budget:
 * ra__budget_allows_growth). unbind: the pair is gone. */
unsigned ra__pool_bind(ra_tag_t tag, bool budget_allows);
/* The arena with the fewest pairs, for a pair that only frees so far: no
 * count taken, no growth. */
unsigned ra__pool_quietest(ra_tag_t tag);
void ra__pool_unbind(ra_tag_t tag, unsigned arena);
/* The tag's id is queued for reuse: its next holder has the default
 * bound, and may try to grow again. The arenas stay with the slot. */
void ra__pool_recycle(ra_tag_t tag);
/* settings.c's ra_tag_set_arenas (max >= 1, capped at RA__POOL_MAX) and
 * ra_tag_arenas (up to cap of the pool's arenas into out; returns how
 * many the pool has). */
void ra__pool_set_bound(ra_tag_t tag, unsigned max);
unsigned ra__pool_arenas(ra_tag_t tag, unsigned *out, unsigned cap);
/* arena.<i>.purge, .reset, .decay of every arena of the tag's pool. */
void ra__pool_purge(ra_tag_t tag);
void ra__pool_reset(ra_tag_t tag);
void ra__pool_decay(ra_tag_t tag);
void ra__pool_prefork(void);
void ra__pool_postfork(void);

#endif /* RA_BUDGET_H */

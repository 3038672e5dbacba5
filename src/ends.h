/* Floor: ends. The ends floor's declarations: what a tag's end, a reset
 * and a purge do to every thread's pairs (pairs_end.c), what a purge
 * reaches (purge.c), what goes back after a refusal and under the memory
 * limit (give_back.c), and the blocks a destroy left live (leftovers.c).
 * Included by the files above that end, reset, purge or reclaim. */
#ifndef RA_ENDS_H
#define RA_ENDS_H

#include "internal.h"

/* -- pairs_end.c: a tag's end, reset and purge over every thread's pairs -- */
/* At the tag's destroy: its counts start again from 0, and *left is set to
 * the bytes of its blocks still live. Returns true when they are more than
 * leave: the tag's sends were then fenced (ra__returns_fence), the
 * threads' caches of the tag forgotten and their pairs started over, and
 * the arena must be reset.
 * False when none is live, or no more than leave (leftovers.c: they stay
 * allocated, nobody's): the pairs the holder used are parked (their front
 * caches' blocks on the return stacks, their tcaches kept), free blocks of
 * the slot for its next holder, and every other pair leaves the tag. Takes
 * threads_lock. */
bool ra__pairs_end(ra_tag_t tag, size_t leave, size_t *left);
/* Before the tag's arena is reset: the tag's sends are fenced
 * (ra__returns_fence), every thread's front cache of the tag is forgotten
 * and its tcache flushed (jemalloc requires it), live or blocked threads
 * alike, and the counts say every block was freed (nmalloc == ndalloc).
 * Takes threads_lock. */
void ra__pairs_wipe(ra_tag_t tag);
/* A live tag that nothing of is live and that no running thread but the
 * caller has used since its last destroy (every other pair of it parked)
 * is held still: no thread can allocate under it or free into it, and its
 * caches are wiped as ra__pairs_wipe does, so that its arenas may be
 * reset.
 * True: held, with threads_lock kept until ra__pairs_unhold.
 * False, with nothing done, otherwise. */
bool ra__pairs_hold(ra_tag_t tag);
void ra__pairs_unhold(ra_tag_t tag);
/* The tcaches of tag's pairs parked at its last destroy (that left nothing
 * live) give their blocks back to the arena: what a purge of the tag must
 * reach, whatever thread calls, so that the slot's kept pages never hold
 * its next holder past a budget. A pair its owner took back meanwhile is
 * the owner's. Takes threads_lock. */
void ra__pairs_flush_parked(ra_tag_t tag);

/* -- purge.c: what a purge can reach ------------------------------------------ */
/* Everything of tag's that a purge can reach goes back to the OS: the
 * calling thread's caches of it, the tcaches of its parked pairs (what a
 * destroy kept for the slot's next holder), its return stacks, then the
 * pool's dirty pages. Takes the threads' lock. */
void ra__purge_kept(ra_tag_t tag);
/* ra_tag_purge's work on root's subtree (tag trees): ra__purge_kept of
 * each tag. Reads the registry without a lock. */
void ra__purge_subtree(ra_tag_t root);
/* ra__tag_create's, for lifetime.c and thread_tags.c: a recycled slot's
 * kept pages that do not fit the new tag's budgets (an ancestor's, or
 * what REGIONALLOC_LIMITS sets for the name) are purged, under no lock of
 * the registry's, and the creation tried again; when even then they do
 * not fit an ancestor's, RA_TAG_NONE with errno ENOMEM. Returns as
 * ra__tag_create. */
ra_tag_t ra__purge_create(ra_tag_t parent, const char *name, bool anywhere,
                          ra_tag_t *own);
/* The ids threads own (ra__own_end) are taken away from them, their
 * pairs parked, and queued, where a purge of kept pages and any creation
 * reach them; idle_only: only those of a few ids that were left unused for
 * a second. */
void ra__purge_owned(bool idle_only);

/* -- give_back.c: what goes back after a refusal, and under pressure ------- */
/* After an allocation in tag was refused, before its one retry: a budget's
 * refusal purges what the tag keeps (and the refusing ancestor's subtree);
 * the memory limit's gives back every tag's free pages worth a purge, by
 * priority, then sets the commits' headroom again (one pass at a time, which
 * the others wait for). */
RA__COLD void ra__give_back_after_refusal(ra_tag_t tag);
/* The tags' free pages back to the OS, lowest priority first, until the
 * resident set is under below (0: all of them); every: every tag, whatever
 * it holds free, else only those with some tens of KiB free. Returns the
 * resident set after, and counts what it fell by. */
size_t ra__give_back_by_priority(size_t below, bool every);
/* Counts a fall of the resident set that pressure caused; the total. */
void ra__give_back_note(size_t before, size_t after);
uint64_t ra__given_back(void);
/* In a forked child: no pass is under way. */
void ra__give_back_postfork_child(void);

/* -- leftovers.c: blocks a destroy left live in the slot, and its resets ---- */
/* The bytes a destroy of tag may leave live in its slot rather than reset
 * its arenas: 0 in a tag tree, or while any hard limit exists. */
size_t ra__leftovers_allowance(ra_tag_t tag);
/* A destroy left bytes live in tag's slot (0: none); or a reset freed
 * what the slot held. */
void ra__leftovers_add(ra_tag_t tag, size_t bytes);
void ra__leftovers_forget(ra_tag_t tag);
/* At a destroy, at most once a millisecond: one idle slot's kept pages
 * decay, or its leftovers, idle for a second, are freed and its pages
 * given back. */
void ra__leftovers_decay_one(void);
/* The leftovers in tag's slot freed, and its pages given back, when nobody
 * can be using the slot: an idle one (its id taken out of the registry's
 * queue meanwhile), or a live holder that ra__pairs_hold holds.
 * True when they were; false when there were none, or the holder has
 * something live or another thread used it. Takes the threads' lock. */
bool ra__leftovers_reclaim(ra_tag_t tag);
/* The same for every tag of root's subtree. */
void ra__leftovers_reclaim_subtree(ra_tag_t root);
/* ra_purge_all: every slot's leftovers that ra__leftovers_reclaim can
 * free, its pages given back. */
void ra__leftovers_reclaim_all(void);
/* ra_tag_reset's reset of tag (its caller promised that nobody uses it),
 * one at a time with the reclaims: the caches wiped, the arenas reset,
 * the pages given back. */
void ra__leftovers_reset(ra_tag_t tag);
/* Bytes left live over all slots. */
size_t ra__leftovers_total(void);
/* Fork handlers: the reclaim's lock (after lifetime.c's), the figures' (a
 * leaf, last). */
void ra__leftovers_prefork(void);
void ra__leftovers_prefork_leaf(void);
void ra__leftovers_postfork(void);

#endif /* RA_ENDS_H */

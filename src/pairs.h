/* Floor: pairs. The pairs floor's declarations that the hot paths'
 * inlines do not need: a tag's return stacks (returns.c), a thread's
 * outbox (outbox.c), a front cache's memory (fc_bins.c), a pair's
 * transitions (pair.c) and threads' own ids (own_ids.c). The rest of
 * the floor (users.c, front_cache.c, thread.c) is internal.h's, for
 * hot_state.h. */
#ifndef RA_PAIRS_H
#define RA_PAIRS_H

#include "internal.h"

/* -- returns.c: a tag's return stacks ------------------------------------ */
/* Leaves items[0, n) (free blocks of tag's small bin) on the tag's stack
 * of that bin, unless it would then hold more than bound blocks: returns
 * whether it took them. Lock-free; the library's memory for the stacks is
 * made at a tag's first push (false when there is none). */
bool ra__returns_push(ra_tag_t tag, unsigned bin, void *const *items,
                      unsigned n, unsigned bound);
/* Takes up to max blocks of the stack into items; returns how many. */
unsigned ra__returns_take(ra_tag_t tag, unsigned bin, void **items,
                          unsigned max);
/* Gives the stacks' blocks back to jemalloc: of one tag, or of all. A
 * drain of a tag whose reset runs (ra__returns_close) does nothing: the
 * reset discards the blocks. */
void ra__returns_drain(ra_tag_t tag);
void ra__returns_drain_all(void);
/* Before the tag's arenas are reset: waits for the drains in flight to
 * end, keeps new ones out and drops what the stacks hold (the reset frees
 * it); ra__returns_open, once the arenas are reset, lets drains in again.
 * Called by one end of the tag at a time (lifetime.c), never from a drain. */
void ra__returns_close(ra_tag_t tag);
void ra__returns_open(ra_tag_t tag);
/* How many resets tag has had: what a batch that waits in an outbox is
 * stamped with. */
uint32_t ra__returns_resets(ra_tag_t tag);
/* A batch of tag's blocks, freed when the tag had had stamp resets, goes
 * home in three steps: ra__returns_enter, false when a reset of the tag
 * runs or ran since (it discarded the blocks: the batch is dropped); then
 * ra__returns_send, which puts items[0, n) (free blocks of tag's small
 * bin) onto the tag's stack, or when it is full frees them to jemalloc
 * with flags (the sender's tcache of the tag, or MALLOCX_TCACHE_NONE) and
 * returns true; then ra__returns_leave. A reset waits for the senders
 * between enter and leave, and so does ra__returns_quiesce. */
bool ra__returns_enter(ra_tag_t tag, uint32_t stamp);
bool ra__returns_send(ra_tag_t tag, unsigned bin, void *const *items,
                      unsigned n, int flags);
void ra__returns_leave(ra_tag_t tag);
/* Waits for the sends and drains of tag in flight to end; the caller
 * knows that no new one starts (a destroy, once it has sent every
 * outbox's batches of the tag). */
void ra__returns_quiesce(ra_tag_t tag);
/* Before the threads' tcaches of a tag to be reset are flushed or
 * destroyed, which a consumer's send may be freeing through (outbox.c):
 * batches stamped before it are dropped from now on, as after a reset,
 * and the sends in flight are waited for. Never waits for a lock. */
void ra__returns_fence(ra_tag_t tag);
/* In a forked child: drains that the parent's other threads had in flight
 * are over. */
void ra__returns_postfork_child(void);

/* -- outbox.c: what a thread frees of tags it does not allocate in ------- */
/* The bytes of a thread's outbox, which its state holds after its slots. */
size_t ra__outbox_size(void);
/* Frees ptr, of tag's small bin, on its way home, on ts's own thread: the
 * batch of (tag, bin) goes to the tag's return stack when full. Returns
 * the tag of a batch sent meanwhile that overflowed the stack without a
 * tcache (the caller calls ra__slot_send_overflowed), or RA_TAG_NONE. */
ra_tag_t ra__outbox_put(struct ra__thread_state *ts, ra_tag_t tag,
                        unsigned bin, void *ptr);
/* Sends the batches of tag (RA_TAG_NONE: of every tag) in ts's outbox
 * home now. From the owner (owner true: an overflow goes through its
 * pairs' tcaches), or from any thread for a tag that nobody uses (its
 * destroy), while ts lives. */
void ra__outbox_flush(struct ra__thread_state *ts, ra_tag_t tag, bool owner);
/* Frees the records the calling thread kept for its next pushes. */
void ra__returns_thread_exit(void);

/* -- fc_bins.c: a front cache's memory ------------------------------------ */
/* A front cache's zeroed bins, or NULL when there can be none (it needs
 * the page table to sort frees by size class) or no memory; and their
 * release with the arrays they made. */
struct ra__fc_bin *ra__fc_bins_make(void);
void ra__fc_bins_free(struct ra__fc_bin *bins);
/* Sets up bin b of class bin at its first use (or after its pair was
 * parked): its array made if it has none, its capacity set. False when
 * the library has no memory for it (the bin then caches nothing). */
bool ra__fc_bin_open(struct ra__fc_bin *b, unsigned bin);
/* At a refill (the bin empty), after the bin overflowed since the last:
 * its array doubles, up to ra__fc_cap_max (unchanged without memory). */
void ra__fc_bin_grow(struct ra__fc_bin *b, unsigned bin);
/* Gives back the oldest n blocks of s's bin, through the slot's tcache. */
void ra__fc_give_back(struct ra__tag_slot *s, unsigned bin, unsigned n);
/* Flushes a tcache id, unless RA__NO_TCACHE. */
void ra__fc_flush_tcache(unsigned tcache);
/* Empties the slot's front cache and tcache: their blocks reach the arena,
 * which is what makes `allocated` exact. Called with threads_lock held, so
 * that no flush meets a reset of the same tag (which discards what the
 * caches hold) whatever thread each runs on. */
void ra__fc_flush(struct ra__tag_slot *s);
/* The arena's reset frees what the slot's front cache holds: forgotten.
 * Called with threads_lock held. */
void ra__fc_forget(struct ra__tag_slot *s);

/* -- pair.c: a (thread, tag) pair's life ---------------------------------- */
/* The pair's state (enum ra__pair_state), as its owner or a holder of
 * threads_lock reads it. */
enum ra__pair_state ra__pair_state(const struct ra__tag_slot *s);
/* The transitions (pair.c draws them; each checks the pair's invariant in
 * the debug build). start: UNUSED to ACTIVE, the slot among the tag's
 * users (allocating: made by an allocation, with a front cache). Takes
 * threads_lock. */
void ra__pair_start(struct ra__tag_slot *s, ra_tag_t tag, bool allocating);
/* An active pair made by a free starts to allocate. Takes threads_lock. */
void ra__pair_start_allocating(struct ra__tag_slot *s, ra_tag_t tag);
/* An active pair, busy, goes through tcache (or RA__NO_TCACHE: refused)
 * from now on. Takes threads_lock. */
void ra__pair_take_tcache(struct ra__tag_slot *s, ra_tag_t tag,
                          unsigned tcache);
/* The same for a pair that only frees, whose sends overflowed: false when
 * it is no longer such a pair (the caller destroys tcache). Takes
 * threads_lock. */
bool ra__pair_adopt_tcache(struct ra__tag_slot *s, unsigned tcache);
/* ACTIVE to PARKED, its front cache's blocks on the tag's return stacks.
 * Called with threads_lock held. */
void ra__pair_park(struct ra__tag_slot *s, ra_tag_t tag);
/* PARKED to ACTIVE, by the owner, waiting out a flush or a hold. */
void ra__pair_unpark(struct ra__tag_slot *s);
/* A parked pair's tcache flushed (through FLUSHING); nothing for another
 * state. Called with threads_lock held. */
void ra__pair_flush_parked(struct ra__tag_slot *s);
/* PARKED to HELD: false, with nothing done, in another state; unhold: a
 * held pair parked again, nothing for another. Called with threads_lock
 * held. */
bool ra__pair_hold(struct ra__tag_slot *s);
void ra__pair_unhold(struct ra__tag_slot *s);
/* ACTIVE or PARKED to ACTIVE anew for the slot's next holder: no tcache,
 * no misses, refills from a few blocks. Called with threads_lock held. */
void ra__pair_restart(struct ra__tag_slot *s, ra_tag_t tag);
/* ACTIVE or PARKED to UNUSED: its blocks given back, its tcache destroyed,
 * its counts left to the orphans'. Called with threads_lock held. */
void ra__pair_leave(struct ra__tag_slot *s, ra_tag_t tag);
/* The pair's counts start again from 0 for the slot's next holder, its
 * age kept (made_before). Called with threads_lock held, or by the owner
 * of the tag's only pair. */
void ra__pair_new_holder(struct ra__tag_slot *s);

/* -- own_ids.c: threads' own ids ------------------------------------------ */
/* At the destroy of tag (killed, without children), when the calling
 * thread's pair is the tag's only one, allocates in it and finds nothing
 * live, and the thread may own one more id: the counts start again from 0,
 * the pair stays as it is (its caches full of the slot's free blocks),
 * and true is returned; then the caller forgets the rest of the tag and
 * gives its id to ra__own_keep. False, with nothing done, otherwise. */
bool ra__own_end(ra_tag_t tag);
/* The id of a tag that ra__own_end ended becomes the calling thread's
 * own, for its next creation (ra__own_reuse). */
void ra__own_keep(ra_tag_t tag);
/* One of the calling thread's own ids, the newest, no longer its own (the
 * caller creates a tag with it or gives it back with ra__own_keep), or
 * RA_TAG_NONE. */
ra_tag_t ra__own_reuse(void);
/* Takes up to cap ids away from the threads that own them (idle_only:
 * only among a few ids, those left unused for a second), parking the
 * owners' pairs as a destroy does, into out: the caller queues them
 * (ra__tag_release_id). Returns how many. Takes threads_lock. */
unsigned ra__own_seize(ra_tag_t *out, unsigned cap, bool idle_only);
/* Whether tag is a thread's own id. */
bool ra__own_has_owner(ra_tag_t tag);
/* At ts's exit (ts the calling thread's state): its own ids are no longer
 * its (those another thread took away meanwhile excepted), into out
 * (RA__OWN_MAX ids at most); returns how many. Called with threads_lock
 * held. */
unsigned ra__own_drop_all(struct ra__thread_state *ts, ra_tag_t *out);

#endif /* RA_PAIRS_H */

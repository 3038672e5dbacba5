/* The core's prototypes, grouped by the file that owns them, floor by floor
 * from the bottom (the kernel, jemalloc, the library's state) up to the
 * API; the types are types.h's, the hot paths' inlines inline.h's
 * (included at the end), jemalloc's part backend.h's. Owners that only
 * some files use have a header of their own: region.h (the address
 * space), budget.h, instruments.h (hooks and the profiler),
 * thread_tags.h; the reports,
 * checkpoints and profile formats have output.h. */
#ifndef RA_INTERNAL_H
#define RA_INTERNAL_H

#include "types.h"

/* -- procstat.c: what the kernel says about the process ------------------ */
/* At load (init.c): time zero of every report, unless an earlier call of
 * ra__clock_ns (from another library's constructor) set it. */
void ra__clock_start(void);
/* Nanoseconds of CLOCK_MONOTONIC since the library was loaded. Never
 * allocates. */
uint64_t ra__clock_ns(void);
/* CLOCK_MONOTONIC_COARSE in nanoseconds (a tick's resolution, a third of
 * ra__clock_ns's cost): for ages of a second or more stamped on a
 * request's path. Not comparable with ra__clock_ns. Never allocates. */
uint64_t ra__clock_coarse_ns(void);
/* Moves *t (a CLOCK_MONOTONIC deadline) ns later: the background threads'
 * next wake-up. */
void ra__deadline_add(struct timespec *t, uint64_t ns);
/* The process's resident bytes (/proc/self/statm); 0 when unreadable. Never
 * allocates (no stdio). */
size_t ra__proc_rss(void);
/* The process's peak resident bytes (VmHWM in /proc/self/status): since the
 * start or since the last successful ra__proc_reset_peak_rss(); 0 when
 * unreadable. Never allocates. */
size_t ra__proc_peak_rss(void);
/* Resets the peak to the current RSS by writing "5" to /proc/self/clear_refs
 * (Linux >= 4.0). Returns true on failure (not permitted, old kernel, no
 * /proc). Never allocates. */
bool ra__proc_reset_peak_rss(void);
/* Calls line() with each line of /proc/self/maps, NUL-terminated, without
 * its newline (a line longer than 8 KiB is skipped) until it returns true.
 * Returns true when the file cannot be read. Never allocates (no stdio). */
bool ra__proc_maps(bool (*line)(char *text, size_t len, void *ctx),
                   void *ctx);
/* The process's resident memory as /proc/self/status splits it, and its
 * page tables (VmPTE), in bytes. Returns true when unreadable. Never
 * allocates. */
struct ra__proc_status {
    uint64_t rss_anon, rss_file, rss_shmem, page_tables;
};
bool ra__proc_status(struct ra__proc_status *out);
/* What the cgroup v2 directory dir says of its memory: memory.current,
 * memory.stat's anon and file, and the limit (memory.high when set, else
 * memory.max; 0 for none). Returns true when dir has no memory.current.
 * Never allocates. */
struct ra__proc_cgroup {
    uint64_t current, anon, file, limit;
};
bool ra__proc_cgroup(const char *dir, struct ra__proc_cgroup *out);
/* The process's cgroup v2 directory into dir (len bytes): its "0::PATH"
 * line of /proc/self/cgroup under the v2 mount (given, when not NULL,
 * else /sys/fs/cgroup, else /sys/fs/cgroup/unified on a hybrid system).
 * Returns true when there is none. Never allocates. */
bool ra__proc_cgroup_dir(const char *given, char *dir, size_t len);

/* -- warn.c: the library's own writes --------------------------------------- */
/* Writes msg and a newline to stderr without allocating, under
 * ra__sigpipe_hold. */
void ra__warn(const char *msg);
/* Around every write the library makes on its own (its warnings, the
 * reports at exit): hold blocks SIGPIPE in the calling thread, so that a
 * write to a pipe or socket whose reader has gone fails with EPIPE; release
 * discards the SIGPIPE those writes left pending (not one the program had
 * pending before) and restores the thread's mask. Never allocate. */
void ra__sigpipe_hold(struct ra__sigpipe_hold *h);
void ra__sigpipe_release(const struct ra__sigpipe_hold *h);

/* -- region.c: the page table and the free gate, for the inlines --------- */
extern uint8_t *ra__page_bin;
/* The first test of free (struct ra__free_gate). */
extern struct ra__free_gate ra__free_gate;
/* Recomputes the gate's count (the regions, the hooks). hooks: whether a
 * hook is installed (hooks.c, serialized by its install lock), which opens
 * the gate to every free. */
void ra__free_gate_update(void);
void ra__free_gate_hooks(bool any);

/* -- config.c: environment, read once ------------------------------------- */
/* Reads the environment on the first call (thread-safe, allocation-free,
 * secure_getenv) and returns the parsed values; bad values are reported on
 * stderr, one line each, and replaced by the default. Never NULL. */
const struct ra__config *ra__config(void);
/* Before the configuration is read (at load, where reading it would warn
 * about bad values in processes that never use the library): whether the
 * variable var is set to value, and whether a variable asks for something
 * started at load (the stats segment, HTTP, thread tags, the profiler). */
/* The variable's value as the environment has it now (NULL: unset or
 * empty), for what is decided before the configuration is read. */
const char *ra__config_peek(const char *var);
/* Whether var is set, even empty. */
bool ra__config_peek_set(const char *var);
bool ra__config_peek_is(const char *var, const char *value);
bool ra__config_asked_at_load(void);
/* Whether this process (getpid() now: a forked child asks for itself) is
 * the program regionalloc run watches, one of its children watched with
 * it, or a child it does not watch (REGIONALLOC_PROGRAM_PID,
 * REGIONALLOC_CHILDREN). Reads the configuration. */
enum ra__watch ra__config_watch(void);

/* -- meta.c: the library's own memory --------------------------------------- */
/* The one allocator of the library's own memory (thread state, tables,
 * copies, snapshots): jemalloc's, untagged and uncached, never reported to
 * hooks nor sampled, whatever the calling thread has pushed; it takes no
 * lock of the library, so it may be called under one. NULL on failure;
 * ra__meta_realloc leaves the block as it was then, and allocates when ptr
 * is NULL. ra__meta_free(NULL) does nothing. */
void *ra__meta_alloc(size_t size);
void *ra__meta_calloc(size_t n, size_t size);
void *ra__meta_realloc(void *ptr, size_t size);
void ra__meta_free(void *ptr);
/* Bytes that a library the library calls (libdw, for the profile's names)
 * allocated with malloc on its behalf and still holds: delta is what the
 * calling thread's jemalloc counters moved by around the call. */
void ra__meta_count_foreign(int64_t delta);
/* What the calling thread has allocated less what it freed, as jemalloc's
 * counters of the thread say (0 where they are not there): taken before
 * and after a call of another library's, the difference is what to count
 * with ra__meta_count_foreign. Allocates nothing after the first call on
 * the thread. */
int64_t ra__meta_thread_net(void);
/* Bytes in the library's live blocks of its own (usable sizes), and what
 * others keep for it: what the reports show as "library", part of the
 * untagged figures. */
size_t ra__meta_held(void);
/* Non-zero while the calling thread does the library's own work (see
 * ra__quiet_begin, inline.h): no hook sees what it allocates. */
extern RA__TLS unsigned ra__hooks_muted;

/* -- ready.c: the library's first use, and the thread-exit key ------------- */
/* Reads the configuration and jemalloc's classes and makes the reservation,
 * once. Returns whether tagging is on (false: pass-through mode). Safe to
 * call from any thread, at any time, often. */
bool ra__init(void);
/* What a public call checks first, in this order: 0, or -1 with errno
 * EINVAL (its arguments are not valid) or ENOTSUP (pass-through mode). */
int ra__check_call(bool arguments_valid);
/* The state ra__init settled on; false before ra__init has run. */
extern atomic_bool ra__tagging;
/* The calling thread holds state to release at its exit: arms the one
 * thread-exit key, whose destructor calls what ra__thread_exit_set gave
 * (init.c's, at load): end in the first round of the thread's
 * destructors, last in that round and in each later one the C library
 * gives (up to PTHREAD_DESTRUCTOR_ITERATIONS: the key is armed again for
 * each), after what other destructors did before. Returns true on failure
 * (pthread_setspecific could not allocate). */
bool ra__thread_exit_arm(void);
void ra__thread_exit_set(void (*end)(void *), void (*last)(void));

/* -- untagged.c: the untagged row's allocated, live ----------------------- */
/* Counts the calling thread from now on, with what it did since it began
 * (jemalloc counts a thread's bytes from its start): at load for the main
 * thread (init.c), at the start of every thread the library's
 * pthread_create starts and of its own, and when a thread makes its
 * state (thread.c: its first allocation or free of a tag's block). Arms the thread-exit key, whose last step is
 * ra__untagged_thread_end. Returns true when the thread is not counted
 * (jemalloc keeps no counts per thread, the key could not be armed, or it
 * has left already). Takes untagged.c's lock, a leaf. */
bool ra__untagged_thread_start(void);
/* The same for the thread that loads the library (init.c), but where it
 * is the process's only thread, its counters are found only when first
 * needed (ra__untagged_find_self): asking jemalloc builds its whole
 * control tree, which a program that never reads a figure should not pay
 * for at start. */
void ra__untagged_load_start(void);
/* Finds the calling thread's counters if they were left to find
 * (RA__UNTAGGED_UNFOUND): before the process's second thread is made
 * (pthread_create, the library's threads), and on the thread's own read
 * and end. Until then no other thread can read the row. */
void ra__untagged_find_self(void);
/* The thread's last step, in every round of its destructors (ready.c):
 * the first time it leaves the list, what it holds added to what exited
 * threads left; each later time, what it moved since (other destructors
 * free after the library's thread end). Its record is read by no other
 * thread once it has left. */
void ra__untagged_thread_end(void);
/* The usable bytes of the process's live untagged blocks: what jemalloc
 * handed out and did not take back, over every thread counted, less what
 * the library holds of it for tags. Costs a load of two lines per live
 * thread, under a leaf lock. Returns true when jemalloc keeps no counts
 * per thread (*out unset). */
bool ra__untagged_allocated(size_t *out);
/* The calling thread's record (types.h), whose tagged count the inlines
 * ra__untagged_tag_made and ra__untagged_tag_freed keep. */
extern RA__TLS struct ra__untagged_thread ra__untagged_self;
/* Fork handlers: the lock (a leaf); in the child, the threads that are not
 * in it are counted as they were at the fork. */
void ra__untagged_prefork(void);
void ra__untagged_postfork_parent(void);
void ra__untagged_postfork_child(void);

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

/* -- tag_ids.c: a tag's ids ------------------------------------------------ */
/* ra__region_give_back under the registry's ids_lock, when tagging is on: the
 * process's address-space limit was lowered (override_limits.c). Returns
 * whether anything was given back. */
bool ra__tag_give_back_address_space(void);
/* ids published so far (ra__tags_published) rise to tag, never fall. */
void ra__tag_publish(ra_tag_t tag);
/* Fork handlers for ids_lock (taken after the registry's stripes). */
void ra__tag_ids_prefork(void);
void ra__tag_ids_postfork(void);
/* An id for a new tag: the one destroyed longest ago, else a fresh one
 * with its region and first arena (a region another mapping holds passed
 * over, and, when none is fresh, one passed over taken back), or
 * RA_TAG_NONE with errno ENOSPC (none left) or as ra__pool_first_arena.
 * tagging: whether regions are reserved (else ids only). Called with the
 * registry's stripes of the creation locked. */
ra_tag_t ra__tag_ids_take(bool tagging);
/* An id ra__tag_ids_take gave and the creation did not use, back at the
 * queue's front (the next creation takes it), and published. */
void ra__tag_ids_put_back(ra_tag_t tag);
/* Queues a dead tag's id, its region and arena emptied, for reuse by
 * ra_tag_create (oldest first). */
void ra__tag_release_id(ra_tag_t tag);
/* Takes tag out of the queue of ids for reuse, if it is there (no
 * creation took it): whether it was. ra__tag_release_id queues it again. */
bool ra__tag_take_free(ra_tag_t tag);
/* Whether tag, published, is neither live, nor queued, nor passed over:
 * held by a thread between two steps (a creation's, a thread's own), which
 * in a forked child may be a thread that is not there. */
bool ra__tag_in_limbo(ra_tag_t tag);
/* The ids passed over now: their regions' space held by another mapping
 * (the reports' regions lost). */
unsigned ra__tag_passed_over(void);
/* One of the queued ids, a different one at each call (round robin), or
 * RA_TAG_NONE when none is queued: whose kept pages may decay. */
ra_tag_t ra__tag_next_idle(void);

/* -- tag.c: registry of names, trees, creation numbers ------------------------ */
/* struct ra__tag_stack and the thread's ra__tag_stack (tag_stack.c's) are
 * declared in regionalloc.h for the inline push and pop. */
/* Fork handlers for the registry's locks (its stripes, then ids_lock). */
void ra__tag_prefork(void);
void ra__tag_postfork(void);

/* ra_tag_create_in's work (lifetime.c's public calls): the live tag called
 * name, which must be parent's child unless anywhere (ra_tag_create finds
 * a name at any level), or a new one under parent. A new one takes *own
 * (when own is not NULL and *own is not RA_TAG_NONE: an id of the calling
 * thread's, ra__own_reuse) and sets *own to RA_TAG_NONE, else the
 * id destroyed longest ago, else a fresh id. RA_TAG_NONE with errno set
 * on failure (*own then untouched). *unfit: in, the id the caller purged
 * since its last call (RA_TAG_NONE at first); out, on failure, an id whose
 * kept pages did not fit a budget (put back: the caller purges it and
 * calls again, ra__purge_create), or RA_TAG_NONE. */
ra_tag_t ra__tag_create(ra_tag_t parent, const char *name, bool anywhere,
                        ra_tag_t *own, ra_tag_t *unfit);
/* Tag trees: root's live subtree (root and its descendants) into out
 * (room for REGIONALLOC_MAX_TAGS), deepest first, so that a tag comes
 * before its parent; 0 when root is not live. kill: the same, made dead
 * in the same hold of every stripe of the registry (no child can be created in
 * between): pushes, lookups and every call on them fail from now on. */
unsigned ra__tag_subtree(ra_tag_t root, ra_tag_t *out);
/* Whether tag is live and root or below it. */
bool ra__tag_in_subtree(ra_tag_t tag, ra_tag_t root);
unsigned ra__tag_kill_subtree(ra_tag_t root, ra_tag_t *out);
/* The kill of a tag without children (its parent loses a child): 0, EINVAL
 * when it is not live, -1 (nothing done) when it has children. */
int ra__tag_kill_leaf(ra_tag_t tag);
/* Copies tag's name into name and, when born_at is not NULL, its
 * creation number (see ra__tag_creations), together under the
 * tag's stripe (names change when tags are destroyed and ids
 * recycled). Returns false for a dead tag (name "", born UINT64_MAX). */
bool ra__tag_identity(ra_tag_t tag, char name[RA_TAG_NAME_MAX + 1],
                      uint64_t *born_at);
/* Who holds each id of 1..n (n at most ra__tag_published()) into out[1..n],
 * all read in one hold of every stripe of the registry: a report's tree
 * is then one
 * moment's, whatever is destroyed and recycled while it is written (two
 * reads of one tag's parent each could name the other). Returns the ids
 * filled: n, or fewer when fewer are published. */
unsigned ra__tag_holders(struct ra__tag_holder *out, unsigned n);
/* A mark of the creations so far (a checkpoint's, taken before its
 * figures): every tag created before it has a creation number (born) at
 * most the value returned, every tag created after one above it. */
uint64_t ra__tag_creations(void);
/* What the reports call tag: its name (copied into buf), or "(destroyed)"
 * for an id whose tag is gone. */
const char *ra__tag_label(ra_tag_t tag, char buf[RA_TAG_NAME_MAX + 1]);

/* -- tag_stack.c: the thread-local stack, and who writes a thread's top --- */
/* Makes the calling thread's allocations untagged until the matching
 * ra__tag_resume() (they nest). The stack itself is untouched: a push/pop
 * in between still pairs up. The end sets the top from the stack as it is
 * then, never from a copy taken at the start: another thread may have
 * given this one a new base meanwhile (ra__tag_set_base). */
void ra__tag_suspend(void);
void ra__tag_resume(void);

/* The calling thread's. Never NULL; allocates nothing. */
struct ra__tag_thread *ra__tag_thread_self(void);
/* Makes tag t's thread's base (item 0 of its stack). The thread moves to
 * it at once when nothing is pushed and its tag is not suspended, else at
 * its last pop or at the end of the suspension. Calls for one thread must
 * not run at once (thread_tags.c holds its lock). */
void ra__tag_set_base(struct ra__tag_thread *t, ra_tag_t tag);
/* Whether t's thread will allocate into tag without pushing it: tag is its
 * base, or its top while nothing is pushed. */
bool ra__tag_thread_holds(struct ra__tag_thread *t, ra_tag_t tag);

/* -- users.c: each tag's users, orphans, threads_lock --------------------- */
/* threads_lock: guards the users lists, every thread's pairs against
 * other threads, and the list of threads. ra__threads_assert_held: the
 * debug build's check that the calling thread holds it (lock.h's). */
void ra__threads_lock(void);
void ra__threads_unlock(void);
#ifdef RA_DEBUG
void ra__threads_assert_held(void);
#else
#define ra__threads_assert_held() ((void)0)
#endif
/* This thread's state (thread.c makes it), NULL until it first uses a
 * tag. */
extern RA__TLS struct ra__thread_state *ra__thread;
/* The thread whose slot of tag s is. */
struct ra__thread_state *ra__users_thread(struct ra__tag_slot *s,
                                          ra_tag_t tag);
/* A set-up slot joins its tag's users, or leaves them. Called with
 * threads_lock held. */
void ra__users_add(struct ra__tag_slot *s, ra_tag_t tag);
void ra__users_remove(struct ra__tag_slot *s, ra_tag_t tag);
/* The tag's first user (then users_next), NULL when none. Called with
 * threads_lock held. */
struct ra__tag_slot *ra__users_first(ra_tag_t tag);
/* Whether thread ts has the tag's only slot. Lock-free. */
bool ra__users_lone(const struct ra__thread_state *ts, ra_tag_t tag);
/* tag's allocations, frees and bytes live, over the orphans and the
 * slots from first on (its users list: with threads_lock held), or that
 * one slot alone (only: the caller's own, the tag's only one). */
void ra__users_counts(const struct ra__tag_slot *first, bool only,
                      ra_tag_t tag, struct ra__counts *out);
/* Counts an allocation (alloc) or a free of tag made without a slot, of
 * a block of size usable bytes. */
void ra__count_orphan(ra_tag_t tag, bool alloc, size_t size);
/* A pair leaving its tag leaves its counts to the orphans'. Called with
 * threads_lock held. */
void ra__orphans_adopt(const struct ra__tag_slot *s, ra_tag_t tag);
/* The orphans' counts say every block of c (the tag's counts) was freed:
 * at a wipe. */
void ra__orphans_all_freed(ra_tag_t tag, const struct ra__counts *c);
/* An ended tag's orphan counts start again from 0. */
void ra__orphans_forget(ra_tag_t tag);
/* Around an allocation, reallocation or free of tag on a thread without a
 * slot, from before the block is made or freed to after it is counted:
 * waits while the tag is held (ra__pairs_hold), and keeps it from being
 * held meanwhile. */
void ra__orphan_begin(ra_tag_t tag);
void ra__orphan_end(ra_tag_t tag);
/* The hold's word (ra__pairs_hold): hold marks the tag held and returns
 * whether no orphan of it is in flight; held says whether it is; unhold
 * clears it. hold and unhold are called with threads_lock held. */
bool ra__orphans_hold(ra_tag_t tag);
bool ra__orphans_held(ra_tag_t tag);
void ra__orphans_unhold(ra_tag_t tag);

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

/* -- front_cache.c: a front cache at work --------------------------------- */
/* Fills bin of slot s (empty) from the tag's arena and returns one more block
 * for the caller: counted by nobody yet, maybe outside the region during
 * thread exit (jemalloc's thread-exit redirection, doc/design.md), NULL on failure. */
void *ra__fc_refill(struct ra__tag_slot *s, ra_tag_t tag, unsigned bin)
    __attribute__((noinline, cold));
/* Makes room in a full bin (or sets up one not used yet): half of it
 * goes to the tag's return stack, or to jemalloc when the stack is full.
 * False when the bin cannot cache (no memory for its array): the caller
 * frees the block through the slot. */
bool ra__fc_make_room(struct ra__tag_slot *s, unsigned bin)
    __attribute__((noinline, cold));
/* A miss of the calling thread's slot s (ra__slot_miss): a busy pair that
 * has lived takes a tcache. */
void ra__slot_miss_slow(struct ra__tag_slot *s) __attribute__((noinline, cold));
/* A send of the calling thread's batch of tag overflowed the tag's return
 * stack (ra__outbox_put): its pair of tag, if it only frees and is busy,
 * takes a tcache that the next overflows go through. Takes threads_lock. */
void ra__slot_send_overflowed(ra_tag_t tag);

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

/* -- thread.c: a thread's state ------------------------------------------- */

/* At thread exit (init.c): the thread's caches are flushed, its pairs
 * leave their tags and its state is freed; what it allocates afterwards
 * goes uncached. */
void ra__thread_exit(void);
/* Fork handlers for threads_lock. */
void ra__thread_prefork(void);
void ra__thread_postfork_parent(void);
void ra__thread_postfork_child(void);
/* Returns this thread's slot for tag, set up, or NULL when the thread cannot
 * have one now (re-entered, exiting, out of memory). allocating: the slot
 * is made by an allocation, not a free (the tag's pool counts it). */
struct ra__tag_slot *ra__thread_slot_slow(ra_tag_t tag, bool allocating)
    __attribute__((noinline, cold));
/* Empties the calling thread's caches of tag, if it has any. Takes
 * threads_lock. */
void ra__thread_flush_tag(ra_tag_t tag);
/* Sums the counters of tag over live and exited threads: without a lock
 * when the caller's slot is the tag's only one. */
void ra__thread_counts(ra_tag_t tag, struct ra__counts *out);

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

/* -- make_room.c: what goes back after a refusal, and under pressure ------- */
/* After an allocation in tag was refused, before its one retry: a budget's
 * refusal purges what the tag keeps (and the refusing ancestor's subtree);
 * the memory limit's gives back every tag's free pages worth a purge, by
 * priority, then sets the commits' room again (one pass at a time, which
 * the others wait for). */
RA__COLD void ra__make_room(ra_tag_t tag);
/* The tags' free pages back to the OS, lowest priority first, until the
 * resident set is under below (0: all of them); every: every tag, whatever
 * it holds free, else only those with some tens of KiB free. Returns the
 * resident set after, and counts what it fell by. */
size_t ra__give_back_by_priority(size_t below, bool every);
/* Counts a fall of the resident set that pressure caused; the total. */
void ra__give_back_note(size_t before, size_t after);
uint64_t ra__given_back(void);
/* In a forked child: no pass is under way. */
void ra__make_room_postfork_child(void);

/* -- background.c: the library's own threads ------------------------------ */
/* True on the library's background threads: never given a thread's tag. */
extern RA__TLS bool ra__library_thread;
/* Set around a call that starts threads for the library (libmicrohttpd's):
 * the library's pthread_create makes them the library's. */
extern RA__TLS bool ra__library_spawning;
/* Makes the calling thread the library's for good: quiet, untagged. */
void ra__become_library_thread(void);
/* Around a call that starts the library's threads: every signal blocked
 * (old: the mask to restore) and ra__library_spawning set. */
void ra__spawn_begin(sigset_t *old);
void ra__spawn_end(const sigset_t *old);
/* Starts fn(arg) on a new thread with every signal blocked, quiet for its
 * whole life. Returns true on failure (errno set). */
bool ra__background_start(void *(*fn)(void *), void *arg, pthread_t *thread);
/* The C library's pthread_create, tried again once after a give-back of
 * address space when it says EAGAIN (an address-space limit lowered from
 * outside may be why): what the library's pthread_create and its own
 * threads start with. */
int ra__thread_create(pthread_t *thread, const pthread_attr_t *attr,
                      void *(*fn)(void *), void *arg);

/* -- load.c: the libraries loaded when first needed (load.h) -------------- */
/* The process ends (init.c's destructor): no library is loaded from now
 * on. */
void ra__load_stop(void);
/* -- load_dw.c: libdw -------------------------------------------------------- */
/* Loads libdw, which names the profile's frames, if it is not loaded yet
 * (load.h's rules): what a profile dumped at exit does when the profiler
 * starts. Returns true when it is not there (a build without it, a failed
 * load, the process ending). */
bool ra__load_symbolizer(void);

/* -- stats.c: per-tag usage and purge ------------------------------------- */
/* Refreshes jemalloc's statistics (the "epoch"): it merges every arena
 * (doc/design.md, jemalloc facts), so only what asks for jemalloc's own
 * figures pays it, once per report. */
void ra__stats_refresh(void);
/* Fills *out for tag (RA_TAG_NONE: the untagged arenas) from the live
 * sources (refreshed: jemalloc's figures of pages after the caller's
 * refresh instead of the estimates). The untagged row is jemalloc's as of
 * the last refresh but for allocated (untagged.c's, live) and active. tag
 * must be valid and tagging on. */
void ra__stats_read(ra_tag_t tag, ra_tag_stats_t *out, bool refreshed);
/* allocated and mapped of tag (valid, tagging on), exact and live: what a
 * checkpoint and the page's samples need of ra__stats_read(). */
size_t ra__stats_allocated(ra_tag_t tag);
size_t ra__stats_mapped(ra_tag_t tag);
/* Adds a row's allocated, active, resident and mapped to a process's
 * total: the process's figures are the sum of its rows. */
void ra__stats_add_total(struct ra__global_stats *total,
                         const ra_tag_stats_t *row);
/* Purges asked for tag (RA_TAG_NONE: the untagged arenas) through
 * ra_tag_purge() and ra_purge_all() so far. */
uint64_t ra__stats_purges(ra_tag_t tag);
/* A destroyed tag's count of purges starts again from 0. */
void ra__stats_forget(ra_tag_t tag);


/* -- leftovers.c: blocks a destroy left live in the slot, and its resets ---- */
/* The bytes a destroy of tag may leave live in its slot rather than reset
 * its arenas: 0 in a tag tree, or while any hard limit exists. */
size_t ra__leftovers_room(ra_tag_t tag);
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

/* -- pressure.c: the process held under a memory limit --------------------- */
enum ra__limit_source {
    RA__LIMIT_NONE,
    RA__LIMIT_CALL,   /* ra_memory_limit_set */
    RA__LIMIT_ENV,    /* REGIONALLOC_MEMORY_LIMIT */
    RA__LIMIT_CGROUP  /* memory.high, else memory.max */
};
struct ra__pressure_figures {
    size_t limit;      /* 0: none */
    size_t resident;   /* at the watcher's last look */
    enum ra__limit_source source;
    ra_pressure_t level;
    uint64_t given_back; /* bytes the resident set fell by its give-backs */
    uint64_t refusals;   /* allocations the pressure refused */
    uint64_t rises;      /* rises that called the callbacks */
};
/* At load: the limit from REGIONALLOC_MEMORY_LIMIT or the cgroup, and its
 * thread, when there is one. */
void ra__pressure_start(void);
void ra__pressure_read(struct ra__pressure_figures *out);
/* Fork handlers: the limit's lock (a leaf); in the child, no watcher. */
void ra__pressure_prefork(void);
void ra__pressure_postfork_parent(void);
void ra__pressure_postfork_child(void);

/* -- lifetime.c: ra_tag_reset and ra_tag_destroy ------------------------------ */
/* Fork handlers for the lock that keeps resets and destroys one at a
 * time; the child's, once every other module's lock is released, also
 * queues the ids that threads which are not in the child held between
 * two steps. */
void ra__lifetime_prefork(void);
void ra__lifetime_postfork(void);
void ra__lifetime_postfork_child(void);

/* -- override.c: the malloc-family symbols -------------------------------- */
/* At load (init.c): warns on stderr, one line, when "malloc" is bound to
 * another object than this library (linked or loaded after jemalloc or the
 * C library), since plain malloc is then untagged. */
#ifdef RA_OVERRIDE
void ra__override_check(void);
#else
static inline void ra__override_check(void) {}
#endif

/* -- init.c: the process's start and end, fork, a thread's end ------------- */
/* At load, init.c's constructor calls, in this order, ra__thread_exit_set
 * (its thread end and last step), ra__untagged_thread_start,
 * ra__clock_start,
 * ra__report_at_load, pthread_atfork with its fork handlers,
 * ra__override_check and, when the environment asks for them, the profiler
 * (REGIONALLOC_PROF), ra__thread_tags_start_thread (the main thread's base
 * tag), ra__shm_start (the stats segment) and ra__http_start_configured;
 * at exit its destructor calls ra__report_at_exit, ra__http_at_exit and
 * ra__shm_at_exit. At a thread's exit its thread end calls
 * ra__thread_tags_thread_exit, ra__thread_exit, ra__returns_thread_exit
 * and ra__hooks_thread_exit, in this order; its last step is
 * ra__untagged_thread_end. */

#include "inline.h"

#endif /* RA_INTERNAL_H */

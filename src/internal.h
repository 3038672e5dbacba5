/* The prototypes every floor shares, grouped by the file that owns them,
 * from the bottom (the kernel, the library's base, the registry and the
 * stack, a thread's pairs as the hot paths' inlines need them) up to
 * init.c; the types are types.h's, the locks lock.h's, the state as the
 * hot paths read it hot_state.h's (included at the end), jemalloc's part
 * backend.h's.
 * A floor's declarations that only some files use are in a header of
 * its own, included by those files: region.h (the address space),
 * budget.h (budgets, pools), tags.h (ids, the library's threads, loaded
 * libraries), pairs.h (return stacks, outboxes, a pair's transitions,
 * own ids), ends.h (a tag's end, purges, reclaims), api.h (what the API
 * floor gives init.c and the services), instruments.h (hooks and the
 * profiler), thread_tags.h; the reports, checkpoints and profile formats
 * have output.h. */
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
/* Whether a hook is installed (hooks.c, serialized by its install lock),
 * which opens the gate to every free. */
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
 * ra__quiet_begin, hot_state.h): no hook sees what it allocates. */
extern RA__TLS unsigned ra__hooks_muted;

/* -- first_use.c: the library's first use, a public call's first check ---- */
/* Reads the configuration and jemalloc's classes and makes the reservation,
 * once. Returns whether tagging is on (false: pass-through mode). Safe to
 * call from any thread, at any time, often. */
bool ra__init(void);
/* What a public call checks first, in this order: 0, or -1 with errno
 * EINVAL (its arguments are not valid) or ENOTSUP (pass-through mode). */
int ra__check_call(bool arguments_valid);
/* The state ra__init settled on; false before ra__init has run. */
extern atomic_bool ra__tagging;

/* -- thread_exit.c: the one thread-exit key ------------------------------- */
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
 * state (thread.c: its first allocation or free of a tag's block). Arms
 * the thread-exit key, whose last step is ra__untagged_thread_end.
 * Returns true when the thread is not counted (jemalloc keeps no counts
 * per thread, the key could not be armed, or it has left already). Takes
 * untagged.c's lock, a leaf. */
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
/* The thread's last step, in every round of its destructors
 * (thread_exit.c): the first time it leaves the list, what it holds added
 * to what exited threads left; each later time, what it moved since
 * (other destructors free after the library's thread end). Its record is
 * read by no other thread once it has left. */
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
/* A pair leaving its tag moves its counts to the orphans' (its own to
 * 0), before it leaves the tag's users. Called with threads_lock held. */
void ra__orphans_adopt(struct ra__tag_slot *s, ra_tag_t tag);
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

/* -- front_cache.c: a front cache at work --------------------------------- */
/* Fills bin of slot s (empty) from the tag's arena and returns one more block
 * for the caller: counted by nobody yet, maybe outside the region during
 * thread exit (jemalloc's thread-exit redirection, doc/design.md), NULL on failure. */
void *ra__fc_refill(struct ra__tag_slot *s, ra_tag_t tag, unsigned bin)
    __attribute__((noinline, cold));
/* Spills a full bin (or sets up one not used yet): half of it goes to the
 * tag's return stack, or to jemalloc when the stack is full.
 * False when the bin cannot cache (no memory for its array): the caller
 * frees the block through the slot. */
bool ra__fc_spill(struct ra__tag_slot *s, unsigned bin)
    __attribute__((noinline, cold));
/* A miss of the calling thread's slot s (ra__slot_miss): a busy pair that
 * has lived takes a tcache. */
void ra__slot_miss_slow(struct ra__tag_slot *s) __attribute__((noinline, cold));
/* A send of the calling thread's batch of tag overflowed the tag's return
 * stack (ra__outbox_put): its pair of tag, if it only frees and is busy,
 * takes a tcache that the next overflows go through. Takes threads_lock. */
void ra__slot_send_overflowed(ra_tag_t tag);

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

#include "hot_state.h"

#endif /* RA_INTERNAL_H */

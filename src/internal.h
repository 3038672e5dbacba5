/* The core's declarations (the allocation paths and what they stand on),
 * shared between the library's files and grouped by owning file, with the
 * hot paths' inlines. The reports, checkpoints and profile formats have
 * theirs in output.h. */
#ifndef RA_INTERNAL_H
#define RA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "regionalloc.h"

#define RA__LIKELY(x) __builtin_expect(!!(x), 1)
#define RA__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define RA__COLD __attribute__((noinline, cold))
#define RA__TLS __thread __attribute__((tls_model("initial-exec")))

/* jemalloc allows 4095 arena indices, automatic ones included; leave room for
 * those (4 per CPU by default) on machines up to 16 CPUs... and beyond, tag
 * creation fails cleanly with ENOSPC when arenas.create does. */
#define RA__MAX_TAGS_LIMIT 4000u
#define RA__REGION_SIZE_MIN ((size_t)4 << 20)

/* Aborts with a message when a broken invariant is detected; compiled out
 * with NDEBUG. */
#ifdef NDEBUG
#define ra__assert(cond) ((void)0)
#else
#define ra__assert(cond)                                                    \
    ((cond) ? (void)0 : ra__assert_fail(#cond, __FILE__, __LINE__))
#endif
void ra__assert_fail(const char *cond, const char *file, int line)
    __attribute__((noreturn, cold));

/* The library's locks are plain mutexes, never taken twice by one thread
 * and never held across user code: a failure to take or release one is a
 * broken invariant, and aborts. */
static inline void ra__lock(pthread_mutex_t *m)
{
    if (pthread_mutex_lock(m) != 0)
        abort();
}

static inline void ra__unlock(pthread_mutex_t *m)
{
    if (pthread_mutex_unlock(m) != 0)
        abort();
}

/* -- config.c: environment, read once ------------------------------------- */
#define RA__LIMITS_MAX 64 /* entries of REGIONALLOC_LIMITS */
#define RA__THREAD_TAGS_MAX 64 /* entries of REGIONALLOC_THREAD_TAGS */
struct ra__config {
    bool enabled;        /* REGIONALLOC, default true */
    unsigned max_tags;   /* REGIONALLOC_MAX_TAGS, default 256 */
    size_t region_size;  /* REGIONALLOC_REGION_SIZE, default 64 GiB */
    char stats_path[4096]; /* REGIONALLOC_STATS: "" (off), "stderr", a path */
    ra_format_t stats_format; /* REGIONALLOC_STATS_FORMAT, default text; also
                                 the format of the checkpoint report */
    char checkpoints_path[4096]; /* REGIONALLOC_CHECKPOINTS: as stats_path */
    size_t prof_interval; /* REGIONALLOC_PROF: 0 (off) or the mean interval */
    char prof_dump_path[4096]; /* REGIONALLOC_PROF_DUMP: "" or a path */
    /* REGIONALLOC_LIMITS: budgets to set on the tags of these names when
     * they are created (well-formed entries only). */
    struct ra__limit_entry {
        char name[RA_TAG_NAME_MAX + 1];
        size_t hard, soft;
    } limits[RA__LIMITS_MAX];
    unsigned nlimits;
    bool shm;                  /* REGIONALLOC_SHM=1 */
    uint64_t shm_interval_ns;  /* REGIONALLOC_SHM_INTERVAL, default 1 s */
    char http_addr[256];       /* REGIONALLOC_HTTP: "" or HOST:PORT */
    bool http_write;           /* REGIONALLOC_HTTP_WRITE=1: POST purge */
    bool http_allow_remote;    /* REGIONALLOC_HTTP_ALLOW_REMOTE=1 */
    /* REGIONALLOC_THREAD_TAGS: a thread whose name matches glob gets the
     * tag of that name, or (by_name) the tag named after the thread. */
    struct ra__thread_tag_rule {
        char glob[64];
        char tag[RA_TAG_NAME_MAX + 1];
        bool by_name;
    } thread_tags[RA__THREAD_TAGS_MAX];
    unsigned nthread_tags;
};
/* Reads the environment on the first call (thread-safe, allocation-free,
 * secure_getenv) and returns the parsed values; bad values are reported on
 * stderr, one line each, and replaced by the default. Never NULL. */
const struct ra__config *ra__config(void);
/* Before the configuration is read (at load, where reading it would warn
 * about bad values in processes that never use the library): whether the
 * variable var is set to value, and whether a variable asks for something
 * started at load (the stats segment, HTTP, thread tags, the profiler). */
bool ra__config_peek_is(const char *var, const char *value);
bool ra__config_asked_at_load(void);
/* Writes msg and a newline to stderr without allocating. */
void ra__warn(const char *msg);
/* Parses "<digits>[K|M|G|T][i][B]" (suffix case-insensitive, binary
 * multiples) into *out. Returns true on failure (syntax or overflow). */
bool ra__parse_size(const char *s, size_t *out);

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
 * thread-exit key, whose destructor is init.c's ra__thread_end. Returns
 * true on failure (pthread_setspecific could not allocate). */
bool ra__thread_exit_arm(void);

/* -- init.c: the process's start and end, fork, a thread's end ------------- */
/* At load, init.c's constructor calls, in this order, ra__clock_start,
 * ra__report_at_load, pthread_atfork with its fork handlers,
 * ra__override_check and, when the environment asks for them, the profiler
 * (REGIONALLOC_PROF), ra__thread_tags_start_thread (the main thread's base
 * tag), ra__shm_start (the stats segment) and ra__http_start_configured;
 * at exit its destructor calls ra__report_at_exit, ra__http_at_exit and
 * ra__shm_at_exit. At a thread's exit ra__thread_end calls
 * ra__thread_tags_thread_exit, ra__thread_exit and ra__hooks_thread_exit,
 * in this order. */
void ra__thread_end(void *armed);

/* -- region.c: the reservation and the extent hooks ----------------------- */
/* The reservation (ra__layout, declared in regionalloc.h for the inline
 * ra_tag_of): region i (tag i + 1) is [base + (i << shift), +1 << shift).
 * count is the number of regions that have an arena (0 before the
 * reservation and in pass-through mode), so ra_tag_of() is RA_TAG_NONE for
 * every address outside a created tag's region. */
/* Where a region hands out address space, never taking it back: jemalloc
 * keeps what it was given (opt.retain, or extents it may not unmap) and
 * reuses it. */
struct ra__carving {
    uintptr_t start, end;
    /* The next never-used address. */
    _Atomic uintptr_t next;
    /* [start, writable_end) is readable and writable; it only grows, and
     * is always at least next. */
    _Atomic uintptr_t writable_end;
    /* [writable_end, reserved_end) is reserved (PROT_NONE) and made
     * writable by mprotect; past reserved_end the address space was given
     * back (ra__carving_give_back) and is mapped anew as it is carved, if
     * nothing else took it meanwhile. */
    _Atomic uintptr_t reserved_end;
};
/* Prepares c for [start, start + size), a PROT_NONE reservation. */
void ra__carving_init(struct ra__carving *c, uintptr_t start, size_t size);
/* Takes [addr, addr + size) from the never-used part: exactly new_addr when
 * it is not 0 (possible only when it is the next address), else the first
 * address aligned to alignment (a power of two). The space is made
 * writable first (mprotect). Returns addr, or 0 when it does not fit or the
 * kernel refuses to make it writable; then nothing is taken. Thread-safe,
 * lock-free. */
uintptr_t ra__carve_extent(struct ra__carving *c, uintptr_t new_addr,
                           size_t size, size_t alignment);
/* Unmaps the reserved part that nothing was carved from yet, so that it
 * no longer counts towards the address-space limit; later carvings map it
 * again. Returns the bytes given back. Not concurrent with carvings of c
 * (region.c's growth lock). */
size_t ra__carving_give_back(struct ra__carving *c);
/* Reserves max_tags regions of region_size bytes (retrying with smaller
 * regions when the address space is short). Returns true on failure, after
 * printing one line on stderr. Called once, from ra__init. */
bool ra__region_reserve(unsigned max_tags, size_t region_size);
/* Creates the jemalloc arena whose extents come from region idx. Returns the
 * arena index, or -1 with errno set (ENOMEM: the address space the region
 * needs is not to be had, see ra__region_give_back). Called with the
 * registry lock held. */
int ra__region_create_arena(unsigned idx);
/* Gives back the part of the reservation that no tag uses, so that a
 * lowered address-space limit (RLIMIT_AS) leaves room for the rest of the
 * program: the regions not handed to a tag yet, their part of the page
 * table, and what each tag's region has not carved. From then on regions
 * map what they carve as they carve it. Returns whether anything was given
 * back. Called with the registry lock held (tag.c). */
bool ra__region_give_back(void);
/* High-water mark of the bytes jemalloc held committed in region idx. */
size_t ra__region_peak_committed(unsigned idx);
/* The bytes jemalloc holds committed in region idx now. */
size_t ra__region_committed(unsigned idx);
/* Region idx's budget (0: none): commits past hard are refused; the first
 * commit that reaches soft is reported (re-armed when committed falls
 * below soft). */
void ra__region_set_limit(unsigned idx, size_t hard, size_t soft);
/* Region idx's tag was destroyed: its peak starts again from what it
 * holds, and crossings of its soft limit not yet delivered are dropped. */
void ra__region_forget(unsigned idx);
/* Set by an extent hook of the calling thread: the tag whose hard limit
 * refused a commit (0 when none), and the number of soft limits its
 * commits crossed that are not yet delivered. The allocation paths read
 * them after jemalloc returns. */
extern RA__TLS ra_tag_t ra__limit_refused;
extern RA__TLS unsigned ra__soft_pending;
/* The tag of the oldest crossing not yet delivered (taken off the list),
 * or RA_TAG_NONE when none is left; a crossing of a tag destroyed since is
 * skipped. */
ra_tag_t ra__region_take_crossing(void);
/* Names region idx "regionalloc:<tag_name>" in /proc/<pid>/maps where the
 * kernel supports it; silently does nothing elsewhere. */
void ra__region_name(unsigned idx, const char *tag_name);

/* One byte per 4 KiB page of the reservation: for the blocks that start on
 * the page, their small bin plus one, RA__PAGE_UNCACHED or RA__PAGE_SAMPLED;
 * RA__PAGE_NONE (0, what the kernel's fresh pages read) when no block of
 * the library's starts there. Every tagged allocation path writes the entry
 * of its block's first page; since live blocks that start on one page
 * always share a size class (a slab) or own the page (large), the entry is
 * right for every live block, and free learns a block's class from one
 * load. A pointer whose entry is RA__PAGE_NONE is no tag's block although
 * its address lies in a region: once the library gave address space back
 * (ra__region_give_back), another mapping may sit there. NULL when the
 * table could not be mapped (no front caches). */
#define RA__PAGE_SHIFT 12
#define RA__PAGE_NONE 0u
#define RA__PAGE_UNCACHED 0xffu
/* The page's block was sampled by the profiler (see prof.c); such a block
 * starts on a page of its own (it is at least 4 KiB). */
#define RA__PAGE_SAMPLED 0xfeu
extern uint8_t *ra__page_bin;

static inline uint8_t *ra__page_bin_entry(const void *ptr)
{
    return &ra__page_bin[((uintptr_t)ptr - ra__layout.base) >>
                         RA__PAGE_SHIFT];
}

static inline unsigned ra__page_bin_get(const void *ptr)
{
    return __atomic_load_n(ra__page_bin_entry(ptr), __ATOMIC_RELAXED);
}

/* mark: RA__PAGE_UNCACHED or RA__PAGE_SAMPLED. */
static inline void ra__page_mark(const void *ptr, unsigned mark)
{
    __atomic_store_n(ra__page_bin_entry(ptr), (uint8_t)mark,
                     __ATOMIC_RELAXED);
}

/* The page's blocks are of small bin. */
static inline void ra__page_bin_set(const void *ptr, unsigned bin)
{
    ra__page_mark(ptr, bin + 1);
}

/* The small bin an entry names, as an unsigned below RA__MAX_BINS; any
 * other value (RA__PAGE_NONE, the marks) wraps to one above it, so that one
 * comparison tells a bin from everything else. */
static inline unsigned ra__page_entry_bin(unsigned entry)
{
    return entry - 1u;
}

/* ra__layout is exported data: a program's copy relocation may move it, so
 * the library too must reach it through the GOT, never a local alias. */
static inline ra_tag_t ra__tag_of_addr(const void *ptr)
{
    return ra__tag_of_inline(ptr);
}

/* The tag of the block at ptr, a pointer the program got from an
 * allocation function: its region's, unless the page table says that no
 * block of the library's starts on its page (another mapping's block in
 * address space the library gave back: untagged). */
static inline ra_tag_t ra__block_tag(const void *ptr)
{
    ra_tag_t tag = ra__tag_of_addr(ptr);

    if (tag != RA_TAG_NONE && ra__page_bin != NULL &&
        ra__page_bin_get(ptr) == RA__PAGE_NONE)
        return RA_TAG_NONE;
    return tag;
}

/* -- tag.c: registry of names and ids, thread-local stack ------------------ */
/* struct ra__tag_stack and the thread's ra__tag_stack are declared in
 * regionalloc.h for the inline push and pop. */
/* Arena index of each created tag, indexed by tag id; 0 in pass-through mode
 * (no arena). Entries are written once, before the tag id is published. */
extern unsigned ra__tag_arena[RA__MAX_TAGS_LIMIT + 1];
/* Number of tags published so far (acquire). ra__tags_published is exported
 * data: a program's copy relocation may move it, so the library reaches it
 * through the GOT too. */
static inline unsigned ra__tag_published(void)
{
    return __atomic_load_n(&ra__tags_published, __ATOMIC_ACQUIRE);
}
/* The tag whose arena is arena, or RA_TAG_NONE. Not fast: a scan. */
ra_tag_t ra__tag_of_arena(unsigned arena);
/* ra__region_give_back under the registry lock, when tagging is on: the
 * process's address-space limit was lowered (override_limits.c). Returns
 * whether anything was given back. */
bool ra__tag_give_back_address_space(void);
/* Fork handlers for the registry lock. */
void ra__tag_prefork(void);
void ra__tag_postfork(void);

/* A live tag: created, and not destroyed since (ra__tag_live, exported for
 * the inline push, is 1). */
static inline bool ra__tag_valid(ra_tag_t tag)
{
    return tag != RA_TAG_NONE && tag <= ra__tag_published() &&
           __atomic_load_n(&ra__tag_live[tag], __ATOMIC_ACQUIRE);
}
/* Makes tag dead: pushes, lookups and every call on it fail from now on.
 * Returns true when it was not live (nothing done). */
bool ra__tag_kill(ra_tag_t tag);
/* Queues a dead tag's id, its region and arena emptied, for reuse by
 * ra_tag_create (oldest first). */
void ra__tag_release_id(ra_tag_t tag);
/* Copies tag's name into name and, when born_at is not NULL, the count of
 * tags created when it was (see ra__tag_creations), together under the
 * registry's lock (names change when tags are destroyed and ids
 * recycled). Returns false for a dead tag (name "", born UINT64_MAX). */
bool ra__tag_identity(ra_tag_t tag, char name[RA_TAG_NAME_MAX + 1],
                      uint64_t *born_at);
/* How many tags have been created so far, recycled ids counted again. */
uint64_t ra__tag_creations(void);
/* What the reports call tag: its name (copied into buf), or "(destroyed)"
 * for an id whose tag is gone. */
const char *ra__tag_label(ra_tag_t tag, char buf[RA_TAG_NAME_MAX + 1]);

/* Makes the calling thread's allocations untagged until the matching
 * ra__tag_resume() (they nest). The stack itself is untouched: a push/pop
 * in between still pairs up. The end sets the top from the stack as it is
 * then, never from a copy taken at the start: another thread may have
 * given this one a new base meanwhile (ra__tag_set_base). */
void ra__tag_suspend(void);
void ra__tag_resume(void);

/* A thread's tag stack as other threads reach it, to give it a base tag
 * (thread_tags.c): valid until the thread exits. */
struct ra__tag_thread;
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

/* -- thread.c: per-thread, per-tag state ---------------------------------- */
#define RA__NO_TCACHE UINT32_MAX
#define RA__FC_SLOTS 64          /* blocks per bin of a front cache */

/* A front cache bin: a stack of free blocks of one small size class. */
struct ra__fc_bin {
    unsigned count;
    unsigned cap; /* blocks it may hold (0 until its first use) */
    unsigned fill; /* blocks the next refill takes (see ra__fc_refill) */
    void *items[RA__FC_SLOTS];
};

/* What one thread uses to reach one tag's arena. Tagged blocks must never
 * meet the automatic thread cache, which mixes arenas (doc/design.md):
 * each (thread, tag) pair has a front cache of small blocks that are
 * certainly the tag's, behind it an explicit jemalloc tcache of its own (or
 * none when jemalloc has no tcache id left), then the tag's arena. */
struct ra__tag_slot {
    int alloc_flags;          /* MALLOCX_ARENA | MALLOCX_TCACHE*, 0 = unset */
    int free_flags;           /* MALLOCX_TCACHE* */
    unsigned tcache;          /* explicit tcache id, or RA__NO_TCACHE */
    unsigned misses;          /* up to RA__TCACHE_AFTER_MISSES (thread.c) */
    struct ra__fc_bin *bins;  /* front cache by small bin, NULL = none */
    /* Written only by the owning thread, read by ra_tag_stats(): relaxed
     * atomics make the plain increments race-free at no cost on x86-64. */
    _Atomic uint64_t nmalloc;
    _Atomic uint64_t ndalloc;
};

struct ra__thread_state {
    struct ra__thread_state *prev, *next; /* all threads, under a lock */
    unsigned nslots;                      /* max_tags + 1; slot 0 unused */
    struct ra__tag_slot slots[];
};

/* This thread's state, NULL until it first uses a tag. */
extern RA__TLS struct ra__thread_state *ra__thread;

/* At thread exit (init.c): the thread's caches are flushed, its tcaches
 * destroyed and its state freed; what it allocates afterwards goes
 * uncached. */
void ra__thread_exit(void);
/* Fork handlers for the list of threads that hold caches. */
void ra__thread_prefork(void);
void ra__thread_postfork_parent(void);
void ra__thread_postfork_child(void);
/* Returns this thread's slot for tag, set up, or NULL when the thread cannot
 * have one now (re-entered, exiting, out of memory). */
struct ra__tag_slot *ra__thread_slot_slow(ra_tag_t tag)
    __attribute__((noinline, cold));
/* Fills bin of slot s (empty) from the tag's arena and returns one more block
 * for the caller: counted by nobody yet, maybe outside the region during
 * thread exit (jemalloc's thread-exit redirection, doc/design.md), NULL on failure. */
void *ra__fc_refill(struct ra__tag_slot *s, ra_tag_t tag, unsigned bin)
    __attribute__((noinline, cold));
/* A pair's slow event (a front cache miss, or a block no front cache
 * takes): counted until the pair is busy enough for a tcache, then, with
 * the tcache taken or refused (or caches off), never again. */
#define RA__TCACHE_AFTER_MISSES 2
void ra__slot_miss_slow(struct ra__tag_slot *s) __attribute__((noinline, cold));
static inline void ra__slot_miss(struct ra__tag_slot *s)
{
    if (RA__UNLIKELY(s->misses < RA__TCACHE_AFTER_MISSES))
        ra__slot_miss_slow(s);
}
/* Gives half of a full bin back to jemalloc. */
void ra__fc_make_room(struct ra__tag_slot *s, unsigned bin)
    __attribute__((noinline, cold));
/* Counts an allocation (alloc) or a free of tag made without a slot. */
void ra__count_orphan(ra_tag_t tag, bool alloc);
/* Empties the calling thread's caches of tag, if it has any. */
void ra__thread_flush_tag(ra_tag_t tag);
/* Before the tag's arena is reset: every thread's front cache of the tag is
 * forgotten and its tcache flushed (jemalloc requires it), live or blocked
 * threads alike, and the counts say every block was freed (nmalloc ==
 * ndalloc), or start again from 0 when forget is set (destroy). */
void ra__thread_wipe_tag(ra_tag_t tag, bool forget);
/* Sums the counters of tag over live and exited threads. */
void ra__thread_counts(ra_tag_t tag, uint64_t *nmalloc, uint64_t *ndalloc);

/* This thread's slot for tag if it has one set up, else NULL: never sets
 * one up (a free must not allocate). */
static inline struct ra__tag_slot *ra__thread_slot_if_set(ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;

    return ts != NULL && ts->slots[tag].alloc_flags != 0 ? &ts->slots[tag]
                                                         : NULL;
}

static inline struct ra__tag_slot *ra__thread_slot(ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;

    if (RA__LIKELY(ts != NULL) && RA__LIKELY(ts->slots[tag].alloc_flags != 0))
        return &ts->slots[tag];
    return ra__thread_slot_slow(tag);
}

static inline void ra__count_one(_Atomic uint64_t *counter)
{
    atomic_store_explicit(
        counter, atomic_load_explicit(counter, memory_order_relaxed) + 1,
        memory_order_relaxed);
}

/* -- alloc.c: allocation paths ---------------------------------------------- */
/* Allocates under the current tag; align is a power of two, checked by the
 * caller. NULL with errno ENOMEM on failure. */
void *ra__alloc_aligned(size_t align, size_t size);
/* Allocates size bytes under tag (RA_TAG_NONE: untagged) with jemalloc's
 * flags: MALLOCX_ZERO and an alignment; for an untagged block also a
 * caller's arena or thread cache, honoured as jemalloc would. Reported to
 * hooks. NULL with errno ENOMEM. */
void *ra__alloc_as(ra_tag_t tag, size_t size, int flags);
/* Frees ptr (not NULL) as sdallocx(ptr, size, flags) does: size 0 when not
 * known; a tagged block stays in its tag whatever flags name, an untagged
 * one goes to the thread cache or arena they name. Reported to hooks. */
void ra__free_as(void *ptr, size_t size, int flags);
/* Resizes ptr in place as xallocx does: returns its usable size, new or
 * unchanged. Reported to hooks (and counted) when the size changed. */
size_t ra__resize_in_place(void *ptr, size_t size, size_t extra, int flags);
/* Reallocates ptr (not NULL) as rallocx does (size 0 is 1): the block keeps
 * its tag; flags as for ra__alloc_as. NULL with errno ENOMEM, ptr intact. */
void *ra__realloc_as(void *ptr, size_t size, int flags);

/* RA__INSTRUMENT_PROF while the profiler samples, plus RA__INSTRUMENT_HOOK
 * per hook installed: the allocation paths test it once, and take the
 * instrumented path when it is not 0. */
#define RA__INSTRUMENT_PROF 1u
#define RA__INSTRUMENT_HOOK 2u
/* Hidden: the entry points in other files (override.c) reach it PC-relative,
 * as alloc.c, its owner, does. */
extern _Atomic unsigned ra__instrumented __attribute__((visibility("hidden")));

static inline void ra__instrument_add(unsigned what)
{
    atomic_fetch_add(&ra__instrumented, what);
}

static inline void ra__instrument_sub(unsigned what)
{
    atomic_fetch_sub(&ra__instrumented, what);
}

/* -- lifetime.c: ra_tag_reset and ra_tag_destroy ------------------------------ */
/* Fork handlers for the lock that keeps resets and destroys one at a
 * time. */
void ra__lifetime_prefork(void);
void ra__lifetime_postfork(void);

/* -- limit.c: per-tag budgets ----------------------------------------------- */
/* Sets the budgets REGIONALLOC_LIMITS names for a tag just created (or
 * recycled) under name. Called with the registry locked. */
void ra__limit_apply_config(ra_tag_t tag, const char *name);
/* Fork handlers for the budgets' lock. */
void ra__limit_prefork(void);
void ra__limit_postfork(void);
/* Clears a destroyed tag's budget and its count of refusals. */
void ra__limit_forget(ra_tag_t tag);
/* Counts an allocation that the tag's hard limit refused. */
void ra__limit_count_failure(ra_tag_t tag);
/* The tag's budget and refusals, for the reports. */
void ra__limit_read(ra_tag_t tag, size_t *hard, size_t *soft,
                    uint64_t *failures);
/* Runs the soft limits' callbacks of the crossings this thread's commits
 * made, each once, oldest first: outside every lock, on the thread whose
 * commit crossed; inside a callback, nothing (the crossings it makes are
 * delivered when it returns). */
void ra__limit_fire_soft(void) __attribute__((noinline, cold));

/* After an allocation that jemalloc may have committed memory for: the
 * soft limit's callback, if the commit reached it. A thread-local load. */
static inline void ra__limit_check_soft(void)
{
    if (RA__UNLIKELY(ra__soft_pending != 0))
        ra__limit_fire_soft();
}

/* -- hooks.c: user callbacks ------------------------------------------------ */
#define RA__HOOKS_MAX 16

/* region.c: the first test of ra_free, one comparison: a block is
 * untagged, and no hook wants its free, when (ptr - base) >> shift >=
 * count. count is the number of regions with an arena, or, while a hook is
 * installed, more than any pointer can give, so that every free takes the
 * full path. A private copy of the layout (hidden: no GOT load), whose
 * base and shift never change after the reservation and whose count
 * changes in one store. */
struct ra__free_gate {
    uintptr_t base;
    _Atomic uintptr_t count;
    unsigned shift;
};
extern struct ra__free_gate ra__free_gate;
/* Recomputes the gate's count (the regions, the hooks). */
void ra__free_gate_update(void);
/* override.c: the library's malloc, a hidden alias. */
void *ra__own_malloc(size_t size);

/* Whether a hook is installed: ra__instrumented counts them. */
static inline bool ra__hooks_any(void)
{
    return (atomic_load_explicit(&ra__instrumented, memory_order_relaxed) &
            ~RA__INSTRUMENT_PROF) != 0;
}
/* Non-zero while the calling thread does the library's own work (see
 * ra__quiet_begin): nothing is reported then. */
extern RA__TLS unsigned ra__hooks_muted;
/* Whether a report of ptr would reach the installed hooks: not NULL, and
 * the calling thread neither inside a hook nor muted. */
bool ra__hooks_reporting(const void *ptr);
/* Report to the installed hooks, unless ra__hooks_reporting says no: the
 * allocation of ptr (usable size known to the caller; returns ptr, so that
 * an allocation path ends in a tail call), the free of ptr of tag (called
 * before the block can be reused). */
void *ra__hooks_on_alloc_of(void *ptr, size_t size);
void ra__hooks_on_free_of(ra_tag_t tag, void *ptr, size_t size);
/* At thread exit (init.c): the thread's reader word goes back; what it
 * dispatches afterwards counts in the shared overflow counter. */
void ra__hooks_thread_exit(void);
/* Fork handlers for the install lock; in the child, the callbacks that other
 * threads were running are over. */
void ra__hooks_prefork(void);
void ra__hooks_postfork(bool child);

/* -- the library's own work ------------------------------------------------- */
/* Between ra__quiet_begin() and ra__quiet_end(), whatever the calling thread
 * allocates, through any path (the C library's mallocs on its behalf
 * included: a FILE of its own, qsort's buffer), is the library's: untagged,
 * never sampled, never reported to hooks. Sections nest. User code called
 * inside one (a caller's FILE, see ra__out_write) runs outside it. */
static inline void ra__quiet_begin(void)
{
    ra__hooks_muted++;
    ra__tag_suspend();
}

static inline void ra__quiet_end(void)
{
    ra__tag_resume();
    ra__hooks_muted--;
}

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
/* Bytes in the library's live blocks of its own (usable sizes): what the
 * reports show as "library", part of the untagged figures. */
size_t ra__meta_held(void);

/* -- prof.c: the sampled allocation-site profile ------------------------------ */
#define RA__PROF_MAX_FRAMES 64

/* One (tag, call stack) of the profile. frames[0] is the innermost frame
 * outside the library (the caller of malloc, new, ...), frames[nframes - 1]
 * the outermost. The raw figures count samples as taken (what heap_v2
 * wants: jeprof unbiases them itself); the estimates scale each sample of
 * size s by 1 / (1 - exp(-s / interval)). */
struct ra__prof_stack {
    ra_tag_t tag;
    unsigned nframes;
    void *frames[RA__PROF_MAX_FRAMES];
    uint64_t live_samples, live_sampled_bytes;
    uint64_t alloc_samples, alloc_sampled_bytes;
    double live_objects, live_bytes;
    double alloc_objects, alloc_bytes;
};

/* Calls visit for every stack of tag (RA_TAG_ALL: every tag) while holding
 * the profile's lock, so the figures are consistent; visit may allocate
 * with ra__meta_alloc, and must call nothing else of the library's. Returns the mean sampling interval in bytes,
 * or 0 when the profiler was never started (nothing visited). */
size_t ra__prof_visit(ra_tag_t tag,
                      void (*visit)(const struct ra__prof_stack *stack,
                                    void *ctx),
                      void *ctx);

/* Whether the profiler samples. */
extern atomic_bool ra__prof_sampling;
/* The calling thread's bytes to its next sample; <= 0 also when none was
 * drawn yet. */
extern RA__TLS int64_t ra__prof_countdown;
/* The countdown ran out: draws the next one and says whether this
 * allocation of size bytes is sampled (never inside the profiler). */
bool ra__prof_tick_slow(size_t size) __attribute__((noinline, cold));

/* Counts size bytes off the calling thread's countdown. Returns false when
 * it ran out (or was never drawn): then ra__prof_tick_slow decides. Inline:
 * a subtract, a compare and a store. */
static inline bool ra__prof_countdown_holds(size_t size)
{
    /* Unsigned: a size of 2^63 or more wraps instead of overflowing (such
     * an allocation fails anyway, whatever the countdown says). */
    int64_t left = (int64_t)((uint64_t)ra__prof_countdown - (uint64_t)size);

    if (RA__UNLIKELY(left <= 0))
        return false;
    ra__prof_countdown = left;
    return true;
}

/* Records the sampled block ptr of size requested bytes under tag: its call
 * stack and its weight. The block's page is already marked. */
void ra__prof_record(ra_tag_t tag, void *ptr, size_t size);
/* ptr, a sampled block, is being freed (or reallocated): it leaves the
 * profile's live figures. */
void ra__prof_on_free(const void *ptr);
/* The tag's blocks were all freed at once (a reset): its live samples
 * leave the profile; with history (a destroy), its stacks too. */
void ra__prof_forget(ra_tag_t tag, bool history);
/* ra_prof_start without its checks, for ra__init (REGIONALLOC_PROF). */
void ra__prof_begin(size_t mean_interval_bytes);
/* Fork handlers for the profile's lock. */
void ra__prof_prefork(void);
void ra__prof_postfork(void);

/* -- stats.c: per-tag usage and purge ------------------------------------- */
/* Refreshes jemalloc's statistics (the "epoch"); not cheap (doc/design.md,
 * jemalloc facts): once per report, then read as many figures as needed. */
void ra__stats_refresh(void);
/* Fills *out for tag (RA_TAG_NONE: the untagged arenas) as of the last
 * refresh. tag must be valid and tagging on. */
void ra__stats_read(ra_tag_t tag, ra_tag_stats_t *out);
/* jemalloc's process-wide totals as of the last refresh. */
struct ra__global_stats {
    size_t allocated, active, resident, mapped;
};
void ra__stats_global(struct ra__global_stats *out);
/* allocated of tag (valid, tagging on) as of the last refresh: the two reads
 * of ra__stats_read() that a checkpoint needs, not all of them. */
size_t ra__stats_allocated(ra_tag_t tag);
/* Purges asked for tag (RA_TAG_NONE: the untagged arenas) through
 * ra_tag_purge() and ra_purge_all() so far. */
uint64_t ra__stats_purges(ra_tag_t tag);
/* A destroyed tag's count of purges starts again from 0. */
void ra__stats_forget(ra_tag_t tag);

/* -- override.c: the malloc-family symbols -------------------------------- */
/* At load (init.c): warns on stderr, one line, when "malloc" is bound to
 * another object than this library (linked or loaded after jemalloc or the
 * C library), since plain malloc is then untagged. */
#ifdef RA_OVERRIDE
void ra__override_check(void);
#else
static inline void ra__override_check(void) {}
#endif

/* -- procstat.c: what the kernel says about the process ------------------ */
/* At load (init.c): time zero of every report, unless an earlier call of
 * ra__clock_ns (from another library's constructor) set it. */
void ra__clock_start(void);
/* Nanoseconds of CLOCK_MONOTONIC since the library was loaded. Never
 * allocates. */
uint64_t ra__clock_ns(void);
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

/* -- jemalloc_lookup.c: jemalloc's own functions (ra_jemalloc.h) ---------- */
/* Whether addr lies in jemalloc's library (the object its functions were
 * found in): code of jemalloc's, such as the caller of a function the
 * library stands in front of. Not fast: dladdr. */
bool ra__jemalloc_owns(const void *addr);

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

/* -- what init.c calls of the output side (output.h) ----------------------- */
/* shm.c: with REGIONALLOC_SHM=1, at load: makes the stats segment and starts
 * its publisher (a line on stderr if it cannot); at exit: removes it, in
 * the process that made it only. */
void ra__shm_start(void);
void ra__shm_at_exit(void);
/* http.c: with REGIONALLOC_HTTP, at load: starts the server (a line on
 * stderr if it cannot); at exit: stops it. Its lock is the outermost of the
 * fork handlers'. */
void ra__http_start_configured(void);
/* thread_tags.c: REGIONALLOC_THREAD_TAGS. Whether it gives tags (rules and
 * tagging on). A thread was named (by pthread_setname_np or prctl): its
 * base tag follows. At a thread's start (and the main thread's at load),
 * and after a prctl(PR_SET_NAME): the name the kernel has gives its base. ra_tag_destroy's kill: EBUSY when the
 * tag is a thread's base, else as ra__tag_kill (0, or EINVAL). */
bool ra__thread_tags_on(void);
void ra__thread_tags_named(pthread_t thread, const char *name);
/* At thread exit (init.c): the thread leaves the named threads. */
void ra__thread_tags_thread_exit(void);
void ra__thread_tags_start_thread(void);
/* The calling thread will never have a base tag (it is jemalloc's). */
void ra__thread_tags_leave(void);
int ra__thread_tags_kill(ra_tag_t tag);
void ra__thread_tags_prefork(void);
void ra__thread_tags_postfork_parent(void);
void ra__thread_tags_postfork_child(void);
void ra__http_at_exit(void);
void ra__http_prefork(void);
void ra__http_postfork_parent(void);
void ra__http_postfork_child(void);
/* report.c, at load: notes the process that loaded the library and keeps a
 * copy of stderr for the exit reports. Never allocates. */
void ra__report_at_load(void);
/* report.c, at exit: writes the reports REGIONALLOC_STATS,
 * REGIONALLOC_CHECKPOINTS and REGIONALLOC_PROF_DUMP ask for, in the process
 * that loaded the library, and in a forked child those whose path holds
 * %p. */
void ra__report_at_exit(void);
/* checkpoint.c: fork handlers for the ring's lock. */
void ra__checkpoint_prefork(void);
void ra__checkpoint_postfork(void);

#endif /* RA_INTERNAL_H */

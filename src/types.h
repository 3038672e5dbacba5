/* The core's types, constants and attribute macros: what the library's
 * files share besides functions. Prototypes are internal.h's (by owning
 * file), the state as the hot paths read it hot_state.h's, jemalloc's
 * part backend.h's. */
#ifndef RA_TYPES_H
#define RA_TYPES_H

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "lock.h"
#include "regionalloc.h"
#include "sizes.h"
#include "values.h"

#define RA__LIKELY(x) __builtin_expect(!!(x), 1)
#define RA__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define RA__COLD __attribute__((noinline, cold))
#define RA__TLS __thread __attribute__((tls_model("initial-exec")))

/* Rings: circular doubly linked lists of records that have prev and next,
 * around a head record of the same type (thread.c's threads, untagged.c's
 * counted threads). The caller holds the ring's lock. */
#define RA__RING_PUSH(head, node)                                           \
    do {                                                                    \
        (node)->next = (head)->next;                                        \
        (node)->prev = (head);                                              \
        (head)->next->prev = (node);                                        \
        (head)->next = (node);                                              \
    } while (0)
#define RA__RING_UNLINK(node)                                               \
    do {                                                                    \
        (node)->prev->next = (node)->next;                                  \
        (node)->next->prev = (node)->prev;                                  \
    } while (0)

/* jemalloc allows 4095 arena indices, automatic ones included; leave room for
 * those (4 per CPU by default) on machines up to 16 CPUs... and beyond, tag
 * creation fails cleanly with ENOSPC when arenas.create does. */
#define RA__MAX_TAGS_LIMIT 4000u
#define RA__REGION_SIZE_MIN ((size_t)4 << 20)
/* Arenas in one tag's pool, at most (REGIONALLOC_TAG_ARENAS's bound). */
#define RA__POOL_MAX 64u

/* Aborts with a message when a broken invariant is detected. Compiled in
 * by ./configure --enable-debug (RA_DEBUG), out otherwise: the checks sit
 * on the allocation paths, which pay nothing for them in a release. */
#ifdef RA_DEBUG
#define ra__assert(cond)                                                    \
    ((cond) ? (void)0 : ra__assert_fail(#cond, __FILE__, __LINE__))
#else
/* Type-checked, never evaluated: a check cannot rot unseen. */
#define ra__assert(cond) ((void)sizeof(!(cond)))
#endif
void ra__assert_fail(const char *cond, const char *file, int line)
    __attribute__((noreturn, cold));

/* -- warn.c --------------------------------------------------------------- */
/* A thread's SIGPIPE held around the library's own writes: its signal mask
 * before (restored when restore), and whether a SIGPIPE was pending. */
struct ra__sigpipe_hold {
    sigset_t mask;
    bool was_pending, restore;
};

/* -- config.c ------------------------------------------------------------- */
struct ra__config {
    bool enabled;        /* REGIONALLOC, default true */
    unsigned max_tags;   /* REGIONALLOC_MAX_TAGS, default 256 */
    /* REGIONALLOC_THREADS_PER_ARENA (default 4) and REGIONALLOC_TAG_ARENAS
     * (default the CPUs the process may run on, at most RA__POOL_MAX): when
     * a tag's pool grows, and how far (pool.c). */
    unsigned threads_per_arena, tag_arenas;
    size_t region_size;  /* REGIONALLOC_REGION_SIZE, default 64 GiB */
    /* REGIONALLOC_STATS: "" (off), "stderr", a path */
    char stats_path[RA__PATH_LEN + 1];
    ra_format_t stats_format; /* REGIONALLOC_STATS_FORMAT, default text; also
                                 the format of the checkpoint report */
    char checkpoints_path[RA__PATH_LEN + 1]; /* REGIONALLOC_CHECKPOINTS: as
                                                stats_path */
    size_t prof_interval; /* REGIONALLOC_PROF: 0 (off) or the mean interval */
    char prof_dump_path[RA__PATH_LEN + 1]; /* REGIONALLOC_PROF_DUMP: "" or a
                                              path */
    /* REGIONALLOC_LIMITS: budgets to set on the tags of these names when
     * they are created (well-formed entries only). */
    struct ra__limit_entry {
        char name[RA_TAG_NAME_MAX + 1];
        size_t hard, soft;
    } limits[RA__LIST_MAX];
    unsigned nlimits;
    bool shm;                  /* REGIONALLOC_SHM=1 */
    uint64_t shm_interval_ns;  /* REGIONALLOC_SHM_INTERVAL, default 1 s */
    char http_addr[256];       /* REGIONALLOC_HTTP: "" or HOST:PORT */
    bool http_write;           /* REGIONALLOC_HTTP_WRITE=1: POST purge */
    bool http_allow_remote;    /* REGIONALLOC_HTTP_ALLOW_REMOTE=1 */
    bool http_announce;        /* REGIONALLOC_HTTP_ANNOUNCE=1: the URL on
                                  stderr once served (regionalloc run) */
    /* REGIONALLOC_MEMORY_LIMIT: bytes, or a percentage (1-100) of the
     * cgroup's limit; both 0: the cgroup's own. */
    size_t memory_limit;
    unsigned memory_limit_percent;
    /* REGIONALLOC_THREAD_TAGS: a thread whose name matches glob gets the
     * tag of that name, or (by_name) the tag named after the thread. */
    struct ra__thread_tag_rule {
        char glob[RA__GLOB_LEN + 1];
        char tag[RA_TAG_NAME_MAX + 1];
        bool by_name;
    } thread_tags[RA__LIST_MAX];
    unsigned nthread_tags;
    /* REGIONALLOC_PROGRAM_PID: the one process of a tree that regionalloc
     * run watches (0: every process is watched, as without the tool);
     * REGIONALLOC_CHILDREN=1: the others are watched too, as children. */
    pid_t program_pid;
    bool children;
    /* REGIONALLOC_TAG_BY=library: an allocation made with no tag goes to
     * the tag of the object whose code called the allocation entry. */
    bool tag_by_library;
};

/* What the environment's reports, server, segment and profiler are for in
 * this process (ra__config_watch). */
enum ra__watch {
    RA__WATCH_PROGRAM, /* all of them, as asked */
    RA__WATCH_CHILD,   /* all, the reports at FILE.PID or with the pid */
    RA__WATCH_NONE     /* none: the allocator and its tags only */
};

/* -- region.c ------------------------------------------------------------- */
/* The reservation (ra__layout, declared in regionalloc.h for the inline
 * ra_tag_of): region i (tag i + 1) is [base + (i << shift), +1 << shift).
 * count is the number of regions handed out: those that have an arena,
 * and those skipped because another mapping took their given-back space
 * (0 before the reservation and in pass-through mode), so ra_tag_of() is
 * RA_TAG_NONE for every address above them. */
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

/* What a region's commits are counted against (budget.c's, handed to the
 * region, which is below the budgets, as tag_ids.c opens it for a tag
 * through pool.c: a call through this table is a call of budget.c's, drawn in
 * doc/design.md): commit counts
 * bytes newly committed in tag's region unless a hard limit up its chain
 * refuses (false); uncommit gives them back; refused: whether this
 * thread's last commit in tag was refused, so that jemalloc's uncommitted
 * growth after a refusal carves nothing. */
struct ra__commit_ops {
    bool (*commit)(ra_tag_t tag, size_t bytes);
    void (*uncommit)(ra_tag_t tag, size_t bytes);
    bool (*refused)(ra_tag_t tag);
};

/* The first test of ra_free, one comparison: a block is untagged, and no
 * hook wants its free, when (ptr - base) >> shift >= count. count is the
 * number of regions handed out (ra__layout's), or, while a hook is
 * installed, more than any pointer can give, so that every free takes the
 * full path. A private copy of the layout (hidden: no GOT load), whose
 * base and shift never change after the reservation and whose count
 * changes in one store. */
struct ra__free_gate {
    uintptr_t base;
    _Atomic uintptr_t count;
    unsigned shift;
};

/* One byte per 4 KiB page of the reservation: for the blocks that start on
 * the page, their small bin plus one, RA__PAGE_UNCACHED or RA__PAGE_SAMPLED;
 * RA__PAGE_NONE (0, what the kernel's fresh pages read) when no block of
 * the library's starts there. Every tagged allocation path writes the entry
 * of its block's first page; since live blocks that start on one page
 * always share a size class (a slab) or own the page (large), the entry is
 * right for every live block, and free learns a block's class from one
 * load. A pointer whose entry is RA__PAGE_NONE is no tag's block although
 * its address lies in a region: once the library gave address space back
 * (ra__region_give_back), another mapping may sit there. */
#define RA__PAGE_SHIFT 12
#define RA__PAGE_NONE 0u
#define RA__PAGE_UNCACHED 0xffu
/* The page's block was sampled by the profiler (see prof.c); such a block
 * starts on a page of its own (it is at least 4 KiB). */
#define RA__PAGE_SAMPLED 0xfeu

/* -- pair.c, front_cache.c, fc_bins.c ------------------------------------ */
#define RA__NO_TCACHE UINT16_MAX
/* A (thread, tag) pair's life (pair.c draws it; doc/design.md, "A pair's
 * life"): the value of its state field. 0 is what a thread's zeroed slots
 * read: a pair not set up. */
enum ra__pair_state {
    RA__PAIR_UNUSED = 0, /* not set up: no cache, not among the tag's users */
    RA__PAIR_ACTIVE,     /* its owner uses it: alloc_flags names its arena */
    RA__PAIR_PARKED,     /* a destroy kept it for the slot's next holder */
    RA__PAIR_FLUSHING,   /* parked, its tcache being flushed by a purge */
    RA__PAIR_HELD        /* parked, held still for a reset of its tag */
};
/* A front cache bin's capacity in the library's accounts (the return
 * stacks' bound, the batches'): RA__FC_SLOTS blocks of a class, fewer for
 * big classes (ra__fc_cap). A bin itself starts smaller and grows while
 * its pair overflows it (ra__fc_cap_max). */
#define RA__FC_SLOTS 64
#define RA__FC_FIRST (RA__FC_SLOTS / 2)
#define RA__FC_MAX 256
/* A thread's own ids, at most (own_ids.c). */
#define RA__OWN_MAX 16
/* A pair's misses (front_cache.c) until it takes a tcache of its own. */
#define RA__TCACHE_AFTER_MISSES 2
/* A tag's return stack of a class holds this many front cache bins' worth
 * of blocks at most (returns.c): room for the surplus of several threads
 * that free what others make. */
#define RA__RETURNS_BINS 4

/* A front cache bin: a stack of free blocks of one small size class, in
 * an array of the library's that the pair's use sizes (fc_bins.c): length
 * blocks, RA__FC_FIRST at first, doubled at a refill after the bin
 * overflowed, up to ra__fc_cap_max. The header is 32 bytes, a pair's
 * headers one array of them; the arrays come only for the classes the
 * pair uses. */
struct ra__fc_bin {
    unsigned count;
    /* Blocks it may hold now: length, or 0 until its first use and while its
     * pair is parked (the fast paths then see it full, or empty). */
    unsigned cap;
    unsigned fill; /* blocks the next refill takes (see ra__fc_refill) */
    /* The class's size, set with cap at first use: beside count, what the
     * fast paths count in bytes costs no load of another line. */
    unsigned size;
    void **items; /* NULL until its first use */
    unsigned length; /* items' length */
    /* The bin was full since its last refill: the next one grows it. */
    unsigned overflowed;
};

/* What one thread uses to reach one tag's arena. Tagged blocks must never
 * meet the automatic thread cache, which mixes arenas (doc/design.md):
 * each (thread, tag) pair has a front cache of small blocks that are
 * certainly the tag's, behind it an explicit jemalloc tcache of its own (or
 * none when jemalloc has no tcache id left), then the tag's arena. */
struct ra__tag_slot {
    /* MALLOCX_ARENA | MALLOCX_TCACHE*, what the fast paths read: a cache
     * of the state, written only by pair.c's transitions, non-zero exactly
     * when the pair is RA__PAIR_ACTIVE. */
    int alloc_flags;
    /* Explicit tcache id, or RA__NO_TCACHE; its flags for a free are
     * ra__be_tcache_flags(tcache). */
    uint16_t tcache;
    uint16_t arena;           /* the arena of the pool it is bound to */
    uint8_t misses;           /* up to RA__TCACHE_AFTER_MISSES */
    /* The pair allocates: set when it is made by an allocation or first
     * allocates. A pair made by a free (a consumer of another thread's
     * blocks) allocates nothing and has no front cache (bins NULL: its
     * frees go through the thread's outbox). Here, not at the end: the
     * slot keeps its size (64 bytes), and the fast paths their code. */
    bool allocates;
    /* The pair's state (enum ra__pair_state), written only by pair.c's
     * transitions. Parked (PARKED, FLUSHING, HELD): between a destroy of
     * its tag that left nothing live and the owner's next use, the pair
     * holds no front-cache block and may not be used (alloc_flags 0, every
     * bin's capacity 0), and only its tcache keeps blocks, which another
     * thread may give back (FLUSHING) so that the slot's next holder is
     * not charged for them. The owner takes it back with a
     * compare-and-swap from PARKED (pair.c). */
    _Atomic uint8_t state;
    /* Counted in its tag's pool (pool.c), as a pair busy enough to have
     * reached for a tcache (ra__slot_miss_slow): until then it sits on the
     * pool's quietest arena and weighs on none, so that a tag that many
     * threads visit once keeps one arena. In the padding before
     * made_before. */
    bool busy;
    /* Blocks the pair made for the slot's earlier holders, since it last
     * started over (pair.c: a destroy with nothing live keeps the pair's
     * caches, and its age counts towards a tcache of its own), up to
     * UINT32_MAX: only its crossing of a threshold matters. Under
     * threads_lock. */
    uint32_t made_before;
    struct ra__fc_bin *bins;  /* front cache by small bin, NULL = none */
    /* What the pair handed out and took back: blocks (nmalloc, ndalloc)
     * and usable bytes (bytes: handed out minus taken back, modulo 2^64;
     * a thread's frees of blocks others made take it below zero, and only
     * the sum over a tag's slots means anything). Counted as a block
     * reaches the caller or leaves it, never as it moves between caches,
     * so that the sums are exact at any moment (ra_tag_stats). Written
     * only by the owning thread: relaxed atomics make the plain updates
     * race-free at no cost on x86-64. */
    _Atomic uint64_t nmalloc;
    _Atomic uint64_t ndalloc;
    _Atomic uint64_t bytes;
    /* The tag's slots over every thread (users.c: the users list, under its
     * lock): what a reset, a destroy and the counts walk. */
    struct ra__tag_slot *users_next, **users_prev;
};

/* A tag's counts over its slots (users.c): blocks handed out and taken
 * back, and the usable bytes in the blocks live. */
struct ra__counts {
    uint64_t nmalloc, ndalloc;
    size_t allocated;
};

/* What a thread frees of tags it does not allocate in, on its way home
 * (outbox.c): a few direct-mapped ways, each one (tag, small bin)'s batch
 * for the tag's return stack. stamp is the tag's reset count when the
 * batch began: a reset since discarded its blocks. A destroy on another
 * thread may take a way's batch (outbox.c says how). */
#define RA__OUTBOX_WAYS 64
#define RA__OUTBOX_BATCH (RA__FC_SLOTS / 2)
struct ra__outbox_way {
    _Atomic ra_tag_t tag; /* RA_TAG_NONE: empty */
    unsigned bin, n;
    unsigned max; /* sent at n == max: half a front cache bin of the class */
    uint32_t stamp;
    void *items[RA__OUTBOX_BATCH];
};

struct ra__thread_state {
    struct ra__thread_state *prev, *next; /* all threads, under a lock */
    unsigned nslots;                      /* max_tags + 1; slot 0 unused */
    /* nslots slots, then the outbox's RA__OUTBOX_WAYS ways (outbox.c):
     * past the slots, so that the fast paths' offsets stay as they are. */
    struct ra__tag_slot slots[];
};

/* -- untagged.c ----------------------------------------------------------- */
enum ra__untagged_state {
    RA__UNTAGGED_UNSEEN,   /* not counted yet */
    RA__UNTAGGED_UNFOUND,  /* listed, its counters not found yet: the
                              loading thread of a process that has no
                              other, until one is made or it reads */
    RA__UNTAGGED_LISTED,   /* counted live, through its counters */
    RA__UNTAGGED_GONE      /* left the list at its end: counted as it left */
};
/* A thread as the untagged row counts it, in the thread's own storage:
 * jemalloc's counts of the bytes it handed the thread and took back
 * (thread.allocatedp, thread.deallocatedp: valid while the thread lives),
 * and what the library took from jemalloc for tags on this thread less
 * what it gave back (tagged, modulo 2^64: written by the thread alone,
 * read by a sum on any). One line: a sum loads it and jemalloc's. */
struct ra__untagged_thread {
    alignas(64) const uint64_t *allocated;
    const uint64_t *deallocated;
    _Atomic uint64_t tagged;
    struct ra__untagged_thread *prev, *next; /* under untagged.c's lock */
    uint64_t left; /* what it held when it last left, once gone */
    enum ra__untagged_state state;
};

/* -- tag_stack.c ---------------------------------------------------------- */
/* A thread's tag stack as other threads reach it, to give it a base tag
 * (thread_tags.c): valid until the thread exits. */
struct ra__tag_thread;

/* Who holds a tag id, as one moment's view of the registry shows it
 * (ra__tag_holders): every parent named is live in the same view. */
/* A range of addresses, [start, end). */
struct ra__range {
    uintptr_t start, end;
};

struct ra__tag_holder {
    bool live;
    ra_tag_t parent; /* tag trees: RA_TAG_NONE at the top level */
    uint64_t born;   /* its creation number (ra__tag_creations) */
    char name[RA_TAG_NAME_MAX + 1];
};

/* -- alloc paths, hooks, prof --------------------------------------------- */
/* ra__instrumented: RA__INSTRUMENT_PROF while the profiler samples, plus
 * RA__INSTRUMENT_HOOK per hook installed: the allocation paths test it
 * once, and take the instrumented path when it is not 0. */
#define RA__INSTRUMENT_PROF 1u
#define RA__INSTRUMENT_HOOK 2u
#define RA__HOOKS_MAX 16
/* REGIONALLOC_TAG_BY=library (by_library.c): set once at start, above
 * every count of hooks that RA__HOOKS_MAX allows. */
#define RA__INSTRUMENT_LIBRARY (1u << 16)
_Static_assert(RA__INSTRUMENT_HOOK * (RA__HOOKS_MAX + 1) <
                   RA__INSTRUMENT_LIBRARY,
               "the hooks' count stays below the library bit");
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

/* -- stats.c -------------------------------------------------------------- */
/* jemalloc's process-wide totals. */
struct ra__global_stats {
    size_t allocated, active, resident, mapped;
};

#endif /* RA_TYPES_H */

/* Declarations shared between the library's files, grouped by owning file. */
#ifndef RA_INTERNAL_H
#define RA_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/* -- config.c: environment, read once ------------------------------------- */
struct ra__config {
    bool enabled;        /* REGIONALLOC, default true */
    unsigned max_tags;   /* REGIONALLOC_MAX_TAGS, default 256 */
    size_t region_size;  /* REGIONALLOC_REGION_SIZE, default 64 GiB */
    char stats_path[4096]; /* REGIONALLOC_STATS: "" (off), "stderr", a path */
    pid_t pid;           /* the process that read the environment */
};
/* Reads the environment on the first call (thread-safe, allocation-free,
 * secure_getenv) and returns the parsed values; bad values are reported on
 * stderr, one line each, and replaced by the default. Never NULL. */
const struct ra__config *ra__config(void);
/* Writes msg and a newline to stderr without allocating. */
void ra__warn(const char *msg);

/* -- init.c: one-time library start --------------------------------------- */
/* Reads the configuration, makes the reservation and registers the fork and
 * thread-exit handlers, once. Returns whether tagging is on (false: pass-
 * through mode). Safe to call from any thread, at any time, often. */
bool ra__init(void);
/* The state ra__init settled on; false before ra__init has run. */
extern atomic_bool ra__tagging;

/* -- region.c: the reservation and the extent hooks ----------------------- */
/* The reservation (ra__layout, declared in regionalloc.h for the inline
 * ra_tag_of): region i (tag i + 1) is [base + (i << shift), +1 << shift).
 * count is the number of regions that have an arena (0 before the
 * reservation and in pass-through mode), so ra_tag_of() is RA_TAG_NONE for
 * every address outside a created tag's region. */
/* Reserves max_tags regions of region_size bytes (retrying with smaller
 * regions when the address space is short). Returns true on failure, after
 * printing one line on stderr. Called once, from ra__init. */
bool ra__region_reserve(unsigned max_tags, size_t region_size);
/* Creates the jemalloc arena whose extents come from region idx. Returns the
 * arena index, or -1 with errno set. Called with the registry lock held. */
int ra__region_create_arena(unsigned idx);
/* Bytes of the region handed to jemalloc so far (the bump offset). */
size_t ra__region_used(unsigned idx);
/* High-water mark of the bytes jemalloc held committed in region idx. */
size_t ra__region_peak_committed(unsigned idx);
/* Names region idx "regionalloc:<tag_name>" in /proc/<pid>/maps where the
 * kernel supports it; silently does nothing elsewhere. */
void ra__region_name(unsigned idx, const char *tag_name);

/* One byte per 4 KiB page of the reservation: the small bin of the blocks
 * that start on the page, or RA__PAGE_UNCACHED. Every tagged allocation path
 * writes the entry of its block's first page; since live blocks that start
 * on one page always share a size class (a slab) or own the page (large),
 * the entry is right for every live block, and free learns a block's class
 * from one load. NULL when the table could not be mapped (no front caches). */
#define RA__PAGE_SHIFT 12
#define RA__PAGE_UNCACHED 0xffu
extern uint8_t *ra__page_bin;

static inline uint8_t *ra__page_bin_entry(const void *ptr)
{
    return &ra__page_bin[((uintptr_t)ptr - ra__layout.base) >>
                         RA__PAGE_SHIFT];
}

static inline void ra__page_bin_set(const void *ptr, unsigned bin)
{
    __atomic_store_n(ra__page_bin_entry(ptr), (uint8_t)bin,
                     __ATOMIC_RELAXED);
}

static inline ra_tag_t ra__tag_of_addr(const void *ptr)
{
    return ra__tag_of_inline(ptr);
}

/* -- tag.c: registry of names and ids, thread-local stack ------------------ */
struct ra__tag_stack {
    ra_tag_t top;   /* items[depth - 1], or RA_TAG_NONE when empty */
    unsigned depth;
    ra_tag_t items[RA_TAG_STACK_MAX];
};
extern RA__TLS struct ra__tag_stack ra__tag_stack;
/* Arena index of each created tag, indexed by tag id; 0 in pass-through mode
 * (no arena). Entries are written once, before the tag id is published. */
extern unsigned ra__tag_arena[RA__MAX_TAGS_LIMIT + 1];
/* Number of tags published so far (acquire). */
unsigned ra__tag_published(void);
/* Fork handlers for the registry lock. */
void ra__tag_prefork(void);
void ra__tag_postfork(void);

static inline bool ra__tag_valid(ra_tag_t tag)
{
    return tag != RA_TAG_NONE && tag <= ra__tag_published();
}

/* -- thread.c: per-thread, per-tag state ---------------------------------- */
#define RA__NO_TCACHE UINT32_MAX
/* MALLOCX_ARENA shifts a signed int, which overflows for arena indices from
 * 2047 up; the same bits, computed unsigned. */
#define RA__ARENA_FLAGS(a) ((int)(((unsigned)(a) + 1u) << 20))
#define RA__MAX_BINS 64          /* jemalloc 5.3 has 36 small bins */
#define RA__SIZE_BIN_ENTRIES 4097 /* small sizes / 8, up to 32 KiB */
#define RA__FC_SLOTS 64          /* blocks per bin of a front cache */

/* A front cache bin: a stack of free blocks of one small size class. */
struct ra__fc_bin {
    unsigned count;
    void *items[RA__FC_SLOTS];
};

/* What one thread uses to reach one tag's arena. Tagged blocks must never
 * meet the automatic thread cache, which mixes arenas (DESIGN.md section 7):
 * each (thread, tag) pair has a front cache of small blocks that are
 * certainly the tag's, behind it an explicit jemalloc tcache of its own (or
 * none when jemalloc has no tcache id left), then the tag's arena. */
struct ra__tag_slot {
    int alloc_flags;          /* MALLOCX_ARENA | MALLOCX_TCACHE*, 0 = unset */
    int free_flags;           /* MALLOCX_TCACHE* */
    unsigned tcache;          /* explicit tcache id, or RA__NO_TCACHE */
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

/* jemalloc's small size classes, read once by ra__thread_init: the bin of a
 * size s <= ra__small_max is ra__size_bin[(s + 7) >> 3]. ra__small_max is 0
 * when the classes could not be read (no front caches then). */
extern unsigned ra__small_max;
extern uint8_t ra__size_bin[RA__SIZE_BIN_ENTRIES];
extern size_t ra__bin_size[RA__MAX_BINS];
extern unsigned ra__bin_cap[RA__MAX_BINS]; /* front cache capacity per bin */

/* Creates the thread-exit key and reads the size classes; called once from
 * ra__init. Aborts on failure (no key means caches never released). */
void ra__thread_init(void);
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
 * thread exit (#2791), NULL on failure. */
void *ra__fc_refill(struct ra__tag_slot *s, ra_tag_t tag, unsigned bin)
    __attribute__((noinline, cold));
/* Gives half of a full bin back to jemalloc. */
void ra__fc_make_room(struct ra__tag_slot *s, unsigned bin)
    __attribute__((noinline, cold));
/* Counts an allocation (alloc) or a free of tag made without a slot. */
void ra__count_orphan(ra_tag_t tag, bool alloc);
/* Empties the calling thread's caches of tag, if it has any. */
void ra__thread_flush_tag(ra_tag_t tag);
/* Sums the counters of tag over live and exited threads. */
void ra__thread_counts(ra_tag_t tag, uint64_t *nmalloc, uint64_t *ndalloc);

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
/* Frees a block of size bytes allocated with alignment align (C23). */
void ra__free_aligned_sized(void *ptr, size_t align, size_t size);

/* -- stats.c: mallctl reads, purge ----------------------------------------- */
/* Refreshes jemalloc's statistics (the "epoch"); not cheap (#2077): once per
 * report, then read as many figures as needed. */
void ra__stats_refresh(void);
/* Fills *out for tag (RA_TAG_NONE: the untagged arenas) as of the last
 * refresh. tag must be valid and tagging on. */
void ra__stats_read(ra_tag_t tag, ra_tag_stats_t *out);
/* jemalloc's process-wide totals as of the last refresh. */
struct ra__global_stats {
    size_t allocated, active, resident, mapped;
};
void ra__stats_global(struct ra__global_stats *out);
/* Purges the arena of tag without the public checks. Returns true on failure. */
bool ra__stats_purge_arena(unsigned arena);

/* -- override.c: the malloc-family symbols -------------------------------- */
/* Warns once on stderr when "malloc" resolves to another library than this
 * one (link order), since plain malloc is then untagged. */
#ifdef RA_OVERRIDE
void ra__override_check(void);
#else
static inline void ra__override_check(void) {}
#endif

/* -- report.c: the table printed at exit (REGIONALLOC_STATS) ---------------- */
/* Prints one row per tag and one for untagged memory. Returns -1 on a write
 * error, 0 otherwise. May allocate (untagged). */
int ra__report_table(FILE *out);

#endif /* RA_INTERNAL_H */

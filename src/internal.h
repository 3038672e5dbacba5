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
/* The reservation: region i (tag i + 1) is [base + (i << shift), +1 << shift).
 * ra__region_count is the number of regions that have an arena (0 before the
 * reservation and in pass-through mode), so ra_tag_of() is RA_TAG_NONE for
 * every address outside a created tag's region. */
extern uintptr_t ra__region_base;
extern unsigned ra__region_shift;
extern _Atomic unsigned ra__region_count;
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

static inline ra_tag_t ra__tag_of_addr(const void *ptr)
{
    unsigned count = atomic_load_explicit(&ra__region_count,
                                          memory_order_acquire);
    uintptr_t idx = ((uintptr_t)ptr - ra__region_base) >> ra__region_shift;
    return idx < count ? (ra_tag_t)idx + 1 : RA_TAG_NONE;
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

/* -- alloc.c: allocation paths and per-thread caches ---------------------- */
/* Creates the thread-exit key; called once from ra__init. Aborts on failure
 * (no key means caches that are never released). */
void ra__alloc_init(void);
/* Fork handlers for the list of threads that hold caches. */
void ra__alloc_prefork(void);
void ra__alloc_postfork_parent(void);
void ra__alloc_postfork_child(void);
/* Allocates under the current tag; align is a power of two, checked by the
 * caller. NULL with errno ENOMEM on failure. */
void *ra__alloc_aligned(size_t align, size_t size);
/* Frees a block of size bytes allocated with alignment align (C23). */
void ra__free_aligned_sized(void *ptr, size_t align, size_t size);
/* Sums the per-thread counters of tag (live and exited threads). */
void ra__alloc_counts(ra_tag_t tag, uint64_t *nmalloc, uint64_t *ndalloc);
/* Flushes the calling thread's cache of tag, if it has one. */
void ra__alloc_flush_tag(ra_tag_t tag);

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

/* libregionalloc: per-tag memory accounting on top of jemalloc arenas. */
#ifndef REGIONALLOC_H
#define REGIONALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define RA_EXPORT __attribute__((visibility("default")))
#else
#define RA_EXPORT
#endif

/* A tag is a memory category. Ids are 1..ra_tag_count(); 0 means untagged. */
typedef unsigned ra_tag_t;
#define RA_TAG_NONE 0u
#define RA_TAG_NAME_MAX 63  /* bytes, excluding the NUL */
#define RA_TAG_STACK_MAX 64 /* push depth per thread */
#define RA_TAG_DEPTH_MAX 8  /* levels of a tag tree, the top level included */

/* -- tags ------------------------------------------------------------------ */

/* Returns the id of the tag called name, creating it (and its arena and
 * region) on first use. RA_TAG_NONE with errno EINVAL for a NULL, empty or
 * too long name, ENOSPC when the reservation has no region left, ENOMEM when
 * jemalloc cannot create the arena. */
RA_EXPORT ra_tag_t ra_tag_create(const char *name);

/* Tag trees. ra_tag_create_in makes name a child of parent (RA_TAG_NONE:
 * the top level, as ra_tag_create, which also finds a tag of that name at
 * any level). Names stay unique in the process: an existing name returns
 * its id when its parent is parent, else RA_TAG_NONE with errno EEXIST;
 * EINVAL for a bad name, a parent that is not live, or one at depth
 * RA_TAG_DEPTH_MAX; ENOMEM also when what the new tag's region holds (its
 * arena's metadata) does not fit an ancestor's hard limit. A hard limit
 * bounds the committed memory of the tag's whole subtree, exactly; purge,
 * reset and destroy act on the subtree (destroy: children first).
 * ra_tag_parent: RA_TAG_NONE with errno 0 at the top level, errno EINVAL
 * for a bad tag. */
RA_EXPORT ra_tag_t ra_tag_create_in(ra_tag_t parent, const char *name);
RA_EXPORT ra_tag_t ra_tag_parent(ra_tag_t tag);

/* Returns the id of an existing tag, or RA_TAG_NONE (errno ENOENT, or
 * EINVAL for a bad name). Never creates. */
RA_EXPORT ra_tag_t ra_tag_lookup(const char *name);

/* "untagged" for RA_TAG_NONE, the name for a live tag; NULL with errno
 * ENOENT for a destroyed one, EINVAL for an id never handed out. The string
 * is the library's: it changes if the tag is destroyed. */
RA_EXPORT const char *ra_tag_name(ra_tag_t tag);

/* The highest tag id handed out so far: ids are 1..ra_tag_count(), and
 * those of destroyed tags (not yet recycled) fail every call. */
RA_EXPORT unsigned ra_tag_count(void);

/* Frees every block of tag at once, whichever thread allocated it and
 * whatever the threads' caches hold: when it returns, each of the tag's
 * pointers is invalid (as after free), its allocated is 0, its nmalloc
 * equals its ndalloc and its unused pages are back with the OS; the tag
 * keeps its id and name. The caller promises that no thread allocates under
 * the tag or frees one of its blocks during the call, and that no block of
 * it is used afterwards. Hooks are not told of each block. 0, or -1 with
 * errno EINVAL (RA_TAG_NONE, never created, destroyed), EBUSY (the tag or
 * a descendant is on the calling thread's stack or is a thread's base
 * tag, or the tag is a tag by calling object, REGIONALLOC_TAG_BY=library;
 * nothing done) or ENOTSUP (pass-through mode). */
RA_EXPORT int ra_tag_reset(ra_tag_t tag);
/* ra_tag_reset, then the tag is forgotten: its name is free again
 * (ra_tag_lookup: ENOENT), and its id, region and arena serve a later
 * ra_tag_create (the calling thread's next, when it alone used the tag
 * and freed its blocks; else the id destroyed longest ago first), so tags
 * may be created and destroyed without bound; REGIONALLOC_MAX_TAGS bounds
 * those alive at once. Until its id is handed out again, every call on it
 * fails with EINVAL (ra_tag_name: NULL, ENOENT). 0, or -1 as
 * ra_tag_reset. */
RA_EXPORT int ra_tag_destroy(ra_tag_t tag);

/* A tag's budget, on the memory it holds from the OS (ra_tag_stats'
 * mapped: caches and fragmentation included), checked where memory is
 * committed, so that allocations pay nothing for it. */
typedef struct ra_tag_limit {
    size_t hard; /* 0: none. mapped never exceeds it: an allocation that
                    would need more fails (NULL, ENOMEM; new throws) after
                    one flush and purge, and succeeds again once memory is
                    freed */
    size_t soft; /* 0: none. on_soft runs once each time mapped rises past
                    it, on the thread whose allocation crossed it, after
                    that allocation and outside every lock; again after
                    mapped has fallen below it */
    void (*on_soft)(void *ctx, ra_tag_t tag, size_t mapped);
    void *ctx;
} ra_tag_limit_t;
/* Sets tag's budget (NULL clears it; a hard limit below what the tag holds
 * is allowed: new commits fail until it holds less). 0, or -1 with errno
 * EINVAL (RA_TAG_NONE, bad or destroyed tag, soft > hard when both are set)
 * or ENOTSUP (pass-through mode). on_soft may call ra_tag_purge, the
 * reports, allocate and free; not reset or destroy its tag. */
RA_EXPORT int ra_tag_set_limit(ra_tag_t tag, const ra_tag_limit_t *limit);
/* Copies tag's budget into *out: 0, or -1 with errno EINVAL (bad tag, NULL
 * out) or ENOTSUP. */
RA_EXPORT int ra_tag_get_limit(ra_tag_t tag, ra_tag_limit_t *out);

/* Pushes tag on this thread's stack: 0, or -1 with errno EINVAL (tag never
 * created) or EOVERFLOW (stack full; stack unchanged). Never allocates.
 * Inlined by the macro below; the function stays exported. */
RA_EXPORT int ra_tag_push(ra_tag_t tag);

/* Pops tag if it is on top of this thread's stack: 0, or -1 with errno
 * EINVAL (not on top, stack empty, or never created; stack unchanged).
 * Inlined by the macro below; the function stays exported. */
RA_EXPORT int ra_tag_pop(ra_tag_t tag);

/* The thread's tag stack and the number of tags, for the inline push and
 * pop only: not an API. items[0] is the thread's base tag (RA_TAG_NONE
 * unless REGIONALLOC_THREAD_TAGS gives it one), so the tag that
 * allocations go to is items[depth], cached in top. top and depth are
 * kept apart: side by side, a compiler merges their stores into one
 * vector store, which the next push or pop's load of depth waits on
 * (a push+pop took 3.4 ns that way, 0.8 ns apart). */
struct ra__tag_stack {
    ra_tag_t top;
    ra_tag_t items[RA_TAG_STACK_MAX + 1];
    unsigned depth;
};
RA_EXPORT extern __thread struct ra__tag_stack ra__tag_stack
    __attribute__((tls_model("initial-exec")));
RA_EXPORT extern unsigned ra__tags_published;
/* 1 for a live tag's id, 0 for a destroyed one (not yet recycled). */
RA_EXPORT extern unsigned char ra__tag_live[];

/* The common cases inline; every error goes to the function, which sets
 * errno. */
static inline int ra__tag_push_inline(ra_tag_t tag)
{
    struct ra__tag_stack *s = &ra__tag_stack;
    unsigned depth = s->depth;

    if (tag - 1u < __atomic_load_n(&ra__tags_published, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&ra__tag_live[tag], __ATOMIC_ACQUIRE) &&
        depth < RA_TAG_STACK_MAX) {
        s->items[depth + 1] = tag;
        s->depth = depth + 1;
        s->top = tag;
        return 0;
    }
    return (ra_tag_push)(tag);
}

static inline int ra__tag_pop_inline(ra_tag_t tag)
{
    struct ra__tag_stack *s = &ra__tag_stack;
    unsigned depth = s->depth;

    if (tag != RA_TAG_NONE && depth != 0 && s->items[depth] == tag) {
        s->depth = depth - 1;
        s->top = s->items[depth - 1];
        return 0;
    }
    return (ra_tag_pop)(tag);
}
#define ra_tag_push(tag) ra__tag_push_inline(tag)
#define ra_tag_pop(tag) ra__tag_pop_inline(tag)

/* Top of this thread's stack; when nothing is pushed, the thread's base
 * tag (RA_TAG_NONE unless REGIONALLOC_THREAD_TAGS gives it one). */
RA_EXPORT ra_tag_t ra_tag_current(void);

/* The tag that owns the block at ptr (any address inside a tagged region),
 * RA_TAG_NONE for untagged memory and NULL. O(1), no header, no lock: one
 * subtract, one shift, one compare, inlined by the macro below (the
 * function stays exported for callers that take its address or bind it
 * from another language). */
RA_EXPORT ra_tag_t ra_tag_of(const void *ptr);

/* The reservation's layout, for the inline ra_tag_of only: not an API.
 * count, the number of regions that have a tag, is published last. */
struct ra__layout {
    uintptr_t base;
    unsigned shift;
    unsigned count;
};
RA_EXPORT extern struct ra__layout ra__layout;

static inline ra_tag_t ra__tag_of_inline(const void *ptr)
{
    unsigned count = __atomic_load_n(&ra__layout.count, __ATOMIC_ACQUIRE);
    uintptr_t idx = ((uintptr_t)ptr - ra__layout.base) >> ra__layout.shift;
    return idx < count ? (ra_tag_t)idx + 1 : RA_TAG_NONE;
}
#define ra_tag_of(ptr) ra__tag_of_inline(ptr)

/* RA_TAG_SCOPE(tag): pushes tag now and pops it when the enclosing block is
 * left (GCC/Clang cleanup attribute). If the push fails (errno set), nothing
 * is popped at the end. The two helpers are its implementation only. */
RA_EXPORT ra_tag_t ra__tag_scope_begin(ra_tag_t tag);
RA_EXPORT void ra__tag_scope_end(const ra_tag_t *pushed);
#define RA__SCOPE_CAT2(a, b) a##b
#define RA__SCOPE_CAT(a, b) RA__SCOPE_CAT2(a, b)
#define RA_TAG_SCOPE(tag)                                                  \
    ra_tag_t RA__SCOPE_CAT(ra__tag_scope_, __LINE__)                       \
        __attribute__((cleanup(ra__tag_scope_end), unused)) =              \
            ra__tag_scope_begin(tag)

/* -- allocation (current tag) ------------------------------------------------
 * Same semantics as the glibc functions of the same name. Allocations belong
 * to the tag on top of the calling thread's stack; failure returns NULL with
 * errno ENOMEM and never aborts. */
RA_EXPORT void *ra_malloc(size_t size);
RA_EXPORT void *ra_calloc(size_t n, size_t size);
/* Keeps ptr's tag whatever is on the stack; ra_realloc(NULL, n) uses the
 * current tag; ra_realloc(p, 0) frees p and returns NULL. */
RA_EXPORT void *ra_realloc(void *ptr, size_t size);
RA_EXPORT void ra_free(void *ptr);
/* size is the size requested when ptr was allocated (as C23's free_sized);
 * the library does not rely on it: a wrong one frees as ra_free does. */
RA_EXPORT void ra_free_sized(void *ptr, size_t size);
RA_EXPORT void *ra_aligned_alloc(size_t align, size_t size);
/* Returns 0, EINVAL (align not a power of two multiple of sizeof(void *))
 * or ENOMEM (errno is then ENOMEM too, as glibc sets it); *out is written
 * only on success. */
RA_EXPORT int ra_posix_memalign(void **out, size_t align, size_t size);
RA_EXPORT size_t ra_malloc_usable_size(const void *ptr);
/* Allocates under tag without touching the stack; NULL with errno EINVAL for
 * a tag never created. */
RA_EXPORT void *ra_malloc_tag(ra_tag_t tag, size_t size);

/* -- usage, purge ------------------------------------------------------------ */
/* Each figure's source and precision: regionalloc(3), "Figures". */
typedef struct ra_tag_stats {
    size_t allocated; /* bytes in live blocks (usable sizes), exact */
    size_t active;    /* bytes in pages holding live or cached blocks */
    size_t resident;  /* jemalloc's resident estimate, read live */
    size_t mapped;    /* bytes mapped (committed) in the region */
    size_t dirty;     /* unused pages not yet returned to the OS */
    size_t muzzy;
    size_t retained;  /* virtual memory kept for reuse, not resident */
    size_t reserved;  /* the region's size */
    uint64_t nmalloc; /* allocations ever made under the tag */
    uint64_t ndalloc; /* frees ever made of the tag's blocks */
    size_t peak_mapped; /* high-water mark of the region's committed bytes
                           (tag 0: 0, the untagged arenas have no region) */
} ra_tag_stats_t;

/* Fills *out for tag (RA_TAG_NONE: all untagged arenas together) from live
 * figures, in time that does not grow with the number of tags: no refresh
 * of jemalloc's statistics (the untagged row's figures but active are
 * jemalloc's as of the last refresh). 0, or -1 with errno EINVAL (bad tag
 * or NULL out) or ENOTSUP (pass-through mode). */
RA_EXPORT int ra_tag_stats(ra_tag_t tag, ra_tag_stats_t *out);
/* Refreshes jemalloc's statistics once (its "epoch", which merges every
 * arena of the process: milliseconds with thousands of tags): what
 * jemalloc's own figures need (stats.* through mallctl, the untagged row).
 * Nothing periodic in the library calls it. 0, or -1 with errno ENOTSUP
 * (pass-through mode). */
RA_EXPORT int ra_stats_refresh(void);
/* The same summed over tag and its descendants (peak_mapped: the subtree's
 * own high-water mark, not a sum of peaks): 0, or -1 with errno EINVAL
 * (bad tag, RA_TAG_NONE or NULL out) or ENOTSUP. */
RA_EXPORT int ra_tag_stats_tree(ra_tag_t tag, ra_tag_stats_t *out);
/* The figures the library keeps itself, exact at any moment and cheap (no
 * call into jemalloc): what a per-request summary needs. */
typedef struct ra_tag_usage {
    size_t mapped;      /* bytes committed in the tag's region now */
    size_t peak_mapped; /* their high-water mark since the tag's creation */
    uint64_t nmalloc;   /* allocations made under the tag */
    uint64_t ndalloc;   /* frees of the tag's blocks */
    size_t allocated;   /* bytes in live blocks (usable sizes), as in
                           ra_tag_stats */
} ra_tag_usage_t;

/* Fills *out for tag (not RA_TAG_NONE): 0, or -1 with errno EINVAL (bad
 * tag or NULL out) or ENOTSUP (pass-through mode). Takes no refresh and no
 * lock but the one that lists the tag's threads. */
RA_EXPORT int ra_tag_usage(ra_tag_t tag, ra_tag_usage_t *out);
/* -- a tag's pool of arenas ------------------------------------------------
 * A tag is served by up to REGIONALLOC_TAG_ARENAS jemalloc arenas, all
 * carving from its one region: a thread that becomes busy under a tag
 * (some 8,192 blocks) whose arenas serve REGIONALLOC_THREADS_PER_ARENA
 * busy threads each makes the pool grow by one. Every figure, purge,
 * reset and budget covers the pool.
 * ra_tag_set_arenas bounds the arenas new threads of the tag are spread
 * over (1: one arena; above 64: 64) until the tag is destroyed: 0, or -1
 * with errno EINVAL (bad tag, max 0) or ENOTSUP. ra_tag_arenas writes the
 * jemalloc arena indices of the pool, up to cap of them, into out, and
 * returns how many the pool has (stats.arenas.<i> in jemalloc's own
 * statistics), or -1 with errno EINVAL (bad tag, out NULL with cap > 0) or
 * ENOTSUP. */
RA_EXPORT int ra_tag_set_arenas(ra_tag_t tag, unsigned max);
RA_EXPORT int ra_tag_arenas(ra_tag_t tag, unsigned *out, unsigned cap);

/* Returns the tag's unused pages to the OS: 0 or -1 (EINVAL, ENOTSUP). */
RA_EXPORT int ra_tag_purge(ra_tag_t tag);
/* Purges every tag and the untagged arenas: 0 or -1 (ENOTSUP). */
RA_EXPORT int ra_purge_all(void);
/* Flushes the calling thread's caches, for every tag and untagged. */
RA_EXPORT void ra_thread_flush(void);

/* -- memory pressure -----------------------------------------------------------
 * The process's resident memory held under a limit: ra_memory_limit_set's,
 * else REGIONALLOC_MEMORY_LIMIT's (a size, or a percentage of the cgroup's
 * limit), else the cgroup v2 limit the process runs under (memory.high if
 * set, else memory.max), else none (nothing runs). A thread of the
 * library's reads the resident set; at "high" (90% of the limit) it gives
 * back free pages, the tags of lowest priority first, then the untagged
 * arenas' and the caches', then calls the pressure callbacks once per
 * rise; while still above high, commits (allocations that need new
 * memory) fail (NULL, ENOMEM) in tags of negative priority; at the limit,
 * in every tag. Refusals count in the tag's limit_failures; untagged
 * allocations are never refused. */
typedef enum {
    RA_PRESSURE_NONE,
    RA_PRESSURE_HIGH,
    RA_PRESSURE_LIMIT
} ra_pressure_t;
/* Sets the limit in bytes (0: none, the watching stops; at or above 2^56,
 * the address space, kept as given but none in effect: nothing watched,
 * nothing refused): 0, or -1 with errno EAGAIN (the library's thread could
 * not be started; nothing changed) or ENOTSUP (pass-through mode). */
RA_EXPORT int ra_memory_limit_set(size_t bytes);
/* The limit as it was given, from wherever it came (0: none). */
RA_EXPORT size_t ra_memory_limit(void);
/* Lower gives way first; default 0; negative: refused at high. Kept until
 * the tag is destroyed. 0, or -1 with errno EINVAL (bad tag) or ENOTSUP. */
RA_EXPORT int ra_tag_set_priority(ra_tag_t tag, int priority);
/* Copies tag's priority into *out: 0, or -1 with errno EINVAL (bad tag,
 * NULL out) or ENOTSUP. */
RA_EXPORT int ra_tag_get_priority(ra_tag_t tag, int *out);
/* Adds a callback, run on the library's thread outside every lock of
 * the library, once each time the pressure rises to a level (current: the
 * resident bytes then). It may allocate, free and purge. 0, or -1 with
 * errno EINVAL (NULL cb) or ENOSPC (16 callbacks already). */
RA_EXPORT int ra_pressure_callback(void (*cb)(void *ctx, ra_pressure_t level,
                                              size_t current, size_t limit),
                                   void *ctx);
/* Resident bytes of the tag's region as the kernel sees them (mincore over
 * the part of the region jemalloc has used), to reconcile with jemalloc's
 * resident estimate. 0, or -1 with errno EINVAL (bad tag, tag 0 or NULL
 * bytes) or ENOTSUP (pass-through mode). */
RA_EXPORT int ra_tag_rss(ra_tag_t tag, size_t *bytes);

/* -- hooks -------------------------------------------------------------------
 * Callbacks on every allocation and free the library routes (the malloc
 * family, jemalloc's mallocx family, operator new/delete, ra_*), untagged
 * ones included (tag 0). size is the block's usable size; on_free runs
 * before the block can be reused. A realloc that succeeds is reported as
 * the free of the old block and the allocation of the new one, with each
 * block's tag. What a callback itself allocates or frees is allocated and
 * tagged as usual but not reported, so a callback may call malloc, printf
 * or take a lock; the library never runs a callback while it holds a lock
 * of its own, so a callback may call the library too. The library's own
 * memory is never reported. */
typedef struct ra_hooks {
    void (*on_alloc)(void *ctx, ra_tag_t tag, void *ptr, size_t size);
    void (*on_free)(void *ctx, ra_tag_t tag, void *ptr, size_t size);
    void *ctx;
} ra_hooks_t;

/* Installs a copy of *hooks (16 at most at once). Returns its id (>= 0), or
 * -1 with errno EINVAL (NULL, or no callback) or ENOSPC (16 installed).
 * Thread-safe against concurrent allocation. */
RA_EXPORT int ra_hooks_install(const ra_hooks_t *hooks);
/* Removes hook id: when it returns, no thread runs or will run its
 * callbacks (a callback may remove its own hook). 0, or -1 with errno
 * EINVAL (no such hook installed). */
RA_EXPORT int ra_hooks_remove(int id);

/* -- sampled allocation-site profiler ------------------------------------------
 * Samples tagged allocations (not untagged ones) by bytes: on average one
 * sample every mean_interval_bytes allocated, each thread counting down its
 * own geometric (Poisson) intervals, so small and large allocations are
 * sampled in proportion to their bytes. A sampled block is a real block of
 * its tag (at least 4 KiB of its region) whose page the library marks, so
 * its free is recognized in O(1) with no header and no lookup for the other
 * blocks. Per sample: the call stack, the tag and the size, aggregated by
 * (tag, stack) into live and cumulative objects and bytes, each sample
 * scaled by 1 / (1 - exp(-size / interval)) so the estimates are unbiased.
 * A block that is reallocated leaves the profile. */
#define RA_TAG_ALL ((ra_tag_t)-1)
typedef enum {
    RA_PROF_TREE,   /* text tree: "All (bytes, #objects)", callers below */
    RA_PROF_FOLDED, /* "tag:<name>;root;...;leaf <bytes>" (flamegraphs) */
    RA_PROF_PPROF,  /* gzip-compressed profile.proto (go tool pprof) */
    RA_PROF_HEAP_V2 /* gperftools/jemalloc heap profile text (jeprof) */
} ra_prof_format_t;

/* Starts sampling (1 samples every allocation), or changes the interval:
 * at once for the calling thread, for the others when the countdown they
 * drew for the old interval runs out. The samples already taken are kept. 0, or -1 with errno EINVAL (interval
 * 0) or ENOTSUP (pass-through mode). */
RA_EXPORT int ra_prof_start(size_t mean_interval_bytes);
/* Stops taking samples; the profile is kept, and frees of sampled blocks
 * still leave it. 0, or -1 with errno EINVAL (not started). */
RA_EXPORT int ra_prof_stop(void);
/* Writes the profile of tag (RA_TAG_ALL: every tag) in fmt: live objects
 * and bytes, and cumulative ones where the format has room. 0, or -1 with
 * errno EINVAL (NULL out, bad format, tag never created), ENOTSUP (no
 * profile: never started), ENOMEM or EIO (write error). */
RA_EXPORT int ra_prof_dump(FILE *out, ra_prof_format_t fmt, ra_tag_t tag);

/* -- HTTP endpoints ------------------------------------------------------------
 * A background thread serves, on addr ("HOST:PORT", "[V6]:PORT"; port 0:
 * any free port): GET /metrics[?top=N] (ra_report_top, Prometheus), GET
 * /debug/pprof/heap[?tag=NAME|?tree=NAME] (ra_prof_dump, pprof; also at
 * /debug/pprof/allocs, as Go's net/http/pprof), GET
 * /debug/regionalloc/report and /checkpoints [?format=text|json|prometheus],
 * GET /debug/regionalloc/ (a page of the tags, HTML, self-contained),
 * and with REGIONALLOC_HTTP_WRITE=1, POST /debug/regionalloc/purge?tag=NAME.
 * Loopback addresses only, unless REGIONALLOC_HTTP_ALLOW_REMOTE=1. Returns
 * the port it listens on, or -1 with errno EINVAL (malformed address), EPERM
 * (not loopback), EBUSY (already serving), ENOTSUP (pass-through mode, or
 * built without libmicrohttpd), or what bind(2) says (EADDRINUSE...). */
RA_EXPORT int ra_http_start(const char *addr);
/* Stops the server and closes its socket: 0, or -1 with errno EINVAL (not
 * serving), EDEADLK (called from the server's thread), ENOTSUP. */
RA_EXPORT int ra_http_stop(void);

/* -- reports and checkpoints ------------------------------------------------ */
typedef enum {
    RA_FORMAT_TEXT,      /* aligned table, human units */
    RA_FORMAT_JSON,      /* one document, bytes and nanoseconds (doc/json.md) */
    RA_FORMAT_PROMETHEUS /* text exposition format */
} ra_format_t;
/* Or'ed into a report's format: jemalloc's statistics are refreshed once
 * (ra_stats_refresh) and the tags' active, resident, mapped, dirty, muzzy
 * and retained are jemalloc's own figures rather than the live ones. */
#define RA_REPORT_DETAIL 0x100

/* Writes every tag's usage now, from the live figures (no refresh of
 * jemalloc's statistics unless fmt has RA_REPORT_DETAIL): text, a
 * table with a row per tag (allocated, active, resident, kernel_rss from
 * ra_tag_rss, mapped, peak_mapped, dirty, nmalloc, ndalloc) and the rows
 * "untagged" and "total"; JSON, one document (doc/json.md); Prometheus,
 * regionalloc_tag_*{tag="..."}, regionalloc_untagged_* and process-wide
 * gauges. The text lists the 50 largest tags and rolls the others up
 * (ra_report_top(out, fmt, 50)); JSON and Prometheus list every tag. Tag
 * names are escaped (regionalloc(3)). The report's own memory is
 * untagged. 0, or -1 with errno EINVAL (NULL out, bad format), ENOTSUP
 * (pass-through mode), ENOMEM or EIO (write error). */
RA_EXPORT int ra_report(FILE *out, ra_format_t fmt);
/* ra_report_top's top: list every tag, roll nothing up. */
#define RA_REPORT_ALL_TAGS ((size_t)-1)
/* ra_report listing the top tags whose subtrees hold the most resident
 * bytes (a tag without children: its own), each tag's parent among them,
 * and the others rolled up under the nearest listed tag above them: text,
 * a row "(2,950 more tags)" or "(412 more under sessions)"; JSON, "rest";
 * Prometheus, a series tag="(rest)" in each family that adds up
 * (regionalloc(3), "Many tags"). 0 lists none; RA_REPORT_ALL_TAGS every
 * one, as JSON and Prometheus do by default. 0 or -1 as ra_report. */
RA_EXPORT int ra_report_top(FILE *out, ra_format_t fmt, size_t top);
/* Records a snapshot of every tag and of the process under label (NULL or
 * "" allowed; cut to 63 bytes at a character boundary): time since the
 * library was loaded, per-tag allocated, their sum, the process's totals
 * (the sum of the rows of ra_report), RSS
 * and the peak RSS within the phase, which it then resets through
 * /proc/self/clear_refs (where the kernel refuses, the peak since the start).
 * No statistics refresh. Its own memory is untagged and bounded: the last
 * 1024 checkpoints are kept. Thread-safe. 0 or -1 with errno ENOTSUP
 * (pass-through mode) or ENOMEM. */
RA_EXPORT int ra_checkpoint(const char *label);
/* Writes the kept checkpoints (the last 1024), oldest first. Text: the phase
 * table, one row per checkpoint (phase, elapsed, allocated of each tag, or
 * of the 8 largest and "other" past 8 tags, tagged, jemalloc's allocated,
 * active, resident and mapped, rss, peak_rss, the label), after a line
 * saying how many earlier checkpoints were dropped, if any. JSON: one
 * document with every kept checkpoint and every tag, in bytes and
 * nanoseconds (doc/json.md). Prometheus: one series per kept checkpoint and
 * metric, labelled seq="<n>" and checkpoint="<label>" (and tag="<name>"),
 * plus the counters regionalloc_checkpoints_recorded_total and
 * _dropped_total. It writes a copy of the ring: no lock is held while out
 * is written. 0 or -1 as ra_report. */
RA_EXPORT int ra_checkpoint_report(FILE *out, ra_format_t fmt);

/* 1 when tagging is on, 0 in pass-through mode (REGIONALLOC=0 or no
 * reservation could be made). */
RA_EXPORT int ra_enabled(void);

#ifdef __cplusplus
}
#endif

#endif /* REGIONALLOC_H */

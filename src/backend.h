/* Floor: backend. jemalloc as this library uses it: its header, its own
 * allocation functions reached through pointers (the mallocx family, on
 * every path), and backend.c's calls of everything else (mallctl: arenas,
 * thread caches, statistics, size classes, options). Only backend.c calls
 * mallctl; jemalloc's non-standard names are unusable elsewhere, because
 * the library exports functions of those names itself. */
#ifndef RA_BACKEND_H
#define RA_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jemalloc/jemalloc.h>

#include "types.h"

/* -- jemalloc_lookup.c: jemalloc's own allocation functions ---------------
 * jemalloc's own definitions, found in its library at the first call of any
 * of them (jemalloc_lookup.c): never NULL. A plain call of mallocx() here
 * would reach the library's exported mallocx, which routes by tag, and
 * recurse; so would malloc(). */
struct ra__jemalloc {
    _Atomic(void *(*)(size_t)) malloc_fn;
    _Atomic(void (*)(void *)) free_fn;
    _Atomic(void *(*)(size_t, size_t)) calloc_fn;
    _Atomic(void *(*)(void *, size_t)) realloc_fn;
    _Atomic(void *(*)(size_t, size_t)) aligned_alloc_fn;
    _Atomic(size_t (*)(void *)) usable_size_fn;
    _Atomic(void *(*)(size_t, int)) mallocx_fn;
    _Atomic(void *(*)(void *, size_t, int)) rallocx_fn;
    _Atomic(size_t (*)(void *, size_t, size_t, int)) xallocx_fn;
    _Atomic(size_t (*)(const void *, int)) sallocx_fn;
    _Atomic(void (*)(void *, int)) dallocx_fn;
    _Atomic(void (*)(void *, size_t, int)) sdallocx_fn;
    _Atomic(size_t (*)(size_t, int)) nallocx_fn;
};
/* Hidden: reached PC-relative, so a call through it is one indirect jump. */
extern struct ra__jemalloc ra__je __attribute__((visibility("hidden")));

#define RA__JE(fn) atomic_load_explicit(&ra__je.fn##_fn, memory_order_relaxed)

/* jemalloc's malloc family: what untagged blocks live and die through (a
 * tool that replaces jemalloc's malloc, as valgrind does, then sees all of
 * them). */
static inline void *ra__je_malloc(size_t size)
{
    return RA__JE(malloc)(size);
}

static inline void ra__je_free(void *ptr)
{
    RA__JE(free)(ptr);
}

static inline void *ra__je_calloc(size_t n, size_t size)
{
    return RA__JE(calloc)(n, size);
}

static inline void *ra__je_realloc(void *ptr, size_t size)
{
    return RA__JE(realloc)(ptr, size);
}

static inline void *ra__je_aligned_alloc(size_t align, size_t size)
{
    return RA__JE(aligned_alloc)(align, size);
}

static inline size_t ra__je_usable_size(void *ptr)
{
    return RA__JE(usable_size)(ptr);
}

/* jemalloc's non-standard API: tagged blocks, and the library's own
 * memory. */
static inline void *ra__je_mallocx(size_t size, int flags)
{
    return RA__JE(mallocx)(size, flags);
}

static inline void *ra__je_rallocx(void *ptr, size_t size, int flags)
{
    return RA__JE(rallocx)(ptr, size, flags);
}

static inline size_t ra__je_xallocx(void *ptr, size_t size, size_t extra,
                                    int flags)
{
    return RA__JE(xallocx)(ptr, size, extra, flags);
}

static inline size_t ra__je_sallocx(const void *ptr, int flags)
{
    return RA__JE(sallocx)(ptr, flags);
}

static inline void ra__je_dallocx(void *ptr, int flags)
{
    RA__JE(dallocx)(ptr, flags);
}

static inline void ra__je_sdallocx(void *ptr, size_t size, int flags)
{
    RA__JE(sdallocx)(ptr, size, flags);
}

static inline size_t ra__je_nallocx(size_t size, int flags)
{
    return RA__JE(nallocx)(size, flags);
}

/* MALLOCX_ARENA shifts a signed int, which overflows for arena indices from
 * 2047 up; the same bits, computed unsigned. */
#define RA__ARENA_FLAGS(a) ((int)(((unsigned)(a) + 1u) << 20))
/* The bits of a flags word that hold MALLOCX_LG_ALIGN. */
#define RA__LG_ALIGN_BITS 0x3f
/* The bits of a flags word that name a thread cache or an arena. */
#define RA__CACHE_ARENA_BITS (~0xff)
/* The bits of a flags word that describe the block (its alignment, its
 * zeroing), not where it goes: all a tagged block keeps. */
#define RA__BLOCK_BITS (RA__LG_ALIGN_BITS | MALLOCX_ZERO)
/* Whether a flags word names a thread cache, explicit or none
 * (MALLOCX_TCACHE_NONE): never the automatic one. */
#define RA__NAMES_TCACHE(flags) (((unsigned)(flags) & 0xfff00u) != 0)
/* The flags that free through explicit tcache id, or past every tcache
 * for UINT16_MAX (types.h's RA__NO_TCACHE). */
static inline int ra__be_tcache_flags(unsigned id)
{
    return id == UINT16_MAX ? MALLOCX_TCACHE_NONE : MALLOCX_TCACHE(id);
}
/* The arena a flags word names, or UINT32_MAX for none. */
#define RA__FLAGS_ARENA(flags) (((unsigned)(flags) >> 20) - 1u)

/* -- jemalloc_lookup.c: which code is jemalloc's --------------------------- */
/* Whether addr lies in jemalloc's library (the object its functions were
 * found in): code of jemalloc's, such as the caller of a function the
 * library stands in front of. Not fast: dladdr. */
bool ra__jemalloc_owns(const void *addr);
/* jemalloc's code, its object's executable segment, into [*start, *end).
 * Returns true when jemalloc's object is not found (linked statically). */
bool ra__jemalloc_code(uintptr_t *start, uintptr_t *end);

/* -- backend.c: jemalloc's control interface, as the library uses it -------
 * Each function is one mallctl (or a few), and tells failure as jemalloc
 * does not: by its return, never by aborting. */

/* A boolean option of jemalloc's (opt.retain, opt.hpa, opt.tcache): false
 * when jemalloc has no such option. */
bool ra__be_option(const char *name);
/* A new arena whose extents come from hooks (which must outlive it), grown
 * by steps of at most grow_limit when jemalloc retains (opt.retain).
 * Returns its index, or -1 with errno what jemalloc said: EAGAIN both when
 * it has no arena index left and when it could not make the arena's
 * metadata. */
int ra__be_arena_create(extent_hooks_t *hooks, size_t grow_limit);
/* Every arena at once, for ra__be_arena_purge. */
#define RA__BE_ALL_ARENAS 4096u
/* arena.<i>.purge: its unused pages back to the OS. arena.<i>.reset: every
 * allocation of the arena discarded; every thread cache that touched it
 * must have been flushed (jemalloc facts, doc/design.md). Return true on
 * failure. */
bool ra__be_arena_purge(unsigned arena);
bool ra__be_arena_reset(unsigned arena);
/* arena.<i>.decay: the pages that have been unused for longer than the
 * decay time (opt.dirty_decay_ms) go back to the OS. jemalloc does it as
 * an arena is used; an arena nobody uses needs the call. */
bool ra__be_arena_decay(unsigned arena);
/* The number of arena indices in use (arenas.narenas). */
unsigned ra__be_arena_count(void);
/* jemalloc's page size. */
size_t ra__be_page(void);
/* Where jemalloc counts the calling thread's allocated and freed bytes
 * (thread.allocatedp, thread.deallocatedp): they stay valid while the
 * thread lives. Returns true when jemalloc has no such counters. */
bool ra__be_thread_counters(const uint64_t **allocated,
                            const uint64_t **deallocated);

/* A mallctl name with an arena's index in one place (at: its position in
 * the MIB; the name says 0 there), translated into its MIB at the first
 * call and then called by MIB: ra__be_by_arena returns mallctl's result.
 * backend.c reads a few names without an index so too (at unused). */
#define RA__BE_NAME_PARTS 6
struct ra__be_name {
    const char *name;
    unsigned at;
    /* Atomic: racing first callers store the same values. */
    _Atomic size_t mib[RA__BE_NAME_PARTS];
    _Atomic size_t len;
    atomic_bool ready;
};
int ra__be_by_arena(struct ra__be_name *n, unsigned arena, void *out,
                    size_t *outlen, void *in, size_t inlen);

/* -- backend_stats.c: jemalloc's statistics ---------------------------------
 * Refreshes jemalloc's statistics (the "epoch"): it merges every arena of
 * the process (tens of milliseconds with thousands), so only what asks for
 * jemalloc's own figures calls it (ra_stats_refresh, detail reports, the
 * first read of a new arena's page count). */
void ra__be_refresh(void);
/* One arena's figures as of the last refresh, in bytes (pages already
 * multiplied). metadata_resident: what of resident is its metadata's,
 * which the call also keeps for ra__be_arena_metadata_resident. */
struct ra__be_arena_stats {
    size_t allocated, active, resident, mapped, retained, dirty, muzzy;
    size_t metadata_resident;
    uint64_t nmalloc, ndalloc;
};
/* Returns true when the arena has no statistics (never used, or
 * destroyed): then *out is zero. */
bool ra__be_arena_stats(unsigned arena, struct ra__be_arena_stats *out);
/* jemalloc's allocated (blocks in its tcaches and the library's caches
 * included) and mapped bytes of one arena, as of the last refresh. */
size_t ra__be_arena_allocated(unsigned arena);
size_t ra__be_arena_mapped(unsigned arena);
/* The bytes of the arena's pages that hold live blocks (or blocks in
 * caches), now: jemalloc's live page count, whose address is looked up
 * once per arena. jemalloc's control interface knows an arena created
 * since its last refresh only after one more: the first read of such an
 * arena takes one refresh (once per arena in the process's life, since
 * arenas are never destroyed). 0 when jemalloc has no count for it. */
size_t ra__be_arena_active(unsigned arena);
/* The arena's metadata pages resident at the last refresh read of it (by
 * ra__be_arena_stats, or the first ra__be_arena_active): only grows. */
size_t ra__be_arena_metadata_resident(unsigned arena);

/* Explicit thread caches (at most 4093 per process). create: true on
 * failure (out of ids). flush: empties it (jemalloc 5.3 destroys it and
 * builds it again at its next use). The calling thread's automatic cache
 * is flushed by ra__be_flush_thread_cache. */
bool ra__be_tcache_create(unsigned *id);
void ra__be_tcache_flush(unsigned id);
void ra__be_tcache_destroy(unsigned id);
void ra__be_flush_thread_cache(void);

#define RA__MAX_BINS 64           /* jemalloc 5.3 has 36 small bins */
#define RA__SIZE_BIN_ENTRIES 4097 /* small sizes / 8, up to 32 KiB */

/* -- mappings.c: jemalloc's memory outside the regions --------------------- */
/* The process mapped [addr, addr + len) anonymous, from code at caller
 * (fixed: MAP_FIXED, which may map over what is noted: jemalloc does so to
 * decommit where the kernel does not overcommit, and the range keeps its
 * kind); unmapped [addr, addr + len) (override_mmap.c). No allocation, no
 * lock but the table's own, a leaf: jemalloc calls them under its locks. */
void ra__mappings_noted(void *addr, size_t len, bool fixed,
                        const void *caller);
void ra__mappings_forget(void *addr, size_t len);
/* jemalloc's code located (the process's start): mappings noted before
 * are sorted out by who made them. */
void ra__mappings_start(void);
/* jemalloc's mappings into out, up to max; how many. *version moves
 * whenever the table has changed. */
unsigned ra__mappings_copy(struct ra__range *out, unsigned max,
                           uint64_t *version);
/* Whether mapping m (one of all[0, n), the copy it came from) is one of
 * jemalloc's base blocks, its metadata, rather than an arena's extents:
 * its first bytes are a base block's head (jemalloc 5's layout). Reads
 * m's first page (a page never written maps the zero page). */
bool ra__mappings_is_base(const struct ra__range *m,
                          const struct ra__range *all, unsigned n);
/* Whether jemalloc's mappings are being noted (its code located). */
bool ra__mappings_known(void);
void ra__mappings_postfork_child(void);

/* Reads what the library needs of jemalloc's configuration, once, at the
 * library's first use (first_use.c), before any tag exists. */
void ra__be_start(void);
/* false under MALLOC_CONF=tcache:false: then no (thread, tag) pair caches,
 * neither in a front cache nor in a tcache of its own. */
extern bool ra__be_caches;
/* opt.oversize_threshold (8 MiB by default; SIZE_MAX when 0 turns it off):
 * what jemalloc gives back to the OS as soon as it is freed, untagged.
 * Tagged, the size from which a freed block is given back at once and
 * past which a destroyed tag's slot keeps no pages (doc/design.md). */
extern size_t ra__be_oversize;
/* jemalloc's small size classes: the bin of a size s <= ra__small_max is
 * ra__size_bin[(s + 7) >> 3], of size ra__bin_size[bin], for ra__nbins
 * bins. ra__small_max is 0 when the classes could not be read or caches
 * are off (no front caches then). */
extern unsigned ra__small_max;
extern unsigned ra__nbins;
extern uint8_t ra__size_bin[RA__SIZE_BIN_ENTRIES];
extern size_t ra__bin_size[RA__MAX_BINS];

/* The bin of a size of at most ra__small_max, and that bin's size. */
static inline unsigned ra__small_bin(size_t size)
{
    return ra__size_bin[(size + 7) >> 3];
}

static inline size_t ra__small_class(size_t size)
{
    return ra__bin_size[ra__small_bin(size)];
}

/* The names the library exports itself (override_jemalloc.c), or the
 * --disable-override build's fallback (jemalloc_lookup.c): nowhere else.
 * mallctl: backend.c's and backend_stats.c's alone. */
#ifndef RA__JEMALLOC_NAMES_ALLOWED
#pragma GCC poison mallocx rallocx xallocx sallocx dallocx sdallocx nallocx
#endif
#ifndef RA__MALLCTL_ALLOWED
#pragma GCC poison mallctl mallctlnametomib mallctlbymib
#endif

#endif /* RA_BACKEND_H */

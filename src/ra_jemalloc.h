/* jemalloc, as the library's files that talk to it see it: its header, its
 * own functions reached through pointers, and its non-standard names made
 * unusable, because the library exports functions of those names itself. */
#ifndef RA_JEMALLOC_H
#define RA_JEMALLOC_H

#include <stdatomic.h>
#include <stddef.h>

#include <jemalloc/jemalloc.h>

/* jemalloc's own definitions, found in its library at the first call of any
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
/* The arena a flags word names, or UINT32_MAX for none. */
#define RA__FLAGS_ARENA(flags) (((unsigned)(flags) >> 20) - 1u)

/* The names the library exports itself (override_jemalloc.c), or the
 * --disable-override build's fallback (jemalloc_lookup.c): nowhere else. */
#ifndef RA__JEMALLOC_NAMES_ALLOWED
#pragma GCC poison mallocx rallocx xallocx sallocx dallocx sdallocx nallocx
#endif

#endif /* RA_JEMALLOC_H */

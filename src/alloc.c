/* Allocation paths: ra_malloc and friends, untagged through jemalloc's own
 * fast path, tagged through the thread's front cache for the tag. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jemalloc/jemalloc.h>

#include "internal.h"

static inline size_t at_least_one(size_t size)
{
    return size == 0 ? 1 : size;
}

static void *fail_enomem(void)
{
    errno = ENOMEM;
    return NULL;
}

static void *alloc_mallocx(size_t size, int flags)
{
    void *p;

    if (RA__UNLIKELY(size > PTRDIFF_MAX))
        return fail_enomem();
    p = mallocx(at_least_one(size), flags);
    return RA__LIKELY(p != NULL) ? p : fail_enomem();
}

/* Until jemalloc's own entry points are found (below), and in case they are
 * not: the same semantics through the non-standard API. */
static void *untagged_malloc_fallback(size_t size)
{
    return alloc_mallocx(size, 0);
}

static void untagged_free_fallback(void *ptr)
{
    if (ptr != NULL)
        dallocx(ptr, 0);
}

static void *untagged_calloc_fallback(size_t n, size_t size)
{
    return alloc_mallocx(n * size, MALLOCX_ZERO); /* n == 1 here */
}

static void *untagged_realloc_fallback(void *ptr, size_t size)
{
    void *p = rallocx(ptr, size, 0);
    return p != NULL ? p : fail_enomem();
}

static void *untagged_aligned_fallback(size_t align, size_t size)
{
    return alloc_mallocx(size, MALLOCX_ALIGN(align));
}

static size_t untagged_usable_fallback(void *ptr)
{
    return sallocx(ptr, 0);
}

/* Untagged blocks live and die through jemalloc's own malloc family: its
 * inlined fast path is about twice as fast as mallocx/dallocx, and a tool
 * that replaces jemalloc's malloc family (valgrind does) then sees every
 * untagged block come and go through its own functions. Reached through a
 * handle to the jemalloc library itself (the plain names are ours), once
 * the library's constructor has run; never NULL, so the untagged malloc
 * and free are a load and a jump. */
typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*aligned_fn)(size_t, size_t);
typedef size_t (*usable_fn)(void *);
static _Atomic(malloc_fn) jemalloc_malloc = untagged_malloc_fallback;
static _Atomic(free_fn) jemalloc_free = untagged_free_fallback;
static _Atomic(calloc_fn) jemalloc_calloc = untagged_calloc_fallback;
static _Atomic(realloc_fn) jemalloc_realloc = untagged_realloc_fallback;
static _Atomic(aligned_fn) jemalloc_aligned_alloc = untagged_aligned_fallback;
static _Atomic(usable_fn) jemalloc_usable_size = untagged_usable_fallback;

#define UNTAGGED(fn) atomic_load_explicit(&jemalloc_##fn, memory_order_relaxed)

__attribute__((constructor)) static void find_jemalloc_fast_path(void)
{
    Dl_info info;
    void *lib;
    void *m, *f, *c, *r, *a, *u;

    if (dladdr((void *)mallocx, &info) == 0 || info.dli_fname == NULL)
        return;
    lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL)
        return;
    /* dlsym on jemalloc's own handle finds its definitions, never ours. The
     * handle stays open: the functions must outlive this constructor. All
     * or none: the family must be one allocator's. */
    m = dlsym(lib, "malloc");
    f = dlsym(lib, "free");
    c = dlsym(lib, "calloc");
    r = dlsym(lib, "realloc");
    a = dlsym(lib, "aligned_alloc");
    u = dlsym(lib, "malloc_usable_size");
    if (m == NULL || f == NULL || c == NULL || r == NULL || a == NULL ||
        u == NULL)
        return;
    atomic_store_explicit(&jemalloc_malloc, (malloc_fn)m,
                          memory_order_relaxed);
    atomic_store_explicit(&jemalloc_free, (free_fn)f, memory_order_relaxed);
    atomic_store_explicit(&jemalloc_calloc, (calloc_fn)c,
                          memory_order_relaxed);
    atomic_store_explicit(&jemalloc_realloc, (realloc_fn)r,
                          memory_order_relaxed);
    atomic_store_explicit(&jemalloc_aligned_alloc, (aligned_fn)a,
                          memory_order_relaxed);
    atomic_store_explicit(&jemalloc_usable_size, (usable_fn)u,
                          memory_order_relaxed);
}

/* jemalloc's functions have glibc's semantics: malloc(0) is a unique block,
 * failure sets errno to ENOMEM. flags is 0, MALLOCX_ZERO or an alignment
 * (MALLOCX_ALIGN). */
static inline void *alloc_untagged(size_t size, int flags)
{
    if (flags == 0)
        return UNTAGGED(malloc)(size);
    if (flags == MALLOCX_ZERO)
        return UNTAGGED(calloc)(1, size);
    return UNTAGGED(aligned_alloc)((size_t)1 << (flags & 0x3f), size);
}

/* A full region may still hold free space in this thread's cache or in dirty
 * pages of the arena (jemalloc #2752): give both back and try once more. */
RA__COLD static void make_room(ra_tag_t tag)
{
    ra__thread_flush_tag(tag);
    ra__stats_purge_arena(ra__tag_arena[tag]);
}

/* Counts a block allocated under tag, unless jemalloc put it outside the
 * region: during thread exit it serves explicit-arena requests from arena
 * 0 (#2791), and such a block is untagged. Marks its page: it did not come
 * from a front cache, so its class is not known here. */
static inline void count_alloc(struct ra__tag_slot *s, ra_tag_t tag, void *p)
{
    if (RA__UNLIKELY(ra__tag_of_addr(p) != tag))
        return;
    if (ra__page_bin != NULL)
        ra__page_bin_set(p, RA__PAGE_UNCACHED);
    if (RA__LIKELY(s != NULL))
        ra__count_one(&s->nmalloc);
    else
        ra__count_orphan(tag, true);
}

/* The flags that reach tag's arena from this thread: the slot's, or
 * uncached when the thread has no slot (re-entered, exiting). */
static int slot_alloc_flags(const struct ra__tag_slot *s, ra_tag_t tag)
{
    return s != NULL ? s->alloc_flags
                     : RA__ARENA_FLAGS(ra__tag_arena[tag]) |
                           MALLOCX_TCACHE_NONE;
}

/* Whether ptr's block was sampled by the profiler (its page is marked). */
static bool page_is_sampled(const void *ptr)
{
    return ra__page_bin != NULL &&
           __atomic_load_n(ra__page_bin_entry(ptr), __ATOMIC_RELAXED) ==
               RA__PAGE_SAMPLED;
}

RA__COLD static void *alloc_tagged_slow(ra_tag_t tag, size_t size, int flags)
{
    struct ra__tag_slot *s;
    int tag_flags;
    void *p;

    if (!atomic_load_explicit(&ra__tagging, memory_order_relaxed))
        return alloc_untagged(size, flags);
    if (size > PTRDIFF_MAX)
        return fail_enomem();
    s = ra__thread_slot(tag);
    tag_flags = slot_alloc_flags(s, tag);
    p = mallocx(at_least_one(size), tag_flags | flags);
    if (p == NULL) {
        make_room(tag);
        p = mallocx(at_least_one(size), tag_flags | flags);
        if (p == NULL)
            return fail_enomem();
    }
    count_alloc(s, tag, p);
    return p;
}

/* The front cache's bin for size is empty: fill it and return a block. */
RA__COLD static void *alloc_refill(struct ra__tag_slot *s, ra_tag_t tag,
                                   unsigned bin, size_t size)
{
    void *p = ra__fc_refill(s, tag, bin);

    if (p == NULL)
        return alloc_tagged_slow(tag, size, 0);
    if (RA__LIKELY(ra__tag_of_addr(p) == tag))
        ra__count_one(&s->nmalloc);
    return p;
}

__attribute__((noinline)) static void *alloc_tagged(ra_tag_t tag,
                                                    size_t size, int flags)
{
    struct ra__thread_state *ts = ra__thread;
    struct ra__tag_slot *s;
    void *p;

    if (RA__UNLIKELY(ts == NULL))
        return alloc_tagged_slow(tag, size, flags);
    s = &ts->slots[tag];
    if (flags == 0 && RA__LIKELY(size <= ra__small_max) &&
        RA__LIKELY(s->bins != NULL)) {
        unsigned bin = ra__size_bin[(size + 7) >> 3];
        struct ra__fc_bin *b = &s->bins[bin];
        if (RA__UNLIKELY(b->count == 0))
            return alloc_refill(s, tag, bin, size);
        ra__count_one(&s->nmalloc);
        return b->items[--b->count];
    }
    if (RA__LIKELY(s->alloc_flags != 0) && RA__LIKELY(size <= PTRDIFF_MAX)) {
        p = mallocx(at_least_one(size), s->alloc_flags | flags);
        if (RA__LIKELY(p != NULL)) {
            count_alloc(s, tag, p);
            return p;
        }
    }
    return alloc_tagged_slow(tag, size, flags);
}

/* The hot path of a tagged malloc: a pop from the thread's front cache.
 * Anything else is a tail call, so this needs no saved registers. */
static inline void *alloc_tagged_fast(ra_tag_t tag, size_t size)
{
    struct ra__thread_state *ts = ra__thread;

    if (RA__LIKELY(ts != NULL) && RA__LIKELY(size <= ra__small_max)) {
        struct ra__tag_slot *s = &ts->slots[tag];
        struct ra__fc_bin *bins = s->bins;
        if (RA__LIKELY(bins != NULL)) {
            struct ra__fc_bin *b = &bins[ra__size_bin[(size + 7) >> 3]];
            unsigned count = b->count;
            if (RA__LIKELY(count != 0)) {
                b->count = count - 1;
                ra__count_one(&s->nmalloc);
                return b->items[count - 1];
            }
        }
    }
    return alloc_tagged(tag, size, 0);
}

static inline void *alloc_plain(ra_tag_t tag, size_t size, int flags)
{
    if (RA__LIKELY(tag == RA_TAG_NONE))
        return alloc_untagged(size, flags);
    if (flags == 0)
        return alloc_tagged_fast(tag, size);
    return alloc_tagged(tag, size, flags);
}

_Atomic unsigned ra__instrumented;

/* A block the profiler samples: at least a page, so that it starts on a
 * page of its own, which is marked. NULL when it cannot be had this way
 * (the caller then allocates as usual, unsampled). */
static void *alloc_sampled(ra_tag_t tag, size_t size, int flags)
{
    const size_t page = (size_t)1 << RA__PAGE_SHIFT;
    struct ra__tag_slot *s;
    int tag_flags;
    void *p;

    if (ra__page_bin == NULL || size > PTRDIFF_MAX ||
        !atomic_load_explicit(&ra__tagging, memory_order_relaxed))
        return NULL;
    s = ra__thread_slot(tag);
    tag_flags = slot_alloc_flags(s, tag);
    p = mallocx(size < page ? page : size, tag_flags | flags);
    if (p == NULL || ra__tag_of_addr(p) != tag) {
        if (p != NULL)
            dallocx(p, MALLOCX_TCACHE_NONE);
        return NULL;
    }
    count_alloc(s, tag, p);
    ra__page_bin_set(p, RA__PAGE_SAMPLED);
    ra__prof_record(tag, p, size);
    return p;
}

static inline bool prof_samples(ra_tag_t tag, size_t size)
{
    return tag != RA_TAG_NONE &&
           atomic_load_explicit(&ra__prof_sampling, memory_order_relaxed) &&
           !ra__prof_countdown_holds(size) && ra__prof_tick_slow(size);
}

/* The profiler picked this allocation. */
RA__COLD static void *alloc_sampled_or_plain(ra_tag_t tag, size_t size,
                                             int flags)
{
    void *p = alloc_sampled(tag, size, flags);

    return p != NULL ? p : alloc_plain(tag, size, flags);
}

/* Hooks are installed (and the profiler maybe on). */
RA__COLD static void *alloc_hooked(ra_tag_t tag, size_t size, int flags)
{
    void *p = prof_samples(tag, size)
                  ? alloc_sampled_or_plain(tag, size, flags)
                  : alloc_plain(tag, size, flags);

    ra__hooks_on_alloc(p);
    return p;
}

/* The countdown ran out (or was never drawn). */
RA__COLD static void *alloc_tick_slow(ra_tag_t tag, size_t size, int flags)
{
    if (ra__prof_tick_slow(size))
        return alloc_sampled_or_plain(tag, size, flags);
    return alloc_plain(tag, size, flags);
}

/* Hooks or the profiler are on (instrumented, ra__instrumented's value).
 * With the profiler only, a tagged allocation pays an inline countdown (a
 * subtract, a compare and a store) and every call here is a tail call. */
static inline __attribute__((always_inline)) void *
alloc_instrumented_body(unsigned instrumented, ra_tag_t tag, size_t size,
                        int flags)
{
    if (instrumented != RA__INSTRUMENT_PROF)
        return alloc_hooked(tag, size, flags);
    if (tag != RA_TAG_NONE && !ra__prof_countdown_holds(size))
        return alloc_tick_slow(tag, size, flags);
    return alloc_plain(tag, size, flags);
}

__attribute__((noinline)) static void *
alloc_instrumented(unsigned instrumented, ra_tag_t tag, size_t size,
                   int flags)
{
    return alloc_instrumented_body(instrumented, tag, size, flags);
}

/* The same for malloc's own case, no flags: the compiler drops their
 * tests, and size stays in the register it arrived in. */
__attribute__((noinline)) static void *
alloc_instrumented_plain(size_t size, ra_tag_t tag, unsigned instrumented)
{
    return alloc_instrumented_body(instrumented, tag, size, 0);
}

/* With no hook installed and the profiler off, one predictable branch more
 * than the plain path; with the profiler only, an inline countdown. */
static inline void *alloc_as(ra_tag_t tag, size_t size, int flags)
{
    unsigned instrumented = atomic_load_explicit(&ra__instrumented,
                                                 memory_order_relaxed);

    if (RA__UNLIKELY(instrumented != 0))
        return flags == 0
                   ? alloc_instrumented_plain(size, tag, instrumented)
                   : alloc_instrumented(instrumented, tag, size, flags);
    return alloc_plain(tag, size, flags);
}

RA__COLD static void free_tagged_slow(void *ptr, ra_tag_t tag, size_t size,
                                      int align_flags)
{
    struct ra__tag_slot *s = ra__thread_slot(tag);
    int flags = s != NULL ? s->free_flags : MALLOCX_TCACHE_NONE;

    if (s != NULL)
        ra__count_one(&s->ndalloc);
    else
        ra__count_orphan(tag, false);
    if (size == 0)
        dallocx(ptr, flags);
    else
        sdallocx(ptr, size, flags | align_flags);
}

/* Sized or not, an untagged block goes back through jemalloc's free (see
 * jemalloc_malloc above). */
static inline void free_untagged(void *ptr)
{
    UNTAGGED(free)(ptr);
}

/* A tagged free: into the thread's front cache when the block's class is
 * known, else through the slot's tcache. size 0: unknown; otherwise the
 * size requested at allocation. Kept out of line so that the untagged path
 * of the callers stays a test and a jump. */
__attribute__((noinline)) static void free_tagged(void *ptr, ra_tag_t tag,
                                                  size_t size, int align_flags)
{
    struct ra__thread_state *ts = ra__thread;
    struct ra__tag_slot *s;

    if (page_is_sampled(ptr)) {
        ra__prof_on_free(ptr);
        /* It was made at least a page long: a size hint would be wrong. */
        size = 0;
    }
    if (RA__UNLIKELY(ts == NULL)) {
        free_tagged_slow(ptr, tag, size, align_flags);
        return;
    }
    s = &ts->slots[tag];
    if (RA__LIKELY(s->bins != NULL)) {
        unsigned bin = __atomic_load_n(ra__page_bin_entry(ptr),
                                       __ATOMIC_RELAXED);
        if (RA__LIKELY(bin < RA__PAGE_SAMPLED)) {
            struct ra__fc_bin *b = &s->bins[bin];
            if (RA__UNLIKELY(b->count == b->cap))
                ra__fc_make_room(s, bin);
            b->items[b->count++] = ptr;
            ra__count_one(&s->ndalloc);
            return;
        }
    }
    if (RA__LIKELY(s->alloc_flags != 0)) {
        ra__count_one(&s->ndalloc);
        if (size == 0)
            dallocx(ptr, s->free_flags);
        else
            sdallocx(ptr, size, s->free_flags | align_flags);
        return;
    }
    free_tagged_slow(ptr, tag, size, align_flags);
}

/* The hot path of a tagged free: a push on the thread's front cache when
 * the page table knows the block's class and the bin has room. */
static inline void free_tagged_fast(void *ptr, ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;

    if (RA__LIKELY(ts != NULL)) {
        struct ra__tag_slot *s = &ts->slots[tag];
        struct ra__fc_bin *bins = s->bins;
        if (RA__LIKELY(bins != NULL)) {
            unsigned bin = __atomic_load_n(ra__page_bin_entry(ptr),
                                           __ATOMIC_RELAXED);
            /* Sampled blocks and blocks of unknown class take the general
             * path. */
            if (RA__LIKELY(bin < RA__PAGE_SAMPLED)) {
                struct ra__fc_bin *b = &bins[bin];
                unsigned count = b->count;
                if (RA__LIKELY(count < b->cap)) {
                    b->items[count] = ptr;
                    b->count = count + 1;
                    ra__count_one(&s->ndalloc);
                    return;
                }
            }
        }
    }
    free_tagged(ptr, tag, 0, 0);
}

static inline void free_plain(void *ptr, size_t size, int align_flags)
{
    ra_tag_t tag = ra__tag_of_addr(ptr);

    if (RA__LIKELY(tag == RA_TAG_NONE))
        free_untagged(ptr);
    else if (size == 0)
        free_tagged_fast(ptr, tag);
    else
        free_tagged(ptr, tag, size, align_flags);
}

RA__COLD static void free_hooked(void *ptr, size_t size, int align_flags)
{
    ra__hooks_on_free(ptr);
    free_plain(ptr, size, align_flags);
}

/* Frees of sampled blocks need no flag: their page tells. */
static inline void free_block(void *ptr, size_t size, int align_flags)
{
    if (RA__UNLIKELY(ra__hooks_any()))
        free_hooked(ptr, size, align_flags);
    else
        free_plain(ptr, size, align_flags);
}

void *ra_malloc(size_t size)
{
    return alloc_as(ra__tag_stack.top, size, 0);
}

void *ra_malloc_tag(ra_tag_t tag, size_t size)
{
    if (tag != RA_TAG_NONE && !ra__tag_valid(tag)) {
        errno = EINVAL;
        return NULL;
    }
    return alloc_as(tag, size, 0);
}

void *ra_calloc(size_t n, size_t size)
{
    size_t total;

    if (__builtin_mul_overflow(n, size, &total))
        return fail_enomem();
    return alloc_as(ra__tag_stack.top, total, MALLOCX_ZERO);
}

void ra_free(void *ptr)
{
    free_block(ptr, 0, 0);
}

void ra_free_sized(void *ptr, size_t size)
{
    free_block(ptr, at_least_one(size), 0);
}

void ra__free_aligned_sized(void *ptr, size_t align, size_t size)
{
    free_block(ptr, at_least_one(size), MALLOCX_ALIGN(align));
}

/* Allocates with a power-of-two alignment already validated. */
void *ra__alloc_aligned(size_t align, size_t size)
{
    return alloc_as(ra__tag_stack.top, size, MALLOCX_ALIGN(align));
}

void *ra_aligned_alloc(size_t align, size_t size)
{
    if (align == 0 || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    return ra__alloc_aligned(align, size);
}

int ra_posix_memalign(void **out, size_t align, size_t size)
{
    int saved = errno;
    void *p;

    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    p = ra__alloc_aligned(align, size);
    errno = saved;
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

size_t ra_malloc_usable_size(const void *ptr)
{
    if (ptr == NULL)
        return 0;
    if (ra__tag_of_addr(ptr) == RA_TAG_NONE)
        return UNTAGGED(usable_size)((void *)ptr);
    return sallocx(ptr, 0);
}

/* A realloc ends one block and starts another, as hooks will see it; the
 * new one may have left the region during thread exit (#2791). */
static void count_realloc(struct ra__tag_slot *s, ra_tag_t tag, void *p)
{
    if (s != NULL)
        ra__count_one(&s->ndalloc);
    else
        ra__count_orphan(tag, false);
    count_alloc(s, tag, p);
}

RA__COLD static void *realloc_tagged_slow(void *ptr, ra_tag_t tag,
                                          size_t size)
{
    struct ra__tag_slot *s = ra__thread_slot(tag);
    int flags = slot_alloc_flags(s, tag);
    void *p = rallocx(ptr, size, flags);

    if (p == NULL) {
        make_room(tag);
        p = rallocx(ptr, size, flags);
        if (p == NULL)
            return fail_enomem();
    }
    count_realloc(s, tag, p);
    return p;
}

static void *realloc_tagged(void *ptr, ra_tag_t tag, size_t size)
{
    struct ra__thread_state *ts = ra__thread;
    void *p;

    /* The block keeps its owner's arena whatever is on the stack. */
    if (RA__LIKELY(ts != NULL) && RA__LIKELY(ts->slots[tag].alloc_flags != 0)) {
        struct ra__tag_slot *s = &ts->slots[tag];
        p = rallocx(ptr, size, s->alloc_flags);
        if (RA__LIKELY(p != NULL)) {
            count_realloc(s, tag, p);
            return p;
        }
    }
    return realloc_tagged_slow(ptr, tag, size);
}

/* The profiler picked a reallocation: the new block is a sampled one of
 * the same tag, the old one is freed (leaving the profile if it was
 * sampled). NULL when a sampled block cannot be had: the caller then
 * reallocates as usual. */
RA__COLD static void *realloc_sampled(void *ptr, ra_tag_t tag, size_t size)
{
    void *p = alloc_sampled(tag, size, 0);
    size_t old_size;

    if (p == NULL)
        return NULL;
    old_size = ra_malloc_usable_size(ptr);
    memcpy(p, ptr, old_size < size ? old_size : size);
    free_plain(ptr, 0, 0);
    return p;
}

static void *realloc_plain(void *ptr, size_t size)
{
    ra_tag_t tag;
    bool sampled;
    void *p;

    if (ptr == NULL)
        return ra_malloc(size);
    if (size == 0) {
        ra_free(ptr);
        return NULL;
    }
    if (size > PTRDIFF_MAX)
        return fail_enomem();
    tag = ra__tag_of_addr(ptr);
    if (RA__LIKELY(tag == RA_TAG_NONE))
        return UNTAGGED(realloc)(ptr, size);
    if (RA__UNLIKELY(ra__instrumented_any()) && prof_samples(tag, size)) {
        p = realloc_sampled(ptr, tag, size);
        if (p != NULL)
            return p;
    }
    /* A sampled block that is reallocated leaves the profile. */
    sampled = page_is_sampled(ptr);
    p = realloc_tagged(ptr, tag, size);
    if (p != NULL && sampled)
        ra__prof_on_free(ptr);
    return p;
}

/* Hooks see a realloc as the free of the old block and the allocation of
 * the new one, once it has succeeded; realloc(NULL, n) and realloc(p, 0)
 * are reported by ra_malloc and ra_free. */
RA__COLD static void *realloc_hooked(void *ptr, size_t size)
{
    ra_tag_t old_tag;
    size_t old_size;
    void *p;

    if (ptr == NULL || size == 0)
        return realloc_plain(ptr, size);
    old_tag = ra__tag_of_addr(ptr);
    old_size = ra_malloc_usable_size(ptr);
    p = realloc_plain(ptr, size);
    if (p != NULL)
        ra__hooks_on_realloc(old_tag, ptr, old_size, p);
    return p;
}

void *ra_realloc(void *ptr, size_t size)
{
    if (RA__UNLIKELY(ra__hooks_any()))
        return realloc_hooked(ptr, size);
    return realloc_plain(ptr, size);
}

/* Allocation paths: ra_malloc and friends, untagged through jemalloc's own
 * fast path, tagged through the thread's front cache for the tag. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

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

/* jemalloc's malloc family has glibc's semantics: malloc(0) is a unique
 * block, failure sets errno to ENOMEM. flags is 0, MALLOCX_ZERO, an
 * alignment, or what a caller of mallocx passed (alloc_untagged_flags). */
RA__COLD static void *alloc_untagged_flags(size_t size, int flags)
{
    void *p;

    if (size > PTRDIFF_MAX)
        return fail_enomem();
    p = ra__je_mallocx(at_least_one(size), flags);
    return p != NULL ? p : fail_enomem();
}

static inline void *alloc_untagged(size_t size, int flags)
{
    if (flags == 0)
        return ra__je_malloc(size);
    if (flags == MALLOCX_ZERO)
        return ra__je_calloc(1, size);
    if ((flags & ~RA__LG_ALIGN_BITS) == 0)
        return ra__je_aligned_alloc((size_t)1 << flags, size);
    return alloc_untagged_flags(size, flags);
}

/* A request larger than a whole region can never be served under a tag:
 * it fails at once, without emptying caches for nothing. */
static inline bool region_cannot_hold(size_t size)
{
    return size > (size_t)1 << ra__layout.shift;
}

/* A full region may still hold free space in this thread's cache or in dirty
 * pages of the arena (doc/design.md, jemalloc facts): give both back and try once more. */
RA__COLD static void make_room(ra_tag_t tag)
{
    ra__thread_flush_tag(tag);
    ra__be_arena_purge(ra__tag_arena[tag]);
}

/* Counts a block allocated under tag, unless jemalloc put it outside the
 * region: during thread exit it serves explicit-arena requests from arena
 * 0 (jemalloc's thread-exit redirection, doc/design.md), and such a block is untagged. Marks its page: it did not come
 * from a front cache, so its class is not known here. */
static inline void count_alloc(struct ra__tag_slot *s, ra_tag_t tag, void *p)
{
    if (RA__UNLIKELY(ra__tag_of_addr(p) != tag))
        return;
    if (ra__page_bin != NULL)
        ra__page_mark(p, RA__PAGE_UNCACHED);
    if (RA__LIKELY(s != NULL))
        ra__count_one(&s->nmalloc);
    else
        ra__count_orphan(tag, true);
    /* jemalloc may have committed memory for it: a soft limit reached? */
    ra__limit_check_soft();
}

/* The end of a tagged allocation that failed: counted when the tag's hard
 * limit refused what it needed. */
static void *fail_tagged(ra_tag_t tag)
{
    if (ra__limit_refused == tag) {
        ra__limit_refused = RA_TAG_NONE;
        ra__limit_count_failure(tag);
    }
    ra__limit_check_soft();
    return fail_enomem();
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
    return ra__page_bin != NULL && ra__page_bin_get(ptr) == RA__PAGE_SAMPLED;
}

RA__COLD static void *alloc_tagged_slow(ra_tag_t tag, size_t size, int flags)
{
    struct ra__tag_slot *s;
    int tag_flags;
    void *p;

    if (!atomic_load_explicit(&ra__tagging, memory_order_relaxed))
        return alloc_untagged(size, flags);
    if (region_cannot_hold(size))
        return fail_enomem();
    s = ra__thread_slot(tag);
    tag_flags = slot_alloc_flags(s, tag);
    ra__limit_refused = RA_TAG_NONE;
    p = ra__je_mallocx(at_least_one(size), tag_flags | flags);
    if (p == NULL) {
        make_room(tag);
        ra__limit_refused = RA_TAG_NONE;
        p = ra__je_mallocx(at_least_one(size), tag_flags | flags);
        if (p == NULL)
            return fail_tagged(tag);
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
    ra__limit_check_soft();
    return p;
}

/* What the front cache does not serve: a thread without state yet, a
 * large size, flags, a slot without a front cache. */
__attribute__((noinline)) static void *alloc_tagged(ra_tag_t tag,
                                                    size_t size, int flags)
{
    struct ra__thread_state *ts = ra__thread;
    struct ra__tag_slot *s;
    void *p;

    if (RA__UNLIKELY(ts == NULL))
        return alloc_tagged_slow(tag, size, flags);
    s = &ts->slots[tag];
    if (RA__LIKELY(s->alloc_flags != 0) && RA__LIKELY(size <= PTRDIFF_MAX)) {
        ra__slot_miss(s);
        p = ra__je_mallocx(at_least_one(size), s->alloc_flags | flags);
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
            unsigned bin = ra__size_bin[(size + 7) >> 3];
            struct ra__fc_bin *b = &bins[bin];
            unsigned count = b->count;
            if (RA__UNLIKELY(count == 0))
                return alloc_refill(s, tag, bin, size);
            b->count = count - 1;
            ra__count_one(&s->nmalloc);
            return b->items[count - 1];
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
    p = ra__je_mallocx(size < page ? page : size, tag_flags | flags);
    if (p == NULL || ra__tag_of_addr(p) != tag) {
        if (p != NULL)
            ra__je_dallocx(p, MALLOCX_TCACHE_NONE);
        return NULL;
    }
    count_alloc(s, tag, p);
    ra__page_mark(p, RA__PAGE_SAMPLED);
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

/* Hooks are installed (and the profiler maybe on). A small block without
 * alignment has its size class's size, from the table the front caches
 * use: no lookup of the block's size. Not cold: with a hook installed this
 * is every allocation's path. */
static void *alloc_hooked(ra_tag_t tag, size_t size, int flags)
{
    void *p;

    if (prof_samples(tag, size))
        return ra__hooks_on_alloc(alloc_sampled_or_plain(tag, size, flags));
    p = alloc_plain(tag, size, flags);
    if ((flags & RA__LG_ALIGN_BITS) == 0 && size <= ra__small_max)
        return ra__hooks_on_alloc_of(
            p, ra__bin_size[ra__size_bin[(size + 7) >> 3]]);
    return ra__hooks_on_alloc(p);
}

/* The countdown ran out (or was never drawn). */
RA__COLD static void *alloc_tick_slow(ra_tag_t tag, size_t size, int flags)
{
    if (ra__prof_tick_slow(size))
        return alloc_sampled_or_plain(tag, size, flags);
    return alloc_plain(tag, size, flags);
}

/* Hooks are installed, or the profiler's countdown ran out. */
__attribute__((noinline)) static void *
alloc_instrumented(unsigned instrumented, ra_tag_t tag, size_t size,
                   int flags)
{
    if (instrumented != RA__INSTRUMENT_PROF)
        return alloc_hooked(tag, size, flags);
    return alloc_tick_slow(tag, size, flags);
}

/* instrumented: ra__instrumented as the caller read it. With no hook
 * installed and the profiler off, one predictable branch more than the
 * plain path. With the profiler only, a tagged allocation pays an inline
 * countdown (a subtract, a compare and a store) and goes on down the plain
 * path: no call of its own until the countdown runs out. */
static inline void *alloc_with(unsigned instrumented, ra_tag_t tag,
                               size_t size, int flags)
{
    if (RA__UNLIKELY(instrumented != 0) &&
        (instrumented != RA__INSTRUMENT_PROF ||
         (tag != RA_TAG_NONE && !ra__prof_countdown_holds(size))))
        return alloc_instrumented(instrumented, tag, size, flags);
    return alloc_plain(tag, size, flags);
}

static inline void *alloc_as(ra_tag_t tag, size_t size, int flags)
{
    return alloc_with(
        atomic_load_explicit(&ra__instrumented, memory_order_relaxed), tag,
        size, flags);
}

RA__COLD static void free_tagged_slow(void *ptr, ra_tag_t tag)
{
    struct ra__tag_slot *s = ra__thread_slot(tag);
    int flags = s != NULL ? s->free_flags : MALLOCX_TCACHE_NONE;

    if (s != NULL)
        ra__count_one(&s->ndalloc);
    else
        ra__count_orphan(tag, false);
    ra__je_dallocx(ptr, flags);
}

/* Sized or not, an untagged block goes back through jemalloc's free, as it
 * came from jemalloc's malloc family (ra_jemalloc.h). */
static inline void free_untagged(void *ptr)
{
    ra__je_free(ptr);
}

/* A tagged free: into the thread's front cache when the block's class is
 * known, else through the slot's tcache. The size a sized free was given
 * is not used: a caller's mistake there (a block of an aligned allocation
 * freed with a plain free_sized, which C23 leaves undefined and glibc
 * forgives) would name a wrong size class to jemalloc, and the hint saves
 * nothing measurable. Kept out of line so that the untagged path of the
 * callers stays a test and a jump. */
__attribute__((noinline)) static void free_tagged(void *ptr, ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;
    unsigned entry = ra__page_bin != NULL ? ra__page_bin_get(ptr)
                                          : RA__PAGE_UNCACHED;
    struct ra__tag_slot *s;

    if (RA__UNLIKELY(entry == RA__PAGE_NONE)) {
        free_untagged(ptr); /* no tag's block (ra__block_tag) */
        return;
    }
    if (entry == RA__PAGE_SAMPLED)
        ra__prof_on_free(ptr);
    if (RA__UNLIKELY(ts == NULL)) {
        free_tagged_slow(ptr, tag);
        return;
    }
    s = &ts->slots[tag];
    if (RA__LIKELY(s->bins != NULL)) {
        unsigned bin = ra__page_entry_bin(entry);
        if (RA__LIKELY(bin < RA__MAX_BINS)) {
            struct ra__fc_bin *b = &s->bins[bin];
            if (RA__UNLIKELY(b->count == b->cap))
                ra__fc_make_room(s, bin);
            b->items[b->count++] = ptr;
            ra__count_one(&s->ndalloc);
            return;
        }
    }
    if (RA__LIKELY(s->alloc_flags != 0)) {
        ra__slot_miss(s);
        ra__count_one(&s->ndalloc);
        ra__je_dallocx(ptr, s->free_flags);
        return;
    }
    free_tagged_slow(ptr, tag);
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
            unsigned bin = ra__page_entry_bin(ra__page_bin_get(ptr));
            /* Sampled blocks, blocks of unknown class and what is no
             * block of the library's take the general path. */
            if (RA__LIKELY(bin < RA__MAX_BINS)) {
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
    free_tagged(ptr, tag);
}

/* Sized frees come here too: the size is not trusted (free_tagged). */
static inline void free_plain(void *ptr)
{
    ra_tag_t tag = ra__tag_of_addr(ptr);

    if (RA__LIKELY(tag == RA_TAG_NONE))
        free_untagged(ptr);
    else
        free_tagged_fast(ptr, tag);
}

/* The page table knows the class of a tagged small block that a front
 * cache has held: its size without a lookup of the block. Out of line: it
 * calls out and goes on, so inlined it would make free save registers on
 * every call, hooked or not. */
__attribute__((noinline)) static void free_hooked(void *ptr)
{
    ra_tag_t tag = ra__block_tag(ptr);
    unsigned bin;

    if (tag == RA_TAG_NONE) {
        ra__hooks_on_free(ptr);
        free_untagged(ptr);
        return;
    }
    /* No page table (it could not be mapped): no front caches either. */
    bin = ra__page_entry_bin(ra__page_bin != NULL ? ra__page_bin_get(ptr)
                                                  : RA__PAGE_UNCACHED);
    if (bin < RA__MAX_BINS)
        ra__hooks_on_free_of(tag, ptr, ra__bin_size[bin]);
    else
        ra__hooks_on_free(ptr);
    free_tagged_fast(ptr, tag);
}

/* Frees of sampled blocks need no flag: their page tells. */
static inline void free_block(void *ptr)
{
    if (RA__UNLIKELY(ra__hooks_any()))
        free_hooked(ptr);
    else
        free_plain(ptr);
}

/* Untagged and uninstrumented in one test of the two words or'ed. */
void *ra_malloc(size_t size)
{
    ra_tag_t top = ra__tag_stack.top;
    unsigned instrumented = atomic_load_explicit(&ra__instrumented,
                                                 memory_order_relaxed);

    if (RA__LIKELY((top | instrumented) == 0))
        return ra__je_malloc(size);
    return alloc_with(instrumented, top, size, 0);
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

/* One comparison for the common case, an untagged free with no hook
 * installed (ra__free_gate); everything else takes the full path. */
void ra_free(void *ptr)
{
    uintptr_t off = (uintptr_t)ptr - ra__free_gate.base;

    if (RA__LIKELY((off >> ra__free_gate.shift) >=
                   atomic_load_explicit(&ra__free_gate.count,
                                        memory_order_relaxed))) {
        free_untagged(ptr);
        return;
    }
    free_block(ptr);
}

#ifdef RA_OVERRIDE
/* The process allocator's two busiest names are the same code as
 * ra_malloc and ra_free, not a jump to it. */
RA_EXPORT void *malloc(size_t size) __attribute__((alias("ra_malloc")));
RA_EXPORT void free(void *ptr) __attribute__((alias("ra_free")));
/* This library's own malloc, whatever the dynamic linker bound "malloc"
 * to (ra__override_check compares them). */
extern void *ra__own_malloc(size_t size)
    __attribute__((alias("ra_malloc"), visibility("hidden")));
#endif

/* The size is not trusted (free_tagged): the same path as free. */
void ra_free_sized(void *ptr, size_t size)
{
    (void)size;
    ra_free(ptr);
}

/* A caller of dallocx or sdallocx named a thread cache or an arena for an
 * untagged block: jemalloc's to honour. */
RA__COLD static void free_untagged_flags(void *ptr, size_t size, int flags)
{
    if (ra__hooks_any())
        ra__hooks_on_free(ptr);
    if (size == 0)
        ra__je_dallocx(ptr, flags);
    else
        ra__je_sdallocx(ptr, size, flags);
}

void ra__free_as(void *ptr, size_t size, int flags)
{
    if ((flags & RA__CACHE_ARENA_BITS) == 0 ||
        ra__block_tag(ptr) != RA_TAG_NONE)
        ra_free(ptr);
    else
        free_untagged_flags(ptr, size, flags);
}

void *ra__alloc_as(ra_tag_t tag, size_t size, int flags)
{
    return alloc_as(tag, size, flags);
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

/* glibc's posix_memalign sets errno to ENOMEM as well as returning it
 * (glibc's tst-malloc-thread-fail checks both); EINVAL leaves errno. */
int ra_posix_memalign(void **out, size_t align, size_t size)
{
    void *p;

    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    p = ra__alloc_aligned(align, size);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

size_t ra_malloc_usable_size(const void *ptr)
{
    if (ptr == NULL)
        return 0;
    if (ra__block_tag(ptr) == RA_TAG_NONE)
        return ra__je_usable_size((void *)ptr);
    return ra__je_sallocx(ptr, 0);
}

/* -- realloc -------------------------------------------------------------------
 * A block keeps its tag. Hooks see a realloc as the free of the old block,
 * reported before anything can reuse it, then the allocation of the new one;
 * a realloc that fails reports nothing. */

/* A realloc ends one block and starts another, as hooks see it. */
static void count_free_and_alloc(struct ra__tag_slot *s, ra_tag_t tag)
{
    if (s != NULL) {
        ra__count_one(&s->ndalloc);
        ra__count_one(&s->nmalloc);
    } else {
        ra__count_orphan(tag, false);
        ra__count_orphan(tag, true);
    }
}

/* The new block may have left the region during thread exit (jemalloc's thread-exit redirection, doc/design.md). */
static void count_realloc(struct ra__tag_slot *s, ra_tag_t tag, void *p)
{
    if (s != NULL)
        ra__count_one(&s->ndalloc);
    else
        ra__count_orphan(tag, false);
    count_alloc(s, tag, p);
}

/* flags: MALLOCX_ZERO and an alignment, at most. */
RA__COLD static void *realloc_tagged_slow(void *ptr, ra_tag_t tag,
                                          size_t size, int flags)
{
    struct ra__tag_slot *s;
    void *p;

    if (region_cannot_hold(size))
        return fail_enomem();
    s = ra__thread_slot(tag);
    flags |= slot_alloc_flags(s, tag);
    ra__limit_refused = RA_TAG_NONE;
    p = ra__je_rallocx(ptr, size, flags);
    if (p == NULL) {
        make_room(tag);
        ra__limit_refused = RA_TAG_NONE;
        p = ra__je_rallocx(ptr, size, flags);
        if (p == NULL)
            return fail_tagged(tag);
    }
    count_realloc(s, tag, p);
    return p;
}

/* The block keeps its owner's arena whatever is on the stack. */
static void *realloc_tagged(void *ptr, ra_tag_t tag, size_t size, int flags)
{
    struct ra__thread_state *ts = ra__thread;
    void *p;

    if (RA__LIKELY(ts != NULL) && RA__LIKELY(ts->slots[tag].alloc_flags != 0)) {
        struct ra__tag_slot *s = &ts->slots[tag];
        ra__slot_miss(s);
        p = ra__je_rallocx(ptr, size, s->alloc_flags | flags);
        if (RA__LIKELY(p != NULL)) {
            count_realloc(s, tag, p);
            return p;
        }
    }
    return realloc_tagged_slow(ptr, tag, size, flags);
}

/* jemalloc's realloc leaves errno alone for sizes past its largest class. */
static void *realloc_untagged(void *ptr, size_t size, int flags)
{
    void *p = flags == 0 ? ra__je_realloc(ptr, size)
                         : ra__je_rallocx(ptr, size, flags);

    return RA__LIKELY(p != NULL) ? p : fail_enomem();
}

/* Moves a tagged block by hand: a new block of the same tag (one the
 * profiler samples when sample is set), the contents, then the old block
 * freed, which takes it out of the profile if it was sampled. The old
 * block's free is reported (hooked) before it is freed. */
RA__COLD static void *realloc_by_copy(void *ptr, ra_tag_t tag, size_t size,
                                      int flags, bool sample, bool hooked)
{
    size_t old_size = ra_malloc_usable_size(ptr);
    void *p = sample ? alloc_sampled_or_plain(tag, size, flags)
                     : alloc_plain(tag, size, flags);

    if (p == NULL)
        return NULL;
    memcpy(p, ptr, old_size < size ? old_size : size);
    if (hooked)
        ra__hooks_on_free_of(tag, ptr, old_size);
    free_plain(ptr);
    if (hooked)
        ra__hooks_on_alloc(p);
    return p;
}

/* Tagged flags: never a caller's arena or thread cache (the block stays
 * in its tag). */
#define BLOCK_FLAGS(flags) ((flags) & RA__BLOCK_BITS)

/* size is at least 1. */
static void *realloc_plain(void *ptr, size_t size, int flags)
{
    ra_tag_t tag;
    bool sample;

    if (size > PTRDIFF_MAX)
        return fail_enomem();
    tag = ra__block_tag(ptr);
    if (RA__LIKELY(tag == RA_TAG_NONE))
        return realloc_untagged(ptr, size, flags);
    flags = BLOCK_FLAGS(flags);
    /* A sampled block, or one the profiler picks, moves by hand: the
     * profile forgets the old address before it can be reused. */
    sample = prof_samples(tag, size);
    if (RA__UNLIKELY(sample) || RA__UNLIKELY(page_is_sampled(ptr)))
        return realloc_by_copy(ptr, tag, size, flags, sample, false);
    return realloc_tagged(ptr, tag, size, flags);
}

/* Hooks are installed: the old block's free must be reported before the
 * block can be reused, so a block that moves is moved by hand. In place
 * (xallocx) it is never reusable. */
RA__COLD static void *realloc_tagged_hooked(void *ptr, ra_tag_t tag,
                                            size_t size, int flags)
{
    size_t old_size = ra_malloc_usable_size(ptr);
    bool sample = prof_samples(tag, size);

    size_t align = (size_t)1 << (flags & RA__LG_ALIGN_BITS);

    if (!sample && !page_is_sampled(ptr) &&
        ((uintptr_t)ptr & (align - 1)) == 0 &&
        ra__je_xallocx(ptr, size, 0, flags) >= size) {
        count_free_and_alloc(ra__thread_slot(tag), tag);
        ra__limit_check_soft();
        ra__hooks_on_free_of(tag, ptr, old_size);
        ra__hooks_on_alloc(ptr);
        return ptr;
    }
    return realloc_by_copy(ptr, tag, size, flags, sample, true);
}

/* The same for an untagged block, which only jemalloc's malloc family
 * touches (a tool that replaces it, as valgrind does, owns the block): it
 * stays where it is when jemalloc would keep it (the same size class). */
RA__COLD static void *realloc_untagged_hooked(void *ptr, size_t size,
                                              int flags)
{
    size_t old_size = ra__je_usable_size(ptr);
    void *p;

    if (flags == 0 && ra__je_nallocx(size, 0) == old_size) {
        ra__hooks_on_free_of(RA_TAG_NONE, ptr, old_size);
        ra__hooks_on_alloc(ptr);
        return ptr;
    }
    p = alloc_untagged(size, flags);
    if (p == NULL)
        return NULL;
    memcpy(p, ptr, old_size < size ? old_size : size);
    ra__hooks_on_free_of(RA_TAG_NONE, ptr, old_size);
    if ((flags & RA__CACHE_ARENA_BITS) != 0)
        ra__je_dallocx(ptr, flags & RA__CACHE_ARENA_BITS);
    else
        ra__je_free(ptr);
    ra__hooks_on_alloc(p);
    return p;
}

RA__COLD static void *realloc_hooked(void *ptr, size_t size, int flags)
{
    ra_tag_t tag;

    if (size > PTRDIFF_MAX)
        return fail_enomem();
    tag = ra__block_tag(ptr);
    if (tag == RA_TAG_NONE)
        return realloc_untagged_hooked(ptr, size, flags);
    return realloc_tagged_hooked(ptr, tag, size, BLOCK_FLAGS(flags));
}

static inline void *realloc_as(void *ptr, size_t size, int flags)
{
    if (RA__UNLIKELY(ra__hooks_any()))
        return realloc_hooked(ptr, size, flags);
    return realloc_plain(ptr, size, flags);
}

void *ra_realloc(void *ptr, size_t size)
{
    if (ptr == NULL)
        return ra_malloc(size);
    if (size == 0) {
        ra_free(ptr);
        return NULL;
    }
    return realloc_as(ptr, size, 0);
}

void *ra__realloc_as(void *ptr, size_t size, int flags)
{
    return realloc_as(ptr, at_least_one(size), flags);
}

/* Resizing in place changes the usable size, not the block: a size that
 * changed is counted and reported as a realloc that stayed put, and takes
 * a sampled block out of the profile, as a realloc does. */
size_t ra__resize_in_place(void *ptr, size_t size, size_t extra, int flags)
{
    ra_tag_t tag = ra__block_tag(ptr);
    size_t old_size = ra_malloc_usable_size(ptr);
    size_t new_size = ra__je_xallocx(ptr, size, extra, BLOCK_FLAGS(flags));

    if (new_size == old_size)
        return new_size;
    if (tag != RA_TAG_NONE) {
        if (page_is_sampled(ptr))
            ra__prof_on_free(ptr);
        count_free_and_alloc(ra__thread_slot(tag), tag);
        ra__limit_check_soft();
    }
    if (ra__hooks_any()) {
        ra__hooks_on_free_of(tag, ptr, old_size);
        ra__hooks_on_alloc(ptr);
    }
    return new_size;
}

/* Floor: paths. What the allocation paths' files share: the plain fast
 * paths, inline, so that every entry point (alloc_entry.c's ra_malloc and
 * ra_free, override.c's malloc and free) is the same code, and the slow
 * steps each file owns (alloc.c: the plain paths; alloc_hooked.c: hooks
 * and the profiler's countdown; alloc_sampled.c: sampled blocks;
 * realloc.c). */
#ifndef RA_PATHS_H
#define RA_PATHS_H

#include <errno.h>
#include <string.h>

#include "backend.h"
#include "budget.h"
#include "instruments.h"
#include "internal.h"

/* -- alloc_entry.c, realloc.c: what the overrides call -------------------- */
/* Allocates under the current tag; align is a power of two, checked by the
 * caller. NULL with errno ENOMEM on failure. */
void *ra__alloc_aligned(size_t align, size_t size);
/* ra_malloc (align 0) or ra_aligned_alloc for an entry that calls it other
 * than by a tail call (posix_memalign, operator new): caller is the
 * entry's return address, for the tags by calling object. */
void *ra__alloc_from(const void *caller, size_t align, size_t size);
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

/* -- alloc.c: the plain paths' slow steps ---------------------------------- */
/* jemalloc's mallocx with a caller's flags, untagged; NULL with ENOMEM. */
RA__COLD void *ra__alloc_untagged_flags(size_t size, int flags);
/* The front cache's bin for size is empty: fill it and return a block. */
RA__COLD void *ra__alloc_refill(struct ra__tag_slot *s, ra_tag_t tag,
                                unsigned bin, size_t size);
/* What the front cache does not serve: a thread without state yet, a
 * large size, flags, a slot without a front cache. */
__attribute__((noinline)) void *ra__alloc_tagged(ra_tag_t tag, size_t size,
              int flags);
/* A tagged free that the fast path leaves: a full bin, no front cache, an
 * unknown class, a sampled block, what is no tag's block. */
__attribute__((noinline)) void ra__free_tagged(void *ptr, ra_tag_t tag);
/* The end of a tagged allocation that failed: NULL with ENOMEM, counted
 * for the tag whose hard limit refused (the allocating tag's or an
 * ancestor's: tag trees). */
void *ra__fail_tagged(void);

/* -- alloc_hooked.c: hooks installed, or the profiler's countdown out ------ */
__attribute__((noinline)) void *
ra__alloc_instrumented(unsigned instrumented, ra_tag_t tag, size_t size,
                       int flags);
/* The same, for an entry that calls it other than by a tail call: caller
 * is the entry's return address (tags by calling object). */
__attribute__((noinline)) void *
ra__alloc_instrumented_from(const void *caller, unsigned instrumented,
                            ra_tag_t tag, size_t size, int flags);
__attribute__((noinline)) void ra__free_hooked(void *ptr);
/* The hooks' reports of a block that the caller knows only by address:
 * its usable size is looked up only when a hook will hear of it. Each
 * returns ptr (allocations), so that a path ends in a tail call. */
void *ra__report_alloc(void *ptr);
void ra__report_free(void *ptr);

/* -- alloc_sampled.c: blocks the profiler samples ---------------------------- */
/* The profiler picked this allocation: a sampled block, or a plain one
 * when it cannot be had that way. */
RA__COLD void *ra__alloc_sampled_or_plain(ra_tag_t tag, size_t size,
                                          int flags);

/* -- the plain paths, inline ------------------------------------------------ */
static inline size_t ra__at_least_one(size_t size)
{
    return size == 0 ? 1 : size;
}

static inline void *ra__fail_enomem(void)
{
    errno = ENOMEM;
    return NULL;
}

static inline void *ra__alloc_untagged(size_t size, int flags)
{
    if (flags == 0)
        return ra__je_malloc(size);
    if (flags == MALLOCX_ZERO)
        return ra__je_calloc(1, size);
    if ((flags & ~RA__LG_ALIGN_BITS) == 0)
        return ra__je_aligned_alloc((size_t)1 << flags, size);
    return ra__alloc_untagged_flags(size, flags);
}

/* A request larger than a whole region can never be served under a tag:
 * it fails at once, without emptying caches for nothing. */
static inline bool ra__region_cannot_hold(size_t size)
{
    return size > (size_t)1 << ra__layout.shift;
}

/* The usable size of a tagged block whose page entry is entry: its small
 * bin's, or jemalloc's answer when the page does not name one (a large or
 * sampled block, or a small one made outside a front cache). */
static inline size_t ra__block_size_at(const void *ptr, unsigned entry)
{
    unsigned bin = ra__page_entry_bin(entry);

    return bin < RA__MAX_BINS ? ra__bin_size[bin]
                              : ra__je_sallocx((void *)ptr, 0);
}

static inline unsigned ra__page_entry_of(const void *ptr)
{
    return ra__page_bin != NULL ? ra__page_bin_get(ptr) : RA__PAGE_UNCACHED;
}

/* The usable size of the block mallocx(size, flags) just made at p: its
 * class's when no alignment was asked and the class is small (a calloc),
 * else jemalloc's answer. */
static inline size_t ra__made_size(const void *p, size_t size, int flags)
{
    if ((flags & RA__LG_ALIGN_BITS) == 0 && ra__small_max != 0 &&
        size <= ra__small_max)
        return ra__small_class(size);
    return ra__je_sallocx((void *)p, 0);
}

/* Writes the page entry of a tagged block of usable bytes that jemalloc
 * made outside a front cache: its class when it is small (a calloc's, a
 * realloc's, an aligned one's: a slab's block, as a refill's are), so
 * that its free goes to the front cache; "uncached" when it is large.
 * Marked uncached, a small block took its free to jemalloc and, as the
 * entry is the page's, so did every block the front cache had handed out
 * of that slab: CPython's callocs and reallocs sent 77 frees a request of
 * bench/python_requests.py's loop to dallocx, and 61 blocks a request
 * came back through refills, one mallocx each. */
static inline void ra__page_mark_made(void *p, size_t usable)
{
    if (usable <= ra__small_max)
        ra__page_bin_set(p, ra__small_bin(usable));
    else
        ra__page_mark(p, RA__PAGE_UNCACHED);
}

/* Counts a block of usable bytes that jemalloc made under tag, unless it
 * put it outside the region: during thread exit it serves explicit-arena
 * requests from arena 0 (jemalloc's thread-exit redirection,
 * doc/design.md), and such a block is untagged. Writes its page entry. */
static inline void ra__count_alloc(struct ra__tag_slot *s, ra_tag_t tag,
                                   void *p, size_t usable)
{
    if (RA__UNLIKELY(ra__tag_of_addr(p) != tag))
        return;
    ra__untagged_tag_made(usable);
    if (ra__page_bin != NULL)
        ra__page_mark_made(p, usable);
    if (RA__LIKELY(s != NULL))
        ra__count_handed(s, usable);
    else
        ra__count_orphan(tag, true, usable);
    /* jemalloc may have committed memory for it: a soft limit reached? */
    ra__budget_check_soft();
}

/* The flags that reach tag's arena from this thread: the slot's, or
 * uncached when the thread has no slot (re-entered, exiting). */
static inline int ra__slot_alloc_flags(const struct ra__tag_slot *s,
                                       ra_tag_t tag)
{
    return s != NULL ? s->alloc_flags
                     : RA__ARENA_FLAGS(ra__tag_arena[tag]) |
                           MALLOCX_TCACHE_NONE;
}

/* Whether ptr's block was sampled by the profiler (its page is marked). */
static inline bool ra__page_is_sampled(const void *ptr)
{
    return ra__page_bin != NULL && ra__page_bin_get(ptr) == RA__PAGE_SAMPLED;
}

/* Invariant 3 and the caches' own, for ra__assert: a front cache's bin
 * holds only blocks of its tag, whose page names their class or says
 * "uncached". The entry is loaded once: threads that share a slab write
 * it as they go, each a value right for every block of the page (a
 * thread's first block, made outside its front cache, marks the page
 * uncached, and its refill then names the class), so two loads could see
 * "uncached" and then the class, and fail a check that each one passes. */
static inline bool ra__fc_block_ok(const void *ptr, ra_tag_t tag,
                                   unsigned bin)
{
    unsigned entry = ra__page_bin_get(ptr);

    return ra__tag_of_addr(ptr) == tag &&
           (ra__page_entry_bin(entry) == bin || entry == RA__PAGE_UNCACHED);
}

/* The hot path of a tagged malloc: a pop from the thread's front cache.
 * Anything else is a tail call, so this needs no saved registers. */
static inline void *ra__alloc_tagged_fast(ra_tag_t tag, size_t size)
{
    struct ra__thread_state *ts = ra__thread;

    if (RA__LIKELY(ts != NULL) && RA__LIKELY(size <= ra__small_max)) {
        struct ra__tag_slot *s = &ts->slots[tag];
        struct ra__fc_bin *bins = s->bins;
        if (RA__LIKELY(bins != NULL)) {
            unsigned bin = ra__small_bin(size);
            struct ra__fc_bin *b = &bins[bin];
            unsigned count = b->count;
            if (RA__UNLIKELY(count == 0))
                return ra__alloc_refill(s, tag, bin, size);
            ra__assert(ra__fc_block_ok(b->items[count - 1], tag, bin));
            b->count = count - 1;
            ra__count_handed(s, b->size);
            return b->items[count - 1];
        }
    }
    return ra__alloc_tagged(tag, size, 0);
}

static inline void *ra__alloc_plain(ra_tag_t tag, size_t size, int flags)
{
    if (RA__LIKELY(tag == RA_TAG_NONE))
        return ra__alloc_untagged(size, flags);
    if (flags == 0)
        return ra__alloc_tagged_fast(tag, size);
    return ra__alloc_tagged(tag, size, flags);
}

static inline bool ra__prof_samples(ra_tag_t tag, size_t size)
{
    return tag != RA_TAG_NONE &&
           atomic_load_explicit(&ra__prof_sampling, memory_order_relaxed) &&
           !ra__prof_countdown_holds(size) && ra__prof_tick_slow(size);
}

/* instrumented: ra__instrumented as the caller read it. With no hook
 * installed and the profiler off, one predictable branch more than the
 * plain path. With the profiler only, a tagged allocation pays an inline
 * countdown (a subtract, a compare and a store) and goes on down the plain
 * path: no call of its own until the countdown runs out. */
static inline void *ra__alloc_with(unsigned instrumented, ra_tag_t tag,
                                   size_t size, int flags)
{
    if (RA__UNLIKELY(instrumented != 0) &&
        (instrumented != RA__INSTRUMENT_PROF ||
         (tag != RA_TAG_NONE && !ra__prof_countdown_holds(size))))
        return ra__alloc_instrumented(instrumented, tag, size, flags);
    return ra__alloc_plain(tag, size, flags);
}

/* Sized or not, an untagged block goes back through jemalloc's free, as it
 * came from jemalloc's malloc family (backend.h). */
static inline void ra__free_untagged(void *ptr)
{
    ra__je_free(ptr);
}

/* The hot path of a tagged free: a push on the thread's front cache when
 * the page table knows the block's class and the bin is not full. */
static inline void ra__free_tagged_fast(void *ptr, ra_tag_t tag)
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
                ra__assert(ra__tag_of_addr(ptr) == tag);
                if (RA__LIKELY(count < b->cap)) {
                    b->items[count] = ptr;
                    b->count = count + 1;
                    ra__count_taken(s, b->size);
                    return;
                }
            }
        }
    }
    ra__free_tagged(ptr, tag);
}

/* Sized frees come here too: the size is not trusted (ra__free_tagged). */
static inline void ra__free_plain(void *ptr)
{
    ra_tag_t tag = ra__tag_of_addr(ptr);

    if (RA__LIKELY(tag == RA_TAG_NONE))
        ra__free_untagged(ptr);
    else
        ra__free_tagged_fast(ptr, tag);
}

/* Frees of sampled blocks need no flag: their page tells. */
static inline void ra__free_block(void *ptr)
{
    if (RA__UNLIKELY(ra__hooks_any()))
        ra__free_hooked(ptr);
    else
        ra__free_plain(ptr);
}

/* The bodies of the process allocator's two busiest names, instantiated
 * as ra_malloc and ra_free (alloc_entry.c) and as malloc and free
 * (override.c): the same machine code under each name. */

/* Untagged and uninstrumented in one test of the two words or'ed. */
static inline void *ra__malloc_entry(size_t size)
{
    ra_tag_t top = ra__tag_stack.top;
    unsigned instrumented = atomic_load_explicit(&ra__instrumented,
                                                 memory_order_relaxed);

    if (RA__LIKELY((top | instrumented) == 0))
        return ra__je_malloc(size);
    return ra__alloc_with(instrumented, top, size, 0);
}

/* One comparison for the common case, an untagged free with no hook
 * installed (ra__free_gate); everything else takes the full path. */
static inline void ra__free_entry(void *ptr)
{
    uintptr_t off = (uintptr_t)ptr - ra__free_gate.base;

    if (RA__LIKELY((off >> ra__free_gate.shift) >=
                   atomic_load_explicit(&ra__free_gate.count,
                                        memory_order_relaxed))) {
        ra__free_untagged(ptr);
        return;
    }
    ra__free_block(ptr);
}

#endif /* RA_PATHS_H */

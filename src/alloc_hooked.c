/* Floor: paths. The allocation paths while hooks are installed, the
 * profiler's countdown ran out or tags by calling object are on: the
 * plain path with the reports around it, and the reports themselves (a
 * block's usable size is looked up only when a hook will hear of it). */
#include "by_library.h"
#include "paths.h"

void *ra__report_alloc(void *ptr)
{
    if (ra__hooks_reporting(ptr))
        ra__hooks_on_alloc_of(ptr, ra_malloc_usable_size(ptr));
    return ptr;
}

void ra__report_free(void *ptr)
{
    if (ra__hooks_reporting(ptr))
        ra__hooks_on_free_of(ra__block_tag(ptr), ptr,
                             ra_malloc_usable_size(ptr));
}

/* Hooks are installed (and the profiler maybe on). A small block without
 * alignment has its size class's size, from the table the front caches
 * use: no lookup of the block's size. Not cold: with a hook installed this
 * is every allocation's path. */
static void *alloc_hooked(ra_tag_t tag, size_t size, int flags)
{
    void *p;

    if (ra__prof_samples(tag, size))
        return ra__report_alloc(ra__alloc_sampled_or_plain(tag, size, flags));
    p = ra__alloc_plain(tag, size, flags);
    if ((flags & RA__LG_ALIGN_BITS) == 0 && size <= ra__small_max)
        return ra__hooks_on_alloc_of(p, ra__small_class(size));
    return ra__report_alloc(p);
}

/* The countdown ran out (or was never drawn). */
RA__COLD static void *alloc_tick_slow(ra_tag_t tag, size_t size, int flags)
{
    if (ra__prof_tick_slow(size))
        return ra__alloc_sampled_or_plain(tag, size, flags);
    return ra__alloc_plain(tag, size, flags);
}

/* The other bits of the instrumentation word, once the tag is known.
 * Inlined into the entry, whose hit then ends in the front cache's pop. */
__attribute__((always_inline)) static inline void *
alloc_with_rest(unsigned instrumented, ra_tag_t tag, size_t size, int flags)
{
    instrumented &= ~RA__INSTRUMENT_LIBRARY;
    if (RA__LIKELY(instrumented == 0) && flags == 0 && tag != RA_TAG_NONE)
        return ra__alloc_tagged_fast(tag, size);
    if (instrumented == 0 ||
        (instrumented == RA__INSTRUMENT_PROF &&
         (tag == RA_TAG_NONE || ra__prof_countdown_holds(size))))
        return ra__alloc_plain(tag, size, flags);
    if (instrumented != RA__INSTRUMENT_PROF)
        return alloc_hooked(tag, size, flags);
    return alloc_tick_slow(tag, size, flags);
}

/* The thread's cache did not know caller. */
RA__COLD static void *alloc_missed(const void *caller, unsigned instrumented,
                                   size_t size, int flags)
{
    return alloc_with_rest(instrumented, ra__by_library_miss(caller), size,
                           flags);
}

/* Hooks are installed, the profiler's countdown ran out, or tags by
 * calling object are on: then an allocation with no tag (and no arena or
 * thread cache of the caller's own), outside the library's own work (a
 * quiet section, whose allocations are the library's, untagged), takes
 * the tag of caller's object, and goes on as the other bits say. Forced
 * inline in both entries (the compiler kept it apart, a register shuffle
 * and a jump more on every instrumented allocation), so that each ends in
 * tail calls, and a hit in the cache needs no stack frame. */
__attribute__((always_inline)) static inline void *
alloc_instrumented(const void *caller, unsigned instrumented, ra_tag_t tag,
                   size_t size, int flags)
{
    /* A pushed tag with tags by calling object on and nothing else: the
     * plain tagged path, first, in the fewest instructions. */
    if (RA__LIKELY(instrumented == RA__INSTRUMENT_LIBRARY) &&
        tag != RA_TAG_NONE && flags == 0)
        return ra__alloc_tagged_fast(tag, size);
    if (instrumented & RA__INSTRUMENT_LIBRARY) {
        if (tag == RA_TAG_NONE && (flags & RA__CACHE_ARENA_BITS) == 0 &&
            ra__hooks_muted == 0) {
            tag = ra__by_library_cached(caller);
            if (RA__UNLIKELY(tag == RA_TAG_NONE))
                return alloc_missed(caller, instrumented, size, flags);
        }
        return alloc_with_rest(instrumented, tag, size, flags);
    }
    if (instrumented != RA__INSTRUMENT_PROF)
        return alloc_hooked(tag, size, flags);
    return alloc_tick_slow(tag, size, flags);
}

/* Reached by a tail call from every entry that can end in one (malloc,
 * calloc, realloc of NULL, aligned_alloc, memalign, valloc, pvalloc, the
 * mallocx family): the return address is the entry's caller's. */
void *ra__alloc_instrumented(unsigned instrumented, ra_tag_t tag,
                             size_t size, int flags)
{
    return alloc_instrumented(__builtin_return_address(0), instrumented,
                              tag, size, flags);
}

/* The entries that cannot end in a tail call (posix_memalign, operator
 * new) name their caller themselves. */
void *ra__alloc_instrumented_from(const void *caller, unsigned instrumented,
                                  ra_tag_t tag, size_t size, int flags)
{
    return alloc_instrumented(caller, instrumented, tag, size, flags);
}

/* The page table knows the class of a tagged small block that a front
 * cache has held: its size without a lookup of the block. Out of line: it
 * calls out and goes on, so inlined it would make free save registers on
 * every call, hooked or not. */
void ra__free_hooked(void *ptr)
{
    ra_tag_t tag = ra__block_tag(ptr);
    unsigned bin;

    if (tag == RA_TAG_NONE) {
        ra__report_free(ptr);
        ra__free_untagged(ptr);
        return;
    }
    /* No page table (it could not be mapped): no front caches either. */
    bin = ra__page_entry_bin(ra__page_bin != NULL ? ra__page_bin_get(ptr)
                                                  : RA__PAGE_UNCACHED);
    if (bin < RA__MAX_BINS)
        ra__hooks_on_free_of(tag, ptr, ra__bin_size[bin]);
    else
        ra__report_free(ptr);
    ra__free_tagged_fast(ptr, tag);
}

/* Floor: API. jemalloc's non-standard API, exported for programs that detect
 * jemalloc and call it on blocks from malloc (folly, RocksDB): routed like
 * the malloc family, so a tagged block never reaches jemalloc's own thread
 * cache, where the next untagged malloc would reuse it. */
#define RA__JEMALLOC_NAMES_ALLOWED
#include "paths.h"

/* Without an arena or a thread cache, the current tag. A caller's own
 * arena or thread cache is jemalloc's to honour, untagged; a tag's arena
 * named by a caller who looked it up means that tag. */
RA_EXPORT void *mallocx(size_t size, int flags)
{
    ra_tag_t tag = ra__tag_stack.top;

    if ((flags & RA__CACHE_ARENA_BITS) != 0) {
        tag = ra__pool_owner(RA__FLAGS_ARENA(flags));
        if (tag != RA_TAG_NONE)
            flags &= RA__BLOCK_BITS;
    }
    return ra__alloc_as(tag, size, flags);
}

RA_EXPORT void *rallocx(void *ptr, size_t size, int flags)
{
    if (ptr == NULL)
        return mallocx(size, flags);
    return ra__realloc_as(ptr, size, flags);
}

RA_EXPORT size_t xallocx(void *ptr, size_t size, size_t extra, int flags)
{
    return ra__resize_in_place(ptr, size, extra, flags);
}

RA_EXPORT size_t sallocx(const void *ptr, int flags)
{
    (void)flags;
    return ra_malloc_usable_size(ptr);
}

RA_EXPORT void dallocx(void *ptr, int flags)
{
    if (ptr != NULL)
        ra__free_as(ptr, 0, flags);
}

RA_EXPORT void sdallocx(void *ptr, size_t size, int flags)
{
    if (ptr != NULL)
        ra__free_as(ptr, size, flags);
}

RA_EXPORT size_t nallocx(size_t size, int flags)
{
    return ra__je_nallocx(size, flags);
}

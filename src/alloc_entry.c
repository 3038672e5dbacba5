/* Floor: paths. The allocation entry points: the library's own (ra_malloc,
 * ra_free, ra_calloc, ra_aligned_alloc, ...) and those the overrides share
 * (ra__alloc_as, ra__free_as, ra__alloc_aligned). Each instantiates
 * paths.h's bodies, which choose the plain path (alloc.c) or the
 * instrumented one (alloc_hooked.c): this file is above both, so that
 * neither calls the other back. */
#include <errno.h>

#include "paths.h"

static inline void *alloc_as(ra_tag_t tag, size_t size, int flags)
{
    return ra__alloc_with(
        atomic_load_explicit(&ra__instrumented, memory_order_relaxed), tag,
        size, flags);
}

void *ra_malloc(size_t size)
{
    return ra__malloc_entry(size);
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
        return ra__fail_enomem();
    return alloc_as(ra__tag_stack.top, total, MALLOCX_ZERO);
}

void ra_free(void *ptr)
{
    ra__free_entry(ptr);
}

/* The size is not trusted (ra__free_tagged): the same path as free. */
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
        ra__report_free(ptr);
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

/* An entry that cannot end in a tail call names its caller for the tags
 * by calling object: only while they are on does it cost more than the
 * call it would make anyway. */
void *ra__alloc_from(const void *caller, size_t align, size_t size)
{
    unsigned instrumented =
        atomic_load_explicit(&ra__instrumented, memory_order_relaxed);

    if (RA__UNLIKELY(instrumented & RA__INSTRUMENT_LIBRARY) &&
        (align & (align - 1)) == 0)
        return ra__alloc_instrumented_from(
            caller, instrumented, ra__tag_stack.top, size,
            align == 0 ? 0 : MALLOCX_ALIGN(align));
    return align == 0 ? ra_malloc(size) : ra_aligned_alloc(align, size);
}

/* glibc's posix_memalign sets errno to ENOMEM as well as returning it
 * (glibc's tst-malloc-thread-fail checks both); EINVAL leaves errno. */
int ra_posix_memalign(void **out, size_t align, size_t size)
{
    void *p;

    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    p = ra__alloc_from(__builtin_return_address(0), align, size);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

/* The library's own memory: one allocator for its tables, thread states,
 * copies and snapshots, apart from every path that users hook or tag. */
#include "ra_jemalloc.h"

#include "internal.h"

/* Uncached: a thread cache would keep the library's blocks among the
 * program's, and the automatic one mixes arenas. No arena named: jemalloc's
 * own choice, never a tag's. */
#define META_FLAGS MALLOCX_TCACHE_NONE

#ifdef RA_TSAN
/* A ThreadSanitizer build (--enable-tsan, which implies --disable-override):
 * jemalloc is not instrumented, so memory it hands from one thread to
 * another looks like a race. The library's own memory comes from the
 * sanitizer's malloc instead, which it understands. */
#include <stdlib.h>

void *ra__meta_alloc(size_t size)
{
    return malloc(size == 0 ? 1 : size);
}

void *ra__meta_calloc(size_t n, size_t size)
{
    return calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);
}

void *ra__meta_realloc(void *ptr, size_t size)
{
    return realloc(ptr, size == 0 ? 1 : size);
}

void ra__meta_free(void *ptr)
{
    free(ptr);
}
#else
void *ra__meta_alloc(size_t size)
{
    return ra__je_mallocx(size == 0 ? 1 : size, META_FLAGS);
}

void *ra__meta_calloc(size_t n, size_t size)
{
    size_t total;

    if (__builtin_mul_overflow(n, size, &total))
        return NULL;
    return ra__je_mallocx(total == 0 ? 1 : total, META_FLAGS | MALLOCX_ZERO);
}

void *ra__meta_realloc(void *ptr, size_t size)
{
    if (ptr == NULL)
        return ra__meta_alloc(size);
    return ra__je_rallocx(ptr, size == 0 ? 1 : size, META_FLAGS);
}

void ra__meta_free(void *ptr)
{
    if (ptr != NULL)
        ra__je_dallocx(ptr, META_FLAGS);
}
#endif

/* Floor: API. The malloc-family symbols, with glibc's semantics: malloc
 * and free themselves (the paths' inline entries), thin forwards to
 * alloc.c and realloc.c for the rest, and the check of what malloc is
 * bound to. */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dynsym.h"
#include "paths.h"

/* C23 names that glibc 2.36 does not declare yet. */
RA_EXPORT void free_sized(void *ptr, size_t size);
RA_EXPORT void free_aligned_sized(void *ptr, size_t align, size_t size);

RA_EXPORT void *calloc(size_t n, size_t size)
{
    return ra_calloc(n, size);
}

RA_EXPORT void *realloc(void *ptr, size_t size)
{
    return ra_realloc(ptr, size);
}

RA_EXPORT void *reallocarray(void *ptr, size_t n, size_t size)
{
    size_t total;

    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return ra_realloc(ptr, total);
}

/* The process allocator's two busiest names: ra_malloc's and ra_free's
 * code (paths.h), instantiated here under their own names. */
RA_EXPORT void *malloc(size_t size)
{
    return ra__malloc_entry(size);
}

RA_EXPORT void free(void *ptr)
{
    ra__free_entry(ptr);
}

/* This library's own malloc, whatever the dynamic linker bound "malloc"
 * to (ra__override_check compares them). GCC wants an alias to carry its
 * target's attributes (the C library's declaration of malloc); clang has
 * no copy attribute, and no such wish. */
#if defined(__clang__)
#define SAME_ATTRIBUTES_AS(f)
#else
#define SAME_ATTRIBUTES_AS(f) copy(f),
#endif
extern void *ra__own_malloc(size_t size) __attribute__((
    alias("malloc"), SAME_ATTRIBUTES_AS(malloc) visibility("hidden")));

RA_EXPORT void free_sized(void *ptr, size_t size)
{
    ra_free_sized(ptr, size);
}

/* Neither hint is trusted (ra_free_sized): a plain free. */
RA_EXPORT void free_aligned_sized(void *ptr, size_t align, size_t size)
{
    (void)align;
    (void)size;
    ra_free(ptr);
}

RA_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    return ra_aligned_alloc(align, size);
}

RA_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    return ra_posix_memalign(out, align, size);
}

/* glibc's memalign rounds a non-power-of-two alignment up to the next power
 * of two and rejects one above SIZE_MAX / 2 + 1 with EINVAL. */
RA_EXPORT void *memalign(size_t align, size_t size)
{
    size_t pow2 = 1;

    if (align > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return NULL;
    }
    while (pow2 < align)
        pow2 <<= 1;
    return ra__alloc_aligned(pow2, size);
}

RA_EXPORT void *valloc(size_t size)
{
    return ra__alloc_aligned((size_t)sysconf(_SC_PAGESIZE), size);
}

RA_EXPORT void *pvalloc(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t rounded;

    if (__builtin_add_overflow(size, page - 1, &rounded)) {
        errno = ENOMEM;
        return NULL;
    }
    rounded &= ~(page - 1);
    return ra__alloc_aligned(page, rounded == 0 ? page : rounded);
}

RA_EXPORT size_t malloc_usable_size(void *ptr)
{
    return ra_malloc_usable_size(ptr);
}

/* At load, so that a program that never calls the library hears of it
 * too; not with REGIONALLOC=0, where nothing is tagged anyway. What counts
 * is the definition that calls reach, the first in the global scope: not
 * what dlsym says, which for a non-PIE executable that takes malloc's
 * address is a PLT stub of the executable's own. */
void ra__override_check(void)
{
    void *bound = ra__dynsym_first_definition("malloc");
    Dl_info info;
    char msg[768];

    if (ra__config_peek_is("REGIONALLOC", "0") || bound == NULL ||
        bound == (void *)ra__own_malloc)
        return;
    snprintf(msg, sizeof msg,
             "regionalloc: malloc is bound to %.400s, not to libregionalloc, "
             "which was linked or loaded after it (link -lregionalloc first, "
             "or preload it); plain malloc, free and operator new are not "
             "tagged in this process",
             dladdr(bound, &info) != 0 && info.dli_fname != NULL
                 ? info.dli_fname
                 : "another library");
    ra__warn(msg);
}

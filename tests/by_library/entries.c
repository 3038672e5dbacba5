/* A test library of check_by_library: each of the C allocation entries,
 * called from this object's code (never as a tail call, so that the
 * return address the library sees is here). Built twice, as
 * libbylib_entries.so (linked by the suite) and libbylib_loaded.so
 * (dlopened), from this one source, so that both have the same code at
 * the same offsets. */
#include <malloc.h>
#include <stdlib.h>

/* jemalloc's names, which libregionalloc exports. */
void *mallocx(size_t size, int flags);
void *rallocx(void *ptr, size_t size, int flags);

#define ALIGN 64

/* Allocates size bytes through entry e (enum bylib_entry in the suite);
 * *out is NULL on failure or for an unknown entry. */
void bylib_alloc(int e, size_t size, void **out);
void bylib_alloc(int e, size_t size, void **out)
{
    void *p = NULL;

    switch (e) {
    case 0: p = malloc(size); break;
    case 1: p = calloc(1, size); break;
    case 2: p = realloc(NULL, size); break;
    case 3: p = reallocarray(NULL, 1, size); break;
    case 4: if (posix_memalign(&p, ALIGN, size) != 0) p = NULL; break;
    case 5: p = aligned_alloc(ALIGN, size); break;
    case 6: p = memalign(ALIGN, size); break;
    case 7: p = valloc(size); break;
    case 8: p = pvalloc(size); break;
    case 9: p = mallocx(size, 0); break;
    case 10: p = rallocx(NULL, size, 0); break;
    default: break;
    }
    *out = p;
}

/* realloc from this object's code: the block keeps its tag. */
void bylib_realloc(void **p, size_t size);
void bylib_realloc(void **p, size_t size)
{
    *p = realloc(*p, size);
}

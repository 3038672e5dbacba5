/* A test library of check_by_library whose constructor allocates. Built
 * twice from this one source: libbylib_ctor.so, linked by the suite (its
 * constructor runs at start), and libbylib_ctor_loaded.so, dlopened (its
 * constructor runs inside dlopen, with the loader's lock held). The
 * constructor and bylib_ctor_alloc allocate at one call site, so that what
 * the constructor's allocation taught a thread's cache is what a later
 * call finds. */
#include <stdlib.h>

void *bylib_ctor_first(void);
void *bylib_ctor_alloc(size_t size);

/* Static: the dlopened copy's must not bind to the linked copy's. */
static void *first;

/* The one call site; not a tail call, so that the return address is
 * here whoever calls. */
__attribute__((noinline)) static void *make(size_t size)
{
    void *p = malloc(size);

    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

__attribute__((constructor)) static void at_load(void)
{
    first = make(777);
}

/* The constructor's block. */
void *bylib_ctor_first(void)
{
    return first;
}

void *bylib_ctor_alloc(size_t size)
{
    return make(size);
}

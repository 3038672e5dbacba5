/* tests/: DEFINE_SITE(name), the call sites the profiler tests profile
 * (tests/check_prof_dump.c, tests/prof_dump_demo.c). The including file
 * defines MAX_BLOCKS, blocks[MAX_BLOCKS] and nblocks, which the sites fill,
 * and SITE_ON_NULL(name), the statement a site runs when ra_malloc_tag
 * fails (the NULL is kept in blocks[] unless it leaves). */
#ifndef TESTS_PROF_SITES_H
#define TESTS_PROF_SITES_H

#include <string.h>

#include <regionalloc.h>

/* Each site allocates n blocks of size bytes under tag and keeps them in
 * blocks[]. Not inlined, and the call not in tail position, so that each
 * site is a frame of its own, the innermost of its stacks. */
#define DEFINE_SITE(name)                                                   \
    __attribute__((noinline)) void name(ra_tag_t tag, size_t n,            \
                                        size_t size);                       \
    __attribute__((noinline)) void name(ra_tag_t tag, size_t n,            \
                                        size_t size)                        \
    {                                                                       \
        for (size_t i = 0; i < n && nblocks < MAX_BLOCKS; i++) {            \
            void *p = ra_malloc_tag(tag, size);                             \
            if (p == NULL)                                                  \
                SITE_ON_NULL(name);                                         \
            else                                                            \
                memset(p, 0x5a, size);                                      \
            blocks[nblocks++] = p;                                          \
        }                                                                   \
        __asm__ volatile("" ::: "memory");                                  \
    }

#endif /* TESTS_PROF_SITES_H */

/* tests/test_by_library.sh's linked library (libbylib_linked.so, in the
 * program's DT_NEEDED): known live bytes through each C entry point, and
 * a block that libc makes for it (strdup), which counts in libc. */
#include <stdlib.h>
#include <string.h>

/* The blocks it holds, seen from outside so that the compiler keeps
 * them: size classes, so that the usable sizes the tags count are the
 * sizes asked for. */
void *linked_held[4];

/* 4096 + 16384 + 8192 + 1024 bytes; returns the first block, which the
 * program reallocates (its tag stays this library's). */
void *linked_hold(void)
{
    char *p;

    linked_held[0] = malloc(4096);
    linked_held[1] = calloc(16, 1024);
    p = malloc(64);
    linked_held[2] = realloc(p, 8192);
    if (posix_memalign(&linked_held[3], 64, 1024) != 0)
        linked_held[3] = NULL;
    return linked_held[0];
}

/* A string of 1 MiB - 1 bytes that strdup, libc's code, copies into a
 * block of 1 MiB: libc's, not this library's. */
char *linked_strdup(void)
{
    static char text[(1 << 20) - 1 + 1];
    memset(text, 'x', sizeof text - 1);
    return strdup(text);
}

/* One block of n bytes, allocated by this library's code. */
void *linked_extra(size_t n)
{
    return malloc(n);
}

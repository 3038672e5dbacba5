/* tests/test_by_library.sh's dlopened library, built twice from this
 * file (libbylib_loaded_a.so and _b.so, the same code at the same
 * offsets): the program loads a, unloads it, then loads b, which the
 * loader may map where a was, so that b's calls return to a's
 * addresses. */
#include <stdlib.h>

void *loaded_held[3];

/* 32768, 8192 and 640 bytes, times scale (1 or 2: size classes both). */
void loaded_hold(size_t scale)
{
    loaded_held[0] = malloc(32768 * scale);
    if (posix_memalign(&loaded_held[1], 4096, 8192 * scale) != 0)
        loaded_held[1] = NULL;
    loaded_held[2] = aligned_alloc(64, 640 * scale);
}

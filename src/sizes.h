/* Sizes as users give them: the arithmetic on limits, which saturates: a
 * limit, a budget or a room is any size_t a user can write, up to
 * 2^64 - 1, and a sum or a difference of two of them must neither wrap nor
 * change sign. No dependency on the rest of the library (the tools read
 * the segment's limit with it). */
#ifndef RA_SIZES_H
#define RA_SIZES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* More than a 64-bit Linux process can map, so more than its resident set
 * can ever be (x86-64's five-level page tables give a process 2^56 bytes,
 * arm64 and ppc64 2^52): a memory limit at or above is no limit in effect.
 * It is kept as given (ra_memory_limit returns it, the reports show it),
 * but nothing watches it and nothing is refused under it. */
#define RA__ADDRESS_SPACE ((size_t)1 << 56)

/* -- the arithmetic ---------------------------------------------------------- */

/* a + b, or SIZE_MAX when that does not fit. */
static inline size_t ra__size_add(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* a - b, or 0 when b is the larger. */
static inline size_t ra__size_sub(size_t a, size_t b)
{
    return a > b ? a - b : 0;
}

/* percent% of n (percent at most 100), rounded down, without the n * 100
 * that would wrap for an n above 2^57. */
static inline size_t ra__size_percent(size_t n, unsigned percent)
{
    return n / 100 * percent + n % 100 * percent / 100;
}

/* Whether a memory limit of bytes is watched and enforced: not 0 (none),
 * not at or above the address space (none in effect). */
static inline bool ra__limit_in_effect(size_t bytes)
{
    return bytes != 0 && bytes < RA__ADDRESS_SPACE;
}

#endif

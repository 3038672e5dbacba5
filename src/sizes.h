/* Sizes as users give them: their syntax (sizes.c, compiled into the
 * library and into tools/regionalloc, so that the tool refuses exactly the
 * values the library would), and the arithmetic on limits, which
 * saturates: a limit, a budget or a headroom is any size_t a user can write,
 * up to 2^64 - 1, and a sum or a difference of two of them must neither
 * wrap nor change sign. No dependency on the rest of the library. */
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

/* -- sizes.c: the syntax ---------------------------------------------------- */

/* Each returns NULL when s is valid, else why not: a phrase for a message
 * ("more than 2^64 - 1 bytes"), and the outputs untouched. */

/* "<digits>[K|M|G|T][i][B]" (the suffix case-insensitive, binary
 * multiples; "i" only after a multiple) into *out: nothing before or after
 * it, no sign, at most 2^64 - 1. */
const char *ra__parse_size(const char *s, size_t *out);
/* A memory limit (REGIONALLOC_MEMORY_LIMIT, regionalloc run
 * --memory-limit): a size above 0 into *bytes (*percent 0), or "N%", N
 * from 1 to 100, of the cgroup's limit into *percent (*bytes 0). A size at
 * or above RA__ADDRESS_SPACE is valid: no limit in effect. */
const char *ra__parse_memory_limit(const char *s, size_t *bytes,
                                   unsigned *percent);
/* REGIONALLOC_PROF's mean sampling interval (regionalloc run --prof's):
 * a size above 0. */
const char *ra__parse_prof_interval(const char *s, size_t *out);
/* One entry of REGIONALLOC_LIMITS, "name=HARD[/SOFT]" (len bytes at e, no
 * NUL needed): the name is e's first *name_len bytes (1 to
 * RA_TAG_NAME_MAX), the sizes 0 for none, the soft limit not above a hard
 * one. */
const char *ra__parse_budget(const char *e, size_t len, size_t *name_len,
                             size_t *hard, size_t *soft);

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

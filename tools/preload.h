/* How regionalloc run names the library in LD_PRELOAD (tools/preload.c). */
#ifndef REGIONALLOC_PRELOAD_H
#define REGIONALLOC_PRELOAD_H

#include <stdbool.h>
#include <stddef.h>

/* Writes to out (size bytes) a path of library that LD_PRELOAD can hold:
 * the path itself, its real path, or a symbolic link to that in a private
 * directory of the user's. Returns true when there is none, with why
 * (whylen bytes) saying what failed. */
bool preload_name(const char *library, char *out, size_t size, char *why,
                  size_t whylen);

#endif

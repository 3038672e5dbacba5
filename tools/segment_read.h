/* What segment.c, which finds a process's segment, asks of
 * segment_read.c, which reads one file of it. */
#ifndef REGIONALLOC_TOP_SEGMENT_READ_H
#define REGIONALLOC_TOP_SEGMENT_READ_H

#include <stdbool.h>
#include <sys/types.h>

#include "segment.h"

/* Whose a segment must be: the process's (effective) user; anyone's once
 * the process is gone, when the segment is stale whoever made it. */
struct owner {
    long pid;
    bool anyone;
    uid_t uid;
};

/* Writes what is wrong into why (WHY_MAX bytes). Returns true, the
 * failure of the functions that report through why. */
__attribute__((format(printf, 2, 3)))
bool fail_with(char *why, const char *fmt, ...);

/* Reads the file name in dirfd, which want must own, into *c: READ_GONE
 * if there is no such file; otherwise why says what is wrong if it is not
 * READ_OK. */
enum read_result read_segment_file(int dirfd, const char *name,
                                   const struct owner *want,
                                   struct segment_copy *c, char *why);

#endif

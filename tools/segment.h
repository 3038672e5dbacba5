/* The reader of live stats segments: what regionalloc-top's other files
 * use to find segments, copy them consistently and tell stale ones. */
#ifndef REGIONALLOC_TOP_SEGMENT_H
#define REGIONALLOC_TOP_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm_layout.h"

/* The size of the why buffers the read functions write what is wrong
 * into, a line without a newline. */
#define WHY_MAX 200

/* One consistent, checked copy of a segment. Zero-initialise it before the
 * first read; reads into it reuse records, which the caller frees. */
struct segment_copy {
    struct ra_shm_header header;
    struct ra_shm_record *records; /* header.nrecords of them */
    uint32_t room;                 /* records allocated */
    uint64_t taken_ns;             /* CLOCK_MONOTONIC when copied */
};

enum read_result { READ_OK, READ_GONE, READ_FAILED };

/* Turns a SIGBUS from a segment that shrinks under a read into a failed
 * read instead of death. Call it once, before the first read. */
void catch_bus_errors(void);

/* Writes dir's path to the segment of pid into buf, cut to size. */
void segment_path(char *buf, size_t size, const char *dir, long pid);

/* Reads the segment called name in dirfd into *c, neither following a link
 * nor blocking on a FIFO. READ_GONE: there is no such file; READ_FAILED:
 * why (WHY_MAX bytes) says what is wrong. */
enum read_result read_segment(int dirfd, const char *name,
                              struct segment_copy *c, char *why);

/* read_segment of pid's segment, which must also name pid in its header:
 * another pid there makes it READ_FAILED, stale. */
enum read_result read_pid_segment(int dirfd, long pid, struct segment_copy *c,
                                  char *why);

/* Nanoseconds from the last publication to the copy into *age; false, and
 * *age untouched, if there was none. */
bool segment_age(const struct segment_copy *c, uint64_t *age);

/* Whether pid names no process at all (a process of another user is
 * alive: EPERM). */
bool process_gone(long pid);

/* Why the segment of pid is stale, written into buf, or NULL if it is not
 * (or cannot be told). */
const char *stale_reason(int dirfd, long pid, char *buf, size_t size);

/* The pids of the segments in dirfd, sorted; *n of them, to free. NULL
 * (errno set) on failure. */
long *list_segments(int dirfd, size_t *n);

#endif

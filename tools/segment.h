/* The reader of live stats segments: what regionalloc-top's and
 * regionalloc's other files use to find segments, copy them consistently
 * and tell stale ones (segment.c, segment_read.c). */
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

/* READ_FOREIGN: the files named after the process belong to another user
 * than the process's: none is its segment. READ_STALE: the copy is good,
 * but names another pid than its file. READ_VERSION: the file is a
 * segment of another version of the layout (a process of an older or a
 * newer library), which this reader does not read. */
enum read_result {
    READ_OK, READ_GONE, READ_FAILED, READ_FOREIGN, READ_STALE, READ_VERSION
};

/* The bytes of a segment's name, NUL included: "regionalloc.", a pid, and
 * perhaps a fallback's suffix. */
#define SEGMENT_NAME_MAX 48

/* A file whose name is a segment's, and the pid in the name. */
struct segment_entry {
    long pid;
    char name[SEGMENT_NAME_MAX];
};

/* Turns a SIGBUS from a segment that shrinks under a read into a failed
 * read instead of death. Call it once, before the first read. */
void catch_bus_errors(void);

/* Writes the path of the file name in dir into buf, cut to size. */
void segment_path(char *buf, size_t size, const char *dir, const char *name);

/* Reads the segment of pid in dirfd into *c, neither following a link nor
 * blocking on a FIFO: regionalloc.<pid> if the process's user owns it,
 * else a fallback name that user owns (any owner will do once the process
 * is gone: the segment is stale then). name (SEGMENT_NAME_MAX bytes)
 * gets the name of the file read or refused. READ_GONE: there is no such
 * file; otherwise why (WHY_MAX bytes) says what is wrong if it is not
 * READ_OK. */
enum read_result read_pid_segment(int dirfd, long pid, struct segment_copy *c,
                                  char *name, char *why);

/* Nanoseconds from the last publication to the copy into *age; false, and
 * *age untouched, if there was none. */
bool segment_age(const struct segment_copy *c, uint64_t *age);

/* Whether pid names no process at all (a process of another user is
 * alive: EPERM). */
bool process_gone(long pid);

/* Why the file e is stale, written into buf, or NULL if it is not (or
 * cannot be told): its process is gone, is another user's than the file,
 * or is not the one the file names. */
const char *stale_reason(int dirfd, const struct segment_entry *e, char *buf,
                         size_t size);

/* Says on stderr, after program's name, what is wrong (why) with the file
 * name in dir. */
void print_segment_error(const char *program, const char *dir,
                         const char *name, const char *why);

/* Reads the segment of pid in dirfd, the directory dir, into *c, as
 * read_pid_segment does: 0, or 1 after saying what is wrong on stderr
 * (print_segment_error), a process that does not publish included. */
int read_segment_or_say(const char *program, int dirfd, const char *dir,
                        long pid, struct segment_copy *c);

/* The files of dirfd named as segments, sorted by pid, then name; *n of
 * them, to free. NULL (errno set) on failure. */
struct segment_entry *list_segments(int dirfd, size_t *n);

#endif

/* Text for people and for programs: byte units, rates, intervals, names
 * escaped for the terminal, and the JSON document of a segment. Each
 * format_* writes at most size bytes into buf, NUL included, and returns
 * buf. */
#ifndef REGIONALLOC_TOP_FORMAT_H
#define REGIONALLOC_TOP_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "segment.h"

/* A tag name escaped for the terminal: up to 4 characters a byte. */
#define SHOWN_NAME_MAX (4 * RA_SHM_NAME_MAX + 1)

/* Bytes in binary units: "512 B", "1.5 MiB". */
const char *format_size(char *buf, size_t size, uint64_t n);
/* A signed byte rate: "+1.5 MiB/s", "-512 B/s", "0 B/s". */
const char *format_byte_rate(char *buf, size_t size, double rate);
/* A count a second: "12/s", "15.0k/s", "20.0M/s". */
const char *format_count_rate(char *buf, size_t size, double rate);
/* "2s" in whole seconds, else "500ms". */
const char *format_interval(char *buf, size_t size, uint64_t ns);
/* The line of n tags not shown, as the library's text report names it:
 * "(2,950 more tags)", "(1 more tag)". */
#define REST_NAME_MAX 40
const char *format_rest(char *buf, size_t size, size_t n);

/* The names the library's reports give a segment's pressure level and
 * the limit's source ("none", "high", "limit"; "none", "call",
 * "environment", "cgroup"); "unknown" for a number this reader does not
 * know. */
const char *pressure_level_name(uint32_t level);
const char *limit_source_name(uint32_t source);

/* Copies the first len bytes of in (fewer at a NUL) into out, escaped so
 * that they can be shown on a terminal; out is always NUL-terminated.
 * Returns the length written. */
size_t escape_for_terminal(char *out, size_t size, const char *in,
                           size_t len);

/* Prints the "process:" line of the library's text report: the parts of
 * the process's RssAnon (and how far the named parts exceed it, when they
 * do); with kernel, the second line too: the kernel's other figures and
 * the cgroup's. */
void print_parts(const struct ra_shm_parts *p, bool kernel);

/* Prints the copy as one JSON document on stdout, stale saying whether its
 * process is gone (doc/regionalloc-top.1 shows its keys). */
void print_json(const struct segment_copy *c, bool stale);

#endif

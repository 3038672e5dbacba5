/* Helpers shared by the Check suites. */
#ifndef RA_TESTUTIL_H
#define RA_TESTUTIL_H

#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "regionalloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A tag name with everything that needs care: a space, quotes, printf
 * directives, a backslash, a newline, a tab, control bytes, DEL, valid UTF-8
 * (2, 3 and 4 bytes), a stray byte, an overlong form, a surrogate and a cut
 * sequence at the end. */
#define TU_NASTY                                                            \
    "sp ace\"q%s%n\\b\nn\tt\x01\x7f"                                        \
    "\xc3\xa9"                                                              \
    "\xe2\x82\xac"                                                          \
    "\xff"                                                                  \
    "\xc0\xaf"                                                              \
    "\xed\xa0\x80"                                                          \
    "\xf0\x9f\x98\x80"                                                      \
    "\xe2\x82"
/* TU_NASTY as ra_report and ra_checkpoint_report write it in each format
 * (regionalloc(3), ESCAPING). */
#define TU_NASTY_TEXT                                                       \
    "sp ace\"q%s%n\\\\b\\nn\\tt\\x01\\x7f"                                  \
    "\xc3\xa9"                                                              \
    "\xe2\x82\xac"                                                          \
    "\\xff\\xc0\\xaf\\xed\\xa0\\x80"                                        \
    "\xf0\x9f\x98\x80"                                                      \
    "\\xe2\\x82"
#define TU_NASTY_JSON                                                       \
    "sp ace\\\"q%s%n\\\\b\\nn\\tt\\u0001\\u007f"                            \
    "\xc3\xa9"                                                              \
    "\xe2\x82\xac"                                                          \
    "\\u00ff\\u00c0\\u00af\\u00ed\\u00a0\\u0080"                            \
    "\xf0\x9f\x98\x80"                                                      \
    "\\u00e2\\u0082"
#define TU_NASTY_PROMETHEUS                                                 \
    "sp ace\\\"q%s%n\\\\b\\nn\\\\x09t\\\\x01\\\\x7f"                        \
    "\xc3\xa9"                                                              \
    "\xe2\x82\xac"                                                          \
    "\\\\xff\\\\xc0\\\\xaf\\\\xed\\\\xa0\\\\x80"                            \
    "\xf0\x9f\x98\x80"                                                      \
    "\\\\xe2\\\\x82"

/* Runs every test of s, each in its own forked process (a test needs a fresh
 * library and may crash: never in-process), then frees the runner. Returns
 * EXIT_SUCCESS when all passed, else EXIT_FAILURE: main()'s exit status. */
int tu_run_suite(Suite *s);

/* ra_tag_create(name) that fails the test, naming errno, when it returns
 * RA_TAG_NONE. Returns the tag. */
ra_tag_t tu_tag_create(const char *name);

/* ra_tag_stats(tag) that fails the test when it fails. Returns the figures. */
ra_tag_stats_t tu_tag_stats(ra_tag_t tag);

/* jemalloc's allocated bytes in tag's arenas after a refresh: the tag's
 * live blocks and the blocks the library's caches and jemalloc's tcaches
 * keep of it (what ra_tag_stats' allocated leaves out). */
size_t tu_jemalloc_allocated(ra_tag_t tag);
/* Operations on the lock of the jemalloc bin that holds blocks of size,
 * summed over tag's arenas, after a refresh. */
uint64_t tu_bin_lock_ops(ra_tag_t tag, size_t size);
/* jemalloc's statistics epoch: how many refreshes the process took. */
uint64_t tu_jemalloc_epoch(void);

/* ra_tag_push(tag) and ra_tag_pop(tag) that fail the test when the call
 * fails. They make no passing assertion, which would allocate under tag. */
void tu_tag_push(ra_tag_t tag);
void tu_tag_pop(ra_tag_t tag);

/* The process's resident bytes from /proc/self/statm (the kernel's view). */
size_t tu_rss_bytes(void);
/* The process's resident anonymous bytes (RssAnon, /proc/self/status). */
size_t tu_rss_anon_bytes(void);

/* Runs fn in a forked child with the environment variables of env (a NULL-
 * terminated list of "NAME=value" strings) set first, so the library, which
 * reads its environment once, starts fresh under them. The child's stderr
 * (at most errlen - 1 bytes, NUL-terminated) is captured when err != NULL.
 * Returns the child's exit status (0..255), or 128 + signal number.
 * Call it before the calling process touches the library: a child inherits
 * a configuration already read. */
int tu_run_with_env(const char *const env[], int (*fn)(void), char *err,
                    size_t errlen);

/* Starts n threads running fn(arg) and joins them all. */
void tu_run_threads(unsigned n, void *(*fn)(void *), void *arg);

/* Makes the calling thread's pair of tag busy, as a thread that keeps
 * allocating in a tag becomes (its tcache taken: the pool counts it from
 * then on), by making and freeing TU_BUSY_BLOCKS small blocks under tag.
 * Returns false when an allocation failed. Calls no Check assertion: for
 * worker threads too. */
#define TU_BUSY_BLOCKS 10000u
bool tu_make_busy(ra_tag_t tag);

/* Tagged traffic under tag, rounds times: 2,048 small blocks of 8 to 3,000
 * bytes (front caches filled and overflowed), every 64th grown to a large
 * block and its neighbour shrunk by realloc, one grown past jemalloc's
 * oversize threshold (12 MiB, its first MiB written), a calloc and an
 * aligned block; all freed newest first. Returns false when an
 * allocation failed. Calls no Check assertion: for worker threads too. */
bool tu_tag_traffic(ra_tag_t tag, unsigned rounds);

/* A child entry point for tu_exec_self(): returns the child's exit status. */
struct tu_child {
    const char *name;
    int (*fn)(void);
};

/* Call first thing in main() of a suite that uses tu_exec_self(). When argv
 * is "<prog> --tu-child <name>", runs the entry of children (a table ended
 * by a NULL name) called name and leaves through exit(), so atexit handlers
 * and library destructors run; exits with 127 for an unknown name. Returns
 * otherwise. */
void tu_child_main(int argc, char **argv, const struct tu_child *children);

/* Runs this program again (/proc/self/exe) as the child called name, with
 * the variables of env (a NULL-terminated list of "NAME=value" strings) added
 * to its environment. Unlike tu_run_with_env() the child is a new process
 * image: jemalloc reads MALLOC_CONF afresh and constructors run again. The
 * child's stderr is captured as by tu_run_with_env(). Returns the child's
 * exit status (0..255), or 128 + signal number. */
int tu_exec_self(const char *const env[], const char *name, char *err,
                 size_t errlen);

/* Prints "file:line: check failed: what (errno N)" on stdout; used by
 * TU_REQUIRE in child functions, whose stderr is captured. */
void tu_child_failed(const char *file, int line, const char *what);

/* call returns -1 with errno err (errno cleared first). */
#define TU_FAILS_WITH(call, err)                                            \
    do {                                                                    \
        errno = 0;                                                          \
        ck_assert_int_eq((call), -1);                                       \
        ck_assert_int_eq(errno, (err));                                     \
    } while (0)

/* In a child function (int fn(void)): returns 1 after saying which check
 * failed when cond is false. */
#define TU_REQUIRE(cond)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            tu_child_failed(__FILE__, __LINE__, #cond);                     \
            return 1;                                                       \
        }                                                                   \
    } while (0)

/* Fills len bytes at p with a pattern of seed in which every byte depends on
 * its offset and its page, so that moved or lost data shows. Makes no
 * assertion: safe to call with a tag pushed. */
void tu_fill_pattern(void *p, size_t len, unsigned seed);

/* Returns the first offset below len at which p does not hold the pattern
 * tu_fill_pattern() wrote with seed, or len when all of it does. Makes no
 * assertion. */
size_t tu_check_pattern(const void *p, size_t len, unsigned seed);

/* Calls report(f, fmt) (ra_report or ra_checkpoint_report) on a memory
 * stream, fails the test if it fails, and returns what it wrote (NUL-
 * terminated; free() it). The stream's buffer is untagged when no tag is
 * pushed. */
char *tu_report_string(int (*report)(FILE *, ra_format_t), ra_format_t fmt);
/* The JSON report as a string to free(), or NULL when it cannot be had:
 * no Check assertion, for tu_exec_self's children. */
char *tu_json_report_or_null(void);
/* What ra_prof_dump(fmt, tag) writes, on a memory stream; the call must
 * succeed. NUL-terminated; *len (if not NULL) is its length. free() it.
 * Call with no tag pushed: the stream's buffer is then untagged, and never
 * sampled. */
char *tu_prof_dump_string(ra_prof_format_t fmt, ra_tag_t tag, size_t *len);

/* Number of '\n'-terminated lines in s; a trailing unterminated fragment
 * counts as one more. */
unsigned tu_count_lines(const char *s);
/* The line of a JSON report that holds the tag object named name (the
 * reports write one a line), as a string to free(); fails the test when
 * there is none. A value searched in it is the tag's own, not a later
 * tag's. */
char *tu_json_tag_line(const char *json, const char *name);
/* Number of times what occurs in s (overlapping occurrences counted). */
unsigned tu_count_of(const char *s, const char *what);
/* The first frame of function in s that follows before (e.g. ";" or
 * "\n |-- "): before, the function's name, then its place, " (file:line)"
 * where libdw found one, else "+0x<offset>". Returns where before starts,
 * or NULL. */
const char *tu_find_frame(const char *s, const char *before,
                          const char *function);

/* The VmData figure of /proc/self/status, in bytes. */
size_t tu_data_vm_bytes(void);

/* The whole file at path (it must open), NUL-terminated; "" if empty.
 * free() it. */
char *tu_read_file(const char *path);
/* The source tree's file at path (as "tests/x.table"), opened for reading:
 * under abs_top_srcdir or top_srcdir (make check gives them), else the
 * current directory. NULL if it cannot be. */
FILE *tu_open_source(const char *path);
/* Sleeps ms milliseconds, whatever signals come. */
void tu_sleep_ms(long ms);

/* Whether /proc/self/maps names a file whose name is stem followed by '.'
 * or '-' ("libdw": libdw.so.1, libdw-0.188.so). Allocates; calls no Check
 * assertion (for tu_exec_self's children too). */
bool tu_object_mapped(const char *stem);
/* tu_exec_self(env, name, err, errlen) with an empty file named soname
 * first in the child's LD_LIBRARY_PATH: the child finds it before the real
 * library and fails to load it ("file too short"), as after a broken
 * install. env may be NULL. */
int tu_exec_self_with_broken(const char *soname, const char *const env[],
                             const char *name, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif

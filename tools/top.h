/* What regionalloc-top's files share: the options, the view of one
 * process, and who owns what. regionalloc-top.c parses the options and
 * shows one table or JSON document; top_live.c redraws the table in
 * place; top_table.c writes the table; top_list.c lists the publishers
 * and removes stale segments. */
#ifndef REGIONALLOC_TOP_H
#define REGIONALLOC_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "segment.h"

#define PROGRAM "regionalloc-top"
#define NS_PER_S 1000000000.0

enum sort_key { SORT_ALLOCATED, SORT_RSS, SORT_MAPPED, SORT_NAME };

struct options {
    const char *dir;
    uint64_t interval_ns;
    bool interval_given, once, json, clean, tree;
    enum sort_key sort;
    long pid; /* 0: none given */
};

/* What the table shows: a copy, an earlier one for the rates (or NULL),
 * and whether the process is gone. */
struct view {
    const struct segment_copy *now, *before;
    long pid;
    bool stale;
    unsigned max_rows; /* 0: no limit */
    bool tree;         /* --tree: children under their parent */
    bool once;         /* --once: the whole "process:" section */
};

/* -- top_table.c ---------------------------------------------------------- */

/* The command of a live process, from /proc/<pid>/comm, escaped for the
 * terminal; "-" if unknown. */
void read_command(long pid, char *out, size_t size);

/* Prints the summary and a row per live tag, or as many as the terminal
 * holds and a line for the others. Returns true when out of memory. */
bool print_table(const struct view *v, enum sort_key key);

/* -- top_live.c ----------------------------------------------------------- */

/* The live view of o->pid, redrawn every interval until q, a signal, or
 * the segment's end. Returns the exit status. */
int show_live(const struct options *o, int dirfd);

/* -- top_list.c ----------------------------------------------------------- */

/* Lists the publishers. Returns 1 if a segment could not be read. */
int list_publishers(const struct options *o, int dirfd);

/* --clean: removes the user's stale segments. Returns 1 if one could not
 * be removed. */
int clean_stale(const struct options *o, int dirfd);

#endif

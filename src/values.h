/* The syntax of the environment's values that are not sizes (values.c,
 * compiled into the library and into tools/regionalloc, so that
 * regionalloc run refuses exactly the values the library would refuse or
 * ignore): the reports' format and files, the lists, tags by thread name.
 * No dependency on the rest of the library. */
#ifndef RA_VALUES_H
#define RA_VALUES_H

#include <stddef.h>

#include "regionalloc.h"

/* Entries of a list (REGIONALLOC_LIMITS, REGIONALLOC_THREAD_TAGS), at
 * most: the library ignores the others, with a line each. */
#define RA__LIST_MAX 64
/* A report's file (REGIONALLOC_STATS, _CHECKPOINTS, _PROF_DUMP): bytes at
 * most, as the kernel takes a path (PATH_MAX, its NUL included). */
#define RA__PATH_LEN 4095
/* A pattern of REGIONALLOC_THREAD_TAGS, bytes at most. */
#define RA__GLOB_LEN 63

/* Each returns NULL when the value is valid, else why not: a phrase for a
 * message ("longer than 4095 bytes"), and the outputs untouched. */

/* "text", "json" or "prometheus" into *out. */
const char *ra__parse_format(const char *s, ra_format_t *out);
/* A report's place: "stderr" or a file path, 1 to RA__PATH_LEN bytes. The
 * library reads an empty value as an unset one (no report); the tool
 * refuses it. */
const char *ra__parse_output(const char *s);
/* One rule of REGIONALLOC_THREAD_TAGS (len bytes at e, no NUL needed):
 * "GLOB=TAG", or "GLOB" alone (the tag named after the thread); the glob
 * is e's first *glob_len bytes (1 to RA__GLOB_LEN), the tag, when *glob_len < len,
 * the rest after the '=' (1 to RA_TAG_NAME_MAX bytes). */
const char *ra__parse_thread_tag(const char *e, size_t len,
                                 size_t *glob_len);

/* The next non-empty entry of the comma-separated list at *list, its
 * length in *len, *list moved past it; NULL at the list's end. */
const char *ra__list_next(const char **list, size_t *len);
/* Why the library would refuse an entry past RA__LIST_MAX. */
extern const char ra__list_too_long[];

/* A whole list as regionalloc run's --thread-tags and --limits give it:
 * NULL when it has an entry and the library takes every one, else why
 * not, with the entry at fault in *at and *len (the whole list when it has
 * no entry; the library would take it as none). */
const char *ra__check_thread_tags(const char *spec, const char **at,
                                  size_t *len);
const char *ra__check_limits(const char *spec, const char **at,
                             size_t *len);

#endif

/* The tags the module pushed on the calling thread's stack, bottom first.
 * Every push and pop of the module goes through here, so that a coroutine
 * that awaits (tasks.c) can take the tags it entered off the thread's stack
 * and put them back when it resumes, leaving other tasks on the same
 * thread their own stack. */
#ifndef RAPY_STACK_H
#define RAPY_STACK_H

#include "api.h"

/* Pushes tag on the thread's stack and records it: 0, or -1 with a Python
 * exception set (RuntimeError when not enabled, OSError EOVERFLOW when the
 * thread's stack is full: nothing changed). */
int rapy_stack_push(ra_tag_t tag);

/* Pops tag, which must be the top of the module's record and of the
 * thread's stack: 0, or -1 with RuntimeError set naming the tag (nothing
 * changed). */
int rapy_stack_pop(ra_tag_t tag);

/* How many tags the module has pushed on this thread and not popped. */
unsigned rapy_stack_depth(void);

/* The module's record for this thread, rapy_stack_depth() entries, bottom
 * first; valid until the thread's next push or pop. */
const ra_tag_t *rapy_stack_tags(void);

/* Pops every tag above depth, top first, and writes them to out bottom
 * first (out holds RA_TAG_STACK_MAX): returns how many. Used when a
 * coroutine suspends; rapy_stack_push puts them back when it resumes. */
unsigned rapy_stack_cut(unsigned depth, ra_tag_t *out);

#endif /* RAPY_STACK_H */

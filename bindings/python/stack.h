/* The tags the module pushed on the calling thread's stack, bottom first.
 * Every push and pop of the module goes through here, so that a coroutine
 * that awaits (coro.c) can take the tags it entered off the thread's stack
 * and put them back when it resumes, leaving other tasks on the same
 * thread their own stack; and so that Tag.destroy() knows whether a tag is
 * entered anywhere in the process, not only on the calling thread's stack
 * (all the library checks). */
#ifndef RAPY_STACK_H
#define RAPY_STACK_H

#include "api.h"

/* The library hands out tag ids 1 to 4000 at most (REGIONALLOC_MAX_TAGS'
 * bound): the module's tables are indexed by id. */
#define RAPY_IDS_MAX 4000u

/* Enters tag: pushes it on the thread's stack and records it, one more
 * entry of tag: 0, or -1 with a Python exception set (RuntimeError when
 * not enabled, OSError EOVERFLOW when the thread's stack is full: nothing
 * changed). */
int rapy_stack_push(ra_tag_t tag);

/* Leaves tag, which must be the top of the module's record and of the
 * thread's stack: pops it, one entry fewer. 0, or -1 with RuntimeError set
 * naming the tag (nothing changed). */
int rapy_stack_pop(ra_tag_t tag);

/* How many tags the module has pushed on this thread and not popped. */
unsigned rapy_stack_depth(void);

/* The module's record for this thread, rapy_stack_depth() entries, bottom
 * first; valid until the thread's next push or pop. */
const ra_tag_t *rapy_stack_tags(void);

/* Pops every tag above depth, top first, and writes them to out bottom
 * first (out has room for rapy_stack_depth() - depth): returns how many,
 * fewer when the library refuses a pop (a tag pushed above ours). Used
 * when a coroutine suspends: the tags stay entered, held by the coroutine,
 * until rapy_stack_restore puts them back when it resumes, or
 * rapy_stack_release drops them. */
unsigned rapy_stack_cut(unsigned depth, ra_tag_t *out);

/* Pushes tag, held (rapy_stack_cut, rapy_stack_hold), back on the thread's
 * stack: 0, or -1 as rapy_stack_push (still held). */
int rapy_stack_restore(ra_tag_t tag);

/* Counts tags[0..n) as entered and held off the stack (a coroutine made
 * to enter them when it first runs), or drops n such entries. */
void rapy_stack_hold(const ra_tag_t *tags, unsigned n);
void rapy_stack_release(const ra_tag_t *tags, unsigned n);

/* Where tag is entered: on threads' stacks (here: this thread's), and held
 * by suspended coroutines. */
struct rapy_entries {
    unsigned stacked, here, held;
};
void rapy_stack_entries(ra_tag_t tag, struct rapy_entries *out);

/* The lowest tag id above after and at most last that is entered anywhere
 * (on a stack or held), or RA_TAG_NONE: a walk of the counts alone, which
 * a destroy makes over the ids handed out, not the thread's record. */
ra_tag_t rapy_stack_next_entered(ra_tag_t after, ra_tag_t last);

#endif /* RAPY_STACK_H */

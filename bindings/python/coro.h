/* The coroutine wrapper, regionalloc.TaggedCoroutine (coro.c): what
 * tasks.c makes of a task's coroutine and of a decorated async function's. */
#ifndef RAPY_CORO_H
#define RAPY_CORO_H

#include "api.h"

/* Readies the wrapper's type and registers it as a
 * collections.abc.Coroutine: 0, or -1 with an exception set. */
int rapy_coro_ready(void);

/* Whether a Task runs obj as its coroutine (what asyncio.iscoroutine
 * accepts): 1, 0, or -1 with an exception set. */
int rapy_coro_is_coroutine(PyObject *obj);

/* A new wrapper of coro whose first step enters tags[0..n), bottom first:
 * they count as entered from now (Tag.destroy() refuses them) until the
 * coroutine ends. New reference, or NULL with an exception set. */
PyObject *rapy_coro_wrap(PyObject *coro, const ra_tag_t *tags, unsigned n);

/* coro as a task made now runs it: wrapped, the tags entered around the
 * task's creation below its own (a wrapper is itself, given them unless a
 * task already runs it or it has run); what is not a coroutine (the Task
 * refuses it) unchanged. New reference, or NULL with an exception set. */
PyObject *rapy_coro_follow(PyObject *coro);

#endif /* RAPY_CORO_H */

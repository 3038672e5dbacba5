/* The coroutine wrapper, regionalloc.TaggedCoroutine (coro.c): what
 * tasks.c makes of a task's coroutine and decorate.c of a decorated async
 * function's. */
#ifndef RAPY_CORO_H
#define RAPY_CORO_H

#include "module.h"

/* Readies the wrapper's type and registers it as a
 * collections.abc.Coroutine: 0, or -1 with an exception set. */
int rapy_coro_ready(void);

/* Takes coro, a new reference (NULL: returns NULL, the caller's exception
 * kept), and returns it wrapped so that each of its steps runs with tag
 * pushed (and the tags it entered itself and has not left), and none of
 * them while it awaits; what is not a coroutine comes back as it is. The
 * wrapper holds tag entered until the coroutine ends. New reference, or
 * NULL with an exception set (ValueError: tag was destroyed). For the
 * decorator: call func, hand its result here. */
PyObject *rapy_coro_wrap_tag(rapy_tag *tag, PyObject *coro);

/* coro as a task made now runs it: wrapped, the tags entered around the
 * task's creation below its own (a wrapper is itself, given them unless a
 * task already runs it or it has run); what is not a coroutine (the Task
 * refuses it) unchanged. New reference, or NULL with an exception set. */
PyObject *rapy_coro_follow(PyObject *coro);

#endif /* RAPY_CORO_H */

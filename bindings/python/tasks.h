/* Tags that follow coroutines: asyncio tasks made after follow_tasks(),
 * and async functions decorated with a tag. */
#ifndef RAPY_TASKS_H
#define RAPY_TASKS_H

#include "api.h"

/* Adds follow_tasks() and the types it needs to module: 0, or -1 with an
 * exception set. Called once from the module's init. */
int rapy_tasks_add(PyObject *module);

/* Returns a function that wraps func, a coroutine function: each coroutine
 * it makes runs every one of its steps with tag pushed (and the tags it
 * entered itself and has not left), and none of them while it awaits. New
 * reference, or NULL with an exception set. */
PyObject *rapy_tasks_decorate(ra_tag_t tag, PyObject *func);

/* Takes coro, a new reference (NULL: returns NULL, the caller's exception
 * kept), and returns it wrapped so that each of its steps runs with tag
 * pushed (and the tags it entered itself and has not left), and none of
 * them while it awaits; what is not a coroutine comes back as it is. New
 * reference, or NULL with an exception set. For a decorator that keeps
 * its own function type: call func, hand its result here. */
PyObject *rapy_tasks_wrap(ra_tag_t tag, PyObject *coro);

#endif /* RAPY_TASKS_H */

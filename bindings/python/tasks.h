/* Tags that follow coroutines: asyncio tasks made after follow_tasks(),
 * and async functions decorated with a tag (decorate.c hands their
 * coroutines here). */
#ifndef RAPY_TASKS_H
#define RAPY_TASKS_H

#include "module.h"

/* Adds follow_tasks() and the types it needs to module: 0, or -1 with an
 * exception set. Called once from the module's init. */
int rapy_tasks_add(PyObject *module);

/* Takes coro, a new reference (NULL: returns NULL, the caller's exception
 * kept), and returns it wrapped so that each of its steps runs with tag
 * pushed (and the tags it entered itself and has not left), and none of
 * them while it awaits; what is not a coroutine comes back as it is. The
 * wrapper holds tag entered until the coroutine ends. New reference, or
 * NULL with an exception set (ValueError: tag was destroyed). For the
 * decorator: call func, hand its result here. */
PyObject *rapy_tasks_wrap(rapy_tag *tag, PyObject *coro);

#endif /* RAPY_TASKS_H */

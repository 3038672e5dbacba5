/* Tags that follow asyncio tasks: follow_tasks() and the task factory it
 * sets (coro.c wraps the coroutines). */
#ifndef RAPY_TASKS_H
#define RAPY_TASKS_H

#include "module.h"

/* Adds follow_tasks() and the types it needs to module: 0, or -1 with an
 * exception set. Called once from the module's init. */
int rapy_tasks_add(PyObject *module);

#endif /* RAPY_TASKS_H */

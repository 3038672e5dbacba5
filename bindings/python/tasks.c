/* PLACEHOLDER (py-core): no follow_tasks() and no async decoration yet;
 * py-tasks replaces this file. */
#include "tasks.h"

int rapy_tasks_add(PyObject *module)
{
    (void)module;
    return 0;
}

PyObject *rapy_tasks_decorate(ra_tag_t tag, PyObject *func)
{
    (void)tag;
    (void)func;
    PyErr_SetString(PyExc_NotImplementedError,
                    "regionalloc: coroutine functions are not decorated yet");
    return NULL;
}

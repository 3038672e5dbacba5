/* The library's API as the module finds it in the process: looked up with
 * dlsym(RTLD_DEFAULT) when the module is imported, never linked against and
 * never loaded by the module, so that importing it cannot change which
 * allocator the process has. */
#ifndef RAPY_API_H
#define RAPY_API_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

#include "regionalloc.h"

/* One pointer per C function the module calls, filled at import (all or
 * none: the module is enabled only when every one was found). Member names
 * drop the ra_ prefix, so that the header's inline macros never apply. */
struct rapy_api {
    int (*tag_push)(ra_tag_t tag);
    int (*tag_pop)(ra_tag_t tag);
    ra_tag_t (*tag_current)(void);
    /* module.c adds the others it needs here. */
};

extern struct rapy_api rapy_api;

/* True when the library is this process's allocator (found, enabled, and
 * the process's malloc is the library's): set once at import. */
extern bool rapy_enabled;

/* 0 when rapy_enabled, else -1 with RuntimeError set saying how to run the
 * program under the library. */
int rapy_require_enabled(void);

/* Sets the Python exception that a failed C call's errno means (OSError
 * with that errno, MemoryError for ENOMEM, ValueError for EINVAL when the
 * caller says the input was the cause) and returns NULL. */
PyObject *rapy_raise_errno(int err, const char *what);

#endif /* RAPY_API_H */

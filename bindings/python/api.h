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
    ra_tag_t (*tag_create)(const char *name);
    ra_tag_t (*tag_create_in)(ra_tag_t parent, const char *name);
    ra_tag_t (*tag_parent)(ra_tag_t tag);
    const char *(*tag_name)(ra_tag_t tag);
    unsigned (*tag_count)(void);
    int (*tag_destroy)(ra_tag_t tag);
    int (*tag_stats)(ra_tag_t tag, ra_tag_stats_t *out);
    int (*tag_stats_tree)(ra_tag_t tag, ra_tag_stats_t *out);
    int (*tag_set_limit)(ra_tag_t tag, const ra_tag_limit_t *limit);
    int (*tag_get_limit)(ra_tag_t tag, ra_tag_limit_t *out);
    int (*tag_purge)(ra_tag_t tag);
    int (*tag_set_priority)(ra_tag_t tag, int priority);
    int (*tag_get_priority)(ra_tag_t tag, int *out);
    int (*report)(FILE *out, ra_format_t fmt);
    int (*checkpoint)(const char *label);
    int (*checkpoint_report)(FILE *out, ra_format_t fmt);
    size_t (*memory_limit)(void);
    int (*memory_limit_set)(size_t bytes);
    int (*enabled)(void);
};

/* Fills rapy_api and sets rapy_enabled, once, from the module's init:
 * never fails (a process without the library gets rapy_enabled false). */
void rapy_api_find(void);

extern struct rapy_api rapy_api;

/* True when the library is this process's allocator (found, enabled, and
 * the process's malloc is the library's): set once at import. */
extern bool rapy_enabled;

/* 0 when rapy_enabled, else -1 with RuntimeError set saying how to run the
 * program under the library. */
int rapy_require_enabled(void);

/* Sets the Python exception that a failed C call's errno means (OSError
 * with that errno, MemoryError for ENOMEM, ValueError for EINVAL: a caller
 * whose EINVAL has another cause than its input raises its own) and
 * returns NULL. what names the call, as the message's start. */
PyObject *rapy_raise_errno(int err, const char *what);

/* Sets OSError(err, message) (its subclass for err, as the os module's
 * errors) and returns NULL; message is consumed (NULL: an exception is
 * already set). */
PyObject *rapy_raise_oserror(int err, PyObject *message);

#endif /* RAPY_API_H */

/* What the module's own files share: the Tag type and its registry
 * (tag.c), the decorator's wrapper (decorate.c), Usage (usage.c), the
 * reports as text (report.c) and the checks of arguments (args.c). */
#ifndef RAPY_MODULE_H
#define RAPY_MODULE_H

#include "api.h"
#include "stack.h"

/* A tag as Python sees it: at most one object per live tag id (the
 * registry holds no reference: an object no one holds is freed, and the
 * next lookup makes another). A destroyed tag's object is dead: it is out
 * of the registry, and every call on it raises ValueError, even once the
 * library hands its id to another tag. */
typedef struct {
    PyObject_HEAD
    ra_tag_t id;
    bool dead;
    bool had_children; /* a child was made through this object */
    PyObject *name;    /* str */
    PyObject *parent;  /* Tag, or None at the top level */
    char cname[RA_TAG_NAME_MAX + 1];
} rapy_tag;

/* 0 when tag was not destroyed, else -1 with ValueError set. Inline:
 * every entry checks it (`with`, a decorated call, a coroutine made). */
static inline int rapy_tag_alive(const rapy_tag *tag)
{
    if (!tag->dead)
        return 0;
    PyErr_Format(PyExc_ValueError, "regionalloc: tag '%s' was destroyed",
                 tag->cname);
    return -1;
}

/* Pushes tag (`with tag:`, a decorated call): 0, or -1 with an exception
 * set (ValueError when destroyed, as rapy_stack_push says else). Inline,
 * so that tag.c and decorate.c share it without calling each other. */
static inline int rapy_tag_enter(const rapy_tag *tag)
{
    if (rapy_tag_alive(tag) != 0)
        return -1;
    return rapy_stack_push(tag->id);
}

/* Pops tag: 0, or -1 with RuntimeError set (not on top). */
static inline int rapy_tag_leave(const rapy_tag *tag)
{
    return rapy_stack_pop(tag->id);
}

/* tag.c */
extern PyTypeObject rapy_tag_type;
/* Adds Tag to module: 0, or -1 with an exception set. */
int rapy_tag_add(PyObject *module);
/* The Tag of a live tag id (made when none is alive): a new reference, or
 * NULL with an exception set (ValueError for an id that names no tag). */
PyObject *rapy_tag_for_id(ra_tag_t id);
/* Tag(name, parent): the get-or-create behind Tag() and tag(). New
 * reference, or NULL with an exception set. */
PyObject *rapy_tag_get(PyObject *name, PyObject *parent);

/* decorate.c */
/* Adds the wrapper's type (not named in the module): 0, or -1. */
int rapy_decorate_add(PyObject *module);
/* tag(func): a function that runs func with tag pushed; for an async
 * function, one whose coroutines run each step with it (coro.c). New
 * reference, or NULL with an exception set (TypeError for what cannot be
 * decorated). */
PyObject *rapy_decorate(rapy_tag *tag, PyObject *func);

/* usage.c */
/* Adds Usage to module: 0, or -1. */
int rapy_usage_add(PyObject *module);
/* tag's figures (tree: its subtree's) as a Usage: new reference, or NULL
 * with an exception set. */
PyObject *rapy_usage_of(ra_tag_t tag, bool tree);

/* report.c */
/* What write (ra_report, ra_checkpoint_report) writes in fmt, as a str:
 * new reference, or NULL with an exception set (what names the call). The
 * bytes in flight are in a memory file, never in the caller's tag. */
PyObject *rapy_report_text(int (*write)(FILE *out, ra_format_t fmt),
                           ra_format_t fmt, const char *what);

/* args.c */
/* obj as UTF-8 (a str without NUL; what names it in the message), its
 * length in *len (len may be NULL): valid as long as obj, or NULL with
 * TypeError or ValueError set. */
const char *rapy_text_arg(PyObject *obj, const char *what, size_t *len);
/* "O&" converters: a tag name (str of 1 to RA_TAG_NAME_MAX bytes in UTF-8,
 * no NUL) into a const char * that lives as long as the str; a size (int
 * >= 0) into a size_t. 1, or 0 with TypeError, ValueError or
 * OverflowError set. */
int rapy_name_arg(PyObject *obj, void *out);
int rapy_size_arg(PyObject *obj, void *out);
/* A report's format: "text", "json" or "prometheus" into ra_format_t; 1,
 * or 0 with TypeError or ValueError set. */
int rapy_format_arg(PyObject *obj, void *out);

#endif /* RAPY_MODULE_H */

/* The module's per-thread record of the tags it pushed, kept in step with
 * the thread's stack in the library: the only place the module pushes or
 * pops, so that tasks.c can take a coroutine's tags off when it awaits. */
#include "stack.h"

#include <errno.h>
#include <string.h>

/* Bottom first. The library's own stack holds at most RA_TAG_STACK_MAX
 * pushed tags, these among them, so the record cannot fill first unless a
 * push it did not see filled the library's (that push fails, EOVERFLOW). */
struct record {
    unsigned depth;
    ra_tag_t tags[RA_TAG_STACK_MAX];
};

static _Thread_local struct record record;

#define RAPY_STR2(x) #x
#define RAPY_STR(x) RAPY_STR2(x)

/* The tag's name for a message, or "?" for a tag the library no longer
 * knows (destroyed). */
static const char *name_of(ra_tag_t tag)
{
    const char *name = rapy_api.tag_name(tag);

    return name != NULL ? name : "?";
}

/* The exception a refused push means: OSError EOVERFLOW with a message
 * that says what is full, else what rapy_raise_errno makes of errno (a
 * destroyed tag: ValueError). Returns -1. */
static int raise_push_error(int err, ra_tag_t tag)
{
    char what[160];

    if (err == EOVERFLOW) {
        PyObject *args = Py_BuildValue(
            "(is)", EOVERFLOW,
            "regionalloc: cannot enter a tag: this thread's tag stack is "
            "full (" RAPY_STR(RA_TAG_STACK_MAX) " tags entered)");

        if (args != NULL) {
            PyErr_SetObject(PyExc_OSError, args);
            Py_DECREF(args);
        }
        return -1;
    }
    PyOS_snprintf(what, sizeof what, "regionalloc: entering tag '%s'",
                  name_of(tag));
    rapy_raise_errno(err, what);
    return -1;
}

int rapy_stack_push(ra_tag_t tag)
{
    struct record *r = &record;

    if (!rapy_enabled)
        return rapy_require_enabled();
    if (r->depth >= RA_TAG_STACK_MAX)
        return raise_push_error(EOVERFLOW, tag);
    if (rapy_api.tag_push(tag) != 0)
        return raise_push_error(errno, tag);
    r->tags[r->depth++] = tag;
    return 0;
}

int rapy_stack_pop(ra_tag_t tag)
{
    struct record *r = &record;

    /* The library's pop checks its own top: a tag pushed above ours by
     * other code (C code that did not pop what it pushed) fails it. */
    if (r->depth == 0 || r->tags[r->depth - 1] != tag ||
        rapy_api.tag_pop(tag) != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "regionalloc: tag '%s' is left but it is not the top "
                     "of this thread's stack: tags are left in the reverse "
                     "order they were entered (in asyncio code, call "
                     "regionalloc.follow_tasks() so that each task has its "
                     "own tags)",
                     name_of(tag));
        return -1;
    }
    r->depth--;
    return 0;
}

unsigned rapy_stack_depth(void)
{
    return record.depth;
}

const ra_tag_t *rapy_stack_tags(void)
{
    return record.tags;
}

unsigned rapy_stack_cut(unsigned depth, ra_tag_t *out)
{
    struct record *r = &record;
    unsigned top = r->depth, at = top;

    /* A pop the library refuses (a tag pushed above ours that its pusher
     * did not pop) stops the cut there: the record never disagrees with
     * the thread's stack, and the caller sees a depth above the one it
     * asked for. */
    while (at > depth && rapy_api.tag_pop(r->tags[at - 1]) == 0)
        at--;
    if (at >= top)
        return 0;
    memcpy(out, &r->tags[at], (top - at) * sizeof *out);
    r->depth = at;
    return top - at;
}

/* PLACEHOLDER (py-core): the smallest record of the module's pushes that
 * lets the module build and run `with tag:` on one thread; py-tasks
 * replaces this file. */
#include "stack.h"

#include <errno.h>

static __thread ra_tag_t record[RA_TAG_STACK_MAX];
static __thread unsigned depth;

int rapy_stack_push(ra_tag_t tag)
{
    if (rapy_require_enabled() != 0)
        return -1;
    if (depth == RA_TAG_STACK_MAX || rapy_api.tag_push(tag) != 0) {
        rapy_raise_errno(depth == RA_TAG_STACK_MAX ? EOVERFLOW : errno,
                         "ra_tag_push");
        return -1;
    }
    record[depth++] = tag;
    return 0;
}

int rapy_stack_pop(ra_tag_t tag)
{
    if (depth == 0 || record[depth - 1] != tag || rapy_api.tag_pop(tag) != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "regionalloc: tag %u is not the top of the stack", tag);
        return -1;
    }
    depth--;
    return 0;
}

unsigned rapy_stack_depth(void)
{
    return depth;
}

const ra_tag_t *rapy_stack_tags(void)
{
    return record;
}

unsigned rapy_stack_cut(unsigned keep, ra_tag_t *out)
{
    unsigned n = 0;

    while (depth > keep && rapy_api.tag_pop(record[depth - 1]) == 0)
        out[n++] = record[--depth];
    for (unsigned i = 0; i < n / 2; i++) {
        ra_tag_t t = out[i];
        out[i] = out[n - 1 - i];
        out[n - 1 - i] = t;
    }
    return n;
}

/* The module's per-thread record of the tags it pushed, kept in step with
 * the thread's stack in the library, and the process's count of each
 * tag's entries: the only place the module pushes or pops, so that coro.c
 * can take a coroutine's tags off when it awaits, and Tag.destroy() can
 * refuse a tag entered anywhere. */
#include "stack.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

/* Bottom first. The library's own stack holds at most RA_TAG_STACK_MAX
 * pushed tags, these among them, so the record cannot fill first unless a
 * push it did not see filled the library's (that push fails, EOVERFLOW). */
struct record {
    unsigned depth;
    ra_tag_t tags[RA_TAG_STACK_MAX];
};

static _Thread_local struct record record;

/* Each tag id's entries made through the module and not left, in every
 * thread: those on a thread's stack, and those a suspended coroutine holds
 * off the stack (moved there and back at each of its steps, never dropped
 * while it may resume). Every change is made holding the GIL, which orders
 * them: a relaxed load and store, not a locked add, keeps `with tag:` as
 * cheap as it was, and a read from any thread well defined. */
static _Atomic unsigned stacked[RAPY_IDS_MAX + 1];
static _Atomic unsigned held[RAPY_IDS_MAX + 1];

static inline void count(_Atomic unsigned *counts, ra_tag_t tag, int delta)
{
    if (tag <= RAPY_IDS_MAX)
        atomic_store_explicit(
            &counts[tag],
            atomic_load_explicit(&counts[tag], memory_order_relaxed) +
                (unsigned)delta,
            memory_order_relaxed);
}

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
        rapy_raise_oserror(
            EOVERFLOW,
            PyUnicode_FromString(
                "regionalloc: cannot enter a tag: this thread's tag stack is "
                "full (" RAPY_STR(RA_TAG_STACK_MAX) " tags entered)"));
        return -1;
    }
    PyOS_snprintf(what, sizeof what, "regionalloc: entering tag '%s'",
                  name_of(tag));
    rapy_raise_errno(err, what);
    return -1;
}

/* Pushes tag and records it: 0, or -1 as rapy_stack_push says. */
static inline int push_recorded(ra_tag_t tag)
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

int rapy_stack_push(ra_tag_t tag)
{
    if (push_recorded(tag) != 0)
        return -1;
    count(stacked, tag, 1);
    return 0;
}

int rapy_stack_restore(ra_tag_t tag)
{
    if (push_recorded(tag) != 0)
        return -1;
    count(held, tag, -1);
    count(stacked, tag, 1);
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
    count(stacked, tag, -1);
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
    for (unsigned i = 0; i < top - at; i++) {
        count(stacked, out[i], -1);
        count(held, out[i], 1);
    }
    return top - at;
}

void rapy_stack_hold(const ra_tag_t *tags, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        count(held, tags[i], 1);
}

void rapy_stack_release(const ra_tag_t *tags, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        count(held, tags[i], -1);
}

void rapy_stack_entries(ra_tag_t tag, struct rapy_entries *out)
{
    out->stacked = out->held = out->here = 0;
    if (tag > RAPY_IDS_MAX)
        return;
    out->stacked = atomic_load_explicit(&stacked[tag], memory_order_relaxed);
    out->held = atomic_load_explicit(&held[tag], memory_order_relaxed);
    for (unsigned i = 0; i < record.depth; i++)
        out->here += record.tags[i] == tag;
}

ra_tag_t rapy_stack_next_entered(ra_tag_t after, ra_tag_t last)
{
    if (last > RAPY_IDS_MAX)
        last = RAPY_IDS_MAX;
    for (ra_tag_t id = after + 1; id <= last; id++)
        if (atomic_load_explicit(&stacked[id], memory_order_relaxed) +
                atomic_load_explicit(&held[id], memory_order_relaxed) !=
            0)
            return id;
    return RA_TAG_NONE;
}

/* Registry of tag names and ids, and the thread-local tag stack. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

__thread struct ra__tag_stack ra__tag_stack;
unsigned ra__tags_published;
unsigned ra__tag_arena[RA__MAX_TAGS_LIMIT + 1];

/* Names are written under the lock before the count that publishes them, and
 * never change after: readers scan without the lock. */
static char tag_names[RA__MAX_TAGS_LIMIT + 1][RA_TAG_NAME_MAX + 1];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;


void ra__tag_prefork(void)
{
    ra__lock(&registry_lock);
}

void ra__tag_postfork(void)
{
    ra__unlock(&registry_lock);
}

/* Returns the length of name, or 0 when it is not a valid tag name. */
static size_t valid_name_length(const char *name)
{
    size_t len;

    if (name == NULL)
        return 0;
    len = strnlen(name, RA_TAG_NAME_MAX + 1);
    return len > RA_TAG_NAME_MAX ? 0 : len;
}

static ra_tag_t find_tag(const char *name, unsigned count)
{
    for (unsigned t = 1; t <= count; t++)
        if (strcmp(tag_names[t], name) == 0)
            return t;
    return RA_TAG_NONE;
}

ra_tag_t ra_tag_lookup(const char *name)
{
    ra_tag_t tag;

    if (valid_name_length(name) == 0) {
        errno = EINVAL;
        return RA_TAG_NONE;
    }
    tag = find_tag(name, ra__tag_published());
    if (tag == RA_TAG_NONE)
        errno = ENOENT;
    return tag;
}

ra_tag_t ra_tag_create(const char *name)
{
    size_t len = valid_name_length(name);
    bool tagging;
    unsigned count;
    ra_tag_t tag;

    if (len == 0) {
        errno = EINVAL;
        return RA_TAG_NONE;
    }
    tag = find_tag(name, ra__tag_published());
    if (tag != RA_TAG_NONE)
        return tag;

    tagging = ra__init();
    ra__lock(&registry_lock);
    count = __atomic_load_n(&ra__tags_published, __ATOMIC_RELAXED);
    tag = find_tag(name, count);
    if (tag != RA_TAG_NONE)
        goto out;
    if (count >= ra__config()->max_tags) {
        errno = ENOSPC;
        goto out;
    }
    tag = count + 1;
    if (tagging) {
        int arena = ra__region_create_arena(count);
        if (arena < 0) {
            tag = RA_TAG_NONE;
            goto out;
        }
        ra__tag_arena[tag] = (unsigned)arena;
    }
    memcpy(tag_names[tag], name, len + 1);
    if (tagging)
        ra__region_name(count, name);
    __atomic_store_n(&ra__tags_published, tag, __ATOMIC_RELEASE);
out:
    ra__unlock(&registry_lock);
    return tag;
}

ra_tag_t ra__tag_of_arena(unsigned arena)
{
    unsigned count = ra__tag_published();

    /* In pass-through mode tags have no arena (the table holds 0s). */
    if (!atomic_load_explicit(&ra__tagging, memory_order_relaxed))
        return RA_TAG_NONE;
    for (ra_tag_t t = 1; t <= count; t++)
        if (ra__tag_arena[t] == arena)
            return t;
    return RA_TAG_NONE;
}

const char *ra_tag_name(ra_tag_t tag)
{
    if (tag == RA_TAG_NONE)
        return "untagged";
    if (!ra__tag_valid(tag)) {
        errno = EINVAL;
        return NULL;
    }
    return tag_names[tag];
}

unsigned ra_tag_count(void)
{
    return ra__tag_published();
}

/* Sets errno for a push or pop that cannot be done. Returns -1. */
RA__COLD static int stack_error(int error)
{
    errno = error;
    return -1;
}

int(ra_tag_push)(ra_tag_t tag)
{
    struct ra__tag_stack *s = &ra__tag_stack;
    unsigned depth = s->depth;

    /* tag - 1 wraps for RA_TAG_NONE: one compare checks both ends. */
    if (RA__UNLIKELY(tag - 1u >= ra__tag_published()))
        return stack_error(EINVAL);
    if (RA__UNLIKELY(depth >= RA_TAG_STACK_MAX))
        return stack_error(EOVERFLOW);
    s->items[depth + 1] = tag;
    s->depth = depth + 1;
    s->top = tag;
    return 0;
}

int(ra_tag_pop)(ra_tag_t tag)
{
    struct ra__tag_stack *s = &ra__tag_stack;
    unsigned depth = s->depth;

    /* Only created tags are ever pushed, so a tag on top is valid. */
    if (RA__UNLIKELY(tag == RA_TAG_NONE || depth == 0 ||
                     s->items[depth] != tag))
        return stack_error(EINVAL);
    s->depth = depth - 1;
    s->top = s->items[depth - 1];
    return 0;
}

ra_tag_t ra_tag_current(void)
{
    return ra__tag_stack.top;
}

ra_tag_t ra__tag_scope_begin(ra_tag_t tag)
{
    return ra_tag_push(tag) == 0 ? tag : RA_TAG_NONE;
}

void ra__tag_scope_end(const ra_tag_t *pushed)
{
    int saved = errno;

    if (*pushed != RA_TAG_NONE)
        ra_tag_pop(*pushed);
    errno = saved;
}

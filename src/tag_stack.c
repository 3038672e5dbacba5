/* Floor: tags. The thread-local tag stack (ra_tag_push, ra_tag_pop,
 * ra_tag_current), the suspension of a thread's tag while the library
 * works for it, and who writes a thread's top: the thread itself, and
 * another that gives it a new base (tags by thread name). */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>

#include "internal.h"

__thread struct ra__tag_stack ra__tag_stack;

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
    if (RA__UNLIKELY(tag - 1u >= ra__tag_published()) ||
        RA__UNLIKELY(!__atomic_load_n(&ra__tag_live[tag], __ATOMIC_ACQUIRE)))
        return stack_error(EINVAL);
    if (RA__UNLIKELY(depth >= RA_TAG_STACK_MAX))
        return stack_error(EOVERFLOW);
    s->items[depth + 1] = tag;
    s->depth = depth + 1;
    s->top = tag;
    ra__assert(s->depth <= RA_TAG_STACK_MAX && ra__tag_valid(s->top));
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
    ra__assert(s->depth < RA_TAG_STACK_MAX);
    return 0;
}

ra_tag_t ra_tag_current(void)
{
    return ra__tag_stack.top;
}

/* -- who writes a thread's top ----------------------------------------------
 * The thread itself (push, pop, suspension) with plain stores, and another
 * thread that gives it a new base (ra__tag_set_base) with a compare-and-
 * swap. The suspension count and the top change together under a
 * per-thread lock that only those two take, for a few instructions: so a
 * base given while the tag is suspended never becomes the top inside the
 * suspension, and the suspension's end reads the base as it is then. */
struct ra__tag_thread {
    struct ra__tag_stack *stack;
    struct ra__spin lock;
    unsigned suspended; /* nesting depth of ra__tag_suspend */
};

static RA__TLS struct ra__tag_thread tls_thread = {
    NULL, RA__SPIN_INIT(RA__RANK_TAG_THREAD), 0};

/* Held for a few instructions at a time: spinning beats sleeping. */
static void lock_thread(struct ra__tag_thread *t)
{
    ra__spin_lock_busy(&t->lock);
}

static void unlock_thread(struct ra__tag_thread *t)
{
    ra__spin_unlock(&t->lock);
}

struct ra__tag_thread *ra__tag_thread_self(void)
{
    tls_thread.stack = &ra__tag_stack;
    return &tls_thread;
}

static ra_tag_t load_tag(const ra_tag_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

void ra__tag_suspend(void)
{
    struct ra__tag_thread *t = &tls_thread;

    lock_thread(t);
    /* Suspensions nest: the count never wraps. */
    ra__assert(t->suspended < UINT_MAX);
    if (t->suspended++ == 0)
        __atomic_store_n(&ra__tag_stack.top, RA_TAG_NONE, __ATOMIC_RELAXED);
    unlock_thread(t);
}

void ra__tag_resume(void)
{
    struct ra__tag_thread *t = &tls_thread;
    struct ra__tag_stack *s = &ra__tag_stack;

    lock_thread(t);
    ra__assert(t->suspended > 0 && s->depth <= RA_TAG_STACK_MAX);
    if (--t->suspended == 0)
        __atomic_store_n(&s->top, load_tag(&s->items[s->depth]),
                         __ATOMIC_RELAXED);
    unlock_thread(t);
}

/* The top is the base whenever nothing is pushed (and the tag is not
 * suspended); any other value there is stale (a pop that read the base
 * just before a rename stored it) and is replaced. The top is read before
 * the depth: a push stores the depth first, so a top that a push wrote is
 * seen with its depth, and left alone. */
void ra__tag_set_base(struct ra__tag_thread *t, ra_tag_t tag)
{
    struct ra__tag_stack *s = t->stack;

    lock_thread(t);
    __atomic_store_n(&s->items[0], tag, __ATOMIC_RELAXED);
    if (t->suspended == 0) {
        if (t == &tls_thread) {
            if (s->depth == 0)
                s->top = tag;
        } else {
            ra_tag_t top;
            atomic_thread_fence(memory_order_seq_cst);
            top = __atomic_load_n(&s->top, __ATOMIC_ACQUIRE);
            if (top != tag && __atomic_load_n(&s->depth, __ATOMIC_RELAXED) == 0)
                __atomic_compare_exchange_n(&s->top, &top, tag, false,
                                            __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED);
        }
    }
    unlock_thread(t);
}

bool ra__tag_thread_holds(struct ra__tag_thread *t, ra_tag_t tag)
{
    const struct ra__tag_stack *s = t->stack;

    return load_tag(&s->items[0]) == tag ||
           (__atomic_load_n(&s->depth, __ATOMIC_RELAXED) == 0 &&
            load_tag(&s->top) == tag);
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

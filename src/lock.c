/* Floor: OS (below every floor that takes a lock). The debug build's check
 * of the library's locks (lock.h): each thread's held locks, the order it
 * takes them in, and who holds what. A release build has none of it. */
#include <stdio.h>

#include "internal.h"

#ifdef RA_DEBUG

/* The locks the calling thread holds, last taken first, threaded through
 * the locks' witnesses (never an allocation: the check runs inside
 * malloc). Ranks rise from the bottom of the list to its top. */
static RA__TLS struct ra__witness *tls_held;
/* The pseudo-lock of "inside an extent hook", the thread's own, and how
 * deep in hooks the thread is. */
static RA__TLS struct ra__witness tls_hook = {
    RA__RANK_EXTENT_HOOK, "inside an extent hook", NULL};
static RA__TLS unsigned tls_hook_depth;

static bool holds(const struct ra__witness *w)
{
    for (const struct ra__witness *h = tls_held; h != NULL; h = h->below)
        if (h == w)
            return true;
    return false;
}

/* Aborts with both names, and what the thread holds. */
__attribute__((noreturn, cold)) static void fail(const char *what,
                                                 const struct ra__witness *w,
                                                 const struct ra__witness *h,
                                                 const char *file, int line)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, "regionalloc: lock check: %s %s",
                     what, w != NULL ? w->name : "");

    if (h != NULL && n > 0 && (size_t)n < sizeof buf)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " (rank %d) while "
                      "holding %s (rank %d)", (int)w->rank, h->name,
                      (int)h->rank);
    if (file != NULL && n > 0 && (size_t)n < sizeof buf)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " at %s:%d", file,
                      line);
    for (const struct ra__witness *x = tls_held;
         x != NULL && n > 0 && (size_t)n < sizeof buf; x = x->below)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%s",
                      x == tls_held ? "; held: " : ", ", x->name);
    ra__warn(buf);
    abort();
}

void ra__witness_lock(struct ra__witness *w)
{
    struct ra__witness *top = tls_held;

    if (w->rank == RA__RANK_NONE)
        fail("taking a lock with no rank", w, NULL, NULL, 0);
    if (holds(w))
        fail("taking again", w, NULL, NULL, 0);
    /* Above the top, or of its rank and at a higher address. */
    if (top != NULL && (top->rank > w->rank ||
                        (top->rank == w->rank &&
                         (uintptr_t)top >= (uintptr_t)w)))
        fail("lock order: taking", w, top, NULL, 0);
    w->below = top;
    tls_held = w;
}

/* Unlinks w from the thread's list; false when the thread did not hold it. */
static bool unlink_held(struct ra__witness *w)
{
    for (struct ra__witness **p = &tls_held; *p != NULL; p = &(*p)->below) {
        if (*p == w) {
            *p = w->below;
            w->below = NULL;
            return true;
        }
    }
    return false;
}

void ra__witness_unlock(struct ra__witness *w)
{
    if (!unlink_held(w))
        fail("releasing a lock not held:", w, NULL, NULL, 0);
}

/* A lock made anew in a fork's child was held by a thread that is not
 * there; one the forking thread took is released instead. */
void ra__witness_forget(struct ra__witness *w)
{
    if (unlink_held(w))
        fail("making anew a lock this thread holds:", w, NULL, NULL, 0);
}

void ra__witness_assert(const struct ra__witness *w, bool held,
                        const char *file, int line)
{
    if (holds(w) != held)
        fail(held ? "not held:" : "held:", w, NULL, file, line);
}

void ra__witness_assert_rank(enum ra__lock_rank rank, const char *file,
                             int line)
{
    char name[32];
    struct ra__witness asked = {rank, name, NULL};

    for (const struct ra__witness *h = tls_held; h != NULL; h = h->below)
        if (h->rank == rank)
            return;
    snprintf(name, sizeof name, "of rank %d", (int)rank);
    fail("no lock held", &asked, NULL, file, line);
}

/* The calling thread enters a pseudo-rank's code (jemalloc, the loader):
 * it holds no lock ranked at or after it. */
static void check_pseudo(const struct ra__witness *pseudo, const char *file,
                         int line)
{
    for (const struct ra__witness *h = tls_held; h != NULL; h = h->below)
        if (h->rank >= pseudo->rank)
            fail("lock order:", pseudo, h, file, line);
}

void ra__witness_jemalloc(const char *file, int line)
{
    static const struct ra__witness jemalloc = {
        RA__RANK_JEMALLOC, "calling into jemalloc", NULL};

    check_pseudo(&jemalloc, file, line);
}

void ra__witness_loader(const char *file, int line)
{
    static const struct ra__witness loader = {
        RA__RANK_LOADER, "calling into the dynamic loader", NULL};

    check_pseudo(&loader, file, line);
}

void ra__witness_assert_none(const char *file, int line)
{
    if (tls_held != NULL)
        fail("user code or a library's load under", tls_held, NULL, file,
             line);
}

/* A hook inside a hook (jemalloc's base allocator under an arena's
 * growth) takes nothing the outer one holds: it is checked as the outer
 * one was, with nothing taken since. */
void ra__witness_hook_enter(void)
{
    if (tls_hook_depth++ == 0)
        ra__witness_lock(&tls_hook);
    else if (tls_held != &tls_hook)
        fail("lock order: entering", &tls_hook, tls_held, NULL, 0);
}

void ra__witness_hook_leave(void)
{
    ra__assert(tls_hook_depth > 0);
    if (--tls_hook_depth == 0)
        ra__witness_unlock(&tls_hook);
}

#else
/* ISO C wants a declaration in every translation unit. */
typedef int ra__lock_release_build;
#endif

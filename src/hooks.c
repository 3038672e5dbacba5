/* User callbacks on every allocation and free the library routes. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "internal.h"

/* A slot is reused only once no thread is inside its callbacks. */
struct hook_slot {
    ra_hooks_t hooks;
    atomic_bool active;
    _Atomic unsigned inflight; /* threads inside this slot's callbacks */
};

_Atomic unsigned ra__hooks_installed;
static struct hook_slot slots[RA__HOOKS_MAX];
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
/* Set while this thread runs callbacks: what a callback allocates or frees
 * is not reported (it is still allocated and tagged normally). */
static RA__TLS bool tls_in_hook;
RA__TLS unsigned ra__hooks_muted;
/* The slot whose callback this thread is running, or -1. */
static RA__TLS int tls_slot = -1;

void ra__hooks_prefork(void)
{
    ra__lock(&install_lock);
}

void ra__hooks_postfork(bool child)
{
    if (child)
        for (int i = 0; i < RA__HOOKS_MAX; i++)
            atomic_store(&slots[i].inflight, tls_slot == i ? 1u : 0u);
    ra__unlock(&install_lock);
}

int ra_hooks_install(const ra_hooks_t *hooks)
{
    int id = -1;

    if (hooks == NULL || (hooks->on_alloc == NULL && hooks->on_free == NULL)) {
        errno = EINVAL;
        return -1;
    }
    /* First use of the library: registers the fork handlers for our lock. */
    ra__init();
    ra__lock(&install_lock);
    for (int i = 0; i < RA__HOOKS_MAX; i++) {
        struct hook_slot *s = &slots[i];
        if (atomic_load(&s->active) || atomic_load(&s->inflight) != 0)
            continue;
        s->hooks = *hooks;
        atomic_store(&s->active, true);
        atomic_fetch_add(&ra__hooks_installed, 1);
        ra__free_gate_update();
        ra__instrument_add(RA__INSTRUMENT_HOOK);
        id = i;
        break;
    }
    ra__unlock(&install_lock);
    if (id < 0)
        errno = ENOSPC;
    return id;
}

int ra_hooks_remove(int id)
{
    struct hook_slot *s;
    unsigned own;

    if (id < 0 || id >= RA__HOOKS_MAX) {
        errno = EINVAL;
        return -1;
    }
    s = &slots[id];
    ra__lock(&install_lock);
    if (!atomic_load(&s->active)) {
        ra__unlock(&install_lock);
        errno = EINVAL;
        return -1;
    }
    atomic_store(&s->active, false);
    atomic_fetch_sub(&ra__hooks_installed, 1);
    ra__free_gate_update();
    ra__instrument_sub(RA__INSTRUMENT_HOOK);
    ra__unlock(&install_lock);
    /* A dispatcher counts itself in, then checks active (both sequentially
     * consistent): once inflight drains, nobody can call the hook again.
     * A hook that removes itself waits only for the other threads. */
    own = tls_slot == id ? 1 : 0;
    while (atomic_load(&s->inflight) > own)
        sched_yield();
    return 0;
}

static void dispatch(bool alloc, ra_tag_t tag, void *ptr, size_t size)
{
    int saved_slot = tls_slot;

    tls_in_hook = true;
    for (int i = 0; i < RA__HOOKS_MAX; i++) {
        struct hook_slot *s = &slots[i];
        void (*fn)(void *, ra_tag_t, void *, size_t);

        if (!atomic_load_explicit(&s->active, memory_order_relaxed))
            continue;
        atomic_fetch_add(&s->inflight, 1);
        if (atomic_load(&s->active)) {
            fn = alloc ? s->hooks.on_alloc : s->hooks.on_free;
            tls_slot = i;
            if (fn != NULL)
                fn(s->hooks.ctx, tag, ptr, size);
        }
        atomic_fetch_sub(&s->inflight, 1);
    }
    tls_slot = saved_slot;
    tls_in_hook = false;
}

static bool reporting(const void *ptr)
{
    return ptr != NULL && !tls_in_hook && ra__hooks_muted == 0;
}

void ra__hooks_on_alloc(void *ptr)
{
    if (reporting(ptr))
        dispatch(true, ra__tag_of_addr(ptr), ptr, ra_malloc_usable_size(ptr));
}

void ra__hooks_on_free(void *ptr)
{
    if (reporting(ptr))
        dispatch(false, ra__tag_of_addr(ptr), ptr, ra_malloc_usable_size(ptr));
}

void ra__hooks_on_free_of(ra_tag_t tag, void *ptr, size_t size)
{
    if (reporting(ptr))
        dispatch(false, tag, ptr, size);
}

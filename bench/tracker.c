/* bench/: the header-based tracking allocator (see tracker.h). */
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "benchutil.h"
#include "tracker.h"

/* 16 bytes keep the user pointer as aligned as jemalloc's block. */
struct header {
    uint32_t tag;
    uint32_t unused;
    uint64_t size;
};
_Static_assert(sizeof(struct header) == 16, "header must be 16 bytes");

/* One cache line per counter: tags used by different threads must not
 * share a line, or the tracker would pay for false sharing on top of its
 * atomics. */
struct counter {
    alignas(64) _Atomic uint64_t live;
};

static struct counter live_bytes[TRACKER_MAX_TAGS];
static _Thread_local unsigned stack[TRACKER_STACK_MAX];
static _Thread_local unsigned depth;

int tracker_push(unsigned tag)
{
    if (tag >= TRACKER_MAX_TAGS || depth == TRACKER_STACK_MAX)
        return -1;
    stack[depth++] = tag;
    return 0;
}

int tracker_pop(unsigned tag)
{
    if (depth == 0 || stack[depth - 1] != tag)
        return -1;
    depth--;
    return 0;
}

void *tracker_malloc(size_t size)
{
    struct header *h;
    unsigned tag = depth ? stack[depth - 1] : 0;

    if (size > SIZE_MAX - sizeof *h)
        return NULL;
    h = bench_je.malloc(size + sizeof *h);
    if (h == NULL)
        return NULL;
    h->tag = tag;
    h->size = size;
    atomic_fetch_add_explicit(&live_bytes[tag].live, size,
                              memory_order_relaxed);
    return h + 1;
}

void tracker_free(void *ptr)
{
    struct header *h;

    if (ptr == NULL)
        return;
    h = (struct header *)ptr - 1;
    atomic_fetch_sub_explicit(&live_bytes[h->tag].live, h->size,
                              memory_order_relaxed);
    bench_je.free(h);
}

void *tracker_realloc(void *ptr, size_t size)
{
    struct header *h, *n;
    uint64_t old;

    if (ptr == NULL)
        return tracker_malloc(size);
    if (size > SIZE_MAX - sizeof *h)
        return NULL;
    h = (struct header *)ptr - 1;
    old = h->size;
    n = bench_je.realloc(h, size + sizeof *n);
    if (n == NULL)
        return NULL;
    n->size = size;
    if (size >= old)
        atomic_fetch_add_explicit(&live_bytes[n->tag].live, size - old,
                                  memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&live_bytes[n->tag].live, old - size,
                                  memory_order_relaxed);
    return n + 1;
}

unsigned tracker_tag_of(const void *ptr)
{
    return ((const struct header *)ptr - 1)->tag;
}

size_t tracker_live_bytes(unsigned tag)
{
    return tag < TRACKER_MAX_TAGS
               ? atomic_load_explicit(&live_bytes[tag].live,
                                      memory_order_relaxed)
               : 0;
}

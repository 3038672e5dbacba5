/* Floor: base. The library's own memory: one allocator for its tables,
 * thread states, copies and snapshots, apart from every path that users hook
 * or tag. */
#include "backend.h"

#include "internal.h"

/* Uncached: a thread cache would keep the library's blocks among the
 * program's, and the automatic one mixes arenas. No arena named: jemalloc's
 * own choice, never a tag's. */
#define META_FLAGS MALLOCX_TCACHE_NONE

/* The depth of the calling thread's quiet sections (ra__quiet_begin): the
 * library's own work, which no hook sees. */
RA__TLS unsigned ra__hooks_muted;

/* Bytes in the library's live blocks (usable sizes), for the reports. */
static _Atomic size_t held;
/* What libraries the library calls keep of what they allocated on its
 * behalf (ra__meta_count_foreign). */
static _Atomic int64_t foreign;

#ifdef RA_TSAN
/* A ThreadSanitizer build (--enable-tsan, which implies --disable-override):
 * jemalloc is not instrumented, so memory it hands from one thread to
 * another looks like a race. The library's own memory comes from the
 * sanitizer's malloc instead, which it understands. */
#include <malloc.h>
#include <stdlib.h>

#define BLOCK_SIZE(p) malloc_usable_size(p)
#define ALLOC(size, zero) ((zero) ? calloc(1, size) : malloc(size))
#define REALLOC(p, size) realloc(p, size)
#define FREE(p) free(p)
#else
#define BLOCK_SIZE(p) ra__je_sallocx(p, 0)
#define ALLOC(size, zero)                                                   \
    ra__je_mallocx(size, META_FLAGS | ((zero) ? MALLOCX_ZERO : 0))
#define REALLOC(p, size) ra__je_rallocx(p, size, META_FLAGS)
#define FREE(p) ra__je_dallocx(p, META_FLAGS)
#endif

/* The library's own memory comes from jemalloc, which may take its locks
 * (lock.h's RA__RANK_JEMALLOC): so does every call here. */
static void *counted(void *p)
{
    /* Invariant 4: the library's own memory is never a tag's. */
    ra__assert(p == NULL || ra_tag_of(p) == RA_TAG_NONE);
    if (p != NULL)
        atomic_fetch_add_explicit(&held, BLOCK_SIZE(p), memory_order_relaxed);
    return p;
}

static void uncount(void *p)
{
    size_t size = BLOCK_SIZE(p);
    size_t had = atomic_fetch_sub_explicit(&held, size, memory_order_relaxed);

    /* held is the sum of the live blocks' sizes: one of them leaves. */
    ra__assert(had >= size);
    (void)had;
}

void *ra__meta_alloc(size_t size)
{
    ra__assert_may_call_jemalloc();
    return counted(ALLOC(size == 0 ? 1 : size, false));
}

void *ra__meta_calloc(size_t n, size_t size)
{
    size_t total;

    if (__builtin_mul_overflow(n, size, &total))
        return NULL;
    ra__assert_may_call_jemalloc();
    return counted(ALLOC(total == 0 ? 1 : total, true));
}

void *ra__meta_realloc(void *ptr, size_t size)
{
    size_t old;
    void *p;

    if (ptr == NULL)
        return ra__meta_alloc(size);
    ra__assert_may_call_jemalloc();
    old = BLOCK_SIZE(ptr);
    p = REALLOC(ptr, size == 0 ? 1 : size);
    if (p != NULL) {
        atomic_fetch_sub_explicit(&held, old, memory_order_relaxed);
        counted(p);
    }
    return p;
}

void ra__meta_free(void *ptr)
{
    if (ptr != NULL) {
        ra__assert_may_call_jemalloc();
        uncount(ptr);
        FREE(ptr);
    }
}

void ra__meta_count_foreign(int64_t delta)
{
    atomic_fetch_add_explicit(&foreign, delta, memory_order_relaxed);
}

/* The calling thread's jemalloc counters (thread.allocatedp,
 * thread.deallocatedp: they live as long as the thread), read once. */
static RA__TLS const uint64_t *tls_allocated, *tls_deallocated;
static RA__TLS bool tls_counters_read;

int64_t ra__meta_thread_net(void)
{
    if (!tls_counters_read) {
        if (ra__be_thread_counters(&tls_allocated, &tls_deallocated))
            tls_allocated = tls_deallocated = NULL;
        tls_counters_read = true;
    }
    if (tls_allocated == NULL)
        return 0;
    return (int64_t)(*tls_allocated - *tls_deallocated);
}

size_t ra__meta_held(void)
{
    int64_t more = atomic_load_explicit(&foreign, memory_order_relaxed);

    return atomic_load_explicit(&held, memory_order_relaxed) +
           (more > 0 ? (size_t)more : 0);
}

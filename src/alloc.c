/* Allocation paths (ra_malloc and friends) and the per-(thread, tag) caches. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include "internal.h"

#define NO_TCACHE UINT_MAX
/* MALLOCX_ARENA shifts a signed int, which overflows for arena indices from
 * 2047 up; the same bits, computed unsigned. */
#define ARENA_FLAGS(a) ((int)(((unsigned)(a) + 1u) << 20))

/* What one thread uses to reach one tag's arena. Tagged blocks must never
 * meet the automatic thread cache, which mixes arenas (DESIGN.md section 7),
 * so each (thread, tag) pair gets an explicit jemalloc tcache of its own, or
 * goes uncached when jemalloc has no tcache id left. */
struct tag_slot {
    int alloc_flags;  /* MALLOCX_ARENA | MALLOCX_TCACHE*, 0 = not set up */
    int free_flags;   /* MALLOCX_TCACHE* */
    unsigned tcache;  /* explicit tcache id, or NO_TCACHE */
    /* Written only by the owning thread, read by ra_tag_stats(): relaxed
     * atomics make the plain increments race-free at no cost on x86-64. */
    _Atomic uint64_t nmalloc;
    _Atomic uint64_t ndalloc;
};

struct thread_state {
    struct thread_state *prev, *next; /* in all_threads, under threads_lock */
    unsigned nslots;                  /* max_tags + 1; slot 0 unused */
    struct tag_slot slots[];
};

static RA__TLS struct thread_state *tls_state;
/* Set while this thread sets up its state: allocations it causes (glibc's
 * pthread_setspecific may call calloc) are served uncached, not recursively. */
static RA__TLS bool tls_busy;
/* Set once this thread's state was released at exit: later tagged requests
 * go uncached instead of creating state nobody would release. */
static RA__TLS bool tls_exited;

static pthread_key_t exit_key;
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static struct thread_state all_threads = {
    .prev = &all_threads, .next = &all_threads, .nslots = 0};
/* Counts of exited threads and of requests served without a slot. */
static _Atomic uint64_t orphan_nmalloc[RA__MAX_TAGS_LIMIT + 1];
static _Atomic uint64_t orphan_ndalloc[RA__MAX_TAGS_LIMIT + 1];

static void lock_threads(void)
{
    if (pthread_mutex_lock(&threads_lock) != 0)
        abort();
}

static void unlock_threads(void)
{
    if (pthread_mutex_unlock(&threads_lock) != 0)
        abort();
}

void ra__alloc_prefork(void)
{
    lock_threads();
}

void ra__alloc_postfork_parent(void)
{
    unlock_threads();
}

void ra__alloc_postfork_child(void)
{
    /* The child has only the forking thread; the other threads' states stay
     * listed (their counts still belong to the totals) but are never freed. */
    unlock_threads();
}

static inline void count_one(_Atomic uint64_t *counter)
{
    atomic_store_explicit(
        counter, atomic_load_explicit(counter, memory_order_relaxed) + 1,
        memory_order_relaxed);
}

static void count_orphan(_Atomic uint64_t *counter)
{
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

static void flush_tcache(unsigned tcache)
{
    if (tcache != NO_TCACHE)
        mallctl("tcache.flush", NULL, NULL, &tcache, sizeof tcache);
}

static void destroy_tcache(unsigned tcache)
{
    if (tcache != NO_TCACHE)
        mallctl("tcache.destroy", NULL, NULL, &tcache, sizeof tcache);
}

static void release_thread_state(void *arg)
{
    struct thread_state *ts = arg;

    tls_exited = true;
    tls_state = NULL;
    /* Destroying a tcache flushes it: the thread's blocks reach their arenas
     * and the id is free for another thread. */
    for (unsigned t = 1; t < ts->nslots; t++)
        if (ts->slots[t].alloc_flags != 0)
            destroy_tcache(ts->slots[t].tcache);
    lock_threads();
    for (unsigned t = 1; t < ts->nslots; t++) {
        struct tag_slot *s = &ts->slots[t];
        if (s->alloc_flags == 0)
            continue;
        atomic_fetch_add_explicit(&orphan_nmalloc[t],
                                  atomic_load(&s->nmalloc),
                                  memory_order_relaxed);
        atomic_fetch_add_explicit(&orphan_ndalloc[t],
                                  atomic_load(&s->ndalloc),
                                  memory_order_relaxed);
    }
    ts->prev->next = ts->next;
    ts->next->prev = ts->prev;
    unlock_threads();
    dallocx(ts, MALLOCX_TCACHE_NONE);
}

void ra__alloc_init(void)
{
    if (pthread_key_create(&exit_key, release_thread_state) != 0)
        abort();
}

static struct thread_state *create_thread_state(void)
{
    unsigned nslots = ra__config()->max_tags + 1;
    size_t size = sizeof(struct thread_state) +
                  nslots * sizeof(struct tag_slot);
    struct thread_state *ts;

    /* Untagged and uncached: the state is the library's, not the tag's. */
    ts = mallocx(size, MALLOCX_ZERO | MALLOCX_TCACHE_NONE);
    if (ts == NULL)
        return NULL;
    ts->nslots = nslots;
    if (pthread_setspecific(exit_key, ts) != 0) {
        dallocx(ts, MALLOCX_TCACHE_NONE);
        return NULL;
    }
    lock_threads();
    ts->next = all_threads.next;
    ts->prev = &all_threads;
    all_threads.next->prev = ts;
    all_threads.next = ts;
    unlock_threads();
    tls_state = ts;
    return ts;
}

static void setup_slot(struct tag_slot *s, ra_tag_t tag)
{
    unsigned arena = ra__tag_arena[tag];
    unsigned tcache;
    size_t len = sizeof tcache;

    if (mallctl("tcache.create", &tcache, &len, NULL, 0) == 0) {
        s->tcache = tcache;
        s->free_flags = MALLOCX_TCACHE(tcache);
    } else {
        /* Out of tcache ids (4093 per process): correct, only slower. */
        s->tcache = NO_TCACHE;
        s->free_flags = MALLOCX_TCACHE_NONE;
    }
    s->alloc_flags = ARENA_FLAGS(arena) | s->free_flags;
}

/* Returns this thread's slot for tag, set up, or NULL when the thread cannot
 * have one now (re-entered, exiting, out of memory). */
RA__COLD static struct tag_slot *get_slot_slow(ra_tag_t tag)
{
    struct thread_state *ts = tls_state;
    ra_tag_t saved_top;

    if (tls_busy || tls_exited)
        return NULL;
    tls_busy = true;
    /* Whatever glibc allocates for us meanwhile is the library's. */
    saved_top = ra__tag_stack.top;
    ra__tag_stack.top = RA_TAG_NONE;
    if (ts == NULL)
        ts = create_thread_state();
    if (ts != NULL && ts->slots[tag].alloc_flags == 0)
        setup_slot(&ts->slots[tag], tag);
    ra__tag_stack.top = saved_top;
    tls_busy = false;
    return ts == NULL ? NULL : &ts->slots[tag];
}

static inline struct tag_slot *get_slot(ra_tag_t tag)
{
    struct thread_state *ts = tls_state;

    if (RA__LIKELY(ts != NULL) && RA__LIKELY(ts->slots[tag].alloc_flags != 0))
        return &ts->slots[tag];
    return get_slot_slow(tag);
}

static inline size_t at_least_one(size_t size)
{
    return size == 0 ? 1 : size;
}

static void *fail_enomem(void)
{
    errno = ENOMEM;
    return NULL;
}

/* jemalloc's own malloc and free: their inlined fast path is about twice as
 * fast as mallocx/dallocx. Reached through a handle to the jemalloc library
 * itself (the plain names are ours); NULL until the library's constructor
 * has run, and then mallocx/dallocx serve. */
typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
static _Atomic(malloc_fn) jemalloc_malloc;
static _Atomic(free_fn) jemalloc_free;

__attribute__((constructor)) static void find_jemalloc_fast_path(void)
{
    Dl_info info;
    void *lib;
    malloc_fn m;
    free_fn f;

    if (dladdr((void *)mallocx, &info) == 0 || info.dli_fname == NULL)
        return;
    lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL)
        return;
    m = (malloc_fn)dlsym(lib, "malloc");
    f = (free_fn)dlsym(lib, "free");
    /* dlsym on jemalloc's own handle finds its definitions, never ours. The
     * handle stays open: the functions must outlive this constructor. */
    if (m == NULL || f == NULL)
        return;
    atomic_store_explicit(&jemalloc_malloc, m, memory_order_relaxed);
    atomic_store_explicit(&jemalloc_free, f, memory_order_relaxed);
}

static inline void *alloc_untagged(size_t size, int flags)
{
    malloc_fn fast = atomic_load_explicit(&jemalloc_malloc,
                                          memory_order_relaxed);
    void *p;

    /* jemalloc's malloc has glibc's semantics: malloc(0) is a unique
     * block, failure sets errno to ENOMEM. */
    if (flags == 0 && RA__LIKELY(fast != NULL))
        return fast(size);
    if (RA__UNLIKELY(size > PTRDIFF_MAX))
        return fail_enomem();
    p = mallocx(at_least_one(size), flags);
    return RA__LIKELY(p != NULL) ? p : fail_enomem();
}

/* A full region may still hold free space in this thread's cache or in dirty
 * pages of the arena (jemalloc #2752): give both back and try once more. */
RA__COLD static void make_room(ra_tag_t tag, const struct tag_slot *s)
{
    if (s != NULL)
        flush_tcache(s->tcache);
    ra__stats_purge_arena(ra__tag_arena[tag]);
}

RA__COLD static void *alloc_tagged_slow(ra_tag_t tag, size_t size, int flags)
{
    struct tag_slot *s;
    int tag_flags;
    void *p;

    if (!atomic_load_explicit(&ra__tagging, memory_order_relaxed))
        return alloc_untagged(size, flags);
    if (size > PTRDIFF_MAX)
        return fail_enomem();
    s = get_slot(tag);
    tag_flags = s != NULL ? s->alloc_flags
                          : ARENA_FLAGS(ra__tag_arena[tag]) |
                                MALLOCX_TCACHE_NONE;
    p = mallocx(at_least_one(size), tag_flags | flags);
    if (p == NULL) {
        make_room(tag, s);
        p = mallocx(at_least_one(size), tag_flags | flags);
        if (p == NULL)
            return fail_enomem();
    }
    /* During thread exit jemalloc serves explicit-arena requests from arena
     * 0 (#2791): such a block is untagged and counts for no tag. */
    if (ra__tag_of_addr(p) != tag)
        return p;
    if (s != NULL)
        count_one(&s->nmalloc);
    else
        count_orphan(&orphan_nmalloc[tag]);
    return p;
}

static inline void *alloc_tagged(ra_tag_t tag, size_t size, int flags)
{
    struct thread_state *ts = tls_state;

    if (RA__LIKELY(ts != NULL) && RA__LIKELY(size <= PTRDIFF_MAX)) {
        struct tag_slot *s = &ts->slots[tag];
        if (RA__LIKELY(s->alloc_flags != 0)) {
            void *p = mallocx(at_least_one(size), s->alloc_flags | flags);
            if (RA__LIKELY(p != NULL)) {
                if (RA__LIKELY(ra__tag_of_addr(p) == tag))
                    count_one(&s->nmalloc);
                return p;
            }
        }
    }
    return alloc_tagged_slow(tag, size, flags);
}

static inline void *alloc_as(ra_tag_t tag, size_t size, int flags)
{
    if (RA__LIKELY(tag == RA_TAG_NONE))
        return alloc_untagged(size, flags);
    return alloc_tagged(tag, size, flags);
}

RA__COLD static void free_tagged_slow(void *ptr, ra_tag_t tag, size_t size,
                                      int align_flags)
{
    struct tag_slot *s = get_slot(tag);
    int flags = s != NULL ? s->free_flags : MALLOCX_TCACHE_NONE;

    if (s != NULL)
        count_one(&s->ndalloc);
    else
        count_orphan(&orphan_ndalloc[tag]);
    if (size == 0)
        dallocx(ptr, flags);
    else
        sdallocx(ptr, size, flags | align_flags);
}

/* size 0: unknown. Otherwise the size requested at allocation. */
static inline void free_block(void *ptr, size_t size, int align_flags)
{
    ra_tag_t tag = ra__tag_of_addr(ptr);
    struct thread_state *ts;

    if (RA__LIKELY(tag == RA_TAG_NONE)) {
        free_fn fast = atomic_load_explicit(&jemalloc_free,
                                            memory_order_relaxed);
        if (size == 0 && RA__LIKELY(fast != NULL)) {
            fast(ptr);
            return;
        }
        if (RA__UNLIKELY(ptr == NULL))
            return;
        if (size == 0)
            dallocx(ptr, 0);
        else
            sdallocx(ptr, size, align_flags);
        return;
    }
    ts = tls_state;
    if (RA__LIKELY(ts != NULL) && RA__LIKELY(ts->slots[tag].alloc_flags != 0)) {
        struct tag_slot *s = &ts->slots[tag];
        count_one(&s->ndalloc);
        if (size == 0)
            dallocx(ptr, s->free_flags);
        else
            sdallocx(ptr, size, s->free_flags | align_flags);
        return;
    }
    free_tagged_slow(ptr, tag, size, align_flags);
}

void *ra_malloc(size_t size)
{
    return alloc_as(ra__tag_stack.top, size, 0);
}

void *ra_malloc_tag(ra_tag_t tag, size_t size)
{
    if (tag != RA_TAG_NONE && !ra__tag_valid(tag)) {
        errno = EINVAL;
        return NULL;
    }
    return alloc_as(tag, size, 0);
}

void *ra_calloc(size_t n, size_t size)
{
    size_t total;

    if (__builtin_mul_overflow(n, size, &total))
        return fail_enomem();
    return alloc_as(ra__tag_stack.top, total, MALLOCX_ZERO);
}

void ra_free(void *ptr)
{
    free_block(ptr, 0, 0);
}

void ra_free_sized(void *ptr, size_t size)
{
    free_block(ptr, at_least_one(size), 0);
}

void ra__free_aligned_sized(void *ptr, size_t align, size_t size)
{
    free_block(ptr, at_least_one(size), MALLOCX_ALIGN(align));
}

/* Allocates with a power-of-two alignment already validated. */
void *ra__alloc_aligned(size_t align, size_t size)
{
    return alloc_as(ra__tag_stack.top, size, MALLOCX_ALIGN(align));
}

void *ra_aligned_alloc(size_t align, size_t size)
{
    if (align == 0 || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    return ra__alloc_aligned(align, size);
}

int ra_posix_memalign(void **out, size_t align, size_t size)
{
    int saved = errno;
    void *p;

    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    p = ra__alloc_aligned(align, size);
    errno = saved;
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

size_t ra_malloc_usable_size(const void *ptr)
{
    return ptr == NULL ? 0 : sallocx(ptr, 0);
}

RA__COLD static void *realloc_tagged_slow(void *ptr, ra_tag_t tag,
                                          size_t size)
{
    struct tag_slot *s = get_slot(tag);
    int flags = s != NULL ? s->alloc_flags
                          : ARENA_FLAGS(ra__tag_arena[tag]) |
                                MALLOCX_TCACHE_NONE;
    void *p = rallocx(ptr, size, flags);

    if (p == NULL) {
        make_room(tag, s);
        p = rallocx(ptr, size, flags);
        if (p == NULL)
            return fail_enomem();
    }
    /* A realloc ends one block and starts another, as hooks will see it;
     * the new one may have left the region during thread exit (#2791). */
    if (s != NULL) {
        count_one(&s->ndalloc);
        if (ra__tag_of_addr(p) == tag)
            count_one(&s->nmalloc);
    } else {
        count_orphan(&orphan_ndalloc[tag]);
        if (ra__tag_of_addr(p) == tag)
            count_orphan(&orphan_nmalloc[tag]);
    }
    return p;
}

void *ra_realloc(void *ptr, size_t size)
{
    ra_tag_t tag;
    struct thread_state *ts;
    void *p;

    if (ptr == NULL)
        return ra_malloc(size);
    if (size == 0) {
        ra_free(ptr);
        return NULL;
    }
    if (size > PTRDIFF_MAX)
        return fail_enomem();
    tag = ra__tag_of_addr(ptr);
    if (RA__LIKELY(tag == RA_TAG_NONE)) {
        p = rallocx(ptr, size, 0);
        return p != NULL ? p : fail_enomem();
    }
    /* The block keeps its owner's arena whatever is on the stack. */
    ts = tls_state;
    if (RA__LIKELY(ts != NULL) && RA__LIKELY(ts->slots[tag].alloc_flags != 0)) {
        struct tag_slot *s = &ts->slots[tag];
        p = rallocx(ptr, size, s->alloc_flags);
        if (RA__LIKELY(p != NULL)) {
            count_one(&s->ndalloc);
            if (RA__LIKELY(ra__tag_of_addr(p) == tag))
                count_one(&s->nmalloc);
            return p;
        }
    }
    return realloc_tagged_slow(ptr, tag, size);
}

void ra_thread_flush(void)
{
    struct thread_state *ts = tls_state;

    mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    if (ts == NULL)
        return;
    for (unsigned t = 1; t < ts->nslots; t++)
        if (ts->slots[t].alloc_flags != 0)
            flush_tcache(ts->slots[t].tcache);
}

void ra__alloc_flush_tag(ra_tag_t tag)
{
    struct thread_state *ts = tls_state;

    if (ts != NULL && tag < ts->nslots && ts->slots[tag].alloc_flags != 0)
        flush_tcache(ts->slots[tag].tcache);
}

void ra__alloc_counts(ra_tag_t tag, uint64_t *nmalloc, uint64_t *ndalloc)
{
    uint64_t m, d;

    lock_threads();
    m = atomic_load_explicit(&orphan_nmalloc[tag], memory_order_relaxed);
    d = atomic_load_explicit(&orphan_ndalloc[tag], memory_order_relaxed);
    for (struct thread_state *ts = all_threads.next; ts != &all_threads;
         ts = ts->next) {
        m += atomic_load_explicit(&ts->slots[tag].nmalloc,
                                  memory_order_relaxed);
        d += atomic_load_explicit(&ts->slots[tag].ndalloc,
                                  memory_order_relaxed);
    }
    unlock_threads();
    *nmalloc = m;
    *ndalloc = d;
}

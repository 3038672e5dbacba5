/* Floor: OS. The library's locks: their ranks (the one order in which a
 * thread may take them), the mutex and the spin lock that carry a rank,
 * and, in the debug build, the check of both order and ownership (lock.c,
 * modelled on jemalloc's witness). Included by types.h. */
#ifndef RA_LOCK_H
#define RA_LOCK_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

/* The ranks, outermost first: a thread takes a lock only when its rank is
 * above that of every lock it holds (locks of one rank, such as a family
 * of stripes, in the order of their addresses), so no two threads can each
 * wait for the other's lock. The order is the one the code nests them in:
 *
 * - The services (symbols, the HTTP door, the checkpoint ring) hold their
 *   lock while they read what every floor below keeps.
 * - A reset or destroy holds lifetime's lock while it takes the reclaim's,
 *   the profile's, the registry's, the budgets' and the threads'.
 * - "Calling into the dynamic loader" (RA__RANK_LOADER) is a pseudo-rank,
 *   never a lock: where the library calls dlopen, dlsym, dladdr or
 *   dl_iterate_phdr, it holds no lock ranked after it. The loader holds its
 *   own lock while it runs a library's constructors, which allocate, and
 *   an allocation may take every lock from the profile's on (a sample; an
 *   object's tag made, REGIONALLOC_TAG_BY=library): holding one of those
 *   across a call into the loader could wait for a constructor that waits
 *   for us. (_dl_find_object takes no lock: the allocation path calls it.)
 * - Tags by calling object hold their table of objects while they make an
 *   object's tag (from an allocation, which holds no lock of ours).
 * - A tag's creation holds a stripe of the registry, then its ids, while it
 *   sets a budget's guard, makes the pool's first arena, and names threads.
 * - A thread's exit holds the threads' lock while it leaves its tags' pools;
 *   a pool's growth holds the pool's while jemalloc makes an arena.
 * - The leaves of the services and counts (history, pressure, leftovers,
 *   measure, untagged): nothing ranked lower is taken under them, and they
 *   may call into jemalloc (a thread's start, the library's own memory).
 * - "Calling into jemalloc" (RA__RANK_JEMALLOC) is a pseudo-rank, never a
 *   lock: where the library calls mallctl (an arena made, purged, reset,
 *   decayed, a statistic read), its own memory (meta.c) or a tag's
 *   allocation off the front cache, it holds no lock ranked above it.
 *   jemalloc takes its own locks there and, under them, calls the extent
 *   hooks, which take the locks ranked above RA__RANK_EXTENT_HOOK: holding
 *   one of those across such a call could wait for a thread that waits,
 *   inside jemalloc, for us.
 * - "Inside an extent hook" (RA__RANK_EXTENT_HOOK) is entered by each of
 *   the region's hooks and left on return: what the hooks take (a budget's
 *   link, the growth lock) ranks above it.
 * - Last what is taken under jemalloc's own locks or anywhere, for a few
 *   instructions: the free gate, the table of jemalloc's mappings (noted
 *   as jemalloc maps), a new thread's start, a thread's tag stack.
 *
 * The fork handlers (init.c) take theirs in this same order, checked as
 * any other thread's (no exception), and release them in the parent or
 * re-make them in the child. */
enum ra__lock_rank {
    RA__RANK_NONE = 0, /* a lock given no rank: the check aborts */
    RA__RANK_SYMBOLS,
    RA__RANK_HTTP,
    RA__RANK_DOOR,
    RA__RANK_RING,
    RA__RANK_LIFETIME,
    RA__RANK_RECLAIM,
    RA__RANK_NAMED,
    RA__RANK_INSTALL,
    RA__RANK_LOADER, /* pseudo-rank: calling into the dynamic loader */
    RA__RANK_PROF,
    RA__RANK_OBJECTS,
    RA__RANK_STRIPE,
    RA__RANK_IDS,
    RA__RANK_GUARD,
    RA__RANK_THREADS,
    RA__RANK_POOL,
    RA__RANK_HISTORY,
    RA__RANK_PRESSURE,
    RA__RANK_LEFTOVER,
    RA__RANK_MEASURE,
    RA__RANK_UNTAGGED,
    RA__RANK_JEMALLOC,    /* pseudo-rank: calling into jemalloc */
    RA__RANK_EXTENT_HOOK, /* pseudo-rank: inside an extent hook */
    RA__RANK_LINKING,
    RA__RANK_GROW,
    RA__RANK_GATE,
    RA__RANK_MAPPINGS,
    RA__RANK_START,
    RA__RANK_TAG_THREAD
};

#ifdef RA_DEBUG
/* A lock's identity for the check: its rank, its name (the rank's), and
 * the lock the holding thread took before it (the thread's held locks are
 * a list threaded through the locks themselves: only the holder writes
 * it, and it costs no allocation). */
struct ra__witness {
    enum ra__lock_rank rank;
    const char *name;
    struct ra__witness *below;
};
/* "RA__RANK_THREADS" names the lock "THREADS". */
#define RA__WITNESS_INIT(rank) , {(rank), (#rank) + 9, NULL}
#else
#define RA__WITNESS_INIT(rank)
#endif

/* The library's mutex: plain, never taken twice by one thread, never held
 * across user code. In a release build it is a pthread_mutex_t and
 * nothing else. */
struct ra__mutex {
    pthread_mutex_t m;
#ifdef RA_DEBUG
    struct ra__witness w;
#endif
};
#define RA__MUTEX_INIT(rank) {PTHREAD_MUTEX_INITIALIZER RA__WITNESS_INIT(rank)}

/* A spin lock that yields, for what is held briefly and must be held
 * across a fork where mutexes cannot be: ThreadSanitizer's deadlock
 * detector aborts with 64 mutexes held at once, and a fork holds the
 * library's and every arena's of jemalloc's. In a release build it is an
 * atomic_flag's size and alignment, so it sits beside hot data as one. */
struct ra__spin {
    atomic_flag f;
#ifdef RA_DEBUG
    struct ra__witness w;
#endif
};
#define RA__SPIN_INIT(rank) {ATOMIC_FLAG_INIT RA__WITNESS_INIT(rank)}

#ifndef RA_DEBUG
/* The lock words' size and alignment, where they sit beside hot data (the
 * registry's stripes, the budgets' guards), are those of what they wrap. */
_Static_assert(sizeof(struct ra__spin) == sizeof(atomic_flag) &&
                   _Alignof(struct ra__spin) == _Alignof(atomic_flag),
               "a spin lock is an atomic_flag");
_Static_assert(sizeof(struct ra__mutex) == sizeof(pthread_mutex_t) &&
                   _Alignof(struct ra__mutex) == _Alignof(pthread_mutex_t),
               "a mutex is a pthread_mutex_t");
#endif

#ifdef RA_DEBUG
/* lock.c: the check. Each aborts, naming the locks, when the rule breaks. */
void ra__witness_lock(struct ra__witness *w);
void ra__witness_unlock(struct ra__witness *w);
/* The lock was re-made (a fork's child): the thread holds it no more. */
void ra__witness_forget(struct ra__witness *w);
void ra__witness_assert(const struct ra__witness *w, bool held,
                        const char *file, int line);
void ra__witness_assert_rank(enum ra__lock_rank rank, const char *file,
                             int line);
void ra__witness_jemalloc(const char *file, int line);
void ra__witness_loader(const char *file, int line);
void ra__witness_assert_none(const char *file, int line);
void ra__witness_hook_enter(void);
void ra__witness_hook_leave(void);
#define RA__WITNESS(call) call
#else
#define RA__WITNESS(call) ((void)0)
#endif

/* A failure to take or release a lock is a broken invariant, and aborts. */
static inline void ra__lock(struct ra__mutex *m)
{
    if (pthread_mutex_lock(&m->m) != 0)
        abort();
    RA__WITNESS(ra__witness_lock(&m->w));
}

/* Returns true when taken. */
static inline bool ra__trylock(struct ra__mutex *m)
{
    if (pthread_mutex_trylock(&m->m) != 0)
        return false;
    RA__WITNESS(ra__witness_lock(&m->w));
    return true;
}

static inline void ra__unlock(struct ra__mutex *m)
{
    RA__WITNESS(ra__witness_unlock(&m->w));
    if (pthread_mutex_unlock(&m->m) != 0)
        abort();
}

/* A fork's child makes the lock anew when its holder may be a thread that
 * is gone; never one the forking thread holds, which it releases. */
static inline void ra__mutex_remake(struct ra__mutex *m)
{
    RA__WITNESS(ra__witness_forget(&m->w));
    pthread_mutex_init(&m->m, NULL);
}

/* pthread_cond_wait and pthread_cond_timedwait on the library's mutex: the
 * lock is let go while the thread waits. */
static inline int ra__cond_wait(pthread_cond_t *c, struct ra__mutex *m)
{
    int rc;

    RA__WITNESS(ra__witness_unlock(&m->w));
    rc = pthread_cond_wait(c, &m->m);
    RA__WITNESS(ra__witness_lock(&m->w));
    return rc;
}

static inline int ra__cond_timedwait(pthread_cond_t *c, struct ra__mutex *m,
                                     const struct timespec *until)
{
    int rc;

    RA__WITNESS(ra__witness_unlock(&m->w));
    rc = pthread_cond_timedwait(c, &m->m, until);
    RA__WITNESS(ra__witness_lock(&m->w));
    return rc;
}

static inline void ra__spin_lock(struct ra__spin *s)
{
    while (atomic_flag_test_and_set_explicit(&s->f, memory_order_acquire))
        sched_yield();
    RA__WITNESS(ra__witness_lock(&s->w));
}

/* The same, spinning without yielding: for a lock held a few instructions
 * at a time. */
static inline void ra__spin_lock_busy(struct ra__spin *s)
{
    while (atomic_flag_test_and_set_explicit(&s->f, memory_order_acquire)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    RA__WITNESS(ra__witness_lock(&s->w));
}

static inline void ra__spin_unlock(struct ra__spin *s)
{
    RA__WITNESS(ra__witness_unlock(&s->w));
    atomic_flag_clear_explicit(&s->f, memory_order_release);
}

/* A fork's child lets go of the lock, whoever took it. */
static inline void ra__spin_remake(struct ra__spin *s)
{
    RA__WITNESS(ra__witness_forget(&s->w));
    atomic_flag_clear_explicit(&s->f, memory_order_release);
}

/* Debug-build checks of ownership: the calling thread holds the lock (or
 * not), or a lock of the rank (for a lock of another file's). */
#ifdef RA_DEBUG
#define ra__assert_held(lock) ra__witness_assert(&(lock)->w, true, __FILE__, __LINE__)
#define ra__assert_not_held(lock)                                           \
    ra__witness_assert(&(lock)->w, false, __FILE__, __LINE__)
#define ra__assert_rank_held(rank)                                          \
    ra__witness_assert_rank((rank), __FILE__, __LINE__)
/* The calling thread may call into jemalloc: it holds no lock ranked
 * above RA__RANK_JEMALLOC. */
#define ra__assert_may_call_jemalloc() ra__witness_jemalloc(__FILE__, __LINE__)
/* The calling thread may call into the dynamic loader: it holds no lock
 * ranked after RA__RANK_LOADER. */
#define ra__assert_may_call_loader() ra__witness_loader(__FILE__, __LINE__)
/* The calling thread holds no lock of ours (nor is inside a hook): where
 * user code runs (a callback, a caller's FILE) or a library loads. */
#define ra__assert_no_lock_held() ra__witness_assert_none(__FILE__, __LINE__)
#define ra__extent_hook_enter() ra__witness_hook_enter()
#define ra__extent_hook_leave() ra__witness_hook_leave()
#else
#define ra__assert_held(lock) ((void)sizeof(*(lock)))
#define ra__assert_not_held(lock) ((void)sizeof(*(lock)))
#define ra__assert_rank_held(rank) ((void)sizeof(rank))
#define ra__assert_may_call_jemalloc() ((void)0)
#define ra__assert_may_call_loader() ((void)0)
#define ra__assert_no_lock_held() ((void)0)
#define ra__extent_hook_enter() ((void)0)
#define ra__extent_hook_leave() ((void)0)
#endif

#endif /* RA_LOCK_H */

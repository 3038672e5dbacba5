/* Floor: state. Per-thread state: for each tag a thread uses, its jemalloc
 * tcache, its front cache of small blocks (for a tag it allocates in) and
 * its counters, then the thread's outbox (outbox.c); released at thread
 * exit. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "budget.h"

#include "internal.h"

RA__TLS struct ra__thread_state *ra__thread;
/* Set while this thread sets up its state: allocations it causes (glibc's
 * pthread_setspecific may call calloc) are served uncached, not recursively. */
static RA__TLS bool tls_busy;
/* Set once this thread's state was released at exit: later tagged requests
 * go uncached instead of creating state nobody would release. */
static RA__TLS bool tls_exited;

/* The fast paths' code depends on it: one cache line a slot. */
_Static_assert(sizeof(struct ra__tag_slot) == 64, "a slot is 64 bytes");
_Static_assert(sizeof(struct ra__fc_bin) == 32, "a bin's header is 32 bytes");

static struct ra__mutex threads_lock = RA__MUTEX_INIT(RA__RANK_THREADS);
static struct ra__thread_state all_threads = {
    .prev = &all_threads, .next = &all_threads, .nslots = 0};
/* Counts of exited threads and of requests served without a slot, as a
 * slot's (bytes modulo 2^64), a line a tag: ids side by side are often
 * two threads' requests. */
static struct orphans {
    alignas(64) _Atomic uint64_t nmalloc;
    _Atomic uint64_t ndalloc;
    _Atomic uint64_t bytes;
    /* Allocations, reallocations and frees of the tag on threads without
     * a slot, in flight (ra__thread_orphan_begin). */
    _Atomic unsigned busy;
} orphans[RA__MAX_TAGS_LIMIT + 1];
/* Each tag's slots, over the threads that have one (under threads_lock):
 * a reset or destroy visits the threads that used the tag, not every
 * thread of the process. When a tag has one slot, lone says whose it is
 * (NULL otherwise), read without the lock: a thread whose slot is a tag's
 * only one may end the tag, or count it, alone (ra__thread_end_own,
 * ra__thread_counts), since no other thread adds a slot to a tag it
 * neither allocates in nor holds a block of. */
static struct ra__tag_slot *users[RA__MAX_TAGS_LIMIT + 1];
static unsigned nusers[RA__MAX_TAGS_LIMIT + 1];
static _Atomic(struct ra__thread_state *) lone[RA__MAX_TAGS_LIMIT + 1];

static struct ra__thread_state *state_of(struct ra__tag_slot *s,
                                         ra_tag_t tag);

static void set_lone(ra_tag_t tag)
{
    atomic_store_explicit(&lone[tag],
                          nusers[tag] == 1 ? state_of(users[tag], tag) : NULL,
                          memory_order_release);
}

static void add_user(struct ra__tag_slot *s, ra_tag_t tag)
{
    s->users_next = users[tag];
    s->users_prev = &users[tag];
    if (users[tag] != NULL)
        users[tag]->users_prev = &s->users_next;
    users[tag] = s;
    nusers[tag]++;
    set_lone(tag);
}

/* The thread whose slot of tag s is. */
static struct ra__thread_state *state_of(struct ra__tag_slot *s, ra_tag_t tag)
{
    return (struct ra__thread_state *)((char *)(s - tag) -
                                       offsetof(struct ra__thread_state,
                                                slots));
}

static void remove_user(struct ra__tag_slot *s, ra_tag_t tag)
{
    *s->users_prev = s->users_next;
    if (s->users_next != NULL)
        s->users_next->users_prev = s->users_prev;
    nusers[tag]--;
    set_lone(tag);
}

/* Whether the calling thread (state ts) has the tag's only slot. */
static bool lone_user(const struct ra__thread_state *ts, ra_tag_t tag)
{
    return ts != NULL &&
           atomic_load_explicit(&lone[tag], memory_order_acquire) == ts;
}

/* The pair allocates from arena through its cache. */
static void bind_to(struct ra__tag_slot *s, unsigned arena)
{
    s->arena = (uint16_t)arena;
    s->alloc_flags =
        RA__ARENA_FLAGS(arena) | ra__be_tcache_flags(s->tcache);
    ra__assert(RA__NAMES_TCACHE(s->alloc_flags));
}

/* The pair as it starts, and starts over: no tcache until it is busy
 * (ra__slot_miss_slow), bound to arena. */
static void start_uncached(struct ra__tag_slot *s, unsigned arena)
{
    atomic_store_explicit(&s->parked, RA__PAIR_ACTIVE, memory_order_relaxed);
    s->tcache = RA__NO_TCACHE;
    /* MALLOC_CONF=tcache:false: never a tcache, nothing to count. */
    s->misses = ra__be_caches ? 0 : RA__TCACHE_AFTER_MISSES;
    bind_to(s, arena);
}

void ra__thread_prefork(void)
{
    ra__lock(&threads_lock);
}

void ra__thread_postfork_parent(void)
{
    ra__unlock(&threads_lock);
}

void ra__thread_postfork_child(void)
{
    /* The child has only the forking thread; the other threads' states stay
     * listed (their counts still belong to the totals) but are never freed. */
    ra__unlock(&threads_lock);
}

void ra__count_orphan(ra_tag_t tag, bool alloc, size_t size)
{
    atomic_fetch_add_explicit(alloc ? &orphans[tag].nmalloc
                                    : &orphans[tag].ndalloc,
                              1, memory_order_relaxed);
    atomic_fetch_add_explicit(&orphans[tag].bytes,
                              alloc ? size : -(uint64_t)size,
                              memory_order_relaxed);
}

static void flush_tcache(unsigned tcache)
{
    if (tcache != RA__NO_TCACHE)
        ra__be_tcache_flush(tcache);
}

/* The bin's capacity in the library's accounts: the return stacks'
 * bound, a refill's most. */
static unsigned bin_cap(unsigned bin)
{
    return ra__fc_cap(ra__bin_size[bin]);
}

/* Gives back the oldest n blocks of a bin, through the slot's tcache. */
static void release_oldest(struct ra__tag_slot *s, unsigned bin, unsigned n)
{
    struct ra__fc_bin *b = &s->bins[bin];

    if (n == 0)
        return; /* items may be NULL: a bin never used */
    for (unsigned i = 0; i < n; i++)
        ra__je_sdallocx(b->items[i], ra__bin_size[bin],
                        ra__be_tcache_flags(s->tcache));
    ra__untagged_tag_freed(n * ra__bin_size[bin]);
    b->count -= n;
    memmove(b->items, b->items + n, b->count * sizeof b->items[0]);
}

/* -- parked pairs ----------------------------------------------------------
 * A destroy that finds nothing live keeps the pairs its holder used, so
 * that the slot's next holder allocates without a call into jemalloc; but
 * what a pair keeps must stay within reach of a purge, whoever calls it,
 * or the kept pages would hold the next holder past a budget (a consumer
 * thread's caches of blocks another thread made). So the destroy parks
 * each such pair: its front cache's blocks go onto the tag's return
 * stacks (which anyone drains, and the next refill takes whole), or when
 * they are full through the pair's tcache; every bin's capacity goes to 0
 * and alloc_flags to 0, so that the owner's next use of the pair, from any
 * path, goes through unpark() first; and the tcache, the one cache left
 * that holds blocks, may be flushed by any thread while the pair stays
 * parked (ra__thread_release_kept). */

static bool is_parked(const struct ra__tag_slot *s)
{
    return atomic_load_explicit(&s->parked, memory_order_acquire) !=
           RA__PAIR_ACTIVE;
}

/* Whether the slot was set up (in use, or parked). */
static bool set_up(const struct ra__tag_slot *s)
{
    return s->alloc_flags != 0 || is_parked(s);
}

/* With threads_lock held, at the destroy of tag that found nothing live:
 * nobody uses the pair (the caller's promise). */
static void park(struct ra__tag_slot *s, ra_tag_t tag)
{
    if (s->bins != NULL)
        for (unsigned bin = 0; bin < ra__nbins; bin++) {
            struct ra__fc_bin *b = &s->bins[bin];
            unsigned bound = RA__RETURNS_BINS * bin_cap(bin);
            while (b->count != 0) {
                unsigned n = b->count < RA__FC_SLOTS / 2 ? b->count
                                                         : RA__FC_SLOTS / 2;
                if (!ra__returns_push(tag, bin, b->items + b->count - n, n,
                                      bound))
                    break;
                b->count -= n;
            }
            release_oldest(s, bin, b->count);
            b->cap = 0;
        }
    s->alloc_flags = 0;
    atomic_store_explicit(&s->parked, RA__PAIR_PARKED, memory_order_release);
}

/* The owner takes its parked pair back, as it finds it: a flush of its
 * tcache by another thread (RA__PAIR_FLUSHING) is waited for, a matter of
 * microseconds. No lock: a request's first use of a recycled slot must
 * not queue behind every other thread's. */
static void unpark(struct ra__tag_slot *s)
{
    uint8_t want = RA__PAIR_PARKED;

    while (!atomic_compare_exchange_weak_explicit(
        &s->parked, &want, RA__PAIR_ACTIVE, memory_order_acquire,
        memory_order_relaxed)) {
        ra__assert(want != RA__PAIR_ACTIVE);
        want = RA__PAIR_PARKED;
        sched_yield();
    }
    bind_to(s, s->arena);
}

void ra__thread_release_kept(ra_tag_t tag)
{
    ra__lock(&threads_lock);
    for (struct ra__tag_slot *s = users[tag]; s != NULL; s = s->users_next) {
        uint8_t want = RA__PAIR_PARKED;
        if (s->tcache == RA__NO_TCACHE ||
            !atomic_compare_exchange_strong_explicit(
                &s->parked, &want, RA__PAIR_FLUSHING, memory_order_acquire,
                memory_order_relaxed))
            continue;
        /* jemalloc keeps the id and builds the tcache again at its next
         * use, so the owner's flags stay right. */
        flush_tcache(s->tcache);
        atomic_store_explicit(&s->parked, RA__PAIR_PARKED,
                              memory_order_release);
    }
    ra__unlock(&threads_lock);
}

/* A bin's array is made at its first use, RA__FC_FIRST blocks (fewer for
 * big classes), and its capacity set (0 until then, and while the pair is
 * parked: the fast paths see it full, or empty, and come here or to the
 * refill), so that a (thread, tag) pair holds arrays for the classes it
 * uses and no more: 36 bins of 64 blocks each, inline, were 19 KiB a
 * pair, about 7 KiB of it touched by a visit of a dozen classes. False
 * when the library has no memory for it (the bin then caches nothing). */
static bool set_up_bin(struct ra__fc_bin *b, unsigned bin)
{
    if (b->items == NULL) {
        unsigned room = ra__fc_cap_max(ra__bin_size[bin]);
        if (room > RA__FC_FIRST)
            room = RA__FC_FIRST;
        b->items = ra__meta_alloc(room * sizeof b->items[0]);
        if (b->items == NULL)
            return false;
        b->room = room;
    }
    b->cap = b->room;
    b->size = (unsigned)ra__bin_size[bin];
    return true;
}

/* At a refill (the bin empty), after the bin overflowed since the last:
 * its array doubles, up to ra__fc_cap_max, so that a pair whose requests
 * make and free more blocks of a class than its bin holds (130 nodes a
 * request in examples/requests) stops sending half of them to the return
 * stacks and taking them back at every request. Here, with the bin
 * empty, nothing is copied; where it overflows, a free would allocate. */
static void grow_bin(struct ra__fc_bin *b, unsigned bin)
{
    unsigned room = b->room * 2, max = ra__fc_cap_max(ra__bin_size[bin]);
    void **items;

    b->overflowed = 0;
    if (b->room >= max)
        return;
    if (room > max)
        room = max;
    ra__assert(b->count == 0);
    items = ra__meta_alloc(room * sizeof items[0]);
    if (items == NULL)
        return;
    ra__meta_free(b->items);
    b->items = items;
    b->room = b->cap = room;
}

bool ra__fc_make_room(struct ra__tag_slot *s, unsigned bin)
{
    struct ra__fc_bin *b = &s->bins[bin];
    /* Half a bin, but never more than half of the bins the return stacks
     * are bounded by: a bin grown to 256 blocks pushing 128 at a time
     * filled a stack of four 64-block bins at once and sent the rest
     * through jemalloc's bins (bench/hot_tag's ring: 3-5 bin-lock
     * operations per 1,000 blocks became 8-27). */
    unsigned half = b->cap < bin_cap(bin) ? b->cap / 2 : bin_cap(bin) / 2;

    if (RA__UNLIKELY(s->alloc_flags == 0))
        unpark(s);
    if (b->cap == 0)
        return set_up_bin(b, bin) && b->count < b->cap;
    ra__slot_miss(s);
    b->overflowed = 1;
    /* A thread that frees more of the class than it allocates (a consumer
     * of another thread's blocks) leaves the surplus where the tag's
     * allocating threads look first: no lock, no jemalloc. */
    if (ra__returns_push((ra_tag_t)(s - ra__thread->slots), bin,
                         b->items + b->count - half, half,
                         RA__RETURNS_BINS * bin_cap(bin))) {
        b->count -= half;
        return true;
    }
    release_oldest(s, bin, half);
    return true;
}

/* A pair gets its jemalloc tcache only once it is busy and has lived: at a
 * miss (a refill at full size, a full bin, or a block no front cache
 * takes) after its second, once it has made RA__TCACHE_AFTER_ALLOCS
 * blocks. A pair that makes a few blocks and goes idle (each of many tags
 * a thread visits once) then holds no tcache, which was about half of
 * what an idle pair kept (107 against 52 KiB in bench/pairs), and takes
 * none of jemalloc's 4,093 ids; nor does a request's tag that leaves its
 * blocks to the destroy, which throws the pair's tcache away (a 32 KiB
 * zeroed allocation of jemalloc's to build again: with one, a tag's life
 * of 1000 blocks took 71 against 50 us in bench/tag_life). Requests that
 * free their blocks keep the pair from one to the next (ra__thread_end_tag)
 * and its age with it (made_before): a thread serving them takes one
 * tcache and keeps it, and its refills are jemalloc's batches rather than
 * a bin lock per block (examples/requests: 52 against 95k requests/s on
 * one thread). The creation is under threads_lock: a reset of the tag,
 * from any thread, flushes the slot's tcache under it. */
#define RA__TCACHE_AFTER_ALLOCS 8192

/* The pair's allocations or frees, whichever it made more of. */
static uint64_t pair_events(const struct ra__tag_slot *s)
{
    uint64_t m = atomic_load_explicit(&s->nmalloc, memory_order_relaxed);
    uint64_t d = atomic_load_explicit(&s->ndalloc, memory_order_relaxed);

    return m > d ? m : d;
}

/* The pair reached for a tcache (tcache: what jemalloc gave, or
 * RA__NO_TCACHE): busy, an allocating pair weighs in its tag's pool from
 * now on, on the arena the pool then picks (one more arena when those it
 * has are full), rather than from its first block: with a pair counted
 * from its first block, 16 threads visiting 300 tags each grew every
 * tag's pool to a second arena, about 100 KiB a tag, for threads that
 * never shared a tag at the same time. Its blocks stay where they are:
 * the tag's, whatever arena of the pool made them. */
static void become_busy(struct ra__tag_slot *s, ra_tag_t tag,
                        unsigned tcache)
{
    unsigned arena = s->arena;

    if (s->allocates && !s->busy)
        arena = ra__pool_bind(tag, ra__budget_allows_growth(tag));
    ra__lock(&threads_lock);
    s->tcache = (uint16_t)tcache;
    s->busy = s->allocates;
    bind_to(s, arena);
    ra__unlock(&threads_lock);
}

void ra__slot_miss_slow(struct ra__tag_slot *s)
{
    unsigned tcache;

    if (s->misses + 1 < RA__TCACHE_AFTER_MISSES) {
        s->misses++;
        return;
    }
    /* Busy but young: asked again at its next miss. A consumer of another
     * thread's blocks makes none, so its frees count for it: without a
     * tcache each block its front cache could not keep took a bin lock
     * (bench/hot_tag: 385 bin-lock operations per 1,000 blocks on 8
     * threads). The larger count, not the sum: a pair that makes and frees
     * its own blocks takes its tcache no sooner than it did. */
    if (s->made_before + pair_events(s) < RA__TCACHE_AFTER_ALLOCS)
        return;
    s->misses++;
    /* Out of ids (4093 per process): the pair stays uncached behind its
     * front cache, correct and slower, and asks no more. */
    if (ra__be_tcache_create(&tcache))
        tcache = RA__NO_TCACHE;
    ra__assert(tcache <= RA__NO_TCACHE);
    become_busy(s, (ra_tag_t)(s - ra__thread->slots), tcache);
}

void ra__thread_send_overflowed(ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;
    struct ra__tag_slot *s;
    unsigned tcache;

    if (ts == NULL || tag >= ts->nslots)
        return;
    s = &ts->slots[tag];
    /* A pair that allocates sends nothing; one that took its tcache, or
     * was refused one, asks no more; one that has freed few blocks (the
     * stack filled by others) waits, as an allocating pair does, until it
     * is busy: a tcache is 32 KiB of jemalloc's and one of its 4,093 ids. */
    if (s->allocates || s->misses >= RA__TCACHE_AFTER_MISSES ||
        s->made_before + pair_events(s) < RA__TCACHE_AFTER_ALLOCS)
        return;
    if (ra__be_tcache_create(&tcache))
        tcache = RA__NO_TCACHE;
    ra__lock(&threads_lock);
    /* A destroy of the tag may have parked the pair or started it over
     * since the send: it is then the next holder's, which takes its own. */
    if (set_up(s) && !is_parked(s) && !s->allocates &&
        s->tcache == RA__NO_TCACHE) {
        s->tcache = (uint16_t)tcache;
        /* Busy: its first allocation joins the pool's count
         * (start_allocating), and no miss asks for another tcache. */
        s->misses = RA__TCACHE_AFTER_MISSES;
        bind_to(s, s->arena);
        tcache = RA__NO_TCACHE;
    }
    ra__unlock(&threads_lock);
    if (tcache != RA__NO_TCACHE)
        ra__be_tcache_destroy(tcache);
}

/* Empties the slot's front cache and tcache: their blocks reach the arena,
 * which is what makes `allocated` exact. Called with threads_lock held, so
 * that no flush meets a reset of the same tag (which discards what the
 * caches hold) whatever thread each runs on. */
static void flush_slot(struct ra__tag_slot *s)
{
    if (s->bins != NULL)
        for (unsigned bin = 0; bin < ra__nbins; bin++)
            if (s->bins[bin].count != 0)
                release_oldest(s, bin, s->bins[bin].count);
    flush_tcache(s->tcache);
}

#define FIRST_FILL 2

/* A block of size from the slot's arena: the tag's, unless jemalloc
 * redirected it (its thread-exit redirection to arena 0). */
static void *made_one(const struct ra__tag_slot *s, ra_tag_t tag,
                      size_t size)
{
    void *p = ra__je_mallocx(size, s->alloc_flags);

    if (p != NULL && ra__tag_of_addr(p) == tag)
        ra__untagged_tag_made(size);
    return p;
}

void *ra__fc_refill(struct ra__tag_slot *s, ra_tag_t tag, unsigned bin)
{
    struct ra__fc_bin *b = &s->bins[bin];
    size_t size = ra__bin_size[bin];
    unsigned want, got = 0;
    void *first;

    if (RA__UNLIKELY(s->alloc_flags == 0))
        unpark(s);
    /* Only a pair that allocates has a front cache (start_allocating). */
    ra__assert(s->allocates);
    /* First use, maybe (ra__fc_make_room); without memory for the bin, one
     * block, uncached. */
    if (!set_up_bin(b, bin))
        return made_one(s, tag, size);
    if (b->overflowed)
        grow_bin(b, bin);
    /* Blocks other threads freed come home first (returns.c). */
    got = ra__returns_take(tag, bin, b->items, b->cap);
    if (got != 0) {
        b->count = got - 1;
        return b->items[got - 1];
    }
    first = made_one(s, tag, size);
    if (first == NULL || ra__tag_of_addr(first) != tag) {
        /* Failure, or jemalloc's thread-exit redirection to arena 0
         * (doc/design.md): nothing to cache, the caller copes. */
        return first;
    }
    ra__page_bin_set(first, bin);
    /* A bin's refills grow from a few blocks to half the bin: a pair that
     * makes a few blocks of a class and goes idle holds a few, not half a
     * bin of blocks nobody asked for (most of an idle pair's memory). A
     * refill at full size is a miss of a busy pair. */
    want = b->fill;
    if (want >= bin_cap(bin) / 2) {
        want = bin_cap(bin) / 2;
        ra__slot_miss(s);
    }
    b->fill = want < FIRST_FILL ? FIRST_FILL : want * 2;
    /* The cache hands out from its top, so the blocks go in from the top
     * down: they then leave in jemalloc's order (ascending addresses within
     * a slab), the order in which a program's walks over what it allocated
     * in a row find them. Handed out in reverse, examples/indexer's walk
     * over its lists of tokens ran 1.7x slower (its index phase: 279
     * against 166 ms). */
    while (got < want) {
        void *p = ra__je_mallocx(size, s->alloc_flags);
        if (p == NULL)
            break;
        if (ra__tag_of_addr(p) != tag) {
            ra__je_dallocx(p, 0);
            break;
        }
        ra__page_bin_set(p, bin);
        ra__assert(ra__je_sallocx(p, 0) == ra__bin_size[bin]);
        b->items[want - 1 - got++] = p;
    }
    ra__untagged_tag_made(got * size);
    if (got < want)
        memmove(b->items, b->items + (want - got), got * sizeof b->items[0]);
    b->count = got;
    return first;
}

/* An ended tag's orphan counts start again from 0; most tags never had
 * one, and their line is left as it is. */
static void forget_orphans(ra_tag_t tag)
{
    struct orphans *o = &orphans[tag];

    if (atomic_load_explicit(&o->nmalloc, memory_order_relaxed) != 0 ||
        atomic_load_explicit(&o->ndalloc, memory_order_relaxed) != 0 ||
        atomic_load_explicit(&o->bytes, memory_order_relaxed) != 0) {
        atomic_store_explicit(&o->nmalloc, 0, memory_order_relaxed);
        atomic_store_explicit(&o->ndalloc, 0, memory_order_relaxed);
        atomic_store_explicit(&o->bytes, 0, memory_order_relaxed);
    }
}

/* A front cache's headers and the arrays its bins made. */
static void free_bins(struct ra__fc_bin *bins)
{
    if (bins != NULL)
        for (unsigned bin = 0; bin < ra__nbins; bin++)
            ra__meta_free(bins[bin].items);
    ra__meta_free(bins);
}

/* With threads_lock held: the pair leaves its tag for good, its blocks
 * given back and its counts kept as an exited thread's: at the thread's
 * exit, or at a destroy of a tag it sat idle in for its holder's whole
 * life (so that a tag's slots are those of the threads that use it, and a
 * thread visits many tags without keeping a pair in each). Nobody uses
 * the pair meanwhile: its thread is exiting, or the tag is being
 * destroyed and the thread did nothing in it. */
static void release_pair(struct ra__tag_slot *s, ra_tag_t tag)
{
    flush_slot(s);
    if (s->tcache != RA__NO_TCACHE)
        ra__be_tcache_destroy(s->tcache);
    remove_user(s, tag);
    if (s->busy)
        ra__pool_unbind(tag, s->arena);
    free_bins(s->bins);
    atomic_fetch_add_explicit(&orphans[tag].nmalloc,
                              atomic_load_explicit(&s->nmalloc,
                                                   memory_order_relaxed),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&orphans[tag].ndalloc,
                              atomic_load_explicit(&s->ndalloc,
                                                   memory_order_relaxed),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&orphans[tag].bytes,
                              atomic_load_explicit(&s->bytes,
                                                   memory_order_relaxed),
                              memory_order_relaxed);
    s->bins = NULL;
    s->alloc_flags = 0;
    s->tcache = RA__NO_TCACHE;
    s->allocates = false;
    s->busy = false;
    s->made_before = 0;
    atomic_store_explicit(&s->nmalloc, 0, memory_order_relaxed);
    atomic_store_explicit(&s->ndalloc, 0, memory_order_relaxed);
    atomic_store_explicit(&s->bytes, 0, memory_order_relaxed);
    atomic_store_explicit(&s->parked, RA__PAIR_ACTIVE, memory_order_release);
}

/* -- a thread's own ids ------------------------------------------------------
 * A tag per request lives and ends on one thread. When its destroy finds
 * that nothing is live and that the calling thread's pair is the tag's
 * only one, the pair stays as it is, its front cache full of the slot's
 * free blocks, and the id is the thread's own: the thread's next creation
 * takes it back (newest first), with its region, arena and caches warm,
 * and neither end takes a lock of all threads nor moves a block. Handed
 * out through the registry's queue instead, the id went to whichever
 * thread created next: each end parked the pair (its blocks onto the
 * return stacks) for a holder on another CPU, and 2 threads serving
 * requests ran each cycle 3x slower than one (2.4 against 6.3 us for 130
 * blocks). owner says whose an id is (the thread's state, or NULL): the
 * owner takes an id back, and another thread takes it away (when the
 * ids run out, at ra_purge_all, or once it has been idle for a second),
 * each by a compare-and-swap, so exactly one of them has it. The one who
 * takes it away parks the owner's pair under threads_lock, as a destroy
 * that hands the id to the queue does: the owner's state lives until its
 * exit takes that lock. */
#define OWN_MAX 16
#define OWN_IDLE_NS 1000000000u
/* How many ids one look at the idle ones reads. */
#define OWN_SCAN 64u

/* A line an id: each request's end and creation write its id's. */
static struct owned {
    alignas(64) _Atomic(struct ra__thread_state *) owner;
    _Atomic uint64_t since; /* ra__clock_coarse_ns */
} owned[RA__MAX_TAGS_LIMIT + 1];
/* This thread's own ids, oldest first; an id another thread took away
 * stays listed until the owner's next look finds it gone. */
static RA__TLS ra_tag_t own_ids[OWN_MAX];
static RA__TLS unsigned own_count;

bool ra__thread_end_own(ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;
    struct ra__tag_slot *s;
    uint64_t m, d, made;

    if (ts == NULL || own_count == OWN_MAX)
        return false;
    s = &ts->slots[tag];
    if (!lone_user(ts, tag) || s->alloc_flags == 0 || !s->allocates ||
        s->bins == NULL)
        return false;
    m = atomic_load_explicit(&s->nmalloc, memory_order_relaxed);
    d = atomic_load_explicit(&s->ndalloc, memory_order_relaxed);
    if (m + atomic_load_explicit(&orphans[tag].nmalloc,
                                 memory_order_relaxed) !=
        d + atomic_load_explicit(&orphans[tag].ndalloc, memory_order_relaxed))
        return false;
    made = s->made_before + m;
    s->made_before = made > UINT32_MAX ? UINT32_MAX : (uint32_t)made;
    atomic_store_explicit(&s->nmalloc, 0, memory_order_relaxed);
    atomic_store_explicit(&s->ndalloc, 0, memory_order_relaxed);
    atomic_store_explicit(&s->bytes, 0, memory_order_relaxed);
    forget_orphans(tag);
    return true;
}

void ra__thread_keep_own(ra_tag_t tag)
{
    /* Invariant 12: dead, and nobody's yet. */
    ra__assert(own_count < OWN_MAX && ra__thread != NULL &&
               !ra__tag_valid(tag) &&
               atomic_load_explicit(&owned[tag].owner,
                                    memory_order_relaxed) == NULL);
    own_ids[own_count++] = tag;
    atomic_store_explicit(&owned[tag].since, ra__clock_coarse_ns(),
                          memory_order_relaxed);
    atomic_store_explicit(&owned[tag].owner, ra__thread, memory_order_release);
}

ra_tag_t ra__thread_take_own(void)
{
    struct ra__thread_state *ts = ra__thread;

    while (own_count > 0) {
        ra_tag_t tag = own_ids[--own_count];
        struct ra__thread_state *want = ts;
        if (atomic_compare_exchange_strong_explicit(
                &owned[tag].owner, &want, NULL, memory_order_acquire,
                memory_order_relaxed))
            return tag;
    }
    return RA_TAG_NONE;
}

/* With threads_lock held: tag, owned by o, is taken away from it (false
 * when o took it back first) and o's pair parked. */
static bool take_away(ra_tag_t tag, struct ra__thread_state *o)
{
    if (!atomic_compare_exchange_strong_explicit(&owned[tag].owner, &o, NULL,
                                                 memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    park(&o->slots[tag], tag);
    return true;
}

unsigned ra__thread_take_away(ra_tag_t *out, unsigned cap, bool idle_only)
{
    static unsigned cursor;
    unsigned count = ra__config()->max_tags, n = 0;
    unsigned look = idle_only ? OWN_SCAN : count;
    uint64_t now = idle_only ? ra__clock_coarse_ns() : 0;

    ra__lock(&threads_lock);
    for (unsigned i = 0; i < look && n < cap; i++) {
        ra_tag_t tag = cursor++ % count + 1;
        struct ra__thread_state *o =
            atomic_load_explicit(&owned[tag].owner, memory_order_relaxed);
        /* An id owned since after now (its owner's clock ran later) is
         * not idle either. */
        if (o == NULL ||
            (idle_only && atomic_load_explicit(&owned[tag].since,
                                               memory_order_relaxed) +
                                  OWN_IDLE_NS >
                              now))
            continue;
        if (take_away(tag, o))
            out[n++] = tag;
    }
    ra__unlock(&threads_lock);
    return n;
}

bool ra__thread_owned(ra_tag_t tag)
{
    return atomic_load_explicit(&owned[tag].owner, memory_order_relaxed) !=
           NULL;
}

/* With threads_lock held, at ts's exit: its own ids are no longer its
 * (those another thread took away meanwhile excepted), into out. */
static unsigned disown_all(struct ra__thread_state *ts, ra_tag_t *out)
{
    unsigned n = 0;

    while (own_count > 0) {
        ra_tag_t tag = own_ids[--own_count];
        struct ra__thread_state *want = ts;
        if (atomic_compare_exchange_strong_explicit(
                &owned[tag].owner, &want, NULL, memory_order_relaxed,
                memory_order_relaxed))
            out[n++] = tag;
    }
    return n;
}

void ra__thread_exit(void)
{
    struct ra__thread_state *ts = ra__thread;
    ra_tag_t own[OWN_MAX];
    unsigned nown;

    tls_exited = true;
    if (ts == NULL)
        return;
    ra__thread = NULL;
    /* Before the drains below, which then take its batches too. */
    ra__outbox_flush(ts, RA_TAG_NONE, true);
    /* Destroying a tcache flushes it: the thread's blocks reach their arenas
     * and the id is free for another thread. */
    ra__lock(&threads_lock);
    nown = disown_all(ts, own);
    for (unsigned t = 1; t < ts->nslots; t++) {
        struct ra__tag_slot *s = &ts->slots[t];
        if (!set_up(s))
            continue;
        /* What this thread left for the tag's other threads goes too: a
         * thread's end makes the figures of its tags exact. */
        ra__returns_drain(t);
        release_pair(s, t);
    }
    RA__RING_UNLINK(ts);
    ra__unlock(&threads_lock);
    ra__meta_free(ts);
    /* Its own ids' slots are clean now: anyone's to take. */
    for (unsigned i = 0; i < nown; i++)
        ra__tag_release_id(own[i]);
}

static struct ra__thread_state *create_thread_state(void)
{
    unsigned nslots = ra__config()->max_tags + 1;
    size_t size = sizeof(struct ra__thread_state) +
                  nslots * sizeof(struct ra__tag_slot) + ra__outbox_size();
    struct ra__thread_state *ts;

    /* A thread the library did not see start (one that began before it
     * was loaded, or without its pthread_create) is counted from here. */
    ra__untagged_thread_start();
    ts = ra__meta_calloc(1, size);
    if (ts == NULL)
        return NULL;
    ts->nslots = nslots;
    if (ra__thread_exit_arm()) {
        ra__meta_free(ts);
        return NULL;
    }
    ra__lock(&threads_lock);
    RA__RING_PUSH(&all_threads, ts);
    ra__unlock(&threads_lock);
    ra__thread = ts;
    return ts;
}

/* A front cache, or NULL when there can be none (it needs the page table
 * to sort frees by size class) or no memory. Zeroed, capacities included:
 * each bin is set up at its first use (ra__fc_make_room, ra__fc_refill),
 * so unused bins cost no page. */
static struct ra__fc_bin *make_bins(void)
{
    if (ra__nbins == 0 || ra__page_bin == NULL)
        return NULL;
    return ra__meta_calloc(ra__nbins, sizeof(struct ra__fc_bin));
}

/* Without a tcache until the pair is busy (ra__slot_miss_slow). A pair
 * made by a free (a consumer of another thread's blocks) gets no front
 * cache: its frees go home through the thread's outbox (outbox.c), and
 * it puts no load on an arena of its own, nor takes the library's memory. */
static void setup_slot(struct ra__tag_slot *s, ra_tag_t tag, bool allocating)
{
    /* MALLOC_CONF=tcache:false: no pair reaches for a tcache, and every
     * one that allocates weighs on its arena from its first block. */
    bool busy = allocating && !ra__be_caches;

    if (allocating)
        s->bins = make_bins();
    start_uncached(s, busy ? ra__pool_bind(tag,
                                           ra__budget_allows_growth(tag))
                           : ra__pool_quietest(tag));
    s->allocates = allocating;
    s->busy = busy;
}

/* A pair made by a free starts to allocate: it gets its front cache, on
 * the pool's quietest arena, or, busy already (its frees took it to a
 * tcache), joins the pool's count. What its outbox holds of the tag goes
 * home first: only pairs that do not allocate use the outbox, and a
 * destroy looks in theirs alone. Under the lock: a destroy of the tag, on
 * another thread, walks the pair's bins. */
static void start_allocating(struct ra__tag_slot *s, ra_tag_t tag)
{
    struct ra__fc_bin *bins = make_bins();
    bool busy = s->misses >= RA__TCACHE_AFTER_MISSES;
    unsigned arena = busy ? ra__pool_bind(tag, ra__budget_allows_growth(tag))
                          : ra__pool_quietest(tag);

    ra__outbox_flush(ra__thread, tag, true);

    ra__lock(&threads_lock);
    s->bins = bins;
    s->allocates = true;
    s->busy = busy;
    bind_to(s, arena);
    ra__unlock(&threads_lock);
}

struct ra__tag_slot *ra__thread_slot_slow(ra_tag_t tag, bool allocating)
{
    struct ra__thread_state *ts = ra__thread;

    if (tls_busy || tls_exited)
        return NULL;
    tls_busy = true;
    /* Whatever glibc allocates for us meanwhile is the library's. */
    ra__tag_suspend();
    if (ts == NULL)
        ts = create_thread_state();
    if (ts != NULL) {
        struct ra__tag_slot *s = &ts->slots[tag];
        if (is_parked(s)) {
            unpark(s);
        } else if (s->alloc_flags == 0) {
            setup_slot(s, tag, allocating);
            ra__lock(&threads_lock);
            add_user(s, tag);
            ra__unlock(&threads_lock);
        }
        if (allocating && !s->allocates)
            start_allocating(s, tag);
    }
    ra__tag_resume();
    tls_busy = false;
    return ts == NULL ? NULL : &ts->slots[tag];
}

void ra_thread_flush(void)
{
    struct ra__thread_state *ts = ra__thread;

    ra__be_flush_thread_cache();
    if (ts != NULL) {
        ra__outbox_flush(ts, RA_TAG_NONE, true);
        ra__lock(&threads_lock);
        for (unsigned t = 1; t < ts->nslots; t++)
            if (set_up(&ts->slots[t]))
                flush_slot(&ts->slots[t]);
        ra__unlock(&threads_lock);
    }
    /* What threads left for each other too, whoever calls: every figure
     * exact after it. */
    ra__returns_drain_all();
}

void ra__thread_flush_tag(ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;

    if (ts == NULL || tag >= ts->nslots)
        return;
    ra__outbox_flush(ts, tag, true);
    /* The slot is read under the lock too: a destroy of the tag, on
     * another thread, starts the pair over under it (forget_pair), and this
     * thread may flush a tag it does not use (a purge of a subtree). */
    ra__lock(&threads_lock);
    if (set_up(&ts->slots[tag]))
        flush_slot(&ts->slots[tag]);
    ra__unlock(&threads_lock);
}

/* tag's allocations, frees and the bytes live, over the threads gone and
 * the slots from first on (its users list, with the threads locked), or
 * that one slot alone (only: the caller's own, the tag's only one). */
static void counts_of(const struct ra__tag_slot *first, bool only,
                      ra_tag_t tag, struct ra__counts *out)
{
    uint64_t m = atomic_load_explicit(&orphans[tag].nmalloc,
                                      memory_order_relaxed);
    uint64_t d = atomic_load_explicit(&orphans[tag].ndalloc,
                                      memory_order_relaxed);
    uint64_t bytes = atomic_load_explicit(&orphans[tag].bytes,
                                          memory_order_relaxed);

    for (const struct ra__tag_slot *s = first; s != NULL;
         s = only ? NULL : s->users_next) {
        m += atomic_load_explicit(&s->nmalloc, memory_order_relaxed);
        d += atomic_load_explicit(&s->ndalloc, memory_order_relaxed);
        bytes += atomic_load_explicit(&s->bytes, memory_order_relaxed);
    }
    out->nmalloc = m;
    out->ndalloc = d;
    /* A block one thread made and another freed, read between the two
     * threads' counts, may show its free first: never below nothing. */
    out->allocated = (int64_t)bytes < 0 ? 0 : (size_t)bytes;
}

/* With threads_lock held: a destroyed tag's pair starts again as a new
 * one for the slot's next holder: no tcache (the next holder takes one
 * only once busy: rebuilding a flushed one at every request cost a 32 KiB
 * zeroed allocation and its page faults), refills from a few blocks, no
 * misses, no counts. */
static void forget_pair(struct ra__tag_slot *s, ra_tag_t tag)
{
    if (s->tcache != RA__NO_TCACHE)
        ra__be_tcache_destroy(s->tcache);
    /* Busy again only once it reaches for a tcache again (without caches,
     * busy for good). */
    if (s->busy && ra__be_caches) {
        ra__pool_unbind(tag, s->arena);
        s->busy = false;
    }
    start_uncached(s, s->arena);
    s->made_before = 0;
    if (s->bins != NULL)
        for (unsigned bin = 0; bin < ra__nbins; bin++)
            s->bins[bin].fill = 0;
}

/* The arena's reset frees what the slot's front cache holds: forget it. */
static void forget_cached(struct ra__tag_slot *s)
{
    if (s->bins != NULL)
        for (unsigned bin = 0; bin < ra__nbins; bin++)
            s->bins[bin].count = 0;
}

static void forget_counts(ra_tag_t tag)
{
    for (struct ra__tag_slot *s = users[tag]; s != NULL; s = s->users_next) {
        uint64_t made = s->made_before +
                        atomic_load_explicit(&s->nmalloc,
                                             memory_order_relaxed);
        s->made_before = made > UINT32_MAX ? UINT32_MAX : (uint32_t)made;
        atomic_store_explicit(&s->nmalloc, 0, memory_order_relaxed);
        atomic_store_explicit(&s->ndalloc, 0, memory_order_relaxed);
        atomic_store_explicit(&s->bytes, 0, memory_order_relaxed);
    }
    forget_orphans(tag);
}

/* Whether the pair did nothing for the tag's holder now ending. */
static bool idle_pair(const struct ra__tag_slot *s)
{
    return atomic_load_explicit(&s->nmalloc, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&s->ndalloc, memory_order_relaxed) == 0;
}

bool ra__thread_end_tag(ra_tag_t tag, size_t leave, size_t *left)
{
    struct ra__counts c;

    ra__lock(&threads_lock);
    counts_of(users[tag], false, tag, &c);
    /* No thread uses the tag now (the caller's promise): every free
     * counted was of a block whose allocation is counted. */
    ra__assert(c.nmalloc >= c.ndalloc);
    *left = c.nmalloc == c.ndalloc ? 0 : c.allocated;
    if (c.nmalloc == c.ndalloc || c.allocated <= leave) {
        /* Nothing live: what the caches hold are free blocks of the
         * slot's arena, the next holder's as much as this one's. They
         * stay, tcaches with them, and the arena is not reset; but only
         * in the pairs this holder used. The others have been idle for a
         * holder's life at least: they give their blocks back and leave
         * the tag, or with a tag per request every thread would end up
         * holding caches for every slot (threads x slots pairs, each with
         * a tcache: examples/requests on 8 threads held twice the
         * untagged resident set). */
        /* Blocks a consumer freed are on their way home: they go on, now,
         * to where a purge of the next holder reaches, and the pairs are
         * left alone only once every send is home (a sender may be freeing
         * through its pair's tcache, outbox.c). A pair that allocates has
         * none there (start_allocating), and a request's destroy does not
         * walk its thread's outbox. */
        for (struct ra__tag_slot *s = users[tag]; s != NULL;
             s = s->users_next)
            if (!s->allocates)
                ra__outbox_flush(state_of(s, tag), tag, false);
        ra__returns_quiesce(tag);
        for (struct ra__tag_slot *s = users[tag], *next; s != NULL;
             s = next) {
            next = s->users_next;
            if (idle_pair(s))
                release_pair(s, tag);
            else
                park(s, tag);
        }
        forget_counts(tag);
        ra__unlock(&threads_lock);
        return false;
    }
    /* Before any tcache of the tag goes: a consumer's send in flight may
     * be freeing through its pair's. */
    ra__returns_fence(tag);
    for (struct ra__tag_slot *s = users[tag], *next; s != NULL; s = next) {
        next = s->users_next;
        forget_cached(s);
        if (idle_pair(s))
            release_pair(s, tag);
    }
    forget_counts(tag);
    for (struct ra__tag_slot *s = users[tag]; s != NULL; s = s->users_next)
        forget_pair(s, tag);
    ra__unlock(&threads_lock);
    return true;
}

/* With threads_lock held, the tag's sends fenced: every cache of the tag
 * emptied before its arenas are reset, and its counts say every block was
 * freed. */
static void wipe_locked(ra_tag_t tag)
{
    struct ra__counts c;

    counts_of(users[tag], false, tag, &c);
    ra__assert(c.nmalloc >= c.ndalloc);
    for (struct ra__tag_slot *s = users[tag]; s != NULL; s = s->users_next) {
        forget_cached(s);
        flush_tcache(s->tcache);
    }
    /* Every block that was live is freed now. */
    atomic_fetch_add_explicit(&orphans[tag].ndalloc, c.nmalloc - c.ndalloc,
                              memory_order_relaxed);
    atomic_fetch_sub_explicit(&orphans[tag].bytes, c.allocated,
                              memory_order_relaxed);
}

void ra__thread_wipe_tag(ra_tag_t tag)
{
    /* Before any tcache of the tag goes: a consumer's send in flight may
     * be freeing through its pair's. */
    ra__returns_fence(tag);
    ra__lock(&threads_lock);
    wipe_locked(tag);
    ra__unlock(&threads_lock);
}

/* -- an unused holder, held still ------------------------------------------
 * A live tag's slot may hold blocks nobody owns (leftovers.c), which only a
 * reset of its arenas frees, and a reset is safe only while no block of
 * the tag is live and no thread allocates under it or frees into it:
 * ra_tag_reset's caller promises that, a budget's or a purge's does not.
 * So the library holds the tag still itself, and only when it can: every
 * pair of the tag but the caller's is parked (the holder's last destroy
 * parked it and nobody used it since), and each is turned to
 * RA__PAIR_FLUSHING, which its owner's unpark() waits out; a thread
 * without a pair must take threads_lock to make one (add_user) or to
 * start allocating in one (start_allocating), which the hold keeps; and a
 * thread without a slot (exiting) is inside no allocation or free of the
 * tag: it counts itself in orphans[].busy first, and waits while the tag
 * is held (holding), each side writing before it reads the other's word.
 * The caller's own pair is its own business: it is not allocating. */
static _Atomic ra_tag_t holding;

void ra__thread_orphan_begin(ra_tag_t tag)
{
    _Atomic unsigned *busy = &orphans[tag].busy;

    atomic_fetch_add(busy, 1);
    while (atomic_load(&holding) == tag) {
        atomic_fetch_sub(busy, 1);
        /* A reset of the arenas: microseconds to a few milliseconds. */
        while (atomic_load_explicit(&holding, memory_order_relaxed) == tag)
            sched_yield();
        atomic_fetch_add(busy, 1);
    }
}

void ra__thread_orphan_end(ra_tag_t tag)
{
    atomic_fetch_sub_explicit(&orphans[tag].busy, 1, memory_order_release);
}

/* With threads_lock held, where nobody else flushes a parked pair: the
 * pairs a hold turned to flushing are parked again. */
static void unhold_pairs(ra_tag_t tag)
{
    for (struct ra__tag_slot *s = users[tag]; s != NULL; s = s->users_next)
        if (atomic_load_explicit(&s->parked, memory_order_relaxed) ==
            RA__PAIR_FLUSHING)
            atomic_store_explicit(&s->parked, RA__PAIR_PARKED,
                                  memory_order_release);
}

/* With threads_lock held: the tag's pairs other than the caller's (mine)
 * held if they are all parked; false, with none held, else. */
static bool hold_pairs(ra_tag_t tag, const struct ra__tag_slot *mine)
{
    for (struct ra__tag_slot *s = users[tag]; s != NULL; s = s->users_next) {
        uint8_t want = RA__PAIR_PARKED;
        if (s != mine && !atomic_compare_exchange_strong_explicit(
                             &s->parked, &want, RA__PAIR_FLUSHING,
                             memory_order_acquire, memory_order_relaxed)) {
            unhold_pairs(tag);
            return false;
        }
    }
    return true;
}

void ra__thread_release_held(ra_tag_t tag)
{
    /* Invariant 13: the reset was made under this hold. */
    ra__assert(atomic_load_explicit(&holding, memory_order_relaxed) == tag);
    unhold_pairs(tag);
    atomic_store(&holding, RA_TAG_NONE);
    ra__unlock(&threads_lock);
}

bool ra__thread_hold_unused(ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;
    const struct ra__tag_slot *mine =
        ts != NULL && tag < ts->nslots ? &ts->slots[tag] : NULL;
    struct ra__counts c;

    ra__lock(&threads_lock);
    atomic_store(&holding, tag);
    /* Live when the lock was taken: a destroy that kills it from here on
     * ends it only after this hold (its end takes the lock, or finds the
     * destroying thread's pair active, which this hold refuses), and a
     * dead tag's slot is the registry's (leftovers.c resets an idle one
     * out of its queue). */
    if (!ra__tag_valid(tag) || atomic_load(&orphans[tag].busy) != 0 ||
        !hold_pairs(tag, mine)) {
        atomic_store(&holding, RA_TAG_NONE);
        ra__unlock(&threads_lock);
        return false;
    }
    counts_of(users[tag], false, tag, &c);
    if (c.nmalloc != c.ndalloc) {
        ra__thread_release_held(tag);
        return false;
    }
    /* Sends of the tag come only from pairs that free without allocating,
     * all held or the caller's: none is in flight, and a batch an outbox
     * kept is stale after this fence. */
    ra__returns_fence(tag);
    wipe_locked(tag);
    return true;
}

void ra__thread_counts(ra_tag_t tag, struct ra__counts *out)
{
    struct ra__thread_state *ts = ra__thread;

    /* The caller's slot is the tag's only one (a request reading its own
     * tag): no other slot to sum, and none can come (lone_user). */
    if (lone_user(ts, tag)) {
        counts_of(&ts->slots[tag], true, tag, out);
        return;
    }
    ra__lock(&threads_lock);
    counts_of(users[tag], false, tag, out);
    ra__unlock(&threads_lock);
}

/* Suite "threads": accounting across threads, thread exit, fork, and
 * pass-through mode with threads. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include "regionalloc.h"
#include "testutil.h"

/* Worker threads never call Check: a passing assertion allocates under the
 * pushed tag and a failing one exits the process. They count what went wrong
 * in `errors` and the main thread asserts on it after joining them. */

#define KIB ((size_t)1 << 10)

static const size_t sizes[] = {8,    24,    64,    100,   256,   700,
                               1500, 4096,  9000,  20000, 32768, 50000,
                               131072};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

static _Atomic unsigned errors;

static void count_error(void)
{
    atomic_fetch_add(&errors, 1);
}

static void push(ra_tag_t tag)
{
    if (ra_tag_push(tag) != 0)
        count_error();
}

static void pop(ra_tag_t tag)
{
    if (ra_tag_pop(tag) != 0)
        count_error();
}

static ra_tag_t create_tag(const char *fmt, unsigned i)
{
    char name[RA_TAG_NAME_MAX + 1];
    ra_tag_t tag;

    snprintf(name, sizeof name, fmt, i);
    tag = ra_tag_create(name);
    ck_assert_msg(tag != RA_TAG_NONE, "ra_tag_create(%s): %s", name,
                  strerror(errno));
    return tag;
}

/* Ground truth for one tag: what its live blocks add up to. */
struct truth {
    size_t bytes;
    uint64_t count;
};

static void check_exact(ra_tag_t tag, const struct truth *t, const char *when)
{
    ra_tag_stats_t s = tu_tag_stats(tag);

    ck_assert_msg(s.allocated == t->bytes,
                  "%s: tag %s allocated %zu, live blocks hold %zu", when,
                  ra_tag_name(tag), s.allocated, t->bytes);
    ck_assert_msg(s.nmalloc - s.ndalloc == t->count,
                  "%s: tag %s nmalloc %llu - ndalloc %llu != %llu live", when,
                  ra_tag_name(tag), (unsigned long long)s.nmalloc,
                  (unsigned long long)s.ndalloc,
                  (unsigned long long)t->count);
}

/* -- "cross-thread frees" ------------------------------------------------- */

enum { XT_THREADS = 4, XT_SHARED = 3, XT_ITER = 5000 };

struct xt_item {
    void *p;
    ra_tag_t tag;
    size_t size;
};

/* What one thread hands to the next; only its producer appends. */
struct xt_queue {
    pthread_mutex_t lock;
    size_t head, tail;
    bool done;
    struct xt_item items[XT_ITER];
};

struct xt_thread {
    unsigned index;
    size_t nkept;
    struct xt_item kept[XT_ITER];
};

static ra_tag_t xt_own[XT_THREADS], xt_shared[XT_SHARED];
static struct xt_queue xt_queues[XT_THREADS];
static struct xt_thread xt_threads[XT_THREADS];
/* Threads that flush and stay alive report here and wait for release. */
static pthread_mutex_t xt_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t xt_cond = PTHREAD_COND_INITIALIZER;
static unsigned xt_flushed;
static bool xt_release;

static void xt_lock_queue(struct xt_queue *q)
{
    if (pthread_mutex_lock(&q->lock) != 0)
        abort();
}

static void xt_unlock_queue(struct xt_queue *q)
{
    if (pthread_mutex_unlock(&q->lock) != 0)
        abort();
}

static void xt_put(struct xt_queue *q, struct xt_item item)
{
    xt_lock_queue(q);
    q->items[q->tail++] = item;
    xt_unlock_queue(q);
}

/* Takes the oldest item: true when there was one; *finished when the queue
 * is empty and its producer is done. */
static bool xt_take(struct xt_queue *q, struct xt_item *item, bool *finished)
{
    bool got = false;

    xt_lock_queue(q);
    if (q->head < q->tail) {
        *item = q->items[q->head++];
        got = true;
    }
    *finished = !got && q->done;
    xt_unlock_queue(q);
    return got;
}

/* A tag other than owner for thread self to free under. */
static ra_tag_t xt_other_tag(unsigned self, unsigned n, ra_tag_t owner)
{
    ra_tag_t t = n % 2 == 0 ? xt_own[self] : xt_shared[n % XT_SHARED];

    return t != owner ? t : xt_shared[(n + 1) % XT_SHARED];
}

/* Frees, or resizes and keeps, a block another thread allocated. */
static void xt_consume(struct xt_thread *self, struct xt_item item,
                       unsigned n)
{
    ra_tag_t under = xt_other_tag(self->index, n, item.tag);

    if (ra_tag_of(item.p) != item.tag)
        count_error();
    push(under);
    if (n % 10 == 0) {
        /* Kept live, resized under a foreign tag: still the owner's. */
        void *q = ra_realloc(item.p, sizes[(n / 10) % N_SIZES]);
        if (q == NULL) {
            count_error();
        } else {
            item.p = q;
            self->kept[self->nkept++] = item;
        }
    } else if (n % 3 == 0) {
        ra_free_sized(item.p, item.size);
    } else {
        ra_free(item.p);
    }
    pop(under);
}

static void *xt_worker(void *arg)
{
    struct xt_thread *self = arg;
    struct xt_queue *in = &xt_queues[self->index];
    struct xt_queue *out = &xt_queues[(self->index + 1) % XT_THREADS];
    unsigned consumed = 0;
    struct xt_item item;
    bool finished = false;

    for (unsigned n = 0; n < XT_ITER; n++) {
        ra_tag_t tag = n % 4 == 0 ? xt_own[self->index]
                                  : xt_shared[(n / 4 + self->index) %
                                              XT_SHARED];
        size_t size = sizes[(n * 7 + self->index) % N_SIZES];
        void *p;

        push(tag);
        p = ra_malloc(size);
        pop(tag);
        if (p == NULL || ra_tag_of(p) != tag) {
            count_error();
            continue;
        }
        memset(p, (int)n, size < 64 ? size : 64);
        item = (struct xt_item){.p = p, .tag = tag, .size = size};
        if (n % 50 == 0)
            self->kept[self->nkept++] = item; /* never leaves its thread */
        else
            xt_put(out, item);
        for (int k = 0; k < 2 && xt_take(in, &item, &finished); k++)
            xt_consume(self, item, consumed++);
    }
    xt_lock_queue(out);
    out->done = true;
    xt_unlock_queue(out);
    while (!finished) {
        if (xt_take(in, &item, &finished))
            xt_consume(self, item, consumed++);
        else if (!finished)
            sched_yield();
    }

    /* Even threads flush and stay alive while the main thread checks;
     * odd ones rely on thread exit. */
    if (self->index % 2 == 0) {
        ra_thread_flush();
        pthread_mutex_lock(&xt_lock);
        xt_flushed++;
        pthread_cond_broadcast(&xt_cond);
        while (!xt_release)
            pthread_cond_wait(&xt_cond, &xt_lock);
        pthread_mutex_unlock(&xt_lock);
    }
    return NULL;
}

/* Adds the blocks the threads kept to the truth of their tags. */
static void xt_truth(ra_tag_t tag, struct truth *t)
{
    memset(t, 0, sizeof *t);
    for (unsigned i = 0; i < XT_THREADS; i++)
        for (size_t k = 0; k < xt_threads[i].nkept; k++) {
            const struct xt_item *item = &xt_threads[i].kept[k];

            if (item->tag != tag)
                continue;
            ck_assert_uint_eq(ra_tag_of(item->p), tag);
            t->bytes += ra_malloc_usable_size(item->p);
            t->count++;
        }
}

/* Checks every tag against the kept blocks; live: whether each tag must
 * have some. */
static void xt_check_all(const char *when, bool live)
{
    struct truth t;

    for (unsigned i = 0; i < XT_THREADS + XT_SHARED; i++) {
        ra_tag_t tag = i < XT_THREADS ? xt_own[i] : xt_shared[i - XT_THREADS];

        xt_truth(tag, &t);
        ck_assert_msg((t.count > 0) == live, "%s: tag %s has %llu live blocks",
                      when, ra_tag_name(tag), (unsigned long long)t.count);
        check_exact(tag, &t, when);
    }
}

START_TEST(test_threads_allocated_exact_with_cross_thread_frees)
{
    pthread_t threads[XT_THREADS];

    for (unsigned i = 0; i < XT_THREADS; i++) {
        xt_own[i] = create_tag("xt-own-%u", i);
        ck_assert_int_eq(pthread_mutex_init(&xt_queues[i].lock, NULL), 0);
        xt_threads[i].index = i;
    }
    for (unsigned i = 0; i < XT_SHARED; i++)
        xt_shared[i] = create_tag("xt-shared-%u", i);

    for (unsigned i = 0; i < XT_THREADS; i++)
        ck_assert_int_eq(
            pthread_create(&threads[i], NULL, xt_worker, &xt_threads[i]), 0);
    /* Odd threads exit; even ones flush and wait. */
    for (unsigned i = 1; i < XT_THREADS; i += 2)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    pthread_mutex_lock(&xt_lock);
    while (xt_flushed < XT_THREADS / 2)
        pthread_cond_wait(&xt_cond, &xt_lock);
    pthread_mutex_unlock(&xt_lock);

    ck_assert_uint_eq(atomic_load(&errors), 0);
    for (unsigned i = 0; i < XT_THREADS; i++)
        ck_assert_uint_eq(xt_queues[i].head, xt_queues[i].tail);
    xt_check_all("flushed threads alive", true);

    pthread_mutex_lock(&xt_lock);
    xt_release = true;
    pthread_cond_broadcast(&xt_cond);
    pthread_mutex_unlock(&xt_lock);
    for (unsigned i = 0; i < XT_THREADS; i += 2)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    xt_check_all("all threads exited", true);

    /* Freed from the main thread, every tag drops to zero. */
    for (unsigned i = 0; i < XT_THREADS; i++) {
        for (size_t k = 0; k < xt_threads[i].nkept; k++)
            ra_free(xt_threads[i].kept[k].p);
        xt_threads[i].nkept = 0;
    }
    ra_thread_flush();
    xt_check_all("all freed", false);
}
END_TEST

/* -- "many short-lived threads" ------------------------------------------- */

enum { SL_THREADS = 1500, SL_BATCH = 16, SL_TAGS = 4, SL_ROUNDS = 20 };

static ra_tag_t sl_tags[SL_TAGS];
/* One block per (thread, tag) stays live; NULL for the tag a thread skips. */
static void *sl_kept[SL_THREADS][SL_TAGS];
static _Atomic uint64_t sl_allocs[SL_TAGS];

static void *sl_worker(void *arg)
{
    unsigned index = (unsigned)(uintptr_t)arg;
    unsigned skip = index % SL_TAGS;

    for (unsigned k = 0; k < SL_TAGS; k++) {
        ra_tag_t tag = sl_tags[k];
        void *blocks[SL_ROUNDS];

        if (k == skip)
            continue;
        push(tag);
        for (unsigned r = 0; r < SL_ROUNDS; r++) {
            blocks[r] = ra_malloc(sizes[(index + r) % N_SIZES]);
            if (blocks[r] == NULL || ra_tag_of(blocks[r]) != tag)
                count_error();
        }
        for (unsigned r = 1; r < SL_ROUNDS; r++)
            ra_free(blocks[r]);
        pop(tag);
        sl_kept[index][k] = blocks[0];
        atomic_fetch_add(&sl_allocs[k], SL_ROUNDS);
    }
    return NULL;
}

/* How many explicit tcaches jemalloc can still create (at most 4093 per
 * process, MALLOCX_TCACHE_MAX). Destroys them again. */
static unsigned count_free_tcache_ids(void)
{
    static unsigned ids[4096];
    unsigned n = 0;

    while (n < sizeof ids / sizeof ids[0]) {
        size_t len = sizeof ids[n];
        if (mallctl("tcache.create", &ids[n], &len, NULL, 0) != 0)
            break;
        n++;
    }
    for (unsigned i = 0; i < n; i++)
        mallctl("tcache.destroy", NULL, NULL, &ids[i], sizeof ids[i]);
    return n;
}

/* Counts the free tcache ids into *arg from a fresh thread, then uses every
 * tag from it. */
static void *sl_probe(void *arg)
{
    unsigned *free_ids = arg;
    void *blocks[SL_TAGS];

    *free_ids = count_free_tcache_ids();
    /* A fresh thread gets caches for every tag and is tagged correctly. */
    for (unsigned k = 0; k < SL_TAGS; k++) {
        push(sl_tags[k]);
        blocks[k] = ra_malloc(100);
        pop(sl_tags[k]);
        if (blocks[k] == NULL || ra_tag_of(blocks[k]) != sl_tags[k])
            count_error();
        atomic_fetch_add(&sl_allocs[k], 1);
    }
    for (unsigned k = 0; k < SL_TAGS; k++)
        ra_free(blocks[k]);
    return NULL;
}

START_TEST(test_threads_short_lived_threads_release_caches)
{
    pthread_t threads[SL_BATCH];
    pthread_t probe;
    unsigned free_before = 0, free_after = 0;

    for (unsigned k = 0; k < SL_TAGS; k++)
        sl_tags[k] = create_tag("short-lived-%u", k);
    ck_assert_int_eq(pthread_create(&probe, NULL, sl_probe, &free_before), 0);
    ck_assert_int_eq(pthread_join(probe, NULL), 0);
    ck_assert_uint_ge(free_before, 4000);
    for (unsigned base = 0; base < SL_THREADS; base += SL_BATCH) {
        unsigned n = SL_THREADS - base < SL_BATCH ? SL_THREADS - base
                                                  : SL_BATCH;
        for (unsigned i = 0; i < n; i++)
            ck_assert_int_eq(pthread_create(&threads[i], NULL, sl_worker,
                                            (void *)(uintptr_t)(base + i)),
                             0);
        for (unsigned i = 0; i < n; i++)
            ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    }
    ck_assert_uint_eq(atomic_load(&errors), 0);

    for (unsigned k = 0; k < SL_TAGS; k++) {
        struct truth t = {0, 0};
        ra_tag_stats_t s;
        uint64_t allocs;

        for (unsigned i = 0; i < SL_THREADS; i++)
            if (sl_kept[i][k] != NULL) {
                ck_assert_uint_eq(ra_tag_of(sl_kept[i][k]), sl_tags[k]);
                t.bytes += ra_malloc_usable_size(sl_kept[i][k]);
                t.count++;
            }
        ck_assert_uint_eq(t.count, SL_THREADS * 3 / 4);
        check_exact(sl_tags[k], &t, "after the threads exited");
        s = tu_tag_stats(sl_tags[k]);
        allocs = atomic_load(&sl_allocs[k]);
        ck_assert_uint_eq(s.nmalloc, allocs);
    }

    /* 1500 threads x 3 tags made 4500 caches, more than jemalloc's 4093
     * ids: a thread whose caches outlived it would leave fewer ids free, and
     * leaking all of them would have run out. */
    ck_assert_int_eq(pthread_create(&probe, NULL, sl_probe, &free_after), 0);
    ck_assert_int_eq(pthread_join(probe, NULL), 0);
    ck_assert_msg(free_after == free_before,
                  "explicit tcache ids free: %u before %u threads, %u after",
                  free_before, SL_THREADS, free_after);
    ck_assert_uint_eq(atomic_load(&errors), 0);
}
END_TEST

/* With every explicit tcache id taken, a thread that meets a tag for the
 * first time goes uncached: its blocks must still be tagged, freeable by
 * others, and exactly accounted. */
enum { EX_BLOCKS = 200 };
static ra_tag_t ex_tag;
static void *ex_blocks[EX_BLOCKS];

static void *ex_worker(void *arg)
{
    (void)arg;
    push(ex_tag);
    for (unsigned i = 0; i < EX_BLOCKS; i++) {
        ex_blocks[i] = ra_malloc(sizes[i % N_SIZES]);
        if (ex_blocks[i] == NULL || ra_tag_of(ex_blocks[i]) != ex_tag)
            count_error();
    }
    pop(ex_tag);
    /* Half are freed here, uncached too. */
    for (unsigned i = 0; i < EX_BLOCKS; i += 2) {
        ra_free(ex_blocks[i]);
        ex_blocks[i] = NULL;
    }
    return NULL;
}

START_TEST(test_threads_out_of_tcache_ids_goes_uncached)
{
    static unsigned ids[4096];
    unsigned taken = 0;
    struct truth t = {0, 0};
    pthread_t thread;

    ex_tag = create_tag("no-tcache-left-%u", 0);
    while (taken < sizeof ids / sizeof ids[0]) {
        size_t len = sizeof ids[taken];
        if (mallctl("tcache.create", &ids[taken], &len, NULL, 0) != 0)
            break;
        taken++;
    }
    ck_assert_uint_gt(taken, 4000);

    ck_assert_int_eq(pthread_create(&thread, NULL, ex_worker, NULL), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    for (unsigned i = 0; i < EX_BLOCKS; i++)
        if (ex_blocks[i] != NULL) {
            t.bytes += ra_malloc_usable_size(ex_blocks[i]);
            t.count++;
        }
    /* Nothing cached anywhere: exact without any flush. */
    check_exact(ex_tag, &t, "uncached, ids exhausted");

    for (unsigned i = 0; i < taken; i++)
        mallctl("tcache.destroy", NULL, NULL, &ids[i], sizeof ids[i]);
    for (unsigned i = 0; i < EX_BLOCKS; i++)
        ra_free(ex_blocks[i]);
    ra_thread_flush();
    check_exact(ex_tag, &(struct truth){0, 0}, "after freeing all");
}
END_TEST

/* A (thread, tag) pair takes one of jemalloc's explicit tcache ids only
 * once it is busy and has lived (8192 blocks): pairs that make a block or
 * two and go idle take none (a thread visiting many tags once would
 * otherwise hold an id and a tcache per tag), nor does a short request's,
 * and a busy pair takes exactly one. */
enum { LZ_IDLE_TAGS = 3, LZ_BUSY_BLOCKS = 10000 };
static ra_tag_t lz_idle[LZ_IDLE_TAGS], lz_busy;
static unsigned lz_free_before, lz_free_idle, lz_free_busy;
static void *lz_blocks[LZ_BUSY_BLOCKS];

static void *lz_worker(void *arg)
{
    (void)arg;
    lz_free_before = count_free_tcache_ids();
    for (unsigned k = 0; k < LZ_IDLE_TAGS; k++) {
        push(lz_idle[k]);
        void *p = ra_malloc(100);
        if (p == NULL || ra_tag_of(p) != lz_idle[k])
            count_error();
        ra_free(p);
        pop(lz_idle[k]);
    }
    lz_free_idle = count_free_tcache_ids();
    /* Many blocks of one class, all freed: refills, then full bins. */
    push(lz_busy);
    for (unsigned i = 0; i < LZ_BUSY_BLOCKS; i++)
        if ((lz_blocks[i] = ra_malloc(64)) == NULL)
            count_error();
    pop(lz_busy);
    for (unsigned i = 0; i < LZ_BUSY_BLOCKS; i++)
        ra_free(lz_blocks[i]);
    lz_free_busy = count_free_tcache_ids();
    return NULL;
}

START_TEST(test_threads_tcache_only_for_busy_pairs)
{
    pthread_t thread;

    for (unsigned k = 0; k < LZ_IDLE_TAGS; k++)
        lz_idle[k] = create_tag("idle-pair-%u", k);
    lz_busy = create_tag("busy-pair-%u", 0);
    ck_assert_int_eq(pthread_create(&thread, NULL, lz_worker, NULL), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    ck_assert_uint_gt(lz_free_before, 4000);
    ck_assert_uint_eq(lz_free_idle, lz_free_before);
    ck_assert_uint_eq(lz_free_busy, lz_free_before - 1);
    /* The busy pair's tcache went with its thread, flushed. */
    check_exact(lz_busy, &(struct truth){0, 0}, "after the thread exited");
    ck_assert_uint_eq(count_free_tcache_ids(), lz_free_before);
}
END_TEST

/* A tag per request, each request freeing what it made: the destroys find
 * nothing live and keep the thread's caches for the next request, so the
 * pair grows old across requests and takes one tcache, which it keeps
 * (not one rebuilt per request). A request that leaves a few blocks to
 * the destroy keeps it too (they stay, leftovers of the slot); one that
 * leaves more than a slot may keep (64 KiB) has its arena reset, and the
 * pair starts over: its tcache goes. */
/* More blocks a request than a front cache bin holds at most (256 of 64
 * bytes): the pair overflows its bin, refills, and so is busy enough for
 * a tcache once it has made 8,192. */
enum { RQ_REQUESTS = 200, RQ_BLOCKS = 600 };
enum rq_leak { RQ_NONE, RQ_FEW, RQ_MANY };
#define RQ_MANY_BYTES (100u << 10)
static unsigned rq_free_before, rq_free_served, rq_free_after_few,
    rq_free_after_many;
static ra_tag_t rq_ids[RQ_REQUESTS + 2];

static void rq_request(unsigned n, enum rq_leak leak)
{
    static void *blocks[RQ_BLOCKS];
    ra_tag_t tag = ra_tag_create(leak != RQ_NONE ? "request-leaky" : "request");
    ra_tag_usage_t use;

    rq_ids[n] = tag;
    push(tag);
    for (unsigned i = 0; i < RQ_BLOCKS; i++)
        if ((blocks[i] = ra_malloc(64)) == NULL || ra_tag_of(blocks[i]) != tag)
            count_error();
    if (leak == RQ_MANY && ra_malloc(RQ_MANY_BYTES) == NULL)
        count_error();
    pop(tag);
    for (unsigned i = leak != RQ_NONE ? 1 : 0; i < RQ_BLOCKS; i++)
        ra_free(blocks[i]);
    if (ra_tag_usage(tag, &use) != 0 ||
        use.nmalloc != RQ_BLOCKS + (leak == RQ_MANY ? 1u : 0u) ||
        use.ndalloc != (uint64_t)(RQ_BLOCKS - (leak != RQ_NONE ? 1 : 0)))
        count_error();
    if (ra_tag_destroy(tag) != 0)
        count_error();
}

static void *rq_worker(void *arg)
{
    (void)arg;
    rq_free_before = count_free_tcache_ids();
    for (unsigned n = 0; n < RQ_REQUESTS; n++)
        rq_request(n, RQ_NONE);
    rq_free_served = count_free_tcache_ids();
    rq_request(RQ_REQUESTS, RQ_FEW);
    rq_free_after_few = count_free_tcache_ids();
    rq_request(RQ_REQUESTS + 1, RQ_MANY);
    rq_free_after_many = count_free_tcache_ids();
    return NULL;
}

START_TEST(test_threads_request_tags_keep_one_tcache)
{
    pthread_t thread;

    ck_assert_int_eq(pthread_create(&thread, NULL, rq_worker, NULL), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    /* One id throughout: each destroy's slot served the next request. */
    for (unsigned n = 1; n <= RQ_REQUESTS + 1; n++)
        ck_assert_uint_eq(rq_ids[n], rq_ids[0]);
    ck_assert_uint_eq(rq_free_served, rq_free_before - 1);
    ck_assert_uint_eq(rq_free_after_few, rq_free_before - 1);
    ck_assert_uint_eq(rq_free_after_many, rq_free_before);
}
END_TEST

/* A pair that the ending holder did not use gives its caches back: a
 * thread that served many requests on a slot holds a tcache for it; when
 * another thread serves the slot's next holder alone, the first thread's
 * pair has been idle for a holder's life and starts over (its tcache id
 * is free again), so that threads do not each keep caches for every slot. */
static pthread_barrier_t rq_served, rq_other_done;
static unsigned rq_free_held, rq_free_drained;

static void *rq_first_worker(void *arg)
{
    (void)arg;
    rq_free_before = count_free_tcache_ids();
    for (unsigned n = 0; n < RQ_REQUESTS; n++)
        rq_request(n, false);
    rq_free_held = count_free_tcache_ids();
    pthread_barrier_wait(&rq_served);
    pthread_barrier_wait(&rq_other_done);
    rq_free_drained = count_free_tcache_ids();
    rq_request(0, false); /* the slot serves this thread again */
    return NULL;
}

START_TEST(test_threads_idle_pairs_of_a_slot_start_over)
{
    pthread_t thread;
    ra_tag_t first;

    pthread_barrier_init(&rq_served, NULL, 2);
    pthread_barrier_init(&rq_other_done, NULL, 2);
    ck_assert_int_eq(pthread_create(&thread, NULL, rq_first_worker, NULL), 0);
    pthread_barrier_wait(&rq_served);
    first = rq_ids[0];
    /* The slot is the first thread's own until taken away: a purge of
     * everything queues it, its pair parked. */
    ck_assert_int_eq(ra_purge_all(), 0);
    rq_request(1, false); /* this thread, the same slot (the only free id) */
    ck_assert_uint_eq(rq_ids[1], first);
    pthread_barrier_wait(&rq_other_done);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    ck_assert_uint_eq(rq_free_held, rq_free_before - 1);
    ck_assert_uint_eq(rq_free_drained, rq_free_before);
}
END_TEST

/* A bin's first refill takes a few blocks, not half the bin: a pair that
 * made a block or two and went idle holds a few blocks of its class in its
 * front cache (they count as allocated until a flush); a busy pair keeps
 * more. The worker stays alive, its caches unflushed, while the main
 * thread reads the stats. */
static ra_tag_t fl_tag;
static pthread_barrier_t fl_idle, fl_read, fl_busy;

static void *fl_worker(void *arg)
{
    static void *blocks[1000];

    (void)arg;
    push(fl_tag);
    /* The thread's first block of the tag sets its slot up, uncached; the
     * second fills the bin. */
    blocks[0] = ra_malloc(16);
    ra_free(ra_malloc(16));
    ra_free(blocks[0]);
    pthread_barrier_wait(&fl_idle);
    pthread_barrier_wait(&fl_read);
    for (unsigned i = 0; i < 1000; i++)
        blocks[i] = ra_malloc(16);
    for (unsigned i = 0; i < 1000; i++)
        ra_free(blocks[i]);
    pop(fl_tag);
    pthread_barrier_wait(&fl_busy);
    pthread_barrier_wait(&fl_read);
    return NULL;
}

START_TEST(test_threads_first_refill_is_small)
{
    pthread_t thread;
    size_t idle_bytes, busy_bytes;

    fl_tag = create_tag("first-fill-%u", 0);
    pthread_barrier_init(&fl_idle, NULL, 2);
    pthread_barrier_init(&fl_read, NULL, 2);
    pthread_barrier_init(&fl_busy, NULL, 2);
    ck_assert_int_eq(pthread_create(&thread, NULL, fl_worker, NULL), 0);
    pthread_barrier_wait(&fl_idle);
    idle_bytes = tu_jemalloc_allocated(fl_tag);
    pthread_barrier_wait(&fl_read);
    pthread_barrier_wait(&fl_busy);
    busy_bytes = tu_jemalloc_allocated(fl_tag);
    pthread_barrier_wait(&fl_read);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    /* The block and a few more; a bin holds 64 of them. */
    ck_assert_uint_ge(idle_bytes, 2 * 16);
    ck_assert_uint_le(idle_bytes, 8 * 16);
    /* Busy, the front cache (and the tcache behind it) keep more. */
    ck_assert_uint_gt(busy_bytes, 32 * 16);
    check_exact(fl_tag, &(struct truth){0, 0}, "after the thread exited");
    pthread_barrier_destroy(&fl_idle);
    pthread_barrier_destroy(&fl_read);
    pthread_barrier_destroy(&fl_busy);
}
END_TEST

/* -- "fork" --------------------------------------------------------------- */

/* Three threads allocate; a fourth starts short-lived threads and creates
 * tags, so that a fork may also land while a tag is being created or a
 * thread's caches are set up or released (under the library's locks). */
enum { FK_WORKERS = 3, FK_FORKS = 20, FK_MAX_EXTRA_TAGS = 100 };

static ra_tag_t fk_a, fk_b;
static atomic_bool fk_stop;
static _Atomic unsigned long fk_rounds[FK_WORKERS + 1];
static _Atomic unsigned fk_extra_tags;
static _Atomic unsigned fk_forks_done;

static void *fk_worker(void *arg)
{
    unsigned index = (unsigned)(uintptr_t)arg;

    for (unsigned n = 0; !atomic_load(&fk_stop); n++) {
        ra_tag_t tag = n % 2 == 0 ? fk_a : fk_b;
        void *blocks[8];

        push(tag);
        for (unsigned k = 0; k < 8; k++)
            blocks[k] = ra_malloc(sizes[(n + k) % N_SIZES]);
        blocks[0] = ra_realloc(blocks[0], 70000);
        pop(tag);
        for (unsigned k = 0; k < 8; k++)
            if (blocks[k] == NULL || ra_tag_of(blocks[k]) != tag)
                count_error();
        for (unsigned k = 0; k < 8; k += 2) {
            ra_free(blocks[k]);
            blocks[k] = ra_malloc(sizes[(n + k) % N_SIZES]);
            if (blocks[k] == NULL || ra_tag_of(blocks[k]) != RA_TAG_NONE)
                count_error();
        }
        for (unsigned k = 0; k < 8; k++)
            ra_free(blocks[k]);
        atomic_fetch_add(&fk_rounds[index], 1);
    }
    return NULL;
}

static void *fk_short_lived(void *arg)
{
    ra_tag_t tag = (ra_tag_t)(uintptr_t)arg;
    void *p;

    push(tag);
    p = ra_malloc(200);
    pop(tag);
    if (p == NULL || ra_tag_of(p) != tag)
        count_error();
    ra_free(p);
    return NULL;
}

static void *fk_churn(void *arg)
{
    (void)arg;
    for (unsigned n = 0; !atomic_load(&fk_stop); n++) {
        ra_tag_t tag = n % 2 == 0 ? fk_a : fk_b;
        pthread_t thread;

        /* A few new tags per fork, spread over the whole run. */
        if (atomic_load(&fk_extra_tags) <
            FK_MAX_EXTRA_TAGS / FK_FORKS * (atomic_load(&fk_forks_done) + 1)) {
            char name[32];

            snprintf(name, sizeof name, "fork-extra-%u",
                     atomic_load(&fk_extra_tags));
            tag = ra_tag_create(name);
            if (tag == RA_TAG_NONE)
                count_error();
            else
                atomic_fetch_add(&fk_extra_tags, 1);
        }
        if (pthread_create(&thread, NULL, fk_short_lived,
                           (void *)(uintptr_t)tag) != 0 ||
            pthread_join(thread, NULL) != 0)
            count_error();
        atomic_fetch_add(&fk_rounds[FK_WORKERS], 1);
    }
    return NULL;
}

static void *fk_child_thread(void *arg)
{
    ra_tag_t tag = *(ra_tag_t *)arg;
    void *p, *q;

    push(tag);
    p = ra_malloc(3000);
    q = ra_malloc(100000);
    pop(tag);
    if (p == NULL || q == NULL || ra_tag_of(p) != tag || ra_tag_of(q) != tag)
        return (void *)1;
    ra_free(p);
    ra_free(q);
    return NULL;
}

/* Runs in the forked child; the return value is its exit status, a step
 * number on failure. */
static int fk_child(unsigned round)
{
    char name[32];
    ra_tag_stats_t s;
    pthread_t thread;
    void *a, *u, *p, *res = NULL;
    ra_tag_t tag;

    if (ra_tag_push(fk_a) != 0)
        return 2;
    a = ra_malloc(1000);
    ra_tag_pop(fk_a);
    if (a == NULL || ra_tag_of(a) != fk_a)
        return 3;
    u = ra_malloc(1000);
    if (u == NULL || ra_tag_of(u) != RA_TAG_NONE)
        return 4;
    if (ra_tag_stats(fk_a, &s) != 0 || s.allocated < 1000)
        return 5;
    if (ra_tag_stats(RA_TAG_NONE, &s) != 0 || s.allocated < 1000)
        return 6;
    snprintf(name, sizeof name, "fork-child-%u", round);
    tag = ra_tag_create(name);
    if (tag == RA_TAG_NONE || ra_tag_lookup(name) != tag)
        return 7;
    p = ra_malloc_tag(tag, 5000);
    if (p == NULL || ra_tag_of(p) != tag)
        return 8;
    if (pthread_create(&thread, NULL, fk_child_thread, &tag) != 0 ||
        pthread_join(thread, &res) != 0 || res != NULL)
        return 9;
    ra_thread_flush();
    if (ra_tag_stats(tag, &s) != 0 ||
        s.allocated != ra_malloc_usable_size(p) || s.nmalloc != 3 ||
        s.ndalloc != 2)
        return 10;
    ra_free(p);
    ra_free(a);
    ra_free(u);
    if (ra_tag_purge(tag) != 0 || ra_purge_all() != 0)
        return 11;
    return 0;
}

/* Waits until every worker has done a few more rounds, so that each fork
 * lands while all of them are busy allocating. */
static void fk_wait_for_workers(void)
{
    for (unsigned i = 0; i < FK_WORKERS + 1; i++) {
        unsigned long start = atomic_load(&fk_rounds[i]);
        while (atomic_load(&fk_rounds[i]) < start + 3)
            sched_yield();
    }
}

START_TEST(test_threads_fork_while_threads_allocate)
{
    pthread_t workers[FK_WORKERS + 1];

    fk_a = create_tag("fork-a", 0);
    fk_b = create_tag("fork-b", 0);
    for (unsigned i = 0; i < FK_WORKERS; i++)
        ck_assert_int_eq(pthread_create(&workers[i], NULL, fk_worker,
                                        (void *)(uintptr_t)i),
                         0);
    ck_assert_int_eq(
        pthread_create(&workers[FK_WORKERS], NULL, fk_churn, NULL), 0);
    for (unsigned round = 0; round < FK_FORKS; round++) {
        int status;
        pid_t pid;

        fk_wait_for_workers();
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            /* A deadlock in the child becomes SIGALRM, not a hang. */
            alarm(10);
            _exit(fk_child(round));
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(!WIFSIGNALED(status),
                      "fork %u: child killed by signal %d%s", round,
                      WTERMSIG(status),
                      WTERMSIG(status) == SIGALRM ? " (deadlock)" : "");
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "fork %u: child failed at step %d", round,
                      WEXITSTATUS(status));
        atomic_fetch_add(&fk_forks_done, 1);
    }
    atomic_store(&fk_stop, true);
    for (unsigned i = 0; i < FK_WORKERS + 1; i++)
        ck_assert_int_eq(pthread_join(workers[i], NULL), 0);
    ck_assert_uint_eq(atomic_load(&errors), 0);

    /* The children's tags stay theirs. */
    ck_assert_uint_eq(ra_tag_lookup("fork-child-0"), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_count(), 2 + atomic_load(&fk_extra_tags));
    /* The workers freed everything and exited. */
    check_exact(fk_a, &(struct truth){0, 0}, "after the workers exited");
    check_exact(fk_b, &(struct truth){0, 0}, "after the workers exited");
}
END_TEST

/* -- "thread exit" -------------------------------------------------------- */

enum { TE_BLOCKS = 1000, TE_KEPT = 100 };

struct te_args {
    ra_tag_t tag;
    void *kept[TE_KEPT];
    void *const *foreign;  /* blocks of another thread to free, or NULL */
    size_t nforeign;
};

static void *te_worker(void *arg)
{
    struct te_args *args = arg;
    static _Thread_local void *blocks[TE_BLOCKS];

    push(args->tag);
    for (unsigned i = 0; i < TE_BLOCKS; i++) {
        /* Sizes a thread cache holds, so that frees stay in the cache. */
        blocks[i] = ra_malloc(sizes[i % 11]);
        if (blocks[i] == NULL || ra_tag_of(blocks[i]) != args->tag)
            count_error();
    }
    for (unsigned i = 0; i < TE_BLOCKS; i++) {
        if (i % (TE_BLOCKS / TE_KEPT) == 0)
            args->kept[i / (TE_BLOCKS / TE_KEPT)] = blocks[i];
        else
            ra_free(blocks[i]);
    }
    pop(args->tag);
    for (size_t i = 0; i < args->nforeign; i++)
        ra_free(args->foreign[i]);
    /* No ra_thread_flush(): exiting must do it. */
    return NULL;
}

START_TEST(test_threads_exit_flushes_caches)
{
    static struct te_args args;
    struct truth t = {0, 0};
    pthread_t thread;
    ra_tag_stats_t s;

    args.tag = create_tag("thread-exit", 0);
    ck_assert_int_eq(pthread_create(&thread, NULL, te_worker, &args), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ck_assert_uint_eq(atomic_load(&errors), 0);

    for (unsigned i = 0; i < TE_KEPT; i++) {
        ck_assert_ptr_nonnull(args.kept[i]);
        t.bytes += ra_malloc_usable_size(args.kept[i]);
        t.count++;
    }
    check_exact(args.tag, &t, "after the thread exited");
    s = tu_tag_stats(args.tag);
    ck_assert_uint_eq(s.nmalloc, TE_BLOCKS);
    ck_assert_uint_eq(s.ndalloc, TE_BLOCKS - TE_KEPT);

    for (unsigned i = 0; i < TE_KEPT; i++)
        ra_free(args.kept[i]);
    ra_thread_flush();
    check_exact(args.tag, &(struct truth){0, 0},
                "after the main thread freed");
}
END_TEST

/* The main thread's blocks, freed by a thread that then exits without a
 * flush, leave the tag's figures with that thread's caches. */
START_TEST(test_threads_exit_flushes_foreign_frees)
{
    enum { N = 500 };
    static void *mine[N];
    static struct te_args args;
    struct truth t = {0, 0};
    pthread_t thread;

    args.tag = create_tag("thread-exit-owner", 0);
    for (unsigned i = 0; i < N; i++) {
        mine[i] = ra_malloc_tag(args.tag, sizes[i % 11]);
        ck_assert_ptr_nonnull(mine[i]);
    }
    /* The main thread's own cache is out of the picture from here. */
    ra_thread_flush();
    args.foreign = mine;
    args.nforeign = N;
    ck_assert_int_eq(pthread_create(&thread, NULL, te_worker, &args), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ck_assert_uint_eq(atomic_load(&errors), 0);

    for (unsigned i = 0; i < TE_KEPT; i++) {
        t.bytes += ra_malloc_usable_size(args.kept[i]);
        t.count++;
    }
    check_exact(args.tag, &t, "after the thread exited");
    for (unsigned i = 0; i < TE_KEPT; i++)
        ra_free(args.kept[i]);
}
END_TEST

/* A pthread destructor that runs after jemalloc and the library have
 * cleaned up the thread (its key was created later) still frees and
 * allocates under a pushed tag. jemalloc serves such late requests from
 * arena 0 (jemalloc's thread-exit redirection, doc/design.md), so the late blocks may
 * come back untagged; whatever they are, the tag's figures must agree with
 * the blocks that are really in its region. */
enum { LD_FIRST = 100, LD_LATE = 50 };

struct ld_args {
    ra_tag_t tag;
    void *first[LD_FIRST];
    void *late[LD_LATE / 2];
};

static pthread_key_t ld_key;

static void ld_destructor(void *arg)
{
    struct ld_args *args = arg;
    void *late[LD_LATE];

    push(args->tag);
    for (unsigned i = 0; i < LD_FIRST; i++)
        ra_free(args->first[i]);
    for (unsigned i = 0; i < LD_LATE; i++) {
        late[i] = ra_malloc(sizes[i % 11]);
        if (late[i] == NULL)
            count_error();
    }
    for (unsigned i = 0; i < LD_LATE; i++) {
        if (i % 2 == 0)
            args->late[i / 2] = late[i];
        else
            ra_free(late[i]);
    }
    pop(args->tag);
}

static void *ld_worker(void *arg)
{
    struct ld_args *args = arg;

    push(args->tag);
    for (unsigned i = 0; i < LD_FIRST; i++) {
        args->first[i] = ra_malloc(sizes[i % 11]);
        if (args->first[i] == NULL || ra_tag_of(args->first[i]) != args->tag)
            count_error();
    }
    pop(args->tag);
    if (pthread_setspecific(ld_key, args) != 0)
        count_error();
    return NULL;
}

START_TEST(test_threads_exit_late_destructors_stay_exact)
{
    static struct ld_args args;
    struct truth t = {0, 0};
    pthread_t thread;

    /* Created after the library's own key: its destructor runs later. */
    args.tag = create_tag("thread-exit-late", 0);
    ck_assert_int_eq(pthread_key_create(&ld_key, ld_destructor), 0);
    ck_assert_int_eq(pthread_create(&thread, NULL, ld_worker, &args), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ck_assert_uint_eq(atomic_load(&errors), 0);

    for (unsigned i = 0; i < LD_LATE / 2; i++) {
        ck_assert_ptr_nonnull(args.late[i]);
        if (ra_tag_of(args.late[i]) != args.tag)
            continue;
        t.bytes += ra_malloc_usable_size(args.late[i]);
        t.count++;
    }
    check_exact(args.tag, &t, "after the thread exited");
    for (unsigned i = 0; i < LD_LATE / 2; i++)
        ra_free(args.late[i]);
    ra_thread_flush();
    check_exact(args.tag, &(struct truth){0, 0}, "after all were freed");
}
END_TEST

/* -- "pass-through mode" -------------------------------------------------- */

enum { PT_THREADS = 4, PT_ITER = 3000 };

static ra_tag_t pt_tags[2];

static void *pt_worker(void *arg)
{
    unsigned index = (unsigned)(uintptr_t)arg;
    ra_tag_t tag = pt_tags[index % 2];
    void *blocks[16] = {NULL};

    push(tag);
    if (ra_tag_current() != tag)
        count_error();
    for (unsigned n = 0; n < PT_ITER; n++) {
        unsigned k = n % 16;
        size_t size = sizes[(n + index) % N_SIZES];
        unsigned char *p;

        ra_free(blocks[k]);
        switch (n % 4) {
        case 0: p = ra_malloc(size); break;
        case 1: p = ra_calloc(2, size); break;
        case 2: p = ra_aligned_alloc(256, size); break;
        default: p = ra_malloc_tag(pt_tags[(index + 1) % 2], size); break;
        }
        if (p == NULL || ra_tag_of(p) != RA_TAG_NONE) {
            count_error();
            blocks[k] = NULL;
            continue;
        }
        if (n % 4 == 1 && (p[0] != 0 || p[2 * size - 1] != 0))
            count_error();
        p[0] = (unsigned char)n;
        p = ra_realloc(p, size * 3);
        if (p == NULL || ra_tag_of(p) != RA_TAG_NONE ||
            p[0] != (unsigned char)n)
            count_error();
        blocks[k] = p;
    }
    for (unsigned k = 0; k < 16; k++)
        ra_free(blocks[k]);
    pop(tag);
    ra_thread_flush();
    return NULL;
}

/* Runs as its test's first action: the library reads REGIONALLOC once. */
START_TEST(test_threads_pass_through_mode_works)
{
    pthread_t threads[PT_THREADS];
    ra_tag_stats_t s;

    ck_assert_int_eq(setenv("REGIONALLOC", "0", 1), 0);
    ck_assert_int_eq(ra_enabled(), 0);
    pt_tags[0] = create_tag("pass-through-%u", 0);
    pt_tags[1] = create_tag("pass-through-%u", 1);
    for (unsigned i = 0; i < PT_THREADS; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, pt_worker,
                                        (void *)(uintptr_t)i),
                         0);
    for (unsigned i = 0; i < PT_THREADS; i++)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    errno = 0;
    ck_assert_int_eq(ra_tag_stats(pt_tags[0], &s), -1);
    ck_assert_int_eq(errno, ENOTSUP);
    ck_assert_int_eq(ra_enabled(), 0);
}
END_TEST

static Suite *threads_suite(void)
{
    Suite *s = suite_create("threads");
    TCase *tc;

    tc = tcase_create("cross-thread frees");
    tcase_add_test(tc, test_threads_allocated_exact_with_cross_thread_frees);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);

    tc = tcase_create("many short-lived threads");
    tcase_add_test(tc, test_threads_short_lived_threads_release_caches);
    tcase_add_test(tc, test_threads_out_of_tcache_ids_goes_uncached);
    tcase_add_test(tc, test_threads_tcache_only_for_busy_pairs);
    tcase_add_test(tc, test_threads_request_tags_keep_one_tcache);
    tcase_add_test(tc, test_threads_idle_pairs_of_a_slot_start_over);
    tcase_add_test(tc, test_threads_first_refill_is_small);
    tcase_set_timeout(tc, 40);
    suite_add_tcase(s, tc);

    tc = tcase_create("fork");
    tcase_add_test(tc, test_threads_fork_while_threads_allocate);
    tcase_set_timeout(tc, 40);
    /* ThreadSanitizer cannot follow a child forked from several threads
     * that starts threads: its run leaves this case out by this tag. */
    tcase_set_tags(tc, "multithreaded-fork");
    suite_add_tcase(s, tc);

    tc = tcase_create("thread exit");
    tcase_add_test(tc, test_threads_exit_flushes_caches);
    tcase_add_test(tc, test_threads_exit_flushes_foreign_frees);
    tcase_add_test(tc, test_threads_exit_late_destructors_stay_exact);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);

    tc = tcase_create("pass-through mode");
    tcase_add_test(tc, test_threads_pass_through_mode_works);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    return tu_run_suite(threads_suite());
}

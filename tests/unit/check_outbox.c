/* Suite "outbox (unit)": what a thread frees of a tag it does not allocate
 * in (src/outbox.c). Such a thread's slot of the tag gets no front cache,
 * so a free takes none of the library's memory for the pair; its blocks go
 * home to the tag's return stacks in batches, where the tag's allocating
 * threads take them back; a batch that waited across a reset of its tag
 * never reaches the arena (its blocks were discarded, and their addresses
 * may belong to live blocks by then); a flush or the thread's end makes
 * the figures exact; and the slot gets its front cache once the thread
 * allocates in the tag. scripts/test.sh runs the suite under
 * ThreadSanitizer too. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "internal.h"
#include "pairs.h"
#include "testutil.h"

#define SIZE 64
/* Fewer than a batch: they stay in the consumer's outbox. */
#define FEW 20
#define MANY 4000

static void *blocks[MANY];
static void *more[2 * MANY];

/* What a consumer thread does, step by step, at the test's command. */
enum step { FREE_FEW, FREE_MANY, FREE_MORE, FLUSH, ALLOCATE, LOOK, EXIT };

struct consumer {
    pthread_t thread;
    ra_tag_t tag;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    enum step step;
    bool asked, done;
    /* What LOOK saw of the consumer's slot of tag. */
    bool has_bins, allocates, has_tcache;
    size_t meta_before, meta_after;
};

static void do_step(struct consumer *c, enum step step)
{
    struct ra__tag_slot *s;

    switch (step) {
    case FREE_FEW:
        for (unsigned i = 0; i < FEW; i++)
            ra_free(blocks[i]);
        break;
    case FREE_MANY:
        c->meta_before = ra__meta_held();
        for (unsigned i = 0; i < MANY; i++)
            ra_free(blocks[i]);
        c->meta_after = ra__meta_held();
        break;
    case FREE_MORE:
        for (unsigned i = 0; i < 2 * MANY; i++)
            ra_free(more[i]);
        break;
    case FLUSH:
        ra_thread_flush();
        break;
    case ALLOCATE:
        blocks[0] = ra_malloc_tag(c->tag, SIZE);
        ck_assert_ptr_nonnull(blocks[0]);
        break;
    case LOOK:
        s = &ra__thread->slots[c->tag];
        c->has_bins = s->bins != NULL;
        c->allocates = s->allocates;
        c->has_tcache = s->tcache != RA__NO_TCACHE;
        break;
    case EXIT:
        break;
    }
}

static void *consume(void *arg)
{
    struct consumer *c = arg;
    enum step step;

    /* The thread's state is made by its first tagged call, here a free of
     * another tag's block: what the steps free is measured without it. */
    ra_tag_t other = tu_tag_create("other");
    ra_free(ra_malloc_tag(other, SIZE));
    do {
        pthread_mutex_lock(&c->lock);
        while (!c->asked)
            pthread_cond_wait(&c->cond, &c->lock);
        step = c->step;
        pthread_mutex_unlock(&c->lock);
        do_step(c, step);
        pthread_mutex_lock(&c->lock);
        c->asked = false;
        c->done = true;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
    } while (step != EXIT);
    return NULL;
}

static void ask(struct consumer *c, enum step step)
{
    pthread_mutex_lock(&c->lock);
    c->step = step;
    c->asked = true;
    c->done = false;
    pthread_cond_broadcast(&c->cond);
    while (!c->done)
        pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

static void start(struct consumer *c, ra_tag_t tag)
{
    *c = (struct consumer){.tag = tag, .lock = PTHREAD_MUTEX_INITIALIZER,
                           .cond = PTHREAD_COND_INITIALIZER};
    ck_assert_int_eq(pthread_create(&c->thread, NULL, consume, c), 0);
}

static void stop(struct consumer *c)
{
    ask(c, EXIT);
    ck_assert_int_eq(pthread_join(c->thread, NULL), 0);
}

static void allocate(void **out, ra_tag_t tag, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        out[i] = ra_malloc_tag(tag, SIZE);
        ck_assert_ptr_nonnull(out[i]);
    }
}

/* A new consumer of tag name has freed the FEW blocks made here: they
 * wait in its outbox (fewer than a batch). */
static ra_tag_t few_freed_by(struct consumer *c, const char *name)
{
    ra_tag_t tag = tu_tag_create(name);

    start(c, tag);
    allocate(blocks, tag, FEW);
    ask(c, FREE_FEW);
    return tag;
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a;
    uintptr_t y = (uintptr_t) * (void *const *)b;

    return x < y ? -1 : x > y;
}

/* No block is handed out twice: n live blocks, n distinct addresses. */
static void assert_distinct(void **live, unsigned n)
{
    void **sorted = malloc(n * sizeof *sorted);

    ck_assert_ptr_nonnull(sorted);
    memcpy(sorted, live, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_address);
    for (unsigned i = 1; i < n; i++)
        ck_assert_ptr_ne(sorted[i - 1], sorted[i]);
    free(sorted);
}

/* A producer's blocks freed by a consumer: the consumer's slot has no
 * front cache and is not counted in the pool, and its frees take at most
 * the return stacks' own records (the class's bound, 1,024 blocks, in
 * records of a batch each: about 13 KiB; a front cache of its own was one
 * bin per class, about 19 KiB, and blocks to fill them). */
START_TEST(test_outbox_unit_a_free_sets_up_no_front_cache)
{
    ra_tag_t tag = tu_tag_create("produced");
    struct consumer c;

    start(&c, tag);
    allocate(blocks, tag, MANY);
    ask(&c, FREE_MANY);
    ask(&c, LOOK);
    ck_assert(!c.has_bins);
    ck_assert(!c.allocates);
    ck_assert_uint_lt(c.meta_after - c.meta_before, 16u << 10);
    stop(&c);
}
END_TEST

/* The blocks come home: onto the tag's return stack, not to jemalloc
 * (the stack holds its bound of them after the consumer's frees), and the
 * producer's next allocations take them back (its refills look at the
 * stacks first), and no block is handed out twice. */
START_TEST(test_outbox_unit_freed_blocks_serve_the_producer)
{
    ra_tag_t tag = tu_tag_create("produced");
    unsigned bin = ra__size_bin[(SIZE + 7) >> 3];
    /* The stack's bound for SIZE (ra__returns_send): four of the largest
     * bins. */
    static void *home[RA__RETURNS_BINS * RA__FC_MAX];
    ra_tag_usage_t u;
    struct consumer c;
    unsigned reused = 0, got;

    start(&c, tag);
    allocate(blocks, tag, MANY);
    ask(&c, FREE_MANY);
    ask(&c, FLUSH);
    ra_thread_flush(); /* what the producer's front cache holds */
    ck_assert_int_eq(ra_tag_usage(tag, &u), 0);
    ck_assert_uint_eq(u.nmalloc, u.ndalloc);
    /* Every block was freed: none of the tag's is allocated to jemalloc. */
    ck_assert_uint_eq(tu_tag_stats(tag).allocated, 0);
    allocate(blocks, tag, MANY);
    ask(&c, FREE_MANY);
    got = ra__returns_take(tag, bin, home, RA__RETURNS_BINS * RA__FC_MAX);
    ck_assert_uint_ge(got, RA__RETURNS_BINS * RA__FC_MAX - RA__OUTBOX_BATCH);
    for (unsigned i = 0; i < got; i += RA__OUTBOX_BATCH)
        ck_assert(ra__returns_push(tag, bin, home + i,
                                   got - i < RA__OUTBOX_BATCH
                                       ? got - i
                                       : RA__OUTBOX_BATCH,
                                   got));
    allocate(more, tag, MANY);
    assert_distinct(more, MANY);
    qsort(blocks, MANY, sizeof blocks[0], by_address);
    for (unsigned i = 0; i < MANY; i++)
        reused += bsearch(&more[i], blocks, MANY, sizeof blocks[0],
                          by_address) != NULL;
    ck_assert_uint_gt(reused, MANY / 2);
    for (unsigned i = 0; i < MANY; i++)
        ra_free(more[i]);
    stop(&c);
}
END_TEST

/* The stack full (the producer allocates no more): what the consumer
 * sends past it goes to jemalloc through a tcache its pair takes at the
 * first overflow once it is busy (8,192 blocks freed), a bin's worth under
 * one lock, where block by block each took the bin's lock; the pair still
 * has no front cache, and a flush makes every figure exact. */
START_TEST(test_outbox_unit_an_overflow_takes_no_lock_per_block)
{
    ra_tag_t tag = tu_tag_create("overflow");
    unsigned over = MANY - RA__RETURNS_BINS * RA__FC_MAX;
    struct consumer c;
    uint64_t before, ops;

    start(&c, tag);
    /* 8,000 blocks: not yet busy, no tcache. */
    allocate(more, tag, 2 * MANY);
    ask(&c, FREE_MORE);
    ask(&c, LOOK);
    ck_assert(!c.has_tcache);
    allocate(blocks, tag, MANY);
    before = tu_bin_lock_ops(tag, SIZE);
    ask(&c, FREE_MANY);
    ops = tu_bin_lock_ops(tag, SIZE) - before;
    ask(&c, LOOK);
    ck_assert(c.has_tcache);
    ck_assert(!c.has_bins);
    ck_assert(!c.allocates);
    /* The first overflowing batch goes block by block, the rest through
     * the tcache: a few dozen lock operations for the ~3,000 blocks. */
    ck_assert_uint_lt(ops, over / 8);
    ask(&c, FLUSH);
    ra_thread_flush();
    ck_assert_uint_eq(tu_tag_stats(tag).allocated, 0);
    ck_assert_uint_eq(tu_jemalloc_allocated(tag), 0);
    stop(&c);
}
END_TEST

/* A batch in the consumer's outbox across the end of its tag's blocks
 * (end: a reset, or a destroy that finds a block live and so resets the
 * arena, returning the slot's next holder): the end discarded the batch's
 * blocks, and the tag's next blocks take their addresses; the consumer's
 * flush afterwards must not send them home, or the next allocations would
 * be handed blocks that are live. */
static void assert_batch_dropped(ra_tag_t (*end)(ra_tag_t))
{
    struct consumer c;
    ra_tag_t tag = end(few_freed_by(&c, "ending"));

    allocate(more, tag, FEW);
    ask(&c, FLUSH);
    allocate(more + FEW, tag, MANY);
    assert_distinct(more, FEW + MANY);
    for (unsigned i = 0; i < FEW + MANY; i++)
        ra_free(more[i]);
    stop(&c);
}

static ra_tag_t reset(ra_tag_t tag)
{
    ck_assert_int_eq(ra_tag_reset(tag), 0);
    return tag;
}

static ra_tag_t destroy_with_a_block_live(ra_tag_t tag)
{
    ra_tag_t next;

    ck_assert_ptr_nonnull(ra_malloc_tag(tag, SIZE));
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    next = tu_tag_create("next holder");
    ck_assert_uint_eq(next, tag);
    return next;
}

START_TEST(test_outbox_unit_a_batch_from_before_a_reset_is_dropped)
{
    assert_batch_dropped(reset);
}
END_TEST

START_TEST(test_outbox_unit_a_batch_from_before_a_destroy_is_dropped)
{
    assert_batch_dropped(destroy_with_a_block_live);
}
END_TEST

/* A destroy that found nothing live sends the consumer's batches of the
 * tag home itself: the next holder's purge reaches their pages although
 * the consumer is idle. */
START_TEST(test_outbox_unit_a_destroy_sends_an_idle_consumers_batches)
{
    struct consumer c;
    ra_tag_t tag = few_freed_by(&c, "idle consumer"), next;
    ra_tag_usage_t u;

    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    next = tu_tag_create("next holder");
    ck_assert_uint_eq(next, tag);
    ck_assert_int_eq(ra_tag_purge(next), 0);
    ck_assert_uint_eq(tu_tag_stats(next).allocated, 0);
    ck_assert_int_eq(ra_tag_usage(next, &u), 0);
    ck_assert_uint_eq(u.nmalloc, 0);
    ck_assert_uint_eq(u.ndalloc, 0);
    stop(&c);
}
END_TEST

/* A thread's end sends its batches home and drains them: every block is
 * back in the arena. */
START_TEST(test_outbox_unit_an_exit_makes_the_figures_exact)
{
    struct consumer c;
    ra_tag_t tag = few_freed_by(&c, "exit");

    ra_thread_flush(); /* what the producer's front cache holds */
    ck_assert_uint_eq(tu_tag_stats(tag).allocated, 0);
    ck_assert_uint_gt(tu_jemalloc_allocated(tag), 0);
    stop(&c);
    ck_assert_uint_eq(tu_jemalloc_allocated(tag), 0);
}
END_TEST

/* The consumer allocates in the tag: its slot gets a front cache and is
 * counted in the pool; what its outbox held still goes home. */
START_TEST(test_outbox_unit_an_allocation_makes_the_slot_whole)
{
    struct consumer c;
    ra_tag_t tag = few_freed_by(&c, "both");

    ask(&c, ALLOCATE);
    ask(&c, LOOK);
    ck_assert(c.has_bins);
    ck_assert(c.allocates);
    ra_free(blocks[0]);
    ask(&c, FLUSH);
    ra_thread_flush();
    ck_assert_uint_eq(tu_tag_stats(tag).allocated, 0);
    stop(&c);
}
END_TEST

/* Many consumers of one producer at once, each with its own outbox, and
 * a destroy between rounds: nothing lost, nothing handed out twice. */
#define CONSUMERS 4
#define ROUND 1000
static void *round_blocks[CONSUMERS][ROUND];

static void *free_round(void *arg)
{
    void **b = arg;

    for (unsigned i = 0; i < ROUND; i++)
        ra_free(b[i]);
    return NULL;
}

START_TEST(test_outbox_unit_consumers_at_once_lose_nothing)
{
    pthread_t t[CONSUMERS];

    for (unsigned r = 0; r < 5; r++) {
        ra_tag_t tag = tu_tag_create("round");
        for (unsigned k = 0; k < CONSUMERS; k++)
            for (unsigned i = 0; i < ROUND; i++) {
                round_blocks[k][i] = ra_malloc_tag(tag, 16 + (i % 16) * 16);
                ck_assert_ptr_nonnull(round_blocks[k][i]);
            }
        assert_distinct(&round_blocks[0][0], CONSUMERS * ROUND);
        for (unsigned k = 0; k < CONSUMERS; k++)
            ck_assert_int_eq(pthread_create(&t[k], NULL, free_round,
                                            round_blocks[k]),
                             0);
        for (unsigned k = 0; k < CONSUMERS; k++)
            ck_assert_int_eq(pthread_join(t[k], NULL), 0);
        ra_thread_flush();
        ck_assert_uint_eq(tu_tag_stats(tag).allocated, 0);
        ck_assert_int_eq(ra_tag_destroy(tag), 0);
    }
}
END_TEST

/* A consumer's sends of a tag race its destroy: the consumer has freed
 * all of tag a's blocks (more than its stacks hold: its pair sends through
 * a tcache), and while a is destroyed it frees tag b's blocks, of the
 * classes whose outbox ways are a's, so that b's batches push a's out and
 * home. A destroy with nothing live waits for those sends before it parks
 * the pair, whose tcache a purge then flushes (here at once, on the
 * destroying thread); one with 256 KiB live (every other round) resets
 * the arena, and no send may free through the pair's tcache as it is
 * destroyed. Under ThreadSanitizer in scripts/test.sh. Each round's blocks
 * are distinct and b's counts exact. */
#define RACE_A 10000 /* past the 8,192 frees after which a pair is busy */
#define RACE_B 2000
static void *race_a[RACE_A], *race_b[RACE_B];
static size_t race_b_sizes[4];
static unsigned race_b_nsizes;
static _Atomic unsigned race_phase;

static void race_wait(unsigned phase)
{
    while (atomic_load(&race_phase) < phase)
        sched_yield();
}

static void *race_consumer(void *arg)
{
    unsigned rounds = *(unsigned *)arg;

    for (unsigned r = 0; r < rounds; r++) {
        race_wait(3 * r + 1);
        for (unsigned i = 0; i < RACE_A; i++)
            ra_free(race_a[i]);
        atomic_store(&race_phase, 3 * r + 2);
        for (unsigned i = 0; i < RACE_B; i++)
            ra_free(race_b[i]);
        ra_thread_flush();
        atomic_store(&race_phase, 3 * r + 3);
    }
    return NULL;
}

/* The sizes of b's blocks: a class whose outbox way (outbox.c: (tag * 21
 * + bin) mod the ways) is that of one of a's, for each of a's classes
 * that has one. */
static unsigned race_pick_b_sizes(ra_tag_t a, ra_tag_t b,
                                  const size_t *a_sizes, unsigned n)
{
    race_b_nsizes = 0;
    for (unsigned k = 0; k < n; k++) {
        unsigned bin_a = ra__size_bin[(a_sizes[k] + 7) >> 3];
        unsigned way = (a * 21u + bin_a) % RA__OUTBOX_WAYS;
        for (unsigned bin = 0; bin < ra__nbins; bin++)
            if ((b * 21u + bin) % RA__OUTBOX_WAYS == way) {
                race_b_sizes[race_b_nsizes++] = ra__bin_size[bin];
                break;
            }
    }
    return race_b_nsizes;
}

/* A tag b whose classes share ways with a's (consecutive ids do not:
 * outbox.c spreads them); the tags tried before it are destroyed. */
static ra_tag_t race_make_b(ra_tag_t a, const size_t *a_sizes, unsigned n)
{
    static const char *names[8] = {"b0", "b1", "b2", "b3",
                                   "b4", "b5", "b6", "b7"};
    ra_tag_t tried[8];

    for (unsigned k = 0; k < 8; k++) {
        tried[k] = tu_tag_create(names[k]);
        if (race_pick_b_sizes(a, tried[k], a_sizes, n) != 0) {
            for (unsigned j = 0; j < k; j++)
                ck_assert_int_eq(ra_tag_destroy(tried[j]), 0);
            return tried[k];
        }
    }
    ck_abort_msg("no tag's classes share an outbox way with a's");
    return RA_TAG_NONE;
}

START_TEST(test_outbox_unit_sends_race_a_destroy)
{
    static const size_t a_sizes[4] = {16, 32, 48, SIZE};
    unsigned rounds = 16;
    pthread_t t;

    atomic_store(&race_phase, 0);
    ck_assert_int_eq(pthread_create(&t, NULL, race_consumer, &rounds), 0);
    for (unsigned r = 0; r < rounds; r++) {
        ra_tag_t a = tu_tag_create("raced"), b = race_make_b(a, a_sizes, 4);
        /* More than a destroy leaves live without a reset (64 KiB). */
        void *live = r % 2 ? ra_malloc_tag(a, 256 << 10) : NULL;
        ra_tag_usage_t u;

        for (unsigned i = 0; i < RACE_A; i++) {
            race_a[i] = ra_malloc_tag(a, a_sizes[i % 4]);
            ck_assert_ptr_nonnull(race_a[i]);
        }
        for (unsigned i = 0; i < RACE_B; i++) {
            race_b[i] = ra_malloc_tag(b, race_b_sizes[i % race_b_nsizes]);
            ck_assert_ptr_nonnull(race_b[i]);
        }
        assert_distinct(race_a, RACE_A);
        assert_distinct(race_b, RACE_B);
        atomic_store(&race_phase, 3 * r + 1);
        race_wait(3 * r + 2);
        (void)live; /* freed with its tag */
        ck_assert_int_eq(ra_tag_destroy(a), 0);
        ck_assert_int_eq(ra_purge_all(), 0);
        race_wait(3 * r + 3);
        ra_thread_flush();
        ck_assert_int_eq(ra_tag_usage(b, &u), 0);
        ck_assert_uint_eq(u.nmalloc, RACE_B);
        ck_assert_uint_eq(u.ndalloc, RACE_B);
        ck_assert_uint_eq(tu_tag_stats(b).allocated, 0);
        ck_assert_int_eq(ra_tag_destroy(b), 0);
    }
    ck_assert_int_eq(pthread_join(t, NULL), 0);
}
END_TEST

/* -- a send held inside the gate ------------------------------------------
 * The link wraps ra__returns_send, ra__be_tcache_flush and
 * ra__be_tcache_destroy: a consumer's send of the watched tag through its
 * pair's tcache is held inside the gate (a bounded wait) while the main
 * thread ends the tag; a flush or destroy of that tcache meanwhile, by the
 * end or by the purge after it, is the defect (jemalloc's tcache used by
 * two threads at once), whether or not jemalloc then crashes. */
#define HOLD_MS 300

bool __real_ra__returns_send(ra_tag_t tag, unsigned bin, void *const *items,
                             unsigned n, int flags);
void __real_ra__be_tcache_flush(unsigned id);
void __real_ra__be_tcache_destroy(unsigned id);

static _Atomic ra_tag_t held_tag;
static _Atomic int held_flags;
static _Atomic bool held_inside, held_entered, held_release;
static _Atomic unsigned held_violations;

static void held_wait(_Atomic bool *flag, unsigned ms)
{
    for (unsigned i = 0; (ms == 0 || i < ms) && !atomic_load(flag); i++)
        tu_sleep_ms(1);
}

bool __wrap_ra__returns_send(ra_tag_t tag, unsigned bin, void *const *items,
                             unsigned n, int flags)
{
    bool overflowed;

    if (tag != atomic_load(&held_tag) || flags == MALLOCX_TCACHE_NONE)
        return __real_ra__returns_send(tag, bin, items, n, flags);
    atomic_store(&held_flags, flags);
    atomic_store(&held_inside, true);
    atomic_store(&held_entered, true);
    held_wait(&held_release, HOLD_MS);
    overflowed = __real_ra__returns_send(tag, bin, items, n, flags);
    atomic_store(&held_inside, false);
    return overflowed;
}

static void held_check(unsigned id)
{
    if (atomic_load(&held_inside) &&
        MALLOCX_TCACHE(id) == atomic_load(&held_flags))
        atomic_fetch_add(&held_violations, 1);
}

void __wrap_ra__be_tcache_flush(unsigned id)
{
    held_check(id);
    __real_ra__be_tcache_flush(id);
}

void __wrap_ra__be_tcache_destroy(unsigned id)
{
    held_check(id);
    __real_ra__be_tcache_destroy(id);
}

struct held {
    ra_tag_t a, b;
    void **a_blocks, **b_blocks;
    unsigned na, nb;
    _Atomic unsigned phase;
};

static void *held_consumer(void *arg)
{
    struct held *h = arg;

    /* More than a's stack holds: the pair takes its tcache; the last
     * batch waits in its way. */
    for (unsigned i = 0; i < h->na; i++)
        ra_free(h->a_blocks[i]);
    atomic_store(&h->phase, 1);
    while (atomic_load(&h->phase) < 2)
        sched_yield();
    /* b's batches push a's out of its way: a send of a's on this thread,
     * through the tcache, which the wrap holds. */
    for (unsigned i = 0; i < h->nb; i++)
        ra_free(h->b_blocks[i]);
    ra_thread_flush();
    return NULL;
}

/* Ends tag a (a destroy, with a block past what a destroy leaves live or
 * with none, or a reset) while the consumer's send of it is held. */
static void assert_end_waits_for_a_held_send(bool live, bool reset)
{
    static const size_t a_sizes[1] = {SIZE};
    struct held h = {0};
    void *kept = NULL;
    unsigned violations;
    pthread_t t;

    h.a = tu_tag_create("held");
    h.b = race_make_b(h.a, a_sizes, 1);
    h.na = RACE_A - 5; /* busy, and not a whole number of batches */
    h.nb = 600;
    h.a_blocks = race_a;
    h.b_blocks = more;
    allocate(h.a_blocks, h.a, h.na);
    if (live)
        kept = ra_malloc_tag(h.a, 256 << 10); /* past what a destroy leaves */
    for (unsigned i = 0; i < h.nb; i++) {
        h.b_blocks[i] = ra_malloc_tag(h.b, race_b_sizes[i % race_b_nsizes]);
        ck_assert_ptr_nonnull(h.b_blocks[i]);
    }
    atomic_store(&held_violations, 0);
    atomic_store(&held_entered, false);
    atomic_store(&held_release, false);
    ck_assert_int_eq(pthread_create(&t, NULL, held_consumer, &h), 0);
    while (atomic_load(&h.phase) < 1)
        sched_yield();
    atomic_store(&held_tag, h.a);
    atomic_store(&h.phase, 2);
    held_wait(&held_entered, 10000);
    ck_assert_msg(atomic_load(&held_entered), "no send of the tag was held");
    if (reset)
        ck_assert_int_eq(ra_tag_reset(h.a), 0);
    else
        ck_assert_int_eq(ra_tag_destroy(h.a), 0);
    ck_assert_int_eq(ra_purge_all(), 0);
    atomic_store(&held_release, true);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    atomic_store(&held_tag, RA_TAG_NONE);
    violations = atomic_load(&held_violations);
    ck_assert_msg(violations == 0,
                  "the pair's tcache was flushed or destroyed %u time(s) "
                  "while its send was in it", violations);
    (void)kept; /* freed with its tag */
    if (reset)
        ck_assert_int_eq(ra_tag_destroy(h.a), 0);
    ck_assert_int_eq(ra_tag_destroy(h.b), 0);
}

START_TEST(test_outbox_unit_a_destroy_waits_for_a_held_send)
{
    assert_end_waits_for_a_held_send(false, false);
}
END_TEST

START_TEST(test_outbox_unit_a_destroy_with_a_reset_waits_for_a_held_send)
{
    assert_end_waits_for_a_held_send(true, false);
}
END_TEST

START_TEST(test_outbox_unit_a_reset_waits_for_a_held_send)
{
    assert_end_waits_for_a_held_send(false, true);
}
END_TEST

static Suite *outbox_suite(void)
{
    Suite *s = suite_create("outbox (unit)");
    TCase *tc = tcase_create("threads");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_outbox_unit_a_free_sets_up_no_front_cache);
    tcase_add_test(tc, test_outbox_unit_freed_blocks_serve_the_producer);
    tcase_add_test(tc, test_outbox_unit_an_overflow_takes_no_lock_per_block);
    tcase_add_test(tc, test_outbox_unit_sends_race_a_destroy);
    tcase_add_test(tc,
                   test_outbox_unit_a_batch_from_before_a_reset_is_dropped);
    tcase_add_test(tc,
                   test_outbox_unit_a_batch_from_before_a_destroy_is_dropped);
    tcase_add_test(tc,
                   test_outbox_unit_a_destroy_sends_an_idle_consumers_batches);
    tcase_add_test(tc, test_outbox_unit_an_exit_makes_the_figures_exact);
    tcase_add_test(tc, test_outbox_unit_an_allocation_makes_the_slot_whole);
    tcase_add_test(tc, test_outbox_unit_consumers_at_once_lose_nothing);
    suite_add_tcase(s, tc);
    tc = tcase_create("held sends");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_outbox_unit_a_destroy_waits_for_a_held_send);
    tcase_add_test(tc,
                   test_outbox_unit_a_destroy_with_a_reset_waits_for_a_held_send);
    tcase_add_test(tc, test_outbox_unit_a_reset_waits_for_a_held_send);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    unsetenv("REGIONALLOC");
    unsetenv("REGIONALLOC_THREAD_TAGS");
    return tu_run_suite(outbox_suite());
}

/* Suite "return stacks (unit)": the lock-free stacks of src/returns.c on
 * their own: pushes of batches and takes of whole stacks, from several
 * threads at once, against the one promise they make: every block pushed
 * is taken (or drained) exactly once, and a stack holds no more than its
 * bound.
 *
 * A block lost here is a leak nobody can see (jemalloc counts it
 * allocated, no cache holds it); a block taken twice is handed out to two
 * owners. Pushes race with takes and with each other on one word (the
 * stack's head), records move from a stack to the spare stack to a
 * thread's own list and back, and a thread that exits frees the records it
 * kept: any of these done wrong shows as a block missing or doubled. The
 * blocks are real ones of the tag's arena (made without a cache), so a
 * drain may give them back to jemalloc; the stacks never read them. The
 * checks compare the sorted lists of what was pushed and what was taken.
 * scripts/test.sh runs this suite under ThreadSanitizer too. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "budget.h"
#include "internal.h"
#include "pairs.h"
#include "testutil.h"

/* returns.c's: the most blocks a batch holds. */
#define BATCH_MAX (RA__FC_SLOTS / 2)
#define SIZE 64
/* A bound no test reaches. */
#define NO_BOUND (1u << 30)

static ra_tag_t tag;
static unsigned bin, arena;

/* The tag whose stacks are tested, and the bin of SIZE. */
static void set_up(void)
{
    tag = tu_tag_create("stacks");
    ck_assert_uint_gt(ra__small_max, SIZE);
    bin = ra__size_bin[(SIZE + 7) >> 3];
    ck_assert_uint_eq(ra__bin_size[bin], SIZE);
    arena = ra__tag_arena[tag];
}

/* n free blocks of bin b, as a front cache holds them: jemalloc's, of
 * the tag's arena. A drain frees a block with its bin's size: a block on
 * a stack of another bin would corrupt jemalloc. */
static void **make_blocks_of(unsigned b, unsigned n)
{
    void **blocks = malloc(n * sizeof *blocks);

    ck_assert_ptr_nonnull(blocks);
    for (unsigned i = 0; i < n; i++) {
        blocks[i] = ra__je_mallocx(ra__bin_size[b], RA__ARENA_FLAGS(arena) |
                                                        MALLOCX_TCACHE_NONE);
        ck_assert_ptr_nonnull(blocks[i]);
    }
    return blocks;
}

static void **make_blocks(unsigned n)
{
    return make_blocks_of(bin, n);
}

static void give_back_of(unsigned b, void **blocks, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        ra__je_sdallocx(blocks[i], ra__bin_size[b], MALLOCX_TCACHE_NONE);
}

static void give_back(void **blocks, unsigned n)
{
    give_back_of(bin, blocks, n);
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a,
              y = (uintptr_t) * (void *const *)b;

    return x < y ? -1 : x > y;
}

/* taken[0, ntaken) holds exactly the blocks of pushed[0, npushed), each
 * once (both lists are sorted). */
static void check_each_once(void **pushed, unsigned npushed, void **taken,
                            unsigned ntaken)
{
    qsort(pushed, npushed, sizeof *pushed, by_address);
    qsort(taken, ntaken, sizeof *taken, by_address);
    for (unsigned i = 1; i < ntaken; i++)
        ck_assert_msg(taken[i] != taken[i - 1], "block %p taken twice",
                      taken[i]);
    ck_assert_uint_eq(ntaken, npushed);
    for (unsigned i = 0; i < npushed; i++)
        ck_assert_msg(taken[i] == pushed[i], "block %p pushed, not taken",
                      pushed[i]);
}

/* Takes everything the stack holds now. */
static unsigned take_all(void **out, unsigned room)
{
    unsigned got = 0, n;

    while ((n = ra__returns_take(tag, bin, out + got, room - got)) != 0)
        got += n;
    return got;
}

START_TEST(test_returns_stacks_unit_take_from_an_empty_stack)
{
    void *out[BATCH_MAX], *sentinel = &sentinel, **blocks, **other;

    set_up();
    for (unsigned i = 0; i < BATCH_MAX; i++)
        out[i] = sentinel;
    /* No stack made for the tag yet. */
    ck_assert_uint_eq(ra__returns_take(tag, bin, out, BATCH_MAX), 0);
    ra__returns_drain(tag);
    /* The tag's stacks made (a push to another bin), this one empty. */
    other = make_blocks_of(bin + 1, 8);
    ck_assert(ra__returns_push(tag, bin + 1, other, 8, NO_BOUND));
    ck_assert_uint_eq(ra__returns_take(tag, bin, out, BATCH_MAX), 0);
    for (unsigned i = 0; i < BATCH_MAX; i++)
        ck_assert_ptr_eq(out[i], sentinel);
    /* A take of no blocks takes none, and leaves them. */
    blocks = make_blocks(8);
    ck_assert(ra__returns_push(tag, bin, blocks, 8, NO_BOUND));
    ck_assert_uint_eq(ra__returns_take(tag, bin, out, 0), 0);
    ck_assert_uint_eq(ra__returns_take(tag, bin, out, BATCH_MAX), 8);
    /* Emptied by that take. */
    ck_assert_uint_eq(ra__returns_take(tag, bin, out, BATCH_MAX), 0);
    ck_assert_uint_eq(ra__returns_take(tag, bin + 1, out, BATCH_MAX), 8);
    ck_assert_uint_eq(ra__returns_take(tag, bin + 1, out, BATCH_MAX), 0);
    give_back(blocks, 8);
    give_back_of(bin + 1, other, 8);
    free(blocks);
    free(other);
}
END_TEST

/* A take hands out whole batches, newest first, while they fit; the rest
 * goes back, still counted, for the next take. */
START_TEST(test_returns_stacks_unit_a_take_gives_whole_batches_that_fit)
{
    void **blocks, *out[64];

    set_up();
    blocks = make_blocks(30);
    for (unsigned b = 0; b < 3; b++)
        ck_assert(ra__returns_push(tag, bin, blocks + 10 * b, 10, NO_BOUND));
    ck_assert_uint_eq(ra__returns_take(tag, bin, out, 15), 10);
    for (unsigned i = 0; i < 10; i++)
        ck_assert_ptr_eq(out[i], blocks[20 + i]);
    ck_assert_uint_eq(ra__returns_take(tag, bin, out, 5), 0);
    ck_assert_uint_eq(ra__returns_take(tag, bin, out + 10, 54), 20);
    for (unsigned i = 0; i < 10; i++)
        out[i] = blocks[20 + i];
    check_each_once(blocks, 30, out, 30);
    give_back(blocks, 30);
    free(blocks);
}
END_TEST

/* A push that would take the stack past its bound is refused whole (the
 * caller gives those blocks to jemalloc): the stack keeps what it had,
 * and takes make room again by what they took. Pushes of no block or of
 * more than a batch holds are refused as well. */
START_TEST(test_returns_stacks_unit_a_full_stack_refuses_the_push)
{
    void **blocks, *out[128];

    set_up();
    blocks = make_blocks(2 * BATCH_MAX + 1);
    ck_assert(!ra__returns_push(tag, bin, blocks, 0, NO_BOUND));
    ck_assert(!ra__returns_push(tag, bin, blocks, BATCH_MAX + 1, NO_BOUND));
    ck_assert(ra__returns_push(tag, bin, blocks, BATCH_MAX, 2 * BATCH_MAX));
    ck_assert(ra__returns_push(tag, bin, blocks + BATCH_MAX, BATCH_MAX,
                               2 * BATCH_MAX));
    ck_assert(!ra__returns_push(tag, bin, blocks + 2 * BATCH_MAX, 1,
                                2 * BATCH_MAX));
    ck_assert(!ra__returns_push(tag, bin, blocks, BATCH_MAX, 2 * BATCH_MAX));
    ck_assert_uint_eq(take_all(out, 128), 2 * BATCH_MAX);
    check_each_once(blocks, 2 * BATCH_MAX, out, 2 * BATCH_MAX);
    /* Emptied: room for the bound again, no more. */
    ck_assert(ra__returns_push(tag, bin, blocks, BATCH_MAX, 2 * BATCH_MAX));
    ck_assert(ra__returns_push(tag, bin, blocks + BATCH_MAX, BATCH_MAX,
                               2 * BATCH_MAX));
    ck_assert(!ra__returns_push(tag, bin, blocks + 2 * BATCH_MAX, 1,
                                2 * BATCH_MAX));
    /* A take of one batch of the two: room for that batch alone. */
    ck_assert_uint_eq(ra__returns_take(tag, bin, out, BATCH_MAX), BATCH_MAX);
    ck_assert(ra__returns_push(tag, bin, out, BATCH_MAX, 2 * BATCH_MAX));
    ck_assert(!ra__returns_push(tag, bin, blocks + 2 * BATCH_MAX, 1,
                                2 * BATCH_MAX));
    ck_assert_uint_eq(take_all(out, 128), 2 * BATCH_MAX);
    check_each_once(blocks, 2 * BATCH_MAX, out, 2 * BATCH_MAX);
    give_back(blocks, 2 * BATCH_MAX + 1);
    free(blocks);
}
END_TEST

#define PRODUCED 2000

static void *produce(void *arg)
{
    void **blocks = arg;

    tu_tag_push(tag);
    for (unsigned i = 0; i < PRODUCED; i++)
        blocks[i] = ra_malloc(SIZE);
    tu_tag_pop(tag);
    return NULL;
}

/* Through the free path: a consumer's outbox sends its batches onto the
 * stack until it is full (four of the largest bins' worth of SIZE,
 * returns.c), and then to jemalloc; every block is on the stack or
 * jemalloc's, none lost. */
START_TEST(test_returns_stacks_unit_a_full_stack_sends_frees_to_jemalloc)
{
    static void *blocks[PRODUCED], *out[PRODUCED];
    pthread_t t;
    unsigned got;

    set_up();
    ck_assert_int_eq(pthread_create(&t, NULL, produce, blocks), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    for (unsigned i = 0; i < PRODUCED; i++) {
        ck_assert_ptr_nonnull(blocks[i]);
        ra_free(blocks[i]);
    }
    got = take_all(out, PRODUCED);
    ck_assert_uint_eq(got, RA__RETURNS_BINS * ra__fc_cap_max(SIZE));
    for (unsigned i = 0; i < got; i++)
        ck_assert_uint_eq(ra_tag_of(out[i]), tag);
    give_back(out, got);
    ra_thread_flush();
    ck_assert_uint_eq(tu_tag_stats(tag).allocated, 0);
}
END_TEST

/* A drain gives every batch of every bin back to jemalloc, and leaves the
 * stack with room for its bound again. */
START_TEST(test_returns_stacks_unit_a_drain_takes_every_batch)
{
    enum { N = 4 * BATCH_MAX };
    void **blocks, **other, *out[BATCH_MAX];

    set_up();
    ra__be_refresh();
    ck_assert_uint_eq(ra__be_arena_allocated(arena), 0);
    blocks = make_blocks(N + BATCH_MAX);
    other = make_blocks_of(bin + 1, BATCH_MAX);
    for (unsigned b = 0; b < 4; b++)
        ck_assert(ra__returns_push(tag, bin, blocks + b * BATCH_MAX,
                                   BATCH_MAX, N));
    ck_assert(!ra__returns_push(tag, bin, blocks + N, 1, N));
    ck_assert(ra__returns_push(tag, bin + 1, other, BATCH_MAX, N));
    ra__returns_drain(tag);
    ck_assert_uint_eq(ra__returns_take(tag, bin, out, BATCH_MAX), 0);
    ck_assert_uint_eq(ra__returns_take(tag, bin + 1, out, BATCH_MAX), 0);
    /* Only the blocks never pushed are left allocated. */
    ra__be_refresh();
    ck_assert_uint_eq(ra__be_arena_allocated(arena), BATCH_MAX * SIZE);
    /* The drained blocks no longer count against the bound. */
    ck_assert(ra__returns_push(tag, bin, blocks + N, BATCH_MAX, BATCH_MAX));
    ck_assert_uint_eq(take_all(out, BATCH_MAX), BATCH_MAX);
    check_each_once(blocks + N, BATCH_MAX, out, BATCH_MAX);
    give_back(blocks + N, BATCH_MAX);
    free(blocks);
    free(other);
}
END_TEST

/* A pusher's blocks and what became of them: accepted[0, naccepted) went
 * onto the stack, the others it kept (refused). Worker threads never call
 * Check: they count errors. */
struct pusher {
    void **blocks;
    unsigned nblocks, bound;
    void **accepted;
    unsigned naccepted, nrefused;
    bool with_state; /* use a tag first, so that its exit runs */
};

static _Atomic unsigned errors;
static ra_tag_t aux;

static void *push_all(void *arg)
{
    struct pusher *p = arg;
    unsigned i = 0, n = 1;

    if (p->with_state) {
        void *q = ra_malloc_tag(aux, 16);
        if (q == NULL)
            atomic_fetch_add(&errors, 1);
        ra_free(q);
    }
    /* Batches of 1 to BATCH_MAX blocks: every size of record. */
    for (; i < p->nblocks; i += n, n = n % BATCH_MAX + 1) {
        if (n > p->nblocks - i)
            n = p->nblocks - i;
        if (ra__returns_push(tag, bin, p->blocks + i, n, p->bound)) {
            memcpy(p->accepted + p->naccepted, p->blocks + i,
                   n * sizeof p->blocks[0]);
            p->naccepted += n;
        } else {
            p->nrefused += n;
        }
    }
    return NULL;
}

struct taker {
    _Atomic bool *done;
    void **taken;
    unsigned ntaken, room;
};

/* Takes as a refill does (a front cache bin's worth at most) until the
 * pushers are done and the stack is empty. */
static void *take_until_done(void *arg)
{
    struct taker *t = arg;

    for (;;) {
        bool done = atomic_load(t->done);
        unsigned room = t->room - t->ntaken;
        unsigned got = ra__returns_take(tag, bin, t->taken + t->ntaken,
                                        room < RA__FC_SLOTS ? room
                                                            : RA__FC_SLOTS);
        t->ntaken += got;
        if (got == 0 && done)
            return NULL;
        if (got == 0)
            sched_yield();
    }
}

#define PUSHERS 4
#define PER_PUSHER 3000

/* The pushers' blocks and the takers' lists, checked: each block accepted
 * is taken once, each refused one is not taken; a refusal happens only
 * with a bound. */
static void run_pushers(unsigned bound, unsigned ntakers, bool with_state)
{
    static struct pusher pushers[PUSHERS];
    static struct taker takers[2];
    static void *all_accepted[PUSHERS * PER_PUSHER],
        *all_taken[PUSHERS * PER_PUSHER];
    pthread_t pt[PUSHERS], tt[2];
    _Atomic bool done = false;
    unsigned naccepted = 0, ntaken = 0, nrefused = 0;

    aux = tu_tag_create("aux");
    for (unsigned i = 0; i < PUSHERS; i++) {
        pushers[i] = (struct pusher){make_blocks(PER_PUSHER), PER_PUSHER,
                                     bound, NULL, 0, 0, with_state};
        pushers[i].accepted = malloc(PER_PUSHER * sizeof(void *));
        ck_assert_ptr_nonnull(pushers[i].accepted);
    }
    for (unsigned i = 0; i < ntakers; i++) {
        takers[i] = (struct taker){&done, NULL, 0, PUSHERS * PER_PUSHER};
        takers[i].taken = malloc(PUSHERS * PER_PUSHER * sizeof(void *));
        ck_assert_ptr_nonnull(takers[i].taken);
        ck_assert_int_eq(
            pthread_create(&tt[i], NULL, take_until_done, &takers[i]), 0);
    }
    for (unsigned i = 0; i < PUSHERS; i++)
        ck_assert_int_eq(pthread_create(&pt[i], NULL, push_all, &pushers[i]),
                         0);
    for (unsigned i = 0; i < PUSHERS; i++)
        ck_assert_int_eq(pthread_join(pt[i], NULL), 0);
    atomic_store(&done, true);
    for (unsigned i = 0; i < ntakers; i++) {
        ck_assert_int_eq(pthread_join(tt[i], NULL), 0);
        memcpy(all_taken + ntaken, takers[i].taken,
               takers[i].ntaken * sizeof(void *));
        ntaken += takers[i].ntaken;
        free(takers[i].taken);
    }
    /* What is left after the takers stopped, and with no taker at all. */
    ntaken += take_all(all_taken + ntaken, PUSHERS * PER_PUSHER - ntaken);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    for (unsigned i = 0; i < PUSHERS; i++) {
        ck_assert_uint_eq(pushers[i].naccepted + pushers[i].nrefused,
                          PER_PUSHER);
        memcpy(all_accepted + naccepted, pushers[i].accepted,
               pushers[i].naccepted * sizeof(void *));
        naccepted += pushers[i].naccepted;
        nrefused += pushers[i].nrefused;
    }
    if (bound >= NO_BOUND)
        ck_assert_uint_eq(nrefused, 0);
    check_each_once(all_accepted, naccepted, all_taken, ntaken);
    for (unsigned i = 0; i < PUSHERS; i++) {
        give_back(pushers[i].blocks, PER_PUSHER);
        free(pushers[i].blocks);
        free(pushers[i].accepted);
    }
}

START_TEST(test_returns_stacks_unit_concurrent_pushes_lose_nothing)
{
    set_up();
    run_pushers(NO_BOUND, 0, false);
}
END_TEST

START_TEST(test_returns_stacks_unit_takes_while_pushing_take_each_once)
{
    set_up();
    run_pushers(NO_BOUND, 2, false);
}
END_TEST

/* With a bound the pushes race for the room: the refused ones are not on
 * the stack, the accepted ones all are. */
START_TEST(test_returns_stacks_unit_bounded_pushes_while_taking)
{
    set_up();
    run_pushers(4 * RA__FC_SLOTS, 2, false);
}
END_TEST

/* Pushers that use tags end with the thread-exit work (thread.c, then
 * returns.c frees the records a thread kept for its next pushes): what
 * they pushed stays on the stack for a take after they are gone, and for
 * the takes that ran while they exited. */
START_TEST(test_returns_stacks_unit_blocks_outlive_the_threads_that_pushed)
{
    set_up();
    run_pushers(NO_BOUND, 0, true);
    run_pushers(NO_BOUND, 2, true);
}
END_TEST

/* Records a take freed go to the spare stack; a thread that takes them
 * for its pushes and exits frees those it did not use, never one that is
 * on a stack. The library's own memory says so: after the exit it holds
 * the records on the stack and no more than before. */
static void *push_one_batch_and_exit(void *arg)
{
    void **blocks = arg;
    void *q = ra_malloc_tag(aux, 16);

    if (q == NULL ||
        !ra__returns_push(tag, bin, blocks, BATCH_MAX, NO_BOUND))
        atomic_fetch_add(&errors, 1);
    ra_free(q);
    return NULL;
}

/* The same from a thread that has no state of the library's otherwise: it
 * frees nothing, allocates nothing, only pushes (as a destroy parks a
 * tag's caches onto the stacks). */
static void *only_push_and_exit(void *arg)
{
    if (!ra__returns_push(tag, bin, arg, BATCH_MAX, NO_BOUND))
        atomic_fetch_add(&errors, 1);
    return NULL;
}

static void exit_frees_only_spares(void *(*pusher)(void *))
{
    enum { WARM = 8 };
    void **blocks, *out[(WARM + 1) * BATCH_MAX];
    size_t before, after;
    pthread_t t;

    set_up();
    aux = tu_tag_create("aux");
    blocks = make_blocks((WARM + 1) * BATCH_MAX);
    /* WARM records on the spare stack. */
    for (unsigned b = 0; b < WARM; b++)
        ck_assert(ra__returns_push(tag, bin, blocks + b * BATCH_MAX,
                                   BATCH_MAX, NO_BOUND));
    ck_assert_uint_eq(take_all(out, WARM * BATCH_MAX), WARM * BATCH_MAX);
    /* This thread's own records would hide the others: it has none
     * left (its spare list is what it took from the spare stack). */
    ra__returns_thread_exit();
    before = ra__meta_held();
    ck_assert_int_eq(pthread_create(&t, NULL, pusher,
                                    blocks + WARM * BATCH_MAX),
                     0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_uint_eq(atomic_load(&errors), 0);
    after = ra__meta_held();
    ck_assert_uint_lt(after, before);
    ck_assert_uint_eq(take_all(out, BATCH_MAX), BATCH_MAX);
    check_each_once(blocks + WARM * BATCH_MAX, BATCH_MAX, out, BATCH_MAX);
    /* The record it pushed is the spare stack's now, and serves again. */
    ck_assert(ra__returns_push(tag, bin, blocks, BATCH_MAX, NO_BOUND));
    ck_assert_uint_eq(ra__meta_held(), after);
    ck_assert_uint_eq(take_all(out, BATCH_MAX), BATCH_MAX);
    give_back(blocks, (WARM + 1) * BATCH_MAX);
    free(blocks);
}

START_TEST(test_returns_stacks_unit_an_exit_frees_only_spare_records)
{
    exit_frees_only_spares(push_one_batch_and_exit);
}
END_TEST

START_TEST(test_returns_stacks_unit_a_stateless_pushers_exit_frees_its_spares)
{
    exit_frees_only_spares(only_push_and_exit);
}
END_TEST

/* A thread that pushes and takes in turns (a refill that takes what the
 * consumers left, then its own overflow) reuses the records its takes
 * freed: the library's memory stays what the first rounds made it. */
START_TEST(test_returns_stacks_unit_records_are_reused)
{
    void **blocks, *out[2 * BATCH_MAX];
    size_t warm = 0;

    set_up();
    blocks = make_blocks(2 * BATCH_MAX);
    for (unsigned round = 0; round < 1000; round++) {
        ck_assert(ra__returns_push(tag, bin, blocks, BATCH_MAX, NO_BOUND));
        ck_assert(ra__returns_push(tag, bin, blocks + BATCH_MAX, BATCH_MAX,
                                   NO_BOUND));
        ck_assert_uint_eq(take_all(out, 2 * BATCH_MAX), 2 * BATCH_MAX);
        if (round == 10)
            warm = ra__meta_held();
    }
    ck_assert_uint_eq(ra__meta_held(), warm);
    give_back(blocks, 2 * BATCH_MAX);
    free(blocks);
}
END_TEST

static Suite *stacks_suite(void)
{
    Suite *s = suite_create("return stacks (unit)");
    TCase *one = tcase_create("one thread");
    TCase *threads = tcase_create("threads");

    tcase_add_test(one, test_returns_stacks_unit_take_from_an_empty_stack);
    tcase_add_test(one,
                   test_returns_stacks_unit_a_take_gives_whole_batches_that_fit);
    tcase_add_test(one, test_returns_stacks_unit_a_full_stack_refuses_the_push);
    tcase_add_test(
        one, test_returns_stacks_unit_a_full_stack_sends_frees_to_jemalloc);
    tcase_add_test(one, test_returns_stacks_unit_a_drain_takes_every_batch);
    tcase_add_test(one, test_returns_stacks_unit_records_are_reused);
    suite_add_tcase(s, one);
    tcase_set_timeout(threads, 60);
    tcase_add_test(threads,
                   test_returns_stacks_unit_concurrent_pushes_lose_nothing);
    tcase_add_test(threads,
                   test_returns_stacks_unit_takes_while_pushing_take_each_once);
    tcase_add_test(threads,
                   test_returns_stacks_unit_bounded_pushes_while_taking);
    tcase_add_test(
        threads, test_returns_stacks_unit_blocks_outlive_the_threads_that_pushed);
    tcase_add_test(threads,
                   test_returns_stacks_unit_an_exit_frees_only_spare_records);
    tcase_add_test(
        threads, test_returns_stacks_unit_a_stateless_pushers_exit_frees_its_spares);
    suite_add_tcase(s, threads);
    return s;
}

int main(void)
{
    /* Nothing in the environment changes a stack; the front caches'
     * capacities (the stacks' bounds through the free path) are the
     * defaults. */
    unsetenv("REGIONALLOC");
    unsetenv("REGIONALLOC_THREAD_TAGS");
    return tu_run_suite(stacks_suite());
}

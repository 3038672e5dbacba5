/* Floor: pairs. A tag's return stacks: where a thread whose front cache of
 * a small class is full leaves half of it, and a thread that only frees
 * the tag's blocks sends its outbox's batches (outbox.c), and where a
 * thread whose front cache of that class is empty looks first, before
 * jemalloc. Blocks made on one thread and freed on another (a producer
 * and its consumers) then go home in batches, without a lock: one
 * compare-and-swap a batch to leave, one exchange to take the whole stack
 * back, where jemalloc sent every batch through an arena's bin lock twice
 * (the consumer's flush and the producer's refill). mimalloc's pages do
 * the same with their thread-free lists (doc/design.md, hot tags).
 *
 * A batch is an array of block pointers in a small record of the library's
 * own, not a list linked through the blocks: taking one then reads four
 * cache lines, never the blocks themselves, whose lines the freeing thread
 * holds (a list walked block by block cost 44% of a producer/consumer
 * pair's time in serial misses). Stacks, of full batches per (tag, bin)
 * and of spare records per tag, are only ever emptied whole
 * (atomic_exchange), never popped one entry at a time, so a push's
 * compare-and-swap cannot suffer ABA. Each (tag, bin) stack is bounded
 * (RA__RETURNS_BINS front cache bins' capacity of blocks, as the caller
 * says): what does not fit goes to jemalloc as before. Its blocks are
 * free to the library and allocated to jemalloc, like the front caches':
 * drained by ra_thread_flush and a thread's exit (every figure exact after
 * them), purges, and a reset or destroy with live blocks, which forgets
 * them before the arena discards them, with drains kept out until the
 * arena is reset (the gate). */
#include <sched.h>
#include <stdalign.h>
#include <string.h>

#include "backend.h"
#include "internal.h"

#define BATCH_MAX (RA__FC_SLOTS / 2)

struct batch {
    struct batch *next;
    unsigned n;
    void *items[BATCH_MAX];
};

struct stack {
    alignas(64) _Atomic(struct batch *) head;
    /* At least the blocks on the stack: added before a push links them,
     * taken off after a take unlinked them. */
    _Atomic unsigned count;
};

/* A drain takes a stack whole and then gives its blocks to jemalloc one by
 * one, with no lock: a reset that found the stack empty meanwhile and reset
 * the arena would have the drain free blocks of slabs that are gone (a
 * SIGSEGV in jemalloc). So a drain passes a gate that a reset closes: the
 * gate counts the drains in flight, and GATE_CLOSED turns new ones away (the
 * reset discards what the stacks hold anyway) while the reset waits for the
 * ones in flight to leave. Both sides take it with one read-modify-write of
 * the same word, so either the drain is counted before the reset looks, or
 * it sees the gate closed. */
#define GATE_CLOSED (1u << 31)
/* The gate's states, checked at each verb in the debug build: open or
 * closed (GATE_CLOSED, set by close and cleared by open, one reset at a
 * time), and the count below it of drains and sends inside (enter adds
 * one, leave takes it off; a closed gate's enter takes it back at once). */
#define GATE_INSIDE(state) ((state) & ~GATE_CLOSED)

/* Each tag's gate, and its resets so far: a batch that waited in a
 * thread's outbox (outbox.c) since before the last reset holds blocks the
 * reset discarded. Static, not with the stacks: a send must pass the gate
 * even when the stacks cannot be made. A line each: a tag's drains and
 * sends do not meet another tag's. */
struct gate {
    alignas(64) _Atomic unsigned state;
    _Atomic uint32_t resets;
};

static struct gate gates[RA__MAX_TAGS_LIMIT + 1];

/* A tag's stacks: one per small bin, then the spare records. Made at its
 * first push and kept with the slot (the library's own memory). */
struct returns {
    struct stack spare;
    struct stack bins[];
};

static _Atomic(struct returns *) returns_of[RA__MAX_TAGS_LIMIT + 1];
/* Records this thread took from a spare stack and has not used yet. */
static RA__TLS struct batch *tls_spares;

static struct returns *returns_get(ra_tag_t tag)
{
    return atomic_load_explicit(&returns_of[tag], memory_order_acquire);
}

/* The tag's stacks, made if need be; NULL when no memory. ra__meta_alloc
 * gives 16-aligned blocks: the stacks want a cache line each. */
static struct returns *returns_make(ra_tag_t tag)
{
    size_t size = sizeof(struct returns) + ra__nbins * sizeof(struct stack);
    struct returns *r = returns_get(tag), *none = NULL;
    void *raw;

    if (RA__LIKELY(r != NULL))
        return r;
    raw = ra__meta_alloc(size + alignof(struct stack));
    if (raw == NULL)
        return NULL;
    r = (struct returns *)(((uintptr_t)raw + alignof(struct stack) - 1) &
                           ~(uintptr_t)(alignof(struct stack) - 1));
    ra__assert((uintptr_t)r % alignof(struct stack) == 0 &&
               (char *)r + size <= (char *)raw + size + alignof(struct stack));
    memset(r, 0, size);
    if (!atomic_compare_exchange_strong_explicit(&returns_of[tag], &none, r,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire)) {
        ra__meta_free(raw);
        return none;
    }
    return r;
}

/* Pushes the chain first..last (linked by next) on st. */
static void push_chain(struct stack *st, struct batch *first,
                       struct batch *last)
{
    struct batch *head = atomic_load_explicit(&st->head, memory_order_relaxed);

    do
        last->next = head;
    while (!atomic_compare_exchange_weak_explicit(
        &st->head, &head, first, memory_order_release, memory_order_relaxed));
}

static struct batch *last_of(struct batch *b)
{
    while (b->next != NULL)
        b = b->next;
    return b;
}

static struct batch *take_all(struct stack *st)
{
    /* A relaxed look first: an empty stack costs no write to its line. */
    if (atomic_load_explicit(&st->head, memory_order_relaxed) == NULL)
        return NULL;
    return atomic_exchange_explicit(&st->head, NULL, memory_order_acquire);
}

/* A record for a batch: this thread's spare, the tag's, or a new one. The
 * spares a thread takes are freed at its exit (ra__returns_thread_exit),
 * whether or not it has other state: the exit key is armed for them. A
 * thread that cannot be armed takes one record and leaves the rest. */
static struct batch *spare_record(struct returns *r)
{
    struct batch *b = tls_spares;

    if (b == NULL && (b = take_all(&r->spare)) != NULL) {
        if (b->next != NULL && ra__thread_exit_arm())
            push_chain(&r->spare, b->next, last_of(b->next));
        else
            tls_spares = b->next;
        return b;
    }
    if (b == NULL)
        return ra__meta_alloc(sizeof *b);
    tls_spares = b->next;
    return b;
}

bool ra__returns_push(ra_tag_t tag, unsigned bin, void *const *items,
                      unsigned n, unsigned bound)
{
    struct returns *r;
    struct stack *st;
    struct batch *b;

    if (n == 0 || n > BATCH_MAX || (r = returns_make(tag)) == NULL)
        return false;
    /* Invariant 10: a stack holds only free blocks of its tag and class. */
    ra__assert(bin < ra__nbins);
    for (unsigned i = 0; i < n; i++)
        ra__assert(ra_tag_of(items[i]) == tag);
    st = &r->bins[bin];
    if (atomic_fetch_add_explicit(&st->count, n, memory_order_relaxed) + n >
            bound ||
        (b = spare_record(r)) == NULL) {
        atomic_fetch_sub_explicit(&st->count, n, memory_order_relaxed);
        return false;
    }
    b->n = n;
    memcpy(b->items, items, n * sizeof items[0]);
    push_chain(st, b, b);
    return true;
}

unsigned ra__returns_take(ra_tag_t tag, unsigned bin, void **items,
                          unsigned max)
{
    struct returns *r = returns_get(tag);
    struct batch *b, *last = NULL, *rest;
    unsigned got = 0, before;

    ra__assert(bin < ra__nbins);
    if (r == NULL || (b = take_all(&r->bins[bin])) == NULL)
        return 0;
    rest = b;
    while (rest != NULL && got + rest->n <= max) {
        memcpy(items + got, rest->items, rest->n * sizeof items[0]);
        got += rest->n;
        last = rest;
        rest = rest->next;
    }
    if (rest != NULL) {
        /* More than max (pushes raced past the bound): the rest goes back
         * whole, its blocks still counted. */
        struct batch *tail = rest;
        while (tail->next != NULL)
            tail = tail->next;
        push_chain(&r->bins[bin], rest, tail);
    }
    /* The count is at least the blocks on the stack. */
    before = atomic_fetch_sub_explicit(&r->bins[bin].count, got,
                                       memory_order_relaxed);
    ra__assert(before >= got && got <= max);
    (void)before; /* read by the debug build's checks only */
    for (unsigned i = 0; i < got; i++)
        ra__assert(ra_tag_of(items[i]) == tag);
    if (last != NULL)
        push_chain(&r->spare, b, last);
    return got;
}

/* Takes every stack of tag's (r) whole; gives each block back to jemalloc
 * (give: a drain, inside the gate) or drops it (a close: the caller resets
 * the arenas). */
static void empty_stacks(ra_tag_t tag, struct returns *r, bool give)
{
    /* Given back only from inside the gate; dropped only behind it closed. */
    ra__assert(give ? GATE_INSIDE(atomic_load(&gates[tag].state)) != 0
                    : (atomic_load(&gates[tag].state) & GATE_CLOSED) != 0);
    for (unsigned bin = 0; bin < ra__nbins; bin++) {
        struct batch *b = take_all(&r->bins[bin]), *last = b;
        unsigned n = 0, before;
        if (b == NULL)
            continue;
        for (struct batch *x = b; x != NULL; last = x, x = x->next) {
            if (give)
                for (unsigned i = 0; i < x->n; i++)
                    ra__je_sdallocx(x->items[i], ra__bin_size[bin],
                                    MALLOCX_TCACHE_NONE);
            n += x->n;
        }
        if (give)
            ra__untagged_tag_freed(n * ra__bin_size[bin]);
        before = atomic_fetch_sub_explicit(&r->bins[bin].count, n,
                                           memory_order_relaxed);
        ra__assert(before >= n);
        (void)before;
        push_chain(&r->spare, b, last);
    }
}

/* False, and nothing to undo, when a reset of the tag runs: it discards
 * whatever the caller would give back. */
static bool gate_enter(ra_tag_t tag)
{
    unsigned state = atomic_fetch_add_explicit(&gates[tag].state, 1,
                                               memory_order_seq_cst);

    /* enter: the count never reaches the closed bit. */
    ra__assert(GATE_INSIDE(state) < GATE_CLOSED - 1);
    if (state & GATE_CLOSED) {
        state = atomic_fetch_sub_explicit(&gates[tag].state, 1,
                                          memory_order_relaxed);
        ra__assert(GATE_INSIDE(state) != 0);
        (void)state;
        return false;
    }
    return true;
}

static void gate_leave(ra_tag_t tag)
{
    /* Release: the frees come before a waiting reset goes on. */
    unsigned state = atomic_fetch_sub_explicit(&gates[tag].state, 1,
                                               memory_order_release);

    /* leave: only what entered leaves. */
    ra__assert(GATE_INSIDE(state) != 0);
    (void)state;
}

void ra__returns_drain(ra_tag_t tag)
{
    struct returns *r = returns_get(tag);

    if (r == NULL || !gate_enter(tag))
        return;
    empty_stacks(tag, r, true);
    gate_leave(tag);
}

uint32_t ra__returns_resets(ra_tag_t tag)
{
    return atomic_load_explicit(&gates[tag].resets, memory_order_relaxed);
}

bool ra__returns_enter(ra_tag_t tag, uint32_t stamp)
{
    if (!gate_enter(tag))
        return false;
    /* Read inside the gate: a reset counts itself before it closes the
     * gate, so a batch either sees the reset or reaches the arena before
     * it. */
    if (atomic_load_explicit(&gates[tag].resets, memory_order_seq_cst) !=
        stamp) {
        gate_leave(tag);
        return false;
    }
    /* Invariant 14: a batch goes on only with the count its stamp names. */
    ra__assert(GATE_INSIDE(atomic_load(&gates[tag].state)) != 0);
    return true;
}

void ra__returns_leave(ra_tag_t tag)
{
    gate_leave(tag);
}

bool ra__returns_send(ra_tag_t tag, unsigned bin, void *const *items,
                      unsigned n, int flags)
{
    /* Bounded by what the largest bins hold: the consumers that send have
     * no bin to size it from, and with the first bins' size (64 blocks
     * under 1 KiB) four producer/consumer pairs overflowed it whenever a
     * producer waited for a core, each block then a bin lock of its own
     * (bench/hot_tag 8 pairs: 114-452 bin-lock operations per 1,000
     * blocks, 0.6-48 bounded so). */
    /* Sent from inside the gate (ra__returns_enter). */
    ra__assert(n <= BATCH_MAX && bin < ra__nbins &&
               GATE_INSIDE(atomic_load(&gates[tag].state)) != 0);
    if (ra__returns_push(tag, bin, items, n,
                         RA__RETURNS_BINS * ra__fc_cap_max(ra__bin_size[bin])))
        return false;
    for (unsigned i = 0; i < n; i++)
        ra__je_sdallocx(items[i], ra__bin_size[bin], flags);
    ra__untagged_tag_freed(n * ra__bin_size[bin]);
    return true;
}

void ra__returns_quiesce(ra_tag_t tag)
{
    while (GATE_INSIDE(atomic_load_explicit(&gates[tag].state,
                                            memory_order_acquire)) != 0)
        sched_yield();
}

void ra__returns_fence(ra_tag_t tag)
{
    /* Counted as a reset: a sender that enters after it finds its stamp
     * old; one already in is waited for. */
    uint32_t before = atomic_fetch_add_explicit(&gates[tag].resets, 1,
                                                memory_order_seq_cst);

    ra__returns_quiesce(tag);
    /* Invariant 15: the count moved on, so no stamp from before it is
     * current any more. */
    ra__assert(atomic_load(&gates[tag].resets) != before);
    (void)before;
}

void ra__returns_drain_all(void)
{
    unsigned count = ra__tag_published();

    for (ra_tag_t t = 1; t <= count; t++)
        ra__returns_drain(t);
}

void ra__returns_close(ra_tag_t tag)
{
    struct returns *r = returns_get(tag);
    struct gate *g = &gates[tag];
    unsigned state;

    atomic_fetch_add_explicit(&g->resets, 1, memory_order_seq_cst);
    state = atomic_fetch_or_explicit(&g->state, GATE_CLOSED,
                                     memory_order_seq_cst);
    /* close: resets take turns (invariant 13), so it was open. */
    ra__assert((state & GATE_CLOSED) == 0);
    (void)state;
    /* A drain or send in flight frees at most four bins' worth of blocks a
     * class: microseconds, and never waits for a lock of ours (the threads'
     * lock a thread's exit may hold is not the caller's). */
    while (GATE_INSIDE(atomic_load_explicit(&g->state,
                                            memory_order_acquire)) != 0)
        sched_yield();
    if (r != NULL)
        empty_stacks(tag, r, false);
}

void ra__returns_open(ra_tag_t tag)
{
    unsigned state = atomic_fetch_and_explicit(&gates[tag].state,
                                               ~GATE_CLOSED,
                                               memory_order_release);

    /* open: only the close before it opens the gate. */
    ra__assert((state & GATE_CLOSED) != 0);
    (void)state;
}

void ra__returns_postfork_child(void)
{
    /* Drains and sends that other threads had in flight never end in the
     * child: the blocks they held are lost to it, their count must not be.
     * No reset runs at a fork (a fork is an exclusive end, lifetime.c),
     * so no gate is closed. */
    for (ra_tag_t t = 1; t <= RA__MAX_TAGS_LIMIT; t++) {
        ra__assert((atomic_load(&gates[t].state) & GATE_CLOSED) == 0);
        atomic_store_explicit(&gates[t].state, 0, memory_order_relaxed);
    }
}

void ra__returns_thread_exit(void)
{
    while (tls_spares != NULL) {
        struct batch *b = tls_spares;
        tls_spares = b->next;
        ra__meta_free(b);
    }
}

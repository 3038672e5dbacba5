/* Floor: pairs. A pair's front cache at work: a bin's refill from the
 * return stacks or the arena, a full bin's spill, and when a busy
 * pair takes a jemalloc tcache of its own (at a miss, or when its sends
 * overflow). */
#include <string.h>

#include "backend.h"

#include "internal.h"
#include "pairs.h"

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
 * free their blocks keep the pair from one to the next (ra__pairs_end)
 * and its age with it (made_before): a thread serving them takes one
 * tcache and keeps it, and its refills are jemalloc's batches rather than
 * a bin lock per block (examples/requests: 52 against 95k requests/s on
 * one thread). */
#define RA__TCACHE_AFTER_ALLOCS 8192
#define FIRST_FILL 2

/* The bin's capacity in the library's accounts: the return stacks'
 * bound, a refill's most. */
static unsigned bin_cap(unsigned bin)
{
    return ra__fc_cap(ra__bin_size[bin]);
}

bool ra__fc_spill(struct ra__tag_slot *s, unsigned bin)
{
    struct ra__fc_bin *b = &s->bins[bin];
    /* Half a bin, but never more than half of the bins the return stacks
     * are bounded by: a bin grown to 256 blocks pushing 128 at a time
     * filled a stack of four 64-block bins at once and sent the rest
     * through jemalloc's bins (bench/hot_tag's ring: 3-5 bin-lock
     * operations per 1,000 blocks became 8-27). */
    unsigned half = b->cap < bin_cap(bin) ? b->cap / 2 : bin_cap(bin) / 2;

    if (RA__UNLIKELY(s->alloc_flags == 0))
        ra__pair_unpark(s);
    ra__assert(ra__pair_state(s) == RA__PAIR_ACTIVE);
    if (b->cap == 0)
        return ra__fc_bin_open(b, bin) && b->count < b->cap;
    /* The fast path comes here with the bin full only. */
    ra__assert(b->count == b->cap && half <= b->count);
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
    ra__fc_give_back(s, bin, half);
    return true;
}

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

/* How many blocks the bin's refill from the arena takes: a bin's refills
 * grow from a few blocks to half the bin, so that a pair that makes a few
 * blocks of a class and goes idle holds a few, not half a bin of blocks
 * nobody asked for (most of an idle pair's memory). A refill at full size
 * is a miss of a busy pair. */
static unsigned refill_size(struct ra__tag_slot *s, struct ra__fc_bin *b,
                            unsigned bin)
{
    unsigned want = b->fill;

    if (want >= bin_cap(bin) / 2) {
        want = bin_cap(bin) / 2;
        ra__slot_miss(s);
    }
    b->fill = want < FIRST_FILL ? FIRST_FILL : want * 2;
    return want;
}

/* Fills the empty bin with up to want blocks of the arena. The cache hands
 * out from its top, so the blocks go in from the top down: they then
 * leave in jemalloc's order (ascending addresses within a slab), the
 * order in which a program's walks over what it allocated in a row find
 * them. Handed out in reverse, examples/indexer's walk over its lists of
 * tokens ran 1.7x slower (its index phase: 279 against 166 ms). */
static void fill_from_arena(struct ra__tag_slot *s, ra_tag_t tag,
                            unsigned bin, unsigned want)
{
    struct ra__fc_bin *b = &s->bins[bin];
    size_t size = ra__bin_size[bin];
    unsigned got = 0;

    ra__assert(b->count == 0 && want <= b->cap);
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
}

void *ra__fc_refill(struct ra__tag_slot *s, ra_tag_t tag, unsigned bin)
{
    struct ra__fc_bin *b = &s->bins[bin];
    size_t size = ra__bin_size[bin];
    unsigned got;
    void *first;

    if (RA__UNLIKELY(s->alloc_flags == 0))
        ra__pair_unpark(s);
    ra__assert(ra__pair_state(s) == RA__PAIR_ACTIVE);
    /* Only a pair that allocates has a front cache
     * (ra__pair_start_allocating). */
    ra__assert(s->allocates);
    /* First use, maybe (ra__fc_spill); without memory for the bin, one
     * block, uncached. */
    if (!ra__fc_bin_open(b, bin))
        return made_one(s, tag, size);
    /* After the bin overflowed since the last refill, its array doubles,
     * up to ra__fc_cap_max, so that a pair whose requests make and free
     * more blocks of a class than its bin holds (130 nodes a request in
     * examples/requests) stops sending half of them to the return stacks
     * and taking them back at every request. */
    if (b->overflowed)
        ra__fc_bin_grow(b, bin);
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
    fill_from_arena(s, tag, bin, refill_size(s, b, bin));
    return first;
}

/* The pair's allocations or frees, whichever it made more of. */
static uint64_t pair_events(const struct ra__tag_slot *s)
{
    uint64_t m = atomic_load_explicit(&s->nmalloc, memory_order_relaxed);
    uint64_t d = atomic_load_explicit(&s->ndalloc, memory_order_relaxed);

    return m > d ? m : d;
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
    ra__pair_take_tcache(s, (ra_tag_t)(s - ra__thread->slots), tcache);
}

void ra__slot_send_overflowed(ra_tag_t tag)
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
    if (!ra__pair_adopt_tcache(s, tcache) && tcache != RA__NO_TCACHE)
        ra__be_tcache_destroy(tcache);
}

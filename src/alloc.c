/* Floor: paths. The plain allocation paths (no hook, no sample): their
 * slow steps behind paths.h's inline fast paths, and a block's usable size
 * (ra_malloc_usable_size). Untagged requests go to jemalloc's own malloc
 * family; tagged ones through the thread's front cache for the tag. The
 * entry points are alloc_entry.c's. */
#include <errno.h>
#include <stdlib.h>

#include "ends.h"
#include "pairs.h"
#include "paths.h"
#include "region.h"

/* jemalloc's malloc family has glibc's semantics: malloc(0) is a unique
 * block, failure sets errno to ENOMEM. flags is 0, MALLOCX_ZERO, an
 * alignment, or what a caller of mallocx passed. */
void *ra__alloc_untagged_flags(size_t size, int flags)
{
    void *p;

    if (size > PTRDIFF_MAX)
        return ra__fail_enomem();
    p = ra__je_mallocx(ra__at_least_one(size), flags);
    return p != NULL ? p : ra__fail_enomem();
}

/* The refusal counts for the tag whose limit refused: tag's, or an
 * ancestor's. */
void *ra__fail_tagged(void)
{
    if (ra__budget_refused != RA_TAG_NONE) {
        ra__budget_count_failure(ra__budget_refused);
        ra__budget_refused = RA_TAG_NONE;
    }
    ra__budget_check_soft();
    return ra__fail_enomem();
}

/* An allocation through slot s, or without one (s NULL). */
static void *alloc_by(struct ra__tag_slot *s, ra_tag_t tag, size_t size,
                      int flags)
{
    int tag_flags = ra__slot_alloc_flags(s, tag);
    void *p;

    /* A tag's arena may grow here: its extent hooks run (lock.h). */
    ra__assert_may_call_jemalloc();
    ra__budget_refused = RA_TAG_NONE;
    p = ra__je_mallocx(ra__at_least_one(size), tag_flags | flags);
    if (p == NULL) {
        ra__give_back_after_refusal(tag);
        ra__budget_refused = RA_TAG_NONE;
        p = ra__je_mallocx(ra__at_least_one(size), tag_flags | flags);
        if (p == NULL)
            return ra__fail_tagged();
    }
    ra__count_alloc(s, tag, p, ra__made_size(p, size, flags));
    return p;
}

RA__COLD static void *alloc_tagged_slow(ra_tag_t tag, size_t size, int flags)
{
    struct ra__tag_slot *s;
    void *p;

    if (!atomic_load_explicit(&ra__tagging, memory_order_relaxed))
        return ra__alloc_untagged(size, flags);
    if (ra__region_cannot_hold(size))
        return ra__fail_enomem();
    s = ra__thread_slot(tag);
    if (RA__LIKELY(s != NULL))
        return alloc_by(s, tag, size, flags);
    /* No slot (the thread exits): no reset of an unused tag meets the
     * block between its making and its count (pairs_end.c). */
    ra__orphan_begin(tag);
    p = alloc_by(NULL, tag, size, flags);
    ra__orphan_end(tag);
    return p;
}

void *ra__alloc_refill(struct ra__tag_slot *s, ra_tag_t tag, unsigned bin,
                       size_t size)
{
    void *p = ra__fc_refill(s, tag, bin);

    if (p == NULL)
        return alloc_tagged_slow(tag, size, 0);
    if (RA__LIKELY(ra__tag_of_addr(p) == tag))
        ra__count_handed(s, ra__bin_size[bin]);
    ra__budget_check_soft();
    return p;
}

/* A small calloc through the front cache, as a malloc, zeroed here as
 * jemalloc zeroes one (its usable size): CPython's callocs (12 a request
 * in bench/python_requests.py's loop) were each a mallocx outside the
 * front cache, whose block the free then put into the cache, which
 * overflowed. */
static void *alloc_zeroed(ra_tag_t tag, size_t size)
{
    void *p = ra__alloc_tagged_fast(tag, size);

    if (p != NULL)
        memset(p, 0, ra__small_class(size));
    return p;
}

/* What the front cache does not serve: a thread without state yet, a
 * large size, flags, a slot without a front cache. */
void *ra__alloc_tagged(ra_tag_t tag, size_t size, int flags)
{
    struct ra__thread_state *ts = ra__thread;
    struct ra__tag_slot *s;
    void *p;

    if (flags == MALLOCX_ZERO && size <= ra__small_max)
        return alloc_zeroed(tag, size);
    if (RA__UNLIKELY(ts == NULL))
        return alloc_tagged_slow(tag, size, flags);
    s = &ts->slots[tag];
    /* A pair made by a free starts to allocate in the slow path. */
    if (RA__LIKELY(s->alloc_flags != 0) && RA__LIKELY(s->allocates) &&
        RA__LIKELY(size <= PTRDIFF_MAX)) {
        ra__slot_miss(s);
        p = ra__je_mallocx(ra__at_least_one(size), s->alloc_flags | flags);
        if (RA__LIKELY(p != NULL)) {
            ra__count_alloc(s, tag, p, ra__made_size(p, size, flags));
            return p;
        }
    }
    return alloc_tagged_slow(tag, size, flags);
}

/* A tagged block of size usable bytes back to jemalloc. A block of
 * jemalloc's oversize class or more (opt.oversize_threshold, 8
 * MiB) gives its pages back as it is freed, as jemalloc does untagged (its
 * oversize arena purges at once); in a tag's arena they would stay dirty
 * until decay (10 s), and a tagged program's resident set would grow past
 * the same program's untagged. Only uncached blocks ask their size: large
 * ones, and small ones where front caches are off. */
static void dalloc_tagged(void *ptr, int flags, unsigned entry, size_t size)
{
    if (entry == RA__PAGE_UNCACHED && RA__UNLIKELY(size >= ra__be_oversize))
        ra__region_discard(ptr, size);
    ra__untagged_tag_freed(size);
    ra__je_dallocx(ptr, flags);
}

/* A free through the slot, its front cache aside: a thread that has not
 * allocated in the tag (a consumer of the blocks another thread makes)
 * has no front cache, and sends a block whose class is known home through
 * its outbox, where the tag's allocating threads take it back without a
 * lock. Sent to the arena one by one, such frees took its bin lock each
 * and were twice as slow as into a front cache (bench/threads: 87 against
 * 46 ns a block); a front cache of their own was the library's memory
 * taken on a free. */
static void free_by_slot(struct ra__tag_slot *s, void *ptr, ra_tag_t tag,
                         unsigned entry)
{
    unsigned bin = ra__page_entry_bin(entry);
    size_t size = ra__block_size_at(ptr, entry);

    ra__count_taken(s, size);
    if (!s->allocates && RA__LIKELY(bin < RA__MAX_BINS)) {
        ra_tag_t over = ra__outbox_put(ra__thread, tag, bin, ptr);
        if (RA__UNLIKELY(over != RA_TAG_NONE))
            ra__slot_send_overflowed(over);
        return;
    }
    /* A pair that only frees counts no miss: it never takes a tcache. */
    if (s->allocates)
        ra__slot_miss(s);
    dalloc_tagged(ptr, ra__be_tcache_flags(s->tcache), entry, size);
}

/* A thread's first free of a tag's block sets up its slot of the tag (a
 * slot of its state, which the thread's first tagged call made: nothing
 * is allocated for the pair). Without a slot (re-entered, exiting, out of
 * memory for the thread's state) the free goes uncached and counts as an
 * orphan's. */
RA__COLD static void free_tagged_slow(void *ptr, ra_tag_t tag,
                                      unsigned entry)
{
    struct ra__tag_slot *s = ra__thread_slot_freeing(tag);
    size_t size;

    if (s != NULL) {
        free_by_slot(s, ptr, tag, entry);
        return;
    }
    size = ra__block_size_at(ptr, entry);
    ra__orphan_begin(tag);
    ra__count_orphan(tag, false, size);
    dalloc_tagged(ptr, MALLOCX_TCACHE_NONE, entry, size);
    ra__orphan_end(tag);
}

/* A tagged free: into the thread's front cache when the block's class is
 * known, else through the slot's tcache. The size a sized free was given
 * is not used: a caller's mistake there (a block of an aligned allocation
 * freed with a plain free_sized, which C23 leaves undefined and glibc
 * forgives) would name a wrong size class to jemalloc, and the hint saves
 * nothing measurable. Kept out of line so that the untagged path of the
 * callers stays a test and a jump. */
void ra__free_tagged(void *ptr, ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;
    unsigned entry = ra__page_entry_of(ptr);
    struct ra__tag_slot *s;

    if (RA__UNLIKELY(entry == RA__PAGE_NONE)) {
        ra__free_untagged(ptr); /* no tag's block (ra__block_tag) */
        return;
    }
    if (entry == RA__PAGE_SAMPLED)
        ra__prof_on_free(ptr);
    if (RA__UNLIKELY(ts == NULL)) {
        free_tagged_slow(ptr, tag, entry);
        return;
    }
    s = &ts->slots[tag];
    if (RA__LIKELY(s->bins != NULL)) {
        unsigned bin = ra__page_entry_bin(entry);
        if (RA__LIKELY(bin < RA__MAX_BINS)) {
            struct ra__fc_bin *b = &s->bins[bin];
            if (RA__LIKELY(b->count < b->cap) || ra__fc_spill(s, bin)) {
                b->items[b->count++] = ptr;
                ra__count_taken(s, b->size);
                return;
            }
        }
    }
    if (RA__LIKELY(s->alloc_flags != 0)) {
        free_by_slot(s, ptr, tag, entry);
        return;
    }
    free_tagged_slow(ptr, tag, entry);
}

size_t ra_malloc_usable_size(const void *ptr)
{
    if (ptr == NULL)
        return 0;
    if (ra__block_tag(ptr) == RA_TAG_NONE)
        return ra__je_usable_size((void *)ptr);
    return ra__je_sallocx(ptr, 0);
}


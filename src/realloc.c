/* Floor: paths. realloc and the in-place resize (xallocx): a block keeps
 * its tag whatever is pushed. Hooks see a realloc as the free of the old
 * block, reported before anything can reuse it, then the allocation of the
 * new one; a realloc that fails reports nothing. */
#include "ends.h"
#include "paths.h"

/* A realloc ends one block and starts another, as hooks see it: the old
 * one of old_size usable bytes. */
static void count_end(struct ra__tag_slot *s, ra_tag_t tag, size_t old_size)
{
    if (s != NULL)
        ra__count_taken(s, old_size);
    else
        ra__count_orphan(tag, false, old_size);
}

/* In place (jemalloc's xallocx): the same block, new_size usable bytes
 * now. Without a slot, as for count_realloc, both counts at once: between
 * them the tag may count nothing live, which a reset of an unused tag must
 * not see (pairs_end.c). */
static void count_resized(struct ra__tag_slot *s, ra_tag_t tag,
                          size_t old_size, size_t new_size)
{
    ra__untagged_tag_freed(old_size);
    ra__untagged_tag_made(new_size);
    if (s == NULL)
        ra__orphan_begin(tag);
    count_end(s, tag, old_size);
    if (s != NULL)
        ra__count_handed(s, new_size);
    else
        ra__count_orphan(tag, true, new_size);
    if (s == NULL)
        ra__orphan_end(tag);
}

/* The new block, rallocx(size, flags)'s, may have left the region during
 * thread exit (jemalloc's thread-exit redirection, doc/design.md); the old
 * one is jemalloc's again either way. */
static void count_realloc(struct ra__tag_slot *s, ra_tag_t tag,
                          size_t old_size, void *p, size_t size, int flags)
{
    ra__untagged_tag_freed(old_size);
    if (s == NULL)
        ra__orphan_begin(tag);
    count_end(s, tag, old_size);
    ra__count_alloc(s, tag, p, ra__made_size(p, size, flags));
    if (s == NULL)
        ra__orphan_end(tag);
}

/* A tagged block's usable size, before it moves. */
static size_t old_size_of(const void *ptr)
{
    return ra__block_size_at(ptr, ra__page_entry_of(ptr));
}

/* flags: MALLOCX_ZERO and an alignment, at most. */
RA__COLD static void *realloc_tagged_slow(void *ptr, ra_tag_t tag,
                                          size_t size, int flags)
{
    size_t old_size = old_size_of(ptr);
    struct ra__tag_slot *s;
    void *p;

    if (ra__region_cannot_hold(size))
        return ra__fail_enomem();
    s = ra__thread_slot(tag);
    flags |= ra__slot_alloc_flags(s, tag);
    ra__budget_refused = RA_TAG_NONE;
    p = ra__je_rallocx(ptr, size, flags);
    if (p == NULL) {
        ra__give_back_after_refusal(tag);
        ra__budget_refused = RA_TAG_NONE;
        p = ra__je_rallocx(ptr, size, flags);
        if (p == NULL)
            return ra__fail_tagged();
    }
    count_realloc(s, tag, old_size, p, size, flags);
    return p;
}

/* The block keeps its owner's arena whatever is on the stack. */
static void *realloc_tagged(void *ptr, ra_tag_t tag, size_t size, int flags)
{
    struct ra__thread_state *ts = ra__thread;
    void *p;

    if (RA__LIKELY(ts != NULL) && RA__LIKELY(ts->slots[tag].alloc_flags != 0)) {
        struct ra__tag_slot *s = &ts->slots[tag];
        size_t old_size = old_size_of(ptr);
        ra__slot_miss(s);
        p = ra__je_rallocx(ptr, size, s->alloc_flags | flags);
        if (RA__LIKELY(p != NULL)) {
            count_realloc(s, tag, old_size, p, size, flags);
            return p;
        }
    }
    return realloc_tagged_slow(ptr, tag, size, flags);
}

/* jemalloc's realloc leaves errno alone for sizes past its largest class. */
static void *realloc_untagged(void *ptr, size_t size, int flags)
{
    void *p = flags == 0 ? ra__je_realloc(ptr, size)
                         : ra__je_rallocx(ptr, size, flags);

    return RA__LIKELY(p != NULL) ? p : ra__fail_enomem();
}

/* Moves a tagged block by hand: a new block of the same tag (one the
 * profiler samples when sample is set), the contents, then the old block
 * freed, which takes it out of the profile if it was sampled. The old
 * block's free is reported (hooked) before it is freed. */
RA__COLD static void *realloc_by_copy(void *ptr, ra_tag_t tag, size_t size,
                                      int flags, bool sample, bool hooked)
{
    size_t old_size = ra_malloc_usable_size(ptr);
    void *p = sample ? ra__alloc_sampled_or_plain(tag, size, flags)
                     : ra__alloc_plain(tag, size, flags);

    if (p == NULL)
        return NULL;
    memcpy(p, ptr, old_size < size ? old_size : size);
    if (hooked)
        ra__hooks_on_free_of(tag, ptr, old_size);
    ra__free_plain(ptr);
    if (hooked)
        ra__report_alloc(p);
    return p;
}

/* A small block that stays small, flags 0, through the front cache of
 * its tag: kept where it is when the class does not change (counted as a
 * realloc that stayed put, as jemalloc's rallocx keeps it and
 * count_realloc counts it), else moved by hand, a pop and a push. CPython
 * reallocs often (a list's growth, a string's resize): 34 a request in
 * bench/python_requests.py's loop, each a rallocx whose new block was
 * made, and the old one freed, outside the front cache (about 180
 * instructions of jemalloc's each). bin: the old block's class. */
static void *realloc_small(void *ptr, ra_tag_t tag, unsigned bin,
                           size_t size)
{
    size_t old_size = ra__bin_size[bin];
    void *p;

    if (ra__small_bin(size) == bin) {
        struct ra__tag_slot *s = ra__thread_slot(tag);
        count_resized(s, tag, old_size, old_size);
        return ptr;
    }
    p = ra__alloc_tagged_fast(tag, size);
    if (p == NULL)
        return NULL;
    memcpy(p, ptr, old_size < size ? old_size : size);
    ra__free_tagged_fast(ptr, tag);
    return p;
}

/* Tagged flags: never a caller's arena or thread cache (the block stays
 * in its tag). */
#define BLOCK_FLAGS(flags) ((flags) & RA__BLOCK_BITS)

/* size is at least 1. */
static void *realloc_plain(void *ptr, size_t size, int flags)
{
    ra_tag_t tag;
    bool sample;

    if (size > PTRDIFF_MAX)
        return ra__fail_enomem();
    tag = ra__block_tag(ptr);
    if (RA__LIKELY(tag == RA_TAG_NONE))
        return realloc_untagged(ptr, size, flags);
    flags = BLOCK_FLAGS(flags);
    /* A sampled block, or one the profiler picks, moves by hand: the
     * profile forgets the old address before it can be reused. */
    sample = ra__prof_samples(tag, size);
    if (RA__UNLIKELY(sample) || RA__UNLIKELY(ra__page_is_sampled(ptr)))
        return realloc_by_copy(ptr, tag, size, flags, sample, false);
    if (flags == 0 && size <= ra__small_max) {
        unsigned bin = ra__page_entry_bin(ra__page_entry_of(ptr));
        if (bin < RA__MAX_BINS)
            return realloc_small(ptr, tag, bin, size);
    }
    return realloc_tagged(ptr, tag, size, flags);
}

/* Hooks are installed: the old block's free must be reported before the
 * block can be reused, so a block that moves is moved by hand. In place
 * (xallocx) it is never reusable. */
RA__COLD static void *realloc_tagged_hooked(void *ptr, ra_tag_t tag,
                                            size_t size, int flags)
{
    size_t old_size = ra_malloc_usable_size(ptr);
    bool sample = ra__prof_samples(tag, size);

    size_t align = (size_t)1 << (flags & RA__LG_ALIGN_BITS);
    size_t new_size;

    if (!sample && !ra__page_is_sampled(ptr) &&
        ((uintptr_t)ptr & (align - 1)) == 0 &&
        (new_size = ra__je_xallocx(ptr, size, 0, flags)) >= size) {
        count_resized(ra__thread_slot(tag), tag, old_size, new_size);
        ra__budget_check_soft();
        ra__hooks_on_free_of(tag, ptr, old_size);
        ra__report_alloc(ptr);
        return ptr;
    }
    return realloc_by_copy(ptr, tag, size, flags, sample, true);
}

/* The same for an untagged block, which only jemalloc's malloc family
 * touches (a tool that replaces it, as valgrind does, owns the block): it
 * stays where it is when jemalloc would keep it (the same size class). */
RA__COLD static void *realloc_untagged_hooked(void *ptr, size_t size,
                                              int flags)
{
    size_t old_size = ra__je_usable_size(ptr);
    void *p;

    if (flags == 0 && ra__je_nallocx(size, 0) == old_size) {
        ra__hooks_on_free_of(RA_TAG_NONE, ptr, old_size);
        ra__report_alloc(ptr);
        return ptr;
    }
    p = ra__alloc_untagged(size, flags);
    if (p == NULL)
        return NULL;
    memcpy(p, ptr, old_size < size ? old_size : size);
    ra__hooks_on_free_of(RA_TAG_NONE, ptr, old_size);
    if ((flags & RA__CACHE_ARENA_BITS) != 0)
        ra__je_dallocx(ptr, flags & RA__CACHE_ARENA_BITS);
    else
        ra__je_free(ptr);
    ra__report_alloc(p);
    return p;
}

RA__COLD static void *realloc_hooked(void *ptr, size_t size, int flags)
{
    ra_tag_t tag;

    if (size > PTRDIFF_MAX)
        return ra__fail_enomem();
    tag = ra__block_tag(ptr);
    if (tag == RA_TAG_NONE)
        return realloc_untagged_hooked(ptr, size, flags);
    return realloc_tagged_hooked(ptr, tag, size, BLOCK_FLAGS(flags));
}

static inline void *realloc_as(void *ptr, size_t size, int flags)
{
    if (RA__UNLIKELY(ra__hooks_any()))
        return realloc_hooked(ptr, size, flags);
    return realloc_plain(ptr, size, flags);
}

void *ra_realloc(void *ptr, size_t size)
{
    if (ptr == NULL)
        return ra_malloc(size);
    if (size == 0) {
        ra_free(ptr);
        return NULL;
    }
    return realloc_as(ptr, size, 0);
}

void *ra__realloc_as(void *ptr, size_t size, int flags)
{
    return realloc_as(ptr, ra__at_least_one(size), flags);
}

/* Resizing in place changes the usable size, not the block: a size that
 * changed is counted and reported as a realloc that stayed put, and takes
 * a sampled block out of the profile, as a realloc does. */
size_t ra__resize_in_place(void *ptr, size_t size, size_t extra, int flags)
{
    ra_tag_t tag = ra__block_tag(ptr);
    size_t old_size = ra_malloc_usable_size(ptr);
    size_t new_size = ra__je_xallocx(ptr, size, extra, BLOCK_FLAGS(flags));

    if (new_size == old_size)
        return new_size;
    if (tag != RA_TAG_NONE) {
        if (ra__page_is_sampled(ptr))
            ra__prof_on_free(ptr);
        count_resized(ra__thread_slot(tag), tag, old_size, new_size);
        ra__budget_check_soft();
    }
    if (ra__hooks_any()) {
        ra__hooks_on_free_of(tag, ptr, old_size);
        ra__report_alloc(ptr);
    }
    return new_size;
}

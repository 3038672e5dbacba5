/* The library's state as the hot paths read it, inline: the page table,
 * a block's tag, a tag's liveness, a thread's slot, the instrumentation
 * word, the soft limit's check, the library's quiet sections, the
 * profiler's countdown. Included at the end of internal.h, whose
 * declarations it uses. */
#ifndef RA_HOT_STATE_H
#define RA_HOT_STATE_H

/* -- region.c: the page table, a block's tag -------------------------------- */
static inline uint8_t *ra__page_bin_entry(const void *ptr)
{
    return &ra__page_bin[((uintptr_t)ptr - ra__layout.base) >>
                         RA__PAGE_SHIFT];
}

static inline unsigned ra__page_bin_get(const void *ptr)
{
    return __atomic_load_n(ra__page_bin_entry(ptr), __ATOMIC_RELAXED);
}

/* mark: RA__PAGE_UNCACHED or RA__PAGE_SAMPLED. */
static inline void ra__page_mark(const void *ptr, unsigned mark)
{
    __atomic_store_n(ra__page_bin_entry(ptr), (uint8_t)mark,
                     __ATOMIC_RELAXED);
}

/* The page's blocks are of small bin. */
static inline void ra__page_bin_set(const void *ptr, unsigned bin)
{
    ra__page_mark(ptr, bin + 1);
}

/* The small bin an entry names, as an unsigned below RA__MAX_BINS; any
 * other value (RA__PAGE_NONE, the marks) wraps to one above it, so that one
 * comparison tells a bin from everything else. */
static inline unsigned ra__page_entry_bin(unsigned entry)
{
    return entry - 1u;
}

/* ra__layout is exported data: a program's copy relocation may move it, so
 * the library too must reach it through the GOT, never a local alias. */
static inline ra_tag_t ra__tag_of_addr(const void *ptr)
{
    return ra__tag_of_inline(ptr);
}

/* The tag of the block at ptr, a pointer the program got from an
 * allocation function: its region's, unless the page table says that no
 * block of the library's starts on its page (another mapping's block in
 * address space the library gave back: untagged). */
static inline ra_tag_t ra__block_tag(const void *ptr)
{
    ra_tag_t tag = ra__tag_of_addr(ptr);

    if (tag != RA_TAG_NONE && ra__page_bin != NULL &&
        ra__page_bin_get(ptr) == RA__PAGE_NONE)
        return RA_TAG_NONE;
    return tag;
}

/* -- untagged.c: what the thread took from jemalloc for tags ------------- */
/* jemalloc just handed the calling thread bytes of tagged blocks (usable
 * sizes, as it counts them: a block's class, or what sallocx says), or
 * took them back: where the library calls jemalloc for a tag, never on a
 * fast path (a front cache's blocks were counted as they came). So the
 * thread's own count of jemalloc's, less this, is untagged. */
static inline void ra__untagged_tag_made(size_t bytes)
{
    _Atomic uint64_t *t = &ra__untagged_self.tagged;

    atomic_store_explicit(t,
                          atomic_load_explicit(t, memory_order_relaxed) +
                              bytes,
                          memory_order_relaxed);
}

static inline void ra__untagged_tag_freed(size_t bytes)
{
    _Atomic uint64_t *t = &ra__untagged_self.tagged;

    atomic_store_explicit(t,
                          atomic_load_explicit(t, memory_order_relaxed) -
                              bytes,
                          memory_order_relaxed);
}

/* -- tag_ids.c: published and live tags --------------------------------------- */
/* Number of tags published so far (acquire). ra__tags_published is exported
 * data: a program's copy relocation may move it, so the library reaches it
 * through the GOT too. */
static inline unsigned ra__tag_published(void)
{
    return __atomic_load_n(&ra__tags_published, __ATOMIC_ACQUIRE);
}

/* A live tag: created, and not destroyed since (ra__tag_live, exported for
 * the inline push, is 1). */
static inline bool ra__tag_valid(ra_tag_t tag)
{
    return tag != RA_TAG_NONE && tag <= ra__tag_published() &&
           __atomic_load_n(&ra__tag_live[tag], __ATOMIC_ACQUIRE);
}

/* -- front_cache.c, thread.c: a thread's slot of a tag ------------------------- */
/* How many blocks of size a front cache bin may hold: RA__FC_SLOTS, fewer
 * for big classes, so that a cache holds at most about 64 KiB per class.
 * A tag's return stack of the class holds RA__RETURNS_BINS times that. */
static inline unsigned ra__fc_cap(size_t size)
{
    unsigned cap = size <= 1024 ? RA__FC_SLOTS : (unsigned)((64 << 10) / size);

    return cap < 2 ? 2 : cap;
}

/* The most blocks of size a bin grows to: RA__FC_MAX, fewer for classes
 * above 256 bytes (64 KiB of blocks at most), never below ra__fc_cap. */
static inline unsigned ra__fc_cap_max(size_t size)
{
    unsigned max = size <= 256 ? RA__FC_MAX : (unsigned)((64 << 10) / size);
    unsigned cap = ra__fc_cap(size);

    return max < cap ? cap : max;
}

/* A pair's slow event (a front cache miss, or a block no front cache
 * takes): counted until the pair is busy enough for a tcache, then, with
 * the tcache taken or refused (or caches off), never again. */
static inline void ra__slot_miss(struct ra__tag_slot *s)
{
    if (RA__UNLIKELY(s->misses < RA__TCACHE_AFTER_MISSES))
        ra__slot_miss_slow(s);
}

/* This thread's slot of tag, set up to allocate (counted in the tag's
 * pool), or NULL (ra__thread_slot_slow). */
static inline struct ra__tag_slot *ra__thread_slot(ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;

    if (RA__LIKELY(ts != NULL) &&
        RA__LIKELY(ts->slots[tag].alloc_flags != 0) &&
        RA__LIKELY(ts->slots[tag].allocates))
        return &ts->slots[tag];
    return ra__thread_slot_slow(tag, true);
}

/* The same for a free: a pair made here has no front cache and is not
 * counted in the tag's pool until it allocates. */
static inline struct ra__tag_slot *ra__thread_slot_freeing(ra_tag_t tag)
{
    struct ra__thread_state *ts = ra__thread;

    if (RA__LIKELY(ts != NULL) && RA__LIKELY(ts->slots[tag].alloc_flags != 0))
        return &ts->slots[tag];
    return ra__thread_slot_slow(tag, false);
}

/* Adds n to a counter that only the calling thread writes (modulo 2^64:
 * the byte counts subtract by adding the complement). */
static inline void ra__count_add(_Atomic uint64_t *counter, uint64_t n)
{
    atomic_store_explicit(
        counter, atomic_load_explicit(counter, memory_order_relaxed) + n,
        memory_order_relaxed);
}

static inline void ra__count_one(_Atomic uint64_t *counter)
{
    ra__count_add(counter, 1);
}

/* The slot handed a block of size usable bytes to the caller. */
static inline void ra__count_handed(struct ra__tag_slot *s, size_t size)
{
    ra__count_one(&s->nmalloc);
    ra__count_add(&s->bytes, size);
}

/* The caller gave the slot back a block of size usable bytes. */
static inline void ra__count_taken(struct ra__tag_slot *s, size_t size)
{
    ra__count_one(&s->ndalloc);
    ra__count_add(&s->bytes, -(uint64_t)size);
}

/* -- the library's own work ------------------------------------------------- */
/* Between ra__quiet_begin() and ra__quiet_end(), whatever the calling thread
 * allocates, through any path (the C library's mallocs on its behalf
 * included: a FILE of its own, qsort's buffer), is the library's: untagged,
 * never sampled, never reported to hooks. Sections nest. User code called
 * inside one (a caller's FILE, see ra__out_write) runs outside it. */
static inline void ra__quiet_begin(void)
{
    ra__hooks_muted++;
    ra__tag_suspend();
}

static inline void ra__quiet_end(void)
{
    ra__assert(ra__hooks_muted > 0);
    ra__tag_resume();
    ra__hooks_muted--;
}

#endif /* RA_HOT_STATE_H */

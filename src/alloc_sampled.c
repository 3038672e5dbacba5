/* Floor: paths. Blocks the profiler samples: at least a page long, so that
 * each starts on a page of its own, which the page table marks; their
 * stack is recorded (prof.c). */
#include "paths.h"

/* A block the profiler samples: at least a page, so that it starts on a
 * page of its own, which is marked. NULL when it cannot be had this way
 * (the caller then allocates as usual, unsampled). */
static void *alloc_sampled(ra_tag_t tag, size_t size, int flags)
{
    const size_t page = (size_t)1 << RA__PAGE_SHIFT;
    struct ra__tag_slot *s;
    int tag_flags;
    void *p;

    if (ra__page_bin == NULL || size > PTRDIFF_MAX ||
        !atomic_load_explicit(&ra__tagging, memory_order_relaxed))
        return NULL;
    /* A thread without a slot (exiting) is not sampled: its allocation
     * takes the plain path, which keeps it apart from a reset (pairs_end.c). */
    if ((s = ra__thread_slot(tag)) == NULL)
        return NULL;
    tag_flags = ra__slot_alloc_flags(s, tag);
    p = ra__je_mallocx(size < page ? page : size, tag_flags | flags);
    if (p == NULL || ra__tag_of_addr(p) != tag) {
        if (p != NULL)
            ra__je_dallocx(p, MALLOCX_TCACHE_NONE);
        return NULL;
    }
    ra__count_alloc(s, tag, p, ra__je_sallocx(p, 0));
    ra__page_mark(p, RA__PAGE_SAMPLED);
    ra__prof_record(tag, p, size);
    return p;
}

void *ra__alloc_sampled_or_plain(ra_tag_t tag, size_t size, int flags)
{
    void *p = alloc_sampled(tag, size, flags);

    return p != NULL ? p : ra__alloc_plain(tag, size, flags);
}

/* Floor: pairs. A pair's front cache as memory: its bins' arrays, made at
 * first use and grown, and the blocks the bins and the pair's tcache give
 * back to the arena. */
#include <string.h>

#include "backend.h"

#include "internal.h"

/* The fast paths' code depends on it: one cache line a slot. */
_Static_assert(sizeof(struct ra__tag_slot) == 64, "a slot is 64 bytes");
_Static_assert(sizeof(struct ra__fc_bin) == 32, "a bin's header is 32 bytes");

/* What every bin keeps: count <= cap, and cap is 0 (not used yet, or its
 * pair parked) or its length, within the class's bound. */
static void check_bin(const struct ra__fc_bin *b, unsigned bin)
{
    ra__assert(b->count <= b->cap);
    ra__assert(b->cap == 0 || b->cap == b->length);
    ra__assert(b->length <= ra__fc_cap_max(ra__bin_size[bin]));
    ra__assert((b->items == NULL) == (b->length == 0));
}

struct ra__fc_bin *ra__fc_bins_make(void)
{
    if (ra__nbins == 0 || ra__page_bin == NULL)
        return NULL;
    return ra__meta_calloc(ra__nbins, sizeof(struct ra__fc_bin));
}

void ra__fc_bins_free(struct ra__fc_bin *bins)
{
    if (bins != NULL)
        for (unsigned bin = 0; bin < ra__nbins; bin++)
            ra__meta_free(bins[bin].items);
    ra__meta_free(bins);
}

/* A bin's array is made at its first use, RA__FC_FIRST blocks (fewer for
 * big classes), and its capacity set (0 until then, and while the pair is
 * parked: the fast paths see it full, or empty, and come here or to the
 * refill), so that a (thread, tag) pair holds arrays for the classes it
 * uses and no more: 36 bins of 64 blocks each, inline, were 19 KiB a
 * pair, about 7 KiB of it touched by a visit of a dozen classes. */
bool ra__fc_bin_open(struct ra__fc_bin *b, unsigned bin)
{
    if (b->items == NULL) {
        unsigned length = ra__fc_cap_max(ra__bin_size[bin]);
        if (length > RA__FC_FIRST)
            length = RA__FC_FIRST;
        b->items = ra__meta_alloc(length * sizeof b->items[0]);
        if (b->items == NULL)
            return false;
        b->length = length;
    }
    b->cap = b->length;
    b->size = (unsigned)ra__bin_size[bin];
    check_bin(b, bin);
    return true;
}

/* Here, with the bin empty, nothing is copied; where it overflows, a free
 * would allocate. */
void ra__fc_bin_grow(struct ra__fc_bin *b, unsigned bin)
{
    unsigned length = b->length * 2, max = ra__fc_cap_max(ra__bin_size[bin]);
    void **items;

    b->overflowed = 0;
    if (b->length >= max)
        return;
    if (length > max)
        length = max;
    ra__assert(b->count == 0);
    items = ra__meta_alloc(length * sizeof items[0]);
    if (items == NULL)
        return;
    ra__meta_free(b->items);
    b->items = items;
    b->length = b->cap = length;
    check_bin(b, bin);
}

void ra__fc_give_back(struct ra__tag_slot *s, unsigned bin, unsigned n)
{
    struct ra__fc_bin *b = &s->bins[bin];

    if (n == 0)
        return; /* items may be NULL: a bin never used */
    ra__assert(n <= b->count);
    for (unsigned i = 0; i < n; i++)
        ra__je_sdallocx(b->items[i], ra__bin_size[bin],
                        ra__be_tcache_flags(s->tcache));
    ra__untagged_tag_freed(n * ra__bin_size[bin]);
    b->count -= n;
    memmove(b->items, b->items + n, b->count * sizeof b->items[0]);
    check_bin(b, bin);
}

void ra__fc_flush_tcache(unsigned tcache)
{
    if (tcache != RA__NO_TCACHE)
        ra__be_tcache_flush(tcache);
}

void ra__fc_flush(struct ra__tag_slot *s)
{
    ra__threads_assert_held();
    if (s->bins != NULL)
        for (unsigned bin = 0; bin < ra__nbins; bin++)
            if (s->bins[bin].count != 0)
                ra__fc_give_back(s, bin, s->bins[bin].count);
    ra__fc_flush_tcache(s->tcache);
}

void ra__fc_forget(struct ra__tag_slot *s)
{
    ra__threads_assert_held();
    if (s->bins != NULL)
        for (unsigned bin = 0; bin < ra__nbins; bin++)
            s->bins[bin].count = 0;
}

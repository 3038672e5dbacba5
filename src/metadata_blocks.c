/* Floor: region. Where jemalloc's metadata lies in each region: the base
 * blocks its arenas' bookkeeping takes through the extent hooks, kept for
 * the arena's life (a reset, a purge or a recycling of the slot keeps
 * them), so that what the kernel counts resident in a region can be told
 * apart from the blocks the tag holds. An append-only table of ranges,
 * one list per region, written in the extent hook (no allocation, no
 * lock) and read by whoever measures the regions. */
#include <stdatomic.h>

#include "internal.h"
#include "region.h"

/* Base blocks grow geometrically, so an arena takes a handful over its
 * life; a pool of arenas one handful each. Past this many in the
 * process, a block is not listed, and its pages show as the tag's own. */
#define BLOCKS_MAX 16384u

static struct block {
    uintptr_t start;
    size_t size;
    uint32_t next; /* the region's previous block, + 1; 0: none */
} blocks[BLOCKS_MAX];
static _Atomic uint32_t nblocks;
/* Each region's latest block, + 1 (0: none), by region index. */
static _Atomic uint32_t heads[RA__MAX_TAGS_LIMIT];

void ra__metadata_block_add(ra_tag_t tag, uintptr_t start, size_t size)
{
    uint32_t i = atomic_fetch_add_explicit(&nblocks, 1, memory_order_relaxed);
    _Atomic uint32_t *head = &heads[tag - 1];
    uint32_t first;

    if (i >= BLOCKS_MAX)
        return;
    blocks[i].start = start;
    blocks[i].size = size;
    /* Published with release: a reader that finds the block finds it
     * whole. */
    first = atomic_load_explicit(head, memory_order_relaxed);
    do
        blocks[i].next = first;
    while (!atomic_compare_exchange_weak_explicit(
        head, &first, i + 1, memory_order_release, memory_order_relaxed));
}

unsigned ra__metadata_blocks(ra_tag_t tag, struct ra__range *out,
                             unsigned max)
{
    uint32_t at = atomic_load_explicit(&heads[tag - 1], memory_order_acquire);
    unsigned n = 0;

    for (; at != 0 && n < max; at = blocks[at - 1].next)
        out[n++] = (struct ra__range){blocks[at - 1].start,
                                      blocks[at - 1].start +
                                          blocks[at - 1].size};
    return n;
}

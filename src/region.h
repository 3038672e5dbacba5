/* Floor: region. region.c's declarations: the reservation, the regions'
 * hand-out, their hooks and carving, the give-back. Included by the files
 * that deal in address space; the page table's inlines are inline.h's. */
#ifndef RA_REGION_H
#define RA_REGION_H

#include "internal.h"

/* -- region.c: the reservation and the extent hooks ----------------------- */
/* Prepares c for [start, start + size), a PROT_NONE reservation. */
void ra__carving_init(struct ra__carving *c, uintptr_t start, size_t size);
/* Takes [addr, addr + size) from the never-used part: exactly new_addr when
 * it is not 0 (possible only when it is the next address), else the first
 * address aligned to alignment (a power of two). The space is made
 * writable first (mprotect). Returns addr, or 0 when it does not fit or the
 * kernel refuses to make it writable; then nothing is taken. Thread-safe,
 * lock-free. */
uintptr_t ra__carve_extent(struct ra__carving *c, uintptr_t new_addr,
                           size_t size, size_t alignment);
/* Unmaps the reserved part that nothing was carved from yet, so that it
 * no longer counts towards the address-space limit; later carvings map it
 * again. Returns the bytes given back. Not concurrent with carvings of c
 * (region.c's growth lock). */
size_t ra__carving_give_back(struct ra__carving *c);
/* Reserves max_tags regions of region_size bytes (retrying with smaller
 * regions when the address space is short). Returns true on failure,
 * after printing one line on stderr. Called once, from ra__init. */
bool ra__region_reserve(unsigned max_tags, size_t region_size);
/* Readies tag's region, the first not handed out yet (tag - 1 ==
 * ra__region_count()), for its first arena (pool.c makes it): 0, or -1
 * with errno ENOMEM (its part of the page table cannot be mapped: the
 * limit, or another mapping; a later call may try again) or EEXIST
 * (another mapping holds the region's own space: it is published anyway,
 * never to have a tag). publish: the region is handed out; addresses in
 * it resolve to tag. Called with the registry's ids_lock held. */
int ra__region_open(ra_tag_t tag, const struct ra__commit_ops *ops);
void ra__region_publish(ra_tag_t tag);
/* Readies a region passed over earlier (ra__region_open's EEXIST, so
 * published) for a first arena, once the mapping that held its space is
 * gone: 0, or -1 with errno EEXIST while another mapping still holds part
 * of it. Called with the registry's ids_lock held. */
int ra__region_reopen(ra_tag_t tag);
/* What jemalloc needs to make an arena of tag's region: its extent hooks
 * and the cap on an arena's growth step. */
struct extent_hooks_s *ra__region_hooks(ra_tag_t tag);
size_t ra__region_grow_limit(void);
/* Why this thread's carving last could not map space (ENOMEM: the limit;
 * EEXIST: another mapping), 0 if it could; cleared before an arena is
 * made, read when jemalloc could not make it. */
void ra__region_refusal_clear(void);
int ra__region_refusal(void);
/* Tag's region's carved part: [*start, *end), what its arenas were given. */
void ra__region_carved(ra_tag_t tag, uintptr_t *start, uintptr_t *end);
/* The page table's range (empty without one): the library's own memory. */
void ra__region_page_table(uintptr_t *start, uintptr_t *end);
/* -- metadata_blocks.c: where the arenas' metadata lies in each region --- */
/* A base block of an arena of tag's region, [start, start + size): noted
 * by the extent hook (no allocation). */
void ra__metadata_block_add(ra_tag_t tag, uintptr_t start, size_t size);
/* The base blocks of tag's region (its arenas', over the slot's life)
 * into out, up to max; returns how many. */
unsigned ra__metadata_blocks(ra_tag_t tag, struct ra__range *out,
                             unsigned max);
/* The bytes of tag's region that its arenas' metadata holds (jemalloc's
 * base blocks, committed for the arenas' life; with MALLOC_CONF
 * retain:false, also blocks asked at a 2 MiB alignment or more). */
size_t ra__region_metadata(ra_tag_t tag);
/* The number of regions handed out: those that have an arena (tags
 * created, ids recycled counted once) and those skipped because another
 * mapping holds their space (ra__region_open's EEXIST). */
unsigned ra__region_count(void);
/* Gives back the part of the reservation that no tag uses, so that a
 * lowered address-space limit (RLIMIT_AS) leaves room for the rest of the
 * program: the regions not handed to a tag yet, their part of the page
 * table, and what each tag's region has not carved. From then on regions
 * map what they carve as they carve it. Returns whether anything was given
 * back. Called with the registry's ids_lock held (tag_ids.c). */
bool ra__region_give_back(void);
/* Gives the pages of the block [ptr, ptr + size) back to the OS, before
 * the block is freed: they read as zero when used again. */
void ra__region_discard(void *ptr, size_t size);
/* Names tag's region "regionalloc:<tag_name>" in /proc/<pid>/maps where
 * the kernel supports it; silently does nothing elsewhere. */
void ra__region_name(ra_tag_t tag, const char *tag_name);

#endif /* RA_REGION_H */

/* Floor: region. The region floor's declarations: the reservation, the
 * regions' hand-out and give-back (region.c), their carving
 * (region_carve.c) and their hooks (region_hooks.c). Included by the
 * files that deal in address space; the page table's inlines are
 * hot_state.h's. */
#ifndef RA_REGION_H
#define RA_REGION_H

#include "internal.h"

/* -- region_carve.c: a region's carving ---------------------------------- */
/* The system calls mmap and munmap, past the library's own (override_mmap.c,
 * a floor above): what they return. */
void *ra__sys_mmap(void *addr, size_t len, int prot, int flags);
int ra__sys_munmap(void *addr, size_t len);
/* Maps [addr, addr + len) readable and writable where nothing is mapped.
 * Returns 0, EEXIST when another mapping holds part of the range (a kernel
 * before 4.17, which takes the address as a hint, maps elsewhere only
 * then), or ENOMEM when the kernel refuses (the address-space limit). */
int ra__map_anew(uintptr_t addr, size_t len);
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
/* Why this thread's carving last could not map space (ENOMEM: the limit
 * or a refused commit; EEXIST: another mapping), 0 if it could; cleared
 * before an arena is made, read when jemalloc could not make it; noted by
 * the hooks (ra__region_refused). */
void ra__region_refused(int why);
void ra__region_refusal_clear(void);
int ra__region_refusal(void);
/* -- region_hooks.c: the regions and their extent hooks ----------------- */
/* Gives regions [0, n), of region_size bytes from base on (region i at
 * base + (i << shift)), their hooks and carvings. */
void ra__regions_init(unsigned n, uintptr_t base, unsigned shift,
                      size_t region_size);
/* Every commit and decommit of the hooks is counted through ops, from the
 * first region's opening on (ra__region_open's). */
void ra__regions_count_through(const struct ra__commit_ops *ops);
/* Tag's region's carving. */
struct ra__carving *ra__region_carving(ra_tag_t tag);
/* What jemalloc needs to make an arena of tag's region: its extent hooks
 * (ra__region_grow_limit caps an arena's growth step). */
struct extent_hooks_s *ra__region_hooks(ra_tag_t tag);
/* The bytes of tag's region that its arenas' metadata holds (jemalloc's
 * base blocks, committed for the arenas' life; with MALLOC_CONF
 * retain:false, also blocks asked at a 2 MiB alignment or more). */
size_t ra__region_metadata(ra_tag_t tag);
/* -- region.c: the reservation, the hand-out, the give-back -------------- */
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
/* The cap on an arena's growth step. */
size_t ra__region_grow_limit(void);
/* Tag's region's carved part: [*start, *end), what its arenas were given. */
void ra__region_carved(ra_tag_t tag, uintptr_t *start, uintptr_t *end);
/* The page table's range (empty without one): the library's own memory. */
void ra__region_page_table(uintptr_t *start, uintptr_t *end);
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

/* -- metadata_blocks.c: where the arenas' metadata lies in each region --- */
/* A base block of an arena of tag's region, [start, start + size): noted
 * by the extent hook (no allocation). */
void ra__metadata_block_add(ra_tag_t tag, uintptr_t start, size_t size);
/* The base blocks of tag's region (its arenas', over the slot's life)
 * into out, up to max; returns how many. */
unsigned ra__metadata_blocks(ra_tag_t tag, struct ra__range *out,
                             unsigned max);

#endif /* RA_REGION_H */

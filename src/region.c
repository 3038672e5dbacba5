/* Floor: region. The reservation, tag <-> address math and the extent hooks:
 * the address space the tags live in, reserved, carved, and given back under
 * a lowered address-space limit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend.h"

#include "internal.h"
#include "region.h"

/* The system calls themselves: where the library stands in front of mmap
 * and munmap (override_mmap.c, a floor above), the reservation's mappings
 * need no note: they are not jemalloc's. */
static void *sys_mmap(void *addr, size_t len, int prot, int flags)
{
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, -1, (off_t)0);
}

static int sys_munmap(void *addr, size_t len)
{
    return (int)syscall(SYS_munmap, addr, len);
}

/* Linux 5.17 names anonymous mappings; older headers lack the constants. */
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef PR_SET_VMA_ANON_NAME
#define PR_SET_VMA_ANON_NAME 0
#endif

/* The hooks struct is the first member so that a hook finds its region from
 * the extent_hooks_t pointer jemalloc passes back. It must outlive the arena:
 * the table is static and regions are never torn down. */
struct region {
    extent_hooks_t hooks;
    struct ra__carving carving;
    /* Bytes of its arenas' metadata blocks (ra__region_metadata). */
    _Atomic size_t metadata;
};

/* jemalloc's metadata (its base allocator's blocks) comes through the
 * hooks as whole committed huge pages, at no address asked, huge-page
 * aligned: extents of blocks are asked page-aligned (opt.retain's growth)
 * or at the blocks' own alignment. */
#define METADATA_ALIGN ((size_t)2 << 20)

static bool looks_like_metadata(const void *new_addr, size_t size,
                                size_t alignment, bool commit)
{
    return new_addr == NULL && commit && alignment >= METADATA_ALIGN &&
           size % METADATA_ALIGN == 0;
}

struct ra__layout ra__layout;
/* The regions of the reservation (REGIONALLOC_MAX_TAGS). */
static unsigned nregions;
/* Until the reservation: base 0, shift 0, count 0: every block untagged. */
struct ra__free_gate ra__free_gate;
static struct ra__mutex gate_lock = RA__MUTEX_INIT(RA__RANK_GATE);

/* Whether a hook is installed (hooks.c says so): then every free goes
 * through the tagged path, which dispatches to the hooks. */
static bool gate_hooks;

void ra__free_gate_update(void)
{
    uintptr_t n;

    /* The count is read under the lock: read before it, a hook's removal
     * could write an older count after a new tag's creation wrote its own,
     * and send the new tag's blocks to jemalloc's plain free. */
    ra__lock(&gate_lock);
    n = __atomic_load_n(&ra__layout.count, __ATOMIC_ACQUIRE);
    ra__assert(n <= nregions);
    if (gate_hooks)
        n = ra__free_gate.shift == 0 ? UINTPTR_MAX
                                     : (UINTPTR_MAX >> ra__free_gate.shift) + 1;
    atomic_store_explicit(&ra__free_gate.count, n, memory_order_release);
    ra__unlock(&gate_lock);
}

void ra__free_gate_hooks(bool any)
{
    ra__lock(&gate_lock);
    gate_hooks = any;
    ra__unlock(&gate_lock);
    ra__free_gate_update();
}

uint8_t *ra__page_bin;

static struct region regions[RA__MAX_TAGS_LIMIT];

static struct region *region_of_hooks(extent_hooks_t *hooks)
{
    return (struct region *)(void *)hooks;
}

static bool region_contains(const struct region *r, const void *addr,
                            size_t size)
{
    uintptr_t a = (uintptr_t)addr;
    return a >= r->carving.start && a <= r->carving.end &&
           size <= r->carving.end - a;
}

/* Growth of a carving's writable part, and the give-back, one at a time:
 * growth is rare (jemalloc grows an arena by large extents), and a give-back
 * must not unmap what a growth just made writable. */
static struct ra__mutex grow_lock = RA__MUTEX_INIT(RA__RANK_GROW);
/* Why this thread's last carving could not map given-back space (see
 * map_anew) or its commit was refused (ENOMEM), 0 when none failed, for the
 * errno of an arena that could not be made (ra__region_refusal):
 * the limit's refusal may pass, another mapping's space is not ours. */
static RA__TLS int tls_space_refusal;

/* Maps [addr, addr + len) readable and writable where nothing is mapped.
 * Returns 0, EEXIST when another mapping holds part of the range (a kernel
 * before 4.17, which takes the address as a hint, maps elsewhere only
 * then), or ENOMEM when the kernel refuses (the address-space limit). */
static int map_anew(uintptr_t addr, size_t len)
{
    void *p = sys_mmap((void *)addr, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
                           MAP_FIXED_NOREPLACE);

    if (p == MAP_FAILED)
        return errno == EEXIST ? EEXIST : ENOMEM;
    if (p != (void *)addr) {
        sys_munmap(p, len);
        return EEXIST;
    }
    return 0;
}

/* Makes the region writable up to end, as far as it is not yet: reserved
 * space by mprotect, space given back by a new mapping. Returns true when
 * the kernel refuses (RLIMIT_DATA, RLIMIT_AS, overcommit_memory=2,
 * max_map_count) or the space is taken: then nothing was carved, and
 * nothing is lost. */
static bool make_writable(struct ra__carving *r, uintptr_t end)
{
    uintptr_t done, reserved, from;
    bool failed = false;
    int refusal;

    if (end <= atomic_load_explicit(&r->writable_end, memory_order_acquire))
        return false;
    ra__lock(&grow_lock);
    done = atomic_load_explicit(&r->writable_end, memory_order_relaxed);
    reserved = atomic_load_explicit(&r->reserved_end, memory_order_relaxed);
    from = reserved > done ? reserved : done;
    if (end > done) {
        if (reserved > done &&
            mprotect((void *)done, (end < reserved ? end : reserved) - done,
                     PROT_READ | PROT_WRITE) != 0) {
            failed = true;
        } else if (end > from &&
                   (refusal = map_anew(from, end - from)) != 0) {
            tls_space_refusal = refusal;
            failed = true;
        } else {
            atomic_store_explicit(&r->writable_end, end,
                                  memory_order_release);
        }
    }
    ra__unlock(&grow_lock);
    return failed;
}

void ra__carving_init(struct ra__carving *c, uintptr_t start, size_t size)
{
    c->start = start;
    c->end = start + size;
    atomic_init(&c->next, start);
    atomic_init(&c->writable_end, start);
    atomic_init(&c->reserved_end, start + size);
}

size_t ra__carving_give_back(struct ra__carving *c)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), keep, reserved;
    size_t given = 0;

    ra__lock(&grow_lock);
    keep = (atomic_load_explicit(&c->writable_end, memory_order_relaxed) +
            page - 1) & ~(page - 1);
    reserved = atomic_load_explicit(&c->reserved_end, memory_order_relaxed);
    if (keep < reserved && sys_munmap((void *)keep, reserved - keep) == 0) {
        atomic_store_explicit(&c->reserved_end, keep, memory_order_relaxed);
        given = reserved - keep;
    }
    ra__unlock(&grow_lock);
    return given;
}

uintptr_t ra__carve_extent(struct ra__carving *r, uintptr_t new_addr,
                           size_t size, size_t alignment)
{
    uintptr_t cur = atomic_load_explicit(&r->next, memory_order_relaxed);
    uintptr_t addr;

    do {
        if (new_addr != 0) {
            if (new_addr != cur)
                return 0;
            addr = cur;
        } else {
            addr = (cur + alignment - 1) & ~(uintptr_t)(alignment - 1);
            if (addr < cur)
                return 0;
        }
        if (addr > r->end || size > r->end - addr ||
            make_writable(r, addr + size))
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(
        &r->next, &cur, addr + size, memory_order_relaxed,
        memory_order_relaxed));
    /* Invariant 1: what is carved lies inside the region, writable. */
    ra__assert(addr >= r->start && addr + size <= r->end &&
               addr + size <= atomic_load(&r->writable_end));
    return addr;
}

/* What the region's commits are counted against (budget.c's, given at the
 * reservation): every commit and decommit of the hooks reaches it. */
static const struct ra__commit_ops *commits;

static ra_tag_t tag_of_region(const struct region *r)
{
    return (ra_tag_t)(r - regions) + 1;
}

static void *extent_alloc(extent_hooks_t *hooks, void *new_addr, size_t size,
                          size_t alignment, bool *zero, bool *commit,
                          unsigned arena_ind)
{
    struct region *r = region_of_hooks(hooks);
    uintptr_t addr;
    (void)arena_ind;

    /* Fresh pages are writable for good (see extent_commit) and, never
     * touched before, read as zero. Whether jemalloc counts them committed
     * is its choice: growth asks for uncommitted space and commits what it
     * uses, and only that counts towards peak_mapped and the budget. The
     * commitment is taken first, so that a refusal carves nothing. */
    if (*commit && !commits->commit(tag_of_region(r), size)) {
        /* A budget or the memory limit: an arena that cannot be made
         * for it fails with ENOMEM, not as if jemalloc had no index. */
        tls_space_refusal = ENOMEM;
        return NULL;
    }
    /* jemalloc grows (uncommitted) after a recycled extent's commit was
     * refused, and keeps a grown extent whose commit fails: every refused
     * attempt would strand fresh address space until the region ran out.
     * The grown extent's commit would be refused as well: carve nothing. */
    if (!*commit && commits->refused(tag_of_region(r)))
        return NULL;
    addr = ra__carve_extent(&r->carving, (uintptr_t)new_addr, size,
                            alignment);
    if (addr == 0) {
        if (*commit)
            commits->uncommit(tag_of_region(r), size);
        return NULL;
    }
    *zero = true;
    /* Base blocks are kept for the arena's life: never uncounted. */
    if (looks_like_metadata(new_addr, size, alignment, *commit)) {
        atomic_fetch_add_explicit(&r->metadata, size, memory_order_relaxed);
        ra__metadata_block_add(tag_of_region(r), addr, size);
    }
    return (void *)addr;
}

/* Opting out of dalloc makes jemalloc retain the extent for reuse: the region
 * is never unmapped piecemeal. */
static bool extent_dalloc(extent_hooks_t *hooks, void *addr, size_t size,
                          bool committed, unsigned arena_ind)
{
    (void)hooks; (void)addr; (void)size; (void)committed; (void)arena_ind;
    return true;
}

/* Called only if an arena is destroyed: give the pages back, keep the
 * address space reserved. */
static void extent_destroy(extent_hooks_t *hooks, void *addr, size_t size,
                           bool committed, unsigned arena_ind)
{
    (void)hooks; (void)committed; (void)arena_ind;
    madvise(addr, size, MADV_DONTNEED);
}

/* Carved memory stays readable and writable for good, so the region is one
 * writable mapping rather than a patchwork of protections (the kernel limits
 * mappings per process). Decommit returns the pages to the OS at once
 * (MADV_DONTNEED: they read as zero next time) and commit has nothing left
 * to do but count: physical pages come back on first touch. */
static bool extent_commit(extent_hooks_t *hooks, void *addr, size_t size,
                          size_t offset, size_t length, unsigned arena_ind)
{
    (void)addr; (void)size; (void)offset; (void)arena_ind;
    return !commits->commit(tag_of_region(region_of_hooks(hooks)), length);
}

static bool extent_decommit(extent_hooks_t *hooks, void *addr, size_t size,
                            size_t offset, size_t length, unsigned arena_ind)
{
    (void)size; (void)arena_ind;
    if (madvise((char *)addr + offset, length, MADV_DONTNEED) != 0)
        return true;
    commits->uncommit(tag_of_region(region_of_hooks(hooks)), length);
    return false;
}

/* Forced purge is the only purge (no lazy MADV_FREE): ra_tag_purge() must
 * show in RSS at once. */
static bool extent_purge_forced(extent_hooks_t *hooks, void *addr,
                                size_t size, size_t offset, size_t length,
                                unsigned arena_ind)
{
    (void)hooks; (void)size; (void)arena_ind;
    return madvise((char *)addr + offset, length, MADV_DONTNEED) != 0;
}

static bool extent_split(extent_hooks_t *hooks, void *addr, size_t size,
                         size_t size_a, size_t size_b, bool committed,
                         unsigned arena_ind)
{
    (void)size_a; (void)size_b; (void)committed; (void)arena_ind;
    return !region_contains(region_of_hooks(hooks), addr, size);
}

static bool extent_merge(extent_hooks_t *hooks, void *addr_a, size_t size_a,
                         void *addr_b, size_t size_b, bool committed,
                         unsigned arena_ind)
{
    struct region *r = region_of_hooks(hooks);
    (void)committed; (void)arena_ind;
    return !region_contains(r, addr_a, size_a) ||
           !region_contains(r, addr_b, size_b);
}

static size_t page_round_up(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    return (n + page - 1) & ~(page - 1);
}

/* The page table's bytes for n regions of region_size, in whole pages. */
static size_t table_bytes(unsigned n, size_t region_size)
{
    return page_round_up((size_t)n * (region_size >> RA__PAGE_SHIFT));
}

/* Maps size bytes of PROT_NONE address space aligned to align, and below
 * bytes more right under them (the page table's place). Returns the
 * aligned start, or NULL on failure. */
static void *reserve_aligned(size_t size, size_t align, size_t below)
{
    size_t span;
    char *raw, *aligned;

    if (size > SIZE_MAX - align || below > SIZE_MAX - align - size)
        return NULL;
    span = below + size + align;
    raw = sys_mmap(NULL, span, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
    if (raw == MAP_FAILED)
        return NULL;
    aligned = (char *)(((uintptr_t)raw + below + align - 1) &
                       ~(uintptr_t)(align - 1));
    if (aligned - below != raw)
        sys_munmap(raw, (size_t)(aligned - below - raw));
    if (aligned + size != raw + span)
        sys_munmap(aligned + size, (size_t)(raw + span - (aligned + size)));
    return aligned;
}

/* The page table's bytes that are mapped: all of it, until a give-back
 * unmaps the part of the regions no tag has; a region handed out after
 * that maps its part again (map_table_for). Under the registry's ids_lock. */
static size_t table_mapped, table_size;

/* The page table of internal.h, at at: the reservation's own bytes right
 * under region 0, virtual, touched a page at a time (one byte of it per
 * 4 KiB used). The kernel puts a new mapping in the highest gap
 * that fits, so what a give-back unmaps of the table, below every region,
 * is the last space another mapping takes: the regions no tag has yet,
 * above, fill first, and a region whose space is taken can be skipped
 * (ra__region_open), whereas a region whose part of the table is
 * taken can never be handed out, nor any after it. Without the table, tags
 * work without front caches. */
static void map_page_table(char *at, size_t bytes)
{
    if (mprotect(at, bytes, PROT_READ | PROT_WRITE) != 0) {
        sys_munmap(at, bytes);
        return;
    }
    /* Entries are 0 (RA__PAGE_NONE) until written. */
    ra__page_bin = (uint8_t *)at;
    table_mapped = table_size = bytes;
}

/* The bytes of the page table that regions [0, n) need. */
static size_t table_part(unsigned n)
{
    return (size_t)n << (ra__layout.shift - RA__PAGE_SHIFT);
}

/* Maps the page table's part of region idx, given back earlier. Returns
 * true when the address-space limit (or another mapping) refuses it. */
static bool map_table_for(unsigned idx)
{
    size_t need = page_round_up(table_part(idx + 1));

    if (need > table_size)
        need = table_size;
    if (need <= table_mapped)
        return false;
    if (map_anew((uintptr_t)ra__page_bin + table_mapped,
                 need - table_mapped) != 0)
        return true;
    table_mapped = need;
    return false;
}

bool ra__region_give_back(void)
{
    unsigned used = __atomic_load_n(&ra__layout.count, __ATOMIC_ACQUIRE);
    size_t given = 0, keep;

    /* Without the page table, free could not tell another mapping's blocks
     * in given-back space from a tag's: nothing is given back. */
    if (ra__page_bin == NULL)
        return false;
    for (unsigned i = 0; i < nregions; i++)
        given += ra__carving_give_back(&regions[i].carving);
    keep = page_round_up(table_part(used));
    if (keep < table_mapped &&
        sys_munmap(ra__page_bin + keep, table_mapped - keep) == 0) {
        given += table_mapped - keep;
        table_mapped = keep;
    }
    return given != 0;
}

static void print_size(char *buf, size_t len, size_t bytes)
{
    static const char units[] = "KMGT";
    unsigned u = 0;

    bytes >>= 10;
    while (bytes >= 1024 && (bytes & 1023) == 0 && u < 3) {
        bytes >>= 10;
        u++;
    }
    snprintf(buf, len, "%zu%c", bytes, units[u]);
}

/* Region i (tag i + 1) of nregions: its hooks, and its carving of the
 * reservation. */
static void init_regions(size_t region_size)
{
    for (unsigned i = 0; i < nregions; i++) {
        struct region *r = &regions[i];
        r->hooks = (extent_hooks_t){
            .alloc = extent_alloc,
            .dalloc = extent_dalloc,
            .destroy = extent_destroy,
            .commit = extent_commit,
            .decommit = extent_decommit,
            .purge_lazy = NULL,
            .purge_forced = extent_purge_forced,
            .split = extent_split,
            .merge = extent_merge,
        };
        ra__carving_init(&r->carving,
                         ra__layout.base + ((uintptr_t)i << ra__layout.shift),
                         region_size);
    }
}

bool ra__region_reserve(unsigned max_tags, size_t region_size,
                        const struct ra__commit_ops *ops)
{
    size_t wanted = region_size;
    char msg[256], a[32], b[32];
    void *base = NULL;

    for (; region_size >= RA__REGION_SIZE_MIN; region_size >>= 1) {
        if (region_size > SIZE_MAX / max_tags)
            continue;
        base = reserve_aligned(region_size * max_tags, region_size,
                               table_bytes(max_tags, region_size));
        if (base != NULL)
            break;
    }
    if (base == NULL) {
        print_size(a, sizeof a, wanted);
        snprintf(msg, sizeof msg,
                 "regionalloc: cannot reserve %u regions of %s or smaller "
                 "(%s); running in pass-through mode",
                 max_tags, a, strerror(errno));
        ra__warn(msg);
        return true;
    }
    if (region_size != wanted) {
        print_size(a, sizeof a, wanted);
        print_size(b, sizeof b, region_size);
        snprintf(msg, sizeof msg,
                 "regionalloc: cannot reserve %u regions of %s; using "
                 "regions of %s", max_tags, a, b);
        ra__warn(msg);
    }

    nregions = max_tags;
    commits = ops;
    ra__layout.base = (uintptr_t)base;
    ra__layout.shift = (unsigned)__builtin_ctzll(region_size);
    ra__free_gate.base = ra__layout.base;
    ra__free_gate.shift = ra__layout.shift;
    map_page_table((char *)base - table_bytes(max_tags, region_size),
                   table_bytes(max_tags, region_size));
    init_regions(region_size);
    return false;
}

/* A region's given-back space, and whether a mapping reaches into it. */
struct span_probe {
    uintptr_t start, end;
    bool taken;
};

/* ra__proc_maps callback. The file lists the mappings in address order:
 * the first that ends past the span's start decides. */
static bool note_mapping(char *text, size_t len, void *ctx)
{
    struct span_probe *p = ctx;
    char *rest;
    uintptr_t lo = (uintptr_t)strtoull(text, &rest, 16), hi;

    (void)len;
    if (*rest != '-')
        return false;
    hi = (uintptr_t)strtoull(rest + 1, NULL, 16);
    if (hi <= p->start)
        return false;
    p->taken = lo < p->end;
    return true;
}

/* Whether another mapping holds part of what region idx gave back (what
 * make_writable would map anew; an arena that the limit refused may have
 * left the region a mapping of its own before it). Such a region is
 * passed over whole: the carving of its arena's metadata sees only the
 * first pages, and a tag would find the region full a few pages on. The
 * maps are read only for a region whose space was given back: once when
 * it is handed out, and again for a region passed over each time a
 * creation would otherwise find no id (tag.c); unreadable, they say
 * nothing is there. */
static bool region_taken(unsigned idx)
{
    const struct ra__carving *c = &regions[idx].carving;
    uintptr_t done = atomic_load_explicit(&c->writable_end,
                                          memory_order_relaxed);
    uintptr_t reserved = atomic_load_explicit(&c->reserved_end,
                                              memory_order_relaxed);
    struct span_probe p = {reserved > done ? reserved : done, c->end, false};

    return p.start < p.end && !ra__proc_maps(note_mapping, &p) && p.taken;
}

int ra__region_open(ra_tag_t tag)
{
    unsigned idx = tag - 1;

    ra__assert(idx == __atomic_load_n(&ra__layout.count, __ATOMIC_RELAXED));
    /* A region whose part of the page table cannot be had cannot be
     * skipped either: free reads the part of every region below the count.
     * The creation fails (ENOMEM), and the next one tries again. */
    if (ra__page_bin != NULL && map_table_for(idx)) {
        errno = ENOMEM;
        return -1;
    }
    if (region_taken(idx)) {
        errno = EEXIST;
        return -1;
    }
    return 0;
}

int ra__region_reopen(ra_tag_t tag)
{
    unsigned idx = tag - 1;

    ra__assert(idx < __atomic_load_n(&ra__layout.count, __ATOMIC_RELAXED));
    if (region_taken(idx)) {
        errno = EEXIST;
        return -1;
    }
    return 0;
}

void ra__region_publish(ra_tag_t tag)
{
    unsigned idx = tag - 1;

    ra__assert(idx == __atomic_load_n(&ra__layout.count, __ATOMIC_RELAXED));
    /* Regions are handed out in order, under the registry's ids_lock:
     * publishing
     * the count makes addresses of region idx resolve to its tag. A region
     * whose space another mapping holds is counted too, and never has a
     * tag: its part of the page table, mapped and 0, sends the frees of
     * that mapping's blocks to jemalloc, and the next region can be had. */
    __atomic_store_n(&ra__layout.count, idx + 1, __ATOMIC_RELEASE);
    ra__free_gate_update();
}

struct extent_hooks_s *ra__region_hooks(ra_tag_t tag)
{
    return &regions[tag - 1].hooks;
}

size_t ra__region_grow_limit(void)
{
    /* jemalloc grows a retained arena by an exponential series of extents;
     * the step is capped so that a small region is filled before a grow
     * fails. */
    return (size_t)1 << (ra__layout.shift - 3);
}

void ra__region_refusal_clear(void)
{
    tls_space_refusal = 0;
}

int ra__region_refusal(void)
{
    return tls_space_refusal;
}

void ra__region_carved(ra_tag_t tag, uintptr_t *start, uintptr_t *end)
{
    const struct ra__carving *c = &regions[tag - 1].carving;

    *start = c->start;
    *end = atomic_load_explicit(&c->next, memory_order_relaxed);
}

void ra__region_page_table(uintptr_t *start, uintptr_t *end)
{
    /* The whole table's range: a part a give-back unmapped reads as not
     * resident. */
    *start = (uintptr_t)ra__page_bin;
    *end = *start + (ra__page_bin != NULL ? table_size : 0);
}

size_t ra__region_metadata(ra_tag_t tag)
{
    return atomic_load_explicit(&regions[tag - 1].metadata,
                                memory_order_relaxed);
}

unsigned ra__region_count(void)
{
    return (unsigned)__atomic_load_n(&ra__layout.count, __ATOMIC_ACQUIRE);
}

/* Whether the kernel names anonymous mappings: 0 until the first try, then
 * 1, or -1 when it refused (no CONFIG_ANON_VMA_NAME: EINVAL), after which
 * the library never asks again: a call known to fail would otherwise be
 * made on every tag's creation. */
static int naming_works;

/* Naming is a courtesy to smaps and pmap readers, never a failure. */
void ra__region_discard(void *ptr, size_t size)
{
    const uintptr_t page = (uintptr_t)1 << RA__PAGE_SHIFT;
    uintptr_t start = ((uintptr_t)ptr + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t)ptr + size) & ~(page - 1);

    /* Advice only: a refusal leaves the pages to jemalloc's decay. */
    if (end > start)
        (void)madvise((void *)start, end - start, MADV_DONTNEED);
}

void ra__region_name(ra_tag_t tag, const char *tag_name)
{
    /* The kernel takes 80 bytes at most, printable ASCII but \`$[]. */
    char name[80];
    const struct region *r = &regions[tag - 1];
    size_t n;

    if (__atomic_load_n(&naming_works, __ATOMIC_RELAXED) < 0)
        return;
    n = (size_t)snprintf(name, sizeof name, "regionalloc:%s", tag_name);
    if (n >= sizeof name)
        n = sizeof name - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c > 0x7e || strchr("\\`$[]", c) != NULL)
            name[i] = '_';
    }
    /* The system call itself: prctl is the library's own (it tags a thread
     * on PR_SET_NAME, override_thread.c), a floor above this one. */
    if (syscall(SYS_prctl, PR_SET_VMA, PR_SET_VMA_ANON_NAME, r->carving.start,
                r->carving.end - r->carving.start, (unsigned long)name) == 0)
        __atomic_store_n(&naming_works, 1, __ATOMIC_RELAXED);
    else if (errno == EINVAL &&
             __atomic_load_n(&naming_works, __ATOMIC_RELAXED) == 0)
        __atomic_store_n(&naming_works, -1, __ATOMIC_RELAXED);
}

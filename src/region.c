/* Floor: region. The reservation, tag <-> address math, the page table and
 * the free gate: the address space the tags live in, reserved, handed out a
 * region at a time, and given back under a lowered address-space limit.
 * A region's carving is region_carve.c's, its extent hooks
 * region_hooks.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "region.h"

/* Linux 5.17 names anonymous mappings; older headers lack the constants. */
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef PR_SET_VMA_ANON_NAME
#define PR_SET_VMA_ANON_NAME 0
#endif

struct ra__layout ra__layout;
/* The regions of the reservation (REGIONALLOC_MAX_TAGS). */
static unsigned nregions;
/* Until the reservation: base 0, shift 0, count 0: every block untagged. */
struct ra__free_gate ra__free_gate;
static struct ra__mutex gate_lock = RA__MUTEX_INIT(RA__RANK_GATE);

/* Whether a hook is installed (hooks.c says so): then every free goes
 * through the tagged path, which dispatches to the hooks. */
static bool gate_hooks;

/* Recomputes the gate's count (the regions, the hooks). */
static void update_gate(void)
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
    update_gate();
}

uint8_t *ra__page_bin;

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
    raw = ra__sys_mmap(NULL, span, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
    if (raw == MAP_FAILED)
        return NULL;
    aligned = (char *)(((uintptr_t)raw + below + align - 1) &
                       ~(uintptr_t)(align - 1));
    if (aligned - below != raw)
        ra__sys_munmap(raw, (size_t)(aligned - below - raw));
    if (aligned + size != raw + span)
        ra__sys_munmap(aligned + size, (size_t)(raw + span - (aligned + size)));
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
        ra__sys_munmap(at, bytes);
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

    ra__assert_rank_held(RA__RANK_IDS);
    if (need > table_size)
        need = table_size;
    if (need <= table_mapped)
        return false;
    if (ra__map_anew((uintptr_t)ra__page_bin + table_mapped,
                 need - table_mapped) != 0)
        return true;
    table_mapped = need;
    return false;
}

bool ra__region_give_back(void)
{
    unsigned used = __atomic_load_n(&ra__layout.count, __ATOMIC_ACQUIRE);
    size_t given = 0, keep;

    ra__assert_rank_held(RA__RANK_IDS);
    /* Without the page table, free could not tell another mapping's blocks
     * in given-back space from a tag's: nothing is given back. */
    if (ra__page_bin == NULL)
        return false;
    for (unsigned i = 0; i < nregions; i++)
        given += ra__carving_give_back(ra__region_carving(i + 1));
    keep = page_round_up(table_part(used));
    if (keep < table_mapped &&
        ra__sys_munmap(ra__page_bin + keep, table_mapped - keep) == 0) {
        given += table_mapped - keep;
        table_mapped = keep;
    }
    return given != 0;
}

bool ra__region_reserve(unsigned max_tags, size_t region_size)
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
    ra__layout.base = (uintptr_t)base;
    ra__layout.shift = (unsigned)__builtin_ctzll(region_size);
    ra__free_gate.base = ra__layout.base;
    ra__free_gate.shift = ra__layout.shift;
    map_page_table((char *)base - table_bytes(max_tags, region_size),
                   table_bytes(max_tags, region_size));
    ra__regions_init(max_tags, ra__layout.base, ra__layout.shift,
                     region_size);
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
 * creation would otherwise find no id (tag_ids.c); unreadable, they say
 * nothing is there. */
static bool region_taken(unsigned idx)
{
    const struct ra__carving *c = ra__region_carving(idx + 1);
    uintptr_t done = atomic_load_explicit(&c->writable_end,
                                          memory_order_relaxed);
    uintptr_t reserved = atomic_load_explicit(&c->reserved_end,
                                              memory_order_relaxed);
    struct span_probe p = {reserved > done ? reserved : done, c->end, false};

    return p.start < p.end && !ra__proc_maps(note_mapping, &p) && p.taken;
}

int ra__region_open(ra_tag_t tag, const struct ra__commit_ops *ops)
{
    unsigned idx = tag - 1;

    ra__assert_rank_held(RA__RANK_IDS);
    ra__regions_count_through(ops);
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

    ra__assert_rank_held(RA__RANK_IDS);
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

    ra__assert_rank_held(RA__RANK_IDS);
    ra__assert(idx == __atomic_load_n(&ra__layout.count, __ATOMIC_RELAXED));
    /* Regions are handed out in order, under the registry's ids_lock:
     * publishing
     * the count makes addresses of region idx resolve to its tag. A region
     * whose space another mapping holds is counted too, and never has a
     * tag: its part of the page table, mapped and 0, sends the frees of
     * that mapping's blocks to jemalloc, and the next region can be had. */
    __atomic_store_n(&ra__layout.count, idx + 1, __ATOMIC_RELEASE);
    update_gate();
}

size_t ra__region_grow_limit(void)
{
    /* jemalloc grows a retained arena by an exponential series of extents;
     * the step is capped so that a small region is filled before a grow
     * fails. */
    return (size_t)1 << (ra__layout.shift - 3);
}

void ra__region_carved(ra_tag_t tag, uintptr_t *start, uintptr_t *end)
{
    const struct ra__carving *c = ra__region_carving(tag);

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
    const struct ra__carving *c = ra__region_carving(tag);
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
    if (syscall(SYS_prctl, PR_SET_VMA, PR_SET_VMA_ANON_NAME, c->start,
                c->end - c->start, (unsigned long)name) == 0)
        __atomic_store_n(&naming_works, 1, __ATOMIC_RELAXED);
    else if (errno == EINVAL &&
             __atomic_load_n(&naming_works, __ATOMIC_RELAXED) == 0)
        __atomic_store_n(&naming_works, -1, __ATOMIC_RELAXED);
}

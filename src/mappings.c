/* Floor: backend. Where jemalloc's memory outside the tags' regions lies:
 * every anonymous mapping jemalloc makes (override_mmap.c tells of each
 * mmap and munmap of the process), noted with its kind, so that what the
 * kernel counts resident in them can be measured (measure.c) and split
 * into the untagged arenas' extents (mapped while one of their extent
 * hooks runs: untagged_hooks.c says so) and jemalloc's own metadata (its
 * bases and radix tree: every other mapping of jemalloc's). A fixed table
 * under a spin lock that is a leaf: the notes come from inside jemalloc,
 * under its locks, so nothing here allocates or calls out. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "backend.h"
#include "internal.h"

/* jemalloc maps in an exponential series (opt.retain keeps what it maps),
 * so a process holds some hundreds of its mappings at most; past this
 * many, a mapping is counted (ra__mappings_lost) and its pages show as
 * the process's other memory. */
#define MAPPINGS_MAX 4096u

static struct mapping {
    uintptr_t start, end;
    const void *caller; /* before jemalloc's code is known: who mapped it */
    uint64_t seq;       /* the order mappings were noted in */
    uint8_t kind;       /* RA__MAPPING_* */
} mappings[MAPPINGS_MAX];
static unsigned nmappings;
static uint64_t changes; /* moves whenever the table does */
/* The span of what is noted: an unmapping outside it (the program's own)
 * takes no lock. */
static _Atomic uintptr_t span_lo = UINTPTR_MAX, span_hi;
static atomic_flag table_lock = ATOMIC_FLAG_INIT;
static _Atomic unsigned lost;

/* jemalloc's code, once known (ra__mappings_start): [code_start, code_end).
 * Until then a mapping is noted with its caller, sorted out at the start. */
static _Atomic uintptr_t code_start, code_end;

RA__TLS bool ra__mapping_extent;

static void lock_table(void)
{
    while (atomic_flag_test_and_set_explicit(&table_lock,
                                             memory_order_acquire))
        sched_yield();
}

static void table_unlock(void)
{
    atomic_flag_clear_explicit(&table_lock, memory_order_release);
}

/* The kind of a mapping made by code at caller, or RA__MAPPING_NONE when
 * it is not jemalloc's (known only once jemalloc's code is). */
static uint8_t kind_of(const void *caller)
{
    uintptr_t at = (uintptr_t)caller;
    uintptr_t lo = atomic_load_explicit(&code_start, memory_order_relaxed);

    if (ra__mapping_extent)
        return RA__MAPPING_EXTENT;
    if (lo == 0)
        return RA__MAPPING_UNKNOWN;
    return at >= lo && at < atomic_load_explicit(&code_end,
                                                 memory_order_relaxed)
               ? RA__MAPPING_METADATA
               : RA__MAPPING_NONE;
}

/* With the table locked: whether a mapping noted overlaps [lo, hi). */
static bool overlaps(uintptr_t lo, uintptr_t hi)
{
    for (unsigned i = 0; i < nmappings; i++)
        if (mappings[i].start < hi && mappings[i].end > lo)
            return true;
    return false;
}

void ra__mappings_noted(void *addr, size_t len, bool fixed,
                        const void *caller)
{
    uint8_t kind = kind_of(caller);
    uintptr_t lo = (uintptr_t)addr;

    if (kind == RA__MAPPING_NONE || len == 0)
        return;
    lock_table();
    if (fixed && overlaps(lo, lo + len)) {
        /* Mapped again over itself: the range keeps its kind. */
    } else if (nmappings < MAPPINGS_MAX) {
        mappings[nmappings++] = (struct mapping){
            lo, lo + len, kind == RA__MAPPING_UNKNOWN ? caller : NULL,
            changes, kind};
        changes++;
        if (lo < atomic_load_explicit(&span_lo, memory_order_relaxed))
            atomic_store_explicit(&span_lo, lo, memory_order_relaxed);
        if (lo + len > atomic_load_explicit(&span_hi, memory_order_relaxed))
            atomic_store_explicit(&span_hi, lo + len, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&lost, 1, memory_order_relaxed);
    }
    table_unlock();
}

/* With the table locked: mapping i less [lo, hi), which may split it in
 * two (the second part at the end of the table) or leave nothing. */
static void cut(unsigned i, uintptr_t lo, uintptr_t hi)
{
    struct mapping m = mappings[i];

    if (lo <= m.start && hi >= m.end) {
        mappings[i] = mappings[--nmappings];
        return;
    }
    if (lo > m.start && hi < m.end) {
        mappings[i].end = lo;
        if (nmappings < MAPPINGS_MAX) {
            mappings[nmappings++] = (struct mapping){hi, m.end, m.caller,
                                                     m.seq, m.kind};
        } else {
            atomic_fetch_add_explicit(&lost, 1, memory_order_relaxed);
        }
        return;
    }
    if (lo <= m.start)
        mappings[i].start = hi;
    else
        mappings[i].end = lo;
}

void ra__mappings_forget(void *addr, size_t len)
{
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;

    if (hi <= atomic_load_explicit(&span_lo, memory_order_relaxed) ||
        lo >= atomic_load_explicit(&span_hi, memory_order_relaxed))
        return;
    lock_table();
    for (unsigned i = nmappings; i-- > 0;)
        if (mappings[i].start < hi && mappings[i].end > lo) {
            cut(i, lo, hi);
            changes++;
        }
    table_unlock();
}

/* With the table locked: the mapping noted first, of those taken for
 * extents at the start, is jemalloc's first base. */
static void mark_first_base(void)
{
    unsigned first = nmappings;

    for (unsigned i = 0; i < nmappings; i++)
        if (mappings[i].caller != NULL &&
            (first == nmappings || mappings[i].seq < mappings[first].seq))
            first = i;
    if (first != nmappings)
        mappings[first].kind = RA__MAPPING_METADATA;
    for (unsigned i = 0; i < nmappings; i++)
        mappings[i].caller = NULL;
}

void ra__mappings_start(void)
{
    uintptr_t lo = 0, hi = 0;

    if (atomic_load_explicit(&code_start, memory_order_acquire) != 0)
        return;
    if (!ra__jemalloc_code(&lo, &hi)) {
        atomic_store_explicit(&code_end, hi, memory_order_relaxed);
        atomic_store_explicit(&code_start, lo, memory_order_release);
    }
    /* What was mapped before the hooks were given (by jemalloc's own
     * constructor, and by other libraries' that allocate before the
     * library's runs): sorted out by who mapped it. Which of jemalloc's
     * were extents no hook said: the first jemalloc keeps is its first
     * base (its start maps a probe page and unmaps it, then the base of
     * its bases), the rest are taken for the automatic arenas' first
     * extents, the larger part by far (a base the radix tree took since
     * is mostly not resident). */
    lock_table();
    for (unsigned i = nmappings; i-- > 0;) {
        struct mapping *m = &mappings[i];
        if (m->kind != RA__MAPPING_UNKNOWN)
            continue;
        if (lo != 0 && (uintptr_t)m->caller >= lo &&
            (uintptr_t)m->caller < hi)
            m->kind = RA__MAPPING_EXTENT;
        else
            *m = mappings[--nmappings];
    }
    mark_first_base();
    changes++;
    table_unlock();
}

unsigned ra__mappings_copy(struct ra__mapping *out, unsigned max,
                           uint64_t *version)
{
    unsigned n = 0;

    lock_table();
    for (unsigned i = 0; i < nmappings && n < max; i++)
        if (mappings[i].kind == RA__MAPPING_EXTENT ||
            mappings[i].kind == RA__MAPPING_METADATA)
            out[n++] = (struct ra__mapping){
                {mappings[i].start, mappings[i].end}, mappings[i].kind};
    *version = changes;
    table_unlock();
    return n;
}

bool ra__mappings_known(void)
{
    return atomic_load_explicit(&code_start, memory_order_relaxed) != 0;
}

unsigned ra__mappings_lost(void)
{
    return atomic_load_explicit(&lost, memory_order_relaxed);
}

/* Not taken across a fork: jemalloc notes its mappings under its own
 * locks, which its fork handler takes after the library's (handlers run
 * last registered first), so holding this one there would wait for a
 * thread that waits for it. Every note of jemalloc's is done by the time
 * its handler has its locks; a child can only inherit the lock from a
 * thread unmapping inside jemalloc's span without jemalloc's locks, which
 * nothing does: the child takes it back. */
void ra__mappings_postfork_child(void)
{
    atomic_flag_clear_explicit(&table_lock, memory_order_release);
}

/* Floor: backend. Where jemalloc's memory outside the tags' regions lies:
 * every anonymous mapping jemalloc makes (override_mmap.c tells of each
 * mmap and munmap of the process), so that what the kernel counts
 * resident in them can be measured (parts.c tells its bases from its
 * extents). A fixed table under a spin lock that is a leaf: the notes come
 * from inside jemalloc, under its locks, so nothing here allocates or
 * calls out. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "backend.h"
#include "internal.h"

/* jemalloc maps in an exponential series (opt.retain keeps what it maps),
 * so a process holds some hundreds of its mappings at most; past this
 * many, a mapping is not noted and its pages show as the process's other
 * memory. */
#define MAPPINGS_MAX 4096u

static struct mapping {
    uintptr_t start, end;
    /* Before jemalloc's code is known: who mapped it (NULL after). */
    const void *caller;
} mappings[MAPPINGS_MAX];
static unsigned nmappings;
static uint64_t changes; /* moves whenever the table does */
/* The span of what is noted: an unmapping outside it (the program's own)
 * takes no lock. */
static _Atomic uintptr_t span_lo = UINTPTR_MAX, span_hi;
static struct ra__spin table_lock = RA__SPIN_INIT(RA__RANK_MAPPINGS);

/* jemalloc's code, once known (ra__mappings_start): [code_start, code_end).
 * Until then a mapping is noted with its caller, sorted out at the start. */
static _Atomic uintptr_t code_start, code_end;

static void lock_table(void)
{
    ra__spin_lock(&table_lock);
}

static void table_unlock(void)
{
    ra__spin_unlock(&table_lock);
}

/* Whether code at caller is jemalloc's: true when not known yet (noted
 * with the caller, sorted out at the start). */
static bool maybe_jemallocs(const void *caller)
{
    uintptr_t at = (uintptr_t)caller;
    uintptr_t lo = atomic_load_explicit(&code_start, memory_order_acquire);

    return lo == 0 ||
           (at >= lo &&
            at < atomic_load_explicit(&code_end, memory_order_relaxed));
}

/* With the table locked: whether a mapping noted overlaps [lo, hi). */
static bool overlaps(uintptr_t lo, uintptr_t hi)
{
    ra__assert_held(&table_lock);
    for (unsigned i = 0; i < nmappings; i++)
        if (mappings[i].start < hi && mappings[i].end > lo)
            return true;
    return false;
}

void ra__mappings_noted(void *addr, size_t len, bool fixed,
                        const void *caller)
{
    uintptr_t lo = (uintptr_t)addr;
    bool known = atomic_load_explicit(&code_start, memory_order_acquire) != 0;

    if (!maybe_jemallocs(caller) || len == 0)
        return;
    lock_table();
    if (fixed && overlaps(lo, lo + len)) {
        /* Mapped again over itself (a decommit): nothing new. */
    } else if (nmappings < MAPPINGS_MAX) {
        mappings[nmappings++] =
            (struct mapping){lo, lo + len, known ? NULL : caller};
        changes++;
        if (lo < atomic_load_explicit(&span_lo, memory_order_relaxed))
            atomic_store_explicit(&span_lo, lo, memory_order_relaxed);
        if (lo + len > atomic_load_explicit(&span_hi, memory_order_relaxed))
            atomic_store_explicit(&span_hi, lo + len, memory_order_relaxed);
    }
    table_unlock();
}

/* With the table locked: mapping i less [lo, hi), which may split it in
 * two (the second part at the end of the table) or leave nothing. */
static void cut(unsigned i, uintptr_t lo, uintptr_t hi)
{
    struct mapping m = mappings[i];

    ra__assert_held(&table_lock);
    if (lo <= m.start && hi >= m.end) {
        mappings[i] = mappings[--nmappings];
        return;
    }
    if (lo > m.start && hi < m.end) {
        mappings[i].end = lo;
        if (nmappings < MAPPINGS_MAX)
            mappings[nmappings++] = (struct mapping){hi, m.end, m.caller};
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

void ra__mappings_start(void)
{
    uintptr_t lo = 0, hi = 0;

    if (atomic_load_explicit(&code_start, memory_order_acquire) != 0 ||
        ra__jemalloc_code(&lo, &hi))
        return;
    /* What was mapped before (by jemalloc's own constructor, and by other
     * libraries' that allocate before the library's runs): kept when
     * jemalloc's code mapped it. */
    lock_table();
    for (unsigned i = nmappings; i-- > 0;) {
        struct mapping *m = &mappings[i];
        if ((uintptr_t)m->caller >= lo && (uintptr_t)m->caller < hi)
            m->caller = NULL;
        else
            *m = mappings[--nmappings];
    }
    atomic_store_explicit(&code_end, hi, memory_order_relaxed);
    atomic_store_explicit(&code_start, lo, memory_order_release);
    changes++;
    table_unlock();
}

unsigned ra__mappings_copy(struct ra__range *out, unsigned max,
                           uint64_t *version)
{
    unsigned n = 0;

    lock_table();
    for (unsigned i = 0; i < nmappings && n < max; i++)
        out[n++] = (struct ra__range){mappings[i].start, mappings[i].end};
    *version = changes;
    table_unlock();
    return n;
}

/* jemalloc 5's base_block_t begins every block a base maps: the size of
 * the block's mapping, and the previous block of the same base (NULL for
 * its first). An extent's first bytes are a block's of the program's: that
 * they read as that very size and a base block's start is not taken for
 * chance. */
struct base_block_head {
    size_t size;
    uintptr_t next;
};

bool ra__mappings_is_base(const struct ra__range *m,
                          const struct ra__range *all, unsigned n)
{
    struct base_block_head head;
    struct iovec local = {&head, sizeof head};
    struct iovec remote = {(void *)m->start, sizeof head};

    /* Read as another process would: a mapping unmapped meanwhile (under
     * MALLOC_CONF=retain:false) fails with EFAULT, it does not fault. */
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) !=
            (ssize_t)sizeof head ||
        head.size != m->end - m->start)
        return false;
    if (head.next == 0)
        return true;
    for (unsigned i = 0; i < n; i++)
        if (all[i].start == head.next)
            return true;
    return false;
}

bool ra__mappings_known(void)
{
    return atomic_load_explicit(&code_start, memory_order_relaxed) != 0;
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
    ra__spin_remake(&table_lock);
}

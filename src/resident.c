/* Floor: OS. What the kernel counts resident in a range of the process's
 * own address space, read from /proc/self/pagemap (eight bytes a page):
 * the pages the process owns, not the kernel's shared zero page, which a
 * read of a page never written maps (mincore counts it; smaps' Rss and
 * the process's RssAnon do not). No allocation: a stack buffer, system
 * calls. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* pagemap's bits (Documentation/admin-guide/mm/pagemap.rst). */
#define PM_PRESENT ((uint64_t)1 << 63)
#define PM_FILE ((uint64_t)1 << 61)   /* file page or shared anonymous */
#define PM_EXCLUSIVE ((uint64_t)1 << 56) /* mapped by this process alone */
#define PM_PFN_MASK (((uint64_t)1 << 55) - 1)
/* Entries read at once: 32 KiB of stack, 16 MiB of address space. */
#define CHUNK 4096u

/* Whether the process, or the one it was forked from, has forked since
 * the library was loaded: then a page mapped by more than this process
 * may be shared with the other, not only the zero page. */
static atomic_bool forked;
/* The zero page's frame, where frames can be read (CAP_SYS_ADMIN): 0
 * until learned, UINT64_MAX when they cannot be. */
static _Atomic uint64_t zero_pfn;

/* A page of the library's that is never written (zero-initialized, its
 * own page: anonymous memory, not the file's): its first read maps the
 * zero page, whose frame pagemap then gives (or 0 when it hides frames
 * from this process). */
static volatile char never_written[4096] __attribute__((aligned(4096)));

static uint64_t page_size(void)
{
    return (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The zero page's frame, learned once (UINT64_MAX: frames are hidden). */
static uint64_t learn_zero_pfn(int fd)
{
    uint64_t pfn = atomic_load_explicit(&zero_pfn, memory_order_relaxed);
    uintptr_t page = (uintptr_t)never_written;
    uint64_t entry = 0;

    if (pfn != 0)
        return pfn;
    (void)never_written[0];
    if (pread(fd, &entry, sizeof entry,
              (off_t)(page / page_size() * sizeof entry)) != sizeof entry ||
        !(entry & PM_PRESENT) || (entry & PM_PFN_MASK) == 0)
        pfn = UINT64_MAX;
    else
        pfn = entry & PM_PFN_MASK;
    atomic_store_explicit(&zero_pfn, pfn, memory_order_relaxed);
    return pfn;
}

int ra__resident_open(void)
{
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

    if (fd >= 0)
        (void)learn_zero_pfn(fd);
    return fd;
}

/* Whether a present anonymous page that this process does not map alone
 * is its own: shared with a forked process (the kernel counts it in both
 * resident sets), or the zero page (counted in none). By its frame when
 * frames can be read; else, in a process that never forked, it can only
 * be the zero page (or a page KSM merged, which madvise must have asked
 * for); after a fork it is counted, so that a page shared with the other
 * process is never missed (a page read and never written is then counted,
 * as mincore would). */
static bool shared_is_owned(uint64_t entry, uint64_t zero)
{
    if (zero != UINT64_MAX && (entry & PM_PFN_MASK) != 0)
        return (entry & PM_PFN_MASK) != zero;
    return atomic_load_explicit(&forked, memory_order_relaxed);
}

bool ra__resident_range(int fd, uintptr_t start, uintptr_t end,
                        size_t *bytes)
{
    uint64_t entries[CHUNK], page = page_size(), zero = learn_zero_pfn(fd);
    uint64_t first = start / page, last = (end + page - 1) / page;
    size_t owned = 0;

    while (first < last) {
        uint64_t n = last - first < CHUNK ? last - first : CHUNK;
        ssize_t got = pread(fd, entries, n * sizeof entries[0],
                            (off_t)(first * sizeof entries[0]));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0 || got % (ssize_t)sizeof entries[0] != 0)
            return true;
        n = (uint64_t)got / sizeof entries[0];
        for (uint64_t i = 0; i < n; i++) {
            uint64_t e = entries[i];
            if ((e & (PM_PRESENT | PM_FILE)) != PM_PRESENT)
                continue;
            owned += (e & PM_EXCLUSIVE) || shared_is_owned(e, zero);
        }
        first += n;
    }
    *bytes = owned * (size_t)page;
    return false;
}

void ra__resident_forked(void)
{
    atomic_store_explicit(&forked, true, memory_order_relaxed);
}

/* Floor: region. A region's carving: the never-used part of its
 * reservation handed out front to back, made writable as it goes (the
 * reserved part by mprotect, given-back space by a new mapping), and given
 * back again under a lowered address-space limit. */
#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "region.h"

/* The system calls themselves: where the library stands in front of mmap
 * and munmap (override_mmap.c, a floor above), the reservation's mappings
 * need no note: they are not jemalloc's. */
void *ra__sys_mmap(void *addr, size_t len, int prot, int flags)
{
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, -1, (off_t)0);
}

int ra__sys_munmap(void *addr, size_t len)
{
    return (int)syscall(SYS_munmap, addr, len);
}

/* Growth of a carving's writable part, and the give-back, one at a time:
 * growth is rare (jemalloc grows an arena by large extents), and a give-back
 * must not unmap what a growth just made writable. Taken inside the extent
 * hooks (lock.h). */
static struct ra__mutex grow_lock = RA__MUTEX_INIT(RA__RANK_GROW);
/* Why this thread's last carving could not map given-back space (see
 * ra__map_anew) or its commit was refused (ENOMEM), 0 when none failed,
 * for the errno of an arena that could not be made (ra__region_refusal):
 * the limit's refusal may pass, another mapping's space is not ours. */
static RA__TLS int tls_space_refusal;

int ra__map_anew(uintptr_t addr, size_t len)
{
    void *p = ra__sys_mmap((void *)addr, len, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
                               MAP_FIXED_NOREPLACE);

    if (p == MAP_FAILED)
        return errno == EEXIST ? EEXIST : ENOMEM;
    if (p != (void *)addr) {
        ra__sys_munmap(p, len);
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
                   (refusal = ra__map_anew(from, end - from)) != 0) {
            tls_space_refusal = refusal;
            failed = true;
        } else {
            atomic_store_explicit(&r->writable_end, end,
                                  memory_order_release);
        }
    }
    /* Invariant 5: a refusal leaves the writable end where it was. */
    ra__assert(!failed || atomic_load_explicit(&r->writable_end,
                                               memory_order_relaxed) == done);
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
    if (keep < reserved && ra__sys_munmap((void *)keep, reserved - keep) == 0) {
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

void ra__region_refused(int why)
{
    tls_space_refusal = why;
}

void ra__region_refusal_clear(void)
{
    tls_space_refusal = 0;
}

int ra__region_refusal(void)
{
    return tls_space_refusal;
}

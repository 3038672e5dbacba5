/* Floor: API. mmap and munmap, which the library stands in front of so
 * that it knows where jemalloc's memory lies outside the tags' regions
 * (mappings.c): each is the system call, as the C library's is, and then
 * a note of what it mapped or unmapped. The C library's own mappings
 * (thread stacks, the dynamic loader's) do not come here; jemalloc's,
 * the program's and other libraries' do. */
#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend.h"
#include "internal.h"

RA_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd,
                     off_t offset)
{
    void *p;

    /* What the C library checks before the call on this architecture. */
    if ((uint64_t)offset & ((uint64_t)sysconf(_SC_PAGESIZE) - 1)) {
        errno = EINVAL;
        return MAP_FAILED;
    }
    p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, offset);
    if (p != MAP_FAILED && (flags & MAP_ANONYMOUS))
        ra__mappings_noted(p, len, (flags & MAP_FIXED) != 0,
                           __builtin_return_address(0));
    return p;
}

RA_EXPORT int munmap(void *addr, size_t len)
{
    int rc = (int)syscall(SYS_munmap, addr, len);

    if (rc == 0)
        ra__mappings_forget(addr, len);
    return rc;
}

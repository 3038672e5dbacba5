/* Floor: API. The resource-limit functions the library stands in front of:
 * setrlimit and prlimit (and their 64-bit names, the same functions on
 * 64-bit Linux). A lower address-space limit (RLIMIT_AS) counts every
 * mapping, the reservation's PROT_NONE part included: before one is set, the
 * library gives back the address space no tag uses, so that the program can
 * still start threads and map memory under it. Each then does what the C
 * library's does (the prlimit64 system call). */
#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "tags.h"

/* A finite limit on the calling process's own address space. */
static void before(pid_t pid, int resource, const struct rlimit *limit)
{
    if (resource == RLIMIT_AS && limit != NULL &&
        limit->rlim_cur != RLIM_INFINITY && (pid == 0 || pid == getpid()))
        ra__tag_give_back_address_space();
}

static int set_limit(pid_t pid, int resource, const struct rlimit *limit,
                     struct rlimit *old)
{
    before(pid, resource, limit);
    return (int)syscall(SYS_prlimit64, pid, resource, limit, old);
}

RA_EXPORT int setrlimit(__rlimit_resource_t resource,
                        const struct rlimit *limit)
{
    return set_limit(0, (int)resource, limit, NULL);
}

RA_EXPORT int setrlimit64(__rlimit_resource_t resource,
                          const struct rlimit64 *limit)
{
    return set_limit(0, (int)resource, (const struct rlimit *)limit, NULL);
}

RA_EXPORT int prlimit(pid_t pid, __rlimit_resource_t resource,
                      const struct rlimit *limit, struct rlimit *old)
{
    return set_limit(pid, (int)resource, limit, old);
}

RA_EXPORT int prlimit64(pid_t pid, __rlimit_resource_t resource,
                        const struct rlimit64 *limit, struct rlimit64 *old)
{
    return set_limit(pid, (int)resource, (const struct rlimit *)limit,
                     (struct rlimit *)old);
}

/* Floor: OS. What the kernel says about the process: time since the library
 * was loaded, resident set size, its peak, resetting that peak, and its
 * mappings. Plain open/read/write, no stdio: a checkpoint must not allocate
 * under the tag the caller has pushed, and these run in the middle of one. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static _Atomic uint64_t load_time_ns;

static uint64_t monotonic_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ra__clock_start(void)
{
    uint64_t zero = 0;

    atomic_compare_exchange_strong(&load_time_ns, &zero, monotonic_ns());
}

void ra__deadline_add(struct timespec *t, uint64_t ns)
{
    t->tv_sec += (time_t)(ns / 1000000000u);
    t->tv_nsec += (long)(ns % 1000000000u);
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

uint64_t ra__clock_ns(void)
{
    uint64_t zero = atomic_load_explicit(&load_time_ns, memory_order_relaxed);
    uint64_t now = monotonic_ns();

    /* Called from another library's constructor before ours: that call is
     * time zero. */
    if (zero == 0) {
        atomic_compare_exchange_strong(&load_time_ns, &zero, now);
        zero = atomic_load_explicit(&load_time_ns, memory_order_relaxed);
    }
    return now > zero ? now - zero : 0;
}

uint64_t ra__clock_coarse_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return ra__clock_ns();
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Reads up to len - 1 bytes of path into buf, NUL-terminated. Returns true
 * on failure. */
static bool read_small_file(const char *path, char *buf, size_t len)
{
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return true;
    while (got + 1 < len) {
        ssize_t n = read(fd, buf + got, len - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return got == 0;
}

size_t ra__proc_rss(void)
{
    char buf[128], *p;
    unsigned long long pages;
    long page = sysconf(_SC_PAGESIZE);

    /* "size resident shared text lib data dt", in pages. */
    if (page <= 0 || read_small_file("/proc/self/statm", buf, sizeof buf))
        return 0;
    p = strchr(buf, ' ');
    if (p == NULL)
        return 0;
    pages = strtoull(p + 1, NULL, 10);
    return (size_t)pages * (size_t)page;
}

size_t ra__proc_peak_rss(void)
{
    /* /proc/self/status is about 1.5 KiB; VmHWM sits in the first half. */
    char buf[4096];
    const char *p;

    if (read_small_file("/proc/self/status", buf, sizeof buf))
        return 0;
    p = strstr(buf, "\nVmHWM:");
    if (p == NULL)
        return 0;
    return (size_t)strtoull(p + 7, NULL, 10) * 1024; /* "   1234 kB" */
}

/* Set once the kernel refused the reset (no /proc, not permitted, a kernel
 * before 4.0): it is not asked again at every checkpoint. */
static bool peak_reset_refused;

bool ra__proc_reset_peak_rss(void)
{
    int fd;
    bool failed;

    if (__atomic_load_n(&peak_reset_refused, __ATOMIC_RELAXED))
        return true;
    fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    /* 5: reset the peak RSS (VmHWM) to the current RSS. */
    failed = fd < 0 || write(fd, "5", 1) != 1;
    if (failed && (errno == ENOENT || errno == EACCES || errno == EPERM ||
                   errno == EINVAL))
        __atomic_store_n(&peak_reset_refused, true, __ATOMIC_RELAXED);
    if (fd >= 0)
        close(fd);
    return failed;
}

bool ra__proc_maps(bool (*line)(char *text, size_t len, void *ctx),
                   void *ctx)
{
    /* A line of the file: the mapping's fields and a path of up to
     * PATH_MAX bytes. */
    char buf[8192];
    size_t have = 0;
    bool cutting = false; /* inside a line too long for buf: dropped */
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return true;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        char *start = buf, *nl;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        while ((nl = memchr(start, '\n', have - (size_t)(start - buf))) !=
               NULL) {
            *nl = '\0';
            if (!cutting && line(start, (size_t)(nl - start), ctx)) {
                close(fd);
                return false;
            }
            cutting = false;
            start = nl + 1;
        }
        have -= (size_t)(start - buf);
        memmove(buf, start, have);
        if (have == sizeof buf - 1) {
            cutting = true;
            have = 0;
        }
    }
    close(fd);
    if (have > 0 && !cutting) {
        buf[have] = '\0';
        line(buf, have, ctx);
    }
    return false;
}

/* The number after "\n<name><sep>" in text (a /proc status or a cgroup's
 * memory.stat), times unit; 0 when absent. */
static uint64_t number_after(const char *text, const char *name, char sep,
                             uint64_t unit)
{
    char key[32];
    const char *p;

    snprintf(key, sizeof key, "\n%s%c", name, sep);
    p = strstr(text, key);
    return p == NULL ? 0
                     : (uint64_t)strtoull(p + strlen(key), NULL, 10) * unit;
}

/* The number of kB after "\nName:" in a /proc status text, in bytes; 0
 * when absent. */
static uint64_t status_kib(const char *text, const char *name)
{
    return number_after(text, name, ':', 1024);
}

bool ra__proc_status(struct ra__proc_status *out)
{
    /* /proc/self/status is about 1.5 KiB. */
    char buf[4096];

    if (read_small_file("/proc/self/status", buf, sizeof buf) ||
        strstr(buf, "\nRssAnon:") == NULL)
        return true;
    *out = (struct ra__proc_status){
        .rss_anon = status_kib(buf, "RssAnon"),
        .rss_file = status_kib(buf, "RssFile"),
        .rss_shmem = status_kib(buf, "RssShmem"),
        .page_tables = status_kib(buf, "VmPTE"),
    };
    return false;
}

/* The first line of dir/file as a number; false when absent, unreadable
 * or "max" (*n is then 0). */
static bool read_number(const char *dir, const char *file, uint64_t *n)
{
    char path[1100], buf[64];

    *n = 0;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >=
            sizeof path ||
        read_small_file(path, buf, sizeof buf) || buf[0] < '0' ||
        buf[0] > '9')
        return false;
    *n = (uint64_t)strtoull(buf, NULL, 10);
    return true;
}

/* The bytes after "\nname " in memory.stat's text; 0 when absent. */
static uint64_t stat_bytes(const char *text, const char *name)
{
    return number_after(text, name, ' ', 1);
}

bool ra__proc_cgroup_dir(const char *given, char *dir, size_t len)
{
    const char *roots[] = {given != NULL ? given : "", "/sys/fs/cgroup",
                           "/sys/fs/cgroup/unified"};
    char line[512], probe[1100], *path = NULL;
    int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return true;
    n = read(fd, line, sizeof line - 1);
    close(fd);
    if (n <= 0)
        return true;
    line[n] = '\0';
    /* The v2 hierarchy's line, "0::PATH". */
    for (char *l = line; l != NULL && path == NULL; l = strchr(l, '\n')) {
        if (*l == '\n')
            l++;
        if (strncmp(l, "0::", 3) == 0)
            path = l + 3;
    }
    if (path == NULL)
        return true;
    path[strcspn(path, "\n")] = '\0';
    /* The mount given is the only one looked at. */
    for (unsigned i = given != NULL ? 0 : 1; i < (given != NULL ? 1u : 3u);
         i++) {
        if ((size_t)snprintf(probe, sizeof probe, "%s/cgroup.controllers",
                             roots[i]) >= sizeof probe ||
            access(probe, R_OK) != 0)
            continue;
        if ((size_t)snprintf(dir, len, "%s%s", roots[i], path) >= len)
            return true;
        return false;
    }
    return true;
}

bool ra__proc_cgroup(const char *dir, struct ra__proc_cgroup *out)
{
    /* memory.stat is some 40 lines; anon and file are among the first. */
    char path[1100], buf[4096];
    uint64_t high;

    memset(out, 0, sizeof *out);
    if (!read_number(dir, "memory.current", &out->current))
        return true;
    if ((size_t)snprintf(path, sizeof path, "%s/memory.stat", dir) <
            sizeof path &&
        !read_small_file(path, buf + 1, sizeof buf - 1)) {
        buf[0] = '\n';
        out->anon = stat_bytes(buf, "anon");
        out->file = stat_bytes(buf, "file");
    }
    if (read_number(dir, "memory.high", &high))
        out->limit = high;
    else
        (void)read_number(dir, "memory.max", &out->limit);
    return false;
}

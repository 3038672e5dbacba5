/* Reading a live stats segment safely: opening it without following links,
 * mapping it, surviving its shrinking (SIGBUS), the seqlock copy with its
 * checks and retries, staleness, and the list of segments in a directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "segment.h"

/* A live publisher holds seq odd for microseconds once per interval, so
 * 100 attempts 1 ms apart only fail against a stuck or hostile writer. */
#define READ_ATTEMPTS 100

/* A segment mapped read-only, for the time of one copy. */
struct mapping {
    const unsigned char *base;
    size_t size;
};

enum attempt { ATTEMPT_OK, ATTEMPT_TORN, ATTEMPT_BAD, ATTEMPT_SHRUNK };

/* The mapping may shrink under us if its owner truncates the file: the
 * read then raises SIGBUS, which jumps back here instead of killing us. */
static sigjmp_buf bus_jump;
static volatile sig_atomic_t bus_armed;

/* Writes what is wrong into why (WHY_MAX bytes). Returns true, the
 * failure of the functions that report through why. */
__attribute__((format(printf, 2, 3)))
static bool fail_with(char *why, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    /* clang-tidy 14 loses the va_start when it analyses this file after
     * another in the same run: a false report, absent when run alone. */
    /* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized) */
    vsnprintf(why, WHY_MAX, fmt, ap);
    va_end(ap);
    return true;
}

/* -- reading a segment --------------------------------------------------- */

static void on_bus_error(int sig)
{
    (void)sig;
    if (bus_armed) {
        bus_armed = 0;
        siglongjmp(bus_jump, 1);
    }
    /* Not ours: back to the default, and the faulting access dies. */
    signal(SIGBUS, SIG_DFL);
}

void catch_bus_errors(void)
{
    struct sigaction bus = {.sa_handler = on_bus_error};

    sigemptyset(&bus.sa_mask);
    sigaction(SIGBUS, &bus, NULL);
}

/* The seqlock's word. Returns true if the file shrank under the read. */
static bool load_seq(const struct mapping *m, uint64_t *seq)
{
    const uint64_t *word =
        (const uint64_t *)(const void *)(m->base +
                                         offsetof(struct ra_shm_header, seq));

    if (sigsetjmp(bus_jump, 1) != 0)
        return true;
    bus_armed = 1;
    *seq = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    bus_armed = 0;
    return false;
}

/* Copies len bytes at offset off. Returns true if the file shrank. */
static bool copy_bytes(void *dst, const struct mapping *m, size_t off,
                       size_t len)
{
    /* memcpy wants valid pointers even for no byte, and the records of a
     * copy that never had one are NULL. */
    if (len == 0)
        return false;
    if (sigsetjmp(bus_jump, 1) != 0)
        return true;
    bus_armed = 1;
    memcpy(dst, m->base + off, len);
    bus_armed = 0;
    return false;
}

/* Checks what the header says against the file it is in. Returns true
 * (why set) when the copy is not a segment this reader can trust. */
static bool check_header(const struct ra_shm_header *h, size_t file_size,
                         char *why)
{
    uint64_t needed;

    if (memcmp(h->magic, RA_SHM_MAGIC, sizeof h->magic) != 0)
        return fail_with(why, "bad magic: not a regionalloc stats segment");
    if (h->version != RA_SHM_VERSION)
        return fail_with(why, "version %" PRIu32 ", this reader knows %u",
                         h->version, RA_SHM_VERSION);
    if (h->header_size != sizeof(struct ra_shm_header))
        return fail_with(why, "header_size %" PRIu32 ", expected %zu",
                         h->header_size, sizeof(struct ra_shm_header));
    if (h->record_size != sizeof(struct ra_shm_record))
        return fail_with(why, "record_size %" PRIu32 ", expected %zu",
                         h->record_size, sizeof(struct ra_shm_record));
    /* In 64 bits: 2^32 records of 256 bytes cannot overflow it. */
    needed = (uint64_t)h->header_size + (uint64_t)h->capacity * h->record_size;
    if (needed > file_size)
        return fail_with(why,
                         "capacity %" PRIu32 " needs %" PRIu64
                         " bytes, the file has %zu",
                         h->capacity, needed, file_size);
    if (h->nrecords > h->capacity)
        return fail_with(why, "nrecords %" PRIu32 " exceeds capacity %" PRIu32,
                         h->nrecords, h->capacity);
    if (memchr(h->http, '\0', sizeof h->http) == NULL)
        return fail_with(why, "http address without a NUL");
    return false;
}

/* Returns true (why set) unless each live record names its own id and
 * holds a NUL-terminated name. */
static bool check_records(const struct segment_copy *c, char *why)
{
    for (uint32_t i = 0; i < c->header.nrecords; i++) {
        const struct ra_shm_record *r = &c->records[i];
        if (!(r->flags & RA_SHM_RECORD_LIVE))
            continue;
        if (r->id != i + 1)
            return fail_with(why, "record %" PRIu32 " has id %" PRIu32
                             ", expected %" PRIu32, i, r->id, i + 1);
        if (memchr(r->name, '\0', sizeof r->name) == NULL)
            return fail_with(why, "record %" PRIu32 ": name without a NUL", i);
    }
    /* Tag trees: a live record's parent is a live record one level up, so
     * that a walk up a chain always ends (no cycle can pass this). */
    for (uint32_t i = 0; i < c->header.nrecords; i++) {
        const struct ra_shm_record *r = &c->records[i], *p;
        if (!(r->flags & RA_SHM_RECORD_LIVE))
            continue;
        if (r->depth < 1 || r->depth > 8 ||
            (r->parent == 0) != (r->depth == 1))
            return fail_with(why, "record %" PRIu32 ": depth %" PRIu32
                             " with parent %" PRIu32, i, r->depth, r->parent);
        if (r->parent == 0)
            continue;
        if (r->parent > c->header.nrecords)
            return fail_with(why, "record %" PRIu32 ": parent %" PRIu32
                             " past nrecords", i, r->parent);
        p = &c->records[r->parent - 1];
        if (!(p->flags & RA_SHM_RECORD_LIVE) || p->depth + 1 != r->depth)
            return fail_with(why, "record %" PRIu32 ": parent %" PRIu32
                             " is not a live tag one level up", i, r->parent);
    }
    return false;
}

/* Makes room for n records. Returns true (why set) when out of memory. */
static bool reserve_records(struct segment_copy *c, uint32_t n, char *why)
{
    struct ra_shm_record *r;

    if (n <= c->room)
        return false;
    r = realloc(c->records, (size_t)n * sizeof *r);
    if (r == NULL)
        return fail_with(why, "out of memory for %" PRIu32 " records", n);
    c->records = r;
    c->room = n;
    return false;
}

/* One pass of the seqlock read. A copy that fails a check is reported as
 * bad only if seq says it was not torn. */
static enum attempt try_copy(const struct mapping *m, struct segment_copy *c,
                             char *why)
{
    uint64_t first, last;
    bool bad;

    if (load_seq(m, &first) || copy_bytes(&c->header, m, 0, sizeof c->header))
        return ATTEMPT_SHRUNK;
    if (first & 1)
        return ATTEMPT_TORN;
    bad = check_header(&c->header, m->size, why) ||
          reserve_records(c, c->header.nrecords, why);
    if (!bad && copy_bytes(c->records, m, sizeof c->header,
                           (size_t)c->header.nrecords * sizeof *c->records))
        return ATTEMPT_SHRUNK;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (load_seq(m, &last))
        return ATTEMPT_SHRUNK;
    if (last != first || c->header.seq != first)
        return ATTEMPT_TORN;
    return bad || check_records(c, why) ? ATTEMPT_BAD : ATTEMPT_OK;
}

/* Retries torn copies, and bad ones too: a segment being created is all
 * zeros for a moment. Returns true (why set) if no attempt succeeded. */
static bool copy_consistent(const struct mapping *m, struct segment_copy *c,
                            char *why)
{
    enum attempt a = ATTEMPT_TORN;

    for (int i = 0; i < READ_ATTEMPTS; i++) {
        if (i > 0)
            sleep_ns(1000000);
        a = try_copy(m, c, why);
        if (a == ATTEMPT_OK) {
            c->taken_ns = monotonic_ns();
            return false;
        }
        if (a == ATTEMPT_SHRUNK)
            return fail_with(why, "the file shrank while being read");
    }
    if (a == ATTEMPT_TORN)
        fail_with(why, "no consistent copy in %d attempts: seq stays odd or "
                  "keeps changing", READ_ATTEMPTS);
    return true;
}

/* Checks what fstat says: a regular file large enough for a header, and
 * small enough to map. Returns true (why set) otherwise. */
static bool check_file(const struct stat *st, char *why)
{
    if (!S_ISREG(st->st_mode))
        return fail_with(why, "not a regular file");
    if (st->st_size == 0)
        return fail_with(why, "empty file");
    if (st->st_size < (off_t)sizeof(struct ra_shm_header))
        return fail_with(why, "%jd bytes, too short for the %zu-byte header",
                         (intmax_t)st->st_size, sizeof(struct ra_shm_header));
    if ((uintmax_t)st->st_size > SIZE_MAX)
        return fail_with(why, "%jd bytes, too large to map",
                         (intmax_t)st->st_size);
    return false;
}

/* Opens name in dirfd without following a link or blocking on a FIFO, and
 * maps it read-only if check_file accepts it. */
static enum read_result map_segment(int dirfd, const char *name,
                                    struct mapping *m, char *why)
{
    struct stat st;
    void *base = MAP_FAILED;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0 && errno == ENOENT)
        return READ_GONE;
    if (fd < 0) {
        fail_with(why, "%s", errno == ELOOP ? "a symbolic link, not followed"
                                            : strerror(errno));
        return READ_FAILED;
    }
    if (fstat(fd, &st) != 0)
        fail_with(why, "cannot stat it: %s", strerror(errno));
    else if (!check_file(&st, why)) {
        base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
            fail_with(why, "cannot map it: %s", strerror(errno));
    }
    close(fd);
    if (base == MAP_FAILED)
        return READ_FAILED;
    *m = (struct mapping){base, (size_t)st.st_size};
    return READ_OK;
}

enum read_result read_segment(int dirfd, const char *name,
                              struct segment_copy *c, char *why)
{
    struct mapping m;
    enum read_result r = map_segment(dirfd, name, &m, why);

    if (r != READ_OK)
        return r;
    r = copy_consistent(&m, c, why) ? READ_FAILED : READ_OK;
    munmap((void *)m.base, m.size);
    return r;
}

enum read_result read_pid_segment(int dirfd, long pid, struct segment_copy *c,
                                  char *why)
{
    char name[40];
    enum read_result r;

    snprintf(name, sizeof name, RA_SHM_PREFIX "%ld", pid);
    r = read_segment(dirfd, name, c, why);
    if (r == READ_OK && c->header.pid != pid) {
        fail_with(why, "names pid %" PRId32 ", not %ld: stale", c->header.pid,
                  pid);
        return READ_FAILED;
    }
    return r;
}

bool segment_age(const struct segment_copy *c, uint64_t *age)
{
    if (c->header.published == 0)
        return false;
    *age = c->taken_ns > c->header.monotonic_ns
               ? c->taken_ns - c->header.monotonic_ns
               : 0;
    return true;
}

/* -- names, staleness and the list --------------------------------------- */

void segment_path(char *buf, size_t size, const char *dir, long pid)
{
    snprintf(buf, size, "%s%s" RA_SHM_PREFIX "%ld", dir,
             dir[0] != '\0' && dir[strlen(dir) - 1] == '/' ? "" : "/", pid);
}

bool process_gone(long pid)
{
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* A segment unreadable but named after a dead process is stale: its
 * process may have died creating it. */
const char *stale_reason(int dirfd, long pid, char *buf, size_t size)
{
    char name[40], why[WHY_MAX];
    struct segment_copy c = {0};
    bool named_other;

    if (process_gone(pid)) {
        snprintf(buf, size, "process %ld is gone", pid);
        return buf;
    }
    snprintf(name, sizeof name, RA_SHM_PREFIX "%ld", pid);
    named_other = read_segment(dirfd, name, &c, why) == READ_OK &&
                  c.header.pid != pid;
    if (named_other)
        snprintf(buf, size, "it names pid %" PRId32, c.header.pid);
    free(c.records);
    return named_other ? buf : NULL;
}

/* The pid in a segment's name: "regionalloc." then a decimal without a
 * leading zero. 0 for any other name. */
static long pid_of_name(const char *name)
{
    const char *d = name + strlen(RA_SHM_PREFIX);
    long pid = 0;

    if (strncmp(name, RA_SHM_PREFIX, strlen(RA_SHM_PREFIX)) != 0 ||
        *d < '1' || *d > '9')
        return 0;
    for (; *d >= '0' && *d <= '9'; d++) {
        pid = pid * 10 + (*d - '0');
        if (pid > INT32_MAX)
            return 0;
    }
    return *d == '\0' ? pid : 0;
}

static int compare_pids(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;

    return x < y ? -1 : x > y;
}

long *list_segments(int dirfd, size_t *n)
{
    DIR *dir = fdopendir(dup(dirfd));
    long *pids = NULL;
    size_t room = 0;
    struct dirent *e;

    *n = 0;
    if (dir == NULL)
        return NULL;
    while ((e = readdir(dir)) != NULL) {
        long pid = pid_of_name(e->d_name);
        if (pid == 0)
            continue;
        if (*n == room) {
            long *more = realloc(pids, (room = room * 2 + 16) * sizeof *pids);
            if (more == NULL) {
                free(pids);
                closedir(dir);
                return NULL;
            }
            pids = more;
        }
        pids[(*n)++] = pid;
    }
    closedir(dir);
    /* qsort's base must not be NULL, even for no element. */
    if (pids == NULL)
        return malloc(sizeof *pids);
    qsort(pids, *n, sizeof *pids, compare_pids);
    return pids;
}

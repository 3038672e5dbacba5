/* Reading a live stats segment safely: finding the file the process's user
 * owns, opening it without following links, mapping no more than a
 * library writes, refusing holes, surviving its shrinking (SIGBUS), the
 * seqlock copy with its checks and retries, staleness, and the list of
 * segments in a directory. */
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

/* A segment mapped read-only, for the time of one copy: no more of it
 * than the largest segment a library writes, however large the file. */
struct mapping {
    const unsigned char *base;
    size_t size;      /* mapped */
    size_t file_size; /* the file's, which the header is checked against */
    int fd;           /* open while mapped, to look for holes */
};

/* Whose a segment must be: the process's (effective) user; anyone's once
 * the process is gone, when the segment is stale whoever made it. */
struct owner {
    long pid;
    bool anyone;
    uid_t uid;
};

/* ATTEMPT_VERSION: a consistent copy of a segment of another version. */
enum attempt {
    ATTEMPT_OK, ATTEMPT_TORN, ATTEMPT_BAD, ATTEMPT_SHRUNK, ATTEMPT_VERSION
};

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
    if (h->capacity > RA_SHM_CAPACITY_MAX)
        return fail_with(why,
                         "capacity %" PRIu32 " exceeds %u, the most records "
                         "a library writes",
                         h->capacity, RA_SHM_CAPACITY_MAX);
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

/* Whether the file's first len bytes hold a hole: bytes never written. A
 * publisher writes its header before the file has its name, and every
 * record in use at each publication, so a hole there is a sparse file made
 * to look full, whose reading would fill memory (and tmpfs, which gives a
 * read hole a page of its own) with zeros. */
static bool holds_hole(int fd, uint64_t len)
{
    off_t hole = lseek(fd, 0, SEEK_HOLE);

    return hole >= 0 && (uint64_t)hole < len;
}

/* Returns true (why set) if the records in use of a checked header are
 * not all written. */
static bool check_written(const struct mapping *m, const struct ra_shm_header *h,
                          char *why)
{
    if (!holds_hole(m->fd, ra_shm_size(h->nrecords)))
        return false;
    return fail_with(why, "a hole where its %" PRIu32 " records in use "
                     "should be: never written", h->nrecords);
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
    bad = check_header(&c->header, m->file_size, why) ||
          check_written(m, &c->header, why) ||
          reserve_records(c, c->header.nrecords, why);
    if (!bad && copy_bytes(c->records, m, sizeof c->header,
                           (size_t)c->header.nrecords * sizeof *c->records))
        return ATTEMPT_SHRUNK;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (load_seq(m, &last))
        return ATTEMPT_SHRUNK;
    if (last != first || c->header.seq != first)
        return ATTEMPT_TORN;
    /* Its fields past the version are another layout's: what is wrong
     * is the version (check_header said so first). */
    if (memcmp(c->header.magic, RA_SHM_MAGIC, sizeof c->header.magic) == 0 &&
        c->header.version != RA_SHM_VERSION)
        return ATTEMPT_VERSION;
    return bad || check_records(c, why) ? ATTEMPT_BAD : ATTEMPT_OK;
}

/* Retries torn copies, and bad ones too: a segment being created is all
 * zeros for a moment. Returns READ_OK, READ_VERSION (why set) for a
 * segment of another version, or READ_FAILED (why set) if no attempt
 * succeeded. */
static enum read_result copy_consistent(const struct mapping *m,
                                        struct segment_copy *c, char *why)
{
    enum attempt a = ATTEMPT_TORN;

    for (int i = 0; i < READ_ATTEMPTS; i++) {
        if (i > 0)
            sleep_ns(1000000);
        a = try_copy(m, c, why);
        if (a == ATTEMPT_OK) {
            c->taken_ns = monotonic_ns();
            return READ_OK;
        }
        if (a == ATTEMPT_VERSION)
            return READ_VERSION;
        if (a == ATTEMPT_SHRUNK) {
            fail_with(why, "the file shrank while being read");
            return READ_FAILED;
        }
    }
    if (a == ATTEMPT_TORN)
        fail_with(why, "no consistent copy in %d attempts: seq stays odd or "
                  "keeps changing", READ_ATTEMPTS);
    return READ_FAILED;
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

/* Returns true (why set) unless want may own a file of owner's. */
static bool foreign(const struct owner *want, uid_t owner, char *why)
{
    if (want->anyone || owner == want->uid)
        return false;
    return fail_with(why, "owned by uid %ju, not by the user of process %ld "
                     "(uid %ju): not its segment",
                     (uintmax_t)owner, want->pid, (uintmax_t)want->uid);
}

/* Why name could not be opened (errno): READ_GONE if it is not there,
 * READ_FOREIGN if it is another user's than want says (the mode 0600 of
 * theirs keeps it closed), else READ_FAILED. */
static enum read_result open_failure(int dirfd, const char *name,
                                     const struct owner *want, char *why)
{
    int err = errno;
    struct stat st;

    if (err == ENOENT)
        return READ_GONE;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        foreign(want, st.st_uid, why))
        return READ_FOREIGN;
    fail_with(why, "%s", err == ELOOP ? "a symbolic link, not followed"
                                      : strerror(err));
    return READ_FAILED;
}

/* Opens name in dirfd without following a link or blocking on a FIFO, and
 * maps it read-only if it is want's and check_file accepts it. */
static enum read_result map_segment(int dirfd, const char *name,
                                    const struct owner *want,
                                    struct mapping *m, char *why)
{
    struct stat st;
    void *base = MAP_FAILED;
    size_t len = 0;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0)
        return open_failure(dirfd, name, want, why);
    if (fstat(fd, &st) != 0) {
        fail_with(why, "cannot stat it: %s", strerror(errno));
    } else if (foreign(want, st.st_uid, why)) {
        close(fd);
        return READ_FOREIGN;
    } else if (!check_file(&st, why)) {
        len = ra_shm_size(RA_SHM_CAPACITY_MAX);
        if ((uintmax_t)st.st_size < len)
            len = (size_t)st.st_size;
        if (holds_hole(fd, sizeof(struct ra_shm_header)))
            fail_with(why, "a hole where its header should be: never written");
        else if ((base = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0)) ==
                 MAP_FAILED)
            fail_with(why, "cannot map it: %s", strerror(errno));
    }
    if (base == MAP_FAILED) {
        close(fd);
        return READ_FAILED;
    }
    *m = (struct mapping){base, len, (size_t)st.st_size, fd};
    return READ_OK;
}

/* Reads the file name in dirfd, which want must own, into *c. */
static enum read_result read_named(int dirfd, const char *name,
                                   const struct owner *want,
                                   struct segment_copy *c, char *why)
{
    struct mapping m;
    enum read_result r = map_segment(dirfd, name, want, &m, why);

    if (r != READ_OK)
        return r;
    r = copy_consistent(&m, c, why);
    munmap((void *)m.base, m.size);
    close(m.fd);
    return r;
}

/* The effective uid of process pid, from its status in /proc (its
 * directory there is root's when the process is not dumpable): 0, or an
 * errno. */
static int process_uid(long pid, uid_t *uid)
{
    char path[40], line[256];
    unsigned long real, effective;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    f = fopen(path, "re");
    if (f == NULL)
        return errno;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Uid: %lu %lu", &real, &effective) == 2) {
            fclose(f);
            *uid = (uid_t)effective;
            return 0;
        }
    fclose(f);
    return EIO;
}

/* Whose the segment of pid must be. Returns true (why set) if the process
 * runs but its user cannot be told. */
static bool owner_of(long pid, struct owner *want, char *why)
{
    int err;

    *want = (struct owner){.pid = pid};
    err = process_uid(pid, &want->uid);
    if (err == 0)
        return false;
    if (process_gone(pid)) {
        want->anyone = true;
        return false;
    }
    return fail_with(why, "cannot tell the user of process %ld: %s", pid,
                     strerror(err));
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

void segment_path(char *buf, size_t size, const char *dir, const char *name)
{
    snprintf(buf, size, "%s%s%s", dir,
             dir[0] != '\0' && dir[strlen(dir) - 1] == '/' ? "" : "/", name);
}

void segment_name(char *name, long pid)
{
    snprintf(name, SEGMENT_NAME_MAX, RA_SHM_PREFIX "%ld", pid);
}

bool process_gone(long pid)
{
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* A segment unreadable but named after a dead process is stale: its
 * process may have died creating it. */
const char *stale_reason(int dirfd, const struct segment_entry *e, char *buf,
                         size_t size)
{
    const struct owner anyone = {.pid = e->pid, .anyone = true};
    char why[WHY_MAX];
    struct segment_copy c = {0};
    struct stat st;
    uid_t uid;
    bool named_other;

    if (process_gone(e->pid)) {
        snprintf(buf, size, "process %ld is gone", e->pid);
        return buf;
    }
    /* A pid reused by another user's process. */
    if (fstatat(dirfd, e->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        process_uid(e->pid, &uid) == 0 && uid != st.st_uid) {
        snprintf(buf, size, "process %ld is uid %ju's", e->pid,
                 (uintmax_t)uid);
        return buf;
    }
    named_other = read_named(dirfd, e->name, &anyone, &c, why) == READ_OK &&
                  c.header.pid != e->pid;
    if (named_other)
        snprintf(buf, size, "it names pid %" PRId32, c.header.pid);
    free(c.records);
    return named_other ? buf : NULL;
}

/* The pid in a segment's name: "regionalloc." then a decimal without a
 * leading zero, then nothing or a fallback's suffix, '.' and
 * RA_SHM_FALLBACK_LEN letters or digits (*fallback says which). 0 for any
 * other name. */
static long pid_of_name(const char *name, bool *fallback)
{
    const char *d = name + strlen(RA_SHM_PREFIX);
    long pid = 0;

    *fallback = false;
    if (strncmp(name, RA_SHM_PREFIX, strlen(RA_SHM_PREFIX)) != 0 ||
        *d < '1' || *d > '9')
        return 0;
    for (; *d >= '0' && *d <= '9'; d++) {
        pid = pid * 10 + (*d - '0');
        if (pid > INT32_MAX)
            return 0;
    }
    *fallback = *d == '.';
    if (*fallback) {
        for (int i = 1; i <= RA_SHM_FALLBACK_LEN; i++)
            if (!((d[i] >= 'a' && d[i] <= 'z') || (d[i] >= 'A' && d[i] <= 'Z') ||
                  (d[i] >= '0' && d[i] <= '9')))
                return 0;
        d += 1 + RA_SHM_FALLBACK_LEN;
    }
    return *d == '\0' ? pid : 0;
}

/* Copies a name pid_of_name accepted (a pid of 10 digits at most, a
 * suffix of RA_SHM_FALLBACK_LEN + 1 bytes) into SEGMENT_NAME_MAX bytes. */
static void copy_name(char *dst, const char *name)
{
    size_t len = strnlen(name, SEGMENT_NAME_MAX - 1);

    memcpy(dst, name, len);
    dst[len] = '\0';
}

/* A listing of dirfd from its start, whatever dirfd's own offset. NULL
 * (errno set) on failure. */
static DIR *open_listing(int dirfd)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;

    if (dir == NULL && fd >= 0)
        close(fd);
    return dir;
}

/* Finds a fallback name of pid's in dirfd, a regular file want owns, into
 * name (SEGMENT_NAME_MAX bytes). The publisher removes its user's older
 * ones before it makes one, so there is one at most; other users' are
 * passed over, however many. Returns false if there is none. */
static bool find_fallback(int dirfd, long pid, const struct owner *want,
                          char *name)
{
    DIR *dir = open_listing(dirfd);
    struct dirent *e;
    bool found = false, fallback;
    struct stat st;

    if (dir == NULL)
        return false;
    while (!found && (e = readdir(dir)) != NULL) {
        if (pid_of_name(e->d_name, &fallback) != pid || !fallback ||
            fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode) || (!want->anyone && st.st_uid != want->uid))
            continue;
        copy_name(name, e->d_name);
        found = true;
    }
    closedir(dir);
    return found;
}

static int compare_entries(const void *a, const void *b)
{
    const struct segment_entry *x = a, *y = b;

    return x->pid != y->pid ? (x->pid < y->pid ? -1 : 1)
                            : strcmp(x->name, y->name);
}

struct segment_entry *list_segments(int dirfd, size_t *n)
{
    DIR *dir = open_listing(dirfd);
    struct segment_entry *entries = NULL;
    size_t room = 0;
    struct dirent *e;
    bool fallback;

    *n = 0;
    if (dir == NULL)
        return NULL;
    while ((e = readdir(dir)) != NULL) {
        long pid = pid_of_name(e->d_name, &fallback);
        if (pid == 0)
            continue;
        if (*n == room) {
            struct segment_entry *more =
                realloc(entries, (room = room * 2 + 16) * sizeof *entries);
            if (more == NULL) {
                free(entries);
                closedir(dir);
                return NULL;
            }
            entries = more;
        }
        entries[*n].pid = pid;
        copy_name(entries[*n].name, e->d_name);
        ++*n;
    }
    closedir(dir);
    /* qsort's base must not be NULL, even for no element. */
    if (entries == NULL)
        return malloc(sizeof *entries);
    qsort(entries, *n, sizeof *entries, compare_entries);
    return entries;
}

enum read_result read_pid_segment(int dirfd, long pid, struct segment_copy *c,
                                  char *name, char *why)
{
    struct owner want;
    char fallback[SEGMENT_NAME_MAX];
    enum read_result r;

    segment_name(name, pid);
    if (owner_of(pid, &want, why))
        return READ_FAILED;
    r = read_named(dirfd, name, &want, c, why);
    /* Another user's file may hold the name: the process then publishes
     * under a fallback name of its user's. */
    if ((r == READ_GONE || r == READ_FOREIGN) &&
        find_fallback(dirfd, pid, &want, fallback)) {
        memcpy(name, fallback, SEGMENT_NAME_MAX);
        r = read_named(dirfd, name, &want, c, why);
    }
    if (r == READ_OK && c->header.pid != pid) {
        fail_with(why, "names pid %" PRId32 ", not %ld: stale", c->header.pid,
                  pid);
        return READ_STALE;
    }
    return r;
}

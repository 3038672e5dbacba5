/* Reading one live stats segment file safely: opening it without
 * following links, mapping no more than a library writes, refusing holes,
 * surviving its shrinking (SIGBUS), and the seqlock copy with its checks
 * and retries. segment.c finds the file and tells staleness. */
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
#include "segment_read.h"

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

/* ATTEMPT_VERSION: a consistent copy of a segment of another version. */
enum attempt {
    ATTEMPT_OK, ATTEMPT_TORN, ATTEMPT_BAD, ATTEMPT_SHRUNK, ATTEMPT_VERSION
};

/* The mapping may shrink under us if its owner truncates the file: the
 * read then raises SIGBUS, which jumps back here instead of killing us. */
static sigjmp_buf bus_jump;
static volatile sig_atomic_t bus_armed;

bool fail_with(char *why, const char *fmt, ...)
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

enum read_result read_segment_file(int dirfd, const char *name,
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

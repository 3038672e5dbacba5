/* Floor: services. The live stats segment: with REGIONALLOC_SHM=1 a
 * background thread writes every tag's figures into
 * /dev/shm/regionalloc.<pid> (or a fallback name, when another user's file
 * holds that one) every REGIONALLOC_SHM_INTERVAL, under a seqlock (layout:
 * shm_layout.h, doc/shm.md), for regionalloc-top and other readers that
 * must not attach to the process. The process that made the segment
 * removes it at exit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "output.h"
#include "shm_layout.h"
#include "tags.h"

#define SHM_DIR "/dev/shm"

static struct ra_shm_header *segment; /* mapped, shared */
static uint32_t capacity;
static pid_t owner;                   /* the only process that unlinks it */
static char path[64];                 /* the name it has */
static atomic_bool stopping;

/* What a reader takes is bounded by what a library writes. */
_Static_assert(RA_SHM_CAPACITY_MAX == RA__MAX_TAGS_LIMIT,
               "the segment's capacity at most");

static uint64_t clock_of(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The segment's numbers are its own (readers compile against
 * shm_layout.h alone): they must stay those of the library's enums. */
_Static_assert(RA_SHM_PRESSURE_HIGH == RA_PRESSURE_HIGH &&
                   RA_SHM_PRESSURE_LIMIT == RA_PRESSURE_LIMIT &&
                   RA_SHM_LIMIT_CALL == RA__LIMIT_CALL &&
                   RA_SHM_LIMIT_ENV == RA__LIMIT_ENV &&
                   RA_SHM_LIMIT_CGROUP == RA__LIMIT_CGROUP,
               "the segment's pressure numbers");

static void figures_of(struct ra_shm_figures *f, const struct ra__usage *u)
{
    *f = (struct ra_shm_figures){
        .allocated = u->allocated, .active = u->active,
        .resident = u->resident, .rss = u->rss, .mapped = u->mapped,
        .peak_mapped = u->peak_mapped, .dirty = u->dirty, .muzzy = u->muzzy,
        .retained = u->retained, .reserved = u->reserved,
        .nmalloc = u->nmalloc, .ndalloc = u->ndalloc, .purges = u->purges,
        .limit = u->limit, .soft_limit = u->soft_limit,
        .limit_failures = u->limit_failures,
    };
}

/* The record of id as the snapshot has it: its row from *row on, which
 * moves past it (rows are in id order); a record naming nothing when the
 * id has no row (a destroyed tag). Every byte is set, padding included:
 * records are compared whole. */
static void record_of(struct ra_shm_record *rec, uint32_t id,
                      const struct ra__snapshot *snap, unsigned *row)
{
    const struct ra__usage *u;

    memset(rec, 0, sizeof *rec);
    rec->id = id;
    while (*row <= snap->ntags && snap->rows[*row].id < id)
        ++*row;
    if (*row > snap->ntags || snap->rows[*row].id != id)
        return;
    u = &snap->rows[*row];
    rec->flags = RA_SHM_RECORD_LIVE;
    /* The name's bytes only: what follows its NUL in the row is not
     * compared into a change. */
    memcpy(rec->name, u->name, strnlen(u->name, sizeof rec->name - 1));
    figures_of(&rec->figures, u);
    rec->parent = u->parent_row != 0 ? snap->rows[u->parent_row].id : 0;
    rec->depth = u->depth;
    rec->priority = u->priority;
    rec->metadata = u->metadata;
    rec->rss_at_ns = u->rss_at_ns;
}

/* Writes the records of ids 1..n that differ from what the segment holds,
 * marked with publication generation; the others are left as they are,
 * so that an idle process of thousands of tags writes next to nothing.
 * Under the seqlock's odd half. */
static void write_records(const struct ra__snapshot *snap, uint32_t n,
                          uint64_t generation)
{
    struct ra_shm_record *records = (struct ra_shm_record *)(segment + 1);
    struct ra_shm_record fresh;
    unsigned row = 1;

    for (uint32_t i = 0; i < n; i++) {
        record_of(&fresh, i + 1, snap, &row);
        fresh.written = records[i].written;
        if (memcmp(&fresh, &records[i], sizeof fresh) == 0)
            continue;
        fresh.written = generation;
        records[i] = fresh;
    }
}

static void parts_of(struct ra_shm_parts *out,
                     const struct ra__process_parts *p)
{
    *out = (struct ra_shm_parts){
        .rss_anon = p->rss_anon, .rss_file = p->rss_file,
        .page_tables = p->page_tables, .tags = p->tags,
        .untagged = p->untagged, .metadata = p->metadata,
        .library = p->library, .other = p->other, .over = p->over,
        .at_ns = p->at_ns, .cgroup_current = p->cgroup_current,
        .cgroup_anon = p->cgroup_anon, .cgroup_file = p->cgroup_file,
        .cgroup_limit = p->cgroup_limit,
        .flags = (p->in_cgroup ? RA_SHM_PARTS_CGROUP : 0u) |
                 (p->jemalloc_measured ? RA_SHM_PARTS_MEASURED : 0u),
    };
}

/* Writes a snapshot into the segment between the two halves of the
 * seqlock. The snapshot is taken first: the odd window covers only the
 * copy. */
static void publish(void)
{
    struct ra__snapshot snap;
    uint64_t seq = atomic_load_explicit((_Atomic uint64_t *)&segment->seq,
                                        memory_order_relaxed);
    uint32_t n;
    char http[RA__HTTP_ADDR_MAX];

    _Static_assert(sizeof segment->http == RA__HTTP_ADDR_MAX, "http field");
    if (ra__snapshot_take(&snap, false))
        return;
    ra__http_served(http);
    /* Every id handed out, the dead ones' records marked so. */
    n = ra__tag_published();
    if (n > capacity)
        n = capacity;
    /* Odd before any record is touched: an exchange with acquire order
     * keeps the writes below after it. */
    atomic_exchange_explicit((_Atomic uint64_t *)&segment->seq, seq + 1,
                             memory_order_acq_rel);
    write_records(&snap, n, segment->published + 1);
    segment->nrecords = n;
    figures_of(&segment->untagged, &snap.rows[0]);
    segment->process = (struct ra_shm_figures){
        .allocated = snap.global.allocated, .active = snap.global.active,
        .resident = snap.global.resident, .mapped = snap.global.mapped,
        .rss = snap.process_rss,
    };
    segment->library_allocated = snap.library;
    segment->leftovers_allocated = snap.leftovers;
    segment->pressure = (struct ra_shm_pressure){
        .limit = snap.pressure.limit, .resident = snap.pressure.resident,
        .given_back = snap.pressure.given_back,
        .refusals = snap.pressure.refusals,
        .level = (uint32_t)snap.pressure.level,
        .source = (uint32_t)snap.pressure.source,
    };
    parts_of(&segment->parts, &snap.parts);
    segment->time_ns = snap.time_ns;
    memcpy(segment->http, http, sizeof segment->http);
    segment->published++;
    segment->monotonic_ns = clock_of(CLOCK_MONOTONIC);
    segment->realtime_ns = clock_of(CLOCK_REALTIME);
    atomic_store_explicit((_Atomic uint64_t *)&segment->seq, seq + 2,
                          memory_order_release);
    ra__snapshot_free(&snap);
}

static void *publish_every_interval(void *arg)
{
    uint64_t interval = ra__config()->shm_interval_ns;
    struct timespec next;

    (void)arg;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (!atomic_load(&stopping)) {
        publish();
        ra__deadline_add(&next, interval);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) ==
               EINTR)
            ;
    }
    return NULL;
}

/* Removes the files of our user's that a dead process whose pid we now
 * have may have left under a fallback or a temporary name (its usual name
 * is replaced by the rename), so that readers find one segment of our
 * user's for our pid. getdents64 into the stack: the library allocates
 * its own memory through meta.c only. */
static void remove_leftovers(void)
{
    char prefix[32];
    _Alignas(struct dirent64) char buf[4096];
    int dir = open(SHM_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    size_t len = (size_t)snprintf(prefix, sizeof prefix, RA_SHM_PREFIX "%ld.",
                                  (long)getpid());
    ssize_t n;

    if (dir < 0)
        return;
    while ((n = getdents64(dir, buf, sizeof buf)) > 0)
        for (ssize_t at = 0; at < n;) {
            const struct dirent64 *e = (const struct dirent64 *)&buf[at];
            struct stat st;
            at += e->d_reclen;
            if (strncmp(e->d_name, prefix, len) == 0 &&
                fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISREG(st.st_mode) && st.st_uid == geteuid())
                unlinkat(dir, e->d_name, 0);
        }
    close(dir);
}

/* Makes the segment's file under a temporary name of its own,
 * path.XXXXXX.new (at random, O_EXCL: no file planted in the shared
 * directory can stand in for it), into tmp. Returns the descriptor, or -1
 * (errno set). */
static int make_temporary(char *tmp, size_t size)
{
    struct stat st;
    int fd;

    snprintf(tmp, size, "%s.XXXXXX.new", path);
    fd = mkostemps(tmp, 4, O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid() || st.st_nlink != 1) {
        close(fd);
        unlink(tmp);
        errno = EEXIST;
        return -1;
    }
    return fd;
}

/* Gives the segment made under tmp its name: path, replacing a file a dead
 * process of our user's left there; or, when another user's file holds it
 * (which the sticky directory keeps us from replacing), path.XXXXXX, tmp
 * without its ".new", which no other file can hold. Returns true on
 * failure, errno set (path's). */
static bool name_segment(const char *tmp)
{
    char fallback[sizeof path];
    size_t len = strlen(tmp) - strlen(".new");
    int err;

    if (rename(tmp, path) == 0)
        return false;
    err = errno;
    if (len >= sizeof fallback) {
        errno = err;
        return true;
    }
    memcpy(fallback, tmp, len);
    fallback[len] = '\0';
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, fallback, RENAME_NOREPLACE) != 0) {
        errno = err;
        return true;
    }
    memcpy(path, fallback, len + 1);
    return false;
}

/* Creates and maps the segment, its header written before it appears
 * under its name (made under a temporary one, then renamed), so that a
 * reader never finds it half made. Returns true on failure (a line said
 * why). */
static bool create_segment(void)
{
    char msg[160], tmp[80];
    size_t size;
    void *map;
    int fd;

    capacity = ra__config()->max_tags;
    size = ra_shm_size(capacity);
    snprintf(path, sizeof path, SHM_DIR "/" RA_SHM_PREFIX "%ld",
             (long)getpid());
    remove_leftovers();
    fd = make_temporary(tmp, sizeof tmp);
    if (fd < 0)
        goto fail;
    if (ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        unlink(tmp);
        goto fail;
    }
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        unlink(tmp);
        goto fail;
    }
    segment = map;
    memcpy(segment->magic, RA_SHM_MAGIC, sizeof segment->magic);
    segment->version = RA_SHM_VERSION;
    segment->header_size = sizeof(struct ra_shm_header);
    segment->record_size = sizeof(struct ra_shm_record);
    segment->capacity = capacity;
    segment->pid = (int32_t)getpid();
    segment->interval_ns = ra__config()->shm_interval_ns;
    if (name_segment(tmp)) {
        munmap(map, size);
        segment = NULL;
        unlink(tmp);
        goto fail;
    }
    owner = getpid();
    return false;
fail:
    snprintf(msg, sizeof msg,
             "regionalloc: REGIONALLOC_SHM: cannot create %s: %s; no stats "
             "segment", path, strerror(errno));
    ra__warn(msg);
    return true;
}

void ra__shm_start(void)
{
    pthread_t thread;

    if (!ra__init() || create_segment())
        return;
    if (ra__background_start(publish_every_interval, NULL, &thread)) {
        ra__warn("regionalloc: REGIONALLOC_SHM: cannot start the publisher "
                 "thread; no stats segment");
        unlink(path);
        return;
    }
    pthread_detach(thread);
}

void ra__shm_at_exit(void)
{
    if (segment == NULL)
        return;
    atomic_store(&stopping, true);
    /* A forked child inherits the mapping, not the segment. */
    if (getpid() == owner)
        unlink(path);
}

/* Finding a process's live stats segment: the file its user owns, under
 * its own name or a fallback's, staleness, and the list of segments in a
 * directory. segment_read.c reads the file found. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "segment_read.h"

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

/* The name regionalloc.<pid>, into name (SEGMENT_NAME_MAX bytes). */
static void segment_name(char *name, long pid)
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
    named_other =
        read_segment_file(dirfd, e->name, &anyone, &c, why) == READ_OK &&
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
    r = read_segment_file(dirfd, name, &want, c, why);
    /* Another user's file may hold the name: the process then publishes
     * under a fallback name of its user's. */
    if ((r == READ_GONE || r == READ_FOREIGN) &&
        find_fallback(dirfd, pid, &want, fallback)) {
        memcpy(name, fallback, SEGMENT_NAME_MAX);
        r = read_segment_file(dirfd, name, &want, c, why);
    }
    if (r == READ_OK && c->header.pid != pid) {
        fail_with(why, "names pid %" PRId32 ", not %ld: stale", c->header.pid,
                  pid);
        return READ_STALE;
    }
    return r;
}

void print_segment_error(const char *program, const char *dir,
                         const char *name, const char *why)
{
    char path[PATH_MAX + SEGMENT_NAME_MAX];

    segment_path(path, sizeof path, dir, name);
    fprintf(stderr, "%s: %s: %s\n", program, path, why);
}

int read_segment_or_say(const char *program, int dirfd, const char *dir,
                        long pid, struct segment_copy *c)
{
    char name[SEGMENT_NAME_MAX], why[WHY_MAX];
    enum read_result r = read_pid_segment(dirfd, pid, c, name, why);

    if (r == READ_GONE)
        snprintf(why, sizeof why, "no such segment: process %ld does not "
                 "publish (REGIONALLOC_SHM=1 turns it on)", pid);
    if (r != READ_OK)
        print_segment_error(program, dir, name, why);
    return r != READ_OK;
}

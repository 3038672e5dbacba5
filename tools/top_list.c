/* regionalloc-top without a PID: the list of the processes that publish,
 * a row each, and --clean, which removes the user's stale segments. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "top.h"

static void print_list_row(long pid, const struct segment_copy *c, bool stale)
{
    char cmd[80] = "-", size[24], age_text[24] = "-";
    uint64_t allocated = 0, age;
    unsigned tags = 0;

    for (uint32_t i = 0; i < c->header.nrecords; i++)
        if (c->records[i].flags & RA_SHM_RECORD_LIVE) {
            tags++;
            allocated += c->records[i].figures.allocated;
        }
    if (!stale)
        read_command(pid, cmd, sizeof cmd);
    if (segment_age(c, &age))
        snprintf(age_text, sizeof age_text, "%.2fs", (double)age / NS_PER_S);
    /* The HTTP endpoints' address: REGIONALLOC_HTTP with port 0 chose
     * it, and this is where it is found. */
    printf("%8ld  %-16s %5u %11s %9s  %s%s\n", pid, cmd, tags,
           format_size(size, sizeof size, allocated), age_text,
           c->header.http[0] != '\0' ? c->header.http : "-",
           stale ? "  stale" : "");
}

/* A row without figures, and why there are none. */
static void print_unread_row(long pid, bool stale, const char *note)
{
    char cmd[80] = "-";

    if (!stale)
        read_command(pid, cmd, sizeof cmd);
    printf("%8ld  %-16s %5s %11s %9s  %-21s  %s(%s)\n", pid, cmd, "-", "-",
           "-", "-", stale ? "stale " : "", note);
}

/* Lists the segment of pid. Returns true if it could not be read although
 * its process runs and the file is its user's and readable. */
static bool list_one(const struct options *o, int dirfd, long pid,
                     struct segment_copy *c)
{
    char name[SEGMENT_NAME_MAX], why[WHY_MAX];
    bool gone = process_gone(pid);
    enum read_result r = read_pid_segment(dirfd, pid, c, name, why);

    switch (r) {
    case READ_OK:
    case READ_STALE:
        print_list_row(pid, c, gone || r == READ_STALE);
        return false;
    case READ_GONE: /* exited since the directory was read */
        return false;
    case READ_FOREIGN: /* planted, or left by a process of another user */
    case READ_VERSION: /* a process of an older or a newer library */
        print_unread_row(pid, gone, why);
        return false;
    case READ_FAILED:
        break;
    }
    /* Another user's segment is theirs to read (mode 0600). */
    if (faccessat(dirfd, name, R_OK, AT_EACCESS) != 0 && errno == EACCES) {
        print_unread_row(pid, gone, "not readable by you");
        return false;
    }
    /* A process killed while it wrote may leave seq odd forever: its
     * segment is stale, not an error of the one listed. */
    if (gone) {
        print_unread_row(pid, true, why);
        return false;
    }
    print_segment_error(PROGRAM, o->dir, name, why);
    return true;
}

int list_publishers(const struct options *o, int dirfd)
{
    struct segment_copy c = {0};
    size_t n;
    struct segment_entry *files = list_segments(dirfd, &n);
    int status = 0;

    if (files == NULL) {
        fprintf(stderr, PROGRAM ": %s: %s\n", o->dir, strerror(errno));
        return 1;
    }
    if (n == 0)
        printf("no process publishes its stats in %s (REGIONALLOC_SHM=1 "
               "turns it on)\n", o->dir);
    else
        printf("%8s  %-16s %5s %11s %9s  %s\n", "PID", "COMMAND", "TAGS",
               "ALLOCATED", "AGE", "HTTP");
    /* A row per process, however many files are named after it. */
    for (size_t i = 0; i < n; i++)
        if ((i == 0 || files[i].pid != files[i - 1].pid) &&
            list_one(o, dirfd, files[i].pid, &c))
            status = 1;
    free(c.records);
    free(files);
    return status;
}

/* Removes the file e if it is stale, a regular file and ours;
 * *removed counts the removals. The file must be the same before and
 * after the check: a new process given the dead one's pid replaces it.
 * In the sticky /dev/shm, no one else can swap our file before the
 * unlink. Returns true if an unlink failed. */
static bool clean_one(const struct options *o, int dirfd,
                      const struct segment_entry *e, unsigned *removed)
{
    const char *name = e->name;
    char path[PATH_MAX + SEGMENT_NAME_MAX], reason[80];
    struct stat st, again;
    int err;

    segment_path(path, sizeof path, o->dir, name);
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        stale_reason(dirfd, e, reason, sizeof reason) == NULL)
        return false;
    if (!S_ISREG(st.st_mode) || st.st_uid != getuid()) {
        printf("kept %s: stale, but %s\n", path,
               S_ISREG(st.st_mode) ? "another user's" : "not a regular file");
        return false;
    }
    if (fstatat(dirfd, name, &again, AT_SYMLINK_NOFOLLOW) != 0 ||
        again.st_ino != st.st_ino || again.st_dev != st.st_dev)
        return false;
    if (unlinkat(dirfd, name, 0) != 0) {
        err = errno;
        if (err != ENOENT)
            print_segment_error(PROGRAM, o->dir, name, strerror(err));
        return err != ENOENT;
    }
    printf("removed %s (%s)\n", path, reason);
    ++*removed;
    return false;
}

int clean_stale(const struct options *o, int dirfd)
{
    size_t n;
    struct segment_entry *files = list_segments(dirfd, &n);
    unsigned removed = 0;
    int status = 0;

    if (files == NULL) {
        fprintf(stderr, PROGRAM ": %s: %s\n", o->dir, strerror(errno));
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        if (clean_one(o, dirfd, &files[i], &removed))
            status = 1;
    if (removed == 0)
        printf("no stale segment of yours in %s\n", o->dir);
    free(files);
    return status;
}

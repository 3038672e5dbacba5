/* The library's name in regionalloc run's LD_PRELOAD. The dynamic loader
 * splits LD_PRELOAD at spaces and colons and has no quoting, so a path
 * holding either names no library and the program would run unwatched.
 * Such a library is named by its real path when that holds neither, else
 * by a symbolic link to it in $TMPDIR/regionalloc-UID (or /tmp's), a
 * directory of the user's alone. The link is named after the library's
 * path, so that every run of that library shares one, and it is never
 * removed: any process of the program's tree may start another program
 * that loads it, long after the run's own has gone. The other ways fall
 * short: an open descriptor (/proc/self/fd/N) is lost by a program that
 * closes its descriptors, as a daemon or Python's subprocess does, and is
 * one more in every process; LD_LIBRARY_PATH with the bare name splits at
 * colons as well, and puts the library's directory before the system's
 * for every library the tree loads. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload.h"

#define SPLITS " :"

static bool splits(const char *path)
{
    return path[strcspn(path, SPLITS)] != '\0';
}

/* Copies path to out (size bytes); true, and why, when it does not fit. */
static bool copy(char *out, size_t size, const char *path, char *why,
                 size_t whylen)
{
    if ((size_t)snprintf(out, size, "%s", path) < size)
        return false;
    snprintf(why, whylen, "%s", strerror(ENAMETOOLONG));
    return true;
}

/* FNV-1a: the link's name, from the library's real path. */
static uint64_t hash_path(const char *s)
{
    uint64_t h = 14695981039346656037u;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Makes dir (size bytes): $TMPDIR/regionalloc-UID when TMPDIR is an
 * absolute path LD_PRELOAD can hold, else /tmp/regionalloc-UID. Returns
 * NULL, or why it cannot serve: not made, or not a directory of this
 * user's that no one else may write in (another user may have made it
 * first in a shared /tmp). */
static const char *private_dir(char *dir, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    struct stat st;

    if (tmp == NULL || tmp[0] != '/' || splits(tmp))
        tmp = "/tmp";
    if ((size_t)snprintf(dir, size, "%s/regionalloc-%ld", tmp,
                         (long)getuid()) >= size)
        return strerror(ENAMETOOLONG);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return strerror(errno);
    if (lstat(dir, &st) != 0)
        return strerror(errno);
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
        (st.st_mode & 077) != 0)
        return "not a directory of this user's alone";
    return NULL;
}

/* Points the link at out (size bytes), in dir, to target: made under a
 * name of this process's and renamed over it, so that runs that make it
 * at once each leave a whole link, and the same. Returns NULL or why
 * not. */
static const char *make_link(const char *dir, const char *target, char *out,
                             size_t size)
{
    char was[PATH_MAX], tmp[PATH_MAX + 32];
    const char *why;
    ssize_t n;

    if ((size_t)snprintf(out, size, "%s/libregionalloc-%016" PRIx64 ".so",
                         dir, hash_path(target)) >= size)
        return strerror(ENAMETOOLONG);
    n = readlink(out, was, sizeof was - 1);
    if (n >= 0 && (size_t)n == strlen(target) &&
        memcmp(was, target, (size_t)n) == 0)
        return NULL;
    snprintf(tmp, sizeof tmp, "%s.%ld", out, (long)getpid());
    (void)unlink(tmp);
    if (symlink(target, tmp) != 0 || rename(tmp, out) != 0) {
        why = strerror(errno);
        (void)unlink(tmp);
        return why;
    }
    return NULL;
}

bool preload_name(const char *library, char *out, size_t size, char *why,
                  size_t whylen)
{
    char target[PATH_MAX], dir[PATH_MAX];
    const char *failed;

    if (!splits(library))
        return copy(out, size, library, why, whylen);
    if (realpath(library, target) == NULL) {
        snprintf(why, whylen, "%s", strerror(errno));
        return true;
    }
    if (!splits(target))
        return copy(out, size, target, why, whylen);
    failed = private_dir(dir, sizeof dir);
    if (failed == NULL)
        failed = make_link(dir, target, out, size);
    if (failed == NULL)
        return false;
    snprintf(why, whylen, "no link to it in %s: %s", dir, failed);
    return true;
}

/* Where regionalloc finds the library it preloads and regionalloc-top it
 * hands over to: next to itself (the build tree, the install prefix),
 * then the configured libdir or PATH. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "regionalloc.h"

/* The directory this program runs from, without the trailing slash: "" if
 * unknown. */
static void own_directory(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    char *slash;

    buf[n > 0 ? n : 0] = '\0';
    slash = strrchr(buf, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        buf[0] = '\0';
}

static bool readable(const char *path)
{
    return access(path, R_OK) == 0;
}

bool find_library(char *buf, size_t size)
{
    const char *set = getenv("REGIONALLOC_LIBRARY");
    char dir[PATH_MAX];
    const char *tries[] = {"%s/../.libs/" RA_SONAME, "%s/../lib/" RA_SONAME,
                           "%s/../lib64/" RA_SONAME};

    if (set != NULL && set[0] != '\0') {
        snprintf(buf, size, "%s", set);
        return readable(buf);
    }
    own_directory(dir, sizeof dir);
    for (size_t i = 0; dir[0] != '\0' && i < sizeof tries / sizeof tries[0];
         i++) {
        snprintf(buf, size, tries[i], dir);
        if (readable(buf))
            return true;
    }
    snprintf(buf, size, "%s/%s", RA_LIBDIR, RA_SONAME);
    return readable(buf);
}

int exec_top(char **args)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];

    own_directory(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/regionalloc-top", dir);
    if (dir[0] != '\0' && access(path, X_OK) == 0)
        execv(path, args);
    execvp("regionalloc-top", args);
    fprintf(stderr, PROGRAM ": cannot run regionalloc-top: %s\n",
            strerror(errno));
    return 127;
}

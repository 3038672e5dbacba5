/* What the profile-writing test programs share (prof_dump_demo.c,
 * named_sites.c): the profile of every tag written in one format into a
 * file of a directory. */
#ifndef RA_TESTS_PROF_DUMP_FILE_H
#define RA_TESTS_PROF_DUMP_FILE_H

#include <stdio.h>

#include <regionalloc.h>

/* Writes ra_prof_dump(fmt, RA_TAG_ALL) into dir/file. Returns 0, or 1
 * after a line on stderr. */
static inline int dump(const char *dir, const char *file,
                       ra_prof_format_t fmt)
{
    char path[4096];
    FILE *f;
    int rc;

    snprintf(path, sizeof path, "%s/%s", dir, file);
    f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    rc = ra_prof_dump(f, fmt, RA_TAG_ALL);
    if (rc != 0)
        perror("ra_prof_dump");
    if (fclose(f) != 0) {
        perror(path);
        rc = -1;
    }
    return rc != 0;
}

#endif

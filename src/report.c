/* The per-tag table, and printing it at exit when REGIONALLOC_STATS asks. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* Formats bytes as "123 B", "4.0 KiB", "12.5 MiB"... into buf. */
static const char *human_bytes(char *buf, size_t len, size_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    unsigned u = 0;

    if (bytes < 1024) {
        snprintf(buf, len, "%zu B", bytes);
        return buf;
    }
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

static int print_row(FILE *out, const char *name, const ra_tag_stats_t *s)
{
    char a[32], b[32], c[32], d[32], e[32];

    return fprintf(out, "%-24s %11s %11s %11s %11s %11s %12llu %12llu\n",
                   name, human_bytes(a, sizeof a, s->allocated),
                   human_bytes(b, sizeof b, s->active),
                   human_bytes(c, sizeof c, s->resident),
                   human_bytes(d, sizeof d, s->mapped),
                   human_bytes(e, sizeof e, s->dirty),
                   (unsigned long long)s->nmalloc,
                   (unsigned long long)s->ndalloc) < 0;
}

int ra__report_table(FILE *out)
{
    ra_tag_stats_t s;
    unsigned count = ra_tag_count();
    bool failed;

    if (!ra__init()) {
        failed = fputs("regionalloc: pass-through mode, no per-tag "
                       "statistics\n", out) < 0;
        return failed ? -1 : 0;
    }
    failed = fprintf(out, "%-24s %11s %11s %11s %11s %11s %12s %12s\n", "tag",
                     "allocated", "active", "resident", "mapped", "dirty",
                     "nmalloc", "ndalloc") < 0;
    for (ra_tag_t t = 1; t <= count; t++)
        if (ra_tag_stats(t, &s) == 0)
            failed |= print_row(out, ra_tag_name(t), &s);
    if (ra_tag_stats(RA_TAG_NONE, &s) == 0)
        failed |= print_row(out, "untagged", &s);
    failed |= fflush(out) != 0;
    return failed ? -1 : 0;
}

/* A private copy of fd 2 for the report, taken when the library is loaded:
 * programs such as GNU coreutils close stderr in an atexit handler, which
 * runs before library destructors. Only the variable is peeked at here; the
 * configuration is still read at first use. */
static int report_fd = -1;

__attribute__((constructor)) static void keep_stderr(void)
{
    const char *v = secure_getenv("REGIONALLOC_STATS");

    if (v != NULL && strcmp(v, "stderr") == 0)
        report_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
}

__attribute__((destructor)) static void report_at_exit(void)
{
    const struct ra__config *config = ra__config();
    FILE *out;

    /* Only the process that read the configuration reports: a child forked
     * after that must not overwrite its parent's file when it exits. */
    if (config->stats_path[0] == '\0' || getpid() != config->pid)
        return;
    /* The exiting thread's caches would otherwise count as allocated. */
    ra_thread_flush();
    if (strcmp(config->stats_path, "stderr") == 0) {
        out = report_fd >= 0 ? fdopen(report_fd, "w") : NULL;
        ra__report_table(out != NULL ? out : stderr);
        if (out != NULL)
            fclose(out);
        return;
    }
    out = fopen(config->stats_path, "we");
    if (out == NULL) {
        char msg[512];
        snprintf(msg, sizeof msg, "regionalloc: REGIONALLOC_STATS: cannot "
                 "open %.400s: %s", config->stats_path, strerror(errno));
        ra__warn(msg);
        return;
    }
    ra__report_table(out);
    fclose(out);
}

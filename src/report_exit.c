/* Floor: services. The reports printed at exit when REGIONALLOC_STATS,
 * REGIONALLOC_CHECKPOINTS or REGIONALLOC_PROF_DUMP ask for them: which
 * process writes them, their streams (a kept copy of stderr, a file with
 * %p expanded), pass-through mode's stand-ins. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "output.h"

/* A private copy of fd 2 for the reports, taken when the library is loaded:
 * programs such as GNU coreutils close stderr in an atexit handler, which
 * runs before library destructors. */
static int report_fd = -1;
/* The process that loaded the library: it started the program, or exec'd.
 * A child it forks inherits the value, and so knows it is a child. */
static pid_t loaded_by;

void ra__report_at_load(void)
{
    loaded_by = getpid();
    /* Only the variables are peeked at here; the configuration is still
     * read at first use. */
    if (ra__config_peek_is("REGIONALLOC_STATS", "stderr") ||
        ra__config_peek_is("REGIONALLOC_CHECKPOINTS", "stderr"))
        report_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
}

/* Whether path (a report's "stderr" or file path) holds a %p. */
static bool names_pid(const char *path)
{
    for (const char *p = path; *p != '\0'; p++) {
        if (p[0] == '%' && p[1] == 'p')
            return true;
        if (p[0] == '%' && p[1] == '%')
            p++;
    }
    return false;
}

/* The process that loaded the library writes every report it is asked
 * for; a forked child only those whose path holds its pid, so that its
 * report never replaces or repeats the parent's. Under regionalloc run the
 * program writes them, its children only when they are watched too. */
static bool reports_here(enum ra__watch watch, const char *path)
{
    if (path[0] == '\0' || watch == RA__WATCH_NONE)
        return false;
    return watch == RA__WATCH_CHILD || loaded_by == 0 ||
           getpid() == loaded_by || names_pid(path);
}

/* Writes path into out (len bytes) with %p replaced by this process's pid
 * and %% by %; any other % stays; a watched child's (child) ends in
 * ".PID". Returns true when it does not fit. */
static bool expand_path(char *out, size_t len, const char *path, bool child)
{
    size_t n = 0;
    int w;

    for (const char *p = path; *p != '\0'; p++) {
        w = 1;
        if (p[0] == '%' && p[1] == 'p') {
            w = snprintf(out + n, len - n, "%ld", (long)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            out[n] = '%';
            p++;
        } else {
            out[n] = *p;
        }
        if (w < 0 || (size_t)w >= len - n)
            return true;
        n += (size_t)w;
    }
    out[n] = '\0';
    w = child ? snprintf(out + n, len - n, ".%ld", (long)getpid()) : 0;
    return w < 0 || (size_t)w >= len - n;
}

/* The exit reports' streams: at most one on the kept stderr and one file
 * (both reports go to the same stream when they name the same place). A
 * watched child's lines on stderr start with its pid (prefix; "" for the
 * program). */
struct exit_streams {
    FILE *err;
    FILE *file;
    bool child;
    char prefix[32];
    char file_path[4096];
};

/* Returns the stream for path ("stderr" or a file, %p expanded), opening
 * it once, or NULL after one line on stderr naming var. A child's stderr
 * is written a line at a time: lines of the tree's processes never mix. */
static FILE *exit_stream(struct exit_streams *st, const char *var,
                         const char *path)
{
    char expanded[4096], msg[512];

    if (strcmp(path, "stderr") == 0) {
        if (st->err == NULL && report_fd >= 0) {
            st->err = fdopen(report_fd, "w");
            if (st->err != NULL && st->child)
                setvbuf(st->err, NULL, _IOLBF, 0);
        }
        return st->err != NULL ? st->err : stderr;
    }
    if (expand_path(expanded, sizeof expanded, path, st->child)) {
        snprintf(msg, sizeof msg, "regionalloc: %s: path too long: %.400s",
                 var, path);
        ra__warn(msg);
        return NULL;
    }
    if (st->file != NULL && strcmp(st->file_path, expanded) == 0)
        return st->file;
    if (st->file != NULL)
        fclose(st->file);
    st->file = fopen(expanded, "we");
    memcpy(st->file_path, expanded, sizeof expanded);
    if (st->file != NULL)
        return st->file;
    snprintf(msg, sizeof msg, "regionalloc: %s: cannot open %.400s: %s", var,
             expanded, strerror(errno));
    ra__warn(msg);
    return NULL;
}

/* What an exit report says in pass-through mode, in each format. */
static void write_pass_through(struct ra__out *o, ra_format_t fmt,
                               const char *what, const char *schema)
{
    struct ra__emitter e;

    if (fmt == RA_FORMAT_JSON) {
        ra__emit_init(&e, o);
        ra__json_object_begin(&e, NULL, true);
        ra__json_str(&e, "schema", schema);
        ra__json_bool(&e, "enabled", false);
        ra__json_object_end(&e);
    } else {
        ra__out_fmt(o, "%sregionalloc: pass-through mode, no %s\n",
                    fmt == RA_FORMAT_PROMETHEUS ? "# " : "", what);
    }
}

/* REGIONALLOC_PROF_DUMP's format, from the file name's suffix. */
static ra_prof_format_t prof_format_of(const char *path)
{
    static const struct {
        const char *suffix;
        ra_prof_format_t format;
    } suffixes[] = {
        {".folded", RA_PROF_FOLDED},
        {".pb.gz", RA_PROF_PPROF},
        {".heap", RA_PROF_HEAP_V2},
    };
    size_t len = strlen(path);

    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t n = strlen(suffixes[i].suffix);
        if (len >= n && strcmp(path + len - n, suffixes[i].suffix) == 0)
            return suffixes[i].format;
    }
    return RA_PROF_TREE;
}

/* The prefix of out's lines: a watched child's pid on stderr. */
static const char *line_prefix(const struct exit_streams *st, FILE *out)
{
    return st->child && (out == st->err || out == stderr) ? st->prefix
                                                           : NULL;
}

static void write_stats_at_exit(const struct exit_streams *st, FILE *out,
                                ra_format_t fmt, bool tagging)
{
    struct ra__out o = RA__OUT_INIT(out, false);

    o.prefix = line_prefix(st, out);
    if (!tagging)
        write_pass_through(&o, fmt, "per-tag statistics",
                           "regionalloc-report-1");
    else if (ra__report_write(&o, fmt | RA_REPORT_DETAIL,
                              ra__report_top_default(fmt)) != 0)
        return;
    ra__out_finish(&o);
}

static void write_checkpoints_at_exit(const struct exit_streams *st,
                                      FILE *out, ra_format_t fmt,
                                      bool tagging)
{
    struct ra__out o = RA__OUT_INIT(out, false);
    struct ra__checkpoint_set set;

    o.prefix = line_prefix(st, out);
    if (!tagging) {
        write_pass_through(&o, fmt, "checkpoints",
                           "regionalloc-checkpoints-1");
    } else {
        if (ra__checkpoint_copy(&set))
            return;
        ra__checkpoint_write(&o, fmt, &set);
        ra__checkpoint_set_free(&set);
    }
    ra__out_finish(&o);
}

static void write_prof_at_exit(const struct exit_streams *st, FILE *out,
                               const char *path)
{
    struct ra__out o = RA__OUT_INIT(out, false);

    o.prefix = line_prefix(st, out);
    ra__prof_dump_write(&o, prof_format_of(path), RA_TAG_ALL);
}

/* The reports, once their streams are open. */
static void write_at_exit(struct exit_streams *st, bool stats,
                          bool checkpoints, bool prof, bool tagging)
{
    const struct ra__config *config = ra__config();
    FILE *out;

    if (stats) {
        out = exit_stream(st, "REGIONALLOC_STATS", config->stats_path);
        if (out != NULL)
            write_stats_at_exit(st, out, config->stats_format, tagging);
    }
    if (checkpoints) {
        out = exit_stream(st, "REGIONALLOC_CHECKPOINTS",
                          config->checkpoints_path);
        if (out != NULL)
            write_checkpoints_at_exit(st, out, config->stats_format,
                                      tagging);
    }
    if (prof && tagging) {
        out = exit_stream(st, "REGIONALLOC_PROF_DUMP",
                          config->prof_dump_path);
        if (out != NULL)
            write_prof_at_exit(st, out, config->prof_dump_path);
    }
}

/* The whole of it is the library's own work: its streams and their
 * buffers belong to no tag and are not reported to hooks. Its writes
 * raise no SIGPIPE: a program whose stderr reader has gone exits as it
 * would have without the library. */
void ra__report_at_exit(void)
{
    const struct ra__config *config = ra__config();
    enum ra__watch watch = ra__config_watch();
    struct exit_streams st = {NULL, NULL, watch == RA__WATCH_CHILD, "", ""};
    struct ra__sigpipe_hold hold;
    bool stats = reports_here(watch, config->stats_path);
    bool checkpoints = reports_here(watch, config->checkpoints_path);
    bool prof = reports_here(watch, config->prof_dump_path);
    bool tagging;

    if (!stats && !checkpoints && !prof)
        return;
    ra__quiet_begin();
    tagging = ra__init();
    /* The exiting thread's caches would otherwise count as allocated. */
    ra_thread_flush();
    /* A last row for the state at exit, taken before the reports open
     * their streams: a program that takes no checkpoint of its own
     * (LD_PRELOAD) still gets one, with its peak RSS, which it leaves
     * alone for the parent's wait4. */
    if (checkpoints && tagging)
        ra__checkpoint_take("exit", false);
    snprintf(st.prefix, sizeof st.prefix, "[pid %ld] ", (long)getpid());
    ra__sigpipe_hold(&hold);
    write_at_exit(&st, stats, checkpoints, prof, tagging);
    if (st.err != NULL)
        fclose(st.err);
    if (st.file != NULL)
        fclose(st.file);
    ra__sigpipe_release(&hold);
    ra__quiet_end();
}

/* ra_report: every tag's usage now, as a table, a JSON document or a
 * Prometheus exposition; and the reports printed at exit when
 * REGIONALLOC_STATS or REGIONALLOC_CHECKPOINTS ask for them. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* One row of the report: a tag's figures, or the untagged arenas'. */
struct usage {
    uint64_t allocated, active, resident, rss, mapped, peak_mapped, dirty,
        muzzy, retained, reserved, nmalloc, ndalloc, purges;
};

/* Everything a report shows, read after one statistics refresh, so that
 * the three formats (and the table's two passes) show the same figures. */
struct snapshot {
    unsigned ntags;
    struct usage *rows; /* [0]: untagged; [t]: tag t */
    struct ra__global_stats global;
    uint64_t process_rss, time_ns;
};

static void read_usage(ra_tag_t tag, struct usage *u)
{
    ra_tag_stats_t s;
    size_t rss = 0;

    ra__stats_read(tag, &s);
    /* mincore reads the kernel's page tables, not jemalloc's statistics:
     * no refresh involved. 0 if it fails. */
    if (tag != RA_TAG_NONE && ra_tag_rss(tag, &rss) != 0)
        rss = 0;
    *u = (struct usage){
        .allocated = s.allocated, .active = s.active,
        .resident = s.resident, .rss = rss, .mapped = s.mapped,
        .peak_mapped = s.peak_mapped, .dirty = s.dirty, .muzzy = s.muzzy,
        .retained = s.retained, .reserved = s.reserved,
        .nmalloc = s.nmalloc, .ndalloc = s.ndalloc,
        .purges = ra__stats_purges(tag),
    };
}

/* Returns true on failure (ENOMEM). */
static bool take_snapshot(struct snapshot *snap)
{
    snap->ntags = ra__tag_published();
    /* Allocated before the refresh, so that the figures include it. */
    snap->rows = ra_malloc_tag(RA_TAG_NONE,
                               (snap->ntags + 1) * sizeof *snap->rows);
    if (snap->rows == NULL)
        return true;
    snap->time_ns = ra__clock_ns();
    ra__stats_refresh();
    for (ra_tag_t t = 0; t <= snap->ntags; t++)
        read_usage(t, &snap->rows[t]);
    ra__stats_global(&snap->global);
    snap->process_rss = ra__proc_rss();
    return false;
}

/* -- text ------------------------------------------------------------------ */

static const char *const text_headers[] = {
    "tag",    "allocated",   "active", "resident", "kernel_rss",
    "mapped", "peak_mapped", "dirty",  "nmalloc",  "ndalloc"};
#define TEXT_COLS (sizeof text_headers / sizeof text_headers[0])

static void put_cell(char *cell, const char *text)
{
    snprintf(cell, RA__CELL_MAX, "%s", text);
}

static void put_bytes(char *cell, uint64_t bytes)
{
    ra__human_bytes(cell, RA__CELL_MAX, bytes);
}

static void put_count(char *cell, uint64_t n)
{
    snprintf(cell, RA__CELL_MAX, "%" PRIu64, n);
}

/* name (already escaped), then u's figures; tagged rows have an RSS from
 * the kernel and a peak. */
static void fill_usage(struct ra__table_row *row, const struct usage *u,
                       bool tagged)
{
    put_bytes(row->cell[1], u->allocated);
    put_bytes(row->cell[2], u->active);
    put_bytes(row->cell[3], u->resident);
    if (tagged)
        put_bytes(row->cell[4], u->rss);
    else
        put_cell(row->cell[4], "-");
    put_bytes(row->cell[5], u->mapped);
    if (tagged)
        put_bytes(row->cell[6], u->peak_mapped);
    else
        put_cell(row->cell[6], "-");
    put_bytes(row->cell[7], u->dirty);
    put_count(row->cell[8], u->nmalloc);
    put_count(row->cell[9], u->ndalloc);
}

/* The total row: jemalloc's own totals for the process (allocated and
 * active are the sums of the rows above; resident and mapped also count
 * its metadata outside the arenas) and the process's RSS from the kernel. */
static void fill_total(struct ra__table_row *row, const struct snapshot *snap)
{
    uint64_t dirty = 0;

    for (ra_tag_t t = 0; t <= snap->ntags; t++)
        dirty += snap->rows[t].dirty;
    put_cell(row->cell[0], "total");
    put_bytes(row->cell[1], snap->global.allocated);
    put_bytes(row->cell[2], snap->global.active);
    put_bytes(row->cell[3], snap->global.resident);
    put_bytes(row->cell[4], snap->process_rss);
    put_bytes(row->cell[5], snap->global.mapped);
    put_cell(row->cell[6], "-");
    put_bytes(row->cell[7], dirty);
    put_cell(row->cell[8], "-");
    put_cell(row->cell[9], "-");
}

/* Rows: the header, one per tag, a rule, untagged, total. The rule keeps a
 * tag named "untagged" or "total" apart from the summary rows. */
static void fill_text_row(void *ctx, size_t r, struct ra__table_row *row)
{
    const struct snapshot *snap = ctx;

    if (r == 0) {
        for (size_t c = 0; c < TEXT_COLS; c++)
            put_cell(row->cell[c], text_headers[c]);
    } else if (r <= snap->ntags) {
        ra__escape(row->cell[0], RA__CELL_MAX, ra_tag_name((ra_tag_t)r),
                   RA__ESCAPE_TEXT);
        fill_usage(row, &snap->rows[r], true);
    } else if (r == snap->ntags + 1) {
        row->rule = true;
    } else if (r == snap->ntags + 2) {
        put_cell(row->cell[0], "untagged");
        fill_usage(row, &snap->rows[0], false);
    } else {
        fill_total(row, snap);
    }
}

static void write_text(struct ra__out *o, struct snapshot *snap)
{
    struct ra__table table = {
        .ncols = TEXT_COLS,
        .left = 1u,
        .nrows = snap->ntags + 4,
        .fill = fill_text_row,
        .ctx = snap,
    };

    ra__table_write(o, &table);
}

/* -- JSON and Prometheus: the fields, named once ----------------------------- */

#define USAGE_FIELD(f) offsetof(struct usage, f)

static uint64_t usage_field(const struct usage *u, size_t offset)
{
    uint64_t v;

    memcpy(&v, (const char *)u + offset, sizeof v);
    return v;
}

static const struct {
    const char *key;
    size_t offset;
    bool untagged; /* also in the "untagged" object */
} json_fields[] = {
    {"allocated", USAGE_FIELD(allocated), true},
    {"active", USAGE_FIELD(active), true},
    {"resident", USAGE_FIELD(resident), true},
    {"rss", USAGE_FIELD(rss), false},
    {"mapped", USAGE_FIELD(mapped), true},
    {"peak_mapped", USAGE_FIELD(peak_mapped), false},
    {"dirty", USAGE_FIELD(dirty), true},
    {"muzzy", USAGE_FIELD(muzzy), true},
    {"retained", USAGE_FIELD(retained), true},
    {"reserved", USAGE_FIELD(reserved), false},
    {"nmalloc", USAGE_FIELD(nmalloc), true},
    {"ndalloc", USAGE_FIELD(ndalloc), true},
    {"purges", USAGE_FIELD(purges), true},
};
#define NJSON_FIELDS (sizeof json_fields / sizeof json_fields[0])

static void write_json_usage(struct ra__out *o, const struct usage *u,
                             bool tagged)
{
    bool first = true;

    for (size_t f = 0; f < NJSON_FIELDS; f++) {
        if (!tagged && !json_fields[f].untagged)
            continue;
        ra__out_fmt(o, "%s\"%s\": %" PRIu64, first ? "" : ", ",
                    json_fields[f].key,
                    usage_field(u, json_fields[f].offset));
        first = false;
    }
}

static void write_json(struct ra__out *o, struct snapshot *snap)
{
    ra__out_fmt(o, "{\n  \"schema\": \"regionalloc-report-1\",\n"
                "  \"enabled\": true,\n  \"time_ns\": %" PRIu64 ",\n"
                "  \"tags\": [", snap->time_ns);
    for (ra_tag_t t = 1; t <= snap->ntags; t++) {
        ra__out_fmt(o, "%s\n    {\"id\": %u, \"name\": ", t > 1 ? "," : "",
                    t);
        ra__out_json_string(o, ra_tag_name(t));
        ra__out_str(o, ", ");
        write_json_usage(o, &snap->rows[t], true);
        ra__out_str(o, "}");
    }
    ra__out_str(o, snap->ntags > 0 ? "\n  ],\n" : "],\n");
    ra__out_str(o, "  \"untagged\": {");
    write_json_usage(o, &snap->rows[0], false);
    ra__out_fmt(o, "},\n  \"process\": {\"allocated\": %zu, \"active\": %zu, "
                "\"resident\": %zu, \"mapped\": %zu, \"rss\": %" PRIu64
                "}\n}\n",
                snap->global.allocated, snap->global.active,
                snap->global.resident, snap->global.mapped,
                snap->process_rss);
}

/* Metric families. The untagged arenas get their own families rather than
 * a tag="untagged" series, which a tag of that name would collide with. */
static const struct {
    const char *tag_name, *untagged_name, *type, *help;
    size_t offset;
} prom_families[] = {
    {"regionalloc_tag_allocated_bytes", "regionalloc_untagged_allocated_bytes",
     "gauge", "Bytes in live blocks (usable sizes).", USAGE_FIELD(allocated)},
    {"regionalloc_tag_active_bytes", "regionalloc_untagged_active_bytes",
     "gauge", "Bytes in pages holding live blocks.", USAGE_FIELD(active)},
    {"regionalloc_tag_resident_bytes", "regionalloc_untagged_resident_bytes",
     "gauge", "jemalloc's resident estimate (an upper bound).",
     USAGE_FIELD(resident)},
    {"regionalloc_tag_rss_bytes", NULL, "gauge",
     "Resident bytes of the tag's region as the kernel sees them (mincore).",
     USAGE_FIELD(rss)},
    {"regionalloc_tag_mapped_bytes", "regionalloc_untagged_mapped_bytes",
     "gauge", "Bytes mapped (committed).", USAGE_FIELD(mapped)},
    {"regionalloc_tag_peak_mapped_bytes", NULL, "gauge",
     "High-water mark of the region's committed bytes.",
     USAGE_FIELD(peak_mapped)},
    {"regionalloc_tag_dirty_bytes", "regionalloc_untagged_dirty_bytes",
     "gauge", "Unused pages not yet returned to the OS.", USAGE_FIELD(dirty)},
    {"regionalloc_tag_allocations_total",
     "regionalloc_untagged_allocations_total", "counter",
     "Allocations made (untagged: blocks handed out by the arenas).",
     USAGE_FIELD(nmalloc)},
    {"regionalloc_tag_frees_total", "regionalloc_untagged_frees_total",
     "counter", "Frees made (untagged: blocks taken back by the arenas).",
     USAGE_FIELD(ndalloc)},
    {"regionalloc_tag_purges_total", "regionalloc_untagged_purges_total",
     "counter", "Purges asked with ra_tag_purge() or ra_purge_all().",
     USAGE_FIELD(purges)},
};

static void write_prometheus(struct ra__out *o, struct snapshot *snap)
{
    const size_t nfamilies = sizeof prom_families / sizeof prom_families[0];
    const struct {
        const char *name, *help;
        uint64_t value;
    } process[] = {
        {"regionalloc_jemalloc_allocated_bytes",
         "jemalloc's stats.allocated (whole process).",
         snap->global.allocated},
        {"regionalloc_jemalloc_active_bytes", "jemalloc's stats.active.",
         snap->global.active},
        {"regionalloc_jemalloc_resident_bytes", "jemalloc's stats.resident.",
         snap->global.resident},
        {"regionalloc_jemalloc_mapped_bytes", "jemalloc's stats.mapped.",
         snap->global.mapped},
        {"regionalloc_process_rss_bytes",
         "Resident bytes of the process (/proc/self/statm).",
         snap->process_rss},
    };

    for (size_t f = 0; f < nfamilies; f++) {
        ra__out_prom_family(o, prom_families[f].tag_name,
                            prom_families[f].type, prom_families[f].help);
        for (ra_tag_t t = 1; t <= snap->ntags; t++) {
            char tag[RA__ESCAPED_MAX];
            ra__escape(tag, sizeof tag, ra_tag_name(t),
                       RA__ESCAPE_PROMETHEUS);
            ra__out_fmt(o, "%s{tag=\"", prom_families[f].tag_name);
            ra__out_str(o, tag);
            ra__out_fmt(o, "\"} %" PRIu64 "\n",
                        usage_field(&snap->rows[t], prom_families[f].offset));
        }
    }
    for (size_t f = 0; f < nfamilies; f++) {
        if (prom_families[f].untagged_name == NULL)
            continue;
        ra__out_prom_family(o, prom_families[f].untagged_name,
                            prom_families[f].type, prom_families[f].help);
        ra__out_fmt(o, "%s %" PRIu64 "\n", prom_families[f].untagged_name,
                    usage_field(&snap->rows[0], prom_families[f].offset));
    }
    for (size_t p = 0; p < sizeof process / sizeof process[0]; p++) {
        ra__out_prom_family(o, process[p].name, "gauge", process[p].help);
        ra__out_fmt(o, "%s %" PRIu64 "\n", process[p].name,
                    process[p].value);
    }
}

int ra__report_write(struct ra__out *o, ra_format_t fmt)
{
    struct snapshot snap;

    if (take_snapshot(&snap)) {
        errno = ENOMEM;
        return -1;
    }
    switch (fmt) {
    case RA_FORMAT_JSON:
        write_json(o, &snap);
        break;
    case RA_FORMAT_PROMETHEUS:
        write_prometheus(o, &snap);
        break;
    default:
        write_text(o, &snap);
        break;
    }
    ra_free(snap.rows);
    return 0;
}

int ra_report(FILE *out, ra_format_t fmt)
{
    struct ra__out o = {out, false};
    ra_tag_t saved;
    int rc;

    if (ra__out_check_args(out, fmt) != 0)
        return -1;
    /* The FILE's buffer, our snapshot: none of it is the caller's tag. */
    saved = ra__tag_suspend();
    rc = ra__report_write(&o, fmt);
    if (rc == 0)
        rc = ra__out_finish(&o);
    ra__tag_resume(saved);
    return rc;
}

/* -- at exit ----------------------------------------------------------------- */

/* A private copy of fd 2 for the reports, taken when the library is loaded:
 * programs such as GNU coreutils close stderr in an atexit handler, which
 * runs before library destructors. Only the variables are peeked at here;
 * the configuration is still read at first use. */
static int report_fd = -1;

static bool wants_stderr(const char *var)
{
    const char *v = secure_getenv(var);

    return v != NULL && strcmp(v, "stderr") == 0;
}

__attribute__((constructor)) static void keep_stderr(void)
{
    if (wants_stderr("REGIONALLOC_STATS") ||
        wants_stderr("REGIONALLOC_CHECKPOINTS"))
        report_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
}

/* The exit reports' streams: at most one on the kept stderr and one file
 * (both reports go to the same stream when they name the same place). */
struct exit_streams {
    FILE *err;
    FILE *file;
    const char *file_path;
};

/* Returns the stream for path ("stderr" or a file), opening it once, or
 * NULL after one line on stderr naming var. */
static FILE *exit_stream(struct exit_streams *st, const char *var,
                         const char *path)
{
    char msg[512];

    if (strcmp(path, "stderr") == 0) {
        if (st->err == NULL && report_fd >= 0)
            st->err = fdopen(report_fd, "w");
        return st->err != NULL ? st->err : stderr;
    }
    if (st->file != NULL && strcmp(st->file_path, path) == 0)
        return st->file;
    if (st->file != NULL)
        fclose(st->file);
    st->file = fopen(path, "we");
    st->file_path = path;
    if (st->file != NULL)
        return st->file;
    snprintf(msg, sizeof msg, "regionalloc: %s: cannot open %.400s: %s", var,
             path, strerror(errno));
    ra__warn(msg);
    return NULL;
}

/* What an exit report says in pass-through mode, in each format. */
static void write_pass_through(FILE *out, ra_format_t fmt, const char *what,
                               const char *schema)
{
    struct ra__out o = {out, false};

    if (fmt == RA_FORMAT_JSON)
        ra__out_fmt(&o, "{\"schema\": \"%s\", \"enabled\": false}\n",
                    schema);
    else
        ra__out_fmt(&o, "%sregionalloc: pass-through mode, no %s\n",
                    fmt == RA_FORMAT_PROMETHEUS ? "# " : "", what);
    ra__out_finish(&o);
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

__attribute__((destructor)) static void report_at_exit(void)
{
    const struct ra__config *config = ra__config();
    struct exit_streams st = {NULL, NULL, NULL};
    ra_format_t fmt = config->stats_format;
    bool tagging;
    FILE *out;

    /* Only the process that read the configuration reports: a child forked
     * after that must not overwrite its parent's file when it exits. */
    if ((config->stats_path[0] == '\0' &&
         config->checkpoints_path[0] == '\0' &&
         config->prof_dump_path[0] == '\0') ||
        getpid() != config->pid)
        return;
    tagging = ra__init();
    /* The exiting thread's caches would otherwise count as allocated. */
    ra_thread_flush();
    /* A last row for the state at exit, taken before the reports allocate
     * their streams: a program that takes no checkpoint of its own
     * (LD_PRELOAD) still gets one, with its peak RSS. */
    if (config->checkpoints_path[0] != '\0' && tagging)
        ra_checkpoint("exit");
    if (config->stats_path[0] != '\0') {
        out = exit_stream(&st, "REGIONALLOC_STATS", config->stats_path);
        if (out != NULL && tagging)
            ra_report(out, fmt);
        else if (out != NULL)
            write_pass_through(out, fmt, "per-tag statistics",
                               "regionalloc-report-1");
    }
    if (config->checkpoints_path[0] != '\0') {
        out = exit_stream(&st, "REGIONALLOC_CHECKPOINTS",
                          config->checkpoints_path);
        if (out != NULL && tagging)
            ra_checkpoint_report(out, fmt);
        else if (out != NULL)
            write_pass_through(out, fmt, "checkpoints",
                               "regionalloc-checkpoints-1");
    }
    if (config->prof_dump_path[0] != '\0' && tagging) {
        out = exit_stream(&st, "REGIONALLOC_PROF_DUMP",
                          config->prof_dump_path);
        if (out != NULL)
            ra_prof_dump(out, prof_format_of(config->prof_dump_path),
                         RA_TAG_ALL);
    }
    if (st.err != NULL)
        fclose(st.err);
    if (st.file != NULL)
        fclose(st.file);
}

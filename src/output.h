/* Floor: services. The output side's declarations: checked output, escaping,
 * tables, the checkpoint ring, the reports, the profile's entry points,
 * grouped by owning file (what only the profile's writers share is
 * prof_dump.h; the server's files, http.h). The core (internal.h) never
 * needs them. */
#ifndef RA_OUTPUT_H
#define RA_OUTPUT_H

#include <string.h>

#include "internal.h"
#include "api.h"

/* -- escape.c: tag names and labels made safe for each output format ----- */
enum ra__escape_style {
    RA__ESCAPE_TEXT,      /* C-style: \\ \n \t \r \xNN; valid UTF-8 kept */
    RA__ESCAPE_JSON,      /* string body: \" \\ \n \t \r \u00NN */
    RA__ESCAPE_PROMETHEUS, /* label value: \\ \" \n, other bytes as the
                              text \xNN (written \\xNN) */
    RA__ESCAPE_HTML /* as TEXT, with & < > " ' as entities: text or an
                       attribute value in HTML */
};
/* Room for any escaped name or label (at most RA_TAG_NAME_MAX bytes): JSON's
 * \u00NN is the longest, 6 bytes per input byte, and the NUL. */
#define RA__ESCAPED_MAX (6 * RA_TAG_NAME_MAX + 1)
/* Writes s escaped in style to buf (len > 0 bytes, always NUL-terminated;
 * cut before an escape that would not fit). Returns the length written.
 * Never allocates. */
size_t ra__escape(char *buf, size_t len, const char *s,
                  enum ra__escape_style style);
/* Columns that escaped text takes on a terminal: one per character (UTF-8
 * continuation bytes take none; wide characters are counted as one). */
size_t ra__text_width(const char *s);

/* -- format.c: checked output, human units, aligned tables --------------- */
/* A report's output: every write is checked and the first failure kept, so
 * a report says EIO once at the end instead of testing every call. A
 * report runs as the library's own work (ra__quiet_begin); a caller's FILE
 * is user code, which ra__out_write alone calls, outside that section. */
#define RA__OUT_FMT_MAX 1024
/* Writes are gathered in buf and reach the FILE a few KiB at a time: a
 * report of thousands of tags makes hundreds of thousands of small writes,
 * and each fwrite takes the FILE's lock (a fifth of a report's time). */
#define RA__OUT_BUF 8192
struct ra__out {
    FILE *file;
    bool failed;
    bool callers; /* the FILE is the caller's: its writes are user code */
    char scratch[RA__OUT_FMT_MAX];
    size_t buffered;
    char buf[RA__OUT_BUF];
    /* Written before each line (NULL: nothing): a child's report on the
     * stderr it shares with its tree says whose it is. */
    const char *prefix;
    bool mid_line; /* the last write did not end its line */
};
/* A report to the caller's FILE (callers) or to one of the library's;
 * ra__out_finish gives the FILE what is still buffered. */
#define RA__OUT_INIT(f, of_caller)                                          \
    {(f), false, (of_caller), {0}, 0, {0}, NULL, false}
/* Writes len bytes of buf to o's FILE. */
void ra__out_write(struct ra__out *o, const void *buf, size_t len);
void ra__out_str(struct ra__out *o, const char *s);
/* Writes what snprintf() put in o->scratch: written is its result. */
void ra__out_scratch(struct ra__out *o, int written);
/* Formatted output to o. The format is always a literal of the library and
 * its result shorter than RA__OUT_FMT_MAX: user data goes through
 * ra__out_str() or the escaping writers, never into a format. A macro, not
 * a variadic function: the compiler checks the format against the
 * arguments, and clang-analyzer 14 reports false va_list errors when it
 * analyzes several files in one run. */
#define ra__out_fmt(o, ...)                                                 \
    ra__out_scratch((o), snprintf((o)->scratch, RA__OUT_FMT_MAX, __VA_ARGS__))
/* The checks every public report function makes first: 0, or -1 with errno
 * EINVAL (NULL out, unknown format) or ENOTSUP (pass-through mode). */
int ra__out_check_args(FILE *out, ra_format_t fmt);
/* Flushes; returns 0, or -1 with errno EIO when any write failed. */
int ra__out_finish(struct ra__out *o);

/* Room for a human-readable size or duration and its NUL. */
#define RA__HUMAN_MAX 32
/* "0 B" .. "1023 B", then "1.0 KiB", "60.8 MiB", "2.5 GiB" (GiB at most). */
const char *ra__human_bytes(char *buf, size_t len, uint64_t bytes);
/* "0.25 ms", "150 ms", "1.21 s", "42.0 s", "3600 s". */
const char *ra__human_ns(char *buf, size_t len, uint64_t ns);
/* An estimate (the profile's) as a whole count: rounded to the nearest,
 * negative noise to 0. */
uint64_t ra__round_count(double x);

/* An aligned text table, written in two passes over the rows (measure, then
 * print) so that no cell is stored: fill() must give the same row twice. */
#define RA__TABLE_COLS_MAX 24
#define RA__CELL_MAX RA__ESCAPED_MAX
struct ra__table_row {
    bool rule; /* a line of dashes instead of cells */
    char cell[RA__TABLE_COLS_MAX][RA__CELL_MAX];
};
struct ra__table {
    unsigned ncols;    /* at most RA__TABLE_COLS_MAX */
    uint32_t left;     /* bit i set: column i is left-aligned */
    size_t nrows;      /* the header row included */
    void (*fill)(void *ctx, size_t row, struct ra__table_row *out);
    void *ctx;
};
/* Writes the table: columns two spaces apart, each as wide as its widest
 * cell; no trailing blanks. Needs about 9 KiB of stack; never allocates. */
void ra__table_write(struct ra__out *o, const struct ra__table *t);

/* -- emit.c: the documents' writer ----------------------------------------- */
/* JSON: containers nest up to RA__JSON_DEPTH_MAX deep; a block container
 * puts each item on a line of its own, indented two spaces a level, an
 * inline one writes them on one line, ", " apart. A key is NULL for an item
 * of an array and for the outermost container, which ends with a new line.
 * Strings are escaped. */
#define RA__JSON_DEPTH_MAX 8
struct ra__json_level {
    bool inline_items;
    unsigned items;
};
struct ra__emitter {
    struct ra__out *out;
    unsigned depth;
    struct ra__json_level level[RA__JSON_DEPTH_MAX];
};
void ra__emit_init(struct ra__emitter *e, struct ra__out *o);
void ra__json_object_begin(struct ra__emitter *e, const char *key,
                           bool inline_items);
void ra__json_object_end(struct ra__emitter *e);
void ra__json_array_begin(struct ra__emitter *e, const char *key,
                          bool inline_items);
void ra__json_array_end(struct ra__emitter *e);
void ra__json_u64(struct ra__emitter *e, const char *key, uint64_t v);
void ra__json_i64(struct ra__emitter *e, const char *key, int64_t v);
void ra__json_bool(struct ra__emitter *e, const char *key, bool v);
void ra__json_str(struct ra__emitter *e, const char *key, const char *s);
/* A string of arbitrary bytes (a tag's name, a label): key with s escaped,
 * and, when that string does not give back s's bytes (s is not valid
 * UTF-8), hex_key with them as lowercase hex, two digits a byte. */
void ra__json_bytes(struct ra__emitter *e, const char *key,
                    const char *hex_key, const char *s);
void ra__json_null(struct ra__emitter *e, const char *key);

/* Prometheus's text exposition: a family's HELP and TYPE lines, then its
 * samples, name{label="value",...} value, the values escaped. */
struct ra__prom_label {
    const char *name;
    const char *value;
};
void ra__prom_family(struct ra__emitter *e, const char *name,
                     const char *type, const char *help);
void ra__prom_sample(struct ra__emitter *e, const char *name,
                     const struct ra__prom_label *labels, unsigned n,
                     uint64_t v);
/* The same, the value written as seconds from nanoseconds. */
void ra__prom_sample_seconds(struct ra__emitter *e, const char *name,
                             const struct ra__prom_label *labels, unsigned n,
                             uint64_t ns);

/* Label values escaped once for a whole report, which writes each tag's
 * in every per-tag family: value i is text + at[i], at[i + 1] - at[i]
 * bytes long, not NUL-terminated. */
#define RA__PROM_NAME_MAX 64
struct ra__prom_values {
    char *text;
    uint32_t *at;
    unsigned n;
};
/* Escapes value(arg, i) for each i < n into v, in the library's memory;
 * true when it cannot have the memory (v is then empty). */
bool ra__prom_values_make(struct ra__prom_values *v, unsigned n,
                          const char *(*value)(const void *arg, unsigned i),
                          const void *arg);
void ra__prom_values_free(struct ra__prom_values *v);
/* name{label="value i of v"} x, in one write: a report of thousands of
 * tags writes tens of thousands of them. */
void ra__prom_sample_value(struct ra__emitter *e, const char *name,
                           const char *label, const struct ra__prom_values *v,
                           unsigned i, int64_t x, bool is_signed);

/* Cells of a text table (RA__CELL_MAX bytes): text as it is, a name
 * escaped for a terminal, bytes and durations in human units, a count. */
void ra__cell_text(char *cell, const char *s);
void ra__cell_name(char *cell, const char *name);
void ra__cell_bytes(char *cell, uint64_t bytes);
void ra__cell_count(char *cell, uint64_t n);
void ra__cell_ns(char *cell, uint64_t ns);

/* -- dashboard.c: GET /debug/regionalloc/ ------------------------------------- */
/* Writes the dashboard (tagging on), its table listing top tags as
 * ra_report_top does (its script asks the JSON report for as many): 0 or
 * an errno value (ENOMEM). */
int ra__dashboard_write(struct ra__out *o, size_t top);

/* -- history.c: the samples the dashboard's chart draws ------------------------ */
/* Allocates the ring and starts the sampler thread (with the HTTP server).
 * Returns true on failure, errno set, nothing left behind. */
bool ra__history_start(void);
/* Stops and joins the sampler and frees the ring (no request in flight). */
void ra__history_stop(void);
/* Takes one sample now: the sampler's work, which the unit tests call to
 * fill the ring (nothing when no ring). */
void ra__history_sample(void);
/* Samples tag too from now on, even when it is not among the largest. */
void ra__history_watch(ra_tag_t tag);
/* Writes the samples after seq since (all that are kept when older) as
 * regionalloc-history-1 JSON: 0 or ENOMEM. */
int ra__history_write(struct ra__out *o, uint64_t since);
void ra__history_prefork(void);
void ra__history_postfork_parent(void);
void ra__history_postfork_child(void);

/* -- prof_dump.c: the profile's output formats ------------------------------- */
/* ra_prof_dump without its checks (fmt and tag valid), as the library's own
 * work: 0 or an errno value (ENOTSUP, ENOMEM, EIO). */
int ra__prof_dump_write(struct ra__out *o, ra_prof_format_t fmt,
                        ra_tag_t tag);
/* The same for root's subtree (tag trees): its tags' stacks together;
 * EINVAL when root is not live. */
int ra__prof_dump_write_tree(struct ra__out *o, ra_prof_format_t fmt,
                             ra_tag_t root);
/* -- checkpoint.c: the ring of checkpoints -------------------------------- */
#define RA__CHECKPOINTS_KEPT 1024u
struct ra__checkpoint {
    uint64_t seq;       /* 1, 2, ... over the process's life */
    uint64_t time_ns;   /* since the library was loaded */
    uint64_t phase_ns;  /* since the previous checkpoint (or the load) */
    size_t tagged;      /* sum of tag_allocated */
    struct ra__global_stats global; /* jemalloc's stats.* */
    size_t rss, peak_rss;
    bool peak_since_start; /* the peak could not be reset after the
                              previous checkpoint */
    unsigned ntags;     /* tags that existed: ids 1..ntags */
    uint64_t creations; /* ra__tag_creations() before the figures */
    unsigned capacity;  /* entries allocated in tag_allocated */
    size_t *tag_allocated; /* [id - 1], untagged memory */
    char label[RA_TAG_NAME_MAX + 1];
};
/* A copy of the kept checkpoints, taken with the ring locked, which a
 * report writes without any lock held. */
struct ra__checkpoint_set {
    uint64_t recorded;              /* checkpoints ever taken */
    size_t kept;                    /* min(recorded, RA__CHECKPOINTS_KEPT) */
    unsigned ntags;                 /* the most tags any of them saw */
    struct ra__checkpoint *items;   /* oldest first; arrays copied too */
    size_t *tag_max;                /* scratch for ntags + 1 figures */
    /* [id], 1..nholders (at least ntags): who holds each id now, read
     * after the copy, in one view of the registry (ra__tag_holders). */
    unsigned nholders;
    struct ra__tag_holder *holders;
};
/* Whether checkpoint cp's figure for tag t is the current holder's of id
 * t: not a figure of a destroyed tag or of an earlier holder of the id. */
static inline bool ra__checkpoint_figure_current(
    const struct ra__checkpoint_set *set, const struct ra__checkpoint *cp,
    unsigned t)
{
    return t <= cp->ntags && set->holders[t].live &&
           cp->creations >= set->holders[t].born;
}
/* Takes a checkpoint under label, as ra_checkpoint() without its checks;
 * reset_peak: reset the kernel's peak RSS afterwards (not at exit, where a
 * parent's wait4 reads it). The library's own work, run quiet. Returns 0
 * or -1 with errno ENOMEM. */
int ra__checkpoint_take(const char *label, bool reset_peak);
/* Copies the ring into *set (the library's own memory). Returns true on
 * failure (ENOMEM). */
bool ra__checkpoint_copy(struct ra__checkpoint_set *set);
void ra__checkpoint_set_free(struct ra__checkpoint_set *set);

/* -- checkpoint_report.c: the phase table and its documents --------------- */
/* Writes the checkpoints of set in fmt (a valid format, tagging on). */
void ra__checkpoint_write(struct ra__out *o, ra_format_t fmt,
                          const struct ra__checkpoint_set *set);

/* -- snapshot.c: every live tag's figures at one moment --------------------- */
/* One tag's figures, or the untagged arenas' (id 0). */
struct ra__usage {
    ra_tag_t id;
    uint64_t born; /* its creation number (tag.c, ra__tag_creations) */
    char name[RA_TAG_NAME_MAX + 1];
    uint64_t allocated, active, resident, rss, mapped, peak_mapped, dirty,
        muzzy, retained, reserved, nmalloc, ndalloc, purges;
    /* The kernel's count of the region (measure.c): rss is all of it,
     * metadata its arenas' bookkeeping; rss_at_ns when it was taken (0:
     * not yet, or untagged). */
    uint64_t metadata, rss_at_ns;
    uint64_t limit, soft_limit, limit_failures;
    uint64_t arenas; /* in the tag's pool (0 untagged) */
    int priority;    /* ra_tag_set_priority's (0 untagged) */
    /* Tag trees: the row of the tag's parent (0 at the top level), its
     * depth (1 at the top level), and its subtree's totals (the tag's own
     * figures plus its descendants'; the peak is the subtree's own). */
    unsigned parent_row, depth;
    struct ra__tree_totals {
        uint64_t allocated, active, resident, mapped, peak_mapped, dirty,
            nmalloc, ndalloc;
    } tree;
};
/* A uint64_t figure of a usage by its offset (RA__USAGE_FIELD): the JSON
 * and Prometheus reports name their fields in tables. */
#define RA__USAGE_FIELD(f) offsetof(struct ra__usage, f)
static inline uint64_t ra__usage_field(const struct ra__usage *u,
                                       size_t offset)
{
    uint64_t v;

    memcpy(&v, (const char *)u + offset, sizeof v);
    return v;
}
/* Everything a report shows, read in one pass (after one statistics refresh
 * when detail is asked), so that the three formats (and the table's two
 * passes) show the same figures. global: the sum of the rows. */
struct ra__snapshot {
    unsigned ntags;          /* live tags: rows 1..ntags */
    struct ra__usage *rows;  /* [0]: untagged; the library's own memory */
    /* The rows 1..ntags in tree order: each tag before its children, the
     * children in id order (order[0] unused). */
    unsigned *order;
    struct ra__global_stats global;
    uint64_t process_rss, time_ns;
    uint64_t library;        /* the library's own memory, part of untagged */
    /* Bytes of blocks destroys left live in their slots (leftovers.c),
     * nobody's until the slot's next reset: in no row. */
    uint64_t leftovers;
    /* Regions passed over now: another mapping holds their space, so that
     * many fewer tags than REGIONALLOC_MAX_TAGS can be had until it goes
     * (tag_ids.c). */
    uint64_t regions_lost;
    /* The kernel's counts of the regions (measure.c): how old the oldest
     * is, and how many live tags have none yet. */
    uint64_t rss_oldest_age_ns, rss_unmeasured;
    /* The process's memory as the kernel counts it and the parts that make
     * its RssAnon (parts.c, measured; named in snapshot.c's name_parts). */
    struct ra__process_parts {
        uint64_t rss_anon, rss_file, page_tables;
        /* tags + untagged + metadata + library + other == rss_anon, but
         * where the named parts exceed it: then other is 0 and over says
         * by how much. */
        uint64_t tags, untagged, metadata, library, other, over;
        uint64_t at_ns;            /* when measured; 0: not yet */
        bool jemalloc_measured;    /* untagged and metadata are counts */
        bool in_cgroup;
        uint64_t cgroup_current, cgroup_anon, cgroup_file, cgroup_limit;
    } parts;
    struct ra__pressure_figures pressure; /* the memory limit (pressure.c) */
};
/* Takes a snapshot (tagging on); detail: one refresh, and jemalloc's own
 * figures of pages (ra__stats_read). Returns true on failure (ENOMEM,
 * nothing to free). Destroyed tags have no row. */
bool ra__snapshot_take(struct ra__snapshot *snap, bool detail);
void ra__snapshot_free(struct ra__snapshot *snap);

/* -- listing.c: which tags a report lists ----------------------------------- */
/* How many tags the text report and the dashboard list unless told. */
#define RA__TOP_TEXT 50
/* The roll-up's tag in Prometheus: tag="(rest)". A tag of that name is
 * never listed where the rest is rolled up. */
#define RA__REST_NAME "(rest)"
/* Tags not listed, under one listed tag (or at the top level): how many,
 * and the sums of their own figures that add up (allocated, active,
 * resident, rss, mapped, dirty, muzzy, retained, nmalloc, ndalloc, purges,
 * limit_failures, arenas; tree: the same sums); the others 0. */
struct ra__rollup {
    unsigned parent_row; /* the listed tag's row; 0: the top level */
    unsigned depth;      /* its line's: one below parent_row's */
    uint64_t tags;
    struct ra__usage sum;
};
/* A line of a listing: a listed tag's row, or (row 0) a roll-up. */
struct ra__line {
    unsigned row;
    unsigned rollup; /* index in rollups, for row 0 */
};
/* The tags a report lists: every one (top RA_REPORT_ALL_TAGS), or the top
 * highest ranked by their subtrees' resident bytes (ties: the earlier in
 * the tree's order), which include every listed tag's parent. */
struct ra__listing {
    bool cut;              /* a number was given: the rest is rolled up,
                              maybe into nothing */
    size_t top;
    bool *listed;          /* [row]: listed (row 0, untagged, true) */
    bool *has_children;    /* [row]: has children, listed or not */
    unsigned nlines;
    struct ra__line *lines; /* the tree's order, each roll-up after the
                               listed children of its tag, the top level's
                               last */
    unsigned nrollups;
    struct ra__rollup *rollups;
    struct ra__rollup rest; /* every tag not listed (the sum of rollups) */
};
/* Makes snap's listing for top (RA_REPORT_ALL_TAGS: every tag): O(n log
 * top) over the n rows. Returns true on failure (ENOMEM, nothing to
 * free). */
bool ra__listing_make(struct ra__listing *l, const struct ra__snapshot *snap,
                      size_t top);
void ra__listing_free(struct ra__listing *l);
/* Room for a roll-up's name and its NUL. */
#define RA__ROLLUP_NAME_MAX (RA__ESCAPED_MAX + 48)
/* Writes ru's name into buf (len > 0): "(2,950 more tags)" at the top
 * level, "(412 more under sessions)" under a listed tag, its name escaped
 * in style. */
void ra__rollup_name(char *buf, size_t len, const struct ra__snapshot *snap,
                     const struct ra__rollup *ru, enum ra__escape_style style);

/* -- report.c: ra_report ---------------------------------------------------- */
/* Writes every tag's usage now in fmt (valid, or'ed with RA_REPORT_DETAIL
 * for one statistics refresh and jemalloc's figures) to o, listing top
 * tags (ra_report_top). Returns 0, or -1 with errno ENOMEM (nothing
 * written). Tagging on. */
int ra__report_write(struct ra__out *o, ra_format_t fmt, size_t top);
/* How many tags a report in fmt (without RA_REPORT_DETAIL) lists unless
 * told: RA__TOP_TEXT in text, every tag in JSON and Prometheus. */
size_t ra__report_top_default(ra_format_t fmt);

/* -- the report's formats: what they share ----------------------------------- */
/* What a row shows: a tag, the tags a roll-up stands for, or the untagged
 * arenas. */
enum ra__row_kind { RA__ROW_TAG, RA__ROW_ROLLUP, RA__ROW_UNTAGGED };
/* The memory limit's source and level, as the reports name them. */
static inline const char *ra__limit_source_name(enum ra__limit_source s)
{
    static const char *const names[] = {"none", "call", "environment",
                                        "cgroup"};
    return names[s];
}
static inline const char *ra__pressure_level_name(ra_pressure_t level)
{
    static const char *const names[] = {"none", "high", "limit"};
    return names[level];
}
/* report_text.c: the table and the lines under it. */
void ra__report_text(struct ra__out *o, const struct ra__snapshot *snap,
                     const struct ra__listing *l);
/* report_json.c: the document (doc/json.md). */
void ra__report_json(struct ra__emitter *e, const struct ra__snapshot *snap,
                     const struct ra__listing *l);
/* report_prometheus.c: the exposition. Returns false when written, true
 * when the library had no memory for the escaped names (nothing
 * written). */
bool ra__report_prometheus(struct ra__emitter *e,
                           const struct ra__snapshot *snap,
                           const struct ra__listing *l);

/* -- what init.c calls of the output side -------------------------------- */
/* shm.c: with REGIONALLOC_SHM=1, at load: makes the stats segment and starts
 * its publisher (a line on stderr if it cannot); at exit: removes it, in
 * the process that made it only. */
void ra__shm_start(void);
void ra__shm_at_exit(void);
/* http.c: with REGIONALLOC_HTTP, at load: starts the server (a line on
 * stderr if it cannot); at exit: stops it. Its lock is the outermost of the
 * fork handlers', and never waited for by the thread that holds it: a fork
 * from a signal handler in the middle of another fork, or of
 * ra_http_start, goes through. */
void ra__http_start_configured(void);
void ra__http_at_exit(void);
/* The address the server listens on ("127.0.0.1:43567", "[::1]:8080"), or
 * "" when none runs: what a port of 0 chose, for the live segment. */
#define RA__HTTP_ADDR_MAX 64
void ra__http_served(char out[RA__HTTP_ADDR_MAX]);
void ra__http_prefork(void);
void ra__http_postfork_parent(void);
void ra__http_postfork_child(void);
/* report_exit.c, at load: notes the process that loaded the library and
 * keeps a copy of stderr for the exit reports. Never allocates. */
void ra__report_at_load(void);
/* report_exit.c, at exit: writes the reports REGIONALLOC_STATS,
 * REGIONALLOC_CHECKPOINTS and REGIONALLOC_PROF_DUMP ask for, in the process
 * that loaded the library, and in a forked child those whose path holds
 * %p. */
void ra__report_at_exit(void);
/* symbols.c: fork handlers for its lock (prof_dump.h). */
void ra__symbols_prefork(void);
void ra__symbols_postfork_parent(void);
void ra__symbols_postfork_child(void);
/* checkpoint.c: fork handlers for the ring's lock. */
void ra__checkpoint_prefork(void);
void ra__checkpoint_postfork(void);

/* -- http_door.c: the server's front door (with libmicrohttpd) ------------- */
struct MHD_Daemon;
/* Starts the thread that accepts the connections of listen_fd (listening,
 * non-blocking), reads each request's head, answers itself what daemon
 * (started with MHD_USE_NO_LISTEN_SOCKET) would drop without a word (400),
 * and hands each whole request to daemon while it holds fewer than places
 * connections; a head is answered 408 after silence_s seconds of silence
 * or 30 seconds in all, a request that finds no place in those 30 seconds
 * 503, and a connection daemon holds 20 seconds after it started is shut
 * down. Returns true on failure (errno set). One door at a time, under
 * http.c's lock. */
bool ra__http_door_open(int listen_fd, struct MHD_Daemon *daemon,
                        unsigned places, unsigned silence_s);
/* daemon started the connection of socket fd (its notify callback, on its
 * thread): the door shuts it down if it is not done 20 seconds later. */
void ra__http_door_started(int fd);
/* daemon closed the connection of socket fd, or is about to (its notify
 * callback, on its thread): a place is free. These two take the door's
 * lock of its connections briefly (never held across anything but a
 * shutdown(2)) and allocate nothing. */
void ra__http_door_left(int fd);
/* Stops the thread (joined) and closes the connections it held; the
 * listening socket is the caller's. */
void ra__http_door_close(void);
/* In a forked child, where the thread does not exist: closes the
 * connections it held, and its wake-up pipe, which the parent shares. */
void ra__http_door_forget(void);

#endif /* RA_OUTPUT_H */

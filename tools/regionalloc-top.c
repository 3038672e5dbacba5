/* regionalloc-top: shows the live stats segments that processes using
 * libregionalloc publish with REGIONALLOC_SHM=1 (doc/shm.md) as a table
 * refreshed in place, one table, one JSON document, or a list of the
 * publishers. A plain C program: it reads files and never links the
 * library, so watching a process neither stops nor changes it. This file
 * owns the options, the table, the live view, the list and --clean;
 * segment.c reads the segments, format.c writes the text. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "format.h"
#include "segment.h"

#define PROGRAM "regionalloc-top"
#define DEFAULT_DIR "/dev/shm"
#define NAME_WIDTH_MAX 32
#define NS_PER_S 1000000000.0

enum sort_key { SORT_ALLOCATED, SORT_RSS, SORT_MAPPED, SORT_NAME };

struct options {
    const char *dir;
    uint64_t interval_ns;
    bool interval_given, once, json, clean, tree;
    enum sort_key sort;
    long pid; /* 0: none given */
};

/* What the table shows: a copy, an earlier one for the rates (or NULL),
 * and whether the process is gone. */
struct view {
    const struct segment_copy *now, *before;
    long pid;
    bool stale;
    unsigned max_rows; /* 0: no limit */
    bool tree;         /* --tree: children under their parent */
    bool once;         /* --once: the whole "process:" section */
};

struct row {
    uint64_t key; /* the sort's figure; 0 for every row when by name */
    const struct ra_shm_record *rec;
};

/* The live view's state for its signal handler and its exit: the quit
 * signal caught, and the terminal's settings to restore if keys_watched. */
static volatile sig_atomic_t quit_signal;
static bool keys_watched;
static struct termios saved_termios;

/* The command of a live process, from /proc/<pid>/comm; "-" if unknown. */
static void read_command(long pid, char *out, size_t size)
{
    char path[64], raw[64];
    ssize_t n = -1;
    int fd;

    snprintf(path, sizeof path, "/proc/%ld/comm", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, raw, sizeof raw - 1);
        close(fd);
    }
    if (n <= 0) {
        snprintf(out, size, "-");
        return;
    }
    if (raw[n - 1] == '\n')
        n--;
    escape_for_terminal(out, size, raw, (size_t)n);
}

/* -- the table ----------------------------------------------------------- */

/* The same tag in the earlier copy, if that copy is of an earlier
 * publication: an id may since have been destroyed and handed out again. */
static const struct ra_shm_figures *earlier_figures(const struct view *v,
                                                    uint32_t i)
{
    const struct ra_shm_record *then, *now = &v->now->records[i];

    if (v->before == NULL || i >= v->before->header.nrecords ||
        v->before->header.published >= v->now->header.published ||
        v->before->header.monotonic_ns >= v->now->header.monotonic_ns)
        return NULL;
    then = &v->before->records[i];
    if (!(then->flags & RA_SHM_RECORD_LIVE) ||
        strcmp(then->name, now->name) != 0 ||
        then->figures.nmalloc > now->figures.nmalloc)
        return NULL;
    return &then->figures;
}

static void format_rates(const struct view *v, uint32_t i, char *bytes,
                         char *allocs, size_t size)
{
    const struct ra_shm_figures *then = earlier_figures(v, i);
    const struct ra_shm_figures *now = &v->now->records[i].figures;
    double seconds;

    if (then == NULL) {
        snprintf(bytes, size, "-");
        snprintf(allocs, size, "-");
        return;
    }
    seconds = (double)(v->now->header.monotonic_ns -
                       v->before->header.monotonic_ns) / NS_PER_S;
    /* The difference in two's complement is the signed change. */
    format_byte_rate(bytes, size,
                     (double)(int64_t)(now->allocated - then->allocated) /
                         seconds);
    format_count_rate(allocs, size,
                      (double)(now->nmalloc - then->nmalloc) / seconds);
}

static void format_limit(char *buf, size_t size,
                         const struct ra_shm_figures *f)
{
    char n[24];

    if (f->limit != 0)
        format_size(buf, size, f->limit);
    else if (f->soft_limit != 0)
        snprintf(buf, size, "soft %s", format_size(n, sizeof n, f->soft_limit));
    else
        snprintf(buf, size, "-");
}

static int compare_rows(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    int by_name;

    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    by_name = strcmp(x->rec->name, y->rec->name);
    if (by_name != 0)
        return by_name;
    return x->rec->id < y->rec->id ? -1 : x->rec->id > y->rec->id;
}

static uint64_t sort_value(const struct ra_shm_figures *f, enum sort_key key)
{
    switch (key) {
    case SORT_ALLOCATED:
        return f->allocated;
    case SORT_RSS:
        return f->rss;
    case SORT_MAPPED:
        return f->mapped;
    case SORT_NAME:
        break;
    }
    return 0;
}

/* The live records in the order the table shows them; *n of them. NULL
 * when out of memory. */
static struct row *sorted_rows(const struct segment_copy *c, enum sort_key key,
                               size_t *n)
{
    struct row *rows = malloc(((size_t)c->header.nrecords + 1) * sizeof *rows);

    *n = 0;
    if (rows == NULL)
        return NULL;
    for (uint32_t i = 0; i < c->header.nrecords; i++) {
        const struct ra_shm_record *r = &c->records[i];
        if (r->flags & RA_SHM_RECORD_LIVE)
            rows[(*n)++] = (struct row){sort_value(&r->figures, key), r};
    }
    qsort(rows, *n, sizeof *rows, compare_rows);
    return rows;
}

static void print_summary(const struct view *v)
{
    const struct ra_shm_header *h = &v->now->header;
    char cmd[80], every[24], a[24], b[24], c[24], d[24], e[24];
    uint64_t age;

    if (v->stale)
        snprintf(cmd, sizeof cmd, "gone");
    else
        read_command(v->pid, cmd, sizeof cmd);
    printf("pid %ld (%s): %" PRIu64 " publications, every %s", v->pid, cmd,
           h->published, format_interval(every, sizeof every, h->interval_ns));
    if (segment_age(v->now, &age))
        printf(", last %.2fs ago", (double)age / NS_PER_S);
    printf("%s\n", v->stale ? "  [stale: the process is gone]" : "");
    printf("untagged %s allocated; process %s allocated, %s mapped, %s rss; "
           "library %s\n",
           format_size(a, sizeof a, h->untagged.allocated),
           format_size(b, sizeof b, h->process.allocated),
           format_size(c, sizeof c, h->process.mapped),
           format_size(d, sizeof d, h->process.rss),
           format_size(e, sizeof e, h->library_allocated));
    /* The parts of the process's RssAnon as the library's text report
     * shows them; the live view keeps to their line. */
    print_parts(&h->parts, v->once);
    if (h->leftovers_allocated != 0)
        printf("left live by destroyed tags: %s (freed at their slots' next "
               "reset)\n",
               format_size(a, sizeof a, h->leftovers_allocated));
    /* As the library's text report has it: a limit at or above the
     * address space is none in effect. */
    if (h->pressure.limit != 0 && !ra__limit_in_effect(h->pressure.limit))
        printf("memory limit %s (%s): none in effect (at or above the "
               "address space)\n",
               format_size(a, sizeof a, h->pressure.limit),
               limit_source_name(h->pressure.source));
    else if (h->pressure.limit != 0)
        printf("memory limit %s (%s): resident %s, pressure %s; given back "
               "%s, %" PRIu64 " allocations refused\n",
               format_size(a, sizeof a, h->pressure.limit),
               limit_source_name(h->pressure.source),
               format_size(b, sizeof b, h->pressure.resident),
               pressure_level_name(h->pressure.level),
               format_size(c, sizeof c, h->pressure.given_back),
               h->pressure.refusals);
}

/* f: the figures shown (the record's, or with --tree its subtree's);
 * indent: spaces before the name (--tree: two a level). */
static void print_row(const struct view *v, const struct ra_shm_record *r,
                      const struct ra_shm_figures *f, int indent, int width)
{
    char name[SHOWN_NAME_MAX + 16], a[24], rss[24], m[24], d[24], rate[24],
        allocs[24], limit[32];
    int room = width - indent;

    memset(name, ' ', (size_t)indent);
    /* A name cut short ends with "..", never inside an escape. */
    if (escape_for_terminal(name + indent, SHOWN_NAME_MAX, r->name,
                            sizeof r->name) > (size_t)room) {
        size_t kept = escape_for_terminal(name + indent,
                                          room > 3 ? (size_t)room - 1 : 2,
                                          r->name, sizeof r->name);
        memcpy(name + indent + kept, "..", 3);
    }
    format_rates(v, r->id - 1, rate, allocs, sizeof rate);
    format_limit(limit, sizeof limit, &r->figures);
    /* As the library's text report: a region not yet counted is "-". */
    if (f == &r->figures && r->rss_at_ns == 0)
        snprintf(rss, sizeof rss, "-");
    else
        format_size(rss, sizeof rss, f->rss);
    printf("%-*s %10s %10s %10s %10s %13s %10s %12s\n", width, name,
           format_size(a, sizeof a, f->allocated), rss,
           format_size(m, sizeof m, f->mapped),
           format_size(d, sizeof d, f->dirty), rate, allocs, limit);
}

/* The name column fits the longest escaped name, within NAME_WIDTH_MAX. */
static int name_width(const struct row *rows, size_t n)
{
    char name[SHOWN_NAME_MAX];
    size_t width = 3;

    for (size_t i = 0; i < n; i++) {
        size_t len = escape_for_terminal(name, sizeof name, rows[i].rec->name,
                                         sizeof rows[i].rec->name);
        if (len > width)
            width = len;
    }
    return width < NAME_WIDTH_MAX ? (int)width : NAME_WIDTH_MAX;
}

/* --tree: appends the live children of parent (0: the top level) in the
 * rows' order, each followed by its own subtree, to out. */
static void tree_order(const struct row *rows, size_t n, uint32_t parent,
                       const struct row **out, size_t *k)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].rec->parent == parent) {
            out[(*k)++] = &rows[i];
            tree_order(rows, n, rows[i].rec->id, out, k);
        }
}

/* --tree: each record's subtree figures (itself and its descendants), by
 * id - 1. The reader checked that every chain ends at the top level. */
static struct ra_shm_figures *subtree_sums(const struct segment_copy *c)
{
    struct ra_shm_figures *sums =
        calloc((size_t)c->header.nrecords + 1, sizeof *sums);

    if (sums == NULL)
        return NULL;
    for (uint32_t i = 0; i < c->header.nrecords; i++) {
        const struct ra_shm_record *r = &c->records[i];
        if (!(r->flags & RA_SHM_RECORD_LIVE))
            continue;
        for (uint32_t a = r->id; a != 0; a = c->records[a - 1].parent) {
            struct ra_shm_figures *t = &sums[a - 1];
            t->allocated += r->figures.allocated;
            t->rss += r->figures.rss;
            t->mapped += r->figures.mapped;
            t->dirty += r->figures.dirty;
        }
    }
    return sums;
}

/* The rows the terminal has no room for, as the library's reports roll
 * them up: one line, "(2,950 more tags)", with the sums of their own
 * figures, so that the table still adds up. */
static void print_rest(const struct row *const *order, size_t from,
                       size_t n, int width)
{
    struct ra_shm_figures sum = {0};
    char name[REST_NAME_MAX], a[24], rss[24], m[24], d[24];

    for (size_t i = from; i < n; i++) {
        sum.allocated += order[i]->rec->figures.allocated;
        sum.rss += order[i]->rec->figures.rss;
        sum.mapped += order[i]->rec->figures.mapped;
        sum.dirty += order[i]->rec->figures.dirty;
    }
    printf("%-*s %10s %10s %10s %10s %13s %10s %12s\n", width,
           format_rest(name, sizeof name, n - from),
           format_size(a, sizeof a, sum.allocated),
           format_size(rss, sizeof rss, sum.rss),
           format_size(m, sizeof m, sum.mapped),
           format_size(d, sizeof d, sum.dirty), "-", "-", "-");
}

/* Prints the summary and a row per live tag, or as many as the terminal
 * holds and a line for the others. Returns true when out of memory. */
static bool print_table(const struct view *v, enum sort_key key)
{
    size_t n, shown, k = 0;
    struct row *rows = sorted_rows(v->now, key, &n);
    const struct row **order;
    struct ra_shm_figures *sums = NULL;
    int width;

    if (rows == NULL)
        return true;
    /* An array of pointers to rows. */
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    order = malloc((n + 1) * sizeof *order);
    if (order == NULL || (v->tree && (sums = subtree_sums(v->now)) == NULL)) {
        free(order);
        free(rows);
        return true;
    }
    if (v->tree)
        tree_order(rows, n, 0, order, &k);
    else
        for (; k < n; k++)
            order[k] = &rows[k];
    width = name_width(rows, n);
    if (v->tree)
        width += 2 * 7; /* up to 8 levels */
    if (width > NAME_WIDTH_MAX)
        width = NAME_WIDTH_MAX;
    shown = v->max_rows != 0 && n > v->max_rows ? v->max_rows - 1 : n;
    if (shown < n) {
        char rest[REST_NAME_MAX];
        int len = (int)strlen(format_rest(rest, sizeof rest, n - shown));
        if (width < len)
            width = len;
    }
    print_summary(v);
    printf("\n%-*s %10s %10s %10s %10s %13s %10s %12s\n", width, "TAG",
           "ALLOCATED", "RSS", "MAPPED", "DIRTY", "ALLOC/S", "NMALLOC/S",
           "LIMIT");
    for (size_t i = 0; i < shown; i++) {
        const struct ra_shm_record *r = order[i]->rec;
        if (v->tree)
            print_row(v, r, &sums[r->id - 1], 2 * (int)(r->depth - 1), width);
        else
            print_row(v, r, &r->figures, 0, width);
    }
    if (shown < n)
        print_rest(order, shown, n, width);
    if (n == 0)
        printf("(no tags)\n");
    free(sums);
    free(order);
    free(rows);
    return false;
}

/* -- one process --------------------------------------------------------- */

/* Says what is wrong with the file name in o->dir. */
static void report(const struct options *o, const char *name, const char *why)
{
    char path[PATH_MAX + SEGMENT_NAME_MAX];

    segment_path(path, sizeof path, o->dir, name);
    fprintf(stderr, PROGRAM ": %s: %s\n", path, why);
}

/* The first read of a process's segment: 0, or 1 after saying what is
 * wrong. */
static int read_first(const struct options *o, int dirfd,
                      struct segment_copy *c)
{
    char name[SEGMENT_NAME_MAX], why[WHY_MAX];
    enum read_result r = read_pid_segment(dirfd, o->pid, c, name, why);

    if (r == READ_GONE)
        snprintf(why, sizeof why, "no such segment: process %ld does not "
                 "publish (REGIONALLOC_SHM=1 turns it on)", o->pid);
    if (r != READ_OK)
        report(o, name, why);
    return r != READ_OK;
}

/* --once and --json: one read, or two an interval apart for the rates. */
static int show_once(const struct options *o, int dirfd)
{
    struct segment_copy first = {0}, second = {0};
    struct view v = {.now = &first, .pid = o->pid, .tree = o->tree,
                     .once = true};
    char name[SEGMENT_NAME_MAX], why[WHY_MAX];
    int status = read_first(o, dirfd, &first);

    if (status == 0 && !o->json && o->interval_given) {
        sleep_ns(o->interval_ns);
        switch (read_pid_segment(dirfd, o->pid, &second, name, why)) {
        case READ_OK:
            v.now = &second;
            v.before = &first;
            break;
        case READ_GONE: /* it exited: the first read is all there is */
            break;
        case READ_FAILED:
        case READ_FOREIGN:
        case READ_STALE:
        case READ_VERSION:
            report(o, name, why);
            status = 1;
        }
    }
    v.stale = process_gone(o->pid);
    if (status == 0 && o->json)
        print_json(v.now, v.stale);
    else if (status == 0 && print_table(&v, o->sort))
        status = 1;
    free(first.records);
    free(second.records);
    return status;
}

/* -- the live view ------------------------------------------------------- */

static void on_quit_signal(int sig)
{
    quit_signal = sig;
}

/* Catches the quit signals, which stay blocked except while waiting (in
 * ppoll, with *wait_mask), so none is lost between a check and the wait. */
static void catch_quit_signals(sigset_t *wait_mask)
{
    static const int quits[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa = {.sa_handler = on_quit_signal};
    sigset_t block;

    sigemptyset(&sa.sa_mask);
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof quits / sizeof quits[0]; i++) {
        sigaction(quits[i], &sa, NULL);
        sigaddset(&block, quits[i]);
    }
    sigprocmask(SIG_BLOCK, &block, wait_mask);
    for (size_t i = 0; i < sizeof quits / sizeof quits[0]; i++)
        sigdelset(wait_mask, quits[i]);
}

/* Keys without Enter or echo when stdin is a terminal; Ctrl-C still
 * raises SIGINT. */
static void enter_raw_mode(void)
{
    struct termios raw;

    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_termios) != 0)
        return;
    raw = saved_termios;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    keys_watched = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
}

static void leave_raw_mode(void)
{
    if (keys_watched)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_termios);
    keys_watched = false;
}

/* Waits ns. Returns true if the user quit meanwhile (q, or a signal). */
static bool wait_or_quit(uint64_t ns, const sigset_t *wait_mask)
{
    uint64_t deadline = monotonic_ns() + ns, now;
    struct pollfd key = {.fd = STDIN_FILENO, .events = POLLIN};

    while (quit_signal == 0 && (now = monotonic_ns()) < deadline) {
        struct timespec left = {(time_t)((deadline - now) / 1000000000u),
                                (long)((deadline - now) % 1000000000u)};
        char ch;
        if (ppoll(&key, keys_watched ? 1 : 0, &left, wait_mask) <= 0)
            continue;
        if (read(STDIN_FILENO, &ch, 1) != 1)
            leave_raw_mode(); /* the terminal hung up: only time now */
        else if (ch == 'q' || ch == 'Q')
            return true;
    }
    return quit_signal != 0;
}

/* The rows the terminal has room for below the summary and the column
 * titles; 0 if it does not say. */
static unsigned terminal_rows(void)
{
    struct winsize ws;

    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row < 7)
        return 0;
    return ws.ws_row - 6u;
}

/* Draws one frame: the screen cleared, the table. Returns true if the
 * view ends here (the process is gone, or out of memory: *status). */
static bool draw_frame(const struct options *o, const struct segment_copy *now,
                       const struct segment_copy *before, int *status)
{
    struct view v = {.now = now, .before = before, .pid = o->pid,
                     .stale = process_gone(o->pid),
                     .max_rows = terminal_rows(), .tree = o->tree};

    fputs("\033[H\033[2J", stdout);
    if (print_table(&v, o->sort)) {
        fprintf(stderr, PROGRAM ": out of memory\n");
        *status = 1;
        return true;
    }
    if (v.stale)
        printf("process %ld is gone without removing its segment; "
               PROGRAM " --clean removes it\n", o->pid);
    fflush(stdout);
    return v.stale;
}

/* Redraws every interval until q, a signal, or the segment's end, from
 * three copies that take turns: the newest, the one of an earlier
 * publication (the rates' base), and the next read. A read of the same
 * publication as the newest replaces it without moving the base, so that
 * the rates survive a reader faster than the publisher. Returns the exit
 * status. */
static int watch(const struct options *o, int dirfd,
                 struct segment_copy copies[3])
{
    struct segment_copy *now = &copies[0], *before = NULL,
                        *next = &copies[1], *spare = &copies[2];
    sigset_t wait_mask;
    char name[SEGMENT_NAME_MAX], why[WHY_MAX];
    int status = 0;

    catch_quit_signals(&wait_mask);
    enter_raw_mode();
    if (read_first(o, dirfd, now))
        return 1;
    for (;;) {
        struct segment_copy *old = now;
        if (draw_frame(o, now, before, &status) ||
            wait_or_quit(o->interval_ns, &wait_mask))
            return status;
        switch (read_pid_segment(dirfd, o->pid, next, name, why)) {
        case READ_OK:
            break;
        case READ_GONE:
            printf("process %ld has exited: its segment is gone\n", o->pid);
            return 0;
        case READ_FAILED:
        case READ_FOREIGN:
        case READ_STALE:
        case READ_VERSION:
            report(o, name, why);
            return 1;
        }
        now = next;
        if (now->header.published != old->header.published) {
            next = before != NULL ? before : spare;
            before = old;
        } else {
            next = old;
        }
    }
}

static int show_live(const struct options *o, int dirfd)
{
    struct segment_copy copies[3] = {0};
    int status = watch(o, dirfd, copies);

    leave_raw_mode();
    fflush(stdout);
    for (int i = 0; i < 3; i++)
        free(copies[i].records);
    return status;
}

/* -- every process: the list and --clean --------------------------------- */

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
    report(o, name, why);
    return true;
}

/* Lists the publishers. Returns 1 if a segment could not be read. */
static int list_publishers(const struct options *o, int dirfd)
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
            report(o, name, strerror(err));
        return err != ENOENT;
    }
    printf("removed %s (%s)\n", path, reason);
    ++*removed;
    return false;
}

static int clean_stale(const struct options *o, int dirfd)
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

/* -- options ------------------------------------------------------------- */

static void print_usage(FILE *out)
{
    fputs("usage: " PROGRAM " [options] [PID]\n"
          "Shows each tag's memory in a process that runs libregionalloc "
          "with\nREGIONALLOC_SHM=1, from its stats segment "
          "/dev/shm/regionalloc.PID, refreshed\nin place until q or "
          "Ctrl-C. Without PID, lists the processes that publish.\n\n"
          "  -i, --interval SECONDS  refresh every SECONDS (default 1); with "
          "--once,\n"
          "                          read twice SECONDS apart to show rates\n"
          "  -s, --sort KEY          allocated (default), rss, mapped or "
          "name\n"
          "      --tree              show children under their parent (tag "
          "trees), with\n"
          "                          the subtree's figures\n"
          "      --once              print one table and exit\n"
          "      --json              print one JSON document and exit\n"
          "      --clean             remove your stale segments (of "
          "processes gone)\n"
          "  -d, --dir DIR           read segments in DIR, not /dev/shm\n"
          "  -h, --help              print this help and exit\n",
          out);
}

/* Exits 2 after one line on what is wrong and the usage. */
__attribute__((noreturn)) static void usage_error(const char *what,
                                                  const char *arg)
{
    fprintf(stderr, PROGRAM ": %s%s%s\n", what, arg ? ": " : "",
            arg ? arg : "");
    print_usage(stderr);
    exit(2);
}

static uint64_t parse_interval(const char *arg)
{
    char *end;
    double s;

    errno = 0;
    s = strtod(arg, &end);
    if (errno != 0 || end == arg || *end != '\0' || !(s >= 0.01) ||
        s > 3600.0)
        usage_error("--interval: expected seconds from 0.01 to 3600, as "
                    "0.5 or 2, not", arg);
    return (uint64_t)(s * NS_PER_S + 0.5);
}

static enum sort_key parse_sort(const char *arg)
{
    static const char *const keys[] = {"allocated", "rss", "mapped", "name"};

    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(arg, keys[i]) == 0)
            return (enum sort_key)i;
    usage_error("--sort: expected allocated, rss, mapped or name, not", arg);
}

static long parse_pid(const char *arg)
{
    char *end;
    long pid;

    errno = 0;
    pid = strtol(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || pid < 1 ||
        pid > INT32_MAX)
        usage_error("expected a process id, not", arg);
    return pid;
}

static struct options parse_options(int argc, char **argv)
{
    enum { OPT_ONCE = 256, OPT_JSON, OPT_CLEAN, OPT_TREE };
    static const struct option longs[] = {
        {"interval", required_argument, NULL, 'i'},
        {"sort", required_argument, NULL, 's'},
        {"dir", required_argument, NULL, 'd'},
        {"once", no_argument, NULL, OPT_ONCE},
        {"json", no_argument, NULL, OPT_JSON},
        {"clean", no_argument, NULL, OPT_CLEAN},
        {"tree", no_argument, NULL, OPT_TREE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct options o = {.dir = DEFAULT_DIR, .interval_ns = 1000000000u};
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":i:s:d:h", longs, NULL)) != -1) {
        switch (c) {
        case 'i':
            o.interval_ns = parse_interval(optarg);
            o.interval_given = true;
            break;
        case 's':
            o.sort = parse_sort(optarg);
            break;
        case 'd':
            o.dir = optarg;
            break;
        case OPT_ONCE:
            o.once = true;
            break;
        case OPT_JSON:
            o.json = true;
            break;
        case OPT_CLEAN:
            o.clean = true;
            break;
        case OPT_TREE:
            o.tree = true;
            break;
        case 'h':
            print_usage(stdout);
            exit(0);
        case ':':
            usage_error("missing the value of", argv[optind - 1]);
        default:
            usage_error("unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc)
        o.pid = parse_pid(argv[optind++]);
    if (optind < argc)
        usage_error("one PID at most; extra argument", argv[optind]);
    if (o.pid != 0 && o.clean)
        usage_error("--clean takes no PID", NULL);
    if (o.pid == 0 && o.json)
        usage_error("--json needs a PID", NULL);
    return o;
}

int main(int argc, char **argv)
{
    struct options o = parse_options(argc, argv);
    int dirfd, status;

    catch_bus_errors();
    dirfd = open(o.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        fprintf(stderr, PROGRAM ": %s: %s\n", o.dir, strerror(errno));
        return 1;
    }
    if (o.clean)
        status = clean_stale(&o, dirfd);
    else if (o.pid == 0)
        status = list_publishers(&o, dirfd);
    else if (o.once || o.json)
        status = show_once(&o, dirfd);
    else
        status = show_live(&o, dirfd);
    close(dirfd);
    return status;
}

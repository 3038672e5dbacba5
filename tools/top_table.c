/* regionalloc-top's table of one process: the summary of its segment, a
 * row per live tag (sorted, or as a tree with each subtree's figures), the
 * rates between two copies, and the rows the terminal has no room for
 * rolled up into one line. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "top.h"

#define NAME_WIDTH_MAX 32

struct row {
    uint64_t key; /* the sort's figure; 0 for every row when by name */
    const struct ra_shm_record *rec;
};

void read_command(long pid, char *out, size_t size)
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

/* The rows in the table's order: as sorted, or with --tree each followed
 * by its subtree. The sorted order is written first although --tree
 * replaces it: the reader checked that every chain ends at the top level,
 * so that tree_order places every row, which the analyzer cannot know. */
static void order_rows(const struct view *v, const struct row *rows, size_t n,
                       const struct row **order)
{
    size_t k;

    for (k = 0; k < n; k++)
        order[k] = &rows[k];
    if (v->tree) {
        k = 0;
        tree_order(rows, n, 0, order, &k);
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

bool print_table(const struct view *v, enum sort_key key)
{
    size_t n, shown;
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
    order_rows(v, rows, n, order);
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

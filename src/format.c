/* Floor: services. Output shared by the reports: checked writes, human
 * units, the rounding of the profile's estimates and aligned text tables. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "output.h"

/* The caller's FILE runs outside the library's quiet section: what it
 * allocates (its buffer) is the caller's, and freed by the caller's
 * fclose, which hooks see. Neither is tagged: the report's tag stays
 * suspended. */
static void leave_quiet(const struct ra__out *o)
{
    if (o->callers) {
        ra__assert_no_lock_held();
        ra__hooks_muted--;
    }
}

static void enter_quiet(const struct ra__out *o)
{
    if (o->callers)
        ra__hooks_muted++;
}

static void put(struct ra__out *o, const void *buf, size_t len)
{
    leave_quiet(o);
    if (fwrite(buf, 1, len, o->file) != len)
        o->failed = true;
    enter_quiet(o);
}

static void write_through(struct ra__out *o, const void *buf, size_t len)
{
    const char *p = buf;

    if (o->prefix == NULL) {
        if (len != 0)
            put(o, p, len);
        return;
    }
    while (len > 0) {
        const char *nl = memchr(p, '\n', len);
        size_t n = nl != NULL ? (size_t)(nl - p) + 1 : len;
        if (!o->mid_line)
            put(o, o->prefix, strlen(o->prefix));
        put(o, p, n);
        o->mid_line = nl == NULL;
        p += n;
        len -= n;
    }
}

static void flush_buffered(struct ra__out *o)
{
    write_through(o, o->buf, o->buffered);
    o->buffered = 0;
}

void ra__out_write(struct ra__out *o, const void *buf, size_t len)
{
    if (len > sizeof o->buf - o->buffered)
        flush_buffered(o);
    if (len >= sizeof o->buf) {
        write_through(o, buf, len);
        return;
    }
    memcpy(o->buf + o->buffered, buf, len);
    o->buffered += len;
}

void ra__out_str(struct ra__out *o, const char *s)
{
    ra__out_write(o, s, strlen(s));
}

void ra__out_scratch(struct ra__out *o, int written)
{
    /* A cut line is a bug of the library's: the formats are bounded. */
    ra__assert(written < RA__OUT_FMT_MAX);
    if (written < 0 || written >= RA__OUT_FMT_MAX)
        o->failed = true;
    else
        ra__out_write(o, o->scratch, (size_t)written);
}

uint64_t ra__round_count(double x)
{
    return x < 0.5 ? 0 : (uint64_t)(x + 0.5);
}

static bool format_valid(ra_format_t fmt)
{
    return fmt == RA_FORMAT_TEXT || fmt == RA_FORMAT_JSON ||
           fmt == RA_FORMAT_PROMETHEUS;
}

int ra__out_check_args(FILE *out, ra_format_t fmt)
{
    return ra__check_call(out != NULL && format_valid(fmt));
}

int ra__out_finish(struct ra__out *o)
{
    flush_buffered(o);
    leave_quiet(o);
    if (fflush(o->file) != 0)
        o->failed = true;
    enter_quiet(o);
    if (o->failed) {
        errno = EIO;
        return -1;
    }
    return 0;
}

const char *ra__human_bytes(char *buf, size_t len, uint64_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB"};
    double v = (double)bytes / 1024;
    unsigned u = 0;

    if (bytes < 1024) {
        snprintf(buf, len, "%" PRIu64 " B", bytes);
        return buf;
    }
    while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

const char *ra__human_ns(char *buf, size_t len, uint64_t ns)
{
    double ms = (double)ns / 1e6, s = (double)ns / 1e9;

    /* Two or three significant digits, as a reader compares phases. */
    if (ms < 10)
        snprintf(buf, len, "%.2f ms", ms);
    else if (ms < 999.5)
        snprintf(buf, len, "%.0f ms", ms);
    else if (s < 9.995)
        snprintf(buf, len, "%.2f s", s);
    else if (s < 99.95)
        snprintf(buf, len, "%.1f s", s);
    else
        snprintf(buf, len, "%.0f s", s);
    return buf;
}

static void out_spaces(struct ra__out *o, size_t n)
{
    static const char blanks[] = "                                ";

    while (n > 0) {
        size_t chunk = n < sizeof blanks - 1 ? n : sizeof blanks - 1;
        ra__out_write(o, blanks, chunk);
        n -= chunk;
    }
}

static void out_dashes(struct ra__out *o, size_t n)
{
    static const char dashes[] = "--------------------------------";

    while (n > 0) {
        size_t chunk = n < sizeof dashes - 1 ? n : sizeof dashes - 1;
        ra__out_write(o, dashes, chunk);
        n -= chunk;
    }
}

static void clear_row(struct ra__table_row *row, unsigned ncols)
{
    row->rule = false;
    for (unsigned c = 0; c < ncols; c++)
        row->cell[c][0] = '\0';
}

static void write_row(struct ra__out *o, const struct ra__table *t,
                      const struct ra__table_row *row, const size_t *width,
                      size_t total)
{
    if (row->rule) {
        out_dashes(o, total);
        ra__out_str(o, "\n");
        return;
    }
    for (unsigned c = 0; c < t->ncols; c++) {
        size_t pad = width[c] - ra__text_width(row->cell[c]);
        bool left = (t->left >> c) & 1u;

        if (c > 0)
            ra__out_str(o, "  ");
        if (!left)
            out_spaces(o, pad);
        ra__out_str(o, row->cell[c]);
        if (left && c + 1 < t->ncols)
            out_spaces(o, pad);
    }
    ra__out_str(o, "\n");
}

void ra__table_write(struct ra__out *o, const struct ra__table *t)
{
    struct ra__table_row row;
    size_t width[RA__TABLE_COLS_MAX] = {0};
    size_t total = 0;

    ra__assert(t->ncols > 0 && t->ncols <= RA__TABLE_COLS_MAX);
    for (size_t r = 0; r < t->nrows; r++) {
        clear_row(&row, t->ncols);
        t->fill(t->ctx, r, &row);
        if (row.rule)
            continue;
        for (unsigned c = 0; c < t->ncols; c++) {
            size_t w = ra__text_width(row.cell[c]);
            if (w > width[c])
                width[c] = w;
        }
    }
    for (unsigned c = 0; c < t->ncols; c++)
        total += width[c] + (c > 0 ? 2 : 0);
    for (size_t r = 0; r < t->nrows; r++) {
        clear_row(&row, t->ncols);
        t->fill(t->ctx, r, &row);
        write_row(o, t, &row, width, total);
    }
}

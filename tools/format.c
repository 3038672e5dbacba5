/* regionalloc-top's text: byte units, rates, intervals, names escaped for
 * the terminal, and the JSON document with its string escaping. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "report_names.h"

static const char *format_bytes(char *buf, size_t size, double n)
{
    static const char *const units[] = {"B",   "KiB", "MiB", "GiB",
                                        "TiB", "PiB", "EiB"};
    unsigned u = 0;

    while (n >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        n /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%.0f B", n);
    else
        snprintf(buf, size, "%.1f %s", n, units[u]);
    return buf;
}

const char *format_size(char *buf, size_t size, uint64_t n)
{
    return format_bytes(buf, size, (double)n);
}

const char *format_byte_rate(char *buf, size_t size, double rate)
{
    char mag[24];
    double magnitude = rate < 0 ? -rate : rate;

    if (magnitude < 0.5)
        snprintf(buf, size, "0 B/s");
    else
        snprintf(buf, size, "%c%s/s", rate < 0 ? '-' : '+',
                 format_bytes(mag, sizeof mag, magnitude));
    return buf;
}

const char *format_count_rate(char *buf, size_t size, double rate)
{
    if (rate < 10000.0)
        snprintf(buf, size, "%.0f/s", rate);
    else if (rate < 10000000.0)
        snprintf(buf, size, "%.1fk/s", rate / 1e3);
    else
        snprintf(buf, size, "%.1fM/s", rate / 1e6);
    return buf;
}

const char *format_interval(char *buf, size_t size, uint64_t ns)
{
    if (ns % 1000000000u == 0)
        snprintf(buf, size, "%" PRIu64 "s", ns / 1000000000u);
    else
        snprintf(buf, size, "%" PRIu64 "ms", ns / 1000000u);
    return buf;
}

const char *format_rest(char *buf, size_t size, size_t n)
{
    char digits[24], grouped[32];
    size_t nd = (size_t)snprintf(digits, sizeof digits, "%zu", n), o = 0;

    for (size_t i = 0; i < nd; i++) {
        if (i > 0 && (nd - i) % 3 == 0)
            grouped[o++] = ',';
        grouped[o++] = digits[i];
    }
    grouped[o] = '\0';
    snprintf(buf, size, "(%s more tag%s)", grouped, n == 1 ? "" : "s");
    return buf;
}

const char *pressure_level_name(uint32_t level)
{
    static const char *const names[] = {
        [RA_SHM_PRESSURE_NONE] = "none",
        [RA_SHM_PRESSURE_HIGH] = "high",
        [RA_SHM_PRESSURE_LIMIT] = "limit",
    };

    return level < sizeof names / sizeof names[0] ? names[level] : "unknown";
}

const char *limit_source_name(uint32_t source)
{
    static const char *const names[] = {
        [RA_SHM_LIMIT_NONE] = "none",
        [RA_SHM_LIMIT_CALL] = "call",
        [RA_SHM_LIMIT_ENV] = "environment",
        [RA_SHM_LIMIT_CGROUP] = "cgroup",
    };

    return source < sizeof names / sizeof names[0] ? names[source]
                                                   : "unknown";
}

/* Bytes outside printable ASCII, and the backslash, become \xNN: a name
 * is arbitrary bytes, and must neither move the cursor nor change the
 * terminal's state, nor read as another name. Stops before the first byte
 * whose whole form does not fit in size. Returns the length written. */
size_t escape_for_terminal(char *out, size_t size, const char *in,
                           size_t len)
{
    size_t o = 0;

    for (size_t i = 0; i < len && in[i] != '\0'; i++) {
        unsigned char b = (unsigned char)in[i];
        bool plain = b >= 0x20 && b < 0x7f && b != '\\';
        if (o + (plain ? 1 : 4) >= size)
            break;
        if (plain)
            out[o++] = (char)b;
        else
            o += (size_t)snprintf(out + o, size - o, "\\x%02x", b);
    }
    out[o] = '\0';
    return o;
}

void print_parts(const struct ra_shm_parts *p, bool kernel)
{
    char h[7][24];

    printf(RA_PARTS_TEXT, format_size(h[0], sizeof h[0], p->rss_anon),
           format_size(h[1], sizeof h[1], p->tags),
           format_size(h[2], sizeof h[2], p->untagged),
           format_size(h[3], sizeof h[3], p->metadata),
           format_size(h[4], sizeof h[4], p->library),
           format_size(h[5], sizeof h[5], p->other));
    if (p->over != 0)
        printf(RA_PARTS_TEXT_OVER, format_size(h[6], sizeof h[6], p->over));
    if (p->at_ns != 0 && !(p->flags & RA_SHM_PARTS_MEASURED))
        fputs(RA_PARTS_TEXT_ESTIMATE, stdout);
    if (kernel)
        printf(RA_PARTS_TEXT_KERNEL,
               format_size(h[0], sizeof h[0], p->rss_file),
               format_size(h[1], sizeof h[1], p->page_tables));
    if (kernel && (p->flags & RA_SHM_PARTS_CGROUP))
        printf(RA_PARTS_TEXT_CGROUP,
               format_size(h[2], sizeof h[2], p->cgroup_current),
               format_size(h[3], sizeof h[3], p->cgroup_anon),
               format_size(h[4], sizeof h[4], p->cgroup_file),
               p->cgroup_limit != 0
                   ? format_size(h[5], sizeof h[5], p->cgroup_limit)
                   : RA_PARTS_TEXT_NO_LIMIT);
    putchar('\n');
}

/* -- JSON ---------------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at s (n bytes left), or 0:
 * overlong forms, surrogates and code points past U+10FFFF are invalid. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;

    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1fu;
    else if ((s[0] & 0xf0) == 0xe0)
        len = 3, cp = s[0] & 0x0fu;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07u;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

/* A JSON string whatever the bytes: controls escaped, valid UTF-8 kept,
 * any other byte as the code point of the same number (\u00NN). */
static void print_json_string(const char *str, size_t max)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strnlen(str, max);

    putchar('"');
    for (size_t i = 0; i < n;) {
        size_t len = s[i] >= 0x80 ? utf8_sequence(s + i, n - i) : 1;
        if (s[i] == '"' || s[i] == '\\')
            printf("\\%c", s[i]);
        else if (s[i] == '\n')
            fputs("\\n", stdout);
        else if (s[i] == '\t')
            fputs("\\t", stdout);
        else if (s[i] < 0x20 || s[i] == 0x7f || len == 0)
            printf("\\u%04x", s[i]);
        else
            fwrite(s + i, 1, len, stdout);
        i += len == 0 ? 1 : len;
    }
    putchar('"');
}

/* The figures' members, named as in struct ra_shm_figures. */
static void print_json_figures(const struct ra_shm_figures *f)
{
    printf("\"allocated\": %" PRIu64 ", \"active\": %" PRIu64
           ", \"resident\": %" PRIu64 ", \"rss\": %" PRIu64
           ", \"mapped\": %" PRIu64 ", \"peak_mapped\": %" PRIu64
           ", \"dirty\": %" PRIu64 ", \"muzzy\": %" PRIu64
           ", \"retained\": %" PRIu64 ", \"reserved\": %" PRIu64
           ", \"nmalloc\": %" PRIu64 ", \"ndalloc\": %" PRIu64
           ", \"purges\": %" PRIu64 ", \"limit\": %" PRIu64
           ", \"soft_limit\": %" PRIu64 ", \"limit_failures\": %" PRIu64,
           f->allocated, f->active, f->resident, f->rss, f->mapped,
           f->peak_mapped, f->dirty, f->muzzy, f->retained, f->reserved,
           f->nmalloc, f->ndalloc, f->purges, f->limit, f->soft_limit,
           f->limit_failures);
}

/* The process's parts, members of "process" named as in the library's
 * JSON report (doc/json.md). */
static void print_json_parts(const struct ra_shm_parts *p)
{
    const char *sep = "";

    printf(", \"rss_anon\": %" PRIu64 ", \"rss_file\": %" PRIu64
           ", \"page_tables\": %" PRIu64 ", \"parts\": {",
           p->rss_anon, p->rss_file, p->page_tables);
#define PART(field)                                                           \
    printf("%s\"" #field "\": %" PRIu64, sep, p->field);                      \
    sep = ", ";
    RA_PARTS_LIST(PART)
#undef PART
    printf("}, \"parts_over\": %" PRIu64 ", \"parts_at_ns\": %" PRIu64
           ", \"jemalloc_measured\": %s, \"cgroup\": ",
           p->over, p->at_ns,
           (p->flags & RA_SHM_PARTS_MEASURED) ? "true" : "false");
    if (p->flags & RA_SHM_PARTS_CGROUP)
        printf("{\"current\": %" PRIu64 ", \"anon\": %" PRIu64
               ", \"file\": %" PRIu64 ", \"limit\": %" PRIu64 "}",
               p->cgroup_current, p->cgroup_anon, p->cgroup_file,
               p->cgroup_limit);
    else
        fputs("null", stdout);
}

void print_json(const struct segment_copy *c, bool stale)
{
    const struct ra_shm_header *h = &c->header;
    const char *sep = "";
    uint64_t age;

    printf("{\"pid\": %" PRId32 ", \"stale\": %s, \"published\": %" PRIu64
           ", \"interval_ns\": %" PRIu64 ", \"time_ns\": %" PRIu64
           ", \"age_ns\": ",
           h->pid, stale ? "true" : "false", h->published, h->interval_ns,
           h->time_ns);
    if (segment_age(c, &age))
        printf("%" PRIu64, age);
    else
        fputs("null", stdout);
    fputs(",\n \"untagged\": {", stdout);
    print_json_figures(&h->untagged);
    fputs("},\n \"process\": {", stdout);
    print_json_figures(&h->process);
    print_json_parts(&h->parts);
    printf("},\n \"library_allocated\": %" PRIu64
           ",\n \"leftovers_allocated\": %" PRIu64 ",\n \"http\": ",
           h->library_allocated, h->leftovers_allocated);
    /* Where to point a browser or curl: null when no server runs. */
    if (h->http[0] != '\0')
        print_json_string(h->http, sizeof h->http);
    else
        fputs("null", stdout);
    /* As the library's JSON report has it (doc/json.md). */
    printf(",\n \"memory_limit\": {\"limit\": %" PRIu64
           ", \"in_effect\": %s, \"source\": \"%s\", \"resident\": %" PRIu64
           ", \"level\": \"%s\", \"given_back\": %" PRIu64
           ", \"refusals\": %" PRIu64 "}",
           h->pressure.limit,
           ra__limit_in_effect(h->pressure.limit) ? "true" : "false",
           limit_source_name(h->pressure.source),
           h->pressure.resident, pressure_level_name(h->pressure.level),
           h->pressure.given_back, h->pressure.refusals);
    fputs(",\n \"tags\": [", stdout);
    for (uint32_t i = 0; i < h->nrecords; i++) {
        const struct ra_shm_record *r = &c->records[i];
        if (!(r->flags & RA_SHM_RECORD_LIVE))
            continue;
        printf("%s\n  {\"id\": %" PRIu32 ", \"name\": ", sep, r->id);
        print_json_string(r->name, sizeof r->name);
        /* Tag trees: the parent's id, null at the top level. */
        if (r->parent != 0)
            printf(", \"parent\": %" PRIu32 ", ", r->parent);
        else
            fputs(", \"parent\": null, ", stdout);
        print_json_figures(&r->figures);
        /* The kernel's count of the region: its metadata part, and when
         * (0: not yet counted), as the library's JSON report has them. */
        printf(", \"metadata\": %" PRIu64 ", \"rss_at_ns\": %" PRIu64
               ", \"priority\": %" PRId32 "}",
               r->metadata, r->rss_at_ns, r->priority);
        sep = ",";
    }
    fputs("]}\n", stdout);
}

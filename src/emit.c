/* Floor: services. One writer for the documents the reports emit: JSON
 * (nesting, commas, indentation, escaping, the bytes of a string that JSON
 * cannot keep), Prometheus's text exposition (families, samples, labels)
 * and the cells of text tables. */
#include <inttypes.h>
#include <string.h>

#include "output.h"

void ra__emit_init(struct ra__emitter *e, struct ra__out *o)
{
    e->out = o;
    e->depth = 0;
}

/* Two spaces per level of depth. */
static void indent(struct ra__emitter *e, unsigned depth)
{
    static const char spaces[] = "                                ";
    size_t n = 2 * (size_t)depth;

    ra__out_write(e->out, spaces, n < sizeof spaces - 1 ? n
                                                        : sizeof spaces - 1);
}

/* Before an item of the innermost container: its separator, and for a
 * block container a new line and the indentation. */
static void json_item(struct ra__emitter *e)
{
    struct ra__json_level *level;

    if (e->depth == 0)
        return;
    level = &e->level[e->depth - 1];
    if (level->inline_items) {
        if (level->items > 0)
            ra__out_str(e->out, ", ");
    } else {
        ra__out_str(e->out, level->items > 0 ? ",\n" : "\n");
        indent(e, e->depth);
    }
    level->items++;
}

/* Whether a string that escape.c wrote for JSON loses bytes: it writes a
 * byte that is not part of valid UTF-8, and only such a byte, as \u00NN
 * with NN from 80 up (the control bytes it also writes so are below 20,
 * and DEL is 7f; a character from U+0080 up is written as it is). A parser
 * reads such a byte as U+00NN, which the UTF-8 of that character would
 * also give. */
static bool json_loses_bytes(const char *escaped)
{
    for (const char *p = escaped; *p != '\0'; p++) {
        if (*p != '\\')
            continue;
        if (p[1] == 'u' && p[4] >= '8')
            return true;
        p += p[1] == 'u' ? 5 : 1;
    }
    return false;
}

/* "s", escaped. Returns whether the string loses bytes (above). */
static bool json_string(struct ra__out *o, const char *s)
{
    char buf[RA__ESCAPED_MAX];

    ra__escape(buf, sizeof buf, s, RA__ESCAPE_JSON);
    ra__out_str(o, "\"");
    ra__out_str(o, buf);
    ra__out_str(o, "\"");
    return json_loses_bytes(buf);
}

/* s's bytes as two lowercase hex digits each, quoted. */
static void json_hex(struct ra__out *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";

    ra__out_str(o, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        char pair[2] = {hex[*p >> 4], hex[*p & 15]};
        ra__out_write(o, pair, sizeof pair);
    }
    ra__out_str(o, "\"");
}

static void json_key(struct ra__emitter *e, const char *key)
{
    json_item(e);
    if (key != NULL) {
        json_string(e->out, key);
        ra__out_str(e->out, ": ");
    }
}

static void json_open(struct ra__emitter *e, const char *key, bool inline_items,
                      const char *bracket)
{
    json_key(e, key);
    ra__out_str(e->out, bracket);
    ra__assert(e->depth < RA__JSON_DEPTH_MAX);
    e->level[e->depth++] = (struct ra__json_level){inline_items, 0};
}

static void json_close(struct ra__emitter *e, const char *bracket)
{
    struct ra__json_level level;

    ra__assert(e->depth > 0);
    level = e->level[--e->depth];
    if (!level.inline_items && level.items > 0) {
        ra__out_str(e->out, "\n");
        indent(e, e->depth);
    }
    ra__out_str(e->out, bracket);
    if (e->depth == 0)
        ra__out_str(e->out, "\n");
}

void ra__json_object_begin(struct ra__emitter *e, const char *key,
                           bool inline_items)
{
    json_open(e, key, inline_items, "{");
}

void ra__json_object_end(struct ra__emitter *e)
{
    json_close(e, "}");
}

void ra__json_array_begin(struct ra__emitter *e, const char *key,
                          bool inline_items)
{
    json_open(e, key, inline_items, "[");
}

void ra__json_array_end(struct ra__emitter *e)
{
    json_close(e, "]");
}

void ra__json_u64(struct ra__emitter *e, const char *key, uint64_t v)
{
    json_key(e, key);
    ra__out_fmt(e->out, "%" PRIu64, v);
}

void ra__json_i64(struct ra__emitter *e, const char *key, int64_t v)
{
    json_key(e, key);
    ra__out_fmt(e->out, "%" PRId64, v);
}

void ra__json_bool(struct ra__emitter *e, const char *key, bool v)
{
    json_key(e, key);
    ra__out_str(e->out, v ? "true" : "false");
}

void ra__json_str(struct ra__emitter *e, const char *key, const char *s)
{
    json_key(e, key);
    json_string(e->out, s);
}

void ra__json_bytes(struct ra__emitter *e, const char *key,
                    const char *hex_key, const char *s)
{
    json_key(e, key);
    if (!json_string(e->out, s))
        return;
    json_key(e, hex_key);
    json_hex(e->out, s);
}

void ra__json_null(struct ra__emitter *e, const char *key)
{
    json_key(e, key);
    ra__out_str(e->out, "null");
}

void ra__prom_family(struct ra__emitter *e, const char *name,
                     const char *type, const char *help)
{
    ra__out_fmt(e->out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
                type);
}

/* name{label="value",...}, values escaped. */
static void prom_series(struct ra__emitter *e, const char *name,
                        const struct ra__prom_label *labels, unsigned n)
{
    ra__out_str(e->out, name);
    for (unsigned i = 0; i < n; i++) {
        char value[RA__ESCAPED_MAX];
        ra__escape(value, sizeof value, labels[i].value,
                   RA__ESCAPE_PROMETHEUS);
        ra__out_str(e->out, i == 0 ? "{" : ",");
        ra__out_str(e->out, labels[i].name);
        ra__out_str(e->out, "=\"");
        ra__out_str(e->out, value);
        ra__out_str(e->out, "\"");
    }
    if (n > 0)
        ra__out_str(e->out, "}");
}

/* " <x>\n" without printf's machinery, ending at end: a report of
 * thousands of tags writes tens of thousands of samples. */
static char *digits_before(char *end, uint64_t x, bool negative)
{
    char *p = end;

    *--p = '\n';
    do {
        *--p = (char)('0' + x % 10);
        x /= 10;
    } while (x != 0);
    if (negative)
        *--p = '-';
    *--p = ' ';
    return p;
}

static void out_sample_value(struct ra__out *o, uint64_t v)
{
    char digits[24];
    char *p = digits_before(digits + sizeof digits, v, false);

    ra__out_write(o, p, (size_t)(digits + sizeof digits - p));
}

void ra__prom_sample(struct ra__emitter *e, const char *name,
                     const struct ra__prom_label *labels, unsigned n,
                     uint64_t v)
{
    prom_series(e, name, labels, n);
    out_sample_value(e->out, v);
}

void ra__prom_sample_seconds(struct ra__emitter *e, const char *name,
                             const struct ra__prom_label *labels, unsigned n,
                             uint64_t ns)
{
    prom_series(e, name, labels, n);
    ra__out_fmt(e->out, " %" PRIu64 ".%09" PRIu64 "\n", ns / 1000000000u,
                ns % 1000000000u);
}

bool ra__prom_values_make(struct ra__prom_values *v, unsigned n,
                          const char *(*value)(const void *arg, unsigned i),
                          const void *arg)
{
    char one[RA__ESCAPED_MAX];
    size_t total = 0;

    *v = (struct ra__prom_values){NULL, NULL, 0};
    /* Measured first, then written where they go: one block for all. */
    for (unsigned i = 0; i < n; i++)
        total += ra__escape(one, sizeof one, value(arg, i),
                            RA__ESCAPE_PROMETHEUS);
    if (total >= UINT32_MAX ||
        (v->at = ra__meta_alloc(((size_t)n + 1) * sizeof *v->at)) == NULL ||
        (v->text = ra__meta_alloc(total + RA__ESCAPED_MAX)) == NULL) {
        ra__meta_free(v->at);
        v->at = NULL;
        return true;
    }
    v->at[0] = 0;
    for (unsigned i = 0; i < n; i++)
        v->at[i + 1] = v->at[i] +
                       (uint32_t)ra__escape(v->text + v->at[i],
                                            RA__ESCAPED_MAX, value(arg, i),
                                            RA__ESCAPE_PROMETHEUS);
    v->n = n;
    return false;
}

void ra__prom_values_free(struct ra__prom_values *v)
{
    ra__meta_free(v->text);
    ra__meta_free(v->at);
    *v = (struct ra__prom_values){NULL, NULL, 0};
}

/* Appends len bytes of s at *at in line. */
static void put(char *line, size_t *at, const char *s, size_t len)
{
    memcpy(line + *at, s, len);
    *at += len;
}

void ra__prom_sample_value(struct ra__emitter *e, const char *name,
                           const char *label, const struct ra__prom_values *v,
                           unsigned i, int64_t x, bool is_signed)
{
    /* A family's name and a label's are the library's own, short. */
    char line[2 * RA__PROM_NAME_MAX + RA__ESCAPED_MAX + 32], digits[24];
    size_t at = 0, nlen = strlen(name), llen = strlen(label);
    size_t vlen = v->at[i + 1] - v->at[i];
    bool negative = is_signed && x < 0;
    uint64_t mag = negative ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
    char *d = digits_before(digits + sizeof digits, mag, negative);

    ra__assert(nlen < RA__PROM_NAME_MAX && llen < RA__PROM_NAME_MAX);
    put(line, &at, name, nlen);
    put(line, &at, "{", 1);
    put(line, &at, label, llen);
    put(line, &at, "=\"", 2);
    put(line, &at, v->text + v->at[i], vlen);
    put(line, &at, "\"}", 2);
    put(line, &at, d, (size_t)(digits + sizeof digits - d));
    ra__out_write(e->out, line, at);
}

void ra__cell_text(char *cell, const char *s)
{
    snprintf(cell, RA__CELL_MAX, "%s", s);
}

void ra__cell_name(char *cell, const char *name)
{
    ra__escape(cell, RA__CELL_MAX, name, RA__ESCAPE_TEXT);
}

void ra__cell_bytes(char *cell, uint64_t bytes)
{
    ra__human_bytes(cell, RA__CELL_MAX, bytes);
}

void ra__cell_count(char *cell, uint64_t n)
{
    snprintf(cell, RA__CELL_MAX, "%" PRIu64, n);
}

void ra__cell_ns(char *cell, uint64_t ns)
{
    ra__human_ns(cell, RA__CELL_MAX, ns);
}

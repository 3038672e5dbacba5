/* Floor: services. RA_PROF_PPROF: the profile as a gzip-compressed
 * profile.proto (the format of github.com/google/pprof,
 * proto/profile.proto), encoded by hand and compressed with zlib. */
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ZLIB_CONST
#include <zlib.h>

#include "prof_pprof.h"

/* Field numbers of profile.proto, per message. */
enum {
    PROFILE_SAMPLE_TYPE = 1,
    PROFILE_SAMPLE = 2,
    PROFILE_MAPPING = 3,
    PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5,
    PROFILE_TIME_NANOS = 9,
    PROFILE_PERIOD_TYPE = 11,
    PROFILE_PERIOD = 12,
    PROFILE_DEFAULT_SAMPLE_TYPE = 14,
};
enum { VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2 };
enum { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3 };
enum { LABEL_KEY = 1, LABEL_STR = 2 };
enum {
    MAPPING_ID = 1,
    MAPPING_MEMORY_START = 2,
    MAPPING_MEMORY_LIMIT = 3,
    MAPPING_FILE_OFFSET = 4,
    MAPPING_FILENAME = 5,
    MAPPING_BUILD_ID = 6,
    MAPPING_HAS_FUNCTIONS = 7,
    MAPPING_HAS_FILENAMES = 8,
    MAPPING_HAS_LINE_NUMBERS = 9,
    MAPPING_HAS_INLINE_FRAMES = 10,
};
enum {
    LOCATION_ID = 1,
    LOCATION_MAPPING_ID = 2,
    LOCATION_ADDRESS = 3,
    LOCATION_LINE = 4,
};
enum { LINE_FUNCTION_ID = 1, LINE_LINE = 2 };
enum {
    FUNCTION_ID = 1,
    FUNCTION_NAME = 2,
    FUNCTION_SYSTEM_NAME = 3,
    FUNCTION_FILENAME = 4,
};

/* -- the profile ------------------------------------------------------------------ */

struct encoder {
    const struct ra__prof_dump *d;
    struct ra__pb out;       /* Profile's fields but the string table */
    struct ra__pb msg, sub;  /* scratch: a message, a message inside it */
    struct ra__prof_strings st;
    struct ra__prof_mappings maps;
    size_t nlines;           /* d's lines, all frames' together */
    uint64_t *function_of;   /* per line of d: its Function's id, 0 = none */
};


static void encode_value_type(struct encoder *e, unsigned field,
                              const char *type, const char *unit)
{
    ra__pb_uint(&e->msg, VALUE_TYPE_TYPE, ra__prof_intern(&e->st, type));
    ra__pb_uint(&e->msg, VALUE_TYPE_UNIT, ra__prof_intern(&e->st, unit));
    ra__pb_message(&e->out, field, &e->msg);
}

/* A Function per distinct (name, file), found again by an open-addressing
 * table of at most half full. */
struct function_key {
    uint64_t name, file, id; /* id 0: a free slot */
};

static uint64_t function_id(struct encoder *e, struct function_key *table,
                            size_t nslots, uint64_t name, uint64_t file,
                            uint64_t *next_id)
{
    size_t j = (size_t)((name * 0x9e3779b97f4a7c15u) ^ file) & (nslots - 1);

    for (; table[j].id != 0; j = (j + 1) & (nslots - 1))
        if (table[j].name == name && table[j].file == file)
            return table[j].id;
    table[j] = (struct function_key){name, file, (*next_id)++};
    ra__pb_uint(&e->msg, FUNCTION_ID, table[j].id);
    /* pprof demangles system_name where name equals it. */
    ra__pb_uint(&e->msg, FUNCTION_NAME, name);
    ra__pb_uint(&e->msg, FUNCTION_SYSTEM_NAME, name);
    if (file != 0)
        ra__pb_uint(&e->msg, FUNCTION_FILENAME, file);
    ra__pb_message(&e->out, PROFILE_FUNCTION, &e->msg);
    return table[j].id;
}

/* One Function per distinct symbol name and file, and the Function of each
 * line of d. Returns true when out of memory. */
static bool encode_functions(struct encoder *e)
{
    const struct ra__prof_dump *d = e->d;
    struct function_key *table;
    uint64_t next_id = 1;
    size_t nslots = 2;

    while (nslots < 2 * e->nlines)
        nslots *= 2;
    table = ra__meta_calloc(nslots, sizeof *table);
    if (table == NULL)
        return true;
    for (size_t i = 0; i < e->nlines; i++) {
        const struct ra__symbol_line *l = &d->lines[i];
        uint64_t name, file;
        if (l->function == NULL) {
            e->function_of[i] = 0;
            continue;
        }
        name = ra__prof_intern(&e->st, l->function);
        file = l->file != NULL ? ra__prof_intern(&e->st, l->file) : 0;
        if (e->st.enc.failed)
            break;
        e->function_of[i] = function_id(e, table, nslots, name, file,
                                        &next_id);
    }
    ra__meta_free(table);
    return e->st.enc.failed;
}

/* A Location per distinct frame, with id = its index + 1, at the address of
 * its call (the return address minus 1, as pprof's legacy parsers and Go's
 * runtime write them), and a Line per function there: the inlined ones
 * first, the function they are inlined in last (profile.proto's order). */
static void encode_locations(struct encoder *e)
{
    const struct ra__prof_dump *d = e->d;

    for (size_t i = 0; i < d->nframes; i++) {
        const struct ra__prof_frame *f = &d->frames[i];
        uintptr_t pc = f->addr - (f->addr != 0);
        struct ra__prof_mapping *m = ra__prof_find_mapping(&e->maps, pc);
        size_t first = (size_t)(f->lines - d->lines);
        bool named = f->nlines > 0, lined = f->nlines > 0;

        ra__pb_uint(&e->msg, LOCATION_ID, i + 1);
        ra__pb_uint(&e->msg, LOCATION_MAPPING_ID, m != NULL ? m->id : 0);
        ra__pb_uint(&e->msg, LOCATION_ADDRESS, pc);
        for (unsigned k = 0; k < f->nlines; k++) {
            uint64_t function = e->function_of[first + k];
            named = named && function != 0;
            lined = lined && f->lines[k].file != NULL;
            if (function == 0)
                continue;
            ra__pb_uint(&e->sub, LINE_FUNCTION_ID, function);
            if (f->lines[k].line != 0)
                ra__pb_uint(&e->sub, LINE_LINE, f->lines[k].line);
            ra__pb_message(&e->msg, LOCATION_LINE, &e->sub);
        }
        if (m != NULL) {
            m->nlocations++;
            m->nnamed += named;
            m->nlined += lined;
        }
        ra__pb_message(&e->out, PROFILE_LOCATION, &e->msg);
    }
}

/* Mappings in id order. has_functions only where every location of the
 * mapping was named (has_filenames, has_line_numbers and has_inline_frames
 * where every one had its lines): pprof then leaves it alone, and
 * otherwise symbolizes it from the file when it finds the file. */
static void encode_mappings(struct encoder *e)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < e->maps.count; i++) {
            const struct ra__prof_mapping *m = &e->maps.items[i];
            bool named = m->nlocations > 0 && m->nnamed == m->nlocations;
            bool lined = m->nlocations > 0 && m->nlined == m->nlocations;
            if (m->main != (pass == 0))
                continue;
            ra__pb_uint(&e->msg, MAPPING_ID, m->id);
            ra__pb_uint(&e->msg, MAPPING_MEMORY_START, m->start);
            ra__pb_uint(&e->msg, MAPPING_MEMORY_LIMIT, m->limit);
            ra__pb_uint(&e->msg, MAPPING_FILE_OFFSET, m->offset);
            ra__pb_uint(&e->msg, MAPPING_FILENAME, m->filename);
            ra__pb_uint(&e->msg, MAPPING_BUILD_ID, m->build_id);
            ra__pb_uint(&e->msg, MAPPING_HAS_FUNCTIONS, named);
            ra__pb_uint(&e->msg, MAPPING_HAS_FILENAMES, lined);
            ra__pb_uint(&e->msg, MAPPING_HAS_LINE_NUMBERS, lined);
            ra__pb_uint(&e->msg, MAPPING_HAS_INLINE_FRAMES, lined);
            ra__pb_message(&e->out, PROFILE_MAPPING, &e->msg);
        }
    }
}

/* A Sample per stack: its location ids (leaf first, as frames are),
 * the four estimates, and the label tag=<name>. */
static void encode_samples(struct encoder *e)
{
    const struct ra__prof_dump *d = e->d;
    uint64_t tag_key = ra__prof_intern(&e->st, "tag"), tag_value = 0;
    ra_tag_t named = RA_TAG_NONE;

    for (size_t i = 0; i < d->nstacks; i++) {
        const struct ra__prof_stack *s = &d->stacks[i];
        const uint64_t values[] = {
            ra__round_count(s->alloc_objects), ra__round_count(s->alloc_bytes),
            ra__round_count(s->live_objects), ra__round_count(s->live_bytes)};

        if (s->tag != named) {
            char name[RA__ESCAPED_MAX], label[RA_TAG_NAME_MAX + 1];
            ra__escape(name, sizeof name, ra__tag_label(s->tag, label),
                       RA__ESCAPE_TEXT);
            tag_value = ra__prof_intern(&e->st, name);
            named = s->tag;
        }
        for (unsigned j = 0; j < s->nframes; j++)
            ra__pb_varint(&e->sub,
                      (uint64_t)(ra__prof_dump_frame(d, s->frames[j]) -
                                 d->frames) +
                          1);
        ra__pb_message(&e->msg, SAMPLE_LOCATION_ID, &e->sub);
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++)
            ra__pb_varint(&e->sub, values[v]);
        ra__pb_message(&e->msg, SAMPLE_VALUE, &e->sub);
        ra__pb_uint(&e->sub, LABEL_KEY, tag_key);
        ra__pb_uint(&e->sub, LABEL_STR, tag_value);
        ra__pb_message(&e->msg, SAMPLE_LABEL, &e->sub);
        ra__pb_message(&e->out, PROFILE_SAMPLE, &e->msg);
    }
}

static void encode_header(struct encoder *e)
{
    struct timespec now;

    /* Values in this order; inuse_space, the last, is also the default. */
    encode_value_type(e, PROFILE_SAMPLE_TYPE, "alloc_objects", "count");
    encode_value_type(e, PROFILE_SAMPLE_TYPE, "alloc_space", "bytes");
    encode_value_type(e, PROFILE_SAMPLE_TYPE, "inuse_objects", "count");
    encode_value_type(e, PROFILE_SAMPLE_TYPE, "inuse_space", "bytes");
    encode_value_type(e, PROFILE_PERIOD_TYPE, "space", "bytes");
    ra__pb_uint(&e->out, PROFILE_PERIOD, e->d->interval);
    ra__pb_uint(&e->out, PROFILE_DEFAULT_SAMPLE_TYPE,
            ra__prof_intern(&e->st, "inuse_space"));
    if (clock_gettime(CLOCK_REALTIME, &now) == 0 && now.tv_sec > 0)
        ra__pb_uint(&e->out, PROFILE_TIME_NANOS,
                (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
}

/* -- gzip ------------------------------------------------------------------------- */

/* Runs deflate with flush until it wants more input (or, with Z_FINISH,
 * has ended the stream), writing what it produces to o. Returns true on a
 * zlib error. */
static bool deflate_out(z_stream *zs, struct ra__out *o, int flush)
{
    unsigned char buf[16384];

    do {
        size_t have;
        zs->next_out = buf;
        zs->avail_out = sizeof buf;
        if (deflate(zs, flush) == Z_STREAM_ERROR)
            return true;
        have = sizeof buf - zs->avail_out;
        ra__out_write(o, buf, have);
    } while (zs->avail_out == 0);
    return false;
}

/* Writes the concatenation of parts as one gzip member (deflateInit2's
 * windowBits 15 + 16: a gzip header and trailer around the deflate
 * stream). Returns true on a zlib error (out of memory). */
static bool gzip_write(struct ra__out *o, const struct ra__pb *const *parts,
                       size_t nparts)
{
    z_stream zs;
    bool failed = false;

    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return true;
    for (size_t p = 0; p < nparts && !failed; p++) {
        const uint8_t *in = parts[p]->data;
        size_t left = parts[p]->len;
        while (left > 0 && !failed) {
            uInt chunk = left > UINT_MAX ? UINT_MAX : (uInt)left;
            zs.next_in = in;
            zs.avail_in = chunk;
            in += chunk;
            left -= chunk;
            failed = deflate_out(&zs, o, Z_NO_FLUSH);
        }
    }
    if (!failed) {
        zs.next_in = NULL;
        zs.avail_in = 0;
        failed = deflate_out(&zs, o, Z_FINISH);
    }
    deflateEnd(&zs);
    return failed;
}

bool ra__prof_pprof_write(struct ra__out *o, const struct ra__prof_dump *d)
{
    struct encoder e;
    const struct ra__pb *parts[2];
    bool failed = true;

    memset(&e, 0, sizeof e);
    e.d = d;
    for (size_t i = 0; i < d->nframes; i++)
        e.nlines += d->frames[i].nlines;
    e.function_of = ra__meta_alloc((e.nlines + 1) * sizeof *e.function_of);
    if (e.function_of == NULL)
        goto out;
    /* string_table[0] must be "". */
    ra__prof_intern(&e.st, "");
    if (ra__prof_read_mappings(&e.maps, &e.st) || encode_functions(&e))
        goto out;
    encode_header(&e);
    encode_locations(&e);
    encode_mappings(&e);
    encode_samples(&e);
    if (e.out.failed || e.msg.failed || e.sub.failed || e.st.enc.failed)
        goto out;
    /* Fields may come in any order: the string table last. */
    parts[0] = &e.out;
    parts[1] = &e.st.enc;
    failed = gzip_write(o, parts, 2);
out:
    ra__meta_free(e.function_of);
    ra__meta_free(e.maps.items);
    ra__pb_free(&e.out);
    ra__pb_free(&e.msg);
    ra__pb_free(&e.sub);
    ra__prof_strings_free(&e.st);
    return failed;
}

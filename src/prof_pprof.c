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

#include "output.h"

/* Field numbers of profile.proto, per message. */
enum {
    PROFILE_SAMPLE_TYPE = 1,
    PROFILE_SAMPLE = 2,
    PROFILE_MAPPING = 3,
    PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5,
    PROFILE_STRING_TABLE = 6,
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

/* -- the string table ----------------------------------------------------------- */

/* Profile.string_table, encoded as it grows, and an index of its strings
 * (open addressing, at most half full) so that each is written once. */
struct strings {
    struct ra__pb enc;
    size_t *at;      /* [i]: offset of string i's bytes in enc.data */
    size_t *len;     /* [i]: its length */
    size_t count, cap;
    size_t *slots;   /* i + 1, or 0 for an empty slot */
    size_t nslots;   /* a power of two */
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static bool strings_grow(struct strings *st)
{
    size_t cap = st->cap == 0 ? 256 : st->cap * 2, nslots = cap * 2;
    size_t *at = ra__meta_realloc(st->at, cap * sizeof *at);
    size_t *len, *slots;

    if (at == NULL)
        return true;
    st->at = at;
    len = ra__meta_realloc(st->len, cap * sizeof *len);
    if (len == NULL)
        return true;
    st->len = len;
    slots = ra__meta_calloc(nslots, sizeof *slots);
    if (slots == NULL)
        return true;
    for (size_t i = 0; i < st->count; i++) {
        size_t j = hash_bytes((const char *)st->enc.data + st->at[i],
                              st->len[i]) &
                   (nslots - 1);
        while (slots[j] != 0)
            j = (j + 1) & (nslots - 1);
        slots[j] = i + 1;
    }
    ra__meta_free(st->slots);
    st->slots = slots;
    st->nslots = nslots;
    st->cap = cap;
    return false;
}

/* The index of s (n bytes) in the table, added if new; 0 (the empty
 * string) when out of memory, with st->enc.failed set. */
static uint64_t intern_bytes(struct strings *st, const char *s, size_t n)
{
    size_t j;

    if (st->enc.failed)
        return 0;
    if (st->count == st->cap && strings_grow(st)) {
        st->enc.failed = true;
        return 0;
    }
    j = hash_bytes(s, n) & (st->nslots - 1);
    for (; st->slots[j] != 0; j = (j + 1) & (st->nslots - 1)) {
        size_t i = st->slots[j] - 1;
        if (st->len[i] == n && st->enc.data != NULL &&
            memcmp(st->enc.data + st->at[i], s, n) == 0)
            return i;
    }
    ra__pb_bytes(&st->enc, PROFILE_STRING_TABLE, s, n);
    if (st->enc.failed)
        return 0;
    st->at[st->count] = st->enc.len - n;
    st->len[st->count] = n;
    st->slots[j] = st->count + 1;
    return st->count++;
}

static uint64_t intern(struct strings *st, const char *s)
{
    return intern_bytes(st, s, strlen(s));
}

/* -- mappings ------------------------------------------------------------------- */

/* The longest GNU build ID kept: ld writes 16 (md5, uuid) or 20 (sha1)
 * bytes. A longer one (ld --build-id=0x<hex>) is left out, not cut: a cut
 * ID would name another file. */
#define BUILD_ID_MAX 64

/* An executable mapping of /proc/self/maps. */
struct mapping {
    uintptr_t start, limit, offset;
    uint64_t id;       /* 1, 2, ...: the main program's mappings first */
    uint64_t filename; /* in the string table */
    uint64_t build_id; /* in the string table: lowercase hex, "" for none */
    bool main;         /* the program's own file */
    /* Its locations: all, those with a function, those with a line. */
    size_t nlocations, nnamed, nlined;
    /* The object's build ID, copied under the loader's lock (0: none). */
    size_t build_id_len;
    unsigned char build_id_raw[BUILD_ID_MAX];
};

struct mappings {
    struct mapping *items; /* ascending addresses, as the kernel lists them */
    size_t count, cap;
};

/* What reading /proc/self/maps fills in. */
struct mapping_reader {
    struct mappings *m;
    struct strings *st;
    const char *exe;
    bool failed; /* out of memory */
};

/* ra__proc_maps callback: keeps the executable mappings backed by a file
 * (and [vdso]). */
static bool add_mapping(char *line, size_t len, void *ctx)
{
    struct mapping_reader *r = ctx;
    struct mappings *m = r->m;
    uintptr_t start, limit, offset;
    char perms[5];
    int path_at = -1;
    const char *path;

    (void)len;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %" SCNxPTR " %*s %*s %n",
               &start, &limit, perms, &offset, &path_at) < 4 ||
        path_at < 0 || perms[2] != 'x')
        return false;
    path = line + path_at;
    if (*path == '\0')
        return false;
    if (m->count == m->cap) {
        size_t cap = m->cap == 0 ? 64 : m->cap * 2;
        struct mapping *grown = ra__meta_realloc(m->items, cap * sizeof *grown);
        if (grown == NULL) {
            r->failed = true;
            return true;
        }
        m->items = grown;
        m->cap = cap;
    }
    m->items[m->count++] = (struct mapping){
        .start = start, .limit = limit, .offset = offset,
        .filename = intern(r->st, path), .main = strcmp(path, r->exe) == 0};
    return false;
}

/* The index of the first mapping that ends after addr; m->count if none. */
static size_t first_ending_after(const struct mappings *m, uintptr_t addr)
{
    size_t lo = 0, hi = m->count;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->items[mid].limit <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* -- build IDs -------------------------------------------------------------------- */

/* The desc of the first NT_GNU_BUILD_ID note of the n bytes of notes at p,
 * its length in *len; NULL if none. Each field is padded to align, the
 * segment's: 4, or 8 for the 8-aligned PT_NOTE (.note.gnu.property) that
 * recent linkers put apart from the 4-aligned build ID. Stops at a note
 * that overruns the segment. */
static const unsigned char *scan_notes(const unsigned char *p, size_t n,
                                       size_t align, size_t *len)
{
    size_t at = 0;

    while (n - at >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) nh;
        size_t name_at = at + sizeof nh, desc_at;

        memcpy(&nh, p + at, sizeof nh);
        if (nh.n_namesz > n - name_at)
            break;
        desc_at = name_at + ((nh.n_namesz + align - 1) & ~(align - 1));
        if (desc_at > n || nh.n_descsz > n - desc_at)
            break;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == sizeof "GNU" &&
            memcmp(p + name_at, "GNU", sizeof "GNU") == 0) {
            *len = nh.n_descsz;
            return p + desc_at;
        }
        at = desc_at + ((nh.n_descsz + align - 1) & ~(align - 1));
        if (at > n)
            break;
    }
    return NULL;
}

/* Whether the object maps the n bytes at its address vaddr from its file:
 * a PT_NOTE is read in memory only then, as nothing obliges the linker to
 * put it inside a loaded segment. */
static bool is_loaded(const struct dl_phdr_info *info, uintptr_t vaddr,
                      size_t n)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && vaddr >= ph->p_vaddr &&
            vaddr - ph->p_vaddr <= ph->p_filesz &&
            n <= ph->p_filesz - (vaddr - ph->p_vaddr))
            return true;
    }
    return false;
}

/* dl_iterate_phdr callback: copies the object's build ID into the mappings
 * that overlap its PT_LOAD segments (the main program, whose dlpi_name is
 * "", and [vdso] included). It runs under the loader's lock, so it reads
 * headers and writes into ctx only: no allocation, no lock. */
static int copy_build_id(struct dl_phdr_info *info, size_t size, void *ctx)
{
    struct mappings *m = ctx;
    const unsigned char *id = NULL;
    size_t len = 0;

    (void)size;
    for (int i = 0; i < info->dlpi_phnum && id == NULL; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE && is_loaded(info, ph->p_vaddr, ph->p_filesz))
            id = scan_notes((const unsigned char *)(info->dlpi_addr +
                                                    ph->p_vaddr),
                            ph->p_filesz, ph->p_align == 8 ? 8 : 4, &len);
    }
    if (id == NULL || len == 0 || len > BUILD_ID_MAX)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;

        if (ph->p_type != PT_LOAD || ph->p_memsz == 0)
            continue;
        /* The first mapping that ends after lo, then those that start
         * before hi: the segment's bytes lie in its object's pages only. */
        for (size_t j = first_ending_after(m, lo);
             j < m->count && m->items[j].start < hi; j++) {
            memcpy(m->items[j].build_id_raw, id, len);
            m->items[j].build_id_len = len;
        }
    }
    return 0;
}

/* Gives each mapping its object's build ID, as hex in the string table.
 * Objects are matched by address, not by path: the program's dlpi_name is
 * "", and a path may be a link or deleted. A mapping no loaded object
 * covers (a file mapped by hand, one dlclose'd since /proc/self/maps was
 * read) gets none. */
static void name_build_ids(struct mappings *m, struct strings *st)
{
    static const char digits[] = "0123456789abcdef";

    dl_iterate_phdr(copy_build_id, m);
    for (size_t i = 0; i < m->count; i++) {
        struct mapping *mp = &m->items[i];
        char hex[2 * BUILD_ID_MAX];

        if (mp->build_id_len == 0)
            continue;
        for (size_t k = 0; k < mp->build_id_len; k++) {
            hex[2 * k] = digits[mp->build_id_raw[k] >> 4];
            hex[2 * k + 1] = digits[mp->build_id_raw[k] & 15];
        }
        mp->build_id = intern_bytes(st, hex, 2 * mp->build_id_len);
    }
}

/* Reads the executable mappings backed by a file (and [vdso]), with their
 * build IDs. Returns true when out of memory; an unreadable /proc leaves
 * no mappings. */
static bool read_mappings(struct mappings *m, struct strings *st)
{
    char exe[PATH_MAX];
    ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    struct mapping_reader r = {m, st, exe, false};
    uint64_t next_id = 1;

    exe[exe_len > 0 ? exe_len : 0] = '\0';
    ra__proc_maps(add_mapping, &r);
    if (r.failed)
        return true;
    /* "mapping[0] will be the main binary" (profile.proto). */
    for (size_t i = 0; i < m->count; i++)
        if (m->items[i].main)
            m->items[i].id = next_id++;
    for (size_t i = 0; i < m->count; i++)
        if (!m->items[i].main)
            m->items[i].id = next_id++;
    name_build_ids(m, st);
    return st->enc.failed;
}

/* The mapping holding pc, or NULL. */
static struct mapping *find_mapping(const struct mappings *m, uintptr_t pc)
{
    size_t i = first_ending_after(m, pc);

    return i < m->count && m->items[i].start <= pc ? &m->items[i] : NULL;
}

/* -- the profile ------------------------------------------------------------------ */

struct encoder {
    const struct ra__prof_dump *d;
    struct ra__pb out;       /* Profile's fields but the string table */
    struct ra__pb msg, sub;  /* scratch: a message, a message inside it */
    struct strings st;
    struct mappings maps;
    size_t nlines;           /* d's lines, all frames' together */
    uint64_t *function_of;   /* per line of d: its Function's id, 0 = none */
};


static void encode_value_type(struct encoder *e, unsigned field,
                              const char *type, const char *unit)
{
    ra__pb_uint(&e->msg, VALUE_TYPE_TYPE, intern(&e->st, type));
    ra__pb_uint(&e->msg, VALUE_TYPE_UNIT, intern(&e->st, unit));
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
        name = intern(&e->st, l->function);
        file = l->file != NULL ? intern(&e->st, l->file) : 0;
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
        struct mapping *m = find_mapping(&e->maps, pc);
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
            const struct mapping *m = &e->maps.items[i];
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
    uint64_t tag_key = intern(&e->st, "tag"), tag_value = 0;
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
            tag_value = intern(&e->st, name);
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
            intern(&e->st, "inuse_space"));
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
    intern(&e.st, "");
    if (read_mappings(&e.maps, &e.st) || encode_functions(&e))
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
    ra__pb_free(&e.st.enc);
    ra__meta_free(e.st.at);
    ra__meta_free(e.st.len);
    ra__meta_free(e.st.slots);
    return failed;
}

/* Floor: services. The profile's dump as its writers share it: the names
 * of code addresses (symbols.c), the dump's copy and its frames
 * (prof_dump.c, prof_names.c), the formats (prof_tree.c, prof_pprof.c) and
 * protocol buffers' wire format (protobuf.c). ra_prof_dump's entry points
 * are in output.h. */
#ifndef RA_PROF_DUMP_H
#define RA_PROF_DUMP_H

#include "output.h"

/* -- symbols.c: the names of code addresses ------------------------------- */
/* A function and, where debug information says, the source line in it. */
struct ra__symbol_line {
    const char *function; /* the symbol (mangled, for C++); NULL: unknown */
    const char *file;     /* the source file's path; NULL: no line known */
    unsigned line;        /* 0 when file is NULL */
};
/* The most lines one address has: the call, and each call inlined there. */
#define RA__SYMBOL_LINES 16
/* Between ra__symbols_begin and ra__symbols_end (a lock of symbols.c's,
 * which no allocation takes; the caller is in a quiet section),
 * ra__symbols_lookup names the call before return address addr: its
 * lines, innermost (the inlined function) first, valid until the end, and
 * *offset, addr less the outermost function's start (0: unknown). Returns
 * how many lines; 0 when nothing is known (a build without libdw, code no
 * object maps, an object without a symbol table). */
void ra__symbols_begin(void);
unsigned ra__symbols_lookup(uintptr_t addr,
                            const struct ra__symbol_line **lines,
                            uintptr_t *offset);
void ra__symbols_end(void);

/* A distinct frame address of a dump, named once: the code at return
 * address addr (looked up at addr - 1, so that a call that ends a function
 * is not taken for the next function). Its lines come from symbols.c, or
 * else from dladdr's dynamic symbol (one line, no file); module is dladdr's.
 * Every string is the dump's copy. */
struct ra__prof_frame {
    uintptr_t addr;
    const char *module;      /* the object's path; NULL: unknown */
    uintptr_t module_offset; /* addr - the object's base */
    uintptr_t offset;        /* addr - the outermost function; 0: unknown */
    unsigned nlines;         /* 0: no function known */
    const struct ra__symbol_line *lines; /* innermost first */
};

/* What a dump writes: the stacks copied out of the profile, and their
 * frames. */
struct ra__prof_dump {
    size_t interval;  /* the mean sampling interval, in bytes */
    size_t nstacks;
    struct ra__prof_stack *stacks; /* by tag, then live bytes, largest first */
    size_t nframes;
    struct ra__prof_frame *frames; /* every distinct address, ascending */
    struct ra__symbol_line *lines; /* where the frames' lines are */
    char *names;                   /* where the lines' strings point */
};

/* The entry of addr, one of the addresses of d's stacks (never NULL): a
 * binary search, inline so that every writer of frames (prof_dump.c's
 * folded stacks, prof_tree.c, prof_pprof.c) reads the copy without calling
 * the others. */
static inline const struct ra__prof_frame *
ra__prof_dump_frame(const struct ra__prof_dump *d, const void *addr)
{
    size_t lo = 0, hi = d->nframes;

    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->frames[mid].addr <= (uintptr_t)addr)
            lo = mid;
        else
            hi = mid;
    }
    ra__assert(lo < d->nframes && d->frames[lo].addr == (uintptr_t)addr);
    return &d->frames[lo];
}

/* Two stacks' frames in order: by address, innermost first, then the
 * shorter first. Inline: the dump sorts by it and so does the tree. */
static inline int ra__prof_compare_frames(const struct ra__prof_stack *x,
                                          const struct ra__prof_stack *y)
{
    unsigned n = x->nframes < y->nframes ? x->nframes : y->nframes;

    for (unsigned i = 0; i < n; i++)
        if (x->frames[i] != y->frames[i])
            return (uintptr_t)x->frames[i] < (uintptr_t)y->frames[i] ? -1
                                                                      : 1;
    return x->nframes < y->nframes ? -1 : x->nframes > y->nframes;
}

/* -- prof_names.c: the names of a dump's frames ---------------------------- */
/* Fills d->frames with every distinct address of d's stacks, named, and
 * d->lines and d->names with what they point to. Returns true when out of
 * memory (the caller frees what was set). */
bool ra__prof_name_frames(struct ra__prof_dump *d);
/* Room for a frame's name and its NUL; longer names are cut. */
#define RA__PROF_NAME_MAX 1024
/* Writes the name of f's line i (i < f->nlines, or 0 when it has none)
 * into buf (len > 0): "function (file.c:42)" (the file's base name),
 * "function+0xoff" for the outermost function where no line is known,
 * "function" for an inlined one, "module+0xoff" (the base name of the
 * object) or "0x<addr>" when no function is known. Control bytes become
 * '_', and so does ';' when folded is true (the separator of folded
 * stacks' frames). Returns buf. Never allocates. */
const char *ra__prof_line_name(char *buf, size_t len,
                               const struct ra__prof_frame *f, unsigned i,
                               bool folded);

/* -- protobuf.c: protocol buffers' wire format ------------------------------ */
/* A growable buffer of encoded fields, zeroed to start. failed: a write did
 * not fit (out of memory); later writes are dropped. */
struct ra__pb {
    uint8_t *data;
    size_t len, cap;
    bool failed;
};
/* Appends n raw bytes. */
void ra__pb_raw(struct ra__pb *b, const void *p, size_t n);
/* Appends v as a base-128 varint, low group first. */
void ra__pb_varint(struct ra__pb *b, uint64_t v);
/* A varint field (uint64, int64 of a non-negative value, bool); 0, the
 * default, is left out as proto3 does. */
void ra__pb_uint(struct ra__pb *b, unsigned field, uint64_t v);
/* A length-delimited field: bytes, a string, a message, a packed repeated
 * field. */
void ra__pb_bytes(struct ra__pb *b, unsigned field, const void *p, size_t n);
/* Appends msg as field of b and empties msg for the next one; a failure of
 * msg is b's. */
void ra__pb_message(struct ra__pb *b, unsigned field, struct ra__pb *msg);
/* Frees the buffer and zeroes it. */
void ra__pb_free(struct ra__pb *b);

/* -- prof_tree.c: RA_PROF_TREE --------------------------------------------- */
/* Writes d as the tree of call paths: per tag with live samples, or the
 * one tag asked for (even empty). Returns true when out of memory. */
bool ra__prof_tree_write(struct ra__out *o, const struct ra__prof_dump *d,
                         ra_tag_t tag);

/* -- prof_pprof.c: the pprof output -------------------------------------------- */
/* Writes d as a gzip-compressed profile.proto to o: one Sample per stack
 * labelled with its tag, a Location per frame, the executable mappings of
 * /proc/self/maps. Returns true on failure (errno ENOMEM: nothing, or a cut
 * stream, written); write errors are recorded in o. Runs in a quiet
 * section. */
bool ra__prof_pprof_write(struct ra__out *o, const struct ra__prof_dump *d);

#endif

/* Floor: services. The names of a profile's frames, for every format of
 * the dump: each distinct address named once (its object with dladdr, its
 * lines with symbols.c), the strings copied into the dump, and a line's
 * name as the formats write it. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "prof_dump.h"

static int compare_addrs(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

    return x < y ? -1 : x > y;
}

/* The names of the frames, copied: an object may be unloaded while the dump
 * is written. */
struct name_pool {
    char *data;
    size_t len, cap;
};

/* Appends s and its NUL. Returns the offset, or SIZE_MAX when out of
 * memory. */
static size_t pool_add(struct name_pool *pool, const char *s)
{
    size_t n = strlen(s) + 1, at = pool->len;

    if (pool->len + n > pool->cap) {
        size_t cap = pool->cap == 0 ? 4096 : pool->cap;
        char *grown;
        while (cap < pool->len + n)
            cap *= 2;
        grown = ra__meta_realloc(pool->data, cap);
        if (grown == NULL)
            return SIZE_MAX;
        pool->data = grown;
        pool->cap = cap;
    }
    memcpy(pool->data + at, s, n);
    pool->len += n;
    return at;
}

/* Where a frame's strings and lines are, until the pool stops moving:
 * offsets into the pool (SIZE_MAX for none) and into the lines. */
struct line_at {
    size_t function, file;
    unsigned line;
};

struct naming {
    struct name_pool pool;
    struct line_at *lines;
    size_t nlines, cap;
    /* Frames are sorted by address, so one object's are together. */
    const char *last_module;
    size_t last_module_at;
};

struct frame_at {
    size_t module, first_line;
};

/* Appends a line (strings copied). Returns true when out of memory. */
static bool add_line(struct naming *nm, const char *function,
                     const char *file, unsigned line)
{
    struct line_at at = {SIZE_MAX, SIZE_MAX, line};

    if (nm->nlines == nm->cap) {
        size_t cap = nm->cap == 0 ? 256 : nm->cap * 2;
        struct line_at *grown =
            ra__meta_realloc(nm->lines, cap * sizeof *grown);
        if (grown == NULL)
            return true;
        nm->lines = grown;
        nm->cap = cap;
    }
    if (function != NULL &&
        (at.function = pool_add(&nm->pool, function)) == SIZE_MAX)
        return true;
    if (file != NULL && (at.file = pool_add(&nm->pool, file)) == SIZE_MAX)
        return true;
    nm->lines[nm->nlines++] = at;
    return false;
}

/* Names f: its object with dladdr, its lines with symbols.c, or else
 * dladdr's dynamic symbol. Returns true when out of memory. */
static bool look_up_frame(struct ra__prof_frame *f, struct frame_at *at,
                          struct naming *nm)
{
    const struct ra__symbol_line *lines = NULL;
    Dl_info info;
    bool found;
    unsigned n;

    *at = (struct frame_at){SIZE_MAX, nm->nlines};
    f->module_offset = f->offset = 0;
    f->nlines = 0;
    if (f->addr == 0)
        return false;
    /* A return address: the call is just before it. */
    ra__assert_may_call_loader();
    found = dladdr((void *)(f->addr - 1), &info) != 0;
    if (found && info.dli_fname != NULL && info.dli_fname[0] != '\0') {
        if (info.dli_fname != nm->last_module) {
            nm->last_module_at = pool_add(&nm->pool, info.dli_fname);
            if (nm->last_module_at == SIZE_MAX)
                return true;
            nm->last_module = info.dli_fname;
        }
        at->module = nm->last_module_at;
        f->module_offset = f->addr - (uintptr_t)info.dli_fbase;
    }
    n = ra__symbols_lookup(f->addr, &lines, &f->offset);
    for (unsigned i = 0; i < n; i++)
        if (add_line(nm, lines[i].function, lines[i].file, lines[i].line))
            return true;
    if (n == 0 && found && info.dli_sname != NULL &&
        info.dli_sname[0] != '\0' && info.dli_saddr != NULL) {
        if (add_line(nm, info.dli_sname, NULL, 0))
            return true;
        f->offset = f->addr - (uintptr_t)info.dli_saddr;
        n = 1;
    }
    f->nlines = n;
    return false;
}

bool ra__prof_name_frames(struct ra__prof_dump *d)
{
    struct naming nm = {{NULL, 0, 0}, NULL, 0, 0, NULL, SIZE_MAX};
    struct frame_at *at = NULL;
    uintptr_t *addrs;
    size_t total = 0, n = 0;
    bool failed = false;

    for (size_t i = 0; i < d->nstacks; i++)
        total += d->stacks[i].nframes;
    addrs = ra__meta_alloc((total + 1) * sizeof *addrs);
    if (addrs == NULL)
        return true;
    for (size_t i = 0; i < d->nstacks; i++)
        for (unsigned j = 0; j < d->stacks[i].nframes; j++)
            addrs[n++] = (uintptr_t)d->stacks[i].frames[j];
    qsort(addrs, n, sizeof *addrs, compare_addrs);
    total = n;
    n = 0;
    for (size_t i = 0; i < total; i++)
        if (n == 0 || addrs[i] != addrs[n - 1])
            addrs[n++] = addrs[i];

    d->frames = ra__meta_alloc((n + 1) * sizeof *d->frames);
    at = ra__meta_alloc((n + 1) * sizeof *at);
    if (d->frames == NULL || at == NULL) {
        failed = true;
        goto out;
    }
    ra__symbols_begin();
    for (size_t i = 0; i < n && !failed; i++) {
        d->frames[i].addr = addrs[i];
        failed = look_up_frame(&d->frames[i], &at[i], &nm);
    }
    ra__symbols_end();
    if (failed)
        goto out;
    d->lines = ra__meta_alloc((nm.nlines + 1) * sizeof *d->lines);
    if (d->lines == NULL) {
        failed = true;
        goto out;
    }
    d->nframes = n;
    d->names = nm.pool.data;
    nm.pool.data = NULL;
    for (size_t i = 0; i < nm.nlines; i++) {
        const struct line_at *l = &nm.lines[i];
        d->lines[i] = (struct ra__symbol_line){
            l->function == SIZE_MAX ? NULL : d->names + l->function,
            l->file == SIZE_MAX ? NULL : d->names + l->file, l->line};
    }
    for (size_t i = 0; i < n; i++) {
        d->frames[i].module =
            at[i].module == SIZE_MAX ? NULL : d->names + at[i].module;
        d->frames[i].lines = d->lines + at[i].first_line;
    }
out:
    ra__meta_free(nm.pool.data);
    ra__meta_free(nm.lines);
    ra__meta_free(at);
    ra__meta_free(addrs);
    return failed;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');

    return slash != NULL ? slash + 1 : path;
}

const char *ra__prof_line_name(char *buf, size_t len,
                               const struct ra__prof_frame *f, unsigned i,
                               bool folded)
{
    const struct ra__symbol_line *l = i < f->nlines ? &f->lines[i] : NULL;
    const char *name = l != NULL ? l->function : NULL;
    char suffix[RA__PROF_NAME_MAX / 2];
    uintptr_t offset = f->offset;
    size_t n;

    suffix[0] = '\0';
    if (name == NULL && f->module != NULL && *base_name(f->module) != '\0') {
        name = base_name(f->module);
        offset = f->module_offset;
    } else if (name == NULL) {
        snprintf(buf, len, "0x%" PRIxPTR, f->addr);
        return buf;
    }
    /* The name is cut, never the suffix (the offset or the place). */
    if (l != NULL && l->file != NULL)
        snprintf(suffix, sizeof suffix, " (%s:%u)", base_name(l->file),
                 l->line);
    else if (l == NULL || (i + 1 == f->nlines && offset != 0))
        snprintf(suffix, sizeof suffix, "+0x%" PRIxPTR, offset);
    n = strlen(name);
    if (n + strlen(suffix) >= len)
        n = len > strlen(suffix) ? len - 1 - strlen(suffix) : 0;
    memcpy(buf, name, n);
    snprintf(buf + n, len - n, "%s", suffix);
    for (char *p = buf; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c == 0x7f || (folded && c == ';'))
            *p = '_';
    }
    return buf;
}

/* Floor: services. ra_prof_dump: its checks, the copy of the profile that a
 * dump writes, the names of its frames, and the text formats (tree, folded
 * stacks, heap_v2). The pprof encoder is prof_pprof.c. */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "instruments.h"
#include "output.h"


/* -- the copy ------------------------------------------------------------------ */

struct collect {
    struct ra__prof_dump *d;
    size_t cap;
    bool failed;
    /* A subtree's tags (indexed by id), or NULL: every stack visited. */
    const bool *member;
};

/* Runs under the profile's lock, which every sampled allocation and free
 * waits for: a copy, and now and then a doubling of the array. */
static void collect_stack(const struct ra__prof_stack *stack, void *ctx)
{
    struct collect *c = ctx;
    struct ra__prof_dump *d = c->d;

    if (c->failed || (c->member != NULL && !c->member[stack->tag]))
        return;
    if (d->nstacks == c->cap) {
        size_t cap = c->cap == 0 ? 64 : c->cap * 2;
        struct ra__prof_stack *grown =
            ra__meta_realloc(d->stacks, cap * sizeof *grown);
        if (grown == NULL) {
            c->failed = true;
            return;
        }
        d->stacks = grown;
        c->cap = cap;
    }
    d->stacks[d->nstacks++] = *stack;
}

static int compare_frames(const struct ra__prof_stack *x,
                          const struct ra__prof_stack *y)
{
    unsigned n = x->nframes < y->nframes ? x->nframes : y->nframes;

    for (unsigned i = 0; i < n; i++)
        if (x->frames[i] != y->frames[i])
            return (uintptr_t)x->frames[i] < (uintptr_t)y->frames[i] ? -1
                                                                      : 1;
    return x->nframes < y->nframes ? -1 : x->nframes > y->nframes;
}

/* By tag, then live bytes and cumulative bytes, largest first; the frames
 * break ties, so that a dump's order does not depend on the hash table's. */
static int compare_stacks(const void *a, const void *b)
{
    const struct ra__prof_stack *x = a, *y = b;

    if (x->tag != y->tag)
        return x->tag < y->tag ? -1 : 1;
    if (x->live_bytes != y->live_bytes)
        return x->live_bytes > y->live_bytes ? -1 : 1;
    if (x->alloc_bytes != y->alloc_bytes)
        return x->alloc_bytes > y->alloc_bytes ? -1 : 1;
    return compare_frames(x, y);
}

/* -- frames and their names -------------------------------------------------- */

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

/* Fills d->frames with every distinct address of d's stacks, named, and
 * d->lines and d->names with what they point to. Returns true when out of
 * memory. */
static bool name_frames(struct ra__prof_dump *d)
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

/* The tag's name for a folded stack: escaped as in the text reports, then
 * without the format's separators. */
static void folded_tag_name(char *buf, size_t len, ra_tag_t tag)
{
    char name[RA_TAG_NAME_MAX + 1];

    ra__escape(buf, len, ra__tag_label(tag, name), RA__ESCAPE_TEXT);
    for (char *p = buf; *p != '\0'; p++)
        if (*p == ';' || *p == ' ')
            *p = '_';
}

/* -- RA_PROF_FOLDED -------------------------------------------------------------- */

/* "tag:<name>;<outermost>;...;<innermost> <live bytes>", one line per stack
 * with live samples: what flamegraph.pl, inferno and speedscope read. */
static void write_folded(struct ra__out *o, const struct ra__prof_dump *d)
{
    char tag_name[RA__ESCAPED_MAX], name[RA__PROF_NAME_MAX];
    ra_tag_t named = RA_TAG_NONE;

    for (size_t i = 0; i < d->nstacks; i++) {
        const struct ra__prof_stack *s = &d->stacks[i];
        uint64_t bytes = ra__round_count(s->live_bytes);

        if (s->live_samples == 0 || bytes == 0)
            continue;
        if (s->tag != named) {
            folded_tag_name(tag_name, sizeof tag_name, s->tag);
            named = s->tag;
        }
        ra__out_str(o, "tag:");
        ra__out_str(o, tag_name);
        if (s->nframes == 0)
            ra__out_str(o, ";[unknown]");
        /* Outermost first: each frame's callers before the functions
         * inlined into them. */
        for (unsigned j = s->nframes; j-- > 0;) {
            const struct ra__prof_frame *f =
                ra__prof_dump_frame(d, s->frames[j]);
            for (unsigned k = f->nlines > 0 ? f->nlines : 1; k-- > 0;) {
                ra__out_str(o, ";");
                ra__out_str(o, ra__prof_line_name(name, sizeof name, f, k,
                                                  true));
            }
        }
        ra__out_fmt(o, " %" PRIu64 "\n", bytes);
    }
}

/* -- RA_PROF_TREE ------------------------------------------------------------------ */

/* A call path of the tree: the allocation site under the root, its callers
 * below it. Children are linked by index; 0 (the root) ends a list. */
struct node {
    uintptr_t addr;
    size_t first_child, next_sibling;
    double bytes, objects;
};

/* A stem: 5 columns per level of the tree. */
#define STEM_WIDTH 5

struct tree {
    struct ra__out *o;
    const struct ra__prof_dump *d;
    struct node *nodes;
    size_t nnodes;
    char stems[STEM_WIDTH * RA__PROF_MAX_FRAMES]; /* levels 1.. */
    char name[RA__PROF_NAME_MAX];
};

struct child_key {
    double bytes;
    uintptr_t addr;
    size_t index;
};

static int compare_children(const void *a, const void *b)
{
    const struct child_key *x = a, *y = b;

    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* A stack of the tree being built. */
struct stack_ref {
    const struct ra__prof_stack *s;
};

static int compare_stack_refs(const void *a, const void *b)
{
    return compare_frames(((const struct stack_ref *)a)->s,
                          ((const struct stack_ref *)b)->s);
}

/* Builds the tree of stacks[0..n) (live ones, sorted by frames, innermost
 * first, so that stacks with a common start are next to each other: each
 * adds nodes only past what it shares with the one before). */
static void build_tree(struct tree *t, const struct stack_ref *stacks,
                       size_t n)
{
    size_t path[RA__PROF_MAX_FRAMES + 1];
    const struct ra__prof_stack *prev = NULL;

    t->nodes[0] = (struct node){0, 0, 0, 0.0, 0.0};
    t->nnodes = 1;
    path[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ra__prof_stack *s = stacks[i].s;
        unsigned shared = 0;

        while (prev != NULL && shared < s->nframes &&
               shared < prev->nframes &&
               s->frames[shared] == prev->frames[shared])
            shared++;
        for (unsigned j = shared; j < s->nframes; j++) {
            struct node *parent = &t->nodes[path[j]];
            size_t k = t->nnodes++;
            t->nodes[k] = (struct node){(uintptr_t)s->frames[j], 0,
                                        parent->first_child, 0.0, 0.0};
            parent->first_child = k;
            path[j + 1] = k;
        }
        for (unsigned j = 0; j <= s->nframes; j++) {
            t->nodes[path[j]].bytes += s->live_bytes;
            t->nodes[path[j]].objects += s->live_objects;
        }
        prev = s;
    }
}

/* Orders every list of children largest first. keys has room for as many
 * entries as the tree has nodes. */
static void sort_children(struct tree *t, struct child_key *keys)
{
    for (size_t i = 0; i < t->nnodes; i++) {
        size_t n = 0;
        for (size_t c = t->nodes[i].first_child; c != 0;
             c = t->nodes[c].next_sibling)
            keys[n++] = (struct child_key){t->nodes[c].bytes,
                                           t->nodes[c].addr, c};
        if (n < 2)
            continue;
        qsort(keys, n, sizeof *keys, compare_children);
        t->nodes[i].first_child = keys[0].index;
        for (size_t k = 0; k + 1 < n; k++)
            t->nodes[keys[k].index].next_sibling = keys[k + 1].index;
        t->nodes[keys[n - 1].index].next_sibling = 0;
    }
}

/* The stems of the levels above the line: " |   " under a node that has
 * siblings below it, blanks under the last one. */
static void write_stems(struct tree *t, unsigned levels)
{
    size_t n = (size_t)levels * STEM_WIDTH;

    ra__out_write(t->o, t->stems, n);
}

/* A frame's name: its innermost function, then each function it is
 * inlined in, as "f (a.c:3) inlined in g (a.c:10)". */
static const char *node_name(struct tree *t, const struct node *n)
{
    const struct ra__prof_frame *f =
        ra__prof_dump_frame(t->d, (void *)n->addr);
    size_t used;

    ra__prof_line_name(t->name, sizeof t->name, f, 0, false);
    used = strlen(t->name);
    for (unsigned i = 1; i < f->nlines; i++) {
        char line[RA__PROF_NAME_MAX];
        ra__prof_line_name(line, sizeof line, f, i, false);
        used += (size_t)snprintf(t->name + used, sizeof t->name - used,
                                 " inlined in %s", line);
        if (used >= sizeof t->name)
            break;
    }
    return t->name;
}

/* Whether n's only child has n's figures: the child is then written as
 * one more line of n (a caller that adds nothing to tell apart). */
static bool collapses(const struct tree *t, const struct node *n)
{
    const struct node *c;

    if (n->first_child == 0 || t->nodes[n->first_child].next_sibling != 0)
        return false;
    c = &t->nodes[n->first_child];
    return ra__round_count(c->bytes) == ra__round_count(n->bytes) &&
           ra__round_count(c->objects) == ra__round_count(n->objects);
}

/* Writes node index, at depth (0: the root) and the last of its siblings
 * or not, then its subtree. */
static void write_node(struct tree *t, size_t index, unsigned depth,
                       bool last)
{
    const struct node *n = &t->nodes[index];

    if (depth == 0) {
        ra__out_str(t->o, "All");
    } else {
        write_stems(t, depth - 1);
        ra__out_str(t->o, last ? " \\-- " : " |-- ");
        ra__out_str(t->o, node_name(t, n));
        /* What the lines below this node show at its level. */
        memcpy(t->stems + (size_t)(depth - 1) * STEM_WIDTH,
               last ? "     " : " |   ", STEM_WIDTH);
    }
    ra__out_fmt(t->o, " (%" PRIu64 ", #%" PRIu64 ")\n", ra__round_count(n->bytes),
                ra__round_count(n->objects));
    while (depth > 0 && collapses(t, n)) {
        n = &t->nodes[n->first_child];
        write_stems(t, depth);
        ra__out_str(t->o, node_name(t, n));
        ra__out_str(t->o, "\n");
    }
    /* A node at depth d is frames[d - 1] of a stack: none deeper than
     * RA__PROF_MAX_FRAMES has children. */
    for (size_t c = n->first_child; c != 0 && depth < RA__PROF_MAX_FRAMES;
         c = t->nodes[c].next_sibling)
        write_node(t, c, depth + 1, t->nodes[c].next_sibling == 0);
    /* A line between a subtree and its next sibling. */
    if (depth > 0 && !last) {
        write_stems(t, depth - 1);
        ra__out_str(t->o, " |\n");
    }
}

/* "tag <name>", "All (<live bytes>, #<live objects>)", then the tree of
 * call paths: per tag with live samples (or the one tag asked for, even
 * empty), tags apart by a blank line. Returns true when out of memory. */
static bool write_tree(struct ra__out *o, const struct ra__prof_dump *d,
                       ra_tag_t tag)
{
    struct tree *t = ra__meta_alloc(sizeof *t);
    struct stack_ref *live =
        ra__meta_alloc((d->nstacks + 1) * sizeof *live);
    size_t nlive = 0, total = 1;
    struct child_key *keys;
    bool first = true;

    for (size_t i = 0; i < d->nstacks; i++)
        total += d->stacks[i].nframes;
    keys = ra__meta_alloc(total * sizeof *keys);
    if (t != NULL) {
        t->o = o;
        t->d = d;
        t->nodes = ra__meta_alloc(total * sizeof *t->nodes);
    }
    if (t == NULL || live == NULL || keys == NULL || t->nodes == NULL) {
        if (t != NULL)
            ra__meta_free(t->nodes);
        ra__meta_free(t);
        ra__meta_free(live);
        ra__meta_free(keys);
        return true;
    }
    for (size_t i = 0; i < d->nstacks; i++)
        if (d->stacks[i].live_samples > 0)
            live[nlive++].s = &d->stacks[i];
    /* d->stacks are by tag: each tag's live stacks are together. A tag
     * asked for by name is written even without any. */
    for (size_t lo = 0; lo < nlive || (first && tag != RA_TAG_ALL);) {
        char name[RA__ESCAPED_MAX], label[RA_TAG_NAME_MAX + 1];
        ra_tag_t cur = lo < nlive ? live[lo].s->tag : tag;
        size_t hi = lo;

        while (hi < nlive && live[hi].s->tag == cur)
            hi++;
        qsort(live + lo, hi - lo, sizeof *live, compare_stack_refs);
        build_tree(t, live + lo, hi - lo);
        sort_children(t, keys);
        ra__escape(name, sizeof name, ra__tag_label(cur, label),
                   RA__ESCAPE_TEXT);
        ra__out_fmt(o, "%stag ", first ? "" : "\n");
        ra__out_str(o, name);
        ra__out_str(o, "\n");
        write_node(t, 0, 0, true);
        first = false;
        lo = hi;
    }
    ra__meta_free(t->nodes);
    ra__meta_free(t);
    ra__meta_free(live);
    ra__meta_free(keys);
    return false;
}

/* -- RA_PROF_HEAP_V2 -------------------------------------------------------------- */

static void write_counts(struct ra__out *o, uint64_t live, uint64_t live_bytes,
                         uint64_t alloc, uint64_t alloc_bytes)
{
    ra__out_fmt(o,
                "  t*: %" PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64 "]\n",
                live, live_bytes, alloc, alloc_bytes);
}

/* ra__proc_maps callback: the line, as it is, and its newline. */
static bool copy_map_line(char *line, size_t len, void *ctx)
{
    struct ra__out *o = ctx;

    ra__out_write(o, line, len);
    ra__out_str(o, "\n");
    return false;
}

/* jemalloc's heap profile (src/prof_data.c, prof_dump_header and
 * prof_dump_gctx), as `jeprof --text <program> <dump>` reads it:
 *
 *   heap_v2/<interval>
 *     t*: <live samples>: <live bytes> [<samples>: <bytes>]
 *   @ 0x<pc> 0x<pc> ...            innermost first
 *     t*: <live samples>: <live bytes> [<samples>: <bytes>]
 *   ...
 *
 *   MAPPED_LIBRARIES:
 *   <a copy of /proc/self/maps>
 *
 * The figures are the raw sampled counts and bytes, not the estimates:
 * jeprof unbiases them itself (bin/jeprof.in, AdjustSamples, "heap_v2"
 * sampling algorithm 2: each stack's counts times 1 / (1 - exp(-mean
 * size / interval))); jemalloc, which keeps unbiased counts when
 * opt.prof_unbias is on, turns them back into sampled ones before writing
 * (prof_do_unbias). jeprof subtracts 1 from every address but the first
 * (FixCallerAddresses) so that a return address falls inside its call;
 * our first frame is a return address too (the caller of malloc, not a pc
 * of the allocator as in jemalloc's dumps), so it is written minus 1. The
 * format has no tags: with RA_TAG_ALL, a stack shared by two tags appears
 * twice, and jeprof adds them up. */
static void write_heap_v2(struct ra__out *o, const struct ra__prof_dump *d)
{
    uint64_t live = 0, live_bytes = 0, alloc = 0, alloc_bytes = 0;

    /* A stack without frames would read as part of the one before it. */
    for (size_t i = 0; i < d->nstacks; i++) {
        const struct ra__prof_stack *s = &d->stacks[i];
        if (s->nframes == 0)
            continue;
        live += s->live_samples;
        live_bytes += s->live_sampled_bytes;
        alloc += s->alloc_samples;
        alloc_bytes += s->alloc_sampled_bytes;
    }
    ra__out_fmt(o, "heap_v2/%zu\n", d->interval);
    write_counts(o, live, live_bytes, alloc, alloc_bytes);
    for (size_t i = 0; i < d->nstacks; i++) {
        const struct ra__prof_stack *s = &d->stacks[i];
        if (s->nframes == 0)
            continue;
        ra__out_str(o, "@");
        for (unsigned j = 0; j < s->nframes; j++)
            ra__out_fmt(o, " 0x%" PRIxPTR,
                        (uintptr_t)s->frames[j] - (j == 0 ? 1 : 0));
        ra__out_str(o, "\n");
        write_counts(o, s->live_samples, s->live_sampled_bytes,
                     s->alloc_samples, s->alloc_sampled_bytes);
    }
    ra__out_str(o, "\nMAPPED_LIBRARIES:\n");
    ra__proc_maps(copy_map_line, o);
}

/* -- ra_prof_dump ------------------------------------------------------------------ */

static void free_dump(struct ra__prof_dump *d)
{
    ra__meta_free(d->stacks);
    ra__meta_free(d->frames);
    ra__meta_free(d->lines);
    ra__meta_free(d->names);
}

/* Writes d in fmt. Returns 0 or an errno value (ENOMEM). */
static int write_dump(struct ra__out *o, const struct ra__prof_dump *d,
                      ra_prof_format_t fmt, ra_tag_t tag)
{
    switch (fmt) {
    case RA_PROF_TREE:
        return write_tree(o, d, tag) ? ENOMEM : 0;
    case RA_PROF_FOLDED:
        write_folded(o, d);
        return 0;
    case RA_PROF_PPROF:
        return ra__prof_pprof_write(o, d) ? ENOMEM : 0;
    default:
        write_heap_v2(o, d);
        return 0;
    }
}

/* tag's stacks (RA_TAG_ALL: every tag's), or, with member, those of the
 * tags it marks. */
static int dump_write(struct ra__out *o, ra_prof_format_t fmt, ra_tag_t tag,
                      const bool *member)
{
    struct ra__prof_dump d = {0, 0, NULL, 0, NULL, NULL, NULL};
    struct collect c = {&d, 0, false, member};
    int err;

    ra__quiet_begin();
    d.interval = ra__prof_visit(tag, collect_stack, &c);
    if (d.interval == 0) {
        err = ENOTSUP;
    } else if (c.failed || name_frames(&d)) {
        err = ENOMEM;
    } else {
        if (d.nstacks > 1)
            qsort(d.stacks, d.nstacks, sizeof *d.stacks, compare_stacks);
        err = write_dump(o, &d, fmt, tag);
        if (ra__out_finish(o) != 0 && err == 0)
            err = EIO;
    }
    free_dump(&d);
    ra__quiet_end();
    return err;
}

int ra__prof_dump_write(struct ra__out *o, ra_prof_format_t fmt,
                        ra_tag_t tag)
{
    return dump_write(o, fmt, tag, NULL);
}

int ra__prof_dump_write_tree(struct ra__out *o, ra_prof_format_t fmt,
                             ra_tag_t root)
{
    unsigned max = ra__config()->max_tags;
    ra_tag_t *tags;
    bool *member;
    unsigned n;
    int err;

    tags = ra__meta_alloc(max * sizeof *tags);
    member = ra__meta_calloc(max + 1, sizeof *member);
    if (tags == NULL || member == NULL) {
        err = ENOMEM;
    } else {
        /* Read before the profile's lock is taken: no lock inside it. */
        n = ra__tag_subtree(root, tags);
        for (unsigned i = 0; i < n; i++)
            member[tags[i]] = true;
        err = n == 0 ? EINVAL : dump_write(o, fmt, RA_TAG_ALL, member);
    }
    ra__meta_free(tags);
    ra__meta_free(member);
    return err;
}

int ra_prof_dump(FILE *out, ra_prof_format_t fmt, ra_tag_t tag)
{
    struct ra__out o = RA__OUT_INIT(out, true);
    int err;

    if (out == NULL || (unsigned)fmt > (unsigned)RA_PROF_HEAP_V2 ||
        (tag != RA_TAG_ALL && !ra__tag_valid(tag))) {
        errno = EINVAL;
        return -1;
    }
    err = ra__prof_dump_write(&o, fmt, tag);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}

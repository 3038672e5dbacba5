/* Floor: services. ra_prof_dump: its checks, the copy of the profile that a
 * dump writes, and the formats that are a loop over its stacks (folded
 * stacks, heap_v2). The frames' names are prof_names.c's, the tree
 * prof_tree.c's, the pprof encoder prof_pprof.c's. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "instruments.h"
#include "prof_dump.h"


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
    return ra__prof_compare_frames(x, y);
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
        return ra__prof_tree_write(o, d, tag) ? ENOMEM : 0;
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
    } else if (c.failed || ra__prof_name_frames(&d)) {
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

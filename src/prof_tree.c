/* Floor: services. RA_PROF_TREE: the profile as a tree of call paths per
 * tag, allocation sites at the root and their callers below, in the style
 * of jeprof --tree. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "prof_dump.h"

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
    return ra__prof_compare_frames(((const struct stack_ref *)a)->s,
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
bool ra__prof_tree_write(struct ra__out *o, const struct ra__prof_dump *d,
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

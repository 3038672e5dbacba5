/* Floor: services. Which tags a report lists: every one, or the largest
 * (by their subtrees' resident bytes) with the others rolled up under the
 * listed tag they sit under, so that a report of 3,000 tags stays
 * readable and a scrape bounded, and every figure still adds up. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "output.h"

/* A tag's rank among the rows to list: its subtree's resident bytes, then
 * its place in the tree's order. A parent's subtree holds its children's,
 * and it comes first in that order: it always ranks above them, so the
 * largest tags, their parents included, are a tree. */
static bool ranks_below(const struct ra__snapshot *snap, unsigned pos_a,
                        unsigned pos_b)
{
    uint64_t a = snap->rows[snap->order[pos_a]].tree.resident;
    uint64_t b = snap->rows[snap->order[pos_b]].tree.resident;

    return a < b || (a == b && pos_a > pos_b);
}

/* The heap of the k best places so far, the lowest ranked at its root. */
static void sift_down(const struct ra__snapshot *snap, unsigned *heap,
                      size_t n, size_t i)
{
    for (;;) {
        size_t low = i, l = 2 * i + 1, r = l + 1;
        if (l < n && ranks_below(snap, heap[l], heap[low]))
            low = l;
        if (r < n && ranks_below(snap, heap[r], heap[low]))
            low = r;
        if (low == i)
            return;
        unsigned t = heap[i];
        heap[i] = heap[low];
        heap[low] = t;
        i = low;
    }
}

static void sift_up(const struct ra__snapshot *snap, unsigned *heap,
                    size_t i)
{
    while (i > 0 && ranks_below(snap, heap[i], heap[(i - 1) / 2])) {
        unsigned t = heap[i];
        heap[i] = heap[(i - 1) / 2];
        heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

/* Marks in l->listed the k highest ranked rows that may be listed: a heap
 * of k over the rows, O(n log k). A tag named "(rest)" is never listed
 * where the rest is rolled up, nor anything under it: its series would be
 * the roll-up's. */
static void choose(struct ra__listing *l, const struct ra__snapshot *snap,
                   size_t k, unsigned *heap, bool *barred)
{
    size_t n = 0;

    for (unsigned pos = 1; pos <= snap->ntags; pos++) {
        unsigned r = snap->order[pos];
        const struct ra__usage *u = &snap->rows[r];
        barred[r] = strcmp(u->name, RA__REST_NAME) == 0 ||
                    (u->parent_row != 0 && barred[u->parent_row]);
        if (barred[r] || k == 0)
            continue;
        if (n < k) {
            heap[n] = pos;
            sift_up(snap, heap, n++);
        } else if (ranks_below(snap, heap[0], pos)) {
            heap[0] = pos;
            sift_down(snap, heap, n, 0);
        }
    }
    for (size_t i = 0; i < n; i++)
        l->listed[snap->order[heap[i]]] = true;
}

/* The figures of u that add up, added to sum: what a roll-up carries. */
static void add_figures(struct ra__usage *sum, const struct ra__usage *u)
{
    sum->allocated += u->allocated;
    sum->active += u->active;
    sum->resident += u->resident;
    sum->rss += u->rss;
    sum->metadata += u->metadata;
    sum->mapped += u->mapped;
    sum->dirty += u->dirty;
    sum->muzzy += u->muzzy;
    sum->retained += u->retained;
    sum->nmalloc += u->nmalloc;
    sum->ndalloc += u->ndalloc;
    sum->purges += u->purges;
    sum->limit_failures += u->limit_failures;
    sum->arenas += u->arenas;
}

/* A roll-up holds whole subtrees: its tree is its own figures. */
static void close_rollup(struct ra__rollup *ru)
{
    struct ra__usage *sum = &ru->sum;

    sum->tree.allocated = sum->allocated;
    sum->tree.active = sum->active;
    sum->tree.resident = sum->resident;
    sum->tree.mapped = sum->mapped;
    sum->tree.dirty = sum->dirty;
    sum->tree.nmalloc = sum->nmalloc;
    sum->tree.ndalloc = sum->ndalloc;
}

/* Rolls every row not listed up under the nearest listed tag above it (0:
 * the top level), in a roll-up per such tag: rollup_of[row] is its
 * roll-up's index + 1 (0: none), group[row] where a row not listed rolls
 * up. Notes which rows have children. */
static void roll_up(struct ra__listing *l, const struct ra__snapshot *snap,
                    unsigned *rollup_of, unsigned *group)
{
    for (unsigned pos = 1; pos <= snap->ntags; pos++) {
        unsigned r = snap->order[pos], p = snap->rows[r].parent_row, g;
        struct ra__rollup *ru;

        l->has_children[p] = true;
        if (l->listed[r])
            continue;
        g = p == 0 || l->listed[p] ? p : group[p];
        group[r] = g;
        if (rollup_of[g] == 0) {
            ru = &l->rollups[l->nrollups];
            memset(ru, 0, sizeof *ru);
            ru->parent_row = g;
            ru->depth = g != 0 ? snap->rows[g].depth + 1 : 1;
            rollup_of[g] = ++l->nrollups;
        }
        ru = &l->rollups[rollup_of[g] - 1];
        ru->tags++;
        add_figures(&ru->sum, &snap->rows[r]);
    }
    for (unsigned i = 0; i < l->nrollups; i++) {
        close_rollup(&l->rollups[i]);
        l->rest.tags += l->rollups[i].tags;
        add_figures(&l->rest.sum, &l->rollups[i].sum);
    }
    close_rollup(&l->rest);
}

static void add_rollup_line(struct ra__listing *l, const unsigned *rollup_of,
                            unsigned parent)
{
    if (rollup_of[parent] != 0)
        l->lines[l->nlines++] = (struct ra__line){0, rollup_of[parent] - 1};
}

/* The lines in the tree's order: each listed tag before its children, the
 * roll-up under a tag after its listed children, the top level's last.
 * stack: the open listed tags, from the top level down. */
static void order_lines(struct ra__listing *l,
                        const struct ra__snapshot *snap,
                        const unsigned *rollup_of, unsigned *stack)
{
    unsigned depth = 0;

    for (unsigned pos = 1; pos <= snap->ntags; pos++) {
        unsigned r = snap->order[pos], p = snap->rows[r].parent_row;
        if (!l->listed[r])
            continue;
        /* Listed tags are a tree: p is open, or the top level. */
        ra__assert(p == 0 || l->listed[p]);
        while (depth > 0 && stack[depth - 1] != p)
            add_rollup_line(l, rollup_of, stack[--depth]);
        l->lines[l->nlines++] = (struct ra__line){r, 0};
        stack[depth++] = r;
    }
    while (depth > 0)
        add_rollup_line(l, rollup_of, stack[--depth]);
    add_rollup_line(l, rollup_of, 0);
}

bool ra__listing_make(struct ra__listing *l, const struct ra__snapshot *snap,
                      size_t top)
{
    size_t rows = (size_t)snap->ntags + 1;
    size_t k = top < snap->ntags ? top : snap->ntags;
    /* Scratch: rollup_of, group, the heap or the stack (k + 1 each at
     * most, and a stack is as deep as the listed tags), barred. */
    unsigned *scratch = ra__meta_calloc(3 * rows, sizeof *scratch);
    bool *barred = ra__meta_calloc(rows, sizeof *barred);

    *l = (struct ra__listing){.cut = top != RA_REPORT_ALL_TAGS, .top = top};
    l->listed = ra__meta_calloc(2 * rows, sizeof *l->listed);
    l->lines = ra__meta_alloc((rows + k + 1) * sizeof *l->lines);
    l->rollups = ra__meta_alloc((k + 1) * sizeof *l->rollups);
    if (scratch == NULL || barred == NULL || l->listed == NULL ||
        l->lines == NULL || l->rollups == NULL) {
        ra__meta_free(scratch);
        ra__meta_free(barred);
        ra__listing_free(l);
        return true;
    }
    l->has_children = l->listed + rows;
    if (l->cut)
        choose(l, snap, k, scratch + 2 * rows, barred);
    else
        memset(l->listed, true, rows);
    roll_up(l, snap, scratch, scratch + rows);
    order_lines(l, snap, scratch, scratch + 2 * rows);
    ra__meta_free(scratch);
    ra__meta_free(barred);
    return false;
}

void ra__listing_free(struct ra__listing *l)
{
    ra__meta_free(l->listed);
    ra__meta_free(l->lines);
    ra__meta_free(l->rollups);
    l->listed = l->has_children = NULL;
    l->lines = NULL;
    l->rollups = NULL;
}

/* n with its thousands apart: "2,950". */
static void grouped(char *buf, size_t len, uint64_t n)
{
    char digits[24];
    size_t nd = (size_t)snprintf(digits, sizeof digits, "%" PRIu64, n), o = 0;

    for (size_t i = 0; i < nd && o + 1 < len; i++) {
        if (i > 0 && (nd - i) % 3 == 0 && o + 2 < len)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
}

void ra__rollup_name(char *buf, size_t len, const struct ra__snapshot *snap,
                     const struct ra__rollup *ru, enum ra__escape_style style)
{
    char count[32], parent[RA__ESCAPED_MAX];

    grouped(count, sizeof count, ru->tags);
    if (ru->parent_row == 0) {
        snprintf(buf, len, "(%s more tag%s)", count, ru->tags == 1 ? "" : "s");
        return;
    }
    ra__escape(parent, sizeof parent, snap->rows[ru->parent_row].name, style);
    snprintf(buf, len, "(%s more under %s)", count, parent);
}

/* The layered-phases workload, one contender per process
 * (`phases jemalloc|untagged|tagged`):
 *   parse  2000 documents of 1000 tokens (8-64 byte blocks, plus one token
 *          array per document); one token in 8 is a new identifier, interned
 *          as it is met in a table entry of the same size classes
 *   index  a posting (the document number) per token, appended to its
 *          identifier's list, lists grown by realloc
 *   drop   free every token and token array
 *   purge  flush the thread's caches and return unused pages to the OS
 * and prints the RSS (statm, minus the RSS at start) after parse+index and
 * after drop+purge. Tagged, tokens are allocated under "parse" and the table
 * and postings under "index"; untagged (libregionalloc's override with
 * nothing pushed, then ra_purge_all) and jemalloc (its own malloc, then
 * thread.tcache.flush and arena.<all>.purge) do the same work, where the
 * entries made during parsing land on the tokens' pages and keep them
 * resident after the tokens are freed. */
#include <stdio.h>
#include <string.h>

#include <regionalloc.h>

#include "contenders.h"

#define NDOCS 2000
#define TOKENS 1000
#define NEW_EVERY 8 /* one token in 8 is a new identifier */

struct token {
    uint32_t id;
    char text[];
};

struct entry {
    uint32_t *postings;
    uint32_t n, cap;
    char name[]; /* 8-40 bytes: the entry is 24-56, like the tokens */
};

static struct token **docs[NDOCS];
static struct entry **table; /* by identifier id, grown by realloc */
static uint32_t nids, table_cap;
static ra_tag_t parse_tag, index_tag;
static uint64_t ndocs;

static void enter_none(ra_tag_t t)
{
    (void)t;
}

static void enter_tag(ra_tag_t t)
{
    if (ra_tag_push(t) != 0)
        bench_die("ra_tag_push");
}

static void leave_tag(ra_tag_t t)
{
    ra_tag_pop(t);
}

static double mib(size_t bytes, size_t start)
{
    return bytes > start ? (bytes - start) / 1048576.0 : 0;
}

BENCH_INLINE void intern(bench_alloc_fn m, bench_realloc_fn r,
                                  void (*enter)(ra_tag_t),
                                  void (*leave)(ra_tag_t), uint32_t *x)
{
    struct entry *e;
    size_t len = 8 + (*x >> 11) % 33;

    enter(index_tag);
    if (nids == table_cap) {
        table_cap = table_cap ? 2 * table_cap : 1024;
        if ((table = r(table, table_cap * sizeof *table)) == NULL)
            bench_die("out of memory");
    }
    if ((e = m(sizeof *e + len)) == NULL)
        bench_die("out of memory");
    leave(index_tag);
    e->postings = NULL;
    e->n = e->cap = 0;
    memset(e->name, 'i', len - 1);
    e->name[len - 1] = '\0';
    table[nids] = e;
}

BENCH_INLINE void run_phases(bench_alloc_fn m, bench_free_fn f,
                             bench_realloc_fn r, void (*enter)(ra_tag_t),
                             void (*leave)(ra_tag_t), void (*purge)(void),
                             const char *name)
{
    size_t start = bench_rss_bytes(), full, end;
    uint32_t x = 2463534242u;

    /* parse, interning identifiers on the way */
    for (uint64_t d = 0; d < ndocs; d++) {
        enter(parse_tag);
        if ((docs[d] = m(TOKENS * sizeof *docs[d])) == NULL)
            bench_die("out of memory");
        leave(parse_tag);
        for (unsigned i = 0; i < TOKENS; i++) {
            struct token *t;
            uint32_t id;
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            if (nids == 0 || x % NEW_EVERY == 0) {
                intern(m, r, enter, leave, &x);
                id = nids++;
            } else {
                id = (x >> 7) % nids;
            }
            enter(parse_tag);
            t = m(8 + (x >> 3) % 57);
            leave(parse_tag);
            if (t == NULL)
                bench_die("out of memory");
            t->id = id;
            t->text[0] = 't';
            docs[d][i] = t;
        }
    }
    /* index: postings lists, grown by realloc */
    enter(index_tag);
    for (uint64_t d = 0; d < ndocs; d++)
        for (unsigned i = 0; i < TOKENS; i++) {
            struct entry *e = table[docs[d][i]->id];
            if (e->n == e->cap) {
                e->cap = e->cap ? 2 * e->cap : 4;
                e->postings = r(e->postings, e->cap * sizeof *e->postings);
                if (e->postings == NULL)
                    bench_die("out of memory");
            }
            e->postings[e->n++] = (uint32_t)d;
        }
    leave(index_tag);
    full = bench_rss_bytes();
    /* drop the parse */
    for (uint64_t d = 0; d < ndocs; d++) {
        for (unsigned i = 0; i < TOKENS; i++)
            f(docs[d][i]);
        f(docs[d]);
    }
    purge();
    end = bench_rss_bytes();
    bench_row("phases: RSS after parse+index", name, mib(full, start), "MiB",
              -1, mib(full, start), mib(full, start));
    bench_row("phases: RSS after drop+purge", name, mib(end, start), "MiB",
              -1, mib(end, start), mib(end, start));
}

static void purge_regionalloc(void)
{
    ra_thread_flush();
    if (ra_purge_all() != 0)
        perror("ra_purge_all");
}

int main(int argc, char **argv)
{
    const char *who = argc == 2 ? argv[1] : "";

    bench_open_contenders();
    ndocs = bench_scaled(NDOCS, 10);
    if (ndocs > NDOCS)
        ndocs = NDOCS;
    free(malloc(16));
    if (strcmp(who, "jemalloc") == 0) {
        run_phases(alloc_jemalloc, free_jemalloc, realloc_jemalloc, enter_none,
                   enter_none, bench_je_purge_all, NAME_JEMALLOC);
    } else if (strcmp(who, "untagged") == 0) {
        run_phases(alloc_process, free_process, realloc_process, enter_none,
                   enter_none, purge_regionalloc, NAME_UNTAGGED);
    } else if (strcmp(who, "tagged") == 0) {
        if ((parse_tag = ra_tag_create("parse")) == RA_TAG_NONE ||
            (index_tag = ra_tag_create("index")) == RA_TAG_NONE)
            bench_die("ra_tag_create");
        /* Each tag's arena and cache exist before the RSS at start is read,
         * as the other contenders' arenas do. */
        enter_tag(parse_tag);
        free(malloc(16));
        leave_tag(parse_tag);
        enter_tag(index_tag);
        free(malloc(16));
        leave_tag(index_tag);
        run_phases(alloc_process, free_process, realloc_process, enter_tag,
                   leave_tag, purge_regionalloc, NAME_TAGGED);
    } else {
        fprintf(stderr, "usage: %s jemalloc|untagged|tagged\n", argv[0]);
        return 2;
    }
    bench_note("phases: %u identifiers, %llu tokens", (unsigned)nids,
               (unsigned long long)ndocs * TOKENS);
    return 0;
}

/* Tenants with budgets, each serving queries as child tags with budgets of
 * their own, on worker threads (tag trees). A tenant's hard limit bounds
 * its whole subtree, exactly: a query is refused when its tenant's
 * subtree is full (or its own budget is), while the other tenants' queries
 * go on. Tenant 0 is the busy one: it gets half of the queries, so its
 * queries overlap and fill its budget. The summary prints each tenant's
 * peak (the subtree's own high-water mark of committed memory) against its
 * budget, never above, and the refusals; the program checks that and
 * exits 1 if a peak ever passed a budget.
 *
 * A query holds working memory of a size drawn at random (log-uniform,
 * 256 KiB to the query budget and a bit past it) in blocks of 64 KiB,
 * writes it, and ends with ra_tag_destroy.
 * Exit status: 0 done, 1 a budget passed or a runtime failure, 2 bad usage. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <regionalloc.h>

#define MAX_TENANTS 16
#define MAX_THREADS 32
#define MIB ((size_t)1 << 20)
#define CHUNK ((size_t)64 << 10)

static struct {
    unsigned tenants, queries, threads;
    size_t tenant_budget, query_budget;
    uint64_t seed;
} opt = {4, 400, 4, 24 * MIB, 12 * MIB, 1};

static ra_tag_t tenants[MAX_TENANTS];
static _Atomic unsigned next_query;
static _Atomic unsigned served[MAX_TENANTS], by_tenant[MAX_TENANTS],
    by_query[MAX_TENANTS];

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "tenants: %s: %s\n", what, strerror(errno));
    exit(1);
}

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* 256 KiB to 1.25 x the query budget, log-uniform. */
static size_t working_set(uint64_t *rng)
{
    double lo = log(256 << 10), hi = log(opt.query_budget * 1.25);
    double u = (double)(next_random(rng) >> 11) / (double)(1ull << 53);

    return (size_t)exp(lo + u * (hi - lo));
}

/* One query of tenant t: its own tag under the tenant's, its working set,
 * its end. A refusal is the query's own budget's when the query alone
 * would pass it, else its tenant's: the tenant's subtree was full. */
static void run_query(unsigned t, unsigned n, uint64_t *rng)
{
    char name[RA_TAG_NAME_MAX + 1];
    void *blocks[(64 * MIB) / CHUNK];
    size_t want = working_set(rng), got = 0;
    unsigned nblocks = 0;
    ra_tag_limit_t limit = {.hard = opt.query_budget};
    ra_tag_usage_t u;
    ra_tag_t q;

    snprintf(name, sizeof name, "tenant-%u/query-%u", t, n);
    q = ra_tag_create_in(tenants[t], name);
    if (q == RA_TAG_NONE) {
        if (errno != ENOMEM)
            die("ra_tag_create_in");
        atomic_fetch_add(&by_tenant[t], 1); /* not even its metadata fit */
        return;
    }
    if (ra_tag_set_limit(q, &limit) != 0)
        die("ra_tag_set_limit");
    while (got < want && nblocks < sizeof blocks / sizeof blocks[0]) {
        void *p = ra_malloc_tag(q, CHUNK);
        if (p == NULL) {
            if (ra_tag_usage(q, &u) != 0)
                die("ra_tag_usage");
            if (u.mapped + CHUNK > opt.query_budget)
                atomic_fetch_add(&by_query[t], 1);
            else
                atomic_fetch_add(&by_tenant[t], 1);
            break;
        }
        memset(p, (int)n, CHUNK);
        blocks[nblocks++] = p;
        got += CHUNK;
    }
    if (got >= want)
        atomic_fetch_add(&served[t], 1);
    /* The destroy frees the blocks the query left: all of them here. */
    if (ra_tag_destroy(q) != 0)
        die("ra_tag_destroy");
}

static void *worker(void *arg)
{
    uint64_t rng = opt.seed * 0x9e3779b97f4a7c15ull + (uintptr_t)arg + 1;

    for (;;) {
        unsigned n = atomic_fetch_add(&next_query, 1);
        unsigned t;
        if (n >= opt.queries)
            return NULL;
        /* Half the queries are tenant 0's. */
        t = (next_random(&rng) & 1) ? 0
                                    : 1 + (unsigned)(next_random(&rng) %
                                                     (opt.tenants - 1));
        run_query(t, n, &rng);
    }
}

static bool parse_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);

    if (end == s || v <= 0)
        return false;
    if (*end == 'K' || *end == 'k')
        v *= 1 << 10, end++;
    else if (*end == 'M' || *end == 'm')
        v *= 1 << 20, end++;
    if (*end != '\0')
        return false;
    *out = (size_t)v;
    return true;
}

static _Noreturn void usage(void)
{
    fprintf(stderr, "usage: tenants [--tenants N] [--queries N] [--threads N] "
                    "[--tenant-budget SIZE] [--query-budget SIZE] [--seed N]\n");
    exit(2);
}

static void parse(int argc, char **argv)
{
    static const struct option longs[] = {
        {"tenants", required_argument, NULL, 't'},
        {"queries", required_argument, NULL, 'q'},
        {"threads", required_argument, NULL, 'j'},
        {"tenant-budget", required_argument, NULL, 'T'},
        {"query-budget", required_argument, NULL, 'Q'},
        {"seed", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0}};
    int c;

    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 't': opt.tenants = (unsigned)atoi(optarg); break;
        case 'q': opt.queries = (unsigned)atoi(optarg); break;
        case 'j': opt.threads = (unsigned)atoi(optarg); break;
        case 'T': if (!parse_size(optarg, &opt.tenant_budget)) usage(); break;
        case 'Q': if (!parse_size(optarg, &opt.query_budget)) usage(); break;
        case 's': opt.seed = strtoull(optarg, NULL, 10); break;
        default: usage();
        }
    }
    if (optind != argc || opt.tenants < 2 || opt.tenants > MAX_TENANTS ||
        opt.threads < 1 || opt.threads > MAX_THREADS || opt.queries < 1 ||
        opt.query_budget < MIB || opt.tenant_budget < 4 * MIB ||
        opt.query_budget * 1.25 > 64 * MIB)
        usage();
}

int main(int argc, char **argv)
{
    pthread_t threads[MAX_THREADS];
    ra_tag_limit_t limit;
    bool passed = false;

    parse(argc, argv);
    limit = (ra_tag_limit_t){.hard = opt.tenant_budget};
    for (unsigned t = 0; t < opt.tenants; t++) {
        char name[32];
        snprintf(name, sizeof name, "tenant-%u", t);
        tenants[t] = ra_tag_create(name);
        if (tenants[t] == RA_TAG_NONE || ra_tag_set_limit(tenants[t], &limit))
            die("ra_tag_create");
    }
    for (unsigned i = 0; i < opt.threads; i++)
        if (pthread_create(&threads[i], NULL, worker,
                           (void *)(uintptr_t)i) != 0)
            die("pthread_create");
    for (unsigned i = 0; i < opt.threads; i++)
        pthread_join(threads[i], NULL);

    printf("tenants: %u queries on %u threads, tenant budget %.1f MiB, "
           "query budget %.1f MiB\n",
           opt.queries, opt.threads, (double)opt.tenant_budget / MIB,
           (double)opt.query_budget / MIB);
    printf("%-10s %8s %18s %18s %14s %14s\n", "tenant", "served",
           "refused: tenant", "refused: query", "peak MiB", "budget MiB");
    for (unsigned t = 0; t < opt.tenants; t++) {
        ra_tag_stats_t tree;
        if (ra_tag_stats_tree(tenants[t], &tree) != 0)
            die("ra_tag_stats_tree");
        printf("tenant-%-3u %8u %18u %18u %14.2f %14.2f\n", t,
               atomic_load(&served[t]), atomic_load(&by_tenant[t]),
               atomic_load(&by_query[t]), (double)tree.peak_mapped / MIB,
               (double)opt.tenant_budget / MIB);
        if (tree.peak_mapped > opt.tenant_budget)
            passed = true;
    }
    if (passed) {
        fprintf(stderr, "tenants: a tenant's peak passed its budget\n");
        return 1;
    }
    printf("no tenant's subtree ever held more than its budget\n");
    return 0;
}

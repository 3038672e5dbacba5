/* A server-like loop: every simulated request gets a tag of its own with a
 * budget, does its work under that tag, and ends with ra_tag_destroy, which
 * frees whatever the request left behind and hands the tag's id, region and
 * arena to a later request. A request whose work needs more than its budget
 * sees an allocation fail (NULL, ENOMEM) and is rejected; it frees nothing
 * itself, the destroy does. The summary says how many were served and
 * rejected, how many allocations a request made and how much memory it
 * held at its peak (exact: ra_tag_usage), what creating and destroying a
 * tag cost, the throughput and the process's resident set.
 *
 * --untagged does the same work with no tag (and so no budget); --compare
 * runs the server twice, in turn, tagged and untagged, each in a process of
 * its own, and compares their resident sets: a destroyed tag's slot keeps
 * its pages for the next request, a cache that must not grow the process
 * past what jemalloc's own caches hold without tags.
 *
 * A request "parses" a body of a size drawn at random (log-uniform, so
 * most are small and a few are huge): the body, a node per token and a hash
 * table of the distinct tokens that grows with realloc, about 4 bytes of
 * heap per byte of body.
 *
 * The program allocates through ra_malloc/ra_realloc/ra_free so that it is
 * tagged in a --disable-override build too, and counts what each request
 * allocates and frees: the tag's figures must agree exactly.
 * Exit status: 0 done, 1 runtime failure, 2 bad usage. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <regionalloc.h>

#define MAX_THREADS 64
#define MIB ((size_t)1 << 20)

static const char *progname = "requests";

struct options {
    unsigned requests, threads;
    size_t budget, min_body, max_body;
    uint64_t seed;
    bool untagged, compare;
};

static struct options opt;

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", progname, what, strerror(errno));
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64: a request's randomness depends on its number only, so a run
 * serves the same requests whatever the threads do. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* -- a request's work ---------------------------------------------------- */

/* What this thread's request allocated and freed, by its own count: the
 * tag's figures (ra_tag_usage) must agree, request by request. A realloc
 * of a block is the free of the old one and the allocation of the new. */
static _Thread_local struct {
    uint64_t allocs, frees;
} mine;

static void *req_malloc(size_t size)
{
    void *p = ra_malloc(size);

    mine.allocs += p != NULL;
    return p;
}

static void *req_realloc(void *old, size_t size)
{
    void *p = ra_realloc(old, size);

    if (p != NULL) {
        mine.allocs++;
        mine.frees += old != NULL;
    }
    return p;
}

static void req_free(void *p)
{
    mine.frees += p != NULL;
    ra_free(p);
}

struct node {
    struct node *next;
    uint32_t hash, len;
    const char *text;
};

struct table {
    struct node **slots;
    size_t cap, count;
};

/* Inserts n if no node with its text is there. False when the table could
 * not grow. */
static bool table_add(struct table *t, struct node *n)
{
    size_t j;

    if ((t->count + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        struct node **slots = req_realloc(t->slots, cap * sizeof *slots);
        if (slots == NULL)
            return false;
        /* Rehash in place: clear the new half, move what moved. */
        memset(slots + t->cap, 0, (cap - t->cap) * sizeof *slots);
        for (size_t i = 0; i < cap; i++) {
            struct node *e = slots[i];
            if (e == NULL || (e->hash & (cap - 1)) == i)
                continue;
            slots[i] = NULL;
            for (j = e->hash & (cap - 1); slots[j] != NULL;
                 j = (j + 1) & (cap - 1))
                ;
            slots[j] = e;
        }
        t->slots = slots;
        t->cap = cap;
    }
    for (j = n->hash & (t->cap - 1); t->slots[j] != NULL;
         j = (j + 1) & (t->cap - 1))
        if (t->slots[j]->len == n->len &&
            memcmp(t->slots[j]->text, n->text, n->len) == 0)
            return true;
    t->slots[j] = n;
    t->count++;
    return true;
}

/* Builds the body and parses it. Returns false as soon as an allocation
 * fails: what was allocated stays, for the tag's destroy to free. */
static bool handle(uint64_t *rng, size_t body_len)
{
    static const char words[][8] = {"get",  "put",   "id",  "name",
                                    "list", "value", "ok",  "user"};
    char *body = req_malloc(body_len + 1);
    struct node *head = NULL;
    struct table table = {NULL, 0, 0};
    size_t len = 0;

    if (body == NULL)
        return false;
    /* Words such as "name1234 ", written without printf (it would cost
     * more than all the rest). */
    while (len + 16 < body_len) {
        uint64_t r = next_random(rng);
        const char *w = words[r % 8];
        unsigned id = (unsigned)(r >> 8) % 5000;
        size_t wl = strlen(w);
        memcpy(body + len, w, wl);
        len += wl;
        body[len++] = (char)('0' + id / 1000);
        body[len++] = (char)('0' + id / 100 % 10);
        body[len++] = (char)('0' + id / 10 % 10);
        body[len++] = (char)('0' + id % 10);
        body[len++] = ' ';
    }
    memset(body + len, ' ', body_len - len);
    body[body_len] = '\0';
    for (size_t i = 0; i < body_len;) {
        size_t start = i;
        struct node *n;
        while (i < body_len && body[i] != ' ')
            i++;
        n = req_malloc(sizeof *n);
        if (n == NULL)
            return false;
        n->text = body + start;
        n->len = (uint32_t)(i - start);
        n->hash = 2166136261u;
        for (size_t k = start; k < i; k++)
            n->hash = (n->hash ^ (unsigned char)body[k]) * 16777619u;
        n->next = head;
        head = n;
        if (!table_add(&table, n))
            return false;
        i++;
    }
    /* A served request cleans up after itself as it would without tags; a
     * rejected one leaves everything to ra_tag_destroy. */
    while (head != NULL) {
        struct node *next = head->next;
        req_free(head);
        head = next;
    }
    req_free(table.slots);
    req_free(body);
    return true;
}

/* -- the server ----------------------------------------------------------- */

struct worker_stats {
    unsigned served, rejected, soft_warnings;
    uint64_t allocations;
    size_t peak_mapped_max, peak_mapped_sum;
    uint64_t create_fresh_ns, create_recycled_ns, destroy_ns;
    unsigned fresh, recycled;
    /* Of the requests whose create and destroy were timed. */
    unsigned fresh_timed, recycled_timed, destroys_timed;
    uint64_t destroy_max_ns;
};

/* The create and destroy of one request in TIMED_EVERY are timed, and of
 * the first TIMED_FIRST (where the fresh ids are made): two clock reads
 * around each call cost about as much as the recycled create itself, and
 * the untagged run, which this one is compared with, reads no clock. */
#define TIMED_EVERY 16
#define TIMED_FIRST 64

static _Atomic unsigned next_request;
/* The highest tag id any request has had: a create that returns one at or
 * below it reused a destroyed tag's slot. */
static _Atomic unsigned highest_id;

static void on_soft(void *ctx, ra_tag_t tag, size_t mapped)
{
    struct worker_stats *ws = ctx;
    (void)tag;
    (void)mapped;
    ws->soft_warnings++;
}

static void serve_one(unsigned number, struct worker_stats *ws)
{
    uint64_t rng = opt.seed ^ ((uint64_t)number * 0x9e3779b97f4a7c15ull);
    double span = (double)opt.max_body / (double)opt.min_body;
    double u = (double)(next_random(&rng) >> 11) / 9007199254740992.0;
    size_t body_len = (size_t)((double)opt.min_body * pow(span, u));
    ra_tag_limit_t limit = {opt.budget, opt.budget / 4 * 3, on_soft, ws};
    ra_tag_usage_t use;
    char name[32];
    uint64_t t0, t1;
    ra_tag_t tag;
    unsigned seen;
    bool ok, timed;

    if (opt.untagged) {
        /* No budget: a failure is the machine's, not the request's. */
        if (!handle(&rng, body_len))
            die("a request's allocation");
        ws->served++;
        return;
    }
    timed = number < TIMED_FIRST || number % TIMED_EVERY == 0;
    snprintf(name, sizeof name, "request-%u", number);
    t0 = timed ? now_ns() : 0;
    tag = ra_tag_create(name);
    t1 = timed ? now_ns() : 0;
    if (tag == RA_TAG_NONE)
        die("ra_tag_create");
    seen = atomic_load(&highest_id);
    while (tag > seen && !atomic_compare_exchange_weak(&highest_id, &seen, tag))
        ;
    if (tag <= seen) {
        ws->recycled++;
        ws->recycled_timed += timed;
        ws->create_recycled_ns += t1 - t0;
    } else {
        ws->fresh++;
        ws->fresh_timed += timed;
        ws->create_fresh_ns += t1 - t0;
    }
    if (ra_tag_set_limit(tag, &limit) != 0)
        die("ra_tag_set_limit");

    if (ra_tag_push(tag) != 0)
        die("ra_tag_push");
    mine.allocs = mine.frees = 0;
    ok = handle(&rng, body_len);
    if (ra_tag_pop(tag) != 0)
        die("ra_tag_pop");
    if (ok)
        ws->served++;
    else
        ws->rejected++;

    /* Exact and cheap (no statistics refresh): a figure per request. */
    if (ra_tag_usage(tag, &use) != 0)
        die("ra_tag_usage");
    if (use.nmalloc != mine.allocs || use.ndalloc != mine.frees) {
        fprintf(stderr,
                "%s: request %u: the tag counts %llu allocations and %llu "
                "frees, the request made %llu and %llu\n",
                progname, number, (unsigned long long)use.nmalloc,
                (unsigned long long)use.ndalloc,
                (unsigned long long)mine.allocs,
                (unsigned long long)mine.frees);
        exit(1);
    }
    ws->peak_mapped_sum += use.peak_mapped;
    if (use.peak_mapped > ws->peak_mapped_max)
        ws->peak_mapped_max = use.peak_mapped;
    ws->allocations += use.nmalloc;
    t0 = timed ? now_ns() : 0;
    if (ra_tag_destroy(tag) != 0)
        die("ra_tag_destroy");
    t1 = timed ? now_ns() : 0;
    ws->destroys_timed += timed;
    ws->destroy_ns += t1 - t0;
    if (t1 - t0 > ws->destroy_max_ns)
        ws->destroy_max_ns = t1 - t0;
}

static void *worker(void *arg)
{
    struct worker_stats *ws = arg;

    for (;;) {
        unsigned number = atomic_fetch_add(&next_request, 1);
        if (number >= opt.requests)
            return NULL;
        serve_one(number, ws);
    }
}

/* -- options -------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
"Usage: %s [--requests N] [--threads T] [--budget SIZE] [--min-body SIZE]\n"
"       [--max-body SIZE] [--seed S] [--untagged | --compare]\n"
"Serves N simulated requests on T threads. Each request gets a tag of its\n"
"own with a hard limit of SIZE (and a soft one at three quarters), parses a\n"
"body of a random size between the two bounds (log-uniform) under it, and\n"
"ends with ra_tag_destroy. Requests whose work passes the budget are\n"
"rejected. Prints a summary.\n"
"\n"
"  --requests N    requests to serve (default 2000)\n"
"  --threads T     worker threads, 1 to %d (default 2)\n"
"  --budget SIZE   hard limit per request, suffix K, M or G (default 8M;\n"
"                  a tag's own metadata takes about 2M of it)\n"
"  --min-body SIZE smallest body (default 1K)\n"
"  --max-body SIZE largest body (default 4M)\n"
"  --seed S        seed of the request sizes (default 1)\n"
"  --untagged      the same work without tags (and without budgets)\n"
"  --compare       run tagged, then untagged, each in a process of its own,\n"
"                  and compare their resident sets\n"
"  -h, --help      this text\n"
"\n"
"Exit status: 0 done, 1 failure, 2 bad usage.\n",
            progname, MAX_THREADS);
}

static _Noreturn __attribute__((format(printf, 1, 2))) void
bad_usage(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", progname);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", progname);
    exit(2);
}

/* "4096", "64K", "8M", "1G" (powers of 1024); max: the largest accepted.
 * False if malformed, zero or too large. */
static bool parse_number(const char *s, bool suffix, uint64_t max,
                         uint64_t *out)
{
    unsigned long long v;
    unsigned shift = 0;
    char *end;

    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return false;
    if (suffix) {
        switch (*end) {
        case 'k': case 'K': shift = 10; end++; break;
        case 'm': case 'M': shift = 20; end++; break;
        case 'g': case 'G': shift = 30; end++; break;
        default: break;
        }
    }
    if (*end != '\0' || v == 0 || v > (max >> shift))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

static void parse_options(int argc, char **argv)
{
    enum { OPT_REQUESTS = 256, OPT_THREADS, OPT_BUDGET, OPT_MIN_BODY,
           OPT_MAX_BODY, OPT_SEED, OPT_UNTAGGED, OPT_COMPARE };
    static const struct option longopts[] = {
        {"requests", required_argument, NULL, OPT_REQUESTS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"budget", required_argument, NULL, OPT_BUDGET},
        {"min-body", required_argument, NULL, OPT_MIN_BODY},
        {"max-body", required_argument, NULL, OPT_MAX_BODY},
        {"seed", required_argument, NULL, OPT_SEED},
        {"untagged", no_argument, NULL, OPT_UNTAGGED},
        {"compare", no_argument, NULL, OPT_COMPARE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t v;
    int c;

    opt = (struct options){2000, 2, 8 * MIB, 1024, 4 * MIB, 1, false, false};
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        const char *what = NULL;
        switch (c) {
        case OPT_REQUESTS:
            if (!parse_number(optarg, false, UINT32_MAX, &v))
                what = "--requests";
            else
                opt.requests = (unsigned)v;
            break;
        case OPT_THREADS:
            if (!parse_number(optarg, false, MAX_THREADS, &v))
                what = "--threads";
            else
                opt.threads = (unsigned)v;
            break;
        case OPT_BUDGET:
        case OPT_MIN_BODY:
        case OPT_MAX_BODY:
            if (!parse_number(optarg, true, (uint64_t)1 << 40, &v)) {
                what = c == OPT_BUDGET     ? "--budget"
                       : c == OPT_MIN_BODY ? "--min-body"
                                           : "--max-body";
                break;
            }
            *(c == OPT_BUDGET     ? &opt.budget
              : c == OPT_MIN_BODY ? &opt.min_body
                                  : &opt.max_body) = (size_t)v;
            break;
        case OPT_SEED:
            if (!parse_number(optarg, false, UINT64_MAX, &opt.seed))
                what = "--seed";
            break;
        case OPT_UNTAGGED:
            opt.untagged = true;
            break;
        case OPT_COMPARE:
            opt.compare = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default: /* getopt_long has said what was wrong */
            fprintf(stderr, "Try '%s --help'.\n", progname);
            exit(2);
        }
        if (what != NULL)
            bad_usage("%s: '%s' is not a valid value", what, optarg);
    }
    if (optind < argc)
        bad_usage("unexpected argument '%s'", argv[optind]);
    if (opt.min_body > opt.max_body)
        bad_usage("--min-body is above --max-body");
    if (opt.untagged && opt.compare)
        bad_usage("--untagged and --compare exclude each other");
}

/* -- main ------------------------------------------------------------------ */

static double us(uint64_t ns, unsigned n)
{
    return n == 0 ? 0.0 : (double)ns / n / 1e3;
}

/* The process's resident set: VmRSS now and VmHWM (its peak) in bytes,
 * from /proc/self/status; 0 when the kernel does not say. */
struct rss {
    size_t now, peak;
};

static struct rss resident_set(void)
{
    struct rss r = {0, 0};
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    size_t kib;

    if (f == NULL)
        return r;
    while (fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "VmRSS: %zu kB", &kib) == 1)
            r.now = kib << 10;
        else if (sscanf(line, "VmHWM: %zu kB", &kib) == 1)
            r.peak = kib << 10;
    }
    fclose(f);
    return r;
}

/* Serves opt.requests requests on opt.threads threads and prints the
 * summary. Returns the resident set at the end. */
static struct rss serve_all(void)
{
    static struct worker_stats per_thread[MAX_THREADS];
    struct worker_stats all = {0};
    pthread_t threads[MAX_THREADS];
    uint64_t start, elapsed;
    struct rss rss;

    start = now_ns();
    for (unsigned i = 0; i < opt.threads; i++) {
        errno = pthread_create(&threads[i], NULL, worker, &per_thread[i]);
        if (errno != 0)
            die("pthread_create");
    }
    for (unsigned i = 0; i < opt.threads; i++) {
        const struct worker_stats *w = &per_thread[i];
        pthread_join(threads[i], NULL);
        all.served += w->served;
        all.rejected += w->rejected;
        all.soft_warnings += w->soft_warnings;
        all.allocations += w->allocations;
        all.peak_mapped_sum += w->peak_mapped_sum;
        if (w->peak_mapped_max > all.peak_mapped_max)
            all.peak_mapped_max = w->peak_mapped_max;
        all.fresh += w->fresh;
        all.recycled += w->recycled;
        all.fresh_timed += w->fresh_timed;
        all.recycled_timed += w->recycled_timed;
        all.destroys_timed += w->destroys_timed;
        all.create_fresh_ns += w->create_fresh_ns;
        all.create_recycled_ns += w->create_recycled_ns;
        all.destroy_ns += w->destroy_ns;
        if (w->destroy_max_ns > all.destroy_max_ns)
            all.destroy_max_ns = w->destroy_max_ns;
    }
    elapsed = now_ns() - start;
    rss = resident_set();

    if (opt.untagged)
        printf("requests: %u on %u threads in %.2f s, untagged (no "
               "budget)\n",
               opt.requests, opt.threads, (double)elapsed / 1e9);
    else
        printf("requests: %u on %u threads in %.2f s, budget %.1f MiB each "
               "(soft limit %.1f MiB)\n",
               opt.requests, opt.threads, (double)elapsed / 1e9,
               (double)opt.budget / MIB, (double)(opt.budget / 4 * 3) / MIB);
    printf("served: %u, rejected over budget: %u, past the soft limit: %u\n",
           all.served, all.rejected, all.soft_warnings);
    printf("throughput: %.0f requests/s\n",
           (double)opt.requests / ((double)elapsed / 1e9));
    if (!opt.untagged) {
        printf("allocations per request: mean %.1f (exact: each request's "
               "own count agreed with its tag's)\n",
               (double)all.allocations / opt.requests);
        printf("peak mapped per request: max %.2f MiB, mean %.2f MiB\n",
               (double)all.peak_mapped_max / MIB,
               (double)all.peak_mapped_sum / opt.requests / MIB);
        printf("ra_tag_create: %u fresh, mean %.1f us; %u recycled, mean "
               "%.1f us\n",
               all.fresh, us(all.create_fresh_ns, all.fresh_timed),
               all.recycled, us(all.create_recycled_ns, all.recycled_timed));
        printf("ra_tag_destroy: mean %.1f us, max %.1f us\n",
               us(all.destroy_ns, all.destroys_timed),
               (double)all.destroy_max_ns / 1e3);
        printf("(times: the first %u requests and one in %u after, %u in "
               "all)\n",
               TIMED_FIRST, TIMED_EVERY, all.destroys_timed);
        printf("tag ids used: %u\n", atomic_load(&highest_id));
    }
    printf("resident set: %.1f MiB at the end, %.1f MiB at the peak\n",
           (double)rss.now / MIB, (double)rss.peak / MIB);
    return rss;
}

/* Runs serve_all in a child process, tagged or not, and returns its
 * resident set (the child's peak is its own: a forked process starts with
 * its parent's, which is small here). */
static struct rss serve_in_child(bool untagged)
{
    struct rss rss = {0, 0};
    int fds[2], status;
    pid_t pid;

    if (fflush(stdout) != 0 || pipe(fds) != 0)
        die("pipe");
    pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        close(fds[0]);
        opt.untagged = untagged;
        printf("-- %s\n", untagged ? "untagged" : "a tag per request");
        rss = serve_all();
        if (fflush(stdout) != 0 ||
            write(fds[1], &rss, sizeof rss) != (ssize_t)sizeof rss)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], &rss, sizeof rss) != (ssize_t)sizeof rss)
        rss.now = rss.peak = 0;
    close(fds[0]);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0 || rss.peak == 0) {
        fprintf(stderr, "%s: the %s run failed\n", progname,
                untagged ? "untagged" : "tagged");
        exit(1);
    }
    return rss;
}

int main(int argc, char **argv)
{
    struct rss tagged, untagged;

    if (argc > 0 && argv[0] != NULL && argv[0][0] != '\0') {
        const char *slash = strrchr(argv[0], '/');
        progname = slash != NULL ? slash + 1 : argv[0];
    }
    parse_options(argc, argv);
    if (!ra_enabled()) {
        fprintf(stderr, "%s: regionalloc is in pass-through mode "
                        "(REGIONALLOC=0?): no budgets\n", progname);
        return 1;
    }
    if (!opt.compare) {
        (void)serve_all();
    } else {
        tagged = serve_in_child(false);
        untagged = serve_in_child(true);
        printf("-- resident set, tagged over untagged: %.2fx at the end "
               "(%.1f / %.1f MiB), %.2fx at the peak (%.1f / %.1f MiB)\n",
               (double)tagged.now / (double)untagged.now,
               (double)tagged.now / MIB, (double)untagged.now / MIB,
               (double)tagged.peak / (double)untagged.peak,
               (double)tagged.peak / MIB, (double)untagged.peak / MIB);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: writing stdout: %s\n", progname,
                strerror(errno));
        return 1;
    }
    return 0;
}

/* A long-running program that a fleet would watch: it keeps a cache, serves
 * sessions and runs a pool of named worker threads, and serves the library's
 * HTTP endpoints (ra_http_start): /metrics for Prometheus,
 * /debug/pprof/heap for a continuous profiler, the reports, and the page
 * /debug/regionalloc/ to open in a browser.
 *
 *   cache     16 blocks of 1 MiB, allocated once: exactly 16 MiB  tag "cache"
 *   sessions  a few thousand session records, created and ended  tag "sessions"
 *             all the time
 *             (both children of the tag "app", a tag tree: its
 *             subtree's figures are the two together)
 *   workers   two threads named "worker-1" and "worker-2" that    no tag pushed
 *             allocate scratch buffers without pushing a tag:
 *             run with REGIONALLOC_THREAD_TAGS='worker-*=workers'
 *             and they are tagged "workers" by their names
 *   names     with --binary-names: 1 MiB under the bytes FF FE    three tags
 *             "-bin" (not UTF-8), 256 KiB under its child
 *             "bin-part", 512 KiB under C3 BF C3 BE "-bin", the
 *             UTF-8 name that JSON reads the first one's as
 *   crowd     with --many N: N small tags, every other one a      N + 1 tags
 *             child of "crowd", the others "solo-I", tag I
 *             holding 512 (I + 1) bytes: more tags than a page
 *             or a text report lists (run with REGIONALLOC_MAX_TAGS
 *             above N + 8)
 *
 * The profiler samples every 64 KiB on average, and a checkpoint is taken
 * when the cache is full and every 100 ticks (10 s) after. Stops after
 * --seconds, or on SIGINT or SIGTERM.
 * Exit status: 0 done, 1 runtime failure, 2 bad usage. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <regionalloc.h>

#define CACHE_BLOCKS 16
#define MIB ((size_t)1 << 20)
#define MAX_SESSIONS 4096

static const char *progname = "server";
static atomic_bool stop;

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", progname, what, strerror(errno));
    exit(1);
}

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop, true);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !atomic_load(&stop))
        ;
}

/* -- the work ------------------------------------------------------------- */

struct session {
    unsigned id;
    size_t len;
    char data[];
};

static struct session *sessions[MAX_SESSIONS];

/* A tick of the sessions: some end, some start, of 100 B to 8 KiB. */
static void churn_sessions(ra_tag_t tag, unsigned tick)
{
    uint32_t x = tick * 2654435761u;

    if (ra_tag_push(tag) != 0)
        die("ra_tag_push");
    for (unsigned i = 0; i < 64; i++) {
        unsigned slot;
        size_t len;
        x = x * 1664525u + 1013904223u;
        slot = (x >> 8) % MAX_SESSIONS;
        len = 100 + (x >> 4) % 8092;
        free(sessions[slot]);
        sessions[slot] = malloc(sizeof *sessions[slot] + len);
        if (sessions[slot] == NULL)
            die("malloc");
        sessions[slot]->id = tick * 64 + i;
        sessions[slot]->len = len;
        memset(sessions[slot]->data, 's', len);
    }
    if (ra_tag_pop(tag) != 0)
        die("ra_tag_pop");
}

/* A worker names itself, then allocates and frees scratch buffers without
 * pushing a tag: only REGIONALLOC_THREAD_TAGS can put them in one. */
static void *worker(void *arg)
{
    char name[16];
    void *scratch[32] = {0};
    unsigned n = 0;

    snprintf(name, sizeof name, "worker-%u", (unsigned)(uintptr_t)arg);
    pthread_setname_np(pthread_self(), name);
    while (!atomic_load(&stop)) {
        unsigned i = n++ % 32;
        free(scratch[i]);
        scratch[i] = malloc(4096 + n % 60000);
        if (scratch[i] != NULL)
            memset(scratch[i], 'w', 4096);
        sleep_ms(5);
    }
    for (unsigned i = 0; i < 32; i++)
        free(scratch[i]);
    return NULL;
}

/* -- options -------------------------------------------------------------- */

struct options {
    const char *listen;
    long seconds; /* 0: until a signal */
    bool binary_names;
    long many;    /* --many N: tags of the crowd */
};

static void usage(FILE *out)
{
    fprintf(out,
"Usage: %s [--listen HOST:PORT] [--seconds N]\n"
"Runs a small workload under tags and serves libregionalloc's HTTP\n"
"endpoints: /metrics, /debug/pprof/heap[?tag=NAME],\n"
"/debug/regionalloc/report and /debug/regionalloc/checkpoints\n"
"[?format=text|json|prometheus], and a page to open in a browser:\n"
"/debug/regionalloc/.\n"
"\n"
"  --listen ADDR   where to serve (default 127.0.0.1:9464; port 0: any\n"
"                  free port; the first line printed names it)\n"
"  --seconds N     stop after N seconds (default: run until SIGINT or\n"
"                  SIGTERM)\n"
"  --binary-names  also make three tags that only their bytes tell apart:\n"
"                  the bytes FF FE then \"-bin\" (not UTF-8, 1 MiB), its\n"
"                  child \"bin-part\" (256 KiB), and C3 BF C3 BE then\n"
"                  \"-bin\" (U+00FF U+00FE in UTF-8, 512 KiB), which JSON\n"
"                  reads the first one's name as\n"
"  --many N        also make N small tags: \"crowd-I\" under a tag \"crowd\"\n"
"                  for odd I, \"solo-I\" for even I, tag I holding\n"
"                  512 (I + 1) bytes (set REGIONALLOC_MAX_TAGS above\n"
"                  N + 8)\n"
"  -h, --help      this text\n"
"\n"
"Set REGIONALLOC_THREAD_TAGS='worker-*=workers' to tag the worker threads\n"
"by their names, REGIONALLOC_SHM=1 to watch it with regionalloc-top.\n"
"Exit status: 0 done, 1 failure, 2 bad usage.\n",
            progname);
}

static void parse_options(int argc, char **argv, struct options *opt)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"seconds", required_argument, NULL, 's'},
        {"binary-names", no_argument, NULL, 'b'},
        {"many", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char *end;
    int c;

    *opt = (struct options){"127.0.0.1:9464", 0, false, 0};
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            opt->listen = optarg;
            break;
        case 's':
            errno = 0;
            opt->seconds = strtol(optarg, &end, 10);
            if (errno != 0 || *end != '\0' || opt->seconds < 0) {
                fprintf(stderr, "%s: --seconds: '%s' is not a number of "
                                "seconds\nTry '%s --help'.\n",
                        progname, optarg, progname);
                exit(2);
            }
            break;
        case 'b':
            opt->binary_names = true;
            break;
        case 'm':
            errno = 0;
            opt->many = strtol(optarg, &end, 10);
            if (errno != 0 || *end != '\0' || opt->many < 0 ||
                opt->many > 100000) {
                fprintf(stderr, "%s: --many: '%s' is not a number of tags "
                                "(0 to 100000)\nTry '%s --help'.\n",
                        progname, optarg, progname);
                exit(2);
            }
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            fprintf(stderr, "Try '%s --help'.\n", progname);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\nTry '%s --help'.\n",
                progname, argv[optind], progname);
        exit(2);
    }
}

/* -- main ----------------------------------------------------------------- */

/* The tag tree app > cache, sessions, with the cache filled; returns the
 * sessions' tag. */
static ra_tag_t make_app(void *cache[CACHE_BLOCKS])
{
    ra_tag_t app = ra_tag_create("app");
    ra_tag_t tag_cache = ra_tag_create_in(app, "cache");
    ra_tag_t sessions = ra_tag_create_in(app, "sessions");

    if (app == RA_TAG_NONE || tag_cache == RA_TAG_NONE ||
        sessions == RA_TAG_NONE)
        die("ra_tag_create");
    for (unsigned i = 0; i < CACHE_BLOCKS; i++)
        if ((cache[i] = ra_malloc_tag(tag_cache, MIB)) == NULL)
            die("ra_malloc_tag");
        else
            memset(cache[i], 'c', MIB);
    return sessions;
}

/* --binary-names: a name that is not UTF-8, its child, and the UTF-8 name
 * that a JSON parser reads the first one's as (each byte that is not UTF-8
 * becomes the character of its value), each holding a block it keeps. */
static void make_binary_names(void *held[3])
{
    static const struct {
        const char *name;
        bool child; /* of the first */
        size_t size;
    } tags[3] = {
        {"\xff\xfe-bin", false, MIB},
        {"bin-part", true, MIB / 4},
        {"\xc3\xbf\xc3\xbe-bin", false, MIB / 2},
    };
    ra_tag_t first = RA_TAG_NONE;

    for (unsigned i = 0; i < 3; i++) {
        ra_tag_t t = ra_tag_create_in(tags[i].child ? first : RA_TAG_NONE,
                                      tags[i].name);
        if (t == RA_TAG_NONE)
            die("ra_tag_create_in");
        if (i == 0)
            first = t;
        if ((held[i] = ra_malloc_tag(t, tags[i].size)) == NULL)
            die("ra_malloc_tag");
        memset(held[i], 'b', tags[i].size);
    }
}

/* --many: the crowd, each tag holding one block it keeps (never freed:
 * the process's end takes them). */
static void make_crowd(long n)
{
    ra_tag_t crowd = ra_tag_create("crowd");

    if (crowd == RA_TAG_NONE)
        die("ra_tag_create");
    for (long i = 0; i < n; i++) {
        char name[32];
        size_t size = 512 * (size_t)(i + 1);
        ra_tag_t t;
        void *p;
        snprintf(name, sizeof name, "%s-%ld", i % 2 ? "crowd" : "solo", i);
        t = ra_tag_create_in(i % 2 ? crowd : RA_TAG_NONE, name);
        if (t == RA_TAG_NONE)
            die("ra_tag_create_in");
        if ((p = ra_malloc_tag(t, size)) == NULL)
            die("ra_malloc_tag");
        memset(p, 'm', size);
    }
    /* The kernel counts their regions now, not over the library's thread's
     * next rounds: the page ranks them by those counts from the start. */
    ra_stats_refresh();
}

/* The first line a script reads: where the metrics are (an empty host is
 * 127.0.0.1, and port 0 the port the kernel chose). */
static void print_url(const char *listen, int port)
{
    const char *colon = strrchr(listen, ':');
    int hostlen = colon != NULL ? (int)(colon - listen) : 0;

    printf("serving http://%.*s:%d/metrics\n", hostlen > 0 ? hostlen : 9,
           hostlen > 0 ? listen : "127.0.0.1", port);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    struct options opt;
    struct sigaction sa = {.sa_handler = on_signal};
    void *cache[CACHE_BLOCKS], *held[3] = {NULL, NULL, NULL};
    pthread_t workers[2];
    ra_tag_t tag_sessions;
    int port;

    if (argc > 0 && argv[0] != NULL && argv[0][0] != '\0') {
        const char *slash = strrchr(argv[0], '/');
        progname = slash != NULL ? slash + 1 : argv[0];
    }
    parse_options(argc, argv, &opt);
    if (!ra_enabled()) {
        fprintf(stderr, "%s: regionalloc is in pass-through mode "
                        "(REGIONALLOC=0?): nothing to serve\n", progname);
        return 1;
    }
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* From the start, so that the cache is in the profile too. */
    if (ra_prof_start(64 << 10) != 0)
        die("ra_prof_start");
    tag_sessions = make_app(cache);
    if (opt.binary_names)
        make_binary_names(held);
    if (opt.many > 0)
        make_crowd(opt.many);

    if (ra_checkpoint("cache filled") != 0)
        die("ra_checkpoint");

    port = ra_http_start(opt.listen);
    if (port < 0)
        die(opt.listen);
    print_url(opt.listen, port);

    for (unsigned i = 0; i < 2; i++)
        if ((errno = pthread_create(&workers[i], NULL, worker,
                                    (void *)(uintptr_t)(i + 1))) != 0)
            die("pthread_create");
    for (unsigned tick = 1; !atomic_load(&stop); tick++) {
        churn_sessions(tag_sessions, tick);
        if (tick % 100 == 0)
            ra_checkpoint("tick");
        if (opt.seconds > 0 && tick >= (unsigned)opt.seconds * 10)
            break;
        sleep_ms(100);
    }
    atomic_store(&stop, true);
    for (unsigned i = 0; i < 2; i++)
        pthread_join(workers[i], NULL);
    if (ra_http_stop() != 0)
        die("ra_http_stop");
    for (unsigned i = 0; i < MAX_SESSIONS; i++)
        free(sessions[i]);
    for (unsigned i = 0; i < CACHE_BLOCKS; i++)
        free(cache[i]);
    for (unsigned i = 0; i < 3; i++)
        free(held[i]);
    return 0;
}

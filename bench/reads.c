/* What reading the figures costs as tags grow: N tags with one live block
 * each, then the median of one ra_tag_stats of a tag and of the untagged
 * row, of a Prometheus report, of a text report, of each with every tag
 * or the 50 largest listed (ra_report_top), of a checkpoint (`reads N`);
 * the untagged row's read with T threads alive, each holding a block
 * (`reads --threads T`: the row sums every thread's counts); or the CPU
 * an idle process of N tags burns with the live stats segment published
 * (`reads --idle N`, REGIONALLOC_SHM=1 at its default interval). The
 * process re-executes itself once with room for the tags
 * (REGIONALLOC_MAX_TAGS, smaller regions), which the library reads at
 * its first use. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <regionalloc.h>

#include "benchutil.h"

#define READS_MAX_TAGS 3100u
#define CONTENDER "libregionalloc tagged" /* as bench/run.sh judges it */

static void reexec_with_tags(char **argv, bool shm)
{
    char n[16];

    if (getenv("BENCH_READS_REEXECUTED") != NULL)
        return;
    snprintf(n, sizeof n, "%u", READS_MAX_TAGS);
    setenv("BENCH_READS_REEXECUTED", "1", 1);
    setenv("REGIONALLOC_MAX_TAGS", n, 1);
    setenv("REGIONALLOC_REGION_SIZE", "4G", 1);
    if (shm)
        setenv("REGIONALLOC_SHM", "1", 1);
    execv("/proc/self/exe", argv);
    bench_die("execv /proc/self/exe");
}

/* ntags tags, one live block of 64 bytes each; returns the middle one. */
static ra_tag_t make_tags(unsigned ntags)
{
    ra_tag_t middle = RA_TAG_NONE;

    for (unsigned i = 0; i < ntags; i++) {
        char name[32];
        ra_tag_t t;
        snprintf(name, sizeof name, "reads-%u", i);
        if ((t = ra_tag_create(name)) == RA_TAG_NONE ||
            ra_malloc_tag(t, 64) == NULL)
            bench_die("ra_tag_create/ra_malloc_tag");
        if (i == ntags / 2)
            middle = t;
    }
    return middle;
}

/* One call's time over a batch: a read is shorter than the clock's own
 * cost. */
#define STATS_BATCH 100

static double time_stats(ra_tag_t tag)
{
    ra_tag_stats_t s;
    double t0 = bench_now_ns();

    for (unsigned i = 0; i < STATS_BATCH; i++)
        if (ra_tag_stats(tag, &s) != 0 ||
            (tag != RA_TAG_NONE && s.allocated == 0))
            bench_die("ra_tag_stats");
    return (bench_now_ns() - t0) / 1e3 / STATS_BATCH;
}

enum { STATS_RUNS = 201, REPORT_RUNS = 21 };

/* ra_report(fmt), or with top not 0 ra_report_top(fmt, top). */
static double time_report(FILE *sink, ra_format_t fmt, size_t top)
{
    double t0 = bench_now_ns();
    int rc;

#ifdef RA_REPORT_ALL_TAGS
    rc = top != 0 ? ra_report_top(sink, fmt, top) : ra_report(sink, fmt);
#else
    (void)top;
    rc = ra_report(sink, fmt);
#endif
    if (rc != 0)
        bench_die("ra_report");
    return (bench_now_ns() - t0) / 1e3;
}

static double time_checkpoint(void)
{
    double t0 = bench_now_ns();

    if (ra_checkpoint("reads") != 0)
        bench_die("ra_checkpoint");
    return (bench_now_ns() - t0) / 1e3;
}

/* Each figure's median over its runs, and its range, as one row. */
static void row_of(const char *what, unsigned ntags, double *v, unsigned n,
                   const char *unit, double scale)
{
    char workload[96];
    double median;

    snprintf(workload, sizeof workload, "%u tags: %s", ntags, what);
    median = bench_median(v, n); /* sorts v */
    bench_row(workload, CONTENDER, median / scale, unit, -1, v[0] / scale,
              v[n - 1] / scale);
}

static void timings(unsigned ntags)
{
    static const struct {
        const char *what;
        ra_format_t fmt;
        size_t top; /* 0: ra_report's own choice */
    } reports[] = {
        {"a Prometheus report", RA_FORMAT_PROMETHEUS, 0},
        {"a text report", RA_FORMAT_TEXT, 0},
#ifdef RA_REPORT_ALL_TAGS
        {"a Prometheus report, 50 largest", RA_FORMAT_PROMETHEUS, 50},
        {"a text report, every tag", RA_FORMAT_TEXT, RA_REPORT_ALL_TAGS},
#endif
    };
    static double v[STATS_RUNS];
    ra_tag_t tag = make_tags(ntags);
    FILE *sink = fopen("/dev/null", "w");

    if (sink == NULL)
        bench_die("/dev/null");
    for (unsigned i = 0; i < STATS_RUNS; i++)
        v[i] = time_stats(tag);
    row_of("one ra_tag_stats", ntags, v, STATS_RUNS, "us", 1);
    for (unsigned i = 0; i < STATS_RUNS; i++)
        v[i] = time_stats(RA_TAG_NONE);
    row_of("one untagged ra_tag_stats", ntags, v, STATS_RUNS, "us", 1);
    for (size_t r = 0; r < sizeof reports / sizeof reports[0]; r++) {
        for (unsigned i = 0; i < REPORT_RUNS; i++)
            v[i] = time_report(sink, reports[r].fmt, reports[r].top);
        row_of(reports[r].what, ntags, v, REPORT_RUNS, "us/tag", ntags);
    }
    for (unsigned i = 0; i < REPORT_RUNS; i++)
        v[i] = time_checkpoint();
    row_of("a checkpoint", ntags, v, REPORT_RUNS, "us/tag", ntags);
    fclose(sink);
}

/* Threads alive, each holding an untagged block, while the main thread
 * reads the untagged row; they end once it has. */
static pthread_barrier_t parked;

static void *park(void *arg)
{
    void *p = malloc(100);

    (void)arg;
    if (p == NULL)
        bench_die("malloc");
    pthread_barrier_wait(&parked); /* started */
    pthread_barrier_wait(&parked); /* read */
    free(p);
    return NULL;
}

static void untagged_with_threads(unsigned nthreads)
{
    static double v[STATS_RUNS];
    pthread_t *threads = calloc(nthreads, sizeof *threads);
    pthread_attr_t attr;
    char workload[96];
    double median;

    if (threads == NULL || pthread_attr_init(&attr) != 0 ||
        pthread_attr_setstacksize(&attr, 64 << 10) != 0 ||
        pthread_barrier_init(&parked, NULL, nthreads + 1) != 0)
        bench_die("threads");
    for (unsigned i = 0; i < nthreads; i++)
        if (pthread_create(&threads[i], &attr, park, NULL) != 0)
            bench_die("pthread_create");
    pthread_barrier_wait(&parked);
    for (unsigned i = 0; i < STATS_RUNS; i++)
        v[i] = time_stats(RA_TAG_NONE);
    pthread_barrier_wait(&parked);
    for (unsigned i = 0; i < nthreads; i++)
        pthread_join(threads[i], NULL);
    snprintf(workload, sizeof workload,
             "%u threads: one untagged ra_tag_stats", nthreads);
    median = bench_median(v, STATS_RUNS); /* sorts v */
    bench_row(workload, CONTENDER, median, "us", -1, v[0], v[STATS_RUNS - 1]);
    free(threads);
}

static double cpu_seconds(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* The share of a core the process burns while its main thread sleeps: the
 * library's threads (the segment's publisher) at their default intervals. */
static void idle(unsigned ntags)
{
    unsigned seconds = (unsigned)bench_scaled(10, 2);
    double cpu0, t0, share;
    char workload[96];

    make_tags(ntags);
    sleep(1); /* the segment's first publish, and the set-up, are done */
    cpu0 = cpu_seconds();
    t0 = bench_now_ns();
    sleep(seconds);
    share = 100 * (cpu_seconds() - cpu0) / ((bench_now_ns() - t0) / 1e9);
    snprintf(workload, sizeof workload,
             "%u tags: idle process, REGIONALLOC_SHM=1", ntags);
    bench_row(workload, CONTENDER, share, "% of a core", -1, share, share);
}

#define READS_MAX_THREADS 10000u

int main(int argc, char **argv)
{
    bool idle_mode = argc == 3 && strcmp(argv[1], "--idle") == 0;
    bool threads_mode = argc == 3 && strcmp(argv[1], "--threads") == 0;
    unsigned n = (unsigned)atoi(argv[argc - 1]);

    if (threads_mode && n > 0 && n <= READS_MAX_THREADS) {
        untagged_with_threads(n);
        return 0;
    }
    if ((argc != 2 && !idle_mode) || n == 0 || n > READS_MAX_TAGS) {
        fprintf(stderr,
                "usage: %s [--idle] NTAGS (1 to %u) | --threads NTHREADS "
                "(1 to %u)\n",
                argv[0], READS_MAX_TAGS, READS_MAX_THREADS);
        return 2;
    }
    reexec_with_tags(argv, idle_mode);
    if (idle_mode)
        idle(n);
    else
        timings(n);
    return 0;
}

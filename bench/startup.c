/* Start-up, whole process: a short command (bench/run.sh gives /bin/true
 * and /usr/bin/python3 -c pass) run with LD_PRELOAD of libregionalloc, with
 * LD_PRELOAD of the jemalloc it links (the baseline), and with nothing
 * preloaded (glibc), in turn, the order rotating from round to round. Each
 * run is timed from its spawn to its reaping, and its peak resident set is
 * the kernel's (ru_maxrss from wait4). Prints the medians, each
 * contender's median ratio of time to the baseline's run of the same
 * round, and the median of the rounds' differences of peak between
 * libregionalloc and the baseline.
 *
 *   startup NAME LIBREGIONALLOC LIBJEMALLOC COMMAND [ARG...]
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "benchutil.h"

extern char **environ;

enum { RA, JE, GLIBC, CONTENDERS };

static const char *const names[CONTENDERS] = {
    [RA] = "libregionalloc, LD_PRELOAD",
    [JE] = "jemalloc, LD_PRELOAD (baseline)",
    [GLIBC] = "glibc, nothing preloaded",
};

/* The environment without LD_PRELOAD, then preload (NULL: none). */
static char **environment(const char *preload)
{
    size_t n = 0, k = 0;
    char **env;

    while (environ[n] != NULL)
        n++;
    env = calloc(n + 2, sizeof *env);
    if (env == NULL)
        bench_die("calloc");
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            env[k++] = environ[i];
    if (preload != NULL) {
        size_t len = strlen(preload) + sizeof "LD_PRELOAD=";
        env[k] = malloc(len);
        if (env[k] == NULL)
            bench_die("malloc");
        snprintf(env[k], len, "LD_PRELOAD=%s", preload);
    }
    return env;
}

/* One run of argv: its wall time (ms) and peak resident set (KiB). */
static void run(char **argv, char **env, double *ms, double *kib)
{
    posix_spawn_file_actions_t quiet;
    struct rusage ru;
    double t0 = bench_now_ns();
    int status;
    pid_t pid;

    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&pid, argv[0], &quiet, NULL, argv, env) != 0)
        bench_die(argv[0]);
    if (wait4(pid, &status, 0, &ru) != pid)
        bench_die("wait4");
    *ms = (bench_now_ns() - t0) / 1e6;
    *kib = (double)ru.ru_maxrss;
    posix_spawn_file_actions_destroy(&quiet);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        bench_note("startup: %s exited with status %d", argv[0], status);
}

static double min_of(const double *v, unsigned n)
{
    double m = v[0];

    for (unsigned i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static double max_of(const double *v, unsigned n)
{
    double m = v[0];

    for (unsigned i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* A row of v[0..n) (copied: the median sorts). */
static void row_of(const char *workload, const char *contender,
                   const char *unit, const double *v, unsigned n,
                   double ratio, double *scratch)
{
    memcpy(scratch, v, n * sizeof *v);
    bench_row(workload, contender, bench_median(scratch, n), unit, ratio,
              min_of(v, n), max_of(v, n));
}

int main(int argc, char **argv)
{
    unsigned rounds = (unsigned)bench_scaled(200, 10);
    double *ms[CONTENDERS], *kib[CONTENDERS], *q = calloc(rounds, sizeof *q),
                                              *scratch =
                                                  calloc(rounds, sizeof *q);
    char **env[CONTENDERS], workload[256];
    double warm_ms, warm_kib;

    if (argc < 5) {
        fprintf(stderr, "usage: %s NAME LIBREGIONALLOC LIBJEMALLOC COMMAND "
                        "[ARG...]\n", argv[0]);
        return 2;
    }
    env[RA] = environment(argv[2]);
    env[JE] = environment(argv[3]);
    env[GLIBC] = environment(NULL);
    for (int c = 0; c < CONTENDERS; c++) {
        ms[c] = calloc(rounds, sizeof **ms);
        kib[c] = calloc(rounds, sizeof **kib);
        if (ms[c] == NULL || kib[c] == NULL || q == NULL || scratch == NULL)
            bench_die("calloc");
        run(argv + 4, env[c], &warm_ms, &warm_kib); /* the page cache */
    }
    for (unsigned r = 0; r < rounds; r++)
        for (int k = 0; k < CONTENDERS; k++) {
            int c = (int)((r + (unsigned)k) % CONTENDERS);
            run(argv + 4, env[c], &ms[c][r], &kib[c][r]);
        }

    snprintf(workload, sizeof workload, "start-up, %s, whole process",
             argv[1]);
    for (int c = 0; c < CONTENDERS; c++) {
        for (unsigned r = 0; r < rounds; r++)
            q[r] = ms[c][r] / ms[JE][r];
        row_of(workload, names[c], "ms", ms[c], rounds,
               bench_median(q, rounds), scratch);
    }
    snprintf(workload, sizeof workload, "start-up, %s: peak RSS", argv[1]);
    for (int c = 0; c < CONTENDERS; c++) {
        for (unsigned r = 0; r < rounds; r++)
            q[r] = kib[c][r] / kib[JE][r];
        row_of(workload, names[c], "KiB", kib[c], rounds,
               bench_median(q, rounds), scratch);
    }
    snprintf(workload, sizeof workload,
             "start-up, %s: peak RSS over jemalloc's", argv[1]);
    for (unsigned r = 0; r < rounds; r++)
        q[r] = kib[RA][r] - kib[JE][r];
    row_of(workload, names[RA], "KiB", q, rounds, 0, scratch);
    return 0;
}

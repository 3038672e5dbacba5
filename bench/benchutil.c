/* bench/: clocks, medians, RSS, result rows, the contender runner, and the
 * handles to jemalloc and mimalloc (see benchutil.h). */
#include <errno.h>
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"

struct bench_jemalloc bench_je;
const char *bench_je_missing = "not opened";
struct bench_mimalloc bench_mi;
const char *bench_mi_missing = "not installed";
mi_heap_t *bench_mi_heap;

/* -- output ------------------------------------------------------------------ */

/* BENCH_WORKLOAD_SUFFIX, appended to every workload's name: the same
 * program run in another setting (run.sh: with the stats segment on) gives
 * rows of their own. */
static const char *suffix(void)
{
    const char *s = getenv("BENCH_WORKLOAD_SUFFIX");

    return s != NULL ? s : "";
}

void bench_row(const char *workload, const char *contender, double median,
               const char *unit, double ratio, double min, double max)
{
    char r[32] = "-";

    if (ratio > 0 && isfinite(ratio))
        snprintf(r, sizeof r, "%.3f", ratio);
    printf("row\t%s%s\t%s\t%.3f\t%s\t%s\t%.3f\t%.3f\n", workload, suffix(),
           contender, median, unit, r, min, max);
    fflush(stdout);
}

void bench_row_missing(const char *workload, const char *contender,
                       const char *why)
{
    printf("row\t%s%s\t%s\tn/a\t%s\t-\t-\t-\n", workload, suffix(),
           contender, why);
    fflush(stdout);
}

void bench_note(const char *fmt, ...)
{
    va_list ap;

    fputs("note\t", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

void bench_die(const char *what)
{
    fprintf(stderr, "bench: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* -- measuring ------------------------------------------------------------------ */

double bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

double bench_median(double *v, unsigned n)
{
    qsort(v, n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

size_t bench_rss_bytes(void)
{
    unsigned long size, resident;
    FILE *f = fopen("/proc/self/statm", "r");
    int got;

    if (f == NULL)
        return 0;
    got = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    return got == 2 ? resident * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

size_t bench_peak_rss_bytes(void)
{
    char line[128];
    size_t kib = 0;
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmHWM: %zu kB", &kib) == 1)
            break;
    fclose(f);
    return kib * 1024u;
}

static double env_double(const char *name, double def)
{
    const char *s = getenv(name);
    char *end;
    double v;

    if (s == NULL || *s == '\0')
        return def;
    v = strtod(s, &end);
    if (*end != '\0' || !(v > 0)) {
        fprintf(stderr, "bench: bad %s=%s, using %g\n", name, s, def);
        return def;
    }
    return v;
}

uint64_t bench_scaled(uint64_t ops, uint64_t min)
{
    double v = ops * env_double("BENCH_SCALE", 1.0);

    return v < min ? min : (uint64_t)v;
}

unsigned bench_rounds(void)
{
    double v = env_double("BENCH_ROUNDS", 7);

    return v < 1 ? 1 : (unsigned)v;
}

/* -- comparing contenders ---------------------------------------------------------- */

#define MAX_CONTENDERS 16
#define MAX_ROUNDS 101

void bench_compare(const char *workload, const char *unit,
                   struct bench_contender *c, unsigned n, int baseline)
{
    static double t[MAX_CONTENDERS][MAX_ROUNDS];
    double med[MAX_CONTENDERS], lo[MAX_CONTENDERS], hi[MAX_CONTENDERS];
    unsigned rounds = bench_rounds();

    if (n > MAX_CONTENDERS)
        bench_die("too many contenders");
    if (rounds > MAX_ROUNDS)
        rounds = MAX_ROUNDS;
    for (unsigned i = 0; i < n; i++)
        if (c[i].missing == NULL)
            (void)c[i].run(c[i].arg);
    for (unsigned r = 0; r < rounds; r++)
        for (unsigned k = 0; k < n; k++) {
            unsigned i = (r + k) % n;
            if (c[i].missing == NULL)
                t[i][r] = c[i].run(c[i].arg);
        }
    for (unsigned i = 0; i < n; i++) {
        if (c[i].missing != NULL)
            continue;
        med[i] = bench_median(t[i], rounds);
        lo[i] = t[i][0];
        hi[i] = t[i][rounds - 1];
    }
    for (unsigned i = 0; i < n; i++) {
        double ratio = -1;
        if (c[i].missing != NULL) {
            bench_row_missing(workload, c[i].name, c[i].missing);
            continue;
        }
        if (baseline >= 0 && c[baseline].missing == NULL)
            ratio = med[i] / med[baseline];
        bench_row(workload, c[i].name, med[i], unit, ratio, lo[i], hi[i]);
    }
}

/* -- jemalloc ---------------------------------------------------------------------- */

void bench_fill_sizes(size_t *sizes, unsigned n, uint32_t seed, size_t max)
{
    for (unsigned i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        sizes[i] = 8 + (seed >> 8) % (max - 7);
    }
}

bool bench_open_jemalloc(void)
{
    /* Loaded as libregionalloc's dependency: take that copy, never load a
     * second one. */
    void *h = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_NOLOAD);

    if (h == NULL) {
        static char why[256];
        snprintf(why, sizeof why, "jemalloc is not loaded: %s", dlerror());
        bench_je_missing = why;
        return false;
    }
    *(void **)&bench_je.malloc = dlsym(h, "malloc");
    *(void **)&bench_je.free = dlsym(h, "free");
    *(void **)&bench_je.realloc = dlsym(h, "realloc");
    *(void **)&bench_je.mallctl = dlsym(h, "mallctl");
    *(void **)&bench_je.mallocx = dlsym(h, "mallocx");
    *(void **)&bench_je.dallocx = dlsym(h, "dallocx");
    if (bench_je.malloc == NULL || bench_je.free == NULL ||
        bench_je.realloc == NULL || bench_je.mallctl == NULL ||
        bench_je.mallocx == NULL || bench_je.dallocx == NULL) {
        bench_je_missing = "libjemalloc.so.2 lacks malloc/free/realloc/"
                           "mallctl/mallocx/dallocx";
        return false;
    }
    /* The whole point: these must not be the process's (possibly
     * libregionalloc's) malloc and free. */
    if ((void *)bench_je.malloc == (void *)malloc ||
        (void *)bench_je.free == (void *)free) {
        bench_je_missing = "the handle gave the process malloc, not jemalloc's";
        return false;
    }
    bench_je_missing = NULL;
    return true;
}

/* -- mimalloc ------------------------------------------------------------------------ */

bool bench_open_mimalloc(void)
{
    void *h = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);

    if (h == NULL)
        h = dlopen("libmimalloc.so", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        bench_mi_missing = "not installed";
        return false;
    }
    *(void **)&bench_mi.heap_new = dlsym(h, "mi_heap_new");
    *(void **)&bench_mi.heap_delete = dlsym(h, "mi_heap_delete");
    *(void **)&bench_mi.heap_destroy = dlsym(h, "mi_heap_destroy");
    *(void **)&bench_mi.heap_malloc = dlsym(h, "mi_heap_malloc");
    *(void **)&bench_mi.heap_realloc = dlsym(h, "mi_heap_realloc");
    *(void **)&bench_mi.free = dlsym(h, "mi_free");
    *(void **)&bench_mi.version = dlsym(h, "mi_version");
    if (bench_mi.heap_new == NULL || bench_mi.heap_delete == NULL ||
        bench_mi.heap_destroy == NULL ||
        bench_mi.heap_malloc == NULL || bench_mi.heap_realloc == NULL ||
        bench_mi.free == NULL || bench_mi.version == NULL) {
        bench_mi_missing = "libmimalloc lacks the heap API";
        return false;
    }
    bench_mi_missing = NULL;
    return true;
}

void bench_je_purge_all(void)
{
    char name[64];

    /* 4096: jemalloc's MALLCTL_ARENAS_ALL, as in its header. */
    snprintf(name, sizeof name, "arena.%u.purge", 4096u);
    if (bench_je.mallctl("thread.tcache.flush", NULL, NULL, NULL, 0) != 0 ||
        bench_je.mallctl(name, NULL, NULL, NULL, 0) != 0)
        bench_die("jemalloc purge");
}

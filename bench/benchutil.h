/* bench/: what every benchmark shares: clocks, medians, RSS, result rows,
 * the contender runner, and handles to jemalloc and mimalloc. */
#ifndef BENCH_BENCHUTIL_H
#define BENCH_BENCHUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* -- output -------------------------------------------------------------------
 * Programs print only machine-readable lines on stdout; bench/run.sh gathers
 * them from every program into one table:
 *   row <TAB> workload <TAB> contender <TAB> median <TAB> unit <TAB> ratio
 *       <TAB> min <TAB> max
 *   note <TAB> text
 * ratio is the median over the baseline's median measured in the same
 * process, or "-" when there is none (run.sh then divides by the baseline row
 * of the same workload from another process, if any). A median of "n/a"
 * means the contender did not run; the unit column then says why. */
void bench_row(const char *workload, const char *contender, double median,
               const char *unit, double ratio, double min, double max);
void bench_row_missing(const char *workload, const char *contender,
                       const char *why);
void bench_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* -- measuring --------------------------------------------------------------- */
double bench_now_ns(void);               /* CLOCK_MONOTONIC */
double bench_median(double *v, unsigned n); /* sorts v; n > 0 */
size_t bench_rss_bytes(void);            /* /proc/self/statm resident; 0 on error */
size_t bench_peak_rss_bytes(void);       /* VmHWM of /proc/self/status; 0 on error */

/* Operation counts are multiplied by BENCH_SCALE (default 1, e.g. 0.05 for a
 * smoke run) and never fall below min. Rounds come from BENCH_ROUNDS
 * (default 7, at least 1). */
uint64_t bench_scaled(uint64_t ops, uint64_t min);
unsigned bench_rounds(void);

/* Aborts with a message: the benchmarks treat allocation failure as fatal. */
void bench_die(const char *what) __attribute__((noreturn));

/* -- comparing contenders --------------------------------------------------------
 * run returns the cost of one operation (ns) for one timed pass of the
 * workload. bench_compare runs each contender once untimed (warm-up), then
 * `rounds` rounds in which every contender runs once, the order rotating
 * from round to round so that no contender always follows the same one.
 * It prints one row per contender; ratios are to contenders[baseline]
 * (baseline < 0: no ratio). Contenders with missing != NULL are not run and
 * printed as n/a with that reason. */
struct bench_contender {
    const char *name;
    double (*run)(void *arg);
    void *arg;
    const char *missing;
};
void bench_compare(const char *workload, const char *unit,
                   struct bench_contender *c, unsigned n, int baseline);

/* sizes[0..n): pseudo-random sizes of 8 to max bytes, the same for a seed
 * in every run and for every contender. */
void bench_fill_sizes(size_t *sizes, unsigned n, uint32_t seed, size_t max);

/* -- jemalloc's own functions ----------------------------------------------------
 * Reached through a handle to libjemalloc.so.2 itself: in a program linked
 * with libregionalloc the plain names malloc/free are libregionalloc's.
 * bench_open_jemalloc returns false (and leaves a reason in
 * bench_je_missing) when the library is not loaded or gives the process
 * malloc. */
struct bench_jemalloc {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*realloc)(void *, size_t);
    int (*mallctl)(const char *, void *, size_t *, void *, size_t);
    void *(*mallocx)(size_t, int);
    void (*dallocx)(void *, int);
};
extern struct bench_jemalloc bench_je;
/* jemalloc's MALLOCX_ARENA and MALLOCX_TCACHE_NONE, as its header has them
 * (the bench includes no jemalloc header). */
#define JE_ARENA(a) ((int)(((unsigned)(a) + 1u) << 20))
#define JE_TCACHE_NONE ((int)((-1 + 2) << 8))
extern const char *bench_je_missing;
bool bench_open_jemalloc(void);
/* jemalloc's thread.tcache.flush, then arena.<all>.purge; dies on failure. */
void bench_je_purge_all(void);

/* -- mimalloc's heap API ----------------------------------------------------------
 * dlopen'ed RTLD_LOCAL at run time, so the bench builds without mimalloc and
 * libmimalloc's own exported malloc never interposes on anyone's. */
typedef struct mi_heap_s mi_heap_t;
struct bench_mimalloc {
    mi_heap_t *(*heap_new)(void);
    void (*heap_delete)(mi_heap_t *);
    void (*heap_destroy)(mi_heap_t *);
    void *(*heap_malloc)(mi_heap_t *, size_t);
    void *(*heap_realloc)(mi_heap_t *, void *, size_t);
    void (*free)(void *);
    int (*version)(void);
};
extern struct bench_mimalloc bench_mi;
extern const char *bench_mi_missing; /* NULL once bench_open_mimalloc succeeded */
extern mi_heap_t *bench_mi_heap;     /* the heap contenders.h allocates from */
bool bench_open_mimalloc(void);

#endif /* BENCH_BENCHUTIL_H */

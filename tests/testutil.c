/* Helpers shared by the Check suites. */
#include "testutil.h"

#include <check.h>
#include <jemalloc/jemalloc.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

ra_tag_t tu_tag_create(const char *name)
{
    ra_tag_t tag;

    errno = 0;
    tag = ra_tag_create(name);
    ck_assert_msg(tag != RA_TAG_NONE, "ra_tag_create(\"%s\") failed: errno %d",
                  name, errno);
    return tag;
}

ra_tag_stats_t tu_tag_stats(ra_tag_t tag)
{
    ra_tag_stats_t s;

    ck_assert_int_eq(ra_tag_stats(tag, &s), 0);
    return s;
}

static size_t arena_size(const char *fmt, unsigned arena)
{
    char name[96];
    size_t v = 0, len = sizeof v;

    snprintf(name, sizeof name, fmt, arena);
    ck_assert_int_eq(mallctl(name, &v, &len, NULL, 0), 0);
    return v;
}

size_t tu_jemalloc_allocated(ra_tag_t tag)
{
    unsigned arenas[64];
    int n = ra_tag_arenas(tag, arenas, 64);
    size_t sum = 0;

    ck_assert_int_ge(n, 0);
    ck_assert_int_eq(ra_stats_refresh(), 0);
    for (int k = 0; k < n && k < 64; k++)
        sum += arena_size("stats.arenas.%u.small.allocated", arenas[k]) +
               arena_size("stats.arenas.%u.large.allocated", arenas[k]);
    return sum;
}

uint64_t tu_bin_lock_ops(ra_tag_t tag, size_t size)
{
    unsigned arenas[64], nbins = 0, bin = 0;
    int n = ra_tag_arenas(tag, arenas, 64);
    size_t len = sizeof nbins, bin_size = 0;
    uint64_t ops, sum = 0;
    char name[96];

    ck_assert_int_ge(n, 0);
    ck_assert_int_eq(mallctl("arenas.nbins", &nbins, &len, NULL, 0), 0);
    for (; bin < nbins && bin_size < size; bin++) {
        snprintf(name, sizeof name, "arenas.bin.%u.size", bin);
        len = sizeof bin_size;
        ck_assert_int_eq(mallctl(name, &bin_size, &len, NULL, 0), 0);
    }
    ck_assert_uint_ge(bin_size, size);
    ck_assert_int_eq(ra_stats_refresh(), 0);
    for (int k = 0; k < n && k < 64; k++) {
        snprintf(name, sizeof name, "stats.arenas.%u.bins.%u.mutex.num_ops",
                 arenas[k], bin - 1);
        len = sizeof ops;
        ck_assert_int_eq(mallctl(name, &ops, &len, NULL, 0), 0);
        sum += ops;
    }
    return sum;
}

uint64_t tu_jemalloc_epoch(void)
{
    uint64_t epoch = 0;
    size_t len = sizeof epoch;

    ck_assert_int_eq(mallctl("epoch", &epoch, &len, NULL, 0), 0);
    return epoch;
}

void tu_tag_push(ra_tag_t tag)
{
    if (ra_tag_push(tag) != 0)
        ck_abort_msg("ra_tag_push(%u) failed", tag);
}

void tu_tag_pop(ra_tag_t tag)
{
    if (ra_tag_pop(tag) != 0)
        ck_abort_msg("ra_tag_pop(%u) failed", tag);
}

size_t tu_rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

size_t tu_rss_anon_bytes(void)
{
    char line[256];
    unsigned long kib = 0;
    bool found = false;
    FILE *f = fopen("/proc/self/status", "re");

    ck_assert_ptr_nonnull(f);
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = sscanf(line, "RssAnon: %lu kB", &kib) == 1;
    fclose(f);
    ck_assert_msg(found, "no RssAnon in /proc/self/status");
    return (size_t)kib * 1024;
}

/* Forks a child with the variables of env set and its stderr on a pipe. The
 * child runs fn() when name is NULL, else execs this program as the child
 * called name. Captures the child's stderr as tu_run_with_env() describes.
 * Returns the child's exit status (0..255), or 128 + signal number. */
static int spawn_child(const char *const env[], int (*fn)(void),
                       const char *name, char *err, size_t errlen)
{
    int fds[2];
    pid_t pid;
    int status;
    size_t got = 0;

    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        for (size_t i = 0; env != NULL && env[i] != NULL; i++)
            putenv((char *)env[i]);
        if (name == NULL)
            _exit(fn());
        execl("/proc/self/exe", "tu-child", "--tu-child", name, (char *)NULL);
        _exit(126);
    }
    close(fds[1]);
    for (;;) {
        char sink[256];
        char *dst = err != NULL && got + 1 < errlen ? err + got : sink;
        size_t room = err != NULL && got + 1 < errlen ? errlen - 1 - got
                                                      : sizeof sink;
        ssize_t n = read(fds[0], dst, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (dst != sink)
            got += (size_t)n;
    }
    close(fds[0]);
    if (err != NULL && errlen > 0)
        err[got] = '\0';
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

int tu_run_with_env(const char *const env[], int (*fn)(void), char *err,
                    size_t errlen)
{
    return spawn_child(env, fn, NULL, err, errlen);
}

bool tu_make_busy(ra_tag_t tag)
{
    enum { ROUND = 500 };
    void *blocks[ROUND];
    bool ok = true;

    for (unsigned made = 0; made < TU_BUSY_BLOCKS; made += ROUND) {
        for (unsigned i = 0; i < ROUND; i++)
            ok &= (blocks[i] = ra_malloc_tag(tag, 64)) != NULL;
        for (unsigned i = 0; i < ROUND; i++)
            ra_free(blocks[i]);
    }
    return ok;
}

bool tu_tag_traffic(ra_tag_t tag, unsigned rounds)
{
    enum { N = 2048 };
    void *blocks[N];
    bool ok = true;

    for (unsigned r = 0; r < rounds; r++) {
        for (size_t i = 0; i < N; i++)
            ok &= (blocks[i] = ra_malloc_tag(tag, 8 + (i * 40) % 3000)) !=
                  NULL;
        for (size_t i = 0; i < N; i += 64) {
            ok &= (blocks[i] = ra_realloc(blocks[i], 20000 + i)) != NULL;
            ok &= (blocks[i + 1] = ra_realloc(blocks[i + 1], 5)) != NULL;
        }
        ok &= (blocks[7] = ra_realloc(blocks[7], (size_t)12 << 20)) != NULL;
        if (blocks[7] != NULL)
            memset(blocks[7], 1, (size_t)1 << 20);
        for (size_t i = N; i-- > 0;)
            ra_free(blocks[i]);
    }
    if (ra_tag_push(tag) != 0)
        return false;
    ok &= (blocks[0] = ra_calloc(100, 1000)) != NULL;
    ok &= (blocks[1] = ra_aligned_alloc(4096, 64 << 10)) != NULL;
    ok &= ra_tag_pop(tag) == 0;
    ra_free(blocks[0]);
    ra_free(blocks[1]);
    return ok;
}

void tu_run_threads(unsigned n, void *(*fn)(void *), void *arg)
{
    pthread_t *threads = calloc(n, sizeof *threads);

    ck_assert_ptr_nonnull(threads);
    for (unsigned i = 0; i < n; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, fn, arg), 0);
    for (unsigned i = 0; i < n; i++)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    free(threads);
}

void tu_child_main(int argc, char **argv, const struct tu_child *children)
{
    if (argc != 3 || strcmp(argv[1], "--tu-child") != 0)
        return;
    for (size_t i = 0; children[i].name != NULL; i++)
        if (strcmp(children[i].name, argv[2]) == 0)
            exit(children[i].fn());
    fprintf(stderr, "%s: no child called %s\n", argv[0], argv[2]);
    exit(127);
}

int tu_exec_self(const char *const env[], const char *name, char *err,
                 size_t errlen)
{
    return spawn_child(env, NULL, name, err, errlen);
}

void tu_child_failed(const char *file, int line, const char *what)
{
    printf("%s:%d: check failed: %s (errno %d)\n", file, line, what, errno);
    fflush(stdout);
}

/* The byte the pattern of seed holds at offset i. */
static unsigned char pattern_byte(size_t i, unsigned seed)
{
    return (unsigned char)((i * 131u + seed * 7u + (i >> 12)) & 0xffu);
}

/* Within a 4 KiB page the pattern repeats every PATTERN_LINE bytes (131
 * times 256 is 0 modulo 256): a page's line is made once and copied or
 * compared whole. Byte by byte, the churn of check_alloc's front caches
 * (4.6 GB written and read back) spent 97% of its 3.5 s of CPU here. */
#define PATTERN_LINE 256u
#define PATTERN_PAGE 4096u

/* The line of the page at page_at: its first byte, then 131 more each
 * byte (a loop the compiler makes vector code of). */
static void pattern_line(unsigned char *line, size_t page_at, unsigned seed)
{
    unsigned first = pattern_byte(page_at, seed);

    for (unsigned j = 0; j < PATTERN_LINE; j++)
        line[j] = (unsigned char)(first + j * 131u);
}

void tu_fill_pattern(void *p, size_t len, unsigned seed)
{
    unsigned char *b = p, line[PATTERN_LINE];

    for (size_t i = 0; i < len; i += PATTERN_LINE) {
        if (i % PATTERN_PAGE == 0)
            pattern_line(line, i, seed);
        memcpy(b + i, line, len - i < PATTERN_LINE ? len - i : PATTERN_LINE);
    }
}

size_t tu_check_pattern(const void *p, size_t len, unsigned seed)
{
    const unsigned char *b = p;
    unsigned char line[PATTERN_LINE];

    for (size_t i = 0; i < len; i += PATTERN_LINE) {
        size_t n = len - i < PATTERN_LINE ? len - i : PATTERN_LINE;
        if (i % PATTERN_PAGE == 0)
            pattern_line(line, i, seed);
        if (memcmp(b + i, line, n) != 0)
            for (size_t j = 0;; j++)
                if (b[i + j] != line[j])
                    return i + j;
    }
    return len;
}

char *tu_report_string(int (*report)(FILE *, ra_format_t), ra_format_t fmt)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int rc;

    ck_assert_ptr_nonnull(f);
    errno = 0;
    rc = report(f, fmt);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_msg(rc == 0, "report (format %d) failed: errno %d", (int)fmt,
                  errno);
    return buf;
}

char *tu_json_report_or_null(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (f == NULL)
        return NULL;
    if (ra_report(f, RA_FORMAT_JSON) != 0) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    return buf;
}

char *tu_prof_dump_string(ra_prof_format_t fmt, ra_tag_t tag, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    int rc;

    ck_assert_ptr_nonnull(f);
    errno = 0;
    rc = ra_prof_dump(f, fmt, tag);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_msg(rc == 0, "ra_prof_dump(format %d, tag %u) failed: errno %d",
                  (int)fmt, tag, errno);
    if (len != NULL)
        *len = n;
    return buf;
}

char *tu_json_tag_line(const char *json, const char *name)
{
    char key[96];
    const char *at, *start, *end;
    char *line;

    snprintf(key, sizeof key, "\"name\": \"%s\",", name);
    at = strstr(json, key);
    ck_assert_msg(at != NULL, "%s not in: %s", key, json);
    for (start = at; start > json && start[-1] != '\n'; start--)
        ;
    end = strchr(at, '\n');
    if (end == NULL)
        end = at + strlen(at);
    line = strndup(start, (size_t)(end - start));
    ck_assert_ptr_nonnull(line);
    return line;
}

unsigned tu_count_of(const char *s, const char *what)
{
    unsigned n = 0;

    for (const char *p = strstr(s, what); p != NULL; p = strstr(p + 1, what))
        n++;
    return n;
}

const char *tu_find_frame(const char *s, const char *before,
                          const char *function)
{
    size_t nb = strlen(before), nf = strlen(function);

    for (const char *p = strstr(s, before); p != NULL;
         p = strstr(p + 1, before)) {
        const char *after = p + nb + nf;
        if (strncmp(p + nb, function, nf) == 0 &&
            (strncmp(after, "+0x", 3) == 0 || strncmp(after, " (", 2) == 0))
            return p;
    }
    return NULL;
}

unsigned tu_count_lines(const char *s)
{
    unsigned n = 0;
    const char *p = s;

    for (; *p != '\0'; p++)
        if (*p == '\n')
            n++;
    if (p != s && p[-1] != '\n')
        n++;
    return n;
}

size_t tu_data_vm_bytes(void)
{
    char line[256];
    size_t kib = 0;
    FILE *f = fopen("/proc/self/status", "r");

    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmData: %zu kB", &kib) == 1)
            break;
    fclose(f);
    ck_assert_uint_gt(kib, 0);
    return kib << 10;
}

char *tu_read_file(const char *path)
{
    size_t len = 0;
    char *buf = NULL;
    FILE *f = fopen(path, "r");

    ck_assert_msg(f != NULL, "cannot open %s", path);
    if (getdelim(&buf, &len, '\0', f) < 0) {
        free(buf);
        buf = strdup("");
        ck_assert_ptr_nonnull(buf);
    }
    fclose(f);
    return buf;
}

FILE *tu_open_source(const char *path)
{
    const char *top = getenv("abs_top_srcdir");
    char full[4096];

    if (top == NULL)
        top = getenv("top_srcdir");
    snprintf(full, sizeof full, "%s/%s", top != NULL ? top : ".", path);
    return fopen(full, "re");
}

void tu_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

bool tu_object_mapped(const char *stem)
{
    char *line = NULL;
    size_t cap = 0, n = strlen(stem);
    bool found = false;
    FILE *f = fopen("/proc/self/maps", "re");

    if (f == NULL) { /* no ck_assert: children call it too */
        perror("/proc/self/maps");
        abort();
    }
    while (!found && getline(&line, &cap, f) > 0) {
        const char *base = strrchr(line, '/');
        found = base != NULL && strncmp(base + 1, stem, n) == 0 &&
                (base[1 + n] == '.' || base[1 + n] == '-');
    }
    free(line);
    fclose(f);
    return found;
}

int tu_exec_self_with_broken(const char *soname, const char *const env[],
                             const char *name, char *err, size_t errlen)
{
    const char *path = getenv("LD_LIBRARY_PATH"), *all[16];
    char dir[] = "/tmp/tu-broken.XXXXXX", file[256], var[4352];
    size_t n = 0;
    int fd, rc;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/%s", dir, soname);
    fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    close(fd);
    snprintf(var, sizeof var, "LD_LIBRARY_PATH=%s%s%s", dir,
             path != NULL ? ":" : "", path != NULL ? path : "");
    all[n++] = var;
    for (; env != NULL && *env != NULL && n < 15; env++)
        all[n++] = *env;
    all[n] = NULL;
    rc = tu_exec_self(all, name, err, errlen);
    unlink(file);
    rmdir(dir);
    return rc;
}

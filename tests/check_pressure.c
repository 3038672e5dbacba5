/* Memory pressure: where the limit comes from (the call, the variable as a
 * size and as a percentage, a cgroup v2 directory laid out as cgroupfs is,
 * pointed at by REGIONALLOC_CGROUP_FS), no thread without one, the rises
 * (pages given back, callbacks once per rise, commits refused by priority
 * at high and in every tag at the limit, untagged never), bad values, and
 * a fork with the watcher running. Each case runs in a new process
 * (tu_exec_self): the limit is found at load. make check points
 * REGIONALLOC_CGROUP_FS at a directory that does not exist, so that the
 * machine's own cgroup never sets a limit on the suites. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regionalloc.h>

#include "testutil.h"

#define MIB ((size_t)1 << 20)
/* Long enough for a watcher that looks every 100 ms under any load; the
 * waits end as soon as what they wait for happens. */
#define WAIT_MS 60000

static unsigned threads_now(void)
{
    unsigned n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* -- where the limit comes from ------------------------------------------------ */

static int child_no_limit(void)
{
    ra_tag_t t = ra_tag_create("no-limit");
    void *p;

    TU_REQUIRE(t != RA_TAG_NONE);
    {
        RA_TAG_SCOPE(t);
        p = ra_malloc(4 * MIB);
    }
    TU_REQUIRE(p != NULL);
    ra_free(p);
    TU_REQUIRE(ra_memory_limit() == 0);
    TU_REQUIRE(threads_now() == 1);
    return 0;
}

static int child_limit_is(size_t want)
{
    TU_REQUIRE(ra_memory_limit() == want);
    /* The watcher. */
    TU_REQUIRE(threads_now() == 2);
    return 0;
}

static int child_env_512m(void)
{
    return child_limit_is(512 * MIB);
}

static int child_cgroup_1g(void)
{
    return child_limit_is(1024 * MIB);
}

static int child_cgroup_high_768m(void)
{
    return child_limit_is(768 * MIB);
}

static int child_half_of_cgroup(void)
{
    return child_limit_is(512 * MIB);
}

static int child_bad_value(void)
{
    /* The default: the cgroup's limit (none here). */
    TU_REQUIRE(ra_memory_limit() == 0);
    TU_REQUIRE(threads_now() == 1);
    return 0;
}

/* The call: a thread from the first limit, none before; 0 takes it off. */
static int child_call(void)
{
    TU_REQUIRE(ra_memory_limit() == 0);
    TU_REQUIRE(threads_now() == 1);
    TU_REQUIRE(ra_memory_limit_set(64ull << 30) == 0);
    TU_REQUIRE(ra_memory_limit() == 64ull << 30);
    TU_REQUIRE(threads_now() == 2);
    TU_REQUIRE(ra_memory_limit_set(0) == 0);
    TU_REQUIRE(ra_memory_limit() == 0);
    return 0;
}

/* A directory laid out as cgroupfs is: the mount's cgroup.controllers, and
 * under it the process's own cgroup path (the "0::" line) with its limit
 * files. Returns the mount's path in buf. */
static void fake_cgroupfs(char *buf, size_t len, const char *max,
                          const char *high)
{
    char line[512], path[1024], *own = NULL;
    FILE *f = fopen("/proc/self/cgroup", "re");

    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "0::", 3) == 0) {
            own = line + 3;
            own[strcspn(own, "\n")] = '\0';
        }
    fclose(f);
    /* No v2 line (a v1-only system): the library finds no cgroup path
     * either; the case is then that of no limit, checked elsewhere. */
    ck_assert_ptr_nonnull(own);
    snprintf(buf, len, "/tmp/check_pressure.%ld", (long)getpid());
    snprintf(path, sizeof path, "mkdir -p '%s%s' && touch '%s/cgroup.controllers'",
             buf, own, buf);
    ck_assert_int_eq(system(path), 0);
    snprintf(path, sizeof path, "%s%s/memory.max", buf, own);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\n", max);
    fclose(f);
    snprintf(path, sizeof path, "%s%s/memory.high", buf, own);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\n", high);
    fclose(f);
}

static void remove_fake(const char *dir)
{
    char cmd[1100];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void run(const char *const env[], const char *name, char *err,
                size_t errlen)
{
    int status = tu_exec_self(env, name, err, errlen);

    ck_assert_msg(status == 0, "%s: status %d; stderr: %s", name, status,
                  err);
}

/* The child name in a process of its own, the environment as it is. */
static void run_alone(const char *name)
{
    static const char *const env[] = {NULL};
    char err[4096];

    run(env, name, err, sizeof err);
}

START_TEST(test_pressure_no_limit_no_thread)
{
    static const char *const env[] = {NULL};
    char err[4096];

    run(env, "no_limit", err, sizeof err);
    ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(test_pressure_limit_from_the_call)
{
    run_alone("call");
}
END_TEST

START_TEST(test_pressure_limit_from_the_variable)
{
    static const char *const env[] = {"REGIONALLOC_MEMORY_LIMIT=512M", NULL};
    char err[4096];

    run(env, "env_512m", err, sizeof err);
    ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(test_pressure_limit_from_the_cgroup)
{
    char dir[256], var[300], err[4096];
    const char *env[] = {var, NULL};

    fake_cgroupfs(dir, sizeof dir, "1073741824", "max");
    snprintf(var, sizeof var, "REGIONALLOC_CGROUP_FS=%s", dir);
    run(env, "cgroup_1g", err, sizeof err);
    remove_fake(dir);
    /* memory.high, when set, is the limit. */
    fake_cgroupfs(dir, sizeof dir, "1073741824", "805306368");
    run(env, "cgroup_high_768m", err, sizeof err);
    remove_fake(dir);
}
END_TEST

START_TEST(test_pressure_percentage_of_the_cgroup)
{
    char dir[256], var[300], err[4096];
    const char *env[] = {var, "REGIONALLOC_MEMORY_LIMIT=50%", NULL};

    fake_cgroupfs(dir, sizeof dir, "1073741824", "max");
    snprintf(var, sizeof var, "REGIONALLOC_CGROUP_FS=%s", dir);
    run(env, "half_of_cgroup", err, sizeof err);
    remove_fake(dir);
}
END_TEST

START_TEST(test_pressure_bad_values_warn_once)
{
    static const char *const bad[] = {"12X", "0", "0%", "101%", "%", "-5M",
                                      "50%x"};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char var[64], err[4096];
        const char *env[] = {var, NULL};
        snprintf(var, sizeof var, "REGIONALLOC_MEMORY_LIMIT=%s", bad[i]);
        run(env, "bad_value", err, sizeof err);
        ck_assert_msg(tu_count_lines(err) == 1 &&
                          strstr(err, "REGIONALLOC_MEMORY_LIMIT=") != NULL,
                      "%s: stderr %s", bad[i], err);
    }
}
END_TEST

/* -- the rises ---------------------------------------------------------------------- */

static _Atomic unsigned rises_high, rises_limit;

static void on_pressure(void *ctx, ra_pressure_t level, size_t current,
                        size_t limit)
{
    (void)ctx;
    (void)current;
    (void)limit;
    if (level == RA_PRESSURE_HIGH)
        atomic_fetch_add(&rises_high, 1);
    else if (level == RA_PRESSURE_LIMIT)
        atomic_fetch_add(&rises_limit, 1);
}

static bool wait_for(_Atomic unsigned *n, unsigned want)
{
    for (int ms = 0; ms < WAIT_MS; ms++) {
        if (atomic_load(n) >= want)
            return true;
        tu_sleep_ms(1);
    }
    return false;
}

/* A block of size under tag: NULL when its commit is refused. */
static void *block_in(ra_tag_t tag, size_t size)
{
    void *p;

    {
        RA_TAG_SCOPE(tag);
        /* ra_malloc: tagged with or without the malloc override. */
        p = ra_malloc(size);
    }
    return p;
}

/* 4 MiB: a large block, committed as it is asked. */
static void *big_in(ra_tag_t tag)
{
    return block_in(tag, 4 * MIB);
}

/* A figure of the tag named name, key "limit_failures" or "priority",
 * from the JSON report (no Check assertion: this runs in a child).
 * LLONG_MIN when it cannot be read. */
static long long figure_of(const char *name, const char *key)
{
    char *doc = tu_json_report_or_null(), want[128];
    const char *at = NULL;
    long long n = LLONG_MIN;

    if (doc == NULL)
        return n;
    snprintf(want, sizeof want, "\"name\": \"%s\"", name);
    at = strstr(doc, want);
    snprintf(want, sizeof want, "\"%s\": ", key);
    if (at != NULL)
        at = strstr(at, want);
    if (at != NULL)
        n = strtoll(at + strlen(want), NULL, 10);
    free(doc);
    return n;
}

/* The resident set, from statm (no Check assertion). */
static size_t resident_now(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "re");

    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static int child_rises(void)
{
    ra_tag_t cache = ra_tag_create("cache"), query = ra_tag_create("query");
    size_t rss;
    void *ballast, *p, *q;

    TU_REQUIRE(cache != RA_TAG_NONE && query != RA_TAG_NONE);
    TU_REQUIRE(ra_tag_set_priority(cache, -1) == 0);
    TU_REQUIRE(figure_of("cache", "priority") == -1);
    TU_REQUIRE(figure_of("query", "priority") == 0);
    TU_REQUIRE(ra_pressure_callback(on_pressure, NULL) == 0);
    /* Untagged ballast, touched: what no give-back reaches. */
    ballast = malloc(96 * MIB);
    TU_REQUIRE(ballast != NULL);
    memset(ballast, 1, 96 * MIB);
    rss = resident_now();
    TU_REQUIRE(rss != 0);
    /* Resident at 92% of the limit: high, not the limit; the 8% left
     * (some 8 MiB) holds a 4 MiB block, and is under high's 10%. */
    TU_REQUIRE(ra_memory_limit_set(rss / 92 * 100) == 0);
    TU_REQUIRE(wait_for(&rises_high, 1));
    /* Sheddable refused, the others not, untagged never. */
    TU_REQUIRE(big_in(cache) == NULL && errno == ENOMEM);
    TU_REQUIRE(figure_of("cache", "limit_failures") == 1);
    p = big_in(query);
    TU_REQUIRE(p != NULL);
    q = malloc(4 * MIB);
    TU_REQUIRE(q != NULL);
    free(q);
    ra_free(p);
    TU_REQUIRE(atomic_load(&rises_high) == 1);
    TU_REQUIRE(atomic_load(&rises_limit) == 0);
    /* Past the limit: every tag refused, untagged still not. */
    TU_REQUIRE(ra_memory_limit_set(rss / 2) == 0);
    TU_REQUIRE(wait_for(&rises_limit, 1));
    TU_REQUIRE(big_in(query) == NULL && errno == ENOMEM);
    TU_REQUIRE(figure_of("query", "limit_failures") == 1);
    q = malloc(4 * MIB);
    TU_REQUIRE(q != NULL);
    free(q);
    /* No limit: nothing refused once the watcher has seen it. */
    TU_REQUIRE(ra_memory_limit_set(0) == 0);
    for (int ms = 0; ms < WAIT_MS && (p = big_in(cache)) == NULL; ms++)
        tu_sleep_ms(1);
    TU_REQUIRE(p != NULL);
    ra_free(p);
    TU_REQUIRE(atomic_load(&rises_high) == 1);
    TU_REQUIRE(atomic_load(&rises_limit) == 1);
    free(ballast);
    return 0;
}

/* A burst between two looks stops at the limit: every commit takes its
 * bytes from the headroom the last look left, so the 1 MiB blocks touched one
 * after the other are refused before the resident set passes the limit by
 * more than one block, whenever the watcher looks (the limit is in force
 * when ra_memory_limit_set returns, before the watcher's first look). */
static int child_burst(void)
{
    enum { MAX_BLOCKS = 1024 };
    static void *blocks[MAX_BLOCKS];
    ra_tag_t t = ra_tag_create("burst");
    size_t rss, limit, worst = 0;
    unsigned n = 0;

    TU_REQUIRE(t != RA_TAG_NONE);
    rss = resident_now();
    limit = rss + 64 * MIB;
    TU_REQUIRE(ra_memory_limit_set(limit) == 0);
    while (n < MAX_BLOCKS && (blocks[n] = block_in(t, MIB)) != NULL) {
        size_t now;
        memset(blocks[n++], 1, MIB);
        now = resident_now();
        if (now > worst)
            worst = now;
    }
    TU_REQUIRE(n < MAX_BLOCKS && errno == ENOMEM);
    TU_REQUIRE(n >= 16); /* 64 MiB of headroom: the first blocks fit */
    /* A block committed just before a look and touched after it is one
     * the look does not see: one block over at most, and the page tables. */
    TU_REQUIRE(worst <= limit + 2 * MIB);
    while (n > 0)
        ra_free(blocks[--n]);
    return 0;
}

START_TEST(test_pressure_burst_stops_at_the_limit)
{
    run_alone("burst");
}
END_TEST

/* Memory freed at the limit serves the next allocation at once, in another
 * tag and in a tag made then, without waiting for the watcher: the refused
 * commit gives the free pages back and tries again. With nothing to give,
 * a creation fails with ENOMEM and leaves nothing behind. */
static int child_freed_serves(void)
{
    enum { MAX_BLOCKS = 1024 };
    static void *blocks[MAX_BLOCKS];
    ra_tag_t a = ra_tag_create("first"), b, c;
    unsigned n = 0;
    void *p;

    TU_REQUIRE(a != RA_TAG_NONE);
    TU_REQUIRE(ra_memory_limit_set(resident_now() + 48 * MIB) == 0);
    while (n < MAX_BLOCKS && (blocks[n] = block_in(a, MIB)) != NULL)
        memset(blocks[n++], 1, MIB);
    TU_REQUIRE(n < MAX_BLOCKS);
    /* Full: a tag cannot be made. */
    TU_REQUIRE(ra_tag_create("refused") == RA_TAG_NONE && errno == ENOMEM);
    TU_REQUIRE(ra_tag_lookup("refused") == RA_TAG_NONE);
    /* Freed, still resident (jemalloc keeps the pages), then asked again. */
    while (n > 0)
        ra_free(blocks[--n]);
    b = ra_tag_create("second");
    TU_REQUIRE(b != RA_TAG_NONE);
    p = block_in(b, 16 * MIB);
    TU_REQUIRE(p != NULL);
    memset(p, 1, 16 * MIB);
    ra_free(p);
    TU_REQUIRE(ra_memory_limit_set(0) == 0);
    c = ra_tag_create("refused");
    TU_REQUIRE(c != RA_TAG_NONE);
    TU_REQUIRE(ra_tag_destroy(c) == 0 && ra_tag_destroy(b) == 0 &&
               ra_tag_destroy(a) == 0);
    return 0;
}

START_TEST(test_pressure_freed_memory_serves_at_once)
{
    run_alone("freed_serves");
}
END_TEST

START_TEST(test_pressure_rises_refuse_by_priority)
{
    run_alone("rises");
}
END_TEST

/* A fork while the watcher runs: the child keeps the limit as a figure,
 * refuses nothing and runs no watcher until it sets a limit itself. */
static int child_forks(void)
{
    pid_t pid;
    int status;

    TU_REQUIRE(ra_memory_limit_set(64ull << 30) == 0);
    TU_REQUIRE(threads_now() == 2);
    pid = fork();
    TU_REQUIRE(pid >= 0);
    if (pid == 0) {
        ra_tag_t t = ra_tag_create("child");
        void *p = t != RA_TAG_NONE ? big_in(t) : NULL;
        bool ok = p != NULL && threads_now() == 1 &&
                  ra_memory_limit() == 64ull << 30 &&
                  ra_memory_limit_set(32ull << 30) == 0 &&
                  threads_now() == 2;
        ra_free(p);
        _exit(ok ? 0 : 1);
    }
    TU_REQUIRE(waitpid(pid, &status, 0) == pid);
    TU_REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    TU_REQUIRE(ra_memory_limit() == 64ull << 30);
    return 0;
}

START_TEST(test_pressure_fork_with_the_watcher)
{
    run_alone("forks");
}
END_TEST

/* -- limits at the sizes' extremes ---------------------------------------------- */

/* Whether the JSON report holds text (no Check assertion: this runs in a
 * child). */
static bool report_has(const char *text)
{
    char *doc = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&doc, &len);
    bool has;

    if (f == NULL)
        return false;
    has = ra_report(f, RA_FORMAT_JSON) == 0;
    fclose(f);
    has = has && strstr(doc, text) != NULL;
    free(doc);
    return has;
}

/* EDGE_LIMIT: a number of bytes, "below" (1 MiB under the resident set)
 * or "above" (32 MiB over it), set by the call, or already by
 * REGIONALLOC_MEMORY_LIMIT when EDGE_FROM_ENV is set. A limit under the
 * address space (2^56) is in effect: a watcher runs, and a tag is made and
 * allocates in it only with headroom; at or above, none is: no watcher,
 * nothing refused, the limit kept as given and reported so. */
static int child_edge(void)
{
    const char *v = getenv("EDGE_LIMIT");
    bool from_env = getenv("EDGE_FROM_ENV") != NULL;
    size_t rss = resident_now(), limit;
    bool in_effect, fits;
    ra_tag_t before = from_env ? RA_TAG_NONE : ra_tag_create("before"), t;
    void *p;

    TU_REQUIRE(v != NULL && rss > 2 * MIB);
    limit = strcmp(v, "below") == 0   ? rss - MIB
            : strcmp(v, "above") == 0 ? rss + 32 * MIB
                                      : (size_t)strtoull(v, NULL, 10);
    in_effect = limit < ((size_t)1 << 56);
    fits = !in_effect || limit > rss + 16 * MIB;
    if (!from_env)
        TU_REQUIRE(before != RA_TAG_NONE && ra_memory_limit_set(limit) == 0);
    TU_REQUIRE(ra_memory_limit() == limit);
    t = ra_tag_create("after");
    TU_REQUIRE(fits ? t != RA_TAG_NONE : t == RA_TAG_NONE && errno == ENOMEM);
    if (before != RA_TAG_NONE) {
        p = big_in(before);
        TU_REQUIRE(fits ? p != NULL : p == NULL && errno == ENOMEM);
        ra_free(p);
    }
    if (t != RA_TAG_NONE) {
        p = big_in(t);
        TU_REQUIRE(p != NULL);
        ra_free(p);
    }
    /* Untagged, never refused. */
    p = malloc(4 * MIB);
    TU_REQUIRE(p != NULL);
    free(p);
    TU_REQUIRE(threads_now() == (in_effect ? 2u : 1u));
    TU_REQUIRE(report_has(in_effect ? "\"in_effect\": true"
                                    : "\"in_effect\": false"));
    TU_REQUIRE(report_has(from_env ? "\"source\": \"environment\""
                                   : "\"source\": \"call\""));
    return 0;
}

static const char *const edges[] = {
    "1",
    "below",
    "above",
    "72057594037927935",    /* 2^56 - 1: the largest in effect */
    "72057594037927936",    /* 2^56: the address space */
    "9223372036854775807",  /* 2^63 - 1 */
    "9223372036854775808",  /* 2^63 */
    "18446744073709551615", /* 2^64 - 1 */
};

/* ra_memory_limit_set at the edges. Before, 2^63 and above made the
 * headroom's int64_t negative and refused every tag and tagged allocation. */
START_TEST(test_pressure_limit_set_at_the_edges)
{
    char var[64], err[4096];
    const char *env[] = {var, NULL};

    snprintf(var, sizeof var, "EDGE_LIMIT=%s", edges[_i]);
    run(env, "edge", err, sizeof err);
    ck_assert_msg(strcmp(err, "") == 0, "%s: %s", edges[_i], err);
}
END_TEST

/* The same limits from REGIONALLOC_MEMORY_LIMIT (the numbers; the
 * resident set is not known before the process runs). */
START_TEST(test_pressure_variable_at_the_edges)
{
    char var[64], limit[64], err[4096];
    const char *env[] = {var, limit, "EDGE_FROM_ENV=1", NULL};

    if (edges[_i][0] < '0' || edges[_i][0] > '9')
        return;
    snprintf(var, sizeof var, "EDGE_LIMIT=%s", edges[_i]);
    snprintf(limit, sizeof limit, "REGIONALLOC_MEMORY_LIMIT=%s", edges[_i]);
    run(env, "edge", err, sizeof err);
    ck_assert_msg(strcmp(err, "") == 0, "%s: %s", edges[_i], err);
}
END_TEST

START_TEST(test_pressure_errors)
{
    int priority = 7;
    ra_tag_t tag = ra_tag_create("priority errors");

    TU_FAILS_WITH(ra_pressure_callback(NULL, NULL), EINVAL);
    TU_FAILS_WITH(ra_tag_set_priority(RA_TAG_NONE, 1), EINVAL);
    TU_FAILS_WITH(ra_tag_set_priority(4000, 1), EINVAL);
    TU_FAILS_WITH(ra_tag_get_priority(RA_TAG_NONE, &priority), EINVAL);
    TU_FAILS_WITH(ra_tag_get_priority(4000, &priority), EINVAL);
    ck_assert(tag != RA_TAG_NONE);
    TU_FAILS_WITH(ra_tag_get_priority(tag, NULL), EINVAL);
    ck_assert(ra_tag_destroy(tag) == 0);
    TU_FAILS_WITH(ra_tag_get_priority(tag, &priority), EINVAL);
    TU_FAILS_WITH(ra_tag_set_priority(tag, 1), EINVAL);
    /* A failed call leaves *out as it was. */
    ck_assert(priority == 7);
}
END_TEST

/* What ra_tag_set_priority set reads back, 0 by default and again once the
 * tag is destroyed and its id serves another. */
START_TEST(test_pressure_priority_reads_back)
{
    ra_tag_t tag = ra_tag_create("read back"), again;
    int priority = 7;

    ck_assert(tag != RA_TAG_NONE);
    ck_assert(ra_tag_get_priority(tag, &priority) == 0 && priority == 0);
    ck_assert(ra_tag_set_priority(tag, -3) == 0);
    ck_assert(ra_tag_get_priority(tag, &priority) == 0 && priority == -3);
    ck_assert(ra_tag_set_priority(tag, INT_MAX) == 0);
    ck_assert(ra_tag_get_priority(tag, &priority) == 0 &&
               priority == INT_MAX);
    ck_assert(ra_tag_set_priority(tag, INT_MIN) == 0);
    ck_assert(ra_tag_get_priority(tag, &priority) == 0 &&
               priority == INT_MIN);
    ck_assert(ra_tag_destroy(tag) == 0);
    again = ra_tag_create("another");
    ck_assert(again == tag);
    ck_assert(ra_tag_get_priority(again, &priority) == 0 && priority == 0);
}
END_TEST

static Suite *pressure_suite(void)
{
    Suite *s = suite_create("pressure");
    TCase *sources = tcase_create("sources");
    TCase *rises = tcase_create("rises");
    TCase *tc;

    tcase_set_timeout(sources, 120);
    tcase_add_test(sources, test_pressure_no_limit_no_thread);
    tcase_add_test(sources, test_pressure_limit_from_the_call);
    tcase_add_test(sources, test_pressure_limit_from_the_variable);
    tcase_add_test(sources, test_pressure_limit_from_the_cgroup);
    tcase_add_test(sources, test_pressure_percentage_of_the_cgroup);
    tcase_add_test(sources, test_pressure_bad_values_warn_once);
    tcase_add_test(sources, test_pressure_errors);
    tcase_add_test(sources, test_pressure_priority_reads_back);
    suite_add_tcase(s, sources);
    tc = tcase_create("edges");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_pressure_limit_set_at_the_edges, 0,
                        sizeof edges / sizeof edges[0]);
    tcase_add_loop_test(tc, test_pressure_variable_at_the_edges, 0,
                        sizeof edges / sizeof edges[0]);
    suite_add_tcase(s, tc);
    tcase_set_timeout(rises, 240);
    tcase_add_test(rises, test_pressure_rises_refuse_by_priority);
    tcase_add_test(rises, test_pressure_fork_with_the_watcher);
    tcase_add_test(rises, test_pressure_burst_stops_at_the_limit);
    tcase_add_test(rises, test_pressure_freed_memory_serves_at_once);
    suite_add_tcase(s, rises);
    return s;
}

int main(int argc, char **argv)
{
    static const struct tu_child children[] = {
        {"no_limit", child_no_limit},
        {"call", child_call},
        {"env_512m", child_env_512m},
        {"cgroup_1g", child_cgroup_1g},
        {"cgroup_high_768m", child_cgroup_high_768m},
        {"half_of_cgroup", child_half_of_cgroup},
        {"bad_value", child_bad_value},
        {"rises", child_rises},
        {"forks", child_forks},
        {"burst", child_burst},
        {"freed_serves", child_freed_serves},
        {"edge", child_edge},
        {NULL, NULL},
    };

    tu_child_main(argc, argv, children);
    return tu_run_suite(pressure_suite());
}

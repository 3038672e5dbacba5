/* Suite "config": the environment variables of regionalloc(3), read
 * once at first use; bad values cost one line on stderr and the default. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "regionalloc.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
#define DEFAULT_REGION_SIZE ((size_t)64 << 30)
#define DEFAULT_MAX_TAGS 256u

/* Exit status of a child that found the library in pass-through mode where
 * either mode is allowed. */
#define CHILD_PASS_THROUGH 10

static char err[8192];

/* Runs fn in a child under env and checks it succeeded; err holds its
 * stderr afterwards. */
static void run_child(const char *const env[], int (*fn)(void))
{
    int status = tu_run_with_env(env, fn, err, sizeof err);

    ck_assert_msg(status == 0, "child exited with %d; stderr: %s", status,
                  err);
}

/* err is exactly one line, from the library, naming var (as "var=") and
 * the default it used. */
static void assert_one_warning(const char *var, const char *default_used)
{
    char named[64];
    const char *def;

    snprintf(named, sizeof named, "%s=", var);
    ck_assert_msg(tu_count_lines(err) == 1, "want one line, got: %s", err);
    ck_assert_msg(err[strlen(err) - 1] == '\n', "unterminated line: %s", err);
    ck_assert_msg(strncmp(err, "regionalloc: ", 13) == 0, "line: %s", err);
    ck_assert_msg(strstr(err, named) != NULL, "%s not named in: %s", var,
                  err);
    def = strstr(err, "default");
    ck_assert_msg(def != NULL, "no default named in: %s", err);
    ck_assert_msg(strstr(def, default_used) != NULL,
                  "default %s not named in: %s", default_used, err);
}

static void assert_no_output(void)
{
    ck_assert_msg(err[0] == '\0', "unexpected stderr: %s", err);
}

/* -- children: what the library does under a given environment ------------ */

/* Tagging is on and a tag's region has the default size. */
static int child_uses_default_region_size(void)
{
    ra_tag_stats_t st;
    ra_tag_t t;
    void *p;

    TU_REQUIRE(ra_enabled() == 1);
    t = ra_tag_create("t");
    TU_REQUIRE(t == 1);
    p = ra_malloc_tag(t, 100);
    TU_REQUIRE(p != NULL && ra_tag_of(p) == t);
    TU_REQUIRE(ra_tag_stats(t, &st) == 0);
    TU_REQUIRE(st.reserved == DEFAULT_REGION_SIZE);
    ra_free(p);
    return 0;
}

/* Exactly DEFAULT_MAX_TAGS tags can be created. */
static int child_uses_default_max_tags(void)
{
    TU_REQUIRE(ra_enabled() == 1);
    for (unsigned i = 1; i <= DEFAULT_MAX_TAGS; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%u", i);
        TU_REQUIRE(ra_tag_create(name) == i);
    }
    errno = 0;
    TU_REQUIRE(ra_tag_create("one-more") == RA_TAG_NONE);
    TU_REQUIRE(errno == ENOSPC);
    TU_REQUIRE(ra_tag_count() == DEFAULT_MAX_TAGS);
    return 0;
}

/* The pools' defaults: 4 threads per arena, as many arenas as CPUs. Nine
 * threads alive at once under one tag make a pool of 3 arenas, fewer on a
 * machine with fewer CPUs. */
static ra_tag_t pool_tag;
static pthread_barrier_t pool_barrier;

static void *pool_thread(void *arg)
{
    (void)arg;
    /* A busy pair: the pool counts those. */
    tu_make_busy(pool_tag);
    pthread_barrier_wait(&pool_barrier);
    return NULL;
}

static unsigned usable_cpus(void)
{
    cpu_set_t set;

    return sched_getaffinity(0, sizeof set, &set) == 0
               ? (unsigned)CPU_COUNT(&set)
               : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
}

static int child_uses_default_pools(void)
{
    pthread_t t[9];
    unsigned want = usable_cpus() < 3 ? usable_cpus() : 3;

    pool_tag = ra_tag_create("shared");
    TU_REQUIRE(pool_tag != RA_TAG_NONE);
    TU_REQUIRE(pthread_barrier_init(&pool_barrier, NULL, 9) == 0);
    for (unsigned i = 0; i < 9; i++)
        TU_REQUIRE(pthread_create(&t[i], NULL, pool_thread, NULL) == 0);
    for (unsigned i = 0; i < 9; i++)
        pthread_join(t[i], NULL);
    TU_REQUIRE(ra_tag_arenas(pool_tag, NULL, 0) == (int)want);
    return 0;
}

/* Reports the region size as the exit status: log2(reserved) - 20. */
static int child_region_size_log2_mib(void)
{
    ra_tag_stats_t st;
    ra_tag_t t = ra_tag_create("t");
    void *p;

    TU_REQUIRE(ra_enabled() == 1);
    TU_REQUIRE(t == 1);
    p = ra_malloc_tag(t, 1000);
    TU_REQUIRE(p != NULL && ra_tag_of(p) == t);
    ra_free(p);
    TU_REQUIRE(ra_tag_stats(t, &st) == 0);
    TU_REQUIRE(st.reserved != 0 && (st.reserved & (st.reserved - 1)) == 0);
    TU_REQUIRE(st.reserved >= 4 * MIB);
    return 100 + __builtin_ctzll(st.reserved) - 20;
}

static int child_max_tags_three(void)
{
    TU_REQUIRE(ra_tag_create("a") == 1);
    TU_REQUIRE(ra_tag_create("b") == 2);
    TU_REQUIRE(ra_tag_create("c") == 3);
    errno = 0;
    TU_REQUIRE(ra_tag_create("d") == RA_TAG_NONE);
    TU_REQUIRE(errno == ENOSPC);
    TU_REQUIRE(ra_tag_count() == 3);
    errno = 0;
    TU_REQUIRE(ra_tag_lookup("d") == RA_TAG_NONE);
    TU_REQUIRE(errno == ENOENT);
    /* Get-or-create of an existing name still works when full. */
    TU_REQUIRE(ra_tag_create("b") == 2);
    return 0;
}

static int child_max_tags_one(void)
{
    void *p;

    TU_REQUIRE(ra_tag_create("only") == 1);
    errno = 0;
    TU_REQUIRE(ra_tag_create("second") == RA_TAG_NONE);
    TU_REQUIRE(errno == ENOSPC);
    p = ra_malloc_tag(1, 64);
    TU_REQUIRE(p != NULL && ra_tag_of(p) == 1);
    ra_free(p);
    return 0;
}

/* Everything the contract promises in pass-through mode. */
static int child_pass_through(void)
{
    int priority;
    ra_tag_stats_t st;
    ra_tag_t t;
    void *p, *q, *r;

    TU_REQUIRE(ra_enabled() == 0);
    errno = 0;
    TU_REQUIRE(ra_tag_stats(RA_TAG_NONE, &st) == -1);
    TU_REQUIRE(errno == ENOTSUP);
    errno = 0;
    TU_REQUIRE(ra_purge_all() == -1);
    TU_REQUIRE(errno == ENOTSUP);
    errno = 0;
    TU_REQUIRE(ra_tag_purge(RA_TAG_NONE) == -1);
    TU_REQUIRE(errno == ENOTSUP);

    t = ra_tag_create("pass");
    TU_REQUIRE(t == 1);
    TU_REQUIRE(ra_tag_lookup("pass") == t);
    TU_REQUIRE(strcmp(ra_tag_name(t), "pass") == 0);
    TU_REQUIRE(ra_tag_count() == 1);
    errno = 0;
    TU_REQUIRE(ra_tag_stats(t, &st) == -1);
    TU_REQUIRE(errno == ENOTSUP);
    errno = 0;
    TU_REQUIRE(ra_tag_purge(t) == -1);
    TU_REQUIRE(errno == ENOTSUP);
    errno = 0;
    TU_REQUIRE(ra_tag_set_priority(t, 1) == -1);
    TU_REQUIRE(errno == ENOTSUP);
    errno = 0;
    TU_REQUIRE(ra_tag_get_priority(t, &priority) == -1);
    TU_REQUIRE(errno == ENOTSUP);

    TU_REQUIRE(ra_tag_push(t) == 0);
    TU_REQUIRE(ra_tag_current() == t);
    p = ra_malloc(100);
    q = malloc(100000);
    r = ra_calloc(10, 10);
    TU_REQUIRE(p != NULL && q != NULL && r != NULL);
    TU_REQUIRE(ra_tag_of(p) == RA_TAG_NONE);
    TU_REQUIRE(ra_tag_of(q) == RA_TAG_NONE);
    TU_REQUIRE(ra_tag_of(r) == RA_TAG_NONE);
    memset(p, 1, 100);
    p = ra_realloc(p, 1 << 20);
    TU_REQUIRE(p != NULL && ra_tag_of(p) == RA_TAG_NONE);
    TU_REQUIRE(((unsigned char *)p)[99] == 1);
    TU_REQUIRE(ra_tag_pop(t) == 0);
    ra_free(p);
    free(q);
    ra_free(r);
    p = ra_malloc_tag(t, 4096);
    TU_REQUIRE(p != NULL && ra_tag_of(p) == RA_TAG_NONE);
    ra_free(p);
    ra_thread_flush();
    return 0;
}

/* Tagging on or off, allocation works; the status says which. */
static int child_allocates_either_way(void)
{
    ra_tag_t t = ra_tag_create("either");
    int enabled = ra_enabled();
    void *p;

    TU_REQUIRE(t == 1);
    TU_REQUIRE(ra_tag_push(t) == 0);
    p = ra_malloc(1000);
    TU_REQUIRE(p != NULL);
    TU_REQUIRE(ra_tag_of(p) == (enabled ? t : RA_TAG_NONE));
    ra_free(p);
    TU_REQUIRE(ra_tag_pop(t) == 0);
    if (enabled) {
        ra_tag_stats_t st;
        TU_REQUIRE(ra_tag_stats(t, &st) == 0);
        TU_REQUIRE(st.reserved >= 4 * MIB && st.reserved < ((size_t)64 << 40));
        TU_REQUIRE((st.reserved & (st.reserved - 1)) == 0);
        return 0;
    }
    return CHILD_PASS_THROUGH;
}

/* Leaves the library too little address space for any reservation. */
static int child_no_address_space(void)
{
    unsigned long pages = 0, resident = 0;
    struct rlimit lim;
    FILE *f = fopen("/proc/self/statm", "r");
    void *p;

    TU_REQUIRE(f != NULL);
    TU_REQUIRE(fscanf(f, "%lu %lu", &pages, &resident) == 2);
    fclose(f);
    /* The smallest reservation is 256 regions of 4 MiB: 1 GiB. */
    lim.rlim_cur = lim.rlim_max =
        pages * (unsigned long)sysconf(_SC_PAGESIZE) + 256 * MIB;
    TU_REQUIRE(setrlimit(RLIMIT_AS, &lim) == 0);
    TU_REQUIRE(ra_enabled() == 0);
    TU_REQUIRE(ra_tag_create("t") == 1);
    TU_REQUIRE(ra_tag_push(1) == 0);
    p = malloc(1000);
    TU_REQUIRE(p != NULL && ra_tag_of(p) == RA_TAG_NONE);
    free(p);
    return 0;
}

/* Creates a tag holding a live block and leaves through exit(0). */
static int child_stats_report(void)
{
    ra_tag_t t = ra_tag_create("reported-tag");
    void *p;

    TU_REQUIRE(t == 1);
    p = ra_malloc_tag(t, 1000);
    TU_REQUIRE(p != NULL);
    exit(0);
}

/* -- bad values ----------------------------------------------------------- */

struct bad_value {
    const char *setting;      /* NAME=value */
    const char *var;          /* NAME */
    const char *default_used; /* as the line should name it */
    int (*check)(void);       /* proves the default is in effect */
};

static const struct bad_value bad_values[] = {
    {"REGIONALLOC=banana", "REGIONALLOC", "1", child_uses_default_region_size},
    {"REGIONALLOC=", "REGIONALLOC", "1", child_uses_default_region_size},
    {"REGIONALLOC=2", "REGIONALLOC", "1", child_uses_default_region_size},
    {"REGIONALLOC_MAX_TAGS=0", "REGIONALLOC_MAX_TAGS", "256",
     child_uses_default_max_tags},
    {"REGIONALLOC_MAX_TAGS=-5", "REGIONALLOC_MAX_TAGS", "256",
     child_uses_default_max_tags},
    {"REGIONALLOC_MAX_TAGS=99999", "REGIONALLOC_MAX_TAGS", "256",
     child_uses_default_max_tags},
    {"REGIONALLOC_MAX_TAGS=abc", "REGIONALLOC_MAX_TAGS", "256",
     child_uses_default_max_tags},
    {"REGIONALLOC_MAX_TAGS=", "REGIONALLOC_MAX_TAGS", "256",
     child_uses_default_max_tags},
    {"REGIONALLOC_MAX_TAGS=12tags", "REGIONALLOC_MAX_TAGS", "256",
     child_uses_default_max_tags},
    {"REGIONALLOC_REGION_SIZE=3M", "REGIONALLOC_REGION_SIZE", "64G",
     child_uses_default_region_size},
    {"REGIONALLOC_REGION_SIZE=1K", "REGIONALLOC_REGION_SIZE", "64G",
     child_uses_default_region_size},
    {"REGIONALLOC_REGION_SIZE=12Q", "REGIONALLOC_REGION_SIZE", "64G",
     child_uses_default_region_size},
    {"REGIONALLOC_REGION_SIZE=", "REGIONALLOC_REGION_SIZE", "64G",
     child_uses_default_region_size},
    {"REGIONALLOC_REGION_SIZE=-16M", "REGIONALLOC_REGION_SIZE", "64G",
     child_uses_default_region_size},
    {"REGIONALLOC_REGION_SIZE=99999999999999999999999G",
     "REGIONALLOC_REGION_SIZE", "64G", child_uses_default_region_size},
    {"REGIONALLOC_THREADS_PER_ARENA=0", "REGIONALLOC_THREADS_PER_ARENA", "4",
     child_uses_default_pools},
    {"REGIONALLOC_THREADS_PER_ARENA=many", "REGIONALLOC_THREADS_PER_ARENA",
     "4", child_uses_default_pools},
    {"REGIONALLOC_THREADS_PER_ARENA=70000", "REGIONALLOC_THREADS_PER_ARENA",
     "4", child_uses_default_pools},
    /* The format only shows at exit: check_report proves that text is then
     * written; here the library must simply carry on. */
    {"REGIONALLOC_STATS_FORMAT=xml", "REGIONALLOC_STATS_FORMAT", "text",
     child_uses_default_region_size},
    {"REGIONALLOC_STATS_FORMAT=JSON", "REGIONALLOC_STATS_FORMAT", "text",
     child_uses_default_region_size},
    {"REGIONALLOC_STATS_FORMAT=", "REGIONALLOC_STATS_FORMAT", "text",
     child_uses_default_region_size},
    /* Which process is watched shows at exit and at load (test_run.sh,
     * the unit suite); here the library must carry on. */
    {"REGIONALLOC_PROGRAM_PID=me", "REGIONALLOC_PROGRAM_PID",
     "(every process watched)", child_uses_default_region_size},
    {"REGIONALLOC_PROGRAM_PID=0", "REGIONALLOC_PROGRAM_PID",
     "(every process watched)", child_uses_default_region_size},
    {"REGIONALLOC_CHILDREN=yes", "REGIONALLOC_CHILDREN", "0",
     child_uses_default_region_size},
};

START_TEST(test_config_bad_value_warns_once_and_uses_default)
{
    const struct bad_value *b = &bad_values[_i];
    const char *env[] = {b->setting, NULL};

    run_child(env, b->check);
    assert_one_warning(b->var, b->default_used);
}
END_TEST

START_TEST(test_config_bad_values_warn_once_each)
{
    static const char *const env[] = {
        "REGIONALLOC=yes", "REGIONALLOC_MAX_TAGS=lots",
        "REGIONALLOC_REGION_SIZE=big", "REGIONALLOC_STATS_FORMAT=csv", NULL};

    run_child(env, child_uses_default_max_tags);
    ck_assert_msg(tu_count_lines(err) == 4, "want four lines, got: %s", err);
    ck_assert_ptr_nonnull(strstr(err, "REGIONALLOC=\"yes\""));
    ck_assert_ptr_nonnull(strstr(err, "REGIONALLOC_MAX_TAGS="));
    ck_assert_ptr_nonnull(strstr(err, "REGIONALLOC_REGION_SIZE="));
    ck_assert_ptr_nonnull(strstr(err, "REGIONALLOC_STATS_FORMAT=\"csv\""));
}
END_TEST

/* The default named is this machine's CPU count. */
START_TEST(test_config_bad_tag_arenas_uses_the_cpu_count)
{
    static const char *const settings[] = {"REGIONALLOC_TAG_ARENAS=0",
                                           "REGIONALLOC_TAG_ARENAS=65",
                                           "REGIONALLOC_TAG_ARENAS=x"};
    char cpus[16];
    unsigned n = usable_cpus();

    snprintf(cpus, sizeof cpus, "%u", n > 64 ? 64 : n);
    for (unsigned i = 0; i < 3; i++) {
        const char *env[] = {settings[i], NULL};
        run_child(env, child_uses_default_pools);
        assert_one_warning("REGIONALLOC_TAG_ARENAS", cpus);
    }
}
END_TEST

START_TEST(test_config_warning_is_printed_only_at_first_use)
{
    static const char *const env[] = {"REGIONALLOC_MAX_TAGS=abc", NULL};

    /* child_uses_default_max_tags makes hundreds of calls that read the
     * configuration; the line still appears once. */
    run_child(env, child_uses_default_max_tags);
    assert_one_warning("REGIONALLOC_MAX_TAGS", "256");
}
END_TEST

/* -- good values ---------------------------------------------------------- */

struct good_size {
    const char *setting;
    unsigned log2_mib; /* log2 of the region size in MiB */
};

static const struct good_size good_sizes[] = {
    {"REGIONALLOC_REGION_SIZE=16M", 4},
    {"REGIONALLOC_REGION_SIZE=1G", 10},
    {"REGIONALLOC_REGION_SIZE=32m", 5},
    {"REGIONALLOC_REGION_SIZE=64MiB", 6},
    {"REGIONALLOC_REGION_SIZE=4M", 2},
    {"REGIONALLOC_REGION_SIZE=2g", 11},
    {"REGIONALLOC_REGION_SIZE=8192K", 3},
    {"REGIONALLOC_REGION_SIZE=4194304", 2},
    {"REGIONALLOC_REGION_SIZE=64G", 16},
};

START_TEST(test_config_region_size_parses)
{
    const struct good_size *g = &good_sizes[_i];
    const char *env[] = {g->setting, NULL};
    int status = tu_run_with_env(env, child_region_size_log2_mib, err,
                                 sizeof err);

    ck_assert_msg(status == 100 + (int)g->log2_mib,
                  "%s: status %d, want %d (region of 2^%u MiB); stderr: %s",
                  g->setting, status, 100 + (int)g->log2_mib, g->log2_mib,
                  err);
    assert_no_output();
}
END_TEST

START_TEST(test_config_unset_uses_defaults)
{
    static const char *const env[] = {NULL};

    run_child(env, child_uses_default_region_size);
    assert_no_output();
    run_child(env, child_uses_default_max_tags);
    assert_no_output();
}
END_TEST

START_TEST(test_config_max_tags_limits_count)
{
    static const char *const three[] = {"REGIONALLOC_MAX_TAGS=3", NULL};
    static const char *const one[] = {"REGIONALLOC_MAX_TAGS=1", NULL};

    run_child(three, child_max_tags_three);
    assert_no_output();
    run_child(one, child_max_tags_one);
    assert_no_output();
}
END_TEST

START_TEST(test_config_enabled_one_is_tagging)
{
    static const char *const env[] = {"REGIONALLOC=1", NULL};

    run_child(env, child_uses_default_region_size);
    assert_no_output();
}
END_TEST

START_TEST(test_config_env_read_once_at_first_use)
{
    ra_tag_stats_t st;
    ra_tag_t t;

    ck_assert_int_eq(setenv("REGIONALLOC_REGION_SIZE", "16M", 1), 0);
    t = ra_tag_create("first");
    ck_assert_uint_eq(t, 1);
    /* Changing the environment afterwards changes nothing. */
    ck_assert_int_eq(setenv("REGIONALLOC_REGION_SIZE", "1G", 1), 0);
    ck_assert_int_eq(setenv("REGIONALLOC", "0", 1), 0);
    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "1", 1), 0);
    ck_assert_int_eq(ra_enabled(), 1);
    ck_assert_uint_eq(ra_tag_create("second"), 2);
    ck_assert_int_eq(ra_tag_stats(2, &st), 0);
    ck_assert_uint_eq(st.reserved, 16 * MIB);
}
END_TEST

/* -- pass-through mode ---------------------------------------------------- */

START_TEST(test_config_disabled_is_pass_through)
{
    static const char *const env[] = {"REGIONALLOC=0", NULL};

    run_child(env, child_pass_through);
    assert_no_output();
}
END_TEST

START_TEST(test_config_disabled_ignores_other_variables)
{
    static const char *const env[] = {"REGIONALLOC=0",
                                      "REGIONALLOC_REGION_SIZE=4M",
                                      "REGIONALLOC_MAX_TAGS=2", NULL};

    run_child(env, child_pass_through);
    assert_no_output();
}
END_TEST

/* -- reservation ---------------------------------------------------------- */

START_TEST(test_config_reservation_too_big_retries_or_passes_through)
{
    static const char *const env[] = {"REGIONALLOC_MAX_TAGS=4000",
                                      "REGIONALLOC_REGION_SIZE=64T", NULL};
    int status = tu_run_with_env(env, child_allocates_either_way, err,
                                 sizeof err);

    ck_assert_msg(status == 0 || status == CHILD_PASS_THROUGH,
                  "child exited with %d; stderr: %s", status, err);
    ck_assert_msg(tu_count_lines(err) == 1, "want one line, got: %s", err);
    ck_assert_msg(strncmp(err, "regionalloc: ", 13) == 0, "line: %s", err);
    ck_assert_msg(strstr(err, "64T") != NULL, "size not named: %s", err);
    if (status == CHILD_PASS_THROUGH)
        ck_assert_msg(strstr(err, "pass-through") != NULL, "line: %s", err);
    else
        ck_assert_msg(strstr(err, "using regions of") != NULL, "line: %s",
                      err);
}
END_TEST

START_TEST(test_config_no_address_space_falls_back_to_pass_through)
{
    static const char *const env[] = {NULL};

    run_child(env, child_no_address_space);
    ck_assert_msg(tu_count_lines(err) == 1, "want one line, got: %s", err);
    ck_assert_msg(strncmp(err, "regionalloc: ", 13) == 0, "line: %s", err);
    ck_assert_msg(strstr(err, "pass-through") != NULL, "line: %s", err);
}
END_TEST

/* -- REGIONALLOC_STATS ---------------------------------------------------- */

/* Reads path into buf (NUL-terminated). */
static void read_file(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t got;

    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    got = fread(buf, 1, len - 1, f);
    buf[got] = '\0';
    fclose(f);
}

/* The report has a header naming "allocated", then rows starting with the
 * tag's name and with "untagged". */
static void assert_report(const char *report, const char *tag)
{
    const char *nl = strchr(report, '\n');
    char row[96];

    ck_assert_msg(nl != NULL, "no header line: %s", report);
    ck_assert_msg(memmem(report, (size_t)(nl - report), "allocated", 9) !=
                      NULL,
                  "header without \"allocated\": %s", report);
    snprintf(row, sizeof row, "\n%s ", tag);
    ck_assert_msg(strstr(report, row) != NULL, "no row for %s: %s", tag,
                  report);
    ck_assert_msg(strstr(report, "\nuntagged ") != NULL,
                  "no untagged row: %s", report);
}

START_TEST(test_config_stats_file_written_at_exit)
{
    char path[4096], setting[4200], report[8192];
    const char *dir = getenv("TMPDIR");
    const char *env[] = {setting, NULL};
    int fd;

    snprintf(path, sizeof path, "%s/check_config.XXXXXX",
             dir != NULL && dir[0] != '\0' ? dir : "/tmp");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    snprintf(setting, sizeof setting, "REGIONALLOC_STATS=%s", path);
    ck_assert_int_eq(tu_exec_self(env, "stats_report", err, sizeof err), 0);
    read_file(path, report, sizeof report);
    unlink(path);
    assert_no_output();
    assert_report(report, "reported-tag");
}
END_TEST

START_TEST(test_config_stats_to_stderr)
{
    static const char *const env[] = {"REGIONALLOC_STATS=stderr", NULL};

    ck_assert_int_eq(tu_exec_self(env, "stats_report", err, sizeof err), 0);
    assert_report(err, "reported-tag");
}
END_TEST

START_TEST(test_config_stats_unwritable_path_warns_once)
{
    static const char *const env[] = {
        "REGIONALLOC_STATS=/nonexistent-dir/x", NULL};

    ck_assert_int_eq(tu_exec_self(env, "stats_report", err, sizeof err), 0);
    ck_assert_msg(tu_count_lines(err) == 1, "want one line, got: %s", err);
    ck_assert_msg(strncmp(err, "regionalloc: ", 13) == 0, "line: %s", err);
    ck_assert_msg(strstr(err, "REGIONALLOC_STATS") != NULL, "line: %s", err);
    ck_assert_msg(strstr(err, "/nonexistent-dir/x") != NULL, "line: %s", err);
}
END_TEST

START_TEST(test_config_stats_in_pass_through_mode)
{
    static const char *const env[] = {"REGIONALLOC_STATS=stderr",
                                      "REGIONALLOC=0", NULL};

    ck_assert_int_eq(tu_exec_self(env, "stats_report", err, sizeof err), 0);
    ck_assert_msg(strstr(err, "pass-through") != NULL, "stderr: %s", err);
}
END_TEST


/* -- MALLOC_CONF ------------------------------------------------------------ */

struct workout_arg {
    ra_tag_t tag;
    int failed;
};

/* Allocates, reallocates and frees blocks of every kind under the tag, then
 * flushes its caches. */
static void *workout_thread(void *p)
{
    struct workout_arg *arg = p;
    void *blocks[300];

    if (ra_tag_push(arg->tag) != 0) {
        arg->failed = 1;
        return NULL;
    }
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned i = 0; i < 300; i++) {
            size_t size = i % 50 == 0 ? (i + 1) * 16384 : (i % 7) * 100 + 1;
            blocks[i] = i % 3 ? ra_malloc(size) : ra_calloc(1, size);
            if (blocks[i] == NULL || ra_tag_of(blocks[i]) != arg->tag)
                arg->failed = 1;
            if (blocks[i] != NULL)
                memset(blocks[i], 0x5a, size);
        }
        for (unsigned i = 0; i < 300; i += 2) {
            void *q = ra_realloc(blocks[i], i * 37 + 5);
            if (q == NULL || ra_tag_of(q) != arg->tag)
                arg->failed = 1;
            else
                blocks[i] = q;
        }
        for (unsigned i = 0; i < 300; i++)
            ra_free(blocks[i]);
    }
    ra_tag_pop(arg->tag);
    ra_thread_flush();
    return NULL;
}

/* The library under whatever MALLOC_CONF the test set: tags, threads,
 * exact stats, purge, reports, checkpoints and the profiler all work. */
static int child_malloc_conf_workout(void)
{
    struct workout_arg args[2];
    pthread_t threads[2];
    ra_tag_stats_t st;
    FILE *devnull = fopen("/dev/null", "w");

    TU_REQUIRE(devnull != NULL);
    TU_REQUIRE(ra_enabled() == 1);
    TU_REQUIRE(ra_prof_start(64 << 10) == 0);
    for (unsigned i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "conf-%u", i);
        args[i].tag = ra_tag_create(name);
        args[i].failed = 0;
        TU_REQUIRE(args[i].tag != RA_TAG_NONE);
        TU_REQUIRE(pthread_create(&threads[i], NULL, workout_thread,
                                  &args[i]) == 0);
    }
    for (unsigned i = 0; i < 2; i++) {
        TU_REQUIRE(pthread_join(threads[i], NULL) == 0);
        TU_REQUIRE(args[i].failed == 0);
        TU_REQUIRE(ra_tag_stats(args[i].tag, &st) == 0);
        /* 900 allocations and 450 reallocations, each a free and an
         * allocation. */
        TU_REQUIRE(st.nmalloc == 1350 && st.ndalloc == 1350);
        TU_REQUIRE(st.allocated == 0);
        /* jemalloc skips a purge of an arena that its background thread
         * (background_thread:true) is purging, down to its decay limit
         * only: the next purge gives back the rest (regionalloc(3)). */
        for (unsigned tries = 0;; tries++) {
            TU_REQUIRE(ra_tag_purge(args[i].tag) == 0);
            TU_REQUIRE(ra_tag_stats(args[i].tag, &st) == 0);
            if (st.dirty == 0)
                break;
            TU_REQUIRE(tries < 1000);
            usleep(10000);
        }
    }
    TU_REQUIRE(ra_checkpoint("workout") == 0);
    TU_REQUIRE(ra_report(devnull, RA_FORMAT_JSON) == 0);
    TU_REQUIRE(ra_checkpoint_report(devnull, RA_FORMAT_PROMETHEUS) == 0);
    TU_REQUIRE(ra_prof_dump(devnull, RA_PROF_PPROF, RA_TAG_ALL) == 0);
    TU_REQUIRE(ra_purge_all() == 0);
    TU_REQUIRE(fclose(devnull) == 0);
    return 0;
}

struct malloc_conf_case {
    const char *conf;
    const char *warning; /* what the one line says, or NULL: no line */
};

/* jemalloc's options that change how arenas work. The library honours
 * each, or says on one line what it cannot. */
static const struct malloc_conf_case malloc_confs[] = {
    {"retain:false", "retain:false"},
    {"tcache:false", NULL},
    {"narenas:1", NULL},
    {"percpu_arena:percpu", NULL},
    {"percpu_arena:phycpu", NULL},
    {"background_thread:true", NULL},
    {"dirty_decay_ms:0", NULL},
    {"muzzy_decay_ms:0", NULL},
    {"dirty_decay_ms:0,muzzy_decay_ms:0", NULL},
    {"dirty_decay_ms:-1,muzzy_decay_ms:-1", NULL},
    {"hpa:true", "hpa:true"},
    {"zero:true", NULL},
    {"junk:true", NULL},
    {"oversize_threshold:0", NULL},
    {"oversize_threshold:4096", NULL},
    {"tcache_max:0", NULL},
    {"metadata_thp:always", NULL},
    {"prof:true", NULL},
    {"abort_conf:true,retain:false,background_thread:true", "retain:false"},
};

START_TEST(test_config_every_malloc_conf_keeps_the_library_working)
{
    const struct malloc_conf_case *c = &malloc_confs[_i];
    char setting[128];
    const char *env[] = {setting, NULL};
    int status;

    snprintf(setting, sizeof setting, "MALLOC_CONF=%s", c->conf);
    status = tu_exec_self(env, "malloc_conf_workout", err, sizeof err);
    ck_assert_msg(status == 0, "%s: exit %d; stderr: %s", c->conf, status,
                  err);
    if (c->warning == NULL) {
        ck_assert_msg(err[0] == '\0', "%s: unexpected stderr: %s", c->conf,
                      err);
        return;
    }
    ck_assert_msg(tu_count_lines(err) == 1, "%s: want one line, got: %s",
                  c->conf, err);
    ck_assert_msg(strncmp(err, "regionalloc: ", 13) == 0 &&
                      strstr(err, c->warning) != NULL,
                  "%s: line: %s", c->conf, err);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc;

    tc = tcase_create("bad values");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_config_bad_value_warns_once_and_uses_default,
                        0, sizeof bad_values / sizeof bad_values[0]);
    tcase_add_test(tc, test_config_bad_values_warn_once_each);
    tcase_add_test(tc, test_config_bad_tag_arenas_uses_the_cpu_count);
    tcase_add_test(tc, test_config_warning_is_printed_only_at_first_use);
    suite_add_tcase(s, tc);

    tc = tcase_create("good values");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_config_region_size_parses, 0,
                        sizeof good_sizes / sizeof good_sizes[0]);
    tcase_add_test(tc, test_config_unset_uses_defaults);
    tcase_add_test(tc, test_config_max_tags_limits_count);
    tcase_add_test(tc, test_config_enabled_one_is_tagging);
    tcase_add_test(tc, test_config_env_read_once_at_first_use);
    suite_add_tcase(s, tc);

    tc = tcase_create("pass-through mode");
    tcase_add_test(tc, test_config_disabled_is_pass_through);
    tcase_add_test(tc, test_config_disabled_ignores_other_variables);
    suite_add_tcase(s, tc);

    tc = tcase_create("reservation");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc,
                   test_config_reservation_too_big_retries_or_passes_through);
    tcase_add_test(tc,
                   test_config_no_address_space_falls_back_to_pass_through);
    suite_add_tcase(s, tc);

    tc = tcase_create("MALLOC_CONF");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc,
                        test_config_every_malloc_conf_keeps_the_library_working,
                        0, sizeof malloc_confs / sizeof malloc_confs[0]);
    suite_add_tcase(s, tc);

    tc = tcase_create("stats at exit");
    tcase_add_test(tc, test_config_stats_file_written_at_exit);
    tcase_add_test(tc, test_config_stats_to_stderr);
    tcase_add_test(tc, test_config_stats_unwritable_path_warns_once);
    tcase_add_test(tc, test_config_stats_in_pass_through_mode);
    suite_add_tcase(s, tc);

    return s;
}

int main(int argc, char **argv)
{
    static const struct tu_child children[] = {
        {"stats_report", child_stats_report},
        {"malloc_conf_workout", child_malloc_conf_workout},
        {NULL, NULL},
    };

    tu_child_main(argc, argv, children);
    return tu_run_suite(config_suite());
}

/* Suite "thread tags": REGIONALLOC_THREAD_TAGS gives a thread whose name
 * matches a rule a base tag, below its stack: named by the thread itself
 * (pthread_setname_np, prctl) or by another thread, inherited at start.
 * Every test is a child run with the variable set, since the library reads
 * it once. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include "regionalloc.h"
#include "testutil.h"

#define RULES "worker-*=workers,io*,a*=first,ab*=second"

/* The tag that a fresh block of the calling thread lands in. */
static ra_tag_t tag_of_new_block(void)
{
    void *p = malloc(1000);
    ra_tag_t tag = ra_tag_of(p);

    free(p);
    return tag;
}

static bool tagged(const char *name)
{
    ra_tag_t tag = ra_tag_lookup(name);

    return tag != RA_TAG_NONE && tag_of_new_block() == tag &&
           ra_tag_current() == tag;
}

/* -- children ------------------------------------------------------------------ */

static int child_self_naming(void)
{
    ra_tag_t other = ra_tag_create("other");

    TU_REQUIRE(tag_of_new_block() == RA_TAG_NONE);
    TU_REQUIRE(pthread_setname_np(pthread_self(), "worker-1") == 0);
    TU_REQUIRE(tagged("workers"));
    /* Pushes work above the base, pops come back to it. */
    TU_REQUIRE(ra_tag_push(other) == 0);
    TU_REQUIRE(tag_of_new_block() == other);
    TU_REQUIRE(ra_tag_pop(other) == 0);
    TU_REQUIRE(tagged("workers"));
    errno = 0;
    TU_REQUIRE(ra_tag_pop(ra_tag_lookup("workers")) == -1 && errno == EINVAL);
    /* A name no rule matches: no base. */
    TU_REQUIRE(pthread_setname_np(pthread_self(), "plain") == 0);
    TU_REQUIRE(tag_of_new_block() == RA_TAG_NONE);
    TU_REQUIRE(ra_tag_current() == RA_TAG_NONE);
    /* prctl, and a rule without a tag: the thread's own name. */
    TU_REQUIRE(prctl(PR_SET_NAME, "io-loop", 0, 0, 0) == 0);
    TU_REQUIRE(tagged("io-loop"));
    /* The first rule that matches wins. */
    TU_REQUIRE(prctl(PR_SET_NAME, "abc", 0, 0, 0) == 0);
    TU_REQUIRE(tagged("first"));
    TU_REQUIRE(ra_tag_lookup("second") == RA_TAG_NONE);
    return 0;
}

static pthread_barrier_t started, named, checked;
static ra_tag_t seen;

/* Running (and so known to the library) before it is named. */
static void *wait_then_allocate(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&started);
    pthread_barrier_wait(&named);
    seen = tag_of_new_block();
    pthread_barrier_wait(&checked);
    return NULL;
}

static int child_named_by_another_thread(void)
{
    pthread_t t;

    pthread_barrier_init(&started, NULL, 2);
    pthread_barrier_init(&named, NULL, 2);
    pthread_barrier_init(&checked, NULL, 2);
    TU_REQUIRE(pthread_create(&t, NULL, wait_then_allocate, NULL) == 0);
    pthread_barrier_wait(&started);
    TU_REQUIRE(pthread_setname_np(t, "worker-9") == 0);
    pthread_barrier_wait(&named);
    pthread_barrier_wait(&checked);
    TU_REQUIRE(pthread_join(t, NULL) == 0);
    TU_REQUIRE(seen != RA_TAG_NONE && seen == ra_tag_lookup("workers"));
    /* The naming thread is not tagged by it. */
    TU_REQUIRE(tag_of_new_block() == RA_TAG_NONE);
    return 0;
}

static void *allocate_at_start(void *arg)
{
    (void)arg;
    seen = tag_of_new_block();
    return NULL;
}

static int child_name_inherited_at_start(void)
{
    pthread_t t;

    TU_REQUIRE(prctl(PR_SET_NAME, "worker-main", 0, 0, 0) == 0);
    TU_REQUIRE(tagged("workers"));
    TU_REQUIRE(pthread_create(&t, NULL, allocate_at_start, NULL) == 0);
    TU_REQUIRE(pthread_join(t, NULL) == 0);
    TU_REQUIRE(seen == ra_tag_lookup("workers"));
    return 0;
}

static void *name_and_exit(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "worker-2");
    pthread_barrier_wait(&named);
    pthread_barrier_wait(&checked);
    return NULL;
}

static int child_base_tag_cannot_be_destroyed(void)
{
    ra_tag_t workers;
    pthread_t t;
    int rc, e;

    pthread_barrier_init(&named, NULL, 2);
    pthread_barrier_init(&checked, NULL, 2);
    TU_REQUIRE(pthread_create(&t, NULL, name_and_exit, NULL) == 0);
    pthread_barrier_wait(&named);
    workers = ra_tag_lookup("workers");
    errno = 0;
    rc = ra_tag_destroy(workers);
    e = errno;
    TU_REQUIRE(rc == -1 && e == EBUSY);
    /* Nor reset: the thread allocates into its base without a push. */
    errno = 0;
    rc = ra_tag_reset(workers);
    e = errno;
    pthread_barrier_wait(&checked);
    TU_REQUIRE(rc == -1 && e == EBUSY);
    TU_REQUIRE(pthread_join(t, NULL) == 0);
    /* Its thread is gone: nothing holds it. */
    TU_REQUIRE(ra_tag_destroy(workers) == 0);
    return 0;
}

/* A FILE whose first write blocks until the test says go on: the thread
 * that writes a report to it is held inside the library's call. */
static pthread_barrier_t in_call, renamed;
static int hold_first_write;

static ssize_t blocking_write(void *cookie, const char *buf, size_t len)
{
    (void)cookie;
    (void)buf;
    if (hold_first_write) {
        hold_first_write = 0;
        pthread_barrier_wait(&in_call);
        pthread_barrier_wait(&renamed);
    }
    return (ssize_t)len;
}

/* Which of the library's calls that write to a FILE thread W is inside,
 * and what it returned. */
static int held_call, held_rc;

/* Thread W: named w-old, then held inside a report while the main thread
 * renames it, then allocates. */
static void *report_while_renamed(void *arg)
{
    cookie_io_functions_t io = {NULL, blocking_write, NULL, NULL};
    FILE *f;

    (void)arg;
    /* Untagged (made before the name gives a base): the FILE outlives the
     * old base's destruction. */
    f = fopencookie(NULL, "w", io);
    setvbuf(f, NULL, _IONBF, 0);
    pthread_setname_np(pthread_self(), "w-old");
    hold_first_write = 1;
    if (held_call == 0)
        held_rc = ra_report(f, RA_FORMAT_TEXT);
    else if (held_call == 1)
        held_rc = ra_checkpoint_report(f, RA_FORMAT_TEXT);
    else
        held_rc = ra_prof_dump(f, RA_PROF_TREE, RA_TAG_ALL);
    if (hold_first_write) { /* it wrote nothing: the test is wrong */
        held_rc = -2;
        pthread_barrier_wait(&in_call);
        pthread_barrier_wait(&renamed);
    }
    fclose(f);
    seen = tag_of_new_block();
    return NULL;
}

/* The base a thread gets by a rename while it is inside one of the
 * library's calls (whose quiet section suspends its tag) is the one its
 * allocations go to after the call: the old base, no longer anyone's, can
 * be destroyed, and nothing lands in it. */
static int child_renamed_inside_a_library_call(void)
{
    ra_tag_t sampled = ra_tag_create("sampled");
    void *kept;

    /* Something in each report: a checkpoint, a sampled block. */
    TU_REQUIRE(ra_checkpoint("start") == 0);
    TU_REQUIRE(ra_prof_start(1) == 0);
    TU_REQUIRE(ra_tag_push(sampled) == 0);
    kept = malloc(4000);
    TU_REQUIRE(ra_tag_pop(sampled) == 0);
    TU_REQUIRE(kept != NULL && ra_prof_stop() == 0);
    for (held_call = 0; held_call < 3; held_call++) {
        ra_tag_t old, new;
        pthread_t w;
        int rc;
        pthread_barrier_init(&in_call, NULL, 2);
        pthread_barrier_init(&renamed, NULL, 2);
        TU_REQUIRE(pthread_create(&w, NULL, report_while_renamed, NULL) == 0);
        pthread_barrier_wait(&in_call);
        old = ra_tag_lookup("old");
        TU_REQUIRE(old != RA_TAG_NONE);
        TU_REQUIRE(pthread_setname_np(w, "w-new") == 0);
        new = ra_tag_lookup("new");
        rc = ra_tag_destroy(old);
        pthread_barrier_wait(&renamed);
        TU_REQUIRE(pthread_join(w, NULL) == 0);
        TU_REQUIRE(held_rc == 0);
        TU_REQUIRE(rc == 0);
        TU_REQUIRE(new != RA_TAG_NONE && seen == new);
        TU_REQUIRE(ra_tag_destroy(new) == 0);
        pthread_barrier_destroy(&in_call);
        pthread_barrier_destroy(&renamed);
    }
    free(kept);
    return 0;
}

/* Whether a thread of this process is called name (/proc/self/task). */
static bool thread_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    bool found = false;

    while (d != NULL && !found && (e = readdir(d)) != NULL) {
        char path[300], comm[32];
        FILE *f;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        found = fgets(comm, sizeof comm, f) != NULL &&
                strncmp(comm, name, strlen(name)) == 0;
        fclose(f);
    }
    if (d != NULL)
        closedir(d);
    return found;
}

/* jemalloc's background thread (MALLOC_CONF background_thread, or
 * mallctl("background_thread") as redis calls it) names itself: it is the
 * allocator's, and no rule tags it, not even "*". */
static int child_jemalloc_threads_untagged(void)
{
    bool on = true;
    unsigned before;

    TU_REQUIRE(tag_of_new_block() != RA_TAG_NONE); /* "*" tags main */
    before = ra_tag_count();
    TU_REQUIRE(mallctl("background_thread", NULL, NULL, &on, sizeof on) == 0);
    for (int i = 0; i < 500 && !thread_named("jemalloc_bg_thd"); i++)
        tu_sleep_ms(10);
    TU_REQUIRE(thread_named("jemalloc_bg_thd"));
    TU_REQUIRE(ra_tag_lookup("jemalloc_bg_thd") == RA_TAG_NONE);
    TU_REQUIRE(ra_tag_count() == before);
    return 0;
}

#ifdef RA_HTTP
/* The library's own threads (the HTTP server's) never take a tag, even
 * from a rule that matches every name. */
static int child_library_threads_untagged(void)
{
    unsigned before;
    int port;

    TU_REQUIRE(pthread_setname_np(pthread_self(), "main-thread") == 0);
    TU_REQUIRE(tagged("main-thread"));
    before = ra_tag_count();
    port = ra_http_start("127.0.0.1:0");
    TU_REQUIRE(port > 0);
    TU_REQUIRE(ra_http_stop() == 0);
    TU_REQUIRE(ra_tag_count() == before);
    return 0;
}
#endif

/* Reads the configuration, nothing more. */
static int child_configured(void)
{
    return ra_enabled() ? 0 : 1;
}

static const struct tu_child children[] = {
    {"configured", child_configured},
    {"self", child_self_naming},
    {"other", child_named_by_another_thread},
    {"inherited", child_name_inherited_at_start},
    {"destroy", child_base_tag_cannot_be_destroyed},
    {"renamed-inside", child_renamed_inside_a_library_call},
    {"jemalloc", child_jemalloc_threads_untagged},
#ifdef RA_HTTP
    {"library", child_library_threads_untagged},
#endif
    {NULL, NULL},
};

static void run_child(const char *name, const char *rules)
{
    char var[256], err[2048];
    const char *env[] = {var, NULL};
    int status;

    snprintf(var, sizeof var, "REGIONALLOC_THREAD_TAGS=%s", rules);
    status = tu_exec_self(env, name, err, sizeof err);
    ck_assert_msg(status == 0, "child %s: status %d, stderr: %s", name,
                  status, err);
}

START_TEST(test_thread_tags_self_naming)
{
    run_child("self", RULES);
}
END_TEST

START_TEST(test_thread_tags_named_by_another_thread)
{
    run_child("other", RULES);
}
END_TEST

START_TEST(test_thread_tags_name_inherited_at_start)
{
    run_child("inherited", RULES);
}
END_TEST

START_TEST(test_thread_tags_base_tag_cannot_be_destroyed)
{
    run_child("destroy", RULES);
}
END_TEST

START_TEST(test_thread_tags_rename_inside_a_library_call_takes_effect)
{
    run_child("renamed-inside", "w-old=old,w-new=new");
}
END_TEST

START_TEST(test_thread_tags_jemalloc_threads_untagged)
{
    run_child("jemalloc", "*");
}
END_TEST

#ifdef RA_HTTP
START_TEST(test_thread_tags_library_threads_untagged)
{
    run_child("library", "*");
}
END_TEST
#endif

START_TEST(test_thread_tags_bad_rules_warn_once_each)
{
    static const char *const env[] = {
        "REGIONALLOC_THREAD_TAGS=ok*=fine,=x,y=,"
        "a-pattern-far-longer-than-sixty-three-bytes-xxxxxxxxxxxxxxxxxxxxxxx",
        NULL};
    char err[2048];

    ck_assert_int_eq(tu_exec_self(env, "configured", err, sizeof err), 0);
    ck_assert_msg(tu_count_lines(err) == 3 && strstr(err, "\"=x\"") != NULL &&
                      strstr(err, "\"y=\"") != NULL &&
                      strstr(err, "REGIONALLOC_THREAD_TAGS") != NULL,
                  "stderr: %s", err);
}
END_TEST

static Suite *thread_tags_suite(void)
{
    Suite *s = suite_create("thread tags");
    TCase *tc = tcase_create("naming");

    tcase_add_test(tc, test_thread_tags_self_naming);
    tcase_add_test(tc, test_thread_tags_named_by_another_thread);
    tcase_add_test(tc, test_thread_tags_name_inherited_at_start);
    tcase_add_test(tc, test_thread_tags_base_tag_cannot_be_destroyed);
    tcase_add_test(tc,
                   test_thread_tags_rename_inside_a_library_call_takes_effect);
    tcase_add_test(tc, test_thread_tags_jemalloc_threads_untagged);
#ifdef RA_HTTP
    tcase_add_test(tc, test_thread_tags_library_threads_untagged);
#endif
    tcase_add_test(tc, test_thread_tags_bad_rules_warn_once_each);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    tu_child_main(argc, argv, children);
    return tu_run_suite(thread_tags_suite());
}

/* Suite "thread tags (unit)": naming another thread while it exits, while a
 * new thread takes its pthread_t, or while it is renamed again.
 *
 * Naming a thread finds its entry, makes the tag (no lock held: the
 * registry's is taken, a purge may run) and then gives the base. The tests
 * force what can happen in that gap: the link wraps ra__tag_create, which
 * lets the named thread return and joins it (and, in one test, starts a
 * thread that glibc gives the same pthread_t), or renames the thread again,
 * before it makes the tag; and ra__tag_set_base, which must then never be
 * asked to write the base of the thread that is gone (its entry and its
 * stack were freed). Names are set in the kernel as the intercepted calls
 * set them (a thread's base follows the name the kernel holds), and the
 * library is told as its wrappers tell it (ra__thread_tags_named). */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "thread_tags.h"
#include "testutil.h"

ra_tag_t __real_ra__tag_create(ra_tag_t parent, const char *name,
                               bool anywhere, ra_tag_t *own,
                               ra_tag_t *unfit);
void __real_ra__tag_set_base(struct ra__tag_thread *t, ra_tag_t tag);

static pthread_t victim;
static _Atomic bool victim_named, victim_may_go, victim_gone;
static _Atomic unsigned writes_to_the_gone;
static _Atomic bool watching = true;
static _Atomic pid_t victim_tid;

/* The calling thread named in the kernel, as prctl(PR_SET_NAME) does (the
 * system call: the library's prctl would tell it too). */
static void name_me(const char *name)
{
    ck_assert_int_eq(syscall(SYS_prctl, PR_SET_NAME, (unsigned long)name, 0UL,
                             0UL, 0UL),
                     0);
}

/* Thread tid named in the kernel, as pthread_setname_np does. */
static void name_in_kernel(pid_t tid, const char *name)
{
    char path[64];
    int fd;

    snprintf(path, sizeof path, "/proc/self/task/%ld/comm", (long)tid);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
    ck_assert_int_eq(write(fd, name, strlen(name)), (ssize_t)strlen(name));
    close(fd);
}

static void name_self(const char *name)
{
    name_me(name);
    ra__thread_tags_named(pthread_self(), name);
}

static void *named_then_gone(void *arg)
{
    (void)arg;
    atomic_store(&victim_tid, (pid_t)syscall(SYS_gettid));
    name_self("victim");
    atomic_store(&victim_named, true);
    while (!atomic_load(&victim_may_go))
        sched_yield();
    return NULL;
}

/* What the tests below put in the gap of a naming of gap_name, once. */
static const char *gap_name;
static void (*gap)(void);

ra_tag_t __wrap_ra__tag_create(ra_tag_t parent, const char *name,
                               bool anywhere, ra_tag_t *own,
                               ra_tag_t *unfit)
{
    if (gap != NULL && strcmp(name, gap_name) == 0) {
        void (*run)(void) = gap;
        gap = NULL;
        run();
    }
    if (strcmp(name, "renamed") == 0 && !atomic_load(&victim_gone)) {
        atomic_store(&victim_may_go, true);
        ck_assert_int_eq(pthread_join(victim, NULL), 0);
        atomic_store(&victim_gone, true);
    }
    return __real_ra__tag_create(parent, name, anywhere, own, unfit);
}

void __wrap_ra__tag_set_base(struct ra__tag_thread *t, ra_tag_t tag)
{
    /* Whatever t is now (the freed entry may hold anything), a base given
     * after the thread is gone is the defect: never written. */
    if (atomic_load(&watching) && atomic_load(&victim_gone) &&
        t != ra__tag_thread_self()) {
        atomic_fetch_add(&writes_to_the_gone, 1);
        return;
    }
    __real_ra__tag_set_base(t, tag);
}

START_TEST(test_thread_tags_unit_naming_a_thread_that_exits_meanwhile)
{
    ck_assert(ra__thread_tags_on());
    ck_assert_int_eq(pthread_create(&victim, NULL, named_then_gone, NULL),
                     0);
    while (!atomic_load(&victim_named))
        sched_yield();
    ck_assert_uint_ne(ra_tag_lookup("victim"), RA_TAG_NONE);
    name_in_kernel(atomic_load(&victim_tid), "renamed");
    ra__thread_tags_named(victim, "renamed");
    unsigned bad;

    ck_assert(atomic_load(&victim_gone));
    bad = atomic_load(&writes_to_the_gone);
    ck_assert_msg(bad == 0, "%u base(s) written to a thread that exited", bad);
    /* The tag was made (the rename raced the exit, not the rule). */
    ck_assert_uint_ne(ra_tag_lookup("renamed"), RA_TAG_NONE);
}
END_TEST

static _Atomic bool renamed;
static _Atomic ra_tag_t seen;

static void *named_then_renamed(void *arg)
{
    (void)arg;
    atomic_store(&victim_tid, (pid_t)syscall(SYS_gettid));
    name_self("before");
    atomic_store(&victim_named, true);
    while (!atomic_load(&renamed))
        sched_yield();
    atomic_store(&seen, ra_tag_current());
    return NULL;
}

/* A thread that lives on takes the new base as before. */
START_TEST(test_thread_tags_unit_a_live_thread_takes_its_new_base)
{
    pthread_t t;

    /* The wrapper joins nothing, and lets every base through. */
    atomic_store(&victim_gone, true);
    atomic_store(&watching, false);
    ck_assert_int_eq(pthread_create(&t, NULL, named_then_renamed, NULL), 0);
    while (!atomic_load(&victim_named))
        sched_yield();
    name_in_kernel(atomic_load(&victim_tid), "after");
    ra__thread_tags_named(t, "after");
    atomic_store(&renamed, true);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_uint_ne(ra_tag_lookup("after"), RA_TAG_NONE);
    ck_assert_uint_eq(atomic_load(&seen), ra_tag_lookup("after"));
}
END_TEST

/* -- a new thread behind the pthread_t of one that exited -------------------- */

static pthread_t bystander;
static _Atomic bool bystander_ready, bystander_may_go;
static _Atomic ra_tag_t bystander_base;

static void *bystander_main(void *arg)
{
    (void)arg;
    name_self("bystander");
    atomic_store(&bystander_ready, true);
    while (!atomic_load(&bystander_may_go))
        sched_yield();
    atomic_store(&bystander_base, ra_tag_current());
    return NULL;
}

/* In the gap: the victim exits, and the next thread (glibc hands it the
 * victim's cached stack, descriptor and so pthread_t) names itself. */
static void victim_replaced(void)
{
    atomic_store(&victim_may_go, true);
    ck_assert_int_eq(pthread_join(victim, NULL), 0);
    ck_assert_int_eq(pthread_create(&bystander, NULL, bystander_main, NULL),
                     0);
    ck_assert_msg(pthread_equal(bystander, victim),
                  "glibc did not reuse the exited thread's pthread_t");
    while (!atomic_load(&bystander_ready))
        sched_yield();
}

/* A thread never named n-* must not take the base of a rename meant for
 * the thread that had its pthread_t before it. */
START_TEST(test_thread_tags_unit_a_new_thread_behind_the_same_id_keeps_its_base)
{
    ra_tag_t own, renamed_to;

    atomic_store(&watching, false);
    atomic_store(&victim_gone, true); /* the "renamed" gap stays shut */
    ck_assert_int_eq(pthread_create(&victim, NULL, named_then_gone, NULL),
                     0);
    while (!atomic_load(&victim_named))
        sched_yield();
    gap_name = "n-1";
    gap = victim_replaced;
    name_in_kernel(atomic_load(&victim_tid), "n-1");
    ra__thread_tags_named(victim, "n-1");
    ck_assert(gap == NULL);
    atomic_store(&bystander_may_go, true);
    ck_assert_int_eq(pthread_join(bystander, NULL), 0);
    own = ra_tag_lookup("bystander");
    renamed_to = ra_tag_lookup("n-1");
    ck_assert_uint_ne(own, RA_TAG_NONE);
    ck_assert_uint_ne(renamed_to, RA_TAG_NONE);
    ck_assert_msg(atomic_load(&bystander_base) == own,
                  "a thread never named n-1 got the base tag %u (n-1 is %u, "
                  "its own %u)",
                  atomic_load(&bystander_base), renamed_to, own);
}
END_TEST

/* -- two renames of one thread, the first one's base written last ----------- */

static pthread_t renamed_twice;

/* In the gap of the rename to "first": the thread is renamed "second", and
 * that naming runs to its end. */
static void renamed_again(void)
{
    name_in_kernel(atomic_load(&victim_tid), "second");
    ra__thread_tags_named(renamed_twice, "second");
}

/* The base is the thread's name's, whichever naming writes last. */
START_TEST(test_thread_tags_unit_the_last_rename_gives_the_base)
{
    atomic_store(&victim_gone, true);
    atomic_store(&watching, false);
    ck_assert_int_eq(
        pthread_create(&renamed_twice, NULL, named_then_renamed, NULL), 0);
    while (!atomic_load(&victim_named))
        sched_yield();
    gap_name = "first";
    gap = renamed_again;
    name_in_kernel(atomic_load(&victim_tid), "first");
    ra__thread_tags_named(renamed_twice, "first");
    ck_assert(gap == NULL);
    atomic_store(&renamed, true);
    ck_assert_int_eq(pthread_join(renamed_twice, NULL), 0);
    ck_assert_uint_ne(ra_tag_lookup("second"), RA_TAG_NONE);
    ck_assert_msg(atomic_load(&seen) == ra_tag_lookup("second"),
                  "the thread named \"second\" has the base %u (first: %u, "
                  "second: %u)",
                  atomic_load(&seen), ra_tag_lookup("first"),
                  ra_tag_lookup("second"));
}
END_TEST

static Suite *thread_tags_suite(void)
{
    Suite *s = suite_create("thread tags (unit)");
    TCase *tc = tcase_create("renames");

    tcase_add_test(tc, test_thread_tags_unit_naming_a_thread_that_exits_meanwhile);
    tcase_add_test(tc, test_thread_tags_unit_a_live_thread_takes_its_new_base);
    tcase_add_test(tc,
                   test_thread_tags_unit_a_new_thread_behind_the_same_id_keeps_its_base);
    tcase_add_test(tc, test_thread_tags_unit_the_last_rename_gives_the_base);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* Read at the library's first use, in each test's child. */
    setenv("REGIONALLOC_THREAD_TAGS", "*", 1);
    return tu_run_suite(thread_tags_suite());
}

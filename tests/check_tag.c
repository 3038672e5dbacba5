/* Suite "tag": the registry of names and ids, the per-thread tag stack and
 * RA_TAG_SCOPE, against the contract of regionalloc.h and regionalloc(3). */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regionalloc.h"
#include "testutil.h"

/* Fills name with len copies of c. */
static void fill_name(char *name, size_t len, char c)
{
    memset(name, c, len);
    name[len] = '\0';
}

/* -- registry ------------------------------------------------------------- */

START_TEST(test_tag_count_starts_at_zero)
{
    ck_assert_uint_eq(ra_tag_count(), 0);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

START_TEST(test_tag_create_returns_consecutive_ids)
{
    ck_assert_uint_eq(tu_tag_create("parse"), 1);
    ck_assert_uint_eq(tu_tag_create("index"), 2);
    ck_assert_uint_eq(tu_tag_create("sqlite-cache"), 3);
    ck_assert_uint_eq(ra_tag_count(), 3);
}
END_TEST

START_TEST(test_tag_create_existing_name_returns_same_id)
{
    ra_tag_t a = tu_tag_create("a");
    ra_tag_t b = tu_tag_create("b");

    ck_assert_uint_eq(tu_tag_create("a"), a);
    ck_assert_uint_eq(tu_tag_create("b"), b);
    ck_assert_uint_eq(tu_tag_create("a"), a);
    ck_assert_uint_eq(ra_tag_count(), 2);
}
END_TEST

START_TEST(test_tag_names_are_case_sensitive)
{
    ra_tag_t lower = tu_tag_create("cache");
    ra_tag_t upper = tu_tag_create("Cache");

    ck_assert_uint_ne(lower, upper);
    ck_assert_uint_eq(ra_tag_count(), 2);
}
END_TEST

START_TEST(test_tag_lookup_finds_created_tag)
{
    ra_tag_t a = tu_tag_create("alpha");
    ra_tag_t b = tu_tag_create("beta");

    ck_assert_uint_eq(ra_tag_lookup("alpha"), a);
    ck_assert_uint_eq(ra_tag_lookup("beta"), b);
}
END_TEST

START_TEST(test_tag_lookup_unknown_is_enoent)
{
    tu_tag_create("known");
    errno = 0;
    ck_assert_uint_eq(ra_tag_lookup("unknown"), RA_TAG_NONE);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_uint_eq(ra_tag_count(), 1);
}
END_TEST

START_TEST(test_tag_lookup_before_any_create_is_enoent)
{
    errno = 0;
    ck_assert_uint_eq(ra_tag_lookup("anything"), RA_TAG_NONE);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_uint_eq(ra_tag_count(), 0);
}
END_TEST

START_TEST(test_tag_lookup_never_creates)
{
    ck_assert_uint_eq(ra_tag_lookup("ghost"), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_count(), 0);
    ck_assert_uint_eq(tu_tag_create("ghost"), 1);
}
END_TEST

START_TEST(test_tag_lookup_bad_name_is_einval)
{
    errno = 0;
    ck_assert_uint_eq(ra_tag_lookup(NULL), RA_TAG_NONE);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_uint_eq(ra_tag_lookup(""), RA_TAG_NONE);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_tag_name_of_none_is_untagged)
{
    ck_assert_str_eq(ra_tag_name(RA_TAG_NONE), "untagged");
    tu_tag_create("x");
    ck_assert_str_eq(ra_tag_name(RA_TAG_NONE), "untagged");
}
END_TEST

START_TEST(test_tag_name_returns_created_name)
{
    ra_tag_t a = tu_tag_create("parse");
    ra_tag_t b = tu_tag_create("index");
    const char *name_a = ra_tag_name(a);

    ck_assert_str_eq(name_a, "parse");
    ck_assert_str_eq(ra_tag_name(b), "index");
    /* The string lives until exit: the same storage, unchanged, later. */
    tu_tag_create("more");
    ck_assert_ptr_eq(ra_tag_name(a), name_a);
    ck_assert_str_eq(name_a, "parse");
}
END_TEST

START_TEST(test_tag_name_does_not_alias_caller_buffer)
{
    char buf[16] = "volatile";
    ra_tag_t t = tu_tag_create(buf);

    strcpy(buf, "changed");
    ck_assert_str_eq(ra_tag_name(t), "volatile");
    ck_assert_uint_eq(ra_tag_lookup("volatile"), t);
}
END_TEST

START_TEST(test_tag_name_invalid_is_null_einval)
{
    static const ra_tag_t bad[] = {1, 2, 3, 257, 4000, 4001, UINT_MAX};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        ck_assert_ptr_null(ra_tag_name(bad[i]));
        ck_assert_int_eq(errno, EINVAL);
    }
    tu_tag_create("one");
    errno = 0;
    ck_assert_ptr_null(ra_tag_name(2));
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

/* -- errors --------------------------------------------------------------- */

START_TEST(test_tag_create_null_is_einval)
{
    errno = 0;
    ck_assert_uint_eq(ra_tag_create(NULL), RA_TAG_NONE);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_uint_eq(ra_tag_count(), 0);
}
END_TEST

START_TEST(test_tag_create_empty_is_einval)
{
    errno = 0;
    ck_assert_uint_eq(ra_tag_create(""), RA_TAG_NONE);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_uint_eq(ra_tag_count(), 0);
}
END_TEST

START_TEST(test_tag_create_name_of_max_length_works)
{
    char name[RA_TAG_NAME_MAX + 1];
    ra_tag_t t;

    fill_name(name, RA_TAG_NAME_MAX, 'm');
    ck_assert_uint_eq(strlen(name), 63);
    t = tu_tag_create(name);
    ck_assert_str_eq(ra_tag_name(t), name);
    ck_assert_uint_eq(ra_tag_lookup(name), t);
}
END_TEST

START_TEST(test_tag_create_name_too_long_is_einval)
{
    char name[RA_TAG_NAME_MAX + 2];
    char longer[256];

    fill_name(name, RA_TAG_NAME_MAX + 1, 'l');
    ck_assert_uint_eq(strlen(name), 64);
    errno = 0;
    ck_assert_uint_eq(ra_tag_create(name), RA_TAG_NONE);
    ck_assert_int_eq(errno, EINVAL);
    fill_name(longer, sizeof longer - 1, 'l');
    errno = 0;
    ck_assert_uint_eq(ra_tag_create(longer), RA_TAG_NONE);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_uint_eq(ra_tag_lookup(name), RA_TAG_NONE);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_uint_eq(ra_tag_count(), 0);
    /* A 63-byte prefix is a different, valid name. */
    name[RA_TAG_NAME_MAX] = '\0';
    ck_assert_uint_eq(tu_tag_create(name), 1);
}
END_TEST

START_TEST(test_tag_create_beyond_max_tags_is_enospc)
{
    char name[16];

    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "4", 1), 0);
    for (unsigned i = 1; i <= 4; i++) {
        snprintf(name, sizeof name, "t%u", i);
        ck_assert_uint_eq(tu_tag_create(name), i);
    }
    errno = 0;
    ck_assert_uint_eq(ra_tag_create("t5"), RA_TAG_NONE);
    ck_assert_int_eq(errno, ENOSPC);
    errno = 0;
    ck_assert_uint_eq(ra_tag_create("t6"), RA_TAG_NONE);
    ck_assert_int_eq(errno, ENOSPC);
    ck_assert_uint_eq(ra_tag_count(), 4);
    /* Existing names still resolve when the registry is full. */
    ck_assert_uint_eq(tu_tag_create("t3"), 3);
    errno = 0;
    ck_assert_uint_eq(ra_tag_lookup("t5"), RA_TAG_NONE);
    ck_assert_int_eq(errno, ENOENT);
    errno = 0;
    ck_assert_ptr_null(ra_tag_name(5));
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_push(5), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

/* Names are found by hash (tag.c): at a thousand tags, each destroyed and
 * created again in turn, every live name resolves to its id and no
 * destroyed one resolves at all. */
START_TEST(test_tag_names_resolve_among_many_tags)
{
    enum { N = 1000 };
    static ra_tag_t ids[N];
    char name[32];

    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "1000", 1), 0);
    for (unsigned i = 0; i < N; i++) {
        snprintf(name, sizeof name, "many-%u", i);
        ids[i] = tu_tag_create(name);
    }
    for (unsigned i = 0; i < N; i += 2)
        ck_assert_int_eq(ra_tag_destroy(ids[i]), 0);
    for (unsigned i = 0; i < N; i++) {
        snprintf(name, sizeof name, "many-%u", i);
        errno = 0;
        ck_assert_uint_eq(ra_tag_lookup(name), i % 2 ? ids[i] : RA_TAG_NONE);
        if (i % 2 == 0)
            ck_assert_int_eq(errno, ENOENT);
    }
    /* Created again under other names first: the recycled ids' old names
     * must not find them. */
    for (unsigned i = 0; i < N; i += 2) {
        snprintf(name, sizeof name, "again-%u", i);
        ids[i] = tu_tag_create(name);
    }
    for (unsigned i = 0; i < N; i++) {
        snprintf(name, sizeof name, i % 2 ? "many-%u" : "again-%u", i);
        ck_assert_uint_eq(ra_tag_lookup(name), ids[i]);
        ck_assert_str_eq(ra_tag_name(ids[i]), name);
        ck_assert_uint_eq(ra_tag_create(name), ids[i]);
        if (i % 2 == 0) {
            snprintf(name, sizeof name, "many-%u", i);
            ck_assert_uint_eq(ra_tag_lookup(name), RA_TAG_NONE);
        }
    }
    ck_assert_uint_eq(ra_tag_count(), N);
}
END_TEST

START_TEST(test_tag_push_never_created_is_einval)
{
    static const ra_tag_t bad[] = {1, 2, 256, 4000, UINT_MAX};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        ck_assert_int_eq(ra_tag_push(bad[i]), -1);
        ck_assert_int_eq(errno, EINVAL);
        ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
    }
    ck_assert_uint_eq(tu_tag_create("only"), 1);
    errno = 0;
    ck_assert_int_eq(ra_tag_push(2), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

START_TEST(test_tag_pop_never_created_is_einval)
{
    ra_tag_t a = tu_tag_create("a");

    ck_assert_int_eq(ra_tag_push(a), 0);
    errno = 0;
    ck_assert_int_eq(ra_tag_pop(2), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_pop(UINT_MAX), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_uint_eq(ra_tag_current(), a);
    ck_assert_int_eq(ra_tag_pop(a), 0);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

START_TEST(test_tag_push_beyond_stack_max_is_eoverflow)
{
    ra_tag_t tags[3] = {tu_tag_create("x"), tu_tag_create("y"),
                        tu_tag_create("z")};

    for (unsigned i = 0; i < RA_TAG_STACK_MAX; i++) {
        ck_assert_int_eq(ra_tag_push(tags[i % 3]), 0);
        ck_assert_uint_eq(ra_tag_current(), tags[i % 3]);
    }
    errno = 0;
    ck_assert_int_eq(ra_tag_push(tags[0]), -1);
    ck_assert_int_eq(errno, EOVERFLOW);
    errno = 0;
    ck_assert_int_eq(ra_tag_push(tags[2]), -1);
    ck_assert_int_eq(errno, EOVERFLOW);
    /* Unchanged: the 64th push is on top and exactly 64 entries pop, in
     * reverse order. */
    ck_assert_uint_eq(ra_tag_current(), tags[(RA_TAG_STACK_MAX - 1) % 3]);
    for (unsigned i = RA_TAG_STACK_MAX; i-- > 0;) {
        ck_assert_uint_eq(ra_tag_current(), tags[i % 3]);
        ck_assert_int_eq(ra_tag_pop(tags[i % 3]), 0);
    }
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
    errno = 0;
    ck_assert_int_eq(ra_tag_pop(tags[0]), -1);
    ck_assert_int_eq(errno, EINVAL);
    /* Usable again after draining. */
    ck_assert_int_eq(ra_tag_push(tags[1]), 0);
    ck_assert_uint_eq(ra_tag_current(), tags[1]);
}
END_TEST

START_TEST(test_tag_pop_not_on_top_keeps_stack)
{
    ra_tag_t a = tu_tag_create("a");
    ra_tag_t b = tu_tag_create("b");
    ra_tag_t c = tu_tag_create("c");

    ck_assert_int_eq(ra_tag_push(a), 0);
    ck_assert_int_eq(ra_tag_push(b), 0);
    errno = 0;
    ck_assert_int_eq(ra_tag_pop(a), -1); /* below the top */
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_pop(c), -1); /* created, not on the stack */
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_uint_eq(ra_tag_current(), b);
    ck_assert_int_eq(ra_tag_pop(b), 0);
    ck_assert_uint_eq(ra_tag_current(), a);
    ck_assert_int_eq(ra_tag_pop(a), 0);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

START_TEST(test_tag_pop_empty_stack_is_einval)
{
    ra_tag_t a = tu_tag_create("a");

    errno = 0;
    ck_assert_int_eq(ra_tag_pop(a), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
    /* The failed pop did not corrupt the depth: one push, one pop. */
    ck_assert_int_eq(ra_tag_push(a), 0);
    ck_assert_int_eq(ra_tag_pop(a), 0);
    errno = 0;
    ck_assert_int_eq(ra_tag_pop(a), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

/* -- stack ---------------------------------------------------------------- */

START_TEST(test_tag_stack_is_lifo)
{
    ra_tag_t a = tu_tag_create("a");
    ra_tag_t b = tu_tag_create("b");

    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
    ck_assert_int_eq(ra_tag_push(a), 0);
    ck_assert_uint_eq(ra_tag_current(), a);
    ck_assert_int_eq(ra_tag_push(b), 0);
    ck_assert_uint_eq(ra_tag_current(), b);
    ck_assert_int_eq(ra_tag_push(a), 0); /* the same tag twice is fine */
    ck_assert_uint_eq(ra_tag_current(), a);
    ck_assert_int_eq(ra_tag_pop(a), 0);
    ck_assert_uint_eq(ra_tag_current(), b);
    ck_assert_int_eq(ra_tag_pop(b), 0);
    ck_assert_uint_eq(ra_tag_current(), a);
    ck_assert_int_eq(ra_tag_pop(a), 0);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

/* -- scope ---------------------------------------------------------------- */

START_TEST(test_tag_scope_pops_at_end_of_block)
{
    ra_tag_t a = tu_tag_create("a");

    {
        RA_TAG_SCOPE(a);
        ck_assert_uint_eq(ra_tag_current(), a);
    }
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
    errno = 0;
    ck_assert_int_eq(ra_tag_pop(a), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_tag_scope_nests)
{
    ra_tag_t a = tu_tag_create("a");
    ra_tag_t b = tu_tag_create("b");
    ra_tag_t c = tu_tag_create("c");

    ck_assert_int_eq(ra_tag_push(c), 0);
    {
        RA_TAG_SCOPE(a);
        ck_assert_uint_eq(ra_tag_current(), a);
        {
            RA_TAG_SCOPE(b);
            ck_assert_uint_eq(ra_tag_current(), b);
            {
                RA_TAG_SCOPE(a);
                ck_assert_uint_eq(ra_tag_current(), a);
            }
            ck_assert_uint_eq(ra_tag_current(), b);
        }
        ck_assert_uint_eq(ra_tag_current(), a);
    }
    ck_assert_uint_eq(ra_tag_current(), c);
    ck_assert_int_eq(ra_tag_pop(c), 0);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

START_TEST(test_tag_scope_two_in_one_block)
{
    ra_tag_t a = tu_tag_create("a");
    ra_tag_t b = tu_tag_create("b");

    {
        RA_TAG_SCOPE(a);
        RA_TAG_SCOPE(b);
        ck_assert_uint_eq(ra_tag_current(), b);
    }
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

static ra_tag_t scope_in_loop_tag;

static ra_tag_t current_in_scope_then_return(void)
{
    RA_TAG_SCOPE(scope_in_loop_tag);
    return ra_tag_current();
}

START_TEST(test_tag_scope_pops_on_return_and_break)
{
    ra_tag_t a = tu_tag_create("a");

    scope_in_loop_tag = a;
    ck_assert_uint_eq(current_in_scope_then_return(), a);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
    for (int i = 0; i < 10; i++) {
        RA_TAG_SCOPE(a);
        ck_assert_uint_eq(ra_tag_current(), a);
        if (i == 3)
            break;
        if (i % 2 == 0)
            continue;
    }
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

START_TEST(test_tag_scope_invalid_tag_pushes_nothing)
{
    ra_tag_t a = tu_tag_create("a");

    ck_assert_int_eq(ra_tag_push(a), 0);
    {
        errno = 0;
        RA_TAG_SCOPE(77);
        ck_assert_int_eq(errno, EINVAL);
        ck_assert_uint_eq(ra_tag_current(), a);
    }
    /* Nothing was pushed, so nothing was popped: a is still on top. */
    ck_assert_uint_eq(ra_tag_current(), a);
    {
        RA_TAG_SCOPE(RA_TAG_NONE);
        ck_assert_uint_eq(ra_tag_current(), a);
    }
    ck_assert_uint_eq(ra_tag_current(), a);
    ck_assert_int_eq(ra_tag_pop(a), 0);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

START_TEST(test_tag_scope_on_full_stack_pops_nothing)
{
    ra_tag_t a = tu_tag_create("a");
    ra_tag_t b = tu_tag_create("b");

    for (unsigned i = 0; i < RA_TAG_STACK_MAX; i++)
        ck_assert_int_eq(ra_tag_push(a), 0);
    {
        errno = 0;
        RA_TAG_SCOPE(b);
        ck_assert_int_eq(errno, EOVERFLOW);
        ck_assert_uint_eq(ra_tag_current(), a);
    }
    for (unsigned i = 0; i < RA_TAG_STACK_MAX; i++)
        ck_assert_int_eq(ra_tag_pop(a), 0);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

/* -- threads -------------------------------------------------------------- */

struct thread_view {
    ra_tag_t seen_at_start; /* ra_tag_current() when the thread started */
    ra_tag_t push_tag;      /* what the thread pushes */
    ra_tag_t seen_after_push;
    int push_rc;
};

static void *push_in_thread(void *arg)
{
    struct thread_view *v = arg;

    v->seen_at_start = ra_tag_current();
    v->push_rc = ra_tag_push(v->push_tag);
    v->seen_after_push = ra_tag_current();
    /* Exits with the tag still pushed: only this thread's stack holds it. */
    return NULL;
}

START_TEST(test_tag_new_thread_starts_untagged)
{
    ra_tag_t a = tu_tag_create("main");
    ra_tag_t b = tu_tag_create("worker");
    struct thread_view v = {.seen_at_start = 12345, .push_tag = b};

    ck_assert_int_eq(ra_tag_push(a), 0);
    tu_run_threads(1, push_in_thread, &v);
    ck_assert_uint_eq(v.seen_at_start, RA_TAG_NONE);
    ck_assert_int_eq(v.push_rc, 0);
    ck_assert_uint_eq(v.seen_after_push, b);
    /* The worker's push did not reach this thread's stack. */
    ck_assert_uint_eq(ra_tag_current(), a);
    errno = 0;
    ck_assert_int_eq(ra_tag_pop(b), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_int_eq(ra_tag_pop(a), 0);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

/* Threads that push and pop in lock step with main's stack held still. */
struct lockstep {
    pthread_barrier_t barrier;
    ra_tag_t tags[4];
    int failures;
};

static void *push_pop_many(void *arg)
{
    struct lockstep *ls = arg;
    int bad = 0;

    pthread_barrier_wait(&ls->barrier);
    for (unsigned round = 0; round < 1000; round++) {
        for (unsigned i = 0; i < 4; i++)
            bad |= ra_tag_push(ls->tags[i]) != 0;
        bad |= ra_tag_current() != ls->tags[3];
        for (unsigned i = 4; i-- > 0;)
            bad |= ra_tag_pop(ls->tags[i]) != 0;
        bad |= ra_tag_current() != RA_TAG_NONE;
    }
    if (bad)
        __atomic_fetch_add(&ls->failures, 1, __ATOMIC_RELAXED);
    return NULL;
}

START_TEST(test_tag_stacks_of_threads_are_independent)
{
    struct lockstep ls = {.failures = 0};
    ra_tag_t mine = tu_tag_create("mine");

    for (unsigned i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%u", i);
        ls.tags[i] = tu_tag_create(name);
    }
    ck_assert_int_eq(pthread_barrier_init(&ls.barrier, NULL, 8), 0);
    ck_assert_int_eq(ra_tag_push(mine), 0);
    tu_run_threads(8, push_pop_many, &ls);
    pthread_barrier_destroy(&ls.barrier);
    ck_assert_int_eq(ls.failures, 0);
    ck_assert_uint_eq(ra_tag_current(), mine);
}
END_TEST

#define RACE_THREADS 8
#define RACE_NAMES 24

struct create_race {
    pthread_barrier_t barrier;
    unsigned next_thread;
    ra_tag_t ids[RACE_THREADS][RACE_NAMES];
    int errnos[RACE_THREADS][RACE_NAMES];
};

static void *create_all_names(void *arg)
{
    struct create_race *r = arg;
    unsigned me = __atomic_fetch_add(&r->next_thread, 1, __ATOMIC_RELAXED);

    pthread_barrier_wait(&r->barrier);
    /* Each thread walks the names from a different start and direction, so
     * every name is created by racing threads in different orders. */
    for (unsigned k = 0; k < RACE_NAMES; k++) {
        unsigned i = me % 2 == 0 ? (k + me * 3) % RACE_NAMES
                                 : (RACE_NAMES - 1 - k + me * 5) % RACE_NAMES;
        char name[16];
        snprintf(name, sizeof name, "race-%u", i);
        errno = 0;
        r->ids[me][i] = ra_tag_create(name);
        r->errnos[me][i] = errno;
    }
    return NULL;
}

START_TEST(test_tag_concurrent_create_gives_consistent_ids)
{
    static struct create_race r;
    int seen[RACE_NAMES + 1] = {0};

    ck_assert_int_eq(pthread_barrier_init(&r.barrier, NULL, RACE_THREADS), 0);
    tu_run_threads(RACE_THREADS, create_all_names, &r);
    pthread_barrier_destroy(&r.barrier);
    ck_assert_uint_eq(ra_tag_count(), RACE_NAMES);
    for (unsigned i = 0; i < RACE_NAMES; i++) {
        char name[16];
        ra_tag_t id = r.ids[0][i];

        snprintf(name, sizeof name, "race-%u", i);
        ck_assert_msg(id >= 1 && id <= RACE_NAMES,
                      "%s got id %u (errno %d)", name, id, r.errnos[0][i]);
        for (unsigned t = 1; t < RACE_THREADS; t++)
            ck_assert_msg(r.ids[t][i] == id,
                          "%s: thread %u got %u, thread 0 got %u", name, t,
                          r.ids[t][i], id);
        seen[id]++;
        ck_assert_uint_eq(ra_tag_lookup(name), id);
        ck_assert_str_eq(ra_tag_name(id), name);
    }
    /* Distinct names got distinct ids, which cover 1..count. */
    for (unsigned id = 1; id <= RACE_NAMES; id++)
        ck_assert_int_eq(seen[id], 1);
}
END_TEST

static Suite *tag_suite(void)
{
    Suite *s = suite_create("tag");
    TCase *tc;

    tc = tcase_create("registry");
    tcase_add_test(tc, test_tag_count_starts_at_zero);
    tcase_add_test(tc, test_tag_create_returns_consecutive_ids);
    tcase_add_test(tc, test_tag_create_existing_name_returns_same_id);
    tcase_add_test(tc, test_tag_names_are_case_sensitive);
    tcase_add_test(tc, test_tag_lookup_finds_created_tag);
    tcase_add_test(tc, test_tag_lookup_unknown_is_enoent);
    tcase_add_test(tc, test_tag_lookup_before_any_create_is_enoent);
    tcase_add_test(tc, test_tag_lookup_never_creates);
    tcase_add_test(tc, test_tag_lookup_bad_name_is_einval);
    tcase_add_test(tc, test_tag_name_of_none_is_untagged);
    tcase_add_test(tc, test_tag_name_returns_created_name);
    tcase_add_test(tc, test_tag_name_does_not_alias_caller_buffer);
    tcase_add_test(tc, test_tag_name_invalid_is_null_einval);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_tag_create_null_is_einval);
    tcase_add_test(tc, test_tag_create_empty_is_einval);
    tcase_add_test(tc, test_tag_create_name_of_max_length_works);
    tcase_add_test(tc, test_tag_create_name_too_long_is_einval);
    tcase_add_test(tc, test_tag_create_beyond_max_tags_is_enospc);
    tcase_add_test(tc, test_tag_names_resolve_among_many_tags);
    tcase_add_test(tc, test_tag_push_never_created_is_einval);
    tcase_add_test(tc, test_tag_pop_never_created_is_einval);
    tcase_add_test(tc, test_tag_push_beyond_stack_max_is_eoverflow);
    tcase_add_test(tc, test_tag_pop_not_on_top_keeps_stack);
    tcase_add_test(tc, test_tag_pop_empty_stack_is_einval);
    suite_add_tcase(s, tc);

    tc = tcase_create("stack");
    tcase_add_test(tc, test_tag_stack_is_lifo);
    suite_add_tcase(s, tc);

    tc = tcase_create("scope");
    tcase_add_test(tc, test_tag_scope_pops_at_end_of_block);
    tcase_add_test(tc, test_tag_scope_nests);
    tcase_add_test(tc, test_tag_scope_two_in_one_block);
    tcase_add_test(tc, test_tag_scope_pops_on_return_and_break);
    tcase_add_test(tc, test_tag_scope_invalid_tag_pushes_nothing);
    tcase_add_test(tc, test_tag_scope_on_full_stack_pops_nothing);
    suite_add_tcase(s, tc);

    tc = tcase_create("threads");
    tcase_add_test(tc, test_tag_new_thread_starts_untagged);
    tcase_add_test(tc, test_tag_stacks_of_threads_are_independent);
    tcase_add_test(tc, test_tag_concurrent_create_gives_consistent_ids);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    return tu_run_suite(tag_suite());
}

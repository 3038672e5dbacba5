/* Suite "tree": tag trees. Nested tags, a subtree's exact budget, subtree
 * statistics, and purge, reset and destroy of a subtree. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "regionalloc.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

/* call returns -1 (or RA_TAG_NONE) with errno err. */
#define FAILS_WITH(call, fail, err)                                         \
    do {                                                                    \
        errno = 0;                                                          \
        ck_assert_int_eq((long)(call), (long)(fail));                       \
        ck_assert_int_eq(errno, (err));                                     \
    } while (0)

static ra_tag_t child_of(ra_tag_t parent, const char *name)
{
    ra_tag_t t = ra_tag_create_in(parent, name);

    ck_assert_msg(t != RA_TAG_NONE, "ra_tag_create_in(%u, %s): %s", parent,
                  name, strerror(errno));
    return t;
}

START_TEST(test_tree_parents_depths_and_names)
{
    ra_tag_t tenant = tu_tag_create("tenant");
    ra_tag_t query = child_of(tenant, "query");
    ra_tag_t chain[RA_TAG_DEPTH_MAX + 1];
    char name[16];

    FAILS_WITH(ra_tag_parent(tenant), RA_TAG_NONE, 0);
    ck_assert_uint_eq(ra_tag_parent(query), tenant);
    /* The same name under the same parent: the same tag; elsewhere: no. */
    ck_assert_uint_eq(ra_tag_create_in(tenant, "query"), query);
    FAILS_WITH(ra_tag_create_in(RA_TAG_NONE, "query"), RA_TAG_NONE, EEXIST);
    FAILS_WITH(ra_tag_create_in(query, "tenant"), RA_TAG_NONE, EEXIST);
    /* ra_tag_create finds a name at any level. */
    ck_assert_uint_eq(ra_tag_create("query"), query);
    ck_assert_uint_eq(ra_tag_lookup("query"), query);
    /* Eight levels, and no ninth. */
    chain[1] = tu_tag_create("level-1");
    for (unsigned d = 2; d <= RA_TAG_DEPTH_MAX; d++) {
        snprintf(name, sizeof name, "level-%u", d);
        chain[d] = child_of(chain[d - 1], name);
    }
    FAILS_WITH(ra_tag_create_in(chain[RA_TAG_DEPTH_MAX], "too deep"),
               RA_TAG_NONE, EINVAL);
    /* Bad parents. */
    FAILS_WITH(ra_tag_create_in(9999, "orphan"), RA_TAG_NONE, EINVAL);
    FAILS_WITH(ra_tag_parent(9999), RA_TAG_NONE, EINVAL);
    FAILS_WITH(ra_tag_parent(RA_TAG_NONE), RA_TAG_NONE, EINVAL);
    FAILS_WITH(ra_tag_create_in(tenant, ""), RA_TAG_NONE, EINVAL);
}
END_TEST

START_TEST(test_tree_stats_tree_sums_the_subtree)
{
    ra_tag_t root = tu_tag_create("root");
    ra_tag_t a = child_of(root, "a"), b = child_of(root, "b");
    ra_tag_t aa = child_of(a, "aa");
    ra_tag_t other = tu_tag_create("other");
    const ra_tag_t tags[] = {root, a, b, aa};
    ra_tag_stats_t sum = {0}, tree, one;
    void *p[4], *q;

    for (unsigned i = 0; i < 4; i++) {
        p[i] = ra_malloc_tag(tags[i], (i + 1) * 100000);
        ck_assert_ptr_nonnull(p[i]);
    }
    q = ra_malloc_tag(other, 5 * MIB);
    ck_assert_ptr_nonnull(q);
    ra_thread_flush();
    ck_assert_int_eq(ra_tag_stats_tree(root, &tree), 0);
    for (unsigned i = 0; i < 4; i++) {
        ck_assert_int_eq(ra_tag_stats(tags[i], &one), 0);
        sum.allocated += one.allocated;
        sum.mapped += one.mapped;
        sum.nmalloc += one.nmalloc;
        sum.ndalloc += one.ndalloc;
    }
    ck_assert_uint_eq(tree.allocated, sum.allocated);
    ck_assert_uint_eq(tree.mapped, sum.mapped);
    ck_assert_uint_eq(tree.nmalloc, sum.nmalloc);
    ck_assert_uint_eq(tree.ndalloc, sum.ndalloc);
    /* The subtree's own peak: at least what its tags hold now (their
     * committed bytes, ra_tag_usage), at most the sum of their own peaks. */
    {
        size_t held = 0, peaks = 0;
        for (unsigned i = 0; i < 4; i++) {
            ra_tag_usage_t u;
            ck_assert_int_eq(ra_tag_usage(tags[i], &u), 0);
            held += u.mapped;
            peaks += u.peak_mapped;
        }
        ck_assert_uint_ge(tree.peak_mapped, held);
        ck_assert_uint_le(tree.peak_mapped, peaks);
    }
    /* A leaf's tree is itself. */
    ck_assert_int_eq(ra_tag_stats_tree(aa, &tree), 0);
    ck_assert_int_eq(ra_tag_stats(aa, &one), 0);
    ck_assert_uint_eq(tree.allocated, one.allocated);
    FAILS_WITH(ra_tag_stats_tree(RA_TAG_NONE, &tree), -1, EINVAL);
    FAILS_WITH(ra_tag_stats_tree(root, NULL), -1, EINVAL);
    for (unsigned i = 0; i < 4; i++)
        ra_free(p[i]);
    ra_free(q);
}
END_TEST

/* A parent's hard limit bounds its children's sum, exactly, with four
 * threads racing at the limit and a sampler reading the subtree. */
#define BUDGET (24 * MIB)
static ra_tag_t race_parent, race_children[4];
static _Atomic bool race_done;
static _Atomic unsigned race_errors, race_refused;
static _Atomic unsigned race_index;

static void *race_worker(void *arg)
{
    unsigned i = atomic_fetch_add(&race_index, 1) % 4;
    void *blocks[256];
    unsigned n = 0;

    (void)arg;
    for (unsigned round = 0; round < 4; round++) {
        while (n < 256) {
            void *p = ra_malloc_tag(race_children[i], 256 << 10);
            if (p == NULL) {
                atomic_fetch_add(&race_refused, 1);
                break;
            }
            memset(p, 1, 4096);
            blocks[n++] = p;
        }
        /* Give half back: the others race for it. */
        while (n > 128)
            ra_free(blocks[--n]);
    }
    while (n > 0)
        ra_free(blocks[--n]);
    return NULL;
}

/* The subtree's figures as the threads race: its high-water mark of
 * committed memory (the count the limit is checked against) never above
 * the limit. Not its mapped bytes: jemalloc's per-arena figures, summed
 * over arenas read one after another while blocks move between them, can
 * pass it (by 5-11 MiB of 24 in 3 runs of 30); they are checked at rest. */
static void *race_sampler(void *arg)
{
    (void)arg;
    while (!atomic_load(&race_done)) {
        ra_tag_stats_t tree;
        if (ra_tag_stats_tree(race_parent, &tree) != 0 ||
            tree.peak_mapped > BUDGET)
            atomic_fetch_add(&race_errors, 1);
    }
    return NULL;
}

START_TEST(test_tree_parent_budget_is_exact_under_racing_threads)
{
    ra_tag_limit_t limit = {.hard = BUDGET};
    ra_tag_stats_t tree;
    ra_tag_limit_t got;
    pthread_t s;
    char name[16];

    race_parent = tu_tag_create("tenant");
    ck_assert_int_eq(ra_tag_set_limit(race_parent, &limit), 0);
    for (unsigned i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "query-%u", i);
        race_children[i] = child_of(race_parent, name);
    }
    ck_assert_int_eq(pthread_create(&s, NULL, race_sampler, NULL), 0);
    tu_run_threads(4, race_worker, NULL);
    atomic_store(&race_done, true);
    pthread_join(s, NULL);
    ck_assert_uint_eq(atomic_load(&race_errors), 0);
    ck_assert_uint_gt(atomic_load(&race_refused), 0);
    /* The subtree's high-water mark of committed memory never passed the
     * limit. */
    ck_assert_int_eq(ra_tag_stats_tree(race_parent, &tree), 0);
    ck_assert_uint_le(tree.peak_mapped, BUDGET);
    ck_assert_uint_le(tree.mapped, BUDGET);
    ck_assert_uint_gt(tree.peak_mapped, BUDGET / 2);
    ck_assert_int_eq(ra_tag_get_limit(race_parent, &got), 0);
    ck_assert_uint_eq(got.hard, BUDGET);
}
END_TEST

START_TEST(test_tree_refusal_counts_for_the_refusing_tag)
{
    ra_tag_limit_t limit = {.hard = 8 * MIB};
    ra_tag_t parent = tu_tag_create("parent");
    ra_tag_t child;
    char *json, *line;

    ck_assert_int_eq(ra_tag_set_limit(parent, &limit), 0);
    child = child_of(parent, "child");
    FAILS_WITH(ra_malloc_tag(child, 16 * MIB), NULL, ENOMEM);
    json = tu_report_string(ra_report, RA_FORMAT_JSON);
    line = tu_json_tag_line(json, "parent");
    ck_assert_msg(strstr(line, "\"limit_failures\": 1,") != NULL, "%s", line);
    free(line);
    line = tu_json_tag_line(json, "child");
    ck_assert_msg(strstr(line, "\"limit_failures\": 0,") != NULL, "%s", line);
    free(line);
    free(json);
    /* What fits the parent is served to the child. */
    ck_assert_ptr_nonnull(ra_malloc_tag(child, 2 * MIB));
}
END_TEST

static ra_tag_t soft_seen;
static unsigned soft_calls;

static void on_soft(void *ctx, ra_tag_t tag, size_t mapped)
{
    (void)ctx;
    (void)mapped;
    soft_seen = tag;
    soft_calls++;
}

START_TEST(test_tree_soft_limit_of_an_ancestor_names_it)
{
    ra_tag_t top = tu_tag_create("top");
    ra_tag_t mid = child_of(top, "mid");
    ra_tag_t leaf = child_of(mid, "leaf");
    ra_tag_limit_t limit = {.soft = 12 * MIB, .on_soft = on_soft};

    ck_assert_int_eq(ra_tag_set_limit(top, &limit), 0);
    ck_assert_ptr_nonnull(ra_malloc_tag(leaf, 16 * MIB));
    ck_assert_uint_eq(soft_calls, 1);
    ck_assert_uint_eq(soft_seen, top);
}
END_TEST

START_TEST(test_tree_destroy_takes_the_subtree_children_first)
{
    ra_tag_t root = tu_tag_create("root");
    ra_tag_t a = child_of(root, "a"), aa = child_of(a, "aa");
    ra_tag_t keep = tu_tag_create("keep");
    void *p = ra_malloc_tag(aa, 1000), *k = ra_malloc_tag(keep, 1000);

    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(ra_tag_destroy(root), 0);
    FAILS_WITH(ra_tag_lookup("a"), RA_TAG_NONE, ENOENT);
    FAILS_WITH(ra_tag_lookup("aa"), RA_TAG_NONE, ENOENT);
    FAILS_WITH(ra_tag_parent(aa), RA_TAG_NONE, EINVAL);
    ck_assert_uint_eq(ra_tag_lookup("keep"), keep);
    ck_assert_uint_eq(ra_tag_of(k), keep);
    /* The ids are free again, each with nothing of the old tree: a
     * recycled id is a top-level tag now. */
    for (unsigned i = 0; i < 3; i++) {
        char name[16];
        ra_tag_t t;
        snprintf(name, sizeof name, "new-%u", i);
        t = tu_tag_create(name);
        ck_assert(t == root || t == a || t == aa);
        FAILS_WITH(ra_tag_parent(t), RA_TAG_NONE, 0);
    }
    ra_free(k);
}
END_TEST

/* A tag with no live child is its own subtree (tag.c counts each tag's
 * children): the counts must follow children destroyed alone, with their
 * own subtrees, and children created after them. */
START_TEST(test_tree_children_destroyed_and_made_again_stay_in_the_subtree)
{
    ra_tag_t root = tu_tag_create("root");
    ra_tag_t a = child_of(root, "a"), aa = child_of(a, "aa");
    ra_tag_t b = child_of(root, "b"), c, cc;

    ck_assert_int_eq(ra_tag_destroy(a), 0); /* a and aa */
    FAILS_WITH(ra_tag_lookup("aa"), RA_TAG_NONE, ENOENT);
    ck_assert_int_eq(ra_tag_destroy(b), 0); /* root has no child left */
    c = child_of(root, "c");
    cc = child_of(c, "cc");
    ck_assert(c == a || c == aa || c == b);
    ck_assert(cc == a || cc == aa || cc == b);
    /* A reset of root reaches the new grandchild's blocks. */
    ck_assert_ptr_nonnull(ra_malloc_tag(cc, 100));
    ck_assert_int_eq(ra_tag_reset(root), 0);
    ck_assert_uint_eq(tu_tag_stats(cc).allocated, 0);
    ck_assert_int_eq(ra_tag_destroy(root), 0);
    FAILS_WITH(ra_tag_lookup("c"), RA_TAG_NONE, ENOENT);
    FAILS_WITH(ra_tag_lookup("cc"), RA_TAG_NONE, ENOENT);
    FAILS_WITH(ra_tag_parent(cc), RA_TAG_NONE, EINVAL);
    ck_assert_uint_eq(ra_tag_count(), 4);
}
END_TEST

START_TEST(test_tree_destroy_busy_when_a_descendant_is_pushed)
{
    ra_tag_t root = tu_tag_create("root");
    ra_tag_t a = child_of(root, "a"), aa = child_of(a, "aa");

    tu_tag_push(aa);
    FAILS_WITH(ra_tag_destroy(root), -1, EBUSY);
    FAILS_WITH(ra_tag_reset(root), -1, EBUSY);
    /* A purge takes nothing a thread uses: allowed. */
    ck_assert_int_eq(ra_tag_purge(root), 0);
    tu_tag_pop(aa);
    /* Nothing was done. */
    ck_assert_uint_eq(ra_tag_lookup("aa"), aa);
    ck_assert_uint_eq(ra_tag_parent(aa), a);
    ck_assert_int_eq(ra_tag_destroy(root), 0);
}
END_TEST

START_TEST(test_tree_reset_and_purge_take_the_subtree)
{
    ra_tag_t root = tu_tag_create("root");
    ra_tag_t a = child_of(root, "a");
    ra_tag_t other = tu_tag_create("other");
    ra_tag_stats_t st;
    void *p = ra_malloc_tag(a, 4 * MIB), *q = ra_malloc_tag(other, 1000);

    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(ra_tag_reset(root), 0);
    ck_assert_int_eq(ra_tag_stats(a, &st), 0);
    ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(st.nmalloc, st.ndalloc);
    ck_assert_int_eq(ra_tag_stats(other, &st), 0);
    ck_assert_uint_gt(st.allocated, 0);
    /* A purge of the root gives back the child's dirty pages too. */
    p = ra_malloc_tag(a, 4 * MIB);
    ck_assert_ptr_nonnull(p);
    ra_free(p);
    ck_assert_int_eq(ra_tag_purge(root), 0);
    ck_assert_int_eq(ra_tag_stats(a, &st), 0);
    ck_assert_uint_eq(st.dirty, 0);
    ra_free(q);
}
END_TEST

START_TEST(test_tree_child_that_does_not_fit_is_not_created)
{
    /* Room for the parent's metadata and not a child's as well. */
    ra_tag_limit_t limit = {.hard = 3 * MIB};
    ra_tag_t parent = tu_tag_create("small");

    ck_assert_int_eq(ra_tag_set_limit(parent, &limit), 0);
    FAILS_WITH(ra_tag_create_in(parent, "no room"), RA_TAG_NONE, ENOMEM);
    FAILS_WITH(ra_tag_lookup("no room"), RA_TAG_NONE, ENOENT);
    /* Its id was not lost: other tags are made. */
    ck_assert_uint_ne(tu_tag_create("elsewhere"), RA_TAG_NONE);
}
END_TEST

START_TEST(test_tree_in_every_report_format)
{
    ra_tag_t tenant = tu_tag_create("tenant");
    ra_tag_t query = child_of(tenant, "query");
    ra_tag_t other = tu_tag_create("other");
    void *p = ra_malloc_tag(query, 3 * MIB), *q = ra_malloc_tag(tenant, MIB);
    char *json, *text, *prom, *line, *row;
    ra_tag_stats_t tree;

    (void)other;
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    ra_thread_flush();
    ck_assert_int_eq(ra_tag_stats_tree(tenant, &tree), 0);

    json = tu_report_string(ra_report, RA_FORMAT_JSON);
    line = tu_json_tag_line(json, "query");
    ck_assert_msg(strstr(line, "\"parent\": \"tenant\"") != NULL, "%s", line);
    free(line);
    line = tu_json_tag_line(json, "tenant");
    ck_assert_msg(strstr(line, "\"parent\": null") != NULL, "%s", line);
    {
        char want[96];
        snprintf(want, sizeof want, "\"tree\": {\"allocated\": %zu,",
                 tree.allocated);
        ck_assert_msg(strstr(line, want) != NULL, "%s not in %s", want, line);
    }
    free(line);
    /* Children follow their parent. */
    ck_assert(strstr(json, "\"name\": \"tenant\"") <
              strstr(json, "\"name\": \"query\""));
    free(json);

    text = tu_report_string(ra_report, RA_FORMAT_TEXT);
    row = strstr(text, "\n  query ");
    ck_assert_msg(row != NULL, "query not indented under tenant: %s", text);
    ck_assert(strstr(text, "\ntenant ") != NULL &&
              strstr(text, "\ntenant ") < row);
    ck_assert_ptr_nonnull(strstr(text, "tree_allocated"));
    free(text);

    prom = tu_report_string(ra_report, RA_FORMAT_PROMETHEUS);
    ck_assert_ptr_nonnull(strstr(
        prom, "\nregionalloc_tag_info{tag=\"query\",parent=\"tenant\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(
        prom, "\nregionalloc_tag_info{tag=\"tenant\",parent=\"\"} 1\n"));
    {
        char want[128];
        snprintf(want, sizeof want,
                 "\nregionalloc_tree_allocated_bytes{tag=\"tenant\"} %zu\n",
                 tree.allocated);
        ck_assert_msg(strstr(prom, want) != NULL, "%s", prom);
    }
    free(prom);
    ra_free(p);
    ra_free(q);
}
END_TEST

/* REGIONALLOC_LIMITS names tags at any level. */
START_TEST(test_tree_environment_budget_of_a_child)
{
    ra_tag_t parent, child;
    ra_tag_limit_t got;

    ck_assert_int_eq(setenv("REGIONALLOC_LIMITS", "child=5M", 1), 0);
    parent = tu_tag_create("parent");
    child = child_of(parent, "child");
    ck_assert_int_eq(ra_tag_get_limit(child, &got), 0);
    ck_assert_uint_eq(got.hard, 5 * MIB);
    ck_assert_int_eq(ra_tag_get_limit(parent, &got), 0);
    ck_assert_uint_eq(got.hard, 0);
    FAILS_WITH(ra_malloc_tag(child, 6 * MIB), NULL, ENOMEM);
    ck_assert_ptr_nonnull(ra_malloc_tag(parent, 6 * MIB));
}
END_TEST

/* Threads that keep caches of a subtree's tags while the main thread
 * resets or destroys the subtree, then allocate again: no block twice. */
#define SUB_THREADS 4
#define SUB_BLOCKS 1000
static ra_tag_t sub_tags[SUB_THREADS];
static void *sub_blocks[SUB_THREADS][SUB_BLOCKS];
static pthread_barrier_t sub_barrier;
static _Atomic unsigned sub_index, sub_errors;
static _Atomic int sub_verb; /* 1 reset, 2 destroy and create again */

static void sub_make(unsigned i, unsigned round)
{
    for (unsigned k = 0; k < SUB_BLOCKS; k++) {
        size_t size = 16 + (k * 37) % 2000;
        void *p = ra_malloc_tag(sub_tags[i], size);
        if (p == NULL) {
            atomic_fetch_add(&sub_errors, 1);
            continue;
        }
        tu_fill_pattern(p, size, i * 10000 + k + round);
        sub_blocks[i][k] = p;
    }
}

static void *sub_worker(void *arg)
{
    unsigned i = atomic_fetch_add(&sub_index, 1) % SUB_THREADS;

    (void)arg;
    sub_make(i, 0);
    /* Half freed into this thread's caches. */
    for (unsigned k = 0; k < SUB_BLOCKS; k += 2)
        ra_free(sub_blocks[i][k]);
    pthread_barrier_wait(&sub_barrier);
    pthread_barrier_wait(&sub_barrier); /* the main thread acts */
    sub_make(i, 1);
    pthread_barrier_wait(&sub_barrier);
    for (unsigned k = 0; k < SUB_BLOCKS; k++) {
        size_t size = 16 + (k * 37) % 2000;
        if (sub_blocks[i][k] != NULL &&
            tu_check_pattern(sub_blocks[i][k], size, i * 10000 + k + 1) != size)
            atomic_fetch_add(&sub_errors, 1);
    }
    return NULL;
}

struct span {
    uintptr_t start, end;
};

static int by_start(const void *a, const void *b)
{
    uintptr_t x = ((const struct span *)a)->start;
    uintptr_t y = ((const struct span *)b)->start;

    return x < y ? -1 : x > y;
}

static void run_subtree_verb(int verb)
{
    pthread_t t[SUB_THREADS];
    static struct span all[SUB_THREADS * SUB_BLOCKS];
    ra_tag_t root = tu_tag_create("root");
    unsigned n = 0;
    char name[16];

    /* root, two children, and a grandchild under each. */
    sub_tags[0] = root;
    sub_tags[1] = child_of(root, "a");
    sub_tags[2] = child_of(root, "b");
    sub_tags[3] = child_of(sub_tags[1], "aa");
    atomic_store(&sub_verb, verb);
    ck_assert_int_eq(pthread_barrier_init(&sub_barrier, NULL, SUB_THREADS + 1),
                     0);
    for (unsigned i = 0; i < SUB_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, sub_worker, NULL), 0);
    pthread_barrier_wait(&sub_barrier);
    if (verb == 1) {
        ck_assert_int_eq(ra_tag_reset(root), 0);
    } else {
        ck_assert_int_eq(ra_tag_destroy(root), 0);
        /* The same ids, a new tree: root's slot first (FIFO: the deepest
         * were released first, so recreate by name and take what comes). */
        sub_tags[0] = tu_tag_create("root2");
        for (unsigned i = 1; i < SUB_THREADS; i++) {
            snprintf(name, sizeof name, "new-%u", i);
            sub_tags[i] = child_of(sub_tags[0], name);
        }
    }
    pthread_barrier_wait(&sub_barrier);
    pthread_barrier_wait(&sub_barrier);
    for (unsigned i = 0; i < SUB_THREADS; i++)
        pthread_join(t[i], NULL);
    ck_assert_uint_eq(atomic_load(&sub_errors), 0);
    for (unsigned i = 0; i < SUB_THREADS; i++)
        for (unsigned k = 0; k < SUB_BLOCKS; k++)
            all[n++] = (struct span){(uintptr_t)sub_blocks[i][k],
                                     (uintptr_t)sub_blocks[i][k] + 16 +
                                         (k * 37) % 2000};
    /* Only the second round is held: the verb freed the first round's
     * blocks in every tag of the subtree. */
    {
        ra_tag_stats_t tree;
        size_t live = 0;
        for (unsigned i = 0; i < SUB_THREADS; i++)
            for (unsigned k = 0; k < SUB_BLOCKS; k++)
                live += ra_malloc_usable_size(sub_blocks[i][k]);
        ck_assert_int_eq(ra_tag_stats_tree(sub_tags[0], &tree), 0);
        ck_assert_uint_eq(tree.allocated, live);
    }
    qsort(all, n, sizeof all[0], by_start);
    for (unsigned k = 0; k + 1 < n; k++)
        ck_assert_msg(all[k].end <= all[k + 1].start,
                      "blocks at %#lx and %#lx overlap",
                      (unsigned long)all[k].start,
                      (unsigned long)all[k + 1].start);
}

START_TEST(test_tree_subtree_reset_under_threads_hands_no_block_twice)
{
    run_subtree_verb(1);
}
END_TEST

START_TEST(test_tree_subtree_destroy_under_threads_hands_no_block_twice)
{
    run_subtree_verb(2);
}
END_TEST

static Suite *tree_suite(void)
{
    Suite *s = suite_create("tree");
    TCase *tc = tcase_create("tree");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_tree_parents_depths_and_names);
    tcase_add_test(tc, test_tree_stats_tree_sums_the_subtree);
    tcase_add_test(tc, test_tree_refusal_counts_for_the_refusing_tag);
    tcase_add_test(tc, test_tree_soft_limit_of_an_ancestor_names_it);
    tcase_add_test(tc, test_tree_destroy_takes_the_subtree_children_first);
    tcase_add_test(tc, test_tree_destroy_busy_when_a_descendant_is_pushed);
    tcase_add_test(tc,
                   test_tree_children_destroyed_and_made_again_stay_in_the_subtree);
    tcase_add_test(tc, test_tree_reset_and_purge_take_the_subtree);
    tcase_add_test(tc, test_tree_child_that_does_not_fit_is_not_created);
    tcase_add_test(tc, test_tree_in_every_report_format);
    tcase_add_test(tc, test_tree_environment_budget_of_a_child);
    suite_add_tcase(s, tc);
    tc = tcase_create("race");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_tree_parent_budget_is_exact_under_racing_threads);
    tcase_add_test(tc,
                   test_tree_subtree_reset_under_threads_hands_no_block_twice);
    tcase_add_test(
        tc, test_tree_subtree_destroy_under_threads_hands_no_block_twice);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(tree_suite());
}

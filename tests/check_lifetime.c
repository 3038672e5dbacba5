/* Suite "lifetime": ra_tag_reset frees every block of a tag at once, across
 * threads and their caches; ra_tag_destroy retires a tag and recycles its
 * id, region and arena, whose pages the next holder reuses. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include "regionalloc.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

/* -- "reset" ---------------------------------------------------------------- */

/* Allocates n blocks of varied sizes under tag (some large), writes them,
 * and keeps them in blocks. No assertion: tag may be pushed. */
static void fill(ra_tag_t tag, void **blocks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t size = i % 997 == 0 ? 3 * MIB / 2 : 8 + i % 500;
        blocks[i] = ra_malloc_tag(tag, size);
        if (blocks[i] != NULL)
            memset(blocks[i], 0x5a, size < 4096 ? size : 4096);
    }
}

START_TEST(test_lifetime_reset_frees_every_block)
{
    enum { N = 100000 };
    static void *blocks[N];
    ra_tag_t tag = tu_tag_create("reset"), other = tu_tag_create("other");
    ra_tag_stats_t before_other, after, after_other;
    void *kept = ra_malloc_tag(other, 1000), *untagged = ra_malloc(1000);
    size_t rss = 0;

    ck_assert_ptr_nonnull(kept);
    ck_assert_ptr_nonnull(untagged);
    tu_fill_pattern(kept, 1000, 1);
    tu_fill_pattern(untagged, 1000, 2);
    fill(tag, blocks, N);
    for (size_t i = 0; i < N; i++)
        ck_assert_ptr_nonnull(blocks[i]);
    /* Some freed: they sit in this thread's caches. */
    for (size_t i = 0; i < N; i += 3)
        ra_free(blocks[i]);
    before_other = tu_tag_stats(other);

    ck_assert_int_eq(ra_tag_reset(tag), 0);

    after = tu_tag_stats(tag);
    ck_assert_uint_eq(after.allocated, 0);
    ck_assert_uint_eq(after.active, 0);
    ck_assert_uint_eq(after.dirty, 0);
    ck_assert_uint_eq(after.nmalloc, N);
    ck_assert_uint_eq(after.ndalloc, N);
    /* What stays resident is the arena's metadata: jemalloc's resident
     * estimate, every page of it its own. */
    ck_assert_int_eq(ra_tag_rss(tag, &rss), 0);
    ck_assert_uint_le(rss, after.resident);
    ck_assert_uint_lt(after.resident, 4 * MIB);
    /* Other tags and untagged memory are untouched. */
    after_other = tu_tag_stats(other);
    ck_assert_uint_eq(after_other.allocated, before_other.allocated);
    ck_assert_uint_eq(after_other.nmalloc, before_other.nmalloc);
    ck_assert_uint_eq(tu_check_pattern(kept, 1000, 1), 1000);
    ck_assert_uint_eq(tu_check_pattern(untagged, 1000, 2), 1000);
    ra_free(kept);
    ra_free(untagged);
}
END_TEST

START_TEST(test_lifetime_reset_tag_allocates_again)
{
    ra_tag_t tag = tu_tag_create("again");
    void *blocks[1000], *p;
    ra_tag_stats_t st;

    fill(tag, blocks, 1000);
    ck_assert_int_eq(ra_tag_reset(tag), 0);
    ck_assert_uint_eq(ra_tag_lookup("again"), tag);
    ck_assert_str_eq(ra_tag_name(tag), "again");
    tu_tag_push(tag);
    p = ra_malloc(100);
    tu_tag_pop(tag);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(ra_tag_of(p), tag);
    ra_free(p);
    ra_thread_flush();
    st = tu_tag_stats(tag);
    ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(st.nmalloc, 1001);
    ck_assert_uint_eq(st.ndalloc, 1001);
}
END_TEST

START_TEST(test_lifetime_reset_and_destroy_reject_bad_tags)
{
    ra_tag_t tag = tu_tag_create("bad");

    errno = 0;
    ck_assert_int_eq(ra_tag_reset(RA_TAG_NONE), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_reset(tag + 1), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_destroy(RA_TAG_NONE), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_destroy(tag + 7), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

static int child_lifetime_in_pass_through(void)
{
    ra_tag_t tag = ra_tag_create("pass");

    TU_REQUIRE(tag != RA_TAG_NONE);
    TU_REQUIRE(ra_tag_reset(tag) == -1 && errno == ENOTSUP);
    TU_REQUIRE(ra_tag_destroy(tag) == -1 && errno == ENOTSUP);
    return 0;
}

START_TEST(test_lifetime_not_supported_in_pass_through_mode)
{
    static const char *const env[] = {"REGIONALLOC=0", NULL};
    char err[512];

    ck_assert_int_eq(
        tu_run_with_env(env, child_lifetime_in_pass_through, err, sizeof err),
        0);
}
END_TEST

/* -- "threads" -------------------------------------------------------------- */

/* Workers warm their caches under the tag (front caches and tcaches hold
 * its blocks), then wait; the main thread resets the tag, or destroys it
 * and creates the tag that takes its id; everyone allocates again under
 * the tag of now and writes every byte of every block with its own
 * pattern: a block handed out twice, or overlapping another, would show,
 * and so would a cache of the old tag's blocks that survived. Every worker
 * is blocked (at a barrier) while the reset or destroy runs; one exits
 * after it without using the tag again, its exit flushing whatever its
 * caches held. */
enum { RT_WORKERS = 4, RT_BLOCKS = 3000 };

struct rt_worker {
    unsigned id;
    void *blocks[RT_BLOCKS];
    size_t sizes[RT_BLOCKS];
    size_t bad;
};

static pthread_barrier_t rt_warm, rt_reset, rt_done;
/* Set when the workers free every block before the barrier: a destroy
 * then finds nothing live, and the caches keep their blocks for the tag
 * that takes the id. */
static bool rt_all_freed;
/* The tag before the barrier rt_reset, and after it (the recycled tag when
 * the main thread destroys): written by the main thread only before the
 * barriers the workers wait at. */
static ra_tag_t rt_tag_before, rt_tag_after;

static size_t rt_size(unsigned id, size_t i)
{
    return (i * 37 + id * 11) % 2000 + 1;
}

static void *rt_thread(void *arg)
{
    struct rt_worker *w = arg;

    ra_tag_push(rt_tag_before);
    for (size_t round = 0; round < 3; round++) {
        for (size_t i = 0; i < RT_BLOCKS; i++)
            w->blocks[i] = ra_malloc(rt_size(w->id, i + round));
        /* Free most: they land in this thread's caches; the rest stay
         * live until the reset frees them. */
        for (size_t i = 0; i < RT_BLOCKS; i++)
            if (i % 5 != 0 || round < 2 || rt_all_freed)
                ra_free(w->blocks[i]);
    }
    ra_tag_pop(rt_tag_before);
    pthread_barrier_wait(&rt_warm);
    pthread_barrier_wait(&rt_reset);
    if (w->id == RT_WORKERS - 1)
        return NULL; /* exits now: its caches are released */
    ra_tag_push(rt_tag_after);
    for (size_t i = 0; i < RT_BLOCKS; i++) {
        w->sizes[i] = rt_size(w->id, i);
        w->blocks[i] = ra_malloc(w->sizes[i]);
        if (w->blocks[i] != NULL)
            tu_fill_pattern(w->blocks[i], w->sizes[i], w->id * 100000 + i);
    }
    ra_tag_pop(rt_tag_after);
    pthread_barrier_wait(&rt_done);
    for (size_t i = 0; i < RT_BLOCKS; i++)
        if (w->blocks[i] == NULL ||
            tu_check_pattern(w->blocks[i], w->sizes[i],
                             w->id * 100000 + i) != w->sizes[i])
            w->bad++;
    return NULL;
}

struct range {
    uintptr_t start, end;
};

static int compare_ranges(const void *a, const void *b)
{
    const struct range *x = a, *y = b;

    return x->start < y->start ? -1 : x->start > y->start;
}

static ra_tag_usage_t usage_of(ra_tag_t tag)
{
    ra_tag_usage_t u;

    ck_assert_int_eq(ra_tag_usage(tag, &u), 0);
    return u;
}

/* The run above, the main thread resetting the tag or destroying it. */
static void reset_under_threads(bool destroy, bool all_freed)
{
    static struct rt_worker workers[RT_WORKERS];
    static struct range ranges[RT_WORKERS * RT_BLOCKS];
    pthread_t threads[RT_WORKERS];
    size_t n = 0, bad = 0, live = 0;
    ra_tag_stats_t st;
    ra_tag_usage_t use;

    rt_all_freed = all_freed;
    rt_tag_before = rt_tag_after = tu_tag_create("threads");
    pthread_barrier_init(&rt_warm, NULL, RT_WORKERS + 1);
    pthread_barrier_init(&rt_reset, NULL, RT_WORKERS + 1);
    pthread_barrier_init(&rt_done, NULL, RT_WORKERS - 1);
    for (unsigned i = 0; i < RT_WORKERS; i++) {
        workers[i] = (struct rt_worker){.id = i};
        ck_assert_int_eq(pthread_create(&threads[i], NULL, rt_thread,
                                        &workers[i]),
                         0);
    }
    pthread_barrier_wait(&rt_warm);
    if (destroy) {
        ck_assert_int_eq(ra_tag_destroy(rt_tag_before), 0);
        rt_tag_after = tu_tag_create("threads, again");
        ck_assert_uint_eq(rt_tag_after, rt_tag_before);
    } else {
        ck_assert_int_eq(ra_tag_reset(rt_tag_before), 0);
    }
    st = tu_tag_stats(rt_tag_after);
    /* Unless the workers' caches kept their blocks for the next holder:
     * allocated includes them until the workers flush or exit. */
    if (!all_freed)
        ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(st.nmalloc, st.ndalloc);
    if (destroy)
        ck_assert_uint_eq(st.nmalloc, 0);
    pthread_barrier_wait(&rt_reset);
    for (unsigned i = 0; i < RT_WORKERS; i++)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    for (unsigned i = 0; i + 1 < RT_WORKERS; i++) {
        bad += workers[i].bad;
        for (size_t b = 0; b < RT_BLOCKS; b++) {
            void *p = workers[i].blocks[b];
            ck_assert_ptr_nonnull(p);
            ck_assert_uint_eq(ra_tag_of(p), rt_tag_after);
            ranges[n++] = (struct range){
                (uintptr_t)p, (uintptr_t)p + ra_malloc_usable_size(p)};
            live += ra_malloc_usable_size(p);
        }
    }
    ck_assert_uint_eq(bad, 0);
    qsort(ranges, n, sizeof ranges[0], compare_ranges);
    for (size_t i = 1; i < n; i++)
        ck_assert_msg(ranges[i].start >= ranges[i - 1].end,
                      "blocks overlap: [%#lx, %#lx) and [%#lx, %#lx)",
                      (unsigned long)ranges[i - 1].start,
                      (unsigned long)ranges[i - 1].end,
                      (unsigned long)ranges[i].start,
                      (unsigned long)ranges[i].end);
    /* A recycled tag counts its own blocks only, exactly, unflushed. */
    use = usage_of(rt_tag_after);
    if (destroy) {
        ck_assert_uint_eq(use.nmalloc, n);
        ck_assert_uint_eq(use.ndalloc, 0);
    }
    /* The workers exited: every cache is flushed, allocated is exact. */
    st = tu_tag_stats(rt_tag_after);
    ck_assert_uint_eq(st.allocated, live);
    for (unsigned i = 0; i + 1 < RT_WORKERS; i++)
        for (size_t b = 0; b < RT_BLOCKS; b++)
            ra_free(workers[i].blocks[b]);
    use = usage_of(rt_tag_after);
    ck_assert_uint_eq(use.nmalloc, use.ndalloc);
    ra_thread_flush();
    st = tu_tag_stats(rt_tag_after);
    ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(st.nmalloc, st.ndalloc);
}

START_TEST(test_lifetime_reset_across_threads_never_hands_a_block_twice)
{
    reset_under_threads(false, false);
}
END_TEST

START_TEST(test_lifetime_destroy_across_threads_never_hands_a_block_twice)
{
    reset_under_threads(true, false);
}
END_TEST

/* Tags per request on 4 threads at once: every request's tag counts its own
 * blocks exactly before its end, a reset empties it, and no block a
 * thread holds across its requests is handed out again or lost. A third
 * of the requests leave their blocks to the destroy (11 KiB: leftovers,
 * which the next holders of the slot never get). */
#define ENDS_THREADS 4
#define ENDS_REQUESTS 400
#define ENDS_BLOCKS 24

static void *ends_worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    void *held = ra_malloc(64); /* untagged, across the requests */
    char name[32];
    uintptr_t bad = 0;

    if (held == NULL)
        return (void *)7;
    memset(held, (int)id, 64);
    for (unsigned r = 0; r < ENDS_REQUESTS && bad == 0; r++) {
        void *blocks[ENDS_BLOCKS];
        size_t usable = 0;
        ra_tag_t tag;
        ra_tag_usage_t use;
        snprintf(name, sizeof name, "ends-%u-%u", id, r % 3);
        tag = ra_tag_create(name);
        if (tag == RA_TAG_NONE || ra_tag_push(tag) != 0)
            return (void *)1;
        for (unsigned b = 0; b < ENDS_BLOCKS; b++) {
            blocks[b] = ra_malloc(16 + 40 * b);
            if (blocks[b] == NULL)
                return (void *)2;
            memset(blocks[b], (int)((id * 31 + r) & 0xff), 16 + 40 * b);
            usable += ra_malloc_usable_size(blocks[b]);
        }
        ra_tag_pop(tag);
        /* A block handed out twice (another thread's, or one an earlier
         * request left live to its destroy) would show another pattern. */
        for (unsigned b = 0; b < ENDS_BLOCKS && bad == 0; b++)
            for (unsigned i = 0; i < 16 + 40 * b; i++)
                if (((unsigned char *)blocks[b])[i] !=
                    (unsigned char)((id * 31 + r) & 0xff))
                    bad = 8;
        if (ra_tag_usage(tag, &use) != 0 || use.allocated != usable ||
            use.nmalloc - use.ndalloc != ENDS_BLOCKS)
            bad = 3;
        if (r % 3 == 0) { /* a request that frees its blocks */
            for (unsigned b = 0; b < ENDS_BLOCKS; b++)
                ra_free(blocks[b]);
        } else if (r % 3 == 1) { /* one reset first */
            if (ra_tag_reset(tag) != 0 || ra_tag_usage(tag, &use) != 0 ||
                use.allocated != 0 || use.nmalloc != use.ndalloc)
                bad = 4;
        }
        if (ra_tag_destroy(tag) != 0)
            bad = 5;
    }
    for (unsigned i = 0; i < 64; i++)
        if (((unsigned char *)held)[i] != (unsigned char)id)
            bad = 6;
    ra_free(held);
    return (void *)bad;
}

/* Requests' tags end side by side (no lock of all tags), while the main
 * thread runs the ends that are exclusive: a tree's reset and destroy, a
 * tree's child destroyed alone, and (fork case) forks. Each request checks
 * its blocks and its counts; the trees' blocks are checked before each
 * reset; a child must be able to create, use and destroy tags. */
#define SIDE_THREADS 3
#define SIDE_REQUESTS 600
#define SIDE_ROUNDS 60

static void *side_requests(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    char name[32];

    for (unsigned r = 0; r < SIDE_REQUESTS; r++) {
        void *blocks[16];
        ra_tag_usage_t use;
        ra_tag_t tag;
        snprintf(name, sizeof name, "side-%u-%u", id, r % 4);
        if ((tag = ra_tag_create(name)) == RA_TAG_NONE)
            return (void *)1;
        for (unsigned b = 0; b < 16; b++) {
            if ((blocks[b] = ra_malloc_tag(tag, 24 + 16 * b)) == NULL)
                return (void *)2;
            memset(blocks[b], (int)(id * 16 + b), 24 + 16 * b);
        }
        for (unsigned b = 0; b < 16; b++)
            for (unsigned i = 0; i < 24 + 16 * b; i++)
                if (((unsigned char *)blocks[b])[i] !=
                    (unsigned char)(id * 16 + b))
                    return (void *)3;
        if (ra_tag_usage(tag, &use) != 0 || use.nmalloc != 16 ||
            use.ndalloc != 0)
            return (void *)4;
        if (r % 2 == 0)
            for (unsigned b = 0; b < 16; b++)
                ra_free(blocks[b]);
        if (ra_tag_destroy(tag) != 0)
            return (void *)5;
    }
    return NULL;
}

static int fork_and_use_a_tag(void)
{
    pid_t pid = fork();
    int status;

    if (pid < 0)
        return -1;
    if (pid == 0) {
        ra_tag_t tag = ra_tag_create("in-the-child");
        void *p = ra_malloc_tag(tag, 100);
        _exit(tag != RA_TAG_NONE && p != NULL && ra_tag_destroy(tag) == 0 &&
                      ra_tag_reset(ra_tag_create("again")) == 0
                  ? 0
                  : 1);
    }
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void ends_beside_exclusive(bool forks)
{
    pthread_t threads[SIDE_THREADS];

    for (unsigned i = 0; i < SIDE_THREADS; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, side_requests,
                                        (void *)(uintptr_t)i),
                         0);
    for (unsigned round = 0; round < SIDE_ROUNDS; round++) {
        ra_tag_t root = tu_tag_create("side-tree");
        ra_tag_t a = ra_tag_create_in(root, "side-a");
        ra_tag_t b = ra_tag_create_in(a, "side-b");
        unsigned char *p, *q;
        ck_assert_uint_ne(b, RA_TAG_NONE);
        p = ra_malloc_tag(b, 300);
        q = ra_malloc_tag(a, 40);
        ck_assert_ptr_nonnull(p);
        ck_assert_ptr_nonnull(q);
        memset(p, 0x11, 300);
        memset(q, 0x22, 40);
        for (unsigned i = 0; i < 300; i++)
            ck_assert_uint_eq(p[i], 0x11);
        ck_assert_int_eq(ra_tag_reset(root), 0);
        ck_assert_uint_eq(usage_of(b).nmalloc, usage_of(b).ndalloc);
        ck_assert_int_eq(ra_tag_destroy(b), 0); /* a leaf, in a tree */
        ck_assert_ptr_nonnull(ra_malloc_tag(a, 64));
        if (forks && round % 10 == 0)
            ck_assert_int_eq(fork_and_use_a_tag(), 0);
        ck_assert_int_eq(ra_tag_destroy(root), 0); /* exclusive */
    }
    for (unsigned i = 0; i < SIDE_THREADS; i++) {
        void *rc;
        ck_assert_int_eq(pthread_join(threads[i], &rc), 0);
        ck_assert_msg(rc == NULL, "request thread %u failed: %lu", i,
                      (unsigned long)(uintptr_t)rc);
    }
}

START_TEST(test_lifetime_leaf_ends_beside_exclusive_ends)
{
    ends_beside_exclusive(false);
}
END_TEST

START_TEST(test_lifetime_fork_while_leaf_ends_run)
{
    ends_beside_exclusive(true);
}
END_TEST

START_TEST(test_lifetime_ends_on_many_threads_at_once)
{
    pthread_t threads[ENDS_THREADS];

    for (unsigned i = 0; i < ENDS_THREADS; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, ends_worker,
                                        (void *)(uintptr_t)i),
                         0);
    for (unsigned i = 0; i < ENDS_THREADS; i++) {
        void *rc;
        ck_assert_int_eq(pthread_join(threads[i], &rc), 0);
        ck_assert_msg(rc == NULL, "thread %u failed: %lu", i,
                      (unsigned long)(uintptr_t)rc);
    }
    /* Each thread's three names at most: the ids went round. */
    ck_assert_uint_le(ra_tag_count(), 3 * ENDS_THREADS);
}
END_TEST

/* Every block freed before the destroy (a request that cleaned up): the
 * threads' caches keep theirs for the next holder, which must not get one
 * twice nor count one it did not make. */
START_TEST(test_lifetime_destroy_of_a_freed_tag_hands_its_caches_on)
{
    reset_under_threads(true, true);
}
END_TEST

/* -- "profile" -------------------------------------------------------------- */

static void assert_dump_starts(ra_tag_t tag, ra_prof_format_t fmt,
                               const char *want)
{
    char *dump = tu_prof_dump_string(fmt, tag, NULL);

    ck_assert_msg(strncmp(dump, want, strlen(want)) == 0, "want %s got %.300s",
                  want, dump);
    free(dump);
}

/* The tree's first lines: the tag and its live bytes and objects. */
static void assert_tree_starts(ra_tag_t tag, const char *want)
{
    assert_dump_starts(tag, RA_PROF_TREE, want);
}

/* The blocks a reset frees leave the profile; a destroyed tag's profile is
 * gone, and the tag that takes its id starts with none. */
START_TEST(test_lifetime_profile_forgets_what_a_reset_frees)
{
    ra_tag_t tag = tu_tag_create("sampled"), heir;
    void *blocks[100], *p;

    ck_assert_int_eq(ra_prof_start(1), 0);
    for (size_t i = 0; i < 100; i++)
        ck_assert_ptr_nonnull(blocks[i] = ra_malloc_tag(tag, 1000));
    assert_tree_starts(tag, "tag sampled\nAll (100000, #100)\n");
    ck_assert_int_eq(ra_tag_reset(tag), 0);
    assert_tree_starts(tag, "tag sampled\nAll (0, #0)\n");
    /* The pages the reset freed are reused, and freed, as any others. */
    for (size_t i = 0; i < 100; i++)
        ck_assert_ptr_nonnull(blocks[i] = ra_malloc_tag(tag, 3000));
    for (size_t i = 0; i < 50; i++)
        ra_free(blocks[i]);
    assert_tree_starts(tag, "tag sampled\nAll (150000, #50)\n");

    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    heir = tu_tag_create("heir");
    ck_assert_uint_eq(heir, tag);
    assert_tree_starts(heir, "tag heir\nAll (0, #0)\n");
    /* Not even the cumulative counts of heap_v2 ("live [ever]") remain. */
    assert_dump_starts(heir, RA_PROF_HEAP_V2, "heap_v2/1\n  t*: 0: 0 [0: 0]\n");
    p = ra_malloc_tag(heir, 5000);
    ck_assert_ptr_nonnull(p);
    assert_tree_starts(heir, "tag heir\nAll (5000, #1)\n");
    ra_free(p);
}
END_TEST

/* -- "destroy" -------------------------------------------------------------- */

START_TEST(test_lifetime_destroyed_tag_fails_every_call)
{
    ra_tag_t tag = tu_tag_create("gone");
    ra_tag_limit_t limit = {0, 0, NULL, NULL};
    ra_tag_stats_t st;
    size_t rss;
    void *p = ra_malloc_tag(tag, 100);

    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    errno = 0;
    ck_assert_uint_eq(ra_tag_lookup("gone"), RA_TAG_NONE);
    ck_assert_int_eq(errno, ENOENT);
    errno = 0;
    ck_assert_ptr_null(ra_tag_name(tag));
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_uint_eq(ra_tag_count(), tag);
    errno = 0;
    ck_assert_int_eq(ra_tag_push(tag), -1); /* the inline push */
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq((ra_tag_push)(tag), -1); /* the function */
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_stats(tag, &st), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_purge(tag), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_rss(tag, &rss), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_ptr_null(ra_malloc_tag(tag, 10));
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_set_limit(tag, &limit), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_reset(tag), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_destroy(tag), -1);
    ck_assert_int_eq(errno, EINVAL);
    /* The reports show live tags only. */
    for (ra_format_t fmt = RA_FORMAT_TEXT; fmt <= RA_FORMAT_PROMETHEUS;
         fmt++) {
        char *report = tu_report_string(ra_report, fmt);
        ck_assert_msg(strstr(report, "gone") == NULL, "%s", report);
        free(report);
    }
}
END_TEST

START_TEST(test_lifetime_destroy_of_a_tag_on_my_stack_is_busy)
{
    ra_tag_t tag = tu_tag_create("pushed"), top = tu_tag_create("top");
    int rc, e;

    tu_tag_push(tag);
    tu_tag_push(top);
    errno = 0;
    rc = ra_tag_destroy(tag);
    e = errno;
    tu_tag_pop(top);
    tu_tag_pop(tag);
    ck_assert_int_eq(rc, -1);
    ck_assert_int_eq(e, EBUSY);
    /* Nothing was done. */
    ck_assert_uint_eq(ra_tag_lookup("pushed"), tag);
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
}
END_TEST

/* Runs as its test's first action: the library reads its environment once. */
START_TEST(test_lifetime_ids_are_recycled_oldest_first)
{
    ra_tag_t a, b, c, d, e, f;

    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "3", 1), 0);
    a = tu_tag_create("a");
    b = tu_tag_create("b");
    c = tu_tag_create("c");
    errno = 0;
    ck_assert_uint_eq(ra_tag_create("full"), RA_TAG_NONE);
    ck_assert_int_eq(errno, ENOSPC);
    ck_assert_int_eq(ra_tag_destroy(b), 0);
    ck_assert_int_eq(ra_tag_destroy(a), 0);
    d = tu_tag_create("d");
    e = tu_tag_create("e");
    ck_assert_uint_eq(d, b);
    ck_assert_uint_eq(e, a);
    ck_assert_str_eq(ra_tag_name(d), "d");
    ck_assert_uint_eq(ra_tag_lookup("b"), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_count(), 3);
    errno = 0;
    f = ra_tag_create("f");
    ck_assert_uint_eq(f, RA_TAG_NONE);
    ck_assert_int_eq(errno, ENOSPC);
    ck_assert_uint_eq(ra_tag_lookup("c"), c);
}
END_TEST

static unsigned soft_calls;

static void count_soft(void *ctx, ra_tag_t tag, size_t mapped)
{
    (void)ctx; (void)tag; (void)mapped;
    soft_calls++;
}

/* A recycled id is a new tag: no counts, no budget, no purges, a peak of
 * its own, its blocks in the same region. */
START_TEST(test_lifetime_recycled_tag_starts_empty)
{
    ra_tag_t old = tu_tag_create("old"), fresh;
    ra_tag_limit_t limit = {64 * MIB, 32 * MIB, count_soft, NULL}, got;
    void *blocks[100];
    ra_tag_stats_t st;

    ck_assert_int_eq(ra_tag_set_limit(old, &limit), 0);
    fill(old, blocks, 100);
    ck_assert_int_eq(ra_tag_purge(old), 0);
    ck_assert_int_eq(ra_tag_destroy(old), 0);
    fresh = tu_tag_create("fresh");
    ck_assert_uint_eq(fresh, old);
    st = tu_tag_stats(fresh);
    ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(st.nmalloc, 0);
    ck_assert_uint_eq(st.ndalloc, 0);
    ck_assert_uint_eq(st.peak_mapped, st.mapped);
    ck_assert_int_eq(ra_tag_get_limit(fresh, &got), 0);
    ck_assert_uint_eq(got.hard, 0);
    ck_assert_uint_eq(got.soft, 0);
    ck_assert_ptr_null(got.on_soft);
    blocks[0] = ra_malloc_tag(fresh, 40 * MIB);
    ck_assert_ptr_nonnull(blocks[0]);
    ck_assert_uint_eq(soft_calls, 0);
    ck_assert_uint_eq(ra_tag_of(blocks[0]), fresh);
    ra_free(blocks[0]);
}
END_TEST

/* The resident set, the mappings and jemalloc's arenas of a process that
 * creates, uses and destroys tags without end stay flat. */
static size_t count_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    size_t n = 0;
    int c;

    ck_assert_ptr_nonnull(f);
    while ((c = getc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

static unsigned narenas(void)
{
    unsigned n = 0;
    size_t len = sizeof n;

    ck_assert_int_eq(mallctl("arenas.narenas", &n, &len, NULL, 0), 0);
    return n;
}

static void churn(unsigned from, unsigned to)
{
    char name[32];

    for (unsigned i = from; i < to; i++) {
        ra_tag_t tag;
        void *p, *q;
        snprintf(name, sizeof name, "request-%u", i);
        tag = ra_tag_create(name);
        if (tag == RA_TAG_NONE)
            ck_abort_msg("cycle %u: ra_tag_create: %s", i, strerror(errno));
        ra_tag_push(tag);
        p = ra_malloc(100 + i % 3000);
        q = ra_malloc(i % 7 == 0 ? 200000 : 50);
        ra_tag_pop(tag);
        if (p == NULL || q == NULL)
            ck_abort_msg("cycle %u: allocation failed", i);
        memset(p, 1, 100);
        ra_free(q); /* p stays: the destroy frees it */
        if (ra_tag_destroy(tag) != 0)
            ck_abort_msg("cycle %u: ra_tag_destroy: %s", i, strerror(errno));
    }
}

/* Runs as its test's first action: the library reads its environment once. */
START_TEST(test_lifetime_churn_stays_flat)
{
    size_t rss0, maps0, rss1, maps1;
    unsigned arenas0, arenas1;

    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "8", 1), 0);
    /* Warm up: every structure reaches its size. */
    churn(0, 2000);
    rss0 = tu_rss_bytes();
    maps0 = count_mappings();
    arenas0 = narenas();
    churn(2000, 100000);
    rss1 = tu_rss_bytes();
    maps1 = count_mappings();
    arenas1 = narenas();
    fprintf(stderr, "lifetime: 98,000 cycles: RSS %zu -> %zu KiB, mappings "
                    "%zu -> %zu, arenas %u -> %u\n",
            rss0 >> 10, rss1 >> 10, maps0, maps1, arenas0, arenas1);
    ck_assert_uint_le(rss1, rss0 + 2 * MIB);
    ck_assert_uint_le(maps1, maps0 + 2);
    ck_assert_uint_eq(arenas1, arenas0);
    ck_assert_uint_le(ra_tag_count(), 8);
}
END_TEST

/* -- "kept pages" ------------------------------------------------------------ */

/* A destroyed tag's slot keeps its pages for the slot's next holder. */
enum { KP_BLOCKS = 20000 };
static void *kp_blocks[KP_BLOCKS];

static long minor_faults(void)
{
    struct rusage ru;

    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_minflt;
}

/* What a tag that never allocated holds: jemalloc's first metadata block
 * for the tag's arena, committed in its region. */
static size_t empty_tag_mapped(void)
{
    ra_tag_t tag = tu_tag_create("never used");
    size_t mapped = usage_of(tag).mapped;

    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    return mapped;
}

/* Makes KP_BLOCKS blocks of 16-256 B under tag, writes every byte and adds
 * their usable sizes to *bytes; returns the minor faults that took. */
static long fill_and_write(ra_tag_t tag, size_t *bytes)
{
    long before;

    memset(kp_blocks, 0, sizeof kp_blocks); /* its own faults, not counted */
    before = minor_faults();
    for (size_t i = 0; i < KP_BLOCKS; i++) {
        size_t size = 16 + (i * 2654435761u >> 9) % 241;
        kp_blocks[i] = ra_malloc_tag(tag, size);
        if (kp_blocks[i] == NULL)
            ck_abort_msg("block %zu: %s", i, strerror(errno));
        memset(kp_blocks[i], 0x5a, size);
        *bytes += size;
    }
    return minor_faults() - before;
}

/* The next holder of a destroyed tag's slot allocates into the pages the
 * last holder left: no page faults (the slot's mapped bytes were kept), as
 * a server with a tag per request needs. */
START_TEST(test_lifetime_recycled_slot_reuses_pages_without_faults)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t first = tu_tag_create("first holder"), next;
    size_t bytes = 0, kept;
    long faults_first, faults_next;

    faults_first = fill_and_write(first, &bytes);
    ck_assert_int_eq(ra_tag_destroy(first), 0);
    next = tu_tag_create("next holder");
    ck_assert_uint_eq(next, first);
    kept = usage_of(next).mapped;
    ck_assert_uint_ge(kept, bytes);
    faults_next = fill_and_write(next, &bytes);
    fprintf(stderr, "lifetime: %zu KiB of blocks, first holder %ld faults, "
                    "next holder %ld (%zu KiB kept)\n",
            bytes / 2 >> 10, faults_first, faults_next, kept >> 10);
    /* The first fill faults a page at a time (unless the kernel backs the
     * region with huge pages); the next one none, but for a page of the
     * library's own here and there. */
    ck_assert_int_le(faults_next, (long)(bytes / 2 / 4096 / 20));
    /* Nothing committed anew: the kept pages took the whole fill. */
    ck_assert_uint_le(usage_of(next).mapped, kept);
    /* Kept pages are a cache: a purge gives them back. */
    ck_assert_int_eq(ra_tag_destroy(next), 0);
    next = tu_tag_create("purged holder");
    ck_assert_uint_ge(usage_of(next).mapped, bytes / 2);
    ck_assert_int_eq(ra_tag_purge(next), 0);
    ck_assert_uint_eq(usage_of(next).mapped, floor);
    ck_assert_uint_eq(tu_tag_stats(next).dirty, 0);
}
END_TEST

/* Kept pages never let a tag past its budget: a hard limit below what the
 * slot holds purges them first; the budget then holds from the start. */
START_TEST(test_lifetime_budget_purges_kept_pages)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t first = tu_tag_create("spender"), next;
    ra_tag_limit_t limit = {floor + 1 * MIB, 0, NULL, NULL};
    size_t bytes = 0;
    void *big;

    (void)fill_and_write(first, &bytes);
    big = ra_malloc_tag(first, 1 * MIB);
    ck_assert_ptr_nonnull(big);
    memset(big, 1, 1 * MIB);
    ck_assert_int_eq(ra_tag_destroy(first), 0);
    next = tu_tag_create("frugal");
    ck_assert_uint_eq(next, first);
    ck_assert_uint_gt(usage_of(next).mapped, floor + 2 * MIB);
    ck_assert_int_eq(ra_tag_set_limit(next, &limit), 0);
    ck_assert_uint_eq(usage_of(next).mapped, floor);
    /* The budget is the tag's own: half of it can be had, twice it not. */
    big = ra_malloc_tag(next, MIB / 2);
    ck_assert_ptr_nonnull(big);
    memset(big, 1, MIB / 2);
    errno = 0;
    ck_assert_ptr_null(ra_malloc_tag(next, 2 * MIB));
    ck_assert_int_eq(errno, ENOMEM);
    ck_assert_uint_le(usage_of(next).mapped, limit.hard);
    ra_free(big);
}
END_TEST

/* A cache, not a hoard: a slot that holds more than jemalloc's oversize
 * threshold (8 MiB) when its tag is destroyed keeps nothing. */
START_TEST(test_lifetime_big_slot_keeps_nothing)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t first = tu_tag_create("big request"), next;
    size_t bytes = 0;
    void *big = ra_malloc_tag(first, 7 * MIB);

    ck_assert_ptr_nonnull(big);
    memset(big, 1, 7 * MIB);
    (void)fill_and_write(first, &bytes);
    ck_assert_uint_gt(usage_of(first).mapped, 8 * MIB);
    ck_assert_int_eq(ra_tag_destroy(first), 0);
    next = tu_tag_create("after the big one");
    ck_assert_uint_eq(next, first);
    ck_assert_uint_eq(usage_of(next).mapped, floor);
}
END_TEST

/* A freed block of the oversize class leaves the resident set at once, as
 * it would untagged; a smaller one stays, dirty, for the tag's next
 * allocations (until decay or a purge). */
START_TEST(test_lifetime_freed_oversize_block_leaves_the_resident_set)
{
    ra_tag_t tag = tu_tag_create("big blocks");
    size_t before, during, after;
    void *big;

    ck_assert_int_eq(ra_tag_rss(tag, &before), 0);
    big = ra_malloc_tag(tag, 16 * MIB);
    ck_assert_ptr_nonnull(big);
    memset(big, 1, 16 * MIB);
    ck_assert_int_eq(ra_tag_rss(tag, &during), 0);
    ck_assert_uint_ge(during, before + 16 * MIB);
    ra_free(big);
    ck_assert_int_eq(ra_tag_rss(tag, &after), 0);
    ck_assert_uint_le(after, before + MIB);

    big = ra_malloc_tag(tag, 4 * MIB);
    ck_assert_ptr_nonnull(big);
    memset(big, 1, 4 * MIB);
    ra_free(big);
    ck_assert_int_eq(ra_tag_rss(tag, &after), 0);
    ck_assert_uint_ge(after, before + 4 * MIB);
    ck_assert_int_eq(ra_tag_purge(tag), 0);
    ck_assert_int_eq(ra_tag_rss(tag, &after), 0);
    ck_assert_uint_le(after, before + MIB);
}
END_TEST

/* The same for a budget that REGIONALLOC_LIMITS sets on the recycled tag's
 * creation. Runs as its test's first action: the library reads its
 * environment once. */
START_TEST(test_lifetime_environment_budget_purges_kept_pages)
{
    ra_tag_t first, next;
    size_t bytes = 0, floor;
    ra_tag_limit_t got;

    /* The budget leaves 1 MiB past an empty tag's metadata (2 MiB with
     * jemalloc 5.3: checked below). */
    ck_assert_int_eq(setenv("REGIONALLOC_LIMITS", "frugal=3M", 1), 0);
    floor = empty_tag_mapped();
    ck_assert_uint_le(floor, 2 * MIB);
    first = tu_tag_create("spender");
    (void)fill_and_write(first, &bytes);
    ck_assert_uint_gt(usage_of(first).mapped, 3 * MIB);
    ck_assert_int_eq(ra_tag_destroy(first), 0);
    next = tu_tag_create("frugal");
    ck_assert_uint_eq(next, first);
    ck_assert_int_eq(ra_tag_get_limit(next, &got), 0);
    ck_assert_uint_eq(got.hard, 3 * MIB);
    ck_assert_uint_eq(usage_of(next).mapped, floor);
    ck_assert_ptr_nonnull(ra_malloc_tag(next, MIB / 2));
}
END_TEST

/* The same for a parent's budget: a child made in a recycled slot whose
 * kept pages do not fit what the parent's budget leaves is made all the
 * same, the kept pages purged first (a budget says "does not fit", and the
 * creation purges and tries again). */
START_TEST(test_lifetime_parent_budget_purges_kept_pages)
{
    size_t floor = empty_tag_mapped(), bytes = 0;
    ra_tag_t parent = tu_tag_create("parent"), first, child;
    /* Room for the parent's metadata, a child's and 1 MiB. */
    ra_tag_limit_t limit = {2 * floor + MIB, 0, NULL, NULL};

    first = tu_tag_create("spender");
    (void)fill_and_write(first, &bytes);
    ck_assert_uint_gt(usage_of(first).mapped, floor + 2 * MIB);
    ck_assert_int_eq(ra_tag_destroy(first), 0);
    ck_assert_int_eq(ra_tag_set_limit(parent, &limit), 0);
    child = ra_tag_create_in(parent, "child");
    ck_assert_msg(child != RA_TAG_NONE, "%s", strerror(errno));
    ck_assert_uint_eq(child, first);
    ck_assert_uint_eq(usage_of(child).mapped, floor);
    ck_assert_uint_eq(ra_tag_parent(child), parent);
}
END_TEST

/* Blocks made on this thread and freed on another, which then lives on
 * with its caches of them: a consumer of a producer's blocks. The blocks
 * have random sizes up to max (many classes: each block the consumer's
 * caches keep pins a slab) and are freed in random order. */
struct consumer {
    pthread_t thread;
    unsigned n;
    bool done, may_exit;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

static void *consume(void *arg)
{
    struct consumer *c = arg;

    for (unsigned i = 0; i < c->n; i++)
        ra_free(kp_blocks[i]);
    pthread_mutex_lock(&c->lock);
    c->done = true;
    pthread_cond_broadcast(&c->cond);
    while (!c->may_exit)
        pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

static void freed_elsewhere(struct consumer *c, ra_tag_t tag, unsigned n,
                            size_t max)
{
    ck_assert_uint_le(n, KP_BLOCKS);
    *c = (struct consumer){.n = n, .lock = PTHREAD_MUTEX_INITIALIZER,
                           .cond = PTHREAD_COND_INITIALIZER};
    srand(7);
    for (unsigned i = 0; i < n; i++) {
        kp_blocks[i] = ra_malloc_tag(tag, 8 + (size_t)rand() % (max - 7));
        ck_assert_ptr_nonnull(kp_blocks[i]);
    }
    for (unsigned i = n - 1; i > 0; i--) {
        unsigned j = (unsigned)rand() % (i + 1);
        void *t = kp_blocks[i];
        kp_blocks[i] = kp_blocks[j];
        kp_blocks[j] = t;
    }
    ck_assert_int_eq(pthread_create(&c->thread, NULL, consume, c), 0);
    pthread_mutex_lock(&c->lock);
    while (!c->done)
        pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

static void consumer_exits(struct consumer *c)
{
    pthread_mutex_lock(&c->lock);
    c->may_exit = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    ck_assert_int_eq(pthread_join(c->thread, NULL), 0);
}

/* The budget of a recycled tag holds although another thread's caches
 * kept the last holder's blocks: the destroy parked them where a purge
 * from any thread reaches. Before, 5.3 MB stayed mapped under a 2.5 MB
 * budget, and the tag, which held nothing, could not allocate 64 KiB. */
START_TEST(test_lifetime_budget_purges_what_other_threads_kept)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t first = tu_tag_create("spender"), next;
    ra_tag_limit_t limit = {floor + MIB / 2, 0, NULL, NULL};
    struct consumer c;
    void *p;

    freed_elsewhere(&c, first, 4000, 2048);
    ck_assert_uint_gt(usage_of(first).mapped, floor + 2 * MIB);
    ck_assert_int_eq(ra_tag_destroy(first), 0);
    next = tu_tag_create("frugal");
    ck_assert_uint_eq(next, first);
    ck_assert_int_eq(ra_tag_set_limit(next, &limit), 0);
    ck_assert_uint_eq(usage_of(next).mapped, floor);
    p = ra_malloc_tag(next, 64 << 10);
    ck_assert_ptr_nonnull(p);
    ra_free(p);
    consumer_exits(&c);
}
END_TEST

/* The same for a budget that REGIONALLOC_LIMITS sets at the recycled
 * tag's creation (6.8 MB stayed mapped under 2.5 MB before). */
START_TEST(test_lifetime_environment_budget_purges_what_other_threads_kept)
{
    ra_tag_t first, next;
    size_t floor;
    struct consumer c;

    ck_assert_int_eq(setenv("REGIONALLOC_LIMITS", "frugal=2560K", 1), 0);
    floor = empty_tag_mapped();
    first = tu_tag_create("spender");
    freed_elsewhere(&c, first, 4000, 2048);
    ck_assert_uint_gt(usage_of(first).mapped, 3 * MIB);
    ck_assert_int_eq(ra_tag_destroy(first), 0);
    next = tu_tag_create("frugal");
    ck_assert_uint_eq(next, first);
    ck_assert_uint_eq(usage_of(next).mapped, floor);
    ck_assert_ptr_nonnull(ra_malloc_tag(next, 64 << 10));
    consumer_exits(&c);
}
END_TEST

/* Over the oversize threshold the slot keeps nothing, whoever freed the
 * blocks (10.7 MB stayed before). */
START_TEST(test_lifetime_big_slot_freed_elsewhere_keeps_nothing)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t first = tu_tag_create("big request"), next;
    struct consumer c;

    freed_elsewhere(&c, first, 4000, 8000);
    ck_assert_uint_gt(usage_of(first).mapped, 8 * MIB);
    ck_assert_int_eq(ra_tag_destroy(first), 0);
    next = tu_tag_create("after the big one");
    ck_assert_uint_eq(next, first);
    ck_assert_uint_eq(usage_of(next).mapped, floor);
    consumer_exits(&c);
}
END_TEST

/* What the consumer kept still serves the slot's next holder on that
 * thread, and a purge of the new tag reaches it. */
static void *allocate_under(void *arg)
{
    ra_tag_t tag = *(ra_tag_t *)arg;

    for (unsigned i = 0; i < 1000; i++)
        kp_blocks[i] = ra_malloc_tag(tag, 64);
    for (unsigned i = 0; i < 1000; i++)
        ra_free(kp_blocks[i]);
    return NULL;
}

START_TEST(test_lifetime_parked_caches_serve_the_next_holder)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t first = tu_tag_create("first"), next;
    struct consumer c;
    pthread_t t;

    freed_elsewhere(&c, first, 4000, 2048);
    ck_assert_int_eq(ra_tag_destroy(first), 0);
    next = tu_tag_create("second");
    ck_assert_int_eq(pthread_create(&t, NULL, allocate_under, &next), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(ra_tag_purge(next), 0);
    ck_assert_uint_eq(usage_of(next).mapped, floor);
    /* Nothing of the tag's is left in any cache after the purge. */
    ck_assert_uint_eq(tu_tag_stats(next).allocated, 0);
    consumer_exits(&c);
}
END_TEST

/* -- "leftovers" ------------------------------------------------------------ */

/* A destroy that finds a few blocks live leaves them in the slot rather than
 * reset its arena: they stay allocated, so nothing hands them out again,
 * the next holder counts none of them, and a reset, a bigger leftover or
 * ra_purge_all frees them. What shows it from outside: the next holder's
 * active bytes (jemalloc's pages in use) start above 0 with leftovers, and
 * at 0 after a reset. */
#define LO_BLOCKS 8
#define LO_SIZE 64
#define LO_NEXT 2000

/* A tag (top level, or under parent) that leaves LO_BLOCKS blocks of
 * LO_SIZE, each stamped, and extra bytes in one more block; destroyed. */
static ra_tag_t leave_blocks(ra_tag_t parent, void **blocks, size_t extra)
{
    ra_tag_t tag = parent == RA_TAG_NONE ? tu_tag_create("leaves")
                                         : ra_tag_create_in(parent, "leaves");

    ck_assert_uint_ne(tag, RA_TAG_NONE);
    for (unsigned i = 0; i < LO_BLOCKS; i++) {
        blocks[i] = ra_malloc_tag(tag, LO_SIZE);
        ck_assert_ptr_nonnull(blocks[i]);
        tu_fill_pattern(blocks[i], LO_SIZE, 7000 + i);
    }
    if (extra != 0)
        ck_assert_ptr_nonnull(ra_malloc_tag(tag, extra));
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    return tag;
}

/* The active bytes of the tag that takes the id next, before it
 * allocates. */
static size_t next_holder_active(ra_tag_t parent, ra_tag_t expect_id)
{
    ra_tag_t next = parent == RA_TAG_NONE ? tu_tag_create("next")
                                          : ra_tag_create_in(parent, "next");
    size_t active;

    ck_assert_uint_eq(next, expect_id);
    active = tu_tag_stats(next).active;
    ck_assert_int_eq(ra_tag_destroy(next), 0);
    return active;
}

START_TEST(test_lifetime_leftovers_are_never_handed_out_again)
{
    static void *left[LO_BLOCKS], *mine[LO_NEXT];
    ra_tag_t old = leave_blocks(RA_TAG_NONE, left, 0);
    ra_tag_t next = tu_tag_create("next");
    ra_tag_stats_t st;
    int pushed, popped;

    ck_assert_uint_eq(next, old);
    st = tu_tag_stats(next);
    ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(usage_of(next).nmalloc, 0);
    ck_assert_uint_ge(st.active, LO_BLOCKS * LO_SIZE);
    /* No assertion while the tag is pushed: Check's own allocate. */
    pushed = ra_tag_push(next);
    for (unsigned i = 0; i < LO_NEXT; i++)
        if ((mine[i] = ra_malloc(LO_SIZE)) != NULL)
            memset(mine[i], 0xee, LO_SIZE);
    popped = ra_tag_pop(next);
    ck_assert_int_eq(pushed, 0);
    ck_assert_int_eq(popped, 0);
    for (unsigned i = 0; i < LO_NEXT; i++)
        ck_assert_ptr_nonnull(mine[i]);
    for (unsigned i = 0; i < LO_NEXT; i++)
        for (unsigned j = 0; j < LO_BLOCKS; j++)
            ck_assert_ptr_ne(mine[i], left[j]);
    /* Nobody wrote over them: still allocated, still as they were. */
    for (unsigned j = 0; j < LO_BLOCKS; j++)
        ck_assert_uint_eq(tu_check_pattern(left[j], LO_SIZE, 7000 + j),
                          LO_SIZE);
    st = tu_tag_stats(next);
    ck_assert_uint_eq(st.allocated, (size_t)LO_NEXT * LO_SIZE);
    ck_assert_uint_eq(usage_of(next).nmalloc, LO_NEXT);
    for (unsigned i = 0; i < LO_NEXT; i++)
        ra_free(mine[i]);
    ck_assert_int_eq(ra_tag_destroy(next), 0);
}
END_TEST

START_TEST(test_lifetime_leftovers_go_at_purge_all_and_reset)
{
    static void *left[LO_BLOCKS];
    ra_tag_t id = leave_blocks(RA_TAG_NONE, left, 0);
    ra_tag_t tag;

    ck_assert_uint_gt(next_holder_active(RA_TAG_NONE, id), 0);
    ck_assert_int_eq(ra_purge_all(), 0);
    ck_assert_uint_eq(next_holder_active(RA_TAG_NONE, id), 0);

    /* A reset of a later holder frees them with its own blocks. */
    ck_assert_uint_eq(leave_blocks(RA_TAG_NONE, left, 0), id);
    tag = tu_tag_create("resets");
    ck_assert_uint_eq(tag, id);
    ck_assert_ptr_nonnull(ra_malloc_tag(tag, LO_SIZE));
    ck_assert_int_eq(ra_tag_reset(tag), 0);
    ck_assert_uint_eq(tu_tag_stats(tag).active, 0);
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
}
END_TEST

START_TEST(test_lifetime_many_leftovers_reset_the_slot)
{
    static void *left[LO_BLOCKS];
    ra_tag_t id = leave_blocks(RA_TAG_NONE, left, 100 << 10);

    ck_assert_uint_eq(next_holder_active(RA_TAG_NONE, id), 0);
}
END_TEST

START_TEST(test_lifetime_tree_leaves_no_leftovers)
{
    static void *left[LO_BLOCKS];
    ra_tag_t parent = tu_tag_create("tenant");
    ra_tag_t id = leave_blocks(parent, left, 0);

    ck_assert_uint_eq(next_holder_active(parent, id), 0);
}
END_TEST

static int child_leftovers_beside_a_limit(void)
{
    static void *left[LO_BLOCKS];
    ra_tag_t id;

    /* REGIONALLOC_LIMITS names a tag: commits are budgeted in this
     * process, and a holder must never be charged for blocks it cannot
     * free. */
    id = leave_blocks(RA_TAG_NONE, left, 0);
    TU_REQUIRE(next_holder_active(RA_TAG_NONE, id) == 0);
    return 0;
}

START_TEST(test_lifetime_hard_limits_leave_no_leftovers)
{
    static const char *const env[] = {"REGIONALLOC_LIMITS=capped=1M", NULL};
    char err[512];

    ck_assert_int_eq(
        tu_run_with_env(env, child_leftovers_beside_a_limit, err, sizeof err),
        0);
}
END_TEST

START_TEST(test_lifetime_fork_with_leftovers)
{
    static void *left[LO_BLOCKS];
    ra_tag_t id = leave_blocks(RA_TAG_NONE, left, 0);
    pid_t pid = fork();
    int status;

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* The child reclaims them and serves new tags from the slot. */
        ra_tag_t tag;
        void *p;
        if (ra_purge_all() != 0 || next_holder_active(RA_TAG_NONE, id) != 0)
            _exit(1);
        tag = ra_tag_create("child");
        p = ra_malloc_tag(tag, LO_SIZE);
        _exit(tag == id && p != NULL && ra_tag_destroy(tag) == 0 ? 0 : 2);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The parent's are still there, untouched. */
    for (unsigned j = 0; j < LO_BLOCKS; j++)
        ck_assert_uint_eq(tu_check_pattern(left[j], LO_SIZE, 7000 + j),
                          LO_SIZE);
    ck_assert_uint_gt(next_holder_active(RA_TAG_NONE, id), 0);
}
END_TEST

/* The issue's figures: a request tag makes 16,000 blocks of 256 B, frees
 * all but 1 in 64 (64,000 B live: leftovers) and is destroyed while no hard
 * limit exists anywhere; the next tag takes the id, holds nothing, and
 * gets a hard limit of a fresh tag's mapped + 512 KiB. The leftovers pin a
 * slab each (3.1 MB mapped) that no purge could give back, and the holder,
 * which could not free them, could not allocate 64 KiB. */
#define LO_ISSUE_BLOCKS 16000
#define LO_ISSUE_SIZE 256
#define LO_ISSUE_KEEP 64

static void *lo_issue[LO_ISSUE_BLOCKS];

/* The tag that leaves 1 in LO_ISSUE_KEEP of its blocks live, destroyed. */
static ra_tag_t leave_one_in_64(void)
{
    ra_tag_t tag = tu_tag_create("request");
    ra_tag_stats_t st;

    for (unsigned i = 0; i < LO_ISSUE_BLOCKS; i++) {
        lo_issue[i] = ra_malloc_tag(tag, LO_ISSUE_SIZE);
        ck_assert_ptr_nonnull(lo_issue[i]);
        memset(lo_issue[i], 0x5a, LO_ISSUE_SIZE);
    }
    for (unsigned i = 0; i < LO_ISSUE_BLOCKS; i++)
        if (i % LO_ISSUE_KEEP != 0)
            ra_free(lo_issue[i]);
    st = tu_tag_stats(tag);
    ck_assert_uint_eq(st.allocated, 64000);
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    return tag;
}

START_TEST(test_lifetime_hard_limit_reclaims_leftovers)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t id = leave_one_in_64(), next;
    ra_tag_limit_t limit = {floor + 512 * 1024, 0, NULL, NULL};
    void *p;

    next = tu_tag_create("frugal");
    ck_assert_uint_eq(next, id);
    ck_assert_uint_eq(tu_tag_stats(next).allocated, 0);
    ck_assert_uint_gt(usage_of(next).mapped, limit.hard);
    ck_assert_int_eq(ra_tag_set_limit(next, &limit), 0);
    ck_assert_uint_le(usage_of(next).mapped, limit.hard);
    p = ra_malloc_tag(next, 64 << 10);
    ck_assert_msg(p != NULL, "malloc(64 KiB) under a %zu B limit: %s",
                  limit.hard, strerror(errno));
    ra_free(p);
    ck_assert_int_eq(ra_tag_purge(next), 0);
    ck_assert_uint_le(usage_of(next).mapped, limit.hard);
    ck_assert_int_eq(ra_tag_destroy(next), 0);
}
END_TEST

/* The same leftovers go at a purge of the holder, which holds nothing:
 * nobody else used it, so the slot is reset under it. */
START_TEST(test_lifetime_purge_reclaims_leftovers)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t id = leave_one_in_64(), next;

    next = tu_tag_create("idle holder");
    ck_assert_uint_eq(next, id);
    ck_assert_uint_ge(tu_tag_stats(next).active, 64000);
    ck_assert_int_eq(ra_tag_purge(next), 0);
    ck_assert_uint_eq(tu_tag_stats(next).active, 0);
    ck_assert_uint_le(usage_of(next).mapped, floor + 64 * 1024);
    /* And the slot serves its holder as a fresh one would. */
    ck_assert_ptr_nonnull(ra_malloc_tag(next, 64 << 10));
    ck_assert_int_eq(ra_tag_destroy(next), 0);
}
END_TEST

static void count_crossing(void *ctx, ra_tag_t tag, size_t mapped)
{
    (void)tag;
    (void)mapped;
    (*(unsigned *)ctx)++;
}

/* A soft limit too: with the leftovers charged, the holder's mapped sat
 * past it from the start, so the limit was never armed and its crossing
 * never reported. */
START_TEST(test_lifetime_soft_limit_reclaims_leftovers)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t id = leave_one_in_64(), next;
    unsigned crossings = 0;
    ra_tag_limit_t limit = {0, floor + 512 * 1024, count_crossing,
                            &crossings};
    void *p;

    next = tu_tag_create("watched");
    ck_assert_uint_eq(next, id);
    ck_assert_int_eq(ra_tag_set_limit(next, &limit), 0);
    ck_assert_uint_lt(usage_of(next).mapped, limit.soft);
    p = ra_malloc_tag(next, 1 << 20);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(crossings, 1);
    ra_free(p);
    ck_assert_int_eq(ra_tag_destroy(next), 0);
}
END_TEST

/* A live block of the holder's own: the slot is not reset under it, the
 * leftovers stay, and the block stays the holder's; once it is freed, a
 * purge frees them. */
START_TEST(test_lifetime_live_block_keeps_leftovers)
{
    ra_tag_t id = leave_one_in_64(), next;
    char *mine;

    next = tu_tag_create("holds one");
    ck_assert_uint_eq(next, id);
    mine = ra_malloc_tag(next, 100);
    ck_assert_ptr_nonnull(mine);
    tu_fill_pattern(mine, 100, 42);
    ck_assert_int_eq(ra_tag_purge(next), 0);
    ck_assert_uint_ge(tu_tag_stats(next).active, 64000);
    ck_assert_uint_eq(tu_check_pattern(mine, 100, 42), 100);
    ck_assert_uint_eq(tu_tag_stats(next).allocated,
                      ra_malloc_usable_size(mine));
    ra_free(mine);
    ck_assert_int_eq(ra_tag_purge(next), 0);
    ck_assert_uint_eq(tu_tag_stats(next).active, 0);
    ck_assert_int_eq(ra_tag_destroy(next), 0);
}
END_TEST

/* While another thread has used the holder, the library cannot know that
 * it does not allocate under it at this very moment: the slot is not
 * reset, and the leftovers stay charged (the man page says so), even to a
 * refused allocation. Once that thread is gone, the refused allocation's
 * retry frees them, and the allocation succeeds. */
START_TEST(test_lifetime_refused_allocation_reclaims_leftovers)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t id = leave_one_in_64(), next;
    ra_tag_limit_t limit = {floor + 512 * 1024, 0, NULL, NULL};
    struct consumer c;
    void *p;

    next = tu_tag_create("shared");
    ck_assert_uint_eq(next, id);
    /* Another thread frees a few of its blocks, and lives on. */
    freed_elsewhere(&c, next, 100, 64);
    ck_assert_uint_eq(tu_tag_stats(next).allocated, 0);
    ck_assert_int_eq(ra_tag_set_limit(next, &limit), 0);
    ck_assert_uint_ge(tu_tag_stats(next).active, 64000);
    ck_assert_uint_gt(usage_of(next).mapped, limit.hard);
    errno = 0;
    ck_assert_ptr_null(ra_malloc_tag(next, 64 << 10));
    ck_assert_int_eq(errno, ENOMEM);

    consumer_exits(&c);
    p = ra_malloc_tag(next, 64 << 10);
    ck_assert_msg(p != NULL, "malloc(64 KiB) once alone: %s",
                  strerror(errno));
    ck_assert_uint_le(usage_of(next).mapped, limit.hard);
    ra_free(p);
    ck_assert_int_eq(ra_tag_destroy(next), 0);
}
END_TEST

/* A tag tree's budgets count its tags' commits: a child that takes a slot
 * with leftovers charges its ancestors nothing for them. What the slot
 * keeps is free pages, which a purge gives back. */
START_TEST(test_lifetime_tree_is_not_charged_for_leftovers)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t parent = tu_tag_create("tenant"), id, child;

    id = leave_one_in_64();
    child = ra_tag_create_in(parent, "query");
    ck_assert_uint_eq(child, id);
    ck_assert_uint_eq(tu_tag_stats(child).active, 0);
    ck_assert_int_eq(ra_tag_purge(parent), 0);
    ck_assert_uint_le(usage_of(child).mapped, floor + 64 * 1024);
    ck_assert_int_eq(ra_tag_destroy(parent), 0);
}
END_TEST

/* Nor does an ancestor's hard limit, set after the leftovers were made
 * (a hard limit stops destroys leaving them), refuse the child for them:
 * the limit leaves room for the parent's own, a fresh child's, and 512
 * KiB. */
START_TEST(test_lifetime_child_is_not_refused_for_leftovers)
{
    size_t floor = empty_tag_mapped();
    ra_tag_t parent = tu_tag_create("tenant"), id, child;
    ra_tag_limit_t limit = {0, 0, NULL, NULL};

    id = leave_one_in_64();
    limit.hard = usage_of(parent).mapped + floor + 512 * 1024;
    ck_assert_int_eq(ra_tag_set_limit(parent, &limit), 0);
    child = ra_tag_create_in(parent, "query");
    ck_assert_msg(child != RA_TAG_NONE, "a child under %zu B: %s",
                  limit.hard, strerror(errno));
    ck_assert_uint_eq(child, id);
    ck_assert_ptr_nonnull(ra_malloc_tag(child, 64 << 10));
    ck_assert_int_eq(ra_tag_destroy(parent), 0);
}
END_TEST

/* -- "own ids" ------------------------------------------------------------- */

/* A tag per request on one thread: a tag whose only user is the destroying
 * thread and whose blocks were all freed ends without moving a block, and
 * its id is that thread's own, for the thread's next creation. */
#define OWN_BLOCKS 100
#define OWN_SIZE 64

/* The arena of the last own_request's tag. */
static unsigned own_arena;

/* One request on the calling thread: a tag of that name, OWN_BLOCKS blocks
 * made, stamped, checked and freed, the tag destroyed. Returns the tag's
 * id. */
static ra_tag_t own_request(const char *name)
{
    ra_tag_t tag = tu_tag_create(name);
    void *blocks[OWN_BLOCKS];
    ra_tag_usage_t use;

    ck_assert_int_eq(ra_tag_arenas(tag, &own_arena, 1), 1);
    for (unsigned i = 0; i < OWN_BLOCKS; i++) {
        blocks[i] = ra_malloc_tag(tag, OWN_SIZE);
        ck_assert_ptr_nonnull(blocks[i]);
        tu_fill_pattern(blocks[i], OWN_SIZE, i);
    }
    use = usage_of(tag);
    ck_assert_uint_eq(use.nmalloc, OWN_BLOCKS);
    ck_assert_uint_eq(use.allocated, OWN_BLOCKS * OWN_SIZE);
    for (unsigned i = 0; i < OWN_BLOCKS; i++) {
        ck_assert_uint_eq(tu_check_pattern(blocks[i], OWN_SIZE, i), OWN_SIZE);
        ra_free(blocks[i]);
    }
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    return tag;
}

/* Blocks jemalloc has made in arena (its small allocations so far). */
static uint64_t arena_nmalloc(unsigned arena)
{
    char name[64];
    uint64_t n = 0;
    size_t len = sizeof n;

    ck_assert_int_eq(ra_stats_refresh(), 0);
    snprintf(name, sizeof name, "stats.arenas.%u.small.nmalloc", arena);
    ck_assert_int_eq(mallctl(name, &n, &len, NULL, 0), 0);
    return n;
}

START_TEST(test_lifetime_own_id_serves_its_thread_again)
{
    ra_tag_t a = own_request("first"), b;
    uint64_t made = arena_nmalloc(own_arena);

    b = own_request("second");
    ck_assert_uint_eq(a, b);
    /* The slot's free blocks served the second request: jemalloc made
     * none, and (own_request checked) none was handed out twice. */
    ck_assert_uint_eq(arena_nmalloc(own_arena), made);
    ck_assert_uint_eq(ra_tag_lookup("first"), RA_TAG_NONE);
}
END_TEST

/* A thread that keeps its own ids, blocked between two steps of the test. */
struct owner_thread {
    pthread_t thread;
    pthread_barrier_t owned, go_on;
    ra_tag_t id, next;
    bool exits_at_once;
};

static void *own_then_wait(void *arg)
{
    struct owner_thread *o = arg;

    o->id = own_request("owned");
    if (o->exits_at_once)
        return NULL;
    pthread_barrier_wait(&o->owned);
    pthread_barrier_wait(&o->go_on);
    /* Its own id taken away or not: a creation works either way. */
    o->next = ra_tag_create("owner-again");
    return NULL;
}

static void owner_start(struct owner_thread *o, bool exits_at_once)
{
    memset(o, 0, sizeof *o);
    o->exits_at_once = exits_at_once;
    pthread_barrier_init(&o->owned, NULL, 2);
    pthread_barrier_init(&o->go_on, NULL, 2);
    ck_assert_int_eq(pthread_create(&o->thread, NULL, own_then_wait, o), 0);
    if (exits_at_once)
        ck_assert_int_eq(pthread_join(o->thread, NULL), 0);
    else
        pthread_barrier_wait(&o->owned);
}

static void owner_finish(struct owner_thread *o)
{
    if (!o->exits_at_once) {
        pthread_barrier_wait(&o->go_on);
        ck_assert_int_eq(pthread_join(o->thread, NULL), 0);
    }
    pthread_barrier_destroy(&o->owned);
    pthread_barrier_destroy(&o->go_on);
}

/* Another thread's own id is not handed to this one while ids are left. */
START_TEST(test_lifetime_own_id_stays_with_its_thread)
{
    struct owner_thread o;
    ra_tag_t mine;

    owner_start(&o, false);
    mine = tu_tag_create("mine");
    ck_assert_uint_ne(mine, o.id);
    owner_finish(&o);
    ck_assert_uint_eq(o.next, o.id);
}
END_TEST

/* When the ids run out, a creation takes one away from the thread that
 * owns it; the owner's caches of it reach the new holder, which counts
 * exactly its own blocks and never gets one twice. */
START_TEST(test_lifetime_own_ids_are_taken_away_when_ids_run_out)
{
    enum { N = 4 * OWN_BLOCKS };
    static void *blocks[N];
    struct owner_thread o;
    ra_tag_t live, taken;

    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "2", 1), 0);
    owner_start(&o, false);
    live = tu_tag_create("live");
    taken = tu_tag_create("taker");
    ck_assert_uint_ne(live, o.id);
    ck_assert_uint_eq(taken, o.id);
    for (unsigned i = 0; i < N; i++) {
        blocks[i] = ra_malloc_tag(taken, OWN_SIZE);
        ck_assert_ptr_nonnull(blocks[i]);
        tu_fill_pattern(blocks[i], OWN_SIZE, 100 + i);
    }
    ck_assert_uint_eq(usage_of(taken).nmalloc, N);
    ck_assert_uint_eq(usage_of(taken).allocated, N * OWN_SIZE);
    for (unsigned i = 0; i < N; i++)
        ck_assert_uint_eq(tu_check_pattern(blocks[i], OWN_SIZE, 100 + i),
                          OWN_SIZE);
    /* Its id gone and every id live, the owner's next creation fails. */
    owner_finish(&o);
    ck_assert_uint_eq(o.next, RA_TAG_NONE);
}
END_TEST

/* The pages an owned id keeps are a purge of everything away, like any
 * destroyed tag's. */
START_TEST(test_lifetime_purge_all_reaches_own_ids)
{
    size_t floor = empty_tag_mapped();
    struct owner_thread o;
    ra_tag_t next;

    owner_start(&o, false);
    ck_assert_int_eq(ra_purge_all(), 0);
    next = tu_tag_create("after-purge");
    ck_assert_uint_eq(next, o.id);
    ck_assert_uint_eq(usage_of(next).mapped, floor);
    owner_finish(&o);
}
END_TEST

/* A thread's own ids are anyone's once it exits. */
START_TEST(test_lifetime_exit_queues_own_ids)
{
    struct owner_thread o;

    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "4", 1), 0);
    owner_start(&o, true);
    /* Queued, it comes before a fresh id. */
    ck_assert_uint_eq(tu_tag_create("after-exit"), o.id);
    owner_finish(&o);
}
END_TEST

/* An id its owner leaves unused for a second is queued at a later destroy
 * (the idle slots' decay looks at most once a millisecond). */
START_TEST(test_lifetime_idle_own_ids_are_queued)
{
    struct owner_thread o;
    ra_tag_t trigger;

    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "8", 1), 0);
    owner_start(&o, false);
    trigger = tu_tag_create("trigger");
    tu_sleep_ms(1100);
    ck_assert_int_eq(ra_tag_destroy(trigger), 0);
    /* The queue: trigger's id, then the owner's (a fresh id otherwise). */
    ck_assert_uint_eq(tu_tag_create("after-idle"), trigger);
    ck_assert_uint_eq(tu_tag_create("after-idle-2"), o.id);
    owner_finish(&o);
    ck_assert_uint_ne(o.next, o.id);
}
END_TEST

/* In a forked child the parent's other threads are gone: their own ids
 * serve the child's creations. */
START_TEST(test_lifetime_fork_child_gets_the_ids_of_threads_gone)
{
    struct owner_thread o;
    pid_t pid;
    int status;

    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "2", 1), 0);
    owner_start(&o, false);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        ra_tag_t a = ra_tag_create("child-a"), b = ra_tag_create("child-b");
        void *p = ra_malloc_tag(b, 100);
        _exit(a != RA_TAG_NONE && b != RA_TAG_NONE && p != NULL ? 0 : 1);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    owner_finish(&o);
    ck_assert_uint_eq(o.next, o.id);
}
END_TEST

/* Threads that used a slot and then sat idle through a whole holder's
 * life leave it at that holder's end: the slot has one user again, and
 * its next holder's end is a thread's own. */
static ra_tag_t shared_tag;

static void *use_shared(void *arg)
{
    void *p = ra_malloc_tag(shared_tag, OWN_SIZE);

    (void)arg;
    ck_assert_ptr_nonnull(p);
    ra_free(p);
    return NULL;
}

START_TEST(test_lifetime_idle_pairs_leave_the_slot)
{
    ra_tag_t first, idle_holder, last;
    pthread_t t[2];

    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "4", 1), 0);
    shared_tag = first = tu_tag_create("shared");
    /* Three users, the helpers alive through the next holder. */
    for (unsigned i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, use_shared, NULL), 0);
    for (unsigned i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    use_shared(NULL);
    ck_assert_int_eq(ra_tag_destroy(first), 0);
    /* The next holder, used by this thread alone: the helpers' pairs
     * leave at its end (their threads have exited too; with them alive
     * the same holds: test_threads' idle pairs). */
    idle_holder = own_request("alone");
    ck_assert_uint_eq(idle_holder, first);
    last = own_request("alone-again");
    ck_assert_uint_eq(last, first);
}
END_TEST

static Suite *lifetime_suite(void)
{
    Suite *s = suite_create("lifetime");
    TCase *tc;

    tc = tcase_create("reset");
    tcase_add_test(tc, test_lifetime_reset_frees_every_block);
    tcase_add_test(tc, test_lifetime_reset_tag_allocates_again);
    tcase_add_test(tc, test_lifetime_reset_and_destroy_reject_bad_tags);
    tcase_add_test(tc, test_lifetime_not_supported_in_pass_through_mode);
    suite_add_tcase(s, tc);

    tc = tcase_create("threads");
    tcase_add_test(tc,
                   test_lifetime_reset_across_threads_never_hands_a_block_twice);
    tcase_add_test(
        tc, test_lifetime_destroy_across_threads_never_hands_a_block_twice);
    tcase_add_test(tc, test_lifetime_destroy_of_a_freed_tag_hands_its_caches_on);
    tcase_add_test(tc, test_lifetime_ends_on_many_threads_at_once);
    tcase_add_test(tc, test_lifetime_leaf_ends_beside_exclusive_ends);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("fork beside ends");
    tcase_set_tags(tc, "multithreaded-fork");
    tcase_add_test(tc, test_lifetime_fork_while_leaf_ends_run);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("profile");
    tcase_add_test(tc, test_lifetime_profile_forgets_what_a_reset_frees);
    suite_add_tcase(s, tc);

    tc = tcase_create("destroy");
    tcase_add_test(tc, test_lifetime_destroyed_tag_fails_every_call);
    tcase_add_test(tc, test_lifetime_destroy_of_a_tag_on_my_stack_is_busy);
    tcase_add_test(tc, test_lifetime_ids_are_recycled_oldest_first);
    tcase_add_test(tc, test_lifetime_recycled_tag_starts_empty);
    tcase_add_test(tc, test_lifetime_churn_stays_flat);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("kept pages");
    tcase_add_test(tc, test_lifetime_recycled_slot_reuses_pages_without_faults);
    tcase_add_test(tc, test_lifetime_budget_purges_kept_pages);
    tcase_add_test(tc, test_lifetime_environment_budget_purges_kept_pages);
    tcase_add_test(tc, test_lifetime_parent_budget_purges_kept_pages);
    tcase_add_test(tc, test_lifetime_big_slot_keeps_nothing);
    tcase_add_test(tc, test_lifetime_freed_oversize_block_leaves_the_resident_set);
    tcase_add_test(tc, test_lifetime_budget_purges_what_other_threads_kept);
    tcase_add_test(
        tc, test_lifetime_environment_budget_purges_what_other_threads_kept);
    tcase_add_test(tc, test_lifetime_big_slot_freed_elsewhere_keeps_nothing);
    tcase_add_test(tc, test_lifetime_parked_caches_serve_the_next_holder);
    suite_add_tcase(s, tc);

    tc = tcase_create("own ids");
    tcase_add_test(tc, test_lifetime_own_id_serves_its_thread_again);
    tcase_add_test(tc, test_lifetime_own_id_stays_with_its_thread);
    tcase_add_test(tc, test_lifetime_own_ids_are_taken_away_when_ids_run_out);
    tcase_add_test(tc, test_lifetime_purge_all_reaches_own_ids);
    tcase_add_test(tc, test_lifetime_exit_queues_own_ids);
    tcase_add_test(tc, test_lifetime_idle_own_ids_are_queued);
    tcase_add_test(tc, test_lifetime_fork_child_gets_the_ids_of_threads_gone);
    tcase_add_test(tc, test_lifetime_idle_pairs_leave_the_slot);
    suite_add_tcase(s, tc);

    tc = tcase_create("leftovers");
    tcase_add_test(tc, test_lifetime_leftovers_are_never_handed_out_again);
    tcase_add_test(tc, test_lifetime_leftovers_go_at_purge_all_and_reset);
    tcase_add_test(tc, test_lifetime_many_leftovers_reset_the_slot);
    tcase_add_test(tc, test_lifetime_tree_leaves_no_leftovers);
    tcase_add_test(tc, test_lifetime_hard_limits_leave_no_leftovers);
    tcase_add_test(tc, test_lifetime_fork_with_leftovers);
    tcase_add_test(tc, test_lifetime_hard_limit_reclaims_leftovers);
    tcase_add_test(tc, test_lifetime_purge_reclaims_leftovers);
    tcase_add_test(tc, test_lifetime_soft_limit_reclaims_leftovers);
    tcase_add_test(tc, test_lifetime_live_block_keeps_leftovers);
    tcase_add_test(tc, test_lifetime_refused_allocation_reclaims_leftovers);
    tcase_add_test(tc, test_lifetime_tree_is_not_charged_for_leftovers);
    tcase_add_test(tc, test_lifetime_child_is_not_refused_for_leftovers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(lifetime_suite());
}

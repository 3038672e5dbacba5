/* Suite "limit": per-tag budgets. A hard limit bounds what the tag holds
 * from the OS (mapped) and refuses allocations cleanly; a soft limit calls
 * back once per upward crossing, outside every lock; REGIONALLOC_LIMITS
 * sets budgets from the environment; reports show them. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regionalloc.h"
#include "testutil.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

static void set_limit(ra_tag_t tag, size_t hard, size_t soft,
                      void (*on_soft)(void *, ra_tag_t, size_t), void *ctx)
{
    ra_tag_limit_t limit = {hard, soft, on_soft, ctx};

    ck_assert_int_eq(ra_tag_set_limit(tag, &limit), 0);
}

/* The tag's limit_failures, read from the JSON report: the object that
 * names the tag carries it. */
static uint64_t limit_failures(const char *name)
{
    char *json = tu_report_string(ra_report, RA_FORMAT_JSON);
    char *line = tu_json_tag_line(json, name);
    const char *value = strstr(line, "\"limit_failures\": ");
    uint64_t n;

    ck_assert_msg(value != NULL, "%s", line);
    n = strtoull(value + strlen("\"limit_failures\": "), NULL, 10);
    free(line);
    free(json);
    return n;
}

/* -- "hard" ----------------------------------------------------------------- */

enum { BLOCKS = 64 };

/* Allocates blocks of size under tag until one fails (at most BLOCKS),
 * checking after each that mapped stays within hard. Returns how many
 * succeeded; the failure's errno is in *err. */
static size_t fill_to_limit(ra_tag_t tag, size_t size, size_t hard,
                            void **blocks, int *err)
{
    size_t n = 0;

    *err = 0;
    for (; n < BLOCKS; n++) {
        errno = 0;
        blocks[n] = ra_malloc_tag(tag, size);
        if (blocks[n] == NULL) {
            *err = errno;
            break;
        }
        memset(blocks[n], 0x33, size);
        ck_assert_uint_le(tu_tag_stats(tag).mapped, hard);
    }
    return n;
}

START_TEST(test_limit_hard_bounds_mapped_and_refuses_cleanly)
{
    ra_tag_t tag = tu_tag_create("hard"), other = tu_tag_create("neighbour");
    void *blocks[BLOCKS], *big, *elsewhere, *untagged;
    const size_t hard = 8 * MIB;
    size_t n;
    int err;

    set_limit(tag, hard, 0, NULL, NULL);
    n = fill_to_limit(tag, 256 * KIB, hard, blocks, &err);
    ck_assert_uint_ge(n, 16);
    ck_assert_uint_lt(n, BLOCKS);
    ck_assert_int_eq(err, ENOMEM);
    ck_assert_uint_eq(limit_failures("hard"), 1);
    ck_assert_uint_le(tu_tag_stats(tag).peak_mapped, hard);
    /* Every other way in is refused the same way. */
    errno = 0;
    ck_assert_ptr_null(ra_malloc_tag(tag, 4 * MIB));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(ra_realloc(blocks[0], 4 * MIB));
    ck_assert_int_eq(errno, ENOMEM);
    ck_assert_uint_eq(limit_failures("hard"), 3);
    /* The block a failed realloc kept is intact. */
    ck_assert_uint_eq(((unsigned char *)blocks[0])[256 * KIB - 1], 0x33);
    /* Other tags and untagged memory are not held to it. */
    elsewhere = ra_malloc_tag(other, 32 * MIB);
    untagged = ra_malloc(32 * MIB);
    ck_assert_ptr_nonnull(elsewhere);
    ck_assert_ptr_nonnull(untagged);
    ck_assert_uint_eq(limit_failures("neighbour"), 0);
    ra_free(elsewhere);
    ra_free(untagged);

    /* Freed memory serves again. Every other block freed leaves dirty
     * holes too small for a larger block: its commit is refused until the
     * one flush-and-purge retry gives the holes back to the OS. */
    for (size_t i = 0; i < n; i += 2)
        ra_free(blocks[i]);
    big = ra_malloc_tag(tag, 2 * MIB);
    ck_assert_ptr_nonnull(big);
    ck_assert_uint_le(tu_tag_stats(tag).mapped, hard);
    ck_assert_uint_eq(limit_failures("hard"), 3);
    ra_free(big);
    for (size_t i = 1; i < n; i += 2)
        ra_free(blocks[i]);
}
END_TEST

/* Runs ra_malloc_tag over every small size class and some large ones at a
 * limit barely above what the tag holds: jemalloc's own metadata is
 * committed through the same hooks and is refused too. Nothing may crash,
 * and once the limit is gone the tag works as before. */
static void *small_at_limit(void *arg)
{
    ra_tag_t tag = *(ra_tag_t *)arg;
    static __thread void *kept[4096];
    size_t n = 0;

    for (size_t i = 0; i < 40000; i++) {
        size_t size = i % 50 == 0 ? 16 * KIB + i % 7 * 40 * KIB
                                  : 1 + (i * 7919) % 14336;
        void *p = ra_malloc_tag(tag, size);
        if (p == NULL)
            continue;
        memset(p, 0x77, size < 64 ? size : 64);
        if (n < 4096 && i % 3 != 0)
            kept[n++] = p;
        else
            ra_free(p);
    }
    for (size_t i = 0; i < n; i++)
        ra_free(kept[i]);
    ra_thread_flush();
    return NULL;
}

START_TEST(test_limit_small_allocations_at_the_limit_never_crash)
{
    ra_tag_t tag = tu_tag_create("tight");
    size_t hard = tu_tag_stats(tag).mapped + 64 * KIB;
    ra_tag_stats_t st;

    set_limit(tag, hard, 0, NULL, NULL);
    small_at_limit(&tag);
    tu_run_threads(2, small_at_limit, &tag);
    st = tu_tag_stats(tag);
    ck_assert_uint_le(st.peak_mapped, hard);
    ck_assert_uint_le(st.mapped, hard);
    ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(st.nmalloc, st.ndalloc);
    ck_assert_uint_gt(limit_failures("tight"), 0);

    ck_assert_int_eq(ra_tag_set_limit(tag, NULL), 0);
    for (size_t size = 8; size <= 4 * MIB; size *= 2) {
        void *p = ra_malloc_tag(tag, size);
        ck_assert_msg(p != NULL, "size %zu: %s", size, strerror(errno));
        memset(p, 1, size);
        ra_free(p);
    }
}
END_TEST

/* Threads race for the last bytes of a budget: the commitment is taken
 * atomically, so the sum never passes the limit. */
static void *race_for_budget(void *arg)
{
    ra_tag_t tag = *(ra_tag_t *)arg;
    void *blocks[48];

    for (unsigned round = 0; round < 20; round++) {
        size_t n = 0;
        for (; n < 48; n++)
            if ((blocks[n] = ra_malloc_tag(tag, 96 * KIB + n * 4 * KIB)) ==
                NULL)
                break;
        while (n > 0)
            ra_free(blocks[--n]);
        ra_tag_purge(tag);
    }
    return NULL;
}

START_TEST(test_limit_hard_holds_under_concurrency)
{
    ra_tag_t tag = tu_tag_create("race");
    const size_t hard = 6 * MIB;

    set_limit(tag, hard, 0, NULL, NULL);
    tu_run_threads(4, race_for_budget, &tag);
    ck_assert_uint_le(tu_tag_stats(tag).peak_mapped, hard);
    ck_assert_uint_gt(limit_failures("race"), 0);
}
END_TEST

START_TEST(test_limit_below_current_usage_refuses_until_freed)
{
    ra_tag_t tag = tu_tag_create("shrink");
    void *a = ra_malloc_tag(tag, 12 * MIB), *b;

    ck_assert_ptr_nonnull(a);
    set_limit(tag, 8 * MIB, 0, NULL, NULL);
    errno = 0;
    ck_assert_ptr_null(ra_malloc_tag(tag, 1 * MIB));
    ck_assert_int_eq(errno, ENOMEM);
    ra_free(a);
    ck_assert_int_eq(ra_tag_purge(tag), 0);
    b = ra_malloc_tag(tag, 4 * MIB);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_le(tu_tag_stats(tag).mapped, 8 * MIB);
    ra_free(b);
}
END_TEST

/* The same refusal reaches code that pushes a tag and calls the allocator
 * without knowing about tags. */
START_TEST(test_limit_refuses_through_a_pushed_tag)
{
    ra_tag_t tag = tu_tag_create("pushed");
    void *p, *q;
    int e;

    set_limit(tag, 4 * MIB, 0, NULL, NULL);
    tu_tag_push(tag);
    errno = 0;
    p = ra_malloc(8 * MIB);
    e = errno;
    q = ra_calloc(1, 1 * MIB);
    tu_tag_pop(tag);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(e, ENOMEM);
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(ra_tag_of(q), tag);
    ra_free(q);
    ck_assert_uint_eq(limit_failures("pushed"), 1);
}
END_TEST

/* -- "soft" ----------------------------------------------------------------- */

/* What the callback saw and whether what it called worked: it runs outside
 * every lock, so the library may be used from it. */
struct soft_log {
    unsigned calls;
    ra_tag_t tag;
    size_t mapped;
    pthread_t thread;
    bool used_library;
};

static void on_soft(void *ctx, ra_tag_t tag, size_t mapped)
{
    struct soft_log *log = ctx;
    char *report = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&report, &len);
    void *p = malloc(1000);
    ra_tag_stats_t st;

    log->calls++;
    log->tag = tag;
    log->mapped = mapped;
    log->thread = pthread_self();
    log->used_library =
        f != NULL && ra_report(f, RA_FORMAT_TEXT) == 0 &&
        fclose(f) == 0 && len > 0 && ra_checkpoint("soft") == 0 &&
        ra_tag_stats(tag, &st) == 0 && ra_tag_purge(tag) == 0 && p != NULL;
    free(report);
    free(p);
}

START_TEST(test_limit_soft_calls_back_once_per_crossing)
{
    ra_tag_t tag = tu_tag_create("soft");
    struct soft_log log = {0};
    void *blocks[32];

    set_limit(tag, 0, 4 * MIB, on_soft, &log);
    for (size_t round = 1; round <= 2; round++) {
        for (size_t i = 0; i < 32; i++) {
            blocks[i] = ra_malloc_tag(tag, 256 * KIB);
            ck_assert_ptr_nonnull(blocks[i]);
        }
        ck_assert_uint_eq(log.calls, round);
        ck_assert_uint_eq(log.tag, tag);
        ck_assert_uint_ge(log.mapped, 4 * MIB);
        ck_assert(log.used_library);
        /* Below the limit again: armed for the next crossing. */
        for (size_t i = 0; i < 32; i++)
            ra_free(blocks[i]);
        ra_thread_flush();
        ck_assert_int_eq(ra_tag_purge(tag), 0);
        ck_assert_uint_lt(tu_tag_stats(tag).mapped, 4 * MIB);
    }
}
END_TEST

START_TEST(test_limit_soft_without_falling_back_calls_once)
{
    ra_tag_t tag = tu_tag_create("soft-once");
    struct soft_log log = {0};
    void *blocks[48];

    /* A fresh tag holds jemalloc's metadata already: the limit is above. */
    set_limit(tag, 0, tu_tag_stats(tag).mapped + 2 * MIB, on_soft, &log);
    for (size_t i = 0; i < 48; i++)
        ck_assert_ptr_nonnull(blocks[i] = ra_malloc_tag(tag, 128 * KIB));
    /* Up and down above the limit: no new crossing. */
    for (size_t i = 0; i < 24; i++)
        ra_free(blocks[i]);
    for (size_t i = 0; i < 24; i++)
        ck_assert_ptr_nonnull(blocks[i] = ra_malloc_tag(tag, 200 * KIB));
    ck_assert_uint_eq(log.calls, 1);
    for (size_t i = 0; i < 48; i++)
        ra_free(blocks[i]);
}
END_TEST

struct crossing {
    ra_tag_t tag;
    pthread_t self;
    void *block;
};

static void *cross_soft(void *arg)
{
    struct crossing *c = arg;

    c->self = pthread_self();
    c->block = ra_malloc_tag(c->tag, 4 * MIB);
    return NULL;
}

START_TEST(test_limit_soft_runs_on_the_crossing_thread)
{
    struct crossing c = {tu_tag_create("soft-thread"), 0, NULL};
    struct soft_log log = {0};
    pthread_t t;

    set_limit(c.tag, 0, tu_tag_stats(c.tag).mapped + 1 * MIB, on_soft, &log);
    ck_assert_int_eq(pthread_create(&t, NULL, cross_soft, &c), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_ptr_nonnull(c.block);
    ck_assert_uint_eq(log.calls, 1);
    ck_assert(pthread_equal(log.thread, c.self));
    ck_assert(log.used_library);
    ra_free(c.block);
}
END_TEST

START_TEST(test_limit_soft_already_passed_waits_for_a_fall)
{
    ra_tag_t tag = tu_tag_create("soft-late");
    struct soft_log log = {0};
    void *a = ra_malloc_tag(tag, 8 * MIB), *b;

    ck_assert_ptr_nonnull(a);
    set_limit(tag, 0, 4 * MIB, on_soft, &log);
    b = ra_malloc_tag(tag, 2 * MIB);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(log.calls, 0);
    ra_free(a);
    ra_free(b);
    ck_assert_int_eq(ra_tag_purge(tag), 0);
    a = ra_malloc_tag(tag, 8 * MIB);
    ck_assert_ptr_nonnull(a);
    ck_assert_uint_eq(log.calls, 1);
    ra_free(a);
}
END_TEST

/* A soft and a hard limit together: the crossing of the soft one is
 * reported even when a later allocation is refused by the hard one. */
START_TEST(test_limit_soft_and_hard_together)
{
    ra_tag_t tag = tu_tag_create("both");
    struct soft_log log = {0};
    void *blocks[BLOCKS];
    size_t n;
    int err;

    set_limit(tag, 8 * MIB, 4 * MIB, on_soft, &log);
    n = fill_to_limit(tag, 512 * KIB, 8 * MIB, blocks, &err);
    ck_assert_int_eq(err, ENOMEM);
    ck_assert_uint_eq(log.calls, 1);
    ck_assert_uint_ge(log.mapped, 4 * MIB);
    ck_assert_uint_le(log.mapped, 8 * MIB);
    while (n > 0)
        ra_free(blocks[--n]);
}
END_TEST

/* Tag A's callback allocates in tag B past B's soft limit: B's crossing is
 * not lost, but delivered once A's callback has returned, on the same
 * thread, before the allocation that crossed A's limit returns. */
struct nested {
    ra_tag_t a, b;
    void *b_block;
    unsigned a_calls, b_calls;
    bool b_inside_a;   /* B's callback ran while A's was running */
    bool in_a;
    pthread_t b_thread;
};

static void on_soft_b(void *ctx, ra_tag_t tag, size_t mapped)
{
    struct nested *n = ctx;

    (void)mapped;
    n->b_calls += tag == n->b;
    n->b_inside_a |= n->in_a;
    n->b_thread = pthread_self();
}

static void on_soft_a(void *ctx, ra_tag_t tag, size_t mapped)
{
    struct nested *n = ctx;

    (void)mapped;
    n->a_calls += tag == n->a;
    n->in_a = true;
    n->b_block = ra_malloc_tag(n->b, 8 * MIB);
    n->in_a = false;
}

START_TEST(test_limit_soft_crossed_inside_another_callback_is_delivered)
{
    struct nested n = {tu_tag_create("outer"), tu_tag_create("inner"), NULL,
                       0, 0, false, false, 0};
    void *a_block, *more;

    set_limit(n.a, 0, 4 * MIB, on_soft_a, &n);
    set_limit(n.b, 0, 4 * MIB, on_soft_b, &n);
    a_block = ra_malloc_tag(n.a, 8 * MIB);
    ck_assert_ptr_nonnull(a_block);
    ck_assert_ptr_nonnull(n.b_block);
    ck_assert_uint_eq(n.a_calls, 1);
    ck_assert_uint_eq(n.b_calls, 1);
    ck_assert(!n.b_inside_a);
    ck_assert(pthread_equal(n.b_thread, pthread_self()));
    /* Once each: B growing on does not call again. */
    more = ra_malloc_tag(n.b, 8 * MIB);
    ck_assert_ptr_nonnull(more);
    ck_assert_uint_eq(n.b_calls, 1);
    ck_assert_uint_eq(n.a_calls, 1);
    ra_free(more);
    ra_free(n.b_block);
    ra_free(a_block);
}
END_TEST

/* A callback that crosses its own tag's limit again (it frees and purges
 * below it, then allocates past it) is called again after it returns, not
 * inside itself. */
struct recross {
    ra_tag_t tag;
    unsigned calls, depth, max_depth;
    void *below, *again;
};

static void on_soft_recross(void *ctx, ra_tag_t tag, size_t mapped)
{
    struct recross *r = ctx;

    (void)tag;
    (void)mapped;
    r->calls++;
    if (++r->depth > r->max_depth)
        r->max_depth = r->depth;
    if (r->calls == 1) {
        ra_free(r->below);
        ra_thread_flush();
        ra_tag_purge(r->tag);
        r->again = ra_malloc_tag(r->tag, 1 * MIB);
    }
    r->depth--;
}

START_TEST(test_limit_soft_crossed_again_by_its_own_callback_runs_after_it)
{
    struct recross r = {tu_tag_create("recross"), 0, 0, 0, NULL, NULL};
    void *crossing;

    set_limit(r.tag, 0, tu_tag_stats(r.tag).mapped + 2 * MIB,
              on_soft_recross, &r);
    r.below = ra_malloc_tag(r.tag, 1 * MIB);
    ck_assert_ptr_nonnull(r.below);
    ck_assert_uint_eq(r.calls, 0);
    crossing = ra_malloc_tag(r.tag, 1536 * KIB);
    ck_assert_ptr_nonnull(crossing);
    ck_assert_ptr_nonnull(r.again);
    ck_assert_uint_eq(r.calls, 2);
    ck_assert_uint_eq(r.max_depth, 1);
    ra_free(crossing);
    ra_free(r.again);
}
END_TEST

/* A tag destroyed by the callback of another tag before its own crossing
 * is delivered: nothing is called for it (its budget is gone). */
struct doomed {
    ra_tag_t a, b;
    unsigned b_calls;
};

static void on_soft_doomed_b(void *ctx, ra_tag_t tag, size_t mapped)
{
    struct doomed *d = ctx;

    (void)tag;
    (void)mapped;
    d->b_calls++;
}

static void on_soft_destroys_b(void *ctx, ra_tag_t tag, size_t mapped)
{
    struct doomed *d = ctx;
    void *p;

    (void)tag;
    (void)mapped;
    p = ra_malloc_tag(d->b, 8 * MIB);
    if (p != NULL)
        ra_tag_destroy(d->b);
}

START_TEST(test_limit_soft_of_a_tag_destroyed_before_delivery_is_dropped)
{
    struct doomed d = {tu_tag_create("destroyer"), tu_tag_create("doomed"),
                       0};
    ra_tag_t heir;
    void *p;

    set_limit(d.a, 0, 4 * MIB, on_soft_destroys_b, &d);
    set_limit(d.b, 0, 4 * MIB, on_soft_doomed_b, &d);
    p = ra_malloc_tag(d.a, 8 * MIB);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(d.b_calls, 0);
    /* Its id's next holder is not called for the old crossing either. */
    heir = tu_tag_create("heir");
    ck_assert_uint_eq(heir, d.b);
    ra_free(ra_malloc_tag(heir, 100));
    ck_assert_uint_eq(d.b_calls, 0);
    ra_free(p);
}
END_TEST

/* -- "errors" --------------------------------------------------------------- */

static void soft_ignored(void *ctx, ra_tag_t tag, size_t mapped)
{
    (void)ctx; (void)tag; (void)mapped;
}

START_TEST(test_limit_get_returns_what_was_set)
{
    ra_tag_t tag = tu_tag_create("get");
    int ctx;
    ra_tag_limit_t got;

    ck_assert_int_eq(ra_tag_get_limit(tag, &got), 0);
    ck_assert_uint_eq(got.hard, 0);
    ck_assert_uint_eq(got.soft, 0);
    ck_assert_ptr_null(got.on_soft);
    ck_assert_ptr_null(got.ctx);
    set_limit(tag, 10 * MIB, 5 * MIB, soft_ignored, &ctx);
    ck_assert_int_eq(ra_tag_get_limit(tag, &got), 0);
    ck_assert_uint_eq(got.hard, 10 * MIB);
    ck_assert_uint_eq(got.soft, 5 * MIB);
    ck_assert(got.on_soft == soft_ignored);
    ck_assert_ptr_eq(got.ctx, &ctx);
    /* A soft limit alone may be any size. */
    set_limit(tag, 0, 64 * GIB, NULL, NULL);
    ck_assert_int_eq(ra_tag_get_limit(tag, &got), 0);
    ck_assert_uint_eq(got.soft, 64 * GIB);
    ck_assert_int_eq(ra_tag_set_limit(tag, NULL), 0);
    ck_assert_int_eq(ra_tag_get_limit(tag, &got), 0);
    ck_assert_uint_eq(got.hard, 0);
    ck_assert_uint_eq(got.soft, 0);
}
END_TEST

START_TEST(test_limit_rejects_bad_arguments_and_changes_nothing)
{
    ra_tag_t tag = tu_tag_create("errors");
    ra_tag_limit_t bad = {4 * MIB, 8 * MIB, NULL, NULL}, got;

    set_limit(tag, 16 * MIB, 0, NULL, NULL);
    errno = 0;
    ck_assert_int_eq(ra_tag_set_limit(tag, &bad), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_int_eq(ra_tag_get_limit(tag, &got), 0);
    ck_assert_uint_eq(got.hard, 16 * MIB);
    errno = 0;
    ck_assert_int_eq(ra_tag_set_limit(RA_TAG_NONE, NULL), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_set_limit(tag + 1, NULL), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_get_limit(tag + 1, &got), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_get_limit(tag, NULL), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_get_limit(RA_TAG_NONE, &got), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

static int child_limit_in_pass_through(void)
{
    ra_tag_t tag = ra_tag_create("pass");
    ra_tag_limit_t limit = {MIB, 0, NULL, NULL}, got;
    void *p;

    TU_REQUIRE(tag != RA_TAG_NONE);
    TU_REQUIRE(ra_tag_set_limit(tag, &limit) == -1 && errno == ENOTSUP);
    TU_REQUIRE(ra_tag_get_limit(tag, &got) == -1 && errno == ENOTSUP);
    /* Nothing is bounded: everything goes to jemalloc. */
    p = ra_malloc_tag(tag, 4 * MIB);
    TU_REQUIRE(p != NULL);
    ra_free(p);
    return 0;
}

START_TEST(test_limit_not_supported_in_pass_through_mode)
{
    static const char *const env[] = {"REGIONALLOC=0", NULL};
    char err[512];

    ck_assert_int_eq(
        tu_run_with_env(env, child_limit_in_pass_through, err, sizeof err),
        0);
}
END_TEST

/* -- "environment" ---------------------------------------------------------- */

static int child_limits_from_environment(void)
{
    ra_tag_t alpha = ra_tag_create("alpha"), beta = ra_tag_create("beta");
    ra_tag_t gamma = ra_tag_create("gamma"), delta = ra_tag_create("delta");
    ra_tag_limit_t got;

    TU_REQUIRE(ra_tag_get_limit(alpha, &got) == 0);
    TU_REQUIRE(got.hard == 8 * MIB && got.soft == 4 * MIB);
    TU_REQUIRE(got.on_soft == NULL);
    TU_REQUIRE(ra_tag_get_limit(beta, &got) == 0);
    TU_REQUIRE(got.hard == GIB && got.soft == 0);
    TU_REQUIRE(ra_tag_get_limit(gamma, &got) == 0);
    TU_REQUIRE(got.hard == 0 && got.soft == 0);
    TU_REQUIRE(ra_tag_get_limit(delta, &got) == 0);
    TU_REQUIRE(got.hard == 0 && got.soft == 0);
    /* It binds. */
    errno = 0;
    TU_REQUIRE(ra_malloc_tag(alpha, 16 * MIB) == NULL && errno == ENOMEM);
    /* A tag created again under the name gets its budget again. */
    TU_REQUIRE(ra_tag_set_limit(alpha, NULL) == 0);
    TU_REQUIRE(ra_tag_destroy(alpha) == 0);
    alpha = ra_tag_create("alpha");
    TU_REQUIRE(ra_tag_get_limit(alpha, &got) == 0);
    TU_REQUIRE(got.hard == 8 * MIB && got.soft == 4 * MIB);
    return 0;
}

START_TEST(test_limit_from_environment)
{
    static const char *const env[] = {
        "REGIONALLOC_LIMITS=alpha=8M/4M,beta=1G,,broken,gamma=12Q,=5M,"
        "delta=1M/2M",
        NULL};
    static const char *const bad[] = {"broken", "gamma=12Q", "=5M",
                                      "delta=1M/2M"};
    char err[4096];
    int status = tu_run_with_env(env, child_limits_from_environment, err,
                                 sizeof err);

    ck_assert_msg(status == 0, "child exited with %d; stderr: %s", status,
                  err);
    ck_assert_msg(tu_count_lines(err) == 4, "want 4 lines: %s", err);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
        ck_assert_msg(strstr(err, quoted) != NULL, "%s not named in: %s",
                      quoted, err);
    }
    ck_assert_msg(strstr(err, "REGIONALLOC_LIMITS") != NULL, "%s", err);
}
END_TEST

/* -- "edges" ---------------------------------------------------------------- */

#define TOP ((size_t)1 << 63)

static const size_t edges[] = {1, TOP - 1, TOP, SIZE_MAX};

static unsigned edge_calls;

static void count_edge_call(void *ctx, ra_tag_t tag, size_t mapped)
{
    (void)ctx; (void)tag; (void)mapped;
    edge_calls++;
}

/* A hard limit of 1 refuses; any larger one up to 2^64 - 1 lets a tag
 * allocate and its pool grow, with no sum that wraps; a soft limit as
 * large is never reached; soft above hard is refused at every size. */
START_TEST(test_limit_hard_and_soft_at_the_edges)
{
    size_t edge = edges[_i];
    ra_tag_t tag = tu_tag_create("edge");
    ra_tag_limit_t got;
    void *p;

    set_limit(tag, edge, 0, NULL, NULL);
    p = ra_malloc_tag(tag, MIB);
    if (edge == 1) {
        ck_assert(p == NULL && errno == ENOMEM);
    } else {
        void *q = ra_malloc_tag(tag, 64 * MIB);
        ck_assert(p != NULL && q != NULL);
        ra_free(q);
    }
    ra_free(p);
    /* Soft alone, and soft equal to hard. */
    set_limit(tag, 0, edge, count_edge_call, NULL);
    set_limit(tag, edge == 1 ? 0 : edge, edge, count_edge_call, NULL);
    if (edge != 1) {
        p = ra_malloc_tag(tag, 4 * MIB);
        ck_assert_ptr_nonnull(p);
        ra_free(p);
        ck_assert_uint_eq(edge_calls, 0);
    }
    /* Soft above hard, by one. */
    if (edge != SIZE_MAX) {
        ra_tag_limit_t bad = {edge, edge + 1, NULL, NULL};
        errno = 0;
        ck_assert_int_eq(ra_tag_set_limit(tag, &bad), -1);
        ck_assert_int_eq(errno, EINVAL);
    }
    ck_assert_int_eq(ra_tag_get_limit(tag, &got), 0);
    ck_assert_uint_eq(got.soft, edge);
}
END_TEST

static int child_limits_at_the_edges(void)
{
    static const struct {
        const char *name;
        size_t hard, soft;
    } want[] = {
        {"a", SIZE_MAX, TOP}, {"b", TOP - 1, 0}, {"c", 1, 0},
        {"d", 0, 0},          {"e", 0, SIZE_MAX}, {"f", 0, 0},
    };
    ra_tag_t tags[6];
    ra_tag_limit_t got;
    void *p;

    for (size_t i = 0; i < 6; i++) {
        tags[i] = ra_tag_create(want[i].name);
        TU_REQUIRE(tags[i] != RA_TAG_NONE);
        TU_REQUIRE(ra_tag_get_limit(tags[i], &got) == 0);
        TU_REQUIRE(got.hard == want[i].hard && got.soft == want[i].soft);
    }
    p = ra_malloc_tag(tags[0], 16 * MIB);
    TU_REQUIRE(p != NULL);
    ra_free(p);
    errno = 0;
    TU_REQUIRE(ra_malloc_tag(tags[2], MIB) == NULL && errno == ENOMEM);
    return 0;
}

/* REGIONALLOC_LIMITS at the edges: sizes up to 2^64 - 1 taken, one
 * above refused, soft above hard refused, with one line each. */
START_TEST(test_limit_from_environment_at_the_edges)
{
    static const char *const env[] = {
        "REGIONALLOC_LIMITS=a=18446744073709551615/9223372036854775808,"
        "b=9223372036854775807,c=1,d=20000000T,e=0/18446744073709551615,"
        "f=9223372036854775807/9223372036854775808",
        NULL};
    char err[4096];
    int status = tu_run_with_env(env, child_limits_at_the_edges, err,
                                 sizeof err);

    ck_assert_msg(status == 0, "child exited with %d; stderr: %s", status,
                  err);
    ck_assert_msg(tu_count_lines(err) == 2 &&
                      strstr(err, "\"d=20000000T\"") != NULL &&
                      strstr(err, "\"f=9223372036854775807/") != NULL,
                  "%s", err);
}
END_TEST

/* -- "report" --------------------------------------------------------------- */

START_TEST(test_limit_in_every_report_format)
{
    ra_tag_t tag = tu_tag_create("budgeted");
    char *text, *json, *prom, line[160];

    set_limit(tag, 8 * MIB, 6 * MIB, NULL, NULL);
    errno = 0;
    ck_assert_ptr_null(ra_malloc_tag(tag, 9 * MIB));
    ck_assert_ptr_null(ra_malloc_tag(tag, 10 * MIB));

    json = tu_report_string(ra_report, RA_FORMAT_JSON);
    ck_assert_msg(strstr(json, "\"limit\": 8388608, \"soft_limit\": 6291456, "
                               "\"limit_failures\": 2, \"arenas\": 1, ") !=
                      NULL,
                  "%s", json);
    free(json);

    prom = tu_report_string(ra_report, RA_FORMAT_PROMETHEUS);
    snprintf(line, sizeof line,
             "\nregionalloc_tag_limit_bytes{tag=\"budgeted\"} %zu\n", 8 * MIB);
    ck_assert_msg(strstr(prom, line) != NULL, "%s", prom);
    snprintf(line, sizeof line,
             "\nregionalloc_tag_soft_limit_bytes{tag=\"budgeted\"} %zu\n",
             6 * MIB);
    ck_assert_msg(strstr(prom, line) != NULL, "%s", prom);
    ck_assert_msg(strstr(prom, "\nregionalloc_tag_limit_failures_total{tag="
                               "\"budgeted\"} 2\n") != NULL,
                  "%s", prom);
    free(prom);

    text = tu_report_string(ra_report, RA_FORMAT_TEXT);
    ck_assert_msg(strstr(text, "limit") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "soft_limit") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "limit_failures") != NULL, "%s", text);
    {
        /* The budgeted tag's row: its limits and its failures. */
        const char *row = strstr(text, "\nbudgeted ");
        char line_of[512];
        size_t len;
        ck_assert_msg(row != NULL, "%s", text);
        len = strcspn(row + 1, "\n");
        snprintf(line_of, sizeof line_of, "%.*s", (int)len, row + 1);
        ck_assert_msg(strstr(line_of, " 8.0 MiB ") != NULL, "%s", line_of);
        ck_assert_msg(strstr(line_of, " 6.0 MiB ") != NULL, "%s", line_of);
        /* limit_failures 2, then the pool's one arena (sizes such as
         * "8.0 MiB" are two words: count from the end, past the two tree
         * columns). */
        {
            char copy[512], *tok, *word[32], *save = NULL;
            unsigned n = 0;
            snprintf(copy, sizeof copy, "%s", line_of);
            for (tok = strtok_r(copy, " ", &save); tok != NULL && n < 32;
                 tok = strtok_r(NULL, " ", &save))
                word[n++] = tok;
            ck_assert_msg(n > 6 && strcmp(word[n - 6], "2") == 0 &&
                              strcmp(word[n - 5], "1") == 0,
                          "%s", line_of);
        }
    }
    free(text);
}
END_TEST

static Suite *limit_suite(void)
{
    Suite *s = suite_create("limit");
    TCase *tc;

    tc = tcase_create("hard");
    tcase_add_test(tc, test_limit_hard_bounds_mapped_and_refuses_cleanly);
    tcase_add_test(tc, test_limit_small_allocations_at_the_limit_never_crash);
    tcase_add_test(tc, test_limit_hard_holds_under_concurrency);
    tcase_add_test(tc, test_limit_below_current_usage_refuses_until_freed);
    tcase_add_test(tc, test_limit_refuses_through_a_pushed_tag);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("soft");
    tcase_add_test(tc, test_limit_soft_calls_back_once_per_crossing);
    tcase_add_test(tc, test_limit_soft_without_falling_back_calls_once);
    tcase_add_test(tc, test_limit_soft_runs_on_the_crossing_thread);
    tcase_add_test(tc, test_limit_soft_already_passed_waits_for_a_fall);
    tcase_add_test(tc, test_limit_soft_and_hard_together);
    tcase_add_test(tc,
                   test_limit_soft_crossed_inside_another_callback_is_delivered);
    tcase_add_test(
        tc, test_limit_soft_crossed_again_by_its_own_callback_runs_after_it);
    tcase_add_test(tc,
                   test_limit_soft_of_a_tag_destroyed_before_delivery_is_dropped);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_limit_get_returns_what_was_set);
    tcase_add_test(tc, test_limit_rejects_bad_arguments_and_changes_nothing);
    tcase_add_test(tc, test_limit_not_supported_in_pass_through_mode);
    suite_add_tcase(s, tc);

    tc = tcase_create("environment");
    tcase_add_test(tc, test_limit_from_environment);
    suite_add_tcase(s, tc);

    tc = tcase_create("edges");
    tcase_add_loop_test(tc, test_limit_hard_and_soft_at_the_edges, 0,
                        sizeof edges / sizeof edges[0]);
    tcase_add_test(tc, test_limit_from_environment_at_the_edges);
    suite_add_tcase(s, tc);

    tc = tcase_create("report");
    tcase_add_test(tc, test_limit_in_every_report_format);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(limit_suite());
}

/* Suite "backend (unit)": the jemalloc seam (src/backend.c), each call
 * against what jemalloc itself does.
 *
 * Everything the library asks of jemalloc's control interface goes through
 * these few functions, and each says failure by its return where mallctl
 * would have said it by an errno the callers never look at: an option
 * read wrongly turns the front caches on under tcache:false, a verb that
 * fails silently leaves a reset tag's blocks alive, a figure read from
 * the wrong name makes every report wrong. The arenas made here carve
 * from a tag's region (its extent hooks), as the pool's do, so a block
 * shows where it came from; they are not in the tag's pool, and the
 * blocks are given back through jemalloc alone. Blocks are made without
 * a thread cache (MALLOCX_TCACHE_NONE) wherever a figure is compared, so
 * that jemalloc counts exactly what the test made.
 *
 * The test reads a few of jemalloc's figures itself with mallctl (this
 * file's oracle, which the library leaves to backend.c alone), and runs in
 * a process whose MALLOC_CONF is unset (main re-executes it without), so
 * that jemalloc's defaults are the ones compared. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RA__MALLCTL_ALLOWED
#include "backend.h"
#include "internal.h"
#include "region.h"
#include "testutil.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
/* An arena index jemalloc never handed out: past every made one, and not
 * narenas itself, which mallctl reads as "every arena". */
#define BOGUS_ARENA 4000u

/* jemalloc's own answer for a size_t or unsigned figure. */
static size_t oracle_size(const char *name)
{
    size_t v = 0, len = sizeof v;

    ck_assert_int_eq(mallctl(name, &v, &len, NULL, 0), 0);
    return v;
}

static unsigned arena_of(void *p)
{
    unsigned arena;
    size_t len = sizeof arena;

    ck_assert_int_eq(mallctl("arenas.lookup", &arena, &len, &p, sizeof p),
                     0);
    return arena;
}

/* A new arena on tag's region, as the pool makes one; the index jemalloc
 * gives is checked to be new. */
static unsigned made_arena(ra_tag_t tag)
{
    unsigned before = ra__be_arena_count();
    int arena = ra__be_arena_create(ra__region_hooks(tag),
                                    ra__region_grow_limit());

    ck_assert_int_ge(arena, 0);
    ck_assert_uint_eq(ra__be_arena_count(), before + 1);
    return (unsigned)arena;
}

static int flags_of(unsigned arena)
{
    return RA__ARENA_FLAGS(arena) | MALLOCX_TCACHE_NONE;
}

static bool in_region(ra_tag_t tag, const void *p)
{
    uintptr_t start, end;

    ra__region_carved(tag, &start, &end);
    return (uintptr_t)p >= start && (uintptr_t)p < end;
}

START_TEST(test_backend_unit_known_options_read_as_set)
{
    /* jemalloc's defaults on Linux, MALLOC_CONF unset (main). */
    ck_assert(ra__be_option("opt.tcache"));
    ck_assert(ra__be_option("opt.retain"));
    /* A boolean option that is off by default: the value is read, not
     * only the option's existence. */
    ck_assert(!ra__be_option("opt.zero"));
}
END_TEST

START_TEST(test_backend_unit_unknown_and_non_boolean_options_are_false)
{
    ck_assert(!ra__be_option("opt.no_such_option"));
    ck_assert(!ra__be_option("no.such.name"));
    /* Not a bool: jemalloc refuses a read of the wrong size. */
    ck_assert(!ra__be_option("opt.narenas"));
    ck_assert(!ra__be_option("opt.dirty_decay_ms"));
}
END_TEST

/* In a process started with MALLOC_CONF=tcache:false,retain:false. */
static int options_off_child(void)
{
    ra_tag_t tag;
    int arena;
    void *p;

    TU_REQUIRE(!ra__be_option("opt.tcache"));
    TU_REQUIRE(!ra__be_option("opt.retain"));
    tag = ra_tag_create("no-retain");
    TU_REQUIRE(tag != RA_TAG_NONE);
    /* ra__be_start read the options: no (thread, tag) caches, no size
     * classes for the front caches. */
    TU_REQUIRE(!ra__be_caches);
    TU_REQUIRE(ra__small_max == 0);
    /* Without opt.retain jemalloc has no retain_grow_limit to set: the
     * creation must not fail for it. */
    arena = ra__be_arena_create(ra__region_hooks(tag),
                                ra__region_grow_limit());
    TU_REQUIRE(arena >= 0);
    p = ra__je_mallocx(4096, flags_of((unsigned)arena));
    TU_REQUIRE(p != NULL && in_region(tag, p));
    ra__je_dallocx(p, MALLOCX_TCACHE_NONE);
    return 0;
}

START_TEST(test_backend_unit_options_follow_malloc_conf)
{
    static const char *const env[] = {"MALLOC_CONF=tcache:false,retain:false",
                                      NULL};
    char err[1024];

    ck_assert_int_eq(tu_exec_self(env, "options_off", err, sizeof err), 0);
}
END_TEST

START_TEST(test_backend_unit_page_is_jemallocs)
{
    size_t page = ra__be_page();

    ck_assert_uint_eq(page, oracle_size("arenas.page"));
    ck_assert_uint_ne(page, 0);
    ck_assert_uint_eq(page & (page - 1), 0);
    ck_assert_uint_eq(page % (size_t)sysconf(_SC_PAGESIZE), 0);
}
END_TEST

/* The arena jemalloc makes takes its extents from the hooks given: its
 * blocks lie in the tag's region, and it grows by the step asked for. */
START_TEST(test_backend_unit_create_adds_one_arena_on_the_hooks_given)
{
    ra_tag_t tag = tu_tag_create("backend");
    unsigned before = ra__be_arena_count(), arena = made_arena(tag);
    size_t limit = 0, len = sizeof limit;
    char name[64];
    void *small, *large;

    /* No arena was destroyed in this process: jemalloc takes the next
     * index. */
    ck_assert_uint_eq(arena, before);
    ck_assert_uint_eq(ra__be_arena_count(), before + 1);
    small = ra__je_mallocx(64, flags_of(arena));
    large = ra__je_mallocx(256 * KIB, flags_of(arena));
    ck_assert_ptr_nonnull(small);
    ck_assert_ptr_nonnull(large);
    ck_assert(in_region(tag, small));
    ck_assert(in_region(tag, large));
    ck_assert_uint_eq(arena_of(small), arena);
    ck_assert_uint_eq(arena_of(large), arena);
    /* opt.retain is on (the default): the step was set. */
    snprintf(name, sizeof name, "arena.%u.retain_grow_limit", arena);
    ck_assert_int_eq(mallctl(name, &limit, &len, NULL, 0), 0);
    ck_assert_uint_eq(limit, ra__region_grow_limit());
    ra__je_dallocx(small, MALLOCX_TCACHE_NONE);
    ra__je_dallocx(large, MALLOCX_TCACHE_NONE);
}
END_TEST

static _Atomic unsigned refused_allocs;

static void *refuse_alloc(extent_hooks_t *hooks, void *new_addr, size_t size,
                          size_t alignment, bool *zero, bool *commit,
                          unsigned arena_ind)
{
    (void)hooks, (void)new_addr, (void)size, (void)alignment, (void)zero,
        (void)commit, (void)arena_ind;
    atomic_fetch_add(&refused_allocs, 1);
    return NULL;
}

/* Hooks that give nothing: jemalloc cannot make the arena's metadata. */
static extent_hooks_t refusing_hooks = {.alloc = refuse_alloc};

START_TEST(test_backend_unit_refused_metadata_fails_with_eagain)
{
    unsigned before = ra__be_arena_count();

    errno = 0;
    ck_assert_int_eq(ra__be_arena_create(&refusing_hooks, 64 * MIB), -1);
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_uint_gt(atomic_load(&refused_allocs), 0);
    ck_assert_uint_eq(ra__be_arena_count(), before);
}
END_TEST

START_TEST(test_backend_unit_verbs_on_a_made_arena_succeed)
{
    unsigned arena = made_arena(tu_tag_create("verbs"));
    void *p = ra__je_mallocx(64, flags_of(arena));

    ck_assert_ptr_nonnull(p);
    ra__je_dallocx(p, MALLOCX_TCACHE_NONE);
    ck_assert(!ra__be_arena_decay(arena));
    ck_assert(!ra__be_arena_purge(arena));
    ck_assert(!ra__be_arena_reset(arena));
    /* Again: the translated name (the MIB) is reused. */
    ck_assert(!ra__be_arena_decay(arena));
    ck_assert(!ra__be_arena_purge(arena));
    ck_assert(!ra__be_arena_reset(arena));
    /* Every arena at once (ra_purge_all's untagged part). */
    ck_assert(!ra__be_arena_purge(RA__BE_ALL_ARENAS));
}
END_TEST

/* A verb's first call fails: its name is translated all the same, and the
 * next call, on a real arena, works. jemalloc refuses to reset an
 * automatic arena (0). Past the last arena means arena + 2: jemalloc reads
 * the index narenas itself as "every arena" (arena.<narenas>.purge
 * purges them all). */
START_TEST(test_backend_unit_verbs_on_a_bogus_arena_fail)
{
    unsigned arena;

    ck_assert(ra__be_arena_purge(BOGUS_ARENA));
    ck_assert(ra__be_arena_decay(BOGUS_ARENA));
    ck_assert(ra__be_arena_reset(BOGUS_ARENA));
    ck_assert(ra__be_arena_reset(0));
    arena = made_arena(tu_tag_create("bogus"));
    ck_assert(ra__be_arena_purge(arena + 2));
    ck_assert(ra__be_arena_decay(arena + 2));
    ck_assert(ra__be_arena_reset(arena + 1));
    ck_assert(ra__be_arena_reset(arena + 2));
    ck_assert(!ra__be_arena_purge(arena));
    ck_assert(!ra__be_arena_decay(arena));
    ck_assert(!ra__be_arena_reset(arena));
}
END_TEST

START_TEST(test_backend_unit_reset_discards_every_allocation)
{
    unsigned arena = made_arena(tu_tag_create("reset"));
    size_t made = 0;

    for (unsigned i = 0; i < 100; i++) {
        void *p = ra__je_mallocx(i % 2 ? 96 : 40 * KIB, flags_of(arena));
        ck_assert_ptr_nonnull(p);
        made += ra__je_sallocx(p, 0);
    }
    ra__be_refresh();
    ck_assert_uint_eq(ra__be_arena_allocated(arena), made);
    ck_assert(!ra__be_arena_reset(arena));
    ra__be_refresh();
    ck_assert_uint_eq(ra__be_arena_allocated(arena), 0);
    /* The arena serves again after its reset. */
    ck_assert_ptr_nonnull(ra__je_mallocx(96, flags_of(arena)));
}
END_TEST

START_TEST(test_backend_unit_purge_gives_dirty_pages_back)
{
    enum { N = 32 };
    unsigned arena = made_arena(tu_tag_create("purge"));
    struct ra__be_arena_stats st;
    void *blocks[N];

    for (unsigned i = 0; i < N; i++) {
        blocks[i] = ra__je_mallocx(64 * KIB, flags_of(arena));
        ck_assert_ptr_nonnull(blocks[i]);
        memset(blocks[i], 1, 64 * KIB);
    }
    for (unsigned i = 0; i < N; i++)
        ra__je_dallocx(blocks[i], MALLOCX_TCACHE_NONE);
    ra__be_refresh();
    ck_assert(!ra__be_arena_stats(arena, &st));
    /* The default decay (10 s) keeps them dirty for now. */
    ck_assert_uint_ge(st.dirty, N * 64 * KIB);
    ck_assert(!ra__be_arena_purge(arena));
    ra__be_refresh();
    ck_assert(!ra__be_arena_stats(arena, &st));
    ck_assert_uint_eq(st.dirty, 0);
    ck_assert_uint_eq(st.allocated, 0);
}
END_TEST

/* The figures are the arena's own, small and large added: allocated is
 * the usable sizes made and not freed, the counts exact (no cache). */
START_TEST(test_backend_unit_arena_stats_count_what_was_made)
{
    unsigned arena = made_arena(tu_tag_create("stats"));
    struct ra__be_arena_stats st;
    void *small[10], *large[3];

    for (unsigned i = 0; i < 10; i++)
        small[i] = ra__je_mallocx(64, flags_of(arena));
    for (unsigned i = 0; i < 3; i++)
        large[i] = ra__je_mallocx(64 * KIB, flags_of(arena));
    ra__be_refresh();
    ck_assert(!ra__be_arena_stats(arena, &st));
    ck_assert_uint_eq(ra__je_sallocx(small[0], 0), 64);
    ck_assert_uint_eq(ra__je_sallocx(large[0], 0), 64 * KIB);
    ck_assert_uint_eq(st.allocated, 10 * 64 + 3 * 64 * KIB);
    ck_assert_uint_eq(ra__be_arena_allocated(arena), st.allocated);
    ck_assert_uint_eq(st.nmalloc, 13);
    ck_assert_uint_eq(st.ndalloc, 0);
    ck_assert_uint_ge(st.active, st.allocated);
    ck_assert_uint_eq(st.active % ra__be_page(), 0);
    ck_assert_uint_ge(st.mapped, st.active);
    ck_assert_uint_eq(ra__be_arena_mapped(arena), st.mapped);
    ck_assert_uint_gt(st.resident, 0);
    ck_assert_uint_eq(st.muzzy, 0);

    ra__je_dallocx(small[0], MALLOCX_TCACHE_NONE);
    ra__je_dallocx(small[1], MALLOCX_TCACHE_NONE);
    ra__je_dallocx(large[0], MALLOCX_TCACHE_NONE);
    /* Not refreshed: the figures are the last refresh's. */
    ck_assert_uint_eq(ra__be_arena_allocated(arena), st.allocated);
    ra__be_refresh();
    ck_assert(!ra__be_arena_stats(arena, &st));
    ck_assert_uint_eq(st.allocated, 8 * 64 + 2 * 64 * KIB);
    ck_assert_uint_eq(st.nmalloc, 13);
    ck_assert_uint_eq(st.ndalloc, 3);
}
END_TEST

START_TEST(test_backend_unit_stats_of_an_arena_never_made_are_zero)
{
    struct ra__be_arena_stats st;

    memset(&st, 0xff, sizeof st);
    ra__be_refresh();
    ck_assert(ra__be_arena_stats(BOGUS_ARENA, &st));
    ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(st.active, 0);
    ck_assert_uint_eq(st.resident, 0);
    ck_assert_uint_eq(st.mapped, 0);
    ck_assert_uint_eq(st.retained, 0);
    ck_assert_uint_eq(st.dirty, 0);
    ck_assert_uint_eq(st.muzzy, 0);
    ck_assert_uint_eq(st.nmalloc, 0);
    ck_assert_uint_eq(st.ndalloc, 0);
    ck_assert_uint_eq(ra__be_arena_allocated(BOGUS_ARENA), 0);
    ck_assert_uint_eq(ra__be_arena_mapped(BOGUS_ARENA), 0);
}
END_TEST

/* A block freed to an explicit tcache stays allocated to the arena until
 * the tcache is flushed; the id serves again after a flush. */
START_TEST(test_backend_unit_tcache_flush_gives_blocks_back)
{
    unsigned arena = made_arena(tu_tag_create("tcache"));
    unsigned id;
    int flags;
    void *blocks[8];

    ck_assert(!ra__be_tcache_create(&id));
    flags = RA__ARENA_FLAGS(arena) | MALLOCX_TCACHE(id);
    for (unsigned round = 0; round < 2; round++) {
        for (unsigned i = 0; i < 8; i++) {
            blocks[i] = ra__je_mallocx(64, flags);
            ck_assert_ptr_nonnull(blocks[i]);
            ck_assert_uint_eq(arena_of(blocks[i]), arena);
        }
        for (unsigned i = 0; i < 8; i++)
            ra__je_dallocx(blocks[i], flags);
        ra__be_refresh();
        ck_assert_uint_ge(ra__be_arena_allocated(arena), 8 * 64);
        if (round == 0)
            ra__be_tcache_flush(id);
        else
            ra__be_tcache_destroy(id);
        ra__be_refresh();
        ck_assert_uint_eq(ra__be_arena_allocated(arena), 0);
    }
}
END_TEST

/* jemalloc 5.3 has at most 4094 explicit thread caches (ids 0 to
 * MALLOCX_TCACHE_MAX, 4093): the create past the last says so, and an id
 * destroyed serves again. */
START_TEST(test_backend_unit_tcache_ids_run_out_and_come_back)
{
    enum { MAX = 4094 };
    static unsigned ids[MAX + 1];
    static bool seen[MAX + 8];
    unsigned n = 0, again;

    while (n <= MAX && !ra__be_tcache_create(&ids[n]))
        n++;
    /* A few may have been taken already (none by this test process's own
     * code), never more than jemalloc allows. */
    ck_assert_uint_le(n, MAX);
    ck_assert_uint_gt(n, MAX - 8);
    for (unsigned i = 0; i < n; i++) {
        ck_assert_uint_lt(ids[i], MAX + 8);
        ck_assert_msg(!seen[ids[i]], "tcache id %u handed out twice", ids[i]);
        seen[ids[i]] = true;
    }
    ck_assert(ra__be_tcache_create(&again));
    ra__be_tcache_destroy(ids[n / 2]);
    ck_assert(!ra__be_tcache_create(&again));
    ck_assert_uint_eq(again, ids[n / 2]);
    for (unsigned i = 0; i < n; i++)
        ra__be_tcache_destroy(ids[i]);
}
END_TEST

struct auto_cache {
    unsigned arena;
    size_t cached, flushed;
};

/* On a thread of its own, whose automatic tcache holds nothing of any
 * arena yet (a thread's cache mixes arenas): the blocks freed stay in it
 * until the flush. */
static void *use_auto_cache(void *arg)
{
    struct auto_cache *a = arg;
    void *blocks[8];

    for (unsigned i = 0; i < 8; i++)
        blocks[i] = ra__je_mallocx(192, RA__ARENA_FLAGS(a->arena));
    for (unsigned i = 0; i < 8; i++)
        ra__je_dallocx(blocks[i], 0);
    ra__be_refresh();
    a->cached = ra__be_arena_allocated(a->arena);
    ra__be_flush_thread_cache();
    ra__be_refresh();
    a->flushed = ra__be_arena_allocated(a->arena);
    return NULL;
}

START_TEST(test_backend_unit_flush_thread_cache_empties_the_automatic_one)
{
    struct auto_cache a = {made_arena(tu_tag_create("auto")), 0, 0};
    pthread_t t;

    ck_assert_int_eq(pthread_create(&t, NULL, use_auto_cache, &a), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_uint_ge(a.cached, 8 * 192);
    ck_assert_uint_eq(a.flushed, 0);
}
END_TEST

static Suite *backend_suite(void)
{
    Suite *s = suite_create("backend (unit)");
    TCase *options = tcase_create("options");
    TCase *arenas = tcase_create("arenas");
    TCase *stats = tcase_create("statistics");
    TCase *caches = tcase_create("thread caches");

    tcase_add_test(options, test_backend_unit_known_options_read_as_set);
    tcase_add_test(options,
                   test_backend_unit_unknown_and_non_boolean_options_are_false);
    tcase_add_test(options, test_backend_unit_options_follow_malloc_conf);
    tcase_add_test(options, test_backend_unit_page_is_jemallocs);
    suite_add_tcase(s, options);
    tcase_add_test(arenas,
                   test_backend_unit_create_adds_one_arena_on_the_hooks_given);
    tcase_add_test(arenas, test_backend_unit_refused_metadata_fails_with_eagain);
    tcase_add_test(arenas, test_backend_unit_verbs_on_a_made_arena_succeed);
    tcase_add_test(arenas, test_backend_unit_verbs_on_a_bogus_arena_fail);
    tcase_add_test(arenas, test_backend_unit_reset_discards_every_allocation);
    tcase_add_test(arenas, test_backend_unit_purge_gives_dirty_pages_back);
    suite_add_tcase(s, arenas);
    tcase_add_test(stats, test_backend_unit_arena_stats_count_what_was_made);
    tcase_add_test(stats,
                   test_backend_unit_stats_of_an_arena_never_made_are_zero);
    suite_add_tcase(s, stats);
    tcase_add_test(caches, test_backend_unit_tcache_flush_gives_blocks_back);
    tcase_add_test(caches, test_backend_unit_tcache_ids_run_out_and_come_back);
    tcase_add_test(caches,
                   test_backend_unit_flush_thread_cache_empties_the_automatic_one);
    suite_add_tcase(s, caches);
    return s;
}

static const struct tu_child children[] = {
    {"options_off", options_off_child},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    tu_child_main(argc, argv, children);
    /* jemalloc read MALLOC_CONF before main: a process started with one
     * starts again without it, so that the defaults are what is tested. */
    if (getenv("MALLOC_CONF") != NULL) {
        unsetenv("MALLOC_CONF");
        execv("/proc/self/exe", argv);
        return EXIT_FAILURE;
    }
    return tu_run_suite(backend_suite());
}

/* Suite "pool (unit)": a tag's pool of arenas (src/pool.c), driven call by
 * call: which arena each new (thread, tag) pair is bound to, when the pool
 * grows and what stops it, and that the per-tag verbs reach every arena.
 *
 * The pool decides where the threads of a hot tag allocate; a count off by
 * one puts every new thread on one arena (the queueing the pool exists to
 * avoid) or grows a pool past the bound the user set, and a growth that
 * ignores a budget or jemalloc's arena indices makes a tag's allocations,
 * or a later tag's creation, fail. The tests bind and unbind pairs
 * directly (ra__pool_bind, as a pair's first allocation does) on tags made
 * with the public API, so every count is known.
 *
 * The environment is set in main, before any test's process first uses
 * the library: at most 2 pairs an arena and 4 arenas a tag, whatever this
 * machine's CPUs; nothing else that changes a pool. Tests that need
 * another environment run a child of this program with it. The link wraps
 * ra__be_arena_create and ra__region_refusal (both called by pool.c) so
 * that a test can make jemalloc refuse an arena, and say why. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "budget.h"
#include "internal.h"
#include "region.h"
#include "testutil.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
/* main's environment. */
#define PER_ARENA 2u
#define TAG_ARENAS 4u
/* pool.c's: jemalloc's arena indices, and the budget's headroom. */
#define ARENA_INDICES 4095u
#define GROW_MARGIN (8 * MIB)

int __real_ra__be_arena_create(extent_hooks_t *hooks, size_t grow_limit);
int __real_ra__region_refusal(void);

/* Arenas asked of jemalloc so far; the next refusals of them are refused
 * with errno refusal_errno, and ra__region_refusal then says
 * refusal_reason (0: the real one). */
static _Atomic unsigned arenas_asked;
static unsigned refusals;
static int refusal_errno = EAGAIN, refusal_reason;

int __wrap_ra__be_arena_create(extent_hooks_t *hooks, size_t grow_limit)
{
    atomic_fetch_add(&arenas_asked, 1);
    if (refusals > 0) {
        refusals--;
        errno = refusal_errno;
        return -1;
    }
    return __real_ra__be_arena_create(hooks, grow_limit);
}

/* Read only after a refusal (make_arena). */
int __wrap_ra__region_refusal(void)
{
    return refusal_reason != 0 ? refusal_reason : __real_ra__region_refusal();
}


/* A pair's binding as thread.c makes it: the budget says whether the pool
 * may grow for it. */
static unsigned bind_pair(ra_tag_t tag)
{
    return ra__pool_bind(tag, ra__budget_allows_growth(tag));
}

/* Binds a pair and checks that it went to the pool's k-th arena, and that
 * the pool then has n arenas. */
static void bind_expect(ra_tag_t tag, unsigned k, unsigned n)
{
    unsigned arena = bind_pair(tag);

    ck_assert_uint_eq(ra__pool_count(tag), n);
    ck_assert_uint_lt(k, n);
    ck_assert_msg(arena == ra__pool_arena(tag, k),
                  "bound to arena %u, not the pool's arena %u (%u)", arena, k,
                  ra__pool_arena(tag, k));
}

/* Every arena of the pool is the tag's, once, and ra_tag_arenas lists the
 * same ones. */
static void check_owned(ra_tag_t tag)
{
    unsigned out[RA__POOL_MAX], n = ra__pool_count(tag);

    ck_assert_int_eq(ra_tag_arenas(tag, out, RA__POOL_MAX), (int)n);
    for (unsigned k = 0; k < n; k++) {
        ck_assert_uint_eq(out[k], ra__pool_arena(tag, k));
        ck_assert_uint_eq(ra__pool_owner(out[k]), tag);
        for (unsigned j = 0; j < k; j++)
            ck_assert_uint_ne(out[j], out[k]);
    }
}

static bool in_region(ra_tag_t tag, const void *p)
{
    uintptr_t start, end;

    ra__region_carved(tag, &start, &end);
    return (uintptr_t)p >= start && (uintptr_t)p < end;
}

static int flags_of(unsigned arena)
{
    return RA__ARENA_FLAGS(arena) | MALLOCX_TCACHE_NONE;
}

START_TEST(test_pool_unit_a_new_tag_has_one_owned_arena)
{
    ra_tag_t a = tu_tag_create("a"), b = tu_tag_create("b");
    void *p;

    ck_assert_uint_eq(ra__pool_count(a), 1);
    ck_assert_uint_eq(ra__pool_count(b), 1);
    ck_assert_uint_eq(ra__pool_arena(a, 0), ra__tag_arena[a]);
    ck_assert_uint_eq(ra__pool_arena(b, 0), ra__tag_arena[b]);
    ck_assert_uint_ne(ra__tag_arena[a], ra__tag_arena[b]);
    check_owned(a);
    check_owned(b);
    /* jemalloc's automatic arena, and indices no arena has. */
    ck_assert_uint_eq(ra__pool_owner(0), RA_TAG_NONE);
    ck_assert_uint_eq(ra__pool_owner(RA__BE_ALL_ARENAS - 1), RA_TAG_NONE);
    ck_assert_uint_eq(ra__pool_owner(RA__BE_ALL_ARENAS), RA_TAG_NONE);
    ck_assert_uint_eq(ra__pool_owner(UINT32_MAX), RA_TAG_NONE);
    /* The arena carves from the tag's region. */
    p = ra__je_mallocx(4096, flags_of(ra__tag_arena[a]));
    ck_assert_ptr_nonnull(p);
    ck_assert(in_region(a, p));
    ck_assert_uint_eq(ra_tag_of(p), a);
    ra__je_dallocx(p, MALLOCX_TCACHE_NONE);
}
END_TEST

/* tag.c calls ra__pool_first_arena with its ids lock held: the test holds a
 * lock of that rank, which the debug build checks. */
static struct ra__mutex ids_stand_in = RA__MUTEX_INIT(RA__RANK_IDS);

static int first_arena(ra_tag_t tag)
{
    int arena;

    ra__lock(&ids_stand_in);
    arena = ra__pool_first_arena(tag, &ra__budget_commits);
    ra__unlock(&ids_stand_in);
    return arena;
}

/* ra__pool_first_arena alone, as tag.c calls it with its lock held (this
 * test is the only thread). The arena is nobody's until the tag's id is
 * made (ra__pool_start). No tag is created after: the registry would
 * find a region it did not hand out. */
START_TEST(test_pool_unit_first_arena_opens_and_publishes_the_region)
{
    unsigned idx, before;
    int arena;
    void *p;

    ck_assert(ra__init());
    idx = ra__region_count();
    before = ra__be_arena_count();
    arena = first_arena(idx + 1);
    ck_assert_int_ge(arena, 0);
    ck_assert_uint_eq(ra__region_count(), idx + 1);
    ck_assert_uint_eq(ra__be_arena_count(), before + 1);
    ck_assert_uint_eq(ra__pool_owner((unsigned)arena), RA_TAG_NONE);
    p = ra__je_mallocx(64 * KIB, flags_of((unsigned)arena));
    ck_assert_ptr_nonnull(p);
    ck_assert(in_region(idx + 1, p));
    ra__je_dallocx(p, MALLOCX_TCACHE_NONE);
}
END_TEST

/* jemalloc's EAGAIN with no refusal of the carving's: out of arena
 * indices (ENOSPC), the region not handed out, and the same index serves
 * the next try. Another errno of jemalloc's is passed on. */
START_TEST(test_pool_unit_first_arena_refused_by_jemalloc)
{
    unsigned idx;

    ck_assert(ra__init());
    idx = ra__region_count();
    refusals = 1;
    TU_FAILS_WITH(first_arena(idx + 1), ENOSPC);
    ck_assert_uint_eq(ra__region_count(), idx);
    refusals = 1;
    refusal_errno = EINVAL;
    TU_FAILS_WITH(first_arena(idx + 1), EINVAL);
    ck_assert_uint_eq(ra__region_count(), idx);
    ck_assert_int_ge(first_arena(idx + 1), 0);
    ck_assert_uint_eq(ra__region_count(), idx + 1);
}
END_TEST

/* The carving says why jemalloc could not have the arena's metadata: the
 * limit (ENOMEM: the region stays, a later call tries it again) or
 * another mapping (EEXIST: the region is passed over, published). */
START_TEST(test_pool_unit_first_arena_says_why_the_carving_refused)
{
    unsigned idx;

    ck_assert(ra__init());
    idx = ra__region_count();
    refusals = 1;
    refusal_reason = ENOMEM;
    TU_FAILS_WITH(first_arena(idx + 1), ENOMEM);
    ck_assert_uint_eq(ra__region_count(), idx);
    refusals = 1;
    refusal_reason = EEXIST;
    TU_FAILS_WITH(first_arena(idx + 1), EEXIST);
    ck_assert_uint_eq(ra__region_count(), idx + 1);
    ck_assert_int_ge(first_arena(idx + 2), 0);
    ck_assert_uint_eq(ra__region_count(), idx + 2);
}
END_TEST

/* Through the public API: a creation refused for want of an index fails
 * and takes nothing; a region passed over costs the caller nothing but
 * an id, which is dead for good. */
START_TEST(test_pool_unit_tag_creation_follows_the_first_arena)
{
    ra_tag_t tag;

    refusals = 1;
    errno = 0;
    ck_assert_uint_eq(ra_tag_create("refused"), RA_TAG_NONE);
    ck_assert_int_eq(errno, ENOSPC);
    ck_assert_uint_eq(ra__region_count(), 0);
    tag = tu_tag_create("first");
    ck_assert_uint_eq(tag, 1);
    check_owned(tag);
    /* The next region is another mapping's: id 2 is passed over. */
    refusals = 1;
    refusal_reason = EEXIST;
    errno = 0;
    tag = tu_tag_create("third");
    ck_assert_int_eq(errno, 0);
    ck_assert_uint_eq(tag, 3);
    ck_assert_uint_eq(ra__region_count(), 3);
    check_owned(tag);
    ck_assert_uint_eq(ra__pool_count(2), 0);
    TU_FAILS_WITH(ra_tag_set_arenas(2, 1), EINVAL);
}
END_TEST

/* PER_ARENA pairs fill an arena before the next one is made, up to
 * TAG_ARENAS; past that the pairs share the least loaded. */
START_TEST(test_pool_unit_binds_fill_each_arena_then_grow)
{
    ra_tag_t tag = tu_tag_create("grow");
    unsigned asked = atomic_load(&arenas_asked);

    for (unsigned k = 0; k < TAG_ARENAS; k++)
        for (unsigned i = 0; i < PER_ARENA; i++)
            bind_expect(tag, k, k + 1);
    check_owned(tag);
    /* Full: every arena has PER_ARENA pairs; the first least loaded. */
    for (unsigned k = 0; k < TAG_ARENAS; k++)
        bind_expect(tag, k, TAG_ARENAS);
    bind_expect(tag, 0, TAG_ARENAS);
    ck_assert_uint_eq(atomic_load(&arenas_asked), asked + TAG_ARENAS - 1);
}
END_TEST

START_TEST(test_pool_unit_unbind_frees_a_place)
{
    ra_tag_t tag = tu_tag_create("unbind"), other = tu_tag_create("other");
    unsigned a0, a1;

    for (unsigned i = 0; i < 2 * PER_ARENA; i++)
        bind_pair(tag);
    ck_assert_uint_eq(ra__pool_count(tag), 2);
    a0 = ra__pool_arena(tag, 0);
    a1 = ra__pool_arena(tag, 1);
    /* A place on a1: the next pair takes it, no growth. */
    ra__pool_unbind(tag, a1);
    bind_expect(tag, 1, 2);
    /* a0 emptied, and once more: a count never goes below 0, or a0 would
     * look the busiest for ever. */
    ra__pool_unbind(tag, a0);
    ra__pool_unbind(tag, a0);
    ra__pool_unbind(tag, a0);
    /* Arenas that are not the tag's change nothing. */
    ra__pool_unbind(tag, ra__tag_arena[other]);
    ra__pool_unbind(tag, 0);
    ra__pool_unbind(other, a1);
    bind_expect(tag, 0, 2);
    bind_expect(tag, 0, 2);
    bind_expect(tag, 2, 3);
}
END_TEST

/* A pair that only frees goes to the quietest arena without a count: it
 * neither grows the pool nor fills a place. */
START_TEST(test_pool_unit_quietest_takes_no_count_and_never_grows)
{
    ra_tag_t tag = tu_tag_create("quiet");

    for (unsigned i = 0; i < PER_ARENA; i++)
        bind_pair(tag);
    ck_assert_uint_eq(ra__pool_quietest(tag), ra__pool_arena(tag, 0));
    ck_assert_uint_eq(ra__pool_count(tag), 1);
    bind_expect(tag, 1, 2);
    for (unsigned i = 0; i < 5; i++)
        ck_assert_uint_eq(ra__pool_quietest(tag), ra__pool_arena(tag, 1));
    ck_assert_uint_eq(ra__pool_count(tag), 2);
    bind_expect(tag, 1, 2);
    bind_expect(tag, 2, 3);
}
END_TEST

/* ra_tag_set_arenas: new pairs go only to the first max arenas, even when
 * the pool has more; above the configuration's bound it lets the pool
 * grow further (up to 64). */
START_TEST(test_pool_unit_set_arenas_bounds_the_binding)
{
    ra_tag_t tag = tu_tag_create("bounded"), wide = tu_tag_create("wide");

    TU_FAILS_WITH(ra_tag_set_arenas(tag, 0), EINVAL);
    TU_FAILS_WITH(ra_tag_set_arenas(RA_TAG_NONE, 1), EINVAL);
    ck_assert_int_eq(ra_tag_set_arenas(tag, 1), 0);
    for (unsigned i = 0; i < 3 * PER_ARENA; i++)
        bind_expect(tag, 0, 1);
    ck_assert_uint_eq(ra__pool_quietest(tag), ra__pool_arena(tag, 0));
    ck_assert_int_eq(ra_tag_set_arenas(tag, 2), 0);
    bind_expect(tag, 1, 2);
    bind_expect(tag, 1, 2);
    /* Back to one: a1 is quieter, and out of bounds. */
    ck_assert_int_eq(ra_tag_set_arenas(tag, 1), 0);
    bind_expect(tag, 0, 2);
    ck_assert_uint_eq(ra__pool_quietest(tag), ra__pool_arena(tag, 0));

    ck_assert_int_eq(ra_tag_set_arenas(wide, 1000), 0);
    for (unsigned i = 0; i < 2 * TAG_ARENAS * PER_ARENA; i++)
        bind_pair(wide);
    ck_assert_uint_eq(ra__pool_count(wide), 2 * TAG_ARENAS);
    check_owned(wide);
}
END_TEST

/* A recycled slot's next holder has the configuration's bound again, and
 * the arenas stay with the slot, each still the slot's. */
START_TEST(test_pool_unit_recycle_restores_the_default_bound)
{
    ra_tag_t tag = tu_tag_create("old"), again;
    unsigned arenas[2];

    for (unsigned i = 0; i < PER_ARENA + 1; i++)
        bind_pair(tag);
    ck_assert_uint_eq(ra__pool_count(tag), 2);
    arenas[0] = ra__pool_arena(tag, 0);
    arenas[1] = ra__pool_arena(tag, 1);
    ck_assert_int_eq(ra_tag_set_arenas(tag, 1), 0);
    ck_assert_int_eq(ra_tag_destroy(tag), 0);
    again = tu_tag_create("new");
    ck_assert_uint_eq(again, tag);
    ck_assert_uint_eq(ra__pool_count(again), 2);
    ck_assert_uint_eq(ra__pool_arena(again, 0), arenas[0]);
    ck_assert_uint_eq(ra__pool_arena(again, 1), arenas[1]);
    check_owned(again);
    /* The pairs bound before are still counted (a pair keeps its binding
     * across a recycle): one place left, then growth, as the default
     * bound allows and set_arenas(1) did not. */
    bind_expect(again, 1, 2);
    bind_expect(again, 2, 3);

    /* ra__pool_recycle alone, on a live tag. */
    tag = tu_tag_create("direct");
    ck_assert_int_eq(ra_tag_set_arenas(tag, 1), 0);
    for (unsigned i = 0; i < PER_ARENA + 1; i++)
        bind_expect(tag, 0, 1);
    ra__pool_recycle(tag);
    bind_expect(tag, 1, 2);
}
END_TEST

/* jemalloc refused an arena: the holder stops asking (each ask takes
 * jemalloc's locks under the pool's), the binds go on among the arenas it
 * has, and a recycled slot may ask again. */
START_TEST(test_pool_unit_a_refused_arena_stops_growth_until_recycled)
{
    ra_tag_t tag = tu_tag_create("stuck");
    unsigned asked;

    refusals = 1;
    asked = atomic_load(&arenas_asked);
    for (unsigned i = 0; i < PER_ARENA; i++)
        bind_expect(tag, 0, 1);
    ck_assert_uint_eq(atomic_load(&arenas_asked), asked);
    bind_expect(tag, 0, 1);
    ck_assert_uint_eq(atomic_load(&arenas_asked), asked + 1);
    /* jemalloc would now say yes: not asked. */
    for (unsigned i = 0; i < 3; i++)
        bind_expect(tag, 0, 1);
    ck_assert_uint_eq(atomic_load(&arenas_asked), asked + 1);
    ra__pool_recycle(tag);
    bind_expect(tag, 1, 2);
    ck_assert_uint_eq(atomic_load(&arenas_asked), asked + 2);
    check_owned(tag);
}
END_TEST

/* A budgeted tag grows only while GROW_MARGIN of its hard limit is
 * free: each arena's metadata is committed in its region. Refused by the
 * budget, nothing is asked of jemalloc, and the tag is not stuck. */
START_TEST(test_pool_unit_a_budget_near_its_limit_does_not_grow)
{
    ra_tag_t tag = tu_tag_create("budget");
    ra_tag_limit_t limit = {0, 0, NULL, NULL};
    size_t committed = ra__budget_committed(tag);
    unsigned asked;

    ck_assert_uint_gt(committed, 0);
    limit.hard = committed + GROW_MARGIN - 1;
    ck_assert_int_eq(ra_tag_set_limit(tag, &limit), 0);
    asked = atomic_load(&arenas_asked);
    for (unsigned i = 0; i < 3 * PER_ARENA; i++)
        bind_expect(tag, 0, 1);
    ck_assert_uint_eq(atomic_load(&arenas_asked), asked);
    /* Exactly the headroom free: one more arena, whose metadata then
     * takes part of it. */
    limit.hard = committed + GROW_MARGIN;
    ck_assert_int_eq(ra_tag_set_limit(tag, &limit), 0);
    bind_expect(tag, 1, 2);
    ck_assert_uint_gt(ra__budget_committed(tag), committed);
    for (unsigned i = 0; i < 2 * PER_ARENA; i++)
        bind_pair(tag);
    ck_assert_uint_eq(ra__pool_count(tag), 2);
    /* No budget: the pool grows again. */
    ck_assert_int_eq(ra_tag_set_limit(tag, NULL), 0);
    bind_pair(tag);
    ck_assert_uint_eq(ra__pool_count(tag), 3);
    check_owned(tag);
}
END_TEST

/* The budget that bounds the growth is the subtree's, at every level: a
 * child of a parent whose limit is nearly used takes no arena (each would
 * charge its metadata to the parent), though the child has no limit. */
START_TEST(test_pool_unit_an_ancestors_budget_bounds_the_growth)
{
    ra_tag_t parent = tu_tag_create("budgeted parent");
    ra_tag_t child = ra_tag_create_in(parent, "free child");
    ra_tag_limit_t limit = {0, 0, NULL, NULL};
    unsigned asked;

    ck_assert_uint_ne(child, RA_TAG_NONE);
    limit.hard = ra__budget_tree(parent) + GROW_MARGIN - 1;
    ck_assert_int_eq(ra_tag_set_limit(parent, &limit), 0);
    asked = atomic_load(&arenas_asked);
    for (unsigned i = 0; i < 3 * PER_ARENA; i++)
        bind_expect(child, 0, 1);
    ck_assert_uint_eq(atomic_load(&arenas_asked), asked);
    /* The parent's limit lifted: the child's pool grows. */
    ck_assert_int_eq(ra_tag_set_limit(parent, NULL), 0);
    bind_pair(child);
    ck_assert_uint_eq(ra__pool_count(child), 2);
    check_owned(child);
}
END_TEST

/* pool.c's reserve of jemalloc's arena indices: with every automatic
 * arena, every pool's arenas and an index kept for each tag yet to be
 * created, one arena short of jemalloc's 4095. */
static unsigned indices_held(void)
{
    return ra__be_arena_count() +
           (ra__config()->max_tags - ra__region_count()) + 1;
}

/* In a process with 4000 tags possible, one automatic arena, one pair an
 * arena and 64 arenas a tag: pools grow until the indices the tags yet to
 * be created need are all that is left, and stop there; a tag created
 * then still has its arena. */
static int indices_child(void)
{
    char name[32];
    unsigned held = 0, i;
    ra_tag_t tag;

    for (i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "hot%u", i);
        tag = ra_tag_create(name);
        TU_REQUIRE(tag != RA_TAG_NONE);
        held = indices_held();
        /* The machine must leave room for growth, or this proves
         * nothing. */
        TU_REQUIRE(i > 0 || held + RA__POOL_MAX < ARENA_INDICES);
        for (unsigned k = 0; k < RA__POOL_MAX; k++)
            bind_pair(tag);
        if (ra__pool_count(tag) < RA__POOL_MAX)
            break;
    }
    TU_REQUIRE(i < 8);
    TU_REQUIRE(indices_held() == ARENA_INDICES);
    tag = ra_tag_create("late");
    TU_REQUIRE(tag != RA_TAG_NONE);
    TU_REQUIRE(ra__pool_owner(ra__tag_arena[tag]) == tag);
    for (unsigned k = 0; k < 3; k++)
        bind_pair(tag);
    TU_REQUIRE(ra__pool_count(tag) == 1);
    TU_REQUIRE(indices_held() == ARENA_INDICES);
    return 0;
}

START_TEST(test_pool_unit_growth_keeps_an_index_for_every_tag_to_come)
{
    static const char *const env[] = {
        "MALLOC_CONF=narenas:1", "REGIONALLOC_MAX_TAGS=4000",
        "REGIONALLOC_REGION_SIZE=1G", "REGIONALLOC_TAG_ARENAS=64",
        "REGIONALLOC_THREADS_PER_ARENA=1", NULL};
    char err[2048];
    int rc = tu_exec_self(env, "indices", err, sizeof err);

    ck_assert_msg(rc == 0, "child exited with %d: %s", rc, err);
}
END_TEST

/* Pass-through mode: no pool, and every pair goes to the one arena
 * ra__tag_arena names (0). */
static int pass_through_child(void)
{
    ra_tag_t tag = ra_tag_create("plain");
    unsigned out[4];

    TU_REQUIRE(tag != RA_TAG_NONE);
    TU_REQUIRE(ra__pool_count(tag) == 0);
    TU_REQUIRE(bind_pair(tag) == ra__tag_arena[tag]);
    TU_REQUIRE(ra__pool_quietest(tag) == ra__tag_arena[tag]);
    ra__pool_unbind(tag, ra__tag_arena[tag]);
    TU_REQUIRE(ra__pool_count(tag) == 0);
    errno = 0;
    TU_REQUIRE(ra_tag_arenas(tag, out, 4) == -1 && errno == ENOTSUP);
    return 0;
}

START_TEST(test_pool_unit_pass_through_has_no_pool)
{
    static const char *const env[] = {"REGIONALLOC=0", NULL};
    char err[1024];
    int rc = tu_exec_self(env, "pass_through", err, sizeof err);

    ck_assert_msg(rc == 0, "child exited with %d: %s", rc, err);
}
END_TEST

/* Pairs bound and unbound by several threads at once: afterwards no place
 * is held, so the next pairs fill the arenas PER_ARENA each, as in an
 * empty pool. */
static ra_tag_t churned;

static void *churn(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < 500; i++) {
        unsigned a = bind_pair(churned), b = bind_pair(churned);
        ra__pool_unbind(churned, a);
        (void)ra__pool_quietest(churned);
        ra__pool_unbind(churned, b);
    }
    return NULL;
}

START_TEST(test_pool_unit_concurrent_binds_leave_every_count_right)
{
    unsigned n, seen[RA__POOL_MAX] = {0};

    churned = tu_tag_create("churn");
    tu_run_threads(4, churn, NULL);
    n = ra__pool_count(churned);
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_le(n, TAG_ARENAS);
    check_owned(churned);
    for (unsigned i = 0; i < n * PER_ARENA; i++) {
        unsigned arena = bind_pair(churned);
        for (unsigned k = 0; k < n; k++)
            if (ra__pool_arena(churned, k) == arena)
                seen[k]++;
    }
    ck_assert_uint_eq(ra__pool_count(churned), n);
    for (unsigned k = 0; k < n; k++)
        ck_assert_uint_eq(seen[k], PER_ARENA);
}
END_TEST

/* Blocks made straight in each arena of the pool, all live at once
 * (kept[], TAG_ARENAS * 16 of them), then freed unless keep: dirty pages
 * in every arena, which the pool's purge must all reach; its reset
 * discards what each arena holds. */
static void dirty_every_arena(ra_tag_t tag, bool keep, void **kept)
{
    unsigned n = ra__pool_count(tag);

    for (unsigned k = 0; k < n; k++)
        for (unsigned i = 0; i < 16; i++) {
            void *p = ra__je_mallocx(64 * KIB, flags_of(ra__pool_arena(tag, k)));
            ck_assert_ptr_nonnull(p);
            memset(p, 1, 64 * KIB);
            kept[k * 16 + i] = p;
        }
    if (!keep)
        for (unsigned i = 0; i < n * 16; i++)
            ra__je_dallocx(kept[i], MALLOCX_TCACHE_NONE);
}

START_TEST(test_pool_unit_purge_and_reset_reach_every_arena)
{
    ra_tag_t tag = tu_tag_create("purge");
    struct ra__be_arena_stats st;
    void *kept[TAG_ARENAS * 16];
    unsigned n;

    for (unsigned i = 0; i < 2 * PER_ARENA + 1; i++)
        bind_pair(tag);
    n = ra__pool_count(tag);
    ck_assert_uint_eq(n, 3);
    dirty_every_arena(tag, false, kept);
    ra__be_refresh();
    for (unsigned k = 0; k < n; k++) {
        ck_assert(!ra__be_arena_stats(ra__pool_arena(tag, k), &st));
        ck_assert_uint_ge(st.dirty, 16 * 64 * KIB);
    }
    ra__pool_purge(tag);
    ra__be_refresh();
    for (unsigned k = 0; k < n; k++) {
        ck_assert(!ra__be_arena_stats(ra__pool_arena(tag, k), &st));
        ck_assert_msg(st.dirty == 0, "arena %u of the pool kept %zu dirty bytes",
                      k, st.dirty);
    }

    dirty_every_arena(tag, true, kept);
    ra__be_refresh();
    for (unsigned k = 0; k < n; k++)
        ck_assert_uint_eq(ra__be_arena_allocated(ra__pool_arena(tag, k)),
                          16 * 64 * KIB);
    ra__pool_reset(tag);
    ra__be_refresh();
    for (unsigned k = 0; k < n; k++)
        ck_assert_uint_eq(ra__be_arena_allocated(ra__pool_arena(tag, k)), 0);
    /* Decay leaves what is live alone. */
    dirty_every_arena(tag, true, kept);
    ra__pool_decay(tag);
    ra__be_refresh();
    for (unsigned k = 0; k < n; k++)
        ck_assert_uint_eq(ra__be_arena_allocated(ra__pool_arena(tag, k)),
                          16 * 64 * KIB);
}
END_TEST

static Suite *pool_suite(void)
{
    Suite *s = suite_create("pool (unit)");
    TCase *first = tcase_create("first arena");
    TCase *binding = tcase_create("binding");
    TCase *growth = tcase_create("growth bounds");
    TCase *threads = tcase_create("threads");
    TCase *verbs = tcase_create("verbs");

    tcase_add_test(first, test_pool_unit_a_new_tag_has_one_owned_arena);
    tcase_add_test(first,
                   test_pool_unit_first_arena_opens_and_publishes_the_region);
    tcase_add_test(first, test_pool_unit_first_arena_refused_by_jemalloc);
    tcase_add_test(first,
                   test_pool_unit_first_arena_says_why_the_carving_refused);
    tcase_add_test(first, test_pool_unit_tag_creation_follows_the_first_arena);
    suite_add_tcase(s, first);
    tcase_add_test(binding, test_pool_unit_binds_fill_each_arena_then_grow);
    tcase_add_test(binding, test_pool_unit_unbind_frees_a_place);
    tcase_add_test(binding,
                   test_pool_unit_quietest_takes_no_count_and_never_grows);
    tcase_add_test(binding, test_pool_unit_set_arenas_bounds_the_binding);
    tcase_add_test(binding, test_pool_unit_recycle_restores_the_default_bound);
    tcase_add_test(binding, test_pool_unit_pass_through_has_no_pool);
    suite_add_tcase(s, binding);
    tcase_add_test(growth,
                   test_pool_unit_a_refused_arena_stops_growth_until_recycled);
    tcase_add_test(growth, test_pool_unit_a_budget_near_its_limit_does_not_grow);
    tcase_add_test(growth, test_pool_unit_an_ancestors_budget_bounds_the_growth);
    tcase_add_test(growth,
                   test_pool_unit_growth_keeps_an_index_for_every_tag_to_come);
    tcase_set_timeout(growth, 60);
    suite_add_tcase(s, growth);
    tcase_add_test(threads,
                   test_pool_unit_concurrent_binds_leave_every_count_right);
    suite_add_tcase(s, threads);
    tcase_add_test(verbs, test_pool_unit_purge_and_reset_reach_every_arena);
    suite_add_tcase(s, verbs);
    return s;
}

static const struct tu_child children[] = {
    {"indices", indices_child},
    {"pass_through", pass_through_child},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    tu_child_main(argc, argv, children);
    /* Read at the library's first use, in each test's process. */
    setenv("REGIONALLOC_THREADS_PER_ARENA", "2", 1);
    setenv("REGIONALLOC_TAG_ARENAS", "4", 1);
    unsetenv("REGIONALLOC");
    unsetenv("REGIONALLOC_MAX_TAGS");
    unsetenv("REGIONALLOC_REGION_SIZE");
    unsetenv("REGIONALLOC_LIMITS");
    unsetenv("REGIONALLOC_THREAD_TAGS");
    return tu_run_suite(pool_suite());
}

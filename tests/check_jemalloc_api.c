/* Suite "jemalloc API": programs that detect jemalloc and call its
 * non-standard functions (mallocx, rallocx, xallocx, sallocx, dallocx,
 * sdallocx, nallocx) on blocks from malloc, as folly and RocksDB do. The
 * library exports that family too: a tagged block stays in its tag, mallocx
 * follows the current tag, and an explicit arena or thread cache from the
 * caller is honoured as jemalloc would, untagged. This program is linked
 * with -lregionalloc before -ljemalloc, as a program that uses both is. */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jemalloc/jemalloc.h>

#include "regionalloc.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)
#define NBLOCKS 200

/* Through volatile pointers, so that the compiler cannot fold the calls. */
static void *(*volatile f_mallocx)(size_t, int) = mallocx;
static void *(*volatile f_rallocx)(void *, size_t, int) = rallocx;
static size_t (*volatile f_xallocx)(void *, size_t, size_t, int) = xallocx;
static size_t (*volatile f_sallocx)(const void *, int) = sallocx;
static void (*volatile f_dallocx)(void *, int) = dallocx;
static void (*volatile f_sdallocx)(void *, size_t, int) = sdallocx;
static size_t (*volatile f_nallocx)(size_t, int) = nallocx;

/* Blocks of size from malloc under tag, freed by free_one; then the next
 * untagged allocations of that size must all be untagged (none reuses a
 * freed tagged block) and the tag's figures exact. */
static void check_free_keeps_tagged_blocks(const char *name, size_t size,
                                           void (*free_one)(void *, size_t))
{
    static void *blocks[NBLOCKS];
    ra_tag_t tag = tu_tag_create(name);
    ra_tag_stats_t st;
    unsigned leaked = 0;

    tu_tag_push(tag);
    for (unsigned i = 0; i < NBLOCKS; i++)
        blocks[i] = malloc(size);
    tu_tag_pop(tag);
    for (unsigned i = 0; i < NBLOCKS; i++) {
        ck_assert_ptr_nonnull(blocks[i]);
        ck_assert_uint_eq(ra_tag_of(blocks[i]), tag);
    }
    for (unsigned i = 0; i < NBLOCKS; i++)
        free_one(blocks[i], size);
    for (unsigned i = 0; i < NBLOCKS; i++) {
        blocks[i] = malloc(size);
        leaked += ra_tag_of(blocks[i]) != RA_TAG_NONE;
    }
    for (unsigned i = 0; i < NBLOCKS; i++)
        free(blocks[i]);
    ck_assert_uint_eq(leaked, 0);
    ra_thread_flush();
    st = tu_tag_stats(tag);
    ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(st.nmalloc, NBLOCKS);
    ck_assert_uint_eq(st.ndalloc, NBLOCKS);
}

static void free_with_sdallocx(void *p, size_t size)
{
    f_sdallocx(p, size, 0);
}

static void free_with_dallocx(void *p, size_t size)
{
    (void)size;
    f_dallocx(p, 0);
}

static void free_with_dallocx_no_tcache(void *p, size_t size)
{
    (void)size;
    f_dallocx(p, MALLOCX_TCACHE_NONE);
}

static void free_with_sdallocx_aligned(void *p, size_t size)
{
    f_sdallocx(p, size, MALLOCX_ALIGN(16));
}

static const size_t free_sizes[] = {16, 100, 3000, 40000, 3 * MIB};
#define NFREE_SIZES (sizeof free_sizes / sizeof free_sizes[0])

START_TEST(test_jemalloc_api_sdallocx_keeps_tagged_blocks_in_their_tag)
{
    check_free_keeps_tagged_blocks("sdallocx", free_sizes[_i],
                                   free_with_sdallocx);
}
END_TEST

START_TEST(test_jemalloc_api_dallocx_keeps_tagged_blocks_in_their_tag)
{
    check_free_keeps_tagged_blocks("dallocx", free_sizes[_i],
                                   free_with_dallocx);
}
END_TEST

START_TEST(test_jemalloc_api_cache_flags_do_not_move_tagged_blocks)
{
    check_free_keeps_tagged_blocks("dallocx-no-tcache", free_sizes[_i],
                                   free_with_dallocx_no_tcache);
    check_free_keeps_tagged_blocks("sdallocx-aligned", free_sizes[_i],
                                   free_with_sdallocx_aligned);
}
END_TEST

/* mallocx without an arena or a thread cache follows the current tag, with
 * its zeroing and alignment. */
START_TEST(test_jemalloc_api_mallocx_follows_the_current_tag)
{
    ra_tag_t tag = tu_tag_create("mallocx");
    unsigned char *p[4];
    ra_tag_stats_t st;
    void *untagged;

    tu_tag_push(tag);
    p[0] = f_mallocx(100, 0);
    p[1] = f_mallocx(5000, MALLOCX_ZERO);
    p[2] = f_mallocx(64, MALLOCX_ALIGN(4096));
    p[3] = f_mallocx(3 * MIB, MALLOCX_ZERO | MALLOCX_LG_ALIGN(16));
    tu_tag_pop(tag);
    untagged = f_mallocx(100, 0);
    for (unsigned i = 0; i < 4; i++) {
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_uint_eq(ra_tag_of(p[i]), tag);
    }
    for (size_t i = 0; i < 5000; i++)
        ck_assert_uint_eq(p[1][i], 0);
    for (size_t i = 0; i < 3 * MIB; i += 4096)
        ck_assert_uint_eq(p[3][i], 0);
    ck_assert_uint_eq((uintptr_t)p[2] % 4096, 0);
    ck_assert_uint_eq((uintptr_t)p[3] % 65536, 0);
    ck_assert_ptr_nonnull(untagged);
    ck_assert_uint_eq(ra_tag_of(untagged), RA_TAG_NONE);
    st = tu_tag_stats(tag);
    ck_assert_uint_eq(st.nmalloc, 4);
    for (unsigned i = 0; i < 4; i++)
        f_dallocx(p[i], 0);
    f_dallocx(untagged, 0);
    ra_thread_flush();
    st = tu_tag_stats(tag);
    ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(st.ndalloc, 4);
}
END_TEST

/* The arena of p, as jemalloc knows it. */
static unsigned arena_of(const void *p)
{
    unsigned arena = UINT32_MAX;
    size_t len = sizeof arena;

    ck_assert_int_eq(mallctl("arenas.lookup", &arena, &len, &p, sizeof p),
                     0);
    return arena;
}

/* A caller's explicit arena or thread cache is jemalloc's business: the
 * block is untagged, in the arena asked for. */
START_TEST(test_jemalloc_api_explicit_arena_or_tcache_is_untagged)
{
    ra_tag_t tag = tu_tag_create("explicit");
    unsigned arena, tcache;
    size_t len = sizeof arena;
    void *p[4];

    ck_assert_int_eq(mallctl("arenas.create", &arena, &len, NULL, 0), 0);
    len = sizeof tcache;
    ck_assert_int_eq(mallctl("tcache.create", &tcache, &len, NULL, 0), 0);
    tu_tag_push(tag);
    p[0] = f_mallocx(100, MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE);
    p[1] = f_mallocx(100, MALLOCX_TCACHE_NONE);
    p[2] = f_mallocx(100, MALLOCX_TCACHE(tcache));
    p[3] = f_mallocx(2 * MIB, MALLOCX_ARENA(arena));
    tu_tag_pop(tag);
    for (unsigned i = 0; i < 4; i++) {
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_uint_eq(ra_tag_of(p[i]), RA_TAG_NONE);
    }
    ck_assert_uint_eq(arena_of(p[0]), arena);
    ck_assert_uint_eq(arena_of(p[3]), arena);
    /* Reallocated with the same flags, they stay where they are. */
    p[0] = f_rallocx(p[0], 5000, MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE);
    ck_assert_ptr_nonnull(p[0]);
    ck_assert_uint_eq(arena_of(p[0]), arena);
    f_dallocx(p[0], MALLOCX_TCACHE_NONE);
    f_dallocx(p[1], MALLOCX_TCACHE_NONE);
    f_sdallocx(p[2], 100, MALLOCX_TCACHE(tcache));
    free(p[3]);
    ck_assert_uint_eq(tu_tag_stats(tag).nmalloc, 0);
}
END_TEST

/* rallocx keeps a tagged block in its tag, whatever is pushed and whatever
 * arena the caller names, with its contents. */
START_TEST(test_jemalloc_api_rallocx_keeps_the_tag)
{
    ra_tag_t owner = tu_tag_create("owner"), other = tu_tag_create("other");
    unsigned arena;
    size_t len = sizeof arena;
    void *p;

    ck_assert_int_eq(mallctl("arenas.create", &arena, &len, NULL, 0), 0);
    p = ra_malloc_tag(owner, 100);
    ck_assert_ptr_nonnull(p);
    tu_fill_pattern(p, 100, 1);
    /* No assertion while other is pushed: a passing one allocates. */
    tu_tag_push(other);
    p = f_rallocx(p, 10000, 0);
    if (p != NULL)
        p = f_rallocx(p, 3 * MIB, MALLOCX_ZERO);
    if (p != NULL)
        p = f_rallocx(p, 200, MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE);
    tu_tag_pop(other);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(ra_tag_of(p), owner);
    ck_assert_uint_eq(tu_check_pattern(p, 100, 1), 100);
    f_dallocx(p, 0);
    ra_thread_flush();
    ck_assert_uint_eq(tu_tag_stats(owner).allocated, 0);
    ck_assert_uint_eq(tu_tag_stats(other).nmalloc, 0);
}
END_TEST

/* xallocx resizes in place or not at all; sallocx is the usable size; nallocx
 * is what mallocx would give. */
START_TEST(test_jemalloc_api_xallocx_sallocx_nallocx)
{
    ra_tag_t tag = tu_tag_create("sizes");
    void *p = ra_malloc_tag(tag, 4 * MIB), *q;
    size_t n;

    ck_assert_ptr_nonnull(p);
    n = f_xallocx(p, 2 * MIB, 0, 0);
    ck_assert_uint_eq(n, 2 * MIB);
    ck_assert_uint_eq(f_sallocx(p, 0), 2 * MIB);
    ck_assert_uint_eq(ra_malloc_usable_size(p), 2 * MIB);
    n = f_xallocx(p, 3 * MIB, MIB, 0);
    ck_assert_uint_ge(n, 2 * MIB);
    ck_assert_uint_eq(f_sallocx(p, 0), n);
    ck_assert_uint_eq(ra_tag_of(p), tag);
    f_sdallocx(p, n, 0);
    for (size_t size = 1; size < 100000; size = size * 3 + 1) {
        q = ra_malloc_tag(tag, size);
        ck_assert_ptr_nonnull(q);
        ck_assert_uint_eq(f_nallocx(size, 0), f_sallocx(q, 0));
        ck_assert_uint_eq(f_sallocx(q, 0), ra_malloc_usable_size(q));
        f_sdallocx(q, size, 0);
    }
    ra_thread_flush();
    ck_assert_uint_eq(tu_tag_stats(tag).allocated, 0);
}
END_TEST

/* Hooks see the family like the rest. */
struct counts {
    unsigned allocs, frees;
};

static void count_alloc(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)tag; (void)ptr; (void)size;
    ((struct counts *)ctx)->allocs++;
}

static void count_free(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)tag; (void)ptr; (void)size;
    ((struct counts *)ctx)->frees++;
}

START_TEST(test_jemalloc_api_is_reported_to_hooks)
{
    static struct counts c;
    ra_hooks_t hooks = {count_alloc, count_free, &c};
    ra_tag_t tag = tu_tag_create("hooked");
    void *p, *q;
    int id = ra_hooks_install(&hooks);

    ck_assert_int_ge(id, 0);
    c = (struct counts){0, 0};
    tu_tag_push(tag);
    p = f_mallocx(100, 0);
    q = f_mallocx(100, MALLOCX_TCACHE_NONE);
    p = f_rallocx(p, 5000, 0);
    f_sdallocx(p, 5000, 0);
    f_dallocx(q, MALLOCX_TCACHE_NONE);
    tu_tag_pop(tag);
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    ck_assert_uint_eq(c.allocs, 3);
    ck_assert_uint_eq(c.frees, 3);
}
END_TEST

static Suite *jemalloc_api_suite(void)
{
    Suite *s = suite_create("jemalloc API");
    TCase *tc;

    tc = tcase_create("frees");
    tcase_add_loop_test(
        tc, test_jemalloc_api_sdallocx_keeps_tagged_blocks_in_their_tag, 0,
        NFREE_SIZES);
    tcase_add_loop_test(
        tc, test_jemalloc_api_dallocx_keeps_tagged_blocks_in_their_tag, 0,
        NFREE_SIZES);
    tcase_add_loop_test(
        tc, test_jemalloc_api_cache_flags_do_not_move_tagged_blocks, 0,
        NFREE_SIZES);
    suite_add_tcase(s, tc);

    tc = tcase_create("allocations");
    tcase_add_test(tc, test_jemalloc_api_mallocx_follows_the_current_tag);
    tcase_add_test(tc, test_jemalloc_api_explicit_arena_or_tcache_is_untagged);
    tcase_add_test(tc, test_jemalloc_api_rallocx_keeps_the_tag);
    tcase_add_test(tc, test_jemalloc_api_xallocx_sallocx_nallocx);
    tcase_add_test(tc, test_jemalloc_api_is_reported_to_hooks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(jemalloc_api_suite());
}

/* Suite "stats": ra_tag_stats, ra_tag_purge and ra_purge_all. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include "regionalloc.h"
#include "testutil.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

static ra_tag_t tag_a, tag_b;

/* The untagged row is jemalloc's as of the last refresh (but for active):
 * refreshed, it is now's. */
static ra_tag_stats_t untagged_now(void)
{
    ck_assert_int_eq(ra_stats_refresh(), 0);
    return tu_tag_stats(RA_TAG_NONE);
}

static void setup_tags(void)
{
    tag_a = tu_tag_create("stats-a");
    tag_b = tu_tag_create("stats-b");
    ck_assert_int_eq(ra_enabled(), 1);
}

static double in_mib(size_t bytes)
{
    return (double)bytes / (double)MIB;
}

/* from - to in MiB, negative when memory grew. */
static double drop_mib(size_t from, size_t to)
{
    return ((double)from - (double)to) / (double)MIB;
}

/* Blocks of one test, allocated under a tag and touched page by page. */
struct block_set {
    size_t n;
    void *blocks[4096];
};

/* Allocates nsmall 64 KiB blocks and nlarge 8 MiB blocks under tag
 * (RA_TAG_NONE: untagged) and writes every byte. Returns the bytes asked. */
static size_t fill_blocks(struct block_set *set, ra_tag_t tag, size_t nsmall,
                          size_t nlarge)
{
    size_t total = nsmall + nlarge;
    size_t every = nlarge > 0 ? total / nlarge : 0;
    size_t failed = 0, bytes = 0, ns = 0, nl = 0;

    ck_assert_uint_le(set->n + total,
                      sizeof set->blocks / sizeof set->blocks[0]);
    if (tag != RA_TAG_NONE)
        tu_tag_push(tag);
    /* The large blocks are spread among the small ones. */
    for (size_t i = 0; i < total; i++) {
        bool large = nl < nlarge &&
                     (ns == nsmall || i % every == every - 1);
        size_t size = large ? 8 * MIB : 64 * KIB;
        void *p = ra_malloc(size);

        if (large)
            nl++;
        else
            ns++;
        if (p == NULL) {
            failed++;
            continue;
        }
        memset(p, (int)(i & 0xff) | 1, size);
        set->blocks[set->n++] = p;
        bytes += size;
    }
    if (tag != RA_TAG_NONE)
        tu_tag_pop(tag);
    ck_assert_uint_eq(failed, 0);
    return bytes;
}

static void free_blocks(struct block_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        ra_free(set->blocks[i]);
    set->n = 0;
}

/* -- "errors" ------------------------------------------------------------- */

START_TEST(test_stats_null_out_is_einval)
{
    errno = 0;
    ck_assert_int_eq(ra_tag_stats(tag_a, NULL), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_stats(RA_TAG_NONE, NULL), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_stats_unknown_tag_is_einval)
{
    const ra_tag_t unknown[] = {ra_tag_count() + 1, 4000, 100000, UINT32_MAX};
    ra_tag_stats_t s;

    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        errno = 0;
        ck_assert_int_eq(ra_tag_stats(unknown[i], &s), -1);
        ck_assert_int_eq(errno, EINVAL);
    }
}
END_TEST

START_TEST(test_stats_purge_unknown_tag_is_einval)
{
    const ra_tag_t unknown[] = {ra_tag_count() + 1, 4000, 100000, UINT32_MAX};

    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        errno = 0;
        ck_assert_int_eq(ra_tag_purge(unknown[i]), -1);
        ck_assert_int_eq(errno, EINVAL);
    }
    ck_assert_int_eq(ra_tag_purge(tag_a), 0);
    ck_assert_int_eq(ra_tag_purge(RA_TAG_NONE), 0);
}
END_TEST

/* Runs as its test's first action: the library reads REGIONALLOC once. */
START_TEST(test_stats_pass_through_mode_is_enotsup)
{
    ra_tag_stats_t s;
    ra_tag_t tag;

    ck_assert_int_eq(setenv("REGIONALLOC", "0", 1), 0);
    ck_assert_int_eq(ra_enabled(), 0);
    tag = ra_tag_create("stats-off");
    ck_assert_uint_ne(tag, RA_TAG_NONE);
    errno = 0;
    ck_assert_int_eq(ra_tag_stats(tag, &s), -1);
    ck_assert_int_eq(errno, ENOTSUP);
    errno = 0;
    ck_assert_int_eq(ra_tag_stats(RA_TAG_NONE, &s), -1);
    ck_assert_int_eq(errno, ENOTSUP);
    errno = 0;
    ck_assert_int_eq(ra_tag_purge(tag), -1);
    ck_assert_int_eq(errno, ENOTSUP);
    errno = 0;
    ck_assert_int_eq(ra_purge_all(), -1);
    ck_assert_int_eq(errno, ENOTSUP);
}
END_TEST

/* -- "fields" ------------------------------------------------------------- */

static void check_ordered(const ra_tag_stats_t *s, const char *what)
{
    ck_assert_msg(s->allocated <= s->active,
                  "%s: allocated %zu > active %zu", what, s->allocated,
                  s->active);
    ck_assert_msg(s->active <= s->mapped, "%s: active %zu > mapped %zu",
                  what, s->active, s->mapped);
    ck_assert_msg(s->active + s->dirty <= s->mapped,
                  "%s: active %zu + dirty %zu > mapped %zu", what, s->active,
                  s->dirty, s->mapped);
    ck_assert_msg(s->ndalloc <= s->nmalloc, "%s: ndalloc %llu > nmalloc %llu",
                  what, (unsigned long long)s->ndalloc,
                  (unsigned long long)s->nmalloc);
}

START_TEST(test_stats_fields_are_ordered)
{
    static const size_t sizes[] = {16,    96,    1000,    4096,   20000,
                                   65536, 300000, 2 * MIB, 9 * MIB};
    enum { N = 10 * sizeof sizes / sizeof sizes[0] };
    void *blocks[N];
    ra_tag_stats_t s;
    size_t kept = 0;

    s = tu_tag_stats(tag_a);
    check_ordered(&s, "fresh tag");
    ck_assert_uint_eq(s.allocated, 0);
    ck_assert_uint_eq(s.nmalloc, 0);
    ck_assert_uint_le(s.mapped, s.reserved);

    tu_tag_push(tag_a);
    for (size_t i = 0; i < N; i++)
        blocks[i] = ra_malloc(sizes[i % (sizeof sizes / sizeof sizes[0])]);
    tu_tag_pop(tag_a);
    for (size_t i = 0; i < N; i++)
        ck_assert_ptr_nonnull(blocks[i]);
    for (size_t i = 0; i < N; i += 2)
        ra_free(blocks[i]);
    for (size_t i = 1; i < N; i += 2)
        kept += ra_malloc_usable_size(blocks[i]);
    ra_thread_flush();

    s = tu_tag_stats(tag_a);
    check_ordered(&s, "half freed");
    ck_assert_uint_eq(s.allocated, kept);
    ck_assert_uint_le(s.mapped, s.reserved);
    /* 64 GiB by default, less if the address space was short. */
    ck_assert_uint_ge(s.reserved, (size_t)4 << 20);
    ck_assert_uint_eq(s.reserved & (s.reserved - 1), 0);
    ck_assert_uint_eq(s.nmalloc, N);
    ck_assert_uint_eq(s.ndalloc, N / 2);

    s = untagged_now();
    check_ordered(&s, "untagged");

    for (size_t i = 1; i < N; i += 2)
        ra_free(blocks[i]);
}
END_TEST

/* One small block keeps one slab active; a large block adds its pages,
 * and a page of padding at most (jemalloc's cache-oblivious offset). */
START_TEST(test_stats_active_is_the_pages_of_live_blocks)
{
    size_t slab = 0, len = sizeof slab, page = (size_t)sysconf(_SC_PAGESIZE);
    ra_tag_t tag = tu_tag_create("active");
    ra_tag_stats_t one, two;
    void *small, *large;

    ck_assert_int_eq(mallctl("arenas.bin.0.slab_size", &slab, &len, NULL, 0),
                     0);
    small = ra_malloc_tag(tag, 8);
    ck_assert_ptr_nonnull(small);
    ra_thread_flush();
    one = tu_tag_stats(tag);
    ck_assert_uint_eq(one.allocated, 8);
    ck_assert_uint_eq(one.active, slab);
    large = ra_malloc_tag(tag, 3 * MIB);
    ck_assert_ptr_nonnull(large);
    two = tu_tag_stats(tag);
    ck_assert_uint_ge(two.active, one.active + 3 * MIB);
    ck_assert_uint_le(two.active, one.active + 3 * MIB + page);
    ra_free(large);
    ra_free(small);
}
END_TEST

/* A freed large block's pages are dirty until a purge, which returns them
 * to the OS (mapped falls) and keeps their address space (retained
 * grows): all three by the same amount, the block and its padding. */
START_TEST(test_stats_dirty_is_freed_pages_until_purged)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    ra_tag_t tag = tu_tag_create("dirty");
    ra_tag_stats_t live, freed, purged;
    void *p = ra_malloc_tag(tag, 3 * MIB);

    ck_assert_ptr_nonnull(p);
    memset(p, 1, 3 * MIB);
    live = tu_tag_stats(tag);
    ra_free(p);
    ra_thread_flush();
    freed = tu_tag_stats(tag);
    ck_assert_uint_ge(freed.dirty, live.dirty + 3 * MIB);
    ck_assert_uint_le(freed.dirty, live.dirty + 3 * MIB + page);
    ck_assert_uint_eq(freed.mapped, live.mapped);
    ck_assert_int_eq(ra_tag_purge(tag), 0);
    purged = tu_tag_stats(tag);
    ck_assert_uint_eq(purged.dirty, 0);
    ck_assert_uint_eq(purged.mapped, freed.mapped - freed.dirty);
    ck_assert_uint_eq(purged.retained, freed.retained + freed.dirty);
    /* A tag's arena has no lazy purge: nothing is ever muzzy. */
    ck_assert_uint_eq(purged.muzzy, 0);
}
END_TEST

/* Runs as its test's first action: the library reads its environment once. */
START_TEST(test_stats_reserved_is_region_size)
{
    ra_tag_stats_t s;
    ra_tag_t tag;
    void *p;

    ck_assert_int_eq(setenv("REGIONALLOC_REGION_SIZE", "1G", 1), 0);
    tag = ra_tag_create("stats-1g");
    ck_assert_uint_ne(tag, RA_TAG_NONE);
    s = tu_tag_stats(tag);
    ck_assert_uint_eq(s.reserved, GIB);

    /* Nearly filling the region keeps every figure within it. */
    p = ra_malloc_tag(tag, 700 * MIB);
    ck_assert_ptr_nonnull(p);
    s = tu_tag_stats(tag);
    ck_assert_uint_eq(s.reserved, GIB);
    ck_assert_uint_eq(s.allocated, ra_malloc_usable_size(p));
    ck_assert_uint_ge(s.allocated, 700 * MIB);
    ck_assert_uint_le(s.mapped, GIB);
    check_ordered(&s, "700 MiB in a 1 GiB region");
    ra_free(p);
}
END_TEST

START_TEST(test_stats_untagged_counts_untagged_allocations)
{
    enum { N = 64 };
    void *blocks[N];
    ra_tag_stats_t none0, none1, a0, a1;

    ra_thread_flush();
    none0 = untagged_now();
    a0 = tu_tag_stats(tag_a);
    for (size_t i = 0; i < N; i++) {
        blocks[i] = ra_malloc(MIB);
        ck_assert_ptr_nonnull(blocks[i]);
        ck_assert_uint_eq(ra_tag_of(blocks[i]), RA_TAG_NONE);
    }
    none1 = untagged_now();
    a1 = tu_tag_stats(tag_a);

    ck_assert_uint_ge(none1.allocated, none0.allocated + N * MIB);
    ck_assert_uint_ge(none1.active, none0.active + N * MIB);
    ck_assert_uint_ge(none1.nmalloc, none0.nmalloc + N);
    ck_assert_uint_eq(a1.allocated, a0.allocated);
    ck_assert_uint_eq(a1.active, a0.active);
    ck_assert_uint_eq(a1.nmalloc, a0.nmalloc);
    ck_assert_uint_eq(a1.ndalloc, a0.ndalloc);
    for (size_t i = 0; i < N; i++)
        ra_free(blocks[i]);
}
END_TEST

START_TEST(test_stats_untagged_excludes_tagged_allocations)
{
    enum { N = 64 };
    void *blocks[N];
    ra_tag_stats_t none0, none1, a1;

    ra_thread_flush();
    none0 = untagged_now();
    tu_tag_push(tag_a);
    for (size_t i = 0; i < N; i++)
        blocks[i] = ra_malloc(MIB);
    tu_tag_pop(tag_a);
    for (size_t i = 0; i < N; i++)
        ck_assert_ptr_nonnull(blocks[i]);
    none1 = untagged_now();
    a1 = tu_tag_stats(tag_a);

    ck_assert_uint_eq(a1.allocated, N * MIB);
    /* Check's own bookkeeping may allocate a little untagged meanwhile. */
    ck_assert_msg(none1.allocated < none0.allocated + MIB,
                  "untagged allocated grew from %zu to %zu",
                  none0.allocated, none1.allocated);
    for (size_t i = 0; i < N; i++)
        ra_free(blocks[i]);
}
END_TEST

/* -- "purge" -------------------------------------------------------------- */

START_TEST(test_stats_purge_returns_pages_to_os)
{
    static struct block_set set;
    size_t rss_start, rss_full, rss_freed, rss_purged, bytes;
    ra_tag_stats_t full, freed, purged;

    rss_start = tu_rss_bytes();
    /* 224 MiB in 64 KiB blocks and 32 MiB in 8 MiB blocks. */
    bytes = fill_blocks(&set, tag_a, 3584, 4);
    ck_assert_uint_eq(bytes, 256 * MIB);
    rss_full = tu_rss_bytes();
    full = tu_tag_stats(tag_a);
    ck_assert_uint_ge(full.allocated, 256 * MIB);

    free_blocks(&set);
    ra_thread_flush();
    rss_freed = tu_rss_bytes();
    freed = tu_tag_stats(tag_a);
    ck_assert_int_eq(ra_tag_purge(tag_a), 0);
    rss_purged = tu_rss_bytes();
    purged = tu_tag_stats(tag_a);

    fprintf(stderr,
            "stats: purge of one tag: RSS %.1f MiB at start, %.1f MiB "
            "with 256 MiB live, %.1f MiB after free, %.1f MiB after purge "
            "(drop %.1f MiB); dirty %.1f MiB before purge, %.1f after\n",
            in_mib(rss_start), in_mib(rss_full), in_mib(rss_freed),
            in_mib(rss_purged), drop_mib(rss_full, rss_purged),
            in_mib(freed.dirty), in_mib(purged.dirty));
    ck_assert_uint_ge(rss_full, rss_start + 250 * MIB);
    ck_assert_msg(rss_purged + 200 * MIB <= rss_full,
                  "RSS dropped by only %.1f MiB",
                  drop_mib(rss_full, rss_purged));
    ck_assert_uint_eq(purged.allocated, 0);
    ck_assert_uint_eq(purged.dirty, 0);
    ck_assert_uint_eq(purged.muzzy, 0);
    ck_assert_uint_le(purged.resident, full.resident - 200 * MIB);
}
END_TEST

START_TEST(test_stats_purge_all_returns_pages_to_os)
{
    static struct block_set set;
    size_t rss_start, rss_full, rss_purged;
    ra_tag_stats_t s;

    rss_start = tu_rss_bytes();
    ck_assert_uint_eq(fill_blocks(&set, tag_a, 1536, 4), 128 * MIB);
    ck_assert_uint_eq(fill_blocks(&set, tag_b, 1536, 4), 128 * MIB);
    ck_assert_uint_eq(fill_blocks(&set, RA_TAG_NONE, 512, 4), 64 * MIB);
    rss_full = tu_rss_bytes();

    free_blocks(&set);
    ck_assert_int_eq(ra_purge_all(), 0);
    rss_purged = tu_rss_bytes();

    fprintf(stderr,
            "stats: purge of all: RSS %.1f MiB at start, %.1f MiB with "
            "320 MiB live, %.1f MiB after purge (drop %.1f MiB)\n",
            in_mib(rss_start), in_mib(rss_full), in_mib(rss_purged),
            drop_mib(rss_full, rss_purged));
    ck_assert_uint_ge(rss_full, rss_start + 300 * MIB);
    ck_assert_msg(rss_purged + 260 * MIB <= rss_full,
                  "RSS dropped by only %.1f MiB",
                  drop_mib(rss_full, rss_purged));
    s = tu_tag_stats(tag_a);
    ck_assert_uint_eq(s.dirty, 0);
    ck_assert_uint_eq(s.allocated, 0);
    s = tu_tag_stats(tag_b);
    ck_assert_uint_eq(s.dirty, 0);
    ck_assert_uint_eq(s.allocated, 0);
    s = untagged_now();
    ck_assert_uint_eq(s.dirty, 0);
}
END_TEST

START_TEST(test_stats_purged_tag_allocates_again)
{
    static struct block_set set;
    enum { N = 256 };
    unsigned char *blocks[N];
    size_t wrong = 0, nonzero = 0, tagged = 0;

    fill_blocks(&set, tag_a, 1024, 2);
    free_blocks(&set);
    ra_thread_flush();
    ck_assert_int_eq(ra_tag_purge(tag_a), 0);
    ck_assert_uint_eq(tu_tag_stats(tag_a).dirty, 0);

    /* The purged pages come back zeroed for calloc and hold what is
     * written to them. */
    tu_tag_push(tag_a);
    for (size_t i = 0; i < N; i++)
        blocks[i] = i % 2 == 0 ? ra_calloc(1, 64 * KIB)
                               : ra_malloc(i % 3 == 0 ? 8 * MIB : 64 * KIB);
    tu_tag_pop(tag_a);
    for (size_t i = 0; i < N; i++) {
        size_t size = i % 2 == 0 || i % 3 != 0 ? 64 * KIB : 8 * MIB;

        ck_assert_ptr_nonnull(blocks[i]);
        tagged += ra_tag_of(blocks[i]) == tag_a;
        if (i % 2 == 0)
            for (size_t j = 0; j < size; j++)
                nonzero += blocks[i][j] != 0;
        for (size_t j = 0; j < size; j += 512)
            blocks[i][j] = (unsigned char)(i + j / 512);
    }
    for (size_t i = 0; i < N; i++) {
        size_t size = i % 2 == 0 || i % 3 != 0 ? 64 * KIB : 8 * MIB;

        for (size_t j = 0; j < size; j += 512)
            wrong += blocks[i][j] != (unsigned char)(i + j / 512);
    }
    ck_assert_uint_eq(tagged, N);
    ck_assert_uint_eq(nonzero, 0);
    ck_assert_uint_eq(wrong, 0);
    for (size_t i = 0; i < N; i++)
        ra_free(blocks[i]);
    ra_thread_flush();
    ck_assert_uint_eq(tu_tag_stats(tag_a).allocated, 0);
}
END_TEST

/* -- "resident cost" ------------------------------------------------------ */

START_TEST(test_stats_empty_tag_resident_is_small)
{
    enum { NTAGS = 32 };
    ra_tag_t tag;
    ra_tag_stats_t s;
    size_t rss_before, rss_after, per_tag;
    void *p;

    tag = ra_tag_create("stats-empty");
    ck_assert_uint_ne(tag, RA_TAG_NONE);
    tu_tag_push(tag);
    p = ra_malloc(64);
    tu_tag_pop(tag);
    ck_assert_ptr_nonnull(p);
    ra_free(p);
    s = tu_tag_stats(tag);
    fprintf(stderr,
            "stats: empty tag (one 64 B block allocated and freed): resident "
            "%.1f KiB, mapped %.1f KiB, active %.1f KiB\n",
            (double)s.resident / KIB, (double)s.mapped / KIB,
            (double)s.active / KIB);
    ck_assert_uint_gt(s.resident, 0);
    ck_assert_uint_lt(s.resident, 512 * KIB);
    ck_assert_uint_le(s.resident, s.mapped);
    ck_assert_int_eq(ra_tag_rss(tag, &rss_after), 0);
    ck_assert_uint_lt(rss_after, 512 * KIB);

    /* The kernel's view of the same cost, averaged over many tags. */
    rss_before = tu_rss_bytes();
    for (unsigned i = 0; i < NTAGS; i++) {
        char name[32];

        snprintf(name, sizeof name, "stats-empty-%u", i);
        tag = ra_tag_create(name);
        ck_assert_uint_ne(tag, RA_TAG_NONE);
        p = ra_malloc_tag(tag, 64);
        ck_assert_ptr_nonnull(p);
        ra_free(p);
    }
    rss_after = tu_rss_bytes();
    per_tag = (rss_after > rss_before ? rss_after - rss_before : 0) / NTAGS;
    fprintf(stderr, "stats: empty tag: RSS growth %.1f KiB per tag over %u "
            "tags\n", (double)per_tag / KIB, NTAGS);
    ck_assert_uint_lt(per_tag, 512 * KIB);
}
END_TEST

/* -- "kernel view" ---------------------------------------------------------- */

START_TEST(test_stats_tag_rss_errors)
{
    size_t bytes = 1234;

    errno = 0;
    ck_assert_int_eq(ra_tag_rss(RA_TAG_NONE, &bytes), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_rss(tag_b + 100, &bytes), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_rss(tag_a, NULL), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_uint_eq(bytes, 1234);
}
END_TEST

/* Touching 64 MiB under a tag raises the kernel's count for the tag's region
 * by as much as the process RSS rises; freeing and purging takes both back
 * down. The other tag's figure does not move. */
START_TEST(test_stats_tag_rss_follows_touched_pages)
{
    enum { N = 64 };
    void *blocks[N];
    size_t rss_a0, rss_a1, rss_a2, rss_b0, rss_b1, proc0, proc1, proc2;

    ck_assert_int_eq(ra_tag_rss(tag_a, &rss_a0), 0);
    ck_assert_int_eq(ra_tag_rss(tag_b, &rss_b0), 0);
    proc0 = tu_rss_bytes();
    for (unsigned i = 0; i < N; i++) {
        blocks[i] = ra_malloc_tag(tag_a, MIB);
        ck_assert_ptr_nonnull(blocks[i]);
        memset(blocks[i], 0x5a, MIB);
    }
    ck_assert_int_eq(ra_tag_rss(tag_a, &rss_a1), 0);
    ck_assert_int_eq(ra_tag_rss(tag_b, &rss_b1), 0);
    proc1 = tu_rss_bytes();
    fprintf(stderr, "tag rss %.1f -> %.1f MiB, process %.1f -> %.1f MiB\n",
            in_mib(rss_a0), in_mib(rss_a1), in_mib(proc0), in_mib(proc1));
    ck_assert_uint_ge(rss_a1 - rss_a0, N * MIB);
    ck_assert_uint_le(rss_a1 - rss_a0, N * MIB + 4 * MIB);
    ck_assert_uint_ge(proc1 - proc0, N * MIB);
    ck_assert_uint_eq(rss_b1, rss_b0);

    for (unsigned i = 0; i < N; i++)
        ra_free(blocks[i]);
    ra_thread_flush();
    ck_assert_int_eq(ra_tag_purge(tag_a), 0);
    ck_assert_int_eq(ra_tag_rss(tag_a, &rss_a2), 0);
    proc2 = tu_rss_bytes();
    fprintf(stderr, "after free + purge: tag rss %.1f MiB, process %.1f MiB\n",
            in_mib(rss_a2), in_mib(proc2));
    ck_assert_uint_le(rss_a2, rss_a0 + MIB);
    ck_assert_uint_ge(proc1 - proc2, N * MIB - 4 * MIB);
}
END_TEST

/* jemalloc's resident estimate and the kernel's count agree within a few
 * pages of metadata once the tag's pages are touched. */
START_TEST(test_stats_tag_rss_matches_resident_estimate)
{
    void *p = ra_malloc_tag(tag_a, 32 * MIB);
    ra_tag_stats_t s;
    size_t rss;

    ck_assert_ptr_nonnull(p);
    memset(p, 1, 32 * MIB);
    s = tu_tag_stats(tag_a);
    ck_assert_int_eq(ra_tag_rss(tag_a, &rss), 0);
    ck_assert_uint_ge(rss, 32 * MIB);
    /* resident is an upper bound (jemalloc counts pages it may not have
     * touched); the kernel never sees more than jemalloc holds mapped. */
    ck_assert_uint_le(rss, s.mapped);
    ck_assert_uint_le(rss, s.resident + MIB);
    ra_free(p);
}
END_TEST

/* A block only read maps the kernel's zero page: no page of the
 * process's, not in its RssAnon, and not in the tag's figures; written,
 * every page is. ra_tag_rss and the tag's resident (once the kernel was
 * asked) agree with the process's RssAnon. */
START_TEST(test_stats_pages_only_read_are_no_ones)
{
    enum { SIZE = 64 * MIB };
    volatile char *p = ra_malloc_tag(tag_a, SIZE);
    size_t before, read, written, anon0, anon1, anon2;
    char sink = 0;

    ck_assert_ptr_nonnull((void *)p);
    ck_assert_int_eq(ra_tag_rss(tag_a, &before), 0);
    anon0 = tu_rss_anon_bytes();
    for (size_t i = 0; i < SIZE; i += 4096)
        sink ^= p[i];
    (void)sink;
    ck_assert_int_eq(ra_tag_rss(tag_a, &read), 0);
    anon1 = tu_rss_anon_bytes();
    for (size_t i = 0; i < SIZE; i += 4096)
        p[i] = 1;
    ck_assert_int_eq(ra_tag_rss(tag_a, &written), 0);
    anon2 = tu_rss_anon_bytes();
    fprintf(stderr, "64 MiB read: tag rss %.1f -> %.1f MiB (RssAnon +%.1f), "
                    "written: %.1f MiB (RssAnon +%.1f)\n",
            in_mib(before), in_mib(read), in_mib(anon1 - anon0),
            in_mib(written), in_mib(anon2 - anon1));
    ck_assert_uint_lt(read, before + MIB);
    ck_assert_uint_lt(anon1, anon0 + MIB);
    ck_assert_uint_ge(written, before + SIZE);
    ck_assert_uint_ge(anon2 - anon1, SIZE - MIB);
    ck_assert_uint_eq(tu_tag_stats(tag_a).resident, written);
    ra_free((void *)p);
}
END_TEST

/* A tag grown large and reset keeps what its arena's bookkeeping grew to
 * (jemalloc gives an arena's metadata back only when the arena goes): the
 * tag's resident shows what the kernel counts in its region, and the
 * metadata figure of the reports says how much of it that is. */
START_TEST(test_stats_resident_never_hides_what_the_kernel_counts)
{
    enum { N = 200000 };
    static void *blocks[N];
    ra_tag_t big = tu_tag_create("grown");
    size_t kernel;
    ra_tag_stats_t s;
    char *json, *at;
    unsigned long long metadata;

    for (unsigned i = 0; i < N; i++) {
        blocks[i] = ra_malloc_tag(big, 16 + i % 2000);
        ck_assert_ptr_nonnull(blocks[i]);
        memset(blocks[i], 1, 16);
    }
    ck_assert_int_eq(ra_tag_reset(big), 0);
    ck_assert_int_eq(ra_tag_purge(big), 0);
    s = tu_tag_stats(big);
    ck_assert_int_eq(ra_tag_rss(big, &kernel), 0);
    ck_assert_uint_eq(s.allocated, 0);
    ck_assert_uint_ge(s.resident, kernel);
    json = tu_report_string(ra_report, RA_FORMAT_JSON);
    at = strstr(json, "\"name\": \"grown\"");
    ck_assert_ptr_nonnull(at);
    at = strstr(at, "\"metadata\": ");
    ck_assert_ptr_nonnull(at);
    metadata = strtoull(at + strlen("\"metadata\": "), NULL, 10);
    fprintf(stderr, "reset and purged: resident %.1f MiB, kernel %.1f MiB, "
                    "of it metadata %.1f MiB\n",
            in_mib(s.resident), in_mib(kernel), in_mib(metadata));
    ck_assert_uint_gt(metadata, 0);
    ck_assert_uint_le(metadata, kernel);
    /* What the kernel still counts there is the bookkeeping, but for a
     * few pages of slabs the reset's purge left. */
    ck_assert_uint_le(kernel - metadata, MIB);
    free(json);
}
END_TEST

/* peak_mapped keeps the high-water mark of committed bytes after the tag
 * shrinks, and is not below what mapped ever showed. */
START_TEST(test_stats_peak_mapped_keeps_high_water_mark)
{
    ra_tag_stats_t before = tu_tag_stats(tag_a), during, after;
    void *p = ra_malloc_tag(tag_a, 100 * MIB);

    ck_assert_ptr_nonnull(p);
    during = tu_tag_stats(tag_a);
    ck_assert_uint_ge(during.peak_mapped, during.mapped);
    ck_assert_uint_ge(during.peak_mapped, before.peak_mapped + 100 * MIB);
    ck_assert_uint_le(during.peak_mapped, during.reserved);
    ra_free(p);
    ra_thread_flush();
    ck_assert_int_eq(ra_tag_purge(tag_a), 0);
    after = tu_tag_stats(tag_a);
    ck_assert_uint_lt(after.mapped, during.mapped);
    ck_assert_uint_eq(after.peak_mapped, during.peak_mapped);
    /* The other tag has its own mark. */
    ck_assert_uint_lt(tu_tag_stats(tag_b).peak_mapped, 100 * MIB);
    /* Untagged memory has no region and so no mark. */
    ck_assert_uint_eq(untagged_now().peak_mapped, 0);
}
END_TEST

/* ra_tag_usage: the library's own figures, exact without a refresh: the
 * counts and the high-water mark are ra_tag_stats's, mapped is what the
 * extent hooks count committed (jemalloc's own figure can only lag it),
 * and every call fails as ra_tag_stats does. */
START_TEST(test_stats_usage_is_exact_without_a_refresh)
{
    ra_tag_usage_t u, before;
    ra_tag_stats_t st;
    void *blocks[100], *big;

    ck_assert_int_eq(ra_tag_usage(tag_a, &before), 0);
    for (int i = 0; i < 100; i++)
        ck_assert_ptr_nonnull(blocks[i] = ra_malloc_tag(tag_a, 64));
    for (int i = 0; i < 40; i++)
        ra_free(blocks[i]);
    ck_assert_ptr_nonnull(big = ra_malloc_tag(tag_a, 8 * MIB));
    /* Exact at once: nothing flushed, no statistics refreshed. */
    ck_assert_int_eq(ra_tag_usage(tag_a, &u), 0);
    ck_assert_uint_eq(u.nmalloc - before.nmalloc, 101);
    ck_assert_uint_eq(u.ndalloc - before.ndalloc, 40);
    ck_assert_uint_ge(u.mapped, before.mapped + 8 * MIB);
    ck_assert_uint_ge(u.peak_mapped, u.mapped);
    st = tu_tag_stats(tag_a);
    ck_assert_uint_eq(st.nmalloc, u.nmalloc);
    ck_assert_uint_eq(st.ndalloc, u.ndalloc);
    ck_assert_uint_eq(st.peak_mapped, u.peak_mapped);
    ra_free(big);
    for (int i = 40; i < 100; i++)
        ra_free(blocks[i]);
    errno = 0;
    ck_assert_int_eq(ra_tag_usage(tag_a, NULL), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_usage(RA_TAG_NONE, &u), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_tag_usage(ra_tag_count() + 1, &u), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

/* -- live figures ------------------------------------------------------------
 * allocated, nmalloc and ndalloc are the library's counts: exact at any
 * moment, on any thread, with no flush; the other figures are live
 * readings of jemalloc and the region, held to jemalloc's refreshed ones at
 * rest; and no read of them refreshes jemalloc's statistics. */

#define LIVE_THREADS 4
#define LIVE_BLOCKS 300

static ra_tag_t live_tag;
static void *live_blocks[LIVE_THREADS][LIVE_BLOCKS];
static pthread_barrier_t live_barrier;
static atomic_uint live_errors;

/* Sizes from 8 B to 70 KB: small classes and large ones. */
static size_t live_size(unsigned i, unsigned j)
{
    static const size_t sizes[] = {8, 24, 100, 500, 3000, 9000, 20000, 70000};

    return sizes[(i + j) % (sizeof sizes / sizeof sizes[0])] + j % 5;
}

/* Every allocating entry point in turn (under the pushed tag, or by id). */
static void *live_alloc(unsigned j, size_t size)
{
    void *p = NULL;

    switch (j % 7) {
    case 0: return ra_malloc(size);
    case 1: return ra_calloc(1, size);
    case 2: return ra_realloc(NULL, size);
    case 3: return ra_aligned_alloc(64, (size + 63) & ~(size_t)63);
    case 4: return ra_posix_memalign(&p, 128, size) == 0 ? p : NULL;
    case 5: return ra_malloc_tag(live_tag, size);
    default: return ra_realloc(ra_malloc(size / 2 + 1), size);
    }
}

/* Phase 1: allocate; phase 2: free the odd blocks of the next thread's,
 * move the own even ones (realloc, keeping their tag) and free_sized a
 * few; then exit. No assertion here: a passing one allocates. */
static void *live_worker(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg, next = (i + 1) % LIVE_THREADS;

    if (ra_tag_push(live_tag) != 0)
        atomic_fetch_add(&live_errors, 1);
    for (unsigned j = 0; j < LIVE_BLOCKS; j++)
        if ((live_blocks[i][j] = live_alloc(j, live_size(i, j))) == NULL)
            atomic_fetch_add(&live_errors, 1);
    ra_tag_pop(live_tag);
    pthread_barrier_wait(&live_barrier); /* the main thread reads */
    pthread_barrier_wait(&live_barrier);
    for (unsigned j = 1; j < LIVE_BLOCKS; j += 2) {
        void *p = live_blocks[next][j];
        if (j % 3 == 0)
            ra_free_sized(p, ra_malloc_usable_size(p));
        else
            ra_free(p);
        live_blocks[next][j] = NULL;
    }
    for (unsigned j = 0; j < LIVE_BLOCKS; j += 2) {
        void *p = ra_realloc(live_blocks[i][j], live_size(i, j + 3) * 2);
        if (p == NULL)
            atomic_fetch_add(&live_errors, 1);
        else
            live_blocks[i][j] = p;
    }
    pthread_barrier_wait(&live_barrier); /* the main thread reads */
    pthread_barrier_wait(&live_barrier);
    return NULL;
}

/* The tag's figures against its live blocks, as the caller sees them. */
static void check_live_counts(const char *when)
{
    size_t usable = 0;
    uint64_t live = 0;
    ra_tag_stats_t s = tu_tag_stats(live_tag);
    ra_tag_usage_t u;

    for (unsigned i = 0; i < LIVE_THREADS; i++)
        for (unsigned j = 0; j < LIVE_BLOCKS; j++)
            if (live_blocks[i][j] != NULL) {
                usable += ra_malloc_usable_size(live_blocks[i][j]);
                live++;
            }
    ck_assert_msg(s.allocated == usable, "%s: allocated %zu, live blocks %zu",
                  when, s.allocated, usable);
    ck_assert_msg(s.nmalloc - s.ndalloc == live,
                  "%s: nmalloc - ndalloc %" PRIu64 ", live blocks %" PRIu64,
                  when, s.nmalloc - s.ndalloc, live);
    ck_assert_int_eq(ra_tag_usage(live_tag, &u), 0);
    ck_assert_uint_eq(u.allocated, s.allocated);
    ck_assert_uint_eq(u.nmalloc, s.nmalloc);
    ck_assert_uint_eq(u.ndalloc, s.ndalloc);
}

START_TEST(test_stats_allocated_is_exact_without_a_flush)
{
    pthread_t threads[LIVE_THREADS];

    live_tag = tu_tag_create("live");
    ck_assert_int_eq(pthread_barrier_init(&live_barrier, NULL,
                                          LIVE_THREADS + 1), 0);
    for (unsigned i = 0; i < LIVE_THREADS; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, live_worker,
                                        (void *)(uintptr_t)i), 0);
    pthread_barrier_wait(&live_barrier);
    check_live_counts("made, threads parked");
    pthread_barrier_wait(&live_barrier);
    pthread_barrier_wait(&live_barrier);
    check_live_counts("freed across threads and moved, threads parked");
    pthread_barrier_wait(&live_barrier);
    for (unsigned i = 0; i < LIVE_THREADS; i++)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    ck_assert_uint_eq(atomic_load(&live_errors), 0);
    check_live_counts("threads gone");
    for (unsigned i = 0; i < LIVE_THREADS; i++)
        for (unsigned j = 0; j < LIVE_BLOCKS; j++) {
            ra_free(live_blocks[i][j]);
            live_blocks[i][j] = NULL;
        }
    check_live_counts("all freed");
    ck_assert_uint_eq(tu_tag_stats(live_tag).allocated, 0);
}
END_TEST

/* With hooks installed and the profiler sampling, the paths differ (the
 * instrumented ones, sampled blocks of a page or more, realloc by copy):
 * the counts are still the blocks' usable sizes. */
static void count_hooked(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)tag;
    (void)ptr;
    (void)size;
    atomic_fetch_add((atomic_uint *)ctx, 1);
}

START_TEST(test_stats_allocated_is_exact_instrumented)
{
    enum { N = 400 };
    static void *blocks[N];
    atomic_uint calls = 0;
    ra_hooks_t hooks = {count_hooked, count_hooked, &calls};
    size_t usable = 0;
    int id;

    ck_assert_int_eq(ra_prof_start(4096), 0);
    id = ra_hooks_install(&hooks);
    ck_assert_int_ge(id, 0);
    live_tag = tag_a;
    tu_tag_push(tag_a);
    for (unsigned j = 0; j < N; j++)
        blocks[j] = live_alloc(j, live_size(1, j));
    tu_tag_pop(tag_a);
    for (unsigned j = 0; j < N; j += 3)
        blocks[j] = ra_realloc(blocks[j], live_size(2, j) * 3);
    for (unsigned j = 1; j < N; j += 4) {
        ra_free(blocks[j]);
        blocks[j] = NULL;
    }
    for (unsigned j = 0; j < N; j++) {
        ck_assert(j % 4 == 1 || blocks[j] != NULL);
        usable += blocks[j] != NULL ? ra_malloc_usable_size(blocks[j]) : 0;
    }
    ck_assert_uint_gt(atomic_load(&calls), 0);
    ck_assert_uint_eq(tu_tag_stats(tag_a).allocated, usable);
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    ck_assert_int_eq(ra_prof_stop(), 0);
    for (unsigned j = 0; j < N; j++)
        ra_free(blocks[j]);
    ck_assert_uint_eq(tu_tag_stats(tag_a).allocated, 0);
}
END_TEST

START_TEST(test_stats_reads_take_no_refresh)
{
    FILE *sink = fopen("/dev/null", "w");
    ra_tag_stats_t s;
    ra_tag_usage_t u;
    uint64_t before;
    void *p = ra_malloc_tag(tag_a, 100);

    ck_assert_ptr_nonnull(sink);
    ck_assert_ptr_nonnull(p);
    /* The first read of a new arena's live page count takes a refresh. */
    ck_assert_int_eq(ra_report(sink, RA_FORMAT_TEXT), 0);
    before = tu_jemalloc_epoch();
    ck_assert_int_eq(ra_tag_stats(tag_a, &s), 0);
    ck_assert_int_eq(ra_tag_stats(RA_TAG_NONE, &s), 0);
    ck_assert_int_eq(ra_tag_stats_tree(tag_b, &s), 0);
    ck_assert_int_eq(ra_tag_usage(tag_a, &u), 0);
    ck_assert_int_eq(ra_report(sink, RA_FORMAT_PROMETHEUS), 0);
    ck_assert_int_eq(ra_report(sink, RA_FORMAT_JSON), 0);
    ck_assert_int_eq(ra_checkpoint("no refresh"), 0);
    ck_assert_uint_eq(tu_jemalloc_epoch(), before);
    ck_assert_int_eq(ra_stats_refresh(), 0);
    ck_assert_uint_eq(tu_jemalloc_epoch(), before + 1);
    ck_assert_int_eq(ra_report(sink, RA_FORMAT_TEXT | RA_REPORT_DETAIL), 0);
    ck_assert_uint_eq(tu_jemalloc_epoch(), before + 2);
    fclose(sink);
    ra_free(p);
}
END_TEST

static size_t je_arena(const char *field, unsigned arena)
{
    char name[96];
    size_t v = 0, len = sizeof v;

    snprintf(name, sizeof name, "stats.arenas.%u.%s", arena, field);
    ck_assert_int_eq(mallctl(name, &v, &len, NULL, 0), 0);
    return v;
}

/* The threads allocate at once: each gets an arena of the pool. */
static atomic_uint pool_next;

static void *pool_worker(void *arg)
{
    unsigned i = atomic_fetch_add(&pool_next, 1);

    (void)arg;
    tu_make_busy(live_tag); /* the pool counts busy pairs */
    live_blocks[i][0] = ra_malloc_tag(live_tag, 8);
    pthread_barrier_wait(&live_barrier);
    for (unsigned j = 1; j < LIVE_BLOCKS; j++)
        live_blocks[i][j] = ra_malloc_tag(live_tag, live_size(i, j));
    for (unsigned j = 0; j < LIVE_BLOCKS; j += 3) {
        ra_free(live_blocks[i][j]);
        live_blocks[i][j] = NULL;
    }
    return NULL;
}

/* At rest, every thread gone (their caches with them), the live figures of
 * a pool of several arenas are jemalloc's refreshed ones: active to the
 * page, allocated to the byte, mapped, dirty, muzzy and retained equal;
 * and resident, the kernel's count once the refresh has taken it, is no
 * more than jemalloc's upper bound but for the metadata pages touched
 * since jemalloc counted them. */
START_TEST(test_stats_live_figures_are_jemallocs_at_rest)
{
    unsigned arenas[8];
    int n;
    size_t page = 4096, metadata, rss;
    ra_tag_stats_t s;
    struct {
        size_t allocated, active, mapped, dirty, muzzy, retained, resident;
    } je = {0};

    ck_assert_int_eq(setenv("REGIONALLOC_THREADS_PER_ARENA", "1", 1), 0);
    ck_assert_int_eq(setenv("REGIONALLOC_TAG_ARENAS", "4", 1), 0);
    live_tag = tu_tag_create("pool");
    ck_assert_int_eq(pthread_barrier_init(&live_barrier, NULL, LIVE_THREADS),
                     0);
    tu_run_threads(LIVE_THREADS, pool_worker, NULL);
    n = ra_tag_arenas(live_tag, arenas, 8);
    ck_assert_int_gt(n, 1);
    s = tu_tag_stats(live_tag);
    ck_assert_int_eq(ra_stats_refresh(), 0);
    for (int k = 0; k < n; k++) {
        je.allocated += je_arena("small.allocated", arenas[k]) +
                        je_arena("large.allocated", arenas[k]);
        je.active += je_arena("pactive", arenas[k]) * page;
        je.mapped += je_arena("mapped", arenas[k]);
        je.dirty += je_arena("pdirty", arenas[k]) * page;
        je.muzzy += je_arena("pmuzzy", arenas[k]) * page;
        je.retained += je_arena("retained", arenas[k]);
        je.resident += je_arena("resident", arenas[k]);
    }
    ck_assert_uint_gt(s.allocated, 0);
    ck_assert_uint_eq(s.allocated, je.allocated);
    ck_assert_uint_eq(s.active, je.active);
    ck_assert_uint_eq(s.mapped, je.mapped);
    ck_assert_uint_eq(s.dirty, je.dirty);
    ck_assert_uint_eq(s.muzzy, je.muzzy);
    ck_assert_uint_eq(s.retained, je.retained);
    metadata = s.mapped - s.active - s.dirty;
    ck_assert_int_eq(ra_tag_rss(live_tag, &rss), 0);
    ck_assert_uint_eq(tu_tag_stats(live_tag).resident, rss);
    ck_assert_uint_le(rss, s.mapped);
    ck_assert_uint_le(rss, je.resident + metadata);
    for (unsigned i = 0; i < LIVE_THREADS; i++)
        for (unsigned j = 0; j < LIVE_BLOCKS; j++)
            ra_free(live_blocks[i][j]);
}
END_TEST

/* -- "untagged": the row's allocated, live -------------------------------- */

/* The truth the untagged row is held to: what the process held when the
 * test began (the row's figure then: what the process held before) and
 * the usable sizes of the test's own live untagged blocks, kept as they
 * are made and freed, on any thread. */
static size_t untagged_base;
static atomic_size_t untagged_live;

static void untagged_begin(void)
{
    atomic_store(&untagged_live, 0);
    untagged_base = tu_tag_stats(RA_TAG_NONE).allocated;
}

/* An untagged block of size, written whole when touch; NULL when it could
 * not be had. Calls no Check assertion: for worker threads too. */
static void *untagged_make(size_t size, bool touch)
{
    void *p = ra_malloc(size);

    if (p == NULL || ra_tag_of(p) != RA_TAG_NONE)
        return NULL;
    if (touch)
        memset(p, 0x5a, size);
    atomic_fetch_add(&untagged_live, ra_malloc_usable_size(p));
    return p;
}

static void untagged_free(void *p)
{
    atomic_fetch_sub(&untagged_live, ra_malloc_usable_size(p));
    ra_free(p);
}

/* The row's allocated within max(1 MiB, 5%) of the truth, read as it is
 * and again after a refresh of jemalloc's statistics. */
static void check_untagged(const char *when)
{
    for (int refreshed = 0; refreshed < 2; refreshed++) {
        size_t truth = untagged_base + atomic_load(&untagged_live);
        size_t slack = truth / 20 > MIB ? truth / 20 : MIB, row;

        if (refreshed)
            ck_assert_int_eq(ra_stats_refresh(), 0);
        row = tu_tag_stats(RA_TAG_NONE).allocated;
        ck_assert_msg(row + slack >= truth && row <= truth + slack,
                      "%s%s: the untagged row's allocated is %.2f MiB, the "
                      "live untagged blocks %.2f MiB",
                      when, refreshed ? ", refreshed" : "", in_mib(row),
                      in_mib(truth));
    }
}

/* Blocks of one size: count of them, each written whole or not. */
struct untagged_group {
    size_t size, count;
    bool touch;
    void **blocks;
};

static void make_group(struct untagged_group *g)
{
    for (size_t i = 0; i < g->count; i++) {
        g->blocks[i] = untagged_make(g->size, g->touch);
        ck_assert_ptr_nonnull(g->blocks[i]);
    }
}

static void free_group(struct untagged_group *g)
{
    for (size_t i = 0; i < g->count; i++)
        untagged_free(g->blocks[i]);
}

/* Each group made (make) or freed in turn, the row checked after each. */
static void step_groups(struct untagged_group *groups, size_t n, bool make)
{
    char when[96];

    for (size_t i = 0; i < n; i++) {
        if (make)
            make_group(&groups[i]);
        else
            free_group(&groups[i]);
        snprintf(when, sizeof when, "%zu blocks of %zu bytes%s %s",
                 groups[i].count, groups[i].size,
                 groups[i].touch ? " (written)" : "",
                 make ? "made" : "freed");
        check_untagged(when);
    }
}

static void *small_blocks[2][131072], *page_blocks[2][512], *mib_blocks[2][2],
    *big_blocks[2][3];

/* Before the kernel has counted anything (no report, no refresh of the
 * library's): 256 MiB untagged, mapped and never touched, which jemalloc
 * counts resident whole once its statistics are refreshed. The untagged
 * row's resident, and a checkpoint's process resident, stay within what
 * the kernel counts (RssAnon + 1 MiB + 2%). */
START_TEST(test_stats_untagged_resident_is_bounded_before_a_count)
{
    void *big = malloc(256 * MIB);
    uint64_t epoch = 1, bound;
    ra_tag_stats_t row;
    char *json, *at;

    ck_assert_ptr_nonnull(big);
    ck_assert_int_eq(mallctl("epoch", NULL, NULL, &epoch, sizeof epoch), 0);
    ck_assert_int_eq(ra_checkpoint("untouched"), 0);
    ck_assert_int_eq(ra_tag_stats(RA_TAG_NONE, &row), 0);
    bound = tu_rss_anon_bytes() + MIB + tu_rss_anon_bytes() / 50;
    ck_assert_uint_le(row.resident, bound);
    json = tu_report_string(ra_checkpoint_report, RA_FORMAT_JSON);
    at = strstr(json, "\"resident\": ");
    ck_assert_ptr_nonnull(at);
    ck_assert_uint_le(strtoull(at + strlen("\"resident\": "), NULL, 10),
                      bound);
    free(json);
    free(big);
}
END_TEST

/* Every size, from 16 bytes (2 MiB of them, past the slack) to 256 MiB
 * (jemalloc's oversize arena from 8 MiB), written whole and not: the row
 * follows each group as it is made and as it is freed, with no refresh
 * and after one. */
START_TEST(test_stats_untagged_row_is_live_for_every_size)
{
    static const size_t big[] = {4 * MIB, 64 * MIB, 256 * MIB};
    struct untagged_group groups[2 * 6];
    size_t n = 0;

    for (int touch = 1; touch >= 0; touch--) {
        groups[n++] = (struct untagged_group){16, 131072, touch,
                                              small_blocks[touch]};
        groups[n++] = (struct untagged_group){4 * KIB, 512, touch,
                                              page_blocks[touch]};
        groups[n++] = (struct untagged_group){MIB, 2, touch,
                                              mib_blocks[touch]};
        for (size_t k = 0; k < 3; k++)
            groups[n++] = (struct untagged_group){big[k], 1, touch,
                                                  &big_blocks[touch][k]};
    }
    untagged_begin();
    check_untagged("before any block");
    step_groups(groups, n, true);
    step_groups(groups, n, false);
}
END_TEST

#ifdef RA_OVERRIDE
/* Four threads each make blocks of every size to 64 MiB (about 70 MiB a
 * thread, written by the even ones), free half of the next thread's, and
 * exit holding the rest, which the main thread frees. The main thread
 * reads the row at each step, the workers waiting. */
#define UT_THREADS 4
#define UT_SMALL 32768
#define UT_PAGES 128
static void *ut_blocks[UT_THREADS][UT_SMALL + UT_PAGES + 3];
static size_t ut_count[UT_THREADS];
static pthread_barrier_t ut_barrier;
static atomic_uint ut_next, ut_failed;

static void *untagged_worker(void *arg)
{
    unsigned i = atomic_fetch_add(&ut_next, 1), other = (i + 1) % UT_THREADS;
    bool touch = i % 2 == 0;
    size_t n = 0;

    (void)arg;
    for (size_t k = 0; k < UT_SMALL; k++)
        ut_blocks[i][n++] = untagged_make(16, touch);
    for (size_t k = 0; k < UT_PAGES; k++)
        ut_blocks[i][n++] = untagged_make(4 * KIB, touch);
    ut_blocks[i][n++] = untagged_make(MIB, touch);
    ut_blocks[i][n++] = untagged_make(4 * MIB, touch);
    ut_blocks[i][n++] = untagged_make(64 * MIB, touch);
    for (size_t k = 0; k < n; k++)
        if (ut_blocks[i][k] == NULL)
            atomic_fetch_add(&ut_failed, 1);
    ut_count[i] = n;
    pthread_barrier_wait(&ut_barrier); /* made */
    pthread_barrier_wait(&ut_barrier); /* the row read */
    /* Made on one thread, freed on another: every other block of the
     * next thread's, the big ones among them. */
    for (size_t k = 0; k < ut_count[other]; k += 2)
        if (ut_blocks[other][k] != NULL) {
            untagged_free(ut_blocks[other][k]);
            ut_blocks[other][k] = NULL;
        }
    pthread_barrier_wait(&ut_barrier); /* freed */
    pthread_barrier_wait(&ut_barrier); /* the row read: exit holding */
    return NULL;
}

START_TEST(test_stats_untagged_row_counts_every_thread)
{
    pthread_t threads[UT_THREADS];

    ck_assert_int_eq(pthread_barrier_init(&ut_barrier, NULL, UT_THREADS + 1),
                     0);
    untagged_begin();
    for (unsigned i = 0; i < UT_THREADS; i++)
        ck_assert_int_eq(
            pthread_create(&threads[i], NULL, untagged_worker, NULL), 0);
    pthread_barrier_wait(&ut_barrier);
    ck_assert_uint_eq(atomic_load(&ut_failed), 0);
    check_untagged("4 threads holding their blocks");
    pthread_barrier_wait(&ut_barrier);
    pthread_barrier_wait(&ut_barrier);
    check_untagged("half of each thread's blocks freed by another thread");
    pthread_barrier_wait(&ut_barrier);
    for (unsigned i = 0; i < UT_THREADS; i++)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    check_untagged("the 4 threads exited holding the rest");
    for (unsigned i = 0; i < UT_THREADS; i++)
        for (size_t k = 0; k < ut_count[i]; k++)
            if (ut_blocks[i][k] != NULL)
                untagged_free(ut_blocks[i][k]);
    check_untagged("the exited threads' blocks freed by the main thread");
}
END_TEST

/* A thread's own destructors run after the library's thread end (their
 * keys were made later): what one frees there, and what one makes there
 * and leaves, count as any block. */
static pthread_key_t late_key;
static void *late_block, *late_left;

static void late_destructor(void *block)
{
    untagged_free(block);
    late_left = untagged_make(8 * MIB, true);
}

static void *late_worker(void *arg)
{
    (void)arg;
    late_block = untagged_make(16 * MIB, true);
    pthread_setspecific(late_key, late_block);
    return NULL;
}

START_TEST(test_stats_untagged_row_counts_frees_in_late_destructors)
{
    ck_assert_int_eq(pthread_key_create(&late_key, late_destructor), 0);
    untagged_begin();
    tu_run_threads(1, late_worker, NULL);
    ck_assert_ptr_nonnull(late_left);
    check_untagged("a thread's destructor freed 16 MiB and made 8 MiB");
    untagged_free(late_left);
    check_untagged("the block its destructor made freed");
}
END_TEST
#endif

/* Untagged blocks stay live while tags go through every path that moves
 * tagged blocks to and from jemalloc: front caches and their refills,
 * large and oversize blocks, realloc in place and moved, a consumer
 * thread's frees through its outbox, sampled blocks, hooked paths, a
 * reset with blocks live, a destroy that leaves leftovers and one that
 * resets, a flush and a purge of everything. None of it is untagged. */
static ra_tag_t consumed_tag;
static void *consumed[4096];

static void *consumer(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < sizeof consumed / sizeof consumed[0]; i++)
        ra_free(consumed[i]);
    return NULL;
}

static void on_block(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)ctx, (void)tag, (void)ptr, (void)size;
}

START_TEST(test_stats_untagged_row_ignores_tags_reset_and_destroyed)
{
    static const ra_hooks_t hooks = {on_block, on_block, NULL};
    ra_tag_t reset_tag = tu_tag_create("ut-reset");
    ra_tag_t left_tag = tu_tag_create("ut-leftovers");
    ra_tag_t gone_tag = tu_tag_create("ut-destroyed");
    void *keep[3], *live[64];
    int hook;

    untagged_begin();
    keep[0] = untagged_make(64 * MIB, true);
    keep[1] = untagged_make(3 * MIB, false);
    keep[2] = untagged_make(100, true);
    check_untagged("untagged blocks made");

    ck_assert(tu_tag_traffic(tag_a, 20));
    check_untagged("tagged traffic");

    consumed_tag = tag_b;
    tu_tag_push(tag_b);
    for (size_t i = 0; i < sizeof consumed / sizeof consumed[0]; i++)
        ck_assert_ptr_nonnull(consumed[i] = ra_malloc(48 + i % 200));
    tu_tag_pop(tag_b);
    tu_run_threads(1, consumer, NULL);
    check_untagged("a tag's blocks freed by a consumer thread");

    ck_assert_int_eq(ra_prof_start(1), 0);
    ck_assert(tu_tag_traffic(tag_a, 2));
    ck_assert_int_eq(ra_prof_stop(), 0);
    hook = ra_hooks_install(&hooks);
    ck_assert_int_ge(hook, 0);
    ck_assert(tu_tag_traffic(tag_a, 2));
    ck_assert_int_eq(ra_hooks_remove(hook), 0);
    check_untagged("sampled and hooked tagged traffic");

    tu_tag_push(reset_tag);
    for (size_t i = 0; i < 64; i++)
        ck_assert_ptr_nonnull(live[i] = ra_malloc(i % 2 ? 100 : 2 * MIB));
    tu_tag_pop(reset_tag);
    ck_assert_int_eq(ra_tag_reset(reset_tag), 0);
    check_untagged("a tag reset with 64 MiB live");

    tu_tag_push(left_tag);
    for (size_t i = 0; i < 8; i++)
        ck_assert_ptr_nonnull(live[i] = ra_malloc(64));
    tu_tag_pop(left_tag);
    ck_assert_int_eq(ra_tag_destroy(left_tag), 0);
    check_untagged("a tag destroyed with leftovers");

    tu_tag_push(gone_tag);
    for (size_t i = 0; i < 64; i++)
        ck_assert_ptr_nonnull(live[i] = ra_malloc(MIB));
    tu_tag_pop(gone_tag);
    ck_assert_int_eq(ra_tag_destroy(gone_tag), 0);
    check_untagged("a tag destroyed with 64 MiB live");

    ra_thread_flush();
    ck_assert_int_eq(ra_purge_all(), 0);
    check_untagged("every cache flushed, every tag purged");
    for (size_t i = 0; i < 3; i++)
        untagged_free(keep[i]);
    check_untagged("the untagged blocks freed");
}
END_TEST

static Suite *stats_suite(void)
{
    Suite *s = suite_create("stats");
    TCase *tc;

    tc = tcase_create("live");
    tcase_add_checked_fixture(tc, setup_tags, NULL);
    tcase_add_test(tc, test_stats_allocated_is_exact_without_a_flush);
    tcase_add_test(tc, test_stats_allocated_is_exact_instrumented);
    tcase_add_test(tc, test_stats_reads_take_no_refresh);
    suite_add_tcase(s, tc);

    /* Before any tag: the pool's configuration is read at first use. */
    tc = tcase_create("untagged");
    tcase_add_checked_fixture(tc, setup_tags, NULL);
    tcase_add_test(tc, test_stats_untagged_row_is_live_for_every_size);
    tcase_add_test(tc, test_stats_untagged_resident_is_bounded_before_a_count);
#ifdef RA_OVERRIDE
    tcase_add_test(tc, test_stats_untagged_row_counts_every_thread);
    tcase_add_test(tc,
                   test_stats_untagged_row_counts_frees_in_late_destructors);
#endif
    tcase_add_test(tc,
                   test_stats_untagged_row_ignores_tags_reset_and_destroyed);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("live pool");
    tcase_add_test(tc, test_stats_live_figures_are_jemallocs_at_rest);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, setup_tags, NULL);
    tcase_add_test(tc, test_stats_null_out_is_einval);
    tcase_add_test(tc, test_stats_unknown_tag_is_einval);
    tcase_add_test(tc, test_stats_purge_unknown_tag_is_einval);
    suite_add_tcase(s, tc);

    /* No fixture: these tests set the environment before any ra_ call. */
    tc = tcase_create("configuration");
    tcase_add_test(tc, test_stats_pass_through_mode_is_enotsup);
    tcase_add_test(tc, test_stats_reserved_is_region_size);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);

    tc = tcase_create("fields");
    tcase_add_test(tc, test_stats_usage_is_exact_without_a_refresh);
    tcase_add_checked_fixture(tc, setup_tags, NULL);
    tcase_add_test(tc, test_stats_fields_are_ordered);
    tcase_add_test(tc, test_stats_active_is_the_pages_of_live_blocks);
    tcase_add_test(tc, test_stats_dirty_is_freed_pages_until_purged);
    tcase_add_test(tc, test_stats_untagged_counts_untagged_allocations);
    tcase_add_test(tc, test_stats_untagged_excludes_tagged_allocations);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);

    tc = tcase_create("purge");
    tcase_add_checked_fixture(tc, setup_tags, NULL);
    tcase_add_test(tc, test_stats_purge_returns_pages_to_os);
    tcase_add_test(tc, test_stats_purge_all_returns_pages_to_os);
    tcase_add_test(tc, test_stats_purged_tag_allocates_again);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);

    tc = tcase_create("kernel view");
    tcase_add_checked_fixture(tc, setup_tags, NULL);
    tcase_add_test(tc, test_stats_tag_rss_errors);
    tcase_add_test(tc, test_stats_tag_rss_follows_touched_pages);
    tcase_add_test(tc, test_stats_tag_rss_matches_resident_estimate);
    tcase_add_test(tc, test_stats_pages_only_read_are_no_ones);
    tcase_add_test(tc, test_stats_resident_never_hides_what_the_kernel_counts);
    tcase_add_test(tc, test_stats_peak_mapped_keeps_high_water_mark);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);

    tc = tcase_create("resident cost");
    tcase_add_test(tc, test_stats_empty_tag_resident_is_small);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    return tu_run_suite(stats_suite());
}

/* Suite "region": every tagged byte lives in its tag's region (ra_tag_of),
 * regions fill up cleanly and recover, and the reservation scales from many
 * small regions to thousands of large ones. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "regionalloc.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)
#define NTAGS 20

static const size_t small_sizes[] = {
    1,    8,    13,   16,   24,   32,   48,   64,   80,   96,   100,
    112,  128,  160,  192,  224,  256,  320,  384,  448,  512,  640,
    768,  896,  1000, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584,
    4096, 5000, 5120, 6144, 7168, 8192, 10240, 12288, 14336};
static const size_t large_sizes[] = {
    14337,      16384,      20480,     24576,    32768,    65536,
    100000,     262144,     1 << 20,   (1 << 20) + 1, 2 << 20,
    3 << 20,    4 << 20};
static const size_t alignments[] = {
    64, 128, 256, 512, 4096, 8192, 65536, 1 << 20, 2 << 20};

static const char static_data[64] = "static";

static void make_tags(ra_tag_t *tags, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "region-%u", i);
        tags[i] = tu_tag_create(name);
    }
}

/* Allocates size bytes under tag: explicitly for even i, by push for odd i,
 * so both ways are interleaved. Touches the first and last byte. */
static void *alloc_under(ra_tag_t tag, size_t size, unsigned i)
{
    void *p;

    if (i % 2 == 0) {
        p = ra_malloc_tag(tag, size);
    } else {
        ck_assert_int_eq(ra_tag_push(tag), 0);
        p = ra_malloc(size);
        ck_assert_int_eq(ra_tag_pop(tag), 0);
    }
    ck_assert_msg(p != NULL, "allocating %zu bytes under tag %u: errno %d",
                  size, tag, errno);
    ((volatile char *)p)[0] = 1;
    ((volatile char *)p)[size - 1] = 2;
    return p;
}

/* The first, last and middle bytes of the block belong to tag. */
static void assert_block_tag(const void *p, size_t size, ra_tag_t tag)
{
    size_t usable = ra_malloc_usable_size(p);
    const char *c = p;

    ck_assert_uint_ge(usable, size);
    ck_assert_msg(ra_tag_of(p) == tag, "%zu-byte block %p: tag %u, want %u",
                  size, p, ra_tag_of(p), tag);
    ck_assert_msg(ra_tag_of(c + usable / 2) == tag,
                  "%zu-byte block %p: middle has tag %u, want %u", size, p,
                  ra_tag_of(c + usable / 2), tag);
    ck_assert_msg(ra_tag_of(c + usable - 1) == tag,
                  "%zu-byte block %p: last byte has tag %u, want %u", size, p,
                  ra_tag_of(c + usable - 1), tag);
}

/* Allocates every size of sizes under each of NTAGS tags, sizes outermost so
 * the tags' blocks interleave, then checks them all, then frees them. */
static void check_sizes_interleaved(const size_t *sizes, unsigned nsizes)
{
    ra_tag_t tags[NTAGS];
    void **blocks = calloc((size_t)nsizes * NTAGS, sizeof *blocks);

    ck_assert_ptr_nonnull(blocks);
    make_tags(tags, NTAGS);
    for (unsigned s = 0; s < nsizes; s++)
        for (unsigned t = 0; t < NTAGS; t++)
            blocks[s * NTAGS + t] = alloc_under(tags[t], sizes[s], s + t);
    for (unsigned s = 0; s < nsizes; s++)
        for (unsigned t = 0; t < NTAGS; t++)
            assert_block_tag(blocks[s * NTAGS + t], sizes[s], tags[t]);
    for (unsigned i = 0; i < nsizes * NTAGS; i++)
        ra_free(blocks[i]);
    free(blocks);
}

/* -- tag of blocks -------------------------------------------------------- */

START_TEST(test_region_small_blocks_have_their_tag)
{
    check_sizes_interleaved(small_sizes,
                            sizeof small_sizes / sizeof small_sizes[0]);
}
END_TEST

START_TEST(test_region_large_blocks_have_their_tag)
{
    check_sizes_interleaved(large_sizes,
                            sizeof large_sizes / sizeof large_sizes[0]);
}
END_TEST

START_TEST(test_region_huge_blocks_have_their_tag)
{
    static const size_t huge[] = {64 * MIB};

    check_sizes_interleaved(huge, 1);
}
END_TEST

START_TEST(test_region_gigabyte_blocks_have_their_tag)
{
    ra_tag_t tags[3];
    void *p[3];

    make_tags(tags, 3);
    /* Default 64 GiB regions hold 1 GiB blocks; only two pages are touched. */
    for (unsigned i = 0; i < 3; i++)
        p[i] = alloc_under(tags[i], (size_t)1 << 30, i);
    for (unsigned i = 0; i < 3; i++)
        assert_block_tag(p[i], (size_t)1 << 30, tags[i]);
    for (unsigned i = 0; i < 3; i++)
        ra_free(p[i]);
}
END_TEST

START_TEST(test_region_aligned_blocks_have_their_tag)
{
    enum { NALIGN = sizeof alignments / sizeof alignments[0] };
    ra_tag_t tags[NTAGS];
    void *a[NALIGN][NTAGS], *pm[NALIGN][NTAGS];
    void *sentinel = &tags;

    make_tags(tags, NTAGS);
    for (unsigned i = 0; i < NALIGN; i++) {
        for (unsigned t = 0; t < NTAGS; t++) {
            size_t align = alignments[i];
            /* A size that is not a multiple of the alignment, and one that
             * is: both must come back aligned and tagged. */
            size_t size = t % 2 == 0 ? align : align / 2 + 8;

            ck_assert_int_eq(ra_tag_push(tags[t]), 0);
            a[i][t] = ra_aligned_alloc(align, size);
            pm[i][t] = sentinel;
            ck_assert_int_eq(ra_posix_memalign(&pm[i][t], align, size + 1),
                             0);
            ck_assert_int_eq(ra_tag_pop(tags[t]), 0);
            ck_assert_ptr_nonnull(a[i][t]);
            ck_assert_ptr_ne(pm[i][t], sentinel);
            ck_assert_uint_eq((uintptr_t)a[i][t] % align, 0);
            ck_assert_uint_eq((uintptr_t)pm[i][t] % align, 0);
            memset(a[i][t], 0x5a, size);
        }
    }
    for (unsigned i = 0; i < NALIGN; i++) {
        for (unsigned t = 0; t < NTAGS; t++) {
            size_t align = alignments[i];
            size_t size = t % 2 == 0 ? align : align / 2 + 8;
            assert_block_tag(a[i][t], size, tags[t]);
            assert_block_tag(pm[i][t], size + 1, tags[t]);
            ra_free(a[i][t]);
            ra_free(pm[i][t]);
        }
    }
}
END_TEST

START_TEST(test_region_calloc_and_realloc_blocks_have_their_tag)
{
    ra_tag_t tags[NTAGS];
    void *p[NTAGS];

    make_tags(tags, NTAGS);
    for (unsigned t = 0; t < NTAGS; t++) {
        ck_assert_int_eq(ra_tag_push(tags[t]), 0);
        p[t] = ra_calloc(10, 10 + t);
        ck_assert_ptr_nonnull(p[t]);
        ck_assert_int_eq(ra_tag_pop(tags[t]), 0);
    }
    /* Grow through small, large and back down with another tag on top. */
    ck_assert_int_eq(ra_tag_push(tags[0]), 0);
    for (size_t size = 200; size <= 8 * MIB; size *= 4) {
        for (unsigned t = 0; t < NTAGS; t++) {
            p[t] = ra_realloc(p[t], size);
            ck_assert_ptr_nonnull(p[t]);
        }
        for (unsigned t = 0; t < NTAGS; t++)
            assert_block_tag(p[t], size, tags[t]);
    }
    ck_assert_int_eq(ra_tag_pop(tags[0]), 0);
    for (unsigned t = 0; t < NTAGS; t++)
        ra_free(p[t]);
}
END_TEST

/* -- untagged addresses --------------------------------------------------- */

static void assert_untagged_addresses(void)
{
    int local = 0;
    void *p = ra_malloc(100);
    void *q = malloc(5000);
    void *big = ra_malloc(8 * MIB);

    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    ck_assert_ptr_nonnull(big);
    ck_assert_uint_eq(ra_tag_of(p), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of(q), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of(big), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of((char *)big + 8 * MIB - 1), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of(&local), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of(NULL), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of(static_data), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of("a string literal"), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of((const void *)(uintptr_t)1), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of((const void *)UINTPTR_MAX), RA_TAG_NONE);
    ra_free(p);
    free(q);
    ra_free(big);
}

START_TEST(test_region_tag_of_before_any_tag_is_none)
{
    ck_assert_uint_eq(ra_tag_count(), 0);
    assert_untagged_addresses();
    ck_assert_uint_eq(ra_tag_count(), 0);
}
END_TEST

START_TEST(test_region_tag_of_untagged_memory_is_none)
{
    ra_tag_t tags[NTAGS];
    void *tagged[NTAGS];

    make_tags(tags, NTAGS);
    for (unsigned t = 0; t < NTAGS; t++)
        tagged[t] = alloc_under(tags[t], 4096, t);
    assert_untagged_addresses();
    /* The stack is empty again after pushes and pops: untagged. */
    ck_assert_int_eq(ra_tag_push(tags[3]), 0);
    ck_assert_int_eq(ra_tag_pop(tags[3]), 0);
    assert_untagged_addresses();
    for (unsigned t = 0; t < NTAGS; t++)
        ra_free(tagged[t]);
}
END_TEST

START_TEST(test_region_tag_of_region_edges)
{
    ra_tag_t tags[4];
    ra_tag_stats_t st;
    uintptr_t base, size;
    void *p;

    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "4", 1), 0);
    ck_assert_int_eq(setenv("REGIONALLOC_REGION_SIZE", "16M", 1), 0);
    make_tags(tags, 4);
    p = ra_malloc_tag(tags[0], 64);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(ra_tag_stats(tags[0], &st), 0);
    size = st.reserved;
    ck_assert_uint_eq(size, 16 * MIB);
    /* Regions are aligned slices: tag 1's starts at the reservation base. */
    base = (uintptr_t)p & ~(size - 1);
    ck_assert_uint_eq(ra_tag_of((void *)(base - 1)), RA_TAG_NONE);
    for (unsigned t = 0; t < 4; t++) {
        uintptr_t start = base + t * size;
        ck_assert_uint_eq(ra_tag_of((void *)start), tags[t]);
        ck_assert_uint_eq(ra_tag_of((void *)(start + size / 2)), tags[t]);
        ck_assert_uint_eq(ra_tag_of((void *)(start + size - 1)), tags[t]);
    }
    ck_assert_uint_eq(ra_tag_of((void *)(base + 4 * size)), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of((void *)(base + 64 * size)), RA_TAG_NONE);
    ra_free(p);
}
END_TEST

/* -- region exhaustion ---------------------------------------------------- */

#define MAX_BLOCKS 8192

/* Allocates blocks of size under tag until one fails (at most MAX_BLOCKS).
 * Returns how many succeeded; every success is checked to be tagged and the
 * failure to be NULL with ENOMEM. */
static unsigned fill_region(ra_tag_t tag, size_t size, void **blocks)
{
    unsigned n;

    for (n = 0; n < MAX_BLOCKS; n++) {
        errno = 0;
        blocks[n] = ra_malloc_tag(tag, size);
        if (blocks[n] == NULL)
            break;
        ck_assert_uint_eq(ra_tag_of(blocks[n]), tag);
    }
    ck_assert_msg(n < MAX_BLOCKS, "%u blocks of %zu bytes fit a 16 MiB region",
                  n, size);
    ck_assert_int_eq(errno, ENOMEM);
    return n;
}

/* A block of size allocated explicitly under tag comes back and lies in the
 * tag's region; it is freed again. */
static void assert_allocates_in(ra_tag_t tag, size_t size)
{
    void *p = ra_malloc_tag(tag, size);

    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(ra_tag_of(p), tag);
    ra_free(p);
}

static void set_16m_regions(void)
{
    ck_assert_int_eq(setenv("REGIONALLOC_REGION_SIZE", "16M", 1), 0);
}

START_TEST(test_region_full_region_returns_enomem)
{
    static void *blocks[MAX_BLOCKS];
    ra_tag_t full, other;
    ra_tag_stats_t st;
    void *p, *q;
    unsigned n;

    set_16m_regions();
    full = tu_tag_create("full");
    other = tu_tag_create("other");
    n = fill_region(full, MIB, blocks);
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_lt(n, 16);
    /* Still full: every way of allocating under the tag fails the same. */
    errno = 0;
    ck_assert_ptr_null(ra_malloc_tag(full, MIB));
    ck_assert_int_eq(errno, ENOMEM);
    ck_assert_int_eq(ra_tag_push(full), 0);
    errno = 0;
    ck_assert_ptr_null(ra_malloc(MIB));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(ra_calloc(1, 4 * MIB));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(ra_aligned_alloc(MIB, 2 * MIB));
    ck_assert_int_eq(errno, ENOMEM);
    ck_assert_int_eq(ra_tag_pop(full), 0);
    /* Other tags and untagged memory are unaffected. */
    p = ra_malloc_tag(other, MIB);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(ra_tag_of(p), other);
    q = ra_malloc(MIB);
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(ra_tag_of(q), RA_TAG_NONE);
    /* Committed memory stayed inside the region. */
    ck_assert_int_eq(ra_tag_stats(full, &st), 0);
    ck_assert_uint_eq(st.reserved, 16 * MIB);
    ck_assert_uint_le(st.mapped, st.reserved);
    ck_assert_uint_ge(st.allocated, n * MIB);
    for (unsigned i = 0; i < n; i++)
        ra_free(blocks[i]);
    ra_free(p);
    ra_free(q);
}
END_TEST

START_TEST(test_region_full_region_keeps_realloc_source)
{
    static void *blocks[MAX_BLOCKS];
    ra_tag_t tag;
    unsigned n;
    unsigned char *p, *r;

    set_16m_regions();
    tag = tu_tag_create("grow");
    p = ra_malloc_tag(tag, 1000);
    ck_assert_ptr_nonnull(p);
    for (unsigned i = 0; i < 1000; i++)
        p[i] = (unsigned char)i;
    n = fill_region(tag, MIB, blocks);
    /* Growing beyond what is left fails and leaves the block alone. */
    errno = 0;
    r = ra_realloc(p, 8 * MIB);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(errno, ENOMEM);
    for (unsigned i = 0; i < 1000; i++)
        ck_assert_uint_eq(p[i], (unsigned char)i);
    ck_assert_uint_eq(ra_tag_of(p), tag);
    for (unsigned i = 0; i < n; i++)
        ra_free(blocks[i]);
    ra_free(p);
}
END_TEST

START_TEST(test_region_full_region_recovers_after_free)
{
    static void *blocks[MAX_BLOCKS];
    ra_tag_t tag;
    unsigned n, again;

    set_16m_regions();
    tag = tu_tag_create("recover");
    n = fill_region(tag, MIB, blocks);
    ck_assert_uint_ge(n, 1);
    for (unsigned i = 0; i < n; i++)
        ra_free(blocks[i]);
    ra_thread_flush();
    errno = 0;
    blocks[0] = ra_malloc_tag(tag, MIB);
    ck_assert_msg(blocks[0] != NULL, "no recovery: errno %d", errno);
    ck_assert_uint_eq(ra_tag_of(blocks[0]), tag);
    ra_free(blocks[0]);
    /* Filling it again works as well, several times over. */
    for (unsigned round = 0; round < 3; round++) {
        again = fill_region(tag, MIB, blocks);
        ck_assert_uint_ge(again, 1);
        for (unsigned i = 0; i < again; i++)
            ra_free(blocks[i]);
        ra_thread_flush();
    }
}
END_TEST

START_TEST(test_region_full_region_of_small_blocks_recovers)
{
    static void *blocks[MAX_BLOCKS];
    ra_tag_t tag, other;
    unsigned n;

    set_16m_regions();
    tag = tu_tag_create("small");
    other = tu_tag_create("other");
    /* 4 KiB blocks come from slabs (small size classes). */
    n = fill_region(tag, 4096, blocks);
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_le(n, 16 * MIB / 4096);
    assert_allocates_in(other, 4096);
    for (unsigned i = 0; i < n; i++)
        ra_free(blocks[i]);
    ra_thread_flush();
    assert_allocates_in(tag, 4096);
    assert_allocates_in(tag, MIB);
}
END_TEST

START_TEST(test_region_block_bigger_than_region_is_enomem)
{
    static const size_t sizes[] = {16 * MIB, 16 * MIB + 1, 32 * MIB,
                                   (size_t)1 << 30, (size_t)1 << 40};
    ra_tag_t tag;

    set_16m_regions();
    tag = tu_tag_create("small-region");
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = 0;
        ck_assert_ptr_null(ra_malloc_tag(tag, sizes[i]));
        ck_assert_int_eq(errno, ENOMEM);
    }
    /* The failures left the tag usable. */
    assert_allocates_in(tag, MIB);
}
END_TEST


/* A request that can never fit (larger than the whole region) fails at
 * once: it does not empty the thread's caches nor purge the tag, which a
 * request that merely finds the region full does before it gives up. */
START_TEST(test_region_hopeless_request_fails_without_flushing_or_purging)
{
    static const size_t sizes[] = {16 * MIB + 1, 32 * MIB, (size_t)1 << 40,
                                   (size_t)1 << 62};
    ra_tag_t tag;
    ra_tag_stats_t before, after;
    size_t cached;
    void *blocks[200], *p;

    set_16m_regions();
    tag = tu_tag_create("hopeless");
    /* Blocks in this thread's caches (allocated for jemalloc), and a freed
     * large block's dirty pages in the arena. */
    for (unsigned i = 0; i < 200; i++)
        blocks[i] = ra_malloc_tag(tag, 64);
    for (unsigned i = 0; i < 200; i++)
        ra_free(blocks[i]);
    p = ra_malloc_tag(tag, 2 * MIB);
    ck_assert_ptr_nonnull(p);
    memset(p, 1, 2 * MIB);
    ra_free(p);
    before = tu_tag_stats(tag);
    cached = tu_jemalloc_allocated(tag);
    ck_assert_uint_gt(cached, 0);
    ck_assert_uint_gt(before.dirty, 0);
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        /* No assertion while the tag is pushed: a passing one allocates. */
        int e[4];
        void *q = ra_malloc_tag(tag, 64), *r[4];
        tu_tag_push(tag);
        errno = 0;
        r[0] = ra_malloc(sizes[i]);
        e[0] = errno;
        errno = 0;
        r[1] = ra_calloc(1, sizes[i]);
        e[1] = errno;
        errno = 0;
        r[2] = ra_aligned_alloc(4096, sizes[i]);
        e[2] = errno;
        errno = 0;
        r[3] = ra_realloc(q, sizes[i]);
        e[3] = errno;
        tu_tag_pop(tag);
        ra_free(q);
        for (unsigned k = 0; k < 4; k++) {
            ck_assert_ptr_null(r[k]);
            ck_assert_int_eq(e[k], ENOMEM);
        }
    }
    after = tu_tag_stats(tag);
    ck_assert_uint_eq(tu_jemalloc_allocated(tag), cached);
    ck_assert_uint_eq(after.dirty, before.dirty);
}
END_TEST

/* The kernel refuses to commit (RLIMIT_DATA counts writable private
 * memory, as overcommit_memory=2 or max_map_count would refuse it): a burst
 * of refused requests, each bigger than a quarter of the region, must not
 * use up the region's address space, so that the tag allocates again once
 * the pressure is gone. */
START_TEST(test_region_refused_commit_loses_no_address_space)
{
    struct rlimit old, squeezed;
    ra_tag_t tag;
    void *first, *big;
    unsigned refused = 0;

    ck_assert_int_eq(setenv("REGIONALLOC_REGION_SIZE", "1G", 1), 0);
    tag = tu_tag_create("squeezed");
    first = ra_malloc_tag(tag, 100);
    ck_assert_ptr_nonnull(first);
    ck_assert_int_eq(getrlimit(RLIMIT_DATA, &old), 0);
    squeezed = old;
    squeezed.rlim_cur = tu_data_vm_bytes() + 16 * MIB;
    ck_assert_int_eq(setrlimit(RLIMIT_DATA, &squeezed), 0);
    for (unsigned i = 0; i < 64; i++) {
        void *p = ra_malloc_tag(tag, 300 * MIB);
        if (p == NULL && errno == ENOMEM)
            refused++;
        ra_free(p);
    }
    ck_assert_int_eq(setrlimit(RLIMIT_DATA, &old), 0);
    ck_assert_uint_eq(refused, 64);
    errno = 0;
    big = ra_malloc_tag(tag, 600 * MIB);
    ck_assert_msg(big != NULL, "the tag no longer allocates: errno %d",
                  errno);
    ck_assert_uint_eq(ra_tag_of(big), tag);
    memset(big, 1, MIB);
    ra_free(big);
    ra_free(first);
}
END_TEST

/* -- committed memory ----------------------------------------------------- */

START_TEST(test_region_committed_memory_stays_in_region)
{
    enum { NBLOCKS = 64 };
    ra_tag_t tag;
    ra_tag_stats_t st;
    void *blocks[NBLOCKS];
    size_t requested = 0;

    set_16m_regions();
    tag = tu_tag_create("touched");
    for (unsigned i = 0; i < NBLOCKS; i++) {
        size_t size = (i % 4 + 1) * 32768;
        blocks[i] = ra_malloc_tag(tag, size);
        ck_assert_ptr_nonnull(blocks[i]);
        memset(blocks[i], 0xab, size);
        requested += size;
    }
    ra_thread_flush();
    ck_assert_int_eq(ra_tag_stats(tag, &st), 0);
    ck_assert_uint_eq(st.reserved, 16 * MIB);
    ck_assert_uint_ge(st.allocated, requested);
    ck_assert_uint_ge(st.active, st.allocated);
    ck_assert_uint_ge(st.mapped, st.active);
    ck_assert_uint_le(st.mapped, st.reserved);
    for (unsigned i = 0; i < NBLOCKS; i++)
        assert_block_tag(blocks[i], (i % 4 + 1) * 32768, tag);
    for (unsigned i = 0; i < NBLOCKS; i++)
        ra_free(blocks[i]);
}
END_TEST

START_TEST(test_region_committed_memory_default_region)
{
    ra_tag_t tag = tu_tag_create("default-size");
    ra_tag_stats_t st;
    void *p = ra_malloc_tag(tag, 32 * MIB);

    ck_assert_ptr_nonnull(p);
    memset(p, 1, 32 * MIB);
    ck_assert_int_eq(ra_tag_stats(tag, &st), 0);
    ck_assert_uint_eq(st.reserved, (size_t)64 << 30);
    ck_assert_uint_ge(st.mapped, 32 * MIB);
    ck_assert_uint_le(st.mapped, st.reserved);
    ra_free(p);
}
END_TEST

/* -- configurations ------------------------------------------------------- */

START_TEST(test_region_many_small_regions)
{
    enum { N = 1000 };
    static ra_tag_t tags[N];
    static void *blocks[N];
    ra_tag_stats_t st;

    ck_assert_int_eq(setenv("REGIONALLOC_REGION_SIZE", "4M", 1), 0);
    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "1000", 1), 0);
    ck_assert_int_eq(ra_enabled(), 1);
    for (unsigned i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "small-%u", i);
        errno = 0;
        tags[i] = ra_tag_create(name);
        ck_assert_msg(tags[i] == i + 1, "tag %u: got %u, errno %d", i + 1,
                      tags[i], errno);
        errno = 0;
        blocks[i] = ra_malloc_tag(tags[i], 64);
        ck_assert_msg(blocks[i] != NULL, "tag %u: allocation failed, errno %d",
                      tags[i], errno);
        ck_assert_uint_eq(ra_tag_of(blocks[i]), tags[i]);
    }
    errno = 0;
    ck_assert_uint_eq(ra_tag_create("one-too-many"), RA_TAG_NONE);
    ck_assert_int_eq(errno, ENOSPC);
    ck_assert_uint_eq(ra_tag_count(), N);
    ck_assert_int_eq(ra_tag_stats(tags[N - 1], &st), 0);
    ck_assert_uint_eq(st.reserved, 4 * MIB);
    ck_assert_uint_le(st.mapped, st.reserved);
    /* A 4 MiB region still holds blocks of up to a megabyte. */
    blocks[0] = ra_realloc(blocks[0], MIB);
    ck_assert_ptr_nonnull(blocks[0]);
    ck_assert_uint_eq(ra_tag_of(blocks[0]), tags[0]);
    for (unsigned i = 0; i < N; i++)
        ra_free(blocks[i]);
}
END_TEST

/* Creates up to max tags; each must succeed or fail with ENOSPC, and once
 * one fails, all later ones must too. Returns how many were created, after
 * checking that each created tag allocates inside its region. */
static unsigned create_until_full(unsigned max)
{
    unsigned created = 0;
    int first_errno = 0;
    ra_tag_t tag;

    for (unsigned i = 0; i < max; i++) {
        char name[32];
        snprintf(name, sizeof name, "big-%u", i);
        errno = 0;
        tag = ra_tag_create(name);
        if (tag == RA_TAG_NONE) {
            ck_assert_msg(errno == ENOSPC, "tag %u: errno %d, want ENOSPC",
                          i + 1, errno);
            if (first_errno == 0)
                first_errno = errno;
            continue;
        }
        ck_assert_msg(first_errno == 0,
                      "tag %u created after an earlier ENOSPC", i + 1);
        ck_assert_uint_eq(tag, i + 1);
        created++;
    }
    ck_assert_uint_eq(ra_tag_count(), created);
    for (ra_tag_t t = 1; t <= created; t++) {
        void *p = ra_malloc_tag(t, 48);
        ck_assert_msg(p != NULL, "tag %u: allocation failed, errno %d", t,
                      errno);
        ck_assert_uint_eq(ra_tag_of(p), t);
        ra_free(p);
    }
    return created;
}

START_TEST(test_region_thousands_of_large_regions)
{
    unsigned created;
    ra_tag_stats_t st;
    void *p;

    ck_assert_int_eq(setenv("REGIONALLOC_REGION_SIZE", "1G", 1), 0);
    ck_assert_int_eq(setenv("REGIONALLOC_MAX_TAGS", "4000", 1), 0);
    ck_assert_int_eq(ra_enabled(), 1);
    created = create_until_full(4000);
    printf("region: %u of 4000 tags with 1 GiB regions were created\n",
           created);
    ck_assert_uint_ge(created, 1);
    if (created == 4000) {
        errno = 0;
        ck_assert_uint_eq(ra_tag_create("beyond"), RA_TAG_NONE);
        ck_assert_int_eq(errno, ENOSPC);
    }
    ck_assert_int_eq(ra_tag_stats(created, &st), 0);
    ck_assert_uint_eq(st.reserved, (size_t)1 << 30);
    p = malloc(1000);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(ra_tag_of(p), RA_TAG_NONE);
    free(p);
}
END_TEST

/* Run in a fresh process: MALLOC_CONF must be read by jemalloc's start. */
static int child_arena_limit(void)
{
    unsigned created = 0;
    ra_tag_t tag = RA_TAG_NONE;
    void *p;

    TU_REQUIRE(ra_enabled() == 1);
    for (unsigned i = 0; i < 4000; i++) {
        char name[32];
        snprintf(name, sizeof name, "arena-%u", i);
        errno = 0;
        tag = ra_tag_create(name);
        if (tag == RA_TAG_NONE)
            break;
        TU_REQUIRE(tag == i + 1);
        created++;
    }
    /* 200 automatic arenas (and jemalloc's huge arena) leave fewer than
     * 4000 of jemalloc's 4095 arena indices for tags. */
    TU_REQUIRE(tag == RA_TAG_NONE);
    TU_REQUIRE(errno == ENOSPC);
    TU_REQUIRE(created >= 3800 && created < 4000);
    TU_REQUIRE(ra_tag_count() == created);
    errno = 0;
    TU_REQUIRE(ra_tag_create("still-full") == RA_TAG_NONE);
    TU_REQUIRE(errno == ENOSPC);
    TU_REQUIRE(ra_tag_lookup("still-full") == RA_TAG_NONE);
    p = ra_malloc_tag(created, 100);
    TU_REQUIRE(p != NULL && ra_tag_of(p) == created);
    ra_free(p);
    p = ra_malloc_tag(1, 100);
    TU_REQUIRE(p != NULL && ra_tag_of(p) == 1);
    ra_free(p);
    p = malloc(100);
    TU_REQUIRE(p != NULL && ra_tag_of(p) == RA_TAG_NONE);
    free(p);
    printf("region: jemalloc's arena limit stopped tag creation at %u tags "
           "(narenas:200)\n", created);
    return 0;
}

START_TEST(test_region_arena_limit_is_enospc)
{
    static const char *const env[] = {
        "MALLOC_CONF=narenas:200", "REGIONALLOC_MAX_TAGS=4000",
        "REGIONALLOC_REGION_SIZE=64M", NULL};
    char err[1024];

    ck_assert_int_eq(tu_exec_self(env, "arena_limit", err, sizeof err), 0);
    ck_assert_str_eq(err, "");
}
END_TEST

#ifdef RA_OVERRIDE
/* -- "address-space limit": RLIMIT_AS lowered once tags exist ------------- */

#define GIB ((size_t)1 << 30)

/* The process's address space (VmSize), in bytes; without stdio or malloc,
 * which a low limit may refuse. */
static size_t vm_size(void)
{
    char status[8192];
    int fd = open("/proc/self/status", O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, status, sizeof status - 1) : -1;
    const char *line;

    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    status[n] = '\0';
    line = strstr(status, "VmSize:");
    return line != NULL ? (size_t)strtoull(line + 7, NULL, 10) << 10 : 0;
}

/* Allocates and touches (size_t)arg bytes, frees them; returns whether
 * the allocation worked. */
static void *allocate_and_touch(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    void *p = malloc(size);
    bool worked = p != NULL;

    if (worked)
        memset(p, 1, size);
    free(p);
    return (void *)(uintptr_t)worked;
}

/* Runs the child called name with env's variables; its failure fails the
 * test, with what it printed on stderr. */
static void run_limit_child(const char *const env[], const char *name)
{
    char err[2048];

    ck_assert_msg(tu_exec_self(env, name, err, sizeof err) == 0,
                  "stderr: %s", err);
}

static int lower_as_limit(size_t bytes)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_AS, &rl) != 0)
        return -1;
    rl.rlim_cur = bytes;
    return setrlimit(RLIMIT_AS, &rl);
}

/* glibc's tst-malloc-thread-fail, as a user runs it: tags exist (the
 * main thread's, by name), then the program lowers its address-space
 * limit far below the reservation. Threads start, untagged and tagged
 * memory is served, and new tags are made, within the limit. */
static int child_as_limit_lowered_later(void)
{
    ra_tag_t main_tag, late;
    pthread_t t;
    void *big, *result = NULL;

    free(malloc(100));
    main_tag = ra_tag_current();
    TU_REQUIRE(main_tag != RA_TAG_NONE);
    TU_REQUIRE(vm_size() > 4 * GIB);
    TU_REQUIRE(lower_as_limit(1 * GIB) == 0);
    TU_REQUIRE(vm_size() < 1 * GIB);
    TU_REQUIRE(pthread_create(&t, NULL, allocate_and_touch,
                              (void *)(uintptr_t)(8 * MIB)) == 0);
    TU_REQUIRE(pthread_join(t, &result) == 0 && result != NULL);
    big = malloc(64 * MIB);
    TU_REQUIRE(big != NULL && ra_tag_of(big) == main_tag);
    memset(big, 2, 64 * MIB);
    free(big);
    big = ra_malloc_tag(RA_TAG_NONE, 64 * MIB);
    TU_REQUIRE(big != NULL && ra_tag_of(big) == RA_TAG_NONE);
    memset(big, 3, 64 * MIB);
    free(big);
    late = ra_tag_create("after the limit");
    TU_REQUIRE(late != RA_TAG_NONE);
    big = ra_malloc_tag(late, 32 * MIB);
    TU_REQUIRE(big != NULL && ra_tag_of(big) == late);
    memset(big, 4, 32 * MIB);
    free(big);
    TU_REQUIRE(ra_tag_destroy(late) == 0);
    TU_REQUIRE(vm_size() < 1 * GIB);
    return 0;
}

/* The same limit set from outside the process (prlimit --pid, here the
 * system call itself, which the library does not stand in front of): the
 * first thread whose stack the limit refuses makes the library give the
 * address space back, and the thread starts. */
static int child_as_limit_lowered_from_outside(void)
{
    struct rlimit rl;
    pthread_t t;
    void *result = NULL, *big;

    free(malloc(100));
    TU_REQUIRE(getrlimit(RLIMIT_AS, &rl) == 0);
    rl.rlim_cur = 1 * GIB;
    TU_REQUIRE(syscall(SYS_prlimit64, 0, RLIMIT_AS, &rl, NULL) == 0);
    TU_REQUIRE(pthread_create(&t, NULL, allocate_and_touch,
                              (void *)(uintptr_t)(8 * MIB)) == 0);
    TU_REQUIRE(pthread_join(t, &result) == 0 && result != NULL);
    TU_REQUIRE(vm_size() < 1 * GIB);
    big = malloc(64 * MIB);
    TU_REQUIRE(big != NULL);
    memset(big, 2, 64 * MIB);
    free(big);
    return 0;
}

START_TEST(test_region_as_limit_lowered_later_keeps_the_process_working)
{
    static const char *const env[] = {"REGIONALLOC_THREAD_TAGS=*", NULL};
    char err[2048];

    ck_assert_msg(tu_exec_self(env, "as_later", err, sizeof err) == 0,
                  "stderr: %s", err);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
}
END_TEST

START_TEST(test_region_as_limit_lowered_from_outside_lets_threads_start)
{
    static const char *const env[] = {"REGIONALLOC_THREAD_TAGS=*", NULL};

    run_limit_child(env, "as_outside");
}
END_TEST

/* Under a low limit, what no longer fits fails cleanly: an allocation
 * with ENOMEM (the tag and the others go on), a tag with ENOMEM once no
 * region's bookkeeping fits; the earlier tags keep working. */
static int child_as_limit_exhausted(void)
{
    ra_tag_t first = ra_tag_create("first"), t = RA_TAG_NONE;
    void *blocks[64];
    unsigned n = 0, tags = 0;
    int e = 0;

    TU_REQUIRE(first != RA_TAG_NONE);
    free(ra_malloc_tag(first, 100));
    TU_REQUIRE(lower_as_limit(768 * MIB) == 0);
    while (n < 64 && (blocks[n] = ra_malloc_tag(first, 32 * MIB)) != NULL)
        n++;
    e = errno;
    TU_REQUIRE(n > 0 && n < 64 && e == ENOMEM);
    while (n > 0)
        free(blocks[--n]);
    TU_REQUIRE((blocks[0] = ra_malloc_tag(first, 32 * MIB)) != NULL);
    free(blocks[0]);
    for (tags = 0; tags < 1000; tags++) {
        char name[32];
        snprintf(name, sizeof name, "more-%u", tags);
        errno = 0;
        if ((t = ra_tag_create(name)) == RA_TAG_NONE)
            break;
    }
    e = errno;
    TU_REQUIRE(tags < 1000 && e == ENOMEM);
    TU_REQUIRE((blocks[0] = ra_malloc_tag(first, 1 * MIB)) != NULL);
    free(blocks[0]);
    return 0;
}

START_TEST(test_region_as_limit_exhausted_fails_cleanly)
{
    static const char *const env[] = {"REGIONALLOC_MAX_TAGS=1000", NULL};

    run_limit_child(env, "as_exhausted");
}
END_TEST

/* With REGIONALLOC_REGION_SIZE=64M (the children below). */
#define LIMIT_REGION (64 * MIB)
#define SCATTERED_BLOCKS 8
#define SCATTERED_TAGS 64

/* The bytes of untagged live blocks, as jemalloc counts them (refreshed:
 * the untagged row is jemalloc's as of the last refresh). */
static size_t untagged_allocated(void)
{
    ra_tag_stats_t st;

    return ra_stats_refresh() == 0 && ra_tag_stats(RA_TAG_NONE, &st) == 0
               ? st.allocated
               : 0;
}

/* Creates tags until one fails, each checked to work: blocks under it
 * have its id, and free. Returns how many, with the failure's errno in
 * *error; 0 with *error -1 when a tag does not work. */
static unsigned create_working_tags(int *error)
{
    unsigned made = 0;

    for (;;) {
        char name[32];
        ra_tag_t t;
        void *small, *large;
        snprintf(name, sizeof name, "scattered-%u", made);
        errno = 0;
        if ((t = ra_tag_create(name)) == RA_TAG_NONE) {
            *error = errno;
            return made;
        }
        small = ra_malloc_tag(t, 100);
        large = ra_malloc_tag(t, 1 * MIB);
        *error = -1;
        if (small == NULL || large == NULL || ra_tag_of(small) != t ||
            ra_tag_of(large) != t || ra_tag_name(t) == NULL)
            return 0;
        memset(large, 5, 1 * MIB);
        free(small);
        free(large);
        made++;
    }
}

/* The ids that were passed over: published, never live. */
static unsigned count_dead_ids(void)
{
    unsigned dead = 0;

    for (ra_tag_t t = 1; t <= ra_tag_count(); t++) {
        errno = 0;
        if (ra_tag_name(t) == NULL && errno == ENOENT)
            dead++;
    }
    return dead;
}

/* The program lowers its limit, then allocates untagged memory, which
 * jemalloc maps wherever the kernel likes: the kernel takes the highest
 * gap that fits, the regions no tag has yet, from the top down. Tags are
 * still created, as long as the limit leaves room, up to
 * REGIONALLOC_MAX_TAGS: a region taken is passed over (its id is dead)
 * and each tag made works; the untagged blocks, in passed-over regions or
 * not, are jemalloc's to free. (Under the legacy bottom-up layout the
 * kernel maps below the reservation and nothing is passed over.) */
static int child_as_limit_untagged_scattered(void)
{
    void *blocks[SCATTERED_BLOCKS];
    size_t before, mapped;
    unsigned made, dead, in_regions = 0, in_dead = 0;
    int error = 0;

    TU_REQUIRE(ra_enabled());
    TU_REQUIRE(lower_as_limit(2 * GIB) == 0);
    before = vm_size();
    for (unsigned i = 0; i < SCATTERED_BLOCKS; i++) {
        TU_REQUIRE((blocks[i] = malloc(64 * MIB)) != NULL);
        memset(blocks[i], (int)i, 4096);
    }
    mapped = vm_size() - before;
    made = create_working_tags(&error);
    TU_REQUIRE(error == ENOSPC);
    TU_REQUIRE(vm_size() < 2 * GIB - 256 * MIB);
    dead = count_dead_ids();
    TU_REQUIRE(ra_tag_count() == SCATTERED_TAGS &&
               made + dead == SCATTERED_TAGS);
    TU_REQUIRE(dead <= mapped / LIMIT_REGION + 1);
    for (unsigned i = 0; i < SCATTERED_BLOCKS; i++) {
        ra_tag_t t = ra_tag_of(blocks[i]);
        size_t held = untagged_allocated();
        in_regions += t != RA_TAG_NONE;
        in_dead += t != RA_TAG_NONE && ra_tag_name(t) == NULL;
        TU_REQUIRE(ra_malloc_usable_size(blocks[i]) >= 64 * MIB);
        free(blocks[i]);
        TU_REQUIRE(held - untagged_allocated() >= 64 * MIB);
    }
    TU_REQUIRE(in_regions == 0 || (dead > 0 && in_dead > 0));
    return 0;
}

START_TEST(test_region_as_limit_untagged_memory_does_not_stop_tags)
{
    static const char *const env[] = {
        "REGIONALLOC_MAX_TAGS=64", "REGIONALLOC_REGION_SIZE=64M", NULL};

    run_limit_child(env, "as_scattered");
}
END_TEST

/* Maps a page of the program's own at addr, where nothing is. */
static void *plant_at(uintptr_t addr)
{
    void *p = mmap((void *)addr, 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

    return p == (void *)addr ? p : NULL;
}

/* The number after key in the report of format fmt, or -1 (no Check
 * asserts: the limit's tests run in a child of their own). */
static long reported(ra_format_t fmt, const char *key)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    const char *at;
    long n = -1;

    if (f == NULL)
        return -1;
    if (ra_report(f, fmt) == 0 && fclose(f) == 0 &&
        (at = strstr(buf, key)) != NULL)
        n = strtol(at + strlen(key), NULL, 10);
    free(buf);
    return n;
}

/* The regions lost as the JSON report says, when the Prometheus one says
 * the same; else -2. */
static long reported_regions_lost(void)
{
    long json = reported(RA_FORMAT_JSON, "\"regions_lost\": ");

    return json == reported(RA_FORMAT_PROMETHEUS,
                            "\nregionalloc_regions_lost ")
               ? json
               : -2;
}

/* Another mapping in given-back space, put there on purpose: in the
 * page table's part of the next region (the table lies right under the
 * regions, one byte per 4 KiB of them), creation fails with ENOMEM, and
 * works again once the space is free; at the next region's start, the
 * region is passed over while the mapping is there: its id is dead, never
 * recycled, the ids after it are all handed out, and the reports count
 * it lost. Once the mapping is gone, the creation that finds no id left
 * takes the region back. */
static int child_as_limit_region_taken(void)
{
    const size_t table = 16 * (LIMIT_REGION >> 12);
    ra_tag_t first = ra_tag_create("first"), next, back;
    ra_tag_stats_t stats;
    uintptr_t region;
    void *planted, *p;
    unsigned made, dead;
    int error = 0;

    TU_REQUIRE(first == 1);
    TU_REQUIRE(lower_as_limit(2 * GIB) == 0);
    planted = plant_at(ra__layout.base - table + (LIMIT_REGION >> 12));
    TU_REQUIRE(planted != NULL);
    for (int i = 0; i < 2; i++) {
        errno = 0;
        TU_REQUIRE(ra_tag_create("refused") == RA_TAG_NONE &&
                   errno == ENOMEM && ra_tag_count() == 1);
    }
    TU_REQUIRE(munmap(planted, 4096) == 0);
    region = ra__layout.base + LIMIT_REGION;
    TU_REQUIRE((planted = plant_at(region)) != NULL);
    next = ra_tag_create("next");
    TU_REQUIRE(next == 3 && ra_tag_count() == 3);
    errno = 0;
    TU_REQUIRE(ra_tag_name(2) == NULL && errno == ENOENT);
    TU_REQUIRE(ra_tag_push(2) == -1 && errno == EINVAL);
    TU_REQUIRE(ra_tag_of(planted) == 2);
    TU_REQUIRE((p = ra_malloc_tag(next, 1000)) != NULL &&
               ra_tag_of(p) == next);
    free(p);
    TU_REQUIRE(ra_tag_destroy(next) == 0);
    TU_REQUIRE(ra_tag_create("recycled") == 3);
    /* The process's own later mappings may take the top regions too. */
    made = create_working_tags(&error);
    TU_REQUIRE(error == ENOSPC && ra_tag_count() == 16);
    dead = count_dead_ids();
    TU_REQUIRE(2 + made + dead == 16);
    TU_REQUIRE(reported_regions_lost() == (long)dead);
    /* Still there: the next creation finds no id. */
    errno = 0;
    TU_REQUIRE(ra_tag_create("still taken") == RA_TAG_NONE &&
               errno == ENOSPC);
    TU_REQUIRE(munmap(planted, 4096) == 0);
    back = ra_tag_create("taken back");
    TU_REQUIRE(back == 2 && ra_tag_lookup("taken back") == 2);
    TU_REQUIRE(reported_regions_lost() == (long)dead - 1);
    TU_REQUIRE((p = ra_malloc_tag(back, 1 * MIB)) != NULL &&
               ra_tag_of(p) == back);
    memset(p, 7, 1 * MIB);
    TU_REQUIRE(ra_tag_stats(back, &stats) == 0 && stats.allocated >= 1 * MIB);
    free(p);
    return 0;
}

START_TEST(test_region_as_limit_taken_region_is_passed_over)
{
    static const char *const env[] = {
        "REGIONALLOC_MAX_TAGS=16", "REGIONALLOC_REGION_SIZE=64M", NULL};

    run_limit_child(env, "as_taken");
}
END_TEST
#endif

static Suite *region_suite(void)
{
    Suite *s = suite_create("region");
    TCase *tc;

    tc = tcase_create("tag of blocks");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_region_small_blocks_have_their_tag);
    tcase_add_test(tc, test_region_large_blocks_have_their_tag);
    tcase_add_test(tc, test_region_huge_blocks_have_their_tag);
    tcase_add_test(tc, test_region_gigabyte_blocks_have_their_tag);
    tcase_add_test(tc, test_region_aligned_blocks_have_their_tag);
    tcase_add_test(tc, test_region_calloc_and_realloc_blocks_have_their_tag);
    suite_add_tcase(s, tc);

    tc = tcase_create("untagged addresses");
    tcase_add_test(tc, test_region_tag_of_before_any_tag_is_none);
    tcase_add_test(tc, test_region_tag_of_untagged_memory_is_none);
    tcase_add_test(tc, test_region_tag_of_region_edges);
    suite_add_tcase(s, tc);

    tc = tcase_create("region exhaustion");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_region_full_region_returns_enomem);
    tcase_add_test(tc, test_region_full_region_keeps_realloc_source);
    tcase_add_test(tc, test_region_full_region_recovers_after_free);
    tcase_add_test(tc, test_region_full_region_of_small_blocks_recovers);
    tcase_add_test(tc, test_region_block_bigger_than_region_is_enomem);
    tcase_add_test(tc,
                   test_region_hopeless_request_fails_without_flushing_or_purging);
    tcase_add_test(tc, test_region_refused_commit_loses_no_address_space);
    suite_add_tcase(s, tc);

    tc = tcase_create("committed memory");
    tcase_add_test(tc, test_region_committed_memory_stays_in_region);
    tcase_add_test(tc, test_region_committed_memory_default_region);
    suite_add_tcase(s, tc);

    tc = tcase_create("configurations");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_region_many_small_regions);
    tcase_add_test(tc, test_region_thousands_of_large_regions);
    tcase_add_test(tc, test_region_arena_limit_is_enospc);
    suite_add_tcase(s, tc);

#ifdef RA_OVERRIDE
    tc = tcase_create("address-space limit");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc,
                   test_region_as_limit_lowered_later_keeps_the_process_working);
    tcase_add_test(tc,
                   test_region_as_limit_lowered_from_outside_lets_threads_start);
    tcase_add_test(tc, test_region_as_limit_exhausted_fails_cleanly);
    tcase_add_test(tc, test_region_as_limit_untagged_memory_does_not_stop_tags);
    tcase_add_test(tc, test_region_as_limit_taken_region_is_passed_over);
    suite_add_tcase(s, tc);
#endif
    return s;
}

int main(int argc, char **argv)
{
    static const struct tu_child children[] = {
        {"arena_limit", child_arena_limit},
#ifdef RA_OVERRIDE
        {"as_later", child_as_limit_lowered_later},
        {"as_outside", child_as_limit_lowered_from_outside},
        {"as_exhausted", child_as_limit_exhausted},
        {"as_scattered", child_as_limit_untagged_scattered},
        {"as_taken", child_as_limit_region_taken},
#endif
        {NULL, NULL},
    };

    tu_child_main(argc, argv, children);
    return tu_run_suite(region_suite());
}

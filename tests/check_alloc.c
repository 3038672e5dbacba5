/* Suite "alloc": the ra_* allocation API under tags, and its accounting. */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "regionalloc.h"
#include "testutil.h"

/* Check's passing assertions allocate (they report their location to the
 * runner), and that allocation is tagged with whatever is on the stack. Tests
 * that count allocations therefore record what they see while a tag is pushed
 * and assert only after popping it. */

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* Larger than any region and than the whole 47-bit address space. */
#define BEYOND_REGION ((size_t)1 << 40)
#define BEYOND_ADDRESS_SPACE ((size_t)1 << 48)

static ra_tag_t tag_a, tag_b;

static void setup_tags(void)
{
    tag_a = tu_tag_create("alloc-a");
    tag_b = tu_tag_create("alloc-b");
    ck_assert_uint_ne(tag_a, tag_b);
    ck_assert_int_eq(ra_enabled(), 1);
}

/* Sizes from 8 B to 4 MiB: small bins, cached and uncached large classes. */
static const size_t mixed_sizes[] = {
    8,        16,       24,       40,       64,        100,
    128,      200,      256,      500,      1000,      1024,
    2000,     3500,     4096,     8000,     14336,     16384,
    20000,    32768,    40000,    65536,    100000,    262144,
    MIB,      3 * MIB,  4 * MIB,
};
#define N_MIXED (sizeof mixed_sizes / sizeof mixed_sizes[0])

/* Sizes a thread cache holds (up to jemalloc's default tcache_max, 32 KiB). */
static const size_t cached_sizes[] = {8,    16,   48,   96,    256,  512,
                                      1024, 3072, 8192, 14336, 20480, 32768};
#define N_CACHED (sizeof cached_sizes / sizeof cached_sizes[0])
#define PER_SIZE 64

/* -- "allocation functions" ----------------------------------------------- */

START_TEST(test_alloc_malloc_uses_current_tag)
{
    void *untagged, *a, *b, *back;

    untagged = ra_malloc(100);
    tu_tag_push(tag_a);
    a = ra_malloc(100);
    tu_tag_push(tag_b);
    b = ra_malloc(100);
    tu_tag_pop(tag_b);
    back = ra_malloc(100);
    tu_tag_pop(tag_a);

    ck_assert_ptr_nonnull(untagged);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(back);
    ck_assert_uint_eq(ra_tag_of(untagged), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of(a), tag_a);
    ck_assert_uint_eq(ra_tag_of(b), tag_b);
    ck_assert_uint_eq(ra_tag_of(back), tag_a);
    /* Every byte of a tagged block lies in its tag's region. */
    ck_assert_uint_eq(ra_tag_of((char *)a + ra_malloc_usable_size(a) - 1),
                      tag_a);
    ra_free(untagged);
    ra_free(a);
    ra_free(b);
    ra_free(back);
}
END_TEST

START_TEST(test_alloc_malloc_zero_gives_distinct_tagged_blocks)
{
    void *p, *q;

    tu_tag_push(tag_a);
    p = ra_malloc(0);
    q = ra_malloc(0);
    tu_tag_pop(tag_a);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    ck_assert_ptr_ne(p, q);
    ck_assert_uint_eq(ra_tag_of(p), tag_a);
    ck_assert_uint_eq(ra_tag_of(q), tag_a);
    ra_free(p);
    ra_free(q);
    ra_free(NULL);
}
END_TEST

START_TEST(test_alloc_every_size_class_is_tagged_and_usable)
{
    void *blocks[N_MIXED];

    tu_tag_push(tag_b);
    for (size_t i = 0; i < N_MIXED; i++)
        blocks[i] = ra_malloc(mixed_sizes[i]);
    tu_tag_pop(tag_b);
    for (size_t i = 0; i < N_MIXED; i++) {
        size_t usable;

        ck_assert_ptr_nonnull(blocks[i]);
        ck_assert_uint_eq(ra_tag_of(blocks[i]), tag_b);
        usable = ra_malloc_usable_size(blocks[i]);
        ck_assert_uint_ge(usable, mixed_sizes[i]);
        /* The whole usable size is ours to write. */
        tu_fill_pattern(blocks[i], usable, (unsigned)i);
    }
    for (size_t i = 0; i < N_MIXED; i++) {
        ck_assert_uint_eq(
            tu_check_pattern(blocks[i], ra_malloc_usable_size(blocks[i]),
                             (unsigned)i),
            ra_malloc_usable_size(blocks[i]));
        ra_free(blocks[i]);
    }
    ck_assert_uint_eq(ra_malloc_usable_size(NULL), 0);
}
END_TEST

START_TEST(test_alloc_calloc_zeroes_reused_blocks)
{
    const size_t sizes[] = {24, 4096, 20000, 100000, 2 * MIB};

    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *dirty, *clean;
        size_t zeros = 0;

        tu_tag_push(tag_a);
        dirty = ra_malloc(sizes[i]);
        tu_tag_pop(tag_a);
        ck_assert_ptr_nonnull(dirty);
        memset(dirty, 0xa5, sizes[i]);
        /* The freed block is the likeliest one for calloc to get back. */
        ra_free(dirty);
        tu_tag_push(tag_a);
        clean = ra_calloc(1, sizes[i]);
        tu_tag_pop(tag_a);
        ck_assert_ptr_nonnull(clean);
        ck_assert_uint_eq(ra_tag_of(clean), tag_a);
        for (size_t j = 0; j < sizes[i]; j++)
            zeros += clean[j] == 0;
        ck_assert_uint_eq(zeros, sizes[i]);
        ra_free(clean);
    }
}
END_TEST

START_TEST(test_alloc_calloc_overflow_is_enomem)
{
    void *p;

    tu_tag_push(tag_a);
    errno = 0;
    p = ra_calloc(SIZE_MAX / 2 + 2, 2);
    tu_tag_pop(tag_a);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(errno, ENOMEM);

    errno = 0;
    p = ra_calloc(2, SIZE_MAX / 2 + 2);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(errno, ENOMEM);

    errno = 0;
    p = ra_calloc(SIZE_MAX, SIZE_MAX);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

START_TEST(test_alloc_huge_sizes_fail_with_enomem)
{
    /* Untagged memory is bounded only by the address space; a tag's is
     * bounded by its region too. */
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX / 2 + 1, (size_t)PTRDIFF_MAX,
                            BEYOND_ADDRESS_SPACE, BEYOND_REGION};
    const size_t nsizes = sizeof sizes / sizeof sizes[0];
    void *small, *p;
    int rc;

    for (size_t i = 0; i < nsizes; i++) {
        void *q;

        tu_tag_push(tag_a);
        errno = 0;
        q = ra_malloc(sizes[i]);
        rc = errno;
        tu_tag_pop(tag_a);
        ck_assert_msg(q == NULL && rc == ENOMEM,
                      "tagged ra_malloc(%zu): %p errno %d", sizes[i], q, rc);
        if (sizes[i] == BEYOND_REGION)
            continue;
        errno = 0;
        q = ra_malloc(sizes[i]);
        rc = errno;
        ck_assert_msg(q == NULL && rc == ENOMEM,
                      "untagged ra_malloc(%zu): %p errno %d", sizes[i], q, rc);
    }

    /* The other entry points fail the same way. */
    errno = 0;
    ck_assert_ptr_null(ra_malloc_tag(tag_b, BEYOND_REGION));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(ra_calloc(1, BEYOND_ADDRESS_SPACE));
    ck_assert_int_eq(errno, ENOMEM);
    tu_tag_push(tag_a);
    errno = 0;
    p = ra_aligned_alloc(4096, BEYOND_REGION);
    rc = errno;
    tu_tag_pop(tag_a);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(rc, ENOMEM);
    p = &rc;
    ck_assert_int_eq(ra_posix_memalign(&p, 64, SIZE_MAX), ENOMEM);
    ck_assert_ptr_eq(p, &rc);

    /* A failed realloc leaves the block, its tag and its contents alone. */
    tu_tag_push(tag_a);
    small = ra_malloc(1000);
    tu_tag_pop(tag_a);
    ck_assert_ptr_nonnull(small);
    tu_fill_pattern(small, 1000, 3);
    errno = 0;
    ck_assert_ptr_null(ra_realloc(small, BEYOND_REGION));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(ra_realloc(small, SIZE_MAX));
    ck_assert_int_eq(errno, ENOMEM);
    ck_assert_uint_eq(ra_tag_of(small), tag_a);
    ck_assert_uint_eq(tu_check_pattern(small, 1000, 3), 1000);

    /* The tag still serves ordinary requests after failing huge ones. */
    tu_tag_push(tag_a);
    p = ra_malloc(4 * MIB);
    tu_tag_pop(tag_a);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(ra_tag_of(p), tag_a);
    ra_free(p);
    ra_free(small);
}
END_TEST

START_TEST(test_alloc_aligned_alloc_honours_alignment)
{
    const size_t aligns[] = {8, 16, 64, 256, 4096, 65536, 2 * MIB};

    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        void *p;

        tu_tag_push(tag_b);
        p = ra_aligned_alloc(aligns[i], 3 * aligns[i] / 2 + 1);
        tu_tag_pop(tag_b);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % aligns[i], 0);
        ck_assert_uint_eq(ra_tag_of(p), tag_b);
        ck_assert_uint_ge(ra_malloc_usable_size(p), 3 * aligns[i] / 2 + 1);
        memset(p, 1, 3 * aligns[i] / 2 + 1);
        ra_free(p);
    }

    errno = 0;
    ck_assert_ptr_null(ra_aligned_alloc(0, 64));
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_ptr_null(ra_aligned_alloc(24, 64));
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_alloc_posix_memalign_returns_errors_and_keeps_out)
{
    const size_t bad[] = {0, 1, 2, 4, 24, 100};
    void *sentinel = &tag_a;
    void *out;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = sentinel;
        ck_assert_int_eq(ra_posix_memalign(&out, bad[i], 64), EINVAL);
        ck_assert_ptr_eq(out, sentinel);
    }
    out = sentinel;
    tu_tag_push(tag_a);
    ck_assert_int_eq(ra_posix_memalign(&out, 64, BEYOND_REGION), ENOMEM);
    tu_tag_pop(tag_a);
    ck_assert_ptr_eq(out, sentinel);

    tu_tag_push(tag_a);
    ck_assert_int_eq(ra_posix_memalign(&out, sizeof(void *), 10), 0);
    tu_tag_pop(tag_a);
    ck_assert_ptr_ne(out, sentinel);
    ck_assert_uint_eq(ra_tag_of(out), tag_a);
    ra_free(out);

    tu_tag_push(tag_a);
    ck_assert_int_eq(ra_posix_memalign(&out, 1 * MIB, 5000), 0);
    tu_tag_pop(tag_a);
    ck_assert_uint_eq((uintptr_t)out % MIB, 0);
    ck_assert_uint_eq(ra_tag_of(out), tag_a);
    ra_free(out);
}
END_TEST

START_TEST(test_alloc_free_sized_returns_blocks_to_their_tag)
{
    void *blocks[N_MIXED];
    ra_tag_stats_t s;

    tu_tag_push(tag_a);
    for (size_t i = 0; i < N_MIXED; i++)
        blocks[i] = ra_malloc(mixed_sizes[i]);
    tu_tag_pop(tag_a);
    for (size_t i = 0; i < N_MIXED; i++)
        ck_assert_ptr_nonnull(blocks[i]);
    for (size_t i = 0; i < N_MIXED; i++)
        ra_free_sized(blocks[i], mixed_sizes[i]);
    ra_thread_flush();
    s = tu_tag_stats(tag_a);
    ck_assert_uint_eq(s.allocated, 0);
    ck_assert_uint_eq(s.nmalloc, N_MIXED);
    ck_assert_uint_eq(s.ndalloc, N_MIXED);
}
END_TEST

/* A wrong size given to ra_free_sized (here: the blocks of aligned
 * allocations, which the size of the request does not describe) must not
 * make jemalloc file the block under another size class: once everything
 * is freed and flushed, the tag holds nothing, and blocks allocated after
 * never overlap. */
START_TEST(test_alloc_free_sized_with_a_wrong_size_is_harmless)
{
    enum { N = 64 };
    void *aligned[N], *small[4 * N];
    ra_tag_stats_t st;
    bool ok = true;

    tu_tag_push(tag_a);
    for (size_t i = 0; i < N; i++)
        aligned[i] = ra_aligned_alloc(4096, 4096);
    tu_tag_pop(tag_a);
    for (size_t i = 0; i < N; i++) {
        ck_assert_ptr_nonnull(aligned[i]);
        ra_free_sized(aligned[i], 100); /* the wrong size */
    }
    tu_tag_push(tag_a);
    for (size_t i = 0; i < 4 * N; i++)
        small[i] = ra_malloc(100);
    tu_tag_pop(tag_a);
    for (size_t i = 0; i < 4 * N; i++)
        tu_fill_pattern(small[i], 100, (unsigned)i);
    for (size_t i = 0; i < 4 * N; i++)
        ok = ok && tu_check_pattern(small[i], 100, (unsigned)i) == 100;
    ck_assert(ok);
    for (size_t i = 0; i < 4 * N; i++)
        ra_free(small[i]);
    ra_thread_flush();
    st = tu_tag_stats(tag_a);
    ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(st.nmalloc, st.ndalloc);
}
END_TEST

START_TEST(test_alloc_malloc_tag_ignores_the_stack)
{
    void *a, *none;

    tu_tag_push(tag_b);
    a = ra_malloc_tag(tag_a, 300);
    none = ra_malloc_tag(RA_TAG_NONE, 300);
    tu_tag_pop(tag_b);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(none);
    ck_assert_uint_eq(ra_tag_of(a), tag_a);
    ck_assert_uint_eq(ra_tag_of(none), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
    ra_free(a);
    ra_free(none);
}
END_TEST

START_TEST(test_alloc_malloc_tag_rejects_unknown_tags)
{
    const ra_tag_t unknown[] = {ra_tag_count() + 1, ra_tag_count() + 100,
                                100000, UINT32_MAX};

    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        errno = 0;
        ck_assert_ptr_null(ra_malloc_tag(unknown[i], 64));
        ck_assert_int_eq(errno, EINVAL);
    }
}
END_TEST

/* -- "realloc keeps the owner" -------------------------------------------- */

START_TEST(test_alloc_realloc_keeps_tag_across_size_classes)
{
    /* Up from a small bin through cached and uncached large classes to
     * multi-MiB blocks, and back down. */
    const size_t steps[] = {
        8,      24,     200,        3000,       14336,    20000,
        40000,  300000, 4 * MIB,    9 * MIB,    64 * MIB, 10 * MIB,
        5 * MIB, 70000, 30000,      16000,      1000,     40,
        8};
    const size_t nsteps = sizeof steps / sizeof steps[0];
    ra_tag_t owners[sizeof steps / sizeof steps[0]];
    size_t intact[sizeof steps / sizeof steps[0]];
    bool nulls = false;
    unsigned char *p;

    tu_tag_push(tag_a);
    p = ra_malloc(steps[0]);
    tu_tag_pop(tag_a);
    ck_assert_ptr_nonnull(p);
    tu_fill_pattern(p, steps[0], 11);

    tu_tag_push(tag_b);
    for (size_t i = 1; i < nsteps; i++) {
        size_t keep = steps[i] < steps[i - 1] ? steps[i] : steps[i - 1];
        unsigned char *q = ra_realloc(p, steps[i]);

        if (q == NULL) {
            nulls = true;
            break;
        }
        p = q;
        owners[i] = ra_tag_of(p);
        intact[i] = tu_check_pattern(p, keep, 11);
        tu_fill_pattern(p, steps[i], 11);
    }
    tu_tag_pop(tag_b);

    ck_assert_msg(!nulls, "ra_realloc failed");
    for (size_t i = 1; i < nsteps; i++) {
        size_t keep = steps[i] < steps[i - 1] ? steps[i] : steps[i - 1];

        ck_assert_msg(owners[i] == tag_a, "step %zu (%zu B): tag %u, not %u",
                      i, steps[i], owners[i], tag_a);
        ck_assert_msg(intact[i] == keep,
                      "step %zu (%zu -> %zu B): byte %zu changed", i,
                      steps[i - 1], steps[i], intact[i]);
    }
    ra_free(p);
    ra_thread_flush();
    ck_assert_uint_eq(tu_tag_stats(tag_a).allocated, 0);
    ck_assert_uint_eq(tu_tag_stats(tag_b).allocated, 0);
    ck_assert_uint_eq(tu_tag_stats(tag_b).nmalloc, 0);
}
END_TEST

START_TEST(test_alloc_realloc_keeps_untagged_blocks_untagged)
{
    unsigned char *p = ra_malloc(100);
    unsigned char *q;

    ck_assert_ptr_nonnull(p);
    tu_fill_pattern(p, 100, 5);
    tu_tag_push(tag_a);
    q = ra_realloc(p, 100000);
    tu_tag_pop(tag_a);
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(ra_tag_of(q), RA_TAG_NONE);
    ck_assert_uint_eq(tu_check_pattern(q, 100, 5), 100);
    ra_free(q);
}
END_TEST

START_TEST(test_alloc_realloc_null_uses_current_tag)
{
    void *p, *q;

    tu_tag_push(tag_a);
    tu_tag_push(tag_b);
    p = ra_realloc(NULL, 64);
    q = ra_realloc(NULL, 64 * KIB);
    tu_tag_pop(tag_b);
    tu_tag_pop(tag_a);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(ra_tag_of(p), tag_b);
    ck_assert_uint_eq(ra_tag_of(q), tag_b);
    ra_free(p);
    ra_free(q);
}
END_TEST

START_TEST(test_alloc_realloc_to_zero_frees)
{
    ra_tag_stats_t s;
    void *p;

    tu_tag_push(tag_a);
    p = ra_malloc(5000);
    tu_tag_pop(tag_a);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_null(ra_realloc(p, 0));
    ra_thread_flush();
    s = tu_tag_stats(tag_a);
    ck_assert_uint_eq(s.allocated, 0);
    ck_assert_uint_eq(s.nmalloc - s.ndalloc, 0);
}
END_TEST

/* -- "accounting" --------------------------------------------------------- */

START_TEST(test_alloc_untagged_free_under_pushed_tag_leaves_tag_alone)
{
    void *untagged[N_MIXED];
    void *live[4];
    ra_tag_stats_t before, after;

    /* Give the tag something to report, so "unchanged" means something. */
    tu_tag_push(tag_a);
    for (size_t i = 0; i < 4; i++)
        live[i] = ra_malloc(1000 * (i + 1));
    tu_tag_pop(tag_a);
    for (size_t i = 0; i < N_MIXED; i++) {
        untagged[i] = ra_malloc(mixed_sizes[i]);
        ck_assert_ptr_nonnull(untagged[i]);
        ck_assert_uint_eq(ra_tag_of(untagged[i]), RA_TAG_NONE);
    }
    ra_thread_flush();
    before = tu_tag_stats(tag_a);
    ck_assert_uint_gt(before.allocated, 0);

    tu_tag_push(tag_a);
    for (size_t i = 0; i < N_MIXED; i++)
        ra_free(untagged[i]);
    tu_tag_pop(tag_a);
    ra_thread_flush();
    after = tu_tag_stats(tag_a);

    ck_assert_uint_eq(after.allocated, before.allocated);
    ck_assert_uint_eq(after.nmalloc, before.nmalloc);
    ck_assert_uint_eq(after.ndalloc, before.ndalloc);
    for (size_t i = 0; i < 4; i++)
        ra_free(live[i]);
}
END_TEST

START_TEST(test_alloc_free_under_other_tag_is_charged_to_owner)
{
    void *blocks[N_MIXED];
    size_t total = 0;
    ra_tag_stats_t a0, a1, b0, b1;

    tu_tag_push(tag_a);
    for (size_t i = 0; i < N_MIXED; i++)
        blocks[i] = ra_malloc(mixed_sizes[i]);
    tu_tag_pop(tag_a);
    for (size_t i = 0; i < N_MIXED; i++) {
        ck_assert_ptr_nonnull(blocks[i]);
        total += ra_malloc_usable_size(blocks[i]);
    }
    ra_thread_flush();
    a0 = tu_tag_stats(tag_a);
    b0 = tu_tag_stats(tag_b);
    ck_assert_uint_eq(a0.allocated, total);

    tu_tag_push(tag_b);
    for (size_t i = 0; i < N_MIXED; i++)
        ra_free(blocks[i]);
    tu_tag_pop(tag_b);
    ra_thread_flush();
    a1 = tu_tag_stats(tag_a);
    b1 = tu_tag_stats(tag_b);

    ck_assert_uint_eq(a1.allocated, 0);
    ck_assert_uint_eq(a1.ndalloc, a0.ndalloc + N_MIXED);
    ck_assert_uint_eq(a1.nmalloc, a0.nmalloc);
    ck_assert_uint_eq(b1.allocated, b0.allocated);
    ck_assert_uint_eq(b1.nmalloc, b0.nmalloc);
    ck_assert_uint_eq(b1.ndalloc, b0.ndalloc);
}
END_TEST

/* Allocates with every entry point in turn, frees about a third of the blocks
 * as it goes (some through realloc to zero), resizes some, and checks that
 * the tag's allocated bytes are exactly the usable sizes still live. */
START_TEST(test_alloc_allocated_is_exact_for_mixed_sizes)
{
    enum { ROUNDS = 12, N = ROUNDS * N_MIXED };
    void **blocks = calloc(N, sizeof *blocks);
    size_t n = 0, failed = 0, live_bytes = 0, live_count = 0;
    ra_tag_stats_t s;

    ck_assert_ptr_nonnull(blocks);
    tu_tag_push(tag_a);
    for (size_t r = 0; r < ROUNDS; r++) {
        for (size_t i = 0; i < N_MIXED; i++) {
            size_t size = mixed_sizes[(i + r) % N_MIXED] + r;
            void *p = NULL;

            switch ((i + r) % 6) {
            case 0: p = ra_malloc(size); break;
            case 1: p = ra_calloc(1, size); break;
            case 2: p = ra_aligned_alloc(64, size); break;
            case 3:
                if (ra_posix_memalign(&p, 4096, size) != 0)
                    p = NULL;
                break;
            case 4: p = ra_malloc_tag(tag_a, size); break;
            case 5: p = ra_realloc(NULL, size); break;
            }
            if (p == NULL) {
                failed++;
                continue;
            }
            blocks[n++] = p;
            if (n % 3 == 0) {
                ra_free(blocks[n - 2]);
                blocks[n - 2] = NULL;
            } else if (n % 7 == 0) {
                void *q = ra_realloc(blocks[n - 1], size / 2 + 1);
                if (q == NULL)
                    failed++;
                else
                    blocks[n - 1] = q;
            } else if (n % 11 == 0) {
                ra_realloc(blocks[n - 1], 0);
                blocks[n - 1] = NULL;
            }
        }
    }
    tu_tag_pop(tag_a);
    ck_assert_uint_eq(failed, 0);

    for (size_t i = 0; i < n; i++) {
        if (blocks[i] == NULL)
            continue;
        ck_assert_uint_eq(ra_tag_of(blocks[i]), tag_a);
        live_bytes += ra_malloc_usable_size(blocks[i]);
        live_count++;
    }
    ra_thread_flush();
    s = tu_tag_stats(tag_a);
    ck_assert_uint_eq(s.allocated, live_bytes);
    ck_assert_uint_eq(s.nmalloc - s.ndalloc, live_count);
    ck_assert_uint_le(s.allocated, s.active);

    for (size_t i = 0; i < n; i++)
        ra_free(blocks[i]);
    ra_thread_flush();
    s = tu_tag_stats(tag_a);
    ck_assert_uint_eq(s.allocated, 0);
    ck_assert_uint_eq(s.nmalloc, s.ndalloc);
    free(blocks);
}
END_TEST

START_TEST(test_alloc_counts_equal_calls_made)
{
    enum { N = 300 };
    void *blocks[N];
    size_t requested[N];
    size_t made = 0, freed = 0;
    ra_tag_stats_t s;

    tu_tag_push(tag_b);
    for (size_t i = 0; i < N; i++) {
        size_t size = mixed_sizes[i % N_MIXED] % (256 * KIB) + 1;
        void *p;

        requested[i] = size;
        switch (i % 5) {
        case 0: p = ra_malloc(size); break;
        case 1: p = ra_calloc(3, size); requested[i] = 3 * size; break;
        case 2: p = ra_aligned_alloc(128, size); requested[i] = 0; break;
        case 3: if (ra_posix_memalign(&p, 64, size) != 0) p = NULL;
                requested[i] = 0; break;
        default: p = ra_malloc_tag(tag_b, size); break;
        }
        blocks[i] = p;
        made += p != NULL;
    }
    /* free_sized takes the size requested, for blocks without alignment. */
    for (size_t i = 0; i < N; i += 3) {
        if (blocks[i] == NULL)
            continue;
        if (requested[i] != 0 && i % 2 == 1)
            ra_free_sized(blocks[i], requested[i]);
        else
            ra_free(blocks[i]);
        blocks[i] = NULL;
        freed++;
    }
    tu_tag_pop(tag_b);
    ck_assert_uint_eq(made, N);

    ra_thread_flush();
    s = tu_tag_stats(tag_b);
    ck_assert_uint_eq(s.nmalloc, made);
    ck_assert_uint_eq(s.ndalloc, freed);
    /* Nothing was allocated under tag_a, whatever Check did meanwhile. */
    ck_assert_uint_eq(tu_tag_stats(tag_a).nmalloc, 0);
    for (size_t i = 0; i < N; i++)
        ra_free(blocks[i]);
}
END_TEST

/* -- "thread caches keep tags apart" -------------------------------------- */

/* Allocates PER_SIZE blocks of every cached size under tag (RA_TAG_NONE:
 * untagged) into blocks. Returns how many allocations failed. */
static size_t alloc_cached_sizes(ra_tag_t tag, void **blocks)
{
    size_t failed = 0;

    if (tag != RA_TAG_NONE)
        tu_tag_push(tag);
    for (size_t i = 0; i < N_CACHED; i++)
        for (size_t k = 0; k < PER_SIZE; k++) {
            void *p = ra_malloc(cached_sizes[i]);
            failed += p == NULL;
            blocks[i * PER_SIZE + k] = p;
        }
    if (tag != RA_TAG_NONE)
        tu_tag_pop(tag);
    return failed;
}

/* Frees blocks with free_under pushed (RA_TAG_NONE: nothing pushed). */
static void free_cached_sizes(void **blocks, ra_tag_t free_under)
{
    if (free_under != RA_TAG_NONE)
        tu_tag_push(free_under);
    for (size_t i = 0; i < N_CACHED * PER_SIZE; i++)
        ra_free(blocks[i]);
    if (free_under != RA_TAG_NONE)
        tu_tag_pop(free_under);
}

/* Returns how many of the blocks are not owned by tag. */
static size_t count_foreign(void **blocks, ra_tag_t tag)
{
    size_t foreign = 0;

    for (size_t i = 0; i < N_CACHED * PER_SIZE; i++)
        foreign += ra_tag_of(blocks[i]) != tag;
    return foreign;
}

/* Fills the caches with blocks of one owner, freed under free_under, then
 * allocates the same sizes as next: none may come from the first owner. */
static void check_caches_apart(ra_tag_t first, ra_tag_t free_under,
                               ra_tag_t next)
{
    static void *blocks[N_CACHED * PER_SIZE];
    size_t foreign;

    for (int round = 0; round < 3; round++) {
        ck_assert_uint_eq(alloc_cached_sizes(first, blocks), 0);
        ck_assert_uint_eq(count_foreign(blocks, first), 0);
        free_cached_sizes(blocks, free_under);
        ck_assert_uint_eq(alloc_cached_sizes(next, blocks), 0);
        foreign = count_foreign(blocks, next);
        ck_assert_msg(foreign == 0,
                      "%zu of %zu blocks for tag %u came from elsewhere",
                      foreign, N_CACHED * PER_SIZE, next);
        free_cached_sizes(blocks, RA_TAG_NONE);
    }
}

START_TEST(test_alloc_untagged_cache_never_returns_tagged_blocks)
{
    /* Freed with nothing pushed: the path plain free() takes. */
    check_caches_apart(tag_a, RA_TAG_NONE, RA_TAG_NONE);
    /* Freed under the owner's tag and under another one. */
    check_caches_apart(tag_a, tag_a, RA_TAG_NONE);
    check_caches_apart(tag_a, tag_b, RA_TAG_NONE);
}
END_TEST

START_TEST(test_alloc_tag_cache_never_returns_untagged_blocks)
{
    check_caches_apart(RA_TAG_NONE, RA_TAG_NONE, tag_a);
    check_caches_apart(RA_TAG_NONE, tag_a, tag_a);
}
END_TEST

START_TEST(test_alloc_tag_cache_never_returns_other_tags_blocks)
{
    check_caches_apart(tag_a, tag_b, tag_b);
    check_caches_apart(tag_a, RA_TAG_NONE, tag_b);
    check_caches_apart(tag_b, tag_a, tag_a);
}
END_TEST

/* -- "front caches" ---------------------------------------------------------
 * The tagged fast path keeps freed small blocks per (thread, tag) and learns
 * a freed block's size class from a table indexed by its page. A wrong
 * entry would hand out a block smaller than asked for: this churn reuses
 * pages across small, large, aligned, zeroed and reallocated blocks of two
 * tags and checks every block's usable size, tag and contents. */
enum { CHURN_LIVE = 2048, CHURN_OPS = 200000 };

struct churn_block {
    void *p;
    size_t size;
    ra_tag_t tag;
};

static uint32_t churn_next(uint32_t *x)
{
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

static size_t churn_size(uint32_t r)
{
    switch (r % 8) {
    case 0: return 1 + r % 16384;          /* up to and past small classes */
    case 1: return 16385 + r % (1 << 18);  /* large */
    default: return 1 + r % 512;           /* the common small sizes */
    }
}

static void *churn_alloc(ra_tag_t tag, size_t size, uint32_t r)
{
    void *p;

    tu_tag_push(tag);
    switch (r % 16) {
    case 0: p = ra_calloc(1, size); break;
    case 1: p = ra_aligned_alloc((size_t)64 << (r % 6), size); break;
    default: p = ra_malloc(size); break;
    }
    tu_tag_pop(tag);
    return p;
}

START_TEST(test_alloc_front_cache_survives_page_reuse)
{
    static struct churn_block live[CHURN_LIVE];
    uint32_t x = 2024;
    size_t bad_size = 0, bad_tag = 0, bad_data = 0;
    ra_tag_stats_t sa, sb;

    for (unsigned op = 0; op < CHURN_OPS; op++) {
        struct churn_block *b = &live[churn_next(&x) % CHURN_LIVE];
        uint32_t r = churn_next(&x);

        if (b->p != NULL) {
            if (tu_check_pattern(b->p, b->size, (unsigned)b->size) != b->size)
                bad_data++;
            if (r % 4 == 0) {
                /* realloc keeps the tag; the pattern of the kept part too */
                size_t size = churn_size(churn_next(&x));
                void *q = ra_realloc(b->p, size);
                if (q == NULL)
                    ck_abort_msg("realloc(%zu) failed", size);
                b->p = q;
                b->size = size;
                tu_fill_pattern(q, size, (unsigned)size);
                continue;
            }
            ra_free(b->p);
            b->p = NULL;
            continue;
        }
        b->tag = r % 2 == 0 ? tag_a : tag_b;
        b->size = churn_size(churn_next(&x));
        b->p = churn_alloc(b->tag, b->size, r);
        if (b->p == NULL)
            ck_abort_msg("allocation of %zu failed", b->size);
        if (ra_malloc_usable_size(b->p) < b->size)
            bad_size++;
        if (ra_tag_of(b->p) != b->tag)
            bad_tag++;
        tu_fill_pattern(b->p, b->size, (unsigned)b->size);
    }
    ck_assert_uint_eq(bad_size, 0);
    ck_assert_uint_eq(bad_tag, 0);
    ck_assert_uint_eq(bad_data, 0);

    /* And the accounting is still exact. */
    {
        size_t want_a = 0, want_b = 0;
        for (unsigned i = 0; i < CHURN_LIVE; i++)
            if (live[i].p != NULL) {
                size_t u = ra_malloc_usable_size(live[i].p);
                if (live[i].tag == tag_a)
                    want_a += u;
                else
                    want_b += u;
            }
        ra_thread_flush();
        sa = tu_tag_stats(tag_a);
        sb = tu_tag_stats(tag_b);
        ck_assert_uint_eq(sa.allocated, want_a);
        ck_assert_uint_eq(sb.allocated, want_b);
    }
    for (unsigned i = 0; i < CHURN_LIVE; i++)
        ra_free(live[i].p);
    ra_thread_flush();
    ck_assert_uint_eq(tu_tag_stats(tag_a).allocated, 0);
    ck_assert_uint_eq(tu_tag_stats(tag_b).allocated, 0);
}
END_TEST

/* Frees blocks of size into the thread's front cache for the current tag,
 * so that the bin of the class holds blocks when the test starts. */
static void warm_bin(size_t size)
{
    void *p[4];

    for (unsigned i = 0; i < 4; i++)
        p[i] = ra_malloc(size);
    for (unsigned i = 0; i < 4; i++)
        ra_free(p[i]);
}

/* The block that the next allocation of size gets, freed at once. */
static void *next_block(size_t size)
{
    void *p = ra_malloc(size);

    ra_free(p);
    return p;
}

/* A small tagged block that is no malloc's (an aligned allocation's, a
 * calloc's, a realloc's) goes back into the front cache when freed, as a
 * malloc's does: the next allocation of its class is that block. Marked
 * uncached, the block went to jemalloc, and with it every block of its
 * page that the front cache had handed out. */
START_TEST(test_alloc_small_blocks_of_every_path_return_to_front_cache)
{
    void *p;

    tu_tag_push(tag_a);
    warm_bin(64);
    p = ra_aligned_alloc(64, 64);
    ra_free(p);
    ck_assert_ptr_eq(next_block(64), p);
    tu_tag_pop(tag_a);
}
END_TEST

/* A small calloc is the front cache's block, zeroed whole, and counted as
 * a malloc's. */
START_TEST(test_alloc_small_calloc_comes_from_front_cache)
{
    uint64_t before;
    void *p, *q;

    tu_tag_push(tag_a);
    warm_bin(48);
    p = ra_malloc(48);
    tu_fill_pattern(p, 48, 3);
    ra_free(p);
    before = tu_tag_stats(tag_a).allocated;
    q = ra_calloc(1, 40);
    ck_assert_ptr_eq(q, p);
    ck_assert_uint_eq(tu_tag_stats(tag_a).allocated, before + 48);
    for (unsigned i = 0; i < 48; i++)
        ck_assert_uint_eq(((unsigned char *)q)[i], 0);
    ra_free(q);
    ck_assert_uint_eq(tu_tag_stats(tag_a).allocated, before);
    tu_tag_pop(tag_a);
}
END_TEST

/* A small block that stays small moves through the front cache to another
 * class, keeps its place in its own class, and is counted exactly. */
START_TEST(test_alloc_small_realloc_goes_through_front_cache)
{
    uint64_t before;
    void *p, *q, *next;

    tu_tag_push(tag_a);
    warm_bin(200);
    next = next_block(200);
    before = tu_tag_stats(tag_a).allocated;
    p = ra_malloc(100);
    tu_fill_pattern(p, 100, 7);
    q = ra_realloc(p, 200);
    ck_assert_ptr_eq(q, next);
    ck_assert_uint_eq(tu_check_pattern(q, 100, 7), 100);
    ck_assert_ptr_eq(ra_realloc(q, 199), q);
    ck_assert_uint_eq(tu_tag_stats(tag_a).allocated,
                      before + ra_malloc_usable_size(q));
    ra_free(q);
    ck_assert_ptr_eq(next_block(112), p);
    ck_assert_uint_eq(tu_tag_stats(tag_a).allocated, before);
    tu_tag_pop(tag_a);
}
END_TEST

/* A test case of the suite: its tests start with tag_a and tag_b created. */
static TCase *add_tags_tcase(Suite *s, const char *name)
{
    TCase *tc = tcase_create(name);

    tcase_add_checked_fixture(tc, setup_tags, NULL);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);
    return tc;
}

static Suite *alloc_suite(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc;

    tc = add_tags_tcase(s, "allocation functions");
    tcase_add_test(tc, test_alloc_malloc_uses_current_tag);
    tcase_add_test(tc, test_alloc_malloc_zero_gives_distinct_tagged_blocks);
    tcase_add_test(tc, test_alloc_every_size_class_is_tagged_and_usable);
    tcase_add_test(tc, test_alloc_calloc_zeroes_reused_blocks);
    tcase_add_test(tc, test_alloc_calloc_overflow_is_enomem);
    tcase_add_test(tc, test_alloc_huge_sizes_fail_with_enomem);
    tcase_add_test(tc, test_alloc_aligned_alloc_honours_alignment);
    tcase_add_test(tc, test_alloc_posix_memalign_returns_errors_and_keeps_out);
    tcase_add_test(tc, test_alloc_free_sized_returns_blocks_to_their_tag);
    tcase_add_test(tc, test_alloc_free_sized_with_a_wrong_size_is_harmless);
    tcase_add_test(tc, test_alloc_malloc_tag_ignores_the_stack);
    tcase_add_test(tc, test_alloc_malloc_tag_rejects_unknown_tags);

    tc = add_tags_tcase(s, "realloc keeps the owner");
    tcase_add_test(tc, test_alloc_realloc_keeps_tag_across_size_classes);
    tcase_add_test(tc, test_alloc_realloc_keeps_untagged_blocks_untagged);
    tcase_add_test(tc, test_alloc_realloc_null_uses_current_tag);
    tcase_add_test(tc, test_alloc_realloc_to_zero_frees);

    tc = add_tags_tcase(s, "accounting");
    tcase_add_test(tc,
                   test_alloc_untagged_free_under_pushed_tag_leaves_tag_alone);
    tcase_add_test(tc, test_alloc_free_under_other_tag_is_charged_to_owner);
    tcase_add_test(tc, test_alloc_allocated_is_exact_for_mixed_sizes);
    tcase_add_test(tc, test_alloc_counts_equal_calls_made);

    tc = add_tags_tcase(s, "front caches");
    tcase_add_test(tc, test_alloc_front_cache_survives_page_reuse);
    tcase_add_test(tc,
                   test_alloc_small_blocks_of_every_path_return_to_front_cache);
    tcase_add_test(tc, test_alloc_small_calloc_comes_from_front_cache);
    tcase_add_test(tc, test_alloc_small_realloc_goes_through_front_cache);

    tc = add_tags_tcase(s, "thread caches keep tags apart");
    tcase_add_test(tc, test_alloc_untagged_cache_never_returns_tagged_blocks);
    tcase_add_test(tc, test_alloc_tag_cache_never_returns_untagged_blocks);
    tcase_add_test(tc, test_alloc_tag_cache_never_returns_other_tags_blocks);

    return s;
}

int main(void)
{
    return tu_run_suite(alloc_suite());
}

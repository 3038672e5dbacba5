/* Suite "override": the malloc family exported by the library keeps glibc's
 * documented semantics and attributes blocks to the current tag
 * (regionalloc(3)). Every call goes through a volatile function pointer
 * so the compiler cannot fold or drop it. */
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "regionalloc.h"
#include "testutil.h"

/* C23 names that glibc 2.36 does not declare yet. */
void free_sized(void *ptr, size_t size);
void free_aligned_sized(void *ptr, size_t align, size_t size);

#define MIB ((size_t)1 << 20)

static void *(*volatile f_malloc)(size_t) = malloc;
static void *(*volatile f_calloc)(size_t, size_t) = calloc;
static void *(*volatile f_realloc)(void *, size_t) = realloc;
static void *(*volatile f_reallocarray)(void *, size_t, size_t) = reallocarray;
static void (*volatile f_free)(void *) = free;
static void (*volatile f_free_sized)(void *, size_t) = free_sized;
static void (*volatile f_free_aligned_sized)(void *, size_t, size_t) =
    free_aligned_sized;
static void *(*volatile f_aligned_alloc)(size_t, size_t) = aligned_alloc;
static int (*volatile f_posix_memalign)(void **, size_t, size_t) =
    posix_memalign;
static void *(*volatile f_memalign)(size_t, size_t) = memalign;
static void *(*volatile f_valloc)(size_t) = valloc;
static void *(*volatile f_pvalloc)(size_t) = pvalloc;
static size_t (*volatile f_malloc_usable_size)(void *) = malloc_usable_size;
static char *(*volatile f_strdup)(const char *) = strdup;

static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

/* The n bytes at p still hold what tu_fill_pattern(p, n, seed) wrote. */
static void assert_filled(const void *p, size_t n, unsigned seed)
{
    size_t i = tu_check_pattern(p, n, seed);

    ck_assert_msg(i == n, "byte %zu of %zu changed", i, n);
}

/* Index of the first nonzero byte of p[0..n), or n. */
static size_t first_nonzero(const unsigned char *p, size_t n)
{
    size_t i = 0;

    while (i < n && p[i] == 0)
        i++;
    return i;
}

/* a and b are two distinct blocks, not NULL; frees both. */
static void assert_distinct_then_free(void *a, void *b)
{
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_ne(a, b);
    f_free(a);
    f_free(b);
}

/* -- malloc, free, calloc ------------------------------------------------- */

START_TEST(test_override_malloc_zero_is_unique_and_freeable)
{
    void *a = f_malloc(0);
    void *b = f_malloc(0);

    assert_distinct_then_free(a, b);
}
END_TEST

START_TEST(test_override_free_null_is_noop)
{
    int saved;

    errno = EDOM;
    f_free(NULL);
    saved = errno;
    ck_assert_int_eq(saved, EDOM);
    f_free_sized(NULL, 0);
    f_free_aligned_sized(NULL, 64, 0);
}
END_TEST

START_TEST(test_override_malloc_huge_is_enomem)
{
    static const size_t sizes[] = {SIZE_MAX, SIZE_MAX / 2 + 1, PTRDIFF_MAX,
                                   (size_t)1 << 60};
    ra_tag_t t = tu_tag_create("huge");

    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = 0;
        ck_assert_ptr_null(f_malloc(sizes[i]));
        ck_assert_int_eq(errno, ENOMEM);
        ck_assert_int_eq(ra_tag_push(t), 0);
        errno = 0;
        ck_assert_ptr_null(f_malloc(sizes[i]));
        ck_assert_int_eq(errno, ENOMEM);
        ck_assert_int_eq(ra_tag_pop(t), 0);
    }
}
END_TEST

/* calloc must zero even memory it reuses: dirty a block of each size, free
 * it, and calloc the same size again. */
static void check_calloc_zeroes(void)
{
    static const size_t sizes[] = {1, 16, 100, 4096, 14336, 20000, MIB,
                                   3 * MIB};

    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (unsigned round = 0; round < 4; round++) {
            unsigned char *p = f_malloc(sizes[i]);
            ck_assert_ptr_nonnull(p);
            memset(p, 0xff, sizes[i]);
            f_free(p);
            p = f_calloc(1, sizes[i]);
            ck_assert_ptr_nonnull(p);
            ck_assert_msg(first_nonzero(p, sizes[i]) == sizes[i],
                          "calloc(%zu): byte %zu is not zero", sizes[i],
                          first_nonzero(p, sizes[i]));
            f_free(p);
        }
    }
}

START_TEST(test_override_calloc_zeroes_untagged)
{
    check_calloc_zeroes();
}
END_TEST

START_TEST(test_override_calloc_zeroes_tagged)
{
    ra_tag_t t = tu_tag_create("calloc");

    ck_assert_int_eq(ra_tag_push(t), 0);
    check_calloc_zeroes();
    ck_assert_int_eq(ra_tag_pop(t), 0);
}
END_TEST

START_TEST(test_override_calloc_overflow_is_enomem)
{
    ra_tag_t t = tu_tag_create("calloc-overflow");

    errno = 0;
    ck_assert_ptr_null(f_calloc(SIZE_MAX / 2, 3));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(f_calloc(3, SIZE_MAX / 2));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(f_calloc(SIZE_MAX, SIZE_MAX));
    ck_assert_int_eq(errno, ENOMEM);
    ck_assert_int_eq(ra_tag_push(t), 0);
    errno = 0;
    ck_assert_ptr_null(f_calloc((size_t)1 << 33, (size_t)1 << 31));
    ck_assert_int_eq(errno, ENOMEM);
    ck_assert_int_eq(ra_tag_pop(t), 0);
}
END_TEST

START_TEST(test_override_calloc_zero_is_freeable)
{
    void *a = f_calloc(0, 10);
    void *b = f_calloc(10, 0);

    assert_distinct_then_free(a, b);
}
END_TEST

START_TEST(test_override_malloc_usable_size)
{
    static const size_t sizes[] = {1, 8, 13, 100, 4097, 14336, 14337, 100000,
                                   MIB + 1};

    ck_assert_uint_eq(f_malloc_usable_size(NULL), 0);
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = f_malloc(sizes[i]);
        size_t usable;

        ck_assert_ptr_nonnull(p);
        usable = f_malloc_usable_size(p);
        ck_assert_uint_ge(usable, sizes[i]);
        ck_assert_uint_lt(usable, sizes[i] + sizes[i] / 4 + 16);
        memset(p, 0x11, usable); /* all of it is usable */
        f_free(p);
    }
}
END_TEST

/* -- realloc, reallocarray ------------------------------------------------ */

START_TEST(test_override_realloc_null_allocates_under_current_tag)
{
    ra_tag_t t = tu_tag_create("realloc-null");
    void *p, *q;

    ck_assert_int_eq(ra_tag_push(t), 0);
    p = f_realloc(NULL, 100);
    q = f_reallocarray(NULL, 10, 100);
    ck_assert_int_eq(ra_tag_pop(t), 0);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(ra_tag_of(p), t);
    ck_assert_uint_eq(ra_tag_of(q), t);
    ck_assert_uint_ge(f_malloc_usable_size(q), 1000);
    f_free(p);
    f_free(q);
    p = f_realloc(NULL, 100);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(ra_tag_of(p), RA_TAG_NONE);
    f_free(p);
}
END_TEST

/* The block a hook saw freed while on. */
static struct {
    bool on;
    void *seen;
} untagged_frees;

static void see_free(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)ctx; (void)size;
    if (untagged_frees.on && tag == RA_TAG_NONE && untagged_frees.seen == NULL)
        untagged_frees.seen = ptr;
}

START_TEST(test_override_realloc_zero_frees)
{
    ra_tag_t t = tu_tag_create("realloc-zero");
    ra_hooks_t hooks = {NULL, see_free, NULL};
    ra_tag_stats_t before, after;
    size_t usable;
    void *p, *q;
    int id;

    p = ra_malloc_tag(t, 1000);
    ck_assert_ptr_nonnull(p);
    usable = f_malloc_usable_size(p);
    ra_thread_flush();
    before = tu_tag_stats(t);
    ck_assert_uint_ge(before.allocated, 1000);
    ck_assert_ptr_null(f_realloc(p, 0));
    ra_thread_flush();
    after = tu_tag_stats(t);
    ck_assert_uint_eq(after.ndalloc, before.ndalloc + 1);
    ck_assert_uint_eq(after.allocated, before.allocated - usable);
    /* Untagged too: the block is freed (a hook sees its free) and NULL
     * comes back. */
    p = f_malloc(50);
    ck_assert_ptr_nonnull(p);
    id = ra_hooks_install(&hooks);
    ck_assert_int_ge(id, 0);
    untagged_frees.on = true;
    q = f_realloc(p, 0);
    untagged_frees.on = false;
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    ck_assert_ptr_null(q);
    ck_assert_ptr_eq(untagged_frees.seen, p);
}
END_TEST

START_TEST(test_override_realloc_keeps_contents_and_tag)
{
    enum { MAX_STEPS = 64 };
    ra_tag_t a = tu_tag_create("owner");
    ra_tag_t b = tu_tag_create("bystander");
    struct {
        size_t size;
        ra_tag_t tag;
        bool kept;
    } steps[MAX_STEPS];
    unsigned nsteps = 0;
    size_t size = 8, prev, keep;
    unsigned char *p;
    int rc;

    ck_assert_int_eq(ra_tag_push(a), 0);
    p = f_malloc(size);
    ck_assert_int_eq(ra_tag_pop(a), 0);
    ck_assert_ptr_nonnull(p);
    tu_fill_pattern(p, size, 1);
    /* No ck_assert while b is pushed: Check would allocate under b. */
    rc = ra_tag_push(b);
    /* 8 B up to 8 MiB and back down to 16 B, through every size kind. */
    for (int dir = 0; dir < 2 && p != NULL; dir++) {
        while (nsteps < MAX_STEPS) {
            unsigned char *q;

            prev = size;
            if ((dir == 0 && size == 8 * MIB) || (dir == 1 && size == 16))
                break;
            size = dir == 0 ? size * 2 : size / 2;
            q = f_realloc(p, size);
            steps[nsteps].size = size;
            steps[nsteps].tag = ra_tag_of(q);
            keep = prev < size ? prev : size;
            steps[nsteps].kept =
                q != NULL && tu_check_pattern(q, keep, 1) == keep;
            nsteps++;
            if (q == NULL)
                break;
            p = q;
            tu_fill_pattern(p, size, 1);
        }
    }
    rc |= ra_tag_current() != b;
    rc |= ra_tag_pop(b);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(nsteps, 20 + 19);
    for (unsigned i = 0; i < nsteps; i++) {
        ck_assert_msg(steps[i].tag == a, "realloc to %zu: tag %u",
                      steps[i].size, steps[i].tag);
        ck_assert_msg(steps[i].kept, "realloc to %zu lost the contents",
                      steps[i].size);
    }
    f_free(p);
    ra_thread_flush();
    ck_assert_uint_eq(tu_tag_stats(b).nmalloc, 0);
    ck_assert_uint_eq(tu_tag_stats(b).allocated, 0);
    ck_assert_uint_eq(tu_tag_stats(a).allocated, 0);
}
END_TEST

START_TEST(test_override_realloc_of_untagged_stays_untagged)
{
    ra_tag_t t = tu_tag_create("pushed");
    void *p = f_malloc(100);

    ck_assert_ptr_nonnull(p);
    tu_fill_pattern(p, 100, 3);
    ck_assert_int_eq(ra_tag_push(t), 0);
    for (size_t size = 200; size <= 4 * MIB; size *= 4) {
        p = f_realloc(p, size);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq(ra_tag_of(p), RA_TAG_NONE);
    }
    assert_filled(p, 100, 3);
    ck_assert_int_eq(ra_tag_pop(t), 0);
    f_free(p);
}
END_TEST

START_TEST(test_override_realloc_huge_is_enomem_and_keeps_block)
{
    ra_tag_t t = tu_tag_create("realloc-huge");
    void *p = ra_malloc_tag(t, 100);
    void *q = f_malloc(100);

    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    tu_fill_pattern(p, 100, 5);
    tu_fill_pattern(q, 100, 6);
    errno = 0;
    ck_assert_ptr_null(f_realloc(p, SIZE_MAX));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(f_realloc(q, SIZE_MAX / 2 + 1));
    ck_assert_int_eq(errno, ENOMEM);
    assert_filled(p, 100, 5);
    assert_filled(q, 100, 6);
    ck_assert_uint_eq(ra_tag_of(p), t);
    f_free(p);
    f_free(q);
}
END_TEST

START_TEST(test_override_reallocarray_overflow_keeps_block)
{
    ra_tag_t t = tu_tag_create("reallocarray");
    unsigned char *p;

    ck_assert_int_eq(ra_tag_push(t), 0);
    p = f_malloc(100);
    ck_assert_ptr_nonnull(p);
    tu_fill_pattern(p, 100, 9);
    errno = 0;
    ck_assert_ptr_null(f_reallocarray(p, SIZE_MAX / 2, 3));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(f_reallocarray(p, 3, SIZE_MAX / 2));
    ck_assert_int_eq(errno, ENOMEM);
    assert_filled(p, 100, 9);
    p = f_reallocarray(p, 50, 20);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_ge(f_malloc_usable_size(p), 1000);
    assert_filled(p, 100, 9);
    ck_assert_uint_eq(ra_tag_of(p), t);
    ck_assert_int_eq(ra_tag_pop(t), 0);
    f_free(p);
}
END_TEST

/* -- alignment ------------------------------------------------------------ */

START_TEST(test_override_posix_memalign_bad_alignment_is_einval)
{
    static const size_t bad[] = {0, 1, 2, 3, 4, 12, 24, 48, 4097,
                                 SIZE_MAX};
    void *sentinel = &sentinel;

    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *p = sentinel;
        int rc, saved;

        errno = EDOM;
        rc = f_posix_memalign(&p, bad[i], 16);
        saved = errno;
        ck_assert_msg(rc == EINVAL, "alignment %zu: rc %d", bad[i], rc);
        ck_assert_ptr_eq(p, sentinel);
        ck_assert_int_eq(saved, EDOM);
    }
}
END_TEST

START_TEST(test_override_posix_memalign_huge_is_enomem)
{
    ra_tag_t t = tu_tag_create("memalign-huge");
    void *sentinel = &sentinel;
    void *p = sentinel;

    ck_assert_int_eq(f_posix_memalign(&p, 64, SIZE_MAX), ENOMEM);
    ck_assert_ptr_eq(p, sentinel);
    ck_assert_int_eq(f_posix_memalign(&p, 4096, SIZE_MAX / 2 + 1), ENOMEM);
    ck_assert_ptr_eq(p, sentinel);
    ck_assert_int_eq(ra_tag_push(t), 0);
    ck_assert_int_eq(f_posix_memalign(&p, 64, SIZE_MAX - 4096), ENOMEM);
    ck_assert_ptr_eq(p, sentinel);
    ck_assert_int_eq(ra_tag_pop(t), 0);
}
END_TEST

START_TEST(test_override_posix_memalign_aligns)
{
    for (size_t align = sizeof(void *); align <= 2 * MIB; align *= 2) {
        void *p = NULL;
        ck_assert_int_eq(f_posix_memalign(&p, align, 100), 0);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % align, 0);
        ck_assert_uint_ge(f_malloc_usable_size(p), 100);
        f_free(p);
    }
}
END_TEST

START_TEST(test_override_aligned_alloc_bad_alignment_is_einval)
{
    static const size_t bad[] = {3, 6, 24, 48, 100, 4095, SIZE_MAX};

    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        ck_assert_ptr_null(f_aligned_alloc(bad[i], 8 * bad[i]));
        ck_assert_int_eq(errno, EINVAL);
    }
    errno = 0;
    ck_assert_ptr_null(f_aligned_alloc(3, 8));
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_override_aligned_alloc_aligns)
{
    for (size_t align = 1; align <= 2 * MIB; align *= 2) {
        static const size_t mult[] = {1, 2, 3};
        for (unsigned m = 0; m < 3; m++) {
            size_t size = align * mult[m];
            void *p = f_aligned_alloc(align, size);
            ck_assert_msg(p != NULL, "aligned_alloc(%zu, %zu)", align, size);
            ck_assert_uint_eq((uintptr_t)p % align, 0);
            ck_assert_uint_ge(f_malloc_usable_size(p), size);
            memset(p, 0x22, size);
            f_free(p);
        }
    }
}
END_TEST

/* memalign(asked, 10) returns blocks aligned to want, the next power of two.
 * Many blocks at once, so a smaller alignment would show in one of them. */
static void check_memalign_rounds_up(size_t asked, size_t want)
{
    enum { N = 100 };
    void *p[N];

    for (unsigned i = 0; i < N; i++) {
        p[i] = f_memalign(asked, 10);
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_uint_eq((uintptr_t)p[i] % want, 0);
    }
    for (unsigned i = 0; i < N; i++)
        f_free(p[i]);
}

START_TEST(test_override_memalign_rounds_alignment_up)
{
    /* glibc rounds a non-power-of-two alignment up: 48 -> 64. */
    check_memalign_rounds_up(48, 64);
    check_memalign_rounds_up(3000, 4096);
}
END_TEST

START_TEST(test_override_memalign_small_alignment_works)
{
    void *a = f_memalign(0, 10);
    void *b = f_memalign(1, 10);
    void *c = f_memalign(8, 10);

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq((uintptr_t)c % 8, 0);
    f_free(a);
    f_free(b);
    f_free(c);
}
END_TEST

START_TEST(test_override_memalign_huge_alignment_is_einval)
{
    errno = 0;
    ck_assert_ptr_null(f_memalign(SIZE_MAX, 1));
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_ptr_null(f_memalign(SIZE_MAX / 2 + 2, 1));
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_ptr_null(f_memalign(64, SIZE_MAX));
    ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

START_TEST(test_override_valloc_is_page_aligned)
{
    size_t page = page_size();
    const size_t sizes[] = {1, 100, page - 1, page, page + 1, MIB};

    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = f_valloc(sizes[i]);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % page, 0);
        ck_assert_uint_ge(f_malloc_usable_size(p), sizes[i]);
        f_free(p);
    }
}
END_TEST

START_TEST(test_override_pvalloc_rounds_to_pages)
{
    size_t page = page_size();
    const size_t sizes[] = {0, 1, page - 1, page, page + 1, 3 * page + 5};

    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t pages = (sizes[i] + page - 1) / page;
        void *p = f_pvalloc(sizes[i]);

        if (pages == 0)
            pages = 1;
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % page, 0);
        ck_assert_uint_ge(f_malloc_usable_size(p), pages * page);
        memset(p, 0x33, pages * page);
        f_free(p);
    }
}
END_TEST

START_TEST(test_override_pvalloc_huge_is_enomem)
{
    errno = 0;
    ck_assert_ptr_null(f_pvalloc(SIZE_MAX));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(f_pvalloc(SIZE_MAX - page_size() + 2));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(f_pvalloc(SIZE_MAX / 2));
    ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

/* -- sized frees ---------------------------------------------------------- */

/* Tests that count a tag's allocations must not call ck_assert while the tag
 * is pushed: in fork mode Check allocates to report each passed assertion,
 * and those blocks belong to the pushed tag like any other. */

START_TEST(test_override_free_sized_frees)
{
    ra_tag_t t = tu_tag_create("sized");
    ra_tag_stats_t before, after;
    static const size_t sizes[] = {1, 24, 1000, 14336, 20000, MIB + 3};
    void *p[6];
    int pushed, popped;

    ra_thread_flush();
    before = tu_tag_stats(t);
    pushed = ra_tag_push(t);
    for (unsigned i = 0; i < 6; i++)
        p[i] = f_malloc(sizes[i]);
    popped = ra_tag_pop(t);
    ck_assert_int_eq(pushed, 0);
    ck_assert_int_eq(popped, 0);
    for (unsigned i = 0; i < 6; i++) {
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_uint_eq(ra_tag_of(p[i]), t);
    }
    for (unsigned i = 0; i < 6; i++)
        f_free_sized(p[i], sizes[i]);
    ra_thread_flush();
    after = tu_tag_stats(t);
    ck_assert_uint_eq(after.nmalloc, before.nmalloc + 6);
    ck_assert_uint_eq(after.ndalloc, before.ndalloc + 6);
    ck_assert_uint_eq(after.allocated, before.allocated);
    /* Untagged blocks, too. */
    for (unsigned i = 0; i < 6; i++) {
        void *q = f_malloc(sizes[i]);
        ck_assert_ptr_nonnull(q);
        f_free_sized(q, sizes[i]);
    }
}
END_TEST

START_TEST(test_override_free_aligned_sized_frees)
{
    enum { N = 6 };
    ra_tag_t t = tu_tag_create("aligned-sized");
    ra_tag_stats_t before, after;
    size_t align[N];
    void *p[N];
    int pushed, popped;

    for (unsigned i = 0; i < N; i++)
        align[i] = (size_t)16 << (3 * i); /* 16 B .. 512 KiB */
    ra_thread_flush();
    before = tu_tag_stats(t);
    pushed = ra_tag_push(t);
    for (unsigned i = 0; i < N; i++)
        p[i] = f_aligned_alloc(align[i], align[i] * 3);
    popped = ra_tag_pop(t);
    ck_assert_int_eq(pushed, 0);
    ck_assert_int_eq(popped, 0);
    for (unsigned i = 0; i < N; i++) {
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_uint_eq((uintptr_t)p[i] % align[i], 0);
        ck_assert_uint_eq(ra_tag_of(p[i]), t);
    }
    for (unsigned i = 0; i < N; i++)
        f_free_aligned_sized(p[i], align[i], align[i] * 3);
    ra_thread_flush();
    after = tu_tag_stats(t);
    ck_assert_uint_eq(after.nmalloc, before.nmalloc + N);
    ck_assert_uint_eq(after.ndalloc, before.ndalloc + N);
    ck_assert_uint_eq(after.allocated, before.allocated);
    /* Untagged blocks, too. */
    for (unsigned i = 0; i < N; i++) {
        void *q = f_aligned_alloc(align[i], align[i]);
        ck_assert_ptr_nonnull(q);
        ck_assert_uint_eq(ra_tag_of(q), RA_TAG_NONE);
        f_free_aligned_sized(q, align[i], align[i]);
    }
}
END_TEST

/* -- tagging of every entry point ----------------------------------------- */

typedef void *(*alloc_fn)(void);

static void *via_malloc(void) { return f_malloc(100); }
static void *via_malloc_zero(void) { return f_malloc(0); }
static void *via_malloc_large(void) { return f_malloc(MIB); }
static void *via_calloc(void) { return f_calloc(10, 10); }
static void *via_calloc_large(void) { return f_calloc(256, 4096); }
static void *via_realloc_null(void) { return f_realloc(NULL, 300); }
static void *via_reallocarray_null(void)
{
    return f_reallocarray(NULL, 30, 10);
}
static void *via_aligned_alloc(void) { return f_aligned_alloc(256, 512); }
static void *via_memalign(void) { return f_memalign(4096, 100); }
static void *via_valloc(void) { return f_valloc(100); }
static void *via_pvalloc(void) { return f_pvalloc(100); }
static void *via_strdup(void) { return f_strdup("duplicated by libc"); }

static void *via_posix_memalign(void)
{
    void *p = NULL;
    return f_posix_memalign(&p, 1024, 100) == 0 ? p : NULL;
}

static void *via_asprintf(void)
{
    char *s = NULL;
    /* Large enough that libc grows its buffer with realloc. */
    return asprintf(&s, "%0500d", 42) == 500 ? s : NULL;
}

static const struct {
    const char *name;
    alloc_fn fn;
} entry_points[] = {
    {"malloc", via_malloc},
    {"malloc(0)", via_malloc_zero},
    {"malloc large", via_malloc_large},
    {"calloc", via_calloc},
    {"calloc large", via_calloc_large},
    {"realloc(NULL)", via_realloc_null},
    {"reallocarray(NULL)", via_reallocarray_null},
    {"aligned_alloc", via_aligned_alloc},
    {"posix_memalign", via_posix_memalign},
    {"memalign", via_memalign},
    {"valloc", via_valloc},
    {"pvalloc", via_pvalloc},
    {"strdup (libc)", via_strdup},
    {"asprintf (libc)", via_asprintf},
};

START_TEST(test_override_entry_point_tags_by_current_tag)
{
    ra_tag_t a = tu_tag_create("a");
    ra_tag_t b = tu_tag_create("b");
    void *pa, *pb, *pu;
    int rc = 0;

    rc |= ra_tag_push(a);
    pa = entry_points[_i].fn();
    rc |= ra_tag_push(b);
    pb = entry_points[_i].fn();
    rc |= ra_tag_pop(b);
    rc |= ra_tag_pop(a);
    ck_assert_int_eq(rc, 0);
    pu = entry_points[_i].fn();
    ck_assert_msg(pa != NULL && pb != NULL && pu != NULL, "%s failed",
                  entry_points[_i].name);
    ck_assert_msg(ra_tag_of(pa) == a, "%s under a: tag %u",
                  entry_points[_i].name, ra_tag_of(pa));
    ck_assert_msg(ra_tag_of(pb) == b, "%s under b: tag %u",
                  entry_points[_i].name, ra_tag_of(pb));
    ck_assert_msg(ra_tag_of(pu) == RA_TAG_NONE, "%s untagged: tag %u",
                  entry_points[_i].name, ra_tag_of(pu));
    f_free(pa);
    f_free(pb);
    f_free(pu);
    ra_thread_flush();
    ck_assert_uint_eq(tu_tag_stats(a).allocated, 0);
    ck_assert_uint_eq(tu_tag_stats(b).allocated, 0);
    ck_assert_uint_eq(tu_tag_stats(a).nmalloc, tu_tag_stats(a).ndalloc);
}
END_TEST

/* -- threads -------------------------------------------------------------- */

struct remote_free {
    void *blocks[64];
    size_t size;
    ra_tag_t pushed;
    int rc;
    void *after[64]; /* what the freeing thread allocated next, under pushed */
};

static void *free_in_other_thread(void *arg)
{
    struct remote_free *r = arg;

    r->rc = ra_tag_push(r->pushed);
    for (unsigned i = 0; i < 64; i++)
        f_free(r->blocks[i]);
    /* Same size again: the freed blocks must not come back under pushed. */
    for (unsigned i = 0; i < 64; i++)
        r->after[i] = f_malloc(r->size);
    r->rc |= ra_tag_pop(r->pushed);
    return NULL;
}

START_TEST(test_override_free_from_other_thread_keeps_accounting)
{
    static const size_t sizes[] = {48, 4096, 100000};
    ra_tag_t a = tu_tag_create("allocator");
    ra_tag_t b = tu_tag_create("freer");

    for (unsigned s = 0; s < 3; s++) {
        struct remote_free r = {.size = sizes[s], .pushed = b};
        ra_tag_stats_t a0, a1, b0, b1;
        int rc;

        ra_thread_flush();
        a0 = tu_tag_stats(a);
        b0 = tu_tag_stats(b);
        rc = ra_tag_push(a);
        for (unsigned i = 0; i < 64; i++)
            r.blocks[i] = f_malloc(r.size);
        rc |= ra_tag_pop(a);
        ck_assert_int_eq(rc, 0);
        for (unsigned i = 0; i < 64; i++) {
            ck_assert_ptr_nonnull(r.blocks[i]);
            ck_assert_uint_eq(ra_tag_of(r.blocks[i]), a);
        }
        tu_run_threads(1, free_in_other_thread, &r);
        ck_assert_int_eq(r.rc, 0);
        ra_thread_flush();
        a1 = tu_tag_stats(a);
        b1 = tu_tag_stats(b);
        /* The frees are the allocating tag's, whatever the freeing thread
         * had pushed; the exited thread's caches were flushed. */
        ck_assert_uint_eq(a1.nmalloc, a0.nmalloc + 64);
        ck_assert_uint_eq(a1.ndalloc, a0.ndalloc + 64);
        ck_assert_uint_eq(a1.allocated, a0.allocated);
        ck_assert_uint_eq(b1.nmalloc, b0.nmalloc + 64);
        ck_assert_uint_eq(b1.ndalloc, b0.ndalloc);
        for (unsigned i = 0; i < 64; i++) {
            ck_assert_ptr_nonnull(r.after[i]);
            ck_assert_uint_eq(ra_tag_of(r.after[i]), b);
        }
        ck_assert_uint_ge(b1.allocated, b0.allocated + 64 * r.size);
        for (unsigned i = 0; i < 64; i++)
            f_free(r.after[i]);
    }
}
END_TEST


/* -- errno on failure --------------------------------------------------------
 * Every entry point fails as glibc's does (tst-malloc-too-large,
 * tst-malloc-thread-fail): NULL and errno ENOMEM; posix_memalign returns
 * ENOMEM and sets errno too. Sizes: past jemalloc's largest size class,
 * around PTRDIFF_MAX, and SIZE_MAX; tagged and untagged. */

static const size_t too_large[] = {
    ((size_t)7 << 60) + 1,       /* past jemalloc's largest class */
    (size_t)PTRDIFF_MAX - 4096,  /* room for alignment, still too large */
    (size_t)PTRDIFF_MAX,
    (size_t)PTRDIFF_MAX + 1,
    SIZE_MAX - 4096,
    SIZE_MAX,
};

/* Calls entry point which with size; returns what it returned (for
 * posix_memalign, the block or NULL, with its result in *rc). */
enum entry { E_MALLOC, E_CALLOC, E_CALLOC_N, E_REALLOC, E_REALLOCARRAY,
             E_ALIGNED_ALLOC, E_MEMALIGN, E_VALLOC, E_PVALLOC,
             E_POSIX_MEMALIGN, E_RA_MALLOC, E_RA_CALLOC, E_RA_REALLOC,
             E_RA_ALIGNED_ALLOC, E_RA_POSIX_MEMALIGN, E_RA_MALLOC_TAG,
             NENTRIES };

static const char *const entry_names[NENTRIES] = {
    "malloc", "calloc(1, n)", "calloc(n, 1)", "realloc", "reallocarray",
    "aligned_alloc", "memalign", "valloc", "pvalloc", "posix_memalign",
    "ra_malloc", "ra_calloc", "ra_realloc", "ra_aligned_alloc",
    "ra_posix_memalign", "ra_malloc_tag"};

static void *call_entry(enum entry which, void *block, size_t size,
                        ra_tag_t tag, int *rc)
{
    void *out = NULL;

    *rc = 0;
    switch (which) {
    case E_MALLOC: return f_malloc(size);
    case E_CALLOC: return f_calloc(1, size);
    case E_CALLOC_N: return f_calloc(size, 1);
    case E_REALLOC: return f_realloc(block, size);
    case E_REALLOCARRAY: return f_reallocarray(block, 1, size);
    case E_ALIGNED_ALLOC: return f_aligned_alloc(64, size);
    case E_MEMALIGN: return f_memalign(64, size);
    case E_VALLOC: return f_valloc(size);
    case E_PVALLOC: return f_pvalloc(size);
    case E_POSIX_MEMALIGN:
        *rc = f_posix_memalign(&out, 64, size);
        return out;
    case E_RA_MALLOC: return ra_malloc(size);
    case E_RA_CALLOC: return ra_calloc(size, 1);
    case E_RA_REALLOC: return ra_realloc(block, size);
    case E_RA_ALIGNED_ALLOC: return ra_aligned_alloc(4096, size);
    case E_RA_POSIX_MEMALIGN:
        *rc = ra_posix_memalign(&out, 128, size);
        return out;
    default: return ra_malloc_tag(tag, size);
    }
}

static void check_errno_of_entry(enum entry which, ra_tag_t tag)
{
    for (unsigned i = 0; i < sizeof too_large / sizeof too_large[0]; i++) {
        void *block = ra_malloc_tag(tag, 100), *p;
        int rc, saved;

        ck_assert_ptr_nonnull(block);
        tu_fill_pattern(block, 100, i);
        if (tag != RA_TAG_NONE)
            ck_assert_int_eq(ra_tag_push(tag), 0);
        errno = 0;
        p = call_entry(which, block, too_large[i], tag, &rc);
        saved = errno;
        if (tag != RA_TAG_NONE)
            ck_assert_int_eq(ra_tag_pop(tag), 0);
        ck_assert_msg(p == NULL && saved == ENOMEM,
                      "%s(%#zx), tag %u: %p, errno %d", entry_names[which],
                      too_large[i], tag, p, saved);
        if (which == E_POSIX_MEMALIGN || which == E_RA_POSIX_MEMALIGN)
            ck_assert_int_eq(rc, ENOMEM);
        /* A failed realloc leaves the block as it was. */
        assert_filled(block, 100, i);
        ck_assert_uint_eq(ra_tag_of(block), tag);
        ra_free(block);
    }
}

START_TEST(test_override_every_entry_point_sets_errno_untagged)
{
    check_errno_of_entry((enum entry)_i, RA_TAG_NONE);
}
END_TEST

START_TEST(test_override_every_entry_point_sets_errno_tagged)
{
    check_errno_of_entry((enum entry)_i, tu_tag_create("too-large"));
}
END_TEST

static Suite *override_suite(void)
{
    Suite *s = suite_create("override");
    TCase *tc;

    tc = tcase_create("malloc and free");
    tcase_add_test(tc, test_override_malloc_zero_is_unique_and_freeable);
    tcase_add_test(tc, test_override_free_null_is_noop);
    tcase_add_test(tc, test_override_malloc_huge_is_enomem);
    tcase_add_test(tc, test_override_calloc_zeroes_untagged);
    tcase_add_test(tc, test_override_calloc_zeroes_tagged);
    tcase_add_test(tc, test_override_calloc_overflow_is_enomem);
    tcase_add_test(tc, test_override_calloc_zero_is_freeable);
    tcase_add_test(tc, test_override_malloc_usable_size);
    suite_add_tcase(s, tc);

    tc = tcase_create("realloc");
    tcase_add_test(tc, test_override_realloc_null_allocates_under_current_tag);
    tcase_add_test(tc, test_override_realloc_zero_frees);
    tcase_add_test(tc, test_override_realloc_keeps_contents_and_tag);
    tcase_add_test(tc, test_override_realloc_of_untagged_stays_untagged);
    tcase_add_test(tc, test_override_realloc_huge_is_enomem_and_keeps_block);
    tcase_add_test(tc, test_override_reallocarray_overflow_keeps_block);
    suite_add_tcase(s, tc);

    tc = tcase_create("alignment");
    tcase_add_test(tc, test_override_posix_memalign_bad_alignment_is_einval);
    tcase_add_test(tc, test_override_posix_memalign_huge_is_enomem);
    tcase_add_test(tc, test_override_posix_memalign_aligns);
    tcase_add_test(tc, test_override_aligned_alloc_bad_alignment_is_einval);
    tcase_add_test(tc, test_override_aligned_alloc_aligns);
    tcase_add_test(tc, test_override_memalign_rounds_alignment_up);
    tcase_add_test(tc, test_override_memalign_small_alignment_works);
    tcase_add_test(tc, test_override_memalign_huge_alignment_is_einval);
    tcase_add_test(tc, test_override_valloc_is_page_aligned);
    tcase_add_test(tc, test_override_pvalloc_rounds_to_pages);
    tcase_add_test(tc, test_override_pvalloc_huge_is_enomem);
    suite_add_tcase(s, tc);

    tc = tcase_create("sized frees");
    tcase_add_test(tc, test_override_free_sized_frees);
    tcase_add_test(tc, test_override_free_aligned_sized_frees);
    suite_add_tcase(s, tc);

    tc = tcase_create("tagging");
    tcase_add_loop_test(tc, test_override_entry_point_tags_by_current_tag, 0,
                        sizeof entry_points / sizeof entry_points[0]);
    suite_add_tcase(s, tc);

    tc = tcase_create("threads");
    tcase_add_test(tc, test_override_free_from_other_thread_keeps_accounting);
    suite_add_tcase(s, tc);

    tc = tcase_create("errno on failure");
    tcase_add_loop_test(tc, test_override_every_entry_point_sets_errno_untagged,
                        0, NENTRIES);
    tcase_add_loop_test(tc, test_override_every_entry_point_sets_errno_tagged,
                        0, NENTRIES);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    return tu_run_suite(override_suite());
}

/* Suite "region (unit)": carving address space out of a region. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "internal.h"
#include "region.h"
#include "testutil.h"

#define MIB ((uintptr_t)1 << 20)
#define SPAN (64 * MIB)

/* A PROT_NONE reservation of SPAN bytes aligned to SPAN, as a region is. */
static uintptr_t reserve(void)
{
    char *raw = mmap(NULL, 2 * SPAN, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    ck_assert_ptr_ne(raw, MAP_FAILED);
    return ((uintptr_t)raw + SPAN - 1) & ~(SPAN - 1);
}

START_TEST(test_region_unit_carves_in_order_and_aligned)
{
    struct ra__carving c;
    uintptr_t base = reserve(), a, b, d;

    ra__carving_init(&c, base, SPAN);
    a = ra__carve_extent(&c, 0, 4096, 4096);
    ck_assert_uint_eq(a, base);
    b = ra__carve_extent(&c, 0, 3 * 4096, 2 * MIB);
    ck_assert_uint_eq(b, base + 2 * MIB);
    /* Both are writable now: the carving made them so. */
    memset((void *)a, 1, 4096);
    memset((void *)b, 2, 3 * 4096);
    ck_assert_uint_eq(atomic_load(&c.next), b + 3 * 4096);
    ck_assert_uint_ge(atomic_load(&c.writable_end), atomic_load(&c.next));
    /* new_addr: only the next address. */
    ck_assert_uint_eq(ra__carve_extent(&c, a, 4096, 4096), 0);
    d = atomic_load(&c.next);
    ck_assert_uint_eq(ra__carve_extent(&c, d, 4096, 4096), d);
}
END_TEST

START_TEST(test_region_unit_what_does_not_fit_is_refused)
{
    struct ra__carving c;
    uintptr_t base = reserve();

    ra__carving_init(&c, base, SPAN);
    ck_assert_uint_eq(ra__carve_extent(&c, 0, SPAN + 4096, 4096), 0);
    ck_assert_uint_eq(ra__carve_extent(&c, 0, SIZE_MAX - 4095, 4096), 0);
    ck_assert_uint_eq(ra__carve_extent(&c, 0, SPAN - 4096, 4096), base);
    ck_assert_uint_eq(ra__carve_extent(&c, 0, 8192, 4096), 0);
    /* Alignment that would run past the end. */
    ck_assert_uint_eq(ra__carve_extent(&c, 0, 4096, SPAN), 0);
    ck_assert_uint_eq(ra__carve_extent(&c, 0, 4096, 4096),
                      base + SPAN - 4096);
    ck_assert_uint_eq(atomic_load(&c.next), base + SPAN);
}
END_TEST

/* When the kernel refuses to make the space writable (here RLIMIT_DATA;
 * not 0, which Linux reads as "no limit below the hard one"), nothing is
 * taken: the next carving starts where this one would have. */
START_TEST(test_region_unit_refused_commit_takes_nothing)
{
    struct ra__carving c;
    struct rlimit old, tight;
    uintptr_t base = reserve(), got;

    ra__carving_init(&c, base, SPAN);
    ck_assert_int_eq(getrlimit(RLIMIT_DATA, &old), 0);
    tight = old;
    tight.rlim_cur = tu_data_vm_bytes() + MIB;
    ck_assert_int_eq(setrlimit(RLIMIT_DATA, &tight), 0);
    got = ra__carve_extent(&c, 0, 16 * MIB, 4096);
    ck_assert_int_eq(setrlimit(RLIMIT_DATA, &old), 0);
    ck_assert_uint_eq(got, 0);
    ck_assert_uint_eq(atomic_load(&c.next), base);
    ck_assert_uint_eq(ra__carve_extent(&c, 0, 16 * MIB, 4096), base);
}
END_TEST

struct racer {
    struct ra__carving *c;
    uintptr_t got[256];
};

static void *carve_many(void *arg)
{
    struct racer *r = arg;

    for (unsigned i = 0; i < 256; i++)
        r->got[i] = ra__carve_extent(r->c, 0, 4096, 4096);
    return NULL;
}

/* Two threads carving at once never get the same page. */
START_TEST(test_region_unit_concurrent_carvings_are_disjoint)
{
    static struct racer racers[2];
    struct ra__carving c;
    pthread_t threads[2];
    uintptr_t base = reserve();

    ra__carving_init(&c, base, SPAN);
    for (int i = 0; i < 2; i++) {
        racers[i].c = &c;
        ck_assert_int_eq(pthread_create(&threads[i], NULL, carve_many,
                                        &racers[i]),
                         0);
    }
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    ck_assert_uint_eq(atomic_load(&c.next), base + 512 * 4096);
    for (unsigned i = 0; i < 256; i++)
        for (unsigned j = 0; j < 256; j++)
            ck_assert_uint_ne(racers[0].got[i], racers[1].got[j]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("region (unit)");
    TCase *tc = tcase_create("carving");

    tcase_add_test(tc, test_region_unit_carves_in_order_and_aligned);
    tcase_add_test(tc, test_region_unit_what_does_not_fit_is_refused);
    tcase_add_test(tc, test_region_unit_refused_commit_takes_nothing);
    tcase_add_test(tc, test_region_unit_concurrent_carvings_are_disjoint);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

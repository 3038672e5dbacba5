/* Suite "measure (unit)": what ra_stats_refresh counts of the process's
 * parts (measure.c, parts.c) is the kernel's count of its own call, even
 * where the library's thread left a pass over jemalloc's mappings half
 * done: that thread stops a pass when its round's budget of CPU time is
 * spent, which a busy machine makes happen mid-pass, and what it counted
 * of the mappings before is no count of now. Where the library does not
 * see jemalloc's mappings (built without the override), there is no pass:
 * the program exits 77, a skip. */
#include <check.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "measure.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

/* The pass's copy of jemalloc's mappings with the one that holds
 * first_at put first (--wrap=ra__mappings_copy): a pass stopped after
 * one mapping has counted that one, whatever the table's order. */
static uintptr_t first_at;
static bool first_found;

unsigned __real_ra__mappings_copy(struct ra__range *out, unsigned max,
                                  uint64_t *version);
unsigned __wrap_ra__mappings_copy(struct ra__range *out, unsigned max,
                                  uint64_t *version);
unsigned __wrap_ra__mappings_copy(struct ra__range *out, unsigned max,
                                  uint64_t *version)
{
    unsigned n = __real_ra__mappings_copy(out, max, version);

    for (unsigned i = 0; i < n; i++)
        if (out[i].start <= first_at && first_at < out[i].end) {
            struct ra__range held = out[i];
            out[i] = out[0];
            out[0] = held;
            first_found = true;
            break;
        }
    return n;
}

/* A round's budget spent after the pass's first mapping. */
static unsigned spent_calls;

static bool spent_after_one(void)
{
    return ++spent_calls > 1;
}

/* measure.c calls ra__parts_measure with its lock held: the test holds a
 * lock of that rank, which the debug build checks. */
static struct ra__mutex measure_stand_in = RA__MUTEX_INIT(RA__RANK_MEASURE);

static bool measure_one_mapping(int pagemap)
{
    bool done;

    ra__lock(&measure_stand_in);
    done = ra__parts_measure(pagemap, spent_after_one);
    ra__unlock(&measure_stand_in);
    return done;
}

/* 64 MiB untagged, allocated: the library's thread counts its mapping
 * (nothing resident yet) and its round ends there; the program writes
 * the block and refreshes. The untagged arenas' extents count the 64 MiB,
 * and what no part names of RssAnon stays small. */
START_TEST(test_measure_unit_refresh_counts_now_after_a_pass_left_half_done)
{
    const size_t size = 64 * MIB;
    char *block = malloc(size);
    int pagemap = ra__resident_open();
    struct ra__parts p;

    ck_assert_ptr_nonnull(block);
    ck_assert_int_ge(pagemap, 0);
    first_at = (uintptr_t)block;
    ck_assert(!measure_one_mapping(pagemap));
    ck_assert_msg(first_found, "the block's mapping is not jemalloc's noted");
    memset(block, 1, size);
    ck_assert_int_eq(ra_stats_refresh(), 0);
    ra__parts_read(&p);
    ck_assert_msg(p.extents >= size,
                  "untagged extents %" PRIu64 " MiB, 64 MiB written: the "
                  "refresh went on with the pass counted before the write",
                  p.extents / MIB);
    ck_assert_uint_le(p.extents + p.metadata, p.rss_anon);
    close(pagemap);
    free(block);
}
END_TEST

static Suite *measure_suite(void)
{
    Suite *s = suite_create("measure (unit)");
    TCase *tc = tcase_create("parts");

    tcase_add_test(tc,
                   test_measure_unit_refresh_counts_now_after_a_pass_left_half_done);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* The library's load noted jemalloc's code and mappings by now. */
    if (!ra__mappings_known()) {
        printf("SKIP: the library does not see jemalloc's mappings in this "
               "build (--disable-override)\n");
        return 77;
    }
    return tu_run_suite(measure_suite());
}

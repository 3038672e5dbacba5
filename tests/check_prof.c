/* Suite "prof": the sampled allocation-site profiler through the public API
 * (ra_prof_start, ra_prof_stop, ra_prof_dump), read back from its folded
 * stacks (live estimates, by tag and call site) and its heap_v2 dumps (raw
 * sampled counts, live and cumulative, per stack).
 *
 * A passing ck_assert allocates, and so does a failing one's message: no
 * assertion runs while a tag is pushed (at interval 1 every tagged block is
 * a sample) or in a worker thread; failures are counted and asserted on
 * afterwards. The allocation sites are functions of their own, exported
 * (the program is linked with -export-dynamic) so that dladdr, and so the
 * folded dump, names them. */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "regionalloc.h"
#include "testutil.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* An allocation site: never inlined into its caller, cloned or merged with
 * another function, so that it is the innermost frame of its samples under
 * its own name. */
#if defined(__clang__)
#define SITE __attribute__((noinline, used))
#else
#define SITE __attribute__((noipa, used))
#endif

static char err[8192];

/* -- reading dumps ------------------------------------------------------------ */

/* Checks that every line of a folded dump is
 * "tag:<name>;<frame>;...;<frame> <bytes>": frames not empty, no space but
 * the one before the count, a count of digits. Returns the number of
 * lines. */
static unsigned check_folded_syntax(const char *dump)
{
    unsigned lines = 0;

    for (const char *line = dump; *line != '\0'; lines++) {
        const char *end = strchr(line, '\n');
        const char *space, *p;

        ck_assert_msg(end != NULL, "unterminated line: %s", line);
        ck_assert_msg(strncmp(line, "tag:", 4) == 0, "line %u: %.*s", lines,
                      (int)(end - line), line);
        /* The count follows the last space; frames may hold spaces. */
        for (space = end; space > line && *space != ' '; space--)
            ;
        if (space == line)
            space = NULL;
        ck_assert_msg(space != NULL && space + 1 < end, "line %u: %.*s",
                      lines, (int)(end - line), line);
        for (p = space + 1; p < end; p++)
            ck_assert_msg(*p >= '0' && *p <= '9', "line %u: %.*s", lines,
                          (int)(end - line), line);
        /* No empty frame: no ";;", no ';' last, a frame after the tag. */
        ck_assert_msg(memchr(line, ';', (size_t)(space - line)) != NULL,
                      "line %u has no frame: %.*s", lines,
                      (int)(end - line), line);
        for (p = line; p < space; p++)
            ck_assert_msg(!(*p == ';' && (p[1] == ';' || p + 1 == space)),
                          "line %u: empty frame: %.*s", lines,
                          (int)(end - line), line);
        line = end + 1;
    }
    return lines;
}

/* What the folded lines of one site say: the sum of their counts, and how
 * many there are. */
struct folded_site {
    uint64_t bytes;
    unsigned lines;
};

/* Whether frame (up to end) is function's: "function+0x<offset>", or
 * "function (file:line)" where libdw named it. */
static bool frame_is(const char *frame, const char *end, const char *function)
{
    size_t n = strlen(function);

    return (size_t)(end - frame) > n + 2 && memcmp(frame, function, n) == 0 &&
           (memcmp(frame + n, "+0x", 3) == 0 ||
            memcmp(frame + n, " (", 2) == 0);
}

/* Sums the folded lines of tag tag_name whose innermost frame (the last) is
 * in function. */
static struct folded_site folded_site(const char *dump, const char *tag_name,
                                      const char *function)
{
    struct folded_site r = {0, 0};
    size_t tn = strlen(tag_name);

    for (const char *line = dump; *line != '\0';) {
        const char *end = strchr(line, '\n');
        const char *space, *leaf;

        if (end == NULL)
            break;
        /* The count follows the last space; frames may hold spaces. */
        for (space = end; space > line && *space != ' '; space--)
            ;
        if (space == line)
            space = NULL;
        if (space != NULL && strncmp(line, "tag:", 4) == 0 &&
            strncmp(line + 4, tag_name, tn) == 0 && line[4 + tn] == ';') {
            for (leaf = space; leaf > line && leaf[-1] != ';'; leaf--)
                ;
            if (frame_is(leaf, space, function)) {
                r.bytes += strtoull(space + 1, NULL, 10);
                r.lines++;
            }
        }
        line = end + 1;
    }
    return r;
}

/* The raw counts of a heap_v2 dump: "t*: <live>: <live bytes> [<samples>:
 * <bytes>]". */
struct heap_counts {
    uint64_t live, live_bytes, alloc, alloc_bytes;
    unsigned stacks;
};

static bool parse_counts(const char *line, struct heap_counts *c)
{
    return sscanf(line, " t*: %" SCNu64 ": %" SCNu64 " [%" SCNu64
                        ": %" SCNu64 "]",
                  &c->live, &c->live_bytes, &c->alloc, &c->alloc_bytes) == 4;
}

/* The name of the function holding the code at pc (dladdr), or "?". */
static const char *function_at(uintptr_t pc)
{
    Dl_info info;

    if (dladdr((void *)pc, &info) == 0 || info.dli_sname == NULL)
        return "?";
    return info.dli_sname;
}

/* Reads a heap_v2 dump: its header's totals into *total (when not NULL),
 * and the sum of the stacks whose innermost frame is in function (every
 * stack when function is NULL) into the result. *max_live, when not NULL,
 * gets the largest live count of any one stack. */
static struct heap_counts heap_v2_read(const char *dump, const char *function,
                                       struct heap_counts *total,
                                       uint64_t *max_live)
{
    struct heap_counts sum = {0, 0, 0, 0, 0};
    const char *line = strchr(dump, '\n');
    uint64_t top = 0;

    ck_assert_msg(strncmp(dump, "heap_v2/", 8) == 0, "%.200s", dump);
    ck_assert_ptr_nonnull(line);
    line++;
    if (total != NULL) {
        memset(total, 0, sizeof *total);
        ck_assert_msg(parse_counts(line, total), "header: %.200s", line);
    }
    while ((line = strchr(line, '\n')) != NULL && line[1] == '@') {
        struct heap_counts c;
        uintptr_t pc;

        line++;
        ck_assert_msg(sscanf(line, "@ 0x%" SCNxPTR, &pc) == 1, "%.200s",
                      line);
        line = strchr(line, '\n');
        ck_assert_ptr_nonnull(line);
        line++;
        ck_assert_msg(parse_counts(line, &c), "counts: %.200s", line);
        if (c.live > top)
            top = c.live;
        /* The first address is already inside the call (minus 1). */
        if (function == NULL || strcmp(function_at(pc), function) == 0) {
            sum.live += c.live;
            sum.live_bytes += c.live_bytes;
            sum.alloc += c.alloc;
            sum.alloc_bytes += c.alloc_bytes;
            sum.stacks++;
        }
    }
    if (max_live != NULL)
        *max_live = top;
    return sum;
}

static struct heap_counts heap_site(ra_tag_t tag, const char *function)
{
    char *dump = tu_prof_dump_string(RA_PROF_HEAP_V2, tag, NULL);
    struct heap_counts c = heap_v2_read(dump, function, NULL, NULL);

    free(dump);
    return c;
}

/* -- allocation sites -------------------------------------------------------------- */

#define SMALL_SIZE 128
#define MEDIUM_SIZE 1024
#define LARGE_SIZE MIB

/* Each fills out[0..n) with blocks of its size, under the current tag,
 * and returns how many allocations failed. */
size_t prof_site_small(void **out, size_t n);
size_t prof_site_medium(void **out, size_t n);
size_t prof_site_large(void **out, size_t n);
size_t prof_site_other(void **out, size_t n, size_t size);

SITE size_t prof_site_small(void **out, size_t n)
{
    size_t failed = 0;

    for (size_t i = 0; i < n; i++)
        failed += (out[i] = ra_malloc(SMALL_SIZE)) == NULL;
    return failed;
}

SITE size_t prof_site_medium(void **out, size_t n)
{
    size_t failed = 0;

    for (size_t i = 0; i < n; i++) {
        out[i] = ra_malloc(MEDIUM_SIZE);
        if (out[i] == NULL)
            failed++;
        else
            *(volatile char *)out[i] = 1;
    }
    return failed;
}

SITE size_t prof_site_large(void **out, size_t n)
{
    size_t failed = 0;

    for (size_t i = 0; i < n; i++) {
        out[i] = ra_malloc(LARGE_SIZE);
        if (out[i] == NULL)
            failed++;
        else
            memset(out[i], 1, 64);
    }
    return failed;
}

SITE size_t prof_site_other(void **out, size_t n, size_t size)
{
    size_t failed = 0;

    for (size_t i = 0; i < n; i++)
        failed += (out[i] = ra_malloc(size)) == NULL;
    return failed;
}

/* The blocks of the three sites: small and medium under tag "prof-a",
 * large under "prof-b". */
struct sites {
    ra_tag_t a, b;
    size_t nsmall, nmedium, nlarge;
    void **small, **medium, **large;
    size_t failed;
};

static void sites_init(struct sites *s, size_t nsmall, size_t nmedium,
                       size_t nlarge)
{
    s->a = tu_tag_create("prof-a");
    s->b = tu_tag_create("prof-b");
    s->nsmall = nsmall;
    s->nmedium = nmedium;
    s->nlarge = nlarge;
    /* Untagged: nothing is pushed. */
    s->small = calloc(nsmall, sizeof(void *));
    s->medium = calloc(nmedium, sizeof(void *));
    s->large = calloc(nlarge, sizeof(void *));
    ck_assert(s->small != NULL && s->medium != NULL && s->large != NULL);
    s->failed = 0;
}

void prof_driver(struct sites *s);

/* Runs the three sites, each under its tag. */
SITE void prof_driver(struct sites *s)
{
    tu_tag_push(s->a);
    s->failed += prof_site_small(s->small, s->nsmall);
    s->failed += prof_site_medium(s->medium, s->nmedium);
    tu_tag_pop(s->a);
    tu_tag_push(s->b);
    s->failed += prof_site_large(s->large, s->nlarge);
    tu_tag_pop(s->b);
}

static void free_all(void **blocks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ra_free(blocks[i]);
}

static void sites_free(struct sites *s)
{
    free_all(s->small, s->nsmall);
    free_all(s->medium, s->nmedium);
    free_all(s->large, s->nlarge);
    free(s->small);
    free(s->medium);
    free(s->large);
}

/* Frees every other small block (the odd ones), a half. */
static void free_half_of_small(struct sites *s)
{
    for (size_t i = 1; i < s->nsmall; i += 2) {
        ra_free(s->small[i]);
        s->small[i] = NULL;
    }
}

/* The live estimates of the three sites, from one folded dump of every
 * tag (each site's lines under its tag only). */
struct estimates {
    uint64_t small, medium, large;
};

static struct estimates folded_estimates(void)
{
    char *dump = tu_prof_dump_string(RA_PROF_FOLDED, RA_TAG_ALL, NULL);
    struct estimates e;
    struct folded_site small, medium, large;

    check_folded_syntax(dump);
    small = folded_site(dump, "prof-a", "prof_site_small");
    medium = folded_site(dump, "prof-a", "prof_site_medium");
    large = folded_site(dump, "prof-b", "prof_site_large");
    /* Never under the other tag. */
    ck_assert_uint_eq(folded_site(dump, "prof-b", "prof_site_small").lines, 0);
    ck_assert_uint_eq(folded_site(dump, "prof-b", "prof_site_medium").lines,
                      0);
    ck_assert_uint_eq(folded_site(dump, "prof-a", "prof_site_large").lines, 0);
    e.small = small.bytes;
    e.medium = medium.bytes;
    e.large = large.bytes;
    free(dump);
    return e;
}

/* Fails unless estimate is within pct percent of truth. */
static void assert_within(const char *what, uint64_t estimate, uint64_t truth,
                          unsigned pct)
{
    double error = ((double)estimate - (double)truth) / (double)truth;

    /* Shown in the log of a failure, and in the test's output otherwise. */
    printf("prof accuracy: %-28s estimate %12" PRIu64 " truth %12" PRIu64
           " (%+.2f%%)\n",
           what, estimate, truth, 100.0 * error);
    ck_assert_msg(error >= -(double)pct / 100 && error <= (double)pct / 100,
                  "%s: estimate %" PRIu64 " is not within %u%% of %" PRIu64
                  " (%+.2f%%)",
                  what, estimate, pct, truth, 100.0 * error);
}

/* -- "errors" ------------------------------------------------------------------ */

START_TEST(test_prof_start_rejects_interval_0)
{
    errno = 0;
    ck_assert_int_eq(ra_prof_start(0), -1);
    ck_assert_int_eq(errno, EINVAL);
    /* Nothing started. */
    errno = 0;
    ck_assert_int_eq(ra_prof_stop(), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_prof_stop_when_not_started_fails)
{
    errno = 0;
    ck_assert_int_eq(ra_prof_stop(), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_int_eq(ra_prof_start(4096), 0);
    ck_assert_int_eq(ra_prof_stop(), 0);
    errno = 0;
    ck_assert_int_eq(ra_prof_stop(), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_prof_dump_before_start_is_not_supported)
{
    FILE *f = fopen("/dev/null", "w");

    ck_assert_ptr_nonnull(f);
    for (int fmt = RA_PROF_TREE; fmt <= RA_PROF_HEAP_V2; fmt++) {
        errno = 0;
        ck_assert_int_eq(ra_prof_dump(f, (ra_prof_format_t)fmt, RA_TAG_ALL),
                         -1);
        ck_assert_int_eq(errno, ENOTSUP);
    }
    fclose(f);
}
END_TEST

START_TEST(test_prof_dump_rejects_bad_arguments)
{
    ra_tag_t tag = tu_tag_create("prof-args");
    FILE *f = fopen("/dev/null", "w");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ra_prof_start(4096), 0);
    errno = 0;
    ck_assert_int_eq(ra_prof_dump(NULL, RA_PROF_FOLDED, RA_TAG_ALL), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_prof_dump(f, (ra_prof_format_t)4, RA_TAG_ALL), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_prof_dump(f, (ra_prof_format_t)-1, RA_TAG_ALL), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_prof_dump(f, RA_PROF_FOLDED, tag + 1), -1);
    ck_assert_int_eq(errno, EINVAL);
    /* A tag that exists, with nothing sampled yet, is fine. */
    ck_assert_int_eq(ra_prof_dump(f, RA_PROF_FOLDED, tag), 0);
    ck_assert_int_eq(ra_prof_dump(f, RA_PROF_TREE, tag), 0);
    fclose(f);
}
END_TEST


/* Requests of 2^63 bytes and more while the profiler counts down, at
 * intervals up to SIZE_MAX: they fail with ENOMEM, as without the profiler
 * (the countdown's arithmetic must not overflow, which the UBSan build
 * checks). */
START_TEST(test_prof_huge_request_fails_with_enomem)
{
    static const size_t sizes[] = {(size_t)1 << 63, ((size_t)1 << 63) + 4096,
                                   SIZE_MAX - 4096, SIZE_MAX};
    static const size_t intervals[] = {1, 1 << 10, 1 << 20, SIZE_MAX};
    ra_tag_t tag = tu_tag_create("prof-huge");
    void *block;

    for (unsigned n = 0; n < sizeof intervals / sizeof intervals[0]; n++) {
        ck_assert_int_eq(ra_prof_start(intervals[n]), 0);
        ck_assert_int_eq(ra_tag_push(tag), 0);
        block = ra_malloc(100);
        for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            void *p;
            int e[4];
            errno = 0;
            p = ra_malloc(sizes[i]);
            e[0] = p == NULL ? errno : -1;
            errno = 0;
            p = ra_aligned_alloc(64, sizes[i]);
            e[1] = p == NULL ? errno : -1;
            errno = 0;
            p = ra_calloc(1, sizes[i]);
            e[2] = p == NULL ? errno : -1;
            errno = 0;
            p = ra_realloc(block, sizes[i]);
            e[3] = p == NULL ? errno : -1;
            ck_assert_int_eq(ra_tag_pop(tag), 0);
            for (int k = 0; k < 4; k++)
                ck_assert_msg(e[k] == ENOMEM, "call %d of %#zx: %d", k,
                              sizes[i], e[k]);
            ck_assert_int_eq(ra_tag_push(tag), 0);
        }
        ck_assert_int_eq(ra_tag_pop(tag), 0);
        ra_free(block);
    }
}
END_TEST

static int child_prof_in_pass_through(void)
{
    FILE *f = fopen("/dev/null", "w");

    TU_REQUIRE(f != NULL);
    TU_REQUIRE(!ra_enabled());
    errno = 0;
    TU_REQUIRE(ra_prof_start(4096) == -1 && errno == ENOTSUP);
    errno = 0;
    TU_REQUIRE(ra_prof_dump(f, RA_PROF_FOLDED, RA_TAG_ALL) == -1 &&
               errno == ENOTSUP);
    errno = 0;
    TU_REQUIRE(ra_prof_stop() == -1 && errno == EINVAL);
    fclose(f);
    return 0;
}

START_TEST(test_prof_not_supported_in_pass_through_mode)
{
    static const char *const env[] = {"REGIONALLOC=0", NULL};
    int status = tu_exec_self(env, "pass_through", err, sizeof err);

    ck_assert_msg(status == 0, "child exited with %d; stderr: %s", status,
                  err);
}
END_TEST

/* -- "accuracy" ---------------------------------------------------------------
 * Poisson sampling by bytes at mean interval I takes a block of s bytes
 * with probability p = 1 - exp(-s/I), independently of the others (the
 * countdown is memoryless), and the estimate adds s/p per sampled block.
 * Its variance over n blocks of s bytes, B = n s bytes, is
 *   n s^2 (1 - p)/p = B s / (exp(s/I) - 1) ~= B (I - s/2)   (s << I),
 * so its relative standard deviation is about sqrt(I / B): at I = 64 KiB,
 * 2.5% for B = 100 MiB, whatever the block size. For +-10% to be at least
 * 4 standard deviations (a false failure about once in 16,000 runs per
 * figure), every figure checked holds >= 100 MiB:
 *   small   2 Mi blocks x 128 B = 256 MiB: sd 1.56%, 10% = 6.4 sd; after half
 *           of them are freed, 128 MiB: sd 2.21%, 10% = 4.5 sd
 *   medium  128 Ki x 1 KiB     = 128 MiB: sd 2.21%, 10% = 4.5 sd
 *   large   64 x 1 MiB         =  64 MiB: p = 1 - exp(-16), so the weight is
 *           1 + 1.1e-7 and the sd 4e-4%: exact in practice.
 * The generator is seeded from the clock: a false failure cannot be
 * replayed, and at these odds is not worth a fixed seed in the library. */

#define ACC_INTERVAL (64 * KIB)
#define ACC_SMALL ((size_t)2 << 20)
#define ACC_MEDIUM ((size_t)128 << 10)
#define ACC_LARGE ((size_t)64)

START_TEST(test_prof_estimates_within_10_percent_at_64_kib)
{
    static struct sites s;
    struct estimates before, after;
    struct heap_counts raw_before, raw_after, medium_raw;

    sites_init(&s, ACC_SMALL, ACC_MEDIUM, ACC_LARGE);
    ck_assert_int_eq(ra_prof_start(ACC_INTERVAL), 0);
    prof_driver(&s);
    ck_assert_uint_eq(s.failed, 0);

    before = folded_estimates();
    assert_within("small (128 B x 2 Mi)", before.small,
                  (uint64_t)ACC_SMALL * SMALL_SIZE, 10);
    assert_within("medium (1 KiB x 128 Ki)", before.medium,
                  (uint64_t)ACC_MEDIUM * MEDIUM_SIZE, 10);
    assert_within("large (1 MiB x 64)", before.large,
                  (uint64_t)ACC_LARGE * LARGE_SIZE, 10);
    raw_before = heap_site(s.a, "prof_site_small");
    medium_raw = heap_site(s.a, "prof_site_medium");
    ck_assert_uint_gt(raw_before.live, 0);
    ck_assert_uint_eq(raw_before.live, raw_before.alloc);

    /* Half of the small blocks go: their live estimate halves, the
     * others' stay as they were, the cumulative counts do not move. */
    free_half_of_small(&s);
    after = folded_estimates();
    assert_within("small after freeing half", after.small,
                  (uint64_t)(ACC_SMALL / 2) * SMALL_SIZE, 10);
    ck_assert_uint_eq(after.medium, before.medium);
    ck_assert_uint_eq(after.large, before.large);
    raw_after = heap_site(s.a, "prof_site_small");
    ck_assert_uint_lt(raw_after.live, raw_before.live);
    ck_assert_uint_eq(raw_after.alloc, raw_before.alloc);
    ck_assert_uint_eq(raw_after.alloc_bytes, raw_before.alloc_bytes);
    ck_assert_uint_eq(raw_after.live_bytes, raw_after.live * SMALL_SIZE);
    /* Another site's figures are untouched, raw ones too. */
    raw_after = heap_site(s.a, "prof_site_medium");
    ck_assert_uint_eq(raw_after.live, medium_raw.live);
    ck_assert_uint_eq(raw_after.alloc, medium_raw.alloc);
    sites_free(&s);
}
END_TEST

/* Interval 1: every tagged allocation is a sample of weight 1, so the
 * figures are the truth. */
#define EXACT_SMALL ((size_t)4096)
#define EXACT_MEDIUM ((size_t)512)
#define EXACT_LARGE ((size_t)4)

START_TEST(test_prof_exact_at_interval_1)
{
    static struct sites s;
    struct estimates before, after;
    struct heap_counts small, medium, large, total;
    char *dump;

    sites_init(&s, EXACT_SMALL, EXACT_MEDIUM, EXACT_LARGE);
    ck_assert_int_eq(ra_prof_start(1), 0);
    prof_driver(&s);
    ck_assert_uint_eq(s.failed, 0);

    before = folded_estimates();
    ck_assert_uint_eq(before.small, EXACT_SMALL * SMALL_SIZE);
    ck_assert_uint_eq(before.medium, EXACT_MEDIUM * MEDIUM_SIZE);
    ck_assert_uint_eq(before.large, EXACT_LARGE * LARGE_SIZE);

    /* The raw counts (heap_v2), per site and in the header: every block
     * once, live and cumulative. */
    dump = tu_prof_dump_string(RA_PROF_HEAP_V2, RA_TAG_ALL, NULL);
    small = heap_v2_read(dump, "prof_site_small", &total, NULL);
    medium = heap_v2_read(dump, "prof_site_medium", NULL, NULL);
    large = heap_v2_read(dump, "prof_site_large", NULL, NULL);
    free(dump);
    ck_assert_uint_eq(small.live, EXACT_SMALL);
    ck_assert_uint_eq(small.alloc, EXACT_SMALL);
    ck_assert_uint_eq(small.live_bytes, EXACT_SMALL * SMALL_SIZE);
    ck_assert_uint_eq(small.alloc_bytes, EXACT_SMALL * SMALL_SIZE);
    ck_assert_uint_eq(medium.live, EXACT_MEDIUM);
    ck_assert_uint_eq(medium.alloc_bytes, EXACT_MEDIUM * MEDIUM_SIZE);
    ck_assert_uint_eq(large.live, EXACT_LARGE);
    ck_assert_uint_eq(large.alloc_bytes, EXACT_LARGE * LARGE_SIZE);
    ck_assert_uint_eq(total.live, EXACT_SMALL + EXACT_MEDIUM + EXACT_LARGE);
    ck_assert_uint_eq(total.alloc, total.live);
    ck_assert_uint_eq(total.live_bytes, EXACT_SMALL * SMALL_SIZE +
                                            EXACT_MEDIUM * MEDIUM_SIZE +
                                            EXACT_LARGE * LARGE_SIZE);

    /* One tag's dump holds only that tag's sites. */
    small = heap_site(s.b, "prof_site_small");
    large = heap_site(s.b, "prof_site_large");
    ck_assert_uint_eq(small.stacks, 0);
    ck_assert_uint_eq(large.live, EXACT_LARGE);
    dump = tu_prof_dump_string(RA_PROF_FOLDED, s.b, NULL);
    ck_assert_uint_ge(check_folded_syntax(dump), 1);
    ck_assert_uint_eq(folded_site(dump, "prof-a", "prof_site_small").lines, 0);
    ck_assert_uint_eq(folded_site(dump, "prof-b", "prof_site_large").bytes,
                      EXACT_LARGE * LARGE_SIZE);
    free(dump);

    /* Freed blocks leave the live figures, exactly; the cumulative ones
     * stay. */
    free_half_of_small(&s);
    after = folded_estimates();
    ck_assert_uint_eq(after.small, EXACT_SMALL / 2 * SMALL_SIZE);
    ck_assert_uint_eq(after.medium, before.medium);
    ck_assert_uint_eq(after.large, before.large);
    small = heap_site(s.a, "prof_site_small");
    ck_assert_uint_eq(small.live, EXACT_SMALL / 2);
    ck_assert_uint_eq(small.live_bytes, EXACT_SMALL / 2 * SMALL_SIZE);
    ck_assert_uint_eq(small.alloc, EXACT_SMALL);
    ck_assert_uint_eq(small.alloc_bytes, EXACT_SMALL * SMALL_SIZE);

    /* Everything freed: no folded line is left, the cumulative figures
     * are all still there. */
    sites_free(&s);
    dump = tu_prof_dump_string(RA_PROF_FOLDED, RA_TAG_ALL, NULL);
    ck_assert_msg(dump[0] == '\0', "live stacks left: %.300s", dump);
    free(dump);
    dump = tu_prof_dump_string(RA_PROF_HEAP_V2, RA_TAG_ALL, NULL);
    heap_v2_read(dump, NULL, &total, NULL);
    free(dump);
    ck_assert_uint_eq(total.live, 0);
    ck_assert_uint_eq(total.live_bytes, 0);
    ck_assert_uint_eq(total.alloc, EXACT_SMALL + EXACT_MEDIUM + EXACT_LARGE);
}
END_TEST

/* The tree's "All (<bytes>, #<objects>)" line of a tag, at interval 1. */
START_TEST(test_prof_tree_totals_at_interval_1)
{
    static struct sites s;
    char *dump, want[128];

    sites_init(&s, EXACT_SMALL, EXACT_MEDIUM, EXACT_LARGE);
    ck_assert_int_eq(ra_prof_start(1), 0);
    prof_driver(&s);
    ck_assert_uint_eq(s.failed, 0);
    dump = tu_prof_dump_string(RA_PROF_TREE, s.a, NULL);
    snprintf(want, sizeof want, "tag prof-a\nAll (%zu, #%zu)\n",
             EXACT_SMALL * SMALL_SIZE + EXACT_MEDIUM * MEDIUM_SIZE,
             EXACT_SMALL + EXACT_MEDIUM);
    ck_assert_msg(strncmp(dump, want, strlen(want)) == 0, "want %s got %.300s",
                  want, dump);
    ck_assert_msg(tu_find_frame(dump, "-- ", "prof_site_small") != NULL, "%.600s", dump);
    ck_assert_msg(strstr(dump, "prof_site_large") == NULL, "%.600s", dump);
    free(dump);
    sites_free(&s);
}
END_TEST

/* -- "what is sampled" -------------------------------------------------------- */

/* A sampled block that is reallocated leaves the profile, whether it
 * stays where it is or moves. */
START_TEST(test_prof_realloc_of_sampled_block_leaves_profile)
{
    ra_tag_t tag = tu_tag_create("prof-realloc");
    void *blocks[2], *moved, *kept;
    struct heap_counts c;
    size_t failed;

    ck_assert_int_eq(ra_prof_start(1), 0);
    tu_tag_push(tag);
    failed = prof_site_other(blocks, 2, 100);
    tu_tag_pop(tag);
    ck_assert_uint_eq(failed, 0);
    c = heap_site(tag, "prof_site_other");
    ck_assert_uint_eq(c.live, 2);

    /* A sampled block is at least 4 KiB: 4000 bytes are its size class,
     * which jemalloc keeps in place. */
    kept = ra_realloc(blocks[0], 4000);
    ck_assert_ptr_nonnull(kept);
    c = heap_site(tag, "prof_site_other");
    ck_assert_uint_eq(c.live, 1);
    moved = ra_realloc(blocks[1], 4 * MIB);
    ck_assert_ptr_nonnull(moved);
    ck_assert_ptr_ne(moved, blocks[1]);
    ck_assert_uint_eq(ra_tag_of(moved), tag);
    c = heap_site(tag, "prof_site_other");
    ck_assert_uint_eq(c.live, 0);
    ck_assert_uint_eq(c.live_bytes, 0);
    ck_assert_uint_eq(c.alloc, 2);
    /* At interval 1 the reallocations are samples of their own, at the
     * realloc's call site: 2 live, 4 allocated in all. */
    c = heap_site(RA_TAG_ALL, NULL);
    ck_assert_uint_eq(c.live, 2);
    ck_assert_uint_eq(c.live_bytes, 4000 + 4 * MIB);
    ck_assert_uint_eq(c.alloc, 4);
    ra_free(kept);
    ra_free(moved);
    c = heap_site(RA_TAG_ALL, NULL);
    ck_assert_uint_eq(c.live, 0);
    ck_assert_uint_eq(c.alloc, 4);
}
END_TEST

/* Only tagged allocations are sampled: untagged ones, from malloc with
 * nothing pushed or ra_malloc_tag(RA_TAG_NONE), never appear. */
START_TEST(test_prof_untagged_allocations_are_never_sampled)
{
    ra_tag_t tag = tu_tag_create("prof-tagged");
    static void *untagged[1000], *explicit_none[100], *tagged[10];
    struct heap_counts total;
    size_t failed;
    char *dump;

    ck_assert_int_eq(ra_prof_start(1), 0);
    failed = prof_site_other(untagged, 1000, 64);
    for (size_t i = 0; i < 100; i++)
        failed += (explicit_none[i] = ra_malloc_tag(RA_TAG_NONE, 5000)) ==
                  NULL;
    tu_tag_push(tag);
    failed += prof_site_small(tagged, 10);
    tu_tag_pop(tag);
    ck_assert_uint_eq(failed, 0);
    ck_assert_uint_eq(ra_tag_of(untagged[0]), RA_TAG_NONE);

    dump = tu_prof_dump_string(RA_PROF_HEAP_V2, RA_TAG_ALL, NULL);
    heap_v2_read(dump, NULL, &total, NULL);
    ck_assert_uint_eq(heap_v2_read(dump, "prof_site_other", NULL, NULL).stacks,
                      0);
    free(dump);
    ck_assert_uint_eq(total.live, 10);
    ck_assert_uint_eq(total.alloc, 10);
    dump = tu_prof_dump_string(RA_PROF_FOLDED, RA_TAG_ALL, NULL);
    ck_assert_uint_eq(check_folded_syntax(dump), 1);
    ck_assert_uint_eq(folded_site(dump, "prof-tagged", "prof_site_small").bytes,
                      10 * SMALL_SIZE);
    ck_assert_msg(strstr(dump, "prof_site_other") == NULL, "%s", dump);
    free(dump);
    free_all(untagged, 1000);
    free_all(explicit_none, 100);
    free_all(tagged, 10);
}
END_TEST

/* ra_prof_stop keeps the profile: it can still be dumped, nothing new is
 * sampled, and frees of the sampled blocks still leave it. */
START_TEST(test_prof_stop_keeps_profile_and_frees_leave_it)
{
    ra_tag_t tag = tu_tag_create("prof-stop");
    static void *before[20], *after[20];
    struct heap_counts c;
    size_t failed;
    char *dump;

    ck_assert_int_eq(ra_prof_start(1), 0);
    tu_tag_push(tag);
    failed = prof_site_small(before, 20);
    tu_tag_pop(tag);
    ck_assert_int_eq(ra_prof_stop(), 0);
    tu_tag_push(tag);
    failed += prof_site_medium(after, 20);
    tu_tag_pop(tag);
    ck_assert_uint_eq(failed, 0);

    c = heap_site(tag, "prof_site_small");
    ck_assert_uint_eq(c.live, 20);
    ck_assert_uint_eq(heap_site(tag, "prof_site_medium").stacks, 0);
    /* Half freed with ra_free, half with ra_free_sized. */
    for (size_t i = 0; i < 10; i++)
        ra_free(before[i]);
    for (size_t i = 10; i < 20; i++)
        ra_free_sized(before[i], SMALL_SIZE);
    c = heap_site(tag, "prof_site_small");
    ck_assert_uint_eq(c.live, 0);
    ck_assert_uint_eq(c.alloc, 20);
    dump = tu_prof_dump_string(RA_PROF_FOLDED, RA_TAG_ALL, NULL);
    ck_assert_msg(dump[0] == '\0', "%s", dump);
    free(dump);
    free_all(after, 20);
}
END_TEST

/* A sampled block is at least 4 KiB whatever was asked for: a sized free
 * (ra_free_sized, free_sized, C++ sized delete) that names the size asked
 * for must still free it as what it is. The damage of freeing it as a
 * smaller size class shows when the thread's cache is flushed. */
START_TEST(test_prof_sized_free_of_sampled_blocks)
{
    ra_tag_t tag = tu_tag_create("prof-sized");
    static void *blocks[2000];
    ra_tag_stats_t st;
    size_t failed;

    ck_assert_int_eq(ra_prof_start(1), 0);
    tu_tag_push(tag);
    failed = prof_site_small(blocks, 2000);
    tu_tag_pop(tag);
    ck_assert_uint_eq(failed, 0);
    for (size_t i = 0; i < 2000; i++)
        ra_free_sized(blocks[i], SMALL_SIZE);
    ck_assert_uint_eq(heap_site(tag, "prof_site_small").live, 0);
    ra_thread_flush();
    st = tu_tag_stats(tag);
    ck_assert_uint_eq(st.allocated, 0);
    /* The tag's blocks of that size class still work. */
    tu_tag_push(tag);
    failed = prof_site_small(blocks, 2000);
    tu_tag_pop(tag);
    ck_assert_uint_eq(failed, 0);
    free_all(blocks, 2000);
    ra_thread_flush();
    st = tu_tag_stats(tag);
    ck_assert_uint_eq(st.allocated, 0);
}
END_TEST

/* Starting again with another interval takes effect at once, on a thread
 * that has been counting down the old one, and keeps the samples taken. */
START_TEST(test_prof_new_interval_takes_effect_at_once)
{
    ra_tag_t tag = tu_tag_create("prof-restart");
    static void *first[1], *blocks[100];
    struct heap_counts c;
    size_t failed;

    ck_assert_int_eq(ra_prof_start(64 * KIB), 0);
    tu_tag_push(tag);
    failed = prof_site_medium(first, 1);
    tu_tag_pop(tag);
    ck_assert_int_eq(ra_prof_start(1), 0);
    tu_tag_push(tag);
    failed += prof_site_small(blocks, 100);
    tu_tag_pop(tag);
    ck_assert_uint_eq(failed, 0);
    c = heap_site(tag, "prof_site_small");
    ck_assert_uint_eq(c.live, 100);
    free_all(first, 1);
    free_all(blocks, 100);
}
END_TEST

/* -- "threads" ------------------------------------------------------------------
 * Two workers, each under its own tag, allocate blocks and hand them to the
 * other, which reallocates one in four and frees them all; a third thread
 * dumps the profile in every format the whole time. At interval 1 every
 * allocation is a sample: at the end nothing is live and the cumulative
 * count is the number of allocations made. */

#define XT_WORKERS 2
#define XT_BLOCKS 20000

struct xt_worker {
    ra_tag_t tag;
    void *blocks[XT_BLOCKS];
    _Atomic size_t published; /* blocks[0..published) are ready */
    size_t failed;
    struct xt_worker *peer;
};

static atomic_bool xt_done;
static _Atomic unsigned long xt_dumps, xt_dump_failures;

size_t prof_site_thread(struct xt_worker *w, size_t i);

SITE size_t prof_site_thread(struct xt_worker *w, size_t i)
{
    void *p = ra_malloc(16 + (i * 37) % 3000);

    w->blocks[i] = p;
    return p == NULL;
}

/* Frees (or reallocates, then frees) the peer's blocks [from, to). */
static void xt_take(struct xt_worker *w, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        void *p = w->peer->blocks[i];
        if (i % 4 == 0) {
            void *q = ra_realloc(p, 5000 + i % 7);
            if (q == NULL)
                w->failed++;
            else
                p = q;
        }
        ra_free(p);
    }
}

static void *xt_work(void *arg)
{
    struct xt_worker *w = arg;
    size_t taken = 0;

    if (ra_tag_push(w->tag) != 0) {
        w->failed++;
        return NULL;
    }
    for (size_t i = 0; i < XT_BLOCKS; i++) {
        size_t ready;
        w->failed += prof_site_thread(w, i);
        atomic_store_explicit(&w->published, i + 1, memory_order_release);
        ready = atomic_load_explicit(&w->peer->published,
                                     memory_order_acquire);
        xt_take(w, taken, ready);
        taken = ready;
    }
    while (taken < XT_BLOCKS) {
        size_t ready = atomic_load_explicit(&w->peer->published,
                                            memory_order_acquire);
        if (ready == taken)
            sched_yield();
        xt_take(w, taken, ready);
        taken = ready;
    }
    ra_tag_pop(w->tag);
    return NULL;
}

static void *xt_dump(void *arg)
{
    FILE *f = fopen("/dev/null", "w");

    (void)arg;
    if (f == NULL) {
        atomic_fetch_add(&xt_dump_failures, 1);
        return NULL;
    }
    /* At least one dump of each format, and on until the workers end. */
    for (unsigned n = 0; n < 4 || !atomic_load(&xt_done); n++) {
        if (ra_prof_dump(f, (ra_prof_format_t)(n % 4), RA_TAG_ALL) != 0)
            atomic_fetch_add(&xt_dump_failures, 1);
        atomic_fetch_add(&xt_dumps, 1);
    }
    fclose(f);
    return NULL;
}

START_TEST(test_prof_threads_lose_and_double_count_nothing)
{
    static struct xt_worker w[XT_WORKERS];
    pthread_t workers[XT_WORKERS], dumper;
    struct heap_counts total, site;
    uint64_t max_live;
    char *dump;

    w[0].tag = tu_tag_create("prof-xt0");
    w[1].tag = tu_tag_create("prof-xt1");
    w[0].peer = &w[1];
    w[1].peer = &w[0];
    ck_assert_int_eq(ra_prof_start(1), 0);
    ck_assert_int_eq(pthread_create(&dumper, NULL, xt_dump, NULL), 0);
    for (unsigned i = 0; i < XT_WORKERS; i++)
        ck_assert_int_eq(pthread_create(&workers[i], NULL, xt_work, &w[i]),
                         0);
    for (unsigned i = 0; i < XT_WORKERS; i++)
        ck_assert_int_eq(pthread_join(workers[i], NULL), 0);
    atomic_store(&xt_done, true);
    ck_assert_int_eq(pthread_join(dumper, NULL), 0);
    ck_assert_uint_eq(w[0].failed + w[1].failed, 0);
    ck_assert_uint_eq(atomic_load(&xt_dump_failures), 0);
    ck_assert_uint_ge(atomic_load(&xt_dumps), 4);

    dump = tu_prof_dump_string(RA_PROF_HEAP_V2, RA_TAG_ALL, NULL);
    site = heap_v2_read(dump, "prof_site_thread", &total, &max_live);
    free(dump);
    ck_assert_uint_eq(max_live, 0);
    ck_assert_uint_eq(total.live, 0);
    ck_assert_uint_eq(total.live_bytes, 0);
    /* At interval 1 every realloc is sampled too: one block in four of
     * each worker's peer is reallocated (xt_take). */
    ck_assert_uint_eq(total.alloc,
                      XT_WORKERS * XT_BLOCKS + XT_WORKERS * XT_BLOCKS / 4);
    ck_assert_uint_eq(site.alloc, XT_WORKERS * XT_BLOCKS);
    for (unsigned i = 0; i < XT_WORKERS; i++) {
        site = heap_site(w[i].tag, "prof_site_thread");
        ck_assert_uint_eq(site.alloc, XT_BLOCKS);
        ck_assert_uint_eq(site.live, 0);
    }
    dump = tu_prof_dump_string(RA_PROF_FOLDED, RA_TAG_ALL, NULL);
    ck_assert_msg(dump[0] == '\0', "live stacks left: %.300s", dump);
    free(dump);
}
END_TEST

/* -- "environment" ------------------------------------------------------------ */

/* Children: the profiler was started (or not) by the environment. */
static int child_profiled_from_the_start(void)
{
    ra_tag_t tag = ra_tag_create("prof-env");
    static void *blocks[50];
    FILE *f;
    char *buf = NULL;
    size_t len = 0;
    int rc;

    TU_REQUIRE(tag != RA_TAG_NONE);
    TU_REQUIRE(ra_tag_push(tag) == 0);
    prof_site_small(blocks, 50);
    TU_REQUIRE(ra_tag_pop(tag) == 0);
    f = open_memstream(&buf, &len);
    TU_REQUIRE(f != NULL);
    rc = ra_prof_dump(f, RA_PROF_FOLDED, tag);
    fclose(f);
    TU_REQUIRE(rc == 0);
    /* Interval 1: exact. */
    TU_REQUIRE(folded_site(buf, "prof-env", "prof_site_small").bytes ==
               50 * SMALL_SIZE);
    free(buf);
    TU_REQUIRE(ra_prof_stop() == 0);
    free_all(blocks, 50);
    return 0;
}

static int child_not_profiled(void)
{
    FILE *f = fopen("/dev/null", "w");

    TU_REQUIRE(f != NULL);
    TU_REQUIRE(ra_enabled());
    errno = 0;
    TU_REQUIRE(ra_prof_dump(f, RA_PROF_FOLDED, RA_TAG_ALL) == -1 &&
               errno == ENOTSUP);
    fclose(f);
    return 0;
}

/* Leaves blocks of two sites live at exit, under REGIONALLOC_PROF=1. */
static int child_exit_with_samples(void)
{
    ra_tag_t tag = ra_tag_create("prof-exit");
    static void *small[30], *medium[3];

    TU_REQUIRE(tag != RA_TAG_NONE);
    TU_REQUIRE(ra_tag_push(tag) == 0);
    prof_site_small(small, 30);
    prof_site_medium(medium, 3);
    TU_REQUIRE(ra_tag_pop(tag) == 0);
    return 0;
}

START_TEST(test_prof_env_starts_profiler_at_first_use)
{
    static const char *const env[] = {"REGIONALLOC_PROF=1", NULL};
    int status = tu_exec_self(env, "profiled", err, sizeof err);

    ck_assert_msg(status == 0, "child exited with %d; stderr: %s", status,
                  err);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
}
END_TEST

START_TEST(test_prof_env_accepts_size_suffixes)
{
    static const char *const env[] = {"REGIONALLOC_PROF=512K", NULL};
    int status = tu_exec_self(env, "started", err, sizeof err);

    ck_assert_msg(status == 0, "child exited with %d; stderr: %s", status,
                  err);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
}
END_TEST

static int child_started(void)
{
    FILE *f = fopen("/dev/null", "w");

    TU_REQUIRE(f != NULL);
    (void)ra_enabled();
    TU_REQUIRE(ra_prof_dump(f, RA_PROF_FOLDED, RA_TAG_ALL) == 0);
    TU_REQUIRE(ra_prof_stop() == 0);
    fclose(f);
    return 0;
}

START_TEST(test_prof_env_bad_value_warns_once_and_does_not_profile)
{
    static const char *const bad[] = {"REGIONALLOC_PROF=0", "REGIONALLOC_PROF=-5",
                                      "REGIONALLOC_PROF=12Q",
                                      "REGIONALLOC_PROF=yes"};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *env[] = {bad[i], NULL};
        int status = tu_exec_self(env, "not_profiled", err, sizeof err);

        ck_assert_msg(status == 0, "%s: child exited with %d; stderr: %s",
                      bad[i], status, err);
        ck_assert_msg(tu_count_lines(err) == 1, "%s: want one line: %s",
                      bad[i], err);
        ck_assert_msg(strstr(err, "REGIONALLOC_PROF=") != NULL,
                      "%s: variable not named: %s", bad[i], err);
    }
}
END_TEST

/* REGIONALLOC_PROF_DUMP=<path>: a dump at exit, in the format of the
 * path's suffix. Returns the file's contents (free() it). */
static char *exit_dump(const char *suffix)
{
    char path[4096], setting[4200];
    const char *dir = getenv("TMPDIR");
    const char *env[] = {"REGIONALLOC_PROF=1", setting, NULL};
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    int status;

    snprintf(path, sizeof path, "%s/check_prof.%d%s",
             dir != NULL && dir[0] != '\0' ? dir : "/tmp", (int)getpid(),
             suffix);
    unlink(path);
    snprintf(setting, sizeof setting, "REGIONALLOC_PROF_DUMP=%s", path);
    status = tu_exec_self(env, "exit_with_samples", err, sizeof err);
    ck_assert_msg(status == 0, "child exited with %d; stderr: %s", status,
                  err);
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no dump written at exit to %s; stderr: %s",
                  path, err);
    if (getdelim(&buf, &len, '\0', f) < 0) {
        free(buf);
        buf = calloc(1, 1);
        ck_assert_ptr_nonnull(buf);
    }
    fclose(f);
    unlink(path);
    return buf;
}

START_TEST(test_prof_env_dump_at_exit_folded)
{
    char *out = exit_dump(".folded");

    ck_assert_uint_eq(check_folded_syntax(out), 2);
    ck_assert_uint_eq(folded_site(out, "prof-exit", "prof_site_small").bytes,
                      30 * SMALL_SIZE);
    ck_assert_uint_eq(folded_site(out, "prof-exit", "prof_site_medium").bytes,
                      3 * MEDIUM_SIZE);
    free(out);
}
END_TEST

START_TEST(test_prof_env_dump_at_exit_heap_v2)
{
    char *out = exit_dump(".heap");
    struct heap_counts total;

    /* The child's addresses are not ours to name; the totals say enough. */
    heap_v2_read(out, NULL, &total, NULL);
    ck_assert_uint_eq(total.live, 33);
    ck_assert_uint_eq(total.live_bytes, 30 * SMALL_SIZE + 3 * MEDIUM_SIZE);
    ck_assert_msg(strstr(out, "\nMAPPED_LIBRARIES:\n") != NULL, "%.300s", out);
    free(out);
}
END_TEST

START_TEST(test_prof_env_dump_at_exit_tree_otherwise)
{
    char *out = exit_dump(".txt");
    char want[128];

    snprintf(want, sizeof want, "tag prof-exit\nAll (%d, #33)\n",
             30 * SMALL_SIZE + 3 * MEDIUM_SIZE);
    ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%.300s", out);
    free(out);
}
END_TEST

START_TEST(test_prof_env_dump_at_exit_pprof)
{
    char *out = exit_dump(".pb.gz");

    /* gzip's magic number; the content is tests/test_prof_tools.sh's. */
    ck_assert_msg((unsigned char)out[0] == 0x1f && (unsigned char)out[1] == 0x8b,
                  "not gzip: %02x %02x", (unsigned char)out[0],
                  (unsigned char)out[1]);
    free(out);
}
END_TEST

static Suite *prof_suite(void)
{
    Suite *s = suite_create("prof");
    TCase *tc;

    tc = tcase_create("errors");
    tcase_add_test(tc, test_prof_huge_request_fails_with_enomem);
    tcase_add_test(tc, test_prof_start_rejects_interval_0);
    tcase_add_test(tc, test_prof_stop_when_not_started_fails);
    tcase_add_test(tc, test_prof_dump_before_start_is_not_supported);
    tcase_add_test(tc, test_prof_dump_rejects_bad_arguments);
    tcase_add_test(tc, test_prof_not_supported_in_pass_through_mode);
    suite_add_tcase(s, tc);

    tc = tcase_create("accuracy");
    tcase_add_test(tc, test_prof_estimates_within_10_percent_at_64_kib);
    tcase_add_test(tc, test_prof_exact_at_interval_1);
    tcase_add_test(tc, test_prof_tree_totals_at_interval_1);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("what is sampled");
    tcase_add_test(tc, test_prof_realloc_of_sampled_block_leaves_profile);
    tcase_add_test(tc, test_prof_untagged_allocations_are_never_sampled);
    tcase_add_test(tc, test_prof_stop_keeps_profile_and_frees_leave_it);
    tcase_add_test(tc, test_prof_sized_free_of_sampled_blocks);
    tcase_add_test(tc, test_prof_new_interval_takes_effect_at_once);
    suite_add_tcase(s, tc);

    tc = tcase_create("threads");
    tcase_add_test(tc, test_prof_threads_lose_and_double_count_nothing);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("environment");
    tcase_add_test(tc, test_prof_env_starts_profiler_at_first_use);
    tcase_add_test(tc, test_prof_env_accepts_size_suffixes);
    tcase_add_test(tc, test_prof_env_bad_value_warns_once_and_does_not_profile);
    tcase_add_test(tc, test_prof_env_dump_at_exit_folded);
    tcase_add_test(tc, test_prof_env_dump_at_exit_heap_v2);
    tcase_add_test(tc, test_prof_env_dump_at_exit_tree_otherwise);
    tcase_add_test(tc, test_prof_env_dump_at_exit_pprof);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    static const struct tu_child children[] = {
        {"pass_through", child_prof_in_pass_through},
        {"profiled", child_profiled_from_the_start},
        {"started", child_started},
        {"not_profiled", child_not_profiled},
        {"exit_with_samples", child_exit_with_samples},
        {NULL, NULL},
    };

    tu_child_main(argc, argv, children);
    return tu_run_suite(prof_suite());
}

/* Suite "resident (unit)": what resident.c counts of a range, held against
 * the kernel's own accounts of the same pages: smaps' Rss (which leaves the
 * zero page out, as RssAnon does) and mincore (which counts it). Pages
 * only read map the zero page; pages written are the process's; after a
 * fork, pages written before it are shared with the other process and
 * still count in both. */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "measure.h"
#include "region.h"
#include "testutil.h"

#define PAGES 64u

static size_t page;

static void setup(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
}

/* A fresh private mapping of PAGES pages: the first 16 only read, the next
 * 16 written, the rest never touched. */
static char *mapping(void)
{
    char *m = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    volatile char sink = 0;

    ck_assert_ptr_ne(m, MAP_FAILED);
    /* Not merged with a neighbour into one line of smaps. */
    ck_assert_int_eq(madvise(m, PAGES * page, MADV_NOHUGEPAGE), 0);
    for (unsigned i = 0; i < 16; i++)
        sink += ((volatile char *)m)[i * page];
    (void)sink;
    for (unsigned i = 16; i < 32; i++)
        m[i * page] = 1;
    return m;
}

static size_t counted(const char *m)
{
    int fd = ra__resident_open();
    size_t bytes = SIZE_MAX;

    ck_assert_int_ge(fd, 0);
    ck_assert(!ra__resident_range(fd, (uintptr_t)m,
                                  (uintptr_t)m + PAGES * page, &bytes));
    close(fd);
    return bytes;
}

static size_t by_mincore(char *m)
{
    unsigned char vec[PAGES];
    size_t n = 0;

    ck_assert_int_eq(mincore(m, PAGES * page, vec), 0);
    for (unsigned i = 0; i < PAGES; i++)
        n += vec[i] & 1;
    return n * page;
}

/* smaps' Rss of the mapping that starts at m, in bytes. */
static size_t by_smaps(const char *m)
{
    char line[512], head[32];
    FILE *f = fopen("/proc/self/smaps", "re");
    bool in = false;
    size_t rss = SIZE_MAX;

    ck_assert_ptr_nonnull(f);
    snprintf(head, sizeof head, "%lx-", (unsigned long)(uintptr_t)m);
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, head, strlen(head)) == 0)
            in = true;
        else if (in && strncmp(line, "Rss:", 4) == 0) {
            rss = strtoull(line + 4, NULL, 10) * 1024;
            break;
        }
    }
    fclose(f);
    ck_assert_msg(rss != SIZE_MAX, "no smaps entry for %p", (void *)m);
    return rss;
}

/* Whether pagemap shows this process frames (CAP_SYS_ADMIN). */
static bool frames_visible(const char *written)
{
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    uint64_t e = 0;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &e, sizeof e,
                           (off_t)((uintptr_t)written / page * sizeof e)),
                     (ssize_t)sizeof e);
    close(fd);
    return (e & (((uint64_t)1 << 55) - 1)) != 0;
}

START_TEST(test_resident_unit_zero_page_is_no_ones)
{
    char *m = mapping();
    size_t mine = counted(m);

    /* mincore counts the 16 pages only read (they map the zero page). */
    ck_assert_uint_eq(by_mincore(m), 32 * page);
    ck_assert_uint_eq(by_smaps(m), 16 * page);
    /* Check runs this test in a forked child: without frames, a page only
     * read cannot be told from one shared with the parent. */
    if (frames_visible(m + 16 * page))
        ck_assert_uint_eq(mine, 16 * page);
    else
        ck_assert_uint_ge(mine, 16 * page);
    munmap(m, PAGES * page);
}
END_TEST

/* Pages written before a fork are both processes', the kernel says: the
 * child counts them. */
START_TEST(test_resident_unit_pages_shared_with_a_child_count)
{
    char *m = mapping();
    int status;
    pid_t child = fork();

    ck_assert_int_ge(child, 0);
    if (child == 0) {
        size_t mine, rss;
        ra__resident_forked();
        mine = counted(m);
        rss = by_smaps(m);
        if (rss != 16 * page ||
            (frames_visible(m + 16 * page) ? mine != rss : mine < rss))
            _exit(1);
        _exit(0);
    }
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the child's count disagrees with its smaps");
    munmap(m, PAGES * page);
}
END_TEST

/* A region's count while a thread of its tag carves and touches more of
 * the arena's metadata (--wrap=ra__metadata_blocks: as the count lists
 * the metadata blocks, 4 MiB of the tag's block is written and noted as
 * one). The metadata counted is within the region's count, whichever
 * comes first. */
static struct {
    ra_tag_t tag;
    char *block;
    size_t size;
} carving;

unsigned __real_ra__metadata_blocks(ra_tag_t tag, struct ra__range *out,
                                    unsigned max);
unsigned __wrap_ra__metadata_blocks(ra_tag_t tag, struct ra__range *out,
                                    unsigned max);
unsigned __wrap_ra__metadata_blocks(ra_tag_t tag, struct ra__range *out,
                                    unsigned max)
{
    if (carving.block != NULL && tag == carving.tag) {
        memset(carving.block, 1, carving.size);
        ra__metadata_block_add(tag, (uintptr_t)carving.block, carving.size);
        carving.block = NULL;
    }
    return __real_ra__metadata_blocks(tag, out, max);
}

START_TEST(test_resident_unit_metadata_carved_during_a_count_is_within_it)
{
    struct ra__measure m;

    carving.tag = tu_tag_create("carving");
    carving.size = (size_t)4 << 20;
    carving.block = ra_malloc_tag(carving.tag, carving.size);
    ck_assert_ptr_nonnull(carving.block);
    ck_assert(!ra__measure_tag(carving.tag, &m));
    ck_assert_ptr_null(carving.block);
    ck_assert_uint_ge(m.metadata, carving.size);
    ck_assert_msg(m.metadata <= m.resident,
                  "metadata %" PRIu64 " above the region's %" PRIu64,
                  m.metadata, m.resident);
}
END_TEST

START_TEST(test_resident_unit_bad_descriptor_fails)
{
    size_t bytes = 7;

    ck_assert(ra__resident_range(-1, 0, (uintptr_t)page, &bytes));
    ck_assert_uint_eq(bytes, 7);
}
END_TEST

static Suite *resident_suite(void)
{
    Suite *s = suite_create("resident (unit)");
    TCase *tc = tcase_create("pagemap");

    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_resident_unit_zero_page_is_no_ones);
    tcase_add_test(tc, test_resident_unit_pages_shared_with_a_child_count);
    tcase_add_test(tc, test_resident_unit_bad_descriptor_fails);
    tcase_add_test(tc,
                   test_resident_unit_metadata_carved_during_a_count_is_within_it);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(resident_suite());
}

/* Suite "region names": each tag's region is named in /proc/self/maps
 * ([anon:regionalloc:<tag>]) where the kernel names anonymous mappings
 * (PR_SET_VMA_ANON_NAME, Linux 5.17). On a kernel without it the program
 * exits 77 before it runs the suite, so that make check shows a skip, never
 * a pass that checked nothing (Check cannot skip one test). */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "regionalloc.h"
#include "testutil.h"

/* Whether this kernel names anonymous mappings, asked of a private mapping
 * of the test's own; errno says why not. */
static bool kernel_names_mappings(void)
{
    long page = sysconf(_SC_PAGESIZE);
    void *m = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int rc, err;

    if (m == MAP_FAILED)
        return false;
    rc = prctl(0x53564d41 /* PR_SET_VMA */, 0 /* _ANON_NAME */,
               (unsigned long)m, (unsigned long)page, (unsigned long)"probe");
    err = errno;
    munmap(m, (size_t)page);
    errno = err;
    return rc == 0;
}

/* Whether /proc/self/maps has a line holding name. */
static bool maps_name(const char *name)
{
    char line[512];
    bool found = false;
    FILE *maps = fopen("/proc/self/maps", "re");

    ck_assert_ptr_nonnull(maps);
    while (!found && fgets(line, sizeof line, maps) != NULL)
        found = strstr(line, name) != NULL;
    fclose(maps);
    return found;
}

/* A plain name as it is; one with characters a maps line cannot carry
 * ('[', ']', '$') with each replaced by '_'. */
START_TEST(test_region_names_show_in_maps)
{
    ra_tag_t plain = tu_tag_create("names-a");
    ra_tag_t odd = tu_tag_create("odd [name]$");
    void *p = ra_malloc_tag(plain, 100), *q = ra_malloc_tag(odd, 100);

    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    ck_assert(maps_name("[anon:regionalloc:names-a]"));
    ck_assert(maps_name("[anon:regionalloc:odd _name__]"));
    ra_free(p);
    ra_free(q);
}
END_TEST

static Suite *region_names_suite(void)
{
    Suite *s = suite_create("region names");
    TCase *tc = tcase_create("maps");

    tcase_add_test(tc, test_region_names_show_in_maps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!kernel_names_mappings()) {
        printf("SKIP: this kernel does not name anonymous mappings (%s): "
               "the regions' names are not checked\n",
               strerror(errno));
        return 77;
    }
    return tu_run_suite(region_names_suite());
}

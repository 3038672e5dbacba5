/* tests/test_frame_names.sh's program, built there as a user builds one
 * (-O1 -g, no -rdynamic: its functions are in .symtab only): static
 * functions allocate under the tag "names" with the profiler sampling
 * every byte, one through a function inlined into its caller, one through
 * the C library's strdup; then it writes the profile in every format into
 * DIR and prints the facts to check, "line FUNCTION LINE" for each
 * allocating line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <regionalloc.h>

#include "prof_dump_file.h"

#define KEPT 64
static void *kept[KEPT];
static int nkept;
static int parse_line, fill_line, index_line, copy_line;

static __attribute__((noinline)) void parse_record(size_t size)
{
    kept[nkept++] = malloc(size); parse_line = __LINE__;
    __asm__ volatile("" ::: "memory");
}

static inline __attribute__((always_inline)) void fill_index(size_t size)
{
    kept[nkept++] = malloc(size); fill_line = __LINE__;
}

static __attribute__((noinline)) void build_index(size_t size)
{
    fill_index(size); index_line = __LINE__;
    __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void copy_name(const char *name)
{
    kept[nkept++] = strdup(name); copy_line = __LINE__;
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
    ra_tag_t tag;
    int failed = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    tag = ra_tag_create("names");
    if (tag == RA_TAG_NONE || ra_prof_start(1) != 0 ||
        ra_tag_push(tag) != 0) {
        perror("setup");
        return 1;
    }
    parse_record(100000);
    build_index(200000);
    copy_name("a name copied by the C library");
    ra_tag_pop(tag);
    printf("line parse_record %d\n", parse_line);
    printf("line fill_index %d\n", fill_line);
    printf("line build_index %d\n", index_line);
    printf("line copy_name %d\n", copy_line);
    failed |= dump(argv[1], "names.folded", RA_PROF_FOLDED);
    failed |= dump(argv[1], "names.tree", RA_PROF_TREE);
    failed |= dump(argv[1], "names.pb.gz", RA_PROF_PPROF);
    for (int i = 0; i < nkept; i++)
        free(kept[i]);
    return failed;
}

/* Helper of tests/test_prof_tools.sh (not a test by itself): profiles every
 * allocation (interval 1, so the figures are exact) of three call sites
 * under two tags, frees some of the blocks, and writes the profile into the
 * directory given as argv[1] in each format:
 *
 *   demo.tree  demo.folded  demo.heap  demo.pb.gz
 *
 * On stdout it prints what the files must say, one fact a line:
 *
 *   tag <id> <name as hex bytes>
 *   site <function> <tag id> <live bytes> <live blocks> <bytes> <blocks>
 *
 * (the last two: every block the site allocated, freed ones included).
 * Linked with -export-dynamic, so that dladdr names the sites, and
 * -no-install, so that /proc/self/maps names the program itself (what
 * jeprof and pprof look for), not a libtool wrapper.
 * Exit status 0, or 1 after a message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <regionalloc.h>

#define MAX_BLOCKS 1024

static void *blocks[MAX_BLOCKS];
static size_t nblocks;

#define SITE_ON_NULL(name)                                                  \
    do {                                                                    \
        perror(#name);                                                      \
        exit(1);                                                            \
    } while (0)
#include "prof_sites.h"
#include "prof_dump_file.h"

DEFINE_SITE(demo_site_parse)
DEFINE_SITE(demo_site_index)
DEFINE_SITE(demo_site_postings)

static void print_tag(ra_tag_t tag)
{
    printf("tag %u ", tag);
    for (const char *s = ra_tag_name(tag); *s != '\0'; s++)
        printf("%02x", (unsigned char)*s);
    printf("\n");
}

int main(int argc, char **argv)
{
    ra_tag_t parse, index;
    size_t first;
    int failed = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    if (!ra_enabled()) {
        fprintf(stderr, "%s: libregionalloc is in pass-through mode\n",
                argv[0]);
        return 1;
    }
    parse = ra_tag_create("parse");
    /* A name with the folded format's separators in it. */
    index = ra_tag_create("index; main");
    if (parse == RA_TAG_NONE || index == RA_TAG_NONE ||
        ra_prof_start(1) != 0) {
        perror("setup");
        return 1;
    }
    /* 20 blocks, the first 10 of which are freed again. */
    first = nblocks;
    demo_site_parse(parse, 20, 100000);
    for (size_t i = first; i < first + 10; i++)
        ra_free(blocks[i]);
    demo_site_index(index, 5, 400000);
    demo_site_postings(index, 300, 96);
    print_tag(parse);
    print_tag(index);
    printf("site demo_site_parse %u 1000000 10 2000000 20\n", parse);
    printf("site demo_site_index %u 2000000 5 2000000 5\n", index);
    printf("site demo_site_postings %u 28800 300 28800 300\n", index);
    failed |= dump(argv[1], "demo.tree", RA_PROF_TREE);
    failed |= dump(argv[1], "demo.folded", RA_PROF_FOLDED);
    failed |= dump(argv[1], "demo.heap", RA_PROF_HEAP_V2);
    failed |= dump(argv[1], "demo.pb.gz", RA_PROF_PPROF);
    return failed;
}

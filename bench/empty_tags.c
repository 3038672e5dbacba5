/* Resident cost of empty tags: create 256 tags and do one malloc(16) and
 * free under each (`empty_tags tagged`), or the same with 256 mimalloc heaps
 * (`empty_tags mimalloc`), in a process of its own; prints the RSS delta per
 * tag or heap. A tag's cost is its arena's metadata and the calling thread's
 * cache for it. */
#include <stdio.h>
#include <string.h>

#include <regionalloc.h>

#include "contenders.h"

#define NTAGS 256

static const char *workload = "256 empty tags: RSS per tag";

int main(int argc, char **argv)
{
    const char *who = argc == 2 ? argv[1] : "";
    size_t before, after;
    const char *name;

    bench_open_contenders();
    free(malloc(16)); /* the library's own start-up is not a tag's cost */
    before = bench_rss_bytes();
    if (strcmp(who, "tagged") == 0) {
        name = NAME_TAGGED;
        for (unsigned i = 0; i < NTAGS; i++) {
            char tag_name[32];
            ra_tag_t t;
            snprintf(tag_name, sizeof tag_name, "empty-%u", i);
            if ((t = ra_tag_create(tag_name)) == RA_TAG_NONE ||
                ra_tag_push(t) != 0) {
                perror("ra_tag_create/ra_tag_push");
                return 1;
            }
            free(malloc(16));
            ra_tag_pop(t);
        }
    } else if (strcmp(who, "mimalloc") == 0) {
        name = NAME_MIMALLOC;
        if (bench_mi_missing) {
            bench_row_missing(workload, name, bench_mi_missing);
            return 0;
        }
        for (unsigned i = 0; i < NTAGS; i++) {
            mi_heap_t *h = bench_mi.heap_new();
            if (h == NULL)
                bench_die("mi_heap_new");
            bench_mi.free(bench_mi.heap_malloc(h, 16));
        }
    } else {
        fprintf(stderr, "usage: %s tagged|mimalloc\n", argv[0]);
        return 2;
    }
    after = bench_rss_bytes();
    if (before == 0 || after < before)
        bench_die("cannot read /proc/self/statm");
    bench_row(workload, name, (after - before) / 1024.0 / NTAGS, "KiB/tag", -1,
              (after - before) / 1024.0 / NTAGS,
              (after - before) / 1024.0 / NTAGS);
    return 0;
}

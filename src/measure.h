/* Floor: tags. What the kernel counts resident, measured (resident.c)
 * and kept for the reports (measure.c): the declarations of both. */
#ifndef RA_MEASURE_H
#define RA_MEASURE_H

#include "internal.h"

/* -- resident.c: pages the kernel counts the process's --------------------- */
/* /proc/self/pagemap opened (close it with close(2)), or -1 with errno. */
int ra__resident_open(void);
/* The bytes of [start, end) the process owns resident, as RssAnon counts
 * them (the zero page left out), into *bytes, read through fd
 * (ra__resident_open). Returns true on failure (nothing written). */
bool ra__resident_range(int fd, uintptr_t start, uintptr_t end,
                        size_t *bytes);
/* The process, or the one it came from, has forked: pages it shares with
 * another process may be its own (fork handlers). */
void ra__resident_forked(void);

/* -- measure.c: the regions' figures, measured off the callers' paths ------ */
/* A region as the kernel counted it: the bytes resident in what its
 * arenas were given (the tag's blocks, its free pages, its arenas'
 * metadata) and, of those, in its arenas' metadata; when (ra__clock_ns;
 * 0: never measured); and what the region held committed then (its
 * mapped), from which the readers follow it until the next measure. */
struct ra__measure {
    uint64_t resident, metadata, at_ns, mapped;
};
/* Tag's region as last measured into *out; false (out zeroed) when it
 * never was. Lock-free. */
bool ra__measure_read(ra_tag_t tag, struct ra__measure *out);
/* Starts, once, the library's thread that measures every live tag's
 * region in turn, on a budget (measure.c): called by the readers that
 * want the figures kept fresh (ra_tag_stats, the snapshots), with no lock
 * of the library's held. A process whose thread cannot start keeps the
 * measures callers make. */
void ra__measure_start(void);
/* Measures tag's region now, on the caller's time, into *out when not
 * NULL. Returns true when the kernel cannot be asked (no /proc). */
bool ra__measure_tag(ra_tag_t tag, struct ra__measure *out);
/* Measures every live tag's region now (ra_stats_refresh, the detail
 * reports, the report at exit). */
void ra__measure_all(void);
/* The process's parts counted on the caller's time if they never were
 * (the first report of the process waits for them once). */
void ra__measure_parts_once(void);
/* The kernel's last counts of every region handed out, live or kept by a
 * destroyed tag's slot, summed: the tags' part of the process. */
uint64_t ra__measure_regions(void);
void ra__measure_prefork(void);
void ra__measure_postfork_parent(void);
/* The child has no measuring thread, and its own pagemap. */
void ra__measure_postfork_child(void);

/* -- parts.c: the process's memory and the parts named in it ---------------
 * As the last whole pass counted them (all bytes, the kernel's counts):
 * the process's RssAnon, RssFile, RssShmem and page tables
 * (/proc/self/status); what is resident of the untagged arenas' extents
 * and of jemalloc's metadata outside the regions (mappings_known: 0 where
 * the library does not see jemalloc's mappings, a build without the
 * override); the library's page table; the cgroup's memory (in_cgroup 0:
 * none found); when the pass ended (0: none yet). Every field is a
 * uint64_t (RA__PARTS_FIGURES of them). */
struct ra__parts {
    uint64_t rss_anon, rss_file, rss_shmem, page_tables;
    uint64_t extents, metadata, page_table, mappings_known;
    uint64_t in_cgroup, cgroup_current, cgroup_anon, cgroup_file,
        cgroup_limit;
    uint64_t at_ns;
};
#define RA__PARTS_FIGURES (sizeof(struct ra__parts) / sizeof(uint64_t))
void ra__parts_read(struct ra__parts *out);
/* Measures on through jemalloc's mappings with pagemap's descriptor, until
 * spent() says the caller's budget is spent (false: not done, the next
 * call goes on) or the pass is done and published (true). Called with
 * measure.c's lock held. */
bool ra__parts_measure(int pagemap, bool (*spent)(void));
/* Drops the pass under way: the next ra__parts_measure starts one from a
 * new copy of jemalloc's mappings. What the pass counted so far was the
 * kernel's count of then; a pass on a caller's time counts now. With
 * measure.c's lock held, or in a child after a fork. */
void ra__parts_restart(void);

#endif /* RA_MEASURE_H */

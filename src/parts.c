/* Floor: base. The process's resident memory as the kernel counts it, and
 * the parts the library can name in it, measured rather than inferred:
 * jemalloc's memory outside the tags' regions (mappings.c: the untagged
 * arenas' extents, and jemalloc's metadata, its bases' blocks, which begin
 * with their head), the library's page table,
 * each counted from pagemap as the tags' regions are (measure.c); the
 * process's RssAnon, RssFile and page tables from /proc/self/status; its
 * cgroup's memory. Measured by measure.c's thread, a pass over jemalloc's
 * mappings spread over its rounds when it cannot fit one; read by the
 * reports, which never wait for it. */
#include <stdatomic.h>
#include <string.h>

#include "backend.h"
#include "measure.h"
#include "region.h"

/* jemalloc's mappings taken at a pass's start (mappings.c's table holds
 * at most as many), and where the pass is: under measure.c's lock. */
#define PASS_MAX 4096u
static struct ra__range pass[PASS_MAX];
static unsigned npass, next;
static uint64_t pass_version, pass_extents, pass_metadata;

/* The last whole pass's figures, under a sequence count. */
static _Atomic uint32_t seq;
static _Atomic uint64_t fig[RA__PARTS_FIGURES];

static void publish(const uint64_t *v)
{
    uint32_t s = atomic_load_explicit(&seq, memory_order_relaxed);

    atomic_exchange_explicit(&seq, s + 1, memory_order_acq_rel);
    for (unsigned i = 0; i < RA__PARTS_FIGURES; i++)
        atomic_store_explicit(&fig[i], v[i], memory_order_relaxed);
    atomic_store_explicit(&seq, s + 2, memory_order_release);
}

void ra__parts_read(struct ra__parts *out)
{
    uint64_t v[RA__PARTS_FIGURES] = {0};
    uint32_t s;

    do {
        s = atomic_load_explicit(&seq, memory_order_acquire);
        for (unsigned i = 0; i < RA__PARTS_FIGURES; i++)
            v[i] = atomic_load_explicit(&fig[i], memory_order_acquire);
    } while ((s & 1) != 0 ||
             s != atomic_load_explicit(&seq, memory_order_relaxed));
    memcpy(out, v, sizeof *out);
}

/* What a pass ends with: the files the kernel keeps for the process, the
 * library's page table, and the pass's sums, published together. */
static void finish_pass(int pagemap)
{
    struct ra__proc_status status;
    struct ra__proc_cgroup group;
    struct ra__parts p;
    char dir[1024];
    uintptr_t start, end;
    size_t table = 0;

    memset(&p, 0, sizeof p);
    if (!ra__proc_status(&status)) {
        p.rss_anon = status.rss_anon;
        p.rss_file = status.rss_file;
        p.rss_shmem = status.rss_shmem;
        p.page_tables = status.page_tables;
    }
    ra__region_page_table(&start, &end);
    if (start < end)
        (void)ra__resident_range(pagemap, start, end, &table);
    p.page_table = table;
    p.extents = pass_extents;
    p.metadata = pass_metadata;
    p.mappings_known = ra__mappings_known();
    if (!ra__proc_cgroup_dir(ra__config_peek("REGIONALLOC_CGROUP_FS"), dir,
                             sizeof dir) &&
        !ra__proc_cgroup(dir, &group)) {
        p.in_cgroup = 1;
        p.cgroup_current = group.current;
        p.cgroup_anon = group.anon;
        p.cgroup_file = group.file;
        p.cgroup_limit = group.limit;
    }
    p.at_ns = ra__clock_ns();
    publish((const uint64_t *)&p);
}

bool ra__parts_measure(int pagemap, bool (*spent)(void))
{
    ra__assert_rank_held(RA__RANK_MEASURE);
    if (next == 0) {
        npass = ra__mappings_copy(pass, PASS_MAX, &pass_version);
        pass_extents = pass_metadata = 0;
    }
    for (; next < npass; next++) {
        size_t bytes;
        if (spent())
            return false;
        if (ra__resident_range(pagemap, pass[next].start, pass[next].end,
                               &bytes) ||
            bytes == 0)
            continue; /* unmapped since the copy, or nothing there */
        if (ra__mappings_is_base(&pass[next], pass, npass))
            pass_metadata += bytes;
        else
            pass_extents += bytes;
    }
    finish_pass(pagemap);
    next = 0;
    return true;
}

void ra__parts_restart(void)
{
    next = 0;
}

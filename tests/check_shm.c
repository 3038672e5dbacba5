/* Suite "shm": the live stats segment that REGIONALLOC_SHM=1 publishes in
 * /dev/shm/regionalloc.<pid>: its layout (src/shm_layout.h), figures
 * equal to the reports' (the process's parts too), records rewritten only
 * when they change, the seqlock, mode 0600, removal at exit by its owner
 * only. The reader, regionalloc-top, has tests/test_top.sh. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "regionalloc.h"
#include "shm_layout.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

static void path_of(pid_t pid, char *path, size_t len)
{
    snprintf(path, len, "/dev/shm/" RA_SHM_PREFIX "%ld", (long)pid);
}

/* A consistent copy of the segment of pid into buf (len bytes): 0, or -1
 * if it cannot be read or never holds still. */
static int read_segment(pid_t pid, void *buf, size_t len)
{
    struct ra_shm_header *h = buf;
    char path[64];

    path_of(pid, path, sizeof path);
    for (int attempt = 0; attempt < 1000; attempt++) {
        uint64_t seq;
        int fd = open(path, O_RDONLY);
        ssize_t n;
        if (fd < 0)
            return -1;
        n = pread(fd, buf, len, 0);
        close(fd);
        if (n < (ssize_t)sizeof *h)
            return -1;
        seq = h->seq;
        fd = open(path, O_RDONLY);
        if (fd < 0)
            return -1;
        if (pread(fd, &h->seq, sizeof h->seq, offsetof(struct ra_shm_header,
                                                         seq)) !=
            sizeof h->seq) {
            close(fd);
            return -1;
        }
        close(fd);
        if (seq % 2 == 0 && seq == h->seq)
            return 0;
        tu_sleep_ms(1);
    }
    return -1;
}

/* Waits (up to 30 s) for a publication that began after the call: the
 * one after the next, since the next may be under way already. */
static int wait_publication(pid_t pid, void *buf, size_t len)
{
    struct ra_shm_header *h = buf;
    uint64_t seen;

    if (read_segment(pid, buf, len) != 0)
        return -1;
    seen = h->published;
    for (int i = 0; i < 3000; i++) {
        tu_sleep_ms(10);
        if (read_segment(pid, buf, len) == 0 && h->published >= seen + 2)
            return 0;
    }
    return -1;
}

/* The number after "key": in doc, from where; false when there is none. */
static bool json_number(const char *from, const char *key, uint64_t *v)
{
    char pattern[64];
    const char *at;

    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    at = strstr(from, pattern);
    if (at == NULL)
        return false;
    *v = strtoull(at + strlen(pattern), NULL, 10);
    return true;
}

/* The process's parts as the process's own JSON report gives them, into
 * *p in the segment's form. Returns 0, or -1 if the report lacks one. */
static int report_parts(struct ra_shm_parts *p)
{
    static char doc[1 << 16];
    const struct {
        const char *key;
        uint64_t *field;
    } keys[] = {
        {"rss_anon", &p->rss_anon},   {"rss_file", &p->rss_file},
        {"page_tables", &p->page_tables}, {"tags", &p->tags},
        {"untagged", &p->untagged},   {"metadata", &p->metadata},
        {"library", &p->library},     {"other", &p->other},
        {"parts_over", &p->over},     {"parts_at_ns", &p->at_ns},
    };
    const char *process, *cgroup;
    FILE *f = fmemopen(doc, sizeof doc - 1, "w");

    memset(doc, 0, sizeof doc);
    memset(p, 0, sizeof *p);
    if (f == NULL || ra_report(f, RA_FORMAT_JSON) != 0 || fclose(f) != 0)
        return -1;
    /* The keys past "process" are its (and the memory limit's, after). */
    process = strstr(doc, "\"process\":");
    cgroup = process != NULL ? strstr(process, "\"cgroup\":") : NULL;
    if (cgroup == NULL)
        return -1;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!json_number(process, keys[i].key, keys[i].field))
            return -1;
    if (strstr(process, "\"jemalloc_measured\": true") != NULL)
        p->flags |= RA_SHM_PARTS_MEASURED;
    if (strncmp(cgroup, "\"cgroup\": null", 14) == 0)
        return 0;
    p->flags |= RA_SHM_PARTS_CGROUP;
    return json_number(cgroup, "current", &p->cgroup_current) &&
                   json_number(cgroup, "anon", &p->cgroup_anon) &&
                   json_number(cgroup, "file", &p->cgroup_file) &&
                   json_number(cgroup, "limit", &p->cgroup_limit)
               ? 0
               : -1;
}

/* -- children ------------------------------------------------------------------ */

static unsigned char segment[1 << 20];

static int child_publishes_exact_figures(void)
{
    struct ra_shm_header *h = (struct ra_shm_header *)segment;
    struct ra_shm_record *r = (struct ra_shm_record *)(h + 1);
    ra_tag_t cache = ra_tag_create("cache"), gone = ra_tag_create("gone");
    ra_tag_limit_t limit = {64 * MIB, 48 * MIB, NULL, NULL};
    void *blocks[8];
    struct stat st;
    char path[64];

    path_of(getpid(), path, sizeof path);
    TU_REQUIRE(stat(path, &st) == 0);
    TU_REQUIRE((st.st_mode & 0777) == 0600 && S_ISREG(st.st_mode));
    TU_REQUIRE((size_t)st.st_size == ra_shm_size(16));
    for (int i = 0; i < 8; i++)
        TU_REQUIRE((blocks[i] = ra_malloc_tag(cache, MIB)) != NULL);
    TU_REQUIRE(ra_tag_set_limit(cache, &limit) == 0);
    TU_REQUIRE(ra_tag_destroy(gone) == 0);
    TU_REQUIRE(wait_publication(getpid(), segment, sizeof segment) == 0);
    TU_REQUIRE(memcmp(h->magic, RA_SHM_MAGIC, 8) == 0);
    TU_REQUIRE(h->version == RA_SHM_VERSION);
    TU_REQUIRE(h->header_size == sizeof *h && h->record_size == sizeof *r);
    TU_REQUIRE(h->capacity == 16 && h->pid == getpid());
    TU_REQUIRE(h->interval_ns == 50000000u);
    TU_REQUIRE(h->nrecords == 2 && h->published >= 2);
    TU_REQUIRE(r[0].id == cache && r[0].flags == RA_SHM_RECORD_LIVE);
    TU_REQUIRE(strcmp(r[0].name, "cache") == 0);
    TU_REQUIRE(r[0].figures.allocated == 8 * MIB);
    TU_REQUIRE(r[0].figures.nmalloc == 8 && r[0].figures.ndalloc == 0);
    TU_REQUIRE(r[0].figures.limit == 64 * MIB);
    TU_REQUIRE(r[0].figures.soft_limit == 48 * MIB);
    TU_REQUIRE(r[0].figures.reserved > 0 && r[0].figures.mapped > 8 * MIB);
    /* The destroyed tag's record names nothing. */
    TU_REQUIRE(r[1].id == 2 && r[1].flags == 0 && r[1].name[0] == '\0');
    TU_REQUIRE(h->process.allocated >= 8 * MIB && h->process.rss > 0);
    for (int i = 0; i < 8; i++)
        ra_free(blocks[i]);
    ra_thread_flush();
    TU_REQUIRE(wait_publication(getpid(), segment, sizeof segment) == 0);
    TU_REQUIRE(r[0].figures.allocated == 0 && r[0].figures.ndalloc == 8);
    return 0;
}

/* A destroy that finds a few blocks live leaves them in the slot,
 * nobody's: the header says how many bytes, until a purge of everything
 * frees them. */
static int child_publishes_what_destroys_left(void)
{
    struct ra_shm_header *h = (struct ra_shm_header *)segment;
    ra_tag_t tag = ra_tag_create("leaves");
    void *a = ra_malloc_tag(tag, 100), *b = ra_malloc_tag(tag, 3000);
    size_t left;

    TU_REQUIRE(a != NULL && b != NULL);
    left = ra_malloc_usable_size(a) + ra_malloc_usable_size(b);
    TU_REQUIRE(wait_publication(getpid(), segment, sizeof segment) == 0);
    TU_REQUIRE(h->leftovers_allocated == 0);
    TU_REQUIRE(ra_tag_destroy(tag) == 0);
    TU_REQUIRE(wait_publication(getpid(), segment, sizeof segment) == 0);
    TU_REQUIRE(h->leftovers_allocated == left);
    TU_REQUIRE(ra_purge_all() == 0);
    TU_REQUIRE(wait_publication(getpid(), segment, sizeof segment) == 0);
    TU_REQUIRE(h->leftovers_allocated == 0);
    return 0;
}

/* Tag trees: each record names its parent and depth. */
static int child_publishes_the_tree(void)
{
    struct ra_shm_header *h = (struct ra_shm_header *)segment;
    struct ra_shm_record *r = (struct ra_shm_record *)(h + 1);
    ra_tag_t root = ra_tag_create("root");
    ra_tag_t a = ra_tag_create_in(root, "a");
    ra_tag_t aa = ra_tag_create_in(a, "aa");

    TU_REQUIRE(root != RA_TAG_NONE && a != RA_TAG_NONE && aa != RA_TAG_NONE);
    TU_REQUIRE(wait_publication(getpid(), segment, sizeof segment) == 0);
    TU_REQUIRE(h->version == 3 && h->nrecords == 3);
    TU_REQUIRE(r[root - 1].parent == 0 && r[root - 1].depth == 1);
    TU_REQUIRE(r[a - 1].parent == root && r[a - 1].depth == 2);
    TU_REQUIRE(r[aa - 1].parent == a && r[aa - 1].depth == 3);
    TU_REQUIRE(ra_tag_destroy(root) == 0);
    TU_REQUIRE(wait_publication(getpid(), segment, sizeof segment) == 0);
    for (unsigned i = 0; i < 3; i++)
        TU_REQUIRE(r[i].flags == 0 && r[i].parent == 0 && r[i].depth == 0);
    return 0;
}

/* The header's parts are the process's own report's: a report before and
 * one after a publication that agree (nothing moved meanwhile: the
 * kernel's counts, the library's memory) agree with the segment. */
static int child_publishes_the_parts(void)
{
    struct ra_shm_header *h = (struct ra_shm_header *)segment;
    struct ra_shm_parts before, after;
    ra_tag_t tag = ra_tag_create("parts");
    void *block = ra_malloc_tag(tag, 4 * MIB);
    size_t rss = 0;

    TU_REQUIRE(block != NULL);
    memset(block, 0x5a, 4 * MIB);
    /* Counted now: the library's thread may have counted the region
     * before the block was touched. */
    TU_REQUIRE(ra_tag_rss(tag, &rss) == 0 && rss >= 4 * MIB);
    for (int attempt = 0; attempt < 100; attempt++) {
        TU_REQUIRE(report_parts(&before) == 0);
        TU_REQUIRE(wait_publication(getpid(), segment, sizeof segment) == 0);
        TU_REQUIRE(report_parts(&after) == 0);
        if (memcmp(&before, &after, sizeof before) != 0)
            continue;
        if (memcmp(&h->parts, &before, sizeof before) != 0)
            fprintf(stderr,
                    "segment: rss_anon %llu tags %llu untagged %llu "
                    "metadata %llu library %llu other %llu over %llu at %llu"
                    "\nreport:  rss_anon %llu tags %llu untagged %llu "
                    "metadata %llu library %llu other %llu over %llu at %llu"
                    "\n",
                    (unsigned long long)h->parts.rss_anon,
                    (unsigned long long)h->parts.tags,
                    (unsigned long long)h->parts.untagged,
                    (unsigned long long)h->parts.metadata,
                    (unsigned long long)h->parts.library,
                    (unsigned long long)h->parts.other,
                    (unsigned long long)h->parts.over,
                    (unsigned long long)h->parts.at_ns,
                    (unsigned long long)before.rss_anon,
                    (unsigned long long)before.tags,
                    (unsigned long long)before.untagged,
                    (unsigned long long)before.metadata,
                    (unsigned long long)before.library,
                    (unsigned long long)before.other,
                    (unsigned long long)before.over,
                    (unsigned long long)before.at_ns);
        TU_REQUIRE(memcmp(&h->parts, &before, sizeof before) == 0);
        TU_REQUIRE(h->parts.tags >= 4 * MIB && h->parts.rss_anon > 0);
        TU_REQUIRE(h->parts.at_ns != 0 && h->parts.at_ns <= h->time_ns);
        ra_free(block);
        return 0;
    }
    TU_REQUIRE(!"the parts never held still over a publication");
    return 1;
}

/* Whether two copies of a record hold the same, but for written. */
static bool same_record(const struct ra_shm_record *a,
                        const struct ra_shm_record *b)
{
    return memcmp(a, b, offsetof(struct ra_shm_record, written)) == 0 &&
           memcmp(a->reserved_tail, b->reserved_tail,
                  sizeof a->reserved_tail) == 0;
}

/* Records are rewritten only when what they hold changes: across two
 * publications between which one tag allocates, the other's record keeps
 * its bytes and its written, the first's is rewritten. A record may
 * change on its own when the kernel counts its region again: then it is
 * rewritten too, and the comparison taken again. */
static int child_rewrites_changed_records(void)
{
    static unsigned char earlier[sizeof segment];
    struct ra_shm_header *h = (struct ra_shm_header *)segment,
                         *e = (struct ra_shm_header *)earlier;
    struct ra_shm_record *r = (struct ra_shm_record *)(h + 1),
                         *re = (struct ra_shm_record *)(e + 1);
    ra_tag_t still = ra_tag_create("still"), busy = ra_tag_create("busy");

    TU_REQUIRE(ra_malloc_tag(still, 4096) != NULL);
    TU_REQUIRE(ra_malloc_tag(busy, 4096) != NULL);
    TU_REQUIRE(wait_publication(getpid(), earlier, sizeof earlier) == 0);
    for (int attempt = 0; attempt < 100; attempt++) {
        TU_REQUIRE(ra_malloc_tag(busy, 4096) != NULL);
        TU_REQUIRE(wait_publication(getpid(), segment, sizeof segment) == 0);
        for (uint32_t i = 0; i < h->nrecords; i++) {
            if (same_record(&r[i], &re[i]))
                TU_REQUIRE(r[i].written == re[i].written);
            else
                TU_REQUIRE(r[i].written > re[i].written &&
                           r[i].written <= h->published);
        }
        TU_REQUIRE(r[busy - 1].figures.allocated >
                   re[busy - 1].figures.allocated);
        TU_REQUIRE(r[busy - 1].written > e->published);
        if (same_record(&r[still - 1], &re[still - 1])) {
            TU_REQUIRE(r[still - 1].written <= e->published);
            return 0;
        }
        memcpy(earlier, segment, sizeof earlier);
    }
    TU_REQUIRE(!"the still tag's record never held still");
    return 1;
}

/* Forks a child that exits (running its exit handlers): the segment is
 * still there, the parent's. Then exits itself: the test checks it is
 * gone. */
static int child_forks_then_exits(void)
{
    char path[64];
    int status = -1;
    pid_t kid;

    path_of(getpid(), path, sizeof path);
    TU_REQUIRE(access(path, F_OK) == 0);
    kid = fork();
    if (kid == 0)
        exit(0);
    TU_REQUIRE(kid > 0 && waitpid(kid, &status, 0) == kid && status == 0);
    TU_REQUIRE(access(path, F_OK) == 0);
    fprintf(stderr, "pid %ld\n", (long)getpid());
    return 0;
}

static int child_pass_through_publishes_nothing(void)
{
    char path[64];

    path_of(getpid(), path, sizeof path);
    TU_REQUIRE(access(path, F_OK) != 0 && errno == ENOENT);
    return 0;
}

static int child_default_interval(void)
{
    struct ra_shm_header *h = (struct ra_shm_header *)segment;

    TU_REQUIRE(read_segment(getpid(), segment, sizeof segment) == 0);
    TU_REQUIRE(h->interval_ns == 1000000000u);
    return 0;
}

static const struct tu_child children[] = {
    {"exact", child_publishes_exact_figures},
    {"tree", child_publishes_the_tree},
    {"leftovers", child_publishes_what_destroys_left},
    {"parts", child_publishes_the_parts},
    {"rewrites", child_rewrites_changed_records},
    {"fork", child_forks_then_exits},
    {"pass-through", child_pass_through_publishes_nothing},
    {"default-interval", child_default_interval},
    {NULL, NULL},
};

/* -- tests ------------------------------------------------------------------------ */

static const char *const env_fast[] = {
    "REGIONALLOC_SHM=1", "REGIONALLOC_SHM_INTERVAL=50ms",
    "REGIONALLOC_MAX_TAGS=16", NULL};

START_TEST(test_shm_publishes_exact_figures)
{
    char err[2048];

    ck_assert_msg(tu_exec_self(env_fast, "exact", err, sizeof err) == 0, "%s",
                  err);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
}
END_TEST

START_TEST(test_shm_publishes_what_destroys_left)
{
    char err[2048];

    ck_assert_msg(tu_exec_self(env_fast, "leftovers", err, sizeof err) == 0,
                  "%s", err);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
}
END_TEST

START_TEST(test_shm_publishes_the_process_parts)
{
    char err[4096];

    ck_assert_msg(tu_exec_self(env_fast, "parts", err, sizeof err) == 0, "%s",
                  err);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
}
END_TEST

START_TEST(test_shm_rewrites_only_changed_records)
{
    char err[2048];

    ck_assert_msg(tu_exec_self(env_fast, "rewrites", err, sizeof err) == 0,
                  "%s", err);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
}
END_TEST

/* The child says its pid on stderr; once it has exited, its segment is
 * gone, though a child of its own exited before it. */
START_TEST(test_shm_publishes_the_tree)
{
    char err[2048];

    ck_assert_msg(tu_exec_self(env_fast, "tree", err, sizeof err) == 0, "%s",
                  err);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
}
END_TEST

START_TEST(test_shm_removed_at_exit_by_its_owner_only)
{
    char err[2048], path[64];
    long pid = 0;

    ck_assert_msg(tu_exec_self(env_fast, "fork", err, sizeof err) == 0, "%s",
                  err);
    ck_assert_msg(sscanf(err, "pid %ld", &pid) == 1 && pid > 0, "stderr: %s",
                  err);
    path_of((pid_t)pid, path, sizeof path);
    errno = 0;
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(test_shm_nothing_in_pass_through_mode)
{
    static const char *const env[] = {"REGIONALLOC_SHM=1", "REGIONALLOC=0",
                                      NULL};
    char err[2048];

    ck_assert_msg(tu_exec_self(env, "pass-through", err, sizeof err) == 0,
                  "%s", err);
}
END_TEST

START_TEST(test_shm_bad_interval_warns_and_uses_one_second)
{
    static const char *const env[] = {"REGIONALLOC_SHM=1",
                                      "REGIONALLOC_SHM_INTERVAL=5ms", NULL};
    char err[2048];

    ck_assert_msg(tu_exec_self(env, "default-interval", err, sizeof err) == 0,
                  "%s", err);
    ck_assert_msg(tu_count_lines(err) == 1 &&
                      strstr(err, "REGIONALLOC_SHM_INTERVAL") != NULL &&
                      strstr(err, "1s") != NULL,
                  "stderr: %s", err);
}
END_TEST

static Suite *shm_suite(void)
{
    Suite *s = suite_create("shm");
    TCase *tc = tcase_create("segment");

    tcase_add_test(tc, test_shm_publishes_exact_figures);
    tcase_add_test(tc, test_shm_publishes_the_tree);
    tcase_add_test(tc, test_shm_publishes_what_destroys_left);
    tcase_add_test(tc, test_shm_publishes_the_process_parts);
    tcase_add_test(tc, test_shm_rewrites_only_changed_records);
    tcase_add_test(tc, test_shm_removed_at_exit_by_its_owner_only);
    tcase_add_test(tc, test_shm_nothing_in_pass_through_mode);
    tcase_add_test(tc, test_shm_bad_interval_warns_and_uses_one_second);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    tu_child_main(argc, argv, children);
    return tu_run_suite(shm_suite());
}

/* A process with known figures for tests/test_top.sh to read through its
 * stats segment: run with REGIONALLOC_SHM=1, it holds blocks of exactly
 * known sizes under a few tags (with priorities, under a memory limit
 * far above them: 64 GiB, or argv[2] bytes), prints "ready" once they are
 * in place, and exits normally (so the library removes the segment) after
 * argv[1] seconds (default 60) or on SIGTERM. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <regionalloc.h>

/* Blocks of 1 MiB, 256 KiB and 128 KiB are large size classes: their
 * usable size is exactly what is asked, so the figures the test expects
 * are exact. */
#define MIB (1024u * 1024u)
#define CACHE_BLOCKS 8
#define CACHE_SIZE MIB
#define SESSION_BLOCKS 4
#define SESSION_SIZE (256u * 1024u)
#define ODD_SIZE (128u * 1024u)
#define MAX_BLOCKS 16
/* Far above what the process holds: the level stays "none". */
#define MEMORY_LIMIT (64ull * 1024u * MIB)

/* A name that JSON and a terminal must escape: a quote, a backslash, a
 * tab, a byte that is not UTF-8 and a valid two-byte character. */
#define ODD_NAME "odd \"name\"\\\t\xff\xc3\xa9"

static volatile sig_atomic_t terminated;

static void on_term(int sig)
{
    (void)sig;
    terminated = 1;
}

static void die(const char *what)
{
    fprintf(stderr, "shm_publisher: %s: %s\n", what, strerror(errno));
    exit(1);
}

static ra_tag_t create_tag(const char *name)
{
    ra_tag_t tag = ra_tag_create(name);

    if (tag == RA_TAG_NONE)
        die("ra_tag_create");
    return tag;
}

/* Allocates n blocks of size under tag into blocks[*used...]. */
static void hold_blocks(void **blocks, int *used, ra_tag_t tag, int n,
                        size_t size)
{
    for (int i = 0; i < n; i++) {
        void *p = ra_malloc_tag(tag, size);
        if (p == NULL)
            die("ra_malloc_tag");
        memset(p, 0x5a, size); /* resident, so that rss is not 0 */
        blocks[(*used)++] = p;
    }
}

/* Sleeps until seconds have passed or SIGTERM came, in short steps so that
 * a signal between the check and the sleep costs at most one step. */
static void wait_until_done(double seconds)
{
    struct timespec step = {0, 50 * 1000 * 1000};
    long steps = (long)(seconds * 20.0);

    for (long i = 0; i < steps && !terminated; i++)
        nanosleep(&step, NULL);
}

int main(int argc, char **argv)
{
    struct sigaction sa = {.sa_handler = on_term};
    ra_tag_limit_t budget = {.hard = 16 * MIB, .soft = 8 * MIB};
    void *blocks[MAX_BLOCKS];
    double seconds = argc > 1 ? atof(argv[1]) : 60.0;
    int used = 0;
    ra_tag_t cache, scratch, sessions, odd;

    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    cache = create_tag("cache");
    scratch = create_tag("scratch");
    sessions = create_tag("sessions");
    odd = create_tag(ODD_NAME);
    hold_blocks(blocks, &used, cache, CACHE_BLOCKS, CACHE_SIZE);
    hold_blocks(blocks, &used, sessions, SESSION_BLOCKS, SESSION_SIZE);
    hold_blocks(blocks, &used, odd, 1, ODD_SIZE);
    if (ra_tag_set_limit(sessions, &budget) != 0)
        die("ra_tag_set_limit");
    if (ra_tag_set_priority(sessions, -1) != 0 ||
        ra_tag_set_priority(cache, 7) != 0)
        die("ra_tag_set_priority");
    if (ra_memory_limit_set(argc > 2 ? (size_t)strtoull(argv[2], NULL, 10)
                                     : MEMORY_LIMIT) != 0)
        die("ra_memory_limit_set");
    /* A destroyed tag below the highest id: its record stays, not live. */
    if (ra_malloc_tag(scratch, MIB) == NULL)
        die("ra_malloc_tag");
    if (ra_tag_destroy(scratch) != 0)
        die("ra_tag_destroy");
    /* Blocks in the thread's cache would not count as allocated yet. */
    ra_thread_flush();
    printf("ready\n");
    fflush(stdout);
    wait_until_done(seconds);
    for (int i = 0; i < used; i++)
        ra_free(blocks[i]);
    return 0;
}

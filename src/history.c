/* Floor: services. What the dashboard's chart draws (GET
 * /debug/regionalloc/history): a ring of samples, one a second (less often
 * when a sample is costly) over the last four minutes, of the process's
 * allocated and mapped bytes and of the largest tags'. It exists only
 * while the HTTP server runs: ra_http_start starts its thread,
 * ra_http_stop joins it and frees the ring. The ring is
 * the library's own memory, of a fixed size, counted in the reports'
 * "library" figure. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "output.h"
#include "tags.h"

#define HISTORY_SAMPLES 240
#define HISTORY_INTERVAL_NS 1000000000u
/* A sample costs a statistics refresh, which grows with the arenas: about
 * 0.1 ms with 10 tags, 3 ms with 1,000, 52 ms with 3,000 (most of it
 * jemalloc's epoch). The sampler waits at least this many times as long as its last
 * sample took, so that it never takes more than 1% of a core. */
#define HISTORY_COST_RATIO 100
/* Tags in a sample: the largest by mapped bytes, and the one a dashboard
 * asked to watch (?tag=NAME) when it is not among them. */
#define HISTORY_TAGS 32

struct history_tag {
    uint64_t id, born, allocated, mapped;
};

struct history_sample {
    uint64_t seq, time_ns, allocated, mapped;
    unsigned ntags;
    struct history_tag tags[HISTORY_TAGS];
};

/* Under history_lock, a leaf: nothing else is taken while it is held. */
static struct ra__mutex history_lock = RA__MUTEX_INIT(RA__RANK_HISTORY);
static pthread_cond_t wake;
static struct history_sample *ring; /* HISTORY_SAMPLES; NULL when stopped */
/* A forked child's copy of its parent's ring, freed when it starts a server
 * of its own (not in the fork handler: jemalloc's may not have run). */
static struct history_sample *orphan;
static uint64_t taken;              /* samples so far; the newest's seq */
static uint64_t interval_ns;        /* between the last two samples */
static bool stopping;
static pthread_t sampler;
/* The tag a dashboard watches (RA_TAG_NONE: none), read by the sampler. */
static _Atomic ra_tag_t watched;

/* Keeps t in s if it is among the HISTORY_TAGS - 1 largest so far (sorted
 * by mapped, largest first); the last place is the watched tag's. */
static void keep_largest(struct history_sample *s, const struct history_tag *t)
{
    unsigned n = s->ntags, i;

    if (n == HISTORY_TAGS - 1 && t->mapped <= s->tags[n - 1].mapped)
        return;
    if (n < HISTORY_TAGS - 1)
        n++;
    for (i = n - 1; i > 0 && s->tags[i - 1].mapped < t->mapped; i--)
        s->tags[i] = s->tags[i - 1];
    s->tags[i] = *t;
    s->ntags = n;
}

static bool holds(const struct history_sample *s, uint64_t id)
{
    for (unsigned i = 0; i < s->ntags; i++)
        if (s->tags[i].id == id)
            return true;
    return false;
}

/* One sample, read without our lock (the live figures of every live tag,
 * no statistics refresh), then put in the ring. The process's figures are
 * the sum of the rows, as in ra_report. */
void ra__history_sample(void)
{
    struct history_sample s = {0};
    struct history_tag watch = {0};
    ra_tag_stats_t untagged;
    char name[RA_TAG_NAME_MAX + 1];
    ra_tag_t want = atomic_load_explicit(&watched, memory_order_relaxed);

    s.time_ns = ra__clock_ns();
    ra__stats_read(RA_TAG_NONE, &untagged, false);
    s.allocated = untagged.allocated;
    s.mapped = untagged.mapped;
    for (ra_tag_t t = 1, n = ra__tag_published(); t <= n; t++) {
        struct history_tag h = {.id = t};
        if (!ra__tag_identity(t, name, &h.born))
            continue;
        /* Two figures, not ra__stats_read's every one (and its walk over
         * the threads for the counts). */
        h.allocated = ra__stats_allocated(t);
        h.mapped = ra__stats_mapped(t);
        s.allocated += h.allocated;
        s.mapped += h.mapped;
        keep_largest(&s, &h);
        if (t == want)
            watch = h;
    }
    if (watch.id != 0 && !holds(&s, watch.id))
        s.tags[s.ntags++] = watch;
    ra__lock(&history_lock);
    if (ring != NULL) {
        s.seq = ++taken;
        ring[(s.seq - 1) % HISTORY_SAMPLES] = s;
    }
    ra__unlock(&history_lock);
}

static void *sample_every_interval(void *arg)
{
    struct timespec next;

    (void)arg;
    clock_gettime(CLOCK_MONOTONIC, &next);
    ra__lock(&history_lock);
    while (!stopping) {
        uint64_t began = ra__clock_ns(), wait;
        ra__unlock(&history_lock);
        ra__history_sample();
        wait = (ra__clock_ns() - began) * HISTORY_COST_RATIO;
        if (wait < HISTORY_INTERVAL_NS)
            wait = HISTORY_INTERVAL_NS;
        ra__deadline_add(&next, wait);
        ra__lock(&history_lock);
        interval_ns = wait;
        while (!stopping &&
               ra__cond_timedwait(&wake, &history_lock, &next) == 0)
            ;
    }
    ra__unlock(&history_lock);
    return NULL;
}

static bool init_wake(void)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return true;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(&wake, &attr);
    pthread_condattr_destroy(&attr);
    return rc != 0;
}

bool ra__history_start(void)
{
    struct history_sample *r = ra__meta_calloc(HISTORY_SAMPLES, sizeof *r);

    ra__meta_free(orphan);
    orphan = NULL;
    if (r == NULL || init_wake()) {
        ra__meta_free(r);
        errno = ENOMEM;
        return true;
    }
    ra__lock(&history_lock);
    ring = r;
    taken = 0;
    interval_ns = HISTORY_INTERVAL_NS;
    stopping = false;
    ra__unlock(&history_lock);
    atomic_store(&watched, RA_TAG_NONE);
    if (ra__background_start(sample_every_interval, NULL, &sampler)) {
        int e = errno;
        ra__lock(&history_lock);
        ring = NULL;
        ra__unlock(&history_lock);
        pthread_cond_destroy(&wake);
        ra__meta_free(r);
        errno = e;
        return true;
    }
    return false;
}

void ra__history_stop(void)
{
    struct history_sample *r;

    ra__lock(&history_lock);
    stopping = true;
    pthread_cond_signal(&wake);
    ra__unlock(&history_lock);
    pthread_join(sampler, NULL);
    ra__lock(&history_lock);
    r = ring;
    ring = NULL;
    ra__unlock(&history_lock);
    pthread_cond_destroy(&wake);
    ra__meta_free(r);
}

void ra__history_watch(ra_tag_t tag)
{
    atomic_store_explicit(&watched, tag, memory_order_relaxed);
}

static void write_sample(struct ra__emitter *e, const struct history_sample *s)
{
    ra__json_object_begin(e, NULL, true);
    ra__json_u64(e, "seq", s->seq);
    ra__json_u64(e, "time_ns", s->time_ns);
    ra__json_u64(e, "allocated", s->allocated);
    ra__json_u64(e, "mapped", s->mapped);
    ra__json_array_begin(e, "tags", true);
    for (unsigned i = 0; i < s->ntags; i++) {
        const struct history_tag *t = &s->tags[i];
        ra__json_object_begin(e, NULL, true);
        ra__json_u64(e, "id", t->id);
        ra__json_u64(e, "born", t->born);
        ra__json_u64(e, "allocated", t->allocated);
        ra__json_u64(e, "mapped", t->mapped);
        ra__json_object_end(e);
    }
    ra__json_array_end(e);
    ra__json_object_end(e);
}

int ra__history_write(struct ra__out *o, uint64_t since)
{
    struct history_sample *copy =
        ra__meta_alloc(HISTORY_SAMPLES * sizeof *copy);
    struct ra__emitter e;
    uint64_t first = 0, last = 0, interval = HISTORY_INTERVAL_NS;

    if (copy == NULL)
        return ENOMEM;
    /* Copied out: the document is written without our lock. */
    ra__lock(&history_lock);
    if (ring != NULL) {
        interval = interval_ns;
        last = taken;
        first = last > HISTORY_SAMPLES ? last - HISTORY_SAMPLES : 0;
        if (since > first)
            first = since < last ? since : last;
        for (uint64_t seq = first + 1; seq <= last; seq++)
            copy[seq - first - 1] = ring[(seq - 1) % HISTORY_SAMPLES];
    }
    ra__unlock(&history_lock);
    ra__emit_init(&e, o);
    ra__json_object_begin(&e, NULL, false);
    ra__json_str(&e, "schema", "regionalloc-history-1");
    ra__json_u64(&e, "interval_ns", interval);
    ra__json_u64(&e, "capacity", HISTORY_SAMPLES);
    ra__json_u64(&e, "tags_per_sample", HISTORY_TAGS);
    ra__json_u64(&e, "taken", last);
    ra__json_array_begin(&e, "samples", false);
    for (uint64_t seq = first + 1; seq <= last; seq++)
        write_sample(&e, &copy[seq - first - 1]);
    ra__json_array_end(&e);
    ra__json_object_end(&e);
    ra__meta_free(copy);
    return 0;
}

/* Nothing is held across a fork. What the child needs, the ring's
 * address, changes only in ra__history_start and ra__history_stop, under
 * the server's lock, which the fork holds (http.c); the samples that the
 * sampler or a request may be copying under history_lock the child
 * forgets. Taking history_lock here would hang a fork from a signal
 * handler that interrupted its holder on the same thread (another fork's
 * handlers, ra__history_start). */
void ra__history_prefork(void)
{
}

void ra__history_postfork_parent(void)
{
}

/* The sampler does not exist in a forked child, whose server is forgotten
 * too (http.c): so is the ring, and the lock is made anew, since a thread
 * that is not in the child may have held it. */
void ra__history_postfork_child(void)
{
    if (ring != NULL)
        orphan = ring;
    ring = NULL;
    taken = 0;
    ra__mutex_remake(&history_lock);
}

/* Floor: instruments. The sampled allocation-site profile: when to sample, what a
 * sample records, and the tables of live samples and of (tag, stack) totals. */
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <execinfo.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>

#include "instruments.h"
#include "internal.h"
#include "tags.h"

/* One live sampled block. */
struct sample {
    void *ptr; /* NULL: empty slot */
    struct ra__prof_stack *stack;
    size_t size;
    double weight; /* 1 / probability of sampling a block of this size */
};

/* Open-addressing tables (linear probing), sizes powers of two, kept at most
 * half full, in the library's own memory (never sampled). */
struct stack_table {
    struct ra__prof_stack **slots;
    size_t cap, count;
};

struct sample_table {
    struct sample *slots;
    size_t cap, count;
};

static struct ra__mutex prof_lock = RA__MUTEX_INIT(RA__RANK_PROF);
atomic_bool ra__prof_sampling;
static _Atomic size_t mean_interval; /* 0: never started */

static struct stack_table stacks;
static struct sample_table samples;
/* Set once either table exists (under prof_lock), never cleared. */
static atomic_bool tables_made;
/* The library's own code, [own_text_start, own_text_end): its frames are
 * cut from stacks. Empty when the library is linked into the program
 * (libregionalloc.a): then the code is the program's and nothing is cut. */
static void *own_base;
static bool own_base_known;
static uintptr_t own_text_start, own_text_end;

RA__TLS int64_t ra__prof_countdown;
/* Whether ra__prof_countdown was drawn: a thread's first tick draws it
 * rather than sample. */
static RA__TLS bool tls_countdown_drawn;
static RA__TLS uint64_t tls_rng;
/* Set while this thread takes a sample or dumps: what it allocates then is
 * the profiler's and is not sampled. */
static RA__TLS bool tls_in_prof;

void ra__prof_prefork(void)
{
    ra__lock(&prof_lock);
}

void ra__prof_postfork(void)
{
    ra__unlock(&prof_lock);
}

/* xorshift64*: a thread's own generator, seeded from its address and the
 * clock; quality enough for sampling intervals. */
static uint64_t next_random(void)
{
    uint64_t x = tls_rng;

    if (x == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = (uint64_t)(uintptr_t)&tls_rng ^ (uint64_t)ts.tv_nsec ^
            ((uint64_t)ts.tv_sec << 32) ^ 0x9e3779b97f4a7c15ull;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    tls_rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Bytes to the next sample: exponential with the mean interval, so that
 * samples fall as a Poisson process over the bytes allocated. */
static int64_t next_countdown(void)
{
    size_t interval = atomic_load_explicit(&mean_interval,
                                           memory_order_relaxed);
    double u, bytes;

    if (interval <= 1)
        return 0;
    u = (double)((next_random() >> 11) + 1) * 0x1.0p-53; /* (0, 1] */
    bytes = -log(u) * (double)interval;
    /* An interval near SIZE_MAX draws past what the countdown holds (a
     * conversion that would be undefined): no sample, practically. */
    if (bytes >= 0x1.0p62)
        return INT64_C(1) << 62;
    return (int64_t)bytes + 1;
}

bool ra__prof_tick_slow(size_t size)
{
    if (!atomic_load_explicit(&ra__prof_sampling, memory_order_relaxed) ||
        tls_in_prof)
        return false;
    if (!tls_countdown_drawn) {
        tls_countdown_drawn = true;
        ra__prof_countdown = next_countdown();
        if (size > INT64_MAX || (ra__prof_countdown -= (int64_t)size) > 0)
            return false;
    }
    ra__prof_countdown = next_countdown();
    return true;
}

static uint64_t hash_stack(ra_tag_t tag, void *const *frames, unsigned n)
{
    uint64_t h = 1469598103934665603ull ^ tag;

    for (unsigned i = 0; i < n; i++)
        h = (h ^ (uint64_t)(uintptr_t)frames[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static uint64_t hash_ptr(const void *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 31);
}


/* Moves the stack table into one of cap slots, freeing the stacks of
 * tag dropped (RA_TAG_NONE: none; the profile only holds tagged stacks).
 * Returns true on failure (table unchanged). */
static bool rebuild_stacks(size_t cap, ra_tag_t dropped)
{
    struct ra__prof_stack **slots =
        ra__meta_calloc(cap, sizeof(struct ra__prof_stack *));
    size_t kept = 0;

    if (slots == NULL)
        return true;
    for (size_t i = 0; i < stacks.cap; i++) {
        struct ra__prof_stack *st = stacks.slots[i];
        size_t j;
        if (st == NULL)
            continue;
        if (st->tag == dropped) {
            ra__meta_free(st);
            continue;
        }
        j = hash_stack(st->tag, st->frames, st->nframes) & (cap - 1);
        while (slots[j] != NULL)
            j = (j + 1) & (cap - 1);
        slots[j] = st;
        kept++;
    }
    ra__meta_free(stacks.slots);
    stacks.slots = slots;
    stacks.cap = cap;
    stacks.count = kept;
    atomic_store_explicit(&tables_made, true, memory_order_release);
    return false;
}

/* Finds or adds the entry of (tag, frames). NULL when out of memory. */
static struct ra__prof_stack *find_stack(ra_tag_t tag, void *const *frames,
                                         unsigned n)
{
    size_t j;

    if ((stacks.count + 1) * 2 > stacks.cap &&
        rebuild_stacks(stacks.cap == 0 ? 256 : stacks.cap * 2, RA_TAG_NONE))
        return NULL;
    j = hash_stack(tag, frames, n) & (stacks.cap - 1);
    for (;; j = (j + 1) & (stacks.cap - 1)) {
        struct ra__prof_stack *st = stacks.slots[j];
        if (st == NULL)
            break;
        if (st->tag == tag && st->nframes == n &&
            memcmp(st->frames, frames, n * sizeof frames[0]) == 0)
            return st;
    }
    stacks.slots[j] = ra__meta_calloc(1, sizeof *stacks.slots[j]);
    if (stacks.slots[j] == NULL)
        return NULL;
    stacks.slots[j]->tag = tag;
    stacks.slots[j]->nframes = n;
    memcpy(stacks.slots[j]->frames, frames, n * sizeof frames[0]);
    stacks.count++;
    return stacks.slots[j];
}

static bool grow_samples(void)
{
    size_t cap = samples.cap == 0 ? 1024 : samples.cap * 2;
    struct sample *slots = ra__meta_calloc(cap, sizeof *slots);

    if (slots == NULL)
        return true;
    for (size_t i = 0; i < samples.cap; i++) {
        size_t j;
        if (samples.slots[i].ptr == NULL)
            continue;
        j = hash_ptr(samples.slots[i].ptr) & (cap - 1);
        while (slots[j].ptr != NULL)
            j = (j + 1) & (cap - 1);
        slots[j] = samples.slots[i];
    }
    ra__meta_free(samples.slots);
    samples.slots = slots;
    samples.cap = cap;
    atomic_store_explicit(&tables_made, true, memory_order_release);
    return false;
}

static bool add_sample(const struct sample *s)
{
    size_t j;

    if ((samples.count + 1) * 2 > samples.cap && grow_samples())
        return true;
    j = hash_ptr(s->ptr) & (samples.cap - 1);
    while (samples.slots[j].ptr != NULL)
        j = (j + 1) & (samples.cap - 1);
    samples.slots[j] = *s;
    samples.count++;
    return false;
}

/* Removes the sample of ptr into *out. Returns false when there is none.
 * Linear probing deletes by shifting the rest of the cluster back. */
static bool take_sample(const void *ptr, struct sample *out)
{
    size_t mask = samples.cap - 1, j, k;

    if (samples.cap == 0)
        return false;
    for (j = hash_ptr(ptr) & mask; samples.slots[j].ptr != ptr;
         j = (j + 1) & mask)
        if (samples.slots[j].ptr == NULL)
            return false;
    *out = samples.slots[j];
    for (k = (j + 1) & mask; samples.slots[k].ptr != NULL; k = (k + 1) & mask) {
        size_t home = hash_ptr(samples.slots[k].ptr) & mask;
        /* Move k into the hole at j unless its home lies in (j, k]. */
        bool stays = j <= k ? (home > j && home <= k) : (home > j || home <= k);
        if (!stays) {
            samples.slots[j] = samples.slots[k];
            j = k;
        }
    }
    samples.slots[j].ptr = NULL;
    samples.count--;
    return true;
}

/* The call stack without the library's own frames: frames[0] is the caller
 * of malloc (or new, or ra_malloc). Returns the number of frames. */
static unsigned capture_stack(void **frames)
{
    void *raw[RA__PROF_MAX_FRAMES + 16];
    int n = backtrace(raw, (int)(sizeof raw / sizeof raw[0]));
    int first = 0;
    unsigned kept = 0;

    while (first < n && (uintptr_t)raw[first] >= own_text_start &&
           (uintptr_t)raw[first] < own_text_end)
        first++;
    for (int i = first; i < n && kept < RA__PROF_MAX_FRAMES; i++)
        frames[kept++] = raw[i];
    return kept;
}

void ra__prof_record(ra_tag_t tag, void *ptr, size_t size)
{
    void *frames[RA__PROF_MAX_FRAMES];
    size_t interval = atomic_load_explicit(&mean_interval,
                                           memory_order_relaxed);
    struct sample s = {ptr, NULL, size, 1.0};
    unsigned n;

    tls_in_prof = true;
    /* The unwinder may allocate (its first call loads libgcc_s): that is
     * the library's work, not the caller's. */
    ra__quiet_begin();
    n = capture_stack(frames);
    if (interval > 1)
        s.weight = 1.0 / -expm1(-(double)size / (double)interval);
    ra__lock(&prof_lock);
    s.stack = find_stack(tag, frames, n);
    if (s.stack != NULL && !add_sample(&s)) {
        struct ra__prof_stack *st = s.stack;
        st->live_samples++;
        st->live_sampled_bytes += size;
        st->alloc_samples++;
        st->alloc_sampled_bytes += size;
        st->live_objects += s.weight;
        st->live_bytes += s.weight * (double)size;
        st->alloc_objects += s.weight;
        st->alloc_bytes += s.weight * (double)size;
    }
    ra__unlock(&prof_lock);
    ra__quiet_end();
    tls_in_prof = false;
}

void ra__prof_on_free(const void *ptr)
{
    struct sample s;

    ra__lock(&prof_lock);
    if (take_sample(ptr, &s)) {
        struct ra__prof_stack *st = s.stack;
        st->live_samples--;
        st->live_sampled_bytes -= s.size;
        st->live_objects -= s.weight;
        st->live_bytes -= s.weight * (double)s.size;
    }
    ra__unlock(&prof_lock);
}

/* With the profile locked: rebuilds the sample table without the samples
 * of tag, in place (a copy would allocate): removing one entry of a linear
 * probing table moves the rest of its cluster, so collect, then re-add. */
static void drop_samples_of(ra_tag_t tag)
{
    ra__assert_held(&prof_lock);
    for (size_t i = 0; i < samples.cap; i++) {
        struct sample *s = &samples.slots[i];
        while (s->ptr != NULL && s->stack->tag == tag) {
            struct sample gone;
            take_sample(s->ptr, &gone);
        }
    }
}

void ra__prof_forget(ra_tag_t tag, bool history)
{
    /* Never sampled: nothing to forget, and every request's end would
     * otherwise take the profile's lock. */
    if (!atomic_load_explicit(&tables_made, memory_order_acquire))
        return;
    ra__lock(&prof_lock);
    drop_samples_of(tag);
    for (size_t i = 0; i < stacks.cap; i++) {
        struct ra__prof_stack *st = stacks.slots[i];
        if (st == NULL || st->tag != tag)
            continue;
        st->live_samples = st->live_sampled_bytes = 0;
        st->live_objects = st->live_bytes = 0.0;
    }
    /* Without memory for a new table the stacks stay, empty. */
    if (history && stacks.cap != 0)
        rebuild_stacks(stacks.cap, tag);
    ra__unlock(&prof_lock);
}

size_t ra__prof_visit(ra_tag_t tag,
                      void (*visit)(const struct ra__prof_stack *stack,
                                    void *ctx),
                      void *ctx)
{
    size_t interval;

    ra__lock(&prof_lock);
    tls_in_prof = true;
    interval = atomic_load_explicit(&mean_interval, memory_order_relaxed);
    for (size_t i = 0; interval != 0 && i < stacks.cap; i++) {
        const struct ra__prof_stack *st = stacks.slots[i];
        if (st != NULL && (tag == RA_TAG_ALL || st->tag == tag))
            visit(st, ctx);
    }
    tls_in_prof = false;
    ra__unlock(&prof_lock);
    return interval;
}

/* dl_iterate_phdr callback: the executable segments of the object loaded
 * at own_base. */
static int find_own_text(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size; (void)ctx;
    if ((void *)info->dlpi_addr != own_base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_X) == 0)
            continue;
        if (own_text_end == 0 || start < own_text_start)
            own_text_start = start;
        if (start + ph->p_memsz > own_text_end)
            own_text_end = start + ph->p_memsz;
    }
    return 1;
}

void ra__prof_begin(size_t mean_interval_bytes)
{
    Dl_info info;
    void *warm[4];

    if (!own_base_known) {
        Dl_info program;
        ra__assert_may_call_loader();
        if (dladdr((void *)ra_prof_start, &info) != 0 &&
            !(dladdr((void *)getauxval(AT_ENTRY), &program) != 0 &&
              program.dli_fbase == info.dli_fbase))
            own_base = info.dli_fbase;
        if (own_base != NULL)
            dl_iterate_phdr(find_own_text, NULL);
        own_base_known = true;
    }
    /* The calling thread draws for the new interval at once; the others
     * when their current countdown runs out. */
    tls_countdown_drawn = false;
    ra__prof_countdown = 0;
    /* Load the unwinder now, outside any allocation; what loading it
     * allocates is the library's work. */
    tls_in_prof = true;
    ra__quiet_begin();
    backtrace(warm, 4);
    ra__quiet_end();
    tls_in_prof = false;
    /* A profile dumped at exit names its frames with libdw, which is
     * never loaded at exit: it is loaded now, with no lock of ours held. */
    if (ra__config()->prof_dump_path[0] != '\0' &&
        ra__config_watch() != RA__WATCH_NONE)
        (void)ra__load_symbolizer();
    ra__lock(&prof_lock);
    atomic_store(&mean_interval, mean_interval_bytes);
    if (!atomic_exchange(&ra__prof_sampling, true))
        ra__instrument_add(RA__INSTRUMENT_PROF);
    ra__unlock(&prof_lock);
}

int ra_prof_start(size_t mean_interval_bytes)
{
    if (mean_interval_bytes == 0) {
        errno = EINVAL;
        return -1;
    }
    if (!ra__init()) {
        errno = ENOTSUP;
        return -1;
    }
    ra__prof_begin(mean_interval_bytes);
    return 0;
}

int ra_prof_stop(void)
{
    int rc = 0;

    ra__lock(&prof_lock);
    if (atomic_exchange(&ra__prof_sampling, false))
        ra__instrument_sub(RA__INSTRUMENT_PROF);
    else
        rc = -1;
    ra__unlock(&prof_lock);
    if (rc != 0)
        errno = EINVAL;
    return rc;
}

/* Suite "hooks": ra_hooks_install and ra_hooks_remove. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "regionalloc.h"
#include "testutil.h"

/* What a recording hook saw, in order, while `on`: a passing ck_assert
 * allocates, so tests switch recording on only around the calls under test
 * and assert afterwards. */
struct event {
    bool alloc;
    ra_tag_t tag;
    void *ptr;
    size_t size;
};

struct recorder {
    bool on;
    struct event events[64];
    unsigned n;
    bool allocate_inside; /* the callback mallocs and frees a block */
    void *inner_block;    /* the last block allocated inside, kept */
};

static void record(struct recorder *r, bool alloc, ra_tag_t tag, void *ptr,
                   size_t size)
{
    if (!r->on)
        return;
    if (r->n < sizeof r->events / sizeof r->events[0])
        r->events[r->n] = (struct event){alloc, tag, ptr, size};
    r->n++;
    if (r->allocate_inside) {
        void *scratch = ra_malloc(48);
        ra_free(scratch);
        if (r->inner_block == NULL)
            r->inner_block = ra_malloc(32);
    }
}

static void on_alloc(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    record(ctx, true, tag, ptr, size);
}

static void on_free(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    record(ctx, false, tag, ptr, size);
}

static int install_recorder(struct recorder *r)
{
    ra_hooks_t hooks = {on_alloc, on_free, r};
    int id;

    memset(r, 0, sizeof *r);
    id = ra_hooks_install(&hooks);
    ck_assert_int_ge(id, 0);
    return id;
}

static void assert_event(const struct recorder *r, unsigned i, bool alloc,
                         ra_tag_t tag, const void *ptr, size_t size)
{
    ck_assert_uint_gt(r->n, i);
    ck_assert_int_eq(r->events[i].alloc, alloc);
    ck_assert_uint_eq(r->events[i].tag, tag);
    ck_assert_ptr_eq(r->events[i].ptr, ptr);
    ck_assert_uint_eq(r->events[i].size, size);
}

/* -- "install and remove" -------------------------------------------------- */

START_TEST(test_hooks_install_rejects_bad_arguments)
{
    ra_hooks_t none = {NULL, NULL, NULL};

    errno = 0;
    ck_assert_int_eq(ra_hooks_install(NULL), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_hooks_install(&none), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_hooks_remove_rejects_unknown_ids)
{
    static struct recorder r;
    int id;

    errno = 0;
    ck_assert_int_eq(ra_hooks_remove(-1), -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra_hooks_remove(1000), -1);
    ck_assert_int_eq(errno, EINVAL);
    id = install_recorder(&r);
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    errno = 0;
    ck_assert_int_eq(ra_hooks_remove(id), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

/* Sixteen at once, every one called; the seventeenth is refused; a removed
 * hook's slot is used again. */
START_TEST(test_hooks_sixteen_at_once)
{
    static struct recorder r[17];
    ra_hooks_t hooks = {on_alloc, on_free, &r[16]};
    int ids[16];
    void *p;

    for (int i = 0; i < 16; i++)
        ids[i] = install_recorder(&r[i]);
    errno = 0;
    ck_assert_int_eq(ra_hooks_install(&hooks), -1);
    ck_assert_int_eq(errno, ENOSPC);
    for (int i = 0; i < 16; i++)
        r[i].on = true;
    p = ra_malloc(10);
    ra_free(p);
    for (int i = 0; i < 16; i++)
        r[i].on = false;
    for (int i = 0; i < 16; i++) {
        ck_assert_uint_eq(r[i].n, 2);
        ck_assert_int_eq(ra_hooks_remove(ids[i]), 0);
    }
    /* A removed hook's slot serves the next one, which is called. */
    ids[0] = ra_hooks_install(&hooks);
    ck_assert_int_ge(ids[0], 0);
    /* Every recorder listens: the removed ones must hear nothing. */
    for (int i = 0; i <= 16; i++)
        r[i].on = true;
    p = ra_malloc(10);
    ra_free(p);
    for (int i = 0; i <= 16; i++)
        r[i].on = false;
    ck_assert_uint_eq(r[16].n, 2);
    for (int i = 0; i < 16; i++)
        ck_assert_uint_eq(r[i].n, 2);
}
END_TEST

/* -- "what is reported" ---------------------------------------------------- */

START_TEST(test_hooks_report_tag_pointer_and_usable_size)
{
    static struct recorder r;
    ra_tag_t tag = tu_tag_create("hooked");
    void *tagged, *untagged;
    size_t tagged_size, untagged_size;
    int id = install_recorder(&r);

    r.on = true;
    tu_tag_push(tag);
    tagged = ra_malloc(100);
    tu_tag_pop(tag);
    untagged = ra_malloc(5000);
    tagged_size = ra_malloc_usable_size(tagged);
    untagged_size = ra_malloc_usable_size(untagged);
    /* Freed with nothing pushed: reported with the owner's tag. */
    ra_free(tagged);
    ra_free(untagged);
    r.on = false;
    ck_assert_int_eq(ra_hooks_remove(id), 0);

    ck_assert_uint_eq(r.n, 4);
    assert_event(&r, 0, true, tag, tagged, tagged_size);
    assert_event(&r, 1, true, RA_TAG_NONE, untagged, untagged_size);
    assert_event(&r, 2, false, tag, tagged, tagged_size);
    assert_event(&r, 3, false, RA_TAG_NONE, untagged, untagged_size);
}
END_TEST

START_TEST(test_hooks_report_every_allocation_function)
{
    static struct recorder r;
    void *p[6];
    size_t size[6];
    int id;

    int rc;

    id = install_recorder(&r);
    r.on = true;
    p[0] = ra_calloc(3, 40);
    p[1] = ra_aligned_alloc(256, 512);
    rc = ra_posix_memalign(&p[2], 64, 100);
    p[3] = ra_malloc_tag(RA_TAG_NONE, 7);
    p[4] = ra_realloc(NULL, 33);
    p[5] = ra_malloc(0);
    r.on = false;
    ck_assert_int_eq(rc, 0);
    for (unsigned i = 0; i < 6; i++) {
        ck_assert_ptr_nonnull(p[i]);
        size[i] = ra_malloc_usable_size(p[i]);
        assert_event(&r, i, true, RA_TAG_NONE, p[i], size[i]);
    }
    r.on = true;
    ra_free_sized(p[0], 120);
    ra_free_sized(p[3], 7);
    p[4] = ra_realloc(p[4], 0) == NULL ? p[4] : NULL;
    ra_free(p[1]);
    ra_free(p[2]);
    ra_free(p[5]);
    ra_free(NULL);
    r.on = false;
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    ck_assert_uint_eq(r.n, 12);
    assert_event(&r, 6, false, RA_TAG_NONE, p[0], size[0]);
    assert_event(&r, 7, false, RA_TAG_NONE, p[3], size[3]);
    assert_event(&r, 8, false, RA_TAG_NONE, p[4], size[4]);
    assert_event(&r, 9, false, RA_TAG_NONE, p[1], size[1]);
    assert_event(&r, 10, false, RA_TAG_NONE, p[2], size[2]);
    assert_event(&r, 11, false, RA_TAG_NONE, p[5], size[5]);
}
END_TEST

/* realloc: the free of the old block, then the allocation of the new one,
 * each with its tag (the owner's, whatever is pushed). */
START_TEST(test_hooks_realloc_is_free_then_alloc)
{
    static struct recorder r;
    ra_tag_t owner = tu_tag_create("owner"), other = tu_tag_create("other");
    void *p, *q;
    size_t old_size;
    int id;

    tu_tag_push(owner);
    p = ra_malloc(24);
    tu_tag_pop(owner);
    old_size = ra_malloc_usable_size(p);
    id = install_recorder(&r);
    r.on = true;
    tu_tag_push(other);
    q = ra_realloc(p, 100000);
    tu_tag_pop(other);
    r.on = false;
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(r.n, 2);
    assert_event(&r, 0, false, owner, p, old_size);
    assert_event(&r, 1, true, owner, q, ra_malloc_usable_size(q));

    /* A realloc that fails reports nothing. */
    r.on = true;
    p = ra_realloc(q, (size_t)1 << 62);
    r.on = false;
    ck_assert_ptr_null(p);
    ck_assert_uint_eq(r.n, 2);
    ra_free(q);
    ck_assert_int_eq(ra_hooks_remove(id), 0);
}
END_TEST

/* What a callback allocates is not reported, and is tagged as usual. */
START_TEST(test_hooks_callbacks_are_not_reported_to_themselves)
{
    static struct recorder r;
    ra_tag_t tag = tu_tag_create("inside");
    void *p;
    int id = install_recorder(&r);

    r.allocate_inside = true;
    r.on = true;
    tu_tag_push(tag);
    p = ra_malloc(64);
    tu_tag_pop(tag);
    ra_free(p);
    r.on = false;
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    ck_assert_uint_eq(r.n, 2);
    ck_assert_ptr_nonnull(r.inner_block);
    ck_assert_uint_eq(ra_tag_of(r.inner_block), tag);
    ra_free(r.inner_block);
}
END_TEST

/* -- "removal" --------------------------------------------------------------- */

static int self_removing_id;
static unsigned self_removing_calls;

static void remove_myself(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)ctx; (void)tag; (void)ptr; (void)size;
    self_removing_calls++;
    if (ra_hooks_remove(self_removing_id) != 0)
        abort();
}

START_TEST(test_hooks_callback_may_remove_its_own_hook)
{
    ra_hooks_t hooks = {remove_myself, NULL, NULL};
    void *p;

    self_removing_id = ra_hooks_install(&hooks);
    ck_assert_int_ge(self_removing_id, 0);
    p = ra_malloc(8);
    ra_free(ra_malloc(8));
    ra_free(p);
    ck_assert_uint_eq(self_removing_calls, 1);
}
END_TEST

/* Threads allocate all along while a hook is installed and removed again
 * and again: once ra_hooks_remove has returned, the callback never runs. */
enum { RM_THREADS = 2, RM_ROUNDS = 200 };

struct remove_probe {
    atomic_bool removed;
    _Atomic unsigned long calls;
    _Atomic unsigned long late_calls;
};

static atomic_bool rm_stop;
static _Atomic unsigned long rm_ops;

static void probe_call(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    struct remove_probe *probe = ctx;

    (void)tag; (void)ptr; (void)size;
    if (atomic_load(&probe->removed))
        atomic_fetch_add(&probe->late_calls, 1);
    atomic_fetch_add(&probe->calls, 1);
}

static void *rm_worker(void *arg)
{
    ra_tag_t tag = *(ra_tag_t *)arg;

    ra_tag_push(tag);
    while (!atomic_load(&rm_stop)) {
        void *p = ra_malloc(40);
        ra_free(p);
        atomic_fetch_add(&rm_ops, 1);
    }
    ra_tag_pop(tag);
    return NULL;
}

START_TEST(test_hooks_removed_hook_is_never_called_again)
{
    static struct remove_probe probes[RM_ROUNDS];
    ra_tag_t tag = tu_tag_create("remove-race");
    pthread_t threads[RM_THREADS];
    unsigned long late = 0;

    for (unsigned i = 0; i < RM_THREADS; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, rm_worker, &tag),
                         0);
    for (unsigned round = 0; round < RM_ROUNDS; round++) {
        struct remove_probe *probe = &probes[round];
        ra_hooks_t hooks = {probe_call, probe_call, probe};
        unsigned long ops;
        int id = ra_hooks_install(&hooks);

        if (id < 0)
            ck_abort_msg("install failed in round %u", round);
        /* Let the workers run through the hook for a while. */
        while (atomic_load(&probe->calls) < 50)
            sched_yield();
        if (ra_hooks_remove(id) != 0)
            ck_abort_msg("remove failed in round %u", round);
        atomic_store(&probe->removed, true);
        ops = atomic_load(&rm_ops);
        while (atomic_load(&rm_ops) < ops + 50)
            sched_yield();
        late += atomic_load(&probe->late_calls);
    }
    atomic_store(&rm_stop, true);
    for (unsigned i = 0; i < RM_THREADS; i++)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    ck_assert_uint_eq(late, 0);
}
END_TEST

/* A callback that removes a hook installed after its own: once the removal
 * returned, the later hook is not called, not even for the event being
 * dispatched (the first event may be a passing check's allocation). */
static int later_id = -1;
static unsigned later_calls, remover_calls;

static void remove_later(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)ctx; (void)tag; (void)ptr; (void)size;
    if (remover_calls++ == 0 && ra_hooks_remove(later_id) != 0)
        abort();
}

static void count_later(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)ctx; (void)tag; (void)ptr; (void)size;
    later_calls++;
}

START_TEST(test_hooks_callback_may_remove_a_later_hook)
{
    ra_hooks_t first = {remove_later, NULL, NULL};
    ra_hooks_t later = {count_later, NULL, NULL};
    int first_id = ra_hooks_install(&first);
    unsigned calls;
    void *p;

    later_id = ra_hooks_install(&later);
    ck_assert_int_ge(first_id, 0);
    ck_assert_int_gt(later_id, first_id);
    p = ra_malloc(8);
    ra_free(ra_malloc(8));
    ra_hooks_remove(first_id);
    calls = later_calls;
    ra_free(p);
    ck_assert_uint_ge(remover_calls, 2);
    ck_assert_uint_eq(calls, 0);
}
END_TEST

/* More threads than the dispatcher keeps a word for each (256): the ones
 * beyond count themselves in a shared word, and a removal waits for them
 * too. The threads come one at a time, each dispatching once before the
 * next starts, and stay: the first ones hold words, the last ones cannot.
 * Then a few of the first, and later a few of the last, block inside the
 * callback; a removal started then must not return before they are let
 * go. */
enum { MANY_THREADS = 300, MANY_BLOCKED = 10 };

static pthread_mutex_t many_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t many_cond = PTHREAD_COND_INITIALIZER;
static unsigned many_ready, many_inside, many_phase;
static bool many_release, remove_returned;
static int many_id;
/* Only workers block: the main thread's pthread_create allocates too. */
static __thread bool many_blocks;

static void block_inside(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)ctx; (void)tag; (void)ptr; (void)size;
    if (!many_blocks)
        return;
    many_blocks = false;
    pthread_mutex_lock(&many_lock);
    many_inside++;
    pthread_cond_broadcast(&many_cond);
    while (!many_release)
        pthread_cond_wait(&many_cond, &many_lock);
    pthread_mutex_unlock(&many_lock);
}

/* Worker i: dispatches once, then, in phase 1 (i among the first) or 2
 * (among the last), allocates again with its callback blocking. */
static void *many_worker(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    unsigned mine = i < MANY_BLOCKED ? 1
                    : i >= MANY_THREADS - MANY_BLOCKED ? 2 : 0;

    ra_free(ra_malloc(24));
    pthread_mutex_lock(&many_lock);
    many_ready++;
    pthread_cond_broadcast(&many_cond);
    while (many_phase < 3 && many_phase != mine)
        pthread_cond_wait(&many_cond, &many_lock);
    pthread_mutex_unlock(&many_lock);
    if (mine != 0) {
        many_blocks = true;
        ra_free(ra_malloc(24));
    }
    pthread_mutex_lock(&many_lock);
    while (many_phase < 3)
        pthread_cond_wait(&many_cond, &many_lock);
    pthread_mutex_unlock(&many_lock);
    return NULL;
}

static void *many_remover(void *arg)
{
    (void)arg;
    if (ra_hooks_remove(many_id) != 0)
        abort();
    pthread_mutex_lock(&many_lock);
    remove_returned = true;
    pthread_cond_broadcast(&many_cond);
    pthread_mutex_unlock(&many_lock);
    return NULL;
}

static void many_wait_for(unsigned *counter, unsigned n)
{
    pthread_mutex_lock(&many_lock);
    while (*counter < n)
        pthread_cond_wait(&many_cond, &many_lock);
    pthread_mutex_unlock(&many_lock);
}

START_TEST(test_hooks_removal_waits_for_more_threads_than_words)
{
    static pthread_t threads[MANY_THREADS];
    ra_hooks_t hooks = {block_inside, NULL, NULL};
    bool early[3] = {false, false, false};

    if ((many_id = ra_hooks_install(&hooks)) < 0)
        ck_abort_msg("install failed");
    for (unsigned i = 0; i < MANY_THREADS; i++) {
        if (pthread_create(&threads[i], NULL, many_worker,
                           (void *)(uintptr_t)i) != 0)
            abort();
        many_wait_for(&many_ready, i + 1);
    }
    for (unsigned phase = 1; phase <= 2; phase++) {
        struct timespec deadline;
        pthread_t remover;

        pthread_mutex_lock(&many_lock);
        many_inside = 0;
        many_release = remove_returned = false;
        many_phase = phase;
        pthread_cond_broadcast(&many_cond);
        pthread_mutex_unlock(&many_lock);
        many_wait_for(&many_inside, MANY_BLOCKED);
        if (pthread_create(&remover, NULL, many_remover, NULL) != 0)
            abort();
        /* A removal that does not wait returns within this, however busy
         * the machine; one that waits returns only after the release. */
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_nsec += 200 * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&many_lock);
        while (!remove_returned &&
               pthread_cond_timedwait(&many_cond, &many_lock, &deadline) == 0)
            ;
        early[phase] = remove_returned;
        many_release = true;
        pthread_cond_broadcast(&many_cond);
        pthread_mutex_unlock(&many_lock);
        pthread_join(remover, NULL);
        if (phase == 1 && (many_id = ra_hooks_install(&hooks)) < 0)
            ck_abort_msg("install failed");
    }
    pthread_mutex_lock(&many_lock);
    many_phase = 3;
    pthread_cond_broadcast(&many_cond);
    pthread_mutex_unlock(&many_lock);
    for (unsigned i = 0; i < MANY_THREADS; i++)
        pthread_join(threads[i], NULL);
    ck_assert_msg(!early[1], "removal returned while the first threads ran it");
    ck_assert_msg(!early[2], "removal returned while the last threads ran it");
}
END_TEST

/* A child forked while another thread runs a callback has only the forking
 * thread: that dispatch is over for it, and a removal there must not wait
 * for it. */
static atomic_bool fork_cb_inside, fork_cb_release;

static void block_until_released(void *ctx, ra_tag_t tag, void *ptr,
                                 size_t size)
{
    (void)ctx; (void)tag; (void)ptr; (void)size;
    if (!many_blocks)
        return;
    many_blocks = false;
    atomic_store(&fork_cb_inside, true);
    while (!atomic_load(&fork_cb_release))
        sched_yield();
}

static void *fork_cb_worker(void *arg)
{
    (void)arg;
    many_blocks = true;
    ra_free(ra_malloc(24));
    return NULL;
}

START_TEST(test_hooks_child_removes_a_hook_another_thread_was_running)
{
    ra_hooks_t hooks = {block_until_released, NULL, NULL};
    int id = ra_hooks_install(&hooks);
    pthread_t worker;
    int status;
    pid_t pid;

    ck_assert_int_ge(id, 0);
    ck_assert_int_eq(pthread_create(&worker, NULL, fork_cb_worker, NULL), 0);
    while (!atomic_load(&fork_cb_inside))
        sched_yield();
    pid = fork();
    if (pid == 0) {
        alarm(10);
        _exit(ra_hooks_remove(id) == 0 ? 0 : 1);
    }
    atomic_store(&fork_cb_release, true);
    pthread_join(worker, NULL);
    ck_assert_int_gt(pid, 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the child's removal failed or waited (status %#x)", status);
}
END_TEST


/* -- "the library's own work" ------------------------------------------------
 * A callback may call the library (and take its own locks): the library never
 * runs a callback, nor a caller's FILE, while it holds a lock of its own, and
 * its own memory is not reported. A broken rule shows as a deadlock, which
 * the test case's timeout turns into a failure. */

/* A FILE whose output is thrown away, buffered in the caller's memory, so
 * that writing to it allocates nothing. */
static FILE *quiet_file(void)
{
    static char buf[1 << 16];
    FILE *f = fopen("/dev/null", "w");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(setvbuf(f, buf, _IOFBF, sizeof buf), 0);
    return f;
}

/* A profile with one live sampled block of tag, which the caller frees. */
static void *profile_one_block(ra_tag_t tag)
{
    void *p;

    ck_assert_int_eq(ra_prof_start(1), 0);
    tu_tag_push(tag);
    p = ra_malloc(100);
    tu_tag_pop(tag);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Each of the library's functions that take a lock and allocate or write. */
enum reporter { CHECKPOINT, CHECKPOINT_REPORT, REPORT, PROF_DUMP, NREPORTERS };

static int call_reporter(enum reporter which, FILE *f)
{
    switch (which) {
    case CHECKPOINT:
        return ra_checkpoint("reporter");
    case CHECKPOINT_REPORT:
        return ra_checkpoint_report(f, RA_FORMAT_JSON);
    case REPORT:
        return ra_report(f, RA_FORMAT_TEXT);
    default:
        return ra_prof_dump(f, RA_PROF_TREE, RA_TAG_ALL);
    }
}

/* The callback of the reentrant hook: the first event it sees calls every
 * reporter, and remembers how many failed. */
struct reentrant {
    FILE *file;
    bool armed;
    int calls, failures;
};

static void reenter(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    struct reentrant *r = ctx;

    (void)tag; (void)ptr; (void)size;
    if (!r->armed)
        return;
    r->armed = false;
    r->calls++;
    for (int i = 0; i < NREPORTERS; i++)
        r->failures += call_reporter((enum reporter)i, r->file) != 0;
}

/* Each reporter, called with a hook installed whose callback calls every
 * reporter in turn: had the first one run the callback under its lock (its
 * own memory reported, or a FILE written under it), the callback's call of
 * the same function would wait for that lock forever. */
START_TEST(test_hooks_callbacks_never_run_under_a_library_lock)
{
    static struct reentrant r;
    ra_hooks_t hooks = {reenter, reenter, &r};
    ra_tag_t tag = tu_tag_create("reentrant");
    void *sampled = profile_one_block(tag);
    int id;

    r.file = quiet_file();
    id = ra_hooks_install(&hooks);
    ck_assert_int_ge(id, 0);
    for (int i = 0; i < NREPORTERS; i++) {
        int rc, calls;
        r.armed = true;
        rc = call_reporter((enum reporter)i, r.file);
        calls = r.calls;
        r.armed = false;
        ck_assert_int_eq(rc, 0);
        /* Nothing the reporter did itself was a callback's business. */
        ck_assert_int_eq(calls, 0);
    }
    /* And a callback may call them all. */
    r.armed = true;
    ra_free(ra_malloc(10));
    ck_assert_int_eq(r.calls, 1);
    ck_assert_int_eq(r.failures, 0);
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    ra_free(sampled);
    fclose(r.file);
}
END_TEST

/* The scenario of a deadlock seen in the field: a callback that frees a
 * sampled block while a dump is taken. */
static void *held_sampled_block;
static bool free_held_armed;

static void free_held_sampled_block(void *ctx, ra_tag_t tag, void *ptr,
                                    size_t size)
{
    void *p = held_sampled_block;

    (void)ctx; (void)tag; (void)ptr; (void)size;
    if (!free_held_armed)
        return;
    free_held_armed = false;
    held_sampled_block = NULL;
    if (p != NULL)
        ra_free(p);
}

START_TEST(test_hooks_callback_freeing_a_sampled_block_during_a_dump)
{
    ra_hooks_t hooks = {free_held_sampled_block, NULL, NULL};
    ra_tag_t tag = tu_tag_create("sampled");
    void *blocks[64];
    FILE *f = quiet_file();
    int id;

    ck_assert_int_eq(ra_prof_start(1), 0);
    /* Enough stacks that the dump's copy grows more than once. */
    tu_tag_push(tag);
    for (int i = 0; i < 64; i++)
        blocks[i] = i % 2 ? ra_malloc(100) : ra_calloc(1, 200);
    held_sampled_block = ra_malloc(300);
    tu_tag_pop(tag);
    id = ra_hooks_install(&hooks);
    ck_assert_int_ge(id, 0);
    free_held_armed = true;
    ck_assert_int_eq(ra_prof_dump(f, RA_PROF_FOLDED, RA_TAG_ALL), 0);
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    ra_free(held_sampled_block);
    for (int i = 0; i < 64; i++)
        ra_free(blocks[i]);
    fclose(f);
}
END_TEST

/* A FILE is user code too: one whose write function takes a checkpoint. */
static ssize_t write_and_checkpoint(void *cookie, const char *buf, size_t n)
{
    int *failures = cookie;

    (void)buf;
    *failures += ra_checkpoint("from a FILE") != 0;
    return (ssize_t)n;
}

START_TEST(test_hooks_checkpoint_report_writes_outside_its_lock)
{
    static int failures;
    cookie_io_functions_t io = {NULL, write_and_checkpoint, NULL, NULL};
    FILE *f;

    tu_tag_create("cookie");
    ck_assert_int_eq(ra_checkpoint("before"), 0);
    f = fopencookie(&failures, "w", io);
    ck_assert_ptr_nonnull(f);
    /* Unbuffered: every piece of the report is a call of the function. */
    ck_assert_int_eq(setvbuf(f, NULL, _IONBF, 0), 0);
    ck_assert_int_eq(ra_checkpoint_report(f, RA_FORMAT_TEXT), 0);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* Reports, checkpoints and dumps allocate only the library's own memory,
 * which hooks never see; the caller's FILE allocates nothing here. */
START_TEST(test_hooks_library_memory_is_not_reported)
{
    static struct recorder r;
    ra_tag_t tag = tu_tag_create("own-memory");
    void *sampled = profile_one_block(tag);
    FILE *f = quiet_file();
    int id = install_recorder(&r);

    r.on = true;
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < NREPORTERS; i++)
            if (call_reporter((enum reporter)i, f) != 0)
                r.n += 1000;
    for (int fmt = RA_PROF_TREE; fmt <= RA_PROF_HEAP_V2; fmt++)
        if (ra_prof_dump(f, (ra_prof_format_t)fmt, tag) != 0)
            r.n += 1000;
    r.on = false;
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    ck_assert_uint_eq(r.n, 0);
    ra_free(sampled);
    fclose(f);
}
END_TEST

/* -- "realloc" -----------------------------------------------------------------
 * on_free of a realloc's old block runs before anything can reuse it: a
 * callback that allocates blocks of the old one's size never gets its
 * address. */

struct reuse_probe {
    bool on;
    unsigned frees;
    unsigned reused; /* on_free saw its block handed out again */
};

static void probe_reuse(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    struct reuse_probe *probe = ctx;
    void *got[256];
    unsigned n = 0;

    if (!probe->on)
        return;
    probe->frees++;
    /* Deep enough to empty the front cache and reach the tcache behind. */
    while (n < 256) {
        got[n] = ra_malloc_tag(tag, size);
        if (got[n] == NULL)
            break;
        if (got[n++] == ptr)
            probe->reused++;
    }
    while (n > 0)
        ra_free(got[--n]);
}

static void check_realloc_frees_after_on_free(ra_tag_t tag, bool profiled)
{
    static struct reuse_probe probe;
    ra_hooks_t hooks = {NULL, probe_reuse, &probe};
    int id;

    memset(&probe, 0, sizeof probe);
    if (profiled)
        ck_assert_int_eq(ra_prof_start(1), 0);
    id = ra_hooks_install(&hooks);
    ck_assert_int_ge(id, 0);
    for (size_t size = 16; size <= 4096; size *= 2) {
        void *p = ra_malloc_tag(tag, size), *q;
        ck_assert_ptr_nonnull(p);
        tu_fill_pattern(p, size, 3);
        probe.on = true;
        /* Into another size class: the block moves. */
        q = ra_realloc(p, size * 3);
        probe.on = false;
        ck_assert_ptr_nonnull(q);
        ck_assert_uint_eq(tu_check_pattern(q, size, 3), size);
        ck_assert_uint_eq(ra_tag_of(q), tag);
        ra_free(q);
    }
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    ck_assert_uint_eq(probe.frees, 9);
    ck_assert_uint_eq(probe.reused, 0);
}

START_TEST(test_hooks_realloc_on_free_runs_before_the_block_is_reusable)
{
    check_realloc_frees_after_on_free(tu_tag_create("moved"), false);
}
END_TEST

START_TEST(test_hooks_untagged_realloc_on_free_runs_before_reuse)
{
    check_realloc_frees_after_on_free(RA_TAG_NONE, false);
}
END_TEST

START_TEST(test_hooks_profiled_realloc_on_free_runs_before_reuse)
{
    check_realloc_frees_after_on_free(tu_tag_create("sampled-moves"), true);
}
END_TEST

/* A realloc that stays in place is still the free of the old size and the
 * allocation of the new one. */
START_TEST(test_hooks_realloc_in_place_is_free_then_alloc)
{
    static struct recorder r;
    ra_tag_t tag = tu_tag_create("in-place");
    void *p = ra_malloc_tag(tag, 1 << 20), *q;
    size_t old_size = ra_malloc_usable_size(p);
    int id = install_recorder(&r);

    r.on = true;
    q = ra_realloc(p, (1 << 20) - 4096);
    r.on = false;
    ck_assert_ptr_eq(q, p);
    ck_assert_uint_eq(r.n, 2);
    assert_event(&r, 0, false, tag, p, old_size);
    assert_event(&r, 1, true, tag, q, ra_malloc_usable_size(q));
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    ra_free(q);
}
END_TEST

/* Two threads, one reallocating, one allocating, and a hook that keeps the
 * set of live addresses: an allocation is never reported at an address the
 * hook still holds live. */
enum { LIVE_SLOTS = 1 << 16, LIVE_ROUNDS = 200000 };

struct live_set {
    pthread_mutex_t lock;
    void *slots[LIVE_SLOTS];
    unsigned long alloc_of_live;
    atomic_bool stop;
};

static size_t live_slot(struct live_set *set, const void *p)
{
    size_t i = ((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull >> 48;

    while (set->slots[i] != NULL && set->slots[i] != p)
        i = (i + 1) & (LIVE_SLOTS - 1);
    return i;
}

static void live_alloc(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    struct live_set *set = ctx;
    size_t i;

    (void)tag; (void)size;
    pthread_mutex_lock(&set->lock);
    i = live_slot(set, ptr);
    if (set->slots[i] == ptr)
        set->alloc_of_live++;
    set->slots[i] = ptr;
    pthread_mutex_unlock(&set->lock);
}

static void live_free(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    struct live_set *set = ctx;
    size_t i, j;

    (void)tag; (void)size;
    pthread_mutex_lock(&set->lock);
    i = live_slot(set, ptr);
    /* Removal from linear probing: re-insert the rest of the cluster. */
    if (set->slots[i] == ptr) {
        set->slots[i] = NULL;
        for (j = (i + 1) & (LIVE_SLOTS - 1); set->slots[j] != NULL;
             j = (j + 1) & (LIVE_SLOTS - 1)) {
            void *moved = set->slots[j];
            set->slots[j] = NULL;
            set->slots[live_slot(set, moved)] = moved;
        }
    }
    pthread_mutex_unlock(&set->lock);
}

static void *realloc_worker(void *arg)
{
    struct live_set *set = arg;
    void *p = ra_malloc(24);

    for (unsigned i = 0; i < LIVE_ROUNDS && p != NULL; i++)
        p = ra_realloc(p, i % 2 ? 24 : 3000);
    ra_free(p);
    atomic_store(&set->stop, true);
    return NULL;
}

static void *churn_worker(void *arg)
{
    struct live_set *set = arg;
    void *held[64] = {NULL};

    for (unsigned i = 0; !atomic_load(&set->stop); i++) {
        ra_free(held[i % 64]);
        held[i % 64] = ra_malloc(i % 3 ? 24 : 3000);
    }
    for (unsigned i = 0; i < 64; i++)
        ra_free(held[i]);
    return NULL;
}

/* A concurrency check of the hooked realloc paths rather than a proof of
 * the order (the tests above are that): on this machine the window a late
 * on_free leaves was never hit by it, before or after. */
START_TEST(test_hooks_live_set_stays_consistent_across_threads)
{
    static struct live_set set = {.lock = PTHREAD_MUTEX_INITIALIZER};
    ra_hooks_t hooks = {live_alloc, live_free, &set};
    pthread_t threads[2];
    int id = ra_hooks_install(&hooks);

    ck_assert_int_ge(id, 0);
    ck_assert_int_eq(pthread_create(&threads[0], NULL, realloc_worker, &set),
                     0);
    ck_assert_int_eq(pthread_create(&threads[1], NULL, churn_worker, &set), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    ck_assert_int_eq(ra_hooks_remove(id), 0);
    ck_assert_uint_eq(set.alloc_of_live, 0);
}
END_TEST

static Suite *hooks_suite(void)
{
    Suite *s = suite_create("hooks");
    TCase *tc;

    tc = tcase_create("install and remove");
    tcase_add_test(tc, test_hooks_install_rejects_bad_arguments);
    tcase_add_test(tc, test_hooks_remove_rejects_unknown_ids);
    tcase_add_test(tc, test_hooks_sixteen_at_once);
    suite_add_tcase(s, tc);

    tc = tcase_create("what is reported");
    tcase_add_test(tc, test_hooks_report_tag_pointer_and_usable_size);
    tcase_add_test(tc, test_hooks_report_every_allocation_function);
    tcase_add_test(tc, test_hooks_realloc_is_free_then_alloc);
    tcase_add_test(tc, test_hooks_callbacks_are_not_reported_to_themselves);
    suite_add_tcase(s, tc);

    tc = tcase_create("removal");
    tcase_add_test(tc, test_hooks_callback_may_remove_its_own_hook);
    tcase_add_test(tc, test_hooks_removed_hook_is_never_called_again);
    tcase_add_test(tc, test_hooks_callback_may_remove_a_later_hook);
    tcase_add_test(tc, test_hooks_removal_waits_for_more_threads_than_words);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("removal after fork");
    tcase_add_test(tc, test_hooks_child_removes_a_hook_another_thread_was_running);
    tcase_set_tags(tc, "multithreaded-fork");
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);

    tc = tcase_create("the library's own work");
    tcase_add_test(tc, test_hooks_callbacks_never_run_under_a_library_lock);
    tcase_add_test(tc, test_hooks_callback_freeing_a_sampled_block_during_a_dump);
    tcase_add_test(tc, test_hooks_checkpoint_report_writes_outside_its_lock);
    tcase_add_test(tc, test_hooks_library_memory_is_not_reported);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);

    tc = tcase_create("realloc");
    tcase_add_test(tc, test_hooks_realloc_on_free_runs_before_the_block_is_reusable);
    tcase_add_test(tc, test_hooks_untagged_realloc_on_free_runs_before_reuse);
    tcase_add_test(tc, test_hooks_profiled_realloc_on_free_runs_before_reuse);
    tcase_add_test(tc, test_hooks_realloc_in_place_is_free_then_alloc);
    tcase_add_test(tc, test_hooks_live_set_stays_consistent_across_threads);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(hooks_suite());
}

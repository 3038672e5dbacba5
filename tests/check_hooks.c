/* Suite "hooks": ra_hooks_install and ra_hooks_remove. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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
    ck_assert_int_ge(ra_hooks_install(&hooks), 0);
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
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(hooks_suite());
}

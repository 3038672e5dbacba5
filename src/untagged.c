/* Floor: base. The untagged row's allocated, live: every thread's own
 * counts of the bytes jemalloc handed it and took back (jemalloc keeps them
 * on its fast paths), summed over the threads of the process, live ones
 * through their counters and exited ones as they left, less the bytes the
 * library took from jemalloc for tags on each thread (its own count, kept
 * where the library calls jemalloc for a tag: never on a fast path). */
#include <sys/single_threaded.h>

#include "backend.h"
#include "internal.h"

RA__TLS struct ra__untagged_thread ra__untagged_self;

/* The threads counted live, by their records (each in its thread's own
 * storage, valid while it is listed), and what the threads that left
 * the list left behind: both under lock, which a thread takes only to
 * join or leave and a read only to sum. A leaf: nothing else is taken
 * under it. A spin lock, held across a fork (a mutex more there passed
 * ThreadSanitizer's bound of 64 held). */
static struct ra__spin lock = RA__SPIN_INIT(RA__RANK_UNTAGGED);
static struct ra__untagged_thread listed = {.prev = &listed,
                                            .next = &listed};
static uint64_t gone;
/* jemalloc keeps no counts per thread (built without statistics). */
static atomic_bool uncounted;

/* What a thread holds of untagged blocks, as far as its own counts go:
 * modulo 2^64, since blocks change threads between their allocation and
 * their free, and only the sum over threads means anything. jemalloc's
 * counts are plain words its thread writes: loaded whole (aligned, 64
 * bits), relaxed. */
static uint64_t held_by(const struct ra__untagged_thread *t)
{
    return __atomic_load_n(t->allocated, __ATOMIC_RELAXED) -
           __atomic_load_n(t->deallocated, __ATOMIC_RELAXED) -
           atomic_load_explicit(&t->tagged, memory_order_relaxed);
}

/* With lock held: t leaves the list, what it holds into gone; or, gone
 * already, what it moved since it left (left: its holding then). */
static void fold(struct ra__untagged_thread *t)
{
    uint64_t now = held_by(t);

    ra__assert_held(&lock);
    /* Only a record with counters is folded: listed, or gone already. */
    ra__assert(t->state == RA__UNTAGGED_LISTED ||
               t->state == RA__UNTAGGED_GONE);
    if (t->state == RA__UNTAGGED_LISTED) {
        RA__RING_UNLINK(t);
        t->state = RA__UNTAGGED_GONE;
        gone += now;
    } else {
        gone += now - t->left;
    }
    t->left = now;
}

/* Where a thread's counters are. jemalloc keeps them in its thread-local
 * storage, which the C library lays out at the same distance from the
 * library's own in every thread when both are loaded at start-up (static
 * TLS: the library's is, being initial-exec). So the distance is taken
 * from the first thread counted, checked once against jemalloc's answer
 * on the next, and from then on a thread's counters are found without
 * asking jemalloc: its first mallctl on a new thread cost that thread
 * 14 us here (jemalloc then zeroes the thread's cache from a recycled
 * extent with madvise), as much again as a thread's whole start and end.
 * Where the check fails (jemalloc's storage made apart for each thread:
 * the library loaded with dlopen), each thread asks. */
enum layout { LAYOUT_UNKNOWN, LAYOUT_TAKEN, LAYOUT_SAME, LAYOUT_ASK };
static _Atomic int layout;
static _Atomic intptr_t allocated_at, deallocated_at;

static intptr_t distance(const uint64_t *counter)
{
    return (intptr_t)((uintptr_t)counter - (uintptr_t)&ra__untagged_self);
}

static const uint64_t *at(intptr_t d)
{
    return (const uint64_t *)((uintptr_t)&ra__untagged_self + (uintptr_t)d);
}

/* The calling thread's counters into me; true when jemalloc has none. */
static bool find_counters(struct ra__untagged_thread *me)
{
    int known = atomic_load_explicit(&layout, memory_order_acquire);
    intptr_t a, d;

    if (known == LAYOUT_SAME) {
        me->allocated = at(atomic_load_explicit(&allocated_at,
                                                memory_order_relaxed));
        me->deallocated = at(atomic_load_explicit(&deallocated_at,
                                                  memory_order_relaxed));
        return false;
    }
    if (ra__be_thread_counters(&me->allocated, &me->deallocated))
        return true;
    a = distance(me->allocated);
    d = distance(me->deallocated);
    if (known == LAYOUT_UNKNOWN) {
        atomic_store_explicit(&allocated_at, a, memory_order_relaxed);
        atomic_store_explicit(&deallocated_at, d, memory_order_relaxed);
        atomic_store_explicit(&layout, LAYOUT_TAKEN, memory_order_release);
    } else if (known == LAYOUT_TAKEN) {
        bool same = a == atomic_load_explicit(&allocated_at,
                                              memory_order_relaxed) &&
                    d == atomic_load_explicit(&deallocated_at,
                                              memory_order_relaxed);
        atomic_store_explicit(&layout, same ? LAYOUT_SAME : LAYOUT_ASK,
                              memory_order_release);
    }
    return false;
}

bool ra__untagged_thread_start(void)
{
    struct ra__untagged_thread *me = &ra__untagged_self;

    ra__untagged_find_self();
    if (me->state != RA__UNTAGGED_UNSEEN)
        return me->state != RA__UNTAGGED_LISTED;
    if (find_counters(me)) {
        atomic_store_explicit(&uncounted, true, memory_order_relaxed);
        return true;
    }
    /* Its leaving is the exit key's last step (init.c). */
    if (ra__thread_exit_arm())
        return true;
    ra__spin_lock(&lock);
    /* unseen -> listed, once, with its counters found. */
    ra__assert(me->state == RA__UNTAGGED_UNSEEN && me->allocated != NULL);
    RA__RING_PUSH(&listed, me);
    me->state = RA__UNTAGGED_LISTED;
    ra__spin_unlock(&lock);
    return false;
}

void ra__untagged_load_start(void)
{
    struct ra__untagged_thread *me = &ra__untagged_self;

    /* glibc's own word: no thread was ever made in the process. Built
     * without the override, the library does not see the next thread
     * made, which may read the row: found now. */
#ifdef RA_OVERRIDE
    bool defer = __libc_single_threaded;
#else
    bool defer = false;
#endif

    if (!defer || ra__thread_exit_arm()) {
        (void)ra__untagged_thread_start();
        return;
    }
    ra__spin_lock(&lock);
    RA__RING_PUSH(&listed, me);
    me->state = RA__UNTAGGED_UNFOUND;
    ra__spin_unlock(&lock);
}

void ra__untagged_find_self(void)
{
    struct ra__untagged_thread *me = &ra__untagged_self;
    bool none;

    if (me->state != RA__UNTAGGED_UNFOUND)
        return;
    none = find_counters(me);
    ra__spin_lock(&lock);
    if (none) {
        RA__RING_UNLINK(me);
        me->state = RA__UNTAGGED_UNSEEN;
        atomic_store_explicit(&uncounted, true, memory_order_relaxed);
    } else {
        /* unfound -> listed: its counters are found now. */
        ra__assert(me->allocated != NULL && me->deallocated != NULL);
        me->state = RA__UNTAGGED_LISTED;
    }
    ra__spin_unlock(&lock);
}

void ra__untagged_thread_end(void)
{
    struct ra__untagged_thread *me = &ra__untagged_self;

    ra__untagged_find_self();
    if (me->state == RA__UNTAGGED_UNSEEN)
        return;
    ra__spin_lock(&lock);
    fold(me);
    ra__spin_unlock(&lock);
}

bool ra__untagged_allocated(size_t *out)
{
    uint64_t sum;

    ra__untagged_find_self();
    if (atomic_load_explicit(&uncounted, memory_order_relaxed))
        return true;
    ra__spin_lock(&lock);
    sum = gone;
    /* An unfound record is the loading thread's while no other thread
     * was made; one made without the C library's threads, which reads
     * here, does not see it counted. */
    for (const struct ra__untagged_thread *t = listed.next; t != &listed;
         t = t->next)
        if (t->state == RA__UNTAGGED_LISTED)
            sum += held_by(t);
    ra__spin_unlock(&lock);
    /* A block freed on a thread read before the one that made it was,
     * while the threads were read one after another, is missing from
     * the sum: never below nothing. */
    *out = (int64_t)sum < 0 ? 0 : (size_t)sum;
    return false;
}

void ra__untagged_prefork(void)
{
    ra__spin_lock(&lock);
}

void ra__untagged_postfork_parent(void)
{
    ra__spin_unlock(&lock);
}

void ra__untagged_postfork_child(void)
{
    /* The child has the forking thread alone; the blocks the others held
     * are the child's too, and stay counted as theirs at the fork (their
     * records, in their stacks, are still mapped: the C library only
     * marks those stacks free for its next threads). */
    for (struct ra__untagged_thread *t = listed.next, *next; t != &listed;
         t = next) {
        next = t->next;
        if (t == &ra__untagged_self)
            continue;
        if (t->state == RA__UNTAGGED_UNFOUND) {
            /* The loading thread, forked without by a thread made past
             * the C library's threads: its counters are not known. */
            RA__RING_UNLINK(t);
            t->state = RA__UNTAGGED_GONE;
            continue;
        }
        fold(t);
    }
    ra__spin_unlock(&lock);
}

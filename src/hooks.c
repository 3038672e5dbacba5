/* Floor: instruments. User callbacks on every allocation and free the library
 * routes. A callback must cost its call, not a cache line shared by every
 * thread: dispatching writes only the calling thread's own word. Removal
 * carries the weight instead, as a grace period: ra_hooks_remove clears the
 * hook's bit, makes every thread's view of memory consistent (membarrier,
 * one system call that puts a full barrier on every running thread), then
 * waits for the threads that were inside a dispatch to leave it. */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "instruments.h"
#include "internal.h"

/* The allocation paths' one test for the hooks and the profiler
 * (types.h's RA__INSTRUMENT_*): kept by the two instruments, read by every
 * path. */
_Atomic unsigned ra__instrumented;

/* A thread's dispatch count: odd while it dispatches. One per cache line,
 * written by its thread only. Threads beyond READERS, and threads past
 * their exit, count themselves in overflow_inflight instead. */
#define READERS 256
struct reader {
    _Atomic unsigned long seq;
    atomic_bool taken;
} __attribute__((aligned(64)));

/* Bit i: slot i is installed. Written under install_lock. */
static _Atomic unsigned active_mask;
/* Bit i: slot i was removed and its grace period is not over, so it cannot
 * be reused yet. Under install_lock. */
static unsigned draining_mask;
static ra_hooks_t slots[RA__HOOKS_MAX];
static struct reader readers[READERS];
static _Atomic unsigned overflow_inflight;
static struct ra__mutex install_lock = RA__MUTEX_INIT(RA__RANK_INSTALL);
/* Set once, before the first hook is installed, when membarrier is not
 * available (or in a ThreadSanitizer build): then every dispatch pays a
 * sequentially consistent increment (a locked instruction) instead. */
static atomic_bool fence_mode;
static bool barrier_checked;

/* Set while this thread runs callbacks: what a callback allocates or frees
 * is not reported (it is still allocated and tagged normally). */
static RA__TLS bool tls_in_hook;
static RA__TLS struct reader *tls_reader;
/* This thread counts in overflow_inflight: no reader was free, or its
 * reader was given back at exit. */
static RA__TLS bool tls_overflow;
static RA__TLS bool tls_in_overflow; /* counted in overflow_inflight now */

static long membarrier(int cmd)
{
    return syscall(SYS_membarrier, cmd, 0, 0);
}

void ra__hooks_prefork(void)
{
    ra__lock(&install_lock);
}

void ra__hooks_postfork(bool child)
{
    /* The child has only this thread: the others' dispatches are over. */
    if (child) {
        for (int i = 0; i < READERS; i++) {
            if (&readers[i] == tls_reader)
                continue;
            atomic_store(&readers[i].seq, 0);
            atomic_store(&readers[i].taken, false);
        }
        atomic_store(&overflow_inflight, tls_in_overflow ? 1u : 0u);
    }
    ra__unlock(&install_lock);
}

void ra__hooks_thread_exit(void)
{
    if (tls_reader != NULL)
        atomic_store(&tls_reader->taken, false);
    /* Whatever the thread still allocates is dispatched through the
     * overflow count. */
    tls_reader = NULL;
    tls_overflow = true;
}

/* The calling thread's reader, taken on its first dispatch; NULL when it
 * counts in overflow_inflight. */
static struct reader *my_reader(void)
{
    if (RA__LIKELY(tls_reader != NULL) || tls_overflow)
        return tls_reader;
    tls_overflow = true;
    for (int i = 0; i < READERS; i++) {
        bool free_reader = false;
        if (atomic_load_explicit(&readers[i].taken, memory_order_relaxed) ||
            !atomic_compare_exchange_strong(&readers[i].taken, &free_reader,
                                            true))
            continue;
        /* pthread_setspecific may allocate: not reported (tls_in_hook). */
        if (ra__thread_exit_arm()) {
            atomic_store(&readers[i].taken, false);
            return NULL;
        }
        tls_overflow = false;
        tls_reader = &readers[i];
        return tls_reader;
    }
    return NULL;
}

/* Under install_lock, before the first hook: membarrier, or sequentially
 * consistent operations on both sides. ThreadSanitizer does not model
 * membarrier, so its builds take the second way. */
static void choose_barrier(void)
{
    ra__assert_held(&install_lock);
    if (barrier_checked)
        return;
    barrier_checked = true;
#ifdef RA_TSAN
    atomic_store(&fence_mode, true);
#else
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
        atomic_store(&fence_mode, true);
#endif
}

int ra_hooks_install(const ra_hooks_t *hooks)
{
    unsigned taken;
    int id = -1;

    if (hooks == NULL || (hooks->on_alloc == NULL && hooks->on_free == NULL)) {
        errno = EINVAL;
        return -1;
    }
    /* First use of the library: registers the fork handlers for our lock. */
    ra__init();
    ra__lock(&install_lock);
    choose_barrier();
    taken = atomic_load(&active_mask) | draining_mask;
    for (int i = 0; i < RA__HOOKS_MAX; i++) {
        if (taken & (1u << i))
            continue;
        slots[i] = *hooks;
        atomic_fetch_or(&active_mask, 1u << i);
        /* Counted before the gate opens every free to the hooks. */
        ra__instrument_add(RA__INSTRUMENT_HOOK);
        ra__free_gate_hooks(true);
        id = i;
        break;
    }
    ra__unlock(&install_lock);
    if (id < 0)
        errno = ENOSPC;
    return id;
}

/* Every thread that might have seen the bits as they were before this call
 * has left its dispatch: waits for each dispatch in progress to end, after
 * a barrier that makes any dispatch started before it visible. A callback
 * of this thread that removes a hook waits only for the other threads.
 * Without membarrier, the bit's clearing and these loads are sequentially
 * consistent, as are a reader's increment and its load of the bits: one of
 * the two sides sees the other. */
static void wait_for_readers(void)
{
    unsigned own;

    if (!atomic_load(&fence_mode) &&
        membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
        abort(); /* registered in choose_barrier: cannot fail */
    for (int i = 0; i < READERS; i++) {
        unsigned long seq;

        if (&readers[i] == tls_reader)
            continue;
        seq = atomic_load_explicit(&readers[i].seq, memory_order_seq_cst);
        if (seq & 1)
            while (atomic_load_explicit(&readers[i].seq,
                                        memory_order_acquire) == seq)
                sched_yield();
    }
    own = tls_in_overflow ? 1 : 0;
    while (atomic_load(&overflow_inflight) > own)
        sched_yield();
}

int ra_hooks_remove(int id)
{
    if (id < 0 || id >= RA__HOOKS_MAX) {
        errno = EINVAL;
        return -1;
    }
    ra__lock(&install_lock);
    if (!(atomic_load(&active_mask) & (1u << id))) {
        ra__unlock(&install_lock);
        errno = EINVAL;
        return -1;
    }
    atomic_fetch_and(&active_mask, ~(1u << id));
    draining_mask |= 1u << id;
    ra__instrument_sub(RA__INSTRUMENT_HOOK);
    ra__free_gate_hooks(ra__hooks_any());
    ra__unlock(&install_lock);
    wait_for_readers();
    ra__lock(&install_lock);
    draining_mask &= ~(1u << id);
    ra__unlock(&install_lock);
    return 0;
}

/* Calls every hook in mask and those installed meanwhile at later slots.
 * The bits are read again after each callback: one may remove a hook that
 * comes later, which must not be called once its removal returned. */
static void call_hooks(bool alloc, unsigned mask, ra_tag_t tag, void *ptr,
                       size_t size)
{
    for (int i = 0; mask != 0; mask = atomic_load_explicit(
                                   &active_mask, memory_order_acquire) &
                               (~0u << i)) {
        void (*fn)(void *, ra_tag_t, void *, size_t);

        i = __builtin_ctz(mask);
        fn = alloc ? slots[i].on_alloc : slots[i].on_free;
        if (fn != NULL)
            fn(slots[i].ctx, tag, ptr, size);
        if (++i == RA__HOOKS_MAX)
            break;
    }
}

/* A thread without a reader word (past READERS threads, or exiting), or
 * no membarrier. */
RA__COLD static void dispatch_slow(bool alloc, ra_tag_t tag, void *ptr,
                                  size_t size)
{
    struct reader *r = my_reader();
    unsigned long seq = 0;
    unsigned mask;

    if (RA__LIKELY(r != NULL) &&
        atomic_load_explicit(&fence_mode, memory_order_relaxed)) {
        seq = atomic_fetch_add_explicit(&r->seq, 1, memory_order_seq_cst);
        mask = atomic_load_explicit(&active_mask, memory_order_seq_cst);
    } else if (r != NULL) {
        /* A reader word taken just now, under membarrier. */
        seq = atomic_load_explicit(&r->seq, memory_order_relaxed);
        atomic_store_explicit(&r->seq, seq + 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
        mask = atomic_load_explicit(&active_mask, memory_order_acquire);
    } else {
        atomic_fetch_add(&overflow_inflight, 1);
        tls_in_overflow = true;
        mask = atomic_load(&active_mask);
    }
    call_hooks(alloc, mask, tag, ptr, size);
    if (RA__LIKELY(r != NULL)) {
        atomic_signal_fence(memory_order_seq_cst);
        atomic_store_explicit(&r->seq, seq + 2, memory_order_release);
    } else {
        tls_in_overflow = false;
        atomic_fetch_sub(&overflow_inflight, 1);
    }
}

/* The common case costs a call, not a loop: the thread has its reader word,
 * membarrier orders it against removals, and one hook is installed. Only
 * this thread writes its word, so the count is read back from it after the
 * callback instead of being kept in a register saved across the call. */
static inline __attribute__((always_inline)) void
dispatch(bool alloc, ra_tag_t tag, void *ptr, size_t size)
{
    struct reader *r = tls_reader;
    unsigned mask;

    tls_in_hook = true;
    if (RA__UNLIKELY(r == NULL) ||
        RA__UNLIKELY(atomic_load_explicit(&fence_mode, memory_order_relaxed))) {
        dispatch_slow(alloc, tag, ptr, size);
        tls_in_hook = false;
        return;
    }
    atomic_store_explicit(
        &r->seq, atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
        memory_order_relaxed);
    /* Under membarrier the order of the store and the load needs no
     * instruction: a remover's barrier either sees the count odd or comes
     * before the load. */
    atomic_signal_fence(memory_order_seq_cst);
    mask = atomic_load_explicit(&active_mask, memory_order_acquire);
    if (RA__UNLIKELY((mask & (mask - 1)) != 0)) {
        call_hooks(alloc, mask, tag, ptr, size);
    } else if (mask != 0) {
        const ra_hooks_t *h = &slots[__builtin_ctz(mask)];
        void (*fn)(void *, ra_tag_t, void *, size_t) =
            alloc ? h->on_alloc : h->on_free;
        if (fn != NULL)
            fn(h->ctx, tag, ptr, size);
    }
    r = tls_reader;
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store_explicit(
        &r->seq, atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
        memory_order_release);
    tls_in_hook = false;
}

bool ra__hooks_reporting(const void *ptr)
{
    return ptr != NULL && !tls_in_hook && ra__hooks_muted == 0;
}

void *ra__hooks_on_alloc_of(void *ptr, size_t size)
{
    if (ra__hooks_reporting(ptr))
        dispatch(true, ra__block_tag(ptr), ptr, size);
    return ptr;
}

void ra__hooks_on_free_of(ra_tag_t tag, void *ptr, size_t size)
{
    if (ra__hooks_reporting(ptr))
        dispatch(false, tag, ptr, size);
}

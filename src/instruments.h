/* Floor: instruments. What the paths consult on the way: hooks.c's
 * callbacks and instrumentation word, prof.c's sampling (its countdown
 * inline). */
#ifndef RA_INSTRUMENTS_H
#define RA_INSTRUMENTS_H

#include "internal.h"

/* -- hooks.c: user callbacks ------------------------------------------------ */
/* Hidden, so that the entry points (alloc_entry.c's, override.c's) reach
 * it PC-relative; hooks.c owns it. */
extern _Atomic unsigned ra__instrumented __attribute__((visibility("hidden")));

/* Whether a report of ptr would reach the installed hooks: not NULL, and
 * the calling thread neither inside a hook nor muted. */
bool ra__hooks_reporting(const void *ptr);
/* Report to the installed hooks, unless ra__hooks_reporting says no: the
 * allocation of ptr (usable size known to the caller; returns ptr, so that
 * an allocation path ends in a tail call), the free of ptr of tag (called
 * before the block can be reused). */
void *ra__hooks_on_alloc_of(void *ptr, size_t size);
void ra__hooks_on_free_of(ra_tag_t tag, void *ptr, size_t size);
/* At thread exit (init.c): the thread's reader word goes back; what it
 * dispatches afterwards counts in the shared overflow counter. */
void ra__hooks_thread_exit(void);
/* Fork handlers for the install lock; in the child, the callbacks that other
 * threads were running are over. */
void ra__hooks_prefork(void);
void ra__hooks_postfork(bool child);

/* -- prof.c: the sampled allocation-site profile ------------------------------ */
/* Calls visit for every stack of tag (RA_TAG_ALL: every tag) while holding
 * the profile's lock, so the figures are consistent; visit may allocate
 * with ra__meta_alloc, and must call nothing else of the library's.
 * Returns the mean sampling interval in bytes, or 0 when the profiler was
 * never started (nothing visited). */
size_t ra__prof_visit(ra_tag_t tag,
                      void (*visit)(const struct ra__prof_stack *stack,
                                    void *ctx),
                      void *ctx);

/* Whether the profiler samples. */
extern atomic_bool ra__prof_sampling;
/* The calling thread's bytes to its next sample; <= 0 also when none was
 * drawn yet. */
extern RA__TLS int64_t ra__prof_countdown;
/* The countdown ran out: draws the next one and says whether this
 * allocation of size bytes is sampled (never inside the profiler). */
bool ra__prof_tick_slow(size_t size) __attribute__((noinline, cold));

/* Records the sampled block ptr of size requested bytes under tag: its call
 * stack and its weight. The block's page is already marked. */
void ra__prof_record(ra_tag_t tag, void *ptr, size_t size);
/* ptr, a sampled block, is being freed (or reallocated): it leaves the
 * profile's live figures. */
void ra__prof_on_free(const void *ptr);
/* The tag's blocks were all freed at once (a reset): its live samples
 * leave the profile; with history (a destroy), its stacks too. */
void ra__prof_forget(ra_tag_t tag, bool history);
/* ra_prof_start without its checks, for ra__init (REGIONALLOC_PROF). */
void ra__prof_begin(size_t mean_interval_bytes);
/* Fork handlers for the profile's lock. */
void ra__prof_prefork(void);
void ra__prof_postfork(void);

/* -- hooks.c, prof.c: the instrumentation word ------------------------------ */
static inline void ra__instrument_add(unsigned what)
{
    atomic_fetch_add(&ra__instrumented, what);
}

static inline void ra__instrument_sub(unsigned what)
{
    atomic_fetch_sub(&ra__instrumented, what);
}

/* Whether a hook is installed: ra__instrumented counts them. */
static inline bool ra__hooks_any(void)
{
    return (atomic_load_explicit(&ra__instrumented, memory_order_relaxed) &
            ~(RA__INSTRUMENT_PROF | RA__INSTRUMENT_LIBRARY)) != 0;
}

/* -- prof.c: the sampling countdown ------------------------------------------- */
/* Counts size bytes off the calling thread's countdown. Returns false when
 * it ran out (or was never drawn): then ra__prof_tick_slow decides. Inline:
 * a subtract, a compare and a store. */
static inline bool ra__prof_countdown_holds(size_t size)
{
    /* Unsigned: a size of 2^63 or more wraps instead of overflowing (such
     * an allocation fails anyway, whatever the countdown says). */
    int64_t left = (int64_t)((uint64_t)ra__prof_countdown - (uint64_t)size);

    if (RA__UNLIKELY(left <= 0))
        return false;
    ra__prof_countdown = left;
    return true;
}

#endif /* RA_INSTRUMENTS_H */

/* The monotonic clock and a sleep that outlasts signals, shared by the
 * segment reader (its retries, a copy's time) and the live view. */
#ifndef REGIONALLOC_TOP_CLOCK_H
#define REGIONALLOC_TOP_CLOCK_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t monotonic_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u),
                          (long)(ns % 1000000000u)};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

#endif

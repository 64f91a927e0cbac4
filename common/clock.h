/* Clocks in nanoseconds. */
#ifndef CODEXRAY_COMMON_CLOCK_H
#define CODEXRAY_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Wall time: what goes into profiles and file names. */
static inline uint64_t clock__real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Monotonic time: for intervals and timeouts. */
static inline uint64_t clock__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* CPU time of the calling thread. */
static inline uint64_t clock__thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

#endif

/* Work that switches often, for the sampling-time test (issue 15): a
 * sampler whose period is in step with the kernel's tick or with periodic
 * work over- or under-counts such processes.
 *
 *   tick_mix spin SPIN_US SLEEP_US SECONDS
 *       spin SPIN_US of wall time, sleep SLEEP_US, again, for SECONDS
 *   tick_mix periodic PERIOD_US BUSY_US SECONDS
 *       every PERIOD_US on the clock (absolute deadlines, so it never
 *       drifts), spin BUSY_US, for SECONDS
 *
 * Pin it with taskset to make several share one CPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static volatile unsigned long sink;

static void spin_until(long long t)
{
    while (now_ns() < t)
        for (int i = 0; i < 200; i++)
            sink += (unsigned long)i * 2654435761u;
}

static void sleep_until(long long t)
{
    struct timespec ts = {t / 1000000000ll, t % 1000000000ll};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
        ;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: tick_mix spin|periodic US US SECONDS\n");
        return 2;
    }
    long long a = atoll(argv[2]) * 1000, b = atoll(argv[3]) * 1000;
    long long end = now_ns() + atoll(argv[4]) * 1000000000ll;

    if (strcmp(argv[1], "spin") == 0) {
        while (now_ns() < end) {
            spin_until(now_ns() + a);
            sleep_until(now_ns() + b);
        }
        return 0;
    }
    /* periodic: a = period, b = busy time */
    for (long long t = now_ns(); t < end; t += a) {
        sleep_until(t);
        spin_until(t + b);
    }
    return 0;
}

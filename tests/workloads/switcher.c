/* A process that switches often: spins spin_us of CPU, sleeps sleep_us,
 * again, for SECONDS, on the CPUs it was started on (taskset). Several of
 * them on one CPU switch at the scheduler's own times, the kind of load a
 * sampler in step with the kernel's tick over- or under-counts. Prints its
 * CPU time at the end.
 *
 *   switcher SECONDS SPIN_US SLEEP_US
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(clockid_t c)
{
    struct timespec ts;

    clock_gettime(c, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile unsigned long sink;

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: switcher SECONDS SPIN_US SLEEP_US\n");
        return 2;
    }
    double end = now(CLOCK_MONOTONIC) + atof(argv[1]);
    double spin = atof(argv[2]) / 1e6;
    useconds_t nap = (useconds_t)atoi(argv[3]);

    while (now(CLOCK_MONOTONIC) < end) {
        /* CPU time, not wall time: spin_us of work however it is shared. */
        double until = now(CLOCK_THREAD_CPUTIME_ID) + spin;
        while (now(CLOCK_THREAD_CPUTIME_ID) < until)
            for (int i = 0; i < 1000; i++)
                sink += i;
        usleep(nap);
    }
    printf("cpu_seconds=%.3f\n", now(CLOCK_PROCESS_CPUTIME_ID));
    return 0;
}

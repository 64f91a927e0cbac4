/* A CPU-bound workload with a known answer: main -> run -> dispatch ->
 * hot_a / hot_b / hot_c, which do the same loop 3, 2 and 1 times as often,
 * so their CPU time splits 3:2:1 (50 %, 33 %, 17 %).
 *
 *   cpu_split SECONDS [THREADS [ROUND]]
 *
 * ROUND: dispatch's unit, hot_a looping 3 * ROUND times a round (20000000:
 * a round of ~150 ms here). An emulated CPU shared by several workloads
 * takes many times longer: a test measuring a few seconds there gives a
 * smaller round, so that its window holds many whole rounds and the split
 * is not skewed by the one it cuts in part.
 *
 * Prints its CPU time on exit, so tests can compare the sample count. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static volatile uint64_t sink;
static uint64_t round_n = 20000000; /* a round of ~150 ms: many sample periods, so no aliasing */

/* The same loop everywhere, expanded in place so the time is spent in the
 * function that names it. */
#define SPIN(n)                                                                                    \
    do {                                                                                           \
        uint64_t x = sink;                                                                         \
        for (uint64_t i = 0; i < (n); i++) {                                                       \
            x = x * 6364136223846793005ull + 1442695040888963407ull;                               \
            __asm__ volatile("" : "+r"(x));                                                        \
        }                                                                                          \
        sink = x;                                                                                  \
    } while (0)

__attribute__((noinline)) void hot_a(uint64_t n)
{
    SPIN(3 * n);
}

__attribute__((noinline)) void hot_b(uint64_t n)
{
    SPIN(2 * n);
}

__attribute__((noinline)) void hot_c(uint64_t n)
{
    SPIN(n);
}

__attribute__((noinline)) void dispatch(uint64_t n)
{
    hot_a(n);
    hot_b(n);
    hot_c(n);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void run(double seconds)
{
    double end = now() + seconds;
    while (now() < end)
        dispatch(round_n);
}

static void *thread_main(void *arg)
{
    run(*(double *)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    pthread_t t[64];
    struct rusage ru;

    if (threads < 1 || threads > 64)
        threads = 1;
    if (argc > 3 && strtoull(argv[3], NULL, 10) > 0)
        round_n = strtoull(argv[3], NULL, 10);
    for (int i = 1; i < threads; i++)
        pthread_create(&t[i], NULL, thread_main, &seconds);
    run(seconds);
    for (int i = 1; i < threads; i++)
        pthread_join(t[i], NULL);
    getrusage(RUSAGE_SELF, &ru);
    printf("cpu_seconds=%.3f\n", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                                     ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
    return 0;
}

/* Two threads passing a byte back and forth over two pipes: every round
 * trip is two blocking reads, two wake-ups and two context switches on
 * each side, so a profiler's cost on sched_switch shows in its rate.
 * Prints round trips per second over SECONDS. Both threads run on one
 * CPU (the first the process may use): every round trip is then two
 * switches of that CPU, without the cross-CPU wake-ups whose placement
 * makes a free-running ping-pong's rate vary several times over.
 *
 *     pingpong SECONDS
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int ab[2], ba[2];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *pong(void *arg)
{
    char c;
    (void)arg;
    while (read(ab[0], &c, 1) == 1)
        if (write(ba[1], &c, 1) != 1)
            break;
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t t;
    char c = 'x';
    uint64_t n = 0;

    cpu_set_t set, one;
    if (argc != 2 || sched_getaffinity(0, sizeof(set), &set))
        return 2;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, &set)) {
            CPU_SET(c, &one);
            break;
        }
    }
    /* Before the thread starts: it inherits the mask. */
    if (sched_setaffinity(0, sizeof(one), &one) || pipe(ab) || pipe(ba) ||
        pthread_create(&t, NULL, pong, NULL))
        return 2;
    double t0 = now(), end = t0 + atof(argv[1]), t1;
    while ((t1 = now()) < end) {
        for (int i = 0; i < 1000; i++) {
            if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
                return 1;
        }
        n += 1000;
    }
    printf("%.0f\n", n / (t1 - t0));
    return 0;
}

/* Benchmark workload: N processes, each running a little every 50 ms through
 * a few frames, so a profiler's tables hold N live processes.
 *
 *   many N SECONDS [WORK]
 *
 * WORK: loop iterations a wake-up (200000 by default: 500 processes then
 * keep two cores' run queues hundreds deep). */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

__attribute__((noinline)) void leaf(int n)
{
    for (int i = 0; i < n; i++)
        sink = sink * 31 + i;
}

__attribute__((noinline)) void middle(int n)
{
    leaf(n);
}

__attribute__((noinline)) void child_loop(double seconds, int work)
{
    struct timespec nap = {0, 50 * 1000 * 1000};
    time_t end = time(NULL) + (time_t)seconds;
    while (time(NULL) < end) {
        middle(work);
        nanosleep(&nap, NULL);
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 500;
    double seconds = argc > 2 ? atof(argv[2]) : 30;
    int work = argc > 3 ? atoi(argv[3]) : 200000;

    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) {
            child_loop(seconds, work);
            _exit(0);
        }
    }
    while (wait(NULL) > 0)
        ;
    return 0;
}

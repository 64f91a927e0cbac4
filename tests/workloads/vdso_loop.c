/* Time spent in the vDSO: poll_clock asks clock_gettime in a loop, which
 * the kernel's vDSO answers in user space, so most samples land in a
 * binary no file holds, built without frame pointers. Its frames must be
 * named and walked through to poll_clock -> run -> main.
 *
 *   vdso_loop SECONDS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

__attribute__((noinline)) double poll_clock(void)
{
    struct timespec ts;
    for (int i = 0; i < 1000; i++) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sink += ts.tv_nsec;
    }
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void run(double seconds)
{
    double end = poll_clock() + seconds;
    while (poll_clock() < end)
        sink++;
}

int main(int argc, char **argv)
{
    run(argc > 1 ? atof(argv[1]) : 10);
    printf("done\n");
    return 0;
}

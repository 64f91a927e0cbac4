/* A signal handler's stack: the CPU time is in in_handler, called from
 * on_alarm, the SIGALRM handler, which the kernel entered through libc's
 * __restore_rt while interrupted() was running under run -> main. Every
 * frame of that chain is built without frame pointers, so only CFI (with
 * the signal frame's saved registers) can walk from the handler back to
 * main.
 *
 *   cfi_signal SECONDS */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static volatile uint64_t sink;

#define SPIN(n)                                                                                    \
    do {                                                                                           \
        uint64_t x = sink;                                                                         \
        for (uint64_t i = 0; i < (n); i++) {                                                       \
            x = x * 6364136223846793005ull + 1442695040888963407ull;                               \
            __asm__ volatile("" : "+r"(x));                                                        \
        }                                                                                          \
        sink = x;                                                                                  \
    } while (0)

/* About 1.5 ms a signal, every 7.3 ms: a fifth of the time is in the
 * handler. A real-time timer whose period is no multiple of the 10 ms
 * sample period: ITIMER_PROF fires on the scheduler tick, in step with
 * the cpu-clock samples, so they would always land just before it. */
__attribute__((noinline)) void in_handler(void)
{
    SPIN(1000000);
}

__attribute__((noinline)) void on_alarm(int sig)
{
    (void)sig;
    in_handler();
    sink++; /* not a tail call */
}

__attribute__((noinline)) void interrupted(uint64_t n)
{
    SPIN(n);
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
        interrupted(20000000);
    sink++;
}

int main(int argc, char **argv)
{
    struct sigaction sa = {.sa_handler = on_alarm};
    struct itimerval it = {.it_interval = {0, 7300}, .it_value = {0, 7300}};

    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    setitimer(ITIMER_REAL, &it, NULL);
    run(argc > 1 ? atof(argv[1]) : 10);
    printf("done\n");
    return 0;
}

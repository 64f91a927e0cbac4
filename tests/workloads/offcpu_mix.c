/* Threads that wait in known functions, timing their own waits: the known
 * answer of the off-CPU tests (tests/integration/offcpu_tests.py).
 *
 *   wait_pipe  read() of a pipe a feeder thread writes a byte to every 2 ms
 *   nap        nanosleep(), 3 ms at a time (NAP_US), in two threads (NAPPERS),
 *              each started NAP_US / NAPPERS after the one before
 *   wait_lock  pthread_mutex_lock() of a mutex a holder thread keeps for
 *              4 ms at a time (it sleeps in hold_lock with it held)
 *   sync_file  write() + fsync() of a file in DIR (a disk, not tmpfs)
 *   spin_a/b   a CPU-bound thread, spin_a twice spin_b's work: the CPU
 *              profile of the same run; the thread's CPU time in each is
 *              measured too (the split is not 2:1 on a busy machine:
 *              0.60 to 0.72 of the samples were spin_a's, run to run)
 *
 * Every 100 ms it prints the time spent off the CPU inside each waiting
 * call so far (CLOCK_MONOTONIC ns less the thread's own CPU time in it,
 * summed over its threads) and the spinner's CPU time
 * in spin_a and spin_b (CLOCK_THREAD_CPUTIME_ID ns):
 *   t=NS wait_pipe=NS nap=NS wait_lock=NS sync_file=NS spin_a=NS spin_b=NS
 * Usage: offcpu_mix DIR SECONDS [NAP_US [NAPPERS]]
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { PIPE, NAP, LOCK, SYNC, NWAITS };
static const char *const names[NWAITS] = {"wait_pipe", "nap", "wait_lock", "sync_file"};
static _Atomic uint64_t waited[NWAITS];
static _Atomic uint64_t spun[2]; /* spin_a's, spin_b's thread CPU ns */
static int pipefd[2];
static long nap_us = 3000;
static long nappers = 2;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const char *dir;
static volatile uint64_t sink;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The time off the CPU since (wall t0, thread CPU c0): the wall time less
 * what the thread ran meanwhile (a write() and fsync() run in the kernel
 * on the thread's CPU too: measured here, 35 % of their wall time). */
static uint64_t off_since(uint64_t t0, uint64_t c0)
{
    uint64_t wall = now_ns() - t0, cpu = thread_cpu_ns() - c0;
    return wall > cpu ? wall - cpu : 0;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

__attribute__((noinline)) void wait_pipe(void)
{
    char c;
    uint64_t t0 = now_ns(), c0 = thread_cpu_ns();
    if (read(pipefd[0], &c, 1) != 1)
        exit(1);
    waited[PIPE] += off_since(t0, c0);
}

__attribute__((noinline)) void nap(void)
{
    uint64_t t0 = now_ns(), c0 = thread_cpu_ns();
    sleep_us(nap_us);
    waited[NAP] += off_since(t0, c0);
}

__attribute__((noinline)) void wait_lock(void)
{
    uint64_t t0 = now_ns(), c0 = thread_cpu_ns();
    pthread_mutex_lock(&mu);
    waited[LOCK] += off_since(t0, c0);
    pthread_mutex_unlock(&mu);
}

__attribute__((noinline)) void sync_file(int fd)
{
    static const char block[4096];
    uint64_t t0 = now_ns(), c0 = thread_cpu_ns();
    if (pwrite(fd, block, sizeof(block), 0) != sizeof(block) || fsync(fd))
        exit(1);
    waited[SYNC] += off_since(t0, c0);
}

__attribute__((noinline)) void hold_lock(void)
{
    pthread_mutex_lock(&mu);
    sleep_us(4000);
    pthread_mutex_unlock(&mu);
}

__attribute__((noinline)) void feed(void)
{
    sleep_us(2000);
    if (write(pipefd[1], "x", 1) != 1)
        exit(1);
}

__attribute__((noinline)) void spin_a(void)
{
    for (int i = 0; i < 200000; i++)
        sink += i;
}

__attribute__((noinline)) void spin_b(void)
{
    for (int i = 0; i < 100000; i++)
        sink += i;
}

static void *pipe_reader(void *arg)
{
    (void)arg;
    for (;;)
        wait_pipe();
}

static void *feeder(void *arg)
{
    (void)arg;
    for (;;)
        feed();
}

static void *napper(void *arg)
{
    /* Out of step with the others: in step, their naps would all start and
     * end in the same slots of the duty cycle, as one napper. */
    sleep_us((long)(intptr_t)arg * (nap_us / nappers));
    for (;;)
        nap();
}

static void *holder(void *arg)
{
    (void)arg;
    for (;;) {
        hold_lock();
        sleep_us(200); /* lets the waiter take it now and then */
    }
}

static void *locker(void *arg)
{
    (void)arg;
    for (;;)
        wait_lock();
}

static void *syncer(void *arg)
{
    char path[4096];
    (void)arg;
    snprintf(path, sizeof(path), "%s/offcpu_mix.%d", dir, (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    unlink(path);
    for (;;)
        sync_file(fd);
}

static void *spinner(void *arg)
{
    (void)arg;
    for (;;) {
        uint64_t t0 = thread_cpu_ns();
        spin_a();
        uint64_t t1 = thread_cpu_ns();
        spin_b();
        uint64_t t2 = thread_cpu_ns();
        atomic_fetch_add(&spun[0], t1 - t0);
        atomic_fetch_add(&spun[1], t2 - t1);
        sleep_us(200); /* not a whole CPU: the machine is shared */
    }
}

int main(int argc, char **argv)
{
    void *(*threads[])(void *) = {pipe_reader, feeder, holder, locker, syncer, spinner};
    pthread_t t;

    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: offcpu_mix DIR SECONDS [NAP_US [NAPPERS]]\n");
        return 2;
    }
    if (argc >= 4 && (nap_us = atol(argv[3])) <= 0) {
        fprintf(stderr, "offcpu_mix: NAP_US must be a positive number\n");
        return 2;
    }
    if (argc == 5 && ((nappers = atol(argv[4])) <= 0 || nappers > 64)) {
        fprintf(stderr, "offcpu_mix: NAPPERS must be from 1 to 64\n");
        return 2;
    }
    dir = argv[1];
    if (pipe(pipefd))
        return 1;
    for (size_t i = 0; i < sizeof(threads) / sizeof(threads[0]); i++)
        if (pthread_create(&t, NULL, threads[i], NULL))
            return 1;
    for (long i = 0; i < nappers; i++)
        if (pthread_create(&t, NULL, napper, (void *)(intptr_t)i))
            return 1;
    uint64_t end = now_ns() + (uint64_t)atoi(argv[2]) * 1000000000ull;
    while (now_ns() < end) {
        sleep_us(100000);
        printf("t=%llu", (unsigned long long)now_ns());
        for (int i = 0; i < NWAITS; i++)
            printf(" %s=%llu", names[i], (unsigned long long)waited[i]);
        printf(" spin_a=%llu spin_b=%llu\n", (unsigned long long)spun[0],
               (unsigned long long)spun[1]);
        fflush(stdout);
    }
    return 0;
}

/* The CFI benchmark's workload: one thread per CPU, each spinning at the
 * bottom of a recursion, so every sample has the same known depth (the
 * recursion plus thread_main, start_thread and clone3).
 *
 *   deep SECONDS DEPTH THREADS
 *
 * Built with frame pointers, so the frame-pointer walk and the CFI walk see
 * the same frames and their BPF times compare like for like. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;
static time_t end;

__attribute__((noinline)) static void spin(void)
{
    while (time(NULL) < end)
        for (int i = 0; i < 100000; i++)
            sink += i;
}

__attribute__((noinline)) static void dive(int n)
{
    if (n > 0)
        dive(n - 1);
    else
        spin();
    sink++; /* not a tail call */
}

static int depth;

static void *thread_main(void *arg)
{
    (void)arg;
    dive(depth);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: deep SECONDS DEPTH THREADS\n");
        return 2;
    }
    end = time(NULL) + atoi(argv[1]);
    depth = atoi(argv[2]);
    int n = atoi(argv[3]);
    pthread_t *t = calloc(n, sizeof(*t));
    if (!t)
        return 1;
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, thread_main, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    return 0;
}

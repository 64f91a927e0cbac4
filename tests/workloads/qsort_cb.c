/* A stack that crosses a library without frame pointers: main -> run ->
 * sort_round -> libc's qsort (Debian's libc: no frame pointers, its own
 * recursion inside) -> by_key, our comparator, where the CPU time is. A
 * frame-pointer walk loses everything under libc; a CFI walk keeps it.
 *
 *   qsort_cb SECONDS
 *
 * Built with frame pointers itself, so only libc's frames need CFI. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 4096

static volatile uint64_t sink;
static uint64_t keys[N];

/* The comparator does real work per call, so samples land in it. */
__attribute__((noinline)) static int by_key(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b, h = x ^ y;
    for (int i = 0; i < 200; i++) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(h));
    }
    sink += h & 1;
    return x < y ? -1 : x > y;
}

__attribute__((noinline)) void sort_round(uint64_t seed)
{
    for (int i = 0; i < N; i++) {
        seed = seed * 6364136223846793005ull + 1;
        keys[i] = seed >> 11;
    }
    qsort(keys, N, sizeof(keys[0]), by_key);
    sink += keys[0];
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
    for (uint64_t r = 1; now() < end; r++)
        sort_round(r);
}

int main(int argc, char **argv)
{
    run(argc > 1 ? atof(argv[1]) : 10);
    printf("done\n");
    return 0;
}

/* What this machine charges for memory a thread touches after it slept:
 * the cost behind the agent's figures on a busy node (docs/benchmarks.md).
 *
 *   pagetouch [MIB [SLEEP_US [SECONDS]]]
 *
 * A buffer of MIB MiB (default 40) is written once, then, for SECONDS
 * (default 3) each: sleep SLEEP_US (default 5000), read 16 random cache
 * lines of it, each timed alone. Three buffers: in 4 KiB pages, in
 * transparent huge pages (madvise), and 4 KiB pages read without sleeping.
 * Prints one line each: "pagetouch KIND ns=MEDIAN p90=P90", the median and
 * 90th percentile of the reads in nanoseconds.
 *
 * The agent sleeps between wakeups (its poll) and on a wakeup reads its
 * tables: on hardware with nested paging a cold read costs ~100 ns; on a VM
 * whose hypervisor shadows the guest's page tables, a page's first touch
 * after the vCPU switched away can cost microseconds, and every distinct
 * page a wakeup touches pays it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define READS_PER_WAKE 16
#define MAX_READS (1u << 20)

static uint64_t now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Times reads of random lines of buf (size bytes) for seconds, sleeping
 * sleep_us before each group of READS_PER_WAKE. Prints the median and p90. */
static int measure(const char *kind, volatile unsigned char *buf, size_t size, unsigned sleep_us,
                   unsigned seconds)
{
    uint64_t *t = malloc(MAX_READS * sizeof(*t)), x = 0x9e3779b97f4a7c15ull;
    uint64_t end = now_ns() + (uint64_t)seconds * 1000000000ull;
    size_t n = 0, lines = size / 64;

    if (!t)
        return -1;
    while (now_ns() < end && n + READS_PER_WAKE <= MAX_READS) {
        if (sleep_us)
            usleep(sleep_us);
        for (int k = 0; k < READS_PER_WAKE; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            uint64_t a = now_ns();
            (void)buf[(x % lines) * 64]; /* a volatile read: made, not optimised out */
            t[n++] = now_ns() - a;
        }
    }
    qsort(t, n, sizeof(*t), cmp_u64);
    printf("pagetouch %s ns=%llu p90=%llu reads=%zu\n", kind,
           (unsigned long long)(n ? t[n / 2] : 0), (unsigned long long)(n ? t[n * 9 / 10] : 0), n);
    free(t);
    return 0;
}

static unsigned char *buffer(size_t size, int huge)
{
    /* Aligned to 2 MiB so that huge pages can back all of it. */
    void *p =
        mmap(NULL, size + (2u << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *b;

    if (p == MAP_FAILED)
        return NULL;
    b = (unsigned char *)(((uintptr_t)p + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
    if (madvise(b, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE))
        perror("madvise");
    memset(b, 1, size);
    return b;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 40;
    unsigned sleep_us = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 5000;
    unsigned seconds = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 3;
    size_t size = mib << 20;
    unsigned char *small, *huge;

    if (mib < 1 || mib > 4096 || seconds < 1 || seconds > 600) {
        fprintf(stderr, "usage: pagetouch [MIB 1-4096 [SLEEP_US [SECONDS 1-600]]]\n");
        return 2;
    }
    small = buffer(size, 0);
    huge = buffer(size, 1);
    if (!small || !huge) {
        perror("mmap");
        return 1;
    }
    if (measure("4k_after_sleep", small, size, sleep_us, seconds) ||
        measure("2m_after_sleep", huge, size, sleep_us, seconds) ||
        measure("4k_no_sleep", small, size, 0, seconds))
        return 1;
    return 0;
}

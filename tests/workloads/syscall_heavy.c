/* A workload that spends most of its time in the kernel: main -> do_reads ->
 * read(2) of /dev/zero into a large buffer, so kernel frames (the syscall
 * entry, vfs_read, the zeroing) sit under a known user chain. The syscall is
 * made inline, not through libc's read(), whose frameless wrapper would hide
 * do_reads from a frame-pointer walk.
 *
 *   syscall_heavy SECONDS */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 20];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline long raw_read(int fd, void *p, unsigned long n)
{
#if defined(__x86_64__)
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"((long)SYS_read), "D"((long)fd), "S"(p), "d"(n)
                     : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x0 __asm__("x0") = fd;
    register long x1 __asm__("x1") = (long)p;
    register long x2 __asm__("x2") = (long)n;
    register long x8 __asm__("x8") = SYS_read;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x8) : "memory");
    return x0;
#else
#error "syscall_heavy makes its system call inline on x86_64 or aarch64"
#endif
}

__attribute__((noinline)) void do_reads(int fd, double seconds)
{
    double end = now() + seconds;
    while (now() < end) {
        for (int i = 0; i < 16; i++) {
            if (raw_read(fd, buf, sizeof(buf)) < 0)
                exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    int fd = open("/dev/zero", O_RDONLY);

    if (fd < 0)
        return 1;
    do_reads(fd, argc > 1 ? atof(argv[1]) : 10);
    return 0;
}

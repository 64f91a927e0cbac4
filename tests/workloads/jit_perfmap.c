/* A JIT's shape with a known answer: machine code generated at run time
 * into anonymous memory (written, then made executable: W^X, as JITs do),
 * two copies of one small loop named jit_hot_a and jit_hot_b in
 * /tmp/perf-PID.map the way JITs name their code, called from named C
 * functions: main -> run -> dispatch -> call_a -> jit_hot_a (2 * ROUND
 * turns a round) and dispatch -> call_b -> jit_hot_b (ROUND turns), so
 * their CPU time splits 2:1. The generated code has no CFI; each copy
 * keeps a frame record (push rbp; mov rbp, rsp on x86_64; stp x29, x30;
 * mov x29, sp on aarch64), as the compiled frames of HotSpot and V8 do, so
 * a frame-pointer walk goes through it to its C caller. With "leaf", the
 * copies are leaves that never touch the frame pointer (or, on aarch64,
 * x30), as a JIT's small stubs are.
 *
 *   jit_perfmap SECONDS [ROUND [leaf]]
 *
 * ROUND: as cpu_split's (20000000: a round of ~60 ms here; an emulated CPU
 * shared by several workloads gives a smaller one). Writes its perf map
 * before it starts and leaves it (JITs leave theirs); exits 1 with a
 * message when it cannot make or name its code. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef uint64_t (*jit_fn)(uint64_t n);

/* x = n; do { x += n; x ^= x >> 7; } while (--n); return x; with and
 * without a frame record around it. n must not be 0. */
#if defined(__x86_64__)
static const uint8_t PROLOGUE[] = {0x55, 0x48, 0x89, 0xe5}; /* push rbp; mov rbp, rsp */
static const uint8_t BODY[] = {
    0x48, 0x89, 0xf8,       /* mov rax, rdi */
    0x48, 0x01, 0xf8,       /* 1: add rax, rdi */
    0x48, 0x89, 0xc2,       /* mov rdx, rax */
    0x48, 0xc1, 0xea, 0x07, /* shr rdx, 7 */
    0x48, 0x31, 0xd0,       /* xor rax, rdx */
    0x48, 0xff, 0xcf,       /* dec rdi */
    0x75, 0xee,             /* jnz 1b */
};
static const uint8_t EPILOGUE[] = {0x5d}; /* pop rbp */
static const uint8_t RET[] = {0xc3};
#elif defined(__aarch64__)
#define LE32(w) (w) & 0xff, ((w) >> 8) & 0xff, ((w) >> 16) & 0xff, (uint8_t)((w) >> 24)
static const uint8_t PROLOGUE[] = {LE32(0xa9bf7bfdu),  /* stp x29, x30, [sp, #-16]! */
                                   LE32(0x910003fdu)}; /* mov x29, sp */
static const uint8_t BODY[] = {
    LE32(0xaa0003e1u), /* mov x1, x0 */
    LE32(0x8b000021u), /* 1: add x1, x1, x0 */
    LE32(0xca411c21u), /* eor x1, x1, x1, lsr #7 */
    LE32(0xf1000400u), /* subs x0, x0, #1 */
    LE32(0x54ffffa1u), /* b.ne 1b */
    LE32(0xaa0103e0u), /* mov x0, x1 */
};
static const uint8_t EPILOGUE[] = {LE32(0xa8c17bfdu)}; /* ldp x29, x30, [sp], #16 */
static const uint8_t RET[] = {LE32(0xd65f03c0u)};      /* ret */
#else
#error "jit_perfmap generates x86_64 or aarch64 code"
#endif

#define SLOT 128 /* bytes per generated function: each starts on its own line */

static uint64_t round_n = 20000000;
static jit_fn jit_a, jit_b;
static volatile uint64_t sink;

/* Copies one function into code (at most SLOT bytes); returns its size. */
static size_t emit(uint8_t *code, int leaf)
{
    size_t n = 0;

#define PUT(part)                                                                                  \
    do {                                                                                           \
        memcpy(code + n, part, sizeof(part));                                                      \
        n += sizeof(part);                                                                         \
    } while (0)
    if (!leaf)
        PUT(PROLOGUE);
    PUT(BODY);
    if (!leaf)
        PUT(EPILOGUE);
    PUT(RET);
#undef PUT
    return n;
}

/* Generates both functions into a fresh mapping and names them in
 * /tmp/perf-PID.map ("START SIZE NAME", hex, as perf reads it). */
static int generate(int leaf)
{
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *code = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char path[64];
    size_t sa, sb;
    FILE *f;

    if (code == MAP_FAILED) {
        fprintf(stderr, "jit_perfmap: mmap: %s\n", strerror(errno));
        return -1;
    }
    sa = emit(code, leaf);
    sb = emit(code + SLOT, leaf);
    if (mprotect(code, page, PROT_READ | PROT_EXEC)) {
        fprintf(stderr, "jit_perfmap: mprotect: %s\n", strerror(errno));
        return -1;
    }
    /* aarch64's instruction cache does not snoop the data writes. */
    __builtin___clear_cache((char *)code, (char *)code + 2 * SLOT);
    jit_a = (jit_fn)(void *)code;
    jit_b = (jit_fn)(void *)(code + SLOT);
    snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
    f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "jit_perfmap: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "%lx %zx jit_hot_a\n%lx %zx jit_hot_b\n", (unsigned long)(uintptr_t)code, sa,
            (unsigned long)(uintptr_t)(code + SLOT), sb);
    if (fclose(f)) {
        fprintf(stderr, "jit_perfmap: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

__attribute__((noinline)) void call_a(uint64_t n)
{
    sink += jit_a(2 * n);
}

__attribute__((noinline)) void call_b(uint64_t n)
{
    sink += jit_b(n);
}

__attribute__((noinline)) void dispatch(uint64_t n)
{
    call_a(n);
    call_b(n);
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

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    int leaf = argc > 3 && strcmp(argv[3], "leaf") == 0;

    if (argc > 2 && strtoull(argv[2], NULL, 10) > 0)
        round_n = strtoull(argv[2], NULL, 10);
    if (argc > 3 && !leaf) {
        fprintf(stderr, "usage: jit_perfmap SECONDS [ROUND [leaf]]\n");
        return 2;
    }
    if (generate(leaf))
        return 1;
    run(seconds);
    return 0;
}

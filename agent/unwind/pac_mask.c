#include "pac_mask.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__aarch64__)
#include <linux/elf.h> /* NT_ARM_PAC_MASK */
#include <sys/ptrace.h>
#include <sys/uio.h>
#endif

uint64_t pac_mask__for_va_bits(unsigned va_bits)
{
    if (va_bits < 32 || va_bits > 54)
        return 0;
    /* GENMASK_ULL(54, va_bits), the kernel's ptrauth_user_pac_mask() */
    return ((1ull << 55) - 1) & ~((1ull << va_bits) - 1);
}

unsigned pac_mask__va_bits(uint64_t addr)
{
    unsigned bits = 0;

    while (bits < 64 && (addr >> bits) != 0)
        bits++;
    return bits;
}

#if defined(__aarch64__)
#ifndef NT_ARM_PAC_MASK
#define NT_ARM_PAC_MASK 0x406
#endif

/* The kernel's mask through ptrace on a child of ours that stops itself;
 * 0 with *no_pac set when the kernel says there is no PAC, -1 on failure. */
static int kernel_mask(uint64_t *mask, int *no_pac)
{
    struct {
        uint64_t data_mask, insn_mask; /* struct user_pac_mask */
    } m = {0, 0};
    struct iovec iov = {&m, sizeof(m)};
    int status, ret = -1;
    pid_t pid = fork();

    if (pid < 0)
        return -1;
    if (pid == 0) { /* async-signal-safe calls only: the agent may have threads */
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0)
            raise(SIGSTOP);
        _exit(0);
    }
    if (waitpid(pid, &status, 0) == pid && WIFSTOPPED(status)) {
        if (ptrace(PTRACE_GETREGSET, pid, (void *)NT_ARM_PAC_MASK, &iov) == 0) {
            *mask = m.insn_mask | m.data_mask;
            ret = 0;
        } else if (errno == EINVAL) { /* the regset exists only with PAC */
            *mask = 0;
            *no_pac = 1;
            ret = 0;
        }
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return ret;
}

uint64_t pac_mask__get(enum pac_mask_source *source)
{
    uint64_t mask = 0;
    int no_pac = 0, probe;

    if (kernel_mask(&mask, &no_pac) == 0) {
        if (source)
            *source = no_pac ? PAC_MASK_NO_PAC : PAC_MASK_KERNEL;
        return mask;
    }
    /* A stack variable lives in the highest mapping: its address's width
     * is the kernel's VA size (48, or 39 with 3-level tables; 52-bit
     * kernels give a process 48 unless it asks for more). */
    if (source)
        *source = PAC_MASK_VA_BITS;
    return pac_mask__for_va_bits(pac_mask__va_bits((uint64_t)(uintptr_t)&probe));
}
#else
uint64_t pac_mask__get(enum pac_mask_source *source)
{
    if (source)
        *source = PAC_MASK_NONE;
    return 0;
}
#endif

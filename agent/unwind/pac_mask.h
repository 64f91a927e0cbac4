/* The bits pointer authentication (arm64 PAC) puts in a user return
 * address, which the BPF walk strips from every one it reads (unwind.bpf.h,
 * cx_pac_mask): the kernel's own mask, as it gives a debugger, not a
 * hard-coded one (it depends on the kernel's virtual address size and on
 * whether the CPU has PAC at all).
 */
#ifndef CODEXRAY_AGENT_UNWIND_PAC_MASK_H
#define CODEXRAY_AGENT_UNWIND_PAC_MASK_H

#include <stdint.h>

/* How the mask was found. */
enum pac_mask_source {
    PAC_MASK_NONE,    /* not arm64: no link register to sign, mask 0 */
    PAC_MASK_KERNEL,  /* ptrace(PTRACE_GETREGSET, NT_ARM_PAC_MASK) on a child */
    PAC_MASK_NO_PAC,  /* the kernel says the CPU has no PAC (EINVAL): mask 0 */
    PAC_MASK_VA_BITS, /* ptrace failed otherwise: bits 54..VA from the stack's address */
};

/* The mask of this machine (arm64: forks a child that stops itself, asks
 * the kernel, and kills it; call it before starting threads). *source, when
 * not NULL, says how it was found. Never fails: the fallback is the mask a
 * kernel with PAC uses for this process's address size. */
uint64_t pac_mask__get(enum pac_mask_source *source);

/* The kernel's mask for user addresses of va_bits bits: bits 54 down to
 * va_bits (bit 55 selects the half of the address space, the top byte is
 * ignored). 0 for va_bits outside [32, 54]. */
uint64_t pac_mask__for_va_bits(unsigned va_bits);

/* The number of bits a user address space reaching addr needs (the
 * kernel's VA size, as a process's highest mapping, its stack, shows it):
 * 48 for 0x0000ffffd0000000, 39 for 0x0000007fff000000. */
unsigned pac_mask__va_bits(uint64_t addr);

#endif

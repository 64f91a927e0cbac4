/* What the unwinders need to know of the CPU: x86_64 today.
 * An arm64 port adds its twin here (pc, sp, fp and the user-mode test).
 */
#ifndef CODEXRAY_AGENT_BPF_ARCH_H
#define CODEXRAY_AGENT_BPF_ARCH_H

#if defined(__TARGET_ARCH_x86)
static __always_inline __u64 cx_regs_pc(const struct pt_regs *r)
{
    return BPF_CORE_READ(r, ip);
}
static __always_inline __u64 cx_regs_fp(const struct pt_regs *r)
{
    return BPF_CORE_READ(r, bp);
}
static __always_inline __u64 cx_regs_sp(const struct pt_regs *r)
{
    return BPF_CORE_READ(r, sp);
}
/* CPL 3 in the saved code segment selector means the CPU was in user mode. */
static __always_inline int cx_regs_user_mode(const struct pt_regs *r)
{
    return (BPF_CORE_READ(r, cs) & 3) == 3;
}
#else
#error "unsupported architecture: add it to arch_x86.bpf.h's twin"
#endif

#endif

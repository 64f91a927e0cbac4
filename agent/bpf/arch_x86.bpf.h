/* What the unwinders need to know of an x86_64 CPU (included by
 * arch.bpf.h, with its arm64 twin arch_arm64.bpf.h). */
#ifndef CODEXRAY_AGENT_BPF_ARCH_X86_H
#define CODEXRAY_AGENT_BPF_ARCH_X86_H

/* Plain loads: r is either the perf event's context or a BTF pointer from
 * bpf_task_pt_regs(), both of which the verifier lets us read directly, at a
 * fraction of a bpf_probe_read_kernel()'s cost. */
static __always_inline __u64 cx_regs_pc(const struct pt_regs *r)
{
    return r->ip;
}
static __always_inline __u64 cx_regs_fp(const struct pt_regs *r)
{
    return r->bp;
}
static __always_inline __u64 cx_regs_sp(const struct pt_regs *r)
{
    return r->sp;
}
/* No link register: `call` pushes the return address. */
static __always_inline __u64 cx_regs_lr(const struct pt_regs *r)
{
    return 0;
}
/* CPL 3 in the saved code segment selector means the CPU was in user mode.
 * The verifier takes only whole 8-byte loads from a perf event's context,
 * and newer kernels declare cs as a 16-bit field: load its whole slot. */
static __always_inline int cx_regs_user_mode(const struct pt_regs *r)
{
    __u64 cs = *(const __u64 *)((const char *)r + __builtin_offsetof(struct pt_regs, cs));
    return (cs & 3) == 3;
}

/* The user registers where x86_64's task_pt_regs() finds them: the last
 * struct pt_regs of the task's kernel stack (no padding above it before
 * FRED, 6.9, which has bpf_task_pt_regs anyway). lr, where not NULL, gets
 * 0 (cx_regs_lr). Returns 1, or -1. */
static __always_inline int cx_stack_user_regs(void *stack, __u64 thread_size, __u64 *pc, __u64 *sp,
                                              __u64 *fp, __u64 *lr)
{
    struct pt_regs *r;

    if (!stack)
        return -1;
    r = (struct pt_regs *)((char *)stack + thread_size - bpf_core_type_size(struct pt_regs));
    if (bpf_probe_read_kernel(pc, sizeof(*pc), &r->ip) ||
        bpf_probe_read_kernel(sp, sizeof(*sp), &r->sp) ||
        bpf_probe_read_kernel(fp, sizeof(*fp), &r->bp))
        return -1;
    if (lr)
        *lr = 0;
    return 1;
}

/* The thread pointer, which is where glibc and musl keep the thread's
 * struct pthread: pthread_self(). */
static __always_inline __u64 cx_task_tls_base(struct task_struct *task)
{
    return BPF_CORE_READ(task, thread.fsbase);
}

/* Where a CFI walk finds the caller on x86_64: `call` pushed the return
 * address just below the CFA. */
#define CX_RA_CFA_OFF (-8)

/* A signal frame: when the handler returns into the trampoline
 * (__restore_rt), sp points at the ucontext the kernel saved; its
 * uc_mcontext (struct sigcontext) starts 40 bytes in (uc_flags, uc_link,
 * uc_stack), with rbp, rsp and rip as its 11th, 16th and 17th words. */
#define CX_SIGFRAME_FP (40 + 10 * 8)
#define CX_SIGFRAME_SP (40 + 15 * 8)
#define CX_SIGFRAME_PC (40 + 16 * 8)

/* The syscall a task is in, and its first argument, from its saved user
 * registers r (a kernel address: bpf_task_pt_regs' or the top of its
 * kernel stack), read with probe reads. nr is -1 outside a syscall. */
static __always_inline int cx_regs_syscall(const struct pt_regs *r, long *nr, __u64 *arg0)
{
    if (bpf_probe_read_kernel(nr, sizeof(*nr), &r->orig_ax) ||
        bpf_probe_read_kernel(arg0, sizeof(*arg0), &r->di))
        return -1;
    return 0;
}

/* x86_64's syscall numbers the off-CPU classes look for
 * (arch/x86/entry/syscalls/syscall_64.tbl); arm64's twin gives the ones
 * it lacks distinct numbers below -1, which no syscall has. */
#define CX_NR_read 0
#define CX_NR_write 1
#define CX_NR_poll 7
#define CX_NR_pread64 17
#define CX_NR_readv 19
#define CX_NR_writev 20
#define CX_NR_select 23
#define CX_NR_nanosleep 35
#define CX_NR_connect 42
#define CX_NR_accept 43
#define CX_NR_sendto 44
#define CX_NR_recvfrom 45
#define CX_NR_sendmsg 46
#define CX_NR_recvmsg 47
#define CX_NR_futex 202
#define CX_NR_clock_nanosleep 230
#define CX_NR_epoll_wait 232
#define CX_NR_pselect6 270
#define CX_NR_ppoll 271
#define CX_NR_epoll_pwait 281
#define CX_NR_accept4 288
#define CX_NR_recvmmsg 299
#define CX_NR_epoll_pwait2 441
#define CX_NR_futex_waitv 449

#endif

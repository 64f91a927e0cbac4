/* What the unwinders need to know of an arm64 CPU (included by arch.bpf.h;
 * the twin of arch_x86.bpf.h).
 *
 * Every read of struct pt_regs goes through its field names, which
 * vmlinux.h marks preserve_access_index: CO-RE relocates them to the
 * running kernel's layout, and nothing here is sized from the header's
 * struct (arm64's pt_regs lost fields in 6.18; its head, the uapi struct
 * user_pt_regs {regs[31], sp, pc, pstate}, is fixed). */
#ifndef CODEXRAY_AGENT_BPF_ARCH_ARM64_H
#define CODEXRAY_AGENT_BPF_ARCH_ARM64_H

/* Plain loads, as on x86_64: r is the perf event's context (a struct
 * user_pt_regs, the head of struct pt_regs: cx_ctx_regs) or a BTF pointer
 * from bpf_task_pt_regs(). The frame pointer is x29, the link register x30
 * (AAPCS64). */
static __always_inline __u64 cx_regs_pc(const struct pt_regs *r)
{
    return r->pc;
}
static __always_inline __u64 cx_regs_fp(const struct pt_regs *r)
{
    return r->regs[29];
}
static __always_inline __u64 cx_regs_sp(const struct pt_regs *r)
{
    return r->sp;
}
/* The return address of a leaf function, or of any function before its
 * prologue stores x30 (and after its epilogue reloads it). */
static __always_inline __u64 cx_regs_lr(const struct pt_regs *r)
{
    return r->regs[30];
}
/* The kernel's user_mode(): pstate's mode field (PSR_MODE_MASK, 0xf) is
 * PSR_MODE_EL0t (0) for a 64-bit task at EL0; a 32-bit (compat) task's
 * USR mode, 0x10, has the same low bits. pstate is a whole 8-byte field,
 * which the verifier takes from a perf event's context. */
static __always_inline int cx_regs_user_mode(const struct pt_regs *r)
{
    return (r->pstate & 0xf) == 0;
}

/* The user registers where arm64's task_pt_regs() finds them: the last
 * struct pt_regs of the task's kernel stack, nothing above it. Its size
 * is the running kernel's (bpf_core_type_size), the fields' offsets too.
 * lr, where not NULL, gets x30. Returns 1, or -1. */
static __always_inline int cx_stack_user_regs(void *stack, __u64 thread_size, __u64 *pc, __u64 *sp,
                                              __u64 *fp, __u64 *lr)
{
    struct pt_regs *r;

    if (!stack)
        return -1;
    r = (struct pt_regs *)((char *)stack + thread_size - bpf_core_type_size(struct pt_regs));
    if (bpf_probe_read_kernel(pc, sizeof(*pc), &r->pc) ||
        bpf_probe_read_kernel(sp, sizeof(*sp), &r->sp) ||
        bpf_probe_read_kernel(fp, sizeof(*fp), &r->regs[29]))
        return -1;
    if (lr && bpf_probe_read_kernel(lr, sizeof(*lr), &r->regs[30]))
        return -1;
    return 1;
}

/* The thread pointer, TPIDR_EL0, as the kernel saves it for the task. On
 * arm64 glibc's struct pthread sits just below it (TLS variant I), so
 * pthread_self() is not this value: the Python walk's fallback that
 * compares a thread state's thread_id with it finds no match there and
 * the thread state is looked up by native_thread_id (CPython 3.8 on). */
static __always_inline __u64 cx_task_tls_base(struct task_struct *task)
{
    return BPF_CORE_READ(task, thread.uw.tp_value);
}

/* Where the x86_64 row format finds the return address: CFA - 8. On arm64
 * that is right for the common prologue stp x29, x30, [sp, #-16]! (the
 * frame record {x29, x30} at CFA - 16); where x30 is otherwise, the rows'
 * return-address rule (unwind.h, enum cx_ra_type) says. */
#define CX_RA_CFA_OFF (-8)

/* A signal frame: when the handler returns into the trampoline
 * (__kernel_rt_sigreturn in the vDSO), sp points at the struct rt_sigframe
 * the kernel pushed (arch/arm64/kernel/signal.c): a struct siginfo, then a
 * struct ucontext. From the uapi headers (asm/ucontext.h, asm/sigcontext.h,
 * asm-generic/siginfo.h, asm/signal.h), in bytes:
 *   siginfo                       128 (SI_MAX_SIZE)
 *   ucontext at                   128
 *     uc_flags 8, uc_link 8, uc_stack 24 (ss_sp 8, ss_flags 4 + 4, ss_size 8)
 *     uc_sigmask at 40, 8; __unused to 1024 / 8 = 128: ends at 168
 *     uc_mcontext (struct sigcontext, 16-aligned by its __reserved) at 176
 *   sigcontext at         128 + 176 = 304
 *     fault_address 8, then regs[31] at 312
 *   x29 = regs[29] at 312 + 29 * 8 = 544
 *   x30 = regs[30] at 312 + 30 * 8 = 552
 *   sp             at 312 + 31 * 8 = 560
 *   pc             at 560 + 8      = 568
 * (checked with aarch64-linux-gnu-gcc's offsetof on the same headers).
 * x29, x30, sp and pc are consecutive words, as the walk reads them. */
#define CX_SIGFRAME_FP 544
#define CX_SIGFRAME_LR 552
#define CX_SIGFRAME_SP 560
#define CX_SIGFRAME_PC 568

/* The syscall a task is in, and its first argument, from its saved user
 * registers r (a kernel address: bpf_task_pt_regs' or the top of its
 * kernel stack), read with probe reads. nr is -1 outside a syscall
 * (NO_SYSCALL); orig_x0 keeps the first argument after x0 is reused. */
static __always_inline int cx_regs_syscall(const struct pt_regs *r, long *nr, __u64 *arg0)
{
    int sno = -1;

    if (bpf_probe_read_kernel(&sno, sizeof(sno), &r->syscallno) ||
        bpf_probe_read_kernel(arg0, sizeof(*arg0), &r->orig_x0))
        return -1;
    *nr = sno;
    return 0;
}

/* arm64's syscall numbers (the generic table, include/uapi/asm-generic/
 * unistd.h) the off-CPU classes look for; below -1 for one it lacks (poll,
 * select, epoll_wait: only their p- variants exist). */
#define CX_NR_read 63
#define CX_NR_write 64
#define CX_NR_poll -2
#define CX_NR_pread64 67
#define CX_NR_readv 65
#define CX_NR_writev 66
#define CX_NR_select -3
#define CX_NR_nanosleep 101
#define CX_NR_connect 203
#define CX_NR_accept 202
#define CX_NR_sendto 206
#define CX_NR_recvfrom 207
#define CX_NR_sendmsg 211
#define CX_NR_recvmsg 212
#define CX_NR_futex 98
#define CX_NR_clock_nanosleep 115
#define CX_NR_epoll_wait -4
#define CX_NR_pselect6 72
#define CX_NR_ppoll 73
#define CX_NR_epoll_pwait 22
#define CX_NR_accept4 242
#define CX_NR_recvmmsg 243
#define CX_NR_epoll_pwait2 441
#define CX_NR_futex_waitv 449

#endif

/* What the unwinders need to know of the CPU, for the architecture the
 * object is built for (make's ARCH: clang -D__TARGET_ARCH_x86 or _arm64).
 * Each twin defines the same names:
 *   cx_regs_pc/sp/fp/lr(r)      a saved register (lr: 0 where there is none)
 *   cx_regs_user_mode(r)        whether r was saved in user mode
 *   cx_regs_syscall(r, nr, a0)  the syscall a task is in and its first argument
 *   CX_NR_*                     the syscall numbers off-CPU classes by
 *   cx_stack_user_regs(...)     the user registers from the kernel stack
 *   cx_task_tls_base(task)      the thread pointer
 *   CX_RA_CFA_OFF               where a CFI walk finds the return address
 *   CX_SIGFRAME_FP/SP/PC(/LR)   the interrupted registers in a signal frame
 */
#ifndef CODEXRAY_AGENT_BPF_ARCH_ANY_H
#define CODEXRAY_AGENT_BPF_ARCH_ANY_H

#if defined(__TARGET_ARCH_x86)
#include "arch_x86.bpf.h"
#elif defined(__TARGET_ARCH_arm64)
#include "arch_arm64.bpf.h"
#else
#error "unsupported architecture: add a twin of arch_x86.bpf.h"
#endif

/* A perf event's registers as a struct pt_regs: they are one on x86_64
 * (bpf_user_pt_regs_t), and on arm64 a struct user_pt_regs, which is how
 * the kernel's struct pt_regs begins (its first member, in a union with
 * regs[31], sp, pc, pstate): the fields cx_regs_* read are at the same
 * offsets. */
#define cx_ctx_regs(ctx) ((const struct pt_regs *)&(ctx)->regs)

#endif

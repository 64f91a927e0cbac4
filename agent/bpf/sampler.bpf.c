// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The kernel side of the sampler: a perf_event program run by the cpu-clock
 * event on every CPU, and two scheduler tracepoints that tell user space when
 * a process's mappings change (exec) or it goes away (exit).
 *
 * Each sample walks the user stack by frame pointers here, in BPF, and writes
 * a list of typed frames (sample.h) to one ring buffer. Walking here rather
 * than through bpf_get_stackid() is what lets later unwinders (CFI tables,
 * interpreters) add frames of their own kinds to the same record.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "sample.h"
#include "arch.bpf.h"

#define PF_KTHREAD 0x00200000

/* Filled by user space between open and load. 0 = every process. */
const volatile __u32 target_tgid = 0;
/* The kernel stack's size (THREAD_SIZE), where the user registers are on
 * kernels without bpf_task_pt_regs (before 5.15). */
const volatile __u64 thread_size = 16384;
/* 1 where the kernel has bpf_find_vma (5.17): cx_walk_user_vma is loaded
 * instead of cx_walk_user, and every user stack goes through the CFI walk
 * (a process without an entry yet finds its tables by file). */
const volatile __u32 use_vma = 0;
/* Samples wake user space only once this much is waiting (half the ring). */
const volatile __u64 ringbuf_wakeup_bytes = 4 << 20;
/* Whether an off-CPU walk (offcpu.bpf.h) takes the kernel stack
 * (--kernel-stacks): without it user space drops kernel frames
 * (aggregate.c), so bpf_get_stack, a large part of a walk, would be spent
 * for nothing, and kernel frames would split one user stack into several
 * keys. CPU samples take it whenever the CPU was in the kernel. */
const volatile __u32 off_kernel_stacks = 1;

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 8 << 20); /* resized by user space before load */
} events SEC(".maps");

/* The record is too big for the 512-byte BPF stack: it is built here. */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct cx_sample);
} scratch SEC(".maps");

struct kstack {
    __u64 ip[CX_MAX_KERNEL_FRAMES];
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct kstack);
} kscratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, CX_STAT__COUNT);
    __type(key, __u32);
    __type(value, __u64);
} stats SEC(".maps");

/* Samples lost per process, so each profile can say how many it is missing.
 * A plain hash (not LRU): a full map is counted, never silently evicted.
 */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 16384);
    __type(key, __u32);
    __type(value, __u64);
} lost_by_tgid SEC(".maps");

/* Processes exec'd and not sampled since (use_vma only): user space reads
 * a new program's identity and maps only once it is sampled, so the exec
 * event does not wake it, and the process's first sample does, so that it
 * is read while it lives. Taken out at that sample or the exit; an LRU so
 * that the newest always go in (one pushed out, long-lived and never
 * sampled, is read at its first sample's ordinary delivery). */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 8192);
    __type(key, __u32);
    __type(value, __u8);
} fresh_tgids SEC(".maps");

/* Whether this is process tgid's first sample since its exec (and not any
 * more after it). */
static __always_inline int first_sample(__u32 tgid)
{
    return use_vma && bpf_map_lookup_elem(&fresh_tgids, &tgid) &&
           bpf_map_delete_elem(&fresh_tgids, &tgid) == 0;
}

/* Processes not to profile, kept by user space (sample.h). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CX_SKIP_MAX_ENTRIES);
    __type(key, __u32);
    __type(value, __u8);
} skip_tgids SEC(".maps");

static __always_inline void stat_inc(__u32 which)
{
    __u64 *v = bpf_map_lookup_elem(&stats, &which);
    if (v)
        *v += 1; /* per-CPU slot: no atomics needed */
}

static __always_inline void stat_add(__u32 which, __u64 n)
{
    __u64 *v = bpf_map_lookup_elem(&stats, &which);
    if (v)
        *v += n;
}

static __always_inline void count_lost(__u32 tgid)
{
    __u64 one = 1, *v;

    stat_inc(CX_STAT_LOST_RINGBUF);
    v = bpf_map_lookup_elem(&lost_by_tgid, &tgid);
    if (v) {
        __sync_fetch_and_add(v, 1);
        return;
    }
    if (bpf_map_update_elem(&lost_by_tgid, &tgid, &one, BPF_NOEXIST) == -17 /* EEXIST */) {
        v = bpf_map_lookup_elem(&lost_by_tgid, &tgid);
        if (v)
            __sync_fetch_and_add(v, 1);
    } else if (!bpf_map_lookup_elem(&lost_by_tgid, &tgid)) {
        stat_inc(CX_STAT_LOST_MAP_FULL);
    }
}

static __always_inline void put_frame_tag(struct cx_sample *s, __u32 at, __u64 addr, __u32 kind,
                                          __u32 aux, __u16 tag)
{
    /* One 64-bit register, checked and used: clang may otherwise check one
     * copy of the index and address with another, whose bound the verifier
     * lost to a zero extension. */
    __u64 idx = at;

    asm volatile("" : "+r"(idx));
    if (idx >= CX_MAX_FRAMES)
        return;
    s->frames[idx].addr = addr;
    s->frames[idx].kind = kind;
    s->frames[idx].tag = tag;
    s->frames[idx].aux = aux;
}

static __always_inline void put_frame(struct cx_sample *s, __u32 at, __u64 addr, __u32 kind,
                                      __u32 aux)
{
    put_frame_tag(s, at, addr, kind, aux, 0);
}

/* The task's thread id as its own process sees it (gettid() inside a
 * container: the number in the deepest pid namespace, NSpid's last). */
static __always_inline __u32 cx_task_ns_tid(struct task_struct *task)
{
    struct pid *pid = BPF_CORE_READ(task, thread_pid);
    unsigned int level = BPF_CORE_READ(pid, level);
    struct upid up = {};

    bpf_probe_read_kernel(&up, sizeof(up), &pid->numbers[level & 31]);
    return up.nr;
}

/* An exec, exit or maps hint (CX_REC_MAPS: the mapping that ran starts at
 * addr, of file ino on dev; 0 in the other kinds). */
static __always_inline void proc_event(__u32 kind, __u64 addr, __u64 ino, __u32 dev)
{
    __u64 id = bpf_get_current_pid_tgid();
    struct cx_proc_event *e;

    if (target_tgid && (id >> 32) != target_tgid)
        return;
    e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        stat_inc(CX_STAT_LOST_EVENTS);
        return;
    }
    e->hdr.kind = kind;
    e->hdr.tgid = id >> 32;
    e->hdr.tid = (__u32)id;
    e->hdr.cpu = bpf_get_smp_processor_id();
    e->hdr.time_ns = bpf_ktime_get_ns();
    bpf_get_current_comm(e->comm, sizeof(e->comm));
    e->cgroup_id = bpf_get_current_cgroup_id();
    e->addr = addr;
    e->ino = ino;
    e->dev = dev;
    e->pad = 0;
    e->start_ns = 0;
    if (kind == CX_REC_EXEC) {
        /* The leader's, as /proc/PID/stat gives it (de_thread has made
         * this thread the leader by now, with the old leader's start). */
        /* Not bpf_get_current_task_btf (5.11): cx_on_exec runs on 5.10. */
        struct task_struct *task = (struct task_struct *)bpf_get_current_task();
        if (bpf_core_field_exists(task->start_boottime))
            e->start_ns = BPF_CORE_READ(task, group_leader, start_boottime);
    }
    /* Woken at once: a short-lived process's maps must be read while it
     * still exists. Not for an exit, which nothing waits on: it is read
     * with the next poll's records (at most 100 ms on), in order. On a
     * build node, with an exit for every exec, waking for each was a
     * third of user space's wakeups. Nor, with use_vma, for an exec: the
     * process is read at its first sample, which wakes user space
     * (fresh_tgids); most of a build's processes are never sampled. */
    bpf_ringbuf_submit(e, kind == CX_REC_EXIT || (kind == CX_REC_EXEC && use_vma)
                              ? BPF_RB_NO_WAKEUP
                              : BPF_RB_FORCE_WAKEUP);
}

#include "unwind.bpf.h"
#include "python.bpf.h"

/* Walks the user stack by frame pointers from (pc, fp), appending frames at
 * s->frames[base...]: the walk for processes without CFI tables, all in one
 * program. Returns the number of frames written, a final CX_FRAME_TRUNCATED
 * one included when the walk stopped early.
 */
static __always_inline __u32 walk_fp(struct cx_sample *s, __u32 base, __u64 pc, __u64 fp)
{
    __u32 n = 0;
    __u64 pair[2];
    int i;

    put_frame(s, base, pc, CX_FRAME_NATIVE, 0);
    n = 1;
    /* One slot is kept for the CX_FRAME_TRUNCATED marker. */
    for (i = 1; i < CX_MAX_USER_FRAMES - 1; i++) {
        if (fp == 0)
            return n; /* _start cleared the frame pointer: the whole stack */
        if (bpf_probe_read_user(pair, sizeof(pair), (void *)fp)) {
            stat_inc(CX_STAT_TRUNC_FAULT);
            put_frame(s, base + n, fp, CX_FRAME_TRUNCATED, CX_TRUNC_FAULT);
            return n + 1;
        }
        if (pair[1] == 0)
            return n;
        put_frame(s, base + n, cx_strip_pac(pair[1]), CX_FRAME_NATIVE, 0);
        n++;
        /* The stack grows down, so a caller's frame sits above its callee's;
         * anything else is a register that was never a frame pointer.
         */
        if (pair[0] != 0 && pair[0] <= fp) {
            stat_inc(CX_STAT_TRUNC_FAULT);
            put_frame(s, base + n, pair[0], CX_FRAME_TRUNCATED, CX_TRUNC_FAULT);
            return n + 1;
        }
        fp = pair[0];
    }
    if (fp != 0) {
        stat_inc(CX_STAT_TRUNC_DEPTH);
        put_frame(s, base + n, fp, CX_FRAME_TRUNCATED, CX_TRUNC_DEPTH);
        n++;
    }
    return n;
}

/* Hands the record to user space: nk kernel frames, then n - nk user ones. */
static __always_inline void emit(struct cx_sample *s, __u32 tgid, __u32 nk, __u32 nframes, int wake)
{
    __u64 size, n = nframes; /* 64-bit: a 32-bit bound check is lost to the zero extension */

    s->n_kernel = nk;
    s->n_user = nframes - nk;
    /* Keeps clang from folding the bound into the multiply: the verifier must
     * see n <= CX_MAX_FRAMES to accept the copy out of the map value.
     */
    asm volatile("" : "+r"(n));
    if (n > CX_MAX_FRAMES)
        n = CX_MAX_FRAMES;
    size = __builtin_offsetof(struct cx_sample, frames) + n * sizeof(struct cx_frame);
    /* No wakeup per sample: user space drains the ring on a timer, which
     * saves a context switch per sample. Past half full it is woken now,
     * and for a Python code object new to it (py_seen). */
    __u64 flags = wake || bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > ringbuf_wakeup_bytes
                      ? BPF_RB_FORCE_WAKEUP
                      : BPF_RB_NO_WAKEUP;
    if (bpf_ringbuf_output(&events, s, size, flags))
        count_lost(tgid);
}

/* Frames per run of cx_walk_user: with the 33 tail calls the kernel allows,
 * 33 * 16 = 528 >= CX_MAX_USER_FRAMES. */
#define FRAMES_PER_PROG 16

/* The CFI walk continues in another run of the walker (slot 0): user space
 * puts cx_walk_user or cx_walk_user_vma there, whichever it loaded. */
struct {
    __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32);
} walkers SEC(".maps");

/* The same for off-CPU walks, from the sched_switch program: a tail call
 * stays within one program type (and attach point), so its walker is a
 * copy of cx_walk_user built as a tp_btf program, cx_off_walk_user. */
struct {
    __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32);
} off_walkers SEC(".maps");

static __always_inline void off_finish(struct cx_sample *s, __u32 nk, __u32 nframes, int wake);

/* Appends the truncation marker and ends the walk. */
static __always_inline void walk_stop(struct cx_sample *s, struct walk_state *st, __u32 reason)
{
    put_frame(s, st->n, 0, CX_FRAME_TRUNCATED, reason);
    st->n++;
    st->done = 1;
}

/* Up to FRAMES_PER_PROG frames of a walk, native or Python, then on in a
 * tail call of itself; the record is sent when the walk ends or the tail
 * calls run out (off: an off-CPU walk, whose stack goes to off_finish). */
static __always_inline int walk_body(void *ctx, const int vma, const int off)
{
    __u32 zero = 0, reason = 0, limit;
    struct walk_state *st;
    struct cx_sample *s;
    int i, r, cfi;

    st = bpf_map_lookup_elem(&wstate, &zero);
    s = bpf_map_lookup_elem(&scratch, &zero);
    if (!st || !s)
        return 0;
    limit = st->nk + CX_MAX_USER_FRAMES - 1; /* one slot for the marker */
    for (i = 0; i < FRAMES_PER_PROG; i++) {
        if (st->n >= limit) {
            stat_inc(CX_STAT_TRUNC_DEPTH);
            walk_stop(s, st, CX_TRUNC_DEPTH);
            break;
        }
        if (st->py_pending) {
            cx_py_step(0);
            continue;
        }
        r = step(st, &reason, &cfi, vma);
        if (r == STEP_END) {
            st->done = 1;
            break;
        }
        if (r == STEP_TRUNC) {
            stat_inc(reason == CX_TRUNC_FAULT ? CX_STAT_TRUNC_FAULT : CX_STAT_TRUNC_CFI);
            walk_stop(s, st, reason);
            break;
        }
        if (cfi)
            st->cfi_frames++;
        else
            st->fp_frames++;
        if (st->hs && cx_hs_frame(st->pc, st->exact)) {
            put_frame_tag(s, st->n, st->hs_addr, CX_FRAME_JAVA, st->hs_aux, st->hs_tag);
            st->n++;
            continue;
        }
        if (py_enter(st, st->pc, st->exact))
            continue;
        /* A perf trampoline only calls the evaluation function, whose
         * Python frames stand for it: not shown twice. */
        if (in_py_tramp(st, st->pc - 1))
            continue;
        put_frame(s, st->n, st->pc, CX_FRAME_NATIVE, st->exact ? CX_AUX_EXACT_PC : 0);
        st->n++;
    }
    if (!st->done) {
        bpf_tail_call(ctx, off ? (void *)&off_walkers : (void *)&walkers, 0);
        /* Out of tail calls. */
        stat_inc(CX_STAT_TRUNC_DEPTH);
        walk_stop(s, st, CX_TRUNC_DEPTH);
    }
    stat_add(CX_STAT_CFI_FRAMES, st->cfi_frames);
    stat_add(CX_STAT_FP_FRAMES, st->fp_frames);
    if (off)
        off_finish(s, st->nk, st->n, st->py_new == 2);
    else
        emit(s, st->tgid, st->nk, st->n, st->py_new == 2 || st->wake);
    return 0;
}

SEC("perf_event")
int cx_walk_user(struct bpf_perf_event_data *ctx)
{
    return walk_body(ctx, 0, 0);
}

/* The same walk, with the fallback through bpf_find_vma: a separate program
 * so that kernels without the helper (or without callbacks, before 5.13)
 * never see it. */
SEC("perf_event")
int cx_walk_user_vma(struct bpf_perf_event_data *ctx)
{
    return walk_body(ctx, 1, 0);
}

/* The off-CPU walker (off_walkers), never attached: runs in the
 * sched_switch program's context, so without bpf_find_vma (the run queue's
 * lock is held there): a process's tables come from its proc_unwind entry
 * only. */
SEC("tp_btf/sched_switch")
int cx_off_walk_user(void *ctx)
{
    return walk_body(ctx, 0, 1);
}

/* Starts the user walk from the registers: CFI (in cx_walk_user, which then
 * sends the record: a tail call taken never comes back) when the process has
 * tables or runs CPython, else frame pointers here. Returns the frames the
 * frame-pointer walk wrote. */
static __always_inline __u32 walk_user(void *ctx, struct cx_sample *s, __u32 tgid, __u32 nk,
                                       __u64 pc, __u64 sp, __u64 fp, __u64 lr, const int off)
{
    __u32 zero = 0;
    struct walk_state *st = NULL;
    struct cx_py_proc *py = bpf_map_lookup_elem(&py_procs, &tgid);
    struct cx_v8_proc *v8 = bpf_map_lookup_elem(&v8_procs, &tgid);
    struct cx_hs_proc *hs = bpf_map_lookup_elem(&hs_procs, &tgid);
    int cfi = (use_vma && !off) || bpf_map_lookup_elem(&proc_unwind, &tgid) != NULL,
        python = py != NULL, v8on = v8 != NULL;

    /* Opaque scalars: clang would otherwise OR the pointers, which the
     * verifier refuses. A V8 process is walked where a CPython one is: in
     * the CFI walk's programs (cx_walk_user). */
    asm volatile("" : "+r"(cfi), "+r"(python), "+r"(v8on));
    if (cfi || python || v8on)
        st = bpf_map_lookup_elem(&wstate, &zero);
    if (!st)
        return walk_fp(s, nk, pc, fp);
    if (cfi)
        stat_inc(CX_STAT_CFI_WALKS);
    st->pc = pc;
    st->sp = sp;
    st->fp = fp;
#if CX_ARCH_LR
    st->lr = lr; /* the first frame's: CX_RA_DEFAULT rows take it (unwind.bpf.h) */
#else
    (void)lr;
#endif
    st->tgid = tgid;
    st->nk = nk;
    st->n = nk;
    st->exact = 1;
    st->done = 0;
    st->m_start = st->m_end = 0;
    st->vma_lookups = 0;
    st->cfi_frames = st->fp_frames = 0;
    st->win_len = 0; /* the stack is copied anew for each walk (cx_uread) */
    st->row_hi = 0;  /* and rows found anew: tables may have changed since */
    st->py_state = PY_NONE;
    st->py_pending = 0;
    st->py_new = 0;
    st->v8_on = 0;
    if (v8) {
        __builtin_memcpy(&st->v8, v8, sizeof(st->v8));
        st->v8_on = 1;
    }
    st->hs = 0;
    st->hs_type = 0;
    if (hs) {
        __builtin_memcpy(&st->hsp, hs, sizeof(st->hsp));
        st->hs = 1;
    }
    if (py) {
        __builtin_memcpy(&st->py, py, sizeof(st->py));
        st->py_state = PY_UNRESOLVED;
        st->py_last_code = 0;
    }
    if (st->hs && cx_hs_frame(pc, 1)) {
        put_frame_tag(s, nk, st->hs_addr, CX_FRAME_JAVA, st->hs_aux, st->hs_tag);
        st->n = nk + 1;
    } else if (!py_enter(st, pc, 1)) {
        put_frame(s, nk, pc, CX_FRAME_NATIVE, 0);
        st->n = nk + 1;
    }
    bpf_tail_call(ctx, off ? (void *)&off_walkers : (void *)&walkers, 0);
    /* The tail call failed, which it cannot short of a bug: the leaf only. */
    put_frame(s, nk + 1, 0, CX_FRAME_TRUNCATED, CX_TRUNC_DEPTH);
    return 2;
}

/* The user registers of the current task, saved at the top of its kernel
 * stack on entry to the kernel: by the timer interrupt itself when it came
 * in user mode (the event's own registers then, the same values), by the
 * syscall or fault that entered the kernel otherwise. Returns 1, 0 for a
 * kernel thread (no user stack), -1 when they cannot be had. */
static __always_inline int user_regs(__u64 *pc, __u64 *sp, __u64 *fp, __u64 *lr)
{
    if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)) {
        /* 5.15 on: a trusted BTF pointer, direct loads. One source for
         * both cases, so one walk: the verifier takes no load that reads
         * both the context and a BTF pointer. */
        struct task_struct *task = bpf_get_current_task_btf();
        struct pt_regs *ur;

        if (task->flags & PF_KTHREAD || !task->mm)
            return 0;
        ur = (struct pt_regs *)bpf_task_pt_regs(task);
        if (!ur)
            return -1;
        *pc = cx_regs_pc(ur);
        *sp = cx_regs_sp(ur);
        *fp = cx_regs_fp(ur);
#if CX_ARCH_LR
        *lr = cx_regs_lr(ur);
#endif
        return 1;
    }
    /* Before: the same place, found as the kernel finds it (task_pt_regs),
     * read with probe reads (this branch is all the verifier sees there). */
    struct task_struct *t = (struct task_struct *)bpf_get_current_task();

    if (BPF_CORE_READ(t, flags) & PF_KTHREAD || !BPF_CORE_READ(t, mm))
        return 0;
    return cx_stack_user_regs(BPF_CORE_READ(t, stack), thread_size, pc, sp, fp,
                              CX_ARCH_LR ? lr : NULL);
}

/* Whether the task is inside execve. There its saved user registers are
 * the calling program's, and once the new image has replaced the old
 * address space they point into memory that is gone: a walk would read the
 * new program's memory at the old one's addresses. */
static __always_inline int in_execve(void)
{
    struct task_struct *t = (struct task_struct *)bpf_get_current_task();

    if (!bpf_core_field_exists(t->in_execve))
        return 0;
    return BPF_CORE_READ_BITFIELD_PROBED(t, in_execve);
}

/* The start of a record in this CPU's scratch: its header, no off-CPU
 * fields (an off-CPU block sets them after). */
static __always_inline void record_begin(struct cx_sample *s, __u32 kind, __u32 tgid, __u32 tid,
                                         __u64 time_ns)
{
    s->hdr.kind = kind;
    s->hdr.tgid = tgid;
    s->hdr.tid = tid;
    s->hdr.cpu = bpf_get_smp_processor_id();
    s->hdr.time_ns = time_ns;
    s->kernel_err = 0;
    s->off_class = 0;
    s->off_syscall = 0;
    s->off_id = 0;
    bpf_get_current_comm(s->comm, sizeof(s->comm));
}

/* The stacks of the current task into s, one code for a CPU sample and an
 * off-CPU block: the kernel stack when the task was in the kernel
 * (in_kernel), then the user stack from its saved user registers, cut with
 * a marker when there are none or the task is inside execve. Sets *nk to
 * the kernel frames and returns all the frames written. A CFI or Python
 * walk does not come back: its walker sends the record (off: through
 * off_finish). */
static __always_inline __u32 record_stacks(void *ctx, struct cx_sample *s, struct kstack *ks,
                                           __u32 tgid, int in_kernel, __u32 *nk_out, const int off)
{
    __u64 pc = 0, sp = 0, fp = 0, lr = 0;
    __u32 nk = 0, nu = 0;
    long got;
    int i, r;

    if (in_kernel && (!off || off_kernel_stacks)) {
        got = bpf_get_stack(ctx, ks->ip, sizeof(ks->ip), 0);
        if (got < 0) {
            s->kernel_err = got;
            stat_inc(CX_STAT_KSTACK_ERR);
        } else {
            nk = got / sizeof(__u64);
            for (i = 0; i < CX_MAX_KERNEL_FRAMES; i++) {
                if (i >= nk)
                    break;
                put_frame(s, i, ks->ip[i], CX_FRAME_KERNEL, 0);
            }
        }
    }
    if (nk > CX_MAX_KERNEL_FRAMES)
        nk = CX_MAX_KERNEL_FRAMES;
    *nk_out = nk;
    r = user_regs(&pc, &sp, &fp, &lr);
    if (r < 0) {
        stat_inc(CX_STAT_NO_USER_REGS);
        put_frame(s, nk, 0, CX_FRAME_TRUNCATED, CX_TRUNC_NO_REGS);
        nu = 1;
    } else if (r > 0 && in_kernel && in_execve()) {
        put_frame(s, nk, 0, CX_FRAME_TRUNCATED, CX_TRUNC_EXEC);
        nu = 1;
    } else if (r > 0) {
        nu = walk_user(ctx, s, tgid, nk, pc, sp, fp, lr, off);
    } /* else a kernel thread: no user stack */
    return nk + nu;
}

SEC("perf_event")
int cx_on_cpu_clock(struct bpf_perf_event_data *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    __u32 tgid = id >> 32, tid = (__u32)id, zero = 0, nk = 0, n;
    struct walk_state *st;
    struct cx_sample *s;
    struct kstack *ks;

    if (tid == 0)
        return 0; /* the idle task */
    if (target_tgid && tgid != target_tgid)
        return 0;
    /* Before anything else: an excluded process costs one lookup. */
    if (bpf_map_lookup_elem(&skip_tgids, &tgid))
        return 0;
    stat_inc(CX_STAT_SAMPLES);

    s = bpf_map_lookup_elem(&scratch, &zero);
    ks = bpf_map_lookup_elem(&kscratch, &zero);
    st = bpf_map_lookup_elem(&wstate, &zero);
    if (!s || !ks || !st)
        return 0;
    /* A new program's first sample wakes user space (fresh_tgids): in the
     * CFI walk's record, or in this one. */
    st->wake = first_sample(tgid);
    /* No time: unused by user space yet, and a clock read per sample costs. */
    record_begin(s, CX_REC_SAMPLE, tgid, tid, 0);
    n = record_stacks(ctx, s, ks, tgid, !cx_regs_user_mode(cx_ctx_regs(ctx)), &nk, 0);
    emit(s, tgid, nk, n, st->wake);
    return 0;
}

/* The process's entries for the CFI and Python walks describe the program
 * it ran: gone with it (user space makes them anew from the new program's
 * mappings, or forgets the process; an entry left behind would point a
 * later process with the pid at another program's tables). */
static __always_inline void drop_walk_entries(__u32 tgid)
{
    bpf_map_delete_elem(&proc_unwind, &tgid);
    bpf_map_delete_elem(&py_procs, &tgid);
    bpf_map_delete_elem(&v8_procs, &tgid);
    bpf_map_delete_elem(&hs_procs, &tgid);
}

/* BTF-typed tracepoints (Linux 5.5): no tracefs mount needed. */
SEC("tp_btf/sched_process_exec")
int cx_on_exec(void *ctx)
{
    drop_walk_entries(bpf_get_current_pid_tgid() >> 32);
    proc_event(CX_REC_EXEC, 0, 0, 0);
    return 0;
}

/* The same, and the new executable's code learned for the walk (unwind.h)
 * while bpf_find_vma is free to be called (not in an interrupt): its first
 * samples then need their one lookup for a library only. Loaded instead of
 * cx_on_exec where the kernel has bpf_find_vma. */
SEC("tp_btf/sched_process_exec")
int cx_on_exec_vma(void *ctx)
{
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    struct task_struct *task = bpf_get_current_task_btf();
    struct vma_found found = {};

    drop_walk_entries(tgid);
    __u8 one = 1;
    bpf_map_update_elem(&fresh_tgids, &tgid, &one, BPF_ANY);
    proc_event(CX_REC_EXEC, 0, 0, 0);
    /* Start over for the new image, and open the window in which
     * cx_on_fault learns the libraries it runs. */
    struct cx_vma_learned *l = learned_entry(tgid);
    if (l) {
        l->mm = current_mm();
        l->n = 0;
        l->exec_ns = bpf_ktime_get_ns();
    }
    if (bpf_find_vma(task, BPF_CORE_READ(task, mm, start_code), cx_vma_cb, &found, 0) == 0 &&
        found.blocks) {
        struct cx_vma_learned_map m = {found.start, found.end,    found.bias,
                                       found.table, found.blocks, bpf_ktime_get_ns()};
        learn(tgid, &m);
    }
    return 0;
}

#define CX_PF_INSTR 0x10 /* X86_PF_INSTR: the fault was an instruction fetch */

/* The code a young process runs first in each library (ld.so's libraries,
 * a dlopen), learned at the instruction fetch that faults its first page
 * in: a user page fault is taken in process context, where bpf_find_vma is
 * free to be called. A sample may call it only once (in interrupt context
 * a second call finds the first one's unlock still pending), so without
 * this a new process's first sample in a library with no frame pointers
 * (libc's qsort calling back into the program) was cut: about one sample in
 * 20 of short processes. Only instruction faults, only in the
 * CX_VMA_LEARNED_NS after an exec; loaded with cx_on_exec_vma where the
 * kernel has the tracepoint (x86). */
SEC("tp_btf/page_fault_user")
int BPF_PROG(cx_on_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    struct vma_found found = {};
    struct cx_vma_learned *l;
    __u64 now;

    if (!(error_code & CX_PF_INSTR))
        return 0;
    l = bpf_map_lookup_elem(&vma_learned, &tgid);
    if (!l || !l->exec_ns)
        return 0;
    now = bpf_ktime_get_ns();
    if (now - l->exec_ns > CX_VMA_LEARNED_NS || l->mm != current_mm() ||
        learned(tgid, address, now))
        return 0;
    if (bpf_find_vma(bpf_get_current_task_btf(), address, cx_vma_cb, &found, 0) == 0 &&
        found.blocks) {
        struct cx_vma_learned_map m = {found.start, found.end,    found.bias,
                                       found.table, found.blocks, now};
        learn(tgid, &m);
        /* User space names frames by the maps it reads from /proc, and a
         * short process's samples are often read after it has exited, when
         * its maps are gone: if they were read before ld.so mapped the
         * libraries, the walk was whole but user space had to cut it at the
         * first return address into a library. Now, while the process runs
         * a library's first code (every library is mapped by then), is when
         * to read them. Not while it has not been sampled (fresh_tgids):
         * user space reads nothing of it before its first sample. */
        if (!bpf_map_lookup_elem(&fresh_tgids, &tgid))
            proc_event(CX_REC_MAPS, found.start, found.ino, found.dev);
    }
    return 0;
}

/* A forked process runs its parent's program at the same addresses: it
 * takes the parent's entries at once, so its first samples, taken before
 * user space has heard of it (a pool's workers, a pre-fork server's), are
 * walked as the parent's are. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(cx_on_fork, struct task_struct *parent, struct task_struct *child)
{
    __u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
    void *v;

    if (ptgid == ctgid)
        return 0; /* a thread */
    v = bpf_map_lookup_elem(&proc_unwind, &ptgid);
    if (v)
        bpf_map_update_elem(&proc_unwind, &ctgid, v, BPF_NOEXIST);
    v = bpf_map_lookup_elem(&py_procs, &ptgid);
    if (v)
        bpf_map_update_elem(&py_procs, &ctgid, v, BPF_NOEXIST);
    return 0;
}

SEC("tp_btf/sched_process_exit")
int cx_on_exit(void *ctx)
{
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();

    /* The tracepoint fires for every thread; the process is gone once the
     * last one has dropped the thread group's live count.
     */
    if (BPF_CORE_READ(task, signal, live.counter) != 0)
        return 0;
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    drop_walk_entries(tgid);
    bpf_map_delete_elem(&vma_learned, &tgid);
    bpf_map_delete_elem(&fresh_tgids, &tgid);
    proc_event(CX_REC_EXIT, 0, 0, 0);
    return 0;
}

#include "offcpu.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

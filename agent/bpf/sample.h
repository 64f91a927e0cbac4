/* The records the BPF side hands to user space, and the counters it keeps.
 *
 * Shared by sampler.bpf.c (clang -target bpf) and user space (gcc): plain
 * fixed-size types and #defines only, no libc or kernel headers.
 *
 * A sample is a list of typed frames, leaf first: the kernel frames (when the
 * CPU was in the kernel), then the user frames. Each unwinder (today the
 * frame-pointer walk; later CFI and interpreter unwinders) appends frames of
 * its own kind, so user space never has to guess what an address means.
 */
#ifndef CODEXRAY_AGENT_BPF_SAMPLE_H
#define CODEXRAY_AGENT_BPF_SAMPLE_H

#define CX_COMM_LEN 16
#define CX_MAX_USER_FRAMES 512
#define CX_MAX_KERNEL_FRAMES 128
#define CX_MAX_FRAMES (CX_MAX_USER_FRAMES + CX_MAX_KERNEL_FRAMES)

/* The "skip_tgids" hash map: processes user space excludes from profiling
 * (CODEXRAY_PROFILING=disabled), so BPF spends nothing on their samples.
 * Key: __u32 tgid; value: __u8, always 1. A full map only costs BPF time:
 * user space still drops those processes' samples. */
#define CX_SKIP_MAX_ENTRIES 16384

/* Record kinds in the ring buffer (cx_record_hdr.kind). */
enum cx_record_kind {
    CX_REC_SAMPLE = 1,
    CX_REC_EXEC = 2, /* a process called execve: its mappings changed */
    CX_REC_EXIT = 3, /* a thread group ended */
    CX_REC_MAPS = 4, /* a young process ran a library's code the first time: read its maps now */
    /* An off-CPU stack (a cx_sample): a thread blocked with it, and its sums
     * are kept in the "off_sums" map under {tgid, tid, off_id}. Sent once
     * per key while the key is in the map (user space drains the map each
     * window, and the next block with the stack sends it again). */
    CX_REC_OFFCPU = 5,
};

/* Why a thread was off CPU (cx_sample.off_class), decided in BPF at its
 * switch-out from the syscall it blocked in and its state (offcpu.bpf.h). */
enum cx_off_class {
    CX_OFF_OTHER = 0,
    CX_OFF_LOCK = 1,   /* futex */
    CX_OFF_POLL = 2,   /* epoll_wait, poll, select and their variants */
    CX_OFF_SLEEP = 3,  /* nanosleep, clock_nanosleep */
    CX_OFF_IO = 4,     /* uninterruptible (disk I/O, fsync, page faults) */
    CX_OFF_PIPE = 5,   /* read/write family on a pipe or FIFO */
    CX_OFF_SOCKET = 6, /* read/write/recv/send/accept/connect on a socket */
    CX_OFF__COUNT,
};

/* The "off_sums" hash map: off-CPU time per process, thread and stack.
 * ns is already weighted by the inverse of the walk's sampling probability
 * (an unbiased estimate of the time blocked); blocks counts the walked
 * blocks behind it. User space reads and deletes each entry every window. */
#define CX_OFF_SUMS_ENTRIES 32768
struct cx_off_key {
    __u32 tgid;
    __u32 tid;
    __u64 id; /* the stack's hash, class and syscall included: never 0 */
};
struct cx_off_val {
    __u64 ns;
    __u64 blocks;
};

/* The "off_start" array: a walked block in progress, by thread (slot rule
 * in offcpu.bpf.h). Memory-mapped (BPF_F_MMAPABLE): at each window's end
 * user space credits the time of blocks still going on up to then and moves
 * their start_ns forward with a compare-and-swap (sampler__credit_blocked),
 * so that a block lasting many windows is counted in each, not all in the
 * window of its wake-up. start_ns 0: the slot is free. */
#define CX_OFF_START_WAY 32768
struct cx_off_start {
    __u64 start_ns; /* CLOCK_MONOTONIC: the switch-out, or the last window end */
    struct cx_off_key key;
    __u32 p16;  /* the probability it was walked with, of 65536 */
    __u32 tag;  /* its task's tag (offcpu.bpf.h task_tag): checked with key.tid */
    __u32 slot; /* the duty cycle's slot of the switch-out (off_duty, offcpu.bpf.h) */
    __u32 f16;  /* that slot's probability of being watched, of 65536 */
    __u32 csw;  /* the task's nvcsw + nivcsw just after the switch-out (low bits) */
    __u32 pad;
};
/* The slots taken are counted by the top CX_OFF_PEND_BITS bits of their tag
 * (off_pending, offcpu.bpf.h): what a switch-in looks at first. */
#define CX_OFF_PEND_BITS 12
/* One element of the map: thread tid's two slots, side by side (one
 * lookup, at most two cache lines). User space sees 2 * CX_OFF_START_WAY slots in a
 * row. */
struct cx_off_start_set {
    struct cx_off_start way[2];
};

/* The off-CPU walk budget's period: its sampling probability is set anew
 * each period from the blocks of the last (offcpu.bpf.h). */
#define CX_OFF_PERIOD_NS 100000000ull /* 100 ms */

/* The "off_budget" per-CPU array's one element: the walk budget's state
 * (offcpu.bpf.h). blocks is CX_STAT_OFF_BLOCKS, kept here rather than in
 * the stats map: the count every block pays for then costs no lookup of
 * its own (sampler__stats adds it in). */
struct cx_off_budget {
    __u64 period_start;
    __u64 blocks;        /* switch-outs into a blocked state, of threads profiled */
    __u64 period_blocks; /* blocks at period_start */
    __u32 walked;        /* blocks walked since period_start */
    __u32 cur_p16;       /* the probability now, of 65536 (0: 1, before the first period) */
    __u32 dec_p16;       /* the probability of the last walk's decision (its weight) */
    __u32 next_halve;    /* walked past this, cur_p16 halves */
    __u32 tag;           /* the task tag of the block being walked */
    __u32 csw;           /* the walked block's task: nvcsw + nivcsw (cx_off_start.csw) */
    __u64 rng;           /* LCG state: a random number without a helper call */
    __u64 duty;          /* off_duty when the walked block switched out */
};

/* The duty cycle's word (off_duty in offcpu.bpf.h), written by user space
 * only: the slot's number in the high 32 bits, its probability of being
 * watched (of CX_OFF_ONE, 1 to CX_OFF_ONE) in the low; low bits 0: nothing
 * is watched (the hook is being attached or detached). */
#define CX_OFF_ONE 65536u
#define CX_OFF_DUTY(slot, f16) ((__u64)(slot) << 32 | (f16))

/* t / (p / CX_OFF_ONE), p of CX_OFF_ONE (0 taken as 1), without overflow:
 * saturates at 2^63 (centuries) rather than wrap. */
static inline __attribute__((always_inline)) __u64 cx_off_inv(__u64 t, __u32 p)
{
    __u64 q = p ? p : 1;

    if (t / q >= 1ull << 47)
        return 1ull << 63;
    return t / q * CX_OFF_ONE + t % q * CX_OFF_ONE / q;
}

/* A counted block's weighted time: dt, its time, over the probability it
 * was counted with, p16 (the walk budget's) times the duty cycle's: f_a, the
 * slot of its switch-out, and f_b, the slot of its switch-in when that is
 * another slot (the two drawn independently, docs/internals/bpf.md). The
 * time user space credits at a window's end is weighed with fb16 = 0: that
 * part needs only slot a watched. */
static inline __attribute__((always_inline)) __u64 cx_off_weight(__u64 dt, __u32 p16, __u32 fa16,
                                                                 __u32 fb16)
{
    __u64 w = cx_off_inv(cx_off_inv(dt, p16), fa16);

    return fb16 ? cx_off_inv(w, fb16) : w;
}

/* Frame kinds (cx_frame.kind). */
enum cx_frame_kind {
    CX_FRAME_NATIVE = 1,    /* user-space pc; the leaf is exact, callers are return addresses */
    CX_FRAME_KERNEL = 2,    /* kernel pc; the leaf is exact, callers are return addresses */
    CX_FRAME_TRUNCATED = 3, /* the walk stopped early; aux holds a cx_trunc_reason */
    /* A CPython frame (python.h): addr is its code object, aux the
     * instruction's offset as the version counts it (f_lasti up to 3.10,
     * bytes into the bytecode from 3.11), tag the code object's fingerprint. */
    CX_FRAME_PYTHON = 4,
    CX_FRAME_PYTHON_ERR = 5, /* Python frames that could not be walked; aux: enum cx_py_err */
    /* Made by user space, never by BPF: an off-CPU stack's innermost frame,
     * "[off-CPU: CLASS]"; addr holds the enum cx_off_class. */
    CX_FRAME_OFFCPU = 6,
    /* A V8 JavaScript frame (v8.h): addr is its SharedFunctionInfo
     * (tagged), tag the object's fingerprint. */
    CX_FRAME_V8 = 7,
    /* A HotSpot JVM's Java frame (hotspot.h): aux is enum cx_hs_frame_type,
     * addr the Method* (interpreted, compiled) or the stub's CodeBlob. */
    CX_FRAME_JAVA = 8,
};

/* Why a walk stopped before the end of the stack (cx_frame.aux). */
enum cx_trunc_reason {
    CX_TRUNC_DEPTH = 1,    /* more frames than CX_MAX_USER_FRAMES */
    CX_TRUNC_FAULT = 2,    /* a frame could not be read from the stack */
    CX_TRUNC_NO_REGS = 3,  /* no user registers could be had for the task */
    CX_TRUNC_CFI_RULE = 4, /* the CFI row for a pc has a rule the walk cannot follow */
    CX_TRUNC_CFI_BAD = 5,  /* the CFI gave a frame that cannot be (a CFA below the stack pointer) */
    CX_TRUNC_EXEC =
        6, /* in execve: the user registers are the previous program's, its stack gone */
    /* arm64: a frame above the first whose return address would still be in
     * the link register, which by then holds another (a broken chain) */
    CX_TRUNC_LR = 7,
};

/* cx_frame.aux of a CX_FRAME_NATIVE frame: bit flags. */
#define CX_AUX_EXACT_PC 1 /* a pc that is not a return address (after a signal frame) */

struct cx_frame {
    __u64 addr;
    __u16 kind; /* enum cx_frame_kind */
    __u16 tag;  /* per kind: a fingerprint of a Python code object, a V8 function or a Java frame */
    __u32 aux;  /* per kind, see above */
};

struct cx_record_hdr {
    __u32 kind;
    __u32 tgid;
    __u32 tid;
    __u32 cpu;
    __u64 time_ns; /* CLOCK_MONOTONIC */
};

struct cx_sample {
    struct cx_record_hdr hdr;
    char comm[CX_COMM_LEN]; /* the thread's name */
    __u16 n_kernel;         /* kernel frames, first in frames[] */
    __u16 n_user;           /* user frames, after the kernel ones */
    __s32 kernel_err;       /* bpf_get_stack's error, 0 when fine */
    /* CX_REC_OFFCPU only (0 in CPU samples): */
    __u32 off_class;   /* enum cx_off_class */
    __s32 off_syscall; /* the syscall the thread blocked in, -1 for none */
    __u64 off_id;      /* cx_off_key.id */
    struct cx_frame frames[CX_MAX_FRAMES];
};

struct cx_proc_event {
    struct cx_record_hdr hdr;
    char comm[CX_COMM_LEN];
    /* bpf_get_current_cgroup_id(): its cgroup v2 (the root's id on a host
     * of cgroup v1 only). User space names a process gone before the event
     * is handled by it (procs/cgroup_id.h). */
    __u64 cgroup_id;
    /* CX_REC_MAPS: where the code that ran is (the start of its mapping)
     * and its file (inode, and device as the kernel's dev_t: major << 20 |
     * minor): user space reads the maps only when those it has lack that
     * mapping of that file (after a dlclose another file can be mapped at
     * the same address). 0 in the other kinds. */
    __u64 addr;
    __u64 ino;
    /* CX_REC_EXEC: the process's start (task_struct.start_boottime, ns
     * since boot, as /proc/PID/stat's field 22 before its division into
     * clock ticks): with comm, what user space would read from /proc at
     * every exec. 0 when the kernel has no such field. */
    __u64 start_ns;
    __u32 dev;
    __u32 pad;
};

/* Per-CPU counters (the "stats" array map), summed by user space. */
enum cx_stat {
    CX_STAT_SAMPLES = 0,     /* perf events seen for a non-idle task */
    CX_STAT_LOST_RINGBUF,    /* samples dropped: ring buffer full */
    CX_STAT_LOST_EVENTS,     /* exec/exit events dropped: ring buffer full */
    CX_STAT_TRUNC_FAULT,     /* user walks stopped by an unreadable frame */
    CX_STAT_TRUNC_DEPTH,     /* user walks stopped by the depth limit */
    CX_STAT_KSTACK_ERR,      /* kernel stacks that bpf_get_stack could not read */
    CX_STAT_NO_USER_REGS,    /* user tasks whose registers could not be had */
    CX_STAT_LOST_MAP_FULL,   /* per-process loss counts that found the lost map full */
    CX_STAT_CFI_WALKS,       /* user walks that had CFI tables for the process */
    CX_STAT_CFI_FRAMES,      /* caller frames found through a CFI row */
    CX_STAT_FP_FRAMES,       /* caller frames found through the frame pointer */
    CX_STAT_TRUNC_CFI,       /* CFI walks stopped by an unsupported rule or a bad frame */
    CX_STAT_PY_FRAMES,       /* Python frames shown */
    CX_STAT_PY_TSTATE_WALKS, /* thread states looked for in the interpreters' lists */
    CX_STAT_PY_ERRORS,       /* Python walks that gave up (CX_FRAME_PYTHON_ERR) */
    CX_STAT_VMA_LOOKUPS,     /* pcs looked up with bpf_find_vma (no entry for them) */
    CX_STAT_VMA_TABLES,      /* of those, in a file with a table (file_unwind) */
    /* Off-CPU (offcpu.bpf.h), counted only when it is on: */
    CX_STAT_OFF_BLOCKS,       /* switch-outs into a blocked state, of threads profiled
                               * (counted in cx_off_budget.blocks) */
    CX_STAT_OFF_WALKS,        /* of those, walked (sampled within the budget) */
    CX_STAT_OFF_OVER_BUDGET,  /* blocks decided at a halved p: the period's budget walked */
    CX_STAT_OFF_SHORT,        /* walked blocks shorter than the minimum: not counted */
    CX_STAT_OFF_COUNTED,      /* walked blocks whose time went into off_sums */
    CX_STAT_OFF_SUMS_FULL,    /* blocks lost: off_sums was full */
    CX_STAT_OFF_START_FULL,   /* walked blocks lost: the per-thread start map was full */
    CX_STAT_OFF_LOST_RINGBUF, /* off-CPU stacks not sent: ring buffer full */
    CX_STAT_OFF_STALE,        /* walked blocks whose thread switched out again while the
                               * hook was detached (duty cycle): their end unknown, not counted */
    CX_STAT__COUNT,
};

#endif

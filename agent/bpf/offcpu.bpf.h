/* Off-CPU time: where threads wait. Included at the end of sampler.bpf.c,
 * whose walker it reuses (CFI, frame pointers, Python; the kernel stack).
 *
 * One tp_btf/sched_switch program runs at every context switch:
 *  - switch-in of `next`: if its last block was walked, the time since is
 *    added to that block's stack in off_sums (weighted, below); most
 *    switch-ins stop at one load (off_pending: no block of theirs walked);
 *  - switch-out of `prev` into a blocked state (not preempted, state
 *    TASK_INTERRUPTIBLE or TASK_UNINTERRUPTIBLE): the stack is walked now,
 *    while prev is still `current` (its user memory is the one
 *    bpf_probe_read_user reads, its user registers at its task_pt_regs),
 *    hashed, and sent to user space once per key (CX_REC_OFFCPU); the
 *    start time goes to off_start under its thread id.
 *
 * Cost bound: each CPU walks at most about off_walks_per_period blocks a
 * period (OFF_PERIOD_NS; user space works it out from the walks a second
 * it was given). Every block is walked with a probability p fixed for the
 * CPU's current period from the blocks it saw in the previous one, and a
 * walked block's time counts 1/p times: the sum is an unbiased estimate of
 * all blocked time (Horvitz-Thompson), p being independent of how long the
 * block lasts. In a burst, each budget's worth of walks in a period halves
 * p for the rest of it (each halving counted in CX_STAT_OFF_OVER_BUDGET):
 * still unbiased, each block weighted by its own p, and the walks stay
 * within a few budgets whatever the burst. Blocks shorter than off_min_ns
 * are not counted (CX_STAT_OFF_SHORT).
 *
 * Duty cycle: at high switch rates even an empty program attached here
 * costs more than the bound (its dispatch), so user space (offduty.h)
 * attaches the link only in some slots of time, each with its own
 * probability f drawn independently, and tells the program the slot and f
 * in off_duty. A block counts only if its switch-out and its switch-in were
 * both watched: probability f_a, or f_a * f_b when they fell in slots a and
 * b != a; its time is weighted by the inverse (cx_off_weight), so totals
 * stay unbiased. A switch-in is matched to its block exactly across
 * unwatched time by the task's switch count (nvcsw + nivcsw, incremented
 * before the tracepoint fires): a count that moved means the thread ran and
 * blocked again unseen, the slot is stale (CX_STAT_OFF_STALE).
 */
#ifndef CODEXRAY_AGENT_BPF_OFFCPU_H
#define CODEXRAY_AGENT_BPF_OFFCPU_H

/* Filled by user space between open and load. */
const volatile __u64 off_min_ns = 10000;
/* The budget: walks per CPU per OFF_PERIOD_NS, at least 1 (worked out by
 * user space from the walks a second: no division at each block). */
const volatile __u32 off_walks_per_period = 100;

/* The duty cycle's slot and probability (CX_OFF_DUTY), written by user
 * space: low bits 0, nothing is watched. One 64-bit word: read in one load,
 * never a slot with another slot's f. */
__u64 off_duty;

#define OFF_PERIOD_NS CX_OFF_PERIOD_NS
#define OFF_P_ONE 65536u /* probability 1 in 16-bit fixed point */

#define CX_TASK_INTERRUPTIBLE 0x1
#define CX_TASK_UNINTERRUPTIBLE 0x2

/* The walked blocks in progress, by thread id (the kernel's pid), in an
 * array rather than a hash: a hash lookup is a function call and a hash
 * (measured: 80 ns a switch with the hash, the whole program). Two-way:
 * thread tid may sit in either slot of set tid % OFF_START_WAY, both in one
 * element (one lookup, at most two cache lines); with both taken by other blocked
 * threads the block is not counted (CX_STAT_OFF_START_FULL), never an
 * eviction. A slot is free when its start_ns is 0; its tag is its task's
 * (task_tag), checked with the tid, so a later thread of the same id is
 * never given it. 1 set when off-CPU is off (set by user space). Mapped by
 * user space, which moves start_ns forward at each window's end
 * (sample.h). */
#define OFF_START_WAY CX_OFF_START_WAY
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, OFF_START_WAY);
    __type(key, __u32);
    __type(value, struct cx_off_start_set);
} off_start SEC(".maps");

/* The filter every switch-in reads, and the only thing most read: the
 * slots taken, counted by their tag's bucket (the tag's top
 * CX_OFF_PEND_BITS bits). A switch-in whose bucket counts 0 has no slot and
 * returns after one load from these 16 KiB, without reading the task (its
 * pid's line is often cold) or off_start (3 MiB, up to two lines a set). A slot
 * taken adds 1 (off_finish), one freed takes 1 (off_switch_in, user space's
 * sampler__credit_blocked for a thread gone), with atomic adds: buckets are
 * shared across CPUs. A count is never below its bucket's slots (a slot
 * lost to the two-CPU race below leaves its 1 behind: its bucket's
 * switch-ins then look at off_start for nothing, only slower). Global data,
 * not a map lookup: its address is an instruction's constant. */
__u32 off_pending[1 << CX_OFF_PEND_BITS];

/* The task's tag: a multiplicative hash of its address (never read through:
 * no load, whatever line the task's fields are on). The address enters as
 * its distance from off_pending's, the one arithmetic the verifier allows on
 * a task pointer (pointer minus pointer, privileged), the same constant on
 * both sides. */
static __always_inline __u32 task_tag(struct task_struct *t)
{
    __u64 d = (__u64)((char *)t - (char *)off_pending);

    return (__u32)((d >> 6) * 0x9E3779B97F4A7C15ull >> 32);
}

static __always_inline __u32 *pending_count(__u32 tag)
{
    return &off_pending[tag >> (32 - CX_OFF_PEND_BITS)];
}

/* Thread tid's (task tag's) slot in progress, or NULL. */
static __always_inline struct cx_off_start *start_slot(__u32 tid, __u32 tag)
{
    __u32 i = tid & (OFF_START_WAY - 1);
    struct cx_off_start_set *set = bpf_map_lookup_elem(&off_start, &i);

    if (!set)
        return NULL;
    if (set->way[0].key.tid == tid && set->way[0].tag == tag && set->way[0].start_ns)
        return &set->way[0];
    if (set->way[1].key.tid == tid && set->way[1].tag == tag && set->way[1].start_ns)
        return &set->way[1];
    return NULL;
}

/* A slot for thread tid's new block: its own if it has one (a switch-in
 * missed), else a free one; NULL when both are taken. */
static __always_inline struct cx_off_start *start_slot_free(__u32 tid)
{
    __u32 i = tid & (OFF_START_WAY - 1);
    struct cx_off_start_set *set = bpf_map_lookup_elem(&off_start, &i);

    if (!set)
        return NULL;
    if (set->way[0].key.tid == tid || !set->way[0].start_ns)
        return &set->way[0];
    if (set->way[1].key.tid == tid || !set->way[1].start_ns)
        return &set->way[1];
    return NULL;
}

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CX_OFF_SUMS_ENTRIES);
    __type(key, struct cx_off_key);
    __type(value, struct cx_off_val);
} off_sums SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct cx_off_budget);
} off_budget SEC(".maps");

/* The task's state: __state since 5.14, state before. */
struct task_struct___pre514 {
    long state;
} __attribute__((preserve_access_index));

/* Direct loads: t is the tracepoint's BTF pointer (a probe read costs a
 * helper call on every context switch). */
static __always_inline unsigned task_state(struct task_struct *t)
{
    if (bpf_core_field_exists(t->__state))
        return t->__state;
    return ((struct task_struct___pre514 *)t)->state;
}

/* The current task's saved user registers, a kernel address: only read
 * through probe reads (cx_regs_syscall). NULL when there are none. */
static __always_inline const struct pt_regs *cur_user_regs_addr(void)
{
    if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
        return (const struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    struct task_struct *t = (struct task_struct *)bpf_get_current_task();
    void *stack = BPF_CORE_READ(t, stack);
    if (!stack)
        return NULL;
    return (const struct pt_regs *)((char *)stack + thread_size -
                                    bpf_core_type_size(struct pt_regs));
}

#define CX_S_IFMT 0170000
#define CX_S_IFIFO 0010000
#define CX_S_IFSOCK 0140000

/* The kind of file descriptor fd of the current task: CX_OFF_PIPE,
 * CX_OFF_SOCKET, or CX_OFF_OTHER. */
static __always_inline __u32 fd_class(__u64 fd)
{
    struct task_struct *t = (struct task_struct *)bpf_get_current_task();
    struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
    struct file **fds, *f = NULL;
    unsigned mode;

    if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
        return CX_OFF_OTHER;
    fds = BPF_CORE_READ(fdt, fd);
    if (!fds || bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
        return CX_OFF_OTHER;
    mode = BPF_CORE_READ(f, f_inode, i_mode) & CX_S_IFMT;
    if (mode == CX_S_IFIFO)
        return CX_OFF_PIPE;
    if (mode == CX_S_IFSOCK)
        return CX_OFF_SOCKET;
    return CX_OFF_OTHER;
}

/* The rule (docs/internals/bpf.md): the syscall first (futex: lock; the
 * poll family: poll; the sleeps: sleep; reads, writes, sends, receives,
 * accept and connect: pipe or socket by the descriptor's file type), then
 * the state (uninterruptible: io), else other. */
static __always_inline __u32 off_classify(unsigned state, long *nr_out)
{
    const struct pt_regs *r = cur_user_regs_addr();
    long nr = -1;
    __u64 arg0 = 0;

    if (!r || cx_regs_syscall(r, &nr, &arg0))
        nr = -1;
    *nr_out = nr;
    switch (nr) {
    case CX_NR_futex:
    case CX_NR_futex_waitv:
        return CX_OFF_LOCK;
    case CX_NR_epoll_wait:
    case CX_NR_epoll_pwait:
    case CX_NR_epoll_pwait2:
    case CX_NR_poll:
    case CX_NR_ppoll:
    case CX_NR_select:
    case CX_NR_pselect6:
        return CX_OFF_POLL;
    case CX_NR_nanosleep:
    case CX_NR_clock_nanosleep:
        return CX_OFF_SLEEP;
    case CX_NR_read:
    case CX_NR_write:
    case CX_NR_pread64:
    case CX_NR_readv:
    case CX_NR_writev:
    case CX_NR_connect:
    case CX_NR_accept:
    case CX_NR_accept4:
    case CX_NR_sendto:
    case CX_NR_recvfrom:
    case CX_NR_sendmsg:
    case CX_NR_recvmsg:
    case CX_NR_recvmmsg: {
        __u32 c = fd_class(arg0);
        if (c != CX_OFF_OTHER)
            return c;
        break;
    }
    default:
        break;
    }
    return state & CX_TASK_UNINTERRUPTIBLE ? CX_OFF_IO : CX_OFF_OTHER;
}

/* The stack's key: FNV-1a over the first nframes frames of this CPU's
 * record (scratch), its class and syscall. Never 0. A global function:
 * verified once, not once for every path of the walk that calls it. */
__noinline __u64 cx_off_hash(__u32 nframes)
{
    __u64 h = 14695981039346656037ull;
    __u32 zero = 0;
    struct cx_sample *s = bpf_map_lookup_elem(&scratch, &zero);

    if (!s)
        return 1;
    for (__u32 i = 0; i < CX_MAX_FRAMES; i++) {
        if (i >= nframes)
            break;
        h = (h ^ s->frames[i].addr) * 1099511628211ull;
        /* The tag too: a V8 function or a Python code object at an address
         * the collector reused is another frame (its fingerprint differs). */
        h = (h ^
             ((__u64)s->frames[i].tag << 48 | (__u64)s->frames[i].kind << 32 | s->frames[i].aux)) *
            1099511628211ull;
    }
    h = (h ^ ((__u64)s->off_class << 32 | (__u32)s->off_syscall)) * 1099511628211ull;
    return h ? h : 1;
}

/* The end of an off-CPU walk: the stack's key, the record sent when the key
 * is new to off_sums, and the block's start kept for its switch-in. */
static __always_inline void off_finish(struct cx_sample *s, __u32 nk, __u32 nframes, int wake)
{
    struct cx_off_val zero = {};
    struct cx_off_start st = {};
    __u32 tid = s->hdr.tid, zero_idx = 0;
    __u64 size, n = nframes;
    long r;

    s->n_kernel = nk;
    s->n_user = nframes - nk;
    s->off_id = cx_off_hash(nframes);
    st.start_ns = s->hdr.time_ns;
    st.key.tgid = s->hdr.tgid;
    st.key.tid = tid;
    st.key.id = s->off_id;
    /* The probability off_sample walked it with: the same CPU's period
     * (the walk's tail calls do not leave the CPU). */
    struct cx_off_budget *b = bpf_map_lookup_elem(&off_budget, &zero_idx);
    st.p16 = b && b->dec_p16 ? b->dec_p16 : OFF_P_ONE;
    r = bpf_map_update_elem(&off_sums, &st.key, &zero, BPF_NOEXIST);
    if (r == 0) {
        asm volatile("" : "+r"(n));
        if (n > CX_MAX_FRAMES)
            n = CX_MAX_FRAMES;
        size = __builtin_offsetof(struct cx_sample, frames) + n * sizeof(struct cx_frame);
        if (bpf_ringbuf_output(&events, s, size, wake ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP)) {
            /* Not sent: the key goes, so that the next block sends it. */
            bpf_map_delete_elem(&off_sums, &st.key);
            stat_inc(CX_STAT_OFF_LOST_RINGBUF);
            return;
        }
    } else if (r != -17 /* EEXIST */) {
        stat_inc(CX_STAT_OFF_SUMS_FULL);
        return;
    }
    struct cx_off_start *slot = start_slot_free(tid);
    if (!slot) {
        stat_inc(CX_STAT_OFF_START_FULL);
        return;
    }
    __u32 tag = b ? b->tag : 0;
    /* Counted once a slot: the thread's own slot still held (its switch-in
     * missed) is counted already. */
    if (!slot->start_ns || slot->tag != tag)
        __sync_fetch_and_add(pending_count(tag), 1);
    slot->key = st.key;
    slot->p16 = st.p16;
    slot->tag = tag;
    slot->slot = b ? (__u32)(b->duty >> 32) : 0;
    slot->f16 = b ? (__u32)b->duty : CX_OFF_ONE;
    slot->csw = b ? b->csw : 0;
    slot->start_ns = st.start_ns; /* last: the slot is taken from here on */
}

/* Whether this block is walked: the budget's sampling rule (above); b is
 * this CPU's budget. The common answer (no) reads no clock: the clock is
 * read every 64 blocks and for a block walked (*now). Until the first
 * clock read p is 1 (cur_p16 0). */
static __always_inline int off_sample(struct cx_off_budget *b, __u64 *now)
{
    __u64 want = off_walks_per_period, t = 0;

    /* The clock every 64 blocks, not at each: a new period is seen at most
     * 63 blocks late, and p is set from the rate over whatever span passed
     * (blocks per period of it), so a late look changes nothing. */
    if ((++b->blocks & 63) == 0) {
        __u64 span, seen = b->blocks - b->period_blocks;

        t = bpf_ktime_get_ns();
        span = t - b->period_start;
        if (b->period_start == 0 || span >= OFF_PERIOD_NS) {
            __u64 per_period = seen * OFF_PERIOD_NS / (span ? span : 1);
            __u64 p = per_period <= want ? OFF_P_ONE : want * OFF_P_ONE / per_period;
            if (b->period_start == 0) /* seeded once, off the common path */
                b->rng = (__u64)bpf_get_prandom_u32() << 32 | bpf_get_prandom_u32();
            b->cur_p16 = b->period_start == 0 || p >= OFF_P_ONE ? OFF_P_ONE : p ? p : 1;
            b->period_start = t;
            b->period_blocks = b->blocks;
            b->walked = 0;
            b->next_halve = want;
        }
    }
    __u32 p = b->cur_p16 ? b->cur_p16 : OFF_P_ONE;
    if (p < OFF_P_ONE) {
        /* A 64-bit linear congruential step (Knuth's MMIX constants): its
         * top bits are the draw, a multiply and an add a block. */
        __u64 x = b->rng * 6364136223846793005ull + 1442695040888963407ull;
        b->rng = x;
        if ((x >> 48) >= p)
            return 0;
    }
    /* The weight is the p it was walked with, whatever happens next. */
    b->dec_p16 = p;
    /* A burst: each budget's worth walked in this period halves p for the
     * rest of it. Still unbiased: each block is weighted by its own p. */
    if (++b->walked >= b->next_halve) {
        stat_inc(CX_STAT_OFF_OVER_BUDGET);
        b->cur_p16 = p > 1 ? p >> 1 : 1;
        b->next_halve += want;
    }
    *now = t ? t : bpf_ktime_get_ns(); /* once */
    return 1;
}

/* The switch-in of a thread whose block was walked; tag is task_tag(next).
 * The common case, no slot taken in the tag's bucket, is one load. */
static __always_inline void off_switch_in(struct task_struct *next, __u32 tag, __u64 duty)
{
    __u32 *pend = pending_count(tag);
    struct cx_off_start *sp, st;
    struct cx_off_val *v, add;
    __u32 fb;
    __u64 now;

    if (!*pend)
        return;
    sp = start_slot(next->pid, tag);
    if (!sp)
        return;
    /* The thread switched out again since its walked switch-out (unseen,
     * in a slot not watched): this switch-in ends another block. */
    if ((__u32)(next->nvcsw + next->nivcsw) != sp->csw) {
        sp->start_ns = 0;
        __sync_fetch_and_add(pend, -1);
        stat_inc(CX_STAT_OFF_STALE);
        return;
    }
    /* Read and freed at once: user space may move start_ns forward at a
     * window's end (crediting the time up to it); the instructions between
     * this load and store are the only window in which both could count the
     * same span (no atomic exchange before 5.12). */
    st.start_ns = sp->start_ns;
    sp->start_ns = 0; /* free */
    __sync_fetch_and_add(pend, -1);
    st.key = sp->key;
    st.p16 = sp->p16;
    st.f16 = sp->f16;
    /* Another slot than the switch-out's: both had to be watched. */
    fb = sp->slot != (__u32)(duty >> 32) ? (__u32)duty : 0;
    now = bpf_ktime_get_ns();
    if (now < st.start_ns || now - st.start_ns < off_min_ns) {
        stat_inc(CX_STAT_OFF_SHORT);
        return;
    }
    /* Weighted by the inverse of its probability (sample.h). */
    add.ns = cx_off_weight(now - st.start_ns, st.p16, st.f16, fb);
    add.blocks = 1;
    stat_inc(CX_STAT_OFF_COUNTED);
    v = bpf_map_lookup_elem(&off_sums, &st.key);
    if (!v) {
        /* Drained by user space since the switch-out: it keeps the stack. */
        if (bpf_map_update_elem(&off_sums, &st.key, &add, BPF_NOEXIST) == 0)
            return;
        v = bpf_map_lookup_elem(&off_sums, &st.key);
        if (!v) {
            stat_inc(CX_STAT_OFF_SUMS_FULL);
            return;
        }
    }
    __sync_fetch_and_add(&v->ns, add.ns);
    __sync_fetch_and_add(&v->blocks, 1);
}

/* The switch-out of the current task into a blocked state. */
static __always_inline void off_switch_out(void *ctx, struct task_struct *prev, __u64 duty)
{
    unsigned state = task_state(prev);
    __u32 tgid, tid, zero = 0, nk = 0, n;
    struct cx_off_budget *b;
    struct cx_sample *s;
    struct kstack *ks;
    __u64 now;
    long nr;

    /* Runnable (the idle task always is) or a kernel thread: one load
     * each, no map. */
    if (!(state & (CX_TASK_INTERRUPTIBLE | CX_TASK_UNINTERRUPTIBLE)))
        return;
    if (prev->flags & PF_KTHREAD)
        return;
    if (target_tgid && prev->tgid != target_tgid)
        return;
    b = bpf_map_lookup_elem(&off_budget, &zero);
    if (!b)
        return;
    /* The budget's draw (it counts the block: CX_STAT_OFF_BLOCKS) before the skip list: one hash
     * lookup fewer for each block not walked (excluded processes' blocks then count in the budget's
     * rate, which only lowers p: still unbiased). */
    if (!off_sample(b, &now))
        return;
    /* For off_finish, maybe in the walker: the switch count is already
     * prev's after this switch (__schedule increments it first). */
    b->tag = task_tag(prev);
    b->duty = duty;
    b->csw = (__u32)(prev->nvcsw + prev->nivcsw);
    /* prev is current: its ids as bpf_get_current_pid_tgid gives them. */
    tgid = prev->tgid;
    tid = prev->pid;
    if (bpf_map_lookup_elem(&skip_tgids, &tgid))
        return;
    stat_inc(CX_STAT_OFF_WALKS);
    s = bpf_map_lookup_elem(&scratch, &zero);
    ks = bpf_map_lookup_elem(&kscratch, &zero);
    if (!s || !ks)
        return;
    record_begin(s, CX_REC_OFFCPU, tgid, tid, now);
    s->off_class = off_classify(state, &nr);
    s->off_syscall = nr;
    /* In the kernel (in schedule()): the kernel stack when profiles keep
     * it. A CFI or Python walk ends in cx_off_walk_user (off_finish). */
    n = record_stacks(ctx, s, ks, tgid, 1, &nk, 1);
    off_finish(s, nk, n, 0);
}

/* Loaded only with off-CPU on (sampler_opts.off_cpu). */
SEC("tp_btf/sched_switch")
int BPF_PROG(cx_on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    __u64 duty = *(volatile __u64 *)&off_duty;

    /* Being attached or detached (user space's duty cycle): not watched. */
    if (!(__u32)duty)
        return 0;
    off_switch_in(next, task_tag(next), duty);
    /* Preempted: still runnable, waiting for a CPU, not blocked. */
    if (!preempt)
        off_switch_out(ctx, prev, duty);
    return 0;
}

#endif

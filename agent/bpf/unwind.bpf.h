/* The user-stack walk, one frame at a time: by CFI rows where the process
 * has tables for the pc (unwind.h), by frame pointer elsewhere (JIT code,
 * Go, binaries without .eh_frame, gaps between FDEs, tables not built yet).
 *
 * Included by sampler.bpf.c only: the walk's state lives in a per-CPU map so
 * the sampler's programs can split a deep walk over tail calls.
 */
#ifndef CODEXRAY_AGENT_BPF_UNWIND_BPF_H
#define CODEXRAY_AGENT_BPF_UNWIND_BPF_H

#include "hotspot.h"
#include "python.h"
#include "unwind.h"
#include "v8.h"

/* --- what the walk does differently per architecture ------------------- */

#if defined(__TARGET_ARCH_arm64)
/* arm64: a call leaves the return address in x30 (the link register); the
 * walk takes it from the sampled registers for the first frame, and from a
 * signal frame's saved ones for the frame it interrupted; above those it
 * is read from the stack where the rows say (enum cx_ra_type). */
#define CX_ARCH_LR 1
/* The bits pointer authentication puts in a user return address: the
 * kernel's mask, found by user space before load (unwind/pac_mask.c); 0
 * where the CPU has no PAC. Every return address the walk takes (from x30
 * or the stack) is stripped of them. */
const volatile __u64 cx_pac_mask = 0;
static __always_inline __u64 cx_strip_pac(__u64 v)
{
    return v & ~cx_pac_mask;
}
#else
/* x86_64: `call` pushes the return address just below the CFA. */
#define CX_ARCH_LR 0
static __always_inline __u64 cx_strip_pac(__u64 v)
{
    return v;
}
#endif

/* The template of the per-binary tables: user space creates each with its
 * own size (BPF_F_INNER_MAP lets sizes differ, Linux 5.10). */
struct cfi_rows {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_INNER_MAP);
    __uint(max_entries, 1);
    /* Sizes, not types: clang would give the row type's BTF only as a
     * forward declaration, which libbpf cannot size. */
    __uint(key_size, sizeof(__u32));
    __uint(value_size, sizeof(struct cx_cfi_block));
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
    __uint(max_entries, CX_CFI_MAX_TABLES);
    __type(key, __u32);
    __array(values, struct cfi_rows);
} cfi_tables SEC(".maps");

/* Entries are 4 KiB and most processes never get one: allocated on insert. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, 16384);
    __type(key, __u32);
    __type(value, struct cx_proc_unwind);
} proc_unwind SEC(".maps");

/* Tables by file, for processes the agent has no entry for yet (unwind.h). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CX_FILE_UNWIND_MAX);
    __type(key, struct cx_file_key);
    __type(value, struct cx_file_unwind);
} file_unwind SEC(".maps");

/* Mappings found by bpf_find_vma, per process (unwind.h). */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, CX_VMA_LEARNED_PROCS);
    __type(key, __u32);
    __type(value, struct cx_vma_learned);
} vma_learned SEC(".maps");

/* An empty entry to insert from: 400 bytes would not fit on the stack. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct cx_vma_learned);
} vma_learned_empty SEC(".maps");

/* Where the Python walk (python.bpf.h) is. */
enum py_walk_state {
    PY_NONE = 0,       /* the process runs no CPython we know */
    PY_UNRESOLVED = 1, /* the thread's current frame is not looked up yet */
    PY_READY = 2,      /* py_frame is the next frame to show */
    PY_FAILED = 3,     /* given up for this sample: native frames only */
};

/* The window of stack the walk copies at once (cx_uread), in 8-byte words:
 * at most this much, and never past the end of the 4 KiB page it starts in
 * (a page is readable whole or not at all, so a copy that stays in one
 * page fails exactly when a read of a word in it would). */
#define CX_UWIN_WORDS 128

/* Where a walk is between one program and the next. */
struct walk_state {
    /* sp 0 on arm64: not known (after a frame-pointer step: step_fp) */
    __u64 pc, sp, fp;
#if CX_ARCH_LR
    __u64 lr; /* the link register, while exact */
#endif
    __u32 tgid;
    __u32 n;     /* frames in the record so far, kernel ones included */
    __u32 nk;    /* kernel frames */
    __u32 exact; /* pc is not a return address (the leaf, or after a signal frame) */
    __u32 done;
    /* The mapping the last frame was in: callers are mostly in the same
     * binary, and a hit saves the process lookup and the mapping search. */
    __u64 m_start, m_end, m_bias;
    __u32 m_table, m_blocks;
    __u32 vma_lookups; /* bpf_find_vma calls in this walk (one can succeed) */
    /* The record wakes user space at once: the process's first sample
     * since its exec (first_sample). Set by cx_on_cpu_clock before the walk. */
    __u32 wake;
    /* The Python walk: the frames of one invocation of the evaluation
     * function are shown while py_pending, in place of its native frame
     * (py_eval_pc). */
    __u64 py_frame;     /* the next Python frame */
    __u64 py_eval_pc;   /* the native frame they stand for */
    __u64 py_last_code; /* the last code object fingerprinted, and its tag */
    __u32 py_state;     /* enum py_walk_state */
    __u32 py_pending;
    __u32 py_shown; /* frames shown for this invocation */
    __u32 py_eval_exact;
    __u16 py_last_tag;
    /* The sample's innermost Python frame: 0 not met yet, 1 its code seen
     * before, 2 new (py_seen): the record then wakes user space at once. */
    __u16 py_new;
    __u16 py_pad[2];
    struct cx_py_proc py; /* the process's entry (py_procs), copied at the start */
    __u8 py_buf[CX_PY_FRAME_READ];
    /* The V8 walk (v8.bpf.h): the process's entry (v8_procs), when v8_on. */
    __u32 v8_on;
    __u32 v8_pad;
    struct cx_v8_proc v8;
    __u8 v8_buf[CX_V8_OBJ_READ];
    /* The HotSpot walk (hotspot.bpf.h): hs_type is the kind of the frame
     * at hs_pc, found when it was shown (0: not a Java frame), and the
     * blob's fields its step needs. */
    __u32 hs;      /* the process's entry (hs_procs) is in hsp */
    __u32 hs_type; /* enum cx_hs_frame_type */
    __u32 hs_aux;  /* the frame's cx_frame.aux and tag (hotspot.h) */
    __u16 hs_tag;
    __u16 hs_pad[3];
    __u64 hs_pc, hs_addr, hs_code_begin;
    __s32 hs_frame_size, hs_complete;
    struct cx_hs_proc hsp;
    __u8 hs_buf[CX_HS_BLOCK_READ];
    /* Caller frames stepped by CFI and by frame pointer in this walk:
     * added to the stats once, when the walk ends (walk_body). */
    __u32 cfi_frames, fp_frames;
    /* The CFI row found last (cx_cfi_find): table row_table's row for
     * [row_lo, row_hi), packed; row_hi 0: none. */
    __u64 row;
    __u32 row_table, row_lo, row_hi, row_pad;
    /* The stack as the walk reads it (cx_uread): a copy of [win_lo,
     * win_lo + win_len), made in this walk, and the last words read. */
    __u64 win_lo, win_len;
    __u64 rd[2];
    __u64 win[CX_UWIN_WORDS + 1]; /* one more: a two-word read at the last word */
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct walk_state);
} wstate SEC(".maps");

#include "v8.bpf.h"

#include "cfi_find.bpf.h"

/* Finds the mapping of process tgid with a table that holds pc and puts it
 * in this CPU's walk state (m_*). Returns 1, or 0 when there is none. A
 * global function: inlined into the walk, the verifier followed every path
 * of the search for every frame and gave up. */
__noinline int cx_find_map(__u32 tgid, __u64 pc)
{
    const struct cx_proc_unwind *pu;
    const struct cx_unwind_map *m;
    struct walk_state *st;
    /* 64-bit indices: bounds checked on a 32-bit copy are lost to the zero
     * extension before the access. */
    __u64 lo = 0, hi, mid;
    __u32 key = tgid, zero = 0;
    int i;

    pu = bpf_map_lookup_elem(&proc_unwind, &key);
    st = bpf_map_lookup_elem(&wstate, &zero);
    if (!pu || !st)
        return 0;
    hi = pu->n;
    if (hi > CX_UNWIND_MAX_MAPS)
        hi = CX_UNWIND_MAX_MAPS;
    /* The last mapping whose start <= pc. */
    for (i = 0; i < CX_UNWIND_MAP_SEARCH_STEPS && hi - lo > 1; i++) {
        mid = lo + (hi - lo) / 2;
        if (mid >= CX_UNWIND_MAX_MAPS)
            return 0;
        if (pu->maps[mid].start <= pc)
            lo = mid;
        else
            hi = mid;
    }
    if (lo >= CX_UNWIND_MAX_MAPS || hi == 0)
        return 0;
    m = &pu->maps[lo];
    if (pc < m->start || pc >= m->end)
        return 0;
    st->m_start = m->start;
    st->m_end = m->end;
    st->m_bias = m->bias;
    st->m_table = m->table;
    st->m_blocks = m->blocks;
    return 1;
}

/* What bpf_find_vma's callback found for a pc. */
struct vma_found {
    __u64 start, end, bias;
    __u32 table, blocks;
    __u64 ino; /* its file's (0: anonymous), for the CX_REC_MAPS hint */
    __u32 dev;
};

/* The callback of bpf_find_vma: the mapping's range, and its table from
 * file_unwind (blocks 0 when it has none: anonymous memory, JIT code, a
 * binary without a table yet), so later frames in it need no lookup. */
static long cx_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
    struct vma_found *out = data;
    struct cx_file_key key = {};
    const struct cx_file_unwind *fu;
    struct file *f = BPF_CORE_READ(vma, vm_file);
    __u64 off = BPF_CORE_READ(vma, vm_pgoff) << 12;
    int i;

    out->start = BPF_CORE_READ(vma, vm_start);
    out->end = BPF_CORE_READ(vma, vm_end);
    out->blocks = 0;
    if (!f)
        return 0;
    key.ino = BPF_CORE_READ(f, f_inode, i_ino);
    key.dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
    out->ino = key.ino;
    out->dev = key.dev;
    fu = bpf_map_lookup_elem(&file_unwind, &key);
    if (!fu)
        return 0;
    for (i = 0; i < CX_FILE_MAX_SEGS; i++) {
        if (i >= fu->nseg)
            break;
        if (off >= fu->seg[i].page_off && off < fu->seg[i].end_off) {
            out->bias = out->start - off - fu->seg[i].delta;
            out->table = fu->table;
            out->blocks = fu->blocks;
            break;
        }
    }
    return 0;
}

static __always_inline void use_learned(struct walk_state *st, const struct cx_vma_learned_map *m)
{
    st->m_start = m->start;
    st->m_end = m->end;
    st->m_bias = m->bias;
    st->m_table = m->table;
    st->m_blocks = m->blocks;
}

static __always_inline __u64 current_mm(void)
{
    return (__u64)BPF_CORE_READ(bpf_get_current_task_btf(), mm);
}

/* Process tgid's entry in vma_learned, made (empty) when it has none. */
static __always_inline struct cx_vma_learned *learned_entry(__u32 tgid)
{
    struct cx_vma_learned *l = bpf_map_lookup_elem(&vma_learned, &tgid);
    __u32 zero = 0;

    if (l)
        return l;
    const struct cx_vma_learned *empty = bpf_map_lookup_elem(&vma_learned_empty, &zero);
    if (!empty)
        return NULL;
    bpf_map_update_elem(&vma_learned, &tgid, empty, BPF_NOEXIST);
    return bpf_map_lookup_elem(&vma_learned, &tgid);
}

/* Adds m to what is learned of process tgid (unwind.h). Returns whether
 * the process is young (in the CX_VMA_LEARNED_NS after its exec). */
static __always_inline int learn(__u32 tgid, const struct cx_vma_learned_map *m)
{
    struct cx_vma_learned *l = learned_entry(tgid);
    __u64 mm = current_mm();
    __u32 at;

    if (!l)
        return 0;
    if (l->mm != mm) { /* a new image since (exec): start over */
        l->mm = mm;
        l->n = 0;
        l->exec_ns = 0;
    }
    /* A ring: n counts every mapping learned, the latest MAX are kept. */
    at = l->n % CX_VMA_LEARNED_MAX;
    if (at < CX_VMA_LEARNED_MAX)
        l->m[at] = *m;
    l->n++;
    return l->exec_ns && m->at_ns - l->exec_ns < CX_VMA_LEARNED_NS;
}

/* The learned mapping of process tgid holding pc, newest first, or NULL. */
static __always_inline const struct cx_vma_learned_map *learned(__u32 tgid, __u64 pc, __u64 now)
{
    struct cx_vma_learned *l = bpf_map_lookup_elem(&vma_learned, &tgid);
    __u32 i, at, n;

    if (!l || l->mm != current_mm())
        return NULL;
    n = l->n < CX_VMA_LEARNED_MAX ? l->n : CX_VMA_LEARNED_MAX;
    for (i = 0; i < CX_VMA_LEARNED_MAX; i++) {
        if (i >= n)
            break;
        at = (l->n - 1 - i) % CX_VMA_LEARNED_MAX;
        if (at >= CX_VMA_LEARNED_MAX)
            break;
        if (pc >= l->m[at].start && pc < l->m[at].end && now - l->m[at].at_ns < CX_VMA_LEARNED_NS)
            return &l->m[at];
    }
    return NULL;
}

/* Finds pc's mapping among those learned for the process, else through the
 * kernel's own list (bpf_find_vma, once a sample: unwind.h), and puts it in
 * this CPU's walk state (m_*), with its table where file_unwind has one.
 * Returns 1 when pc is in a mapping, 0 when not known. Only in
 * cx_walk_user_vma, which is loaded on kernels with bpf_find_vma (5.17). */
__noinline int cx_find_vma(__u32 tgid, __u64 pc)
{
    struct vma_found found = {};
    const struct cx_vma_learned_map *hit;
    struct walk_state *st;
    __u64 now = bpf_ktime_get_ns();
    __u32 zero = 0;

    st = bpf_map_lookup_elem(&wstate, &zero);
    if (!st)
        return 0;
    hit = learned(tgid, pc, now);
    if (hit) {
        use_learned(st, hit);

        return 1;
    }
    if (st->vma_lookups)
        return 0;
    st->vma_lookups++;
    stat_inc(CX_STAT_VMA_LOOKUPS);
    if (bpf_find_vma(bpf_get_current_task_btf(), pc, cx_vma_cb, &found, 0) || !found.end)
        return 0;
    if (found.blocks)
        stat_inc(CX_STAT_VMA_TABLES);
    struct cx_vma_learned_map m = {found.start, found.end,    found.bias,
                                   found.table, found.blocks, now};
    use_learned(st, &m);
    /* A young process's library found here, not by cx_on_fault (its first
     * code's page came in with another fault): user space may still lack
     * it too, so it is told to read the maps (see cx_on_fault). */
    if (learn(tgid, &m) && found.blocks)
        proc_event(CX_REC_MAPS, found.start, found.ino, found.dev);
    return 1;
}

/* Reads `words` (1 or 2) 8-byte words of the walked thread's memory at addr
 * into this CPU's walk state (rd[]). The walk reads a word or two a frame,
 * moving up the stack: each read was a call of bpf_probe_read_user, whose
 * fixed cost is well above copying a few words (20-30 ns of a frame's
 * 100-130 went with it, docs/benchmarks.md). Here a read is served from
 * the copy of the stack made earlier in the same walk (the thread is
 * stopped meanwhile: the same bytes), else copies the window anew from
 * addr, up to CX_UWIN_WORDS words and the end of addr's 4 KiB page. A
 * read that is not 8-aligned or crosses that page's end is a plain one.
 * Returns 0, or bpf_probe_read_user's error (the copy failing means addr's
 * page cannot be read: the plain read would fail too). A global function:
 * the verifier checks it once, not at every read of every frame. */
__noinline int cx_uread(__u64 addr, __u32 words)
{
    struct walk_state *st;
    __u32 zero = 0;
    __u64 off, len, size = words > 1 ? 16 : 8, i;
    long err;

    st = bpf_map_lookup_elem(&wstate, &zero);
    if (!st)
        return -1;
    off = addr - st->win_lo;
    if (!(addr & 7) && addr >= st->win_lo && off < st->win_len && st->win_len - off >= size) {
        i = (off >> 3) & (CX_UWIN_WORDS - 1);
        st->rd[0] = st->win[i];
        st->rd[1] = st->win[i + 1];
        return 0;
    }
    len = 4096 - (addr & 4095);
    if (len > CX_UWIN_WORDS * 8)
        len = CX_UWIN_WORDS * 8;
    if ((addr & 7) || len < size)
        return bpf_probe_read_user(st->rd, size, (void *)addr);
    err = bpf_probe_read_user(st->win, len, (void *)addr);
    if (err) {
        st->win_len = 0;
        return err;
    }
    st->win_lo = addr;
    st->win_len = len;
    st->rd[0] = st->win[0];
    st->rd[1] = st->win[1];
    return 0;
}

/* What one step of the walk did. */
enum step_result {
    STEP_NEXT = 0,  /* the caller's frame is in st; its pc is to be appended */
    STEP_END = 1,   /* the stack is whole */
    STEP_TRUNC = 2, /* stopped early; *reason says why */
};

/* One frame up by frame pointer: [fp] holds the caller's fp, [fp+8] its
 * return address (x86_64's push rbp after the call; arm64's frame record
 * {x29, x30}). */
static __always_inline int step_fp(struct walk_state *st, __u32 *reason)
{
    __u64 pair[2];

    if (st->fp == 0)
        return STEP_END; /* _start cleared the frame pointer */
    if (cx_uread(st->fp, 2)) {
        *reason = CX_TRUNC_FAULT;
        return STEP_TRUNC;
    }
    pair[0] = st->rd[0];
    pair[1] = st->rd[1];
    if (pair[1] == 0)
        return STEP_END;
        /* The stack grows down: a caller's frame sits above its callee's. A
         * saved fp at or below this one was never a frame pointer; the return
         * address read beside it is still appended, and the walk ends after it
         * (st->fp = 0 makes the next step report the fault). */
#if CX_ARCH_LR
    /* arm64 keeps the frame record anywhere in the frame, most often at its
     * bottom: the caller's sp is not known here (step_cfi finds it again
     * from x29 where the caller's row says where its record is). */
    st->sp = 0;
#else
    st->sp = st->fp + 16;
#endif
    st->pc = cx_strip_pac(pair[1]);
    st->exact = 0;
    if (pair[0] != 0 && pair[0] <= st->fp) {
        st->fp = 1; /* unreadable: the next step stops with a fault */
        return STEP_NEXT;
    }
    st->fp = pair[0];
    return STEP_NEXT;
}

#if CX_ARCH_LR
/* sp where a frame-pointer step left it unknown (0), from x29: AAPCS64's
 * x29 points at the frame record, which is what the frame-pointer step
 * trusted too, and a row whose return address is in the record says where
 * the record is from sp or the CFA (= sp + 8 * cfa_off). 0 when the row
 * does not say (the walk then steps by frame pointer again). */
static __always_inline __u64 sp_from_fp(const struct cx_cfi_row *row, __u64 fp)
{
    __s64 fp_off = (__s64)row->fp_off * 8, cfa_off = (__s64)row->cfa_off * 8;

    if (CX_CFI_RA_TYPE(row->rule) != CX_RA_AFTER_FP ||
        (CX_CFI_CFA_TYPE(row->rule) != CX_CFA_SP && CX_CFI_CFA_TYPE(row->rule) != CX_CFA_GO_PUSHED))
        return 0;
    if (CX_CFI_FP_TYPE(row->rule) == CX_FP_AT_CFA)
        return fp - fp_off - cfa_off;
    if (CX_CFI_FP_TYPE(row->rule) == CX_FP_AT_SP)
        return fp - fp_off;
    return 0;
}

/* The rest of a CFI step on arm64, the CFA found: the caller's fp and
 * return address where the row's types say (unwind.h), the return address
 * from x30 only where the walk still has it (the first frame, or the one a
 * signal interrupted). */
static __always_inline int step_cfi_lr(struct walk_state *st, const struct cx_cfi_row *row,
                                       __u64 cfa, __u32 *reason)
{
    __u32 ra = CX_CFI_RA_TYPE(row->rule);
    __u64 slot = 0, pc = 0;
    __s64 off = (__s64)row->fp_off * 8;

    /* The caller's frame is above this one (or, in a leaf whose return
     * address is still in x30, at the same sp); anything else loops or is
     * junk. */
    if (cfa < st->sp || (cfa == st->sp && ra != CX_RA_DEFAULT)) {
        *reason = CX_TRUNC_CFI_BAD;
        return STEP_TRUNC;
    }
    switch (CX_CFI_FP_TYPE(row->rule)) {
    case CX_FP_AT_CFA:
        slot = cfa + off;
        break;
    case CX_FP_AT_FP:
        slot = st->fp + off;
        break;
    case CX_FP_AT_SP:
        slot = st->sp + off;
        break;
    default:
        break; /* unchanged */
    }
    switch (ra) {
    case CX_RA_AFTER_FP: /* the frame record {x29, x30}: one read */
        if (!slot || cx_uread(slot, 2)) {
            *reason = slot ? CX_TRUNC_FAULT : CX_TRUNC_CFI_RULE;
            return STEP_TRUNC;
        }
        st->fp = st->rd[0];
        pc = st->rd[1];
        break;
    case CX_RA_AT_CFA: /* x30 alone; the fp unchanged */
        if (cx_uread(cfa + off, 1)) {
            *reason = CX_TRUNC_FAULT;
            return STEP_TRUNC;
        }
        pc = st->rd[0];
        break;
    case CX_RA_DEFAULT:
        if (!st->exact) {
            *reason = CX_TRUNC_LR;
            return STEP_TRUNC;
        }
        pc = st->lr;
        if (slot) {
            if (cx_uread(slot, 1)) {
                *reason = CX_TRUNC_FAULT;
                return STEP_TRUNC;
            }
            st->fp = st->rd[0];
        }
        break;
    default:
        *reason = CX_TRUNC_CFI_RULE;
        return STEP_TRUNC;
    }
    st->pc = cx_strip_pac(pc);
    st->sp = cfa;
    st->exact = 0;
    if (CX_CFI_CFA_TYPE(row->rule) == CX_CFA_GO_PUSHED) {
        /* Go's pushCall made the interrupted code look like it called
         * asyncPreempt: sp 16 lower, its x30 stored there, x30 = its pc. */
        if (cx_uread(cfa, 1)) {
            *reason = CX_TRUNC_FAULT;
            return STEP_TRUNC;
        }
        st->lr = st->rd[0];
        st->sp = cfa + 16;
        st->exact = 1;
    }
    return st->pc ? STEP_NEXT : STEP_END;
}
#endif

/* One frame up by the CFI row for st->pc. */
static __always_inline int step_cfi(struct walk_state *st, __u64 packed, __u32 *reason)
{
    struct cx_cfi_row row;
    __u64 cfa, v;
    __s64 off;

    __builtin_memcpy(&row, &packed, sizeof(row));
    off = (__s64)row.cfa_off * 8;
#if CX_ARCH_LR
    if (!st->sp && st->fp && CX_CFI_CFA_TYPE(row.rule) != CX_CFA_FP &&
        CX_CFI_CFA_TYPE(row.rule) != CX_CFA_DEREF_FP && CX_CFI_CFA_TYPE(row.rule) != CX_CFA_END)
        st->sp = sp_from_fp(&row, st->fp);
    /* Else a rule that needs sp steps by frame pointer as well. */
    if (!st->sp && CX_CFI_CFA_TYPE(row.rule) != CX_CFA_FP &&
        CX_CFI_CFA_TYPE(row.rule) != CX_CFA_DEREF_FP && CX_CFI_CFA_TYPE(row.rule) != CX_CFA_END)
        return step_fp(st, reason);
#endif
    switch (CX_CFI_CFA_TYPE(row.rule)) {
#if CX_ARCH_LR
    case CX_CFA_GO_PUSHED:
#endif
    case CX_CFA_SP:
        cfa = st->sp + off;
        break;
    case CX_CFA_FP:
        cfa = st->fp + off;
        break;
    case CX_CFA_PLT:
        cfa = st->sp + 8 + ((st->pc & 15) >= (__u64)row.cfa_off ? 8 : 0);
        break;
    case CX_CFA_DEREF_SP:
    case CX_CFA_DEREF_FP:
        v = (CX_CFI_CFA_TYPE(row.rule) == CX_CFA_DEREF_SP ? st->sp : st->fp) + off;
        if (cx_uread(v, 1)) {
            *reason = CX_TRUNC_FAULT;
            return STEP_TRUNC;
        }
        cfa = st->rd[0];
        break;
    case CX_CFA_SIGNAL: {
        /* The interrupted code's registers, as the kernel saved them: fp
         * first, pc last (x86_64: rbp .. rip, 7 words; arm64: x29, x30,
         * sp, pc). */
        __u64 regs[(CX_SIGFRAME_PC - CX_SIGFRAME_FP) / 8 + 1];
        if (bpf_probe_read_user(regs, sizeof(regs), (void *)(st->sp + CX_SIGFRAME_FP))) {
            *reason = CX_TRUNC_FAULT;
            return STEP_TRUNC;
        }
        st->fp = regs[0];
        st->sp = regs[(CX_SIGFRAME_SP - CX_SIGFRAME_FP) / 8];
        st->pc = regs[(CX_SIGFRAME_PC - CX_SIGFRAME_FP) / 8];
#if CX_ARCH_LR
        st->lr = regs[(CX_SIGFRAME_LR - CX_SIGFRAME_FP) / 8];
#endif
        st->exact = 1;
        return st->pc ? STEP_NEXT : STEP_END;
    }
    case CX_CFA_END:
        return STEP_END;
    case CX_CFA_NONE: /* a gap between FDEs: V8's builtins in node's text */
        if (st->v8_on)
            cx_v8_probe();
        return step_fp(st, reason);
    default:
        *reason = CX_TRUNC_CFI_RULE;
        return STEP_TRUNC;
    }
#if CX_ARCH_LR
    return step_cfi_lr(st, &row, cfa, reason);
#else
    /* The caller's frame is above this one; anything else loops or is junk. */
    if (cfa <= st->sp) {
        *reason = CX_TRUNC_CFI_BAD;
        return STEP_TRUNC;
    }
    switch (CX_CFI_FP_TYPE(row.rule)) {
    case CX_FP_AT_CFA:
        if (row.fp_off == -2 && CX_RA_CFA_OFF == -8) {
            /* push rbp right after the call: fp and the return address side
             * by side, one read. */
            if (cx_uread(cfa - 16, 2)) {
                *reason = CX_TRUNC_FAULT;
                return STEP_TRUNC;
            }
            st->fp = st->rd[0];
            st->pc = st->rd[1];
            goto out;
        }
        if (cx_uread(cfa + (__s64)row.fp_off * 8, 1)) {
            *reason = CX_TRUNC_FAULT;
            return STEP_TRUNC;
        }
        st->fp = st->rd[0];
        break;
    case CX_FP_AT_FP:
        if (cx_uread(st->fp + (__s64)row.fp_off * 8, 1)) {
            *reason = CX_TRUNC_FAULT;
            return STEP_TRUNC;
        }
        st->fp = st->rd[0];
        break;
    default:
        break; /* unchanged */
    }
    if (cx_uread(cfa + CX_RA_CFA_OFF, 1)) {
        *reason = CX_TRUNC_FAULT;
        return STEP_TRUNC;
    }
    st->pc = st->rd[0];
out:
    st->sp = cfa;
    st->exact = 0;
    return st->pc ? STEP_NEXT : STEP_END;
#endif
}

/* Whether pc is in one of the process's CPython perf trampolines
 * (python.h), which keep no frame pointer and have no CFI. */
static __always_inline int in_py_tramp(const struct walk_state *st, __u64 pc)
{
    int i;

    if (st->py_state == PY_NONE)
        return 0;
    for (i = 0; i < CX_PY_MAX_TRAMP; i++) {
        if (i < st->py.n_tramp && pc >= st->py.tramp_start[i] && pc < st->py.tramp_end[i])
            return 1;
    }
    return 0;
}

/* One frame up where CFA = sp + cfa and the return address is just below
 * it; the frame pointer is left as it is. */
static __always_inline int step_sp(struct walk_state *st, __u64 cfa, __u32 *reason)
{
    __u64 v;

    if (cx_uread(st->sp + cfa + CX_RA_CFA_OFF, 1)) {
        *reason = CX_TRUNC_FAULT;
        return STEP_TRUNC;
    }
    v = st->rd[0];
    st->sp += cfa;
    st->pc = v;
    st->exact = 0;
    return v ? STEP_NEXT : STEP_END;
}

#include "hotspot.bpf.h"

/* One frame up, by CFI where the process has a table for the pc, else by
 * frame pointer. *cfi says which. vma: look the pc's mapping up with
 * bpf_find_vma where the process's entry has none (a constant: the two
 * walker programs, with and without). */
static __always_inline int step(struct walk_state *st, __u32 *reason, int *cfi, const int vma)
{
    /* A return address belongs to the call before it: the next instruction
     * may already be another function's (a call to a noreturn function). */
    __u64 pc = st->pc - (st->exact ? 0 : 1), packed;

    *cfi = 0;
    if (st->hs_type && st->hs_pc == st->pc)
        return hs_step(st, reason);
    if ((pc < st->m_start || pc >= st->m_end) && !cx_find_map(st->tgid, pc) &&
        !(vma && cx_find_vma(st->tgid, pc))) {
#if !CX_ARCH_LR /* arm64's trampolines keep a frame record (py_detect reads x86 code) */
        if (st->py.tramp_cfa && in_py_tramp(st, pc))
            return step_sp(st, st->py.tramp_cfa, reason);
#endif
        if (st->v8_on)
            cx_v8_probe();
        return step_fp(st, reason);
    }
    packed = cx_cfi_find(st->m_table, st->m_blocks, (__u32)(pc - st->m_bias));
    if (packed == CX_CFI_NOT_FOUND) {
        if (st->v8_on)
            cx_v8_probe();
        return step_fp(st, reason);
    }
    *cfi = 1;
    return step_cfi(st, packed, reason);
}

#endif

/* The HotSpot walk (hotspot.h): Java frames in a JVM's code cache, found
 * and stepped over without frame pointers or a perf map.
 *
 * Included by unwind.bpf.h before step(): it works on the same per-CPU
 * walk state. cx_hs_frame is global: the verifier checks it once, not once
 * per frame of the walk.
 */
#ifndef CODEXRAY_AGENT_BPF_HOTSPOT_BPF_H
#define CODEXRAY_AGENT_BPF_HOTSPOT_BPF_H

#include "hotspot.h"

/* JVMs described by user space. Few processes are JVMs: preallocated,
 * which every kernel takes in perf_event programs. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1024);
    __type(key, __u32);
    __type(value, struct cx_hs_proc);
} hs_procs SEC(".maps");

static __always_inline __u64 hs_u64(const __u8 *buf, __u32 off)
{
    return *(const __u64 *)(buf + (off & (CX_HS_BLOCK_READ - 8)));
}

static __always_inline __s16 hs_s16(const __u8 *buf, __u32 off)
{
    return *(const __s16 *)(buf + (off & (CX_HS_BLOCK_READ - 2)));
}

static __always_inline __s32 hs_s32(const __u8 *buf, __u32 off)
{
    return *(const __s32 *)(buf + (off & (CX_HS_BLOCK_READ - 4)));
}

/* The heap block holding pc in heap h, through its segment map: its start,
 * or 0 when pc is in no used block. */
static __always_inline __u64 hs_block(const struct cx_hs_heap *h, __u64 pc)
{
    __u64 idx = (pc - h->start) >> (h->log2_seg & 31);
    __u8 b = 0;
    int i;

    for (i = 0; i < CX_HS_SEGMAP_STEPS; i++) {
        if (bpf_probe_read_user(&b, 1, (void *)(h->segmap + idx)) || b == 0xff)
            return 0;
        if (b == 0)
            return h->start + (idx << (h->log2_seg & 31));
        if (b > idx)
            return 0;
        idx -= b;
    }
    return 0;
}

/* Whether the frame at pc (exact: not a return address) is Java code of
 * the process's JVM: when it is, fills this CPU's walk state's hs_* (the
 * frame's kind, its Method* or blob, what its step needs) and returns 1. */
__noinline int cx_hs_frame(__u64 pc, __u32 exact)
{
    struct walk_state *st;
    __u64 at, block = 0, name = 0;
    __u32 zero = 0;
    int i;

    st = bpf_map_lookup_elem(&wstate, &zero);
    if (!st)
        return 0;
    st->hs_type = 0;
    st->hs_tag = 0;
    at = pc - (exact ? 0 : 1);
    if (!st->hs || at < st->hsp.cc_start || at >= st->hsp.cc_end)
        return 0;
    for (i = 0; i < CX_HS_MAX_HEAPS; i++) {
        if (i >= st->hsp.n_heaps)
            break;
        if (at >= st->hsp.heap[i].start && at < st->hsp.heap[i].end) {
            block = hs_block(&st->hsp.heap[i], at);
            break;
        }
    }
    if (!block || bpf_probe_read_user(st->hs_buf, sizeof(st->hs_buf), (void *)block) ||
        !st->hs_buf[st->hsp.used & (CX_HS_BLOCK_READ - 1)])
        return 0;
    st->hs_pc = pc;
    st->hs_frame_size = hs_s32(st->hs_buf, st->hsp.frame_size);
    st->hs_complete = st->hsp.flags & CX_HS_COMPLETE16 ? hs_s16(st->hs_buf, st->hsp.frame_complete)
                                                       : hs_s32(st->hs_buf, st->hsp.frame_complete);
    st->hs_code_begin = st->hsp.flags & CX_HS_CODE_OFFSET
                            ? block + st->hsp.blob + (__s64)hs_s32(st->hs_buf, st->hsp.code_begin)
                            : hs_u64(st->hs_buf, st->hsp.code_begin);
    if (at >= st->hsp.interp_start && at < st->hsp.interp_end) {
        __u64 slots[(CX_HS_INTERP_METHOD_OFF - CX_HS_INTERP_BCP_OFF) / 8 + 1];
        if (bpf_probe_read_user(slots, sizeof(slots), (void *)(st->fp + CX_HS_INTERP_BCP_OFF)) ||
            !slots[(CX_HS_INTERP_METHOD_OFF - CX_HS_INTERP_BCP_OFF) / 8])
            return 0;
        st->hs_addr = slots[(CX_HS_INTERP_METHOD_OFF - CX_HS_INTERP_BCP_OFF) / 8];
        st->hs_type = CX_HS_INTERPRETED;
        st->hs_aux = CX_HS_INTERPRETED | ((__u32)slots[0] & CX_HS_PC_OFF_MAX) << 4;
        return 1;
    }
    /* "nmethod" (C1, C2) or "native nmethod" (a native method's wrapper):
     * a compiled method with its Method*; any other name is a stub's. */
    bpf_probe_read_user(&name, sizeof(name), (void *)hs_u64(st->hs_buf, st->hsp.name));
    if (name == 0x00646f6874656d6eull /* "nmethod\0" */ ||
        name == 0x6e20657669746e61ull /* "native n" */) {
        __u64 off = pc - st->hs_code_begin;
        st->hs_addr = block + st->hsp.blob;
        st->hs_type = CX_HS_COMPILED;
        st->hs_aux = CX_HS_COMPILED | (off <= CX_HS_PC_OFF_MAX ? (__u32)off << 4 : 0);
        st->hs_tag = (__u16)(hs_u64(st->hs_buf, st->hsp.method) >> 3);
    } else {
        st->hs_addr = block + st->hsp.blob;
        st->hs_type = CX_HS_STUB;
        st->hs_aux = CX_HS_STUB;
    }
    return 1;
}

/* Whether a pc before the frame's completion (c[8] the byte at it, c[0..7]
 * the 8 before) is past the prologue's `sub rsp, N` (48 83 ec ib, 48 81 ec
 * id), so that the frame's size places the return address. The nmethod
 * entry barrier (cmp dword [r15 + d8], id: 41 81 7f; then C2's jne to its
 * stub, C1's je over a call) comes after it, and HotSpot 21 to 27 mark the
 * frame complete only after the barrier (MacroAssembler::verified_entry;
 * Debian's JDK 17 with G1 emits none): a leaf sampled there had its return
 * address taken from sp. Measured on a recursive fib: 7 to 9 % of its
 * samples cut short on this machine (2026-12-07), none on the machine
 * before, whose samples landed elsewhere in the prologue. No `sub` at all
 * (a frame of the return address and rbp alone) is the same rule: fs = 2. */
static __always_inline int hs_frame_made(const __u8 *c)
{
    return (c[4] == 0x48 && c[5] == 0x83 && c[6] == 0xec) ||
           (c[1] == 0x48 && c[2] == 0x81 && c[3] == 0xec) ||
           (c[8] == 0x41 && c[9] == 0x81 && (c[10] == 0x7f || c[10] == 0xbf)) ||
           (c[0] == 0x41 && c[1] == 0x81 && c[2] == 0x7f);
}

/* One frame up from the Java frame cx_hs_frame found at st->pc. */
static __always_inline int hs_step(struct walk_state *st, __u32 *reason)
{
    __u64 w[5], cfa;
    __s32 fs = st->hs_frame_size;

    if (st->hs_type == CX_HS_INTERPRETED) {
        st->hs_type = 0;
        /* method, last sp, sender sp, saved rbp, return address */
        if (bpf_probe_read_user(w, sizeof(w), (void *)(st->fp + CX_HS_INTERP_METHOD_OFF))) {
            *reason = CX_TRUNC_FAULT;
            return STEP_TRUNC;
        }
        /* Not the saved rbp: a compiled caller uses rbp as it likes. */
        if (w[2] <= st->sp) {
            *reason = CX_TRUNC_CFI_BAD;
            return STEP_TRUNC;
        }
        st->sp = w[2];
        st->fp = w[3];
        st->pc = w[4];
        st->exact = 0;
        return st->pc ? STEP_NEXT : STEP_END;
    }
    st->hs_type = 0;
    if (fs <= 0 || fs > (1 << 16))
        return step_fp(st, reason);
    if (st->exact) {
        /* The leaf may be where its frame is not made yet or no more: the
         * prologue (before the frame is complete; just after `push rbp`
         * the return address is a word higher) and the epilogue, which
         * pops the frame (`add rsp, N`), then rbp (`pop rbp`), then polls
         * for a safepoint (`cmp rsp, [r15 + d8]`; `ja`) and returns. */
        __u8 c[16] = {}; /* c[8] is the byte at the pc */
        __u64 skip = 0, w2[2];
        int prologue =
            st->pc < st->hs_code_begin + (__u64)(st->hs_complete > 0 ? st->hs_complete : 0);
        if (bpf_probe_read_user(c, sizeof(c), (void *)(st->pc - 8)) == 0) {
            /* cmp rsp, [r15 + d8] is 49 3b 67 d8, with a d32 49 3b a7 d32 */
            int poll = c[8] == 0x49 && c[9] == 0x3b && (c[10] == 0x67 || c[10] == 0xa7);
            int after_poll = c[8] == 0x0f && c[9] == 0x87 &&
                             ((c[4] == 0x49 && c[5] == 0x3b && c[6] == 0x67) ||
                              (c[1] == 0x49 && c[2] == 0x3b && c[3] == 0xa7));
            if (c[8] == 0xc3 || poll || after_poll)
                skip = 8; /* popped: the return address at sp */
            else if (c[8] == 0x5d)
                skip = 16; /* pop rbp next: rbp at sp, then the return address */
            else if (prologue && !hs_frame_made(c))
                skip = c[7] == 0x55 ? 17 : 8; /* 17: after push rbp, rbp unchanged */
        } else if (prologue) {
            skip = 8;
        }
        if (skip) {
            if (bpf_probe_read_user(w2, sizeof(w2), (void *)st->sp)) {
                *reason = CX_TRUNC_FAULT;
                return STEP_TRUNC;
            }
            if (skip == 16)
                st->fp = w2[0];
            st->pc = skip == 8 ? w2[0] : w2[1];
            st->sp += skip == 8 ? 8 : 16;
            st->exact = 0;
            return st->pc ? STEP_NEXT : STEP_END;
        }
    }
    cfa = st->sp + (__u64)fs * 8;
    if (bpf_probe_read_user(w, 16, (void *)(cfa - 16))) {
        *reason = CX_TRUNC_FAULT;
        return STEP_TRUNC;
    }
    st->fp = w[0];
    st->pc = w[1];
    st->sp = cfa;
    st->exact = 0;
    return st->pc ? STEP_NEXT : STEP_END;
}

#endif

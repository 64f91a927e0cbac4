/* V8's JavaScript frames (v8.h): a frame the walk leaves by frame pointer
 * in a V8 process is checked for a JSFunction, and shown as the function's
 * SharedFunctionInfo in place of its native pc.
 *
 * Included by unwind.bpf.h, whose step() calls cx_v8_probe() before each
 * frame-pointer step: V8's code has no CFI, so its frames are exactly
 * those, and frames stepped by CFI (C and C++) cost nothing here. The
 * probe is a global function: the verifier checks it once.
 */
#ifndef CODEXRAY_AGENT_BPF_V8_BPF_H
#define CODEXRAY_AGENT_BPF_V8_BPF_H

#include "v8.h"

/* Processes running V8 whose constants user space read. Small entries,
 * few processes: allocated on insert. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, 16384);
    __type(key, __u32);
    __type(value, struct cx_v8_proc);
} v8_procs SEC(".maps");

/* V8 tags a pointer to a heap object with 01 in its low two bits; a Smi
 * has 0 in its low bit (v8dbg_HeapObjectTag, _HeapObjectTagMask,
 * _SmiTagMask: user space checks the binary says so). */
static __always_inline int v8_is_heap(__u64 v)
{
    return (v & 3) == 1;
}

static __always_inline __u64 v8_field(const __u8 *obj, __u32 off)
{
    return *(const __u64 *)(obj + (off & (CX_V8_OBJ_READ - 8)));
}

/* The instance type of the heap object whose first bytes are obj, or 0. */
static __always_inline __u16 v8_type(const struct walk_state *st, const __u8 *obj)
{
    __u64 map = v8_field(obj, 0);
    __u16 type = 0;

    if (!v8_is_heap(map) ||
        bpf_probe_read_user(&type, sizeof(type), (const void *)(map - 1 + st->v8.map_type)))
        return 0;
    return type;
}

/* The frame the walk is about to leave by frame pointer (st->pc, st->fp,
 * the last frame of the record): when it is a JavaScript frame, it becomes
 * a CX_FRAME_V8 frame. Returns 1 then, else 0 (the native frame stays). */
__noinline int cx_v8_probe(void)
{
    __u32 zero = 0;
    struct walk_state *st = bpf_map_lookup_elem(&wstate, &zero);
    struct cx_sample *s = bpf_map_lookup_elem(&scratch, &zero);
    __u64 slots[2], fn, sfi, idx;
    __u16 type;

    if (!st || !s || !st->v8_on || st->n <= st->nk || st->fp < 64)
        return 0;
    /* The function's slot and the context's, side by side (user space
     * checks fp_context == fp_function + 8). */
    if (bpf_probe_read_user(slots, sizeof(slots), (const void *)(st->fp + st->v8.fp_function)))
        return 0;
    fn = slots[0];
    /* A Smi in the context slot: a typed frame's marker, not JavaScript. */
    if (!(slots[1] & 1) || !v8_is_heap(fn))
        return 0;
    if (bpf_probe_read_user(st->v8_buf, CX_V8_OBJ_READ, (const void *)(fn - 1)))
        return 0;
    type = v8_type(st, st->v8_buf);
    if (type < st->v8.type_fn_first || type > st->v8.type_fn_last)
        return 0;
    sfi = v8_field(st->v8_buf, st->v8.fn_shared);
    if (!v8_is_heap(sfi) ||
        bpf_probe_read_user(st->v8_buf, CX_V8_OBJ_READ, (const void *)(sfi - 1)) ||
        v8_type(st, st->v8_buf) != st->v8.type_sfi)
        return 0;
    idx = st->n - 1;
    asm volatile("" : "+r"(idx));
    if (idx >= CX_MAX_FRAMES)
        return 0;
    s->frames[idx].aux = 0;
    s->frames[idx].addr = sfi;
    s->frames[idx].kind = CX_FRAME_V8;
    s->frames[idx].tag = cx_v8_fingerprint(v8_field(st->v8_buf, st->v8.sfi_name),
                                           v8_field(st->v8_buf, st->v8.sfi_script));
    return 1;
}

#endif

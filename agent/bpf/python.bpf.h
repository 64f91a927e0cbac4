/* The Python walk (python.h): the frames one invocation of CPython's
 * evaluation function is running, shown in place of its native frame.
 *
 * Included by sampler.bpf.c after unwind.bpf.h: it works on the same
 * per-CPU walk state, so a stack of native and Python frames is one walk,
 * split over the same tail calls. Both functions here are global: the
 * verifier checks each once, not once per frame of the walk.
 */
#ifndef CODEXRAY_AGENT_BPF_PYTHON_BPF_H
#define CODEXRAY_AGENT_BPF_PYTHON_BPF_H

#include "python.h"

/* Processes running CPython, kept by user space. Entries are ~200 bytes
 * and most processes never get one: allocated on insert. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, 16384);
    __type(key, __u32);
    __type(value, struct cx_py_proc);
} py_procs SEC(".maps");

/* A thread's PyThreadState, found once and checked at each use (its id
 * field must still be the thread's): thread id -> address. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 16384);
    __type(key, __u32);
    __type(value, __u64);
} py_threads SEC(".maps");

/* Code objects recently shown as a sample's innermost Python frame, per
 * process. One not in it wakes user space at once (emit), so that it reads
 * the code object while the process still runs: a function first sampled
 * in a short process's last 100 ms (one ring-buffer drain) was otherwise
 * read after the process had exited, and unnamed. Steady state costs one
 * lookup a Python sample. */
struct py_seen_key {
    __u32 tgid;
    __u32 pad;
    __u64 code;
};

struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 16384);
    __type(key, struct py_seen_key);
    __type(value, __u8);
} py_seen SEC(".maps");

static __always_inline void py_note_seen(struct walk_state *st, __u64 code)
{
    struct py_seen_key k = {st->tgid, 0, code};
    __u8 one = 1;

    if (st->py_new)
        return;
    if (bpf_map_lookup_elem(&py_seen, &k)) {
        st->py_new = 1;
        return;
    }
    bpf_map_update_elem(&py_seen, &k, &one, BPF_ANY);
    st->py_new = 2;
}

static __always_inline __u64 py_u64(const __u8 *buf, __u32 off)
{
    /* Offsets are 8-aligned in the window (user space sees to it). */
    return *(const __u64 *)(buf + (off & (CX_PY_FRAME_READ - 8)));
}

static __always_inline __u32 py_u32(const __u8 *buf, __u32 off)
{
    return *(const __u32 *)(buf + (off & (CX_PY_FRAME_READ - 4)));
}

static __always_inline __u8 py_u8(const __u8 *buf, __u32 off)
{
    return buf[off & (CX_PY_FRAME_READ - 1)];
}

static __always_inline int py_read_ptr(__u64 *out, __u64 addr)
{
    return bpf_probe_read_user(out, sizeof(*out), (const void *)addr);
}

/* The PyThreadState of thread tid, or 0. A cached one is checked by its id
 * field; else the interpreters' thread lists are walked, newest first, for
 * at most CX_PY_MAX_THREADS steps. */
__noinline __u64 cx_py_tstate(__u32 tid)
{
    __u32 zero = 0, key = tid;
    struct walk_state *st = bpf_map_lookup_elem(&wstate, &zero);
    __u64 *cached, want, v, interp = 0, ts = 0, idoff;
    int i;

    if (!st)
        return 0;
    if (st->py.off.ts_native_tid != CX_PY_NO_FIELD) {
        /* gettid() as the process sees it: in a container, its own pid
         * namespace's number. */
        idoff = st->py.off.ts_native_tid;
        want = cx_task_ns_tid((struct task_struct *)bpf_get_current_task());
    } else {
        idoff = st->py.off.ts_thread_id;
        want = cx_task_tls_base((struct task_struct *)bpf_get_current_task());
    }
    cached = bpf_map_lookup_elem(&py_threads, &key);
    if (cached && *cached && !py_read_ptr(&v, *cached + idoff) && v == want)
        return *cached;
    stat_inc(CX_STAT_PY_TSTATE_WALKS);
    if (py_read_ptr(&interp, st->py.runtime + st->py.off.rt_interp_head) || !interp ||
        py_read_ptr(&ts, interp + st->py.off.interp_threads_head))
        return 0;
    for (i = 0; i < CX_PY_MAX_THREADS; i++) {
        if (!ts) {
            /* The next interpreter's threads. */
            if (py_read_ptr(&interp, interp + st->py.off.interp_next) || !interp ||
                py_read_ptr(&ts, interp + st->py.off.interp_threads_head))
                return 0;
            continue;
        }
        if (py_read_ptr(&v, ts + idoff))
            return 0;
        if (v == want) {
            bpf_map_update_elem(&py_threads, &key, &ts, BPF_ANY);
            return ts;
        }
        if (py_read_ptr(&ts, ts + st->py.off.ts_next))
            return 0;
    }
    return 0;
}

/* Sets the tag of frame `at` (put_frame leaves it 0). */
static __always_inline void put_tag(struct cx_sample *s, __u32 at, __u16 tag)
{
    __u64 idx = at;

    asm volatile("" : "+r"(idx));
    if (idx < CX_MAX_FRAMES)
        s->frames[idx].tag = tag;
}

/* The native frame the Python frames of this invocation stand for, when
 * there are none to show. */
static __always_inline void py_show_native(struct cx_sample *s, struct walk_state *st)
{
    put_frame(s, st->n, st->py_eval_pc, CX_FRAME_NATIVE, st->py_eval_exact ? CX_AUX_EXACT_PC : 0);
    st->n++;
}

/* Gives up on the Python frames of this sample: a marker saying why, then
 * the native frame; later invocations show their native frames. */
static __always_inline void py_fail(struct cx_sample *s, struct walk_state *st, __u32 why)
{
    stat_inc(CX_STAT_PY_ERRORS);
    put_frame(s, st->n, 0, CX_FRAME_PYTHON_ERR, why);
    st->n++;
    py_show_native(s, st);
    st->py_state = PY_FAILED;
    st->py_pending = 0;
}

/* The fingerprint of the code object at addr (python.h), or 0 when it
 * cannot be read. The last one is kept: recursion shows one code object
 * many times. */
static __always_inline __u16 py_code_tag(struct walk_state *st, __u64 code)
{
    const struct cx_py_offsets *o = &st->py.off;
    __u32 len = o->co_len;

    if (code == st->py_last_code)
        return st->py_last_tag;
    if (len > CX_PY_CODE_READ)
        len = CX_PY_CODE_READ;
    if (bpf_probe_read_user(st->py_buf, len, (const void *)(code + o->co_base)))
        return 0;
    st->py_last_code = code;
    st->py_last_tag =
        cx_py_fingerprint(py_u32(st->py_buf, o->co_firstlineno), py_u64(st->py_buf, o->co_filename),
                          py_u64(st->py_buf, o->co_name));
    return st->py_last_tag;
}

/* One step of the Python frames of the invocation the walk reached: shows
 * one frame (or the native frame, or a marker) and says in st->py_pending
 * whether the invocation has more. Returns 0. */
__noinline int cx_py_step(__u32 tid)
{
    __u32 zero = 0, len, off = 0xffffffff;
    struct walk_state *st = bpf_map_lookup_elem(&wstate, &zero);
    struct cx_sample *s = bpf_map_lookup_elem(&scratch, &zero);
    const struct cx_py_offsets *o;
    __u64 v, prev, code, instr;

    if (!st || !s)
        return 0;
    o = &st->py.off;
    if (st->py_state == PY_UNRESOLVED) {
        __u64 ts = cx_py_tstate(tid);
        if (!ts) {
            py_fail(s, st, CX_PY_ERR_NO_THREAD);
            return 0;
        }
        if (py_read_ptr(&v, ts + o->ts_frame) ||
            (o->cframe_current != CX_PY_NO_FIELD && v && py_read_ptr(&v, v + o->cframe_current))) {
            py_fail(s, st, CX_PY_ERR_READ);
            return 0;
        }
        st->py_frame = v;
        st->py_state = PY_READY;
    }
    if (st->py_state != PY_READY || !st->py_frame) {
        /* Given up earlier, or the thread runs no Python frame (the
         * evaluation function just entered or about to return). */
        py_show_native(s, st);
        st->py_pending = 0;
        return 0;
    }
    len = o->fr_len;
    if (len > CX_PY_FRAME_READ)
        len = CX_PY_FRAME_READ;
    if (bpf_probe_read_user(st->py_buf, len, (const void *)(st->py_frame + o->fr_base))) {
        py_fail(s, st, CX_PY_ERR_READ);
        return 0;
    }
    prev = py_u64(st->py_buf, o->fr_previous);
    code = py_u64(st->py_buf, o->fr_code) & ~7ull; /* 3.14 tags the low bits */
    if (o->model == CX_PY_CSTACK && py_u8(st->py_buf, o->fr_owner) == CX_PY_OWNED_BY_CSTACK) {
        /* The entry frame: this invocation's frames are all shown. */
        st->py_frame = prev;
        st->py_pending = 0;
        if (!st->py_shown)
            py_show_native(s, st);
        return 0;
    }
    if (o->model == CX_PY_ONE_PER_EVAL) {
        off = py_u32(st->py_buf, o->fr_instr);
    } else {
        instr = py_u64(st->py_buf, o->fr_instr);
        if (instr >= code + o->co_code_adaptive)
            off = (__u32)(instr - code - o->co_code_adaptive);
    }
    if (o->model == CX_PY_ONE_PER_EVAL ||
        (o->model == CX_PY_IS_ENTRY && py_u8(st->py_buf, o->fr_is_entry)))
        st->py_pending = 0;
    st->py_frame = prev;
    if (!code) {
        if (!st->py_pending && !st->py_shown)
            py_show_native(s, st);
        return 0;
    }
    /* After the fields are taken: the code object's read reuses the buffer. */
    __u16 tag = py_code_tag(st, code);
    put_frame(s, st->n, code, CX_FRAME_PYTHON, off);
    put_tag(s, st->n, tag);
    py_note_seen(st, code);
    st->n++;
    st->py_shown++;
    stat_inc(CX_STAT_PY_FRAMES);
    return 0;
}

/* Whether pc (a return address already moved into its call) is in the
 * evaluation function. */
static __always_inline int py_in_eval(const struct walk_state *st, __u64 pc)
{
    int i;

    for (i = 0; i < CX_PY_MAX_EVAL; i++) {
        if (i < st->py.n_eval && pc >= st->py.eval_start[i] && pc < st->py.eval_end[i])
            return 1;
    }
    return 0;
}

/* Called for each native frame the walk finds: when it is an invocation of
 * the evaluation function, its Python frames are to be shown instead
 * (cx_py_step, from the next round of the walk's loop). Returns 1 then. */
static __always_inline int py_enter(struct walk_state *st, __u64 pc, __u32 exact)
{
    if (st->py_state == PY_NONE || !py_in_eval(st, pc - (exact ? 0 : 1)))
        return 0;
    st->py_pending = 1;
    st->py_shown = 0;
    st->py_eval_pc = pc;
    st->py_eval_exact = exact;
    return 1;
}

#endif

/* What the BPF side needs to walk CPython's frames, shared by
 * sampler.bpf.c and user space (agent/runtimes/python/): plain fixed-size
 * types and #defines only.
 *
 * User space finds a process's interpreter (the binary exporting
 * _PyRuntime), where its frame-evaluation function lies, and the offsets of
 * the fields the walk reads for that version, and puts them in the
 * "py_procs" hash map under the process's tgid. When the native walk
 * reaches a pc inside the evaluation function, BPF shows the Python frames
 * that invocation of it is running instead of the native frame:
 *
 *   CX_PY_ONE_PER_EVAL (up to 3.10): one frame, the thread's current one.
 *   CX_PY_IS_ENTRY (3.11): frames up to and with the one marked is_entry.
 *   CX_PY_CSTACK (3.12 on): frames up to the entry frame the evaluation
 *       function keeps on the C stack (owner FRAME_OWNED_BY_CSTACK), which
 *       is not shown.
 *
 * The thread's current frame comes from its PyThreadState, found by walking
 * the interpreters' thread lists for the one whose native_thread_id is the
 * sampled thread's id (3.11 on; before, whose thread_id, pthread_self(), is
 * the thread's fs base), and cached per thread ("py_threads").
 */
#ifndef CODEXRAY_AGENT_BPF_PYTHON_H
#define CODEXRAY_AGENT_BPF_PYTHON_H

enum cx_py_model {
    CX_PY_ONE_PER_EVAL = 1,
    CX_PY_IS_ENTRY = 2,
    CX_PY_CSTACK = 3,
};

/* An offset the version does not have. */
#define CX_PY_NO_FIELD 0xffff
/* _PyInterpreterFrame.owner of the evaluation function's entry frame:
 * FRAME_OWNED_BY_CSTACK in 3.12 and 3.13; from 3.14, which inserted
 * FRAME_OWNED_BY_INTERPRETER before it, the entry frame is that one, the
 * same 3 (Debian's 3.14.10 and 3.15.2 store 3 there on entry). */
#define CX_PY_OWNED_BY_CSTACK 3

/* Address ranges of the evaluation function: the function and its split
 * .cold parts. */
#define CX_PY_MAX_EVAL 4
/* A frame is read in one go: [fr_base, fr_base + fr_len), fr_len at most
 * this; so is a code object's fingerprint: [co_base, co_base + co_len). */
#define CX_PY_FRAME_READ 128
#define CX_PY_CODE_READ 96
/* Arenas of perf trampolines (-X perf, PYTHONPERFSUPPORT) a process has. */
#define CX_PY_MAX_TRAMP 4
/* Threads (and interpreters) looked at when a thread's state is not cached. */
#define CX_PY_MAX_THREADS 256

/* Byte offsets, CX_PY_NO_FIELD where the version has no such field. The
 * frame and code fields are relative to their read window. */
struct cx_py_offsets {
    __u16 rt_interp_head;      /* _PyRuntimeState.interpreters.head */
    __u16 interp_next;         /* PyInterpreterState.next */
    __u16 interp_threads_head; /* PyInterpreterState.threads.head (tstate_head) */
    __u16 ts_next;             /* PyThreadState.next */
    __u16 ts_native_tid;       /* PyThreadState.native_thread_id (3.11 on) */
    __u16 ts_thread_id;        /* PyThreadState.thread_id: pthread_self() */
    __u16 ts_frame;            /* PyThreadState.frame, .cframe or .current_frame */
    __u16 cframe_current;      /* _PyCFrame.current_frame (3.11, 3.12) */
    __u16 fr_base, fr_len;
    __u16 fr_previous; /* f_back, previous */
    __u16 fr_code;     /* f_code, f_executable */
    __u16 fr_instr;    /* f_lasti (an int), prev_instr or instr_ptr (pointers) */
    __u16 fr_owner;    /* owner (3.12 on: a char) */
    __u16 fr_is_entry; /* is_entry (3.11: a bool) */
    __u16 co_base, co_len;
    __u16 co_firstlineno;   /* an int */
    __u16 co_filename;      /* a pointer */
    __u16 co_name;          /* a pointer */
    __u16 co_code_adaptive; /* absolute: the bytecode inside the code object (3.11 on) */
    __u8 model;             /* enum cx_py_model */
    __u8 pad[5];
};

/* The "py_procs" hash map's value: key __u32 tgid. */
struct cx_py_proc {
    __u64 runtime; /* the address of _PyRuntime in the process */
    __u64 eval_start[CX_PY_MAX_EVAL], eval_end[CX_PY_MAX_EVAL];
    __u32 n_eval;
    __u32 version; /* (major << 8) | minor, for user space's reading */
    /* With -X perf, 3.12 on call each Python function through a copy of a
     * small trampoline in anonymous memory (for perf to name it): no frame
     * pointer, no CFI, and a known stack size. A pc in one of these ranges
     * steps by tramp_cfa (CFA = sp + tramp_cfa, the return address below
     * it); 0: none, or a trampoline that keeps a frame pointer. */
    __u64 tramp_start[CX_PY_MAX_TRAMP], tramp_end[CX_PY_MAX_TRAMP];
    __u32 n_tramp;
    __u32 tramp_cfa;
    struct cx_py_offsets off;
};

/* cx_frame.aux of a CX_FRAME_PYTHON_ERR frame: why the Python frames of an
 * invocation of the evaluation function could not be shown (its native
 * frame follows). */
enum cx_py_err {
    CX_PY_ERR_NO_THREAD = 1, /* no thread state for the thread */
    CX_PY_ERR_READ = 2,      /* a thread state or frame could not be read */
};

/* The 16-bit fingerprint of a code object, in cx_frame.tag: its first line
 * and the addresses of its file and function names, folded. User space
 * computes the same from what it reads, to tell a code object from another
 * one later allocated at the same address. Never 0: a tag of 0 says the BPF
 * side could not read the code object. */
static inline __u16 cx_py_fingerprint(__u32 firstlineno, __u64 filename, __u64 name)
{
    __u64 h = (filename ^ (name << 7) ^ ((__u64)firstlineno << 32)) * 0x9E3779B97F4A7C15ull;
    __u16 t = (__u16)(h >> 48);

    return t ? t : 1;
}

#endif

/* Python 3.14.10's and 3.15.2's layouts as CPython's own headers of those
 * releases give them, for test_py_layout_hostile.c (the parser on their
 * _Py_DebugOffsets words) and test_py_detect.c (the binaries themselves,
 * where Debian unstable's root is). Shared so that both are held to the
 * same numbers, and these numbers are the headers', not the binaries'.
 *
 * Where they come from: the headers Debian's libpython3.14-dev 3.14.10-1
 * and libpython3.15-dev 3.15.2-1 install (the releases' Include/, whose
 * patchlevel.h says "3.14.10" and "3.15.2"; the same releases as the
 * python3.14 and python3.15 the agent is tested on): the output of
 * tools/python_layout.sh --one on each (tools/python_layout/layout.c, the
 * offsetof()s behind the 3.7-3.12 table), from
 *   Include/cpython/pystate.h                PyThreadState: next, current_frame,
 *                                            thread_id (unsigned long), then
 *                                            native_thread_id, 8 bytes on
 *   Include/internal/pycore_interp_structs.h PyInterpreterState.next, threads.head
 *   Include/internal/pycore_runtime_structs.h _PyRuntimeState.interpreters.head
 *   Include/internal/pycore_interpframe_structs.h _PyInterpreterFrame:
 *                                            f_executable 0, previous 8,
 *                                            instr_ptr 56, owner 74
 *   Include/cpython/code.h                   PyCodeObject (co_code_adaptive 208)
 *   Include/cpython/unicodeobject.h, bytesobject.h
 * and the words Include/internal/pycore_debug_offsets.h puts them at:
 * 3.14.10's _Py_DebugOffsets has thread_state {size, prev, next, interp,
 * current_frame, thread_id, native_thread_id, datastack_chunk, status} at
 * words 22-30; 3.15.2's {size, prev, next, interp, current_frame,
 * base_frame, last_profiled_frame, last_profiled_frame_seq, thread_id,
 * native_thread_id, datastack_chunk, status, holds_gil, gil_requested,
 * current_exception, exc_state} at 22-37, so thread_id is word 30 and
 * native_thread_id word 31. _Py_DebugOffsets_INIT compiled against these
 * headers with the binaries' own -D_Py_TIER2=3 -D_Py_JIT gives, word for
 * word, what the binaries hold (95 and 111 words). Debian's source
 * package, not a git tag: CPython's repository was too big to fetch here. */
#ifndef CODEXRAY_TESTS_PY_LAYOUT_HEADERS_H
#define CODEXRAY_TESTS_PY_LAYOUT_HEADERS_H

#include "../../agent/runtimes/python/py_layout.h"

static const struct py_layout py_layout_31410_headers = {
    .version = 0x030e,
    .runtime_interpreters_head = 808,
    .interp_next = 7272,
    .interp_threads_head = 7344,
    .tstate_next = 8,
    .tstate_native_thread_id = 160,
    .tstate_thread_id = 152,
    .tstate_frame = 72,
    .cframe_current_frame = -1,
    .frame_previous = 8,
    .frame_code = 0,
    .frame_instr = 56,
    .frame_owner = 74,
    .frame_is_entry = -1,
    .code_argcount = 52,
    .code_firstlineno = 68,
    .code_filename = 112,
    .code_name = 120,
    .code_qualname = 128,
    .code_code_adaptive = 208,
    .code_linetable = 136,
    .object_type = 8,
    .unicode_state = 32,
    .unicode_length = 16,
    .unicode_ascii_size = 40,
    .unicode_compact_size = 56,
    .bytes_size = 16,
    .bytes_sval = 32,
};

/* 3.15.2: 3.14.10's but for the interpreter list's head (the runtime state
 * grew before it), the interpreter state's fields (it shrank before them),
 * and the thread ids, 24 bytes on: base_frame, last_profiled_frame and
 * last_profiled_frame_seq came in after current_frame. */
static const struct py_layout py_layout_3152_headers = {
    .version = 0x030f,
    .runtime_interpreters_head = 936,
    .interp_next = 7264,
    .interp_threads_head = 7336,
    .tstate_next = 8,
    .tstate_native_thread_id = 184,
    .tstate_thread_id = 176,
    .tstate_frame = 72,
    .cframe_current_frame = -1,
    .frame_previous = 8,
    .frame_code = 0,
    .frame_instr = 56,
    .frame_owner = 74,
    .frame_is_entry = -1,
    .code_argcount = 52,
    .code_firstlineno = 68,
    .code_filename = 112,
    .code_name = 120,
    .code_qualname = 128,
    .code_code_adaptive = 208,
    .code_linetable = 136,
    .object_type = 8,
    .unicode_state = 32,
    .unicode_length = 16,
    .unicode_ascii_size = 40,
    .unicode_compact_size = 56,
    .bytes_size = 16,
    .bytes_sval = 32,
};

#endif

/* Whether a binary is a CPython interpreter, and what the Python walk needs
 * of it: the version and its layout (py_layout.h), where _PyRuntime is, and
 * the address ranges of the frame-evaluation function.
 *
 * A binary is CPython when its dynamic symbols export _PyRuntime (3.7 on;
 * older ones export _PyThreadState_Current and are named as too old):
 * python3.X itself when it is linked statically (Debian's), libpython3.X.so
 * otherwise, and any program embedding either (uwsgi, gunicorn's python). The
 * version comes from Py_Version (3.11 on), the _Py_DebugOffsets in
 * _PyRuntime's initial value (3.13 on), else the file's or its SONAME's
 * name (libpython3.9.so.1.0, python3.9).
 *
 * The evaluation function is _PyEval_EvalFrameDefault, plus the parts gcc
 * split off it (.cold): named in .symtab when the binary has one, else
 * found as the unwind-table entry (FDE) most of its far jumps land in.
 *
 * Everything is read from the file; it may be hostile: sections are bounded
 * by the file, symbol counts by the section sizes, reads are checked.
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_PYTHON_PY_DETECT_H
#define CODEXRAY_AGENT_RUNTIMES_PYTHON_PY_DETECT_H

#include <stdbool.h>
#include <stdint.h>

#include "../../symbolize/binary.h"
#include "py_layout.h"

#define PY_DETECT_MAX_SEGS 8

struct py_binary {
    unsigned version; /* (major << 8) | minor; 0 when unknown */
    bool usable;      /* version known, layout had, evaluation function found */
    struct py_layout layout;
    uint64_t runtime;   /* _PyRuntime's address in the ELF file's terms */
    uint64_t code_type; /* PyCode_Type's, 0 when not exported */
    uint64_t eval_start[CX_PY_MAX_EVAL], eval_end[CX_PY_MAX_EVAL];
    unsigned n_eval;
    bool cold_from_jumps; /* the .cold part was found by its jumps, not a symbol */
    /* Where the layout came from, for the log: "_Py_DebugOffsets (read in
     * 3.14's shape)", "the table of 3.12" (a release newer than every shape
     * known is read in the newest one whose offsets hold: it says so). */
    char layout_from[128];
    /* The executable PT_LOAD segments, to turn a mapping into a load bias. */
    struct binary_seg segs[PY_DETECT_MAX_SEGS];
    unsigned nsegs;
    /* The perf trampoline's code (3.12 on, _Py_trampoline_func_start), which
     * -X perf copies into anonymous memory for each Python function, and
     * its stack size at the return address of its call: 0 when it keeps a
     * frame pointer (walked by it) or is of a shape not known. */
    uint8_t tramp_code[32];
    unsigned tramp_len;
    unsigned tramp_cfa;
    char why[192]; /* when not usable: why (for the log) */
};

/* Looks at the ELF file open at fd (path: its name, for the version and the
 * log). Returns 1 when it is CPython (out filled; out->usable false with
 * out->why when it cannot be walked), 0 when it is not, -1 when it is not
 * an ELF file that can be read. Does not close fd. */
int py_detect__elf(int fd, const char *path, struct py_binary *out);

/* The CFA offset (from sp, at the return address of its call) of a
 * trampoline whose code is code[0..len): sub $N,%rsp; call *%reg gives N + 8;
 * push %rbp; mov %rsp,%rbp gives 0 (it keeps a frame pointer); an endbr64
 * first is skipped. -1 for any other shape. */
int py_detect__tramp_cfa(const uint8_t *code, size_t len);

/* The version in a file name: "libpython3.11.so.1.0", "python3.9",
 * "libpython3.7m.so" -> 0x030b, 0x0309, 0x0307; 0 when there is none. */
unsigned py_detect__version_from_name(const char *name);

#endif

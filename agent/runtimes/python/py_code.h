/* A CPython code object as the agent names frames with it: its qualified
 * name, file, first line and line table, read out of the process that runs
 * it, while it runs.
 *
 * Everything comes from another process's memory, which may be garbage (a
 * code object freed since the sample) or hostile: the object's type must be
 * PyCode_Type when the binary exports it, its fingerprint must be the one
 * the BPF side took (python.h), strings are read up to PY_CODE_MAX_NAME
 * bytes of UTF-8 (longer ones cut, marked with "..."), only compact strings
 * are taken, and a line table longer than PY_CODE_MAX_LINES bytes is left
 * out (the frame then shows the function's first line).
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_PYTHON_PY_CODE_H
#define CODEXRAY_AGENT_RUNTIMES_PYTHON_PY_CODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../runtime.h"
#include "py_layout.h"

#define PY_CODE_MAX_NAME 1024
#define PY_CODE_MAX_FILE 4096
#define PY_CODE_MAX_LINES (1u << 20)

/* How memory is read: process_vm_readv on a pid, or a test's image. Returns
 * 0 when all len bytes were read, else a negative errno. */
struct py_reader {
    int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
    void *ctx;
};

/* The reader of a live process: proc_mem__read (proc_mem.h). */

struct py_code {
    struct rt_obj obj; /* first: a py_code is an rt_obj */
    unsigned version;  /* (major << 8) | minor */
    uint16_t tag;      /* the fingerprint of the object it was read from (python.h); one
                          shared by several processes keeps the first one's */
    int64_t firstlineno;
    const char *qualname; /* co_qualname from 3.11, else co_name */
    const char *name;     /* co_name */
    const char *filename; /* co_filename */
    const uint8_t *lines; /* co_lnotab or co_linetable; NULL when left out */
    size_t nlines;
    uint64_t hash; /* of everything above but tag: equal code objects hash equal */
    size_t bytes;  /* memory it holds, for the caches' bounds */
    char data[];   /* the strings and the table */
};

/* Reads the code object at addr through r. l: the interpreter's layout;
 * code_type: PyCode_Type's address in the process (0: not checked); tag:
 * the fingerprint the sample carried (0: not checked); keep_lines: read the
 * line table too. Returns a new py_code (one reference), or NULL with a
 * static reason in *why: unreadable memory, not a code object, not the one
 * sampled (changed), out of memory. */
struct py_code *py_code__read(const struct py_reader *r, const struct py_layout *l,
                              uint64_t code_type, uint64_t addr, uint16_t tag, bool keep_lines,
                              const char **why);

/* The source line of byte offset `offset` of c's bytecode; the first line
 * when the table says none, was left out, or the offset is UINT32_MAX (a
 * frame not started). */
int64_t py_code__line(const struct py_code *c, uint32_t offset);

/* Reads a str object at addr as UTF-8 into out (size outlen > 4), cut at
 * outlen - 4 bytes with "..." added. Returns the length written, or a
 * negative errno (-EINVAL: not a compact string). For tests and py_code. */
int py_code__read_str(const struct py_reader *r, const struct py_layout *l, uint64_t addr,
                      char *out, size_t outlen);

#endif

/* Whether a binary holds V8 (node, libnode.so), and the constants the V8
 * walk needs of it: V8's postmortem metadata, the v8dbg_* symbols its build
 * exports (tools/gen-postmortem-metadata.py in V8; what llnode reads), each
 * a 32-bit integer in the file: frame offsets from the frame pointer,
 * object field offsets, instance types and tag constants.
 *
 * Only a layout this agent reads right is usable: 64-bit tagged values (no
 * pointer compression: v8dbg_TaggedSize 8), heap objects tagged 01 in the
 * low two bits, Smis 0 in the low bit, the context slot just above the
 * function slot in a frame, every field used inside the first
 * CX_V8_OBJ_READ bytes of its object and 8-aligned. Anything else is
 * refused with the first reason found: the process then keeps its native
 * frames, and --perf-basic-prof still names them (agent/runtimes/jit).
 *
 * Everything is read from the file; it may be hostile: symbol counts are
 * bounded by the section sizes, each value is read through the PT_LOAD
 * segment holding it (in .bss: 0), values are range-checked.
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_V8_V8_DETECT_H
#define CODEXRAY_AGENT_RUNTIMES_V8_V8_DETECT_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>

#include "../../bpf/v8.h"

/* Offsets in bytes from an object's untagged address; types are V8's
 * instance types. */
struct v8_layout {
    int16_t fp_function, fp_context;
    uint16_t map_type;                     /* Map::instance_type (u16) */
    uint16_t fn_shared;                    /* JSFunction::shared */
    uint16_t sfi_name, sfi_script;         /* SharedFunctionInfo */
    uint16_t script_name, script_source;   /* Script */
    uint16_t script_line_ends;             /* Script: a FixedArray of Smis, once computed */
    uint16_t fixed_length, fixed_data;     /* FixedArrayBase::length (Smi), FixedArray data */
    uint16_t str_length;                   /* String::length (int32) */
    uint16_t seq1_chars, seq2_chars;       /* SeqOneByteString, SeqTwoByteString */
    uint16_t cons_first, cons_second;      /* ConsString */
    uint16_t thin_actual;                  /* ThinString */
    uint16_t sliced_parent, sliced_offset; /* SlicedString (offset: Smi) */
    uint16_t scope_ncontextlocals;         /* ScopeInfo: the slot index of the count */
    uint16_t scope_first_vars;             /* ScopeInfo: the slot index of the first name */
    uint16_t type_fn_first, type_fn_last;  /* the JSFunction instance types */
    uint16_t type_sfi, type_scope_info, type_script, type_fixed_array;
    uint16_t first_nonstring;             /* instance types below it are strings */
    uint16_t str_repr_mask, str_enc_mask; /* a string's instance type bits */
    uint16_t seq_tag, cons_tag, sliced_tag, thin_tag, one_byte_tag;
};

struct v8_binary {
    bool usable;
    struct v8_layout l;
    unsigned nconsts; /* v8dbg_* constants found */
    char why[192];    /* when not usable: why, for the log */
};

/* Looks at the ELF file open at fd. Returns 1 when it exports V8's
 * postmortem constants (out filled; out->usable false with out->why when
 * this agent cannot walk it), 0 when it does not, -1 when it is not an ELF
 * file that can be read. Does not close fd. */
int v8_detect__elf(int fd, struct v8_binary *out);

/* What the BPF walk takes of l (v8.h). */
void v8_detect__to_bpf(const struct v8_layout *l, struct cx_v8_proc *out);

#endif

/* A binary's CFI unwind table for the BPF stack walker (agent/bpf/unwind.h):
 * the rows of its .eh_frame (or, when it has none, its .debug_frame), each
 * turned into one of the few rules BPF can follow.
 *
 * This module enumerates the FDEs itself, sorts them, runs each FDE's call
 * frame program once (its own interpreter, which follows libdw's semantics;
 * libdw's dwarf_cfi_addrframe is the reference the tests compare with), and
 * classifies the state at each row:
 *   CFA = sp + N, fp + N (a register rule, or DW_OP_bregN N)  CX_CFA_SP/_FP
 *   CFA = *(sp + N), *(fp + N) (stack realignment)            CX_CFA_DEREF_*
 *   ld's .plt expression                                      CX_CFA_PLT
 *   a CIE with augmentation 'S' (glibc's __restore_rt)        CX_CFA_SIGNAL
 *   return address undefined (_start, clone3)                 CX_CFA_END
 *   fp at CFA + N / at fp + N (DW_CFA_expression breg6 N) / not saved
 * and anything else as CX_CFA_UNSUPPORTED, counted by reason in the stats.
 * Rows also need the return address at CFA - 8 (x86_64), or (arm64) still
 * in x30, beside the saved x29 (the frame record) or alone at CFA + N
 * (enum cx_ra_type). arm64's .plt and vDSO, which have no CFI, get rows of
 * our own (cfi_arm64.c).
 *
 * The file is any binary some process on the node maps, so it is hostile
 * input: sizes are checked against the file and capped, the work is bounded
 * in rows and time, and a malformed FDE becomes an unsupported row or is
 * skipped (counted), never a crash.
 */
#ifndef CODEXRAY_AGENT_UNWIND_CFI_TABLE_H
#define CODEXRAY_AGENT_UNWIND_CFI_TABLE_H

#include <linux/types.h> /* the __u32 and friends unwind.h is written in */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../bpf/unwind.h"

/* Why a row is CX_CFA_UNSUPPORTED (counted per row, before merging). */
enum cfi_table_unsup {
    CFI_UNSUP_CFA_REG,  /* the CFA is a register other than sp and fp plus N */
    CFI_UNSUP_CFA_EXPR, /* a CFA expression not among those above */
    CFI_UNSUP_RA,       /* the return address is not at CFA - 8 (arm64: nowhere a row says) */
    CFI_UNSUP_FP_RULE,  /* fp saved some other way (in a register, a value, an expression) */
    CFI_UNSUP_OFFSET,   /* an offset not a multiple of 8, or past what a row holds */
    CFI_UNSUP_CFI,      /* libdw could not evaluate the row (malformed CFI) */
    CFI_UNSUP__N
};

/* Why an FDE was left out of the table (its addresses walk by frame pointer). */
enum cfi_table_skip {
    CFI_SKIP_EMPTY,    /* an address range of zero */
    CFI_SKIP_NOT_TEXT, /* not inside an executable PT_LOAD segment */
    CFI_SKIP_OVERLAP,  /* overlaps an FDE at a lower address */
    CFI_SKIP_BAD,      /* its CIE or encoding cannot be read, or the CIE is too long */
    CFI_SKIP_TOO_BIG,  /* longer than opts.max_fde_bytes */
    CFI_SKIP_FAR,      /* ends more than 4 GiB past the table's base */
    CFI_SKIP__N
};

enum cfi_table_source {
    CFI_SRC_EH_FRAME,
    CFI_SRC_DEBUG_FRAME,
    CFI_SRC_GOPCLNTAB,   /* Go code's rows, from its pcsp tables (go_table.h) */
    CFI_SRC_EH_FRAME_GO, /* both: cgo's C code by .eh_frame, the Go code by pcsp */
    CFI_SRC_SYNTH,       /* rows of our own for code without CFI (arm64's vDSO) */
};

struct cfi_table_stats {
    enum cfi_table_source source;
    uint32_t fdes;                            /* FDEs in the table */
    uint32_t skipped[CFI_SKIP__N];            /* FDEs left out, by reason */
    uint32_t rows_raw;                        /* rows before merging, the gap rows included */
    uint32_t rows;                            /* rows in the table */
    uint64_t bytes;                           /* rows * sizeof(struct cx_cfi_row) */
    uint32_t unsupported[CFI_UNSUP__N];       /* CX_CFA_UNSUPPORTED rows before merging */
    uint32_t signal_rows, end_rows, plt_rows; /* before merging, for the log */
    uint64_t build_ns;
};

/* Sorted strictly by pc; rows[n - 1] is CX_CFA_NONE. Read-only for callers. */
struct cfi_table {
    uint64_t base; /* the lowest ELF address covered: row pc = address - base */
    struct cx_cfi_row *rows;
    uint32_t n;
    struct cfi_table_stats stats;
};

/* Caps; zero in a field (or opts NULL) takes its default. */
struct cfi_table_opts {
    uint32_t max_rows;          /* default and upper bound CX_CFI_MAX_ROWS */
    uint64_t max_section_bytes; /* .eh_frame or .debug_frame; default 64 MiB */
    uint32_t max_fde_bytes;     /* one FDE's encoded size (and a CIE's instructions); 64 KiB */
    uint32_t max_ms;            /* wall time for one build; default 5000 */
    /* Rows from libdw's dwarf_cfi_addrframe(), one address at a time, not
     * from our own interpreter (cfi_exec.c): the same table, many times
     * slower; kept as the reference the tests compare with. */
    bool libdw_rows;
};

/* Builds the table of the ELF file open (read-only) at fd; the fd is not
 * closed and its offset is not used. Returns 0 and a table in *out that the
 * caller frees with cfi_table__free(), or a negative errno with *out NULL
 * and a reason in err (when errlen > 0):
 *   -EINVAL   not an ELF file this architecture can unwind, or malformed
 *   -ENOENT   no .eh_frame or .debug_frame, or no FDE in an executable segment
 *   -E2BIG    a cap in opts (section size, rows)
 *   -ETIME    opts.max_ms passed
 *   -ENOMEM
 * FDEs that cannot be used are skipped and rows that cannot be followed are
 * CX_CFA_UNSUPPORTED: both are counted in the stats, not errors. */
int cfi_table__build(int fd, const struct cfi_table_opts *opts, struct cfi_table **out, char *err,
                     size_t errlen);

/* t may be NULL. */
void cfi_table__free(struct cfi_table *t);

/* Short names for the log: "cfa_reg", "not_text", ... */
const char *cfi_table__unsup_name(enum cfi_table_unsup r);
const char *cfi_table__skip_name(enum cfi_table_skip r);

/* One log line of the stats ("eh_frame: 3713 FDEs, 31850 rows (40211 before
 * merging), 254800 bytes, 12.1 ms; unsupported: cfa_reg 3"), NUL-terminated
 * and cut to len. Returns what snprintf returns. */
int cfi_table__stats_str(const struct cfi_table_stats *s, char *buf, size_t len);

#endif

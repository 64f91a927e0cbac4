/* Unwind rows for Go code, from the runtime's own table, .gopclntab: for
 * every function the stack pointer's distance below its value at entry, at
 * every pc (the pcsp table), which a stripped binary keeps too. Go binaries
 * have no .eh_frame for their Go code, and a leaf function that needs no
 * stack frame pushes no frame pointer, so a frame-pointer walk skips its
 * caller; these rows let the CFI walk find it.
 *
 * A row per range: CFA = sp + distance + 8 (the return address below it);
 * the caller's frame pointer saved just below the return address once the
 * function has a frame (Go's prologue stores it there), unchanged before.
 * On arm64 CFA = sp + distance: at distance 0 the return address is still
 * in x30 (CX_RA_DEFAULT: the walk's first frame only); past it the
 * prologue has stored x30 at 0(RSP) and x29 just below, at -8(RSP): a
 * frame record at sp - 8 (CX_RA_AFTER_FP, CX_FP_AT_SP -1).
 * Functions where stacks start (funcFlag TOPFRAME: runtime.goexit, mstart)
 * end the walk; functions that switch stacks (SPWRITE: systemstack,
 * asmcgocall, morestack) are walked by frame pointer. Go before 1.17 has no
 * flags: runtime.goexit, runtime.mstart and runtime.rt0_go by name.
 */
#ifndef CODEXRAY_AGENT_UNWIND_GO_TABLE_H
#define CODEXRAY_AGENT_UNWIND_GO_TABLE_H

#include <stddef.h>

#include "cfi_table.h"

/* The Go rows of the ELF file open at fd, in a table as cfi_table__build
 * makes. Returns 0; -ENOENT when it has no .gopclntab that parses (not Go);
 * -E2BIG past CX_CFI_MAX_ROWS; -ENOMEM; with a reason in err. */
int go_table__build(int fd, struct cfi_table **out, char *err, size_t errlen);

/* One table of a binary's CFI rows and its Go rows: at each address, the
 * CFI row, or the Go row where the CFI has none (CX_CFA_NONE). Both are
 * taken (freed, or part of *out). Returns 0 or -ENOMEM (both freed). */
int go_table__merge(struct cfi_table *cfi, struct cfi_table *go, struct cfi_table **out);

#endif

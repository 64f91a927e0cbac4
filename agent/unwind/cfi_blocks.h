/* A CFI table's rows laid out for BPF: blocks of rows and the index over
 * them (bpf/cfi_index.h). No BPF here, so that unit tests need no root. */
#ifndef CODEXRAY_AGENT_UNWIND_CFI_BLOCKS_H
#define CODEXRAY_AGENT_UNWIND_CFI_BLOCKS_H

#include <linux/types.h>
#include <stdint.h>

#include "../bpf/unwind.h"

/* The n rows (n >= 1, sorted by pc, n <= CX_CFI_MAX_ROWS) in blocks of
 * CX_CFI_BLOCK_ROWS, the last padded with rows at pc 0xffffffff, then the
 * index levels: a malloc'd array of *total blocks (the BPF array's
 * entries), of which *blocks hold rows. NULL when out of memory or n is out
 * of range. */
struct cx_cfi_block *cfi_blocks__build(const struct cx_cfi_row *rows, uint32_t n, uint32_t *blocks,
                                       uint32_t *total);

#endif

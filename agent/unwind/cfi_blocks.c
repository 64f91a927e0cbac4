/* A CFI table's rows laid out for BPF: see cfi_blocks.h and bpf/cfi_index.h. */
#include "cfi_blocks.h"

#include <stdlib.h>
#include <string.h>

#include "../bpf/cfi_index.h"

_Static_assert(sizeof(struct cx_cfi_index) == sizeof(struct cx_cfi_block),
               "an index block is an entry of the table's array");

/* The first pc of block i of level k (0: data). */
static uint32_t first_pc(const struct cx_cfi_block *a, uint32_t nblocks, uint32_t k, uint32_t i)
{
    uint32_t count, at = cx_cfi_level(nblocks, k, &count);

    if (k == 0)
        return a[i].rows[0].pc;
    return ((const struct cx_cfi_index *)&a[at + i])->pc[0];
}

struct cx_cfi_block *cfi_blocks__build(const struct cx_cfi_row *rows, uint32_t n, uint32_t *blocks,
                                       uint32_t *total)
{
    uint32_t nblocks, ntotal, levels;
    struct cx_cfi_block *a;
    struct cx_cfi_row pad;

    if (n == 0 || n > CX_CFI_MAX_ROWS)
        return NULL;
    nblocks = (n + CX_CFI_BLOCK_ROWS - 1) / CX_CFI_BLOCK_ROWS;
    ntotal = cx_cfi_total(nblocks);
    a = malloc((size_t)ntotal * sizeof(*a));
    if (!a)
        return NULL;
    memcpy(a, rows, (size_t)n * sizeof(*rows));
    /* Padding: past every address, so no search ends on it. */
    pad = rows[n - 1];
    pad.pc = UINT32_MAX;
    for (uint64_t i = n; i < (uint64_t)nblocks * CX_CFI_BLOCK_ROWS; i++)
        a[i / CX_CFI_BLOCK_ROWS].rows[i % CX_CFI_BLOCK_ROWS] = pad;
    /* Each level from the one below it. */
    levels = cx_cfi_levels(nblocks);
    for (uint32_t k = 1; k <= levels; k++) {
        uint32_t below, count, at = cx_cfi_level(nblocks, k, &count);
        cx_cfi_level(nblocks, k - 1, &below);
        for (uint32_t i = 0; i < count; i++) {
            struct cx_cfi_index *ix = (struct cx_cfi_index *)&a[at + i];
            for (uint32_t e = 0; e < CX_CFI_FANOUT; e++) {
                uint64_t child = (uint64_t)i * CX_CFI_FANOUT + e;
                ix->pc[e] =
                    child < below ? first_pc(a, nblocks, k - 1, (uint32_t)child) : UINT32_MAX;
            }
        }
    }
    *blocks = nblocks;
    *total = ntotal;
    return a;
}

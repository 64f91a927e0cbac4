/* The index over a CFI table's blocks (unwind.h), shared by the BPF walk
 * (unwind.bpf.h) and user space, which builds it (agent/unwind/cfi_blocks.c)
 * and tests the same search (tests/unit/test_cfi_blocks.c).
 *
 * A lookup in a table is a helper call (inner maps of different sizes are
 * not inlined): a binary search by block cost one per halving, 16 for gcc's
 * cc1 (478,579 rows, 29,912 blocks). So the BPF array holds, after the data
 * blocks, levels of index blocks, each of the first pcs of 32 blocks of the
 * level below (an index block is the size of a data block): one lookup per
 * level, and a search of 32 pcs in plain memory. cc1 then needs 3 lookups
 * and a data block, libc (1,900 blocks) the same, a table of up to 32 blocks
 * one.
 *
 * Layout, for `blocks` data blocks: keys [0, blocks) the data; then level 1,
 * ceil(blocks / 32) index blocks; level 2, ceil(level 1 / 32); and so on up
 * to the level of one block, the root. One data block has no index. Unused
 * entries of an index block hold 0xffffffff, like the padding rows of the
 * last data block: no address is at or past it.
 *
 * cx_cfi_descend() is there when the includer defines CX_CFI_GET(ctx,
 * keyp), returning the block at *keyp of table ctx (a const void *) or NULL.
 */
#ifndef CODEXRAY_AGENT_BPF_CFI_INDEX_H
#define CODEXRAY_AGENT_BPF_CFI_INDEX_H

#include "unwind.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

#define CX_CFI_FANOUT 32
/* 32^4 blocks of 16 rows is past CX_CFI_MAX_ROWS: at most 4 levels. */
#define CX_CFI_MAX_LEVELS 4

struct cx_cfi_index {
    __u32 pc[CX_CFI_FANOUT]; /* the first pc of each block below, in order */
};

/* Level k's first key and its number of blocks (*count; 0: no such level)
 * for a table of `blocks` data blocks; level 0 is the data. */
static __always_inline __u32 cx_cfi_level(__u32 blocks, __u32 k, __u32 *count)
{
    __u32 at = 0, n = blocks, j;

    for (j = 0; j < CX_CFI_MAX_LEVELS && j < k; j++) {
        at += n;
        n = n > 1 ? (n + CX_CFI_FANOUT - 1) / CX_CFI_FANOUT : 0;
    }
    *count = n;
    return at;
}

/* Index levels above the data: 0 for one block, 1 up to 32, 2 up to 1,024. */
static __always_inline __u32 cx_cfi_levels(__u32 blocks)
{
    __u32 k, n = blocks;

    for (k = 0; k < CX_CFI_MAX_LEVELS && n > 1; k++)
        n = (n + CX_CFI_FANOUT - 1) / CX_CFI_FANOUT;
    return k;
}

/* Blocks in the table's array: data and index. */
static __always_inline __u32 cx_cfi_total(__u32 blocks)
{
    __u32 count, top = cx_cfi_levels(blocks);

    return cx_cfi_level(blocks, top, &count) + count;
}

#ifdef CX_CFI_GET
/* The data block whose rows cover rel: the last whose first pc <= rel (or
 * block 0 when rel is below every row; the caller checks its first pc).
 * Returns -1 when a lookup fails or rel is at or past the padding. */
static __always_inline long long cx_cfi_descend(const void *ctx, __u32 blocks, __u32 rel)
{
    const struct cx_cfi_index *ix;
    __u32 levels = cx_cfi_levels(blocks), pos = 0, key, below, lo, hi, m, i, k;

    for (k = 0; k < CX_CFI_MAX_LEVELS && k < levels; k++) {
        /* Level levels - k, from the root down. */
        key = cx_cfi_level(blocks, levels - k, &below) + pos;
        ix = CX_CFI_GET(ctx, &key);
        if (!ix)
            return -1;
        lo = 0;
        hi = CX_CFI_FANOUT;
        for (i = 0; i < 5; i++) { /* log2(CX_CFI_FANOUT) */
            m = (lo + hi) / 2;
            if (ix->pc[m & (CX_CFI_FANOUT - 1)] <= rel)
                lo = m;
            else
                hi = m;
        }
        pos = pos * CX_CFI_FANOUT + lo;
        cx_cfi_level(blocks, levels - k - 1, &below);
        if (pos >= below)
            return -1;
    }
    return pos;
}
#endif

#endif

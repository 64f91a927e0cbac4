/* The CFI row search of the walk (unwind.bpf.h): the table's index of
 * blocks (cfi_index.h), then the block's rows. Included by unwind.bpf.h
 * after the maps and the walk state it uses. */
#ifndef CODEXRAY_AGENT_BPF_CFI_FIND_BPF_H
#define CODEXRAY_AGENT_BPF_CFI_FIND_BPF_H

/* What cx_cfi_find() returns when a table has no row for the address. */
#define CX_CFI_NOT_FOUND 0xffffffffffffffffull

#define CX_CFI_GET(ctx, keyp) bpf_map_lookup_elem((void *)(ctx), keyp)
#include "cfi_index.h"

/* The row of table `table` (of `blocks` data blocks) that covers rel,
 * packed in a u64 as struct cx_cfi_row, or CX_CFI_NOT_FOUND. The row found
 * last in this walk is kept with the span it covers (row_*): a frame whose
 * address is in it (recursion, a loop of calls, the frames of one function
 * met again) needs no search. Else the block is found through the table's
 * index (cfi_index.h: a lookup per level, 3 for a big table), then the row
 * in it in plain memory. A global function: the verifier checks it once,
 * not once per frame of the walk. */
__noinline __u64 cx_cfi_find(__u32 table, __u32 blocks, __u32 rel)
{
    const struct cx_cfi_block *b;
    __u32 lo, key = table, zero = 0;
    struct walk_state *st = bpf_map_lookup_elem(&wstate, &zero);
    void *rowmap;
    __u64 l = 0, h = CX_CFI_BLOCK_ROWS, m, out;
    long long pos;
    int i;

    if (!st || blocks == 0)
        return CX_CFI_NOT_FOUND;
    if (table == st->row_table && rel >= st->row_lo && rel < st->row_hi)
        return st->row;
    rowmap = bpf_map_lookup_elem(&cfi_tables, &key);
    if (!rowmap)
        return CX_CFI_NOT_FOUND;
    /* The last block whose first pc <= rel. */
    pos = cx_cfi_descend(rowmap, blocks, rel);
    if (pos < 0)
        return CX_CFI_NOT_FOUND;
    lo = (__u32)pos;
    b = bpf_map_lookup_elem(rowmap, &lo);
    if (!b || b->rows[0].pc > rel)
        return CX_CFI_NOT_FOUND;
    /* Then the last row of the block whose pc <= rel, in plain memory. */
    for (i = 0; i < 5 && h - l > 1; i++) {
        m = (l + h) / 2;
        if (b->rows[m & (CX_CFI_BLOCK_ROWS - 1)].pc <= rel)
            l = m;
        else
            h = m;
    }
    __builtin_memcpy(&out, &b->rows[l & (CX_CFI_BLOCK_ROWS - 1)], sizeof(out));
    /* The row covers [its pc, the next row's pc); the next row of a block's
     * last is in the next block, not read: then rel alone is kept. */
    st->row = out;
    st->row_table = table;
    st->row_lo = b->rows[l & (CX_CFI_BLOCK_ROWS - 1)].pc;
    st->row_hi =
        l + 1 < CX_CFI_BLOCK_ROWS ? b->rows[(l + 1) & (CX_CFI_BLOCK_ROWS - 1)].pc : rel + 1;
    return out;
}
#endif

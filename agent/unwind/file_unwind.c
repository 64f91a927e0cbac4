#include "file_unwind.h"

#include <string.h>

struct cx_file_key file_unwind__key(uint32_t dev_major, uint32_t dev_minor, uint64_t inode)
{
    struct cx_file_key k;

    memset(&k, 0, sizeof(k)); /* the padding is part of the hash key */
    k.ino = inode;
    k.dev = (dev_major << 20) | (dev_minor & 0xfffff); /* the kernel's MKDEV */
    return k;
}

bool file_unwind__value(uint32_t table, uint32_t blocks, uint64_t base,
                        const struct binary_seg *segs, unsigned nseg, struct cx_file_unwind *out)
{
    memset(out, 0, sizeof(*out));
    out->table = table;
    out->blocks = blocks;
    for (unsigned i = 0; i < nseg && out->nseg < CX_FILE_MAX_SEGS; i++) {
        /* As binary__map_bias: a mapping at offset off holds the segment
         * when off is in [its offset's page, its end); then row pc =
         * pc - (start - off - (vaddr - offset)) - base. */
        out->seg[out->nseg++] =
            (struct cx_file_seg){segs[i].offset & ~4095ull, segs[i].offset + segs[i].filesz,
                                 segs[i].vaddr - segs[i].offset - base};
    }
    return out->nseg > 0;
}

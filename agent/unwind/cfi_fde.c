/* The FDEs of a CFI section, enumerated by us (not libdw), sorted and checked. */
#include "cfi_table_int.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* --- FDE enumeration: our own, so every FDE is visited once, in order ---- */

/* A value of format fmt (the low 4 bits of a DW_EH_PE encoding) at *pp. */
static bool read_value(const uint8_t **pp, const uint8_t *end, uint8_t fmt, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    unsigned size = 0, shift = 0;

    switch (fmt) {
    case DW_EH_PE_absptr:
    case DW_EH_PE_udata8:
    case DW_EH_PE_sdata8:
        size = 8;
        break;
    case DW_EH_PE_udata4:
    case DW_EH_PE_sdata4:
        size = 4;
        break;
    case DW_EH_PE_udata2:
    case DW_EH_PE_sdata2:
        size = 2;
        break;
    case DW_EH_PE_uleb128:
    case DW_EH_PE_sleb128:
        for (;;) {
            if (p >= end || shift >= 64)
                return false;
            uint8_t byte = *p++;
            v |= (uint64_t)(byte & 0x7f) << shift;
            shift += 7;
            if (!(byte & 0x80))
                break;
        }
        if (fmt == DW_EH_PE_sleb128 && shift < 64 && (p[-1] & 0x40))
            v |= ~0ull << shift;
        *pp = p;
        *out = v;
        return true;
    default:
        return false;
    }
    if ((size_t)(end - p) < size)
        return false;
    for (unsigned i = 0; i < size; i++) /* little-endian, checked at the start */
        v |= (uint64_t)p[i] << (8 * i);
    if (size < 8 && (fmt & DW_EH_PE_signed) && (v >> (8 * size - 1)))
        v |= ~0ull << (8 * size);
    *pp = p + size;
    *out = v;
    return true;
}

/* An address encoded as enc, the field itself at ELF address field_va. Only
 * absolute and pc-relative addresses: what linkers write in FDEs. */
static bool read_addr(const uint8_t **pp, const uint8_t *end, uint8_t enc, uint64_t field_va,
                      uint64_t *out)
{
    if (enc == DW_EH_PE_omit || (enc & DW_EH_PE_indirect))
        return false;
    if (!read_value(pp, end, enc & 0x0f, out))
        return false;
    switch (enc & 0x70) {
    case DW_EH_PE_absptr:
        return true;
    case DW_EH_PE_pcrel:
        *out += field_va;
        return true;
    default:
        return false;
    }
}

/* What the FDEs of CIE c need: the encoding of their addresses (from the
 * 'z' augmentation data), whether they carry augmentation data, the
 * alignment factors, the return address register and the initial
 * instructions. A CIE whose initial instructions are longer than max_insns
 * is refused like an FDE that is. */
static void parse_cie(const Dwarf_CIE *c, uint32_t max_insns, struct cie *out)
{
    const char *aug = c->augmentation;
    const uint8_t *p = c->augmentation_data, *end = p + c->augmentation_data_size;
    uint64_t skip;

    out->ok = false;
    out->enc = DW_EH_PE_absptr;
    out->z = out->signal = false;
    out->code_align = c->code_alignment_factor;
    out->data_align = c->data_alignment_factor;
    out->ra = c->return_address_register;
    out->insns = c->initial_instructions;
    out->insns_end = c->initial_instructions_end;
    out->state_done = false;
    if (!c->initial_instructions || c->initial_instructions_end < c->initial_instructions ||
        (uint64_t)(c->initial_instructions_end - c->initial_instructions) > max_insns)
        return;
    if (!aug || aug[0] == '\0') {
        out->ok = true;
        return;
    }
    if (aug[0] != 'z' || !p)
        return; /* "eh" and other pre-'z' forms: not written by current tools */
    out->z = true;
    for (const char *a = aug + 1; *a; a++) {
        switch (*a) {
        case 'R':
            if (p >= end)
                return;
            out->enc = *p++;
            break;
        case 'P': { /* the personality routine's address: skipped */
            if (p >= end)
                return;
            uint8_t penc = *p++;
            if ((penc & 0x70) == DW_EH_PE_aligned || !read_value(&p, end, penc & 0x0f, &skip))
                return;
            break;
        }
        case 'L':
            if (p >= end)
                return;
            p++;
            break;
        case 'S': /* a signal frame: every row of its FDEs */
            out->signal = true;
            break;
        case 'B': /* arm64 BTI, MTE: no data */
        case 'G':
            break;
        default:
            return; /* where the rest of the data lies is unknown */
        }
    }
    out->ok = true;
}

/* The index in b->cies of the CIE at off, parsed on first use; UINT32_MAX
 * when out of memory or past MAX_CIES (a hostile file: its FDEs are then
 * skipped as bad). */
static uint32_t cie_at(struct build *b, Elf_Data *d, bool eh, Dwarf_Off off)
{
    Dwarf_CFI_Entry ent;
    Dwarf_Off next;
    bool fresh;
    long i;

    if (!b->cie_index && !(b->cie_index = hmap__new()))
        return UINT32_MAX;
    i = hmap__put(b->cie_index, &off, sizeof(off), &fresh);
    if (i < 0)
        return UINT32_MAX;
    if (!fresh)
        return (uint32_t)*hmap__val(b->cie_index, i);
    *hmap__val(b->cie_index, i) = UINT32_MAX;
    if (b->ncies == b->cies_cap) {
        if (b->ncies >= MAX_CIES)
            return UINT32_MAX;
        uint32_t cap = b->cies_cap ? b->cies_cap * 2 : 8;
        struct cie *n = realloc(b->cies, cap * sizeof(*n));
        if (!n)
            return UINT32_MAX;
        b->cies = n;
        b->cies_cap = cap;
    }
    struct cie *c = &b->cies[b->ncies];
    memset(c, 0, sizeof(*c));
    c->off = off;
    if (off < d->d_size && dwarf_next_cfi(b->ident, d, eh, off, &next, &ent) == 0 &&
        dwarf_cfi_cie_p(&ent))
        parse_cie(&ent.cie, b->o.max_fde_bytes, c);
    *hmap__val(b->cie_index, i) = b->ncies;
    return b->ncies++;
}

static bool in_text(const struct build *b, uint64_t start, uint64_t end)
{
    for (unsigned i = 0; i < b->nsegs; i++) {
        if (start >= b->segs[i].lo && end <= b->segs[i].hi)
            return true;
    }
    return false;
}

/* Every FDE of the section in d (at ELF address sec_va) that covers code in
 * an executable segment, into b->fdes; the others are counted. */
int cfi_collect_fdes(struct build *b, Elf_Data *d, bool eh, uint64_t sec_va)
{
    struct cfi_table_stats *st = &b->t->stats;
    Dwarf_Off off = 0, next;

    while (off < d->d_size) {
        Dwarf_CFI_Entry ent;
        uint64_t start, range;

        int r = dwarf_next_cfi(b->ident, d, eh, off, &next, &ent);
        if (r != 0 || next <= off)
            break; /* the terminator, or a malformed entry: nothing after it can be found */
        off = next;
        if (dwarf_cfi_cie_p(&ent))
            continue;
        uint32_t ci = cie_at(b, d, eh, ent.fde.CIE_pointer);
        const struct cie *c = ci != UINT32_MAX ? &b->cies[ci] : NULL;
        const uint8_t *p = ent.fde.start, *end = ent.fde.end;
        uint64_t field_va = sec_va + (uint64_t)(p - (const uint8_t *)d->d_buf), aug_len = 0;
        if (!c || !c->ok || !read_addr(&p, end, c->enc, field_va, &start) ||
            !read_value(&p, end, c->enc & 0x0f, &range) ||
            (c->z &&
             (!read_value(&p, end, DW_EH_PE_uleb128, &aug_len) || aug_len > (uint64_t)(end - p)))) {
            st->skipped[CFI_SKIP_BAD]++;
            continue;
        }
        if ((uint64_t)(ent.fde.end - ent.fde.start) > b->o.max_fde_bytes) {
            st->skipped[CFI_SKIP_TOO_BIG]++;
            continue;
        }
        if (range == 0) {
            st->skipped[CFI_SKIP_EMPTY]++;
            continue;
        }
        if (start + range < start || !in_text(b, start, start + range)) {
            st->skipped[CFI_SKIP_NOT_TEXT]++;
            continue;
        }
        int err = cfi_push_fde(b, &(struct fde){start, start + range, p + aug_len, end, ci});
        if (err)
            return err;
    }
    return 0;
}

int cfi_push_fde(struct build *b, const struct fde *f)
{
    if (b->nfdes == b->fdes_cap) {
        if (b->nfdes >= b->o.max_rows)
            return cfi_fail(b, -E2BIG, "more than %u FDEs", b->o.max_rows);
        size_t cap = b->fdes_cap ? b->fdes_cap * 2 : 1024;
        struct fde *n = realloc(b->fdes, cap * sizeof(*n));
        if (!n)
            return cfi_fail(b, -ENOMEM, "out of memory for %zu FDEs", cap);
        b->fdes = n;
        b->fdes_cap = cap;
    }
    b->fdes[b->nfdes++] = *f;
    return 0;
}

static int fde_cmp(const void *a, const void *b)
{
    const struct fde *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Sorts the FDEs, drops those that overlap a lower one or end too far from
 * the lowest for a 32-bit row pc, and sets the table's base. */
void cfi_order_fdes(struct build *b)
{
    struct cfi_table_stats *st = &b->t->stats;
    size_t kept = 0;

    qsort(b->fdes, b->nfdes, sizeof(*b->fdes), fde_cmp);
    for (size_t i = 0; i < b->nfdes; i++) {
        const struct fde *f = &b->fdes[i];
        if (kept > 0 && f->start < b->fdes[kept - 1].end) {
            st->skipped[CFI_SKIP_OVERLAP]++;
            continue;
        }
        if (f->end - (kept > 0 ? b->fdes[0].start : f->start) > UINT32_MAX) {
            st->skipped[CFI_SKIP_FAR]++;
            continue;
        }
        b->fdes[kept++] = *f;
    }
    b->nfdes = kept;
    b->t->base = kept ? b->fdes[0].start : 0;
}

/* What arm64 needs beyond its CFI: rows for ld's .plt, which has none.
 *
 * A call through the PLT lands in a stub that loads the target from the GOT
 * and branches to it (adrp x16; ldr x17; add x16; br x17, after a `bti c`
 * with BTI): sp untouched, the caller's return address still in x30. So a
 * sample there is walked as a frame whose CFA is sp and whose return
 * address is in the link register: what BPF does for a first frame. PLT0,
 * the lazy binder's entry, first pushes x16 and x30
 * (`stp x16, x30, [sp, #-16]!`), then branches to the dynamic linker's
 * resolver with sp 16 lower and x30 at CFA - 8.
 */
#include "cfi_table_int.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define INSN_STP_X16_X30 0xa9bf7bf0u /* stp x16, x30, [sp, #-16]! */
#define INSN_BTI_C 0xd503245fu
#define PLT0_SIZE 32 /* ld's PLT0: 8 instructions, with or without BTI */

static uint32_t insn_at(const Elf_Data *d, size_t i)
{
    const uint8_t *p = (const uint8_t *)d->d_buf + 4 * i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int cfi_arm64_plt_fdes(struct build *b, Elf *e, size_t shstrndx)
{
    GElf_Shdr sh;
    Elf_Scn *s = cfi_find_section(e, shstrndx, ".plt", &sh);
    Elf_Data *d;
    uint64_t lo, hi, at = 0;

    if (!s || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_EXECINSTR) || sh.sh_size < 4)
        return 0;
    lo = sh.sh_addr;
    hi = sh.sh_addr + sh.sh_size;
    if (hi < lo)
        return 0;
    bool in_text = false;
    for (unsigned i = 0; i < b->nsegs; i++)
        in_text |= lo >= b->segs[i].lo && hi <= b->segs[i].hi;
    if (!in_text)
        return 0;
    /* Where the linker (or another tool) did write CFI for it, that wins. */
    for (size_t i = 0; i < b->nfdes; i++) {
        if (b->fdes[i].start < hi && b->fdes[i].end > lo)
            return 0;
    }
    /* PLT0's push, found by its encoding in the first two instructions
     * (the second after a `bti c`); the stubs after PLT0 push nothing. */
    d = elf_getdata(s, NULL);
    if (d && d->d_buf && d->d_size >= 8 && d->d_size <= sh.sh_size && sh.sh_size >= PLT0_SIZE) {
        uint32_t i0 = insn_at(d, 0), i1 = insn_at(d, 1);
        if (i0 == INSN_STP_X16_X30)
            at = lo + 4;
        else if (i0 == INSN_BTI_C && i1 == INSN_STP_X16_X30)
            at = lo + 8;
    }
    b->t->stats.plt_rows++;
    return cfi_push_fde(b, &(struct fde){.start = lo,
                                         .end = hi,
                                         .synth = true,
                                         .synth_at = at,
                                         .synth_end = at ? lo + PLT0_SIZE : 0});
}

int cfi_synth_rows(struct build *b, const struct fde *f, bool gap_after)
{
    const struct cx_cfi_row in_lr = {.rule = CX_CFI_RULE_RA(CX_CFA_SP, CX_FP_SAME, CX_RA_DEFAULT)};
    /* After PLT0's push: CFA = sp + 16, x30 at CFA - 8. */
    const struct cx_cfi_row pushed = {
        .cfa_off = 2, .rule = CX_CFI_RULE_RA(CX_CFA_SP, CX_FP_SAME, CX_RA_AT_CFA), .fp_off = -1};
    int err = cfi_add_row(b, f->start, in_lr);

    if (!err && f->synth_at && f->synth_at < f->end)
        err = cfi_add_row(b, f->synth_at, pushed);
    if (!err && f->synth_at && f->synth_end < f->end)
        err = cfi_add_row(b, f->synth_end, in_lr);
    if (!err && gap_after)
        err = cfi_add_row(b, f->end, (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_NONE, 0)});
    return err;
}

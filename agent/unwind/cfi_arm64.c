/* What arm64 needs beyond its CFI: rows for code that has none.
 *
 * ld's .plt. A call through the PLT lands in a stub that loads the target
 * from the GOT and branches to it (adrp x16; ldr x17; add x16; br x17,
 * after a `bti c` with BTI): sp untouched, the caller's return address
 * still in x30. So a sample there is walked as a frame whose CFA is sp and
 * whose return address is in the link register: what BPF does for a first
 * frame. PLT0, the lazy binder's entry, first pushes x16 and x30
 * (`stp x16, x30, [sp, #-16]!`), then branches to the dynamic linker's
 * resolver with sp 16 lower and x30 at CFA - 8.
 *
 * The vDSO. arm64's has no .eh_frame at all (Debian's 6.1: .text alone).
 * Its functions (clock_gettime, gettimeofday, clock_getres) are leaves
 * that never move sp or save x30: CFA = sp, the return address in x30,
 * which is what each one whose instructions show no frame gets (one that
 * moves sp, writes through sp with writeback, or calls, gets nothing and is
 * walked by frame pointer). __kernel_rt_sigreturn, the signal trampoline
 * handlers return into, is a signal frame (sp points at the kernel's
 * rt_sigframe), from the nop before it: a return address's lookup is made
 * at the address before it.
 */
#include "cfi_table_int.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define INSN_STP_X16_X30 0xa9bf7bf0u /* stp x16, x30, [sp, #-16]! */
#define INSN_NOP 0xd503201fu
#define VDSO_MAX_FUNCS 64         /* the vDSO has 4-6 */
#define VDSO_MAX_FUNC (64u << 10) /* bytes of one function looked at */
#define SIGRETURN "__kernel_rt_sigreturn"
#define INSN_BTI_C 0xd503245fu
#define PLT0_SIZE 32 /* ld's PLT0: 8 instructions, with or without BTI */

static uint32_t insn_at(const Elf_Data *d, size_t i)
{
    const uint8_t *p = (const uint8_t *)d->d_buf + 4 * i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* .plt's FDE of our own (see above); 0, or an error through cfi_fail. */
static int plt_fdes(struct build *b, Elf *e, size_t shstrndx)
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

/* Whether the n instructions at w leave sp and x30 alone: no add/sub to
 * sp, no load or store that writes its base register back when that is
 * sp, no call. Conservative: anything else that could is not looked for
 * because the kernel's C does not write it (a frame needs one of these). */
static bool frameless(const uint8_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = w + 4 * i;
        uint32_t x =
            (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        if ((x & 0x3f80001fu) == 0x1100001fu || /* add/sub (immediate) to sp, mov sp */
            (x & 0x3b8003e0u) == 0x288003e0u || /* ldp/stp post-index on sp */
            (x & 0x3b8003e0u) == 0x298003e0u || /* ldp/stp pre-index on sp */
            (x & 0x3b200fe0u) == 0x380007e0u || /* ldr/str post-index on sp */
            (x & 0x3b200fe0u) == 0x38000fe0u || /* ldr/str pre-index on sp */
            (x & 0xfc000000u) == 0x94000000u || /* bl */
            (x & 0xfffffc1fu) == 0xd63f0000u || /* blr */
            (x & 0x3fe0001fu) == 0x0b20001fu)   /* add/sub (extended register) to sp */
            return false;
    }
    return true;
}

/* The bytes of the executable section holding [lo, hi), and its address;
 * NULL when none does. */
static const Elf_Data *code_of(Elf *e, uint64_t lo, uint64_t hi, uint64_t *addr)
{
    for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(s, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_EXECINSTR) ||
            lo < sh.sh_addr || hi > sh.sh_addr + sh.sh_size)
            continue;
        Elf_Data *d = elf_getdata(s, NULL);
        if (!d || !d->d_buf || d->d_size != sh.sh_size || ((lo - sh.sh_addr) & 3))
            return NULL;
        *addr = sh.sh_addr;
        return d;
    }
    return NULL;
}

/* The vDSO's FDEs of our own (see above): its functions from .dynsym. */
static int vdso_fdes(struct build *b, Elf *e)
{
    struct {
        uint64_t lo, hi;
        bool sigreturn;
    } fn[VDSO_MAX_FUNCS];
    unsigned nfn = 0;
    bool is_vdso = false;

    for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(s, &sh) || sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0)
            continue;
        Elf_Data *d = elf_getdata(s, NULL);
        size_t n = d ? d->d_size / sh.sh_entsize : 0;
        for (size_t i = 0; i < n && nfn < VDSO_MAX_FUNCS; i++) {
            GElf_Sym sym;
            const char *name;
            if (!gelf_getsym(d, (int)i, &sym) || sym.st_size == 0 || sym.st_size > VDSO_MAX_FUNC ||
                sym.st_value + sym.st_size < sym.st_value ||
                !(name = elf_strptr(e, sh.sh_link, sym.st_name)))
                continue;
            /* The trampoline is code, not a function (SYM_CODE_START): NOTYPE. */
            bool sr = strcmp(name, SIGRETURN) == 0;
            if (GELF_ST_TYPE(sym.st_info) != STT_FUNC &&
                !(sr && GELF_ST_TYPE(sym.st_info) == STT_NOTYPE))
                continue;
            is_vdso |= sr;
            fn[nfn].lo = sym.st_value, fn[nfn].hi = sym.st_value + sym.st_size;
            fn[nfn++].sigreturn = sr;
        }
    }
    if (!is_vdso)
        return 0; /* a binary without CFI: walked by frame pointer */
    for (unsigned i = 0; i < nfn; i++) {
        uint64_t lo = fn[i].lo, hi = fn[i].hi, at;
        const Elf_Data *d = code_of(e, lo, hi, &at);
        int err = 0;
        if (!d)
            continue;
        if (fn[i].sigreturn) {
            /* From the nop before it, where the return address's lookup lands. */
            if (lo - at >= 4 && insn_at(d, (lo - at) / 4 - 1) == INSN_NOP)
                lo -= 4;
            err = cfi_push_fde(
                b, &(struct fde){.start = lo, .end = hi, .synth = true, .synth_signal = true});
            b->t->stats.signal_rows++;
        } else if (frameless((const uint8_t *)d->d_buf + (lo - at), (hi - lo) / 4)) {
            err = cfi_push_fde(b, &(struct fde){.start = lo, .end = hi, .synth = true});
        }
        if (err)
            return err;
    }
    if (b->nfdes)
        b->t->stats.source = CFI_SRC_SYNTH;
    return 0;
}

int cfi_arm64_synth_fdes(struct build *b, Elf *e, size_t shstrndx)
{
    return b->nfdes ? plt_fdes(b, e, shstrndx) : vdso_fdes(b, e);
}

int cfi_synth_rows(struct build *b, const struct fde *f, bool gap_after)
{
    const struct cx_cfi_row in_lr = {.rule = CX_CFI_RULE_RA(CX_CFA_SP, CX_FP_SAME, CX_RA_DEFAULT)};
    const struct cx_cfi_row signal = {.rule = CX_CFI_RULE(CX_CFA_SIGNAL, CX_FP_SAME)};
    /* After PLT0's push: CFA = sp + 16, x30 at CFA - 8. */
    const struct cx_cfi_row pushed = {
        .cfa_off = 2, .rule = CX_CFI_RULE_RA(CX_CFA_SP, CX_FP_SAME, CX_RA_AT_CFA), .fp_off = -1};
    int err = cfi_add_row(b, f->start, f->synth_signal ? signal : in_lr);

    if (!err && f->synth_at && f->synth_at < f->end)
        err = cfi_add_row(b, f->synth_at, pushed);
    if (!err && f->synth_at && f->synth_end < f->end)
        err = cfi_add_row(b, f->synth_end, in_lr);
    if (!err && gap_after)
        err = cfi_add_row(b, f->end, (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_NONE, 0)});
    return err;
}

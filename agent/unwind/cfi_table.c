#include "cfi_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define DEFAULT_MAX_SECTION (64ull << 20)
#define DEFAULT_MAX_FDE (64u << 10)
#define DEFAULT_MAX_MS 5000u
#define MAX_SEGS 64  /* executable PT_LOAD segments looked at */
#define MAX_CIES 256 /* CIEs cached while enumerating; more are parsed again */

#ifndef SHT_X86_64_UNWIND
#define SHT_X86_64_UNWIND 0x70000001 /* what some linkers give .eh_frame on x86_64 */
#endif

/* --- what is specific to the architecture ------------------------------- */

struct arch {
    unsigned machine; /* e_machine */
    int sp, fp, ra;   /* DWARF register numbers */
    int64_t ra_off;   /* the return address is at CFA + ra_off */
    /* True when ops is the CFA expression of the linker's PLT stubs; *thresh
     * is the byte offset in a 16-byte stub CX_CFA_PLT compares with. */
    bool (*plt)(const Dwarf_Op *ops, size_t n, int64_t *thresh);
};

/* ld's .plt (and .plt.sec's lazy stubs): each stub pushes once, after K
 * bytes, so CFA = rsp + 8 + ((rip & 15) >= K ? 8 : 0), written as
 * DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_litK;
 * DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus. */
static bool x86_64_plt(const Dwarf_Op *ops, size_t n, int64_t *thresh)
{
    static const uint8_t shape[] = {DW_OP_breg7, DW_OP_breg16, DW_OP_lit15, DW_OP_and, 0 /* K */,
                                    DW_OP_ge,    DW_OP_lit3,   DW_OP_shl,   DW_OP_plus};

    if (n != sizeof(shape))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (i == 4 ? ops[i].atom < DW_OP_lit0 || ops[i].atom > DW_OP_lit31
                   : ops[i].atom != shape[i])
            return false;
    }
    if (ops[0].number != 8 || ops[1].number != 0)
        return false;
    *thresh = ops[4].atom - DW_OP_lit0;
    return true;
}

static const struct arch arches[] = {
    {EM_X86_64, 7, 6, 16, -8, x86_64_plt},
};

/* --- the build's state --------------------------------------------------- */

struct fde {
    uint64_t start, end;
};

struct cie {
    Dwarf_Off off;
    bool ok;     /* its FDEs' addresses can be read */
    uint8_t enc; /* how they are encoded (augmentation 'R') */
};

struct build {
    const struct arch *arch;
    struct cfi_table_opts o;
    unsigned char ident[EI_NIDENT];
    struct {
        uint64_t lo, hi;
    } segs[MAX_SEGS];
    unsigned nsegs;
    struct cie cies[MAX_CIES];
    unsigned ncies;
    struct fde *fdes;
    size_t nfdes, fdes_cap;
    struct cfi_table *t;
    uint32_t rows_cap;
    uint64_t deadline;
    uint64_t steps; /* rows asked of libdw, for the deadline */
    char *err;
    size_t errlen;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Writes the reason into the caller's buffer and returns code. */
__attribute__((format(printf, 3, 4))) static int fail(struct build *b, int code, const char *fmt,
                                                      ...)
{
    va_list ap;

    if (b->err && b->errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(b->err, b->errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

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

/* The FDE address encoding of a CIE, from its 'z' augmentation data. A CIE
 * whose initial instructions are longer than max_insns is refused like an
 * FDE that is: libdw allocates a state per DW_CFA_remember_state. */
static void parse_cie(const Dwarf_CIE *c, uint32_t max_insns, struct cie *out)
{
    const char *aug = c->augmentation;
    const uint8_t *p = c->augmentation_data, *end = p + c->augmentation_data_size;
    uint64_t skip;

    out->ok = false;
    out->enc = DW_EH_PE_absptr;
    if (!c->initial_instructions || c->initial_instructions_end < c->initial_instructions ||
        (uint64_t)(c->initial_instructions_end - c->initial_instructions) > max_insns)
        return;
    if (!aug || aug[0] == '\0') {
        out->ok = true;
        return;
    }
    if (aug[0] != 'z' || !p)
        return; /* "eh" and other pre-'z' forms: not written by current tools */
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
        case 'S': /* a signal frame: libdw reports it per row */
        case 'B': /* arm64 BTI, MTE: no data */
        case 'G':
            break;
        default:
            return; /* where the rest of the data lies is unknown */
        }
    }
    out->ok = true;
}

static const struct cie *cie_at(struct build *b, Elf_Data *d, bool eh, Dwarf_Off off)
{
    Dwarf_CFI_Entry ent;
    Dwarf_Off next;
    struct cie *c;

    for (unsigned i = 0; i < b->ncies; i++) {
        if (b->cies[i].off == off)
            return &b->cies[i];
    }
    /* Real files have a handful; a hostile one with thousands only costs a
     * parse per FDE. */
    c = &b->cies[b->ncies < MAX_CIES ? b->ncies++ : off % MAX_CIES];
    c->off = off;
    c->ok = false;
    if (off < d->d_size && dwarf_next_cfi(b->ident, d, eh, off, &next, &ent) == 0 &&
        dwarf_cfi_cie_p(&ent))
        parse_cie(&ent.cie, b->o.max_fde_bytes, c);
    return c;
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
static int collect_fdes(struct build *b, Elf_Data *d, bool eh, uint64_t sec_va)
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
        const struct cie *c = cie_at(b, d, eh, ent.fde.CIE_pointer);
        const uint8_t *p = ent.fde.start, *end = ent.fde.end;
        uint64_t field_va = sec_va + (uint64_t)(p - (const uint8_t *)d->d_buf);
        if (!c->ok || !read_addr(&p, end, c->enc, field_va, &start) ||
            !read_value(&p, end, c->enc & 0x0f, &range)) {
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
        if (b->nfdes == b->fdes_cap) {
            if (b->nfdes >= b->o.max_rows)
                return fail(b, -E2BIG, "more than %u FDEs", b->o.max_rows);
            size_t cap = b->fdes_cap ? b->fdes_cap * 2 : 1024;
            struct fde *n = realloc(b->fdes, cap * sizeof(*n));
            if (!n)
                return fail(b, -ENOMEM, "out of memory for %zu FDEs", cap);
            b->fdes = n;
            b->fdes_cap = cap;
        }
        b->fdes[b->nfdes++] = (struct fde){start, start + range};
    }
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
static void order_fdes(struct build *b)
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

/* --- rows ---------------------------------------------------------------- */

static bool breg(const Dwarf_Op *op, int *reg, int64_t *off)
{
    if (op->atom >= DW_OP_breg0 && op->atom <= DW_OP_breg31) {
        *reg = op->atom - DW_OP_breg0;
        *off = (int64_t)op->number;
        return true;
    }
    if (op->atom == DW_OP_bregx && op->number < 0x10000) {
        *reg = (int)op->number;
        *off = (int64_t)op->number2;
        return true;
    }
    return false;
}

/* The location CFA + *off: how libdw writes DW_CFA_offset and its kin. */
static bool at_cfa(const Dwarf_Op *ops, size_t n, int64_t *off)
{
    if (n < 1 || n > 2 || ops[0].atom != DW_OP_call_frame_cfa)
        return false;
    if (n == 1) {
        *off = 0;
        return true;
    }
    if (ops[1].atom != DW_OP_plus_uconst)
        return false;
    *off = (int64_t)ops[1].number;
    return true;
}

/* off in units of 8, when it is a multiple of 8 within [lo, hi] units. */
static bool units(int64_t off, int64_t lo, int64_t hi, int64_t *u)
{
    if (off % 8 != 0 || off / 8 < lo || off / 8 > hi)
        return false;
    *u = off / 8;
    return true;
}

static struct cx_cfi_row unsupported(struct build *b, enum cfi_table_unsup why)
{
    b->t->stats.unsupported[why]++;
    return (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_UNSUPPORTED, CX_FP_SAME)};
}

/* libdw's frame state at one row, as a rule BPF can follow. */
static struct cx_cfi_row classify(struct build *b, Dwarf_Frame *fr, bool signal, int ra_reg)
{
    const struct arch *a = b->arch;
    struct cfi_table_stats *st = &b->t->stats;
    Dwarf_Op mem[3], *ops;
    size_t n;
    int reg;
    int64_t off, u, fp_u = 0;
    enum cx_cfa_type cfa;
    enum cx_fp_type fp;

    if (signal) { /* BPF reads the kernel's ucontext: nothing else applies */
        st->signal_rows++;
        return (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_SIGNAL, CX_FP_SAME)};
    }
    if (ra_reg != a->ra)
        return unsupported(b, CFI_UNSUP_RA);
    if (dwarf_frame_register(fr, a->ra, mem, &ops, &n) < 0)
        return unsupported(b, CFI_UNSUP_CFI);
    if (n == 0 && ops == mem) { /* libdw's "undefined": the outermost frame */
        st->end_rows++;
        return (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_END, CX_FP_SAME)};
    }
    /* Checked after the CFA: a row with neither (longjmp's CFA = rdi) counts
     * as what it is first. */
    bool ra_ok = at_cfa(ops, n, &off) && off == a->ra_off;

    if (dwarf_frame_cfa(fr, &ops, &n) < 0 || n == 0)
        return unsupported(b, CFI_UNSUP_CFI);
    if (n <= 2 && breg(&ops[0], &reg, &off) && (n == 1 || ops[1].atom == DW_OP_deref)) {
        /* A register rule comes as DW_OP_bregx; DW_OP_bregN N alone is the
         * same rule written as an expression. */
        if (reg == a->sp)
            cfa = n == 1 ? CX_CFA_SP : CX_CFA_DEREF_SP;
        else if (reg == a->fp)
            cfa = n == 1 ? CX_CFA_FP : CX_CFA_DEREF_FP;
        else
            return unsupported(b, CFI_UNSUP_CFA_REG);
        if (!units(off, INT16_MIN, INT16_MAX, &u))
            return unsupported(b, CFI_UNSUP_OFFSET);
    } else if (a->plt(ops, n, &u)) {
        cfa = CX_CFA_PLT;
        st->plt_rows++;
    } else {
        return unsupported(b, CFI_UNSUP_CFA_EXPR);
    }
    if (!ra_ok)
        return unsupported(b, CFI_UNSUP_RA);

    if (dwarf_frame_register(fr, a->fp, mem, &ops, &n) < 0)
        return unsupported(b, CFI_UNSUP_CFI);
    if (n == 0) { /* same value or undefined: the caller's fp is this one */
        fp = CX_FP_SAME;
    } else if (at_cfa(ops, n, &off)) {
        fp = CX_FP_AT_CFA;
    } else if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa && breg(&ops[1], &reg, &off) &&
               reg == a->fp) {
        /* DW_CFA_expression fp: DW_OP_breg6 N; libdw pushes the CFA first */
        fp = CX_FP_AT_FP;
    } else {
        return unsupported(b, CFI_UNSUP_FP_RULE);
    }
    if (fp != CX_FP_SAME && !units(off, INT8_MIN, INT8_MAX, &fp_u))
        return unsupported(b, CFI_UNSUP_OFFSET);
    return (struct cx_cfi_row){
        .cfa_off = (__s16)u, .rule = CX_CFI_RULE(cfa, fp), .fp_off = (__s8)fp_u};
}

/* Appends the rule for [addr, ...), merged into the last row when equal. */
static int add_row(struct build *b, uint64_t addr, struct cx_cfi_row r)
{
    struct cfi_table *t = b->t;

    if (t->stats.rows_raw < UINT32_MAX)
        t->stats.rows_raw++;
    r.pc = (__u32)(addr - t->base);
    if (t->n > 0) {
        const struct cx_cfi_row *last = &t->rows[t->n - 1];
        if (last->rule == r.rule && last->cfa_off == r.cfa_off && last->fp_off == r.fp_off)
            return 0;
        if (last->pc >= r.pc) /* FDEs are disjoint and rows advance: cannot happen */
            return fail(b, -EINVAL, "rows out of order at 0x%" PRIx64, addr);
    }
    if (t->n == b->rows_cap) {
        if (t->n >= b->o.max_rows)
            return fail(b, -E2BIG, "more than %u rows", b->o.max_rows);
        uint64_t cap = t->n ? (uint64_t)t->n * 2 : 4096;
        if (cap > b->o.max_rows)
            cap = b->o.max_rows;
        struct cx_cfi_row *rows = realloc(t->rows, cap * sizeof(*rows));
        if (!rows)
            return fail(b, -ENOMEM, "out of memory for %" PRIu64 " rows", cap);
        t->rows = rows;
        b->rows_cap = (uint32_t)cap;
    }
    t->rows[t->n++] = r;
    return 0;
}

/* Every row of FDE f, libdw's frame state at each; then a CX_CFA_NONE row at
 * its end when no FDE starts there. A row libdw cannot give ends the FDE
 * with an unsupported row: what follows in it is unknown. */
static int walk_fde(struct build *b, Dwarf_CFI *cfi, const struct fde *f, bool gap_after)
{
    uint64_t addr = f->start;
    int err;

    while (addr < f->end) {
        Dwarf_Frame *fr = NULL;
        Dwarf_Addr start, end;
        bool signal;
        struct cx_cfi_row r;

        /* A clock read costs about what a row does: every 64th row. */
        if ((++b->steps & 63) == 0 && now_ns() > b->deadline)
            return fail(b, -ETIME, "took more than %u ms (at 0x%" PRIx64 ")", b->o.max_ms, addr);
        if (dwarf_cfi_addrframe(cfi, addr, &fr) != 0) {
            r = unsupported(b, CFI_UNSUP_CFI);
            end = f->end;
        } else {
            int ra = dwarf_frame_info(fr, &start, &end, &signal);
            /* libdw finds the FDE by address itself (through .eh_frame_hdr):
             * make sure it is this one. */
            if (ra < 0 || start > addr || start < f->start || end <= addr || end > f->end) {
                r = unsupported(b, CFI_UNSUP_CFI);
                end = f->end;
            } else {
                r = classify(b, fr, signal, ra);
            }
        }
        free(fr);
        err = add_row(b, addr, r);
        if (err)
            return err;
        addr = end;
    }
    if (gap_after)
        return add_row(b, f->end, (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_NONE, 0)});
    return 0;
}

/* --- sections ------------------------------------------------------------ */

static Elf_Scn *find_section(Elf *e, size_t shstrndx, const char *name, GElf_Shdr *sh)
{
    for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
        const char *n;
        if (gelf_getshdr(s, sh) && (n = elf_strptr(e, shstrndx, sh->sh_name)) &&
            strcmp(n, name) == 0)
            return s;
    }
    return NULL;
}

/* The section's bytes (uncompressed), after checking its size against the
 * file and the cap: libelf reads it into memory whole. */
static int section_data(struct build *b, Elf_Scn *s, const GElf_Shdr *sh, const char *name,
                        uint64_t file_size, Elf_Data **out)
{
    uint64_t size = sh->sh_size;
    Elf_Data *d;

    if (sh->sh_type == SHT_NOBITS)
        return fail(b, -ENOENT, "%s has no bytes in the file (a debug file?)", name);
    if (sh->sh_offset > file_size || sh->sh_size > file_size - sh->sh_offset)
        return fail(b, -EINVAL, "%s runs past the end of the file", name);
    if (sh->sh_flags & SHF_COMPRESSED) {
        GElf_Chdr ch;
        if (!gelf_getchdr(s, &ch))
            return fail(b, -EINVAL, "%s: bad compression header", name);
        size = ch.ch_size;
    }
    if (size > b->o.max_section_bytes)
        return fail(b, -E2BIG, "%s is %" PRIu64 " bytes, over the cap of %" PRIu64, name, size,
                    b->o.max_section_bytes);
    if ((sh->sh_flags & SHF_COMPRESSED) && elf_compress(s, 0, 0) < 0)
        return fail(b, -EINVAL, "%s: %s", name, elf_errmsg(-1));
    d = elf_getdata(s, NULL);
    if (!d || !d->d_buf || d->d_size != size)
        return fail(b, -EINVAL, "%s: %s", name, d ? "size mismatch" : elf_errmsg(-1));
    *out = d;
    return 0;
}

/* libdw's view of one CFI section: an ELF image of our own that holds just
 * that section, at its address (pc-relative pointers are relative to it).
 * Not the real file, for two reasons:
 *   .eh_frame_hdr stays out. libdw trusts its search table, and in 0.188 an
 *   FDE offset there just below the section's start passes
 *   dwarf_next_cfi()'s bounds check (reads before the buffer, seen under
 *   valgrind on garbled files). Without the table libdw finds FDEs by
 *   reading .eh_frame in order, as we do, at the same speed (figures in
 *   the commit).
 *   dwarf_begin_elf() on the real file would read every debug section into
 *   memory (hundreds of MiB with full debug info) to use .debug_frame. */
struct cfi_src {
    void *img;
    Elf *elf;
    Dwarf *dw;
    Dwarf_CFI *cfi;
    Elf_Data *d; /* the section in img */
};

static int cfi_src__open(struct build *b, const GElf_Ehdr *eh, const GElf_Shdr *orig,
                         const Elf_Data *data, bool eh_frame, struct cfi_src *src)
{
    /* section names: 1 is ".eh_frame" or ".debug_frame", then ".shstrtab" */
    char names[32];
    const char *name = eh_frame ? ".eh_frame" : ".debug_frame";
    int nlen = snprintf(names, sizeof(names), "%c%s%c.shstrtab", 0, name, 0) + 1;
    size_t data_off = sizeof(Elf64_Ehdr), names_off = data_off + data->d_size;
    size_t sh_off = (names_off + (size_t)nlen + 7) & ~(size_t)7;
    size_t size = sh_off + 3 * sizeof(Elf64_Shdr);
    uint8_t *img;

    img = src->img = calloc(1, size);
    if (!img)
        return fail(b, -ENOMEM, "out of memory for a copy of %s", name);
    Elf64_Ehdr *h = (Elf64_Ehdr *)img;
    memcpy(h->e_ident, eh->e_ident, EI_NIDENT);
    h->e_type = eh->e_type;
    h->e_machine = eh->e_machine;
    h->e_version = EV_CURRENT;
    h->e_shoff = sh_off;
    h->e_ehsize = sizeof(Elf64_Ehdr);
    h->e_shentsize = sizeof(Elf64_Shdr);
    h->e_shnum = 3;
    h->e_shstrndx = 2;
    memcpy(img + data_off, data->d_buf, data->d_size);
    memcpy(img + names_off, names, (size_t)nlen);
    Elf64_Shdr *sh = (Elf64_Shdr *)(img + sh_off);
    sh[1] = (Elf64_Shdr){.sh_name = 1,
                         .sh_type = SHT_PROGBITS,
                         .sh_flags = eh_frame ? SHF_ALLOC : 0,
                         .sh_addr = eh_frame ? orig->sh_addr : 0,
                         .sh_offset = data_off,
                         .sh_size = data->d_size,
                         .sh_addralign = 1};
    sh[2] = (Elf64_Shdr){.sh_name = (Elf64_Word)strlen(name) + 2,
                         .sh_type = SHT_STRTAB,
                         .sh_offset = names_off,
                         .sh_size = (Elf64_Xword)nlen,
                         .sh_addralign = 1};
    src->elf = elf_memory((char *)img, size);
    Elf_Scn *s = src->elf ? elf_getscn(src->elf, 1) : NULL;
    src->d = s ? elf_getdata(s, NULL) : NULL;
    if (!src->d || src->d->d_size != data->d_size)
        return fail(b, -EINVAL, "%s: %s", name, elf_errmsg(-1));
    return 0;
}

/* Asks libdw for the CFI of the image (after our enumeration found FDEs). */
static int cfi_src__cfi(struct build *b, bool eh_frame, struct cfi_src *src)
{
    if (eh_frame) {
        src->cfi = dwarf_getcfi_elf(src->elf);
    } else {
        src->dw = dwarf_begin_elf(src->elf, DWARF_C_READ, NULL);
        src->cfi = src->dw ? dwarf_getcfi(src->dw) : NULL;
    }
    if (!src->cfi)
        return fail(b, -EINVAL, "libdw cannot read the CFI: %s", dwarf_errmsg(-1));
    return 0;
}

/* src may be zeroed, or half open. */
static void cfi_src__close(struct cfi_src *src)
{
    if (src->dw)
        dwarf_end(src->dw); /* and dwarf_getcfi()'s CFI with it */
    else
        dwarf_cfi_end(src->cfi);
    elf_end(src->elf);
    free(src->img);
    memset(src, 0, sizeof(*src));
}

static void defaults(struct cfi_table_opts *o, const struct cfi_table_opts *in)
{
    *o = in ? *in : (struct cfi_table_opts){0};
    if (!o->max_rows || o->max_rows > CX_CFI_MAX_ROWS)
        o->max_rows = CX_CFI_MAX_ROWS;
    if (!o->max_section_bytes)
        o->max_section_bytes = DEFAULT_MAX_SECTION;
    if (!o->max_fde_bytes)
        o->max_fde_bytes = DEFAULT_MAX_FDE;
    if (!o->max_ms)
        o->max_ms = DEFAULT_MAX_MS;
}

/* The executable PT_LOAD segments: FDEs elsewhere describe no code a
 * process runs (or are garbage). */
static int text_segments(struct build *b, Elf *e)
{
    size_t nph;

    if (elf_getphdrnum(e, &nph) != 0)
        return fail(b, -EINVAL, "no program headers: %s", elf_errmsg(-1));
    for (size_t i = 0; i < nph && b->nsegs < MAX_SEGS; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) ||
            ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
            continue;
        b->segs[b->nsegs].lo = ph.p_vaddr;
        b->segs[b->nsegs++].hi = ph.p_vaddr + ph.p_memsz;
    }
    if (b->nsegs == 0)
        return fail(b, -ENOENT, "no executable segment");
    return 0;
}

int cfi_table__build(int fd, const struct cfi_table_opts *opts, struct cfi_table **out, char *err,
                     size_t errlen)
{
    struct build b = {.err = err, .errlen = errlen};
    uint64_t t0 = now_ns();
    Elf *elf = NULL;
    struct cfi_src src = {0};
    Elf_Data *d = NULL;
    bool found = false;
    GElf_Ehdr eh;
    GElf_Shdr sh;
    Elf_Scn *s;
    struct stat stt;
    size_t shstrndx;
    int ret;

    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    defaults(&b.o, opts);
    b.deadline = t0 + (uint64_t)b.o.max_ms * 1000000ull;
    b.t = calloc(1, sizeof(*b.t));
    if (!b.t) {
        ret = fail(&b, -ENOMEM, "out of memory");
        goto cleanup;
    }
    if (fstat(fd, &stt) != 0) {
        ret = fail(&b, -errno, "fstat: %s", strerror(errno));
        goto cleanup;
    }
    elf_version(EV_CURRENT);
    /* Read, not mapped: a file truncated under us must not raise SIGBUS. */
    elf = elf_begin(fd, ELF_C_READ, NULL);
    if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
        ret = fail(&b, -EINVAL, "not an ELF file");
        goto cleanup;
    }
    memcpy(b.ident, eh.e_ident, EI_NIDENT);
    for (size_t i = 0; i < sizeof(arches) / sizeof(arches[0]); i++) {
        if (arches[i].machine == eh.e_machine)
            b.arch = &arches[i];
    }
    if (!b.arch || eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
        ret = fail(&b, -EINVAL, "machine %u, class %u: no unwinder for it", eh.e_machine,
                   eh.e_ident[EI_CLASS]);
        goto cleanup;
    }
    if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) {
        ret = fail(&b, -EINVAL, "ELF type %u is not an executable or a shared object", eh.e_type);
        goto cleanup;
    }
    ret = text_segments(&b, elf);
    if (ret)
        goto cleanup;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0) {
        ret = fail(&b, -EINVAL, "no section names: %s", elf_errmsg(-1));
        goto cleanup;
    }

    /* .eh_frame, or .debug_frame when that is all there is. */
    for (int pass = 0; pass < 2 && b.nfdes == 0; pass++) {
        bool eh_frame = pass == 0;
        const char *name = eh_frame ? ".eh_frame" : ".debug_frame";
        s = find_section(elf, shstrndx, name, &sh);
        if (!s || sh.sh_size == 0 ||
            (eh_frame && sh.sh_type != SHT_PROGBITS && sh.sh_type != SHT_X86_64_UNWIND) ||
            (!eh_frame && sh.sh_type != SHT_PROGBITS))
            continue;
        found = true;
        ret = section_data(&b, s, &sh, name, (uint64_t)stt.st_size, &d);
        if (ret)
            goto cleanup;
        cfi_src__close(&src);
        ret = cfi_src__open(&b, &eh, &sh, d, eh_frame, &src);
        if (ret)
            goto cleanup;
        memset(b.t->stats.skipped, 0, sizeof(b.t->stats.skipped));
        b.t->stats.source = eh_frame ? CFI_SRC_EH_FRAME : CFI_SRC_DEBUG_FRAME;
        ret = collect_fdes(&b, src.d, eh_frame, eh_frame ? sh.sh_addr : 0);
        if (ret)
            goto cleanup;
        if (b.nfdes > 0) {
            ret = cfi_src__cfi(&b, eh_frame, &src);
            if (ret)
                goto cleanup;
        }
    }
    if (!found) {
        ret = fail(&b, -ENOENT, "no .eh_frame or .debug_frame");
        goto cleanup;
    }
    if (b.nfdes == 0) {
        ret = fail(&b, -ENOENT, "no FDE for code in an executable segment");
        goto cleanup;
    }

    order_fdes(&b);
    for (size_t i = 0; i < b.nfdes; i++) {
        bool gap = i + 1 == b.nfdes || b.fdes[i + 1].start != b.fdes[i].end;
        ret = walk_fde(&b, src.cfi, &b.fdes[i], gap);
        if (ret)
            goto cleanup;
    }
    b.t->stats.fdes = (uint32_t)b.nfdes;
    b.t->stats.rows = b.t->n;
    b.t->stats.bytes = (uint64_t)b.t->n * sizeof(struct cx_cfi_row);
    if (b.t->n < b.rows_cap) { /* give back the doubling's slack */
        struct cx_cfi_row *rows = realloc(b.t->rows, b.t->n * sizeof(*rows));
        if (rows)
            b.t->rows = rows;
    }
    b.t->stats.build_ns = now_ns() - t0;
    *out = b.t;
    b.t = NULL;
    ret = 0;

cleanup:
    cfi_src__close(&src);
    elf_end(elf);
    free(b.fdes);
    cfi_table__free(b.t);
    return ret;
}

void cfi_table__free(struct cfi_table *t)
{
    if (!t)
        return;
    free(t->rows);
    free(t);
}

const char *cfi_table__unsup_name(enum cfi_table_unsup r)
{
    static const char *const names[CFI_UNSUP__N] = {
        [CFI_UNSUP_CFA_REG] = "cfa_reg", [CFI_UNSUP_CFA_EXPR] = "cfa_expr",
        [CFI_UNSUP_RA] = "ra",           [CFI_UNSUP_FP_RULE] = "fp_rule",
        [CFI_UNSUP_OFFSET] = "offset",   [CFI_UNSUP_CFI] = "bad_cfi",
    };
    return (unsigned)r < CFI_UNSUP__N ? names[r] : "?";
}

const char *cfi_table__skip_name(enum cfi_table_skip r)
{
    static const char *const names[CFI_SKIP__N] = {
        [CFI_SKIP_EMPTY] = "empty",     [CFI_SKIP_NOT_TEXT] = "not_text",
        [CFI_SKIP_OVERLAP] = "overlap", [CFI_SKIP_BAD] = "bad",
        [CFI_SKIP_TOO_BIG] = "too_big", [CFI_SKIP_FAR] = "far",
    };
    return (unsigned)r < CFI_SKIP__N ? names[r] : "?";
}

/* Appends " name count" for each nonzero count, after label. */
static size_t counts_str(char *buf, size_t len, size_t at, const char *label,
                         const uint32_t *counts, unsigned n, const char *(*name)(int))
{
    bool first = true;

    for (unsigned i = 0; i < n; i++) {
        if (!counts[i])
            continue;
        int w = snprintf(buf + (at < len ? at : len), at < len ? len - at : 0, "%s %s %u",
                         first ? label : ",", name((int)i), counts[i]);
        first = false;
        if (w > 0)
            at += (size_t)w;
    }
    return at;
}

static const char *unsup_name_int(int r)
{
    return cfi_table__unsup_name((enum cfi_table_unsup)r);
}

static const char *skip_name_int(int r)
{
    return cfi_table__skip_name((enum cfi_table_skip)r);
}

int cfi_table__stats_str(const struct cfi_table_stats *s, char *buf, size_t len)
{
    int w =
        snprintf(buf, len, "%s: %u FDEs, %u rows (%u before merging), %" PRIu64 " bytes, %.1f ms",
                 s->source == CFI_SRC_DEBUG_FRAME   ? "debug_frame"
                 : s->source == CFI_SRC_GOPCLNTAB   ? "gopclntab"
                 : s->source == CFI_SRC_EH_FRAME_GO ? "eh_frame+gopclntab"
                                                    : "eh_frame",
                 s->fdes, s->rows, s->rows_raw, s->bytes, (double)s->build_ns / 1e6);
    size_t at = w > 0 ? (size_t)w : 0;

    at = counts_str(buf, len, at, "; unsupported:", s->unsupported, CFI_UNSUP__N, unsup_name_int);
    at = counts_str(buf, len, at, "; FDEs skipped:", s->skipped, CFI_SKIP__N, skip_name_int);
    return at > INT32_MAX ? INT32_MAX : (int)at;
}

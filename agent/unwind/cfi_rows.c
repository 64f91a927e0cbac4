/* libdw's frame state at each row of an FDE, turned into a BPF rule and
 * merged: the reference the tests compare cfi_exec.c's rows with (and the
 * table's row appending both share). */
#include "cfi_table_int.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

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

struct cx_cfi_row cfi_unsup(struct build *b, enum cfi_table_unsup why)
{
    b->t->stats.unsupported[why]++;
    return (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_UNSUPPORTED, CX_FP_SAME)};
}

struct cx_cfi_row cfi_lr_row(struct build *b, enum cx_cfa_type cfa, int64_t cfa_u,
                             enum cx_fp_type fp, int64_t fp_u, bool ra_saved, int64_t ra_off)
{
    enum cx_ra_type ra = CX_RA_DEFAULT;
    int64_t u;

    if (ra_saved) {
        if (!units(ra_off, INT16_MIN, INT16_MAX, &u))
            return cfi_unsup(b, CFI_UNSUP_OFFSET);
        if (fp == CX_FP_AT_CFA && fp_u + 1 == u) {
            ra = CX_RA_AFTER_FP; /* stp x29, x30: the frame record */
        } else if (fp == CX_FP_SAME) {
            ra = CX_RA_AT_CFA; /* x30 alone (str x30, or stp x19, x30) */
            fp_u = u;
        } else {
            return cfi_unsup(b, CFI_UNSUP_RA); /* both saved, apart: one offset in a row */
        }
    }
    /* A big frame keeps its frame record at its bottom (sub sp, sp, #1968;
     * stp x29, x30, [sp]): too far below the CFA for a row's 8 bits, but
     * near the register the CFA is computed from. */
    if (fp == CX_FP_AT_CFA && (fp_u < INT8_MIN || fp_u > INT8_MAX) &&
        (cfa == CX_CFA_SP || cfa == CX_CFA_FP)) {
        fp_u += cfa_u;
        fp = cfa == CX_CFA_SP ? CX_FP_AT_SP : CX_FP_AT_FP;
    }
    if (fp_u < INT8_MIN || fp_u > INT8_MAX)
        return cfi_unsup(b, CFI_UNSUP_OFFSET);
    return (struct cx_cfi_row){
        .cfa_off = (__s16)cfa_u, .rule = CX_CFI_RULE_RA(cfa, fp, ra), .fp_off = (__s8)fp_u};
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
        return cfi_unsup(b, CFI_UNSUP_RA);
    if (dwarf_frame_register(fr, a->ra, mem, &ops, &n) < 0)
        return cfi_unsup(b, CFI_UNSUP_CFI);
    if (n == 0 && ops == mem) { /* libdw's "undefined": the outermost frame */
        st->end_rows++;
        return (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_END, CX_FP_SAME)};
    }
    /* Checked after the CFA: a row with neither (longjmp's CFA = rdi) counts
     * as what it is first. With a link register, "same value" (ops NULL)
     * is the return address still in it. */
    int64_t ra_off = 0;
    bool ra_saved = at_cfa(ops, n, &ra_off);
    bool ra_ok = a->lr ? ra_saved || (n == 0 && ops == NULL) : ra_saved && ra_off == a->ra_off;

    if (dwarf_frame_cfa(fr, &ops, &n) < 0 || n == 0)
        return cfi_unsup(b, CFI_UNSUP_CFI);
    if (n <= 2 && breg(&ops[0], &reg, &off) && (n == 1 || ops[1].atom == DW_OP_deref)) {
        /* A register rule comes as DW_OP_bregx; DW_OP_bregN N alone is the
         * same rule written as an expression. */
        if (reg == a->sp)
            cfa = n == 1 ? CX_CFA_SP : CX_CFA_DEREF_SP;
        else if (reg == a->fp)
            cfa = n == 1 ? CX_CFA_FP : CX_CFA_DEREF_FP;
        else
            return cfi_unsup(b, CFI_UNSUP_CFA_REG);
        if (!units(off, INT16_MIN, INT16_MAX, &u))
            return cfi_unsup(b, CFI_UNSUP_OFFSET);
    } else if (a->plt && a->plt(ops, n, &u)) {
        cfa = CX_CFA_PLT;
        st->plt_rows++;
    } else {
        return cfi_unsup(b, CFI_UNSUP_CFA_EXPR);
    }
    if (!ra_ok)
        return cfi_unsup(b, CFI_UNSUP_RA);

    if (dwarf_frame_register(fr, a->fp, mem, &ops, &n) < 0)
        return cfi_unsup(b, CFI_UNSUP_CFI);
    if (n == 0) { /* same value or undefined: the caller's fp is this one */
        fp = CX_FP_SAME;
    } else if (at_cfa(ops, n, &off)) {
        fp = CX_FP_AT_CFA;
    } else if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa && breg(&ops[1], &reg, &off) &&
               reg == a->fp) {
        /* DW_CFA_expression fp: DW_OP_breg6 N; libdw pushes the CFA first */
        fp = CX_FP_AT_FP;
    } else {
        return cfi_unsup(b, CFI_UNSUP_FP_RULE);
    }
    /* With a link register cfi_lr_row narrows the offset (it may rebase it). */
    if (fp != CX_FP_SAME &&
        !units(off, a->lr ? INT16_MIN : INT8_MIN, a->lr ? INT16_MAX : INT8_MAX, &fp_u))
        return cfi_unsup(b, CFI_UNSUP_OFFSET);
    if (a->lr)
        return cfi_lr_row(b, cfa, u, fp, fp_u, ra_saved, ra_off);
    return (struct cx_cfi_row){
        .cfa_off = (__s16)u, .rule = CX_CFI_RULE(cfa, fp), .fp_off = (__s8)fp_u};
}

int cfi_add_row(struct build *b, uint64_t addr, struct cx_cfi_row r)
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
            return cfi_fail(b, -EINVAL, "rows out of order at 0x%" PRIx64, addr);
    }
    if (t->n == b->rows_cap) {
        if (t->n >= b->o.max_rows)
            return cfi_fail(b, -E2BIG, "more than %u rows", b->o.max_rows);
        uint64_t cap = t->n ? (uint64_t)t->n * 2 : 4096;
        if (cap > b->o.max_rows)
            cap = b->o.max_rows;
        struct cx_cfi_row *rows = realloc(t->rows, cap * sizeof(*rows));
        if (!rows)
            return cfi_fail(b, -ENOMEM, "out of memory for %" PRIu64 " rows", cap);
        t->rows = rows;
        b->rows_cap = (uint32_t)cap;
    }
    t->rows[t->n++] = r;
    return 0;
}

/* Every row of FDE f, libdw's frame state at each; then a CX_CFA_NONE row at
 * its end when no FDE starts there. A row libdw cannot give ends the FDE
 * with an unsupported row: what follows in it is unknown. */
int cfi_walk_fde(struct build *b, Dwarf_CFI *cfi, const struct fde *f, bool gap_after)
{
    uint64_t addr = f->start;
    int err;

    while (addr < f->end) {
        Dwarf_Frame *fr = NULL;
        Dwarf_Addr start, end;
        bool signal;
        struct cx_cfi_row r;

        /* A clock read costs about what a row does: every 64th row. */
        if ((++b->steps & 63) == 0 && cfi_now_ns() > b->deadline)
            return cfi_fail(b, -ETIME, "took more than %u ms (at 0x%" PRIx64 ")", b->o.max_ms,
                            addr);
        if (dwarf_cfi_addrframe(cfi, addr, &fr) != 0) {
            r = cfi_unsup(b, CFI_UNSUP_CFI);
            end = f->end;
        } else {
            int ra = dwarf_frame_info(fr, &start, &end, &signal);
            /* libdw finds the FDE by address itself (through .eh_frame_hdr):
             * make sure it is this one. */
            if (ra < 0 || start > addr || start < f->start || end <= addr || end > f->end) {
                r = cfi_unsup(b, CFI_UNSUP_CFI);
                end = f->end;
            } else {
                r = classify(b, fr, signal, ra);
            }
        }
        free(fr);
        err = cfi_add_row(b, addr, r);
        if (err)
            return err;
        addr = end;
    }
    if (gap_after)
        return cfi_add_row(b, f->end, (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_NONE, 0)});
    return 0;
}

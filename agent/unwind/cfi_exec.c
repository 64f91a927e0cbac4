/* Our own interpreter of an FDE's call frame program: one pass over its
 * instructions, a row at each advance.
 *
 * Why not libdw: dwarf_cfi_addrframe() answers one address at a time. Asked
 * for every row of an FDE it finds the FDE again (a tree search over all of
 * them), copies the CIE's state, runs the program from the start up to the
 * address and allocates a frame: quadratic in an FDE's rows, and 50 % of
 * the agent's CPU while a g++ compile was recorded (perf: libdw 37 %, its
 * tfind 9 %, malloc). This pass does the same work once per FDE. It follows
 * libdw's semantics (including the x86_64 ABI's initial rules and what an
 * error does to the rows after it) so the tables are the same; the unit
 * tests build every table both ways and compare them row by row.
 */
#include "cfi_table_int.h"

#include <dwarf.h>
#include <errno.h>
#include <elfutils/libdw.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define MAX_REMEMBER 32 /* DW_CFA_remember_state depth; compilers use 1-2 */
#define MAX_EXPR_OPS 10 /* longer expressions match no rule BPF follows */

enum reg_rule { R_UNSPEC, R_UNDEF, R_SAME, R_OFFSET, R_VAL_OFFSET, R_REG, R_EXPR, R_VAL_EXPR };
enum cfa_rule { CFA_OFF, CFA_EXPR, CFA_INVALID };

struct prog {
    const struct build *b;
    const struct cie *cie;
    const uint8_t *p, *end;
};

static bool uleb(struct prog *g, uint64_t *out)
{
    uint64_t v = 0;
    unsigned shift = 0;

    for (;;) {
        if (g->p >= g->end)
            return false;
        uint8_t byte = *g->p++;
        if (shift < 64)
            v |= (uint64_t)(byte & 0x7f) << shift;
        shift += 7;
        if (!(byte & 0x80))
            break;
    }
    *out = v;
    return true;
}

static bool sleb(struct prog *g, int64_t *out)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t byte;

    do {
        if (g->p >= g->end)
            return false;
        byte = *g->p++;
        if (shift < 64)
            v |= (uint64_t)(byte & 0x7f) << shift;
        shift += 7;
    } while (byte & 0x80);
    if (shift < 64 && (byte & 0x40))
        v |= ~0ull << shift;
    *out = (int64_t)v;
    return true;
}

static bool fixed(struct prog *g, unsigned size, uint64_t *out)
{
    uint64_t v = 0;

    if ((size_t)(g->end - g->p) < size)
        return false;
    for (unsigned i = 0; i < size; i++) /* little-endian, checked at the start */
        v |= (uint64_t)g->p[i] << (8 * i);
    g->p += size;
    *out = v;
    return true;
}

static struct cfi_reg_state *tracked(const struct build *b, struct cfi_state *fs, uint64_t reg)
{
    if (reg == (uint64_t)b->arch->ra)
        return &fs->ra;
    if (reg == (uint64_t)b->arch->fp)
        return &fs->fp;
    return NULL;
}

static void set_reg(const struct build *b, struct cfi_state *fs, uint64_t reg, uint8_t rule,
                    int64_t val)
{
    struct cfi_reg_state *r = tracked(b, fs, reg);

    if (r)
        *r = (struct cfi_reg_state){.rule = rule, .val = val};
}

/* A DW_FORM_block: its uleb length then the bytes, kept in place. */
static bool block(struct prog *g, const uint8_t **data, uint64_t *len)
{
    if (!uleb(g, len) || *len > (uint64_t)(g->end - g->p))
        return false;
    *data = g->p;
    g->p += *len;
    return true;
}

/* What running a program stopped at. */
enum step { STEP_ROW, STEP_END, STEP_ERR };

/* Applies op, one of the instructions that set the CFA's or a register's
 * rule (its operands read from g), to fs. Returns false when op is not one
 * of them or its operands are malformed (run() then fails: STEP_ERR). */
static bool rule(struct prog *g, struct cfi_state *fs, uint8_t op)
{
    const struct build *b = g->b;
    const struct cie *c = g->cie;
    uint64_t reg, u;
    int64_t s;

    switch (op) {
    case DW_CFA_def_cfa:
        if (!uleb(g, &reg) || !uleb(g, &u))
            return false;
        fs->cfa = CFA_OFF, fs->cfa_reg = reg, fs->cfa_off = (int64_t)u;
        return true;
    case DW_CFA_def_cfa_sf:
        if (!uleb(g, &reg) || !sleb(g, &s))
            return false;
        fs->cfa = CFA_OFF, fs->cfa_reg = reg, fs->cfa_off = s * c->data_align;
        return true;
    case DW_CFA_def_cfa_register:
        if (!uleb(g, &reg))
            return false;
        if (fs->cfa != CFA_OFF)
            fs->cfa = CFA_INVALID;
        fs->cfa_reg = reg;
        return true;
    case DW_CFA_def_cfa_offset:
        if (!uleb(g, &u))
            return false;
        if (fs->cfa != CFA_OFF)
            fs->cfa = CFA_INVALID;
        fs->cfa_off = (int64_t)u;
        return true;
    case DW_CFA_def_cfa_offset_sf:
        if (!sleb(g, &s))
            return false;
        if (fs->cfa != CFA_OFF)
            fs->cfa = CFA_INVALID;
        fs->cfa_off = s * c->data_align;
        return true;
    case DW_CFA_def_cfa_expression:
        if (!block(g, &fs->cfa_expr, &fs->cfa_expr_len))
            return false;
        fs->cfa = CFA_EXPR;
        return true;
    case DW_CFA_undefined:
    case DW_CFA_same_value:
        if (!uleb(g, &reg))
            return false;
        set_reg(b, fs, reg, op == DW_CFA_undefined ? R_UNDEF : R_SAME, 0);
        return true;
    case DW_CFA_offset_extended:
    case DW_CFA_val_offset:
        if (!uleb(g, &reg) || !uleb(g, &u))
            return false;
        set_reg(b, fs, reg, op == DW_CFA_val_offset ? R_VAL_OFFSET : R_OFFSET,
                (int64_t)u * c->data_align);
        return true;
    case DW_CFA_offset_extended_sf:
    case DW_CFA_val_offset_sf:
        if (!uleb(g, &reg) || !sleb(g, &s))
            return false;
        set_reg(b, fs, reg, op == DW_CFA_val_offset_sf ? R_VAL_OFFSET : R_OFFSET,
                s * c->data_align);
        return true;
    case DW_CFA_GNU_negative_offset_extended:
        if (!uleb(g, &reg) || !uleb(g, &u))
            return false;
        set_reg(b, fs, reg, R_OFFSET, -(int64_t)u * c->data_align);
        return true;
    case DW_CFA_register:
        if (!uleb(g, &reg) || !uleb(g, &u))
            return false;
        set_reg(b, fs, reg, R_REG, (int64_t)u);
        return true;
    case DW_CFA_expression:
    case DW_CFA_val_expression: {
        const uint8_t *e;
        if (!uleb(g, &reg) || !block(g, &e, &u))
            return false;
        struct cfi_reg_state *r = tracked(b, fs, reg);
        if (r)
            *r = (struct cfi_reg_state){
                .rule = op == DW_CFA_expression ? R_EXPR : R_VAL_EXPR, .expr = e, .expr_len = u};
        return true;
    }
    case DW_CFA_GNU_window_save:
        /* On arm64 the opcode is DW_CFA_AARCH64_negate_ra_state (paciasp
         * signed x30, or autiasp authenticated it): no operand, no rule,
         * as libdw reads it there; BPF strips the signature from every
         * return address. */
        if (b->arch->lr)
            return true;
        /* SPARC's shorthand, as libdw reads it */
        for (reg = 8; reg < 32; reg++)
            set_reg(b, fs, reg, reg < 16 ? R_REG : R_OFFSET,
                    reg < 16 ? (int64_t)reg + 16 : (int64_t)(reg - 16) * 8);
        return true;
    default:
        return false;
    }
}

/* Runs g's instructions until one moves the location (*adv is then the new
 * location: STEP_ROW), the program ends (STEP_END) or it is malformed
 * (STEP_ERR). cie_init: the CIE's own initial instructions, where restore is
 * invalid (as in libdw) and no advance is expected. */
static enum step run(struct prog *g, struct cfi_state *fs, const struct cfi_state *init,
                     struct cfi_state *stack, unsigned *depth, uint64_t loc, uint64_t *adv)
{
    const struct build *b = g->b;
    const struct cie *c = g->cie;
    uint64_t reg, u, a;

    while (g->p < g->end) {
        uint8_t op = *g->p++;
        switch (op & 0xc0) {
        case DW_CFA_advance_loc:
            a = op & 0x3f;
            goto advance;
        case DW_CFA_offset:
            if (!uleb(g, &u))
                return STEP_ERR;
            set_reg(b, fs, op & 0x3f, R_OFFSET, (int64_t)u * c->data_align);
            continue;
        case DW_CFA_restore:
            reg = op & 0x3f;
            goto restore;
        }
        switch (op) {
        case DW_CFA_nop:
            continue;
        case DW_CFA_advance_loc1:
            if (!fixed(g, 1, &a))
                return STEP_ERR;
            goto advance;
        case DW_CFA_advance_loc2:
            if (!fixed(g, 2, &a))
                return STEP_ERR;
            goto advance;
        case DW_CFA_advance_loc4:
            if (!fixed(g, 4, &a))
                return STEP_ERR;
            goto advance;
        case DW_CFA_MIPS_advance_loc8:
            if (!fixed(g, 8, &a))
                return STEP_ERR;
            goto advance;
        case DW_CFA_set_loc: /* not written by today's tools: not followed */
            return STEP_ERR;
        case DW_CFA_restore_extended:
            if (!uleb(g, &reg))
                return STEP_ERR;
            goto restore;
        case DW_CFA_remember_state:
            if (*depth >= MAX_REMEMBER)
                return STEP_ERR;
            stack[(*depth)++] = *fs;
            continue;
        case DW_CFA_restore_state:
            if (*depth == 0)
                return STEP_ERR;
            *fs = stack[--(*depth)];
            continue;
        case DW_CFA_GNU_args_size:
            if (!uleb(g, &u))
                return STEP_ERR;
            continue;
        default:
            if (rule(g, fs, op))
                continue;
            return STEP_ERR;
        }
    restore:
        if (!init)
            return STEP_ERR; /* not within the CIE's own instructions */
        {
            struct cfi_reg_state *r = tracked(b, fs, reg);
            if (r)
                *r = *tracked(b, (struct cfi_state *)init, reg);
        }
        continue;
    advance:
        if (!init)
            return STEP_ERR; /* a CIE's initial instructions do not advance */
        a *= c->code_align;
        if (loc + a < loc)
            return STEP_ERR;
        *adv = loc + a;
        return STEP_ROW;
    }
    return STEP_END;
}

/* The ABI's rules before any CIE (libdw's x86_64 and aarch64 backends):
 * the callee-saved registers, the frame pointer and the return address keep
 * their values; on aarch64 the CFA is sp. */
static void abi_state(const struct build *b, struct cfi_state *fs)
{
    memset(fs, 0, sizeof(*fs));
    fs->cfa = CFA_INVALID;
    if (b->arch->machine == EM_AARCH64)
        fs->cfa = CFA_OFF, fs->cfa_reg = (uint64_t)b->arch->sp, fs->cfa_off = 0;
    set_reg(b, fs, b->arch->fp, R_SAME, 0);
    set_reg(b, fs, b->arch->ra, R_SAME, 0);
}

/* c's state after the ABI's rules and its initial instructions, computed
 * once per CIE; 0, or -1 when they are malformed (every row of its FDEs is
 * then unsupported, as libdw fails for each). */
static int cie_state(const struct build *b, struct cie *c)
{
    struct cfi_state stack[MAX_REMEMBER];
    unsigned depth = 0;
    uint64_t adv;

    if (c->state_done)
        return c->state_ok ? 0 : -1;
    c->state_done = true;
    c->state_ok = false;
    abi_state(b, &c->state);
    struct prog g = {b, c, c->insns, c->insns_end};
    if (run(&g, &c->state, NULL, stack, &depth, 0, &adv) != STEP_END)
        return -1;
    c->state_ok = true;
    return 0;
}

/* The ops of a DWARF expression, decoded as libdw would (only the ops the
 * rules BPF follows are made of; any other makes the decode fail). */
static bool decode_expr(const uint8_t *p, uint64_t len, Dwarf_Op *ops, size_t *n)
{
    struct prog g = {.p = p, .end = p + len};
    size_t k = 0;

    while (g.p < g.end) {
        if (k == MAX_EXPR_OPS)
            return false;
        Dwarf_Op *o = &ops[k++];
        uint64_t u;
        int64_t s;
        memset(o, 0, sizeof(*o));
        o->atom = *g.p++;
        if (o->atom >= DW_OP_breg0 && o->atom <= DW_OP_breg31) {
            if (!sleb(&g, &s))
                return false;
            o->number = (Dwarf_Word)s;
        } else if (o->atom == DW_OP_bregx) {
            if (!uleb(&g, &u) || !sleb(&g, &s))
                return false;
            o->number = u, o->number2 = (Dwarf_Word)s;
        } else if (o->atom == DW_OP_plus_uconst) {
            if (!uleb(&g, &u))
                return false;
            o->number = u;
        } else if (!(o->atom >= DW_OP_lit0 && o->atom <= DW_OP_lit31) && o->atom != DW_OP_deref &&
                   o->atom != DW_OP_and && o->atom != DW_OP_ge && o->atom != DW_OP_shl &&
                   o->atom != DW_OP_plus && o->atom != DW_OP_call_frame_cfa) {
            return false;
        }
    }
    *n = k;
    return true;
}

/* The CFA rule as BPF follows it, into *cfa and *u (units of 8 or the PLT
 * threshold); an unsupported reason otherwise. */
static int cfa_of(const struct build *b, const struct cfi_state *fs, enum cx_cfa_type *cfa,
                  int64_t *u)
{
    const struct arch *a = b->arch;
    Dwarf_Op ops[MAX_EXPR_OPS];
    size_t n;
    int64_t reg, off;
    bool deref = false;

    if (fs->cfa == CFA_INVALID)
        return CFI_UNSUP_CFI;
    if (fs->cfa == CFA_OFF) {
        reg = (int64_t)fs->cfa_reg, off = fs->cfa_off;
    } else {
        if (!decode_expr(fs->cfa_expr, fs->cfa_expr_len, ops, &n) || n == 0)
            return CFI_UNSUP_CFA_EXPR;
        bool breg0 = ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31;
        if (n <= 2 && (breg0 || (ops[0].atom == DW_OP_bregx && ops[0].number < 0x10000)) &&
            (n == 1 || ops[1].atom == DW_OP_deref)) {
            reg = breg0 ? ops[0].atom - DW_OP_breg0 : (int64_t)ops[0].number;
            off = breg0 ? (int64_t)ops[0].number : (int64_t)ops[0].number2;
            deref = n == 2;
        } else if (a->plt && a->plt(ops, n, u)) {
            *cfa = CX_CFA_PLT;
            return -1;
        } else {
            return CFI_UNSUP_CFA_EXPR;
        }
    }
    if (reg == a->sp)
        *cfa = deref ? CX_CFA_DEREF_SP : CX_CFA_SP;
    else if (reg == a->fp)
        *cfa = deref ? CX_CFA_DEREF_FP : CX_CFA_FP;
    else
        return CFI_UNSUP_CFA_REG;
    if (off % 8 != 0 || off / 8 < INT16_MIN || off / 8 > INT16_MAX)
        return CFI_UNSUP_OFFSET;
    *u = off / 8;
    return -1;
}

/* The frame pointer's rule as BPF follows it; an unsupported reason otherwise. */
static int fp_of(const struct build *b, const struct cfi_reg_state *r, enum cx_fp_type *fp,
                 int64_t *fp_u)
{
    Dwarf_Op ops[MAX_EXPR_OPS];
    size_t n;
    int64_t off;

    *fp_u = 0;
    switch (r->rule) {
    case R_UNSPEC:
    case R_UNDEF:
    case R_SAME: /* the caller's fp is this one */
        *fp = CX_FP_SAME;
        return -1;
    case R_OFFSET:
        *fp = CX_FP_AT_CFA, off = r->val;
        break;
    case R_EXPR: /* libdw pushes the CFA before the expression */
        if (!decode_expr(r->expr, r->expr_len, ops, &n))
            return CFI_UNSUP_FP_RULE;
        if (n == 0) {
            *fp = CX_FP_AT_CFA, off = 0;
        } else if (n == 1 && ops[0].atom == DW_OP_plus_uconst) {
            *fp = CX_FP_AT_CFA, off = (int64_t)ops[0].number;
        } else if (n == 1 && ops[0].atom == DW_OP_breg0 + b->arch->fp) {
            *fp = CX_FP_AT_FP, off = (int64_t)ops[0].number;
        } else {
            return CFI_UNSUP_FP_RULE;
        }
        break;
    default:
        return CFI_UNSUP_FP_RULE;
    }
    /* With a link register cfi_lr_row narrows the offset (it may rebase it). */
    int64_t lo = b->arch->lr ? INT16_MIN : INT8_MIN, hi = b->arch->lr ? INT16_MAX : INT8_MAX;
    if (off % 8 != 0 || off / 8 < lo || off / 8 > hi)
        return CFI_UNSUP_OFFSET;
    *fp_u = off / 8;
    return -1;
}

static struct cx_cfi_row unsup(struct build *b, int why)
{
    return cfi_unsup(b, (enum cfi_table_unsup)why);
}

/* A row's state as a rule BPF can follow: the decisions of cfi_rows.c's
 * classify(), in the same order, on our state instead of libdw's. */
static struct cx_cfi_row classify_state(struct build *b, const struct cie *c,
                                        const struct cfi_state *fs)
{
    const struct arch *a = b->arch;
    struct cfi_table_stats *st = &b->t->stats;
    enum cx_cfa_type cfa = CX_CFA_UNSUPPORTED;
    enum cx_fp_type fp;
    int64_t u = 0, fp_u;
    int why;

    if (c->signal) {
        st->signal_rows++;
        return (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_SIGNAL, CX_FP_SAME)};
    }
    if (c->ra != (uint64_t)a->ra)
        return unsup(b, CFI_UNSUP_RA);
    if (fs->ra.rule == R_UNDEF || fs->ra.rule == R_UNSPEC) {
        st->end_rows++;
        return (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_END, CX_FP_SAME)};
    }
    /* Not R_VAL_OFFSET, which libdw writes the same way: the return
     * address would be CFA - 8 itself, not what is stored there. With a
     * link register, R_SAME is the return address still in it. */
    bool ra_saved = fs->ra.rule == R_OFFSET;
    bool ra_ok = a->lr ? ra_saved || fs->ra.rule == R_SAME : ra_saved && fs->ra.val == a->ra_off;
    why = cfa_of(b, fs, &cfa, &u);
    if (why >= 0)
        return unsup(b, why);
    if (cfa == CX_CFA_PLT)
        st->plt_rows++;
    if (!ra_ok)
        return unsup(b, CFI_UNSUP_RA);
    why = fp_of(b, &fs->fp, &fp, &fp_u);
    if (why >= 0)
        return unsup(b, why);
    if (a->lr)
        return cfi_lr_row(b, cfa, u, fp, fp_u, ra_saved, fs->ra.val);
    return (struct cx_cfi_row){
        .cfa_off = (__s16)u, .rule = CX_CFI_RULE(cfa, fp), .fp_off = (__s8)fp_u};
}

/* The last row of f, at loc, then the end of the FDE when nothing follows. */
static int last_row(struct build *b, const struct fde *f, uint64_t loc, struct cx_cfi_row r,
                    bool gap_after)
{
    int err = cfi_add_row(b, loc, r);

    if (err || !gap_after)
        return err;
    return cfi_add_row(b, f->end, (struct cx_cfi_row){.rule = CX_CFI_RULE(CX_CFA_NONE, 0)});
}

int cfi_exec_fde(struct build *b, const struct fde *f, bool gap_after)
{
    struct cfi_state stack[MAX_REMEMBER], fs;
    struct cie *c = &b->cies[f->cie];
    unsigned depth = 0;
    uint64_t loc = f->start, adv = 0;
    int err;

    if (cie_state(b, c) != 0)
        return last_row(b, f, loc, unsup(b, CFI_UNSUP_CFI), gap_after);
    fs = c->state;
    struct prog g = {b, c, f->insns, f->insns_end};
    for (;;) {
        /* A clock read costs about what a row does: every 64th row. */
        if ((++b->steps & 63) == 0 && cfi_now_ns() > b->deadline)
            return cfi_fail(b, -ETIME, "took more than %u ms (at 0x%" PRIx64 ")", b->o.max_ms, loc);
        enum step st = run(&g, &fs, &c->state, stack, &depth, loc, &adv);
        if (st == STEP_ERR || (st == STEP_ROW && adv > f->end)) {
            /* What follows is unknown: libdw fails for every address from
             * here to the FDE's end. */
            return last_row(b, f, loc, unsup(b, CFI_UNSUP_CFI), gap_after);
        }
        if (st == STEP_END || adv == f->end)
            return last_row(b, f, loc, classify_state(b, c, &fs), gap_after);
        if (adv > loc) {
            err = cfi_add_row(b, loc, classify_state(b, c, &fs));
            if (err)
                return err;
            loc = adv;
        }
    }
}

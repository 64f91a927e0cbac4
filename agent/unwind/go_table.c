#include "go_table.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../symbolize/gopclntab.h"

/* A row before it is made relative to the table's base. */
struct arow {
    uint64_t pc;
    struct cx_cfi_row r;
};

struct build {
    struct arow *rows;
    size_t n, cap;
    uint64_t last_end; /* where the last function ended */
    uint32_t funcs, unsupported;
    bool too_many, oom;
    bool lr; /* arm64: the return address comes in x30 (go_table.h) */
};

static bool push(struct build *b, uint64_t pc, struct cx_cfi_row r)
{
    /* Consecutive equal rules are one row. */
    if (b->n && memcmp(&b->rows[b->n - 1].r.cfa_off, &r.cfa_off,
                       sizeof(r) - offsetof(struct cx_cfi_row, cfa_off)) == 0)
        return true;
    if (b->n && b->rows[b->n - 1].pc == pc) {
        b->rows[b->n - 1].r = r; /* an empty range before: replaced */
        return true;
    }
    if (b->n >= CX_CFI_MAX_ROWS) {
        b->too_many = true;
        return false;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        struct arow *nr = realloc(b->rows, cap * sizeof(*nr));
        if (!nr) {
            b->oom = true;
            return false;
        }
        b->rows = nr;
        b->cap = cap;
    }
    b->rows[b->n++] = (struct arow){pc, r};
    return true;
}

static bool named(const struct gopclntab_func *f, const char *name)
{
    return f->name && strcmp(f->name, name) == 0;
}

static int on_range(void *ctx, const struct gopclntab_func *f, uint64_t lo, uint64_t hi, int32_t sp)
{
    struct build *b = ctx;
    struct cx_cfi_row r = {0};

    if (lo == f->entry) {
        /* A gap before this function walks by frame pointer. */
        if (b->n && b->last_end < lo &&
            !push(b, b->last_end, (struct cx_cfi_row){0, 0, CX_CFI_RULE(CX_CFA_NONE, 0), 0}))
            return -1;
        b->funcs++;
    }
    b->last_end = f->end;
    if ((f->flag & GOPCLNTAB_TOPFRAME) || named(f, "runtime.goexit") ||
        named(f, "runtime.mstart") || named(f, "runtime.rt0_go")) {
        r.rule = CX_CFI_RULE(CX_CFA_END, CX_FP_SAME);
    } else if (f->flag & GOPCLNTAB_SPWRITE) {
        r.rule = CX_CFI_RULE(CX_CFA_NONE, CX_FP_SAME);
    } else if (sp < 0 || sp % 8 || (sp + 8) / 8 > INT16_MAX) {
        r.rule = CX_CFI_RULE(CX_CFA_UNSUPPORTED, CX_FP_SAME);
        b->unsupported++;
    } else if (b->lr) {
        /* arm64: CFA = sp + distance. Without a frame the return address
         * is still in x30; with one, the prologue (MOVD.W R30,
         * -framesize(RSP); MOVD R29, -8(RSP)) left it at 0(RSP) and the
         * caller's frame pointer just below: a frame record at sp - 8. */
        /* runtime.asyncPreempt is entered by the signal handler's
         * pushCall (sp - 16, x30 stored there, x30 = the interrupted pc):
         * its caller is found as a signal frame's is (CX_CFA_GO_PUSHED). */
        int cfa = named(f, "runtime.asyncPreempt") ? CX_CFA_GO_PUSHED : CX_CFA_SP;
        r.cfa_off = (int16_t)(sp / 8);
        r.rule = sp ? CX_CFI_RULE_RA(cfa, CX_FP_AT_SP, CX_RA_AFTER_FP)
                    : CX_CFI_RULE_RA(cfa, CX_FP_SAME, CX_RA_DEFAULT);
        r.fp_off = sp ? -1 : 0;
    } else {
        r.cfa_off = (int16_t)((sp + 8) / 8);
        /* With a frame, Go's prologue keeps the caller's frame pointer just
         * below the return address. */
        r.rule = CX_CFI_RULE(CX_CFA_SP, sp ? CX_FP_AT_CFA : CX_FP_SAME);
        r.fp_off = sp ? -2 : 0;
    }
    (void)hi;
    return push(b, lo, r) ? 0 : -1;
}

int go_table__build(int fd, struct cfi_table **out, char *err, size_t errlen)
{
    struct build b = {0};
    struct timespec t0, t1;
    struct gopclntab *g = NULL;
    struct cfi_table *t = NULL;
    Elf *e = NULL;
    int ret = -ENOENT;

    *out = NULL;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    elf_version(EV_CURRENT);
    e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF || !(g = gopclntab__open_elf(e))) {
        snprintf(err, errlen, "no .gopclntab");
        goto out;
    }
    GElf_Ehdr eh;
    b.lr = gelf_getehdr(e, &eh) && eh.e_machine == EM_AARCH64;
    if (gopclntab__each_sp(g, on_range, &b) < 0 || b.oom || b.too_many) {
        ret = b.too_many ? -E2BIG : -ENOMEM;
        snprintf(err, errlen, b.too_many ? "more than %u rows" : "out of memory", CX_CFI_MAX_ROWS);
        goto out;
    }
    if (!b.n) {
        snprintf(err, errlen, "no function with a pcsp table");
        goto out;
    }
    /* The end of the last function: nothing past it. */
    if (!push(&b, b.last_end, (struct cx_cfi_row){0, 0, CX_CFI_RULE(CX_CFA_NONE, 0), 0})) {
        ret = b.too_many ? -E2BIG : -ENOMEM;
        goto out;
    }
    uint64_t base = b.rows[0].pc;
    if (b.rows[b.n - 1].pc - base > UINT32_MAX) {
        ret = -E2BIG;
        snprintf(err, errlen, "Go code over 4 GiB");
        goto out;
    }
    ret = -ENOMEM;
    t = calloc(1, sizeof(*t));
    if (!t || !(t->rows = malloc(b.n * sizeof(*t->rows))))
        goto out;
    t->base = base;
    for (size_t i = 0; i < b.n; i++) {
        t->rows[i] = b.rows[i].r;
        t->rows[i].pc = (uint32_t)(b.rows[i].pc - base);
    }
    t->n = (uint32_t)b.n;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    t->stats.source = CFI_SRC_GOPCLNTAB;
    t->stats.fdes = b.funcs;
    t->stats.rows = t->stats.rows_raw = t->n;
    t->stats.bytes = (uint64_t)t->n * sizeof(*t->rows);
    t->stats.unsupported[CFI_UNSUP_OFFSET] = b.unsupported;
    t->stats.build_ns =
        (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)(t1.tv_nsec - t0.tv_nsec);
    *out = t;
    t = NULL;
    ret = 0;
out:
    cfi_table__free(t);
    free(b.rows);
    gopclntab__free(g);
    if (e)
        elf_end(e);
    return ret;
}

/* The row of t covering ELF address a, or a CX_CFA_NONE row. */
static struct cx_cfi_row row_at(const struct cfi_table *t, uint64_t a)
{
    struct cx_cfi_row none = {0, 0, CX_CFI_RULE(CX_CFA_NONE, 0), 0};
    size_t lo = 0, hi = t->n;

    if (a < t->base || a - t->base > UINT32_MAX)
        return none;
    while (lo < hi) { /* rows[0..lo) start at or below a */
        size_t mid = lo + (hi - lo) / 2;
        if (t->rows[mid].pc <= a - t->base)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? t->rows[lo - 1] : none;
}

int go_table__merge(struct cfi_table *cfi, struct cfi_table *go, struct cfi_table **out)
{
    size_t na = cfi->n, nb = go->n, n = 0, i = 0, j = 0;
    uint64_t base = cfi->base < go->base ? cfi->base : go->base;
    struct cfi_table *t = calloc(1, sizeof(*t));
    int ret = -ENOMEM;

    *out = NULL;
    if (!t || !(t->rows = malloc((na + nb) * sizeof(*t->rows))))
        goto out;
    /* Every address where either table's rule changes, in order. */
    while (i < na || j < nb) {
        uint64_t pa = i < na ? cfi->base + cfi->rows[i].pc : UINT64_MAX;
        uint64_t pb = j < nb ? go->base + go->rows[j].pc : UINT64_MAX;
        uint64_t pc = pa < pb ? pa : pb;
        i += pa == pc;
        j += pb == pc;
        struct cx_cfi_row r = row_at(cfi, pc);
        if (CX_CFI_CFA_TYPE(r.rule) == CX_CFA_NONE)
            r = row_at(go, pc);
        if (pc - base > UINT32_MAX)
            break;
        r.pc = (uint32_t)(pc - base);
        if (n && memcmp(&t->rows[n - 1].cfa_off, &r.cfa_off,
                        sizeof(r) - offsetof(struct cx_cfi_row, cfa_off)) == 0)
            continue;
        t->rows[n++] = r;
    }
    t->base = base;
    t->n = (uint32_t)n;
    t->stats = cfi->stats;
    t->stats.source = CFI_SRC_EH_FRAME_GO;
    t->stats.fdes += go->stats.fdes;
    t->stats.rows = t->n;
    t->stats.rows_raw += go->stats.rows_raw;
    t->stats.bytes = (uint64_t)t->n * sizeof(*t->rows);
    t->stats.unsupported[CFI_UNSUP_OFFSET] += go->stats.unsupported[CFI_UNSUP_OFFSET];
    t->stats.build_ns += go->stats.build_ns;
    *out = t;
    t = NULL;
    ret = 0;
out:
    cfi_table__free(t);
    cfi_table__free(cfi);
    cfi_table__free(go);
    return ret;
}

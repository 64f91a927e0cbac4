/* cfi_table: known rows of gcc's prologues, the .plt, libc's signal
 * trampoline and outermost frames; every row of each fixture (and of libc)
 * checked against an independent reader, readelf's frames-interp dump; then
 * hostile files (truncated, garbled) that must give an error or a table.
 *
 * CX_CFI_XCHECK=FILE:FILE... cross-checks more binaries the same way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../agent/unwind/cfi_table.h"
#include "elf_helpers.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

static const char *fixture(const char *name)
{
    static char path[512];
    const char *dir = getenv("CX_FIXTURES");
    snprintf(path, sizeof(path), "%s/%s", dir ? dir : "build/fixtures", name);
    return path;
}

static int build_path(const char *path, const struct cfi_table_opts *o, struct cfi_table **t,
                      char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int ret = cfi_table__build(fd, o, t, err, errlen);
    close(fd);
    return ret;
}

static struct cfi_table *must_build(const char *path)
{
    struct cfi_table *t = NULL;
    char err[256];
    int ret = build_path(path, NULL, &t, err, sizeof(err));
    if (ret)
        fail_msg("%s: %d %s", path, ret, err);
    return t;
}

/* The row for ELF address va, NULL below the base. */
static const struct cx_cfi_row *row_at(const struct cfi_table *t, uint64_t va)
{
    if (va < t->base || va - t->base > UINT32_MAX)
        return NULL;
    uint32_t pc = (uint32_t)(va - t->base), lo = 0, hi = t->n;
    if (t->n == 0 || t->rows[0].pc > pc)
        return NULL;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->rows[mid].pc <= pc)
            lo = mid;
        else
            hi = mid;
    }
    return &t->rows[lo];
}

static int cfa_type(const struct cx_cfi_row *r)
{
    return CX_CFI_CFA_TYPE(r->rule);
}

static int fp_type(const struct cx_cfi_row *r)
{
    return CX_CFI_FP_TYPE(r->rule);
}

/* What every table must be: sorted strictly, merged, closed by NONE. */
static void check_shape(const struct cfi_table *t)
{
    assert_true(t->n >= 2);
    assert_int_equal(t->n, t->stats.rows);
    assert_int_equal(t->stats.bytes, (uint64_t)t->n * sizeof(struct cx_cfi_row));
    assert_true(t->stats.rows_raw >= t->n);
    assert_int_equal(t->rows[0].pc, 0);
    assert_int_equal(cfa_type(&t->rows[t->n - 1]), CX_CFA_NONE);
    for (uint32_t i = 1; i < t->n; i++) {
        const struct cx_cfi_row *a = &t->rows[i - 1], *b = &t->rows[i];
        assert_true(a->pc < b->pc);
        assert_false(a->rule == b->rule && a->cfa_off == b->cfa_off && a->fp_off == b->fp_off);
        assert_true(cfa_type(b) <= CX_CFA_UNSUPPORTED && fp_type(b) <= CX_FP_AT_FP);
    }
}

static void assert_row(const struct cx_cfi_row *r, int cfa, int cfa_off, int fp, int fp_off)
{
    assert_non_null(r);
    if (cfa_type(r) != cfa || r->cfa_off != cfa_off || fp_type(r) != fp || r->fp_off != fp_off)
        fail_msg("row at pc 0x%x: cfa %d off %d fp %d off %d, want %d %d %d %d", r->pc, cfa_type(r),
                 r->cfa_off, fp_type(r), r->fp_off, cfa, cfa_off, fp, fp_off);
}

/* --- known rows ---------------------------------------------------------- */

/* The first row inside [va, va + size) after `from` that differs from the
 * row at `from`, or NULL. */
static const struct cx_cfi_row *next_row(const struct cfi_table *t, uint64_t from, uint64_t end)
{
    const struct cx_cfi_row *r = row_at(t, from);
    if (!r || r + 1 >= t->rows + t->n || t->base + r[1].pc >= end)
        return NULL;
    return r + 1;
}

static void test_frame_pointer_prologue(void **state)
{
    (void)state;
    const char *path = fixture("cfi_fp");
    struct cfi_table *t = must_build(path);
    uint64_t va, size, off;

    check_shape(t);
    assert_int_equal(t->stats.source, CFI_SRC_EH_FRAME);
    assert_int_equal(elf_symbol(path, "cfi_saves", &va, &size, &off), 0);
    /* push rbp; mov rbp, rsp (gcc may schedule other instructions between
     * them): CFA = rsp + 8, then rsp + 16 with rbp at CFA - 16, then
     * rbp + 16. */
    assert_row(row_at(t, va), CX_CFA_SP, 1, CX_FP_SAME, 0);
    const struct cx_cfi_row *r = next_row(t, va, va + size);
    assert_row(r, CX_CFA_SP, 2, CX_FP_AT_CFA, -2);
    assert_int_equal(t->base + r->pc, va + 1); /* push rbp is one byte */
    r = next_row(t, t->base + r->pc, va + size);
    assert_row(r, CX_CFA_FP, 2, CX_FP_AT_CFA, -2);
    assert_true(t->base + r->pc >= va + 4); /* after mov rbp, rsp (three bytes) */
    cfi_table__free(t);
}

static void test_omitted_frame_pointer(void **state)
{
    (void)state;
    const char *path = fixture("cfi_omit");
    struct cfi_table *t = must_build(path);
    uint64_t va, size, off;

    check_shape(t);
    /* A leaf without a frame: CFA = rsp + 8 throughout. */
    assert_int_equal(elf_symbol(path, "cfi_leaf", &va, &size, &off), 0);
    for (uint64_t a = va; a < va + size; a++)
        assert_row(row_at(t, a), CX_CFA_SP, 1, CX_FP_SAME, 0);
    /* Callee-saved pushes: the CFA moves by 8 each, rbp never saved. */
    assert_int_equal(elf_symbol(path, "cfi_saves", &va, &size, &off), 0);
    assert_row(row_at(t, va), CX_CFA_SP, 1, CX_FP_SAME, 0);
    const struct cx_cfi_row *r = next_row(t, va, va + size);
    assert_non_null(r);
    assert_int_equal(cfa_type(r), CX_CFA_SP);
    assert_int_equal(r->cfa_off, 2);
    /* alloca: rbp-based even here. */
    assert_int_equal(elf_symbol(path, "cfi_alloca", &va, &size, &off), 0);
    bool fp_cfa = false;
    for (r = row_at(t, va); r && t->base + r->pc < va + size; r++)
        fp_cfa |= cfa_type(r) == CX_CFA_FP && r->cfa_off == 2 && fp_type(r) == CX_FP_AT_CFA &&
                  r->fp_off == -2;
    assert_true(fp_cfa);
    cfi_table__free(t);
}

/* The offset N of "DW_OP_breg6 (rbp): N; DW_OP_deref" in the CFI readelf
 * shows for the FDE starting at va (its raw dump: frames-interp says "exp"). */
static long readelf_deref_off(const char *path, uint64_t va)
{
    char cmd[600], line[512], pc[64];
    long n = 0;
    bool in = false;

    snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames '%s' 2>/dev/null", path);
    snprintf(pc, sizeof(pc), "pc=%016" PRIx64 "..", va);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(line, sizeof(line), p)) {
        if (strstr(line, " FDE "))
            in = strstr(line, pc) != NULL;
        const char *e = strstr(line, "DW_CFA_def_cfa_expression (DW_OP_breg6 (rbp): ");
        if (in && e && strstr(e, "; DW_OP_deref)"))
            n = strtol(e + strlen("DW_CFA_def_cfa_expression (DW_OP_breg6 (rbp): "), NULL, 10);
    }
    pclose(p);
    return n;
}

/* gcc's stack realignment through r10 (DRAP): CFA = r10 (unsupported), then
 * CFA = *(rbp - N) with rbp at rbp + 0. */
static void test_realign(void **state)
{
    (void)state;
    const char *path = fixture("cfi_omit");
    struct cfi_table *t = must_build(path);
    uint64_t va, size, off;
    bool deref = false, drap = false;

    assert_int_equal(elf_symbol(path, "cfi_realign", &va, &size, &off), 0);
    long n = readelf_deref_off(path, va);
    assert_true(n < 0 && n % 8 == 0);
    for (const struct cx_cfi_row *r = row_at(t, va); r && t->base + r->pc < va + size; r++) {
        if (cfa_type(r) == CX_CFA_DEREF_FP) {
            assert_row(r, CX_CFA_DEREF_FP, (int)(n / 8), CX_FP_AT_FP, 0);
            deref = true;
        }
        drap |= cfa_type(r) == CX_CFA_UNSUPPORTED;
    }
    assert_true(deref);
    assert_true(drap);
    assert_true(t->stats.unsupported[CFI_UNSUP_CFA_REG] > 0);
    cfi_table__free(t);
}

/* The .plt's expression, and _start's undefined return address. */
static void test_plt_and_start(void **state)
{
    (void)state;
    const char *path = fixture("cfi_omit");
    struct cfi_table *t = must_build(path);
    uint64_t va, size, off;
    int fd = open(path, O_RDONLY);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstrndx;
    uint64_t plt = 0, plt_size = 0;

    assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
    for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        gelf_getshdr(s, &sh);
        if (strcmp(elf_strptr(e, shstrndx, sh.sh_name), ".plt") == 0) {
            plt = sh.sh_addr;
            plt_size = sh.sh_size;
        }
    }
    elf_end(e);
    close(fd);
    assert_true(plt_size >= 32);
    /* PLT0 pushes and jumps (rsp + 16, then + 24); each stub after it pushes
     * after 11 bytes (the expression). */
    assert_row(row_at(t, plt + 16), CX_CFA_PLT, 11, CX_FP_SAME, 0);
    assert_row(row_at(t, plt + plt_size - 1), CX_CFA_PLT, 11, CX_FP_SAME, 0);
    assert_true(t->stats.plt_rows >= 1);

    assert_int_equal(elf_symbol(path, "_start", &va, &size, &off), 0);
    assert_row(row_at(t, va), CX_CFA_END, 0, CX_FP_SAME, 0);
    cfi_table__free(t);
}

/* libc: __restore_rt (the one FDE whose CIE says 'S') and the clone3 child
 * and start_thread ends with rip undefined. libc has no .symtab, so they
 * are found where readelf's raw dump of its CFI says so. */
static void test_libc_signal_and_end(void **state)
{
    (void)state;
    if (access(LIBC, R_OK) != 0)
        skip();
    struct cfi_table *t = must_build(LIBC);
    FILE *p = popen("readelf --debug-dump=frames " LIBC " 2>/dev/null", "r");
    char line[512];
    unsigned long cie_s = ~0ul, cie, start, end, loc = 0;
    unsigned signals = 0, ends = 0;

    check_shape(t);
    assert_non_null(p);
    while (fgets(line, sizeof(line), p)) {
        char aug[32];
        const char *to;
        if (strstr(line, " CIE") && sscanf(line, "%lx %*x %*x CIE", &cie) == 1) {
            cie_s = cie; /* the augmentation is on a later line */
        } else if (sscanf(line, " Augmentation: \"%31[^\"]\"", aug) == 1) {
            if (!strchr(aug, 'S'))
                cie_s = ~0ul;
        } else if (sscanf(line, "%*x %*x %*x FDE cie=%lx pc=%lx..%lx", &cie, &start, &end) == 3) {
            loc = start;
            if (cie == cie_s) {
                for (uint64_t a = start; a < end; a++)
                    assert_row(row_at(t, a), CX_CFA_SIGNAL, 0, CX_FP_SAME, 0);
                signals++;
            }
        } else if (strstr(line, "DW_CFA_advance_loc") && (to = strstr(line, " to "))) {
            loc = strtoul(to + 4, NULL, 16);
        } else if (strstr(line, "DW_CFA_undefined: r16 (rip)")) {
            /* from where it stands to the next row: the outermost frame */
            assert_row(row_at(t, loc), CX_CFA_END, 0, CX_FP_SAME, 0);
            ends++;
        }
    }
    pclose(p);
    assert_int_equal(signals, 1);
    assert_true(ends >= 2);
    assert_int_equal(t->stats.signal_rows, 1);
    assert_true(t->stats.end_rows >= ends);
    cfi_table__free(t);
}

/* --- every row against readelf -------------------------------------------- */

/* Splits a frames-interp line into columns: "r9 (r9)" is one. */
static int columns(char *line, char **cols, int max)
{
    char *save = NULL;
    int n = 0;
    for (char *tok = strtok_r(line, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
        if (tok[0] == '(' && n > 0)
            continue; /* the name after a register number */
        if (n < max)
            cols[n++] = tok;
    }
    return n;
}

/* "rsp+8", "rbp-16", "c-16": the register (or "c") and the offset. */
static bool reg_off(const char *s, char *reg, size_t reglen, long *off)
{
    const char *op = strpbrk(s, "+-");
    if (!op || op == s || (size_t)(op - s) >= reglen)
        return false;
    memcpy(reg, s, (size_t)(op - s));
    reg[op - s] = '\0';
    char *endp;
    *off = strtol(op, &endp, 10);
    return *endp == '\0';
}

/* Whether our row r agrees with readelf's columns for one address. */
static bool agrees(const struct cx_cfi_row *r, bool signal, const char *cfa, const char *rbp,
                   const char *ra)
{
    int ct = cfa_type(r), ft = fp_type(r);
    char reg[16];
    long off;
    bool unsup = false, any_cfa = false;
    int want_cfa = -1, want_fp = CX_FP_SAME;
    long want_cfa_off = 0, want_fp_off = 0;

    if (signal)
        return ct == CX_CFA_SIGNAL;
    if (strcmp(ra, "u") == 0)
        return ct == CX_CFA_END;
    if (strcmp(cfa, "exp") == 0) {
        any_cfa = true; /* frames-interp does not show the expression */
    } else if (reg_off(cfa, reg, sizeof(reg), &off) &&
               (!strcmp(reg, "rsp") || !strcmp(reg, "rbp"))) {
        want_cfa = !strcmp(reg, "rsp") ? CX_CFA_SP : CX_CFA_FP;
        unsup |= off % 8 != 0 || off / 8 < INT16_MIN || off / 8 > INT16_MAX;
        want_cfa_off = off / 8;
    } else {
        unsup = true;
    }
    unsup |= strcmp(ra, "c-8") != 0;
    if (!rbp || !strcmp(rbp, "u") || !strcmp(rbp, "s")) {
        want_fp = CX_FP_SAME;
    } else if (reg_off(rbp, reg, sizeof(reg), &off) && !strcmp(reg, "c")) {
        want_fp = CX_FP_AT_CFA;
        unsup |= off % 8 != 0 || off / 8 < INT8_MIN || off / 8 > INT8_MAX;
        want_fp_off = off / 8;
    } else if (!strcmp(rbp, "exp")) {
        want_fp = CX_FP_AT_FP; /* or unsupported: the expression is not shown */
        if (ct == CX_CFA_UNSUPPORTED)
            return true;
    } else {
        unsup = true;
    }
    if (unsup)
        return ct == CX_CFA_UNSUPPORTED;
    if (any_cfa) {
        if (ct == CX_CFA_UNSUPPORTED)
            return true;
        if (ct != CX_CFA_SP && ct != CX_CFA_FP && ct != CX_CFA_DEREF_SP && ct != CX_CFA_DEREF_FP &&
            ct != CX_CFA_PLT)
            return false;
    } else if (ct != want_cfa || r->cfa_off != want_cfa_off) {
        return false;
    }
    if (ft != want_fp)
        return false;
    return want_fp != CX_FP_AT_CFA || r->fp_off == want_fp_off;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool has(const uint64_t *v, size_t n, uint64_t x)
{
    return bsearch(&x, v, n, sizeof(*v), cmp_u64) != NULL;
}

/* A growing array of addresses. */
struct addrs {
    uint64_t *v;
    size_t n, cap;
};

static void addrs_add(struct addrs *a, uint64_t x)
{
    if (a->n == a->cap) {
        a->cap = a->cap * 2 + 256;
        a->v = realloc(a->v, a->cap * sizeof(*a->v));
        assert_non_null(a->v);
    }
    a->v[a->n++] = x;
}

/* readelf's columns at one row: CFA, rbp (NULL when not shown), ra. */
struct xcols {
    char cfa[48], rbp[48], ra[48];
    bool has_rbp;
};

struct xcie {
    unsigned long off;
    bool signal;
    struct xcols init; /* its initial row, which FDEs without rows keep */
};

struct xcheck {
    const char *path;
    const struct cfi_table *t;
    struct xcie cies[64];
    unsigned ncies;
    struct xcie *cie;                 /* of the current entry */
    uint64_t start, end;              /* the current FDE, when in_fde */
    bool in_fde, fde_rows;            /* whether readelf showed rows for it */
    struct addrs marks, starts, ends; /* our rows may start at marks only */
    size_t checked;
};

static void check_one(struct xcheck *x, uint64_t loc, const struct xcols *c)
{
    const struct cx_cfi_row *r = row_at(x->t, loc);
    bool signal = x->cie && x->cie->signal;

    if (!r || !agrees(r, signal, c->cfa, c->has_rbp ? c->rbp : NULL, c->ra))
        fail_msg("%s at 0x%" PRIx64 ": readelf CFA %s rbp %s ra %s%s; ours cfa %d off %d "
                 "fp %d off %d",
                 x->path, loc, c->cfa, c->has_rbp ? c->rbp : "-", c->ra, signal ? " (signal)" : "",
                 r ? cfa_type(r) : -1, r ? r->cfa_off : 0, r ? fp_type(r) : -1, r ? r->fp_off : 0);
    addrs_add(&x->marks, loc);
    x->checked++;
}

/* readelf shows no rows for an FDE whose instructions change nothing: its
 * one rule is its CIE's initial row. */
static void end_entry(struct xcheck *x)
{
    if (x->in_fde && !x->fde_rows) {
        assert_non_null(x->cie);
        check_one(x, x->start, &x->cie->init);
    }
    x->in_fde = false;
}

/* Every address of every FDE readelf shows must have our rule, every gap
 * after an FDE must be NONE, and every row of ours must start where readelf
 * has a row or an FDE ends: together, every address agrees. */
static void cross_check(const char *path)
{
    struct cfi_table *t = must_build(path);
    struct xcheck x = {.path = path, .t = t};
    char cmd[600], line[4096], *cols[64];
    int cfa_col = -1, rbp_col = -1, ra_col = -1;

    check_shape(t);
    for (int i = 0; i < CFI_SKIP__N; i++) {
        if (t->stats.skipped[i])
            print_message("%s: %u FDEs skipped (%s), not checked\n", path, t->stats.skipped[i],
                          cfi_table__skip_name(i));
    }
    snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    bool seen_eh = false, skip = false;
    unsigned skipped_fdes = 0;
    while (fgets(line, sizeof(line), p)) {
        unsigned long off, cie, start, end;
        char aug[32] = "";
        /* The table is built from .eh_frame alone when a file has one (a
         * documented limit): .debug_frame's entries in such a file, like
         * the few assembly functions of Rust's std, are not ours to match. */
        if (!strncmp(line, "Contents of the ", 16)) {
            end_entry(&x);
            x.cie = NULL;
            x.ncies = 0; /* CIE offsets are per section */
            if (strstr(line, ".eh_frame section"))
                seen_eh = true;
            skip = seen_eh && strstr(line, ".debug_frame section");
            continue;
        }
        if (skip) {
            skipped_fdes += strstr(line, " FDE ") != NULL;
            continue;
        }
        if (strstr(line, " CIE") && sscanf(line, "%lx %*x %*x CIE \"%31[^\"]\"", &off, aug) >= 1) {
            end_entry(&x);
            assert_true(x.ncies < 64);
            x.cie = &x.cies[x.ncies++];
            *x.cie = (struct xcie){.off = off, .signal = strchr(aug, 'S') != NULL};
            continue;
        }
        if (sscanf(line, "%*x %*x %*x FDE cie=%lx pc=%lx..%lx", &cie, &start, &end) == 3) {
            end_entry(&x);
            x.cie = NULL;
            for (unsigned i = 0; i < x.ncies; i++) {
                if (x.cies[i].off == cie)
                    x.cie = &x.cies[i];
            }
            x.start = start;
            x.end = end;
            x.in_fde = start < end;
            x.fde_rows = false;
            if (x.in_fde) {
                addrs_add(&x.starts, start);
                addrs_add(&x.ends, end);
                addrs_add(&x.marks, end);
            }
            continue;
        }
        if (strstr(line, "   LOC")) {
            int n = columns(line, cols, 64);
            cfa_col = rbp_col = ra_col = -1;
            for (int i = 0; i < n; i++) {
                if (!strcmp(cols[i], "CFA"))
                    cfa_col = i;
                else if (!strcmp(cols[i], "rbp"))
                    rbp_col = i;
                else if (!strcmp(cols[i], "ra"))
                    ra_col = i;
            }
            continue;
        }
        int n = columns(line, cols, 64);
        /* A row starts with a 16-digit LOC (entries' offsets have 8). */
        if (n < 2 || strlen(cols[0]) != 16 || strspn(cols[0], "0123456789abcdef") != 16 || !x.cie)
            continue;
        assert_true(cfa_col > 0 && ra_col > 0 && n > ra_col && n > cfa_col);
        struct xcols c = {.has_rbp = rbp_col > 0 && rbp_col < n};
        snprintf(c.cfa, sizeof(c.cfa), "%s", cols[cfa_col]);
        snprintf(c.ra, sizeof(c.ra), "%s", cols[ra_col]);
        if (c.has_rbp)
            snprintf(c.rbp, sizeof(c.rbp), "%s", cols[rbp_col]);
        if (!x.in_fde) {
            x.cie->init = c; /* a CIE's row */
            continue;
        }
        uint64_t loc = strtoull(cols[0], NULL, 16);
        if (loc < x.start || loc >= x.end)
            continue;
        x.fde_rows = true;
        /* The rule holds from loc to readelf's next row: checking loc and
         * that we have no row boundary readelf lacks covers the rest. */
        check_one(&x, loc, &c);
    }
    end_entry(&x);
    pclose(p);
    if (skipped_fdes)
        print_message("%s: %u .debug_frame FDEs beside .eh_frame, not checked\n", path,
                      skipped_fdes);
    assert_true(x.starts.n > 0);
    qsort(x.marks.v, x.marks.n, sizeof(uint64_t), cmp_u64);
    qsort(x.starts.v, x.starts.n, sizeof(uint64_t), cmp_u64);
    assert_int_equal(t->base, x.starts.v[0]);
    for (uint32_t i = 0; i < t->n; i++) {
        uint64_t va = t->base + t->rows[i].pc;
        if (!has(x.marks.v, x.marks.n, va))
            fail_msg("%s: our row at 0x%" PRIx64 " is at no row of readelf's", path, va);
    }
    for (size_t i = 0; i < x.ends.n; i++) {
        if (!has(x.starts.v, x.starts.n, x.ends.v[i]))
            assert_int_equal(cfa_type(row_at(t, x.ends.v[i])), CX_CFA_NONE);
    }
    print_message("%s: %zu rows of readelf's in %zu FDEs agree with our %u rows\n", path, x.checked,
                  x.starts.n, t->n);
    free(x.marks.v);
    free(x.starts.v);
    free(x.ends.v);
    cfi_table__free(t);
}

static void test_cross_check_fixtures(void **state)
{
    (void)state;
    static const char *const names[] = {"cfi_omit", "cfi_fp", "cfi_cxx", "cfi_debug_frame",
                                        "cfi_debug_frame_z"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        cross_check(fixture(names[i]));
}

static void test_cross_check_rust(void **state)
{
    (void)state;
    cross_check(fixture("cfi_rust"));
}

static void test_cross_check_libc(void **state)
{
    (void)state;
    if (access(LIBC, R_OK) != 0)
        skip();
    cross_check(LIBC);
    const char *more = getenv("CX_CFI_XCHECK");
    if (!more)
        return;
    char *list = strdup(more), *save = NULL;
    for (char *f = strtok_r(list, ":", &save); f; f = strtok_r(NULL, ":", &save))
        cross_check(f);
    free(list);
}

/* Our interpreter against libdw's rows, one address at a time: the same
 * table, row for row, and the same counts. */
static void same_both_ways(const char *path)
{
    struct cfi_table_opts ol = {.libdw_rows = true};
    struct cfi_table *a = NULL, *l = NULL;
    char err[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    assert_true(fd >= 0);
    assert_int_equal(cfi_table__build(fd, NULL, &a, err, sizeof(err)), 0);
    assert_int_equal(cfi_table__build(fd, &ol, &l, err, sizeof(err)), 0);
    close(fd);
    assert_int_equal(a->base, l->base);
    assert_int_equal(a->n, l->n);
    for (uint32_t i = 0; i < a->n; i++) {
        if (memcmp(&a->rows[i], &l->rows[i], sizeof(a->rows[i])) != 0)
            fail_msg("%s: row %u: pc 0x%x rule 0x%x, libdw pc 0x%x rule 0x%x", path, i,
                     a->rows[i].pc, a->rows[i].rule, l->rows[i].pc, l->rows[i].rule);
    }
    assert_memory_equal(a->stats.unsupported, l->stats.unsupported, sizeof(a->stats.unsupported));
    assert_memory_equal(a->stats.skipped, l->stats.skipped, sizeof(a->stats.skipped));
    assert_int_equal(a->stats.rows_raw, l->stats.rows_raw);
    assert_int_equal(a->stats.signal_rows, l->stats.signal_rows);
    assert_int_equal(a->stats.end_rows, l->stats.end_rows);
    assert_int_equal(a->stats.plt_rows, l->stats.plt_rows);
    cfi_table__free(a);
    cfi_table__free(l);
}

static void test_same_as_libdw(void **state)
{
    (void)state;
    static const char *const names[] = {
        "cfi_omit", "cfi_fp", "cfi_cxx", "cfi_debug_frame", "cfi_debug_frame_z", "cfi_rust"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        same_both_ways(fixture(names[i]));
    /* libc: signal frames, _start's and clone3's undefined return address,
     * remember/restore state; libstdc++: a big C++ library. */
    static const char *const libs[] = {LIBC, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"};
    for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
        if (access(libs[i], R_OK) == 0)
            same_both_ways(libs[i]);
    }
}

static void test_debug_frame(void **state)
{
    (void)state;
    struct cfi_table *a = must_build(fixture("cfi_debug_frame"));
    struct cfi_table *z = must_build(fixture("cfi_debug_frame_z"));
    uint64_t va, size, off;

    assert_int_equal(a->stats.source, CFI_SRC_DEBUG_FRAME);
    assert_int_equal(z->stats.source, CFI_SRC_DEBUG_FRAME);
    /* compression changes nothing */
    assert_int_equal(a->n, z->n);
    assert_int_equal(a->base, z->base);
    assert_memory_equal(a->rows, z->rows, a->n * sizeof(*a->rows));
    assert_int_equal(elf_symbol(fixture("cfi_debug_frame"), "cfi_leaf", &va, &size, &off), 0);
    assert_row(row_at(a, va), CX_CFA_SP, 1, CX_FP_SAME, 0);
    cfi_table__free(a);
    cfi_table__free(z);
}

/* --- errors and caps ------------------------------------------------------ */

static int memfd_with(const void *data, size_t len)
{
    int fd = memfd_create("cfi", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    return fd;
}

static void test_errors_and_caps(void **state)
{
    (void)state;
    struct cfi_table *t = (struct cfi_table *)1;
    char err[256];

    int fd = memfd_with("not an ELF file\n", 16);
    assert_int_equal(cfi_table__build(fd, NULL, &t, err, sizeof(err)), -EINVAL);
    assert_null(t);
    assert_true(strlen(err) > 0);
    close(fd);

    struct cfi_table_opts o = {.max_rows = 4};
    assert_int_equal(build_path(fixture("cfi_omit"), &o, &t, err, sizeof(err)), -E2BIG);
    assert_null(t);
    assert_non_null(strstr(err, "rows"));

    o = (struct cfi_table_opts){.max_section_bytes = 64};
    assert_int_equal(build_path(fixture("cfi_omit"), &o, &t, err, sizeof(err)), -E2BIG);
    assert_non_null(strstr(err, ".eh_frame"));

    /* Every FDE over the cap: skipped and counted, then none is left. */
    o = (struct cfi_table_opts){.max_fde_bytes = 8};
    assert_int_equal(build_path(fixture("cfi_omit"), &o, &t, err, sizeof(err)), -ENOENT);

    /* A separate debug file: .eh_frame is NOBITS there. */
    char dbg[600], cmd[1300];
    snprintf(dbg, sizeof(dbg), "%s.debug", fixture("cfi_omit"));
    snprintf(cmd, sizeof(cmd), "objcopy --only-keep-debug '%s' '%s'", fixture("cfi_omit"), dbg);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(build_path(dbg, NULL, &t, err, sizeof(err)), -ENOENT);
    unlink(dbg);

    /* The time bound: cc1plus (49,000 FDEs) takes 40 ms or more, so 1 ms
     * runs out; libc takes under 1 ms now. */
    static const char cc1plus[] = "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus";
    if (access(cc1plus, R_OK) == 0) {
        o = (struct cfi_table_opts){.max_ms = 1};
        assert_int_equal(build_path(cc1plus, &o, &t, err, sizeof(err)), -ETIME);
        assert_null(t);
    }

    /* No err buffer is fine; free accepts NULL. */
    o = (struct cfi_table_opts){.max_fde_bytes = 8};
    assert_int_equal(build_path(fixture("cfi_omit"), &o, &t, NULL, 0), -ENOENT);
    cfi_table__free(NULL);
}

/* --- hostile input -------------------------------------------------------- */

struct image {
    uint8_t *data;
    size_t size;
    uint64_t eh_off, eh_size, hdr_off, hdr_size; /* file ranges of .eh_frame(_hdr) */
    uint64_t eh_shdr, hdr_shdr;                  /* file offsets of their section headers */
};

static void load_image(const char *path, struct image *im)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    assert_true(fd >= 0 && fstat(fd, &st) == 0);
    im->size = (size_t)st.st_size;
    im->data = malloc(im->size);
    assert_int_equal(read(fd, im->data, im->size), (ssize_t)im->size);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstrndx;
    GElf_Ehdr eh;
    assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
    assert_non_null(gelf_getehdr(e, &eh));
    for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        gelf_getshdr(s, &sh);
        const char *n = elf_strptr(e, shstrndx, sh.sh_name);
        uint64_t shdr = eh.e_shoff + elf_ndxscn(s) * sizeof(Elf64_Shdr);
        if (!strcmp(n, ".eh_frame")) {
            im->eh_off = sh.sh_offset;
            im->eh_size = sh.sh_size;
            im->eh_shdr = shdr;
        } else if (!strcmp(n, ".eh_frame_hdr")) {
            im->hdr_off = sh.sh_offset;
            im->hdr_size = sh.sh_size;
            im->hdr_shdr = shdr;
        }
    }
    elf_end(e);
    close(fd);
    assert_true(im->eh_size > 0 && im->hdr_size > 0);
}

/* An error with a reason, or a table of the right shape. */
static void build_hostile(const uint8_t *data, size_t len, unsigned *tables)
{
    static const struct cfi_table_opts o = {.max_ms = 2000};
    struct cfi_table *t = NULL;
    char err[256] = "";
    int fd = memfd_with(data, len);
    int ret = cfi_table__build(fd, &o, &t, err, sizeof(err));

    close(fd);
    if (ret == 0) {
        assert_non_null(t);
        assert_true(t->n >= 1);
        assert_int_equal(cfa_type(&t->rows[t->n - 1]), CX_CFA_NONE);
        for (uint32_t i = 1; i < t->n; i++)
            assert_true(t->rows[i - 1].pc < t->rows[i].pc);
        (*tables)++;
    } else {
        assert_true(ret < 0);
        assert_null(t);
        assert_true(err[0] != '\0');
    }
    cfi_table__free(t);
}

static void test_truncated(void **state)
{
    (void)state;
    struct image im = {0};
    unsigned tables = 0, runs = 0;

    load_image(fixture("cfi_cxx"), &im);
    for (size_t len = 0; len < im.size; len += im.size / 97 + 1, runs++)
        build_hostile(im.data, len, &tables);
    /* Cut inside and just around .eh_frame and its header. */
    for (uint64_t d = 0; d < 64; d++, runs += 2) {
        build_hostile(im.data, im.eh_off + d * im.eh_size / 64, &tables);
        build_hostile(im.data, im.hdr_off + d * im.hdr_size / 64, &tables);
    }
    print_message("truncated: %u of %u cut files gave a table, none crashed\n", tables, runs);

    /* The file whole, but .eh_frame or .eh_frame_hdr cut short in its
     * section header: the CFI itself truncated. */
    uint8_t *copy = malloc(im.size);
    unsigned cut_tables = 0;
    for (uint64_t d = 0; d < 64; d++) {
        for (int which = 0; which < 2; which++) {
            uint64_t shdr = which ? im.hdr_shdr : im.eh_shdr;
            uint64_t size = (which ? im.hdr_size : im.eh_size) * d / 64;
            memcpy(copy, im.data, im.size);
            memcpy(copy + shdr + offsetof(Elf64_Shdr, sh_size), &size, sizeof(size));
            build_hostile(copy, im.size, &cut_tables);
        }
    }
    print_message("truncated sections: %u of 128 gave a table, none crashed\n", cut_tables);
    free(copy);
    free(im.data);
}

static void test_garbled(void **state)
{
    (void)state;
    struct image im = {0};
    unsigned tables = 0;
    uint8_t *copy;

    /* CX_CFI_GARBLE_RUNS=N CX_CFI_GARBLE_SEED=S: a longer fuzz by hand. */
    const char *env = getenv("CX_CFI_GARBLE_RUNS"), *seed = getenv("CX_CFI_GARBLE_SEED");
    unsigned runs = env ? (unsigned)strtoul(env, NULL, 10) : 400;

    load_image(fixture("cfi_cxx"), &im);
    copy = malloc(im.size);
    srand(seed ? (unsigned)strtoul(seed, NULL, 10) : 4242);
    for (unsigned run = 0; run < runs; run++) {
        memcpy(copy, im.data, im.size);
        unsigned flips = 1 + (unsigned)rand() % 8;
        for (unsigned i = 0; i < flips; i++) {
            uint64_t where;
            switch (run % 4) {
            case 0: /* the ELF header and program headers */
                where = (uint64_t)rand() % 512;
                break;
            case 1:
                where = im.hdr_off + (uint64_t)rand() % im.hdr_size;
                break;
            default:
                where = im.eh_off + (uint64_t)rand() % im.eh_size;
                break;
            }
            copy[where] ^= (uint8_t)(1 + rand() % 255);
        }
        build_hostile(copy, im.size, &tables);
    }
    print_message("garbled: %u of %u mutated files gave a table, none crashed\n", tables, runs);
    free(copy);
    free(im.data);
}

static void test_stats_str(void **state)
{
    (void)state;
    struct cfi_table *t = must_build(fixture("cfi_omit"));
    char buf[512], small[16];

    cfi_table__stats_str(&t->stats, buf, sizeof(buf));
    assert_non_null(strstr(buf, "eh_frame: "));
    assert_non_null(strstr(buf, "unsupported: cfa_reg"));
    int w = cfi_table__stats_str(&t->stats, small, sizeof(small));
    assert_int_equal((size_t)w, strlen(buf));
    assert_int_equal(strlen(small), sizeof(small) - 1);
    cfi_table__free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_pointer_prologue),
        cmocka_unit_test(test_omitted_frame_pointer),
        cmocka_unit_test(test_realign),
        cmocka_unit_test(test_plt_and_start),
        cmocka_unit_test(test_libc_signal_and_end),
        cmocka_unit_test(test_cross_check_fixtures),
        cmocka_unit_test(test_cross_check_rust),
        cmocka_unit_test(test_cross_check_libc),
        cmocka_unit_test(test_same_as_libdw),
        cmocka_unit_test(test_debug_frame),
        cmocka_unit_test(test_errors_and_caps),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_garbled),
        cmocka_unit_test(test_stats_str),
    };
    elf_version(EV_CURRENT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

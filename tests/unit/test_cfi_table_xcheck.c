/* cfi_table, every row (the other half of test_cfi_table.c): each fixture's
 * table (and libc's, and rustc's) checked against an independent reader,
 * readelf's frames-interp dump; our interpreter of the CFI instructions
 * against libdw's rows; .debug_frame alone, plain and compressed.
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
#include "cfi_table_helpers.h"

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

/* Whether our row r agrees with readelf's columns for one address: CFA,
 * the frame pointer's (rbp, x29) and the return address's. On arm64 the
 * return address starts in x30 (readelf: "u" until the prologue saves it,
 * the same "u" as _start's DW_CFA_undefined: either rule is taken there). */
static bool agrees(const struct cx_cfi_row *r, bool arm64, bool signal, const char *cfa,
                   const char *rbp, const char *ra)
{
    int ct = cfa_type(r), ft = fp_type(r), rt = CX_CFI_RA_TYPE(r->rule);
    char reg[16];
    long off;
    bool unsup = false, any_cfa = false, ra_saved = false;
    int want_cfa = -1, want_fp = CX_FP_SAME, want_ra = CX_RA_DEFAULT;
    long want_cfa_off = 0, want_fp_off = 0, ra_u = 0;

    if (signal)
        return ct == CX_CFA_SIGNAL;
    if (strcmp(ra, "u") == 0 && (!arm64 || ct == CX_CFA_END))
        return ct == CX_CFA_END;
    if (strcmp(cfa, "exp") == 0) {
        any_cfa = true; /* frames-interp does not show the expression */
    } else if (reg_off(cfa, reg, sizeof(reg), &off) &&
               (!strcmp(reg, arm64 ? "sp" : "rsp") || !strcmp(reg, arm64 ? "x29" : "rbp"))) {
        want_cfa = !strcmp(reg, arm64 ? "sp" : "rsp") ? CX_CFA_SP : CX_CFA_FP;
        unsup |= off % 8 != 0 || off / 8 < INT16_MIN || off / 8 > INT16_MAX;
        want_cfa_off = off / 8;
    } else {
        unsup = true;
    }
    if (!arm64) {
        unsup |= strcmp(ra, "c-8") != 0;
    } else if (strcmp(ra, "u") && strcmp(ra, "s")) { /* else still in x30 */
        if (reg_off(ra, reg, sizeof(reg), &off) && !strcmp(reg, "c")) {
            ra_saved = true;
            unsup |= off % 8 != 0 || off / 8 < INT16_MIN || off / 8 > INT16_MAX;
            ra_u = off / 8;
        } else {
            unsup = true;
        }
    }
    if (!rbp || !strcmp(rbp, "u") || !strcmp(rbp, "s")) {
        want_fp = CX_FP_SAME;
    } else if (reg_off(rbp, reg, sizeof(reg), &off) && !strcmp(reg, "c")) {
        want_fp = CX_FP_AT_CFA;
        unsup |= off % 8 != 0 || off / 8 < (arm64 ? INT16_MIN : INT8_MIN) ||
                 off / 8 > (arm64 ? INT16_MAX : INT8_MAX);
        want_fp_off = off / 8;
    } else if (!strcmp(rbp, "exp")) {
        want_fp = CX_FP_AT_FP; /* or unsupported: the expression is not shown */
        if (ct == CX_CFA_UNSUPPORTED)
            return true;
    } else {
        unsup = true;
    }
    if (ra_saved && !unsup) {
        /* One offset per row: the frame record {x29, x30}, or x30 alone. */
        if (want_fp == CX_FP_AT_CFA && want_fp_off + 1 == ra_u)
            want_ra = CX_RA_AFTER_FP;
        else if (want_fp == CX_FP_SAME)
            want_ra = CX_RA_AT_CFA, want_fp_off = ra_u;
        else
            unsup = true;
    }
    /* arm64: a frame record too far below the CFA, found from the register
     * the CFA is computed from instead. */
    if (arm64 && !unsup && want_fp == CX_FP_AT_CFA && want_ra != CX_RA_AT_CFA &&
        (want_fp_off < INT8_MIN || want_fp_off > INT8_MAX) && !any_cfa) {
        want_fp_off += want_cfa_off;
        want_fp = want_cfa == CX_CFA_SP ? CX_FP_AT_SP : CX_FP_AT_FP;
    }
    if (arm64 && !unsup && (want_fp != CX_FP_SAME || want_ra == CX_RA_AT_CFA))
        unsup |= want_fp_off < INT8_MIN || want_fp_off > INT8_MAX;
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
    if (ft != want_fp || rt != want_ra)
        return false;
    bool fp_known = want_fp != CX_FP_SAME && strcmp(rbp, "exp") != 0;
    return (!fp_known && want_ra != CX_RA_AT_CFA) || r->fp_off == want_fp_off;
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
    bool other_ra;     /* its return address column is not the ABI's (x30, or 16 on x86_64) */
    struct xcols init; /* its initial row, which FDEs without rows keep */
};

struct xcheck {
    const char *path;
    bool arm64; /* an EM_AARCH64 file */
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
    /* readelf's "ra" is the CIE's column: a CIE with another (arm64 libc's
     * __rawmemchr keeps it in x15) is unsupported, unless a signal frame. */
    bool other = !signal && x->cie && x->cie->other_ra;

    if (!r || (other && cfa_type(r) != CX_CFA_UNSUPPORTED) ||
        (!other && !agrees(r, x->arm64, signal, c->cfa, c->has_rbp ? c->rbp : NULL, c->ra)))
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
    struct xcheck x = {.path = path, .t = t, .arm64 = elf_machine(path) == EM_AARCH64};
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
            const char *rac = strstr(line, " ra=");
            *x.cie = (struct xcie){.off = off,
                                   .signal = strchr(aug, 'S') != NULL,
                                   .other_ra = rac && atoi(rac + 4) != (x.arm64 ? 30 : 16)};
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
                else if (!strcmp(cols[i], x.arm64 ? "x29" : "rbp"))
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
        /* An arm64 CIE's row may not mention x30 (still in it: "u"). */
        assert_true(cfa_col > 0 && n > cfa_col && ((ra_col > 0 && n > ra_col) || x.arm64));
        struct xcols c = {.has_rbp = rbp_col > 0 && rbp_col < n};
        snprintf(c.cfa, sizeof(c.cfa), "%s", cols[cfa_col]);
        snprintf(c.ra, sizeof(c.ra), "%s", ra_col > 0 && n > ra_col ? cols[ra_col] : "u");
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
    /* arm64's .plt has no CFI: the table's rows of its own for it
     * (test_cfi_table_arm64.c checks them) count as an FDE here. */
    uint64_t plt = 0, plt_end = 0;
    if (x.arm64 && plt_section(path, &plt, &plt_end)) {
        addrs_add(&x.starts, plt);
        addrs_add(&x.ends, plt_end);
        addrs_add(&x.marks, plt_end);
        for (uint64_t a = plt; a <= plt + 32 && a < plt_end; a += 4)
            addrs_add(&x.marks, a); /* PLT0's push: where it is is theirs to check */
    }
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
    static const char *const names[] = {
        "cfi_omit",   "cfi_fp",       "cfi_cxx",     "cfi_debug_frame", "cfi_debug_frame_z",
        "cfi_a64_fp", "cfi_a64_omit", "cfi_a64_pac", "cfi_a64_bkey"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        cross_check(fixture(names[i]));
}

/* arm64's libc, as Debian's cross toolchain ships it (when installed). */
static void test_cross_check_arm64_libc(void **state)
{
    (void)state;
    if (access(A64_LIBC, R_OK) != 0)
        skip();
    cross_check(A64_LIBC);
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
    /* arm64: x30's rules, DW_CFA_AARCH64_negate_ra_state (cfi_a64_pac:
     * read as SPARC's window save it would move x29 and x30 to CFA + 104
     * and + 112), the 'B' augmentation (cfi_a64_bkey). */
    static const char *const names[] = {
        "cfi_omit", "cfi_fp",     "cfi_cxx",      "cfi_debug_frame", "cfi_debug_frame_z",
        "cfi_rust", "cfi_a64_fp", "cfi_a64_omit", "cfi_a64_pac",     "cfi_a64_bkey"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        same_both_ways(fixture(names[i]));
    /* libc: signal frames, _start's and clone3's undefined return address,
     * remember/restore state; libstdc++: a big C++ library. */
    static const char *const libs[] = {LIBC, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", A64_LIBC};
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
    uint64_t va = 0, size, off; /* = 0: gcc cannot see elf_symbol set it */

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_check_fixtures), cmocka_unit_test(test_cross_check_rust),
        cmocka_unit_test(test_cross_check_libc),     cmocka_unit_test(test_cross_check_arm64_libc),
        cmocka_unit_test(test_same_as_libdw),        cmocka_unit_test(test_debug_frame),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* go_table: unwind rows for Go code from .gopclntab's pcsp tables, on the
 * stripped Go fixture (the addresses come from its unstripped twin, built
 * from the same code), and their merge with a binary's CFI rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/unwind/go_table.h"
#include "elf_helpers.h"

#define GO_FULL "build/fixtures/go_full"
#define GO_STRIPPED "build/fixtures/go_stripped"
#define GO_A64 "build/fixtures/go_a64"

static struct cfi_table *build(const char *path)
{
    char err[128] = "";
    struct cfi_table *t = NULL;
    int fd = open(path, O_RDONLY);

    assert_true(fd >= 0);
    int r = go_table__build(fd, &t, err, sizeof(err));
    close(fd);
    if (r)
        print_message("    %s: %d %s\n", path, r, err);
    return t;
}

/* The row covering ELF address a. */
static struct cx_cfi_row row_at(const struct cfi_table *t, uint64_t a)
{
    uint32_t rel = (uint32_t)(a - t->base);
    uint32_t i = 0;

    while (i + 1 < t->n && t->rows[i + 1].pc <= rel)
        i++;
    return t->rows[i];
}

static uint64_t addr_of(const char *name, uint64_t *size)
{
    uint64_t v, off;

    assert_int_equal(elf_symbol(GO_FULL, name, &v, size, &off), 0);
    return v;
}

static void test_rules(void **state)
{
    (void)state;
    struct cfi_table *t = build(GO_STRIPPED);
    uint64_t size;

    assert_non_null(t);
    assert_int_equal(t->stats.source, CFI_SRC_GOPCLNTAB);
    assert_true(t->n > 100 && t->stats.fdes > 100);
    assert_int_equal(CX_CFI_CFA_TYPE(t->rows[t->n - 1].rule), CX_CFA_NONE);
    for (uint32_t i = 1; i < t->n; i++)
        assert_true(t->rows[i].pc > t->rows[i - 1].pc);

    /* main.outer is a leaf without a frame: CFA = sp + 8 throughout, the
     * frame pointer untouched. */
    uint64_t outer = addr_of("main.outer", &size);
    for (uint64_t a = outer; a < outer + size; a++) {
        struct cx_cfi_row r = row_at(t, a);
        assert_int_equal(CX_CFI_CFA_TYPE(r.rule), CX_CFA_SP);
        assert_int_equal(r.cfa_off, 1);
        assert_int_equal(CX_CFI_FP_TYPE(r.rule), CX_FP_SAME);
    }
    /* main.(*tally).add has a frame: at its entry sp + 8, then (after the
     * prologue) more, with the caller's frame pointer below the return
     * address. */
    uint64_t add = addr_of("main.(*tally).add", &size);
    struct cx_cfi_row r = row_at(t, add);
    assert_int_equal(r.cfa_off, 1);
    int framed = 0;
    for (uint64_t a = add; a < add + size; a++) {
        r = row_at(t, a);
        if (CX_CFI_CFA_TYPE(r.rule) == CX_CFA_SP && r.cfa_off > 1) {
            assert_int_equal(CX_CFI_FP_TYPE(r.rule), CX_FP_AT_CFA);
            assert_int_equal(r.fp_off, -2);
            framed++;
        }
    }
    assert_true(framed > 0);
    /* Goroutine stacks start in runtime.goexit: the walk ends there. */
    uint64_t goexit = addr_of("runtime.goexit.abi0", &size); /* the symbol of assembly */
    assert_int_equal(CX_CFI_CFA_TYPE(row_at(t, goexit + 1).rule), CX_CFA_END);
    cfi_table__free(t);
}

/* The instruction at ELF address va of path (arm64: 4 bytes). */
static uint32_t insn_at(const char *path, const char *fn, uint64_t va)
{
    uint64_t v, size, off;
    uint32_t w = 0;
    int fd = open(path, O_RDONLY);

    assert_int_equal(elf_symbol(path, fn, &v, &size, &off), 0);
    assert_true(fd >= 0 && va >= v && va + 4 <= v + size);
    assert_int_equal(pread(fd, &w, 4, (off_t)(off + va - v)), 4);
    close(fd);
    return w;
}

#define STR_LR_PRE 0xf8000ffeu /* str x30, [sp, #imm9]! (MOVD.W R30, -N(RSP)) */
#define IMM9_MASK 0xffe00fffu

/* arm64: CFA = sp + distance; the return address in x30 until the
 * prologue's MOVD.W R30, -framesize(RSP), then at 0(RSP), and the caller's
 * frame pointer at -8(RSP). */
static void test_rules_arm64(void **state)
{
    (void)state;
    struct cfi_table *t = build(GO_A64);
    uint64_t v, size, off;

    assert_non_null(t);
    assert_true(t->n > 100);
    assert_int_equal(elf_symbol(GO_A64, "main.outer", &v, &size, &off), 0);
    for (uint64_t a = v; a < v + size; a += 4) {
        struct cx_cfi_row r = row_at(t, a);
        assert_int_equal(r.rule, CX_CFI_RULE_RA(CX_CFA_SP, CX_FP_SAME, CX_RA_DEFAULT));
        assert_int_equal(r.cfa_off, 0);
    }
    assert_int_equal(elf_symbol(GO_A64, "main.(*tally).add", &v, &size, &off), 0);
    uint64_t push = 0;
    for (uint64_t a = v; a < v + size && !push; a += 4) {
        if ((insn_at(GO_A64, "main.(*tally).add", a) & IMM9_MASK) == STR_LR_PRE)
            push = a;
    }
    assert_true(push != 0);
    int32_t n = (int32_t)(insn_at(GO_A64, "main.(*tally).add", push) << 11) >> 23;
    assert_true(n < 0 && n % 8 == 0);
    for (uint64_t a = v; a <= push; a += 4) { /* the stack check, then the push */
        struct cx_cfi_row r = row_at(t, a);
        assert_int_equal(r.rule, CX_CFI_RULE_RA(CX_CFA_SP, CX_FP_SAME, CX_RA_DEFAULT));
        assert_int_equal(r.cfa_off, 0);
    }
    struct cx_cfi_row r = row_at(t, push + 4);
    assert_int_equal(r.rule, CX_CFI_RULE_RA(CX_CFA_SP, CX_FP_AT_SP, CX_RA_AFTER_FP));
    assert_int_equal(r.cfa_off, -n / 8);
    assert_int_equal(r.fp_off, -1);
    assert_int_equal(elf_symbol(GO_A64, "runtime.goexit.abi0", &v, &size, &off), 0);
    assert_int_equal(CX_CFI_CFA_TYPE(row_at(t, v + 4).rule), CX_CFA_END);
    /* runtime.asyncPreempt, entered by the signal handler's pushCall: at
     * its entry x30 is the interrupted pc; once it has its frame, its
     * record holds it; either way the interrupted code's own x30 and sp
     * are above the CFA (CX_CFA_GO_PUSHED). */
    assert_int_equal(elf_symbol(GO_A64, "runtime.asyncPreempt.abi0", &v, &size, &off), 0);
    r = row_at(t, v);
    assert_int_equal(r.rule, CX_CFI_RULE_RA(CX_CFA_GO_PUSHED, CX_FP_SAME, CX_RA_DEFAULT));
    int framed = 0;
    for (uint64_t a = v; a < v + size; a += 4) {
        r = row_at(t, a);
        if (r.cfa_off > 0) {
            assert_int_equal(r.rule, CX_CFI_RULE_RA(CX_CFA_GO_PUSHED, CX_FP_AT_SP, CX_RA_AFTER_FP));
            framed++;
        }
    }
    assert_true(framed > 0);
    cfi_table__free(t);
}

static void test_not_go(void **state)
{
    (void)state;
    char err[128];
    struct cfi_table *t = NULL;
    int fd = open("build/fixtures/fp_c", O_RDONLY);

    assert_true(fd >= 0);
    assert_int_equal(go_table__build(fd, &t, err, sizeof(err)), -ENOENT);
    assert_null(t);
    close(fd);
}

static struct cfi_table *table(uint64_t base, const struct cx_cfi_row *rows, uint32_t n)
{
    struct cfi_table *t = calloc(1, sizeof(*t));

    assert_non_null(t);
    t->rows = malloc(n * sizeof(*rows));
    assert_non_null(t->rows);
    memcpy(t->rows, rows, n * sizeof(*rows));
    t->n = n;
    t->base = base;
    return t;
}

/* The C rows where they have a rule, the Go rows in their gaps. */
static void test_merge(void **state)
{
    (void)state;
    const struct cx_cfi_row none = {0, 0, CX_CFI_RULE(CX_CFA_NONE, 0), 0};
    struct cx_cfi_row c[] = {{0, 1, CX_CFI_RULE(CX_CFA_SP, 0), 0}, none};
    struct cx_cfi_row g[] = {{0, 2, CX_CFI_RULE(CX_CFA_SP, CX_FP_AT_CFA), -2}, none};
    c[1].pc = 0x10; /* C: [0x1000, 0x1010) */
    g[0].pc = 0x8;  /* Go: [0x1008, 0x1020) */
    g[1].pc = 0x20;
    struct cfi_table *m = NULL;

    assert_int_equal(go_table__merge(table(0x1000, c, 2), table(0x1000, g, 2), &m), 0);
    assert_non_null(m);
    assert_int_equal(m->stats.source, CFI_SRC_EH_FRAME_GO);
    assert_int_equal(m->n, 3);
    assert_int_equal(m->rows[0].pc, 0);
    assert_int_equal(m->rows[0].cfa_off, 1); /* C's, over Go's at 0x1008 */
    assert_int_equal(m->rows[1].pc, 0x10);
    assert_int_equal(m->rows[1].cfa_off, 2); /* Go's, where C has none */
    assert_int_equal(m->rows[2].pc, 0x20);
    assert_int_equal(CX_CFI_CFA_TYPE(m->rows[2].rule), CX_CFA_NONE);
    cfi_table__free(m);
}

/* Cut copies of the binary: no crash, a table or a refusal. */
static void test_truncated(void **state)
{
    (void)state;
    int fd = open(GO_STRIPPED, O_RDONLY);
    off_t size = lseek(fd, 0, SEEK_END);
    char *buf = malloc((size_t)size), path[] = "/tmp/cx-go-table-XXXXXX";
    unsigned tables = 0, refused = 0;

    assert_non_null(buf);
    assert_int_equal(pread(fd, buf, (size_t)size, 0), size);
    close(fd);
    int out = mkstemp(path);
    assert_true(out >= 0);
    for (int i = 1; i <= 40; i++) {
        off_t cut = size * i / 41;
        assert_int_equal(ftruncate(out, 0), 0);
        assert_int_equal(pwrite(out, buf, (size_t)cut, 0), cut);
        char err[128];
        struct cfi_table *t = NULL;
        if (go_table__build(out, &t, err, sizeof(err)) == 0) {
            assert_non_null(t);
            tables++;
        } else {
            assert_null(t);
            refused++;
        }
        cfi_table__free(t);
    }
    print_message("    40 cuts: %u tables, %u refused\n", tables, refused);
    close(out);
    unlink(path);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),     cmocka_unit_test(test_rules_arm64),
        cmocka_unit_test(test_not_go),    cmocka_unit_test(test_merge),
        cmocka_unit_test(test_truncated),
    };
    return cmocka_run_group_tests_name("go_table", tests, NULL, NULL);
}

/* cfi_table on arm64 binaries (Debian's cross gcc, tests/tests.mk): the
 * rows of known prologues and epilogues, where x30 holds the return address
 * and where the frame record keeps it; pointer authentication; the .plt's
 * and the vDSO's rows of our own; _start. Every row against readelf and libdw is
 * test_cfi_table_xcheck.c's. The instructions are found in the file's own
 * bytes, so the checks hold whatever gcc schedules around them. */
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

#define STP_FP_LR_PRE 0xa9807bfdu  /* stp x29, x30, [sp, #imm]! */
#define LDP_FP_LR_POST 0xa8c07bfdu /* ldp x29, x30, [sp], #imm */
#define STP_FP_LR_OFF 0xa9007bfdu  /* stp x29, x30, [sp, #imm] */
#define PACIASP 0xd503233fu
#define PACIBSP 0xd503237fu
#define IMM7_MASK 0xffc07fffu

/* The instructions of [va, va + size) of path, read from the file. */
static uint32_t *insns(const char *path, uint64_t va, uint64_t size)
{
    int fd = open(path, O_RDONLY);
    Elf *e;
    uint32_t *out = calloc(1, size + 4);

    assert_true(fd >= 0 && out);
    e = elf_begin(fd, ELF_C_READ, NULL);
    bool found = false;
    for (Elf_Scn *s = NULL; e && !found && (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(s, &sh) || sh.sh_type != SHT_PROGBITS || va < sh.sh_addr ||
            va + size > sh.sh_addr + sh.sh_size)
            continue;
        assert_int_equal(pread(fd, out, size, (off_t)(sh.sh_offset + va - sh.sh_addr)),
                         (ssize_t)size);
        found = true;
    }
    elf_end(e);
    close(fd);
    assert_true(found);
    return out;
}

/* The address of the first instruction of fn matching (insn & mask) == want,
 * 0 when none; *imm its signed imm7 field scaled by 8. */
static uint64_t find_insn(const char *path, const char *fn, uint32_t want, uint32_t mask,
                          int64_t *imm)
{
    uint64_t va, size, off, at = 0;

    assert_int_equal(elf_symbol(path, fn, &va, &size, &off), 0);
    uint32_t *w = insns(path, va, size);
    for (uint64_t i = 0; i < size / 4 && !at; i++) {
        if ((w[i] & mask) == want) {
            at = va + 4 * i;
            if (imm)
                *imm = (int64_t)((int32_t)(w[i] << 10) >> 25) * 8;
        }
    }
    free(w);
    return at;
}

static void assert_ra(const struct cx_cfi_row *r, int ra)
{
    assert_non_null(r);
    if (CX_CFI_RA_TYPE(r->rule) != ra)
        fail_msg("row at pc 0x%x: return address rule %d, want %d", r->pc, CX_CFI_RA_TYPE(r->rule),
                 ra);
}

/* cfi_saves: stp x29, x30, [sp, #-N]! ... ldp x29, x30, [sp], #N; ret. */
static void check_frame_record(const char *path)
{
    struct cfi_table *t = must_build(path);
    uint64_t va, size, off;
    int64_t n = 0, m = 0;

    check_shape(t);
    assert_int_equal(t->stats.source, CFI_SRC_EH_FRAME);
    assert_int_equal(elf_symbol(path, "cfi_saves", &va, &size, &off), 0);
    uint64_t stp = find_insn(path, "cfi_saves", STP_FP_LR_PRE, IMM7_MASK, &n);
    uint64_t ldp = find_insn(path, "cfi_saves", LDP_FP_LR_POST, IMM7_MASK, &m);
    assert_true(stp >= va && ldp > stp && n < 0 && m == -n);
    /* Until the push (paciasp before it with PAC): CFA = sp, x30 holds the
     * return address. */
    for (uint64_t a = va; a <= stp; a += 4) {
        assert_row(row_at(t, a), CX_CFA_SP, 0, CX_FP_SAME, 0);
        assert_ra(row_at(t, a), CX_RA_DEFAULT);
    }
    /* After it: CFA = sp + N, the frame record {x29, x30} at CFA - N. */
    assert_row(row_at(t, stp + 4), CX_CFA_SP, (int)(-n / 8), CX_FP_AT_CFA, (int)(n / 8));
    assert_ra(row_at(t, stp + 4), CX_RA_AFTER_FP);
    assert_ra(row_at(t, ldp), CX_RA_AFTER_FP);
    /* After the pop, to the end (autiasp; ret): x30 again. */
    for (uint64_t a = ldp + 4; a < va + size; a += 4) {
        assert_row(row_at(t, a), CX_CFA_SP, 0, CX_FP_SAME, 0);
        assert_ra(row_at(t, a), CX_RA_DEFAULT);
    }
    cfi_table__free(t);
}

static void test_frame_record(void **state)
{
    (void)state;
    check_frame_record(fixture("cfi_a64_fp"));
    check_frame_record(fixture("cfi_a64_pac"));
    check_frame_record(fixture("cfi_a64_bkey"));
}

/* The rules of fn's rows in order, addresses left out. */
static size_t rules_of(const char *path, const char *fn, struct cx_cfi_row *out, size_t max)
{
    struct cfi_table *t = must_build(path);
    uint64_t va, size, off;
    size_t n = 0;

    assert_int_equal(elf_symbol(path, fn, &va, &size, &off), 0);
    for (const struct cx_cfi_row *r = row_at(t, va);
         r < t->rows + t->n && t->base + r->pc < va + size; r++) {
        assert_true(n < max);
        out[n] = *r;
        out[n++].pc = 0;
    }
    cfi_table__free(t);
    return n;
}

/* paciasp/autiasp (and DW_CFA_AARCH64_negate_ra_state after each) change
 * no rule: every function has the same rows with PAC as without, the A key
 * or the B key (its CIE's augmentation 'B'). */
static void test_pac_same_rules(void **state)
{
    (void)state;
    static const char *const fns[] = {"cfi_leaf", "cfi_saves", "cfi_realign", "cfi_alloca",
                                      "cfi_big"};
    struct cx_cfi_row a[64], p[64], k[64];

    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        size_t na = rules_of(fixture("cfi_a64_fp"), fns[i], a, 64);
        size_t np = rules_of(fixture("cfi_a64_pac"), fns[i], p, 64);
        size_t nk = rules_of(fixture("cfi_a64_bkey"), fns[i], k, 64);
        assert_true(na > 0);
        assert_int_equal(na, np);
        assert_int_equal(na, nk);
        assert_memory_equal(a, p, na * sizeof(a[0]));
        assert_memory_equal(a, k, na * sizeof(a[0]));
    }
    /* They are PAC's: signed in the prologue. */
    assert_true(find_insn(fixture("cfi_a64_pac"), "cfi_saves", PACIASP, ~0u, NULL) != 0);
    assert_true(find_insn(fixture("cfi_a64_bkey"), "cfi_saves", PACIBSP, ~0u, NULL) != 0);
    struct cfi_table *t = must_build(fixture("cfi_a64_bkey"));
    assert_int_equal(t->stats.skipped[CFI_SKIP_BAD], 0);
    cfi_table__free(t);
}

/* A leaf without a frame: x30 and CFA = sp at every instruction. */
static void test_frameless_leaf(void **state)
{
    (void)state;
    const char *path = fixture("cfi_a64_omit");
    struct cfi_table *t = must_build(path);
    uint64_t va, size, off;

    check_shape(t);
    assert_int_equal(elf_symbol(path, "cfi_leaf", &va, &size, &off), 0);
    for (uint64_t a = va; a < va + size; a += 4) {
        assert_row(row_at(t, a), CX_CFA_SP, 0, CX_FP_SAME, 0);
        assert_ra(row_at(t, a), CX_RA_DEFAULT);
    }
    cfi_table__free(t);
}

/* sub sp, sp, #2080; stp x29, x30, [sp]: the frame record 2080 bytes below
 * the CFA, past fp_off's 8 bits, so found from sp (CX_FP_AT_SP). */
static void test_big_frame(void **state)
{
    (void)state;
    const char *path = fixture("cfi_a64_fp");
    struct cfi_table *t = must_build(path);
    int64_t at = 0;
    uint64_t stp = find_insn(path, "cfi_big", STP_FP_LR_OFF, IMM7_MASK, &at);

    assert_true(stp != 0);
    const struct cx_cfi_row *r = row_at(t, stp + 4);
    assert_non_null(r);
    assert_int_equal(cfa_type(r), CX_CFA_SP);
    assert_true(r->cfa_off * 8 > 127 * 8); /* else the row needs no rebasing */
    assert_row(r, CX_CFA_SP, r->cfa_off, CX_FP_AT_SP, (int)(at / 8));
    assert_ra(r, CX_RA_AFTER_FP);
    /* Before the stp: the frame made, x30 not saved yet. */
    assert_row(row_at(t, stp), CX_CFA_SP, r->cfa_off, CX_FP_SAME, 0);
    assert_ra(row_at(t, stp), CX_RA_DEFAULT);
    cfi_table__free(t);
}

/* ld writes no CFI for arm64's .plt: our rows say x30, CFA = sp; PLT0 from
 * its push of x16 and x30 (after `bti c` with BTI) to its end says CFA =
 * sp + 16, x30 at CFA - 8. And _start's x30 is undefined: the end. */
static void check_plt(const char *path, uint64_t push)
{
    struct cfi_table *t = must_build(path);
    uint64_t plt = 0, plt_end = 0, va, size, off;

    assert_true(plt_section(path, &plt, &plt_end));
    assert_true(plt_end - plt >= 48);
    assert_true(t->stats.plt_rows >= 1);
    for (uint64_t a = plt; a < plt_end; a += 4) {
        const struct cx_cfi_row *r = row_at(t, a);
        if (a >= plt + push && a < plt + 32) {
            assert_row(r, CX_CFA_SP, 2, CX_FP_SAME, -1);
            assert_ra(r, CX_RA_AT_CFA);
        } else {
            assert_row(r, CX_CFA_SP, 0, CX_FP_SAME, 0);
            assert_ra(r, CX_RA_DEFAULT);
        }
    }
    assert_int_equal(elf_symbol(path, "_start", &va, &size, &off), 0);
    assert_true(va < plt || va >= plt_end);
    assert_int_equal(cfa_type(row_at(t, va + 4)), CX_CFA_END);
    cfi_table__free(t);
}

static void test_plt_and_start(void **state)
{
    (void)state;
    check_plt(fixture("cfi_a64_fp"), 4);  /* stp x16, x30, [sp, #-16]! first */
    check_plt(fixture("cfi_a64_pac"), 8); /* bti c; stp ... (-z force-bti) */
}

/* The vDSO has no CFI: leaves that keep x30 get CFA = sp and x30, a
 * function with a frame gets nothing (frame pointer), the trampoline is a
 * signal frame from the nop before it. Any other file without CFI is
 * refused as before. */
static void test_vdso(void **state)
{
    (void)state;
    const char *path = fixture("vdso_a64");
    struct cfi_table *t = must_build(path);
    uint64_t va, size, off;

    check_shape(t);
    assert_int_equal(t->stats.source, CFI_SRC_SYNTH);
    assert_int_equal(elf_symbol(path, "__kernel_clock_gettime", &va, &size, &off), 0);
    for (uint64_t a = va; a < va + size; a += 4) {
        assert_row(row_at(t, a), CX_CFA_SP, 0, CX_FP_SAME, 0);
        assert_ra(row_at(t, a), CX_RA_DEFAULT);
    }
    assert_int_equal(elf_symbol(path, "__kernel_framed", &va, &size, &off), 0);
    assert_true(find_insn(path, "__kernel_framed", STP_FP_LR_PRE, IMM7_MASK, NULL) != 0);
    for (uint64_t a = va; a < va + size; a += 4)
        assert_int_equal(cfa_type(row_at(t, a)), CX_CFA_NONE);
    assert_int_equal(elf_symbol(path, "__kernel_rt_sigreturn", &va, &size, &off), 0);
    assert_int_equal(cfa_type(row_at(t, va - 4)), CX_CFA_SIGNAL); /* a return address - 1 */
    assert_int_equal(cfa_type(row_at(t, va + size - 4)), CX_CFA_SIGNAL);
    assert_true(t->stats.signal_rows >= 1);
    cfi_table__free(t);

    char err[256];
    t = NULL;
    assert_int_equal(build_path(fixture("cfi_a64_nocfi"), NULL, &t, err, sizeof(err)), -ENOENT);
    assert_null(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_record),   cmocka_unit_test(test_pac_same_rules),
        cmocka_unit_test(test_frameless_leaf), cmocka_unit_test(test_big_frame),
        cmocka_unit_test(test_plt_and_start),  cmocka_unit_test(test_vdso),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* cfi_table: known rows of gcc's prologues, the .plt, libc's signal
 * trampoline and outermost frames; errors and caps; then hostile files
 * (truncated, garbled) that must give an error or a table. Every row of
 * each fixture checked against an independent reader is
 * test_cfi_table_xcheck.c's. */
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
        cmocka_unit_test(test_errors_and_caps),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_garbled),
        cmocka_unit_test(test_stats_str),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

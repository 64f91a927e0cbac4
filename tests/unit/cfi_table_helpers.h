/* What test_cfi_table.c and test_cfi_table_xcheck.c share: the fixtures'
 * paths, a table built from a file, a row found by address, and the checks
 * of a table's shape and of one row. */
#ifndef CODEXRAY_TESTS_CFI_TABLE_HELPERS_H
#define CODEXRAY_TESTS_CFI_TABLE_HELPERS_H

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
/* arm64's, from Debian's cross toolchain (libc6-arm64-cross). */
#define A64_LIBC "/usr/aarch64-linux-gnu/lib/libc.so.6"

static inline const char *fixture(const char *name)
{
    static char path[512];
    const char *dir = getenv("CX_FIXTURES");
    snprintf(path, sizeof(path), "%s/%s", dir ? dir : "build/fixtures", name);
    return path;
}

/* The file's e_machine, 0 when it cannot be read. */
static inline unsigned elf_machine(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    unsigned m = 0;
    GElf_Ehdr eh;

    if (fd < 0)
        return 0;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    if (e && gelf_getehdr(e, &eh))
        m = eh.e_machine;
    elf_end(e);
    close(fd);
    return m;
}

/* The address range of the file's .plt section; false when it has none. */
static inline bool plt_section(const char *path, uint64_t *lo, uint64_t *hi)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t shstrndx;
    bool found = false;

    if (fd < 0)
        return false;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    if (e && elf_getshdrstrndx(e, &shstrndx) == 0) {
        for (Elf_Scn *s = NULL; !found && (s = elf_nextscn(e, s));) {
            GElf_Shdr sh;
            const char *name;
            if (gelf_getshdr(s, &sh) && (name = elf_strptr(e, shstrndx, sh.sh_name)) &&
                strcmp(name, ".plt") == 0) {
                *lo = sh.sh_addr;
                *hi = sh.sh_addr + sh.sh_size;
                found = true;
            }
        }
    }
    elf_end(e);
    close(fd);
    return found;
}

static inline int build_path(const char *path, const struct cfi_table_opts *o, struct cfi_table **t,
                             char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int ret = cfi_table__build(fd, o, t, err, errlen);
    close(fd);
    return ret;
}

static inline struct cfi_table *must_build(const char *path)
{
    struct cfi_table *t = NULL;
    char err[256];
    int ret = build_path(path, NULL, &t, err, sizeof(err));
    if (ret)
        fail_msg("%s: %d %s", path, ret, err);
    return t;
}

/* The row for ELF address va, NULL below the base. */
static inline const struct cx_cfi_row *row_at(const struct cfi_table *t, uint64_t va)
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

static inline int cfa_type(const struct cx_cfi_row *r)
{
    return CX_CFI_CFA_TYPE(r->rule);
}

static inline int fp_type(const struct cx_cfi_row *r)
{
    return CX_CFI_FP_TYPE(r->rule);
}

/* What every table must be: sorted strictly, merged, closed by NONE. */
static inline void check_shape(const struct cfi_table *t)
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
        assert_true(cfa_type(b) <= CX_CFA_GO_PUSHED && fp_type(b) <= CX_FP_AT_SP);
    }
}

static inline void assert_row(const struct cx_cfi_row *r, int cfa, int cfa_off, int fp, int fp_off)
{
    assert_non_null(r);
    if (cfa_type(r) != cfa || r->cfa_off != cfa_off || fp_type(r) != fp || r->fp_off != fp_off)
        fail_msg("row at pc 0x%x: cfa %d off %d fp %d off %d, want %d %d %d %d", r->pc, cfa_type(r),
                 r->cfa_off, fp_type(r), r->fp_off, cfa, cfa_off, fp, fp_off);
}

#endif

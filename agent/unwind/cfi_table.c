/* The CFI table's entry point: the ELF checks, the caps, the passes over
 * .eh_frame and .debug_frame; the parts are in the files cfi_table_int.h names. */
#include "cfi_table.h"
#include "cfi_table_int.h"

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

#ifndef SHT_X86_64_UNWIND
#define SHT_X86_64_UNWIND 0x70000001 /* what some linkers give .eh_frame on x86_64 */
#endif

/* --- what is specific to the architecture (struct arch: cfi_table_int.h) - */

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

/* arm64: sp 31, x29 the frame pointer, x30 the link register (AAPCS64). */
static const struct arch arches[] = {
    {EM_X86_64, 7, 6, 16, -8, false, x86_64_plt, NULL},
    {EM_AARCH64, 31, 29, 30, 0, true, NULL, cfi_arm64_synth_fdes},
};

uint64_t cfi_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Writes the reason into the caller's buffer and returns code. */
__attribute__((format(printf, 3, 4))) int cfi_fail(struct build *b, int code, const char *fmt, ...)
{
    va_list ap;

    if (b->err && b->errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(b->err, b->errlen, fmt, ap);
        va_end(ap);
    }
    return code;
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
        return cfi_fail(b, -EINVAL, "no program headers: %s", elf_errmsg(-1));
    for (size_t i = 0; i < nph && b->nsegs < MAX_SEGS; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) ||
            ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
            continue;
        b->segs[b->nsegs].lo = ph.p_vaddr;
        b->segs[b->nsegs++].hi = ph.p_vaddr + ph.p_memsz;
    }
    if (b->nsegs == 0)
        return cfi_fail(b, -ENOENT, "no executable segment");
    return 0;
}

int cfi_table__build(int fd, const struct cfi_table_opts *opts, struct cfi_table **out, char *err,
                     size_t errlen)
{
    struct build b = {.err = err, .errlen = errlen};
    uint64_t t0 = cfi_now_ns();
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
        ret = cfi_fail(&b, -ENOMEM, "out of memory");
        goto cleanup;
    }
    if (fstat(fd, &stt) != 0) {
        ret = cfi_fail(&b, -errno, "fstat: %s", strerror(errno));
        goto cleanup;
    }
    elf_version(EV_CURRENT);
    /* Read, not mapped: a file truncated under us must not raise SIGBUS. */
    elf = elf_begin(fd, ELF_C_READ, NULL);
    if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
        ret = cfi_fail(&b, -EINVAL, "not an ELF file");
        goto cleanup;
    }
    memcpy(b.ident, eh.e_ident, EI_NIDENT);
    for (size_t i = 0; i < sizeof(arches) / sizeof(arches[0]); i++) {
        if (arches[i].machine == eh.e_machine)
            b.arch = &arches[i];
    }
    if (!b.arch || eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
        ret = cfi_fail(&b, -EINVAL, "machine %u, class %u: no unwinder for it", eh.e_machine,
                       eh.e_ident[EI_CLASS]);
        goto cleanup;
    }
    if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) {
        ret =
            cfi_fail(&b, -EINVAL, "ELF type %u is not an executable or a shared object", eh.e_type);
        goto cleanup;
    }
    ret = text_segments(&b, elf);
    if (ret)
        goto cleanup;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0) {
        ret = cfi_fail(&b, -EINVAL, "no section names: %s", elf_errmsg(-1));
        goto cleanup;
    }

    /* .eh_frame, or .debug_frame when that is all there is. */
    for (int pass = 0; pass < 2 && b.nfdes == 0; pass++) {
        bool eh_frame = pass == 0;
        const char *name = eh_frame ? ".eh_frame" : ".debug_frame";
        s = cfi_find_section(elf, shstrndx, name, &sh);
        if (!s || sh.sh_size == 0 ||
            (eh_frame && sh.sh_type != SHT_PROGBITS && sh.sh_type != SHT_X86_64_UNWIND) ||
            (!eh_frame && sh.sh_type != SHT_PROGBITS))
            continue;
        found = true;
        ret = cfi_section_data(&b, s, &sh, name, (uint64_t)stt.st_size, &d);
        if (ret)
            goto cleanup;
        cfi_src__close(&src);
        /* The CIEs point into the section just closed. */
        hmap__free(b.cie_index);
        b.cie_index = NULL;
        b.ncies = 0;
        ret = cfi_src__open(&b, &eh, &sh, d, eh_frame, &src);
        if (ret)
            goto cleanup;
        memset(b.t->stats.skipped, 0, sizeof(b.t->stats.skipped));
        b.t->stats.source = eh_frame ? CFI_SRC_EH_FRAME : CFI_SRC_DEBUG_FRAME;
        ret = cfi_collect_fdes(&b, src.d, eh_frame, eh_frame ? sh.sh_addr : 0);
        if (ret)
            goto cleanup;
        if (b.nfdes > 0 && b.o.libdw_rows) {
            ret = cfi_src__cfi(&b, eh_frame, &src);
            if (ret)
                goto cleanup;
        }
    }
    if (b.arch->synth_fdes) {
        ret = b.arch->synth_fdes(&b, elf, shstrndx);
        if (ret)
            goto cleanup;
    }
    if (!found && b.nfdes == 0) {
        ret = cfi_fail(&b, -ENOENT, "no .eh_frame or .debug_frame");
        goto cleanup;
    }
    if (b.nfdes == 0) {
        ret = cfi_fail(&b, -ENOENT, "no FDE for code in an executable segment");
        goto cleanup;
    }

    cfi_order_fdes(&b);
    for (size_t i = 0; i < b.nfdes; i++) {
        bool gap = i + 1 == b.nfdes || b.fdes[i + 1].start != b.fdes[i].end;
        if (b.fdes[i].synth)
            ret = cfi_synth_rows(&b, &b.fdes[i], gap);
        else
            ret = b.o.libdw_rows ? cfi_walk_fde(&b, src.cfi, &b.fdes[i], gap)
                                 : cfi_exec_fde(&b, &b.fdes[i], gap);
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
    b.t->stats.build_ns = cfi_now_ns() - t0;
    *out = b.t;
    b.t = NULL;
    ret = 0;

cleanup:
    cfi_src__close(&src);
    elf_end(elf);
    free(b.fdes);
    free(b.cies);
    hmap__free(b.cie_index);
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

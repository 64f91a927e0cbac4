/* What the files of the CFI table builder share (cfi_table.c the entry
 * point and limits, cfi_fde.c the FDE enumeration, cfi_exec.c our own
 * interpreter of an FDE's instructions and its rows turned into rules,
 * cfi_rows.c the same from libdw's rows (the tests' reference), cfi_section.c the CFI sections and
 * libdw's view of them, cfi_stats.c the stats' names and log line). Only those files include it;
 * the module's face is cfi_table.h.
 */
#ifndef CODEXRAY_AGENT_UNWIND_CFI_TABLE_INT_H
#define CODEXRAY_AGENT_UNWIND_CFI_TABLE_INT_H

#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/hmap.h"
#include "cfi_table.h"

#define MAX_SEGS 64    /* executable PT_LOAD segments looked at */
#define MAX_CIES 65536 /* distinct CIEs a section may have; FDEs of more are skipped */

/* --- what is specific to the architecture ------------------------------- */

struct build;

struct arch {
    unsigned machine; /* e_machine */
    int sp, fp, ra;   /* DWARF register numbers */
    int64_t ra_off;   /* x86_64: the return address is at CFA + ra_off */
    /* arm64: the return address comes in a link register (ra), which keeps
     * it until the prologue saves it wherever CFI says (rows then carry a
     * cx_ra_type); and DW_CFA_GNU_window_save's opcode (0x2d) is
     * DW_CFA_AARCH64_negate_ra_state, which changes no rule. */
    bool lr;
    /* True when ops is the CFA expression of the linker's PLT stubs; *thresh
     * is the byte offset in a 16-byte stub CX_CFA_PLT compares with. NULL
     * where the linker writes no CFI for them. */
    bool (*plt)(const Dwarf_Op *ops, size_t n, int64_t *thresh);
    /* Adds FDEs of our own for code without CFI (arm64's .plt, its vDSO),
     * b->nfdes telling whether the file had any; 0 or a negative errno
     * through cfi_fail. NULL: none. */
    int (*synth_fdes)(struct build *b, Elf *e, size_t shstrndx);
};

/* --- the build's state --------------------------------------------------- */

/* A register's rule in a frame state (cfi_exec.c), for the registers a row
 * needs: the return address and the frame pointer. */
struct cfi_reg_state {
    uint8_t rule;        /* enum reg_rule of cfi_exec.c */
    int64_t val;         /* CFA + val (offset rules), or a register */
    const uint8_t *expr; /* an expression's bytes, in the section */
    uint64_t expr_len;
};

/* The rules of a row: the CFA's, the return address's, the frame pointer's;
 * other registers' rules are read and dropped. */
struct cfi_state {
    uint8_t cfa; /* enum cfa_rule of cfi_exec.c */
    uint64_t cfa_reg;
    int64_t cfa_off;
    const uint8_t *cfa_expr;
    uint64_t cfa_expr_len;
    struct cfi_reg_state ra, fp;
};

struct fde {
    uint64_t start, end;
    const uint8_t *insns, *insns_end; /* its call frame instructions, in the section */
    uint32_t cie;                     /* index into build.cies */
    /* Not from the section: rows of our own for [start, end) (arm64's
     * .plt, cfi_arm64.c); then insns and cie are unused, and synth_at is
     * where the stub's push takes effect (0: none). */
    bool synth;
    bool synth_signal; /* the whole FDE is a signal frame (arm64's vDSO trampoline) */
    uint64_t synth_at, synth_end;
};

struct cie {
    Dwarf_Off off;
    bool ok;     /* its FDEs' addresses can be read */
    uint8_t enc; /* how they are encoded (augmentation 'R') */
    bool z;      /* its FDEs have augmentation data (augmentation 'z') */
    bool signal; /* augmentation 'S': its FDEs are signal frames */
    uint64_t code_align, ra;
    int64_t data_align;
    const uint8_t *insns, *insns_end; /* the initial instructions */
    bool state_done, state_ok;        /* state computed (lazily), and valid */
    struct cfi_state state;           /* the rules before the first FDE instruction */
};

struct build {
    const struct arch *arch;
    struct cfi_table_opts o;
    unsigned char ident[EI_NIDENT];
    struct {
        uint64_t lo, hi;
    } segs[MAX_SEGS];
    unsigned nsegs;
    struct cie *cies; /* every distinct CIE of the section, by first use */
    uint32_t ncies, cies_cap;
    struct hmap *cie_index; /* CIE offset -> index into cies */
    struct fde *fdes;
    size_t nfdes, fdes_cap;
    struct cfi_table *t;
    uint32_t rows_cap;
    uint64_t deadline;
    uint64_t steps; /* rows made, for the deadline */
    char *err;
    size_t errlen;
};

/* libdw's view of one CFI section: an ELF image of our own that holds just
 * that section, at its address (pc-relative pointers are relative to it).
 * Not the real file, for two reasons:
 *   .eh_frame_hdr stays out. libdw trusts its search table, and in 0.188 an
 *   FDE offset there just below the section's start passes
 *   dwarf_next_cfi()'s bounds check (reads before the buffer, seen under
 *   valgrind on garbled files). Without the table libdw finds FDEs by
 *   reading .eh_frame in order, as we do, at the same speed (figures in
 *   the commit).
 *   dwarf_begin_elf() on the real file would read every debug section into
 *   memory (hundreds of MiB with full debug info) to use .debug_frame. */
struct cfi_src {
    void *img;
    Elf *elf;
    Dwarf *dw;
    Dwarf_CFI *cfi;
    Elf_Data *d; /* the section in img */
};

/* cfi_table.c */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t cfi_now_ns(void);
/* Writes the reason into b's error buffer (when it has one) and returns code. */
__attribute__((format(printf, 3, 4))) int cfi_fail(struct build *b, int code, const char *fmt, ...);

/* cfi_fde.c */

/* Appends every usable FDE of section d (at ELF address sec_va) to b->fdes,
 * counting the others in the stats; 0, or -E2BIG/-ENOMEM through cfi_fail. */
int cfi_collect_fdes(struct build *b, Elf_Data *d, bool eh, uint64_t sec_va);
/* Appends f to b->fdes; 0, or -E2BIG/-ENOMEM through cfi_fail. */
int cfi_push_fde(struct build *b, const struct fde *f);
/* Sorts b->fdes, drops overlapping and too-far FDEs, sets b->t->base. */
void cfi_order_fdes(struct build *b);

/* cfi_rows.c */

/* Appends FDE f's rows to b->t (plus a CX_CFA_NONE row at its end when
 * gap_after); 0, or -ETIME/-E2BIG/-ENOMEM/-EINVAL through cfi_fail. */
int cfi_walk_fde(struct build *b, Dwarf_CFI *cfi, const struct fde *f, bool gap_after);
/* Appends the rule r for [addr, ...), merged into the last row when equal;
 * 0, or -E2BIG/-ENOMEM/-EINVAL through cfi_fail. */
int cfi_add_row(struct build *b, uint64_t addr, struct cx_cfi_row r);

/* Counts a CX_CFA_UNSUPPORTED row (before merging) for reason why and returns it. */
struct cx_cfi_row cfi_unsup(struct build *b, enum cfi_table_unsup why);
/* The row where the return address comes in a link register (struct arch's
 * lr): CFA rule (cfa, cfa_u) and fp rule (fp, fp_u) already checked, the
 * return address still in the register (!ra_saved) or at CFA + ra_off. */
struct cx_cfi_row cfi_lr_row(struct build *b, enum cx_cfa_type cfa, int64_t cfa_u,
                             enum cx_fp_type fp, int64_t fp_u, bool ra_saved, int64_t ra_off);

/* cfi_exec.c */

/* The same rows as cfi_walk_fde(), from our own interpreter of f's
 * instructions (one pass, no libdw). */
int cfi_exec_fde(struct build *b, const struct fde *f, bool gap_after);

/* cfi_arm64.c */

/* struct arch's synth_fdes for arm64: where the section had FDEs, one of
 * our own for .plt, whose stubs ld writes no CFI for; where it had none
 * and the file is the vDSO, its leaf functions and its signal trampoline. */
int cfi_arm64_synth_fdes(struct build *b, Elf *e, size_t shstrndx);
/* The rows of such an FDE (then a CX_CFA_NONE row at its end when
 * gap_after): the stubs leave sp alone and the return address in x30,
 * except PLT0 from its `stp x16, x30, [sp, #-16]!` to its branch. */
int cfi_synth_rows(struct build *b, const struct fde *f, bool gap_after);

/* cfi_section.c */

/* The section called name, its header in *sh; NULL when there is none. */
Elf_Scn *cfi_find_section(Elf *e, size_t shstrndx, const char *name, GElf_Shdr *sh);
/* The section's bytes (uncompressed, size checked against the file and the
 * cap) in *out, owned by libelf; 0 or a negative errno through cfi_fail. */
int cfi_section_data(struct build *b, Elf_Scn *s, const GElf_Shdr *sh, const char *name,
                     uint64_t file_size, Elf_Data **out);
/* Builds src's ELF image of the section data; 0 or a negative errno (src
 * then half open: close it). */
int cfi_src__open(struct build *b, const GElf_Ehdr *eh, const GElf_Shdr *orig, const Elf_Data *data,
                  bool eh_frame, struct cfi_src *src);
/* libdw's CFI of the open image in src->cfi; 0 or -EINVAL. */
int cfi_src__cfi(struct build *b, bool eh_frame, struct cfi_src *src);
/* Frees what src holds and zeroes it; src may be zeroed, or half open. */
void cfi_src__close(struct cfi_src *src);

#endif

/* Names Go code from the binary's own line table, .gopclntab: the table the
 * Go runtime reads for its tracebacks, kept even in stripped binaries
 * (-ldflags='-s -w' drops .symtab and DWARF, never this).
 *
 * Layout (all offsets checked against the table's size before each read):
 *   header   magic (0xfffffffb Go 1.2-1.15, 0xfffffffa 1.16-1.17,
 *            0xfffffff0 1.18-1.19, 0xfffffff1 1.20+), two zero bytes, the pc
 *            quantum, the pointer size, then pointer-sized words: the
 *            function count, and (1.16+) the file count, (1.18+) textStart,
 *            and the offsets of funcnametab, cutab, filetab, pctab and the
 *            function table.
 *   functab  nfunc (entry pc, funcinfo offset) pairs and an end pc; 32-bit
 *            offsets from textStart in 1.18+, pointer-sized pcs before.
 *   funcinfo the runtime's _func: entry, name offset, pcsp/pcfile/pcln
 *            (offsets into pctab), npcdata, cu offset, nfuncdata, then the
 *            pcdata offsets and the funcdata references.
 *   pc-value tables: varint pairs (zigzag value delta, pc delta / quantum),
 *            pcfile giving a file index (through cutab in 1.16+), pcln a line,
 *            pcdata[2] an index into the inline tree (funcdata[3]).
 *
 * The table comes from a file of any process on the node, so it is hostile
 * input: a malformed table gives no name, never a crash or an endless loop.
 * Inlined frames are read for Go 1.16 and later (their tree lies outside the
 * table, in the binary's read-only data); 1.2-1.15 tables give the function,
 * its file and line.
 */
#ifndef CODEXRAY_AGENT_SYMBOLIZE_GOPCLNTAB_H
#define CODEXRAY_AGENT_SYMBOLIZE_GOPCLNTAB_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Part of the binary's image: `size` bytes at ELF address `vaddr`. */
struct gopclntab_region {
    uint64_t vaddr;
    const uint8_t *data;
    uint64_t size;
};

struct gopclntab_frame {
    const char *function; /* as the runtime names it: main.(*T).m */
    const char *file;     /* "" when unknown */
    int64_t line;         /* 0 when unknown */
};

struct gopclntab;

/* Parses the table of `size` bytes at `tab`, which the binary loads at
 * `vaddr`. `regions` (copied) is the rest of the image, where the inline
 * trees of Go 1.16+ are found; `text_vaddr` is the start of .text, used when
 * the header's textStart is 0 (position-independent builds). Returns NULL
 * when the table is not one of the layouts above, is inconsistent, or memory
 * runs out. The memory at `tab` and in the regions must outlive the result,
 * which reads it on every lookup. */
struct gopclntab *gopclntab__open(const uint8_t *tab, uint64_t size, uint64_t vaddr,
                                  const struct gopclntab_region *regions, unsigned nregions,
                                  uint64_t text_vaddr);

/* The same from an ELF file held in memory whole (elf_rawfile() of elf):
 * its .gopclntab section, its PT_LOAD segments as regions. NULL when it has
 * no .gopclntab or the table does not parse. */
struct gopclntab *gopclntab__open_elf(Elf *elf);

/* True when elf has a .gopclntab or .go.buildinfo section: a Go binary. */
bool gopclntab__is_go(Elf *elf);

/* g may be NULL. */
void gopclntab__free(struct gopclntab *g);

/* The Go release family of the table's layout: "1.2", "1.16", "1.18" or
 * "1.20". */
const char *gopclntab__version(const struct gopclntab *g);

/* Names the code at ELF address pc: up to max frames, innermost (inlined)
 * first, the function they were inlined into last; each inlined frame's
 * caller has the line of the call. Returns how many frames were filled, 0
 * when pc is in no function of the table or the table is malformed there.
 * The strings point into the table's memory. */
unsigned gopclntab__lookup(const struct gopclntab *g, uint64_t pc, struct gopclntab_frame *frames,
                           unsigned max);

/* A function as the stack walk needs it. flag is the runtime's funcFlag
 * (1.17 on; 0 before): GOPCLNTAB_TOPFRAME for where stacks start
 * (runtime.goexit, mstart, rt0_go), GOPCLNTAB_SPWRITE for functions that
 * move the stack pointer to another stack (systemstack, asmcgocall...). */
#define GOPCLNTAB_TOPFRAME 1
#define GOPCLNTAB_SPWRITE 2
struct gopclntab_func {
    uint64_t entry, end; /* [entry, end): the next function's entry */
    const char *name;    /* NULL when unreadable */
    uint8_t flag;
};

/* For every function, in address order, and every range of its pcsp table
 * (the stack pointer's distance below where it was at the function's
 * entry, in bytes, from pc lo to hi): range(ctx, f, lo, hi, sp). The ranges
 * of one function are consecutive, from its entry. A function whose table
 * is malformed gets no range. Returns the functions visited, or -1 when
 * range returned non-zero (which stops the walk). */
long gopclntab__each_sp(const struct gopclntab *g,
                        int (*range)(void *ctx, const struct gopclntab_func *f, uint64_t lo,
                                     uint64_t hi, int32_t sp),
                        void *ctx);

#endif

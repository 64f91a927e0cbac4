/* Names user-space frames: an offset into a binary becomes function names,
 * one per inlined frame, with file and line, from the binary's ELF symbols
 * (.symtab, .dynsym, .gnu_debugdata) and DWARF (libdw), its separate debug
 * file included (/usr/lib/debug/.build-id/, .gnu_debuglink), and Go code
 * from the binary's .gopclntab (gopclntab.h), stripped or not.
 *
 * Owned by one thread (the worker that turns windows into profiles): it
 * keeps per-binary state in binary->syms, loaded on first use.
 */
#ifndef CODEXRAY_AGENT_SYMBOLIZE_SYMBOLIZER_H
#define CODEXRAY_AGENT_SYMBOLIZE_SYMBOLIZER_H

#include <stdbool.h>
#include <stdint.h>

#include "binary.h"

#define SYM_MAX_INLINE 16

struct sym_line {
    const char *function;    /* demangled */
    const char *system_name; /* as in the binary */
    const char *file;        /* "" when unknown */
    int64_t line;            /* 0 when unknown */
};

struct sym_result {
    uint64_t elf_addr; /* the address in the binary's own terms (addr2line -e BIN ADDR) */
    bool named;
    unsigned n; /* lines, innermost first; 1 or more when named */
    struct sym_line lines[SYM_MAX_INLINE];
};

struct symbolizer;

/* Returns NULL when out of memory. */
struct symbolizer *symbolizer__new(void);
/* s may be NULL. Binaries keep their state until they are freed. */
void symbolizer__free(struct symbolizer *s);

/* Names the code at file_offset of b. is_return says the offset is a return
 * address (every frame but the leaf), so the call before it is named. The
 * result lives until the next lookup in the same binary (its strings until
 * symbolizer__trim()). Never fails: an unnamed result has named false, and
 * the first one for a binary logs why once. A binary that changes under the
 * agent (SIGBUS while reading it) is given up, not fatal. */
const struct sym_result *symbolizer__lookup(struct symbolizer *s, struct binary *b,
                                            uint64_t file_offset, bool is_return);

/* Why b's frames go unnamed, or NULL when it has symbols. Valid while b is. */
const char *symbolizer__why_unnamed(struct symbolizer *s, struct binary *b);

/* True when b has DWARF (file names, lines, inlined frames). */
bool symbolizer__has_dwarf(struct symbolizer *s, struct binary *b);

/* Hands back the file pages of the binaries and debug files looked up since
 * the last call (or trim) once they may add up (a unit's DWARF read, or
 * 128 lookups that read files; otherwise trim does): what the next lookups
 * need comes back from the page cache. Results and their strings stay
 * valid. Call at any point between lookups (the worker does after each
 * profile). */
void symbolizer__drop_pages(struct symbolizer *s);

/* Drops cached results of binaries whose caches grew past their cap, and
 * starts a new window: a binary whose debug file debuginfod was fetching is
 * asked about again at its first lookup after this (and reloaded when the
 * file is here). Call between windows, when no result is held. */
void symbolizer__trim(struct symbolizer *s);

struct debuginfod;
/* Names binaries that lack symbols from debug files d fetches (see
 * debuginfod.h; d outlives s). Call before the first lookup. */
void symbolizer__set_debuginfod(struct symbolizer *s, struct debuginfod *d);

struct debugplain;
/* Every symbolizer's debug files with compressed sections are read from
 * p's decompressed copies (debugplain.h; p outlives them; NULL: none, libdw
 * decompresses them into the heap). Call before the first lookup. */
void symbolizer__set_debug_plain(struct debugplain *p);

/* The binaries with the most unnamed frames since the last trim, as
 * "NAME:FRAMES:debuginfod=STATE,..." (STATE: off, not_asked, no_build_id,
 * pending, failed, fetched), "none" when every frame was named. */
void symbolizer__unnamed_summary(struct symbolizer *s, char *out, size_t n);

/* The vDSO's image as a binary (binary__open_vdso), to name [vdso] frames
 * with; NULL when there is none. Owned by s. */
struct binary *symbolizer__vdso(struct symbolizer *s);

#endif

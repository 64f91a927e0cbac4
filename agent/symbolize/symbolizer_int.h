/* The symbolizer's private parts, shared by symbolizer.c (loading and
 * naming) and symbolizer_debuginfod.c (debug files from debuginfod, the
 * window summary of unnamed binaries). Nothing else includes this. */
#ifndef CODEXRAY_AGENT_SYMBOLIZE_SYMBOLIZER_INT_H
#define CODEXRAY_AGENT_SYMBOLIZE_SYMBOLIZER_INT_H

#include <elfutils/libdwfl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "binary.h"
#include "symbolizer.h"

#define MAX_SEGMENTS 64

struct segment {
    uint64_t offset, filesz, vaddr;
};

struct cu_range;

/* Where a binary that lacks names stands with debuginfod. */
enum dbg_state { DBG_NOT_ASKED, DBG_NO_ID, DBG_PENDING, DBG_FAILED, DBG_FETCHED };

struct binsyms {
    Dwfl *dwfl;
    Dwfl_Module *mod;
    uint64_t bias; /* module address = ELF vaddr + bias */
    struct segment seg[MAX_SEGMENTS];
    unsigned nseg;
    bool has_symtab, has_dwarf;
    int nsyms;
    struct symtab *symtab;      /* the symbols by address (symtab.h) */
    struct plt *plt;            /* PLT stubs' names (plt.h) */
    char why[512];              /* "" when it has symbols */
    struct cu_range *cu_ranges; /* see find_cu */
    struct hmap *cu_index;      /* a unit's DIE offset -> its struct cu_scopes * */
    size_t ncu_ranges;
    bool cu_ranges_built;
    Dwarf_Addr dwarf_bias;
    bool logged;
    bool broken;    /* a SIGBUS while reading it: nothing more is read */
    bool touched;   /* read for a lookup since its images' pages were last handed back */
    bool unit_read; /* a unit's DWARF indexed (cu_index) since then */
    /* A Go binary's own line table, which names its Go code first (see
     * resolve); it reads the file's image that libdwfl holds. */
    struct gopclntab *go;

    /* debuginfod: the fetched debug file (NULL until it is here), whether
     * find_debuginfo handed it out already (a second call is for a dwz
     * file), the window it was last asked about, frames left unnamed in
     * this window (the window summary's list). Kept across a reload. */
    enum dbg_state dbg;
    char *fetched;
    bool fetched_used;
    unsigned epoch;
    uint64_t unnamed_window;
    const char *name; /* the binary's base name; lives as long as it */

    struct hmap *strings; /* interned names, stored with their NUL */
    struct hmap *cache;   /* (offset << 1 | is_return) -> index into results */
    struct sym_result *results;
    size_t nresults, cap_results;
};

struct symbolizer {
    /* Binaries whose state we made, so trim can visit them. Weak: a binary
     * freed elsewhere frees its state through syms_free, which unlists it. */
    struct binsyms **all;
    size_t nall, cap_all;
    struct binary *vdso; /* binary__open_vdso(), on first use */
    bool vdso_tried;
    unsigned epoch;  /* windows: symbolizer__trim() counts them */
    unsigned missed; /* lookups that read files since pages were last handed back */
    bool unit_read;  /* one of them indexed a unit's DWARF (a binsyms' unit_read) */
};

/* The background fetcher (debuginfod.h), when there is one. Set once,
 * before the first lookup, by symbolizer__set_debuginfod. */
extern struct debuginfod *symbolizer_fetcher;
/* Where compressed debug files are decompressed to, when anywhere. Set once,
 * before the first lookup, by symbolizer__set_debug_plain. */
extern struct debugplain *symbolizer_plain;
/* Guards the symbolizer's list of binsyms (see symbolizer.c). */
extern pthread_mutex_t symbolizer_all_mu;

/* libdwfl's find_debuginfo callback (symbolizer_debuginfod.c). */
int symbolizer_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                              Dwarf_Addr base, const char *file_name, const char *debuglink_file,
                              GElf_Word debuglink_crc, char **debuginfo_file_name);

/* Asks the fetcher about b, which lacks names (after each load, and in each
 * later window while its file is on its way). True when the file is here
 * and bs should be loaded anew. */
bool symbolizer_ask_debuginfod(struct binsyms *bs, struct binary *b);

/* str (NULL: "") kept in bs's strings for as long as bs: the copy. */
const char *binsyms__intern(struct binsyms *bs, const char *str);

/* Fills r's lines from DWARF: the inlined frames at addr, innermost first,
 * then the function they were inlined into (symbolizer_dwarf.c). */
void binsyms__name_from_dwarf(struct binsyms *bs, Dwarf_Addr addr, struct sym_result *r,
                              const char *elf_name, const char *elf_sysname);

#endif

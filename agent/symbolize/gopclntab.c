#include "gopclntab.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/varint.h"

#define MAGIC_12 0xfffffffbu
#define MAGIC_116 0xfffffffau
#define MAGIC_118 0xfffffff0u
#define MAGIC_120 0xfffffff1u

#define PCDATA_INLTREEINDEX 2
#define FUNCDATA_INLTREE 3
#define MAX_REGIONS 16
/* A pc-value table longer than this many steps is not a real one. */
#define MAX_STEPS (1u << 20)
#define MAX_INLINE_INDEX (1u << 24)
/* moduledata's gofunc field, in words from its start (runtime/symtab.go):
 * 1.20 added covctrs and ecovctrs before it. */
#define MODULEDATA_GOFUNC_118 38
#define MODULEDATA_GOFUNC_120 40

enum layout { L12 = 12, L116 = 116, L118 = 118, L120 = 120 };

struct gopclntab {
    const uint8_t *tab;
    uint64_t size, vaddr;
    enum layout ver;
    bool big;
    unsigned quantum, ptrsize;
    uint64_t nfunc, nfiles, text_start;
    /* Offsets into tab, each checked below size. */
    uint64_t funcnametab, cutab, filetab, pctab, funcdata, functab;
    unsigned fieldsz;               /* a functab field: 4 in 1.18+, a pointer before */
    uint64_t filetab12, nfiletab12; /* 1.2: the file table and its count */
    uint64_t gofunc;                /* 1.18+: where funcdata offsets start; 0 when not found */
    struct gopclntab_region regions[MAX_REGIONS];
    unsigned nregions;
};

/* --- bounded reads ------------------------------------------------------ */

static bool in_tab(const struct gopclntab *g, uint64_t off, uint64_t len)
{
    return off <= g->size && len <= g->size - off;
}

static uint32_t get32(const struct gopclntab *g, const uint8_t *p)
{
    if (g->big)
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static uint64_t get_word(const struct gopclntab *g, const uint8_t *p, unsigned size)
{
    if (size == 4)
        return get32(g, p);
    uint64_t hi = get32(g, p), lo = get32(g, p + 4);
    return g->big ? hi << 32 | lo : lo << 32 | hi;
}

static bool rd32(const struct gopclntab *g, uint64_t off, uint32_t *v)
{
    if (!in_tab(g, off, 4))
        return false;
    *v = get32(g, g->tab + off);
    return true;
}

static bool rdword(const struct gopclntab *g, uint64_t off, unsigned size, uint64_t *v)
{
    if (!in_tab(g, off, size))
        return false;
    *v = get_word(g, g->tab + off, size);
    return true;
}

/* A NUL-terminated string at off, or NULL when it runs off the table. */
static const char *str_at(const struct gopclntab *g, uint64_t off)
{
    if (off >= g->size || !memchr(g->tab + off, '\0', g->size - off))
        return NULL;
    return (const char *)g->tab + off;
}

/* len bytes at ELF address va, from the regions; NULL when not all there. */
static const uint8_t *region_at(const struct gopclntab *g, uint64_t va, uint64_t len)
{
    for (unsigned i = 0; i < g->nregions; i++) {
        const struct gopclntab_region *r = &g->regions[i];
        if (va >= r->vaddr && va - r->vaddr <= r->size && len <= r->size - (va - r->vaddr))
            return r->data + (va - r->vaddr);
    }
    return NULL;
}

/* --- pc-value tables ---------------------------------------------------- */

/* A 32-bit varint of the pc-value tables at *off: at most 5 bytes (bits
 * past 32 dropped), within the table. */
static bool varint(const struct gopclntab *g, uint64_t *off, uint32_t *v)
{
    if (*off >= g->size)
        return false;
    const uint8_t *p = g->tab + *off;
    const uint8_t *end = g->size - *off > 5 ? p + 5 : g->tab + g->size;
    uint64_t r;

    if (!varint__read(&p, end, &r))
        return false; /* cut short, or longer than a 32-bit varint */
    *off = p - g->tab;
    *v = (uint32_t)r;
    return true;
}

/* The value of the pc-value table at pctab offset `table` for target, in
 * the function starting at entry. Returns false when there is none (no
 * table, target past its end, or a malformed table). */
static bool pcvalue(const struct gopclntab *g, uint32_t table, uint64_t entry, uint64_t target,
                    int32_t *out)
{
    uint64_t off = g->pctab + table, pc = entry;
    int32_t val = -1;

    if (table == 0)
        return false;
    for (unsigned step = 0; step < MAX_STEPS; step++) {
        uint32_t uv, pcdelta;
        if (!varint(g, &off, &uv) || (uv == 0 && step > 0))
            return false;
        if (!varint(g, &off, &pcdelta))
            return false;
        int32_t delta = (uv & 1) ? (int32_t) ~(uv >> 1) : (int32_t)(uv >> 1);
        val = (int32_t)((uint32_t)val + (uint32_t)delta);
        pc += (uint64_t)pcdelta * g->quantum;
        if (target < pc) {
            *out = val;
            return true;
        }
    }
    return false;
}

/* --- functions ---------------------------------------------------------- */

struct func {
    uint64_t off; /* of the _func in tab */
    uint64_t entry;
    uint32_t nameoff, pcfile, pcln, npcdata, cuoff, nfuncdata;
    uint64_t fixed; /* size of _func before its pcdata */
};

static bool functab_pc(const struct gopclntab *g, uint64_t i, uint64_t *pc)
{
    uint64_t v;
    if (!rdword(g, g->functab + 2 * i * g->fieldsz, g->fieldsz, &v))
        return false;
    *pc = g->ver >= L118 ? g->text_start + v : v;
    return true;
}

/* The 32-bit field n (1-based, after the entry) of the _func at off. */
static bool field(const struct gopclntab *g, uint64_t off, unsigned n, uint32_t *v)
{
    unsigned entrysz = g->ver >= L118 ? 4 : g->ptrsize;
    return rd32(g, off + entrysz + (n - 1) * 4, v);
}

static bool find_func(const struct gopclntab *g, uint64_t pc, struct func *f)
{
    uint64_t lo = 0, hi = g->nfunc, first, end, funcoff, entry;

    if (!functab_pc(g, 0, &first) || !functab_pc(g, g->nfunc, &end) || pc < first || pc >= end)
        return false;
    while (hi - lo > 1) { /* the last entry at or below pc; log2(nfunc) steps */
        uint64_t mid = lo + (hi - lo) / 2, mpc;
        if (!functab_pc(g, mid, &mpc))
            return false;
        if (mpc <= pc)
            lo = mid;
        else
            hi = mid;
    }
    if (!functab_pc(g, lo, &entry) ||
        !rdword(g, g->functab + (2 * lo + 1) * g->fieldsz, g->fieldsz, &funcoff))
        return false;
    memset(f, 0, sizeof(*f));
    f->off = g->funcdata + funcoff;
    uint64_t e;
    if (g->ver >= L118) {
        uint32_t e32;
        if (!rd32(g, f->off, &e32))
            return false;
        e = g->text_start + e32;
    } else if (!rdword(g, f->off, g->ptrsize, &e)) {
        return false;
    }
    if (e != entry) /* the function table and the function disagree */
        return false;
    f->entry = entry;
    if (!field(g, f->off, 1, &f->nameoff) || !field(g, f->off, 5, &f->pcfile) ||
        !field(g, f->off, 6, &f->pcln) || !field(g, f->off, 7, &f->npcdata))
        return false;
    if (g->ver >= L116) {
        unsigned last = g->ver >= L120 ? 10 : 9; /* funcID, flag, pad, nfuncdata */
        uint32_t packed;
        if (!field(g, f->off, 8, &f->cuoff) || !field(g, f->off, last, &packed))
            return false;
        f->nfuncdata = g->big ? packed & 0xff : packed >> 24;
        f->fixed = (g->ver >= L118 ? 4 : g->ptrsize) + last * 4;
    }
    return true;
}

static const char *func_name(const struct gopclntab *g, uint32_t nameoff)
{
    const char *n = str_at(g, (g->ver >= L116 ? g->funcnametab : 0) + nameoff);
    return n && n[0] ? n : NULL;
}

static const char *file_name(const struct gopclntab *g, const struct func *f, int32_t fileno)
{
    uint32_t off;
    const char *s;

    if (fileno < 0)
        return "";
    if (g->ver >= L116) {
        if (!rd32(g, g->cutab + ((uint64_t)f->cuoff + (uint32_t)fileno) * 4, &off) ||
            off == UINT32_MAX)
            return "";
        s = str_at(g, g->filetab + off);
    } else {
        if ((uint64_t)fileno >= g->nfiletab12 ||
            !rd32(g, g->filetab12 + (uint64_t)fileno * 4, &off))
            return "";
        s = str_at(g, off);
    }
    return s ? s : "";
}

static void position(const struct gopclntab *g, const struct func *f, uint64_t pc,
                     struct gopclntab_frame *fr)
{
    int32_t fileno, line;

    fr->file = pcvalue(g, f->pcfile, f->entry, pc, &fileno) ? file_name(g, f, fileno) : "";
    fr->line = pcvalue(g, f->pcln, f->entry, pc, &line) && line > 0 ? line : 0;
}

/* The inline tree of f: its address, or 0 when it has none or it cannot be
 * read. */
static uint64_t inline_tree(const struct gopclntab *g, const struct func *f)
{
    if (g->ver < L116 || f->nfuncdata <= FUNCDATA_INLTREE || f->npcdata > 1024)
        return 0;
    uint64_t at = f->off + f->fixed + (uint64_t)f->npcdata * 4;
    if (g->ver >= L118) {
        uint32_t off;
        if (!g->gofunc || !rd32(g, at + FUNCDATA_INLTREE * 4, &off) || off == UINT32_MAX)
            return 0;
        return g->gofunc + off;
    }
    /* 1.16 and 1.17: pointers, aligned to a pointer in the loaded image. */
    if (g->ptrsize == 8 && ((g->vaddr + at) & 4))
        at += 4;
    uint64_t p;
    if (!rdword(g, at + FUNCDATA_INLTREE * g->ptrsize, g->ptrsize, &p))
        return 0;
    return p;
}

unsigned gopclntab__lookup(const struct gopclntab *g, uint64_t pc, struct gopclntab_frame *frames,
                           unsigned max)
{
    struct func f;
    const char *outer;
    unsigned n = 0;

    if (!g || max == 0 || !find_func(g, pc, &f) || !(outer = func_name(g, f.nameoff)))
        return 0;
    uint64_t tree = inline_tree(g, &f);
    uint32_t inl_table = 0;
    if (tree && f.npcdata > PCDATA_INLTREEINDEX &&
        !rd32(g, f.off + f.fixed + PCDATA_INLTREEINDEX * 4, &inl_table))
        inl_table = 0;
    /* Each inlined frame: its name from the tree, its position at pc; then
     * pc moves to the call site in its caller (parentPc), as the runtime's
     * traceback does. Bounded by max, whatever the tree says. */
    unsigned esize = g->ver >= L120 ? 16 : 20;
    while (tree && inl_table && n + 1 < max) {
        int32_t ix;
        if (!pcvalue(g, inl_table, f.entry, pc, &ix) || ix < 0 || (uint32_t)ix >= MAX_INLINE_INDEX)
            break;
        const uint8_t *e = region_at(g, tree + (uint64_t)ix * esize, esize);
        if (!e)
            break;
        uint32_t nameoff = get32(g, e + (g->ver >= L120 ? 4 : 12));
        uint32_t parent_pc = get32(g, e + (g->ver >= L120 ? 8 : 16));
        const char *name = func_name(g, nameoff);
        if (!name)
            break;
        frames[n].function = name;
        position(g, &f, pc, &frames[n]);
        n++;
        pc = f.entry + parent_pc;
    }
    frames[n].function = outer;
    position(g, &f, pc, &frames[n]);
    return n + 1;
}

/* --- stack-pointer tables ------------------------------------------------ */

/* The _func of function i: its entry, pcsp table and flag. */
static bool func_at(const struct gopclntab *g, uint64_t i, struct gopclntab_func *out,
                    uint32_t *pcsp)
{
    uint64_t funcoff, e;
    uint32_t nameoff;

    if (!functab_pc(g, i, &out->entry) || !functab_pc(g, i + 1, &out->end) ||
        out->end <= out->entry ||
        !rdword(g, g->functab + (2 * i + 1) * g->fieldsz, g->fieldsz, &funcoff))
        return false;
    uint64_t off = g->funcdata + funcoff;
    if (g->ver >= L118) {
        uint32_t e32;
        if (!rd32(g, off, &e32))
            return false;
        e = g->text_start + e32;
    } else if (!rdword(g, off, g->ptrsize, &e)) {
        return false;
    }
    if (e != out->entry || !field(g, off, 1, &nameoff) || !field(g, off, 4, pcsp))
        return false;
    out->name = func_name(g, nameoff);
    out->flag = 0;
    if (g->ver >= L116) {
        uint32_t packed;
        /* funcID, flag, a pad byte, nfuncdata (flag is 0 in 1.16) */
        if (!field(g, off, g->ver >= L120 ? 10 : 9, &packed))
            return false;
        out->flag = g->big ? (packed >> 16) & 0xff : (packed >> 8) & 0xff;
    }
    return true;
}

long gopclntab__each_sp(const struct gopclntab *g,
                        int (*range)(void *ctx, const struct gopclntab_func *f, uint64_t lo,
                                     uint64_t hi, int32_t sp),
                        void *ctx)
{
    long visited = 0;

    for (uint64_t i = 0; g && i < g->nfunc; i++) {
        struct gopclntab_func f;
        uint32_t pcsp;
        if (!func_at(g, i, &f, &pcsp))
            continue;
        visited++;
        if (!pcsp)
            continue;
        /* The table's pairs, as pcvalue reads them, each giving a range. */
        uint64_t off = g->pctab + pcsp, pc = f.entry;
        int32_t val = -1;
        for (unsigned step = 0; step < MAX_STEPS && pc < f.end; step++) {
            uint32_t uv, pcdelta;
            if (!varint(g, &off, &uv) || (uv == 0 && step > 0) || !varint(g, &off, &pcdelta))
                break;
            int32_t delta = (uv & 1) ? (int32_t) ~(uv >> 1) : (int32_t)(uv >> 1);
            val = (int32_t)((uint32_t)val + (uint32_t)delta);
            uint64_t next = pc + (uint64_t)pcdelta * g->quantum;
            if (next <= pc || next > f.end)
                break; /* a table that goes nowhere, or past its function */
            if (range(ctx, &f, pc, next, val))
                return -1;
            pc = next;
        }
    }
    return visited;
}

/* --- opening ------------------------------------------------------------ */

/* 1.18+: funcdata offsets count from moduledata.gofunc. moduledata is in the
 * writable data: the one whose first word is the table's address and whose
 * funcnametab slice points at the table's funcnametab. */
static void find_gofunc(struct gopclntab *g)
{
    unsigned ps = g->ptrsize, idx = g->ver >= L120 ? MODULEDATA_GOFUNC_120 : MODULEDATA_GOFUNC_118;

    for (unsigned i = 0; i < g->nregions; i++) {
        const struct gopclntab_region *r = &g->regions[i];
        for (uint64_t o = 0; r->size >= (uint64_t)(idx + 1) * ps && o <= r->size - (idx + 1) * ps;
             o += ps) {
            const uint8_t *p = r->data + o;
            if (get_word(g, p, ps) != g->vaddr ||
                get_word(g, p + ps, ps) != g->vaddr + g->funcnametab)
                continue;
            uint64_t gofunc = get_word(g, p + (uint64_t)idx * ps, ps);
            if (region_at(g, gofunc, 1)) {
                g->gofunc = gofunc;
                return;
            }
        }
    }
}

static bool parse_header(struct gopclntab *g)
{
    uint32_t magic;
    uint64_t w[8];

    if (g->size < 16 || g->tab[4] != 0 || g->tab[5] != 0)
        return false;
    g->quantum = g->tab[6];
    g->ptrsize = g->tab[7];
    if ((g->quantum != 1 && g->quantum != 2 && g->quantum != 4) ||
        (g->ptrsize != 4 && g->ptrsize != 8))
        return false;
    for (int big = 0; big < 2; big++) {
        g->big = big;
        magic = get32(g, g->tab);
        if (magic == MAGIC_12 || magic == MAGIC_116 || magic == MAGIC_118 || magic == MAGIC_120)
            break;
    }
    switch (magic) {
    case MAGIC_12:
        g->ver = L12;
        break;
    case MAGIC_116:
        g->ver = L116;
        break;
    case MAGIC_118:
        g->ver = L118;
        break;
    case MAGIC_120:
        g->ver = L120;
        break;
    default:
        return false;
    }
    g->fieldsz = g->ver >= L118 ? 4 : g->ptrsize;
    unsigned nw = g->ver == L12 ? 1 : g->ver == L116 ? 7 : 8;
    for (unsigned i = 0; i < nw; i++)
        if (!rdword(g, 8 + (uint64_t)i * g->ptrsize, g->ptrsize, &w[i]))
            return false;
    g->nfunc = w[0];
    if (g->ver == L12) {
        g->functab = 8 + g->ptrsize;
        g->funcdata = 0;
        g->pctab = 0;
    } else {
        unsigned k = g->ver == L116 ? 2 : 3;
        g->nfiles = w[1];
        if (g->ver >= L118)
            g->text_start = w[2];
        g->funcnametab = w[k];
        g->cutab = w[k + 1];
        g->filetab = w[k + 2];
        g->pctab = w[k + 3];
        g->funcdata = g->functab = w[k + 4];
        if (g->funcnametab >= g->size || g->cutab >= g->size || g->filetab >= g->size ||
            g->pctab >= g->size || g->functab >= g->size)
            return false;
    }
    /* nfunc + 1 pcs and nfunc funcinfo offsets must fit. */
    if (g->nfunc == 0 || g->nfunc > g->size / (2 * g->fieldsz) ||
        !in_tab(g, g->functab, (2 * g->nfunc + 1) * g->fieldsz))
        return false;
    if (g->ver == L12) {
        /* The file table's offset follows the function table. */
        uint32_t off, n;
        if (!rd32(g, g->functab + (2 * g->nfunc + 1) * g->fieldsz, &off) || !rd32(g, off, &n) ||
            !in_tab(g, off, (uint64_t)n * 4))
            return false;
        g->filetab12 = off;
        g->nfiletab12 = n;
    }
    return true;
}

struct gopclntab *gopclntab__open(const uint8_t *tab, uint64_t size, uint64_t vaddr,
                                  const struct gopclntab_region *regions, unsigned nregions,
                                  uint64_t text_vaddr)
{
    struct gopclntab *g;

    if (!tab)
        return NULL;
    g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->tab = tab;
    g->size = size;
    g->vaddr = vaddr;
    for (unsigned i = 0; i < nregions && g->nregions < MAX_REGIONS; i++)
        if (regions[i].data && regions[i].size)
            g->regions[g->nregions++] = regions[i];
    if (!parse_header(g)) {
        free(g);
        return NULL;
    }
    if (g->ver >= L118) {
        if (!g->text_start)
            g->text_start = text_vaddr;
        find_gofunc(g);
    }
    return g;
}

static bool section_named(Elf *elf, const char *name, GElf_Shdr *out)
{
    size_t shstrndx;

    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return false;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr sh;
        const char *n;
        if (gelf_getshdr(scn, &sh) && (n = elf_strptr(elf, shstrndx, sh.sh_name)) &&
            strcmp(n, name) == 0) {
            *out = sh;
            return true;
        }
    }
    return false;
}

bool gopclntab__is_go(Elf *elf)
{
    GElf_Shdr sh;
    return section_named(elf, ".gopclntab", &sh) || section_named(elf, ".go.buildinfo", &sh);
}

struct gopclntab *gopclntab__open_elf(Elf *elf)
{
    struct gopclntab_region regions[MAX_REGIONS];
    unsigned nregions = 0;
    GElf_Shdr tab, text;
    size_t fsize = 0, nph;
    const uint8_t *file;

    if (!section_named(elf, ".gopclntab", &tab) || tab.sh_type != SHT_PROGBITS)
        return NULL;
    file = (const uint8_t *)elf_rawfile(elf, &fsize);
    if (!file || tab.sh_offset > fsize || tab.sh_size > fsize - tab.sh_offset)
        return NULL;
    if (elf_getphdrnum(elf, &nph) == 0) {
        for (size_t i = 0; i < nph && nregions < MAX_REGIONS; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD || ph.p_offset > fsize)
                continue;
            uint64_t n = ph.p_filesz < fsize - ph.p_offset ? ph.p_filesz : fsize - ph.p_offset;
            regions[nregions++] = (struct gopclntab_region){ph.p_vaddr, file + ph.p_offset, n};
        }
    }
    uint64_t text_vaddr = section_named(elf, ".text", &text) ? text.sh_addr : 0;
    return gopclntab__open(file + tab.sh_offset, tab.sh_size, tab.sh_addr, regions, nregions,
                           text_vaddr);
}

void gopclntab__free(struct gopclntab *g)
{
    free(g);
}

const char *gopclntab__version(const struct gopclntab *g)
{
    switch (g->ver) {
    case L12:
        return "1.2";
    case L116:
        return "1.16";
    case L118:
        return "1.18";
    case L120:
        return "1.20";
    }
    return "?";
}

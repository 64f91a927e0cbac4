#include "symtab.h"

#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "binary.h"

/* Names are read in string-table order, their pages handed back each time
 * the read has passed this many bytes. */
#define NAMES_DROP_BYTES (1u << 20)

struct sym {
    uint64_t start, end; /* end == start for a symbol without a size */
    const char *name;
    uint32_t order; /* libdwfl's index: the last tie-break */
    uint8_t rank;   /* 0 global, 1 weak, 2 local (or other) */
};

struct range {
    uint64_t lo, hi;
};

struct symtab {
    struct sym *s;
    uint64_t *max_end; /* max_end[i]: the highest end of s[0..i] */
    size_t n;
    /* The allocated sections' address ranges, sorted: a symbol without a
     * size names only addresses of its own section (as in libdwfl). */
    struct range *sec;
    size_t nsec;
};

static int cmp_range(const void *pa, const void *pb)
{
    const struct range *a = pa, *b = pb;

    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* The allocated sections of mod's main ELF file, as module addresses. */
static void read_sections(struct symtab *t, Dwfl_Module *mod)
{
    GElf_Addr bias = 0;
    Elf *e = dwfl_module_getelf(mod, &bias);
    size_t n = 0, cap = 0;

    if (!e || elf_getshdrnum(e, &cap) || cap == 0)
        return;
    t->sec = malloc(cap * sizeof(*t->sec));
    if (!t->sec)
        return;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn)) && n < cap;) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_ALLOC) && sh.sh_size)
            t->sec[n++] = (struct range){sh.sh_addr + bias, sh.sh_addr + bias + sh.sh_size};
    }
    qsort(t->sec, n, sizeof(*t->sec), cmp_range);
    t->nsec = n;
}

/* The section holding addr, or NULL (outside every one, or no sections). */
static const struct range *section_of(const struct symtab *t, uint64_t addr)
{
    size_t lo = 0, hi = t->nsec;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->sec[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && addr < t->sec[lo - 1].hi ? &t->sec[lo - 1] : NULL;
}

static int cmp_sym(const void *pa, const void *pb)
{
    const struct sym *a = pa, *b = pb;
    bool sa = a->end > a->start, sb = b->end > b->start;

    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (sa != sb)
        return sa ? -1 : 1; /* with a size first */
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    /* As libdwfl: of equals with a size the one it met first, of equals
     * without one the one it met last. */
    if (sa)
        return a->order < b->order ? -1 : a->order > b->order;
    return a->order > b->order ? -1 : a->order < b->order;
}

static uint8_t rank_of(const GElf_Sym *sym)
{
    switch (GELF_ST_BIND(sym->st_info)) {
    case STB_GLOBAL:
        return 0;
    case STB_WEAK:
        return 1;
    default:
        return 2;
    }
}

static int cmp_name_at(const void *pa, const void *pb, void *arg)
{
    const struct sym *s = arg;
    uintptr_t a = (uintptr_t)s[*(const uint32_t *)pa].name;
    uintptr_t b = (uintptr_t)s[*(const uint32_t *)pb].name;

    return a < b ? -1 : a > b;
}

/* Leaves out t's symbols with an empty name. The first byte of each name is
 * read in the order the names lie in the string table, and the pages read
 * are handed back every NAMES_DROP_BYTES: read in the symbols' order, a C++
 * library's whole string table was resident at once (libclickhouse's
 * .dynstr: 13 MiB, the agent's RSS peak on a busy node). Out of memory for
 * the order, the names are read as they come. */
static void drop_unnamed(struct symtab *t, Dwfl_Module *mod)
{
    uint32_t *order = malloc(t->n * sizeof(*order));
    GElf_Addr bias;
    Elf *elf = dwfl_module_getelf(mod, &bias);
    uintptr_t from = 0; /* where the names not handed back yet start */
    size_t kept = 0;

    for (size_t i = 0; order && i < t->n; i++)
        order[i] = (uint32_t)i;
    if (order)
        qsort_r(order, t->n, sizeof(*order), cmp_name_at, t->s);
    for (size_t k = 0; k < t->n; k++) {
        struct sym *s = &t->s[order ? order[k] : k];
        uintptr_t at = (uintptr_t)s->name;
        if (!from)
            from = at;
        if (!s->name[0])
            s->name = NULL;
        /* Names of another table (a debug file's, .gnu_debugdata's in the
         * heap) make a stretch outside elf's image: left to the load's end. */
        if (order && at >= from && at - from >= NAMES_DROP_BYTES) {
            binary__drop_pages(elf, (const void *)from, at - from);
            from = at;
        }
    }
    free(order); /* the last stretch goes with the whole image, after the load */
    for (size_t i = 0; i < t->n; i++)
        if (t->s[i].name)
            t->s[kept++] = t->s[i];
    t->n = kept;
}

struct symtab *symtab__build(Dwfl_Module *mod)
{
    int total = mod ? dwfl_module_getsymtab(mod) : -1;
    struct symtab *t;

    if (total <= 0)
        return NULL;
    t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->s = malloc((size_t)total * sizeof(*t->s));
    t->max_end = malloc((size_t)total * sizeof(*t->max_end));
    if (!t->s || !t->max_end) {
        symtab__free(t);
        return NULL;
    }
    for (int i = 0; i < total; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        GElf_Word shndx;
        const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
        int type = GELF_ST_TYPE(sym.st_info);
        /* What libdwfl never answers with: no name, undefined, or not an
         * address in the code (sections, files, thread-local offsets); an
         * empty name is left out below. */
        if (!name || shndx == SHN_UNDEF || type == STT_SECTION || type == STT_FILE ||
            type == STT_TLS)
            continue;
        t->s[t->n++] = (struct sym){addr, addr + sym.st_size, name, (uint32_t)i, rank_of(&sym)};
    }
    drop_unnamed(t, mod);
    if (!t->n) {
        symtab__free(t);
        return NULL;
    }
    /* Sized for every symbol libdwfl has; kept for as long as the binary's
     * names are, so the room of those left out is given back. */
    if (t->n < (size_t)total) {
        struct sym *s = realloc(t->s, t->n * sizeof(*s));
        uint64_t *m = realloc(t->max_end, t->n * sizeof(*m));
        if (s)
            t->s = s;
        if (m)
            t->max_end = m;
    }
    qsort(t->s, t->n, sizeof(*t->s), cmp_sym);
    read_sections(t, mod);
    for (size_t i = 0; i < t->n; i++) {
        uint64_t e = t->s[i].end;
        t->max_end[i] = i && t->max_end[i - 1] > e ? t->max_end[i - 1] : e;
    }
    return t;
}

void symtab__free(struct symtab *t)
{
    if (!t)
        return;
    free(t->s);
    free(t->max_end);
    free(t->sec);
    free(t);
}

/* The number of symbols starting at or below addr. */
static size_t upper(const struct symtab *t, uint64_t addr)
{
    size_t lo = 0, hi = t->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->s[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const char *symtab__lookup(const struct symtab *t, uint64_t addr, uint64_t *start)
{
    size_t n = t ? upper(t, addr) : 0;
    const struct sym *best = NULL;

    /* The sized symbol holding addr that starts highest: walk down while a
     * symbol below could still reach addr. */
    for (size_t j = n; j > 0 && t->max_end[j - 1] > addr; j--) {
        const struct sym *s = &t->s[j - 1];
        if (best && s->start != best->start)
            break;
        if (s->end > addr)
            best = s; /* at one start the preferred one sorts first */
    }
    /* Else the closest symbol without a size, with nothing starting between
     * it and addr: the first of the symbols at the highest start. */
    if (!best && n) {
        size_t j = n - 1;
        while (j > 0 && t->s[j - 1].start == t->s[n - 1].start)
            j--;
        for (; j < n; j++) {
            if (t->s[j].end == t->s[j].start) {
                best = &t->s[j];
                break;
            }
        }
        if (best && t->nsec && section_of(t, best->start) != section_of(t, addr))
            best = NULL;
    }
    if (best && start)
        *start = best->start;
    return best ? best->name : NULL;
}

size_t symtab__count(const struct symtab *t)
{
    return t ? t->n : 0;
}

size_t symtab__bytes(const struct symtab *t)
{
    return t ? sizeof(*t) + t->n * (sizeof(*t->s) + sizeof(*t->max_end)) + t->nsec * sizeof(*t->sec)
             : 0;
}

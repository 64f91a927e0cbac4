/* The symbolizer's naming from DWARF (symbolizer.c resolves an address
 * to a binary's symbol, then asks here for the inlined frames and lines
 * at it): the units' address ranges, a unit's scopes, the chain of
 * inlined scopes at an address. Shares symbolizer_int.h. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/hmap.h"
#include "demangle.h"
#include "dwarf_scopes.h"
#include "symbolizer_int.h"

static const char *die_name(Dwarf_Die *die, const char **system_name, char **owned)
{
    Dwarf_Attribute a;
    const char *n;

    *owned = NULL;
    n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
    if (!n)
        n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
    if (n) {
        *system_name = n;
        *owned = demangle(n);
        return *owned ? *owned : n;
    }
    n = dwarf_diename(die);
    *system_name = n;
    return n;
}

/* The compile unit holding addr. libdw finds it through .debug_aranges,
 * which clang does not emit; without them, a table of every CU's address
 * ranges is built once per binary and searched. */
struct cu_range {
    uint64_t lo, hi;
    Dwarf_Off off;
};

static int cmp_range(const void *a, const void *b)
{
    const struct cu_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void build_cu_ranges(struct binsyms *bs)
{
    Dwarf_Die *cu = NULL;
    Dwarf_Addr cubias;
    size_t cap = 0;

    bs->cu_ranges_built = true;
    while ((cu = dwfl_module_nextcu(bs->mod, cu, &cubias))) {
        Dwarf_Addr base, lo, hi;
        ptrdiff_t off = 0;
        bs->dwarf_bias = cubias;
        while ((off = dwarf_ranges(cu, off, &base, &lo, &hi)) > 0) {
            if (bs->ncu_ranges == cap) {
                cap = cap ? cap * 2 : 64;
                struct cu_range *r = realloc(bs->cu_ranges, cap * sizeof(*r));
                if (!r)
                    return;
                bs->cu_ranges = r;
            }
            bs->cu_ranges[bs->ncu_ranges++] = (struct cu_range){lo, hi, dwarf_dieoffset(cu)};
        }
    }
    qsort(bs->cu_ranges, bs->ncu_ranges, sizeof(*bs->cu_ranges), cmp_range);
}

static Dwarf_Die *find_cu(struct binsyms *bs, Dwarf_Addr addr, Dwarf_Addr *cubias, Dwarf_Die *mem)
{
    Dwarf_Die *cu = dwfl_module_addrdie(bs->mod, addr, cubias);
    Dwarf *dw;

    if (cu)
        return cu;
    if (!bs->cu_ranges_built)
        build_cu_ranges(bs);
    *cubias = bs->dwarf_bias;
    uint64_t a = addr - bs->dwarf_bias;
    size_t lo = 0, hi = bs->ncu_ranges;
    while (lo < hi) { /* the last range starting at or below a */
        size_t mid = lo + (hi - lo) / 2;
        if (bs->cu_ranges[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Ranges of different CUs do not overlap in practice; check a few back. */
    for (size_t i = lo; i > 0 && i + 8 > lo; i--) {
        const struct cu_range *r = &bs->cu_ranges[i - 1];
        if (a >= r->lo && a < r->hi && (dw = dwfl_module_getdwarf(bs->mod, cubias)) &&
            dwarf_offdie(dw, r->off, mem))
            return mem;
    }
    return NULL;
}

/* The unit's index of functions and inlined calls (dwarf_scopes.h), built
 * on first use; NULL when it cannot be. */
static struct cu_scopes *cu_index(struct binsyms *bs, Dwarf_Die *cu)
{
    Dwarf_Off key = dwarf_dieoffset(cu);
    bool fresh;
    long i;

    if (!bs->cu_index && !(bs->cu_index = hmap__new()))
        return NULL;
    i = hmap__put(bs->cu_index, &key, sizeof(key), &fresh);
    if (i < 0)
        return NULL;
    if (fresh) {
        *hmap__val(bs->cu_index, i) = (uint64_t)(uintptr_t)cu_scopes__build(cu);
        bs->unit_read = true; /* a whole unit's DIEs read: its pages are handed back soon */
    }
    return (struct cu_scopes *)(uintptr_t)*hmap__val(bs->cu_index, i);
}

/* The scopes holding addr (the unit's address), innermost first, as DIEs
 * in a new array *out (the caller frees it). Returns how many, or 0. The
 * concrete chain of callers: an inlined call, the one it sits in... up to
 * the function, as eu-addr2line -i names them. From the unit's index, else
 * (a unit too big to index) from libdw, which walks the unit twice: once to
 * find the innermost scope, once for its parents (dwarf_getscopes follows
 * an inlined instance into its abstract definition). */
static int scope_chain(struct binsyms *bs, Dwarf_Die *cu, Dwarf_Addr addr, Dwarf_Die **out)
{
    struct cu_scopes *sc = cu_index(bs, cu);
    Dwarf_Off offs[SYM_MAX_INLINE * 2];
    Dwarf *dw = dwarf_cu_getdwarf(cu->cu);
    int n;

    *out = NULL;
    if (!sc || !dw) {
        n = dwarf_getscopes(cu, addr, out);
        if (n > 0) {
            Dwarf_Die inner = (*out)[0];
            free(*out);
            *out = NULL;
            n = dwarf_getscopes_die(&inner, out);
        }
        return n > 0 ? n : 0;
    }
    n = cu_scopes__chain(sc, addr, offs, SYM_MAX_INLINE * 2);
    if (n <= 0 || !(*out = calloc((size_t)n, sizeof(**out))))
        return 0;
    for (int i = 0; i < n; i++) {
        if (!dwarf_offdie(dw, offs[i], &(*out)[i])) {
            free(*out);
            *out = NULL;
            return 0;
        }
    }
    return n;
}

/* Fills r's lines from DWARF: the inlined frames at addr, innermost first,
 * then the function they were inlined into. */
void binsyms__name_from_dwarf(struct binsyms *bs, Dwarf_Addr addr, struct sym_result *r,
                              const char *elf_name, const char *elf_sysname)
{
    Dwarf_Addr cubias = 0;
    Dwarf_Die cumem, *cu = find_cu(bs, addr, &cubias, &cumem);
    Dwarf_Die *scopes = NULL;
    Dwarf_Files *files = NULL;
    const char *file = "";
    int line = 0, n = 0;

    if (cu) {
        Dwarf_Line *dl = dwarf_getsrc_die(cu, addr - cubias);
        const char *f = dl ? dwarf_linesrc(dl, NULL, NULL) : NULL;
        if (f) {
            file = f;
            dwarf_lineno(dl, &line);
        }
        n = scope_chain(bs, cu, addr - cubias, &scopes);
    }
    if (n <= 0) {
        r->lines[0] =
            (struct sym_line){binsyms__intern(bs, elf_name), binsyms__intern(bs, elf_sysname),
                              binsyms__intern(bs, file), line};
        r->n = 1;
        free(scopes);
        return;
    }
    size_t nfiles = 0;
    dwarf_getsrcfiles(cu, &files, &nfiles);
    r->n = 0;
    for (int i = 0; i < n && r->n < SYM_MAX_INLINE; i++) {
        Dwarf_Die *d = &scopes[i];
        int tag = dwarf_tag(d);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
            continue;
        const char *sys = NULL, *name;
        char *owned;
        if (tag == DW_TAG_subprogram && elf_name) {
            name = elf_name; /* the symbol table's name is the one users grep for */
            sys = elf_sysname;
            owned = NULL;
        } else {
            name = die_name(d, &sys, &owned);
        }
        r->lines[r->n++] = (struct sym_line){binsyms__intern(bs, name ? name : "??"),
                                             binsyms__intern(bs, sys ? sys : name),
                                             binsyms__intern(bs, file), line};
        free(owned);
        if (tag == DW_TAG_subprogram)
            break;
        /* The caller's position is where this inlined copy was called. */
        Dwarf_Attribute a;
        Dwarf_Word w;
        line = dwarf_formudata(dwarf_attr(d, DW_AT_call_line, &a), &w) == 0 ? (int)w : 0;
        file = "";
        if (files && dwarf_formudata(dwarf_attr(d, DW_AT_call_file, &a), &w) == 0 && w < nfiles) {
            const char *f = dwarf_filesrc(files, w, NULL, NULL);
            if (f)
                file = f;
        }
    }
    if (r->n == 0) {
        r->lines[0] =
            (struct sym_line){binsyms__intern(bs, elf_name), binsyms__intern(bs, elf_sysname),
                              binsyms__intern(bs, file), line};
        r->n = 1;
    }
    free(scopes);
}

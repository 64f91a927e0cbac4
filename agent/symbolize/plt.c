#include "plt.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A hostile or huge file cannot make the table grow without bound. */
#define PLT_MAX_STUBS (1u << 20)
#define PLT_MAX_SLOTS (1u << 21)
#define PLT_MAX_NAME_BYTES (16u << 20)

struct stub {
    uint64_t lo, hi;
    uint32_t name; /* offset into names */
};

struct plt {
    struct stub *s;
    size_t n;
    char *names;
};

struct slot {
    uint64_t got;     /* the GOT slot's address */
    const char *name; /* the symbol's, in the ELF's string table */
};

struct gather {
    /* The dynamic symbols of type STT_GNU_IFUNC by value: an IRELATIVE
     * relocation (a library's calls to its own IFUNCs, such as libc's
     * memcpy) names no symbol, only the resolver's address. */
    struct slot *ifuncs;
    size_t nifuncs;
    bool ifuncs_read;
    struct slot *slots;
    size_t nslots, cap;
    struct stub *stubs;
    size_t nstubs, scap;
    char *names;
    size_t nlen, ncap;
};

static int cmp_slot(const void *pa, const void *pb)
{
    const struct slot *a = pa, *b = pb;

    return a->got < b->got ? -1 : a->got > b->got;
}

static int cmp_slot_name(const void *pa, const void *pb)
{
    const struct slot *a = pa, *b = pb;

    if (a->got != b->got)
        return a->got < b->got ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int cmp_stub(const void *pa, const void *pb)
{
    const struct stub *a = pa, *b = pb;

    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static const char *slot_name_in(const struct slot *v, size_t n, uint64_t key)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].got < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].got == key ? v[lo].name : NULL;
}

static const char *ifunc_name(const struct gather *g, uint64_t resolver)
{
    return slot_name_in(g->ifuncs, g->nifuncs, resolver);
}

/* The IFUNC symbols of the dynamic symbol table at section index symidx. */
static int read_ifuncs(struct gather *g, Elf *e, size_t symidx)
{
    Elf_Scn *scn = elf_getscn(e, symidx);
    GElf_Shdr sh;
    Elf_Data *d;

    g->ifuncs_read = true;
    if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize ||
        !(d = elf_getdata(scn, NULL)))
        return 0;
    size_t n = sh.sh_size / sh.sh_entsize, cap = 0;
    for (size_t i = 1; i < n && g->nifuncs < PLT_MAX_SLOTS; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC ||
            sym.st_shndx == SHN_UNDEF)
            continue;
        const char *name = elf_strptr(e, sh.sh_link, sym.st_name);
        if (!name || !name[0])
            continue;
        if (g->nifuncs == cap) {
            cap = cap ? 2 * cap : 64;
            struct slot *ns = realloc(g->ifuncs, cap * sizeof(*ns));
            if (!ns)
                return -1;
            g->ifuncs = ns;
        }
        g->ifuncs[g->nifuncs++] = (struct slot){sym.st_value, name};
    }
    /* Several names for one resolver (memcpy and __memcpy_chk's aliases):
     * sorted by value then name, the first is the one taken. */
    qsort(g->ifuncs, g->nifuncs, sizeof(*g->ifuncs), cmp_slot_name);
    return 0;
}

/* Slots named by the relocations of one SHT_RELA section over the dynamic
 * symbols. Returns -1 when out of memory. */
static int read_relocs(struct gather *g, Elf *e, Elf_Scn *rela, const GElf_Shdr *rsh)
{
    Elf_Scn *symscn = elf_getscn(e, rsh->sh_link);
    GElf_Shdr ssh;
    Elf_Data *rd = elf_getdata(rela, NULL), *sd;

    if (!g->ifuncs_read && read_ifuncs(g, e, rsh->sh_link))
        return -1;

    if (!symscn || !gelf_getshdr(symscn, &ssh) || ssh.sh_type != SHT_DYNSYM || !rd ||
        !(sd = elf_getdata(symscn, NULL)) || !rsh->sh_entsize)
        return 0;
    size_t n = rsh->sh_size / rsh->sh_entsize;
    for (size_t i = 0; i < n && g->nslots < PLT_MAX_SLOTS; i++) {
        GElf_Rela r;
        GElf_Sym sym;
        if (!gelf_getrela(rd, (int)i, &r))
            break;
        unsigned type = GELF_R_TYPE(r.r_info);
        const char *name = NULL;
        if (type == R_X86_64_IRELATIVE)
            name = ifunc_name(g, (uint64_t)r.r_addend);
        else if ((type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) &&
                 gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &sym))
            name = elf_strptr(e, ssh.sh_link, sym.st_name);
        if (!name || !name[0])
            continue;
        if (g->nslots == g->cap) {
            size_t cap = g->cap ? 2 * g->cap : 64;
            struct slot *ns = realloc(g->slots, cap * sizeof(*ns));
            if (!ns)
                return -1;
            g->slots = ns;
            g->cap = cap;
        }
        g->slots[g->nslots++] = (struct slot){r.r_offset, name};
    }
    return 0;
}

static const char *slot_name(const struct gather *g, uint64_t got)
{
    return slot_name_in(g->slots, g->nslots, got);
}

static int add_stub(struct gather *g, uint64_t lo, uint64_t hi, const char *name)
{
    size_t len = strnlen(name, 4096) + sizeof("@plt");

    if (g->nlen + len > PLT_MAX_NAME_BYTES)
        return 0; /* past the bound: the rest stay unnamed */
    if (g->nstubs == g->scap) {
        size_t cap = g->scap ? 2 * g->scap : 64;
        struct stub *ns = realloc(g->stubs, cap * sizeof(*ns));
        if (!ns)
            return -1;
        g->stubs = ns;
        g->scap = cap;
    }
    while (g->nlen + len > g->ncap) {
        size_t cap = g->ncap ? 2 * g->ncap : 1024;
        char *nn = realloc(g->names, cap);
        if (!nn)
            return -1;
        g->names = nn;
        g->ncap = cap;
    }
    snprintf(g->names + g->nlen, len, "%s@plt", name);
    g->stubs[g->nstubs++] = (struct stub){lo, hi, (uint32_t)g->nlen};
    g->nlen += len;
    return 0;
}

/* The stubs of one PLT section: in each entry, the first `jmp *disp(%rip)`
 * (ff 25, after an endbr64 or a bnd prefix where there is one) gives the
 * slot. PLT0 and the lazy stubs of an IBT .plt jump elsewhere: skipped. */
static int read_stubs(struct gather *g, Elf_Scn *scn, const GElf_Shdr *sh)
{
    Elf_Data *d = elf_getdata(scn, NULL);
    uint64_t esz = sh->sh_entsize >= 8 && sh->sh_entsize <= 32 ? sh->sh_entsize : 16;

    if (!d || !d->d_buf || d->d_size < esz)
        return 0;
    const unsigned char *b = d->d_buf;
    for (uint64_t o = 0; o + esz <= d->d_size && g->nstubs < PLT_MAX_STUBS; o += esz) {
        for (uint64_t p = o; p + 6 <= o + esz; p++) {
            if (b[p] != 0xff || b[p + 1] != 0x25)
                continue;
            int32_t disp;
            memcpy(&disp, b + p + 2, sizeof(disp));
            const char *name = slot_name(g, sh->sh_addr + p + 6 + (int64_t)disp);
            if (name && add_stub(g, sh->sh_addr + o, sh->sh_addr + o + esz, name))
                return -1;
            break;
        }
    }
    return 0;
}

static bool is_plt_name(const char *n)
{
    return n && (!strcmp(n, ".plt") || !strcmp(n, ".plt.sec") || !strcmp(n, ".plt.got"));
}

struct plt *plt__build(Elf *e)
{
    GElf_Ehdr eh;
    size_t shstr;
    struct gather g = {0};
    struct plt *p = NULL;

    if (!e || !gelf_getehdr(e, &eh) || eh.e_machine != EM_X86_64 || elf_getshdrstrndx(e, &shstr))
        return NULL;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_RELA && read_relocs(&g, e, scn, &sh))
            goto out;
    }
    if (!g.nslots)
        goto out;
    qsort(g.slots, g.nslots, sizeof(*g.slots), cmp_slot);
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_EXECINSTR) &&
            is_plt_name(elf_strptr(e, shstr, sh.sh_name)) && read_stubs(&g, scn, &sh))
            goto out;
    }
    if (!g.nstubs || !(p = malloc(sizeof(*p))))
        goto out;
    qsort(g.stubs, g.nstubs, sizeof(*g.stubs), cmp_stub);
    *p = (struct plt){g.stubs, g.nstubs, g.names};
    g.stubs = NULL;
    g.names = NULL;
out:
    free(g.ifuncs);
    free(g.slots);
    free(g.stubs);
    free(g.names);
    return p;
}

void plt__free(struct plt *p)
{
    if (!p)
        return;
    free(p->s);
    free(p->names);
    free(p);
}

const char *plt__lookup(const struct plt *p, uint64_t addr, uint64_t *start)
{
    size_t lo = 0, hi = p ? p->n : 0;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->s[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo || addr >= p->s[lo - 1].hi)
        return NULL;
    if (start)
        *start = p->s[lo - 1].lo;
    return p->names + p->s[lo - 1].name;
}

size_t plt__count(const struct plt *p)
{
    return p ? p->n : 0;
}

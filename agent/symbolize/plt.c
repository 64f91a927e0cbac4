#include "plt.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binary.h"

/* A hostile or huge file cannot make the table grow without bound. */
#define PLT_MAX_STUBS (1u << 20)
#define PLT_MAX_SLOTS (1u << 21)
#define PLT_MAX_NAME_BYTES (16u << 20)
/* A relocation section's pages handed back each time its read passed this. */
#define RELOCS_DROP_BYTES (1u << 20)

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

/* One machine's PLT: the relocation types that name a GOT slot, and the
 * decoder that finds each stub's slot in a PLT section's bytes. */
struct plt_arch {
    unsigned machine;
    unsigned jump_slot, glob_dat, irelative;
    int (*read_stubs)(struct gather *g, const unsigned char *b, uint64_t size, const GElf_Shdr *sh);
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
    /* Counted from the data libelf read (it refuses a section past the end
     * of the file), never from the header alone. */
    size_t n = d->d_size / sh.sh_entsize, cap = 0;
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
static int read_relocs(struct gather *g, const struct plt_arch *a, Elf *e, Elf_Scn *rela,
                       const GElf_Shdr *rsh)
{
    Elf_Scn *symscn = elf_getscn(e, rsh->sh_link);
    GElf_Shdr ssh;
    Elf_Data *rd = elf_getdata(rela, NULL), *sd;

    if (!g->ifuncs_read && read_ifuncs(g, e, rsh->sh_link))
        return -1;

    if (!symscn || !gelf_getshdr(symscn, &ssh) || ssh.sh_type != SHT_DYNSYM || !rd ||
        !(sd = elf_getdata(symscn, NULL)) || !rsh->sh_entsize)
        return 0;
    size_t n = rd->d_size / rsh->sh_entsize, dropped = 0;
    for (size_t i = 0; i < n && g->nslots < PLT_MAX_SLOTS; i++) {
        GElf_Rela r;
        GElf_Sym sym;
        /* Handed back as the read passes, not only at its end: chromium's
         * 25 MiB .rela.dyn, resident whole for the few milliseconds of its
         * read, was the agent's highest RSS on a busy node. */
        if (i * rsh->sh_entsize >= dropped + RELOCS_DROP_BYTES) {
            binary__drop_pages(e, (const char *)rd->d_buf + dropped, i * rsh->sh_entsize - dropped);
            dropped = i * rsh->sh_entsize;
        }
        if (!gelf_getrela(rd, (int)i, &r))
            break;
        unsigned type = GELF_R_TYPE(r.r_info);
        const char *name = NULL;
        if (type == a->irelative)
            name = ifunc_name(g, (uint64_t)r.r_addend);
        else if ((type == a->jump_slot || type == a->glob_dat) &&
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
    /* Read once: a C++ program's .rela.dyn is mostly R_*_RELATIVE, tens of
     * MiB that would stay in the agent's RSS while the binary's symbols are
     * kept. */
    binary__drop_pages(e, rd->d_buf, rd->d_size);
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

/* x86-64: in each entry, the first `jmp *disp(%rip)` (ff 25, after an
 * endbr64 or a bnd prefix where there is one) gives the slot. PLT0 and the
 * lazy stubs of an IBT .plt jump elsewhere: skipped. */
static int x86_64_stubs(struct gather *g, const unsigned char *b, uint64_t size,
                        const GElf_Shdr *sh)
{
    uint64_t esz = sh->sh_entsize >= 8 && sh->sh_entsize <= 32 ? sh->sh_entsize : 16;

    for (uint64_t o = 0; o + esz <= size && g->nstubs < PLT_MAX_STUBS; o += esz) {
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

/* AArch64 instructions are little-endian whatever the data's order. */
static uint32_t a64_insn(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

#define A64_NOP 0xd503201fu
#define A64_BTI_C 0xd503245fu
#define A64_BR_X17 0xd61f0220u
#define A64_AUTIA1716 0xd503219fu
#define A64_AUTIB1716 0xd50321dfu

/* `adrp x16, page`: the page, relative to the instruction's own. */
static bool a64_adrp_x16(uint32_t i, uint64_t pc, uint64_t *page)
{
    if ((i & 0x9f00001fu) != 0x90000010u)
        return false;
    uint64_t imm = ((uint64_t)((i >> 5) & 0x7ffff) << 2) | ((i >> 29) & 3);
    int64_t off = (int64_t)(imm << 43) >> 31; /* 21 bits, sign-extended, << 12 */
    *page = (pc & ~(uint64_t)0xfff) + (uint64_t)off;
    return true;
}

/* `ldr x17, [x16, #off]` (unsigned offset, scaled by 8). */
static bool a64_ldr_x17_x16(uint32_t i, uint64_t *off)
{
    if ((i & 0xffc003ffu) != 0xf9400211u)
        return false;
    *off = (uint64_t)((i >> 10) & 0xfff) * 8;
    return true;
}

/* AArch64 (GNU ld's .plt; lld's has the same shape): each entry loads its slot with
 * `adrp x16; ldr x17, [x16, #lo12]`, then `add x16`, an optional
 * autia1716/autib1716 (-z pac-plt) and `br x17`, padded with nops; a BTI
 * PLT may begin entries with `bti c`. The stub runs from its bti c or adrp
 * to its br and padding, whatever the entry size (16, 24 bytes...); PLT0's
 * pair loads a slot no relocation names, so it stays unnamed. */
static int arm64_stubs(struct gather *g, const unsigned char *b, uint64_t size, const GElf_Shdr *sh)
{
    size &= ~(uint64_t)3;
    for (uint64_t o = 0; o + 8 <= size && g->nstubs < PLT_MAX_STUBS; o += 4) {
        uint64_t page, off, br = 0;
        if (!a64_adrp_x16(a64_insn(b + o), sh->sh_addr + o, &page) ||
            !a64_ldr_x17_x16(a64_insn(b + o + 4), &off))
            continue;
        for (uint64_t q = o + 8; q + 4 <= size && q <= o + 16 && !br; q += 4) {
            uint32_t i = a64_insn(b + q);
            if (i == A64_BR_X17)
                br = q;
            else if (q > o + 8 && i != A64_AUTIA1716 && i != A64_AUTIB1716)
                break; /* after the add: only an autia/autib before the br */
        }
        if (!br)
            continue;
        uint64_t lo = o >= 4 && a64_insn(b + o - 4) == A64_BTI_C ? o - 4 : o, hi = br + 4;
        while (hi + 4 <= size && a64_insn(b + hi) == A64_NOP)
            hi += 4;
        const char *name = slot_name(g, page + off);
        if (name && add_stub(g, sh->sh_addr + lo, sh->sh_addr + hi, name))
            return -1;
        o = hi - 4;
    }
    return 0;
}

static const struct plt_arch arches[] = {
    {EM_X86_64, R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT, R_X86_64_IRELATIVE, x86_64_stubs},
    {EM_AARCH64, R_AARCH64_JUMP_SLOT, R_AARCH64_GLOB_DAT, R_AARCH64_IRELATIVE, arm64_stubs},
};

/* The stubs of one PLT section, by its machine's decoder. A section whose
 * addresses would wrap is refused. */
static int read_stubs(struct gather *g, const struct plt_arch *a, Elf_Scn *scn, const GElf_Shdr *sh)
{
    Elf_Data *d = elf_getdata(scn, NULL);

    if (!d || !d->d_buf || !d->d_size || d->d_size > sh->sh_size ||
        sh->sh_addr + d->d_size < sh->sh_addr)
        return 0;
    return a->read_stubs(g, d->d_buf, d->d_size, sh);
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
    const struct plt_arch *a = NULL;

    if (!e || !gelf_getehdr(e, &eh) || elf_getshdrstrndx(e, &shstr))
        return NULL;
    for (size_t i = 0; i < sizeof(arches) / sizeof(arches[0]); i++)
        if (arches[i].machine == eh.e_machine)
            a = &arches[i];
    if (!a)
        return NULL;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_RELA && read_relocs(&g, a, e, scn, &sh))
            goto out;
    }
    if (!g.nslots)
        goto out;
    qsort(g.slots, g.nslots, sizeof(*g.slots), cmp_slot);
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_EXECINSTR) &&
            is_plt_name(elf_strptr(e, shstr, sh.sh_name)) && read_stubs(&g, a, scn, &sh))
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

/* plt: PLT stubs named as objdump names them (`puts@plt`), in lazy .plt,
 * IBT .plt.sec and .plt.got stubs, arm64's .plt (plain, BTI, PAC-PLT), and
 * in libc and libstdc++ as Debian ships them for both machines; checked
 * against objdump -d, which finds them another way (binutils' own
 * synthetic symbols). Hostile arm64 files are refused cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/symbolize/plt.h"
#include "elf_helpers.h"

struct opened {
    int fd;
    Elf *e;
};

static struct plt *build(const char *path, struct opened *o)
{
    elf_version(EV_CURRENT);
    o->fd = open(path, O_RDONLY);
    assert_true(o->fd >= 0);
    o->e = elf_begin(o->fd, ELF_C_READ, NULL);
    assert_non_null(o->e);
    return plt__build(o->e);
}

/* The binutils for a file's machine: the cross ones for arm64 on another
 * host (binutils-aarch64-linux-gnu, with the cross gcc), else the host's. */
struct tools {
    const char *objdump, *nm, *readelf;
};
static const struct tools host_tools = {"objdump", "nm", "readelf"};
static const struct tools a64_tools = {
    "$(command -v aarch64-linux-gnu-objdump || echo objdump)",
    "$(command -v aarch64-linux-gnu-nm || echo nm)",
    "$(command -v aarch64-linux-gnu-readelf || echo readelf)",
};

static void done(struct plt *p, struct opened *o)
{
    plt__free(p);
    elf_end(o->e);
    close(o->fd);
}

/* Every stub objdump labels NAME@plt gets the same name from its first to
 * the last byte of its esz-byte entry; one labelled *ABS*+0xRESOLVER@plt (IRELATIVE)
 * gets the name of an IFUNC symbol at RESOLVER; no more are named than
 * objdump labels. Returns how many were compared. */
static size_t against_objdump(const char *path, struct plt *p, const struct tools *t, uint64_t esz)
{
    char cmd[768], line[1024];
    size_t n = 0, named = 0;

    snprintf(cmd, sizeof(cmd),
             "%s -d -j .plt -j .plt.sec -j .plt.got '%s' 2>/dev/null | "
             "grep -E '^[0-9a-f]+ <.*@plt>:$'",
             t->objdump, path);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        unsigned long long addr;
        char name[900];
        if (sscanf(line, "%llx <%899[^>]>:", &addr, name) != 2)
            continue;
        n++;
        uint64_t start = 0;
        unsigned long long resolver;
        if (sscanf(name, "*ABS*+0x%llx@plt", &resolver) == 1) {
            /* An IFUNC's stub: named after a dynamic IFUNC symbol at the
             * resolver's address, which nm -D lists with type i. */
            const char *got = plt__lookup(p, addr, &start);
            assert_non_null(got);
            assert_int_equal(start, addr);
            char want[600];
            snprintf(cmd, sizeof(cmd), "%s -D '%s' | grep -qE '^0*%llx i %.*s(@.*)?$'", t->nm, path,
                     resolver, (int)(strlen(got) - 4), got);
            snprintf(want, sizeof(want), "%s", got);
            if (system(cmd) != 0)
                print_message("    %s: 0x%llx %s: ours %s, not an IFUNC at 0x%llx\n", path, addr,
                              name, want, resolver);
            assert_int_equal(system(cmd), 0);
            named++;
            continue;
        }
        const char *got = plt__lookup(p, addr, &start);
        const char *inside = plt__lookup(p, addr + esz - 1, NULL);
        if (!got && t == &a64_tools) {
            /* objdump labels .rela.plt's entries in order, one per entry
             * size after PLT0, TLSDESC ones too: their labels fall on the
             * TLS descriptor trampoline (`stp x2, x3, ...`), not a stub of
             * theirs. That is not one to name. */
            snprintf(cmd, sizeof(cmd),
                     "%s -rW '%s' | grep -qE 'R_AARCH64_TLSDESC +[0-9a-f]+ %.*s@'", t->readelf,
                     path, (int)(strlen(name) - 4), name);
            if (system(cmd) == 0) {
                print_message("    %s: 0x%llx %s: a TLSDESC relocation's, not a stub\n", path, addr,
                              name);
                continue;
            }
        }
        if (!got || strcmp(got, name) || start != addr || !inside || strcmp(inside, name))
            print_message("    %s: 0x%llx objdump %s, ours %s / %s\n", path, addr, name,
                          got ? got : "(none)", inside ? inside : "(none)");
        assert_non_null(got);
        assert_string_equal(got, name);
        assert_int_equal(start, addr);
        assert_non_null(inside);
        assert_string_equal(inside, name);
        named++;
    }
    pclose(f);
    print_message("    %s: %zu stubs named as objdump names them (of %zu it labels)\n", path, named,
                  n);
    assert_int_equal(plt__count(p), named);
    return named;
}

static void test_fixtures(void **state)
{
    (void)state;
    static const char *const paths[] = {"build/fixtures/plt_c", "build/fixtures/plt_ibt"};
    for (size_t i = 0; i < 2; i++) {
        struct opened o;
        struct plt *p = build(paths[i], &o);
        assert_non_null(p);
        assert_true(against_objdump(paths[i], p, &host_tools, 8) >= 4);
        assert_string_equal(plt__lookup(p, 0x1060, NULL), "__cxa_finalize@plt"); /* .plt.got */
        done(p, &o);
    }
}

/* Addresses outside every stub: PLT0, before the PLT, far away. */
static void test_outside(void **state)
{
    (void)state;
    struct opened o;
    struct plt *p = build("build/fixtures/plt_c", &o);

    assert_null(plt__lookup(p, 0x1020, NULL)); /* PLT0 */
    assert_null(plt__lookup(p, 0x1000, NULL));
    assert_null(plt__lookup(p, ~0ull, NULL));
    assert_null(plt__lookup(NULL, 0x1030, NULL));
    done(p, &o);
}

/* The header of the section called name in e (the test's own reading). */
static void section(Elf *e, const char *name, GElf_Shdr *out)
{
    size_t shstr;
    assert_int_equal(elf_getshdrstrndx(e, &shstr), 0);
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        const char *n;
        if (gelf_getshdr(scn, out) && (n = elf_strptr(e, shstr, out->sh_name)) && !strcmp(n, name))
            return;
    }
    fail_msg("no section %s", name);
}

/* Facts apart from objdump: every R_AARCH64_JUMP_SLOT of .rela.plt names
 * exactly one stub, inside .plt past PLT0 (32 bytes), esz bytes long.
 * Returns how many. */
static size_t every_slot_once(struct opened *o, struct plt *p, uint64_t esz)
{
    GElf_Shdr plt, rela, dynsym;
    section(o->e, ".plt", &plt);
    section(o->e, ".rela.plt", &rela);
    section(o->e, ".dynsym", &dynsym);
    Elf_Data *rd =
        elf_getdata(elf_getscn(o->e, elf_ndxscn(gelf_offscn(o->e, rela.sh_offset))), NULL);
    Elf_Data *sd = elf_getdata(gelf_offscn(o->e, dynsym.sh_offset), NULL);
    assert_non_null(rd);
    assert_non_null(sd);
    for (uint64_t a = plt.sh_addr; a < plt.sh_addr + 32; a++)
        assert_null(plt__lookup(p, a, NULL)); /* PLT0 */
    size_t n = rela.sh_size / rela.sh_entsize;
    for (size_t i = 0; i < n; i++) {
        GElf_Rela r;
        GElf_Sym sym;
        assert_non_null(gelf_getrela(rd, (int)i, &r));
        assert_int_equal(GELF_R_TYPE(r.r_info), R_AARCH64_JUMP_SLOT);
        assert_non_null(gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &sym));
        char want[256];
        snprintf(want, sizeof(want), "%s@plt", elf_strptr(o->e, dynsym.sh_link, sym.st_name));
        size_t starts = 0;
        uint64_t first = 0;
        for (uint64_t a = plt.sh_addr; a < plt.sh_addr + plt.sh_size; a += 4) {
            uint64_t start;
            const char *got = plt__lookup(p, a, &start);
            if (!got || strcmp(got, want))
                continue;
            if (!starts++)
                first = start;
            assert_int_equal(start, first); /* one stub, not two */
        }
        assert_int_equal(starts, esz / 4);
    }
    assert_int_equal(plt__count(p), n);
    return n;
}

/* arm64's .plt in three of GNU ld's layouts: 16-byte entries; BTI in a
 * non-PIE, each entry opening with `bti c` (24 bytes); PAC-PLT, autia1716
 * before each br (24 bytes). */
static void test_fixtures_arm64(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        uint64_t esz;
        uint32_t first; /* the first instruction of puts@plt */
    } fx[] = {
        {"build/fixtures/plt_a64", 16, 0x90000010},     /* adrp x16 */
        {"build/fixtures/plt_a64_bti", 24, 0xd503245f}, /* bti c */
        {"build/fixtures/plt_a64_pac", 24, 0x90000010}, /* adrp x16 */
    };
    for (size_t i = 0; i < sizeof(fx) / sizeof(fx[0]); i++) {
        struct opened o;
        struct plt *p = build(fx[i].path, &o);
        assert_non_null(p);
        assert_true(against_objdump(fx[i].path, p, &a64_tools, fx[i].esz) >= 6);
        assert_true(every_slot_once(&o, p, fx[i].esz) >= 6);

        /* puts@plt's first word is the layout's (the stub starts there). */
        GElf_Shdr plt;
        section(o.e, ".plt", &plt);
        uint64_t start = 0;
        for (uint64_t a = plt.sh_addr; a < plt.sh_addr + plt.sh_size && !start; a += 4) {
            const char *got = plt__lookup(p, a, &start);
            if (!got || strcmp(got, "puts@plt"))
                start = 0;
        }
        assert_true(start);
        Elf_Data *d = elf_getdata(gelf_offscn(o.e, plt.sh_offset), NULL);
        const unsigned char *w = (const unsigned char *)d->d_buf + (start - plt.sh_addr);
        uint32_t word = w[0] | w[1] << 8 | w[2] << 16 | (uint32_t)w[3] << 24;
        if (fx[i].first != 0xd503245f)
            word &= 0x9f00001f; /* adrp's opcode and register, not its page */
        assert_int_equal(word, fx[i].first);
        done(p, &o);
    }
}

/* A file read into memory, to be damaged. */
struct image {
    unsigned char *b;
    size_t n;
    Elf *e;
};

static void image_load(struct image *im, const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    im->n = (size_t)ftell(f);
    rewind(f);
    im->b = malloc(im->n);
    assert_non_null(im->b);
    assert_int_equal(fread(im->b, 1, im->n, f), im->n);
    fclose(f);
    im->e = NULL;
}

/* The raw header of section name, for damaging (ELF64, little-endian). */
static Elf64_Shdr *image_shdr(struct image *im, const char *name)
{
    Elf64_Ehdr *eh = (Elf64_Ehdr *)im->b;
    Elf64_Shdr *sh = (Elf64_Shdr *)(im->b + eh->e_shoff);
    const char *strs = (const char *)im->b + sh[eh->e_shstrndx].sh_offset;
    for (size_t i = 0; i < eh->e_shnum; i++)
        if (!strcmp(strs + sh[i].sh_name, name))
            return &sh[i];
    fail_msg("no section %s", name);
    return NULL;
}

/* The table of the damaged image (libelf reads the header afresh). */
static struct plt *image_build(struct image *im)
{
    elf_version(EV_CURRENT);
    if (im->e)
        elf_end(im->e);
    im->e = elf_memory((char *)im->b, im->n);
    assert_non_null(im->e);
    return plt__build(im->e);
}

static void image_free(struct image *im)
{
    elf_end(im->e);
    free(im->b);
}

/* The .plt word at byte offset off of the stub named name. */
static unsigned char *stub_word(struct image *im, struct plt *p, const char *name, uint64_t off)
{
    Elf64_Shdr *plt = image_shdr(im, ".plt");
    for (uint64_t a = plt->sh_addr; a < plt->sh_addr + plt->sh_size; a += 4) {
        uint64_t start;
        const char *got = plt__lookup(p, a, &start);
        if (got && !strcmp(got, name))
            return im->b + plt->sh_offset + (start - plt->sh_addr) + off;
    }
    fail_msg("no stub %s", name);
    return NULL;
}

static void put_word(unsigned char *w, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        w[i] = (unsigned char)(v >> (8 * i));
}

/* Damaged arm64 files: sections short, past the end, at wrapping
 * addresses, with huge counts, stubs that load no slot or do not branch,
 * another machine's code under this one's header: no crash, no table or
 * only the stubs that still decode. */
static void test_hostile_arm64(void **state)
{
    (void)state;
    static const char *const path = "build/fixtures/plt_a64";
    struct image im;
    struct plt *p;

    image_load(&im, path);
    p = image_build(&im); /* undamaged, from memory: the baseline */
    assert_int_equal(plt__count(p), 7);
    size_t adrp = (size_t)(stub_word(&im, p, "puts@plt", 0) - im.b);
    size_t br = (size_t)(stub_word(&im, p, "puts@plt", 12) - im.b);
    plt__free(p);

    struct {
        const char *what, *sec;
        int field; /* 0 sh_size, 1 sh_offset, 2 sh_addr, 3 sh_entsize, 4 sh_link */
        uint64_t v;
        size_t want;
    } cases[] = {
        {".plt of 6 bytes", ".plt", 0, 6, 0},
        {".plt cut mid-word (strtol's br lost)", ".plt", 0, 0x90 - 2, 6},
        {".plt past the end of the file", ".plt", 1, ~0ull - 8, 0},
        {".plt at an address that wraps", ".plt", 2, ~0ull - 0x40, 0},
        {".rela.plt of 2^40 bytes", ".rela.plt", 0, 1ull << 40, 0},
        {".rela.plt of entsize 0", ".rela.plt", 3, 0, 0},
        {".rela.plt linked to no section", ".rela.plt", 4, 9999, 0},
        {".dynsym of 2^40 bytes", ".dynsym", 0, 1ull << 40, 0},
        {".rela.plt over the rest of the file", ".rela.plt", 0, 0, 7},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        free(im.b);
        elf_end(im.e);
        image_load(&im, path);
        Elf64_Shdr *sh = image_shdr(&im, cases[i].sec);
        uint64_t *f[] = {&sh->sh_size, &sh->sh_offset, &sh->sh_addr, &sh->sh_entsize};
        if (cases[i].field == 4)
            sh->sh_link = (uint32_t)cases[i].v;
        else if (!cases[i].v && cases[i].field == 0)
            sh->sh_size = (im.n - sh->sh_offset) / sh->sh_entsize * sh->sh_entsize;
        else
            *f[cases[i].field] = cases[i].v;
        p = image_build(&im);
        print_message("    %s: %zu stubs named\n", cases[i].what, plt__count(p));
        if (cases[i].want == 7)
            assert_true(plt__count(p) <= 7); /* garbage relocations name nothing more */
        else
            assert_int_equal(plt__count(p), cases[i].want);
        plt__free(p);
    }
    free(im.b);
    elf_end(im.e);

    /* Stub damage: puts' adrp to the page 4 GB below its own (the address
     * wraps; no slot there), then its br turned into a nop: puts unnamed,
     * its neighbours still named. */
    image_load(&im, path);
    put_word(im.b + adrp, 0x90000010u | 0x40000u << 5);
    p = image_build(&im);
    assert_int_equal(plt__count(p), 6);
    assert_string_equal(plt__lookup(p, 0x6c0, NULL), "abort@plt");
    assert_null(plt__lookup(p, 0x6d0, NULL));
    assert_string_equal(plt__lookup(p, 0x6e0, NULL), "strtol@plt");
    plt__free(p);
    image_free(&im);
    image_load(&im, path);
    put_word(im.b + br, 0xd503201fu);
    p = image_build(&im);
    assert_int_equal(plt__count(p), 6);
    assert_null(plt__lookup(p, 0x6d0, NULL));
    plt__free(p);
    image_free(&im);

    /* Another machine's code under the header: x86-64's stubs as arm64,
     * arm64's as x86-64: no relocation of the claimed machine, no table. */
    image_load(&im, "build/fixtures/plt_c");
    ((Elf64_Ehdr *)im.b)->e_machine = EM_AARCH64;
    assert_null(image_build(&im));
    image_free(&im);
    image_load(&im, path);
    ((Elf64_Ehdr *)im.b)->e_machine = EM_X86_64;
    assert_null(image_build(&im));
    image_free(&im);
}

static Elf_Data *section_data(Elf *e, const char *name)
{
    size_t shstr;
    assert_int_equal(elf_getshdrstrndx(e, &shstr), 0);
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && !strcmp(elf_strptr(e, shstr, sh.sh_name), name))
            return elf_getdata(scn, NULL);
    }
    fail_msg("no %s", name);
    return NULL;
}

/* A line of /proc/self/status, KiB. */
static long status_kib(const char *key)
{
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");

    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, key, strlen(key)) && line[strlen(key)] == ':')
            v = atol(line + strlen(key) + 1);
    fclose(f);
    return v;
}

/* A .rela.dyn of 18 MiB, mapped: read for its few PLT slots, its pages are
 * handed back as the read goes (issue 36: chromium's 25 MiB, resident whole
 * while it was read, made the agent's peak RSS) and all of them once read;
 * the stubs are named all the same. Read into memory instead (the agent's
 * own heap), not a byte of it changes. */
static void test_big_rela_dropped(void **state)
{
    (void)state;
    const char *path = "build/fixtures/plt_bigrela";
    struct opened o;
    elf_version(EV_CURRENT);

    /* The peak while reading (VmHWM, reset first): 1 MiB of the section
     * at a time, and what the page cache maps at once around it (a 2 MiB
     * folio on this kernel): before, the whole section. */
    o.fd = open(path, O_RDONLY);
    assert_true(o.fd >= 0);
    o.e = elf_begin(o.fd, ELF_C_READ_MMAP, NULL);
    assert_non_null(o.e);
    size_t rela = section_data(o.e, ".rela.dyn")->d_size;
    assert_true(rela > (16u << 20));
    int cr = open("/proc/self/clear_refs", O_WRONLY);
    assert_true(cr >= 0);
    assert_int_equal(write(cr, "5", 1), 1); /* VmHWM := VmRSS */
    close(cr);
    long rss0 = status_kib("VmRSS");
    struct plt *p0 = plt__build(o.e);
    assert_non_null(p0);
    long grew = status_kib("VmHWM") - rss0;
    print_message("    RSS at most %ld KiB above the start while reading %zu KiB\n", grew,
                  rela >> 10);
    assert_true(grew < (long)(rela >> 10) / 3);
    done(p0, &o);

    o.fd = open(path, O_RDONLY);
    assert_true(o.fd >= 0);
    o.e = elf_begin(o.fd, ELF_C_READ_MMAP, NULL);
    assert_non_null(o.e);
    Elf_Data *d = section_data(o.e, ".rela.dyn");
    assert_true(d->d_size > (1u << 20));
    volatile const char *b = d->d_buf;
    for (size_t i = 0; i < d->d_size; i += 4096)
        (void)b[i]; /* all mapped now, as a read leaves them */
    size_t before = elf_present_pages(d->d_buf, d->d_size);
    assert_true(before > 200);
    struct plt *p = plt__build(o.e);
    assert_non_null(p);
    assert_int_equal(elf_present_pages(d->d_buf, d->d_size), 0);
    assert_true(against_objdump(path, p, &host_tools, 8) >= 1);
    done(p, &o);

    o.fd = open(path, O_RDONLY); /* ELF_C_READ: the file in the heap */
    assert_true(o.fd >= 0);
    o.e = elf_begin(o.fd, ELF_C_READ, NULL);
    assert_non_null(o.e);
    d = section_data(o.e, ".rela.dyn");
    char *copy = malloc(d->d_size);
    assert_non_null(copy);
    memcpy(copy, d->d_buf, d->d_size);
    struct plt *q = plt__build(o.e);
    assert_memory_equal(copy, d->d_buf, d->d_size);
    free(copy);
    done(q, &o);
}

static void test_system_libraries(void **state)
{
    (void)state;
    static const char *const paths[] = {"/lib/x86_64-linux-gnu/libc.so.6",
                                        "/lib/x86_64-linux-gnu/libstdc++.so.6"};
    for (size_t i = 0; i < 2; i++) {
        if (access(paths[i], R_OK))
            continue;
        struct opened o;
        struct plt *p = build(paths[i], &o);
        against_objdump(paths[i], p, &host_tools, 8);
        done(p, &o);
    }
    /* arm64's, where the cross toolchain put them (libc6-arm64-cross). */
    static const char *const a64[] = {"/usr/aarch64-linux-gnu/lib/libc.so.6",
                                      "/usr/aarch64-linux-gnu/lib/libstdc++.so.6",
                                      "/lib/aarch64-linux-gnu/libc.so.6"};
    for (size_t i = 0; i < sizeof(a64) / sizeof(a64[0]); i++) {
        if (access(a64[i], R_OK))
            continue;
        struct opened o;
        struct plt *p = build(a64[i], &o);
        against_objdump(a64[i], p, &a64_tools, 16);
        done(p, &o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),         cmocka_unit_test(test_outside),
        cmocka_unit_test(test_fixtures_arm64),   cmocka_unit_test(test_hostile_arm64),
        cmocka_unit_test(test_system_libraries), cmocka_unit_test(test_big_rela_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* gopclntab: a stripped Go binary named from its .gopclntab alone (names,
 * file:line, inlined frames), through the module and through the
 * symbolizer; then hostile tables (truncated, garbled) that must not crash.
 * Addresses come from the unstripped build's .symtab (elf_helpers.h), the
 * lines from tests/unit/fixtures/gofix.go. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../agent/symbolize/binary.h"
#include "../../agent/symbolize/gopclntab.h"
#include "../../agent/symbolize/symbolizer.h"
#include "elf_helpers.h"

/* The path of fixture `name`, in one of a few rotating buffers: valid for
 * the next three calls. */
static const char *fixture(const char *name)
{
    static char path[4][512];
    static unsigned k;
    const char *dir = getenv("CX_FIXTURES");
    k = (k + 1) % 4;
    snprintf(path[k], sizeof(path[k]), "%s/%s", dir ? dir : "build/fixtures", name);
    return path[k];
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The whole file in memory, and its ELF view. */
struct image {
    uint8_t *data;
    size_t size;
    Elf *elf;
    uint64_t tab_off, tab_size, tab_vaddr, text_vaddr;
};

static void image_load(struct image *im, const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    im->size = ftell(f);
    fseek(f, 0, SEEK_SET);
    im->data = malloc(im->size);
    assert_non_null(im->data);
    assert_int_equal(fread(im->data, 1, im->size, f), im->size);
    fclose(f);
    elf_version(EV_CURRENT);
    im->elf = elf_memory((char *)im->data, im->size);
    assert_non_null(im->elf);
    size_t shstrndx;
    assert_int_equal(elf_getshdrstrndx(im->elf, &shstrndx), 0);
    for (Elf_Scn *s = NULL; (s = elf_nextscn(im->elf, s));) {
        GElf_Shdr sh;
        gelf_getshdr(s, &sh);
        const char *n = elf_strptr(im->elf, shstrndx, sh.sh_name);
        if (n && strcmp(n, ".gopclntab") == 0) {
            im->tab_off = sh.sh_offset;
            im->tab_size = sh.sh_size;
            im->tab_vaddr = sh.sh_addr;
        } else if (n && strcmp(n, ".text") == 0) {
            im->text_vaddr = sh.sh_addr;
        }
    }
    assert_true(im->tab_size > 0);
}

static void image_free(struct image *im)
{
    elf_end(im->elf);
    free(im->data);
}

static bool has_symtab(const char *path)
{
    uint64_t va, size, off;
    return elf_symbol(path, "main.outer", &va, &size, &off) == 0;
}

static void test_names_and_lines(void **state)
{
    (void)state;
    const char *full = fixture("go_full");
    struct image im;
    struct gopclntab_frame fr[SYM_MAX_INLINE];
    uint64_t va, size, off;

    image_load(&im, fixture("go_stripped"));
    assert_false(has_symtab(fixture("go_stripped"))); /* the test means something */
    struct gopclntab *g = gopclntab__open_elf(im.elf);
    assert_non_null(g);
    assert_string_equal(gopclntab__version(g), "1.18"); /* Debian 12's Go 1.19 */

    const char *names[] = {"main.outer", "main.(*tally).add", "main.main"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        assert_int_equal(elf_symbol(full, names[i], &va, &size, &off), 0);
        for (uint64_t a = va; a < va + size; a += 3) {
            unsigned n = gopclntab__lookup(g, a, fr, SYM_MAX_INLINE);
            assert_true(n >= 1);
            assert_string_equal(fr[n - 1].function, names[i]);
            assert_true(ends_with(fr[n - 1].file, "tests/unit/fixtures/gofix.go"));
            assert_true(fr[n - 1].line >= 10 && fr[n - 1].line <= 36);
        }
    }
    /* The line of add's call to outer. */
    assert_int_equal(elf_symbol(full, "main.(*tally).add", &va, &size, &off), 0);
    bool line25 = false;
    for (uint64_t a = va; a < va + size; a++) {
        unsigned n = gopclntab__lookup(g, a, fr, SYM_MAX_INLINE);
        line25 |= n == 1 && fr[0].line == 25;
    }
    assert_true(line25);
    /* Runtime functions too, and nothing outside the text. */
    assert_int_equal(elf_symbol(full, "runtime.main", &va, &size, &off), 0);
    assert_int_equal(gopclntab__lookup(g, va + 8, fr, SYM_MAX_INLINE), 1);
    assert_string_equal(fr[0].function, "runtime.main");
    assert_true(ends_with(fr[0].file, "runtime/proc.go"));
    assert_int_equal(gopclntab__lookup(g, 0x10, fr, SYM_MAX_INLINE), 0);
    assert_int_equal(gopclntab__lookup(g, UINT64_MAX, fr, SYM_MAX_INLINE), 0);
    gopclntab__free(g);
    image_free(&im);
}

static void test_inlined_frames(void **state)
{
    (void)state;
    const char *full = fixture("go_full");
    struct image im;
    struct gopclntab_frame fr[SYM_MAX_INLINE];
    uint64_t va, size, off;
    unsigned found = 0, plain = 0;

    image_load(&im, fixture("go_stripped"));
    struct gopclntab *g = gopclntab__open_elf(im.elf);
    assert_non_null(g);
    assert_int_equal(elf_symbol(full, "main.outer", &va, &size, &off), 0);
    for (uint64_t a = va; a < va + size; a++) {
        unsigned n = gopclntab__lookup(g, a, fr, SYM_MAX_INLINE);
        assert_true(n >= 1);
        if (n == 1) {
            plain++;
            continue;
        }
        /* Innermost first: leaf at its own line, then outer at the call. */
        assert_int_equal(n, 2);
        assert_string_equal(fr[0].function, "main.leaf");
        assert_true(ends_with(fr[0].file, "gofix.go"));
        assert_int_equal(fr[0].line, 11);
        assert_string_equal(fr[1].function, "main.outer");
        assert_int_equal(fr[1].line, 18);
        found++;
    }
    assert_true(found > 0);
    assert_true(plain > 0);
    /* Only one frame wanted: the inlined one is dropped, outer stays. */
    for (uint64_t a = va; a < va + size; a++) {
        if (gopclntab__lookup(g, a, fr, SYM_MAX_INLINE) == 2) {
            assert_int_equal(gopclntab__lookup(g, a, fr, 1), 1);
            assert_string_equal(fr[0].function, "main.outer");
            break;
        }
    }
    gopclntab__free(g);
    image_free(&im);
}

/* The same through the symbolizer, from file offsets as the agent has them. */
static void test_symbolizer_names_stripped_go(void **state)
{
    (void)state;
    const char *full = fixture("go_full");
    uint64_t va, size, off;
    bool inlined = false;

    struct symbolizer *s = symbolizer__new();
    struct binary *b = binary__open(fixture("go_stripped"));
    assert_non_null(b);
    assert_int_equal(elf_symbol(full, "main.outer", &va, &size, &off), 0);
    for (uint64_t i = 0; i < size; i++) {
        const struct sym_result *r = symbolizer__lookup(s, b, off + i, false);
        assert_true(r->named);
        assert_int_equal(r->elf_addr, va + i);
        assert_string_equal(r->lines[r->n - 1].function, "main.outer");
        assert_string_equal(r->lines[r->n - 1].system_name, "main.outer");
        if (r->n == 2 && strcmp(r->lines[0].function, "main.leaf") == 0) {
            inlined = true;
            assert_int_equal(r->lines[0].line, 11);
            assert_int_equal(r->lines[1].line, 18);
        }
    }
    assert_true(inlined);
    assert_null(symbolizer__why_unnamed(s, b));
    /* A return address just past add's call names the call's line. */
    assert_int_equal(elf_symbol(full, "main.(*tally).add", &va, &size, &off), 0);
    bool call = false;
    for (uint64_t i = 1; i < size && !call; i++) {
        const struct sym_result *r = symbolizer__lookup(s, b, off + i, true);
        assert_true(r->named);
        assert_string_equal(r->lines[r->n - 1].function, "main.(*tally).add");
        call = r->lines[r->n - 1].line == 25;
    }
    assert_true(call);
    binary__put(b);

    /* Unstripped: the same names (.gopclntab is preferred to DWARF). */
    b = binary__open(full);
    assert_int_equal(elf_symbol(full, "main.outer", &va, &size, &off), 0);
    const struct sym_result *r = symbolizer__lookup(s, b, off + 1, false);
    assert_true(r->named);
    assert_string_equal(r->lines[r->n - 1].function, "main.outer");
    binary__put(b);
    symbolizer__free(s);
}

/* len bytes of src placed to end right at an inaccessible page: a read one
 * byte past the end faults. */
static uint8_t *fenced(const uint8_t *src, size_t len, void **map, size_t *maplen)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t body = (len + pg - 1) / pg * pg;
    *maplen = body + pg;
    uint8_t *m = mmap(NULL, *maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    assert_int_equal(mprotect(m + body, pg, PROT_NONE), 0);
    *map = m;
    uint8_t *p = m + body - len;
    memcpy(p, src, len);
    return p;
}

/* Looks up pcs all over the text and a few known ones; every answer must be
 * well-formed. Returns how many were named. */
static unsigned sweep(const struct gopclntab *g, uint64_t text, uint64_t text_size)
{
    struct gopclntab_frame fr[SYM_MAX_INLINE];
    unsigned named = 0;

    for (uint64_t a = text; a < text + text_size; a += 997) {
        unsigned n = gopclntab__lookup(g, a, fr, SYM_MAX_INLINE);
        assert_true(n <= SYM_MAX_INLINE);
        for (unsigned i = 0; i < n; i++) {
            assert_non_null(fr[i].function);
            assert_non_null(fr[i].file);
            (void)strlen(fr[i].function);
            (void)strlen(fr[i].file);
        }
        named += n > 0;
    }
    return named;
}

static void test_hostile_tables(void **state)
{
    (void)state;
    struct image im;
    void *map;
    size_t maplen;
    struct gopclntab_region reg[16];
    unsigned nreg = 0;
    size_t nph;

    image_load(&im, fixture("go_stripped"));
    elf_getphdrnum(im.elf, &nph);
    for (size_t i = 0; i < nph && nreg < 16; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(im.elf, i, &ph) && ph.p_type == PT_LOAD)
            reg[nreg++] = (struct gopclntab_region){ph.p_vaddr, im.data + ph.p_offset, ph.p_filesz};
    }
    uint64_t text = im.text_vaddr, text_size = im.tab_vaddr - im.text_vaddr;
    const uint8_t *tab = im.data + im.tab_off;

    /* Intact, fenced: the baseline names most of the sweep. */
    uint8_t *p = fenced(tab, im.tab_size, &map, &maplen);
    struct gopclntab *g = gopclntab__open(p, im.tab_size, im.tab_vaddr, reg, nreg, text);
    assert_non_null(g);
    unsigned whole = sweep(g, text, text_size);
    gopclntab__free(g);
    munmap(map, maplen);
    assert_true(whole > 100);

    /* Truncated at many lengths: the header's words, the function table, the
     * names and the pc tables cut short. Every read past the end faults. */
    unsigned opened = 0;
    for (uint64_t len = 0; len < im.tab_size; len += len < 256 ? 1 : im.tab_size / 97) {
        p = fenced(tab, len, &map, &maplen);
        g = gopclntab__open(p, len, im.tab_vaddr, reg, nreg, text);
        if (g) {
            opened++;
            sweep(g, text, text_size);
        }
        gopclntab__free(g);
        munmap(map, maplen);
    }
    print_message("truncated: %u of the cut tables opened, none crashed\n", opened);

    /* Garbled: random bytes flipped, mostly in the header and the function
     * table, also in the pc tables and the inline trees (via the file). */
    srand(12345);
    unsigned named = 0, runs = 300;
    for (unsigned run = 0; run < runs; run++) {
        uint8_t *copy = malloc(im.size);
        memcpy(copy, im.data, im.size);
        uint8_t *t = copy + im.tab_off;
        unsigned flips = 1 + rand() % 8;
        for (unsigned k = 0; k < flips; k++) {
            uint64_t where = run % 3 == 0 ? (uint64_t)rand() % 128
                             : run % 3 == 1
                                 ? (uint64_t)rand() % (im.tab_size < 65536 ? im.tab_size : 65536)
                                 : (uint64_t)rand() % im.tab_size;
            t[where] ^= (uint8_t)(1 + rand() % 255);
        }
        struct gopclntab_region r2[16];
        for (unsigned i = 0; i < nreg; i++)
            r2[i] = (struct gopclntab_region){reg[i].vaddr, copy + (reg[i].data - im.data),
                                              reg[i].size};
        p = fenced(t, im.tab_size, &map, &maplen);
        g = gopclntab__open(p, im.tab_size, im.tab_vaddr, r2, nreg, text);
        if (g)
            named += sweep(g, text, text_size);
        gopclntab__free(g);
        munmap(map, maplen);
        free(copy);
    }
    print_message("garbled: %u runs, %u names found, none crashed\n", runs, named);

    /* Specific lies in the header: no crash, no table. */
    uint8_t *copy = malloc(im.tab_size);
    memcpy(copy, tab, im.tab_size);
    memset(copy + 8, 0xff, 8); /* nfunc */
    assert_null(gopclntab__open(copy, im.tab_size, im.tab_vaddr, reg, nreg, text));
    memcpy(copy, tab, im.tab_size);
    memset(copy + 8 + 3 * 8, 0x7f, 8); /* funcnametab offset */
    assert_null(gopclntab__open(copy, im.tab_size, im.tab_vaddr, reg, nreg, text));
    memcpy(copy, tab, im.tab_size);
    copy[0] ^= 0x40; /* magic */
    assert_null(gopclntab__open(copy, im.tab_size, im.tab_vaddr, reg, nreg, text));
    assert_null(gopclntab__open(NULL, 0, 0, NULL, 0, 0));
    free(copy);
    gopclntab__free(NULL);
    image_free(&im);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_lines),
        cmocka_unit_test(test_inlined_frames),
        cmocka_unit_test(test_symbolizer_names_stripped_go),
        cmocka_unit_test(test_hostile_tables),
    };
    return cmocka_run_group_tests_name("gopclntab", tests, NULL, NULL);
}

/* symtab: the agent's own address-sorted symbols must name every code
 * address as libdwfl's dwfl_module_addrinfo does (it replaced it, which
 * looks at every symbol for every address): every symbol's edges, its
 * middle, the byte past it and a random address after it, in the
 * executable sections of real binaries. */
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

#include "../../agent/symbolize/symtab.h"
#include "elf_helpers.h"

#define MAX_SYMS 1500

struct xrange {
    GElf_Addr lo, hi;
};

/* Compares the two on path's code addresses. Returns the checks made (0
 * when the file is not there), *diff the disagreements. */
static unsigned long compare(const char *path, unsigned long *diff)
{
    struct xrange x[64];
    int nx = 0, fd = open(path, O_RDONLY);
    unsigned long checks = 0;

    *diff = 0;
    if (fd < 0)
        return 0;
    Dwfl *d;
    Dwfl_Module *m = elf_dwfl_module(path, fd, &d);
    assert_non_null(d);
    assert_non_null(m);
    GElf_Addr bias;
    Elf *e = dwfl_module_getelf(m, &bias);
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn)) && nx < 64;) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR))
            x[nx++] = (struct xrange){sh.sh_addr + bias, sh.sh_addr + bias + sh.sh_size};
    }
    struct symtab *t = symtab__build(m);
    int ns = dwfl_module_getsymtab(m);
    assert_non_null(t);
    srand(1);
    /* libdwfl looks at every symbol for every address: a big binary is
     * checked at every stride-th symbol, at most MAX_SYMS of them. */
    int stride = ns > MAX_SYMS ? ns / MAX_SYMS + 1 : 1;
    for (int i = 0; i < ns; i += stride) {
        GElf_Sym sym;
        GElf_Addr a;
        if (!dwfl_module_getsym_info(m, i, &sym, &a, NULL, NULL, NULL) || !a)
            continue;
        GElf_Addr probes[6] = {a,
                               a + 1,
                               a + sym.st_size / 2,
                               a + sym.st_size - 1,
                               a + sym.st_size,
                               a + (GElf_Addr)(rand() % 4096)};
        for (int k = 0; k < 6; k++) {
            int code = 0;
            for (int q = 0; q < nx; q++)
                code |= probes[k] >= x[q].lo && probes[k] < x[q].hi;
            if (!code)
                continue;
            GElf_Off off;
            GElf_Sym s2;
            uint64_t start = 0;
            const char *want = dwfl_module_addrinfo(m, probes[k], &off, &s2, NULL, NULL, NULL);
            const char *got = symtab__lookup(t, probes[k], &start);
            checks++;
            if ((want == NULL) != (got == NULL) || (want && strcmp(want, got) != 0) ||
                (want && start != probes[k] - off)) {
                if (*diff < 5)
                    print_message("    %s %#lx: libdwfl %s, symtab %s\n", path,
                                  (unsigned long)probes[k], want ? want : "-", got ? got : "-");
                (*diff)++;
            }
        }
    }
    print_message("    %s: %d symbols, %zu in the table (%zu bytes), %lu code addresses, %lu "
                  "differ\n",
                  path, ns, symtab__count(t), symtab__bytes(t), checks, *diff);
    symtab__free(t);
    dwfl_end(d);
    return checks;
}

static void test_same_as_libdwfl(void **state)
{
    (void)state;
    /* The project's own fixtures (always built) and the system's binaries
     * that a Debian machine has. */
    static const char *const must[] = {"build/fixtures/fp_c", "build/fixtures/cxx",
                                       "build/fixtures/cfi_omit"};
    static const char *const may[] = {"/lib/x86_64-linux-gnu/libc.so.6",
                                      "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                                      "/usr/bin/python3"};
    unsigned long diff, total = 0;

    for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++) {
        unsigned long n = compare(must[i], &diff);
        assert_true(n > 0);
        assert_int_equal(diff, 0);
        total += n;
    }
    for (size_t i = 0; i < sizeof(may) / sizeof(may[0]); i++) {
        total += compare(may[i], &diff);
        assert_int_equal(diff, 0);
    }
    assert_true(total > 100);
}

/* The string table's pages resident in this process once path's table is
 * built; *size its size. 0 when path is not there. */
static size_t names_resident(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY);
    size_t got = 0;

    *size = 0;
    if (fd < 0)
        return 0;
    Dwfl *d;
    Dwfl_Module *m = elf_dwfl_module(path, fd, &d);
    assert_non_null(m);
    struct symtab *t = symtab__build(m);
    assert_non_null(t);
    GElf_Addr bias;
    Elf *e = dwfl_module_getelf(m, &bias);
    size_t shstr;
    assert_int_equal(elf_getshdrstrndx(e, &shstr), 0);
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        const char *nm = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstr, sh.sh_name) : NULL;
        Elf_Data *sd;
        /* The string table of the symbols libdwfl took: .strtab, else .dynstr. */
        if (!nm || (strcmp(nm, ".strtab") && strcmp(nm, ".dynstr")) ||
            !(sd = elf_getdata(scn, NULL)) || sd->d_size <= *size)
            continue;
        *size = sd->d_size;
        got = elf_present_pages(sd->d_buf, sd->d_size) * (size_t)sysconf(_SC_PAGESIZE);
    }
    symtab__free(t);
    dwfl_end(d);
    return got;
}

/* A C++ library's names (megabytes of them) are read in the order they lie
 * in the string table and handed back every 1 MiB as the read passes
 * (issue 36: libclickhouse's 13 MiB .dynstr was resident whole while it
 * loaded): after building, at most the last stretch is resident (before:
 * all of it, 3,024 of libLLVM's 3,027 KiB; after: 984). */
static void test_names_handed_back(void **state)
{
    (void)state;
    static const char *const big[] = {"/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1",
                                      "/usr/lib/x86_64-linux-gnu/libclang-cpp.so.14",
                                      "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"};
    int checked = 0;

    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        size_t size, resident = names_resident(big[i], &size);
        if (size < (2u << 20))
            continue; /* not there, or its names fit in one stretch */
        print_message("    %s: %zu of %zu KiB of names resident\n", big[i], resident >> 10,
                      size >> 10);
        assert_true(resident <= (1u << 20) + (64u << 10));
        checked++;
    }
    if (!checked)
        skip(); /* no library with megabytes of names on this machine */
}

static void test_empty_and_null(void **state)
{
    (void)state;
    assert_null(symtab__build(NULL));
    assert_null(symtab__lookup(NULL, 0x1000, NULL));
    assert_int_equal(symtab__count(NULL), 0);
    assert_int_equal(symtab__bytes(NULL), 0);
    symtab__free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_libdwfl),
        cmocka_unit_test(test_names_handed_back),
        cmocka_unit_test(test_empty_and_null),
    };
    return cmocka_run_group_tests_name("symtab", tests, NULL, NULL);
}

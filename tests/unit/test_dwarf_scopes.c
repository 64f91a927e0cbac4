/* dwarf_scopes: the chain of inlined calls and the function holding an
 * address, from the unit's index, must be libdw's own (dwarf_getscopes,
 * then dwarf_getscopes_die from the innermost scope, as eu-addr2line -i):
 * every address of small binaries with inlining (C, C++ with exceptions),
 * and every 997th address of a pyenv libpython where there is one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/symbolize/dwarf_scopes.h"
#include "elf_helpers.h"

/* libdw's chain: function and inlined-call scopes, innermost first, up to
 * the function. */
static int libdw_chain(Dwarf_Die *cu, Dwarf_Addr a, Dwarf_Off *out, int max)
{
    Dwarf_Die *sc = NULL;
    int n = dwarf_getscopes(cu, a, &sc), k = 0;

    if (n > 0) {
        Dwarf_Die inner = sc[0];
        free(sc);
        sc = NULL;
        n = dwarf_getscopes_die(&inner, &sc);
    }
    for (int i = 0; i < n && k < max; i++) {
        int tag = dwarf_tag(&sc[i]);
        if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
            continue;
        out[k++] = dwarf_dieoffset(&sc[i]);
        if (tag == DW_TAG_subprogram)
            break;
    }
    free(sc);
    return k;
}

/* Compares every `step`-th address of every unit of path. Returns the
 * addresses checked, *inlined those with an inlined call, *diff the
 * disagreements; 0 when the file is not there. */
static long compare(const char *path, unsigned step, long *inlined, long *diff)
{
    int fd = open(path, O_RDONLY);
    Dwarf_Addr bias;
    Dwarf_Die *cu = NULL;
    long checks = 0;

    *diff = *inlined = 0;
    if (fd < 0)
        return 0;
    Dwfl *d;
    Dwfl_Module *m = elf_dwfl_module(path, fd, &d);
    assert_non_null(m);
    while ((cu = dwfl_module_nextcu(m, cu, &bias))) {
        Dwarf_Addr base, lo, hi;
        ptrdiff_t off = 0;
        struct cu_scopes *s = cu_scopes__build(cu);
        assert_non_null(s);
        while ((off = dwarf_ranges(cu, off, &base, &lo, &hi)) > 0) {
            for (Dwarf_Addr a = lo; a < hi; a += step) {
                Dwarf_Off want[64], got[64];
                int nw = libdw_chain(cu, a, want, 64), ng = cu_scopes__chain(s, a, got, 64);
                checks++;
                *inlined += nw > 1;
                if (nw != ng || memcmp(want, got, (size_t)nw * sizeof(*want)) != 0) {
                    if (*diff < 5)
                        print_message("    %s %#lx: libdw %d scopes, index %d\n", path,
                                      (unsigned long)a, nw, ng);
                    (*diff)++;
                }
            }
        }
        cu_scopes__free(s);
    }
    dwfl_end(d);
    print_message("    %s: %ld addresses (%ld in inlined calls), %ld differ\n", path, checks,
                  *inlined, *diff);
    return checks;
}

static void test_fixtures(void **state)
{
    (void)state;
    static const char *const files[] = {"build/fixtures/inline_c", "build/fixtures/cxx",
                                        "build/fixtures/cfi_cxx"};
    long inlined, diff, total_inlined = 0;

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        assert_true(compare(files[i], 1, &inlined, &diff) > 0);
        assert_int_equal(diff, 0);
        total_inlined += inlined;
    }
    assert_true(total_inlined > 0); /* the fixtures do inline */
}

/* A big unit with deep inlining (CPython's eval loop), where it is. */
static void test_libpython(void **state)
{
    (void)state;
    const char *root = getenv("PYENV_ROOT");
    char dir[512], path[1024];
    long inlined, diff;

    snprintf(dir, sizeof(dir), "%s/versions", root ? root : "/root/.pyenv");
    DIR *dh = opendir(dir);
    if (!dh) {
        print_message("    no pyenv under %s: skipped\n", dir);
        return;
    }
    struct dirent *de;
    while ((de = readdir(dh))) {
        unsigned minor;
        if (sscanf(de->d_name, "3.%u.", &minor) == 1 && minor == 11)
            break;
    }
    if (!de) {
        closedir(dh);
        print_message("    no pyenv 3.11: skipped\n");
        return;
    }
    snprintf(path, sizeof(path), "%s/%s/lib/libpython3.11.so.1.0", dir, de->d_name);
    closedir(dh);
    if (compare(path, 997, &inlined, &diff) > 0) {
        assert_int_equal(diff, 0);
        assert_true(inlined > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_libpython),
    };
    return cmocka_run_group_tests_name("dwarf_scopes", tests, NULL, NULL);
}

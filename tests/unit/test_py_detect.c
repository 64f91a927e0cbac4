/* py_detect: every pyenv libpython on the machine (its version, _PyRuntime,
 * PyCode_Type and _PyEval_EvalFrameDefault where libelf says they are, the
 * .cold part where .symtab names one), Debian's stripped, static python3
 * (its .cold part found from the jumps to it), interpreters too old and
 * binaries that are no interpreter, version numbers in names; each answer
 * holding together (consistent(), py_detect_helpers.h). Hostile files are
 * test_py_detect_hostile.c's. Run once under valgrind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../agent/runtimes/python/py_detect.h"
#include "py_helpers.h"
#include "py_detect_helpers.h"
#include "py_layout_headers.h"

/* --- the interpreters on the machine ----------------------------------- */

/* The .symtab FUNC symbols of path named prefix*: values into out. */
static unsigned symtab_funcs(const char *path, const char *prefix, uint64_t *out, unsigned max,
                             bool exact)
{
    int fd = open(path, O_RDONLY);
    unsigned n = 0;
    Elf *e;

    assert_true(fd >= 0);
    elf_version(EV_CURRENT);
    e = elf_begin(fd, ELF_C_READ, NULL);
    for (Elf_Scn *s = NULL; e && (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(s, &sh) || sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0)
            continue;
        Elf_Data *d = elf_getdata(s, NULL);
        for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
                sym.st_shndx == SHN_UNDEF)
                continue;
            const char *nm = elf_strptr(e, sh.sh_link, sym.st_name);
            if (nm &&
                (exact ? strcmp(nm, prefix) == 0 : strncmp(nm, prefix, strlen(prefix)) == 0) &&
                n < max)
                out[n++] = sym.st_value;
        }
    }
    elf_end(e);
    close(fd);
    return n;
}

/* One pyenv libpython (or static interpreter): what libelf says. */
static void check_pyenv_one(const struct pyenv_python *py, const char *path)
{
    struct py_binary b;
    uint64_t rt, rt_size, eval, eval_size, ct, ct_size, cold[8];
    int ret = detect_path(path, &b);

    if (!consistent(path, ret, &b))
        fail_msg("%s: inconsistent answer", path);
    if (ret != 1 || !b.usable)
        fail_msg("%s: %d, usable %d: %s", path, ret, b.usable, b.why);
    assert_int_equal(b.version, py->version);
    assert_int_equal(py_elf_sym(path, SHT_SYMTAB, "_PyRuntime", &rt, &rt_size), 0);
    assert_int_equal(py_elf_sym(path, SHT_SYMTAB, "_PyEval_EvalFrameDefault", &eval, &eval_size),
                     0);
    assert_int_equal(py_elf_sym(path, SHT_SYMTAB, "PyCode_Type", &ct, &ct_size), 0);
    assert_int_equal(b.runtime, rt);
    assert_int_equal(b.code_type, ct);
    assert_int_equal(b.eval_start[0], eval);
    assert_int_equal(b.eval_end[0], eval + eval_size);
    if (py->version <= 0x030c) {
        const struct py_layout *t = py_layout__for_version(py->version);
        assert_non_null(t);
        assert_memory_equal(&b.layout, t, sizeof(*t));
    }
    /* The .cold parts .symtab names: each in a range of its own; none else. */
    unsigned ncold = symtab_funcs(path, "_PyEval_EvalFrameDefault.cold", cold, 8, false);
    if (ncold) {
        assert_false(b.cold_from_jumps);
        assert_int_equal(b.n_eval, 1 + ncold);
        for (unsigned c = 0; c < ncold; c++) {
            bool in = false;
            for (unsigned i = 1; i < b.n_eval; i++)
                in |= cold[c] >= b.eval_start[i] && cold[c] < b.eval_end[i];
            if (!in)
                fail_msg("%s: .cold at 0x%llx in no range", path, (unsigned long long)cold[c]);
        }
    }
    /* A part found from jumps where .symtab names none must not be another
     * function. */
    for (unsigned i = 1; i < b.n_eval; i++) {
        char other[256];
        if (other_func_in(path, b.eval_start[i], b.eval_end[i], other, sizeof(other)))
            fail_msg("%s: range [0x%llx, 0x%llx) taken for the evaluation function holds %s", path,
                     (unsigned long long)b.eval_start[i], (unsigned long long)b.eval_end[i], other);
    }
    printf("%s: %u.%u, _PyRuntime 0x%llx, eval [0x%llx, +%llu), %u .cold in .symtab, %u ranges "
           "(cold from jumps: %d)\n",
           py->name, b.version >> 8, b.version & 0xff, (unsigned long long)b.runtime,
           (unsigned long long)b.eval_start[0],
           (unsigned long long)(b.eval_end[0] - b.eval_start[0]), ncold, b.n_eval,
           b.cold_from_jumps);
}

static void test_pyenv(void **state)
{
    struct pyenv_python py[64];
    int n = pyenv_pythons(7, py, 64), checked = 0;
    (void)state;

    for (int i = 0; i < n; i++) {
        char path[700];
        /* libpython, else the interpreter (a build without --enable-shared). */
        if (!py_file(py[i].prefix, py[i].version, "lib", path, sizeof(path)) &&
            !py_file(py[i].prefix, py[i].version, "bin", path, sizeof(path)))
            continue;
        check_pyenv_one(&py[i], path);
        checked++;
    }
    printf("pyenv (%s): %d of %d CPython 3.7+ checked\n", pyenv_root(), checked, n);
    if (n > 0 && checked != n)
        fail_msg("pyenv has %d CPython 3.7+, %d had a libpython or interpreter to check", n,
                 checked);
}

/* Too old to walk, or no CPython at all. */
static void test_pyenv_old(void **state)
{
    struct pyenv_python py[64];
    int n = pyenv_pythons(0, py, 64), checked = 0;
    char path[700];
    struct py_binary b;
    (void)state;

    for (int i = 0; i < n; i++) {
        if (py[i].version >= 0x0307 ||
            !py_file(py[i].prefix, py[i].version, "lib", path, sizeof(path)))
            continue;
        /* 3.6: found (it exports _PyThreadState_Current), not walked. */
        int ret = detect_path(path, &b);
        assert_true(consistent(path, ret, &b));
        assert_int_equal(ret, 1);
        assert_false(b.usable);
        assert_int_equal(b.version, py[i].version);
        assert_non_null(strstr(b.why, "before 3.7"));
        printf("%s: %s\n", py[i].name, b.why);
        checked++;
    }
    /* Python 2: not CPython 3 as far as the agent knows. */
    snprintf(path, sizeof(path), "%s/versions", pyenv_root());
    struct dirent **names;
    int nd = scandir(path, &names, NULL, versionsort);
    for (int i = 0; i < nd; i++) {
        char lib[800];
        if (strncmp(names[i]->d_name, "2.7.", 4) == 0) {
            snprintf(lib, sizeof(lib), "%.500s/%.60s/lib/libpython2.7.so.1.0", path,
                     names[i]->d_name);
            if (py_is_file(lib)) {
                int ret = detect_path(lib, &b);
                assert_true(consistent(lib, ret, &b));
                assert_int_equal(ret, 0);
                printf("%s: not CPython 3\n", names[i]->d_name);
                checked++;
            }
        }
        free(names[i]);
    }
    if (nd >= 0)
        free(names);
    printf("old interpreters: %d checked\n", checked);
}

/* Debian's 3.15.2 copied, its _Py_DebugOffsets saying 3.16: walked, read
 * in 3.15's shape, and the log's words say it is newer than the agent. */
static void check_newer_release(const char *root)
{
    char path[512], tmp[] = "/tmp/cx-py316-XXXXXX", cmd[1200];
    uint64_t rt, rt_size, v316 = 0x031000f0;
    struct py_binary b;

    snprintf(path, sizeof(path), "%s/usr/bin/python3.15", root);
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, tmp);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(py_elf_sym(tmp, SHT_DYNSYM, "_PyRuntime", &rt, &rt_size), 0);
    int64_t off = py_elf_offset(tmp, rt);
    fd = open(tmp, O_RDWR);
    assert_true(off > 0 && fd >= 0);
    assert_int_equal(pwrite(fd, &v316, 8, off + 8), 8);
    close(fd);
    int ret = detect_path(tmp, &b);
    unlink(tmp);
    assert_int_equal(ret, 1);
    if (!b.usable)
        fail_msg("3.16 in 3.15's shape: %s", b.why);
    assert_int_equal(b.version, 0x0310);
    assert_string_equal(b.layout_from, "_Py_DebugOffsets, read in 3.15's shape: a release newer "
                                       "than this agent knows, its offsets checked");
    printf("3.15.2 saying 3.16: %s\n", b.layout_from);
}

/* Debian unstable's python3.14 and python3.15 (gcc 16, PGO), from the root
 * tests/integration/python_unstable_tests.py makes (its path in
 * $CODEXRAY_PY_UNSTABLE_ROOT, else that test's cache): read, not run (they
 * need unstable's libc). Each: its version (Py_Version's), its layout read
 * from _Py_DebugOffsets in its own release's shape, and its evaluation
 * loop, split off the ~1 KiB entry part _PyEval_EvalFrameDefault is into
 * an ~80 KiB part of its own, found: before, the jumps to it were too few
 * and libdw's rows were taken for whole FDEs, and its frames were none. */
static void test_unstable_pythons(void **state)
{
    const char *root = getenv("CODEXRAY_PY_UNSTABLE_ROOT");
    int checked = 0;
    (void)state;

    if (!root)
        root = "/var/cache/codexray-python/sid-python";
    for (unsigned minor = 14; minor <= 15; minor++) {
        char path[512], want[64];
        uint64_t eval, eval_size, pv, pv_size, hex = 0;
        struct py_binary b;

        snprintf(path, sizeof(path), "%s/usr/bin/python3.%u", root, minor);
        if (!py_is_file(path)) {
            printf("no %s: not checked\n", path);
            continue;
        }
        int ret = detect_path(path, &b);
        if (!consistent(path, ret, &b))
            fail_msg("%s: inconsistent", path);
        if (ret != 1 || !b.usable)
            fail_msg("%s: %d, usable %d: %s", path, ret, b.usable, b.why);
        assert_int_equal(py_elf_sym(path, SHT_DYNSYM, "Py_Version", &pv, &pv_size), 0);
        int64_t off = py_elf_offset(path, pv);
        int fd = open(path, O_RDONLY);
        assert_true(off > 0 && fd >= 0);
        assert_int_equal(pread(fd, &hex, 4, off), 4);
        close(fd);
        assert_int_equal(b.version, (unsigned)(hex >> 16) & 0xffff);
        assert_int_equal(b.version, 0x0300 | minor);
        snprintf(want, sizeof(want), "_Py_DebugOffsets, read in 3.%u's shape", minor);
        assert_string_equal(b.layout_from, want);
        /* PyThreadState has thread_id and native_thread_id side by side. */
        assert_int_equal(b.layout.tstate_native_thread_id, b.layout.tstate_thread_id + 8);
        /* The layout is what the headers of 3.14.10 and 3.15.2 say, where
         * the root still has those releases (a later one may move a field
         * of the interpreter's own state). */
        unsigned micro = (unsigned)(hex >> 8) & 0xff;
        if (micro == (minor == 14 ? 10u : 2u)) {
            const struct py_layout *h =
                minor == 14 ? &py_layout_31410_headers : &py_layout_3152_headers;
            assert_int_equal(py_layout_diff(path, &b.layout, "py_detect", h, "headers"), 0);
            printf("%s: 3.%u.%u, the layout its headers give\n", path, minor, micro);
        } else {
            printf("%s: 3.%u.%u, not the release of py_layout_headers.h: not compared\n", path,
                   minor, micro);
        }

        assert_int_equal(
            py_elf_sym(path, SHT_DYNSYM, "_PyEval_EvalFrameDefault", &eval, &eval_size), 0);
        assert_int_equal(b.eval_start[0], eval);
        assert_int_equal(b.eval_end[0], eval + eval_size);
        assert_true(b.cold_from_jumps);
        assert_int_equal(b.n_eval, 2);
        uint64_t s = b.eval_start[1], e = b.eval_end[1];
        char other[256];
        assert_true(e <= eval || s >= eval + eval_size);
        assert_true(in_exec_segment(&b, s, e));
        if (e - s < (64u << 10))
            fail_msg("%s: loop part [0x%llx, 0x%llx): %llu bytes", path, (unsigned long long)s,
                     (unsigned long long)e, (unsigned long long)(e - s));
        if (other_func_in(path, s, e, other, sizeof(other)))
            fail_msg("%s: loop part [0x%llx, 0x%llx) holds %s", path, (unsigned long long)s,
                     (unsigned long long)e, other);
        printf("%s: 3.%u, entry [0x%llx, +%llu), loop part [0x%llx, +%llu), layout from %s\n", path,
               minor, (unsigned long long)eval, (unsigned long long)eval_size,
               (unsigned long long)s, (unsigned long long)(e - s), b.layout_from);
        checked++;
    }
    printf("Debian unstable's interpreters: %d checked\n", checked);
    if (checked == 2)
        check_newer_release(root);
}

/* Debian's: static libpython, stripped to .dynsym; the .cold part found by
 * the jumps to it. */
static void test_debian_python3(void **state)
{
    struct py_binary b;
    uint64_t rt, rt_size, eval, eval_size, ct, ct_size;
    char cmd[256], real[4096];
    unsigned hex = 0;
    (void)state;

    if (!py_is_file(DEBIAN_PYTHON3)) {
        printf("no %s: nothing checked\n", DEBIAN_PYTHON3);
        return;
    }
    assert_non_null(realpath(DEBIAN_PYTHON3, real));
    /* Its version, as it says it. */
    snprintf(cmd, sizeof(cmd), "%s -I -c 'import sys; print(sys.hexversion >> 16)'",
             DEBIAN_PYTHON3);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_int_equal(fscanf(p, "%u", &hex), 1);
    pclose(p);

    int ret = detect_path(DEBIAN_PYTHON3, &b);
    if (!consistent(DEBIAN_PYTHON3, ret, &b))
        fail_msg("inconsistent");
    if (ret != 1 || !b.usable)
        fail_msg("%s: %d, usable %d: %s", DEBIAN_PYTHON3, ret, b.usable, b.why);
    assert_int_equal(b.version, hex);
    assert_int_equal(py_elf_sym(real, SHT_DYNSYM, "_PyRuntime", &rt, &rt_size), 0);
    assert_int_equal(py_elf_sym(real, SHT_DYNSYM, "_PyEval_EvalFrameDefault", &eval, &eval_size),
                     0);
    assert_int_equal(py_elf_sym(real, SHT_DYNSYM, "PyCode_Type", &ct, &ct_size), 0);
    assert_int_equal(b.runtime, rt);
    assert_int_equal(b.code_type, ct);
    assert_int_equal(b.eval_start[0], eval);
    assert_int_equal(b.eval_end[0], eval + eval_size);
    if (hex <= 0x030c)
        assert_memory_equal(&b.layout, py_layout__for_version(hex), sizeof(b.layout));

    /* The cold part: outside the function, inside an executable segment,
     * of a size gcc's split of the evaluation loop has, and no exported
     * function. */
    assert_true(b.cold_from_jumps);
    assert_true(b.n_eval >= 2);
    for (unsigned i = 1; i < b.n_eval; i++) {
        char other[256];
        uint64_t s = b.eval_start[i], e = b.eval_end[i];
        assert_true(e <= b.eval_start[0] || s >= b.eval_end[0]);
        assert_true(in_exec_segment(&b, s, e));
        if (e - s < 1024)
            fail_msg("cold part [0x%llx, 0x%llx): %llu bytes", (unsigned long long)s,
                     (unsigned long long)e, (unsigned long long)(e - s));
        if (other_func_in(real, s, e, other, sizeof(other)))
            fail_msg("cold part [0x%llx, 0x%llx) holds %s", (unsigned long long)s,
                     (unsigned long long)e, other);
        printf("%s (%s): %u.%u, cold part [0x%llx, +%llu)\n", DEBIAN_PYTHON3, real, hex >> 8,
               hex & 0xff, (unsigned long long)s, (unsigned long long)(e - s));
    }
    /* Found under any name: the version is inside. */
    int fd = open(DEBIAN_PYTHON3, O_RDONLY);
    struct py_binary b2;
    assert_int_equal(py_detect__elf(fd, "/usr/bin/uwsgi", &b2), 1);
    close(fd);
    assert_true(b2.usable);
    assert_int_equal(b2.version, hex);
}

static void test_not_cpython(void **state)
{
    struct pyenv_python py[64];
    int n = pyenv_pythons(7, py, 64), checked = 0;
    struct py_binary b;
    (void)state;

    static const char *const others[] = {LIBC, "/proc/self/exe", "/bin/sh"};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        int ret = detect_path(others[i], &b);
        assert_true(consistent(others[i], ret, &b));
        assert_int_equal(ret, 0);
        checked++;
    }
    /* pyenv's python3.X links libpython: the program itself is not it. */
    for (int i = 0; i < n; i++) {
        char lib[700], bin[700];
        if (!py_file(py[i].prefix, py[i].version, "lib", lib, sizeof(lib)) ||
            !py_file(py[i].prefix, py[i].version, "bin", bin, sizeof(bin)))
            continue;
        int ret = detect_path(bin, &b);
        assert_true(consistent(bin, ret, &b));
        assert_int_equal(ret, 0);
        checked++;
    }
    printf("not CPython: %d binaries\n", checked);
}

static void test_version_from_name(void **state)
{
    static const struct {
        const char *name;
        unsigned version;
    } cases[] = {
        {"libpython3.11.so.1.0", 0x030b},
        {"python3.9", 0x0309},
        {"libpython3.7m.so", 0x0307},
        {"libpython3.7m.so.1.0", 0x0307},
        {"/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0", 0x030c},
        {"/root/.pyenv/versions/3.13.0/bin/python3.13", 0x030d},
        {"python3.9-config", 0x0309},
        {"python3.12d", 0x030c},
        {"libpython3.13t.so.1.0", 0x030d},
        {"python2.7", 0x0207},
        {"python3.99", 0x0363},
        {"cpython3.10", 0x030a},
        {"pythonpython3.8", 0x0308},
        {"python3.8python3.9", 0x0308},
        {"python3.1", 0x0301},
        /* None: no version, the directory's only, or not one. */
        {"", 0},
        {"python", 0},
        {"python3", 0},
        {"/usr/bin/python3", 0},
        {"/opt/python3.9/bin/python", 0},
        {"python3.", 0},
        {"python3.x", 0},
        {"python.3.9", 0},
        {"python-3.9", 0},
        {"python1.5", 0},
        {"python10.1", 0},
        {"python3.100", 0},
        {"python3.123456789012345678901234567890", 0},
        {"uwsgi", 0},
        {"pytho", 0},
        {"/", 0},
        {"python3.9/", 0},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned got = py_detect__version_from_name(cases[i].name);
        if (got != cases[i].version)
            fail_msg("\"%s\": 0x%x, want 0x%x", cases[i].name, got, cases[i].version);
    }
    printf("%zu names\n", sizeof(cases) / sizeof(cases[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pyenv),          cmocka_unit_test(test_pyenv_old),
        cmocka_unit_test(test_debian_python3), cmocka_unit_test(test_unstable_pythons),
        cmocka_unit_test(test_not_cpython),    cmocka_unit_test(test_version_from_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* py_detect on hostile files (the other half of test_py_detect.c): files
 * made from a real interpreter, cut at many points, with and without their
 * section headers; bytes flipped in the symbol tables, the unwind tables, the
 * headers; symbols edited to lie or hidden: never a crash, and answers that
 * hold together (consistent(), py_detect_helpers.h). Run once under
 * valgrind.
 *
 * CX_PY_DETECT_FLIPS: files with flipped bytes per region (default 150). */
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

/* --- hostile files ------------------------------------------------------ */

/* A memfd holding len bytes of data. */
static int memfd_of(const void *data, size_t len)
{
    int fd = memfd_create("py_detect", MFD_CLOEXEC);
    assert_true(fd >= 0);
    for (size_t at = 0; at < len;) {
        ssize_t w = pwrite(fd, (const char *)data + at, len - at, (off_t)at);
        assert_true(w > 0);
        at += (size_t)w;
    }
    return fd;
}

static int detect_bytes(const void *data, size_t len, const char *name, struct py_binary *b)
{
    int fd = memfd_of(data, len);
    int ret = py_detect__elf(fd, name, b);
    close(fd);
    return ret;
}

/* The same libraries with their .symtab hidden (its type changed), as if
 * stripped: the function from .dynsym, and a part found from its jumps, if
 * any, no other function. */
static void test_symtab_hidden(void **state)
{
    struct pyenv_python py[64];
    int n = pyenv_pythons(7, py, 64), checked = 0;
    (void)state;

    for (int i = 0; i < n; i++) {
        char lib[700];
        struct py_binary full, b;
        if (!py_file(py[i].prefix, py[i].version, "lib", lib, sizeof(lib)))
            continue;
        assert_int_equal(detect_path(lib, &full), 1);
        int fd = open(lib, O_RDONLY);
        struct stat st;
        assert_true(fd >= 0 && fstat(fd, &st) == 0);
        uint8_t *data = malloc((size_t)st.st_size);
        assert_non_null(data);
        assert_int_equal(pread(fd, data, (size_t)st.st_size, 0), st.st_size);
        close(fd);
        Elf64_Ehdr *eh = (Elf64_Ehdr *)data;
        unsigned hidden = 0;
        for (unsigned s = 0; s < eh->e_shnum; s++) {
            Elf64_Shdr *sh = (Elf64_Shdr *)(data + eh->e_shoff + (uint64_t)s * eh->e_shentsize);
            if (sh->sh_type == SHT_SYMTAB) {
                sh->sh_type = SHT_PROGBITS;
                hidden++;
            }
        }
        assert_int_equal(hidden, 1);
        int ret = detect_bytes(data, (size_t)st.st_size, strrchr(lib, '/') + 1, &b);
        free(data);
        if (!consistent(lib, ret, &b) || ret != 1 || !b.usable)
            fail_msg("%s without .symtab: %d %s", lib, ret, b.why);
        assert_int_equal(b.runtime, full.runtime);
        assert_int_equal(b.eval_start[0], full.eval_start[0]);
        assert_int_equal(b.eval_end[0], full.eval_end[0]);
        for (unsigned r = 1; r < b.n_eval; r++) {
            char other[256];
            assert_true(b.cold_from_jumps);
            if (other_func_in(lib, b.eval_start[r], b.eval_end[r], other, sizeof(other)))
                fail_msg("%s without .symtab: [0x%llx, 0x%llx) taken for a cold part holds %s", lib,
                         (unsigned long long)b.eval_start[r], (unsigned long long)b.eval_end[r],
                         other);
        }
        printf("%s without .symtab: %u ranges (with it: %u)\n", py[i].name, b.n_eval, full.n_eval);
        checked++;
    }
    printf("%d libraries read without .symtab\n", checked);
}

static void test_not_elf(void **state)
{
    struct py_binary b;
    uint8_t buf[4096];
    uint64_t seed = 42;
    (void)state;

    /* Empty, text, random bytes, an ELF magic and garbage. */
    assert_int_equal(detect_bytes("", 0, "libpython3.11.so.1.0", &b), -1);
    assert_true(consistent("empty", -1, &b));
    static const char text[] = "#!/bin/sh\nexec python3.11 \"$@\"\n";
    assert_int_equal(detect_bytes(text, sizeof(text) - 1, "python3.11", &b), -1);
    for (int round = 0; round < 64; round++) {
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = (uint8_t)py_rng(&seed);
        size_t len = 1 + py_rng(&seed) % sizeof(buf);
        if (round % 2) {
            /* An ELF header's start: 64-bit, little-endian, current. */
            memcpy(buf, "\177ELF\2\1\1", 7);
        }
        int ret = detect_bytes(buf, len, "libpython3.11.so.1.0", &b);
        assert_true(consistent("random", ret, &b));
        assert_true(ret == -1 || ret == 0);
    }
    /* No file: a bad descriptor, a directory. */
    assert_int_equal(py_detect__elf(-1, "python3.11", &b), -1);
    int fd = open("/", O_RDONLY | O_DIRECTORY);
    assert_int_equal(py_detect__elf(fd, "python3.11", &b), -1);
    close(fd);
    /* Nothing filled in after a refusal. */
    assert_true(consistent("directory", -1, &b));
}

/* A real interpreter in memory, with the places the hostile tests aim at. */
struct victim {
    char path[700];
    uint8_t *data;
    size_t size;
    struct py_binary b; /* its answer intact */
    struct {
        char name[32];
        uint64_t off, size;
    } regions[24];
    unsigned nregions;
    uint64_t shoff, shsize; /* the section header table */
    uint64_t dynsym_off, dynsym_size, dynsym_entsize, dynstr_off, dynstr_size;
};

static void add_region(struct victim *v, const char *name, uint64_t off, uint64_t size)
{
    if (size == 0 || off + size > v->size || v->nregions == 24)
        return;
    snprintf(v->regions[v->nregions].name, sizeof(v->regions[0].name), "%s", name);
    v->regions[v->nregions].off = off;
    v->regions[v->nregions].size = size;
    v->nregions++;
}

static bool victim_load(struct victim *v, const char *path)
{
    memset(v, 0, sizeof(*v));
    if (!py_is_file(path))
        return false;
    snprintf(v->path, sizeof(v->path), "%s", path);
    int fd = open(path, O_RDONLY);
    struct stat st;
    assert_true(fd >= 0 && fstat(fd, &st) == 0);
    elf_version(EV_CURRENT);
    v->size = (size_t)st.st_size;
    v->data = malloc(v->size);
    assert_non_null(v->data);
    assert_int_equal(pread(fd, v->data, v->size, 0), (ssize_t)v->size);
    assert_int_equal(py_detect__elf(fd, path, &v->b), 1);
    assert_true(v->b.usable);

    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    GElf_Ehdr eh;
    assert_non_null(gelf_getehdr(e, &eh));
    v->shoff = eh.e_shoff;
    v->shsize = (uint64_t)eh.e_shnum * eh.e_shentsize;
    add_region(v, "ELF header", 0, eh.e_ehsize);
    add_region(v, "program headers", eh.e_phoff, (uint64_t)eh.e_phnum * eh.e_phentsize);
    add_region(v, "section headers", v->shoff, v->shsize);
    for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        size_t shstrndx;
        assert_non_null(gelf_getshdr(s, &sh));
        assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
        const char *nm = elf_strptr(e, shstrndx, sh.sh_name);
        if (!nm)
            continue;
        if (strcmp(nm, ".dynsym") == 0) {
            v->dynsym_off = sh.sh_offset;
            v->dynsym_size = sh.sh_size;
            v->dynsym_entsize = sh.sh_entsize;
        }
        if (strcmp(nm, ".dynstr") == 0) {
            v->dynstr_off = sh.sh_offset;
            v->dynstr_size = sh.sh_size;
        }
        if (strcmp(nm, ".dynsym") == 0 || strcmp(nm, ".dynstr") == 0 ||
            strcmp(nm, ".symtab") == 0 || strcmp(nm, ".strtab") == 0 ||
            strcmp(nm, ".eh_frame_hdr") == 0 || strcmp(nm, ".eh_frame") == 0 ||
            strcmp(nm, ".dynamic") == 0)
            add_region(v, nm, sh.sh_offset, sh.sh_size);
    }
    elf_end(e);
    close(fd);
    /* The code of the evaluation function (the jumps to its cold part) and
     * _PyRuntime's start (3.13's _Py_DebugOffsets). */
    int64_t at = py_elf_offset(path, v->b.eval_start[0]);
    if (at >= 0)
        add_region(v, "evaluation function", (uint64_t)at, v->b.eval_end[0] - v->b.eval_start[0]);
    at = py_elf_offset(path, v->b.runtime);
    if (at >= 0)
        add_region(v, "_PyRuntime", (uint64_t)at, 600);
    assert_true(v->dynsym_size > 0 && v->dynstr_size > 0);
    return true;
}

/* The interpreters the hostile tests cut up: one whose .symtab names its
 * .cold part, one reading _Py_DebugOffsets, Debian's stripped one. */
static int victims(struct victim *v, int max)
{
    struct pyenv_python py[64];
    int n = pyenv_pythons(7, py, 64), nv = 0;
    static const unsigned want[] = {0x030b, 0x030d};

    for (size_t w = 0; w < 2; w++) {
        for (int i = 0; i < n && nv < max; i++) {
            char lib[700];
            if (py[i].version == want[w] &&
                py_file(py[i].prefix, py[i].version, "lib", lib, sizeof(lib)) &&
                victim_load(&v[nv], lib)) {
                nv++;
                break;
            }
        }
    }
    if (nv < max && victim_load(&v[nv], DEBIAN_PYTHON3))
        nv++;
    /* Whatever pyenv has when it has neither 3.11 nor 3.13. */
    for (int i = n - 1; i >= 0 && nv == 0; i--) {
        char lib[700];
        if (py_file(py[i].prefix, py[i].version, "lib", lib, sizeof(lib)) &&
            victim_load(&v[nv], lib))
            nv++;
    }
    return nv;
}

static void victims_free(struct victim *v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i].data);
}

static int cmp_u64_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The cut points: every byte of the first 256, 256 spread over the file,
 * and each region's edges. Sorted from the end down, deduplicated. */
static size_t cut_points(const struct victim *v, uint64_t *cuts, size_t max)
{
    size_t n = 0;

    for (uint64_t c = 0; c < 256 && n < max; c++)
        cuts[n++] = c;
    for (uint64_t k = 1; k <= 256 && n < max; k++)
        cuts[n++] = v->size * k / 257;
    for (unsigned r = 0; r < v->nregions && n + 6 < max; r++) {
        uint64_t a = v->regions[r].off, b = a + v->regions[r].size;
        cuts[n++] = a;
        cuts[n++] = a + 1;
        cuts[n++] = a + v->regions[r].size / 2;
        cuts[n++] = b - 1;
        cuts[n++] = b;
        cuts[n++] = b + 1;
    }
    qsort(cuts, n, sizeof(*cuts), cmp_u64_desc);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (cuts[i] < v->size && (m == 0 || cuts[i] != cuts[m - 1]))
            cuts[m++] = cuts[i];
    }
    return m;
}

/* The file cut short at many points: its section headers gone with the
 * rest (libelf refuses it), and with the section headers put back after
 * the cut (so sections point past the end of the file). With them, the
 * answer is CPython exactly when .dynsym and .dynstr are whole, and then
 * the same _PyRuntime. */
static void test_truncated(void **state)
{
    struct victim v[3];
    int nv = victims(v, 3);
    uint64_t cuts[1024];
    (void)state;

    if (nv == 0) {
        printf("no CPython on the machine: nothing to cut\n");
        return;
    }
    for (int k = 0; k < nv; k++) {
        size_t nc = cut_points(&v[k], cuts, 1024);
        unsigned count[2][3] = {{0}};
        const char *name = strrchr(v[k].path, '/') + 1;

        /* Plain cuts, from the end down on one memfd. */
        int fd = memfd_of(v[k].data, v[k].size);
        for (size_t i = 0; i < nc; i++) {
            struct py_binary b;
            char label[800];
            assert_int_equal(ftruncate(fd, (off_t)cuts[i]), 0);
            int ret = py_detect__elf(fd, name, &b);
            snprintf(label, sizeof(label), "%.700s cut at %llu", v[k].path,
                     (unsigned long long)cuts[i]);
            if (!consistent(label, ret, &b))
                fail_msg("%s: inconsistent", label);
            count[0][ret + 1]++;
        }
        close(fd);

        /* Cuts with the section header table after them. */
        uint64_t dyn_end = v[k].dynsym_off + v[k].dynsym_size;
        if (v[k].dynstr_off + v[k].dynstr_size > dyn_end)
            dyn_end = v[k].dynstr_off + v[k].dynstr_size;
        fd = memfd_of(v[k].data, v[k].size);
        for (size_t i = 0; i < nc; i++) {
            struct py_binary b;
            char label[800];
            uint64_t cut = cuts[i];
            if (cut < 64 || cut >= v[k].shoff)
                continue;
            assert_int_equal(ftruncate(fd, (off_t)(cut + v[k].shsize)), 0);
            assert_int_equal(pwrite(fd, v[k].data + v[k].shoff, v[k].shsize, (off_t)cut),
                             (ssize_t)v[k].shsize);
            uint64_t shoff = cut;
            assert_int_equal(pwrite(fd, &shoff, 8, offsetof(Elf64_Ehdr, e_shoff)), 8);
            int ret = py_detect__elf(fd, name, &b);
            snprintf(label, sizeof(label), "%.700s cut at %llu, section headers kept", v[k].path,
                     (unsigned long long)cut);
            if (!consistent(label, ret, &b))
                fail_msg("%s: inconsistent", label);
            count[1][ret + 1]++;
            if (cut >= dyn_end) {
                if (ret != 1 || b.runtime != v[k].b.runtime)
                    fail_msg("%s: %d, _PyRuntime 0x%llx (whole .dynsym)", label, ret,
                             (unsigned long long)b.runtime);
            } else if (cut < v[k].dynsym_off + v[k].dynsym_entsize) {
                /* Not one symbol left. */
                assert_true(ret <= 0);
            }
        }
        close(fd);
        printf("%s: %zu cuts: %u -1, %u 0, %u 1; with the section headers kept: %u -1, %u 0, %u "
               "1\n",
               v[k].path, nc, count[0][0], count[0][1], count[0][2], count[1][0], count[1][1],
               count[1][2]);
    }
    victims_free(v, nv);
}

/* Bytes flipped in each region in turn, a few at a time: the same answer
 * twice, and a consistent one. */
static void test_flipped(void **state)
{
    struct victim v[3];
    int nv = victims(v, 3);
    const char *env = getenv("CX_PY_DETECT_FLIPS");
    unsigned runs = env ? (unsigned)atoi(env) : 150, bad = 0;
    uint64_t seed = 0xf11b5eedull;
    (void)state;

    if (nv == 0) {
        printf("no CPython on the machine: nothing to flip\n");
        return;
    }
    for (int k = 0; k < nv; k++) {
        const char *name = strrchr(v[k].path, '/') + 1;
        int fd = memfd_of(v[k].data, v[k].size);
        uint8_t *map = mmap(NULL, v[k].size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_true(map != MAP_FAILED);
        for (unsigned r = 0; r < v[k].nregions; r++) {
            unsigned count[3] = {0}, usable = 0;
            for (unsigned i = 0; i < runs; i++) {
                uint64_t at[4];
                uint8_t old[4];
                unsigned nflip = 1 + (unsigned)(py_rng(&seed) % 4);
                for (unsigned f = 0; f < nflip; f++) {
                    at[f] = v[k].regions[r].off + py_rng(&seed) % v[k].regions[r].size;
                    old[f] = map[at[f]];
                    map[at[f]] ^= (uint8_t)(1 + py_rng(&seed) % 255);
                }
                struct py_binary b1, b2;
                int r1 = py_detect__elf(fd, name, &b1);
                int r2 = py_detect__elf(fd, name, &b2);
                char label[800];
                snprintf(label, sizeof(label), "%.600s, %s, flip %u (first at %llu)", v[k].path,
                         v[k].regions[r].name, i, (unsigned long long)at[0]);
                if (r1 != r2 || memcmp(&b1, &b2, sizeof(b1)) != 0) {
                    printf("%s: two answers\n", label);
                    bad++;
                }
                if (!consistent(label, r1, &b1))
                    bad++;
                count[r1 + 1]++;
                usable += r1 == 1 && b1.usable;
                for (unsigned f = nflip; f-- > 0;)
                    map[at[f]] = old[f];
            }
            printf("%s, %s (%llu bytes): %u files: %u -1, %u 0, %u 1 (%u usable)\n", name,
                   v[k].regions[r].name, (unsigned long long)v[k].regions[r].size, runs, count[0],
                   count[1], count[2], usable);
        }
        munmap(map, v[k].size);
        close(fd);
    }
    victims_free(v, nv);
    assert_int_equal(bad, 0);
}

/* Edits a symbol of the victim's .dynsym in place (in data). */
static Elf64_Sym *dynsym_of(struct victim *v, uint8_t *data, const char *name)
{
    for (uint64_t at = v->dynsym_off; at + sizeof(Elf64_Sym) <= v->dynsym_off + v->dynsym_size;
         at += sizeof(Elf64_Sym)) {
        Elf64_Sym *s = (Elf64_Sym *)(data + at);
        if (s->st_name < v->dynstr_size &&
            strcmp((const char *)data + v->dynstr_off + s->st_name, name) == 0)
            return s;
    }
    return NULL;
}

/* Symbols that lie: sizes 0, huge, wrapping past 2^64; addresses outside
 * every segment; the symbol table's entry size and link wrong. */
static void test_lying_symbols(void **state)
{
    struct victim v[3];
    int nv = victims(v, 3);
    unsigned cases = 0, bad = 0;
    (void)state;

    for (int k = 0; k < nv; k++) {
        const char *name = strrchr(v[k].path, '/') + 1;
        uint8_t *data = malloc(v[k].size);
        assert_non_null(data);
        static const struct {
            const char *sym;
            int field; /* 0: st_value, 1: st_size */
            uint64_t value;
            const char *what;
        } lies[] = {
            {"_PyEval_EvalFrameDefault", 1, 0, "size 0"},
            {"_PyEval_EvalFrameDefault", 1, 1ull << 40, "size 2^40"},
            {"_PyEval_EvalFrameDefault", 1, ~0ull - 0xfff, "size wrapping"},
            {"_PyEval_EvalFrameDefault", 0, 1ull << 47, "address past the file"},
            {"_PyEval_EvalFrameDefault", 0, ~0ull - 8, "address at 2^64"},
            {"_PyRuntime", 1, 0, "size 0"},
            {"_PyRuntime", 1, ~0ull, "size 2^64 - 1"},
            {"_PyRuntime", 0, 1ull << 47, "address past the file"},
            {"_PyRuntime", 0, ~0ull - 8, "address at 2^64"},
            {"Py_Version", 1, 0, "size 0"},
            {"Py_Version", 1, ~0ull, "size 2^64 - 1"},
            {"Py_Version", 0, ~0ull - 2, "address at 2^64"},
            {"PyCode_Type", 0, 1ull << 47, "address past the file"},
        };
        for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
            struct py_binary b;
            char label[800];
            memcpy(data, v[k].data, v[k].size);
            Elf64_Sym *s = dynsym_of(&v[k], data, lies[i].sym);
            if (!s)
                continue;
            if (lies[i].field == 0)
                s->st_value = lies[i].value;
            else
                s->st_size = lies[i].value;
            uint64_t eval_at = dynsym_of(&v[k], data, "_PyEval_EvalFrameDefault")->st_value;
            int ret = detect_bytes(data, v[k].size, name, &b);
            snprintf(label, sizeof(label), "%.600s: %s %s", v[k].path, lies[i].sym, lies[i].what);
            if (!consistent(label, ret, &b)) {
                bad++;
            } else if (b.usable && b.eval_start[0] != eval_at) {
                /* The function itself first, whatever its parts. */
                printf("%s: usable, first range at 0x%llx, not the function's 0x%llx\n", label,
                       (unsigned long long)b.eval_start[0], (unsigned long long)eval_at);
                bad++;
            } else
                printf("%s: %d, usable %d%s%s\n", label, ret, b.usable, b.why[0] ? ": " : "",
                       b.why);
            cases++;
        }
        /* .dynsym's section header: entry size 0, 1, huge; link to itself
         * and past the sections. */
        GElf_Ehdr eh;
        memcpy(&eh, v[k].data, sizeof(Elf64_Ehdr));
        for (unsigned sec = 0; sec < eh.e_shnum; sec++) {
            Elf64_Shdr *sh =
                (Elf64_Shdr *)(v[k].data + eh.e_shoff + (uint64_t)sec * eh.e_shentsize);
            if (sh->sh_type != SHT_DYNSYM)
                continue;
            static const struct {
                int field; /* 0: entsize, 1: link, 2: size, 3: offset */
                uint64_t value;
            } edits[] = {{0, 0},          {0, 1}, {0, 1ull << 40}, {1, 0},         {1, 0xffff},
                         {2, 1ull << 40}, {2, 7}, {3, 1ull << 40}, {3, ~0ull - 16}};
            for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
                struct py_binary b;
                char label[800];
                memcpy(data, v[k].data, v[k].size);
                Elf64_Shdr *d = (Elf64_Shdr *)(data + ((uint8_t *)sh - v[k].data));
                if (edits[i].field == 0)
                    d->sh_entsize = edits[i].value;
                else if (edits[i].field == 1)
                    d->sh_link = edits[i].value == 0 ? sec : (uint32_t)edits[i].value;
                else if (edits[i].field == 2)
                    d->sh_size = edits[i].value;
                else
                    d->sh_offset = edits[i].value;
                int ret = detect_bytes(data, v[k].size, name, &b);
                snprintf(label, sizeof(label), "%.600s: .dynsym field %d = 0x%llx", v[k].path,
                         edits[i].field, (unsigned long long)edits[i].value);
                if (!consistent(label, ret, &b))
                    bad++;
                cases++;
            }
        }
        free(data);
    }
    victims_free(v, nv);
    printf("lying symbols and section headers: %u cases, %u inconsistent answers\n", cases, bad);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symtab_hidden), cmocka_unit_test(test_not_elf),
        cmocka_unit_test(test_truncated),     cmocka_unit_test(test_flipped),
        cmocka_unit_test(test_lying_symbols),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

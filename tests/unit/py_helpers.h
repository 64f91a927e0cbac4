/* Test helpers of the Python runtime's tests (test_py_layout, test_py_detect,
 * test_py_code): where pyenv is and which interpreters it has, symbols read
 * with libelf (not with the code under test), and the 3.13.0 layout as its
 * headers give it.
 *
 * pyenv is $PYENV_ROOT, else $HOME/.pyenv, else /root/.pyenv (CI runs as
 * root, possibly without HOME); the Makefile looks in the same places. */
#ifndef CODEXRAY_TESTS_PY_HELPERS_H
#define CODEXRAY_TESTS_PY_HELPERS_H

#include <dirent.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../agent/runtimes/python/py_layout.h"

static inline bool py_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static inline bool py_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static inline const char *pyenv_root(void)
{
    static char path[512];
    const char *env = getenv("PYENV_ROOT"), *home = getenv("HOME");

    if (env && *env) {
        snprintf(path, sizeof(path), "%s", env);
        return path;
    }
    if (home && *home) {
        snprintf(path, sizeof(path), "%s/.pyenv", home);
        if (py_is_dir(path))
            return path;
    }
    return "/root/.pyenv";
}

/* One installed CPython 3 of pyenv's ("3.11.7"; not "3.13.0t" or others). */
struct pyenv_python {
    char name[32];
    unsigned version; /* (major << 8) | minor */
    char prefix[512]; /* <root>/versions/<name> */
};

/* pyenv's CPython 3.x installs from minor `from` on, sorted by version;
 * how many (at most max). None without pyenv. */
static inline int pyenv_pythons(unsigned from, struct pyenv_python *out, int max)
{
    char dir[600];
    struct dirent **names;
    int n, kept = 0;

    snprintf(dir, sizeof(dir), "%s/versions", pyenv_root());
    n = scandir(dir, &names, NULL, versionsort);
    if (n < 0)
        return 0;
    for (int i = 0; i < n; i++) {
        unsigned major, minor, micro;
        int end = 0;
        if (sscanf(names[i]->d_name, "%u.%u.%u%n", &major, &minor, &micro, &end) == 3 &&
            names[i]->d_name[end] == '\0' && major == 3 && minor >= from && minor < 100 &&
            kept < max) {
            struct pyenv_python *p = &out[kept++];
            snprintf(p->name, sizeof(p->name), "%.31s", names[i]->d_name);
            p->version = major << 8 | minor;
            snprintf(p->prefix, sizeof(p->prefix), "%.450s/%.31s", dir, names[i]->d_name);
        }
        free(names[i]);
    }
    free(names);
    return kept;
}

/* A file of prefix's interpreter of `version`: "lib" its libpython3.X(m).so.1.0,
 * "include" its include/python3.X(m), "bin" its bin/python3.X. Returns
 * whether it exists. */
static inline bool py_file(const char *prefix, unsigned version, const char *what, char *out,
                           size_t outlen)
{
    unsigned major = version >> 8, minor = version & 0xff;

    for (int m = 0; m < 2; m++) {
        const char *abi = m ? "m" : "";
        if (strcmp(what, "lib") == 0)
            snprintf(out, outlen, "%s/lib/libpython%u.%u%s.so.1.0", prefix, major, minor, abi);
        else if (strcmp(what, "include") == 0)
            snprintf(out, outlen, "%s/include/python%u.%u%s", prefix, major, minor, abi);
        else
            snprintf(out, outlen, "%s/bin/python%u.%u%s", prefix, major, minor, abi);
        if (strcmp(what, "include") == 0 ? py_is_dir(out) : py_is_file(out))
            return true;
    }
    return false;
}

/* Symbol `name` of path's section of type sht (SHT_SYMTAB, SHT_DYNSYM): its
 * value and size. Returns 0, or -1 when there is none. */
static inline int py_elf_sym(const char *path, unsigned sht, const char *name, uint64_t *value,
                             uint64_t *size)
{
    int fd = open(path, O_RDONLY), ret = -1;
    Elf *e;

    *value = *size = 0;
    if (fd < 0)
        return -1;
    elf_version(EV_CURRENT);
    e = elf_begin(fd, ELF_C_READ, NULL);
    for (Elf_Scn *s = NULL; e && ret && (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(s, &sh) || sh.sh_type != sht || sh.sh_entsize == 0)
            continue;
        Elf_Data *d = elf_getdata(s, NULL);
        for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
                continue;
            const char *n = elf_strptr(e, sh.sh_link, sym.st_name);
            if (n && strcmp(n, name) == 0) {
                *value = sym.st_value;
                *size = sym.st_size;
                ret = 0;
                break;
            }
        }
    }
    elf_end(e);
    close(fd);
    return ret;
}

/* The file offset of ELF address vaddr (inside a PT_LOAD's file bytes), or
 * -1. */
static inline int64_t py_elf_offset(const char *path, uint64_t vaddr)
{
    int fd = open(path, O_RDONLY);
    int64_t ret = -1;
    size_t n = 0;
    Elf *e;

    if (fd < 0)
        return -1;
    elf_version(EV_CURRENT);
    e = elf_begin(fd, ELF_C_READ, NULL);
    if (e && elf_getphdrnum(e, &n) == 0) {
        for (size_t i = 0; i < n; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr &&
                vaddr < ph.p_vaddr + ph.p_filesz) {
                ret = (int64_t)(vaddr - ph.p_vaddr + ph.p_offset);
                break;
            }
        }
    }
    elf_end(e);
    close(fd);
    return ret;
}

/* CPython 3.13.0's layout as tools/python_layout.sh prints it from the
 * 3.13.0 headers (x86-64, not free-threaded). */
static const struct py_layout py_layout_313 = {
    .version = 0x030d,
    .runtime_interpreters_head = 632,
    .interp_next = 7264,
    .interp_threads_head = 7344,
    .tstate_next = 8,
    .tstate_native_thread_id = 160,
    .tstate_thread_id = 152,
    .tstate_frame = 72,
    .cframe_current_frame = -1,
    .frame_previous = 8,
    .frame_code = 0,
    .frame_instr = 56,
    .frame_owner = 70,
    .frame_is_entry = -1,
    .code_argcount = 52,
    .code_firstlineno = 68,
    .code_filename = 112,
    .code_name = 120,
    .code_qualname = 128,
    .code_code_adaptive = 200,
    .code_linetable = 136,
    .object_type = 8,
    .unicode_state = 32,
    .unicode_length = 16,
    .unicode_ascii_size = 40,
    .unicode_compact_size = 56,
    .bytes_size = 16,
    .bytes_sval = 32,
};

static inline int32_t py_field(const struct py_layout *l, size_t i)
{
    int32_t v;
    memcpy(&v, (const char *)l + py_layout_fields[i].offset, sizeof(v));
    return v;
}

/* Prints the fields where a and b differ (labelled); returns how many. */
static inline size_t py_layout_diff(const char *label, const struct py_layout *a, const char *aname,
                                    const struct py_layout *b, const char *bname)
{
    size_t bad = 0;

    if (a->version != b->version) {
        printf("%s: version: %s 0x%x, %s 0x%x\n", label, aname, a->version, bname, b->version);
        bad++;
    }
    for (size_t i = 0; i < py_layout_nfields; i++) {
        if (py_field(a, i) != py_field(b, i)) {
            printf("%s: %s: %s %d, %s %d\n", label, py_layout_fields[i].name, aname, py_field(a, i),
                   bname, py_field(b, i));
            bad++;
        }
    }
    return bad;
}

/* xorshift64: the same bytes on every run and every libc. */
static inline uint64_t py_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

#endif

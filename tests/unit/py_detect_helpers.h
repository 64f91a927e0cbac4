/* What test_py_detect.c and test_py_detect_hostile.c share: detection of a
 * file by path, and consistent(): an answer that holds together (a usable
 * answer's evaluation ranges are non-empty and inside an executable
 * segment; the function's own range comes first). */
#ifndef CODEXRAY_TESTS_PY_DETECT_HELPERS_H
#define CODEXRAY_TESTS_PY_DETECT_HELPERS_H

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

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define DEBIAN_PYTHON3 "/usr/bin/python3"

static inline int detect_path(const char *path, struct py_binary *b)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail_msg("%s: %s", path, strerror(errno));
    int ret = py_detect__elf(fd, path, b);
    close(fd);
    return ret;
}

/* Whether [s, e) lies in one of b's executable segments. */
static inline bool in_exec_segment(const struct py_binary *b, uint64_t s, uint64_t e)
{
    for (unsigned i = 0; i < b->nsegs; i++) {
        if (s >= b->segs[i].vaddr && e <= b->segs[i].vaddr + b->segs[i].filesz)
            return true;
    }
    return false;
}

/* What any answer must be: -1 or 0 with nothing filled in; 1 usable with
 * everything the walk needs, or not usable with a reason. Returns whether
 * it holds (printing why not). */
static inline bool consistent(const char *label, int ret, const struct py_binary *b)
{
    static const struct py_binary zero;
    struct cx_py_offsets o;
    char why[192];

#define NOT(cond, ...)                                                                             \
    do {                                                                                           \
        if (cond) {                                                                                \
            printf("%s: ret %d: ", label, ret);                                                    \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            return false;                                                                          \
        }                                                                                          \
    } while (0)
    NOT(ret < -1 || ret > 1, "not -1, 0 or 1");
    NOT(memchr(b->why, '\0', sizeof(b->why)) == NULL, "why not terminated");
    if (ret != 1) {
        NOT(memcmp(b, &zero, sizeof(*b)) != 0, "something filled in");
        return true;
    }
    if (!b->usable) {
        NOT(b->why[0] == '\0', "not usable, no reason");
        return true;
    }
    NOT(b->why[0] != '\0', "usable with a reason: %s", b->why);
    NOT(b->version < 0x0307 || b->layout.version != b->version, "version 0x%x, layout's 0x%x",
        b->version, b->layout.version);
    NOT(b->runtime == 0, "no _PyRuntime");
    NOT(b->n_eval < 1 || b->n_eval > CX_PY_MAX_EVAL, "%u evaluation ranges", b->n_eval);
    NOT(b->nsegs < 1 || b->nsegs > PY_DETECT_MAX_SEGS, "%u segments", b->nsegs);
    NOT(b->cold_from_jumps && b->n_eval < 2, "cold part from jumps but no range for it");
    for (unsigned i = 0; i < b->n_eval; i++) {
        NOT(b->eval_end[i] <= b->eval_start[i], "empty range %u", i);
        NOT(!in_exec_segment(b, b->eval_start[i], b->eval_end[i]),
            "evaluation range [0x%llx, 0x%llx) outside the executable segments",
            (unsigned long long)b->eval_start[i], (unsigned long long)b->eval_end[i]);
        for (unsigned k = 0; k < i; k++)
            NOT(b->eval_start[i] < b->eval_end[k] && b->eval_start[k] < b->eval_end[i],
                "ranges %u and %u overlap", k, i);
    }
    NOT(py_layout__to_bpf(&b->layout, &o, why, sizeof(why)) != 0, "layout refused: %s", why);
#undef NOT
    return true;
}

/* A function of .symtab or .dynsym, not the evaluation function or a part
 * of it, starting inside [s, e): its name (copied to out), or NULL. */
static inline const char *other_func_in(const char *path, uint64_t s, uint64_t e_, char *out,
                                        size_t len)
{
    int fd = open(path, O_RDONLY);
    const char *found = NULL;
    Elf *e;

    assert_true(fd >= 0);
    elf_version(EV_CURRENT);
    e = elf_begin(fd, ELF_C_READ, NULL);
    for (Elf_Scn *sc = NULL; e && !found && (sc = elf_nextscn(e, sc));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(sc, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
            sh.sh_entsize == 0)
            continue;
        Elf_Data *d = elf_getdata(sc, NULL);
        for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym sym;
            /* (Zero-sized labels share addresses: ast2obj_expr.cold of
             * 3.11.7 is where _PyEval_EvalFrameDefault.cold is.) */
            if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
                sym.st_size == 0 || sym.st_value < s || sym.st_value >= e_)
                continue;
            const char *nm = elf_strptr(e, sh.sh_link, sym.st_name);
            if (nm && strncmp(nm, "_PyEval_EvalFrameDefault", 24) != 0) {
                snprintf(out, len, "%s", nm);
                found = out;
                break;
            }
        }
    }
    elf_end(e);
    close(fd);
    return found;
}

#endif

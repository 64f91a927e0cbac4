#include "py_detect.h"

#include <ctype.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A .symtab bigger than this is not searched for .cold parts. */
#define MAX_SYMTAB (64u << 20)
/* The evaluation function is scanned for far jumps this far at most. */
#define MAX_EVAL_BYTES (1u << 20)
/* An unwind-table entry outside the function counts as its cold part when
 * this many of the function's far jumps land in it. */
#define COLD_MIN_JUMPS 16

enum sym {
    S_RUNTIME,
    S_EVAL,
    S_CODE_TYPE,
    S_PY_VERSION,
    S_OLD_TSTATE,
    S_TRAMP,
    S_TRAMP_END,
    S__N,
};
static const char *const sym_names[S__N] = {
    "_PyRuntime",
    "_PyEval_EvalFrameDefault",
    "PyCode_Type",
    "Py_Version",
    "_PyThreadState_Current",
    "_Py_trampoline_func_start",
    "_Py_trampoline_func_end",
};

struct found {
    bool have[S__N];
    GElf_Sym sym[S__N];
};

/* Looks up the symbols of sym_names in one symbol section. */
static void scan_syms(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, struct found *f)
{
    Elf_Data *d = elf_getdata(scn, NULL);
    size_t n;

    if (!d || sh->sh_entsize == 0)
        return;
    n = d->d_size / sh->sh_entsize;
    for (size_t i = 0; i < n; i++) {
        GElf_Sym s;
        const char *name;
        if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || s.st_value == 0)
            continue;
        name = elf_strptr(e, sh->sh_link, s.st_name);
        if (!name || (name[0] != '_' && name[0] != 'P'))
            continue;
        for (int k = 0; k < S__N; k++) {
            if (!f->have[k] && strcmp(name, sym_names[k]) == 0) {
                f->have[k] = true;
                f->sym[k] = s;
            }
        }
    }
}

unsigned py_detect__version_from_name(const char *name)
{
    const char *p = name, *slash = strrchr(name, '/');

    if (slash)
        p = slash + 1;
    /* "python3.11", "libpython3.7m.so.1.0", "python3.9-config"... */
    while ((p = strstr(p, "python")) != NULL) {
        const char *q = p + 6;
        if (q[0] >= '2' && q[0] <= '9' && q[1] == '.' && isdigit((unsigned char)q[2])) {
            unsigned major = (unsigned)(q[0] - '0'), minor = 0;
            q += 2;
            while (isdigit((unsigned char)*q) && minor < 100)
                minor = minor * 10 + (unsigned)(*q++ - '0');
            if (minor < 100 && !isdigit((unsigned char)*q))
                return major << 8 | minor;
        }
        p += 6;
    }
    return 0;
}

/* The DT_SONAME of e, or NULL. */
static const char *soname(Elf *e)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;

    while ((scn = elf_nextscn(e, scn)) != NULL) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || sh.sh_entsize == 0)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; d && i < d->d_size / sh.sh_entsize; i++) {
            GElf_Dyn dyn;
            if (gelf_getdyn(d, (int)i, &dyn) && dyn.d_tag == DT_SONAME)
                return elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
        }
    }
    return NULL;
}

/* Reads len bytes at ELF address vaddr from the file, through the PT_LOAD
 * segment holding them (not from .bss). Returns 0, or -1. */
static int read_vaddr(Elf *e, int fd, uint64_t vaddr, void *buf, size_t len)
{
    size_t n = 0;

    if (elf_getphdrnum(e, &n))
        return -1;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        if (vaddr < ph.p_vaddr || vaddr - ph.p_vaddr >= ph.p_filesz ||
            len > ph.p_filesz - (vaddr - ph.p_vaddr))
            continue;
        off_t at = (off_t)(ph.p_offset + (vaddr - ph.p_vaddr));
        return pread(fd, buf, len, at) == (ssize_t)len ? 0 : -1;
    }
    return -1;
}

/* The version and layout: from _Py_DebugOffsets (3.13 on), Py_Version,
 * or the name. Sets out->version and out->layout, or out->why. */
static int find_layout(Elf *e, int fd, const char *path, const struct found *f,
                       struct py_binary *out)
{
    unsigned char dbg[PY_DEBUG_OFFSETS_MAX];
    size_t dlen = f->sym[S_RUNTIME].st_size < sizeof(dbg) ? f->sym[S_RUNTIME].st_size : sizeof(dbg);
    unsigned dver = 0;
    char why[160] = "";

    if (dlen >= 24 && read_vaddr(e, fd, f->sym[S_RUNTIME].st_value, dbg, dlen) == 0 &&
        memcmp(dbg, "xdebugpy", 8) == 0) {
        if (py_layout__from_debug_offsets(dbg, dlen, &out->layout, &dver, why, sizeof(why))) {
            out->version = dver;
            snprintf(out->why, sizeof(out->why), "%s", why);
            return -1;
        }
        out->version = dver;
        return 0;
    }
    if (f->have[S_PY_VERSION]) {
        uint64_t hex = 0;
        if (read_vaddr(e, fd, f->sym[S_PY_VERSION].st_value, &hex,
                       f->sym[S_PY_VERSION].st_size == 4 ? 4 : 8) == 0 &&
            (hex >> 24 & 0xff) == 3)
            out->version = (unsigned)(hex >> 16) & 0xffff;
    }
    if (!out->version)
        out->version = py_detect__version_from_name(path);
    if (!out->version) {
        const char *so = soname(e);
        out->version = so ? py_detect__version_from_name(so) : 0;
    }
    if (!out->version) {
        snprintf(out->why, sizeof(out->why),
                 "CPython of an unknown version (no Py_Version, no version in its name)");
        return -1;
    }
    const struct py_layout *l = py_layout__for_version(out->version);
    if (!l) {
        snprintf(out->why, sizeof(out->why),
                 out->version >= 0x030d ? "Python %u.%u without _Py_DebugOffsets in _PyRuntime"
                                        : "Python %u.%u: versions before 3.7 are not walked",
                 out->version >> 8, out->version & 0xff);
        return -1;
    }
    out->layout = *l;
    return 0;
}

/* The unwind-table entry (FDE) holding addr: [*start, *end). */
static bool fde_range(Dwarf_CFI *cfi, uint64_t addr, uint64_t *start, uint64_t *end)
{
    Dwarf_Frame *fr = NULL;
    Dwarf_Addr s, en;
    bool sig;

    if (!cfi || dwarf_cfi_addrframe(cfi, addr, &fr) != 0)
        return false;
    dwarf_frame_info(fr, &s, &en, &sig);
    free(fr);
    *start = s;
    *end = en;
    return en > s;
}

/* Whether [start, end) is non-empty and inside one executable segment. */
static bool in_exec(const struct py_binary *out, uint64_t start, uint64_t end)
{
    for (unsigned i = 0; i < out->nsegs; i++) {
        if (end > start && start >= out->segs[i].vaddr &&
            end - out->segs[i].vaddr <= out->segs[i].filesz)
            return true;
    }
    return false;
}

static void add_eval(struct py_binary *out, uint64_t start, uint64_t end)
{
    for (unsigned i = 0; i < out->n_eval; i++) {
        if (out->eval_start[i] == start)
            return;
    }
    if (out->n_eval < CX_PY_MAX_EVAL && in_exec(out, start, end)) {
        out->eval_start[out->n_eval] = start;
        out->eval_end[out->n_eval] = end;
        out->n_eval++;
    }
}

/* The .cold parts from .symtab: "_PyEval_EvalFrameDefault.cold" and
 * ".cold.N", each the whole FDE it starts. Returns how many. */
static unsigned cold_from_symtab(Elf *e, Dwarf_CFI *cfi, struct py_binary *out)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    unsigned n = 0;

    while ((scn = elf_nextscn(e, scn)) != NULL) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0 ||
            sh.sh_size > MAX_SYMTAB)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; d && i < d->d_size / sh.sh_entsize; i++) {
            GElf_Sym s;
            uint64_t start, end;
            const char *name;
            if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC)
                continue;
            name = elf_strptr(e, sh.sh_link, s.st_name);
            if (!name || strncmp(name, "_PyEval_EvalFrameDefault.cold", 29) != 0)
                continue;
            if (!fde_range(cfi, s.st_value, &start, &end)) {
                start = s.st_value;
                end = s.st_value + (s.st_size ? s.st_size : 1);
            }
            add_eval(out, start, end);
            n++;
        }
    }
    return n;
}

/* A stripped binary: the cold part is the FDE outside the function that
 * most of its far jumps (jmp rel32, jcc rel32) land in. The bytes are
 * scanned, not decoded, so some "jumps" are parts of other instructions;
 * they land all over the file, and the real ones hundreds of times in one
 * place. */
static void cold_from_jumps(Elf *e, int fd, Dwarf_CFI *cfi, uint64_t start, uint64_t end,
                            struct py_binary *out)
{
    enum { MAX_CAND = 16 };
    struct {
        uint64_t start, end;
        unsigned hits;
    } cand[MAX_CAND];
    unsigned nc = 0;
    size_t len = end - start > MAX_EVAL_BYTES ? MAX_EVAL_BYTES : end - start;
    unsigned char *code = malloc(len);

    if (!code || read_vaddr(e, fd, start, code, len)) {
        free(code);
        return;
    }
    for (size_t i = 0; i + 5 <= len; i++) {
        size_t at;
        if (code[i] == 0xe9)
            at = i + 1;
        else if (code[i] == 0x0f && i + 6 <= len && (code[i + 1] & 0xf0) == 0x80)
            at = i + 2;
        else
            continue;
        int32_t rel;
        memcpy(&rel, code + at, 4);
        uint64_t to = start + at + 4 + (int64_t)rel;
        if (to >= start && to < end)
            continue;
        unsigned k;
        for (k = 0; k < nc; k++) {
            if (to >= cand[k].start && to < cand[k].end)
                break;
        }
        if (k == nc) {
            uint64_t fs, fe;
            if (nc == MAX_CAND || !fde_range(cfi, to, &fs, &fe) || (fs <= start && fe > start))
                continue;
            cand[nc++] = (typeof(cand[0])){fs, fe, 0};
        }
        cand[k].hits++;
    }
    for (unsigned k = 0; k < nc; k++) {
        if (cand[k].hits >= COLD_MIN_JUMPS) {
            add_eval(out, cand[k].start, cand[k].end);
            out->cold_from_jumps = true;
        }
    }
    free(code);
}

int py_detect__tramp_cfa(const uint8_t *code, size_t len)
{
    size_t i = 0;

    if (len >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa)
        i = 4; /* endbr64 */
    if (len >= i + 4 && code[i] == 0x55 && code[i + 1] == 0x48 && code[i + 2] == 0x89 &&
        code[i + 3] == 0xe5)
        return 0; /* push %rbp; mov %rsp,%rbp */
    /* sub $imm8,%rsp, then call *%reg (ff d0..d7) */
    if (len >= i + 6 && code[i] == 0x48 && code[i + 1] == 0x83 && code[i + 2] == 0xec &&
        code[i + 3] < 0x80 && (code[i + 3] & 7) == 0 && code[i + 4] == 0xff &&
        (code[i + 5] & 0xf8) == 0xd0)
        return code[i + 3] + 8;
    return -1;
}

/* The perf trampoline's template and how its frame is walked. */
static void read_tramp(Elf *e, int fd, const struct found *f, struct py_binary *out)
{
    if (!f->have[S_TRAMP] || !f->have[S_TRAMP_END] ||
        f->sym[S_TRAMP_END].st_value <= f->sym[S_TRAMP].st_value)
        return;
    size_t len = f->sym[S_TRAMP_END].st_value - f->sym[S_TRAMP].st_value;
    if (len > sizeof(out->tramp_code) ||
        read_vaddr(e, fd, f->sym[S_TRAMP].st_value, out->tramp_code, len))
        return;
    int cfa = py_detect__tramp_cfa(out->tramp_code, len);
    if (cfa < 0)
        return;
    out->tramp_len = (unsigned)len;
    out->tramp_cfa = (unsigned)cfa;
}

int py_detect__elf(int fd, const char *path, struct py_binary *out)
{
    struct found f = {0};
    Elf *e = NULL;
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    int ret = -1;

    memset(out, 0, sizeof(*out));
    elf_version(EV_CURRENT);
    e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF)
        goto out;
    /* The dynamic symbols only: what an interpreter exports. */
    while ((scn = elf_nextscn(e, scn)) != NULL) {
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNSYM)
            scan_syms(e, scn, &sh, &f);
    }
    ret = 0;
    if (!f.have[S_RUNTIME]) {
        if (f.have[S_OLD_TSTATE] && f.have[S_EVAL]) {
            ret = 1;
            out->version = py_detect__version_from_name(path);
            snprintf(out->why, sizeof(out->why), "CPython before 3.7: not walked");
        }
        goto out;
    }
    ret = 1;
    out->runtime = f.sym[S_RUNTIME].st_value;
    out->code_type = f.have[S_CODE_TYPE] ? f.sym[S_CODE_TYPE].st_value : 0;
    out->nsegs = binary__exec_segments(fd, out->segs, PY_DETECT_MAX_SEGS);
    if (find_layout(e, fd, path, &f, out))
        goto out;
    if (!f.have[S_EVAL] || f.sym[S_EVAL].st_size == 0) {
        snprintf(out->why, sizeof(out->why), "no _PyEval_EvalFrameDefault among its symbols");
        goto out;
    }
    uint64_t es = f.sym[S_EVAL].st_value, ee = es + f.sym[S_EVAL].st_size;
    if (!in_exec(out, es, ee)) {
        snprintf(out->why, sizeof(out->why),
                 "_PyEval_EvalFrameDefault outside the executable segments");
        goto out;
    }
    add_eval(out, es, ee);
    Dwarf_CFI *cfi = dwarf_getcfi_elf(e);
    read_tramp(e, fd, &f, out);
    if (!cold_from_symtab(e, cfi, out))
        cold_from_jumps(e, fd, cfi, es, ee, out);
    /* dwarf_getcfi_elf's CFI is the caller's to end. */
    if (cfi)
        dwarf_cfi_end(cfi);
    struct cx_py_offsets o;
    char why[160];
    if (py_layout__to_bpf(&out->layout, &o, why, sizeof(why))) {
        snprintf(out->why, sizeof(out->why), "Python %u.%u: %s", out->version >> 8,
                 out->version & 0xff, why);
        goto out;
    }
    if (!out->nsegs) {
        snprintf(out->why, sizeof(out->why), "no executable segment");
        goto out;
    }
    out->usable = true;
out:
    if (e)
        elf_end(e);
    return ret;
}

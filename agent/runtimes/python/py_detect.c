#include "py_detect.h"

#include <ctype.h>
#include <dwarf.h>
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
 * this many of the function's far jumps land in it; or this many when the
 * entry starts inside a frame (no function starts there: a part split off
 * one). gcc (PGO) split 3.14's and 3.15's evaluation function in Debian to
 * a ~1 KiB entry part and a ~80 KiB part holding the loop, which the entry
 * part jumps to 13 times. */
#define COLD_MIN_JUMPS 16
#define COLD_MIN_JUMPS_MIDFRAME 4

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
    const char *shape = "";
    char why[160] = "";

    if (dlen >= 24 && read_vaddr(e, fd, f->sym[S_RUNTIME].st_value, dbg, dlen) == 0 &&
        memcmp(dbg, "xdebugpy", 8) == 0) {
        if (py_layout__read_debug_offsets(dbg, dlen, &out->layout, &dver, &shape, why,
                                          sizeof(why))) {
            out->version = dver;
            snprintf(out->why, sizeof(out->why), "%s", why);
            return -1;
        }
        out->version = dver;
        /* A shape is named by the release it starts with. */
        unsigned sv = (unsigned)(shape[0] - '0') << 8 | (unsigned)atoi(shape + 2);
        snprintf(out->layout_from, sizeof(out->layout_from),
                 sv == dver ? "_Py_DebugOffsets, read in %s's shape"
                            : "_Py_DebugOffsets, read in %s's shape: a release newer than this "
                              "agent knows, its offsets checked",
                 shape);
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
    snprintf(out->layout_from, sizeof(out->layout_from), "the table of %u.%u", l->version >> 8,
             l->version & 0xff);
    return 0;
}

/* The unwind tables: libdw's view, and .eh_frame_hdr's search table with
 * .eh_frame where the file has them in the form gcc and ld write. */
struct unwind_tabs {
    Dwarf_CFI *cfi;
    const uint8_t *hdr, *eh; /* section bytes, NULL when absent */
    size_t hdr_len, eh_len;
    uint64_t hdr_va, eh_va;
};

static int32_t s32(const uint8_t *p)
{
    int32_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

/* The FDE holding addr from .eh_frame_hdr: its start the largest initial
 * location not past addr, its end from the FDE's own range (pc-relative
 * sdata4, checked by its start agreeing with the table's). */
static bool hdr_fde(const struct unwind_tabs *t, uint64_t addr, uint64_t *start, uint64_t *end)
{
    /* version 1; eh_frame_ptr any 4-byte form; count udata4; table datarel sdata4 */
    if (!t->hdr || !t->eh || t->hdr_len < 12 || t->hdr[0] != 1 || t->hdr[2] != 0x03 ||
        t->hdr[3] != 0x3b || (t->hdr[1] & 0x0f) != 0x0b)
        return false;
    uint32_t n;
    memcpy(&n, t->hdr + 8, sizeof(n));
    if (n == 0 || n > (t->hdr_len - 12) / 8)
        return false;
    const uint8_t *tab = t->hdr + 12;
    size_t lo = 0, hi = n; /* the answer is lo - 1 */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->hdr_va + (uint64_t)(int64_t)s32(tab + 8 * mid) <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return false;
    uint64_t init = t->hdr_va + (uint64_t)(int64_t)s32(tab + 8 * (lo - 1));
    uint64_t fde = t->hdr_va + (uint64_t)(int64_t)s32(tab + 8 * (lo - 1) + 4);
    if (fde < t->eh_va || fde - t->eh_va > t->eh_len || t->eh_len - (fde - t->eh_va) < 16)
        return false;
    const uint8_t *p = t->eh + (fde - t->eh_va);
    uint64_t pc_begin = fde + 8 + (uint64_t)(int64_t)s32(p + 8);
    uint32_t range;
    memcpy(&range, p + 12, sizeof(range));
    if (s32(p) == -1 || pc_begin != init || addr - init >= range)
        return false;
    *start = init;
    *end = init + range;
    return true;
}

/* The unwind-table entry (FDE) holding addr: [*start, *end). Without
 * .eh_frame_hdr, libdw's row holding it (a part of its FDE). */
static bool fde_range(const struct unwind_tabs *t, uint64_t addr, uint64_t *start, uint64_t *end)
{
    Dwarf_Frame *fr = NULL;
    Dwarf_Addr s, en;
    bool sig;

    if (hdr_fde(t, addr, start, end))
        return true;
    if (!t->cfi || dwarf_cfi_addrframe(t->cfi, addr, &fr) != 0)
        return false;
    dwarf_frame_info(fr, &s, &en, &sig);
    free(fr);
    *start = s;
    *end = en;
    return en > s;
}

/* Fills t from e's sections; t->cfi is the caller's to end. */
static void unwind_tabs_open(Elf *e, struct unwind_tabs *t)
{
    Elf_Scn *scn = NULL;
    size_t shstrndx;
    GElf_Shdr sh;

    memset(t, 0, sizeof(*t));
    t->cfi = dwarf_getcfi_elf(e);
    if (elf_getshdrstrndx(e, &shstrndx))
        return;
    while ((scn = elf_nextscn(e, scn)) != NULL) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
            continue;
        const char *name = elf_strptr(e, shstrndx, sh.sh_name);
        bool hdr = name && strcmp(name, ".eh_frame_hdr") == 0;
        if (!name || (!hdr && strcmp(name, ".eh_frame") != 0))
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf || d->d_size != sh.sh_size)
            continue;
        if (hdr) {
            t->hdr = d->d_buf;
            t->hdr_len = d->d_size;
            t->hdr_va = sh.sh_addr;
        } else {
            t->eh = d->d_buf;
            t->eh_len = d->d_size;
            t->eh_va = sh.sh_addr;
        }
    }
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
static unsigned cold_from_symtab(Elf *e, const struct unwind_tabs *t, struct py_binary *out)
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
            if (!fde_range(t, s.st_value, &start, &end)) {
                start = s.st_value;
                end = s.st_value + (s.st_size ? s.st_size : 1);
            }
            add_eval(out, start, end);
            n++;
        }
    }
    return n;
}

/* Whether the FDE starting at addr starts inside a frame: its CFA there is
 * not the stack pointer as a call leaves it (x86-64: rsp + 8), as in a part
 * gcc split off a function (its CFA is rbp + 16 or rsp + the frame's size
 * from its first byte); false when it cannot be told. */
static bool starts_mid_frame(Dwarf_CFI *cfi, uint64_t addr)
{
    Dwarf_Frame *fr = NULL;
    Dwarf_Op *ops = NULL;
    size_t nops = 0;
    bool mid = false;

    if (!cfi || dwarf_cfi_addrframe(cfi, addr, &fr) != 0)
        return false;
    if (dwarf_frame_cfa(fr, &ops, &nops) == 0 && nops == 1) {
        bool sp_plus_8 =
            (ops[0].atom == DW_OP_bregx && ops[0].number == 7 && ops[0].number2 == 8) ||
            (ops[0].atom == DW_OP_breg7 && (int64_t)ops[0].number == 8);
        mid = !sp_plus_8;
    }
    free(fr);
    return mid;
}

/* A stripped binary: the cold part is the FDE outside the function that
 * most of its far jumps (jmp rel32, jcc rel32) land in. The bytes are
 * scanned, not decoded, so some "jumps" are parts of other instructions;
 * they land all over the file, and the real ones hundreds of times in one
 * place. */
static void cold_from_jumps(Elf *e, int fd, const struct unwind_tabs *t, uint64_t start,
                            uint64_t end, struct py_binary *out)
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
            if (nc == MAX_CAND || !fde_range(t, to, &fs, &fe) || (fs <= start && fe > start))
                continue;
            cand[nc++] = (typeof(cand[0])){fs, fe, 0};
        }
        cand[k].hits++;
    }
    for (unsigned k = 0; k < nc; k++) {
        if (cand[k].hits >= COLD_MIN_JUMPS ||
            (cand[k].hits >= COLD_MIN_JUMPS_MIDFRAME && starts_mid_frame(t->cfi, cand[k].start))) {
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
    struct unwind_tabs tabs;
    unwind_tabs_open(e, &tabs);
    read_tramp(e, fd, &f, out);
    if (!cold_from_symtab(e, &tabs, out))
        cold_from_jumps(e, fd, &tabs, es, ee, out);
    /* dwarf_getcfi_elf's CFI is the caller's to end. */
    if (tabs.cfi)
        dwarf_cfi_end(tabs.cfi);
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

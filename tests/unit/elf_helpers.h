/* Test helpers: where a symbol of a test binary lives, read with libelf so
 * the tests do not trust the code they test. */
#ifndef CODEXRAY_TESTS_ELF_HELPERS_H
#define CODEXRAY_TESTS_ELF_HELPERS_H

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* The ELF file open at fd as a libdwfl module, reported offline as the
 * agent's symbolizer reports a binary. *dwfl (NULL when libdwfl could not
 * start) is the caller's to dwfl_end. NULL when the file is refused. */
static inline Dwfl_Module *elf_dwfl_module(const char *path, int fd, Dwfl **dwfl)
{
    static char *debuginfo_path = NULL;
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
        .debuginfo_path = &debuginfo_path,
    };
    Dwfl_Module *m;

    *dwfl = dwfl_begin(&callbacks);
    if (!*dwfl)
        return NULL;
    dwfl_report_begin(*dwfl);
    m = dwfl_report_elf(*dwfl, "t", path, fd, 0, false);
    dwfl_report_end(*dwfl, NULL, NULL);
    return m;
}

/* Pages of [p, p + n) mapped in this process (pagemap's present bit, which
 * an unprivileged reader sees too); SIZE_MAX when pagemap cannot be read. */
static inline size_t elf_present_pages(const void *p, size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~((uintptr_t)pg - 1);
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    size_t got = 0;

    if (fd < 0)
        return SIZE_MAX;
    for (uintptr_t a = lo; a < hi; a += (uintptr_t)pg) {
        uint64_t e;
        if (pread(fd, &e, 8, (off_t)(a / (uintptr_t)pg * 8)) != 8) {
            got = SIZE_MAX;
            break;
        }
        got += e >> 63;
    }
    close(fd);
    return got;
}

/* Finds symbol `name` in path's .symtab (or, where it has none, as in a
 * distribution's libc, its .dynsym): its ELF address, size and the file
 * offset of that address. Returns 0 or -1. */
static inline int elf_symbol(const char *path, const char *name, uint64_t *vaddr, uint64_t *size,
                             uint64_t *file_offset)
{
    int fd = open(path, O_RDONLY), ret = -1;
    Elf *e;

    if (fd < 0)
        return -1;
    elf_version(EV_CURRENT);
    e = elf_begin(fd, ELF_C_READ, NULL);
    bool has_symtab = false;
    for (Elf_Scn *s = NULL; e && (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        has_symtab |= gelf_getshdr(s, &sh) && sh.sh_type == SHT_SYMTAB;
    }
    for (Elf_Scn *s = NULL; e && ret && (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(s, &sh) || sh.sh_type != (has_symtab ? SHT_SYMTAB : SHT_DYNSYM))
            continue;
        Elf_Data *d = elf_getdata(s, NULL);
        for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(d, i, &sym))
                continue;
            const char *n = elf_strptr(e, sh.sh_link, sym.st_name);
            if (n && strcmp(n, name) == 0 && sym.st_value) {
                *vaddr = sym.st_value;
                *size = sym.st_size;
                ret = 0;
                break;
            }
        }
    }
    if (!ret) {
        size_t nph;
        ret = -1;
        elf_getphdrnum(e, &nph);
        for (size_t i = 0; i < nph; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, i, &ph) && ph.p_type == PT_LOAD && *vaddr >= ph.p_vaddr &&
                *vaddr < ph.p_vaddr + ph.p_filesz) {
                *file_offset = *vaddr - ph.p_vaddr + ph.p_offset;
                ret = 0;
                break;
            }
        }
    }
    elf_end(e);
    close(fd);
    return ret;
}

#endif

/* The CFI sections of the file, and libdw's view of one (struct cfi_src). */
#include "cfi_table_int.h"

#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- sections ------------------------------------------------------------ */

Elf_Scn *cfi_find_section(Elf *e, size_t shstrndx, const char *name, GElf_Shdr *sh)
{
    for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
        const char *n;
        if (gelf_getshdr(s, sh) && (n = elf_strptr(e, shstrndx, sh->sh_name)) &&
            strcmp(n, name) == 0)
            return s;
    }
    return NULL;
}

/* The section's bytes (uncompressed), after checking its size against the
 * file and the cap: libelf reads it into memory whole. */
int cfi_section_data(struct build *b, Elf_Scn *s, const GElf_Shdr *sh, const char *name,
                     uint64_t file_size, Elf_Data **out)
{
    uint64_t size = sh->sh_size;
    Elf_Data *d;

    if (sh->sh_type == SHT_NOBITS)
        return cfi_fail(b, -ENOENT, "%s has no bytes in the file (a debug file?)", name);
    if (sh->sh_offset > file_size || sh->sh_size > file_size - sh->sh_offset)
        return cfi_fail(b, -EINVAL, "%s runs past the end of the file", name);
    if (sh->sh_flags & SHF_COMPRESSED) {
        GElf_Chdr ch;
        if (!gelf_getchdr(s, &ch))
            return cfi_fail(b, -EINVAL, "%s: bad compression header", name);
        size = ch.ch_size;
    }
    if (size > b->o.max_section_bytes)
        return cfi_fail(b, -E2BIG, "%s is %" PRIu64 " bytes, over the cap of %" PRIu64, name, size,
                        b->o.max_section_bytes);
    if ((sh->sh_flags & SHF_COMPRESSED) && elf_compress(s, 0, 0) < 0)
        return cfi_fail(b, -EINVAL, "%s: %s", name, elf_errmsg(-1));
    d = elf_getdata(s, NULL);
    if (!d || !d->d_buf || d->d_size != size)
        return cfi_fail(b, -EINVAL, "%s: %s", name, d ? "size mismatch" : elf_errmsg(-1));
    *out = d;
    return 0;
}

int cfi_src__open(struct build *b, const GElf_Ehdr *eh, const GElf_Shdr *orig, const Elf_Data *data,
                  bool eh_frame, struct cfi_src *src)
{
    /* section names: 1 is ".eh_frame" or ".debug_frame", then ".shstrtab" */
    char names[32];
    const char *name = eh_frame ? ".eh_frame" : ".debug_frame";
    int nlen = snprintf(names, sizeof(names), "%c%s%c.shstrtab", 0, name, 0) + 1;
    size_t data_off = sizeof(Elf64_Ehdr), names_off = data_off + data->d_size;
    size_t sh_off = (names_off + (size_t)nlen + 7) & ~(size_t)7;
    size_t size = sh_off + 3 * sizeof(Elf64_Shdr);
    uint8_t *img;

    img = src->img = calloc(1, size);
    if (!img)
        return cfi_fail(b, -ENOMEM, "out of memory for a copy of %s", name);
    Elf64_Ehdr *h = (Elf64_Ehdr *)img;
    memcpy(h->e_ident, eh->e_ident, EI_NIDENT);
    h->e_type = eh->e_type;
    h->e_machine = eh->e_machine;
    h->e_version = EV_CURRENT;
    h->e_shoff = sh_off;
    h->e_ehsize = sizeof(Elf64_Ehdr);
    h->e_shentsize = sizeof(Elf64_Shdr);
    h->e_shnum = 3;
    h->e_shstrndx = 2;
    memcpy(img + data_off, data->d_buf, data->d_size);
    memcpy(img + names_off, names, (size_t)nlen);
    Elf64_Shdr *sh = (Elf64_Shdr *)(img + sh_off);
    sh[1] = (Elf64_Shdr){.sh_name = 1,
                         .sh_type = SHT_PROGBITS,
                         .sh_flags = eh_frame ? SHF_ALLOC : 0,
                         .sh_addr = eh_frame ? orig->sh_addr : 0,
                         .sh_offset = data_off,
                         .sh_size = data->d_size,
                         .sh_addralign = 1};
    sh[2] = (Elf64_Shdr){.sh_name = (Elf64_Word)strlen(name) + 2,
                         .sh_type = SHT_STRTAB,
                         .sh_offset = names_off,
                         .sh_size = (Elf64_Xword)nlen,
                         .sh_addralign = 1};
    src->elf = elf_memory((char *)img, size);
    Elf_Scn *s = src->elf ? elf_getscn(src->elf, 1) : NULL;
    src->d = s ? elf_getdata(s, NULL) : NULL;
    if (!src->d || src->d->d_size != data->d_size)
        return cfi_fail(b, -EINVAL, "%s: %s", name, elf_errmsg(-1));
    return 0;
}

/* Asks libdw for the CFI of the image (after our enumeration found FDEs). */
int cfi_src__cfi(struct build *b, bool eh_frame, struct cfi_src *src)
{
    if (eh_frame) {
        src->cfi = dwarf_getcfi_elf(src->elf);
    } else {
        src->dw = dwarf_begin_elf(src->elf, DWARF_C_READ, NULL);
        src->cfi = src->dw ? dwarf_getcfi(src->dw) : NULL;
    }
    if (!src->cfi)
        return cfi_fail(b, -EINVAL, "libdw cannot read the CFI: %s", dwarf_errmsg(-1));
    return 0;
}

/* src may be zeroed, or half open. */
void cfi_src__close(struct cfi_src *src)
{
    if (src->dw)
        dwarf_end(src->dw); /* and dwarf_getcfi()'s CFI with it */
    else
        dwarf_cfi_end(src->cfi);
    elf_end(src->elf);
    free(src->img);
    memset(src, 0, sizeof(*src));
}

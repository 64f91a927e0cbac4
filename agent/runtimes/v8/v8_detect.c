#include "v8_detect.h"

#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A symbol section bigger than this is not searched (node's .dynsym is
 * ~3 MiB). */
#define MAX_DYNSYM (256u << 20)
/* Instance types above JS_FUNCTION_TYPE counted as JSFunction's own (class
 * constructors, the typed-array constructors...) at most: V8 11 has ~30. */
#define MAX_FN_TYPES 64

/* The constants read, by name. */
enum k {
    K_TAGGED_SIZE,
    K_HEAP_TAG,
    K_HEAP_TAG_MASK,
    K_SMI_TAG_MASK,
    K_FP_FUNCTION,
    K_FP_CONTEXT,
    K_MAP_TYPE,
    K_FN_SHARED,
    K_SFI_NAME,
    K_SFI_SCRIPT,
    K_SCRIPT_NAME,
    K_SCRIPT_SOURCE,
    K_SCRIPT_LINE_ENDS,
    K_FIXED_LENGTH,
    K_FIXED_DATA,
    K_STR_LENGTH,
    K_SEQ1_CHARS,
    K_SEQ2_CHARS,
    K_CONS_FIRST,
    K_CONS_SECOND,
    K_THIN_ACTUAL,
    K_SLICED_PARENT,
    K_SLICED_OFFSET,
    K_SCOPE_NCONTEXTLOCALS,
    K_SCOPE_FIRST_VARS,
    K_TYPE_FN,
    K_TYPE_SFI,
    K_TYPE_SCOPE_INFO,
    K_TYPE_SCRIPT,
    K_TYPE_FIXED_ARRAY,
    K_FIRST_NONSTRING,
    K_STR_REPR_MASK,
    K_STR_ENC_MASK,
    K_SEQ_TAG,
    K_CONS_TAG,
    K_SLICED_TAG,
    K_THIN_TAG,
    K_ONE_BYTE_TAG,
    K__N,
};

static const char *const names[K__N] = {
    "v8dbg_TaggedSize",
    "v8dbg_HeapObjectTag",
    "v8dbg_HeapObjectTagMask",
    "v8dbg_SmiTagMask",
    "v8dbg_off_fp_function",
    "v8dbg_off_fp_context",
    "v8dbg_class_Map__instance_type__uint16_t",
    "v8dbg_class_JSFunction__shared__SharedFunctionInfo",
    "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object",
    "v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject",
    "v8dbg_class_Script__name__Object",
    "v8dbg_class_Script__source__Object",
    "v8dbg_class_Script__line_ends__Object",
    "v8dbg_class_FixedArrayBase__length__SMI",
    "v8dbg_class_FixedArray__data__uintptr_t",
    "v8dbg_class_String__length__int32_t",
    "v8dbg_class_SeqOneByteString__chars__char",
    "v8dbg_class_SeqTwoByteString__chars__char",
    "v8dbg_class_ConsString__first__String",
    "v8dbg_class_ConsString__second__String",
    "v8dbg_class_ThinString__actual__String",
    "v8dbg_class_SlicedString__parent__String",
    "v8dbg_class_SlicedString__offset__SMI",
    "v8dbg_scopeinfo_idx_ncontextlocals",
    "v8dbg_scopeinfo_idx_first_vars",
    "v8dbg_type_JSFunction__JS_FUNCTION_TYPE",
    "v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE",
    "v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE",
    "v8dbg_type_Script__SCRIPT_TYPE",
    "v8dbg_type_FixedArray__FIXED_ARRAY_TYPE",
    "v8dbg_FirstNonstringType",
    "v8dbg_StringRepresentationMask",
    "v8dbg_StringEncodingMask",
    "v8dbg_SeqStringTag",
    "v8dbg_ConsStringTag",
    "v8dbg_SlicedStringTag",
    "v8dbg_ThinStringTag",
    "v8dbg_OneByteStringTag",
};

/* Other names a constant has in other V8 versions (V8 12 on spells a
 * field's type Tagged_T_, and V8 13 calls the script field of a
 * SharedFunctionInfo "script": it holds no DebugInfo any more). A name
 * found in names[] wins over one here. */
static const struct {
    enum k k;
    const char *name;
} aliases[] = {
    {K_SFI_NAME, "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Tagged_NameOrScopeInfoT_"},
    {K_SFI_SCRIPT, "v8dbg_class_SharedFunctionInfo__script__Tagged_HeapObject_"},
    {K_SFI_SCRIPT, "v8dbg_class_SharedFunctionInfo__raw_script__Tagged_Object_"},
};

struct found {
    bool have[K__N];
    bool by_alias[K__N]; /* have[k] from aliases[]: names[k] still wins */
    int32_t v[K__N];
    /* The smallest v8dbg_type_* value above JS_FUNCTION_TYPE: the end of
     * JSFunction's range of types (its subclasses' types follow it). */
    int32_t next_type;
    unsigned nconsts;
};

/* The 32-bit value at ELF address vaddr: from the PT_LOAD segment holding
 * it, 0 in its .bss part. Returns 0, or -1 when no segment holds it. */
static int read_i32(Elf *e, int fd, uint64_t vaddr, int32_t *out)
{
    size_t n = 0;

    if (elf_getphdrnum(e, &n))
        return -1;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || vaddr < ph.p_vaddr ||
            vaddr - ph.p_vaddr > ph.p_memsz || ph.p_memsz - (vaddr - ph.p_vaddr) < 4)
            continue;
        uint64_t rel = vaddr - ph.p_vaddr;
        if (rel >= ph.p_filesz) {
            *out = 0;
            return 0;
        }
        if (ph.p_filesz - rel < 4)
            return -1;
        return pread(fd, out, 4, (off_t)(ph.p_offset + rel)) == 4 ? 0 : -1;
    }
    return -1;
}

static void scan_syms(Elf *e, int fd, Elf_Scn *scn, const GElf_Shdr *sh, struct found *f)
{
    Elf_Data *d = elf_getdata(scn, NULL);
    size_t n;

    if (!d || sh->sh_entsize == 0 || d->d_size > MAX_DYNSYM)
        return;
    n = d->d_size / sh->sh_entsize;
    for (size_t i = 0; i < n; i++) {
        GElf_Sym s;
        const char *name;
        int32_t v;
        if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || s.st_value == 0)
            continue;
        name = elf_strptr(e, sh->sh_link, s.st_name);
        if (!name || strncmp(name, "v8dbg_", 6) != 0 || (s.st_size != 0 && s.st_size != 4) ||
            read_i32(e, fd, s.st_value, &v))
            continue;
        f->nconsts++;
        for (int k = 0; k < K__N; k++) {
            if ((!f->have[k] || f->by_alias[k]) && strcmp(name, names[k]) == 0) {
                f->have[k] = true;
                f->by_alias[k] = false;
                f->v[k] = v;
            }
        }
        for (size_t a = 0; a < sizeof(aliases) / sizeof(aliases[0]); a++) {
            if (!f->have[aliases[a].k] && strcmp(name, aliases[a].name) == 0) {
                f->have[aliases[a].k] = true;
                f->by_alias[aliases[a].k] = true;
                f->v[aliases[a].k] = v;
            }
        }
    }
}

/* The smallest v8dbg_type_* value above `after`, in a second pass (the
 * first one met types before it knew JS_FUNCTION_TYPE). */
static int32_t next_type_after(Elf *e, int fd, Elf_Scn *scn, const GElf_Shdr *sh, int32_t after)
{
    Elf_Data *d = elf_getdata(scn, NULL);
    int32_t best = 0;

    if (!d || sh->sh_entsize == 0 || d->d_size > MAX_DYNSYM)
        return 0;
    for (size_t i = 0; i < d->d_size / sh->sh_entsize; i++) {
        GElf_Sym s;
        const char *name;
        int32_t v;
        if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || s.st_value == 0)
            continue;
        name = elf_strptr(e, sh->sh_link, s.st_name);
        if (!name || strncmp(name, "v8dbg_type_", 11) != 0 || read_i32(e, fd, s.st_value, &v))
            continue;
        if (v > after && (best == 0 || v < best))
            best = v;
    }
    return best;
}

/* Checks the constants; fills l. Returns 0, or -1 with why. */
static int check(const struct found *f, struct v8_layout *l, char *why, size_t whylen)
{
    const int32_t *v = f->v;

    for (int k = 0; k < K__N; k++) {
        if (!f->have[k]) {
            snprintf(why, whylen, "its V8 exports no %s (a V8 version this agent does not know)",
                     names[k]);
            return -1;
        }
    }
    if (v[K_TAGGED_SIZE] != 8) {
        snprintf(why, whylen, "tagged values of %d bytes (pointer compression): not supported",
                 v[K_TAGGED_SIZE]);
        return -1;
    }
    if (v[K_HEAP_TAG] != 1 || v[K_HEAP_TAG_MASK] != 3 || v[K_SMI_TAG_MASK] != 1) {
        snprintf(why, whylen, "heap object tag %d/%d, Smi tag mask %d: not V8's usual 1/3, 1",
                 v[K_HEAP_TAG], v[K_HEAP_TAG_MASK], v[K_SMI_TAG_MASK]);
        return -1;
    }
    if (v[K_FP_CONTEXT] != v[K_FP_FUNCTION] + 8 || v[K_FP_FUNCTION] < -256 ||
        v[K_FP_FUNCTION] > 256) {
        snprintf(why, whylen, "frame offsets function %d, context %d: not side by side",
                 v[K_FP_FUNCTION], v[K_FP_CONTEXT]);
        return -1;
    }
    /* The fields BPF reads: inside its object read, 8-aligned. */
    static const int bpf_fields[] = {K_FN_SHARED, K_SFI_NAME, K_SFI_SCRIPT};
    for (size_t i = 0; i < sizeof(bpf_fields) / sizeof(bpf_fields[0]); i++) {
        int32_t o = v[bpf_fields[i]];
        if (o < 8 || o > CX_V8_OBJ_READ - 8 || o % 8) {
            snprintf(why, whylen, "%s = %d: not an 8-aligned field in an object's first %d bytes",
                     names[bpf_fields[i]], o, CX_V8_OBJ_READ);
            return -1;
        }
    }
    if (v[K_MAP_TYPE] < 8 || v[K_MAP_TYPE] > 254 || v[K_MAP_TYPE] % 2) {
        snprintf(why, whylen, "Map::instance_type at %d", v[K_MAP_TYPE]);
        return -1;
    }
    /* The fields user space reads: inside an object's first 4 KiB. */
    for (int k = K_SCRIPT_NAME; k <= K_SCOPE_FIRST_VARS; k++) {
        if (v[k] < 0 || v[k] > 4096) {
            snprintf(why, whylen, "%s = %d: out of range", names[k], v[k]);
            return -1;
        }
    }
    for (int k = K_TYPE_FN; k <= K_ONE_BYTE_TAG; k++) {
        if (v[k] < 0 || v[k] > 0xffff) {
            snprintf(why, whylen, "%s = %d: out of range", names[k], v[k]);
            return -1;
        }
    }
    if (v[K_TYPE_FN] == 0 || v[K_TYPE_SFI] == 0 || v[K_TYPE_SFI] == v[K_TYPE_FN]) {
        snprintf(why, whylen, "instance types JSFunction %d, SharedFunctionInfo %d", v[K_TYPE_FN],
                 v[K_TYPE_SFI]);
        return -1;
    }
    l->fp_function = (int16_t)v[K_FP_FUNCTION];
    l->fp_context = (int16_t)v[K_FP_CONTEXT];
    l->map_type = (uint16_t)v[K_MAP_TYPE];
    l->fn_shared = (uint16_t)v[K_FN_SHARED];
    l->sfi_name = (uint16_t)v[K_SFI_NAME];
    l->sfi_script = (uint16_t)v[K_SFI_SCRIPT];
    l->script_name = (uint16_t)v[K_SCRIPT_NAME];
    l->script_source = (uint16_t)v[K_SCRIPT_SOURCE];
    l->script_line_ends = (uint16_t)v[K_SCRIPT_LINE_ENDS];
    l->fixed_length = (uint16_t)v[K_FIXED_LENGTH];
    l->fixed_data = (uint16_t)v[K_FIXED_DATA];
    l->str_length = (uint16_t)v[K_STR_LENGTH];
    l->seq1_chars = (uint16_t)v[K_SEQ1_CHARS];
    l->seq2_chars = (uint16_t)v[K_SEQ2_CHARS];
    l->cons_first = (uint16_t)v[K_CONS_FIRST];
    l->cons_second = (uint16_t)v[K_CONS_SECOND];
    l->thin_actual = (uint16_t)v[K_THIN_ACTUAL];
    l->sliced_parent = (uint16_t)v[K_SLICED_PARENT];
    l->sliced_offset = (uint16_t)v[K_SLICED_OFFSET];
    l->scope_ncontextlocals = (uint16_t)v[K_SCOPE_NCONTEXTLOCALS];
    l->scope_first_vars = (uint16_t)v[K_SCOPE_FIRST_VARS];
    l->type_fn_first = (uint16_t)v[K_TYPE_FN];
    l->type_fn_last = (uint16_t)v[K_TYPE_FN];
    if (f->next_type > v[K_TYPE_FN] + 1)
        l->type_fn_last = (uint16_t)(f->next_type - 1 < v[K_TYPE_FN] + MAX_FN_TYPES
                                         ? f->next_type - 1
                                         : v[K_TYPE_FN] + MAX_FN_TYPES);
    l->type_sfi = (uint16_t)v[K_TYPE_SFI];
    l->type_scope_info = (uint16_t)v[K_TYPE_SCOPE_INFO];
    l->type_script = (uint16_t)v[K_TYPE_SCRIPT];
    l->type_fixed_array = (uint16_t)v[K_TYPE_FIXED_ARRAY];
    l->first_nonstring = (uint16_t)v[K_FIRST_NONSTRING];
    l->str_repr_mask = (uint16_t)v[K_STR_REPR_MASK];
    l->str_enc_mask = (uint16_t)v[K_STR_ENC_MASK];
    l->seq_tag = (uint16_t)v[K_SEQ_TAG];
    l->cons_tag = (uint16_t)v[K_CONS_TAG];
    l->sliced_tag = (uint16_t)v[K_SLICED_TAG];
    l->thin_tag = (uint16_t)v[K_THIN_TAG];
    l->one_byte_tag = (uint16_t)v[K_ONE_BYTE_TAG];
    if (l->type_sfi >= l->type_fn_first && l->type_sfi <= l->type_fn_last) {
        snprintf(why, whylen, "SharedFunctionInfo's type %u among JSFunction's", l->type_sfi);
        return -1;
    }
    return 0;
}

int v8_detect__elf(int fd, struct v8_binary *out)
{
    struct found f = {0};
    Elf *e = NULL;
    Elf_Scn *scn = NULL, *dynsym = NULL;
    GElf_Shdr sh, dsh = {0};
    int ret = -1;

    memset(out, 0, sizeof(*out));
    elf_version(EV_CURRENT);
    e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF)
        goto out;
    ret = 0;
    /* The dynamic symbols only: what node and libnode.so export. */
    while ((scn = elf_nextscn(e, scn)) != NULL) {
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNSYM) {
            scan_syms(e, fd, scn, &sh, &f);
            dynsym = scn;
            dsh = sh;
        }
    }
    if (!f.have[K_FP_FUNCTION] && !f.have[K_TYPE_FN])
        goto out; /* not V8, or V8 without its postmortem metadata */
    ret = 1;
    out->nconsts = f.nconsts;
    if (f.have[K_TYPE_FN] && dynsym)
        f.next_type = next_type_after(e, fd, dynsym, &dsh, f.v[K_TYPE_FN]);
    if (check(&f, &out->l, out->why, sizeof(out->why)))
        goto out;
    out->usable = true;
out:
    if (e)
        elf_end(e);
    return ret;
}

void v8_detect__to_bpf(const struct v8_layout *l, struct cx_v8_proc *out)
{
    memset(out, 0, sizeof(*out));
    out->fp_function = l->fp_function;
    out->fp_context = l->fp_context;
    out->map_type = l->map_type;
    out->fn_shared = l->fn_shared;
    out->sfi_name = l->sfi_name;
    out->sfi_script = l->sfi_script;
    out->type_fn_first = l->type_fn_first;
    out->type_fn_last = l->type_fn_last;
    out->type_sfi = l->type_sfi;
}

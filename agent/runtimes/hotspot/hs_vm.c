#include "hs_vm.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* Entries read from each table at most: JDK 17 has about 2,700 structs. */
#define HS_MAX_ENTRIES 20000
#define HS_MAX_STRIDE 128
#define HS_NAME_MAX 80

static const char *const sym_names[HS_SYM__N] = {
    [HS_STRUCTS] = "gHotSpotVMStructs",
    [HS_STRUCT_TYPE_NAME] = "gHotSpotVMStructEntryTypeNameOffset",
    [HS_STRUCT_FIELD_NAME] = "gHotSpotVMStructEntryFieldNameOffset",
    [HS_STRUCT_TYPE_STRING] = "gHotSpotVMStructEntryTypeStringOffset",
    [HS_STRUCT_IS_STATIC] = "gHotSpotVMStructEntryIsStaticOffset",
    [HS_STRUCT_OFFSET] = "gHotSpotVMStructEntryOffsetOffset",
    [HS_STRUCT_ADDRESS] = "gHotSpotVMStructEntryAddressOffset",
    [HS_STRUCT_STRIDE] = "gHotSpotVMStructEntryArrayStride",
    [HS_TYPES] = "gHotSpotVMTypes",
    [HS_TYPE_TYPE_NAME] = "gHotSpotVMTypeEntryTypeNameOffset",
    [HS_TYPE_SIZE] = "gHotSpotVMTypeEntrySizeOffset",
    [HS_TYPE_STRIDE] = "gHotSpotVMTypeEntryArrayStride",
    [HS_INTS] = "gHotSpotVMIntConstants",
    [HS_INT_NAME] = "gHotSpotVMIntConstantEntryNameOffset",
    [HS_INT_VALUE] = "gHotSpotVMIntConstantEntryValueOffset",
    [HS_INT_STRIDE] = "gHotSpotVMIntConstantEntryArrayStride",
};

int hs_vm__syms(int fd, struct hs_syms *out)
{
    Elf *e;
    Elf_Scn *scn = NULL;
    unsigned found = 0;
    int ret = -1;

    memset(out, 0, sizeof(*out));
    if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE)
        return -1;
    e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e)
        return -1;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        Elf_Data *d;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0 ||
            !(d = elf_getdata(scn, NULL)))
            continue;
        size_t n = d->d_size / sh.sh_entsize;
        for (size_t i = 0; i < n; i++) {
            GElf_Sym s;
            const char *name;
            if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || s.st_value == 0)
                continue;
            name = elf_strptr(e, sh.sh_link, s.st_name);
            if (!name || strncmp(name, "gHotSpotVM", 10) != 0)
                continue;
            for (int k = 0; k < HS_SYM__N; k++) {
                if (!out->addr[k] && strcmp(name, sym_names[k]) == 0) {
                    out->addr[k] = s.st_value;
                    found++;
                }
            }
        }
    }
    ret = found == HS_SYM__N ? 1 : 0;
    elf_end(e);
    return ret;
}

/* --- reading the tables --- */

enum want_kind { W_OFF, W_STATIC };

/* W_OPT: needed by one layout only (read_tables checks the set). */
struct want {
    const char *type, *field;
    enum want_kind kind;
    /* The field's name in another release, or NULL (alt_have: found so) */
    const char *alt_type, *alt;
    bool opt;
    uint64_t val;
    bool have, alt_have;
    char ctype[16]; /* its C type ("int", "int16_t"), "" when not read */
};

/* The fields read, by index. */
enum {
    F_HEAPS,
    F_LOW_BOUND,
    F_HIGH_BOUND,
    F_GA_LEN,
    F_GA_DATA,
    F_HEAP_MEMORY,
    F_HEAP_SEGMAP,
    F_HEAP_LOG2,
    F_VS_LOW_BOUNDARY,
    F_VS_HIGH_BOUNDARY,
    F_VS_LOW,
    F_HB_HEADER,
    F_HB_USED,
    F_INTERP_CODE,
    F_SQ_BUFFER,
    F_SQ_LIMIT,
    F_BLOB_NAME,
    F_BLOB_FRAME_SIZE,
    F_BLOB_COMPLETE,
    F_BLOB_CODE_BEGIN,
    F_CM_METHOD,
    F_METHOD_CONST,
    F_CONST_CONSTANTS,
    F_CONST_NAME,
    F_CONST_SIG,
    F_CP_HOLDER,
    F_CP_LENGTH,
    F_CP_SOURCE,
    F_KLASS_NAME,
    F_SYM_LENGTH,
    F_SYM_BODY,
    F_RELEASE,
    F_NM_METADATA,
    F_NM_PCS,
    F_NM_DEPS,
    F_CM_SCOPES,
    F_PC_PC,
    F_PC_SCOPE,
    F_CONST_FLAGS,
    F_CONST_CODE_SIZE,
    F_BLOB_CODE_OFFSET,
    F_BLOB_MUTABLE,
    F_BLOB_RELOC_SIZE,
    F_BLOB_MUTABLE_SIZE,
    F_NM_IMMUTABLE,
    F_NM_SCOPES_DATA,
    F_NM_COMPILE_ID,
    F__N,
};

static void wants_init(struct want *w)
{
    static const struct want init[F__N] = {
        [F_HEAPS] = {"CodeCache", "_heaps", W_STATIC},
        [F_LOW_BOUND] = {"CodeCache", "_low_bound", W_STATIC},
        [F_HIGH_BOUND] = {"CodeCache", "_high_bound", W_STATIC},
        [F_GA_LEN] = {"GrowableArrayBase", "_len", W_OFF},
        [F_GA_DATA] = {"GrowableArray<int>", "_data", W_OFF},
        [F_HEAP_MEMORY] = {"CodeHeap", "_memory", W_OFF},
        [F_HEAP_SEGMAP] = {"CodeHeap", "_segmap", W_OFF},
        [F_HEAP_LOG2] = {"CodeHeap", "_log2_segment_size", W_OFF},
        [F_VS_LOW_BOUNDARY] = {"VirtualSpace", "_low_boundary", W_OFF},
        [F_VS_HIGH_BOUNDARY] = {"VirtualSpace", "_high_boundary", W_OFF},
        [F_VS_LOW] = {"VirtualSpace", "_low", W_OFF},
        [F_HB_HEADER] = {"HeapBlock", "_header", W_OFF},
        [F_HB_USED] = {"HeapBlock::Header", "_used", W_OFF},
        [F_INTERP_CODE] = {"AbstractInterpreter", "_code", W_STATIC},
        [F_SQ_BUFFER] = {"StubQueue", "_stub_buffer", W_OFF},
        [F_SQ_LIMIT] = {"StubQueue", "_buffer_limit", W_OFF},
        [F_BLOB_NAME] = {"CodeBlob", "_name", W_OFF},
        [F_BLOB_FRAME_SIZE] = {"CodeBlob", "_frame_size", W_OFF},
        [F_BLOB_COMPLETE] = {"CodeBlob", "_frame_complete_offset", W_OFF},
        [F_BLOB_CODE_BEGIN] = {"CodeBlob", "_code_begin", W_OFF, .opt = true},
        [F_CM_METHOD] = {"CompiledMethod", "_method", W_OFF, "nmethod", "_method"},
        [F_METHOD_CONST] = {"Method", "_constMethod", W_OFF},
        [F_CONST_CONSTANTS] = {"ConstMethod", "_constants", W_OFF},
        [F_CONST_NAME] = {"ConstMethod", "_name_index", W_OFF},
        [F_CONST_SIG] = {"ConstMethod", "_signature_index", W_OFF},
        [F_CP_HOLDER] = {"ConstantPool", "_pool_holder", W_OFF},
        [F_CP_LENGTH] = {"ConstantPool", "_length", W_OFF},
        [F_CP_SOURCE] = {"ConstantPool", "_source_file_name_index", W_OFF},
        [F_KLASS_NAME] = {"Klass", "_name", W_OFF},
        [F_SYM_LENGTH] = {"Symbol", "_length", W_OFF},
        [F_SYM_BODY] = {"Symbol", "_body", W_OFF},
        [F_RELEASE] = {"Abstract_VM_Version", "_s_vm_release", W_STATIC},
        [F_NM_METADATA] = {"nmethod", "_metadata_offset", W_OFF, .opt = true},
        [F_NM_PCS] = {"nmethod", "_scopes_pcs_offset", W_OFF},
        [F_NM_DEPS] = {"nmethod", "_dependencies_offset", W_OFF, .opt = true},
        [F_CM_SCOPES] = {"CompiledMethod", "_scopes_data_begin", W_OFF, .opt = true},
        /* JDK 25 on */
        [F_BLOB_CODE_OFFSET] = {"CodeBlob", "_code_offset", W_OFF, .opt = true},
        [F_BLOB_MUTABLE] = {"CodeBlob", "_mutable_data", W_OFF, .opt = true},
        [F_BLOB_RELOC_SIZE] = {"CodeBlob", "_relocation_size", W_OFF, .opt = true},
        [F_BLOB_MUTABLE_SIZE] = {"CodeBlob", "_mutable_data_size", W_OFF, .opt = true},
        [F_NM_IMMUTABLE] = {"nmethod", "_immutable_data", W_OFF, .opt = true},
        [F_NM_SCOPES_DATA] = {"nmethod", "_scopes_data_offset", W_OFF, .opt = true},
        [F_NM_COMPILE_ID] = {"nmethod", "_compile_id", W_OFF},
        [F_PC_PC] = {"PcDesc", "_pc_offset", W_OFF},
        [F_PC_SCOPE] = {"PcDesc", "_scope_decode_offset", W_OFF},
        /* a u2 until JDK 20, a u4 in ConstMethodFlags from 21 */
        [F_CONST_FLAGS] = {"ConstMethod", "_flags", W_OFF, "ConstMethod", "_flags._flags"},
        [F_CONST_CODE_SIZE] = {"ConstMethod", "_code_size", W_OFF},
    };
    memcpy(w, init, sizeof(init));
}

static int rd_u64(const struct hs_mem *m, uint64_t addr, uint64_t *v)
{
    return m->read(m->ctx, addr, v, sizeof(*v));
}

/* A NUL-terminated string of at most len - 1 bytes at addr; "" when it
 * cannot be read or is longer. */
static void rd_str(const struct hs_mem *m, uint64_t addr, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!addr)
        return;
    /* Byte runs up to the end of the buffer may cross into an unmapped
     * page: read in steps that stop at page ends. */
    size_t got = 0;
    while (got < len - 1) {
        size_t n = 4096 - ((addr + got) & 4095);
        if (n > len - 1 - got)
            n = len - 1 - got;
        if (m->read(m->ctx, addr + got, buf + got, n))
            break;
        got += n;
        buf[got] = '\0';
        if (memchr(buf, '\0', got))
            return;
    }
    if (!memchr(buf, '\0', got + 1) || got == len - 1)
        buf[0] = '\0';
}

/* A table's layout symbol, read from the process: its value (a uint64_t). */
static int sym_val(const struct hs_mem *m, const struct hs_syms *s, uint64_t bias, int k,
                   uint64_t *v)
{
    return rd_u64(m, s->addr[k] + bias, v);
}

static int read_structs(const struct hs_mem *m, const struct hs_syms *s, uint64_t bias,
                        struct want *w, char *why, size_t whylen)
{
    uint64_t arr, o_type, o_field, o_ctype, o_static, o_off, o_addr, stride;
    uint8_t e[HS_MAX_STRIDE];
    char tname[HS_NAME_MAX], fname[HS_NAME_MAX];
    uint64_t last_tp = 0;
    bool last_match = false;

    if (sym_val(m, s, bias, HS_STRUCTS, &arr) ||
        sym_val(m, s, bias, HS_STRUCT_TYPE_NAME, &o_type) ||
        sym_val(m, s, bias, HS_STRUCT_FIELD_NAME, &o_field) ||
        sym_val(m, s, bias, HS_STRUCT_TYPE_STRING, &o_ctype) ||
        sym_val(m, s, bias, HS_STRUCT_IS_STATIC, &o_static) ||
        sym_val(m, s, bias, HS_STRUCT_OFFSET, &o_off) ||
        sym_val(m, s, bias, HS_STRUCT_ADDRESS, &o_addr) ||
        sym_val(m, s, bias, HS_STRUCT_STRIDE, &stride)) {
        snprintf(why, whylen, "gHotSpotVMStructs unreadable");
        return -1;
    }
    if (!arr || stride == 0)
        return 0; /* not initialised yet */
    if (stride > HS_MAX_STRIDE || o_type + 8 > stride || o_field + 8 > stride ||
        o_ctype + 8 > stride || o_static + 4 > stride || o_off + 8 > stride ||
        o_addr + 8 > stride) {
        snprintf(why, whylen, "VMStructs entries of a layout not known (stride %llu)",
                 (unsigned long long)stride);
        return -1;
    }
    for (unsigned i = 0; i < HS_MAX_ENTRIES; i++) {
        uint64_t tp, fp, cp, off, addr;
        uint32_t st;
        if (m->read(m->ctx, arr + i * stride, e, stride)) {
            snprintf(why, whylen, "VMStructs entry %u unreadable", i);
            return -1;
        }
        memcpy(&tp, e + o_type, 8);
        if (!tp)
            return 1; /* the end */
        memcpy(&fp, e + o_field, 8);
        memcpy(&st, e + o_static, 4);
        memcpy(&off, e + o_off, 8);
        memcpy(&addr, e + o_addr, 8);
        if (tp != last_tp) {
            last_tp = tp;
            rd_str(m, tp, tname, sizeof(tname));
            last_match = false;
            for (int k = 0; k < F__N; k++)
                last_match |= strcmp(tname, w[k].type) == 0 ||
                              (w[k].alt_type && strcmp(tname, w[k].alt_type) == 0);
        }
        if (!last_match)
            continue;
        rd_str(m, fp, fname, sizeof(fname));
        for (int k = 0; k < F__N; k++) {
            bool alt =
                w[k].alt && strcmp(tname, w[k].alt_type) == 0 && strcmp(fname, w[k].alt) == 0;
            if (w[k].have ||
                ((strcmp(tname, w[k].type) != 0 || strcmp(fname, w[k].field) != 0) && !alt))
                continue;
            if ((w[k].kind == W_STATIC) != (st != 0))
                continue;
            w[k].val = st ? addr : off;
            w[k].have = true;
            w[k].alt_have = alt;
            memcpy(&cp, e + o_ctype, 8);
            rd_str(m, cp, w[k].ctype, sizeof(w[k].ctype));
        }
    }
    snprintf(why, whylen, "VMStructs without an end in %u entries", HS_MAX_ENTRIES);
    return -1;
}

/* The size of type `name` from gHotSpotVMTypes, or 0. */
static uint64_t type_size(const struct hs_mem *m, const struct hs_syms *s, uint64_t bias,
                          const char *name)
{
    uint64_t arr, o_name, o_size, stride, tp, size;
    char tname[HS_NAME_MAX];

    if (sym_val(m, s, bias, HS_TYPES, &arr) || sym_val(m, s, bias, HS_TYPE_TYPE_NAME, &o_name) ||
        sym_val(m, s, bias, HS_TYPE_SIZE, &o_size) ||
        sym_val(m, s, bias, HS_TYPE_STRIDE, &stride) || !arr || stride == 0 ||
        stride > HS_MAX_STRIDE)
        return 0;
    for (unsigned i = 0; i < HS_MAX_ENTRIES; i++) {
        if (rd_u64(m, arr + i * stride + o_name, &tp) || !tp)
            return 0;
        rd_str(m, tp, tname, sizeof(tname));
        if (strcmp(tname, name) == 0)
            return rd_u64(m, arr + i * stride + o_size, &size) ? 0 : size;
    }
    return 0;
}

/* The value of int constant `name` from gHotSpotVMIntConstants; false when
 * it is not there. */
static bool int_const(const struct hs_mem *m, const struct hs_syms *s, uint64_t bias,
                      const char *name, int32_t *v)
{
    uint64_t arr, o_name, o_val, stride, np;
    char n[HS_NAME_MAX];

    if (sym_val(m, s, bias, HS_INTS, &arr) || sym_val(m, s, bias, HS_INT_NAME, &o_name) ||
        sym_val(m, s, bias, HS_INT_VALUE, &o_val) || sym_val(m, s, bias, HS_INT_STRIDE, &stride) ||
        !arr || stride == 0 || stride > HS_MAX_STRIDE)
        return false;
    for (unsigned i = 0; i < HS_MAX_ENTRIES; i++) {
        if (rd_u64(m, arr + i * stride + o_name, &np) || !np)
            return false;
        rd_str(m, np, n, sizeof(n));
        if (strcmp(n, name) == 0)
            return m->read(m->ctx, arr + i * stride + o_val, v, sizeof(*v)) == 0;
    }
    return false;
}

/* An offset that the BPF side reads from a heap block: within its window. */
static bool block_off(uint64_t hdr, uint64_t off, unsigned size, __u16 *out)
{
    if (hdr + off > CX_HS_BLOCK_READ - 8 || (hdr + off) % size)
        return false;
    *out = (__u16)(hdr + off);
    return true;
}

/* The code heaps, from CodeCache::_heaps. Returns 1, 0 when none yet, -1. */
static int read_heaps(const struct hs_mem *m, struct hs_vm *out, char *why, size_t whylen)
{
    const uint64_t *f = out->field;
    uint64_t ga, data, heap, v[3];
    int32_t len, log2;

    if (rd_u64(m, f[F_HEAPS], &ga) || !ga)
        return 0;
    if (m->read(m->ctx, ga + f[F_GA_LEN], &len, 4) || rd_u64(m, ga + f[F_GA_DATA], &data))
        return 0;
    if (len <= 0 || !data)
        return 0;
    if (len > CX_HS_MAX_HEAPS) {
        snprintf(why, whylen, "%d code heaps, more than the %d the walk takes", len,
                 CX_HS_MAX_HEAPS);
        return -1;
    }
    for (int i = 0; i < len; i++) {
        struct cx_hs_heap *h = &out->bpf.heap[i];
        if (rd_u64(m, data + 8 * (uint64_t)i, &heap) || !heap ||
            rd_u64(m, heap + f[F_HEAP_MEMORY] + f[F_VS_LOW], &v[0]) ||
            rd_u64(m, heap + f[F_HEAP_MEMORY] + f[F_VS_HIGH_BOUNDARY], &v[1]) ||
            rd_u64(m, heap + f[F_HEAP_SEGMAP] + f[F_VS_LOW], &v[2]) ||
            m->read(m->ctx, heap + f[F_HEAP_LOG2], &log2, 4))
            return 0;
        if (!v[0] || v[1] <= v[0] || !v[2] || log2 < 4 || log2 > 16) {
            snprintf(why, whylen, "code heap %d of a shape not known (segments of 2^%d bytes)", i,
                     log2);
            return -1;
        }
        h->start = v[0];
        h->end = v[1];
        h->segmap = v[2];
        h->log2_seg = (__u32)log2;
    }
    out->bpf.n_heaps = (__u32)len;
    return 1;
}

_Static_assert(F__N <= HS_VM_FIELDS, "hs_vm.field too small");

/* The bytes of an integer field by its C type: 4 or 2, 0 for another
 * (a table without types, as a test's: 4). */
static int int_width(const struct want *w)
{
    static const char *const four[] = {"", "int", "int32_t", "jint", "uint32_t", "u4"};
    static const char *const two[] = {"int16_t", "short", "jshort", "uint16_t", "u2"};

    for (size_t i = 0; i < sizeof(four) / sizeof(four[0]); i++) {
        if (strcmp(w->ctype, four[i]) == 0)
            return 4;
    }
    for (size_t i = 0; i < sizeof(two) / sizeof(two[0]); i++) {
        if (strcmp(w->ctype, two[i]) == 0)
            return 2;
    }
    return 0;
}

/* The tables: what the JVM's build is, read once. Returns 1, 0 when they
 * are not there yet, -1 when they cannot be used. */
static int read_tables(const struct hs_mem *m, const struct hs_syms *s, uint64_t bias,
                       struct hs_vm *out, char *why, size_t whylen)
{
    struct want w[F__N];
    uint64_t hdr, cp_size, pc_size, cm_size, rel;
    int32_t sender_sp, last_sp, lnt, entry_bci;
    int r;

    memset(out, 0, sizeof(*out));
    wants_init(w);
    r = read_structs(m, s, bias, w, why, whylen);
    if (r <= 0)
        return r;
    /* JDK 25's CodeBlob: _code_offset for _code_begin, an nmethod's data
     * outside it. Which fields the optional ones are needed with: */
    out->data_outside = w[F_BLOB_CODE_OFFSET].have && !w[F_BLOB_CODE_BEGIN].have;
    static const int old_set[] = {F_BLOB_CODE_BEGIN, F_NM_METADATA, F_NM_DEPS, F_CM_SCOPES};
    static const int new_set[] = {F_BLOB_CODE_OFFSET,  F_BLOB_MUTABLE, F_BLOB_RELOC_SIZE,
                                  F_BLOB_MUTABLE_SIZE, F_NM_IMMUTABLE, F_NM_SCOPES_DATA};
    const int *set = out->data_outside ? new_set : old_set;
    size_t nset = out->data_outside ? sizeof(new_set) / sizeof(new_set[0])
                                    : sizeof(old_set) / sizeof(old_set[0]);
    for (int k = 0; k < F__N; k++) {
        bool need = !w[k].opt;
        for (size_t i = 0; i < nset; i++)
            need |= set[i] == k;
        if (need && !w[k].have) {
            snprintf(why, whylen, "VMStructs without %s::%s", w[k].type, w[k].field);
            return -1;
        }
    }
    if (rd_u64(m, w[F_RELEASE].val, &rel))
        return 0;
    rd_str(m, rel, out->release, sizeof(out->release));
    out->major = (unsigned)strtoul(out->release, NULL, 10);
    /* The frame layouts the BPF walk assumes (hotspot.h) are those of JDK
     * 11 to 21 and 25 to 27 on x86_64, each with its CodeBlob: 22 to 24
     * had others, untested; 28's is not known yet. */
    if (out->major < 11 || (out->major > 21 && out->major < 25) || out->major > 27 ||
        out->data_outside != (out->major >= 25)) {
        snprintf(why, whylen, "HotSpot %s: a release the walk does not know (11 to 21, 25 to 27)",
                 out->release[0] ? out->release : "of no version");
        return -1;
    }
    /* The int fields read: 4 bytes, but for _frame_complete_offset (an
     * int16_t from JDK 25). */
    int complete_w = int_width(&w[F_BLOB_COMPLETE]);
    for (int k = 0; k < F__N; k++) {
        static const int ints[] = {F_BLOB_FRAME_SIZE,   F_BLOB_CODE_OFFSET, F_BLOB_RELOC_SIZE,
                                   F_BLOB_MUTABLE_SIZE, F_NM_SCOPES_DATA,   F_NM_PCS};
        for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
            if (ints[i] == k && w[k].have && int_width(&w[k]) != 4)
                complete_w = 0;
        }
    }
    if (complete_w == 0) {
        snprintf(why, whylen, "CodeBlob or nmethod fields of a type not known");
        return -1;
    }
    if (!int_const(m, s, bias, "frame::interpreter_frame_sender_sp_offset", &sender_sp) ||
        !int_const(m, s, bias, "frame::interpreter_frame_last_sp_offset", &last_sp) ||
        sender_sp != -1 || last_sp != -2) {
        snprintf(why, whylen, "an interpreter frame layout not known");
        return -1;
    }
    hdr = type_size(m, s, bias, "HeapBlock");
    cp_size = type_size(m, s, bias, "ConstantPool");
    pc_size = type_size(m, s, bias, "PcDesc");
    cm_size = type_size(m, s, bias, "ConstMethod");
    if (hdr == 0 || hdr > 64 || cp_size == 0 || cp_size > 4096 || pc_size < 8 || pc_size > 64 ||
        cm_size == 0 || cm_size > 4096) {
        snprintf(why, whylen, "no size for HeapBlock, ConstantPool, PcDesc or ConstMethod");
        return -1;
    }
    /* The flag moved to ConstMethodFlags with the field (JDK 21). */
    if (!int_const(m, s, bias,
                   w[F_CONST_FLAGS].alt_have ? "ConstMethodFlags::_misc_has_linenumber_table"
                                             : "ConstMethod::_has_linenumber_table",
                   &lnt) ||
        !int_const(m, s, bias, "InvocationEntryBci", &entry_bci) || lnt <= 0 || entry_bci != -1 ||
        (!w[F_CONST_FLAGS].alt_have && lnt > 0xffff)) {
        snprintf(why, whylen, "no has_linenumber_table flag or InvocationEntryBci");
        return -1;
    }
    out->has_lines_flag = (uint32_t)lnt;
    out->pc_size = (uint32_t)pc_size;
    out->const_size = (uint32_t)cm_size;
    out->nm_metadata = (uint32_t)w[F_NM_METADATA].val;
    out->nm_pcs = (uint32_t)w[F_NM_PCS].val;
    out->nm_deps = (uint32_t)w[F_NM_DEPS].val;
    out->cm_scopes = (uint32_t)w[F_CM_SCOPES].val;
    out->cm_method = (uint32_t)w[F_CM_METHOD].val;
    out->blob_mutable = (uint32_t)w[F_BLOB_MUTABLE].val;
    out->blob_reloc_size = (uint32_t)w[F_BLOB_RELOC_SIZE].val;
    out->blob_mutable_size = (uint32_t)w[F_BLOB_MUTABLE_SIZE].val;
    out->nm_immutable = (uint32_t)w[F_NM_IMMUTABLE].val;
    out->nm_scopes_data = (uint32_t)w[F_NM_SCOPES_DATA].val;
    out->nm_compile_id = (uint32_t)w[F_NM_COMPILE_ID].val;
    out->bpf.flags = (__u16)((out->data_outside ? CX_HS_CODE_OFFSET : 0) |
                             (complete_w == 2 ? CX_HS_COMPLETE16 : 0));
    out->pc_pc = (uint32_t)w[F_PC_PC].val;
    out->pc_scope = (uint32_t)w[F_PC_SCOPE].val;
    out->cm_flags = (uint32_t)w[F_CONST_FLAGS].val;
    out->cm_flags_size = w[F_CONST_FLAGS].alt_have ? 4 : 2;
    out->cm_code_size = (uint32_t)w[F_CONST_CODE_SIZE].val;
    out->bpf.blob = (__u16)hdr;
    if (!block_off(0, w[F_HB_HEADER].val + w[F_HB_USED].val, 1, &out->bpf.used) ||
        !block_off(hdr, w[F_BLOB_FRAME_SIZE].val, 4, &out->bpf.frame_size) ||
        !block_off(hdr, w[F_BLOB_COMPLETE].val, (unsigned)complete_w, &out->bpf.frame_complete) ||
        !(out->data_outside ? block_off(hdr, w[F_BLOB_CODE_OFFSET].val, 4, &out->bpf.code_begin)
                            : block_off(hdr, w[F_BLOB_CODE_BEGIN].val, 8, &out->bpf.code_begin)) ||
        !block_off(hdr, w[F_BLOB_NAME].val, 8, &out->bpf.name) ||
        !block_off(hdr, w[F_CM_METHOD].val, 8, &out->bpf.method)) {
        snprintf(why, whylen, "CodeBlob fields beyond the %d bytes the walk reads",
                 CX_HS_BLOCK_READ);
        return -1;
    }
    out->method_const = (uint32_t)w[F_METHOD_CONST].val;
    out->cm_constants = (uint32_t)w[F_CONST_CONSTANTS].val;
    out->cm_name = (uint32_t)w[F_CONST_NAME].val;
    out->cm_sig = (uint32_t)w[F_CONST_SIG].val;
    out->cp_holder = (uint32_t)w[F_CP_HOLDER].val;
    out->cp_length = (uint32_t)w[F_CP_LENGTH].val;
    out->cp_source = (uint32_t)w[F_CP_SOURCE].val;
    out->cp_size = (uint32_t)cp_size;
    out->klass_name = (uint32_t)w[F_KLASS_NAME].val;
    out->sym_length = (uint32_t)w[F_SYM_LENGTH].val;
    out->sym_body = (uint32_t)w[F_SYM_BODY].val;
    out->blob_name = (uint32_t)w[F_BLOB_NAME].val;
    for (int k = 0; k < F__N; k++)
        out->field[k] = w[k].val;
    return 1;
}

/* What the JVM makes at start (its code cache, its interpreter): until
 * then, 0 (try again later). */
static int read_runtime(const struct hs_mem *m, struct hs_vm *out, char *why, size_t whylen)
{
    const uint64_t *f = out->field;
    uint64_t lo, hi, sq, buf;
    int32_t limit;
    int r;

    if (rd_u64(m, f[F_LOW_BOUND], &lo) || rd_u64(m, f[F_HIGH_BOUND], &hi) || !lo || hi <= lo)
        return 0;
    out->bpf.cc_start = lo;
    out->bpf.cc_end = hi;
    r = read_heaps(m, out, why, whylen);
    if (r <= 0)
        return r;
    if (rd_u64(m, f[F_INTERP_CODE], &sq) || !sq || rd_u64(m, sq + f[F_SQ_BUFFER], &buf) ||
        m->read(m->ctx, sq + f[F_SQ_LIMIT], &limit, 4) || !buf || limit <= 0)
        return 0;
    out->bpf.interp_start = buf;
    out->bpf.interp_end = buf + (uint64_t)limit;
    return 1;
}

int hs_vm__read(const struct hs_mem *m, const struct hs_syms *s, uint64_t bias, struct hs_vm *out,
                char *why, size_t whylen)
{
    if (!out->tables) {
        int r = read_tables(m, s, bias, out, why, whylen);
        if (r <= 0)
            return r;
        out->tables = true;
    }
    return read_runtime(m, out, why, whylen);
}

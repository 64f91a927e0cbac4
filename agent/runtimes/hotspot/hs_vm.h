/* A HotSpot JVM's description of itself: the VMStructs tables libjvm.so
 * exports (gHotSpotVMStructs, gHotSpotVMTypes, gHotSpotVMIntConstants and
 * the symbols giving their entries' layout), which the serviceability
 * agent reads too. From them, read in the process's memory: where its code
 * cache, code heaps and interpreter are, and the offsets of the fields
 * that walk and name Java frames, for that build whatever its version.
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_HOTSPOT_HS_VM_H
#define CODEXRAY_AGENT_RUNTIMES_HOTSPOT_HS_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "../../bpf/hotspot.h"

/* How memory is read: process_vm_readv on a pid, or a test's image.
 * Returns 0 when all len bytes were read, else a negative errno. */
struct hs_mem {
    int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
    void *ctx;
};

/* The reader of a live process: proc_mem__read (proc_mem.h). */

/* The exported symbols read, by index. */
enum hs_sym {
    HS_STRUCTS,
    HS_STRUCT_TYPE_NAME,
    HS_STRUCT_FIELD_NAME,
    HS_STRUCT_TYPE_STRING,
    HS_STRUCT_IS_STATIC,
    HS_STRUCT_OFFSET,
    HS_STRUCT_ADDRESS,
    HS_STRUCT_STRIDE,
    HS_TYPES,
    HS_TYPE_TYPE_NAME,
    HS_TYPE_SIZE,
    HS_TYPE_STRIDE,
    HS_INTS,
    HS_INT_NAME,
    HS_INT_VALUE,
    HS_INT_STRIDE,
    HS_SYM__N,
};

/* libjvm.so's symbols of enum hs_sym, as ELF addresses. */
struct hs_syms {
    uint64_t addr[HS_SYM__N];
};

/* Reads the symbols from libjvm.so's .dynsym (fd: the file). Returns 1 when
 * every one is there, 0 when the file is no libjvm (some missing), -1 on a
 * read error. */
int hs_vm__syms(int fd, struct hs_syms *out);

#define HS_VM_FIELDS 48

/* What a JVM is, for the walk and for naming. */
struct hs_vm {
    bool tables;                  /* the tables were read (field, the offsets below) */
    uint64_t field[HS_VM_FIELDS]; /* the VMStructs values read, by hs_vm.c's index */
    char release[64];             /* Abstract_VM_Version::_s_vm_release, "17.0.15+6-..." */
    unsigned major;
    struct cx_hs_proc bpf; /* the hs_procs entry */
    /* Offsets for naming (bytes). */
    uint32_t method_const; /* Method::_constMethod */
    uint32_t cm_constants, cm_name,
        cm_sig; /* ConstMethod::_constants, _name_index, _signature_index */
    uint32_t cp_holder, cp_length,
        cp_source;       /* ConstantPool::_pool_holder, _length, _source_file_name_index */
    uint32_t cp_size;    /* sizeof(ConstantPool): its slots follow */
    uint32_t klass_name; /* Klass::_name */
    uint32_t sym_length, sym_body; /* Symbol::_length, _body */
    uint32_t blob_name;            /* CodeBlob::_name */
    /* JDK 25 and later: a CodeBlob holds offsets, not pointers, and an
     * nmethod's metadata and debug information are outside the code cache
     * (mutable and immutable data); earlier, CompiledMethod's pointers and
     * nmethod's offsets from itself. */
    bool data_outside;
    uint32_t blob_mutable, blob_reloc_size; /* CodeBlob::_mutable_data, _relocation_size */
    uint32_t blob_mutable_size;             /* CodeBlob::_mutable_data_size */
    uint32_t nm_immutable, nm_scopes_data;  /* nmethod::_immutable_data, _scopes_data_offset */
    /* Compiled frames' inlined methods (hs_name.c): the nmethod's PcDescs
     * and scope descriptors. */
    uint32_t cm_method; /* CompiledMethod::_method (JDK 25: nmethod::_method) */
    uint32_t cm_scopes; /* CompiledMethod::_scopes_data_begin */
    /* nmethod::_metadata_offset, _scopes_pcs_offset, _dependencies_offset */
    uint32_t nm_metadata, nm_pcs, nm_deps;
    uint32_t nm_compile_id;            /* nmethod::_compile_id */
    uint32_t pc_size, pc_pc, pc_scope; /* sizeof(PcDesc), _pc_offset, _scope_decode_offset */
    /* Line numbers: the compressed table after the bytecodes. */
    uint32_t const_size;             /* sizeof(ConstMethod): the bytecodes follow */
    uint32_t cm_flags, cm_code_size; /* ConstMethod::_flags, _code_size */
    uint32_t cm_flags_size;          /* _flags' bytes: 2, or 4 from JDK 21 */
    uint32_t has_lines_flag;         /* ConstMethod::_has_linenumber_table */
};

/* Reads the JVM's description through m, its libjvm's symbols at
 * s->addr + bias, into out (zeroed before the first call). Returns 1 when
 * it is whole and usable, 0 when the JVM has not made its code cache yet
 * (call again later: the tables already read are not read again), -1 when
 * it cannot be used (why says so: a field missing, a layout the walk does
 * not know). */
int hs_vm__read(const struct hs_mem *m, const struct hs_syms *s, uint64_t bias, struct hs_vm *out,
                char *why, size_t whylen);

#endif

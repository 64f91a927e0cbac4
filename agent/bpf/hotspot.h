/* What the BPF side needs to walk a HotSpot JVM's Java frames without frame
 * pointers, shared by sampler.bpf.c and user space
 * (agent/runtimes/hotspot/): plain fixed-size types and #defines only.
 *
 * User space reads the JVM's own description of itself (the VMStructs
 * tables libjvm.so exports) and puts, under the process's tgid in the
 * "hs_procs" map, where its code cache and interpreter are and the offsets
 * of the few fields the walk reads. When the walk reaches a pc in the code
 * cache, BPF finds the code blob holding it through its code heap's
 * segment map (one byte per segment: 0 where a block starts, else how many
 * segments to go back, 0xff for unused), then:
 *
 *   the interpreter: rbp is the frame pointer; the Method* is at
 *       fp - 24, the caller's pc at fp + 8, its fp at fp, its sp at fp - 8
 *       (the sender sp the interpreter keeps);
 *   a blob with a frame size (C1 and C2 methods, runtime stubs): CFA = sp
 *       + frame_size * 8, the return address at CFA - 8, the caller's rbp
 *       at CFA - 16 (the prologue saves it there even when rbp is not the
 *       frame pointer); before the frame is complete (the leaf in the
 *       prologue) the return address is at sp;
 *   any other blob (the call stub, adapters): by frame pointer.
 *
 * x86_64 only (the layout above is x86_64's); user space fills the map
 * only there.
 */
#ifndef CODEXRAY_AGENT_BPF_HOTSPOT_H
#define CODEXRAY_AGENT_BPF_HOTSPOT_H

#define CX_HS_MAX_HEAPS 4
/* Bytes read at a code heap block's start: the block header and the
 * CodeBlob and nmethod fields the walk reads; field offsets (from the
 * block's start) stay below CX_HS_BLOCK_READ - 8. A power of two. */
#define CX_HS_BLOCK_READ 256
/* Segment map steps: each goes back at most 254 segments, so blobs up to
 * 32 * 254 segments (508 KiB with 64-byte segments) are found. */
#define CX_HS_SEGMAP_STEPS 32
/* The interpreter frame's Method*, from rbp (x86_64's frame layout:
 * sender sp at -1 word, last sp at -2, method at -3). */
#define CX_HS_INTERP_METHOD_OFF (-24)
/* and the bytecode pointer, saved there at calls (bcp at -8 words) */
#define CX_HS_INTERP_BCP_OFF (-64)

/* cx_frame.aux of a CX_FRAME_JAVA frame: the type in its low bits
 * (CX_HS_TYPE), for a compiled frame the pc's offset in the code (from
 * _code_begin) above them (CX_HS_PC_OFF): user space finds the frames
 * inlined there from the nmethod's debug information. */
enum cx_hs_frame_type {
    /* addr: the Method*; above the type the bytecode pointer's low 28 bits
     * (the leaf's may be stale: the interpreter keeps it in a register) */
    CX_HS_INTERPRETED = 1,
    CX_HS_COMPILED = 2, /* addr: the nmethod; tag: its Method* >> 3, low 16 bits */
    CX_HS_STUB = 3,     /* addr: the CodeBlob (a stub, an adapter, the call stub) */
};
#define CX_HS_TYPE(aux) ((aux)&7)
#define CX_HS_PC_OFF(aux) ((aux) >> 4)
#define CX_HS_PC_OFF_MAX ((1u << 28) - 1)

/* cx_hs_proc.flags: JDK 25's CodeBlob has its code at an int offset from
 * itself (not a pointer), and _frame_complete_offset an int16_t. */
#define CX_HS_CODE_OFFSET 1
#define CX_HS_COMPLETE16 2

struct cx_hs_heap {
    __u64 start, end; /* the heap's reserved range */
    __u64 segmap;     /* its segment map */
    __u32 log2_seg;
    __u32 pad;
};

/* The "hs_procs" hash map's value: key __u32 tgid. */
struct cx_hs_proc {
    __u64 cc_start, cc_end;         /* the code cache (every heap within) */
    __u64 interp_start, interp_end; /* the template interpreter's code */
    __u32 n_heaps;
    /* Offsets from a heap block's start (the block header included). */
    __u16 blob;           /* the CodeBlob: sizeof(HeapBlock) */
    __u16 used;           /* HeapBlock::Header::_used (a byte) */
    __u16 frame_size;     /* CodeBlob::_frame_size (int, words) */
    __u16 frame_complete; /* CodeBlob::_frame_complete_offset (int) */
    __u16 code_begin;     /* CodeBlob::_code_begin (JDK 25: _code_offset) */
    __u16 name;           /* CodeBlob::_name */
    __u16 method;         /* CompiledMethod::_method (JDK 25: nmethod::_method) */
    __u16 flags;          /* CX_HS_CODE_OFFSET, CX_HS_COMPLETE16 */
    __u16 pad[2];
    struct cx_hs_heap heap[CX_HS_MAX_HEAPS];
};

#endif

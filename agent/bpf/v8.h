/* What the BPF side needs to find V8's JavaScript frames (Node.js), shared
 * by sampler.bpf.c and user space (agent/runtimes/v8/): plain fixed-size
 * types and #defines only.
 *
 * V8's generated code (the interpreter's trampoline and the other builtins
 * in the binary's embedded blob, and Sparkplug, Maglev and TurboFan code in
 * anonymous memory) has no CFI, and keeps the frame pointer: the walk
 * crosses it by frame pointer. A JavaScript frame holds, at fixed offsets
 * from its frame pointer, its context and its JSFunction; a frame of
 * another kind (a stub, an entry or exit frame) holds a Smi (a small
 * integer: low bit 0) where the context would be, its type marker.
 *
 * User space reads the offsets from the v8dbg_* constants the binary
 * exports (V8's postmortem metadata, as llnode reads them) and puts them in
 * the "v8_procs" hash map under the process's tgid. Where a V8 process's
 * walk takes a frame-pointer step, BPF checks the frame: context slot not a
 * Smi, function slot a heap object whose map says JSFunction, whose shared
 * field is a heap object whose map says SharedFunctionInfo. Then the
 * frame's native pc is replaced by a CX_FRAME_V8 frame: addr the
 * SharedFunctionInfo (tagged), tag its fingerprint. User space reads the
 * function's name, script and line from the process's memory.
 */
#ifndef CODEXRAY_AGENT_BPF_V8_H
#define CODEXRAY_AGENT_BPF_V8_H

/* A heap object's first bytes read at once: the fields used lie inside. */
#define CX_V8_OBJ_READ 64

/* The "v8_procs" hash map's value: key __u32 tgid. Offsets in bytes, from
 * the untagged object address (tagged - 1); all below CX_V8_OBJ_READ - 8
 * and 8-aligned (the instance type: 2-aligned), user space sees to it. */
struct cx_v8_proc {
    __s16 fp_function;   /* v8dbg_off_fp_function: the JSFunction from fp */
    __s16 fp_context;    /* v8dbg_off_fp_context: the context or the frame's marker */
    __u16 map_type;      /* Map::instance_type (a u16) */
    __u16 fn_shared;     /* JSFunction::shared */
    __u16 sfi_name;      /* SharedFunctionInfo::name_or_scope_info */
    __u16 sfi_script;    /* SharedFunctionInfo::script_or_debug_info */
    __u16 type_fn_first; /* the JSFunction instance types: [first, last] */
    __u16 type_fn_last;
    __u16 type_sfi; /* SHARED_FUNCTION_INFO_TYPE */
    __u16 pad[3];
};

/* The 16-bit fingerprint of a SharedFunctionInfo, in cx_frame.tag: its
 * name-or-scope-info and script fields, folded. User space computes the
 * same from what it reads, to tell the object from another one the garbage
 * collector moved to its address since. Never 0. */
static inline __u16 cx_v8_fingerprint(__u64 name_or_scope, __u64 script)
{
    __u64 h = (name_or_scope ^ (script << 9)) * 0x9E3779B97F4A7C15ull;
    __u16 t = (__u16)(h >> 48);

    return t ? t : 1;
}

#endif

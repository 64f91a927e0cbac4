/* The CFI unwind tables BPF walks, shared by sampler.bpf.c and user space
 * (agent/unwind/): plain fixed-size types and #defines only.
 *
 * User space turns a binary's .eh_frame (or .debug_frame) into one sorted
 * array of rows, one per address range with the same rule: how to find the
 * canonical frame address (CFA), where the caller's frame pointer was
 * saved and where the return address is. On x86_64 it is always at CFA - 8
 * (a rule that puts it elsewhere is unsupported); on arm64 it is in the
 * link register (x30) until the prologue stores it, usually beside x29 in
 * the frame record `stp x29, x30, [sp, #-N]!` writes.
 *
 * Each table is a BPF array of blocks of rows in the "cfi_tables" array of
 * maps, shared by every process that maps the binary. Each process has a sorted list of
 * its mappings that have a table ("proc_unwind"), which turns a pc into a
 * table and an address relative to the table's base.
 */
#ifndef CODEXRAY_AGENT_BPF_UNWIND_H
#define CODEXRAY_AGENT_BPF_UNWIND_H

/* How the CFA is found (the low 4 bits of cx_cfi_row.rule). */
enum cx_cfa_type {
    CX_CFA_NONE = 0,     /* no CFI covers this pc (a gap between FDEs): walk by frame pointer */
    CX_CFA_SP = 1,       /* CFA = sp + 8 * off */
    CX_CFA_FP = 2,       /* CFA = fp + 8 * off */
    CX_CFA_PLT = 3,      /* CFA = sp + 8 + ((pc & 15) >= off ? 8 : 0): gcc/ld's .plt expression */
    CX_CFA_DEREF_SP = 4, /* CFA = *(sp + 8 * off): DW_OP_breg7 N; DW_OP_deref */
    CX_CFA_DEREF_FP = 5, /* CFA = *(fp + 8 * off): DW_OP_breg6 N; DW_OP_deref (stack realignment) */
    CX_CFA_SIGNAL = 6,   /* a signal trampoline: sp points at the kernel's ucontext */
    CX_CFA_END = 7,      /* the return address is undefined: the outermost frame (_start, clone) */
    CX_CFA_UNSUPPORTED = 8, /* a rule we cannot follow: the walk ends in [truncated] */
    /* arm64 Go's runtime.asyncPreempt, which the signal handler enters by
     * pushCall, not by a call: CFA = sp + 8 * off as CX_CFA_SP and the
     * return address (the interrupted pc: exact) where the row's RA type
     * says, but the interrupted code's x30 saved at CFA and its sp CFA + 16. */
    CX_CFA_GO_PUSHED = 9,
};

/* Where the caller's frame pointer is (bits 4-5 of cx_cfi_row.rule). */
enum cx_fp_type {
    CX_FP_SAME = 0,   /* unchanged (not saved, or DW_CFA_same_value / undefined) */
    CX_FP_AT_CFA = 1, /* at CFA + 8 * fp_off (DW_CFA_offset) */
    CX_FP_AT_FP = 2,  /* at fp + 8 * fp_off (DW_CFA_expression DW_OP_breg6 N) */
    /* at sp + 8 * fp_off, sp this frame's: Go on arm64 (-8(RSP)), and an
     * arm64 frame record too far below the CFA for fp_off (cx_ra_type) */
    CX_FP_AT_SP = 3,
};

/* Where the return address is (bits 6-7 of cx_cfi_row.rule). x86_64 rows
 * are all CX_RA_DEFAULT. */
enum cx_ra_type {
    /* x86_64: at CFA - 8. arm64: still in the link register, which holds
     * it only in the frame the sample interrupted (or one a signal
     * interrupted): elsewhere the walk ends, [truncated]. */
    CX_RA_DEFAULT = 0,
    /* just above the saved frame pointer (fp type AT_CFA, AT_FP or AT_SP):
     * the frame record {x29, x30}, read in one go */
    CX_RA_AFTER_FP = 1,
    CX_RA_AT_CFA = 2, /* at CFA + 8 * fp_off; fp CX_FP_SAME (fp_off is the return address's) */
    /* 3: not written (a row with it ends the walk, CX_TRUNC_CFI_RULE). Go on
     * arm64 needs none: once it has a frame, x30 is at 0(RSP) just above
     * x29 at -8(RSP), CX_RA_AFTER_FP with CX_FP_AT_SP -1. */
};

/* One row: the rule for [pc, next row's pc). 8 bytes, so a table for libc
 * (about 30,000 rows) is about 240 KiB. Offsets are in units of 8 bytes
 * (x86_64 keeps its stack 8-aligned at every instruction boundary, arm64
 * 16-aligned); one that is not a multiple of 8, or out of range, makes the
 * row CX_CFA_UNSUPPORTED.
 *
 * The last row of a table is a CX_CFA_NONE row at the end of the last FDE,
 * so a pc past every FDE walks by frame pointer. */
struct cx_cfi_row {
    __u32 pc;      /* the row's first address, relative to the table's base */
    __s16 cfa_off; /* see enum cx_cfa_type; for CX_CFA_PLT the threshold in bytes */
    __u8 rule;     /* cfa_type | fp_type << 4 | ra_type << 6 */
    __s8 fp_off;   /* see enum cx_fp_type */
};

/* Rows go to BPF in blocks of 16: a lookup in a table is a helper call
 * (inner maps of different sizes are not inlined), so the search goes by
 * block (through an index of blocks: cfi_index.h), then within the block in
 * plain memory. The last block is padded with rows at pc 0xffffffff, which
 * no address reaches. */
#define CX_CFI_BLOCK_ROWS 16
struct cx_cfi_block {
    struct cx_cfi_row rows[CX_CFI_BLOCK_ROWS];
};

#define CX_CFI_RULE(cfa, fp) ((__u8)((cfa) | ((fp) << 4)))
#define CX_CFI_RULE_RA(cfa, fp, ra) ((__u8)((cfa) | ((fp) << 4) | ((ra) << 6)))
#define CX_CFI_CFA_TYPE(rule) ((rule)&15)
#define CX_CFI_FP_TYPE(rule) (((rule) >> 4) & 3)
#define CX_CFI_RA_TYPE(rule) ((rule) >> 6)

/* Rows per table: a table's addresses are 32-bit offsets from its base, and
 * the index's levels must reach any block (cfi_index.h). 2^23 rows = 64 MiB. */
#define CX_CFI_MAX_ROWS (1u << 23)

/* Tables loaded at once (the outer array of maps). */
#define CX_CFI_MAX_TABLES 8192

/* A process's mappings with a table, sorted by start; at most this many. */
#define CX_UNWIND_MAX_MAPS 128
#define CX_UNWIND_MAP_SEARCH_STEPS 8 /* log2(CX_UNWIND_MAX_MAPS) + 1 */

struct cx_unwind_map {
    __u64 start, end; /* [start, end) in the process */
    __u64 bias;       /* row pc = pc - bias (the load bias plus the table's base) */
    __u32 table;      /* index in cfi_tables */
    __u32 blocks;     /* blocks in that table */
};

/* The "file_unwind" hash map: a binary's table by the file the kernel maps
 * (its device, in the kernel's encoding major << 20 | minor, as
 * /proc/PID/maps shows it, and its inode). Where a process has no entry
 * yet, or none for the pc (it was just exec'd, or loaded a library since
 * user space read its maps), the walk finds the pc's mapping itself
 * (bpf_find_vma, Linux 5.17) and its table here, so a new process of a
 * binary the agent knows is walked whole from its first sample. */
#define CX_FILE_UNWIND_MAX 16384
#define CX_FILE_MAX_SEGS 4

struct cx_file_key {
    __u64 ino;
    __u32 dev;
    __u32 pad;
};

struct cx_file_seg {
    /* A mapping whose file offset is in [page_off, end_off) holds this
     * segment; row pc = pc - (vma start - its file offset - delta), where
     * delta = p_vaddr - p_offset - the table's base. */
    __u64 page_off, end_off, delta;
};

struct cx_file_unwind {
    __u32 table; /* index in cfi_tables */
    __u32 blocks;
    __u32 nseg;
    __u32 pad;
    struct cx_file_seg seg[CX_FILE_MAX_SEGS];
};

/* bpf_find_vma works once per sample: in the timer's interrupt the mmap
 * lock is released by an irq_work, one per CPU, which stays busy until the
 * interrupt ends, and a second lookup fails (-EBUSY). So what a lookup finds
 * is kept per process ("vma_learned", an LRU hash by tgid) for the walk's
 * later frames and later samples, each sample adding one mapping; the exec
 * tracepoint, where lookups are free, puts the new executable's code there
 * first. (Learning every mmap as it is made would need fexit or kprobes,
 * which kernels without ftrace lack, or the syscall tracepoints, which slow
 * every syscall on the machine.) Entries carry the address space they were
 * learned in (exec makes a new one: the old image's are ignored) and are
 * trusted for CX_VMA_LEARNED_NS only (a library unmapped and another mapped
 * at its place must not be walked with the first one's table); by then user
 * space has read the process's maps. */
#define CX_VMA_LEARNED_MAX 16
#define CX_VMA_LEARNED_NS 2000000000ull
#define CX_VMA_LEARNED_PROCS 4096

struct cx_vma_learned_map {
    __u64 start, end, bias;
    __u32 table, blocks; /* blocks 0: no table (anonymous memory, no CFI) */
    __u64 at_ns;         /* bpf_ktime_get_ns() when learned */
};

struct cx_vma_learned {
    __u64 mm; /* the address space (struct mm_struct *) they belong to */
    __u64
        exec_ns; /* its exec: the libraries ld.so maps in the next CX_VMA_LEARNED_NS are learned */
    __u32 n;     /* mappings learned so far; the latest CX_VMA_LEARNED_MAX are kept */
    __u32 pad;
    struct cx_vma_learned_map m[CX_VMA_LEARNED_MAX];
};

/* The "proc_unwind" hash map: key __u32 tgid. */
struct cx_proc_unwind {
    __u32 n;
    __u32 pad;
    struct cx_unwind_map maps[CX_UNWIND_MAX_MAPS];
};

#endif

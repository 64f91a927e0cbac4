/* One collection window: samples counted per process, per thread, per
 * distinct stack. Built by the main thread as samples arrive, then handed
 * whole to the worker, which names the frames and writes the profiles.
 *
 * A frame here is not yet named: it is (mapping, address), where the
 * mapping is a copy of the process's, holding a reference to its binary, so
 * a window can be named after the process is gone.
 */
#ifndef CODEXRAY_AGENT_AGGREGATE_H
#define CODEXRAY_AGENT_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h> /* the __u32 and friends sample.h is written in */

#include "bpf/sample.h"
#include "procs/procs.h"
#include "unwind/unwinder.h"

/* The runtimes' (runtimes/runtime.h), only pointed to here: this header does
 * not include runtimes/, whose namers include it. */
struct rt_obj;
struct rt_frame_out;

#define AGG_NO_MAP UINT32_MAX

/* agg_frame.flags */
#define AGG_F_RETURN 1u /* a return address: name the call before it */
/* A truncation user space made (past the walk's own CX_TRUNC_* reasons): a
 * return address in none of the process's executable mappings the agent
 * knows, so it and everything above it are left out. */
#define AGG_TRUNC_NO_MAPPING 16u

struct agg_frame {
    uint64_t addr;
    /* Native frames: index into agg_proc.maps; a runtime's frames: into
     * agg_proc.objs; AGG_NO_MAP for none. */
    uint32_t map;
    uint16_t kind;  /* enum cx_frame_kind */
    uint16_t flags; /* AGG_F_*; for CX_FRAME_TRUNCATED the low byte holds the reason */
};

/* The key of one counted stack: thread, then frames leaf first. */
struct agg_stack {
    uint32_t tid;
    uint32_t nframes;
    char thread[CX_COMM_LEN];
    struct agg_frame frames[];
};

struct agg_map {
    uint64_t start, end, offset;
    struct binary *bin; /* a reference, or NULL */
    char *name;
};

/* What every sample reads first (and the map cache next to it); the
 * identity, read when the profile is written, last. */
struct agg_proc {
    uint32_t tgid;
    unsigned generation; /* of the identity copied below */
    uint64_t samples;
    uint64_t lost;       /* samples the BPF side could not hand over */
    struct hmap *stacks; /* struct agg_stack -> count */
    /* stacks' and off_stacks' memory, freed by agg_window__drop_stacks;
     * the rest is in the window's arena. */
    struct arena *stack_arena;
    /* Off-CPU: struct agg_stack (its first frame a CX_FRAME_OFFCPU) ->
     * nanoseconds blocked; NULL until the first. */
    struct hmap *off_stacks;
    uint64_t off_ns;
    struct hmap *map_index; /* (start, end, offset, bin) -> index into maps */
    struct agg_map *maps;
    size_t nmaps, cap_maps;
    /* What the runtimes' frames are named with (runtime.h), one reference
     * each, and rt_obj -> index into objs. */
    struct rt_obj **objs;
    size_t nobjs, cap_objs;
    struct hmap *obj_index;
    /* The last mappings seen, so most frames skip the map_index lookup:
     * direct-mapped on the process table's proc_map address, valid for one
     * reading of the maps (maps_read_ns). */
    struct {
        const void *m;
        uint64_t gen;
        uint32_t id;
    } mcache[16];
    uint64_t start_time; /* /proc/PID/stat's: tells a reused pid apart */
    char comm[16];
    char exe[PROC_NAME_MAX];
    struct identity id; /* service and where it runs: the profile's labels */
};

struct agg_window {
    uint64_t start_ns; /* CLOCK_REALTIME */
    uint64_t end_ns;   /* set by agg_window__close */
    uint64_t samples, lost, dropped_oom;
    /* Off-CPU: time counted, blocks walked behind it, time whose stack was
     * not known (offcpu.h) or whose process was gone or excluded. */
    uint64_t off_ns, off_blocks, off_unknown_ns;
    bool off_cpu; /* off-CPU time was collected: the profiles get its sample type */
    uint64_t stats_delta[CX_STAT__COUNT]; /* the BPF counters over the window */
    uint64_t maps_reads, identity_reads;  /* of /proc over the window (procs__reads) */
    struct unwinder_stats unwind;         /* the CFI tables at the window's end */
    bool kernel_stacks;                   /* keep kernel frames */
    uint64_t serial;                      /* unique to this window (proc->agg_serial) */
    struct arena *arena;                  /* all the window holds but stacks */
    struct hmap *index;                   /* tgid -> index into procs */
    struct agg_proc **procs;
    size_t nprocs, cap_procs;
};

/* Returns NULL when out of memory. */
struct agg_window *agg_window__new(uint64_t start_ns, bool kernel_stacks);
/* Drops every binary reference. w may be NULL. */
void agg_window__free(struct agg_window *w);

/* Frees the stacks counted for w's i-th process (ap->stacks and
 * ap->off_stacks become NULL: no samples) once its profile is written. The
 * rest (mappings, binary and runtime references, identity) stays until
 * agg_window__free, so the window's summary still sees its binaries. */
void agg_window__drop_stacks(struct agg_window *w, size_t i);

/* The window's entry for p, made on first use (identity copied from p).
 * Remembered in p (p->agg) for the next sample. */
struct agg_proc *agg_window__proc(struct agg_window *w, struct proc *p);

/* How frames of kinds this module does not know (the runtimes') become
 * window frames: runtimes__frame and its state. */
struct agg_frame_hook {
    int (*frame)(void *ctx, const struct proc *p, const struct cx_frame *f,
                 struct rt_frame_out *out);
    void *ctx;
};

/* Counts one sample. Resolves each user address to a mapping of p through
 * ps (which may read the maps again), and each frame of another kind
 * through hook (NULL: such frames are dropped). Returns 0 or -ENOMEM (the
 * sample is then counted in dropped_oom). */
int agg_window__add(struct agg_window *w, struct procs *ps, struct proc *p,
                    const struct cx_sample *s, uint64_t now_ns, const struct agg_frame_hook *hook);

/* Counts ns of off-CPU time (blocks of them walked) on stack s, a
 * CX_REC_OFFCPU record: its frames as agg_window__add's, under a first
 * frame naming s->off_class. Returns 0 or -ENOMEM. */
int agg_window__add_off(struct agg_window *w, struct procs *ps, struct proc *p,
                        const struct cx_sample *s, uint64_t ns, uint64_t blocks, uint64_t now_ns,
                        const struct agg_frame_hook *hook);

/* "off_cpu_s=... blocks_seen=... walked=..." from w's off-CPU counts and
 * BPF counters, for the window's log line. */
void agg_window__off_str(const struct agg_window *w, char *out, size_t len);

/* Records samples the BPF side lost for p's process. */
void agg_window__add_lost(struct agg_window *w, struct proc *p, uint64_t lost);

#endif

/* Language runtimes: the place where what the agent knows of an
 * interpreter or a JIT lives, one module per runtime under agent/runtimes/:
 *
 *   jit/     code that JITs describe in perf maps (V8, HotSpot, .NET...), and
 *            making a HotSpot JVM write its map
 *   python/  CPython: frames walked in BPF, code objects named from the
 *            process's memory
 *   v8/      V8 (Node.js): JavaScript frames found in BPF, functions named
 *            from the process's memory
 *   hotspot/ HotSpot JVMs: Java frames walked in BPF from the JVM's
 *            VMStructs, named from its Method metadata
 *
 * A runtime has two halves, for the agent's two threads:
 *
 * - the tracker, on the main thread, beside the process table: it looks at
 *   each process's mappings (which binaries, which interpreter), tells the
 *   BPF side what to walk for it, forgets it when it exits, and turns the
 *   frames of its own kinds (bpf/sample.h) into a window's frames while the
 *   process still exists (reading its memory if it must);
 * - the namer, on the worker thread: it names frames when a window becomes
 *   profiles, its own kinds and any native frame it claims (JIT code).
 *
 * Adding a runtime is a folder with one `const struct runtime_ops` and a
 * line in runtimes.c's list; nothing else branches on a runtime. Either
 * half may be left out (NULL hooks).
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_RUNTIME_H
#define CODEXRAY_AGENT_RUNTIMES_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "../../common/pprof/pprof_writer.h"
#include "../bpf/sample.h"

struct proc;
struct agg_proc;
struct agg_frame;
struct sampler;
struct symbolizer;

/* Something a namer names frames with, made by a tracker and held by a
 * window after the process is gone (a Python code object's names and line
 * table): reference counted, immutable once made, so the worker may read it
 * while the main thread makes others. */
struct rt_obj {
    int refs; /* atomic */
    void (*free)(struct rt_obj *o);
};

struct rt_obj *rt_obj__get(struct rt_obj *o);
/* o may be NULL. The last put frees it. */
void rt_obj__put(struct rt_obj *o);

/* Takes process tgid out of a tracker's BPF map (map_fd; -1: the tracker
 * has none, as in tests) when *in_bpf says it is there; *in_bpf is false
 * after. */
void rt_bpf__forget(int map_fd, uint32_t tgid, bool *in_bpf);

/* What a tracker gets: where /proc is, and the BPF side's maps by their
 * names in the source (sampler__map_fd; NULL in tests: no BPF side). */
struct rt_env {
    const char *proc_root;
    int (*map_fd)(const struct sampler *s, const char *name);
    const struct sampler *sampler;
};

/* What a namer gets for one process of a window. */
struct rt_name_ctx {
    struct pprof_writer *w;
    const struct agg_proc *ap;
    uint64_t now_ns; /* monotonic */
    void *proc;      /* the namer's own per-process state, from proc_begin */
};

/* What a tracker does with a frame of its kind. */
struct rt_frame_out {
    uint64_t addr;      /* agg_frame.addr */
    struct rt_obj *obj; /* a new reference for the window to hold, or NULL */
    uint16_t flags;     /* agg_frame.flags */
};

/* name_frame's *how. */
#define RT_COUNTED 1u
#define RT_UNNAMED 2u

struct runtime_ops {
    const char *name;
    /* The frame kinds (enum cx_frame_kind) its tracker turns into window
     * frames and its namer names; 0 ends the list. */
    uint16_t kinds[4];
    /* The name of its count in the window's log line ("python_frames"):
     * the frames its namer named, once per sample. NULL: not counted. */
    const char *stat_name;
    /* Its namer is asked about native frames too (code it generated). */
    bool claims_native;

    /* --- the tracker (main thread) --- */
    /* Returns its state, or NULL with a reason in err (the agent then runs
     * without it, saying so). */
    void *(*tracker_new)(const struct rt_env *env, char *err, size_t errlen);
    void (*tracker_free)(void *t);
    /* p's mappings were (re)read (p->maps_err set when they could not be). */
    void (*proc_maps)(void *t, const struct proc *p, uint64_t now_ns);
    /* Process tgid exited (its exit event): what BPF has of it may go, but
     * not what names its frames: the window that holds its last samples
     * (an off-CPU block's sums are drained at the window's end) is named
     * after. NULL: proc_gone is called then instead. */
    void (*proc_exited)(void *t, uint32_t tgid, uint64_t now_ns);
    /* Process tgid is forgotten (after its exit and that window's drain),
     * perhaps after proc_exited. */
    void (*proc_gone)(void *t, uint32_t tgid, uint64_t now_ns);
    /* A frame of one of its kinds, from a sample of p: fills *out. Returns
     * 0, or -ENOMEM. Called for every such frame of every sample: cheap
     * when it has seen the frame before. */
    int (*frame)(void *t, const struct proc *p, const struct cx_frame *f, struct rt_frame_out *out);
    /* Once a window, after it closed. */
    void (*tracker_sweep)(void *t, uint64_t now_ns);
    /* At every poll of the sample ring (every few hundred ms at most), for
     * what a tracker waits for in a process that runs (a JVM making its
     * code cache): cheap when nothing is due. NULL: none. */
    void (*tracker_poll)(void *t, uint64_t now_ns);

    /* --- the namer (worker thread) --- */
    void *(*namer_new)(const char *proc_root);
    void (*namer_free)(void *n);
    /* Before a process's frames are named: c->proc may be set. */
    void (*proc_begin)(void *n, struct rt_name_ctx *c);
    /* Names frame f (obj: what the tracker gave it, or NULL) of one of its
     * kinds, or a native frame (in the pprof mapping map_id, 0: none) it
     * may claim. Returns the location id, 0 when it does not name it (a
     * native frame that is not its), UINT64_MAX when out of memory. *how
     * (0 when called) takes RT_COUNTED for a frame that counts in its stat,
     * RT_UNNAMED for one shown without a real name. */
    uint64_t (*name_frame)(void *n, struct rt_name_ctx *c, const struct agg_frame *f,
                           const struct rt_obj *obj, uint64_t map_id, unsigned *how);
    /* After: hints logged once per process. */
    void (*proc_end)(void *n, struct rt_name_ctx *c);
    /* Once a window: state of processes unseen since before unused_ns. */
    void (*namer_sweep)(void *n, uint64_t now_ns);
};

#endif

/* Turns a window's counted stacks into pprof: names every frame (symbolizer,
 * kallsyms) and writes samples with their labels. Runs on the worker. */
#ifndef CODEXRAY_AGENT_PROFILE_H
#define CODEXRAY_AGENT_PROFILE_H

#include <stdint.h>

#include "../common/pprof/pprof_writer.h"
#include "aggregate.h"
#include "profile_cache.h"
#include "runtimes/runtimes.h"
#include "symbolize/kallsyms.h"
#include "symbolize/symbolizer.h"

struct profile_ctx {
    struct symbolizer *sym;
    const struct kallsyms *ks; /* NULL: kernel frames shown as [kernel]+0xADDR */
    const char *host;
    uint64_t period_ns; /* CPU time one sample stands for */
    /* The runtimes' namers (runtimes.h): Python frames, JIT code; NULL:
     * native frames only, JIT code shown as [anon]+0xADDR. */
    struct rt_namers *rt;
    uint64_t now_ns; /* monotonic */
    /* A third sample type, off_cpu/nanoseconds (OFFCPU_CONTRACT: values
     * [0, 0, ns] for off-CPU stacks, [n, cpu_ns, 0] for CPU ones); false:
     * the two CPU types only, as without off-CPU. */
    bool off_cpu;
    /* What the window's profiles share (profile_cache.h): frames' names,
     * scratch maps; NULL: each profile names its frames and makes its own. */
    struct profile_cache *cache;
};

struct profile_stats {
    uint64_t frames;         /* frames in all samples, each counted once per sample */
    uint64_t unnamed_frames; /* of which had no name */
    uint64_t interp_frames;  /* of those, an interpreter's, marked (interp_frames.h) */
    uint64_t samples;
    uint64_t truncated_samples; /* samples whose stack ends in a [truncated] frame */
    /* Frames each runtime named (rt_namers__stat_name), once per sample. */
    uint64_t runtime_frames[RT_MAX];
};

/* A writer with the sample types, period and time set. NULL when out of
 * memory. */
struct pprof_writer *profile__writer(const struct profile_ctx *c, uint64_t start_ns,
                                     uint64_t duration_ns);

/* Empties w (a writer profile__writer made) for the next profile and sets
 * it up as profile__writer would: its memory is kept from one profile to
 * the next. Returns 0 or -ENOMEM (w must not be used but freed). */
int profile__writer_reset(struct pprof_writer *w, const struct profile_ctx *c, uint64_t start_ns,
                          uint64_t duration_ns);

/* Adds every sample of ap to w (its off-CPU stacks too when c->off_cpu), the runtimes' frames named
 * by their namers (Python functions; JIT code from perf maps), labelled pid, tid, thread, comm,
 * service and host, and container_id, pod, namespace, container and systemd_unit where they apply;
 * samples that were lost become one "[lost samples]" sample. Adds to *st. Returns 0 or -ENOMEM. */
int profile__add_proc(struct pprof_writer *w, const struct profile_ctx *c,
                      const struct agg_proc *ap, struct profile_stats *st);

/* "jit_frames=N% python_frames=N% interp_frames=N%": each runtime's share of
 * the frames, and the interpreters' frames without a name (marked, folded on
 * query), for the window's log line. */
void profile_stats__runtimes_str(const struct profile_stats *st, char *out, size_t len);

#endif

/* The list of runtimes (runtime.h) and the two places that call them: the
 * trackers, kept by the collector on the main thread, and the namers, kept
 * by whoever turns windows into profiles (the worker, `record`).
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_RUNTIMES_H
#define CODEXRAY_AGENT_RUNTIMES_RUNTIMES_H

#include "runtime.h"

/* Counts kept per runtime (its stat_name), at most this many runtimes. */
#define RT_MAX 8

struct runtimes;

/* Every runtime's tracker. One that cannot start is logged and left out;
 * NULL only when out of memory. env's strings must outlive the result. */
struct runtimes *runtimes__new(const struct rt_env *env);
/* r may be NULL. */
void runtimes__free(struct runtimes *r);

void runtimes__proc_maps(struct runtimes *r, const struct proc *p, uint64_t now_ns);
/* Process tgid exited: each runtime's proc_exited (else its proc_gone). */
void runtimes__proc_exited(struct runtimes *r, uint32_t tgid, uint64_t now_ns);
/* Process tgid is forgotten: each runtime's proc_gone. */
void runtimes__proc_gone(struct runtimes *r, uint32_t tgid, uint64_t now_ns);
/* A frame of a runtime's kind, for the window (aggregate.h's hook: ctx is
 * the struct runtimes). Returns 0, -ENOENT when no runtime has that kind,
 * or -ENOMEM. */
int runtimes__frame(void *ctx, const struct proc *p, const struct cx_frame *f,
                    struct rt_frame_out *out);
void runtimes__sweep(struct runtimes *r, uint64_t now_ns);
/* At every poll of the sample ring (runtime.h's tracker_poll). */
void runtimes__poll(struct runtimes *r, uint64_t now_ns);

struct rt_namers;

/* Every runtime's namer. NULL when out of memory. */
struct rt_namers *rt_namers__new(const char *proc_root);
/* n may be NULL. */
void rt_namers__free(struct rt_namers *n);

/* Before and after the frames of one process (of a window) are named into
 * w; between them, rt_namers__name names its frames. */
void rt_namers__proc_begin(struct rt_namers *n, struct pprof_writer *w, const struct agg_proc *ap,
                           uint64_t now_ns);
void rt_namers__proc_end(struct rt_namers *n);

/* Names f: a runtime's frame (its kind), or a native frame in mapping
 * map_id (0: none) that a runtime claims (JIT code). Returns the location
 * id, 0 when no runtime names it (a native frame then goes to the
 * symbolizer), UINT64_MAX when out of memory. *stat is the index of the
 * count it adds to (rt_namers__stat_name), or -1; *unnamed says it has no
 * real name (a marker saying why). */
uint64_t rt_namers__name(struct rt_namers *n, const struct agg_frame *f, uint64_t map_id, int *stat,
                         bool *unnamed);

/* The names of the counts, "" for indices without one; RT_MAX of them. */
const char *rt_namers__stat_name(int i);

void rt_namers__sweep(struct rt_namers *n, uint64_t now_ns);

#endif

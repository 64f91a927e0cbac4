/* The user-space half of the sampler: opens a cpu-clock perf event on every
 * online CPU, loads and attaches the BPF programs (bpf/sampler.bpf.c), and
 * hands each record from the ring buffer to a callback.
 */
#ifndef CODEXRAY_AGENT_SAMPLER_H
#define CODEXRAY_AGENT_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h> /* the __u32 and friends sample.h is written in */

#include "bpf/sample.h"

struct sampler_opts {
    unsigned sample_rate_hz; /* per CPU */
    uint32_t only_tgid;      /* 0 = every process */
    bool fixed_period;       /* 1/rate exactly, not dithered (dither.h) */
    bool cfi;                /* CFI walks: with bpf_find_vma's fallback where the kernel has it */
    /* Off-CPU time (bpf/offcpu.bpf.h): where the kernel cannot take it,
     * sampler__open logs why and opens without it (sampler__off_cpu). */
    bool off_cpu;
    uint64_t off_min_ns;        /* shorter blocks are not counted */
    unsigned off_walks_per_sec; /* per CPU; 0: the default */
    bool kernel_stacks;         /* profiles keep kernel frames: off-CPU walks take them */
    /* The hook's duty cycle (offduty.h): switches a second machine-wide
     * watched in full (0: always attached), the slot's length (0: 250 ms),
     * and for tests a fixed probability per slot in percent (0: none). */
    uint64_t off_duty_rate;
    unsigned off_duty_slot_ms;
    unsigned off_duty_fixed_pct;
};

/* Called for each record (a cx_sample or a cx_proc_event, by hdr.kind);
 * `size` is what the ring buffer holds. Return 0 to go on. */
typedef int (*sampler_record_fn)(void *ctx, const struct cx_record_hdr *rec, size_t size);

struct sampler;

/* Checks what the kernel and our privileges allow, then opens, loads and
 * attaches everything. Returns NULL with a message in err (what is missing
 * and what fixes it); *exit_code says 1 for a failure and 2 never (usage is
 * the caller's). */
struct sampler *sampler__open(const struct sampler_opts *opts, sampler_record_fn fn, void *ctx,
                              char *err, size_t errlen);

/* Waits up to timeout_ms for records and delivers them. Samples do not wake
 * the poll (only exec/exit events and a half-full ring do), so callers poll
 * with a short timeout and get the samples in batches. Every
 * DITHER_SEGMENT_NS it also draws each CPU's sampling period again (unless
 * opts.fixed_period): call it at least every 100 ms. Returns how many
 * records, or a negative errno (-EINTR when a signal came: not an error). */
int sampler__poll(struct sampler *s, int timeout_ms);

/* The BPF counters (enum cx_stat), summed over CPUs since open. */
int sampler__stats(struct sampler *s, uint64_t out[CX_STAT__COUNT]);

/* Calls fn for each process that lost samples since the last call, and
 * clears the counts. */
int sampler__drain_lost(struct sampler *s, void (*fn)(void *ctx, uint32_t tgid, uint64_t lost),
                        void *ctx);

/* Whether off-CPU time is collected (asked for, and the kernel took it). */
bool sampler__off_cpu(const struct sampler *s);

/* Calls fn for each entry of the off-CPU sums (bpf/sample.h's off_sums)
 * and deletes it: the time is then the caller's. Returns how many, or
 * -ENOMEM. */
int sampler__drain_off(struct sampler *s,
                       void (*fn)(void *ctx, const struct cx_off_key *k,
                                  const struct cx_off_val *v),
                       void *ctx);

/* Credits to fn the time of the walked blocks still going on, from their
 * start (or the last credit) to now_ns (CLOCK_MONOTONIC), weighted as at
 * their end, blocks 0; and moves their start to now_ns, so that a thread
 * blocked across windows is counted in each window it waited in, not all at
 * its wake-up. Call at each window's end, with the same fn as
 * sampler__drain_off. Returns how many blocks were credited. */
int sampler__credit_blocked(struct sampler *s, uint64_t now_ns,
                            void (*fn)(void *ctx, const struct cx_off_key *k,
                                       const struct cx_off_val *v),
                            void *ctx);

/* Adds tgid to (skip) or removes it from (!skip) the BPF map of processes
 * not sampled. Returns 0 or -errno (-E2BIG: the map is full; removing one
 * that is not there is 0). */
int sampler__skip(struct sampler *s, uint32_t tgid, bool skip);

/* The maps of the CFI walk (bpf/unwind.h), for the unwinder: borrowed, valid
 * until sampler__free. */
void sampler__unwind_fds(const struct sampler *s, int *tables_fd, int *procs_fd);

/* Whether walks find a new process's tables by file (the "file_unwind" map,
 * bpf/unwind.h): opts.cfi and a kernel with bpf_find_vma. */
bool sampler__vma_fallback(const struct sampler *s);

/* A map of the BPF programs by its name in the source (a runtime's, such as
 * "py_procs"): borrowed, valid until sampler__free. -ENOENT when there is
 * none (or s is NULL). */
int sampler__map_fd(const struct sampler *s, const char *name);

unsigned sampler__ncpus(const struct sampler *s);

/* The program's id, for bpftool and kernel.bpf_stats_enabled readers. */
int sampler__prog_id(const struct sampler *s);

/* s may be NULL. */
void sampler__free(struct sampler *s);

#endif

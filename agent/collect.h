/* The main thread's loop body: records from the sampler go to the process
 * table and into the open window; rotating closes the window and opens the
 * next. Ties sampler, procs and aggregate together, for both the agent and
 * `record`. */
#ifndef CODEXRAY_AGENT_COLLECT_H
#define CODEXRAY_AGENT_COLLECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/clock.h"
#include "aggregate.h"
#include "offcpu.h"
#include "procs/procs.h"
#include "runtimes/runtimes.h"
#include "sampler.h"
#include "symbolize/binary.h"
#include "unwind/unwinder.h"

#define COLLECT_EXEC_PENDING 256

struct collector {
    struct sampler *sampler;
    struct binary_cache *bc;
    struct procs *procs;
    struct agg_window *win;
    struct unwinder *unwinder; /* NULL: frame pointers only */
    struct runtimes *runtimes; /* the language runtimes' trackers */
    bool kernel_stacks;
    /* The off-CPU stacks sent (offcpu.h); NULL with off-CPU off. */
    struct offcpu *off;
    uint64_t prev_stats[CX_STAT__COUNT];
    uint64_t prev_maps_reads, prev_identity_reads;
    /* When /proc was last asked whether every process the table holds is
     * alive (procs__sweep's check_alive). */
    uint64_t alive_checked_ns;
    uint64_t bad_records;     /* records too short for what they claim */
    uint64_t skipped_samples; /* of excluded processes, reaching user space anyway */
    bool skip_full_logged;
    /* Processes exec'd lately whose maps are read again once ld.so has
     * mapped their libraries (a ring, oldest first): read at the exec,
     * they hold only the executable and ld.so, and a process gone within a
     * poll would never be read again. */
    uint32_t exec_tgid[COLLECT_EXEC_PENDING];
    uint64_t exec_due[COLLECT_EXEC_PENDING];
    uint64_t exec_mapped[COLLECT_EXEC_PENDING]; /* the exec's time + the delay */
    unsigned exec_head, exec_n;
};

/* Opens the sampler, the tables and the runtimes' trackers; with uo, the
 * CFI unwinder too (NULL: user stacks are walked by frame pointers only);
 * off-CPU time with o->off_cpu where the kernel takes it (c->off not NULL).
 * Returns 0, or -1 with err filled. */
int collector__open(struct collector *c, const struct sampler_opts *o, bool kernel_stacks,
                    const struct unwinder_opts *uo, char *err, size_t errlen);

/* Reads every process in /proc now (only only_tgid when not 0), so the first
 * samples find them ready and excluded ones are never sampled. Returns how
 * many were read. */
unsigned collector__scan(struct collector *c, uint32_t only_tgid);

/* Delivers what the ring buffer holds, waiting up to timeout_ms (less when
 * a new process's maps are due to be read again). Returns as
 * sampler__poll. */
int collector__poll(struct collector *c, int timeout_ms);

/* Closes the open window (lost counts and BPF counters added) and opens the
 * next. Returns the closed window, which the caller now owns, or NULL when
 * the new window could not be made (the old one then stays open). */
struct agg_window *collector__rotate(struct collector *c);

/* c may be half open. */
void collector__close(struct collector *c);

#endif

/* The worker thread: takes closed windows from the main thread, names their
 * frames, writes one pprof per process and logs the window's summary. Symbol
 * loading happens here, so it never holds up sampling. */
#ifndef CODEXRAY_AGENT_WORKER_H
#define CODEXRAY_AGENT_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "aggregate.h"

struct shipper;

struct worker_opts {
    const char *output_dir;  /* NULL: no files */
    struct shipper *shipper; /* NULL: not shipped */
    const char *host;
    uint64_t period_ns;
    bool kernel_stacks;
    struct debuginfod *debuginfod; /* NULL: none; outlives the worker */
};

struct worker;

/* Starts the thread. NULL with errno set on failure. opts' strings must
 * outlive the worker. */
struct worker *worker__start(const struct worker_opts *opts);

/* Hands w over (the worker frees it). Never blocks for long: when the worker
 * is several windows behind, the oldest waiting one is dropped and logged. */
void worker__submit(struct worker *wk, struct agg_window *w);

/* Finishes every window handed over, then stops the thread. wk may be NULL. */
void worker__stop(struct worker *wk);

#endif

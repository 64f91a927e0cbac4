/* POST /api/v1/profiles: a request body (pprof, gzipped or not) checked,
 * turned into the store's terms and stored. */
#ifndef CODEXRAY_SERVER_INGEST_H
#define CODEXRAY_SERVER_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct ingest_limits {
    size_t max_memory;       /* bytes one request may take: all of the below, counted */
    size_t max_decompressed; /* bytes a gzipped body may inflate to */
    size_t max_ratio;        /* and at most this many times its size */
    size_t max_label_bytes;  /* a label key or value */
    size_t max_samples;      /* samples in one profile */
    size_t max_stack_depth;  /* frames in one stack, inlined frames included */
    size_t max_frames;       /* frames in all of a profile's distinct stacks */
};

/* Identity from the query string; NULL/0 = take it from the sample labels. */
struct ingest_identity {
    const char *service, *host;
    const char *identity[STORE_N_IDENTITY]; /* store_identity_keys' order */
    int64_t pid;
    /* The profile's other labels (store.h's rules, checked by the caller). */
    const struct store_label *labels;
    size_t nlabels;
    /* The start and duration when the profile has none (0): what a
     * Pyroscope client says in from and until. */
    int64_t time_ns, duration_ns;
    /* Only CPU: a profile without a cpu/nanoseconds sample type is refused
     * with 422 (a heap or wall-only profile is not CPU), its other types
     * are not kept, samples of no CPU (a wall profile's idle ones) are
     * dropped, and its period is taken only when its type is cpu. What a
     * Pyroscope client's upload takes; our agent's always has CPU. */
    bool cpu_only;
};

/* Returns the HTTP status: 202 stored (durably), 400 not a valid profile,
 * 413 past a limit, 422 no CPU in it (id->cpu_only), 503 the store is unavailable for now
 * (ClickHouse down or timing out: the agent retries), 500 the store failed. msg says why for
 * anything but 202. Nothing is stored unless 202. Identical samples (the same stack and labels) are
 * stored as one. Everything it allocates (the inflated body, tables, arrays, the store's put) is
 * counted against lim->max_memory: a call takes at most that beyond body, whatever the body holds.
 */
int ingest__profile(struct store *st, const void *body, size_t len,
                    const struct ingest_identity *id, const struct ingest_limits *lim, char *msg,
                    size_t msglen);

#endif

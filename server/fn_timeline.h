/* A function over time: the CPU of one function (by name) per step, self
 * and total, so that a regression shows as a step in its line. The SQLite
 * store computes it in one pass over the range (store_sqlite_fn.c); any
 * other store gets it composed here from one merge a step. */
#ifndef CODEXRAY_SERVER_FN_TIMELINE_H
#define CODEXRAY_SERVER_FN_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Steps the composed fallback (one store__merge a step) takes at most:
 * past it -E2BIG (ask for a larger step). The SQLite store has no such
 * limit beyond store__timeline's. */
#define FN_TIMELINE_MERGE_STEPS 1000

/* What a stack is to the function: FN_TOTAL when a frame is it, FN_SELF
 * too when its innermost frame is. */
enum { FN_TOTAL = 1, FN_SELF = 2 };

/* Feeds one frame of a stack, leaf first, to its class *cls (0 before
 * the first frame; *leaf_seen false): is_fn when the frame is the
 * function, hidden when it is an interpreter frame without a name that the
 * query takes out (then it is as if absent, as query__hide_interp makes
 * it). */
static inline void fn_timeline__frame(int *cls, bool *leaf_seen, bool is_fn, bool hidden)
{
    if (hidden)
        return;
    if (is_fn)
        *cls |= *leaf_seen ? FN_TOTAL : FN_TOTAL | FN_SELF;
    *leaf_seen = true;
}

/* The CPU of the function named fn in what q selects, per step_ns over
 * [q->from_ns, q->to_ns) (the steps of store__timeline: a profile falls in
 * the step its start is in): *self_ns and *total_ns, *nsteps entries each,
 * caller frees both. hide_interp: interpreter frames without a name taken
 * out of each stack first (the flame graph's interp=hidden). A name no
 * stack has gives zeros. Returns 0 or -errno (-EINVAL for a bad step or
 * range or an empty fn, -E2BIG for too many steps, -EAGAIN when the store
 * is unavailable). */
int fn_timeline__get(struct store *st, const struct store_query *q, int64_t step_ns, const char *fn,
                     bool hide_interp, int64_t **self_ns, int64_t **total_ns, size_t *nsteps);

#endif

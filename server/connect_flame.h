/* The flame graph of Pyroscope's querier API (FlameGraph: names, and
 * levels of [x offset from the previous node's end, total, self, name]
 * a node), built from the same tree as /api/v1/profile?format=flamegraph,
 * and the merge of several stores' answers into one. Only http_connect.c
 * uses it. */
#ifndef CODEXRAY_SERVER_CONNECT_FLAME_H
#define CODEXRAY_SERVER_CONNECT_FLAME_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct connect_flame {
    const char **names; /* "total", "other", then m's functions' names (borrowed from m) */
    size_t nnames;
    int64_t **levels; /* levels[d]: nvalues[d] int64s, four a node */
    size_t *nvalues;
    size_t nlevels;
    int64_t total, max_self;
};

/* The flame graph of m (folded to max_nodes when > 0: query.h) in f,
 * nodes in each level left to right, each inside its parent's span.
 * names borrow m's strings: m must outlive f. Returns 0 or -ENOMEM
 * (f then empty). */
int connect_flame__build(const struct store_merged *m, size_t max_nodes, struct connect_flame *f);
/* f may be zeroed; leaves it zeroed. */
void connect_flame__free(struct connect_flame *f);

/* One result of parts' stacks (n of them), functions of the same name and
 * file made one. Returns 0 or -ENOMEM; *out is the caller's
 * (store_merged__free). The parts are left as they were. */
int connect_flame__merge(struct store_merged *const *parts, size_t n, struct store_merged **out);

#endif

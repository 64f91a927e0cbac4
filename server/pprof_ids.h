/* pprof ids -> array indices, for ingest: an array indexed by id when the
 * ids are dense (as every writer makes them: 1..n), else a sorted array
 * searched by halving (no hash a sender could flood with colliding ids).
 * Its memory is counted against the request's budget. */
#ifndef CODEXRAY_SERVER_PPROF_IDS_H
#define CODEXRAY_SERVER_PPROF_IDS_H

#include <stddef.h>
#include <stdint.h>

#include "budget.h"

struct id_pair {
    uint64_t id;
    uint32_t idx;
};

struct id_index {
    uint32_t *dense; /* index + 1 per id, or NULL when sparse */
    struct id_pair *sparse;
    size_t n;
    uint64_t max_id;
};

/* Indexes a table's ids: n structs of `stride` bytes, each starting with
 * its uint64_t id. x must be zeroed. Returns 0; -ENOMEM; -E2BIG past the
 * budget (b->over set); -EBADMSG with msg saying why (an id 0, an id
 * twice). Free with id_index__free, also after a failure. */
int id_index__table(struct id_index *x, struct budget *b, const void *table, size_t n,
                    size_t stride, const char *what, char *msg, size_t msglen);

/* The index of id, or -1. */
static inline long id_index__find(const struct id_index *x, uint64_t id)
{
    if (x->dense)
        return id <= x->max_id && x->dense[id] ? (long)x->dense[id] - 1 : -1;
    size_t lo = 0, hi = x->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x->sparse[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < x->n && x->sparse[lo].id == id ? (long)x->sparse[lo].idx : -1;
}

/* Frees what x holds; x may be NULL or zeroed. */
void id_index__free(struct id_index *x);

#endif

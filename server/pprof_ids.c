#include "pprof_ids.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void id_index__free(struct id_index *x)
{
    if (!x)
        return;
    free(x->dense);
    free(x->sparse);
    memset(x, 0, sizeof(*x));
}

/* Room for n ids up to max_id. Returns 0, -E2BIG or -ENOMEM. */
static int id_init(struct id_index *x, struct budget *b, uint64_t max_id, size_t n)
{
    x->max_id = max_id;
    if (max_id <= 4 * (uint64_t)n + 1024)
        x->dense = budget__calloc(b, max_id + 1, sizeof(uint32_t));
    else
        x->sparse = budget__malloc(b, n + 1, sizeof(*x->sparse));
    if (x->dense || x->sparse)
        return 0;
    return b->over ? -E2BIG : -ENOMEM;
}

/* Adds id -> idx (at most the n of id_init). Returns 0, or 1 when a dense
 * index has the id already (a sparse one finds that in id_seal). */
static int id_put(struct id_index *x, uint64_t id, uint32_t idx)
{
    if (x->dense) {
        if (x->dense[id])
            return 1;
        x->dense[id] = idx + 1;
        return 0;
    }
    x->sparse[x->n++] = (struct id_pair){id, idx};
    return 0;
}

static int cmp_pair(const void *a, const void *b)
{
    const struct id_pair *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Ready for id_index__find once every id is in. Returns 0, or 1 with *dup
 * set to an id that is there twice. */
static int id_seal(struct id_index *x, uint64_t *dup)
{
    if (x->dense)
        return 0;
    qsort(x->sparse, x->n, sizeof(*x->sparse), cmp_pair);
    for (size_t i = 1; i < x->n; i++) {
        if (x->sparse[i].id == x->sparse[i - 1].id) {
            *dup = x->sparse[i].id;
            return 1;
        }
    }
    return 0;
}

int id_index__table(struct id_index *x, struct budget *b, const void *table, size_t n,
                    size_t stride, const char *what, char *msg, size_t msglen)
{
    uint64_t max_id = 0, id, dup;
    int e;

    for (size_t i = 0; i < n; i++) {
        memcpy(&id, (const char *)table + i * stride, sizeof(id));
        if (id == 0) {
            snprintf(msg, msglen, "%s with id 0", what);
            return -EBADMSG;
        }
        if (id > max_id)
            max_id = id;
    }
    if ((e = id_init(x, b, max_id, n)))
        return e;
    for (size_t i = 0; i < n; i++) {
        memcpy(&id, (const char *)table + i * stride, sizeof(id));
        if (id_put(x, id, i)) {
            snprintf(msg, msglen, "%s id %" PRIu64 " appears twice", what, id);
            return -EBADMSG;
        }
    }
    if (id_seal(x, &dup)) {
        snprintf(msg, msglen, "%s id %" PRIu64 " appears twice", what, dup);
        return -EBADMSG;
    }
    return 0;
}

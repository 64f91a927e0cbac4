/* A function over time (fn_timeline.h): the store's own pass when it has
 * one, else one merge a step. */
#include "fn_timeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/interp_frames.h"
#include "sat.h"

/* Sums step q (one merge) into *self and *total. */
static int merge_step(struct store *st, const struct store_query *q, const char *fn,
                      bool hide_interp, int64_t *self, int64_t *total)
{
    struct store_merged *m = NULL;
    unsigned char *flags = NULL; /* per function: 1 the function, 2 hidden */
    int err;

    if ((err = store__merge(st, q, &m)))
        return err;
    if (!(flags = calloc(m->nfunctions + 1, 1))) {
        err = -ENOMEM;
        goto out;
    }
    bool any = false;
    for (size_t f = 0; f < m->nfunctions; f++) {
        if (strcmp(m->functions[f].name, fn) == 0)
            flags[f] |= 1, any = true;
        if (hide_interp && cx__is_interp_file(m->functions[f].file))
            flags[f] |= 2;
    }
    for (size_t i = 0; any && i < m->nstacks; i++) {
        const struct store_merged_stack *s = &m->stacks[i];
        int cls = 0;
        bool leaf_seen = false;
        for (uint32_t j = 0; j < s->nframes; j++) {
            uint32_t f = s->frames[j];
            unsigned char fl = f < m->nfunctions ? flags[f] : 0;
            fn_timeline__frame(&cls, &leaf_seen, fl & 1, fl & 2);
        }
        int64_t v = store_value__of(m->value, s->cpu_ns, s->off_cpu_ns);
        if (cls & FN_TOTAL)
            sat__acc(total, v);
        if (cls & FN_SELF)
            sat__acc(self, v);
    }
out:
    free(flags);
    store_merged__free(m);
    return err;
}

int fn_timeline__get(struct store *st, const struct store_query *q, int64_t step_ns, const char *fn,
                     bool hide_interp, int64_t **self_ns, int64_t **total_ns, size_t *nsteps)
{
    int64_t *self = NULL, *total = NULL;
    int err = 0;

    *self_ns = *total_ns = NULL;
    *nsteps = 0;
    if (!fn || !*fn || step_ns <= 0 || q->to_ns <= q->from_ns)
        return -EINVAL;
    if (st->ops->fn_timeline)
        return st->ops->fn_timeline(st, q, step_ns, fn, hide_interp, self_ns, total_ns, nsteps);
    size_t n = (size_t)((q->to_ns - q->from_ns - 1) / step_ns) + 1;
    if (n > FN_TIMELINE_MERGE_STEPS)
        return -E2BIG;
    self = calloc(n, sizeof(*self));
    total = calloc(n, sizeof(*total));
    if (!self || !total) {
        err = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n && !err; i++) {
        struct store_query qs = *q;
        qs.from_ns = q->from_ns + (int64_t)i * step_ns;
        qs.to_ns = qs.from_ns + step_ns < q->to_ns ? qs.from_ns + step_ns : q->to_ns;
        err = merge_step(st, &qs, fn, hide_interp, &self[i], &total[i]);
    }
out:
    if (err) {
        free(self);
        free(total);
        return err;
    }
    *self_ns = self;
    *total_ns = total;
    *nsteps = n;
    return 0;
}

/* The SQLite store's function timeline (fn_timeline.h): per step, the
 * range's rollups and raw profiles summed by stack id (sqls_accumulate,
 * as a merge reads them), then each stack's CPU added to the function's
 * self or total by the stack's class. A stack's frames are read and
 * classed once for the whole range, not once a step, and nothing is named:
 * the cost is one merge's read of the blobs plus a lookup per stack a step. */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "../common/interp_frames.h"
#include "fn_timeline.h"
#include "sat.h"
#include "store_sqlite_int.h"

struct classes {
    sqlite3_stmt *q_stack, *q_fn;
    struct hmap *fns;    /* function id -> 1: the function (hidden ones left out) */
    struct hmap *hidden; /* function id -> 1 hidden, 2 not: looked up on first use */
    bool hide;
    unsigned char *dense; /* stack id -> class + 1; 0 not classed yet */
    uint64_t ndense;
    struct hmap *big; /* stack ids past dense -> class */
};

/* Whether function id is an interpreter frame the query hides. */
static int is_hidden(struct classes *c, uint64_t id, bool *out)
{
    bool fresh;
    long k;

    *out = false;
    if (!c->hide)
        return 0;
    if ((k = hmap__find(c->hidden, &id, sizeof(id))) >= 0) {
        *out = *hmap__val(c->hidden, k) == 1;
        return 0;
    }
    sqlite3_reset(c->q_fn);
    sqlite3_bind_int64(c->q_fn, 1, (int64_t)id);
    if (sqlite3_step(c->q_fn) == SQLITE_ROW)
        *out = cx__is_interp_file((const char *)sqlite3_column_text(c->q_fn, 1));
    sqlite3_reset(c->q_fn);
    if ((k = hmap__put(c->hidden, &id, sizeof(id), &fresh)) < 0)
        return -ENOMEM;
    *hmap__val(c->hidden, k) = *out ? 1 : 2;
    return 0;
}

/* The class of stack sid: its frames read once, then cached. */
static int class_of(struct classes *c, uint64_t sid, int *cls)
{
    long k = -1;
    bool fresh;

    if (sid < c->ndense && c->dense[sid]) {
        *cls = c->dense[sid] - 1;
        return 0;
    }
    if (sid >= c->ndense && (k = hmap__find(c->big, &sid, sizeof(sid))) >= 0) {
        *cls = (int)*hmap__val(c->big, k);
        return 0;
    }
    *cls = 0;
    sqlite3_reset(c->q_stack);
    sqlite3_bind_int64(c->q_stack, 1, (int64_t)sid);
    if (sqlite3_step(c->q_stack) == SQLITE_ROW) {
        const unsigned char *p = sqlite3_column_blob(c->q_stack, 0);
        const unsigned char *end = p ? p + sqlite3_column_bytes(c->q_stack, 0) : p;
        bool leaf_seen = false;
        uint64_t fid;
        while (p && p < end && (p = varint__get(p, end, &fid))) {
            bool hidden = false;
            if (!leaf_seen && is_hidden(c, fid, &hidden)) {
                sqlite3_reset(c->q_stack);
                return -ENOMEM;
            }
            fn_timeline__frame(cls, &leaf_seen, hmap__find(c->fns, &fid, sizeof(fid)) >= 0, hidden);
        }
    }
    sqlite3_reset(c->q_stack);
    if (sid < c->ndense) {
        c->dense[sid] = (unsigned char)(*cls + 1);
    } else {
        if ((k = hmap__put(c->big, &sid, sizeof(sid), &fresh)) < 0)
            return -ENOMEM;
        *hmap__val(c->big, k) = (uint64_t)*cls;
    }
    return 0;
}

/* The ids of the functions named fn (without the hidden ones) into c->fns;
 * *any false when there are none. */
static int find_fns(sqlite3 *db, struct classes *c, const char *fn, bool *any)
{
    sqlite3_stmt *q = NULL;
    int err = 0, rc;

    *any = false;
    if (sqlite3_prepare_v2(db, "SELECT id, file FROM functions WHERE name = ?", -1, &q, NULL) !=
        SQLITE_OK)
        return -EIO;
    sqlite3_bind_text(q, 1, fn, -1, SQLITE_STATIC);
    while (!err && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        uint64_t id = (uint64_t)sqlite3_column_int64(q, 0);
        bool fresh;
        if (c->hide && cx__is_interp_file((const char *)sqlite3_column_text(q, 1)))
            continue; /* taken out of every stack: never counted */
        if (hmap__put(c->fns, &id, sizeof(id), &fresh) < 0)
            err = -ENOMEM;
        *any = true;
    }
    if (!err && rc != SQLITE_DONE)
        err = -EIO;
    sqlite3_finalize(q);
    return err;
}

/* Empties a for the next step, keeping its dense index's memory. */
static int acc_reset(struct merge_acc *a)
{
    for (size_t i = 0; i < a->nvals; i++)
        if (a->vals[i].sid < a->ndense)
            a->dense[a->vals[i].sid] = 0;
    a->nvals = 0;
    if (hmap__len(a->stacks)) {
        hmap__free(a->stacks);
        if (!(a->stacks = hmap__new()))
            return -ENOMEM;
    }
    return 0;
}

static int steps(struct sqlite_store *st, const struct store_query *q, int64_t step_ns,
                 const char *fn, struct classes *c, int64_t *self, int64_t *total, size_t n)
{
    struct merge_acc a = {0};
    bool any;
    int err;

    if ((err = find_fns(st->rdb, c, fn, &any)) || !any)
        return err;
    if ((err = sqls_acc_init(&a, st->rdb)))
        goto out;
    c->ndense = a.ndense;
    if (a.ndense && !(c->dense = calloc(a.ndense, 1))) {
        err = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct store_query qs = *q;
        int64_t profiles = 0;
        qs.from_ns = q->from_ns + (int64_t)i * step_ns;
        qs.to_ns = qs.from_ns + step_ns < q->to_ns ? qs.from_ns + step_ns : q->to_ns;
        if ((err = sqls_accumulate(&st->rd, &qs, SQLS_LEVELS, &a, &profiles)))
            goto out;
        for (size_t v = 0; v < a.nvals; v++) {
            int cls;
            if ((err = class_of(c, a.vals[v].sid, &cls)))
                goto out;
            /* The query's time: CPU, off-CPU, or both (wall). */
            int64_t val = store_value__of(q->value, a.vals[v].cpu, a.vals[v].off);
            if (cls & FN_TOTAL)
                sat__acc(&total[i], val);
            if (cls & FN_SELF)
                sat__acc(&self[i], val);
        }
        if ((err = acc_reset(&a)))
            goto out;
    }
out:
    sqls_acc_free(&a);
    return err;
}

int sqls_fn_timeline(struct store *s, const struct store_query *q, int64_t step_ns, const char *fn,
                     bool hide_interp, int64_t **self_ns, int64_t **total_ns, size_t *nsteps)
{
    struct sqlite_store *st = S(s);
    struct classes c = {.hide = hide_interp};
    int64_t *self = NULL, *total = NULL;
    int err;

    *self_ns = *total_ns = NULL;
    *nsteps = 0;
    if (step_ns <= 0 || q->to_ns <= q->from_ns || !fn)
        return -EINVAL;
    size_t n = (size_t)((q->to_ns - q->from_ns - 1) / step_ns) + 1;
    if (n > 100000)
        return -E2BIG;
    self = calloc(n, sizeof(*self));
    total = calloc(n, sizeof(*total));
    c.fns = hmap__new();
    c.hidden = hmap__new();
    c.big = hmap__new();
    if (!self || !total || !c.fns || !c.hidden || !c.big) {
        err = -ENOMEM;
        goto out_nolock;
    }
    c.q_stack = st->q_stack;
    c.q_fn = st->q_fn;
    pthread_mutex_lock(&st->rmu);
    /* One read transaction: every step and every stack of one moment. */
    if (sqlite3_exec(st->rdb, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        err = -EIO;
    } else {
        err = steps(st, q, step_ns, fn, &c, self, total, n);
        sqlite3_reset(st->q_stack);
        sqlite3_reset(st->q_fn);
        sqlite3_exec(st->rdb, "COMMIT", NULL, NULL, NULL);
    }
    pthread_mutex_unlock(&st->rmu);
out_nolock:
    hmap__free(c.fns);
    hmap__free(c.hidden);
    hmap__free(c.big);
    free(c.dense);
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

/* Groups for the ClickHouse store (store__group_begin/end): the puts of a
 * group, one thread's, make rows into the group alone, and its end hands
 * them to the batch writer (store_clickhouse_batch.c) at once: one INSERT
 * per table for a whole batch upload instead of one per table per profile
 * (ClickHouse wants few large inserts; each costs it parts on every shard). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "../common/log.h"
#include "store_clickhouse_int.h"

/* A key whose row the group holds, and the day it was made for. */
struct pending {
    struct stack_key key;
    int64_t day;
};

struct ch_group {
    struct ch_store *st;
    /* Held by a put from its look-ups in the group to its rows added
     * (chs_group__lock): threads that joined the group put at once. */
    pthread_mutex_t mu;
    struct buf rows[CH_N_INSERTS]; /* RowBinary rows of the puts so far */
    size_t bytes;
    /* Keys (day + 1) whose rows the group holds, so a later put of it
     * does not send them again; remembered in the store's caches only
     * once ClickHouse acknowledged them. */
    struct stack_keymap *fns, *stacks;
    struct buf pend_fns, pend_stacks; /* struct pending, in order */
    int failed;                       /* 0, or the error of a write of it that failed */
    /* Announced to the batch writer (chs_batch__arrive) from its begin
     * until its rows are submitted: a batch about to be written waits a
     * little for a group still being decoded (store_clickhouse_batch.c),
     * so concurrent uploads share INSERTs. */
    bool arrived;
};

/* The calling thread's open group (one at a time, store.h). */
static _Thread_local struct ch_group *current;

static void group_free(struct ch_group *g)
{
    if (!g)
        return;
    for (int i = 0; i < CH_N_INSERTS; i++)
        buf__free(&g->rows[i]);
    stack_keymap__free(g->fns);
    stack_keymap__free(g->stacks);
    buf__free(&g->pend_fns);
    buf__free(&g->pend_stacks);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

int chs_group__begin(struct store *s, char *err, size_t errlen)
{
    struct ch_group *g;

    if (current) {
        snprintf(err, errlen, "a group is already open on this thread");
        return -EBUSY;
    }
    g = calloc(1, sizeof(*g));
    if (g) {
        pthread_mutex_init(&g->mu, NULL);
        g->st = CH(s);
        for (int i = 0; i < CH_N_INSERTS; i++)
            buf__init(&g->rows[i], CH_MAX_STATEMENT);
        buf__init(&g->pend_fns, CH_MAX_STATEMENT);
        buf__init(&g->pend_stacks, CH_MAX_STATEMENT);
        g->fns = stack_keymap__new(SIZE_MAX);
        g->stacks = stack_keymap__new(SIZE_MAX);
    }
    if (!g || !g->fns || !g->stacks) {
        group_free(g);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    chs_batch__arrive(g->st);
    g->arrived = true;
    current = g;
    return 0;
}

void *chs_group__share(struct store *s)
{
    return chs_group__current(CH(s));
}

void chs_group__join(struct store *s, void *group)
{
    (void)s;
    current = group;
}

void chs_group__lock(struct ch_group *g)
{
    pthread_mutex_lock(&g->mu);
}

void chs_group__unlock(struct ch_group *g)
{
    pthread_mutex_unlock(&g->mu);
}

struct ch_group *chs_group__current(struct ch_store *st)
{
    return current && current->st == st ? current : NULL;
}

bool chs_group__has(const struct ch_group *g, bool stack, struct stack_key key, int64_t day)
{
    return stack_keymap__get(stack ? g->stacks : g->fns, key) == day + 1;
}

/* Writes the group's rows, and on success remembers its keys in the
 * store's caches. The group is then empty (also on failure, recorded). */
static int group_flush(struct ch_group *g)
{
    struct ch_store *st = g->st;
    int err = 0;

    if (g->failed)
        return g->failed;
    if (g->bytes) {
        g->arrived = false; /* the submit takes the announcement */
        err = chs_batch__submit(st, g->rows);
    }
    if (err) {
        g->failed = err == -ENOMEM ? -ENOMEM : -EAGAIN;
    } else {
        const struct pending *f = (const void *)g->pend_fns.data;
        const struct pending *k = (const void *)g->pend_stacks.data;
        size_t nf = g->pend_fns.len / sizeof(*f), nk = g->pend_stacks.len / sizeof(*k);
        /* A full cache empties itself (stack_keymap): nothing lost but
         * rows sent again, which collapse. */
        pthread_mutex_lock(&st->mu);
        for (size_t i = 0; i < nf; i++)
            if (stack_keymap__put(st->fns, f[i].key, f[i].day + 1))
                break;
        for (size_t i = 0; i < nk; i++)
            if (stack_keymap__put(st->stacks, k[i].key, k[i].day + 1))
                break;
        pthread_mutex_unlock(&st->mu);
    }
    for (int i = 0; i < CH_N_INSERTS; i++)
        g->rows[i].len = 0;
    g->bytes = g->pend_fns.len = g->pend_stacks.len = 0;
    stack_keymap__clear(g->fns);
    stack_keymap__clear(g->stacks);
    return g->failed;
}

/* Records key (of a row now in the group) as held for day. */
static int hold(struct stack_keymap *m, struct buf *pend, struct stack_key key, int64_t day)
{
    struct pending p = {key, day};
    int err = buf__append(pend, &p, sizeof(p));

    if (!err && (err = stack_keymap__put(m, key, day + 1)))
        pend->len -= sizeof(p);
    return err;
}

int chs_group__add(struct ch_group *g, const struct buf rows[CH_N_INSERTS],
                   const struct store_profile *p, const bool *want_fn, const bool *want_st)
{
    int64_t day = p->time_ns / CH_DAY_NS;
    size_t n = 0, old[CH_N_INSERTS], ofn = g->pend_fns.len, ost = g->pend_stacks.len;
    int err = 0;

    if (g->failed)
        return g->failed;
    for (int i = 0; i < CH_N_INSERTS; i++)
        n += rows[i].len;
    /* Past the group's cap: what it holds is written first (its keys
     * then in the caches, as this put's rows, made without them, need). */
    if (g->bytes && g->bytes + n > CH_GROUP_MAX) {
        if ((err = group_flush(g)))
            return err;
        chs_batch__arrive(g->st); /* the rest of the group is on its way */
        g->arrived = true;
    }
    for (int i = 0; i < CH_N_INSERTS; i++)
        old[i] = g->rows[i].len;
    for (int i = 0; i < CH_N_INSERTS && !err; i++)
        err = buf__append(&g->rows[i], rows[i].data, rows[i].len);
    for (size_t i = 0; i < p->nfunctions && !err; i++)
        if (want_fn[i])
            err = hold(g->fns, &g->pend_fns, p->functions[i].key, day);
    for (size_t i = 0; i < p->nstacks && !err; i++)
        if (want_st[i])
            err = hold(g->stacks, &g->pend_stacks, p->stacks[i].key, day);
    if (err) {
        /* Nothing of this put stays; its keys held are forgotten (the
         * group's keymaps then miss a few keys: only rows sent again). */
        for (int i = 0; i < CH_N_INSERTS; i++)
            g->rows[i].len = old[i];
        const struct pending *f = (const void *)g->pend_fns.data;
        for (size_t i = ofn / sizeof(*f); i < g->pend_fns.len / sizeof(*f); i++)
            stack_keymap__del(g->fns, f[i].key);
        const struct pending *k = (const void *)g->pend_stacks.data;
        for (size_t i = ost / sizeof(*k); i < g->pend_stacks.len / sizeof(*k); i++)
            stack_keymap__del(g->stacks, k[i].key);
        g->pend_fns.len = ofn;
        g->pend_stacks.len = ost;
        return err;
    }
    g->bytes += n;
    return 0;
}

int chs_group__end(struct store *s, char *err, size_t errlen)
{
    struct ch_group *g = current;
    int ret;

    if (!g || g->st != CH(s)) {
        snprintf(err, errlen, "no group open on this thread");
        return -EINVAL;
    }
    current = NULL;
    ret = group_flush(g);
    if (g->arrived) /* nothing submitted since: no longer on its way */
        chs_batch__leave(g->st);
    if (ret)
        snprintf(err, errlen, "%s",
                 ret == -ENOMEM ? "out of memory"
                                : "clickhouse did not take the group's rows "
                                  "(see the log)");
    group_free(g);
    return ret;
}

/* Group commit for the ClickHouse store: the puts that arrive while a batch
 * is written join the next, which one of them writes once the first is
 * done (store_clickhouse_int.h, chs_batch__submit). One client waits for
 * its own INSERTs as before; many share theirs. */
#include <errno.h>
#include <stdlib.h>

#include "../common/log.h"
#include "store_clickhouse_int.h"

static const char *const table_of[CH_N_INSERTS] = {
    "functions (key_a, key_b, name, file)",
    "stacks (key_a, key_b, fa, fb)",
    "samples (app, time_ns, host, pid, labels, stack_a, stack_b, labelset, samples, cpu_ns)",
    "profiles (app, time_ns, host, pid, labels, duration_ns, period_ns, samples, cpu_ns, "
    "bytes_in)",
};

/* The most rows text one batch gathers before later puts wait for the next. */
#define BATCH_MAX (256u << 20)

struct ch_batch {
    struct buf sql[CH_N_INSERTS]; /* "INSERT INTO db.t (...) FORMAT RowBinary" and the rows */
    size_t bytes;
    int refs; /* puts in it that have not returned */
    bool done;
    int result;
};

void chs_batch__free(struct ch_batch *b)
{
    if (!b)
        return;
    for (int i = 0; i < CH_N_INSERTS; i++)
        buf__free(&b->sql[i]);
    free(b);
}

/* Appends rows to b. Returns 0 or -E2BIG/-ENOMEM (b unchanged in what it
 * will write: a table's text is cut back). */
static int batch_add(struct ch_store *st, struct ch_batch *b, const struct buf rows[CH_N_INSERTS])
{
    size_t old[CH_N_INSERTS];
    int err = 0;

    for (int i = 0; i < CH_N_INSERTS; i++)
        old[i] = b->sql[i].len;
    for (int i = 0; i < CH_N_INSERTS && !err; i++) {
        if (!rows[i].len)
            continue;
        /* The statement's text, then its rows as bytes (RowBinary). */
        if (!b->sql[i].len)
            err = ch_sql__appendf(&b->sql[i], "INSERT INTO %s.%s FORMAT RowBinary\n", st->db,
                                  table_of[i]);
        if (!err)
            err = buf__append(&b->sql[i], rows[i].data, rows[i].len);
    }
    if (err) {
        for (int i = 0; i < CH_N_INSERTS; i++)
            b->sql[i].len = old[i];
        return err;
    }
    for (int i = 0; i < CH_N_INSERTS; i++)
        b->bytes += rows[i].len;
    return 0;
}

/* Writes b's INSERTs in order, stopping at the first failure. */
static int batch_write(struct ch_store *st, struct ch_batch *b)
{
    for (int i = 0; i < CH_N_INSERTS; i++)
        if (b->sql[i].len && chs_exec(st, 0, &b->sql[i], NULL))
            return -EAGAIN;
    return 0;
}

int chs_batch__submit(struct ch_store *st, const struct buf rows[CH_N_INSERTS])
{
    struct ch_batch *mine;
    int err;

    pthread_mutex_lock(&st->bmu);
    /* A full open batch: wait for it to go (it will: someone writes it). */
    while (st->open && st->open->bytes >= BATCH_MAX)
        pthread_cond_wait(&st->bcv, &st->bmu);
    if (!st->open) {
        st->open = calloc(1, sizeof(*st->open));
        if (!st->open) {
            pthread_mutex_unlock(&st->bmu);
            return -ENOMEM;
        }
        for (int i = 0; i < CH_N_INSERTS; i++)
            buf__init(&st->open->sql[i], CH_MAX_STATEMENT);
    }
    mine = st->open;
    if ((err = batch_add(st, mine, rows))) {
        pthread_mutex_unlock(&st->bmu);
        return err;
    }
    mine->refs++;
    while (!mine->done) {
        if (st->writing) {
            pthread_cond_wait(&st->bcv, &st->bmu);
            continue;
        }
        /* Nothing being written: mine is the open batch; write it. */
        struct ch_batch *b = st->open;
        st->open = NULL;
        st->writing = true;
        pthread_mutex_unlock(&st->bmu);
        int r = batch_write(st, b);
        pthread_mutex_lock(&st->bmu);
        b->result = r;
        b->done = true;
        st->writing = false;
        pthread_cond_broadcast(&st->bcv);
    }
    err = mine->result;
    if (--mine->refs == 0)
        chs_batch__free(mine);
    pthread_mutex_unlock(&st->bmu);
    return err;
}

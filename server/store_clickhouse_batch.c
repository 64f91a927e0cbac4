/* Group commit for the ClickHouse store: the puts that arrive while a batch
 * is written join the next, which one of them writes once the first is
 * done (store_clickhouse_int.h, chs_batch__submit). One client waits for
 * its own INSERTs as before; many share theirs. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "../common/log.h"
#include "store_clickhouse_int.h"

static const char *const table_of[CH_N_INSERTS] = {
    "functions (day, key_a, key_b, name, file)",
    "stacks (day, key_a, key_b, fa, fb)",
    "psamples (app, time_ns, host, pid, labels, labelset, stack_a, stack_b, samples, cpu_ns, "
    "off_cpu_ns)",
    "profiles (app, time_ns, host, pid, labels, duration_ns, period_ns, samples, cpu_ns, "
    "bytes_in, off_cpu_ns)",
};

/* The most rows text one batch gathers before later puts wait for the next. */
#define BATCH_MAX (256u << 20)
/* How long a writer holds its batch open for puts and groups on their
 * way (they announced themselves, chs_batch__arrive; a group from its
 * begin, so while its profiles are decoded): each batch's four INSERTs
 * cost ClickHouse 13-18 ms of CPU beyond their rows (parts on every shard,
 * merged later; docs/clickhouse.md), so a fleet's many small requests
 * (a node's window each) are worth gathering; never when nothing is
 * coming, so one client alone waits for nothing. */
#define LINGER_NS (25ll * 1000000)

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

struct write_one {
    struct ch_store *st;
    int table;
    const struct buf *sql;
    int result;
};

static void *write_thread(void *arg)
{
    struct write_one *w = arg;
    w->result = chs_shards__exec(w->st, w->table, w->sql) ? -EAGAIN : 0;
    return NULL;
}

/* Writes b's INSERTs: functions, stacks and samples at once (each is its
 * own round trip (one a shard when they go to the shards directly:
 * store_clickhouse_shards.c) and its own parts on every shard; nothing orders them
 * but a merge's join, which drops samples whose stack is not yet there),
 * then, once all three are acknowledged, the profiles: a rollup that
 * counts a profile must find its samples (store_clickhouse_rollup.c). */
static int batch_write(struct ch_store *st, struct ch_batch *b)
{
    struct write_one w[CH_PROFILES];
    pthread_t th[CH_PROFILES];
    bool started[CH_PROFILES] = {false};
    int err = 0;

    for (int i = 0; i < CH_PROFILES; i++) {
        w[i] = (struct write_one){st, i, &b->sql[i], 0};
        if (!b->sql[i].len)
            continue;
        /* The last one present runs here; the others in threads (or here
         * as well when no thread can be had). */
        bool later = false;
        for (int j = i + 1; j < CH_PROFILES; j++)
            later |= b->sql[j].len > 0;
        if (later && pthread_create(&th[i], NULL, write_thread, &w[i]) == 0)
            started[i] = true;
        else
            write_thread(&w[i]);
    }
    for (int i = 0; i < CH_PROFILES; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        if (w[i].result)
            err = -EAGAIN;
    }
    if (!err && b->sql[CH_PROFILES].len && chs_shards__exec(st, CH_PROFILES, &b->sql[CH_PROFILES]))
        err = -EAGAIN;
    return err;
}

void chs_batch__arrive(struct ch_store *st)
{
    pthread_mutex_lock(&st->bmu);
    st->arriving++;
    pthread_mutex_unlock(&st->bmu);
}

void chs_batch__leave(struct ch_store *st)
{
    pthread_mutex_lock(&st->bmu);
    st->arriving--;
    pthread_cond_broadcast(&st->bcv);
    pthread_mutex_unlock(&st->bmu);
}

/* Under bmu, with st->writing set by the caller: waits up to LINGER_NS
 * while puts that arrived are still to join the open batch. */
static void linger(struct ch_store *st)
{
    struct timespec until;

    if (!st->arriving)
        return;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += LINGER_NS;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    while (st->arriving && st->open && st->open->bytes < BATCH_MAX)
        if (pthread_cond_timedwait(&st->bcv, &st->bmu, &until) == ETIMEDOUT)
            break;
}

int chs_batch__submit(struct ch_store *st, const struct buf rows[CH_N_INSERTS])
{
    struct ch_batch *mine;
    int err;

    pthread_mutex_lock(&st->bmu);
    st->arriving--; /* chs_batch__arrive's: here, joined or failed */
    pthread_cond_broadcast(&st->bcv);
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
        /* Nothing being written: mine is the open batch; write it, once
         * the puts on their way have joined it (a few ms at most). */
        st->writing = true;
        linger(st);
        struct ch_batch *b = st->open;
        st->open = NULL;
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

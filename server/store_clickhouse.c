/* The ClickHouse store: everything in a ClickHouse database (--clickhouse URL,
 * --clickhouse-database, default codexray), over its HTTP interface with
 * libcurl. SQL runs on ClickHouse 18.16 (Debian's) and on today's releases:
 * MergeTree engines with PARTITION BY / ORDER BY, arrays, TabSeparated
 * answers. Values from requests reach query text through ch_sql__quote
 * alone; inserted rows go as RowBinary (bytes, no SQL text at all).
 *
 * Tables (made by store_clickhouse_schema.c; with --clickhouse-cluster C:
 * each is T_local on every node and a Distributed T over them, sharded as
 * said; rows go into and queries read T):
 *   meta(draw, k, v)            the stack key bases; several servers may draw
 *                               at once: the smallest draw wins for all; and
 *                               the schema version (draw 0, 'schema_version')
 *   functions(day, key_a, key_b, name, file)       by function key, sharded by key_a
 *   stacks(day, key_a, key_b, fa, fb)              frames as function keys (the
 *                                                  a and b lanes), leaf first
 * functions and stacks are partitioned by day (the day of the profiles that
 * use them): a put stores each key again on the first use of a day (the
 * caches hold the day each was stored for), so every day's samples and
 * rollups find their stacks in that day's partition, a merge looks up only
 * its days' partitions, and retention drops stacks and functions with the
 * samples; the cost is a key stored once a day it is used, not once.
 *   profiles(app, time_ns, host, pid, duration_ns, period_ns, samples, cpu_ns,
 *            bytes_in, labels, off_cpu_ns)         sharded by app
 *   psamples(app, time_ns, host, pid, labels, labelset, stack_a[], stack_b[],
 *            samples[], cpu_ns[], off_cpu_ns[])  a row a profile and label set,
 *                                                  its stacks as arrays (a stack
 *                                                  a row cost ClickHouse 3x the
 *                                                  CPU); sharded by profile (app,
 *                                                  host, pid, time_ns): one upload's
 *                                                  rows make a part on one shard,
 *                                                  not on all; a retry lands on the
 *                                                  same shard, where it collapses
 * where labels are the identity labels ("\x1fk=v\x1f", store_identity__text), then
 * the profile's other labels (store_profile__labels_text),
 * and labelset the stack's own labels (store_labelset__text). All are
 * ReplacingMergeTree by their whole identity: a stack or function stored
 * twice, and a retried upload (the same app, host, pid and start time: one
 * process's minute), collapse into one row; queries read with FINAL, so a
 * retry is never counted twice even before ClickHouse merges the parts.
 * profiles and psamples are partitioned by day, so retention drops whole
 * partitions (days wholly before the cutoff).
 *
 * A put inserts new functions, new stacks, the samples and the profile row
 * (with the puts of its batch: store_clickhouse_batch.c), the first three
 * at once and the profile row once they are acknowledged by ClickHouse
 * (insert_distributed_sync=1 on a cluster); a failure anywhere fails the put
 * (503), and the agent's retry writes the same rows again, which collapse.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/list.h"
#include "../common/log.h"
#include "store_clickhouse_int.h"
#include "store_common.h"

#define CONNECT_TIMEOUT_MS 3000

/* --- HTTP --- */

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
    struct buf *b = ctx;
    return buf__append(b, p, size * n) ? 0 : size * n;
}

/* A statement's own connection cost a TCP handshake and ClickHouse's
 * accepting it before each INSERT and query: a statement takes an idle
 * curl handle of its node, whose connection libcurl keeps open (it checks
 * that one is alive before reusing it, and connects anew if it died;
 * ClickHouse closes an idle one after its keep_alive_timeout). A handle
 * is one thread's at a time: libcurl 7.88's connection cache shared
 * between threads (CURL_LOCK_DATA_CONNECT) is a known bug, not thread-safe.
 * NULL when none is idle and no new one can be made. */
static CURL *handle_take(struct ch_store *st, size_t node)
{
    CURL *c = NULL;

    pthread_mutex_lock(&st->idle_mu);
    if (st->idle && st->idle[node].n)
        c = st->idle[node].h[--st->idle[node].n];
    pthread_mutex_unlock(&st->idle_mu);
    return c ? c : curl_easy_init();
}

/* Gives c (NULL: nothing) back to node's idle handles, its options reset
 * and its connection kept; past CH_IDLE_MAX idle ones it is closed. */
static void handle_give(struct ch_store *st, size_t node, CURL *c)
{
    if (!c)
        return;
    curl_easy_reset(c); /* options only: the connection stays */
    pthread_mutex_lock(&st->idle_mu);
    if (st->idle && st->idle[node].n < CH_IDLE_MAX) {
        st->idle[node].h[st->idle[node].n++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&st->idle_mu);
    curl_easy_cleanup(c);
}

/* Fills why (when given) with the reason and logs it. */
static void fail(const struct ch_store *st, size_t node, char *why, size_t whylen, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));
static void fail(const struct ch_store *st, size_t node, char *why, size_t whylen, const char *fmt,
                 ...)
{
    char text[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    log_error("clickhouse: %s: %s", st->nodes[node], text);
    if (why)
        snprintf(why, whylen, "%s", text);
}

int chs_exec_why(struct ch_store *st, size_t node, const char *params, const struct buf *sql,
                 struct buf *answer, char *why, size_t whylen)
{
    struct buf scratch;
    struct buf *out = answer ? answer : &scratch;
    char url[CH_MAX_URL + 400];
    long status = 0;
    int err = -EAGAIN;

    buf__init(&scratch, 1 << 16);
    buf__reset(out);
    CURL *c = handle_take(st, node);
    if (!c) {
        fail(st, node, why, whylen, "no curl handle");
        goto out;
    }
    /* On a cluster, a Distributed insert returns once every shard has its rows. */
    const char *sync = st->cluster[0] ? "insert_distributed_sync=1" : "";
    snprintf(url, sizeof(url), "%s/?%s%s%s", st->nodes[node], sync, *sync && params ? "&" : "",
             params ? params : "");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, sql->data ? sql->data : "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)sql->len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, st->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        fail(st, node, why, whylen, "%s",
             rc == CURLE_WRITE_ERROR ? "answer too large" : curl_easy_strerror(rc));
        curl_easy_cleanup(c); /* its connection is not kept: it may be broken */
        c = NULL;
        goto out;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        /* ClickHouse's error text: its first line says what. */
        size_t n = out->len < 400 ? out->len : 400;
        const char *nl = out->data ? memchr(out->data, '\n', n) : NULL;
        fail(st, node, why, whylen, "HTTP %ld: %.*s", status, (int)(nl ? nl - out->data : (long)n),
             out->data ? out->data : "");
        goto out;
    }
    /* ClickHouse acknowledges a statement without an answer by an empty
     * body: anything else is not ClickHouse's acknowledgement. */
    if (!answer && out->len) {
        fail(st, node, why, whylen, "an answer where none was due: %.80s", out->data);
        goto out;
    }
    err = 0;
out:
    handle_give(st, node, c);
    buf__free(&scratch);
    return err;
}

int chs_exec(struct ch_store *st, size_t node, const struct buf *sql, struct buf *answer)
{
    return chs_exec_why(st, node, NULL, sql, answer, NULL, 0);
}

int chs_ddl(struct ch_store *st, size_t node, const struct buf *sql, char *why, size_t whylen)
{
    if (!st->on_cluster)
        return chs_exec_why(st, node, NULL, sql, NULL, why, whylen);

    /* ON CLUSTER: ClickHouse answers with a row per node (host, port,
     * status, error, ...) once all have run it, or errs when one failed or
     * did not answer in time: that wait ends before our request's timeout,
     * so the error says which nodes did not run it. The answer is held
     * back to its end, so a late error is an HTTP error, not a cut body. */
    char params[100];
    struct buf ans;
    long wait_s = st->timeout_ms / 1000 - 1;
    int err;

    snprintf(params, sizeof(params), "wait_end_of_query=1&distributed_ddl_task_timeout=%ld",
             wait_s < 1 ? 1L : wait_s);
    buf__init(&ans, 1 << 20);
    if ((err = chs_exec_why(st, node, params, sql, &ans, why, whylen)))
        goto out;
    struct ch_tsv t;
    char *f[8];
    int n;
    ch_tsv__init(&t, ans.data, ans.len);
    while ((n = ch_tsv__row(&t, f, 8)) >= 4) {
        if (strcmp(f[2], "0")) {
            fail(st, node, why, whylen, "ON CLUSTER %s: node %s:%s: status %s: %.300s", st->cluster,
                 f[0], f[1], f[2], f[3]);
            err = -EAGAIN;
            goto out;
        }
    }
    if (n != 0) {
        fail(st, node, why, whylen, "ON CLUSTER %s: not an answer of distributed DDL: %.80s",
             st->cluster, ans.data ? ans.data : "");
        err = -EAGAIN;
    }
out:
    buf__free(&ans);
    return err;
}

/* --- open --- */

/* The bases of the smallest draw of this key version; a store without any
 * gets ours, then reads again, so servers starting together agree. */
static int open_keys(struct ch_store *st, char *err, size_t errlen)
{
    const char *const *names = store_key_base_names;
    struct buf sql, ans;
    uint64_t base[STACK_HASHER_BASES];
    int rc = -EAGAIN;

    buf__init(&sql, 1 << 16);
    buf__init(&ans, 1 << 20);
    for (int attempt = 0; attempt < 2; attempt++) {
        uint64_t best = UINT64_MAX, got_draw = 0;
        int got = 0;
        buf__reset(&sql);
        if (ch_sql__appendf(&sql,
                            "SELECT draw, k, v FROM %s.meta WHERE draw GLOBAL IN (SELECT draw FROM "
                            "%s.meta WHERE k = 'stack_key_version' AND v = %d) FORMAT TabSeparated",
                            st->db, st->db, STACK_KEY_VERSION) ||
            chs_exec(st, 0, &sql, &ans)) {
            snprintf(err, errlen, "clickhouse: cannot read the stack key bases");
            goto out;
        }
        struct ch_tsv t;
        char *f[3];
        int n;
        ch_tsv__init(&t, ans.data, ans.len);
        /* Rows of the smallest draw that has all four bases. */
        while ((n = ch_tsv__row(&t, f, 3)) == 3) {
            uint64_t draw, v;
            if (ch_tsv__u64(f[0], &draw) || ch_tsv__u64(f[2], &v))
                break;
            for (int i = 0; i < STACK_HASHER_BASES; i++)
                if (strcmp(f[1], names[i]) == 0 && draw <= best) {
                    if (draw < best)
                        got = 0;
                    best = draw;
                    base[i] = v;
                    got |= 1 << i;
                }
        }
        if (n != 0) {
            snprintf(err, errlen, "clickhouse: a garbled answer reading the stack key bases");
            goto out;
        }
        if (got == (1 << STACK_HASHER_BASES) - 1) {
            got_draw = best;
            if (stack_hasher__init(&st->hasher, base)) {
                snprintf(err, errlen, "out of memory");
                rc = -ENOMEM;
                goto out;
            }
            log_info("store: clickhouse stack key bases of draw %llu",
                     (unsigned long long)got_draw);
            rc = 0;
            goto out;
        }
        uint64_t draw;
        if (stack_hasher__new_bases(base) || getentropy(&draw, sizeof(draw))) {
            snprintf(err, errlen, "no random bytes for the stack keys");
            goto out;
        }
        buf__reset(&sql);
        if (ch_sql__appendf(&sql,
                            "INSERT INTO %s.meta (draw, k, v) VALUES (%llu, 'stack_key_version', "
                            "%d), (%llu, '%s', %llu), (%llu, '%s', %llu), (%llu, '%s', %llu), "
                            "(%llu, '%s', %llu)",
                            st->db, (unsigned long long)draw, STACK_KEY_VERSION,
                            (unsigned long long)draw, names[0], (unsigned long long)base[0],
                            (unsigned long long)draw, names[1], (unsigned long long)base[1],
                            (unsigned long long)draw, names[2], (unsigned long long)base[2],
                            (unsigned long long)draw, names[3], (unsigned long long)base[3]) ||
            chs_exec(st, 0, &sql, NULL)) {
            snprintf(err, errlen, "clickhouse: cannot store the stack key bases");
            goto out;
        }
    }
    snprintf(err, errlen, "clickhouse: the stack key bases stored are not read back");
out:
    buf__free(&sql);
    buf__free(&ans);
    return rc;
}

static void ch_close(struct store *s);
static const struct store_ops ch_ops;

struct store *store_clickhouse__open(const char *urls, const char *cluster, const char *db,
                                     const char *insert, long timeout_ms, char *err, size_t errlen)
{
    struct ch_store *st = calloc(1, sizeof(*st));

    if (!st) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    st->base.ops = &ch_ops;
    st->timeout_ms = timeout_ms;
    pthread_mutex_init(&st->idle_mu, NULL);
    pthread_mutex_init(&st->mu, NULL);
    pthread_mutex_init(&st->bmu, NULL);
    /* The batch's linger waits by the monotonic clock. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&st->bcv, &ca);
    pthread_condattr_destroy(&ca);
    if (!ch_sql__identifier(db) || (cluster && *cluster && !ch_sql__identifier(cluster))) {
        snprintf(err, errlen,
                 "--clickhouse-database and --clickhouse-cluster: letters, digits and _ only");
        goto fail;
    }
    if (insert && strcmp(insert, "shards") && strcmp(insert, "distributed")) {
        snprintf(err, errlen, "--clickhouse-insert: shards or distributed, not '%.40s'", insert);
        goto fail;
    }
    st->insert_shards = !insert || !strcmp(insert, "shards");
    snprintf(st->db, sizeof(st->db), "%s", db);
    snprintf(st->cluster, sizeof(st->cluster), "%s", cluster ? cluster : "");
    /* URLs, a list (common/list.h: commas or spaces, empty entries skipped,
     * trailing slashes dropped): with a cluster, every node the tables go on. */
    char why[256];
    static const char *const schemes[] = {"http", "https", NULL};
    st->urls = list__split(urls, why, sizeof(why));
    if (!st->urls || list__urls(st->urls, schemes, why, sizeof(why))) {
        snprintf(err, errlen, "--clickhouse: %s", why);
        goto fail;
    }
    st->nnodes = list__count(st->urls);
    if (!st->nnodes) {
        snprintf(err, errlen, "--clickhouse: no URL");
        goto fail;
    }
    st->nodes = calloc(st->nnodes, sizeof(*st->nodes));
    st->idle = calloc(st->nnodes, sizeof(*st->idle));
    if (!st->nodes || !st->idle) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < st->nnodes; i++) {
        st->nodes[i] = list__get(st->urls, i);
        /* Each request's URL is this one and its parameters (chs_exec_why). */
        if (strlen(st->nodes[i]) > CH_MAX_URL) {
            snprintf(err, errlen, "--clickhouse: URL %zu is longer than %d bytes", i + 1,
                     CH_MAX_URL);
            goto fail;
        }
    }
    st->fns = stack_keymap__new(4000000);
    st->stacks = stack_keymap__new(4000000);
    st->names = chs_names__new();
    st->frames = chs_frames__new();
    if (!st->fns || !st->stacks || !st->names || !st->frames) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    /* One URL for a cluster: ClickHouse spreads the DDL (ON CLUSTER, with
     * ZooKeeper); several: the store creates the tables on each. */
    st->on_cluster = st->cluster[0] && st->nnodes == 1;
    if (chs_schema__open(st, err, errlen) || open_keys(st, err, errlen))
        goto fail;
    chs_shards__discover(st);
    chs_warm__start(st);
    return &st->base;
fail:
    ch_close(&st->base);
    return NULL;
}

/* --- retention, size, close --- */

/* Where a node's parts are listed: its system.parts, or, through the one
 * URL of a cluster, every node's (the cluster table function). */
static void parts_table(const struct ch_store *st, char *out, size_t len)
{
    if (st->on_cluster)
        snprintf(out, len, "cluster('%s', system, parts)", st->cluster);
    else
        snprintf(out, len, "system.parts");
}

/* Drops the day partitions wholly before the cutoff, on every node (a
 * Distributed table has no partitions of its own). */
static int ch_retain(struct store *s, int64_t older_than_ns, int64_t *deleted)
{
    struct ch_store *st = CH(s);
    struct buf sql, ans;
    int64_t day = older_than_ns / CH_DAY_NS; /* partitions below it end before the cutoff */
    int err = 0;

    *deleted = 0;
    buf__init(&sql, 1 << 16);
    buf__init(&ans, 1 << 24);
    if ((err = ch_sql__appendf(&sql,
                               "SELECT count() FROM %s.profiles WHERE time_ns < %lld "
                               "FORMAT TabSeparated",
                               st->db, (long long)(day * CH_DAY_NS))) ||
        (err = chs_exec(st, 0, &sql, &ans)))
        goto out;
    struct ch_tsv t;
    char *f[1];
    ch_tsv__init(&t, ans.data, ans.len);
    if (ch_tsv__row(&t, f, 1) != 1 || ch_tsv__i64(f[0], deleted)) {
        err = -EAGAIN;
        goto out;
    }
    /* Through one URL, every node's parts are read through it, and the
     * partitions dropped ON CLUSTER. */
    const char *loc = st->cluster[0] ? "_local" : "";
    char parts[100], oc[100] = "";
    parts_table(st, parts, sizeof(parts));
    if (st->on_cluster)
        snprintf(oc, sizeof(oc), " ON CLUSTER %s", st->cluster);
    for (size_t node = 0; node < (st->on_cluster ? 1 : st->nnodes); node++) {
        buf__reset(&sql);
        if ((err = ch_sql__appendf(&sql,
                                   "SELECT DISTINCT table, partition FROM %s WHERE "
                                   "active AND database = '%s' AND table IN ('profiles%s', "
                                   "'psamples%s', 'rollups%s', 'rollup_buckets%s', 'stacks%s', "
                                   "'functions%s') FORMAT TabSeparated",
                                   parts, st->db, loc, loc, loc, loc, loc, loc)) ||
            (err = chs_exec(st, node, &sql, &ans)))
            goto out;
        ch_tsv__init(&t, ans.data, ans.len);
        char *g[2];
        int n;
        struct buf drop;
        buf__init(&drop, 1 << 16);
        while (!err && (n = ch_tsv__row(&t, g, 2)) == 2) {
            int64_t part;
            if (ch_tsv__i64(g[1], &part) || !ch_sql__identifier(g[0]))
                continue;
            if (part >= day)
                continue;
            buf__reset(&drop);
            if (!(err = ch_sql__appendf(&drop, "ALTER TABLE %s.%s%s DROP PARTITION %lld", st->db,
                                        g[0], oc, (long long)part)))
                err = chs_ddl(st, node, &drop, NULL, 0);
        }
        buf__free(&drop);
        if (err)
            goto out;
    }
    /* A profile of a dropped day arriving late must store its stacks
     * again: the caches say which day each key was stored for, and that
     * day's rows may be gone. */
    pthread_mutex_lock(&st->mu);
    stack_keymap__clear(st->fns);
    stack_keymap__clear(st->stacks);
    pthread_mutex_unlock(&st->mu);
out:
    buf__free(&sql);
    buf__free(&ans);
    return err ? -EAGAIN : 0;
}

static int64_t ch_size_bytes(struct store *s)
{
    struct ch_store *st = CH(s);
    struct buf sql, ans;
    int64_t total = 0;

    buf__init(&sql, 4096);
    buf__init(&ans, 4096);
    char parts[100];
    parts_table(st, parts, sizeof(parts));
    for (size_t node = 0; node < (st->on_cluster ? 1 : st->nnodes); node++) {
        struct ch_tsv t;
        char *f[1];
        int64_t v;
        buf__reset(&sql);
        if (ch_sql__appendf(&sql,
                            "SELECT sum(bytes_on_disk) FROM %s WHERE active AND "
                            "database = '%s' FORMAT TabSeparated",
                            parts, st->db) ||
            chs_exec(st, node, &sql, &ans))
            continue;
        ch_tsv__init(&t, ans.data, ans.len);
        if (ch_tsv__row(&t, f, 1) == 1 && !ch_tsv__i64(f[0], &v))
            total += v;
    }
    buf__free(&sql);
    buf__free(&ans);
    return total;
}

static void ch_close(struct store *s)
{
    struct ch_store *st = CH(s);

    chs_warm__join(st);
    free(st->nodes);
    free(st->shard_node);
    free(st->slot);
    list__free(st->urls);
    stack_keymap__free(st->fns);
    stack_keymap__free(st->stacks);
    chs_names__free(st->names);
    chs_frames__free(st->frames);
    stack_hasher__free(&st->hasher);
    chs_batch__free(st->open);
    pthread_mutex_destroy(&st->mu);
    pthread_mutex_destroy(&st->bmu);
    pthread_cond_destroy(&st->bcv);
    for (size_t i = 0; st->idle && i < st->nnodes; i++)
        while (st->idle[i].n) /* no request is running: closes the connections */
            curl_easy_cleanup(st->idle[i].h[--st->idle[i].n]);
    free(st->idle);
    pthread_mutex_destroy(&st->idle_mu);
    free(st);
}

static const struct store_ops ch_ops = {
    .hasher = chs_hasher,
    .put = chs_put,
    .group_begin = chs_group__begin,
    .group_share = chs_group__share,
    .group_join = chs_group__join,
    .group_end = chs_group__end,
    .put_mem = chs_put_mem,
    .merge = chs_merge,
    .applications = chs_applications,
    .values = chs_values,
    .timeline = chs_timeline,
    .retain = ch_retain,
    .rollup = chs_rollup,
    .size_bytes = ch_size_bytes,
    .close = ch_close,
};

/* The ClickHouse store's rollups: an application's samples summed per stack
 * over each 10-minute and 3-hour bucket (store_common.h's levels), built in
 * the background once a bucket is complete, and read by merges without a
 * host, pid or label filter for every whole bucket of their range whose
 * rollup is current.
 *
 *   rollups(app, level, bucket_ns, stack_a, stack_b, samples, cpu_ns, off_cpu_ns, version)
 *   rollup_buckets(app, level, bucket_ns, profiles, version)
 *
 * both ReplacingMergeTree(version), read with FINAL, so a bucket built again
 * replaces its rows. A rollup is current when the profiles it counted are
 * the bucket's profiles now: a profile arriving late (an agent's spool)
 * makes the counts differ, the merge reads that bucket raw, and the next
 * pass builds it again. The count is taken before the sums are read, and a
 * put writes samples before its profile row, so a rollup never lacks the
 * samples of a profile it counts; one with more is built again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "store_clickhouse_int.h"
#include "store_common.h"

/* As the SQLite store: profiles arrive up to a minute after they start,
 * plus the upload. */
#define GRACE_NS (120ll * 1000000000)
/* How far back a pass looks for buckets to build, and how many it builds. */
#define LOOKBACK_NS (8ll * 86400 * 1000000000)
#define BUILD_MAX 64

static int run(struct ch_store *st, struct buf *sql, struct buf *ans)
{
    return chs_exec(st, 0, sql, ans);
}

/* Builds app's rollup of (level, bucket) for the n profiles counted. */
static int build(struct ch_store *st, const char *app, int level, int64_t bucket, int64_t n,
                 int64_t version, struct buf *sql)
{
    int err;

    buf__reset(sql);
    if ((err = ch_sql__appendf(
             sql,
             "INSERT INTO %s.rollups (app, level, bucket_ns, stack_a, stack_b, "
             "samples, cpu_ns, off_cpu_ns, version) SELECT app, %d, %lld, stack_a, "
             "stack_b, " CH_SAT_SUM("samples") ", " CH_SAT_SUM("cpu_ns") ", " CH_SAT_SUM(
                 "off_cpu_ns") ", %lld FROM (SELECT app, " CH_SAMPLES_COLS
                               " FROM %s.psamples FINAL WHERE app = ",
             st->db, level, (long long)bucket, (long long)version, st->db)) ||
        (err = ch_sql__quote(sql, app, strlen(app))) ||
        (err = ch_sql__appendf(sql,
                               " AND time_ns >= %lld AND time_ns < %lld)" CH_SAMPLES_JOIN
                               " GROUP BY app, stack_a, stack_b",
                               (long long)bucket, (long long)(bucket + level_ns[level]))) ||
        (err = run(st, sql, NULL)))
        return err;
    buf__reset(sql);
    if ((err = ch_sql__appendf(sql,
                               "INSERT INTO %s.rollup_buckets (app, level, bucket_ns, profiles, "
                               "version) VALUES (",
                               st->db)) ||
        (err = ch_sql__quote(sql, app, strlen(app))) ||
        (err = ch_sql__appendf(sql, ", %d, %lld, %lld, %lld)", level, (long long)bucket,
                               (long long)n, (long long)version)))
        return err;
    return run(st, sql, NULL);
}

int chs_rollup(struct store *s, int64_t now_ns, int64_t *built, int64_t *pending)
{
    struct ch_store *st = CH(s);
    struct buf sql, ans, bsql;
    int err = 0;

    *built = *pending = 0;
    buf__init(&sql, 1 << 16);
    buf__init(&bsql, 1 << 16);
    buf__init(&ans, 64u << 20);
    for (int l = 0; l < N_LEVELS && !err; l++) {
        int64_t len = level_ns[l], complete = bucket_of(now_ns - GRACE_NS, len);
        buf__reset(&sql);
        /* Complete buckets whose profiles differ from their rollup's count. */
        if ((err = ch_sql__appendf(
                 &sql,
                 "SELECT app, b, n FROM (SELECT app, intDiv(time_ns, %lld) * %lld AS b, "
                 "count() AS n FROM %s.profiles FINAL WHERE time_ns >= %lld AND time_ns < %lld "
                 "GROUP BY app, b) GLOBAL ANY LEFT JOIN (SELECT app, bucket_ns AS b, profiles "
                 "FROM %s.rollup_buckets FINAL WHERE level = %d) USING (app, b) "
                 "WHERE n != profiles ORDER BY b FORMAT TabSeparated",
                 (long long)len, (long long)len, st->db, (long long)(complete - LOOKBACK_NS),
                 (long long)complete, st->db, l)) ||
            (err = run(st, &sql, &ans)))
            break;
        struct ch_tsv t;
        char *f[3];
        int r;
        ch_tsv__init(&t, ans.data, ans.len);
        while (!err && (r = ch_tsv__row(&t, f, 3)) == 3) {
            int64_t b, n;
            if (ch_tsv__i64(f[1], &b) || ch_tsv__i64(f[2], &n)) {
                err = -EAGAIN;
                break;
            }
            if (*built >= BUILD_MAX) {
                (*pending)++;
                continue;
            }
            if ((err = build(st, f[0], l, b, n, now_ns, &bsql)))
                (*pending)++;
            else
                (*built)++;
        }
    }
    buf__free(&sql);
    buf__free(&bsql);
    buf__free(&ans);
    return err ? -EAGAIN : 0;
}

/* --- reading: which buckets a merge takes from rollups --- */

struct bucket {
    int64_t level, start, profiles;
};

static int cmp_bucket(const void *a, const void *b)
{
    const struct bucket *x = a, *y = b;
    if (x->level != y->level)
        return x->level < y->level ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Appends " OR (time_ns >= a AND time_ns < b)" or its first form. */
static int add_interval(struct buf *b, bool *first, int64_t from, int64_t to)
{
    int err = ch_sql__appendf(b, "%s(time_ns >= %lld AND time_ns < %lld)", *first ? "" : " OR ",
                              (long long)from, (long long)to);
    *first = false;
    return err;
}

int chs_rollup__rows(struct ch_store *st, const struct store_query *q, struct buf *rows,
                     struct buf *keys, struct buf *count)
{
    struct buf sql, ans, app, in, raw;
    struct bucket *cur = NULL;
    size_t ncur = 0, cap = 0;
    int err;

    buf__init(&sql, 1 << 16);
    buf__init(&ans, 16u << 20);
    buf__init(&app, 1 << 16);
    buf__init(&in, 16u << 20);
    buf__init(&raw, 16u << 20);
    /* The rollups of the range and the profiles now in each 10 minutes. */
    if ((err = ch_sql__quote(&app, q->app, strlen(q->app))) ||
        (err = ch_sql__appendf(
             &sql,
             "SELECT 0, level, bucket_ns, profiles FROM %s.rollup_buckets FINAL "
             "WHERE app = %s AND bucket_ns >= %lld AND bucket_ns < %lld "
             "UNION ALL SELECT 1, toUInt8(0), intDiv(time_ns, %lld) * %lld AS b, "
             "toInt64(count()) FROM %s.profiles FINAL WHERE app = %s AND time_ns >= %lld "
             "AND time_ns < %lld GROUP BY b FORMAT TabSeparated",
             st->db, app.data, (long long)q->from_ns, (long long)q->to_ns, (long long)level_ns[0],
             (long long)level_ns[0], st->db, app.data,
             (long long)bucket_of(q->from_ns, level_ns[0]), (long long)q->to_ns)) ||
        (err = chs_exec(st, 0, &sql, &ans)))
        goto out;
    struct bucket *raw10 = NULL;
    size_t nraw = 0;
    {
        struct ch_tsv t;
        char *f[4];
        int r;
        ch_tsv__init(&t, ans.data, ans.len);
        while ((r = ch_tsv__row(&t, f, 4)) == 4) {
            struct bucket b;
            if (ch_tsv__i64(f[1], &b.level) || ch_tsv__i64(f[2], &b.start) ||
                ch_tsv__i64(f[3], &b.profiles) || b.level < 0 || b.level >= N_LEVELS)
                break;
            if (f[0][0] == '1')
                b.level = N_LEVELS; /* raw counts sort after the rollups */
            if (ncur == cap) {
                cap = cap ? cap * 2 : 64;
                struct bucket *n = realloc(cur, cap * sizeof(*n));
                if (!n) {
                    err = -ENOMEM;
                    goto out;
                }
                cur = n;
            }
            cur[ncur++] = b;
        }
        if (r != 0) {
            log_error("clickhouse: a garbled answer listing rollups");
            err = -EAGAIN;
            goto out;
        }
    }
    if (ncur)
        qsort(cur, ncur, sizeof(*cur), cmp_bucket);
    for (raw10 = cur; raw10 < cur + ncur && raw10->level < N_LEVELS; raw10++)
        ;
    nraw = cur + ncur - raw10;
    /* The walk of sqls_accumulate: each whole bucket from its largest
     * current rollup, the rest raw. A rollup is current when its count is
     * the raw count of its 10-minute buckets. */
    int64_t t = q->from_ns, raw_from = 0, in_rollups = 0;
    bool raw_open = false, first_in = true, first_raw = true;
    while (!err && t < q->to_ns) {
        struct bucket *hit = NULL;
        int64_t len = 0;
        for (int l = N_LEVELS - 1; l >= 0 && !hit; l--) {
            len = level_ns[l];
            struct bucket key = {l, t, 0};
            if (bucket_of(t, len) != t || t > q->to_ns - len)
                continue;
            struct bucket *h = bsearch(&key, cur, raw10 - cur, sizeof(*cur), cmp_bucket);
            int64_t have = 0;
            for (size_t i = 0; h && i < nraw; i++)
                if (raw10[i].start >= t && raw10[i].start < t + len)
                    have += raw10[i].profiles;
            if (h && have == h->profiles)
                hit = h;
        }
        if (hit) {
            if (raw_open)
                err = add_interval(&raw, &first_raw, raw_from, t);
            raw_open = false;
            if (!err)
                err = ch_sql__appendf(&in, "%s(%lld, %lld)", first_in ? "" : ", ",
                                      (long long)hit->level, (long long)hit->start);
            first_in = false;
            in_rollups += hit->profiles;
            t += len;
        } else {
            if (!raw_open)
                raw_from = t;
            raw_open = true;
            int64_t b = bucket_of(t, level_ns[0]);
            t = b > q->to_ns - level_ns[0] ? q->to_ns : b + level_ns[0];
        }
    }
    if (!err && raw_open)
        err = add_interval(&raw, &first_raw, raw_from, q->to_ns);
    if (err)
        goto out;
    /* rows: (stack_a, stack_b, samples, cpu_ns, off_cpu_ns) of the rollups and the raw
     * rest; keys: the same without FINAL. */
    const char *d = st->db;
    buf__reset(count);
    for (int k = 0; k < 2 && !err; k++) {
        struct buf *o = k ? keys : rows;
        const char *fin = k ? "" : " FINAL";
        buf__reset(o);
        if (!first_in &&
            (err = ch_sql__appendf(
                 o,
                 "SELECT stack_a, stack_b, samples, cpu_ns, off_cpu_ns FROM %s.rollups%s "
                 "WHERE app = %s AND (level, bucket_ns) IN (%s)%s",
                 d, fin, app.data, in.data, first_raw ? "" : " UNION ALL ")))
            break;
        if (!first_raw &&
            (err = ch_sql__appendf(o,
                                   "SELECT " CH_SAMPLES_COLS " FROM (SELECT " CH_SAMPLES_COLS
                                   " FROM %s.psamples%s WHERE app = %s "
                                   "AND (%s))" CH_SAMPLES_JOIN,
                                   d, fin, app.data, raw.data)))
            break;
        if (first_in && first_raw) /* an empty range */
            err = ch_sql__appendf(o,
                                  "SELECT stack_a, stack_b, samples, cpu_ns, off_cpu_ns FROM "
                                  "%s.psamples" CH_SAMPLES_JOIN " WHERE 0",
                                  d);
    }
    if (!err && !first_raw)
        err = ch_sql__appendf(count,
                              "SELECT toUInt64(count() + %lld) AS c FROM %s.profiles FINAL "
                              "WHERE app = %s AND (%s)",
                              (long long)in_rollups, d, app.data, raw.data);
    else if (!err)
        err = ch_sql__appendf(count, "SELECT toUInt64(%lld) AS c", (long long)in_rollups);
out:
    free(cur);
    buf__free(&sql);
    buf__free(&ans);
    buf__free(&app);
    buf__free(&in);
    buf__free(&raw);
    return err;
}

/* The SQLite store's rollup levels (sqls_levels in server/store_sqlite_int.h):
 * the minute and the day beside the 10 minutes and 3 hours, merges through
 * them exactly as through the raw profiles, a minute kept only where it
 * halves the rows, and a store from before them upgraded at open. Runs as
 * any user. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <sqlite3.h>

#include "server_helpers.h"

#define DAY0 (1764720000ll * SEC) /* 2025-12-03 00:00 UTC: a day's start */
#define MIN (60 * SEC)

static const char *const LEAF_A[] = {"leaf", "a", "main"};
static const char *const LEAF_B[] = {"leafb", "b", "main"};

/* Profiles of pids [1, npids] of app at t, sharing their two stacks (as
 * replicas do), their samples from k. */
static void put_at(struct store *st, const char *app, int npids, int64_t t, int k)
{
    for (int pid = 1; pid <= npids; pid++) {
        struct sprof s;
        sprof__init(&s, st, app, "h1", pid, t);
        sprof__stack(&s, LEAF_A, 3, 1 + (k * 7 + pid) % 13, STORE_NO_LABELS);
        sprof__stack(&s, LEAF_B, 3, 1 + (k * 5 + pid) % 11, STORE_NO_LABELS);
        sprof__put(st, &s);
    }
}

/* An integer sqlite gives for sql on the store's file in dir. */
static int64_t sql_int(const char *dir, const char *sql)
{
    char path[300];
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int64_t v = -1;

    snprintf(path, sizeof(path), "%s/profiles.db", dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW)
        v = sqlite3_column_int64(q, 0);
    else
        assert_int_equal(rc, SQLITE_DONE);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

/* The merge of app over [from, to): through rollups, or (raw) with a host
 * filter, which reads the profiles themselves. */
static struct store_merged *merge(struct store *st, const char *app, int64_t from, int64_t to,
                                  bool raw)
{
    struct store_query q = {.app = app, .from_ns = from, .to_ns = to, .host = raw ? "h1" : NULL};
    struct store_merged *m = NULL;

    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_non_null(m);
    return m;
}

/* The two merges hold the same profiles and stacks, with the same sums. */
static void assert_same(const struct store_merged *a, const struct store_merged *b)
{
    assert_int_equal(a->profiles, b->profiles);
    assert_int_equal(a->nstacks, b->nstacks);
    for (int i = 0; i < 2; i++) {
        const char *f = i ? "main;b;leafb" : "main;a;leaf";
        int64_t ca, cb;
        assert_int_equal(folded_samples(a, f, &ca), folded_samples(b, f, &cb));
        assert_int_equal(ca, cb);
        assert_true(ca > 0);
    }
}

/* A ragged range over two days: minutes at its ends, then 10 minutes, 3
 * hours and the day between; the same answer as the raw profiles, and
 * the answer really comes from the minute and day rollups (raw profiles
 * deleted under them leave it as it was). */
static void check_range(struct store *st, const char *dir, bool delete_raw)
{
    int64_t from = DAY0 + 7 * MIN + 17 * SEC, to = DAY0 + 2 * 86400 * SEC + 4 * MIN + 30 * SEC;
    struct store_merged *rolled = merge(st, "api", from, to, false);
    struct store_merged *raw = merge(st, "api", from, to, true);
    /* day 0's minutes 8-14, hours 1-47, day 1's last 15 minutes, day 2's 0-4 */
    assert_int_equal(raw->profiles, 3 * (7 + 47 + 15 + 5));
    assert_same(rolled, raw);
    store_merged__free(raw);
    if (delete_raw) {
        /* minute 8 (a minute rollup's) and hour 12 of day 1 (the day's) */
        char sql[200];
        snprintf(sql, sizeof(sql), "DELETE FROM profiles WHERE time_ns IN (%lld, %lld)",
                 (long long)(DAY0 + 8 * MIN + SEC), (long long)(DAY0 + 36 * 3600 * SEC + SEC));
        assert_int_equal(sql_int(dir, sql), -1);
        struct store_merged *again = merge(st, "api", from, to, false);
        assert_same(again, rolled);
        store_merged__free(again);
        raw = merge(st, "api", from, to, true);
        assert_int_equal(raw->profiles, rolled->profiles - 6);
        store_merged__free(raw);
    }
    store_merged__free(rolled);
}

static void build(struct store *st)
{
    int64_t built = -1, pending = -1;
    assert_int_equal(store__rollup(st, DAY0 + 4 * 86400 * SEC, &built, &pending), 0);
    assert_true(built > 0);
    assert_int_equal(pending, 0);
}

static void test_levels(void **state)
{
    char dir[256], err[512];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    (void)state;

    for (int m = 0; m < 15; m++) /* one a minute at both ends */
        put_at(st, "api", 3, DAY0 + m * MIN + SEC, m);
    for (int h = 1; h < 48; h++) /* one an hour between */
        put_at(st, "api", 3, DAY0 + h * 3600 * SEC + SEC, 100 + h);
    for (int m = -15; m < 10; m++)
        put_at(st, "api", 3, DAY0 + 2 * 86400 * SEC + m * MIN + SEC, 200 + m);
    build(st);
    /* 15 + 47 + 25 minutes with profiles, 3 days */
    assert_int_equal(sql_int(dir, "SELECT COUNT(*) FROM rollups WHERE level = 2"), 87);
    assert_int_equal(sql_int(dir, "SELECT COUNT(*) FROM rollups WHERE level = 3"), 3);
    check_range(st, dir, false);

    /* A store from before the minute and the day: their buckets are marked
     * at open and built; the answer stays. */
    store__close(st);
    assert_int_equal(sql_int(dir, "DELETE FROM rollups WHERE level >= 2"), -1);
    assert_int_equal(sql_int(dir, "DELETE FROM meta WHERE k = 'rollup_levels'"), -1);
    st = store_sqlite__open(dir, err, sizeof(err));
    assert_non_null(st);
    assert_int_equal(sql_int(dir, "SELECT COUNT(*) FROM rollup_dirty WHERE level = 2"), 87);
    assert_int_equal(sql_int(dir, "SELECT COUNT(*) FROM rollup_dirty WHERE level = 3"), 3);
    assert_int_equal(sql_int(dir, "SELECT COUNT(*) FROM rollup_dirty WHERE level < 2"), 0);
    assert_int_equal(sql_int(dir, "SELECT v FROM meta WHERE k = 'rollup_levels'"), 4);
    build(st);
    assert_int_equal(sql_int(dir, "SELECT COUNT(*) FROM rollups WHERE level = 2"), 87);
    check_range(st, dir, true);
    store__close(st);
    tmpdir__remove(dir);
}

/* An application of one process: a minute's rollup would repeat each
 * profile, so none is kept, and its ragged ranges read the profiles. */
static void test_minute_kept_where_it_halves(void **state)
{
    char dir[256];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    (void)state;

    for (int m = 0; m < 12; m++) {
        put_at(st, "solo", 1, DAY0 + m * MIN + SEC, m);
        put_at(st, "pair", 2, DAY0 + m * MIN + SEC, m);
    }
    build(st);
    assert_int_equal(sql_int(dir, "SELECT COUNT(*) FROM rollups WHERE level = 2 AND app = 'solo'"),
                     0);
    /* two replicas of the same two stacks: 4 rows in, 2 out */
    assert_int_equal(sql_int(dir, "SELECT COUNT(*) FROM rollups WHERE level = 2 AND app = 'pair'"),
                     12);
    assert_int_equal(sql_int(dir, "SELECT COUNT(*) FROM rollups WHERE level = 0 AND app = 'solo'"),
                     2);
    assert_int_equal(sql_int(dir, "SELECT COUNT(*) FROM rollup_dirty"), 0);
    for (int i = 0; i < 2; i++) {
        const char *app = i ? "pair" : "solo";
        struct store_merged *rolled = merge(st, app, DAY0 + MIN + 5 * SEC, DAY0 + 11 * MIN, false);
        struct store_merged *raw = merge(st, app, DAY0 + MIN + 5 * SEC, DAY0 + 11 * MIN, true);
        assert_int_equal(raw->profiles, 9 * (i + 1));
        assert_same(rolled, raw);
        store_merged__free(rolled);
        store_merged__free(raw);
    }
    store__close(st);
    tmpdir__remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_minute_kept_where_it_halves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

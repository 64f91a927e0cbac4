/* The SQLite store's upkeep: rollups built, retention, orphan collection,
 * size. */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/hmap.h"
#include "../common/log.h"
#include "store.h"
#include "store_sqlite_int.h"
#include "text.h"

/* Profiles come in up to a window (a minute) after they start, plus the
 * upload: a bucket is built once its end is this far behind. A later one
 * marks it dirty again. */
#define ROLLUP_GRACE_NS (120ll * 1000000000)

/* --- growable bit sets, for ids --- */

struct bits {
    uint64_t *w;
    size_t nwords;
};

static void bits_free(struct bits *b)
{
    if (b)
        free(b->w);
    free(b);
}

/* Sets bit i. Returns 0 or -ENOMEM (then the set is unchanged). */
int sqls_bits_set(struct bits *b, uint64_t i)
{
    size_t w = i / 64;
    if (w >= b->nwords) {
        size_t n = b->nwords ? b->nwords : 64;
        while (n <= w)
            n *= 2;
        uint64_t *nw = realloc(b->w, n * sizeof(*nw));
        if (!nw)
            return -ENOMEM;
        memset(nw + b->nwords, 0, (n - b->nwords) * sizeof(*nw));
        b->w = nw;
        b->nwords = n;
    }
    b->w[w] |= 1ull << (i % 64);
    return 0;
}

static bool bits_test(const struct bits *b, uint64_t i)
{
    return i / 64 < b->nwords && (b->w[i / 64] >> (i % 64) & 1);
}

/* --- rollups --- */

/* Builds app's rollup of (sqls_levels[level], bucket) from what lies below
 * it; a minute's only where it holds at most half the rows of its profiles
 * (otherwise none: its queries read the profiles). Called with the write
 * lock held, inside a write transaction. */
static int build_rollup(struct sqlite_store *st, const char *app, int level, int64_t bucket)
{
    struct store_query q = {app, bucket, bucket + sqls_levels[level].ns, NULL, 0};
    struct merge_acc a = {0};
    sqlite3_stmt *w = NULL;
    struct buf data;
    int64_t profiles = 0;
    int err;

    buf__init(&data, 512u << 20);
    if ((err = sqls_acc_init(&a, st->wdb)) ||
        (err = sqls_accumulate(&st->wr, &q, level, &a, &profiles)))
        goto out;
    /* The period the bucket's profiles had (CPU over samples), so its rows
     * keep their CPU in a byte or so too. */
    int64_t samples = 0, cpu = 0;
    bool over = false, off = false;
    for (size_t i = 0; i < a.nvals; i++) {
        over |= __builtin_add_overflow(samples, a.vals[i].samples, &samples);
        over |= __builtin_add_overflow(cpu, a.vals[i].cpu, &cpu);
        off |= a.vals[i].off != 0;
    }
    int64_t period = samples > 0 && !over ? cpu / samples : 0; /* 0: CPU kept whole */
    /* Room as it goes, a block of rows at a time: a bucket of millions of
     * stacks takes only what its rows need. */
    if ((err = buf__reserve(&data, BLOB_HEAD_MAX)))
        goto out;
    data.len = blob_begin((unsigned char *)data.data, period, off) - (unsigned char *)data.data;
    for (size_t i = 0; i < a.nvals; i++) {
        const struct acc_val *v = &a.vals[i];
        if (data.cap - data.len < BLOB_ROW_MAX + 1 &&
            (err = buf__reserve(&data, BLOB_ROW_MAX * 4096)) &&
            (err = buf__reserve(&data, BLOB_ROW_MAX)))
            goto out;
        unsigned char *d = (unsigned char *)data.data + data.len;
        data.len = blob_put(d, period, v->sid, 0, v->samples, v->cpu, off, v->off) -
                   (unsigned char *)data.data;
    }
    if (level == SQLS_MINUTE && a.nvals * 2 > a.rows)
        profiles = 0; /* no rollup: the bucket's profiles are read as they are */
    err = -EIO;
    const char *sql = profiles ? "INSERT OR REPLACE INTO rollups(app, level, bucket_ns, profiles,"
                                 " data) VALUES(?1, ?2, ?3, ?4, ?5)"
                               : "DELETE FROM rollups WHERE app = ?1 AND level = ?2 AND "
                                 "bucket_ns = ?3";
    for (int pass = 0; pass < 2; pass++) {
        if (sqlite3_prepare_v2(st->wdb, sql, -1, &w, NULL) != SQLITE_OK)
            goto out;
        sqlite3_bind_text(w, 1, app, -1, SQLITE_STATIC);
        sqlite3_bind_int(w, 2, sqls_levels[level].id);
        sqlite3_bind_int64(w, 3, bucket);
        if (pass == 0 && profiles) {
            sqlite3_bind_int64(w, 4, profiles);
            sqlite3_bind_blob(w, 5, data.data ? data.data : "", data.len, SQLITE_STATIC);
        }
        int rc = sqlite3_step(w);
        sqlite3_finalize(w);
        w = NULL;
        if (rc != SQLITE_DONE)
            goto out;
        sql = "DELETE FROM rollup_dirty WHERE app = ?1 AND level = ?2 AND bucket_ns = ?3";
    }
    err = 0;
out:
    sqlite3_finalize(w);
    sqls_acc_free(&a);
    buf__free(&data);
    return err;
}

int sqls_rollup(struct store *s, int64_t now_ns, int64_t *built, int64_t *pending)
{
    struct sqlite_store *st = S(s);
    sqlite3_stmt *next = NULL;
    int err = 0;

    *built = *pending = 0;
    /* Finer levels first: a coarse bucket is built from the fine ones. */
    for (int l = 0; l < SQLS_LEVELS && !err; l++) {
        int64_t complete_before = now_ns - ROLLUP_GRACE_NS - sqls_levels[l].ns;
        for (;;) {
            char app[4200];
            int64_t bucket;
            pthread_mutex_lock(&st->wmu);
            if (!next && sqlite3_prepare_v2(st->wdb,
                                            "SELECT app, bucket_ns FROM rollup_dirty WHERE level = "
                                            "? AND bucket_ns <= ? ORDER BY bucket_ns LIMIT 1",
                                            -1, &next, NULL) != SQLITE_OK) {
                pthread_mutex_unlock(&st->wmu);
                err = -EIO;
                break;
            }
            sqlite3_reset(next);
            sqlite3_bind_int(next, 1, sqls_levels[l].id);
            sqlite3_bind_int64(next, 2, complete_before);
            int rc = sqlite3_step(next);
            if (rc == SQLITE_ROW) {
                snprintf(app, sizeof(app), "%s", (const char *)sqlite3_column_text(next, 0));
                bucket = sqlite3_column_int64(next, 1);
            }
            sqlite3_reset(next);
            if (rc != SQLITE_ROW) {
                pthread_mutex_unlock(&st->wmu);
                err = rc == SQLITE_DONE ? 0 : -EIO;
                break;
            }
            if (sqlite3_exec(st->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
                err = -EIO;
            } else if ((err = build_rollup(st, app, l, bucket)) ||
                       sqlite3_exec(st->wdb, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
                sqlite3_exec(st->wdb, "ROLLBACK", NULL, NULL, NULL);
                err = err ? err : -EIO;
            }
            pthread_mutex_unlock(&st->wmu);
            if (err) {
                char esc[256]; /* a name stored before ingest checked names */
                log_error("rollup: app=%s level=%d bucket=%lld: %s",
                          text__escape(esc, sizeof(esc), app), sqls_levels[l].id, (long long)bucket,
                          strerror(-err));
                break;
            }
            (*built)++;
        }
    }
    sqlite3_finalize(next);
    /* What is still to build of the complete buckets, for /metrics. */
    pthread_mutex_lock(&st->rmu);
    for (int l = 0; l < SQLS_LEVELS; l++) {
        sqlite3_stmt *c = NULL;
        if (sqlite3_prepare_v2(
                st->rdb, "SELECT COUNT(*) FROM rollup_dirty WHERE level = ? AND bucket_ns <= ?", -1,
                &c, NULL) == SQLITE_OK) {
            sqlite3_bind_int(c, 1, sqls_levels[l].id);
            sqlite3_bind_int64(c, 2, now_ns - ROLLUP_GRACE_NS - sqls_levels[l].ns);
            if (sqlite3_step(c) == SQLITE_ROW)
                *pending += sqlite3_column_int64(c, 0);
        }
        sqlite3_finalize(c);
    }
    pthread_mutex_unlock(&st->rmu);
    return err;
}

/* After retention: a rollup whose bucket began before the cutoff holds
 * deleted profiles. It goes, and its bucket is built again from what is
 * left if anything is; buckets wholly before the cutoff are done with. */
static int forget_rollups(struct sqlite_store *st, int64_t cutoff)
{
    static const char *const sql[] = {
        "INSERT OR IGNORE INTO rollup_dirty(app, level, bucket_ns) SELECT app, level, bucket_ns "
        "FROM rollups WHERE level = ?1 AND bucket_ns < ?2 AND bucket_ns > ?2 - ?3",
        "DELETE FROM rollups WHERE level = ?1 AND bucket_ns < ?2",
        "DELETE FROM rollup_dirty WHERE level = ?1 AND bucket_ns <= ?2 - ?3",
    };
    int err = 0;

    pthread_mutex_lock(&st->wmu);
    if (sqlite3_exec(st->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        pthread_mutex_unlock(&st->wmu);
        return -EIO;
    }
    for (int l = 0; l < SQLS_LEVELS && !err; l++) {
        for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]) && !err; i++) {
            sqlite3_stmt *d = NULL;
            if (sqlite3_prepare_v2(st->wdb, sql[i], -1, &d, NULL) != SQLITE_OK) {
                err = -EIO;
                break;
            }
            sqlite3_bind_int(d, 1, sqls_levels[l].id);
            sqlite3_bind_int64(d, 2, cutoff);
            if (sqlite3_bind_parameter_count(d) >= 3)
                sqlite3_bind_int64(d, 3, sqls_levels[l].ns);
            if (sqlite3_step(d) != SQLITE_DONE)
                err = -EIO;
            sqlite3_finalize(d);
        }
    }
    if (err || sqlite3_exec(st->wdb, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        sqlite3_exec(st->wdb, "ROLLBACK", NULL, NULL, NULL);
        err = -EIO;
    }
    pthread_mutex_unlock(&st->wmu);
    return err;
}

/* --- orphans: stacks, functions and label sets that nothing refers to any
 * more once retention has deleted the profiles and rollups that did --- */

/* How often at most: the collection reads every stored profile. */
#define GC_EVERY_NS (6ll * 3600 * 1000000000)
#define GC_BATCH 1000

/* Marks the function ids of a frames blob. */
static int mark_frames(struct bits *b, const unsigned char *p, size_t len)
{
    const unsigned char *end = p ? p + len : p; /* SQLite's empty blob is NULL */
    uint64_t fid;

    while (p && p < end && (p = varint__get(p, end, &fid)))
        if (sqls_bits_set(b, fid))
            return -ENOMEM;
    return 0;
}

/* Marks the stacks and label sets every blob of `sql` (one column) refers to. */
static int mark_blobs(sqlite3 *g, const char *sql, struct bits *stacks, struct bits *labelsets)
{
    sqlite3_stmt *q = NULL;
    int err = 0, rc;

    if (sqlite3_prepare_v2(g, sql, -1, &q, NULL) != SQLITE_OK)
        return -EIO;
    while (!err && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        const unsigned char *p = sqlite3_column_blob(q, 0); /* NULL when empty */
        const unsigned char *end = p ? p + sqlite3_column_bytes(q, 0) : p;
        uint64_t sid, ls, v;
        if (p && p < end && p[0] == 0 && !(p = varint__get(p + 1, end, &v)))
            break; /* a corrupt blob marks nothing more; merges say so */
        while (!err && p && p < end) {
            if (!(p = varint__get(p, end, &sid)) || !(p = varint__get(p, end, &ls)) ||
                !(p = varint__get(p, end, &v)) || !(p = varint__get(p, end, &v)))
                break;
            err = sqls_bits_set(stacks, sid) || (ls && sqls_bits_set(labelsets, ls - 1)) ? -ENOMEM
                                                                                         : 0;
        }
    }
    if (!err && rc != SQLITE_DONE)
        err = -EIO;
    sqlite3_finalize(q);
    return err;
}

/* One batch of deletes from `table`: the ids in cand[0..n) that no put has
 * taken since the collection began. For a stack taken meanwhile, its
 * functions are marked used instead. Drops the deleted rows' keys from the
 * caches. Under wmu, in one write transaction. */
static int delete_batch(struct sqlite_store *st, int which, const int64_t *cand, size_t n,
                        struct bits *fns_used, int64_t *deleted)
{
    static const char *const sel[] = {"SELECT key, frames FROM stacks WHERE id = ?",
                                      "SELECT name, file FROM functions WHERE id = ?",
                                      "SELECT 1 FROM labelsets WHERE id = ?"};
    static const char *const del[] = {"DELETE FROM stacks WHERE id = ?",
                                      "DELETE FROM functions WHERE id = ?",
                                      "DELETE FROM labelsets WHERE id = ?"};
    struct bits *taken = which == 0 ? st->gc_stacks : which == 1 ? st->gc_fns : st->gc_labelsets;
    sqlite3_stmt *s = NULL, *d = NULL;
    int err = -EIO;

    pthread_mutex_lock(&st->wmu);
    if (st->gc_oom) {
        err = -ENOMEM; /* a put could not mark what it took: delete nothing */
        goto out;
    }
    if (sqlite3_exec(st->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        goto out;
    if (sqlite3_prepare_v2(st->wdb, sel[which], -1, &s, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(st->wdb, del[which], -1, &d, NULL) != SQLITE_OK)
        goto rollback;
    for (size_t i = 0; i < n; i++) {
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, cand[i]);
        if (sqlite3_step(s) != SQLITE_ROW)
            continue; /* gone already */
        if (bits_test(taken, cand[i])) {
            if (which == 0 &&
                mark_frames(fns_used, sqlite3_column_blob(s, 1), sqlite3_column_bytes(s, 1))) {
                err = -ENOMEM;
                goto rollback;
            }
            continue;
        }
        if (which == 0 && sqlite3_column_bytes(s, 0) == 16) {
            stack_keymap__del(st->stack_ids, stack_key__decode(sqlite3_column_blob(s, 0)));
        } else if (which == 1) {
            const char *name = (const char *)sqlite3_column_text(s, 0);
            const char *file = (const char *)sqlite3_column_text(s, 1);
            stack_keymap__del(st->fn_ids,
                              stack_hasher__function(&st->hasher, name ? name : "",
                                                     sqlite3_column_bytes(s, 0), file ? file : "",
                                                     sqlite3_column_bytes(s, 1)));
        }
        sqlite3_reset(d);
        sqlite3_bind_int64(d, 1, cand[i]);
        if (sqlite3_step(d) != SQLITE_DONE)
            goto rollback;
        (*deleted)++;
    }
    sqlite3_reset(s);
    if (sqlite3_exec(st->wdb, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto rollback;
    if (which == 2) { /* label sets: a small cache, started over */
        hmap__free(st->labelset_ids);
        st->labelset_ids = hmap__new();
    }
    err = 0;
    goto out;
rollback:
    sqlite3_exec(st->wdb, "ROLLBACK", NULL, NULL, NULL);
    /* the deletes are undone, but their keys left the caches: harmless,
     * a cache miss asks the database */
out:
    sqlite3_finalize(s);
    sqlite3_finalize(d);
    pthread_mutex_unlock(&st->wmu);
    return err;
}

/* Every id in 1..max not in used, deleted in batches. */
static int sweep(struct sqlite_store *st, int which, int64_t max, const struct bits *used,
                 struct bits *fns_used, int64_t *deleted)
{
    int64_t cand[GC_BATCH];
    size_t n = 0;
    int err = 0;

    for (int64_t id = 1; id <= max && !err; id++) {
        if (!bits_test(used, id))
            cand[n++] = id;
        if (n == GC_BATCH || (id == max && n)) {
            err = delete_batch(st, which, cand, n, fns_used, deleted);
            n = 0;
        }
    }
    return err;
}

/* Deletes the stacks, functions and label sets no profile and no rollup
 * refers to any more. It reads on a connection of its own, in one read
 * transaction, while ingest and queries go on; then deletes in batches of
 * GC_BATCH, each a short write transaction, sparing whatever a put took in
 * the meantime (puts mark it while gc_active). Returns 0 or -errno. */
static int collect_orphans(struct sqlite_store *st, int64_t counts[3])
{
    struct bits used_stacks = {0}, used_fns = {0}, used_ls = {0};
    sqlite3 *g = NULL;
    sqlite3_stmt *q = NULL;
    int64_t max[3] = {0, 0, 0};
    char err_msg[256];
    int err = -ENOMEM;

    counts[0] = counts[1] = counts[2] = 0;
    pthread_mutex_lock(&st->wmu);
    st->gc_stacks = calloc(1, sizeof(struct bits));
    st->gc_fns = calloc(1, sizeof(struct bits));
    st->gc_labelsets = calloc(1, sizeof(struct bits));
    st->gc_oom = false;
    st->gc_active = st->gc_stacks && st->gc_fns && st->gc_labelsets;
    pthread_mutex_unlock(&st->wmu);
    if (!st->gc_active)
        goto out;
    err = -EIO;
    if (sqls_open_db(st->path, &g, err_msg, sizeof(err_msg)) ||
        sqlite3_exec(g, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        goto out;
    /* One snapshot: what exists and what refers to it, of one moment. */
    if (sqlite3_prepare_v2(g,
                           "SELECT (SELECT coalesce(max(id), 0) FROM stacks), "
                           "(SELECT coalesce(max(id), 0) FROM functions), "
                           "(SELECT coalesce(max(id), 0) FROM labelsets)",
                           -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW)
        goto out_read;
    for (int i = 0; i < 3; i++)
        max[i] = sqlite3_column_int64(q, i);
    sqlite3_finalize(q);
    q = NULL;
    if ((err = mark_blobs(g, "SELECT data FROM profiles", &used_stacks, &used_ls)) ||
        (err = mark_blobs(g, "SELECT data FROM rollups", &used_stacks, &used_ls)))
        goto out_read;
    err = -EIO;
    if (sqlite3_prepare_v2(g, "SELECT id, frames FROM stacks", -1, &q, NULL) != SQLITE_OK)
        goto out_read;
    int rc;
    err = 0;
    while (!err && (rc = sqlite3_step(q)) == SQLITE_ROW)
        if (bits_test(&used_stacks, sqlite3_column_int64(q, 0)))
            err = mark_frames(&used_fns, sqlite3_column_blob(q, 1), sqlite3_column_bytes(q, 1));
    if (!err && rc != SQLITE_DONE)
        err = -EIO;
out_read:
    sqlite3_finalize(q);
    q = NULL;
    sqlite3_exec(g, "COMMIT", NULL, NULL, NULL);
    /* Stacks first: one a put took meanwhile marks its functions used. */
    if (!err)
        err = sweep(st, 0, max[0], &used_stacks, &used_fns, &counts[0]);
    if (!err)
        err = sweep(st, 1, max[1], &used_fns, NULL, &counts[1]);
    if (!err)
        err = sweep(st, 2, max[2], &used_ls, NULL, &counts[2]);
out:
    pthread_mutex_lock(&st->wmu);
    st->gc_active = false;
    bits_free(st->gc_stacks);
    bits_free(st->gc_fns);
    bits_free(st->gc_labelsets);
    st->gc_stacks = st->gc_fns = st->gc_labelsets = NULL;
    pthread_mutex_unlock(&st->wmu);
    sqlite3_close(g);
    free(used_stacks.w);
    free(used_fns.w);
    free(used_ls.w);
    return err;
}

/* --- retention, size --- */

int sqls_retain(struct store *s, int64_t older_than_ns, int64_t *deleted)
{
    struct sqlite_store *st = S(s);
    sqlite3_stmt *d = NULL;
    int err = 0;

    *deleted = 0;
    /* In batches, each its own short transaction, so ingest goes on between. */
    for (;;) {
        pthread_mutex_lock(&st->wmu);
        if (!d && sqlite3_prepare_v2(st->wdb,
                                     "DELETE FROM profiles WHERE id IN (SELECT id FROM profiles "
                                     "WHERE time_ns < ? LIMIT 500)",
                                     -1, &d, NULL) != SQLITE_OK) {
            pthread_mutex_unlock(&st->wmu);
            return -EIO;
        }
        sqlite3_reset(d);
        sqlite3_bind_int64(d, 1, older_than_ns);
        int rc = sqlite3_step(d);
        int changed = sqlite3_changes(st->wdb);
        pthread_mutex_unlock(&st->wmu);
        if (rc != SQLITE_DONE) {
            err = -EIO;
            break;
        }
        *deleted += changed;
        if (changed == 0)
            break;
    }
    sqlite3_finalize(d);
    if (!err && *deleted)
        err = forget_rollups(st, older_than_ns);
    /* What the deleted profiles alone used goes too, now and then. */
    st->gc_pending += *deleted;
    int64_t now = (int64_t)clock__mono_ns();
    if (!err && st->gc_pending && (!st->gc_last_ns || now - st->gc_last_ns >= GC_EVERY_NS)) {
        int64_t counts[3];
        st->gc_last_ns = now;
        st->gc_pending = 0;
        int e = collect_orphans(st, counts);
        if (e)
            log_warn("store: collecting orphans failed: %s", strerror(-e));
        else
            log_info("store: orphans deleted: %lld stacks, %lld functions, %lld label sets "
                     "(in %.0f ms)",
                     (long long)counts[0], (long long)counts[1], (long long)counts[2],
                     (clock__mono_ns() - now) / 1e6);
    }
    return err;
}

static int64_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : 0;
}

int64_t sqls_size_bytes(struct store *s)
{
    struct sqlite_store *st = S(s);
    char wal[4096];

    snprintf(wal, sizeof(wal), "%s-wal", st->path);
    return file_size(st->path) + file_size(wal);
}

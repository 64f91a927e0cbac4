/* The SQLite store: one database file under --data-dir, in WAL mode with
 * synchronous=FULL, so a profile is on disk when put() returns.
 *
 * Tables:
 *   functions(id, name, file)        unique (name, file)
 *   stacks(id, frames, key)          frames: varint function ids, leaf first; key: the
 *                                    stack's 16-byte identity (stack_key.h), unique
 *   meta(k, v)                       the store's own settings: the stack key bases
 *   labelsets(id, text)              "k=v\x1fk=v", keys sorted; unique
 *   profiles(id, app, host, pid, container_id, time_ns, duration_ns, period_ns,
 *            samples, cpu_ns, bytes_in, data, labels, off_cpu_ns, content)
 *                                    identity (app, host, pid, time_ns, duration_ns,
 *                                    labels): unique, one row a profile however often it
 *                                    is sent (open_identity: stores from before may
 *                                    hold some twice)
 *   where labels are the identity labels, "\x1fk=v\x1fk=v\x1f" in key order, then the
 *   profile's other labels, keys sorted (store_profile__labels_text)
 *   rollups(id, app, level, bucket_ns, profiles, data)   unique (app, level, bucket_ns)
 *   rollup_dirty(app, level, bucket_ns)                 buckets to build again
 * where data is the profile's samples as varints: a 0 byte and the period,
 * then per distinct stack (stack id, labelset id + 1 or 0, samples, cpu_ns
 * less samples x period, zigzagged): CPU is nearly always samples x period,
 * so its 4 bytes a stack become 1 (blob_put). Stores from before hold
 * blobs without the 0 byte and the period, cpu_ns whole; both are read.
 * A profile with off-CPU time (off_cpu/nanoseconds in its pprof) has a
 * third byte, 0 (a stack id 0, which no stack has), and a fifth varint a
 * row, its off-CPU nanoseconds; rollups of buckets with any do the same.
 * A query reads the matching
 * profiles' data and sums by stack id; stacks and functions are read once
 * per query, through caches.
 *
 * Rollups: an application's profiles summed per 10-minute bucket (level 0),
 * per 3-hour bucket (level 1), per minute (level 2, where it halves the
 * rows: sqls_levels) and per day (level 3), in the same data format
 * (labelset 0); meta's rollup_levels says how many levels a store's
 * buckets were marked for (a store from before the minute and the day has
 * their buckets marked at open, and built in the background). A
 * put marks its buckets dirty; sqls_rollup builds dirty buckets once they
 * are complete (their end is ROLLUP_GRACE_NS in the past), under the write
 * lock, so no put can slip between the read and the write. A merge without
 * host or pid filter reads a current rollup (present and not dirty) for
 * every whole bucket of its range and raw profiles for the rest, in one
 * read transaction: a day is 1 rollup and the edges instead of 28,800
 * blobs for 20 processes, the edges minutes (sqls_levels).
 *
 * One connection for writes and one for reads, each behind its own mutex:
 * WAL lets readers run while a write commits.
 */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/buf.h"
#include "../common/hmap.h"
#include "../common/log.h"
#include "stack_key.h"
#include "store.h"
#include "store_common.h"
#include "store_sqlite_int.h"

/* --- open --- */

static const char schema[] =
    "PRAGMA journal_mode=WAL;"
    "CREATE TABLE IF NOT EXISTS functions(id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    "  file TEXT NOT NULL, UNIQUE(name, file));"
    /* Stores before stack keys made frames UNIQUE; the key says the same. */
    "CREATE TABLE IF NOT EXISTS stacks(id INTEGER PRIMARY KEY, frames BLOB NOT NULL, key BLOB);"
    "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS labelsets(id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);"
    "CREATE TABLE IF NOT EXISTS profiles(id INTEGER PRIMARY KEY, app TEXT NOT NULL,"
    "  host TEXT NOT NULL, pid INTEGER NOT NULL, container_id TEXT NOT NULL,"
    "  time_ns INTEGER NOT NULL, duration_ns INTEGER NOT NULL, period_ns INTEGER NOT NULL,"
    "  samples INTEGER NOT NULL, cpu_ns INTEGER NOT NULL, bytes_in INTEGER NOT NULL,"
    "  data BLOB NOT NULL, labels TEXT NOT NULL DEFAULT '',"
    "  off_cpu_ns INTEGER NOT NULL DEFAULT 0, content INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS profiles_app_time ON profiles(app, time_ns);"
    "CREATE INDEX IF NOT EXISTS profiles_time ON profiles(time_ns);"
    "CREATE TABLE IF NOT EXISTS rollups(id INTEGER PRIMARY KEY, app TEXT NOT NULL,"
    "  level INTEGER NOT NULL, bucket_ns INTEGER NOT NULL, profiles INTEGER NOT NULL,"
    "  data BLOB NOT NULL, UNIQUE(app, level, bucket_ns));"
    "CREATE TABLE IF NOT EXISTS rollup_dirty(app TEXT NOT NULL, level INTEGER NOT NULL,"
    "  bucket_ns INTEGER NOT NULL, PRIMARY KEY(app, level, bucket_ns)) WITHOUT ROWID;";

/* Current rollups of ?1 at level ?4 starting in [?2, ?3): present and not
 * dirty. One level at a time, so the (app, level, bucket_ns) index serves
 * the range (across levels it read every rollup the application has). */
#define ROLLUPS_IN_RANGE                                                                           \
    "SELECT bucket_ns, id FROM rollups r WHERE app = ?1 AND level = ?4 AND bucket_ns >= ?2 AND "   \
    "bucket_ns < ?3 AND NOT EXISTS (SELECT 1 FROM rollup_dirty d WHERE d.app = r.app AND "         \
    "d.level = r.level AND d.bucket_ns = r.bucket_ns) ORDER BY bucket_ns"

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st, char *err, size_t errlen)
{
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) == SQLITE_OK)
        return 0;
    snprintf(err, errlen, "sqlite: %s: %s", sql, sqlite3_errmsg(db));
    return -1;
}

/* cx_labels(labels, spec): whether a profile's labels text passes the
 * matches of spec (store_match__test). */
static void cx_labels(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    const char *l = (const char *)sqlite3_value_text(argv[0]);
    const char *spec = (const char *)sqlite3_value_text(argv[1]);

    (void)argc;
    sqlite3_result_int(ctx, store_match__test(l ? l : "", l ? sqlite3_value_bytes(argv[0]) : 0,
                                              spec ? spec : "",
                                              spec ? sqlite3_value_bytes(argv[1]) : 0));
}

int sqls_open_db(const char *path, sqlite3 **db, char *err, size_t errlen)
{
    if (sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: cannot open %s: %s", path,
                 *db ? sqlite3_errmsg(*db) : "out of memory");
        return -1;
    }
    sqlite3_busy_timeout(*db, 10000);
    /* FULL: a commit is on disk before it returns, so 202 means durable. */
    if (sqlite3_exec(*db, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=OFF;", NULL, NULL, NULL) !=
        SQLITE_OK) {
        snprintf(err, errlen, "sqlite: %s", sqlite3_errmsg(*db));
        return -1;
    }
    if (sqlite3_create_function_v2(*db, "cx_labels", 2,
                                   SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                   cx_labels, NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: adding cx_labels: %s", sqlite3_errmsg(*db));
        return -1;
    }
    return 0;
}

static void sqlite_close(struct store *s);

static int prepare_readers(sqlite3 *db, struct readers *r, char *err, size_t errlen)
{
    return prepare(db, "SELECT data FROM profiles WHERE " QUERY_FILTER, &r->profiles, err,
                   errlen) ||
           prepare(db, ROLLUPS_IN_RANGE, &r->rollups, err, errlen) ||
           prepare(db, "SELECT profiles, data FROM rollups WHERE id = ?", &r->rollup, err, errlen);
}

/* A column of profiles added since the first stores (decl: its type and
 * default, which old rows take): identity labels, off-CPU time. */
static int add_column(sqlite3 *db, const char *name, const char *decl, char *err, size_t errlen)
{
    sqlite3_stmt *c = NULL;
    bool has = false;
    char sql[200];

    if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('profiles') WHERE name = ?", -1, &c,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_text(c, 1, name, -1, SQLITE_STATIC);
        has = sqlite3_step(c) == SQLITE_ROW;
    }
    sqlite3_finalize(c);
    snprintf(sql, sizeof(sql), "ALTER TABLE profiles ADD COLUMN %s %s", name, decl);
    if (!has && sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: adding the %s column: %s", name, sqlite3_errmsg(db));
        return -1;
    }
    return 0;
}

/* Every bucket of the levels numbered from `from` on that db's profiles
 * touch marked dirty, so the builder catches up in the background: all
 * levels for a store made before rollups existed, the levels added since
 * for one made before them (meta's rollup_levels: how many it has). */
static int mark_all_dirty(sqlite3 *db, int from, char *err, size_t errlen)
{
    for (int l = 0; l < SQLS_LEVELS; l++) {
        char sql[256];
        if (sqls_levels[l].id < from)
            continue;
        long long len = (long long)sqls_levels[l].ns;
        snprintf(sql, sizeof(sql),
                 "INSERT OR IGNORE INTO rollup_dirty(app, level, bucket_ns) SELECT DISTINCT app, "
                 "%d, time_ns - (((time_ns %% %lld) + %lld) %% %lld) FROM profiles",
                 sqls_levels[l].id, len, len, len);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
            snprintf(err, errlen, "sqlite: marking rollups to build: %s", sqlite3_errmsg(db));
            return -1;
        }
    }
    char sql[96];
    snprintf(sql, sizeof(sql), "INSERT OR REPLACE INTO meta(k, v) VALUES('rollup_levels', %d)",
             SQLS_LEVELS);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: marking rollups to build: %s", sqlite3_errmsg(db));
        return -1;
    }
    return 0;
}

/* How many of sqls_levels a store's rollups have been built for: meta's
 * rollup_levels, or the two levels of the stores made before it. */
static int rollup_levels(sqlite3 *db)
{
    sqlite3_stmt *q = NULL;
    int n = 2;

    if (sqlite3_prepare_v2(db, "SELECT v FROM meta WHERE k = 'rollup_levels'", -1, &q, NULL) ==
            SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    return n;
}

/* sqlite's reason for the failure of a stack keys' step into err; returns -1. */
static int keys_dberr(sqlite3 *db, char *err, size_t errlen)
{
    snprintf(err, errlen, "sqlite: stack keys: %s", sqlite3_errmsg(db));
    return -1;
}

/* Inside open_keys' transaction: the stacks table's key column (added when
 * missing) and the stack hasher's bases from meta into base; bases missing,
 * or of another STACK_KEY_VERSION, are drawn anew and stored, and every
 * stored key is cleared (with its index) to be computed again. Returns 0, or
 * -1 with err set. */
static int keys_bases(sqlite3 *db, uint64_t base[STACK_HASHER_BASES], char *err, size_t errlen)
{
    const char *const *names = store_key_base_names;
    sqlite3_stmt *q = NULL;
    int got = 0, version = 0;
    bool has_key = false;

    if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('stacks') WHERE name = 'key'", -1,
                           &q, NULL) != SQLITE_OK)
        return keys_dberr(db, err, errlen);
    has_key = sqlite3_step(q) == SQLITE_ROW;
    sqlite3_finalize(q);
    q = NULL;
    if (!has_key &&
        sqlite3_exec(db, "ALTER TABLE stacks ADD COLUMN key BLOB", NULL, NULL, NULL) != SQLITE_OK)
        return keys_dberr(db, err, errlen);
    if (sqlite3_prepare_v2(db, "SELECT k, v FROM meta", -1, &q, NULL) != SQLITE_OK)
        return keys_dberr(db, err, errlen);
    while (sqlite3_step(q) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(q, 0);
        for (int i = 0; k && i < STACK_HASHER_BASES; i++) {
            if (strcmp(k, names[i]) == 0) {
                base[i] = sqlite3_column_int64(q, 1);
                got |= 1 << i;
            }
        }
        if (k && strcmp(k, "stack_key_version") == 0)
            version = sqlite3_column_int(q, 1);
    }
    sqlite3_finalize(q);
    q = NULL;
    if (got != (1 << STACK_HASHER_BASES) - 1 || version != STACK_KEY_VERSION) {
        int e = stack_hasher__new_bases(base);
        if (e) {
            snprintf(err, errlen, "no random bytes for the stack keys: %s", strerror(-e));
            return -1;
        }
        char sql[400];
        snprintf(sql, sizeof(sql),
                 "INSERT OR REPLACE INTO meta(k, v) VALUES('%s', %lld), ('%s', %lld), "
                 "('%s', %lld), ('%s', %lld), ('stack_key_version', %d);"
                 "UPDATE stacks SET key = NULL",
                 names[0], (long long)base[0], names[1], (long long)base[1], names[2],
                 (long long)base[2], names[3], (long long)base[3], STACK_KEY_VERSION);
        if (sqlite3_exec(db, "DROP INDEX IF EXISTS stacks_key", NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
            return keys_dberr(db, err, errlen);
    }
    return 0;
}

/* Inside open_keys' transaction, with st->hasher ready: how many stacks
 * have no key (*pending) and the highest function id (*max_fn); when some
 * have none, the key of every function by id in *fkeys (max_fn + 1 of them)
 * and room for one stack's frames' keys in *frame_keys, both the caller's
 * to free, even on failure. Returns 0, or -1 with err set. */
static int keys_functions(struct sqlite_store *st, sqlite3 *db, int64_t *pending, int64_t *max_fn,
                          struct stack_key **fkeys, struct stack_key **frame_keys, char *err,
                          size_t errlen)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;

    /* Stacks without a key: each frames blob (function ids) -> the keys of
     * its functions -> its key. Function ids are rowids, dense from 1. */
    if (sqlite3_prepare_v2(db,
                           "SELECT (SELECT count(*) FROM stacks WHERE key IS NULL), "
                           "(SELECT coalesce(max(id), 0) FROM functions)",
                           -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW) {
        rc = keys_dberr(db, err, errlen);
        goto out;
    }
    *pending = sqlite3_column_int64(q, 0);
    *max_fn = sqlite3_column_int64(q, 1);
    sqlite3_finalize(q);
    q = NULL;
    if (*pending) {
        if (*max_fn > (1 << 28) || !(*fkeys = calloc(*max_fn + 1, sizeof(**fkeys))) ||
            !(*frame_keys = malloc(STACK_KEY_MAX_FRAMES * sizeof(**frame_keys)))) {
            snprintf(err, errlen, "no memory to key %lld stored stacks", (long long)*pending);
            rc = -1;
            goto out;
        }
        if (sqlite3_prepare_v2(db, "SELECT id, name, file FROM functions", -1, &q, NULL) !=
            SQLITE_OK) {
            rc = keys_dberr(db, err, errlen);
            goto out;
        }
        while (sqlite3_step(q) == SQLITE_ROW) {
            int64_t id = sqlite3_column_int64(q, 0);
            const char *name = (const char *)sqlite3_column_text(q, 1);
            const char *file = (const char *)sqlite3_column_text(q, 2);
            if (id > 0 && id <= *max_fn)
                (*fkeys)[id] = stack_hasher__function(&st->hasher, name ? name : "",
                                                      sqlite3_column_bytes(q, 1), file ? file : "",
                                                      sqlite3_column_bytes(q, 2));
        }
    }
    rc = 0;
out:
    sqlite3_finalize(q);
    return rc;
}

/* Inside open_keys' transaction, after keys_functions: the key of each of
 * the (at most pending) stacks without one, written to it; a key another
 * stack has already is refused by the unique index and counted in *dups,
 * the others in *keyed. Returns 0, or -1 with err set. */
static int keys_stacks(struct sqlite_store *st, sqlite3 *db, int64_t pending, int64_t max_fn,
                       const struct stack_key *fkeys, struct stack_key *frame_keys, int64_t *keyed,
                       int64_t *dups, char *err, size_t errlen)
{
    sqlite3_stmt *q = NULL, *up = NULL;
    struct {
        int64_t id;
        struct stack_key key;
    } *todo = NULL;
    int rc = -1;

    /* Keys computed first, written after: a table is not updated while a
     * statement still reads it. */
    if (pending && !(todo = malloc(pending * sizeof(*todo)))) {
        snprintf(err, errlen, "no memory to key %lld stored stacks", (long long)pending);
        rc = -1;
        goto out;
    }
    if (sqlite3_prepare_v2(db, "SELECT id, frames FROM stacks WHERE key IS NULL", -1, &q, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(db, "UPDATE stacks SET key = ? WHERE id = ?", -1, &up, NULL) !=
            SQLITE_OK) {
        rc = keys_dberr(db, err, errlen);
        goto out;
    }
    int64_t ntodo = 0;
    while (ntodo < pending && sqlite3_step(q) == SQLITE_ROW) {
        const unsigned char *p = sqlite3_column_blob(q, 1); /* NULL when empty */
        const unsigned char *end = p ? p + sqlite3_column_bytes(q, 1) : p;
        size_t n = 0;
        uint64_t fid;
        while (p && p < end && n < STACK_KEY_MAX_FRAMES && (p = varint__get(p, end, &fid)))
            frame_keys[n++] = fid <= (uint64_t)max_fn ? fkeys[fid] : (struct stack_key){0, 0};
        todo[ntodo].id = sqlite3_column_int64(q, 0);
        todo[ntodo++].key = stack_hasher__stack(&st->hasher, frame_keys, n);
    }
    sqlite3_finalize(q);
    q = NULL;
    for (int64_t i = 0; i < ntodo; i++) {
        unsigned char key[16];
        stack_key__encode(todo[i].key, key);
        sqlite3_reset(up);
        sqlite3_bind_blob(up, 1, key, sizeof(key), SQLITE_STATIC);
        sqlite3_bind_int64(up, 2, todo[i].id);
        int rc2 = sqlite3_step(up);
        if ((rc2 & 0xff) == SQLITE_CONSTRAINT) {
            (*dups)++;
            continue;
        }
        if (rc2 != SQLITE_DONE) {
            rc = keys_dberr(db, err, errlen);
            goto out;
        }
        (*keyed)++;
    }
    rc = 0;
out:
    sqlite3_finalize(q);
    sqlite3_finalize(up);
    free(todo);
    return rc;
}

/* Stores made with another STACK_KEY_VERSION (or none) have their stacks
 * keyed again when opened. */

/* The stack key bases, drawn when the store is made; then every stack
 * without a key of this version gets one (a store made before keys, or
 * with another version), and keys are unique. One transaction: a store is
 * migrated whole or not at all. */
static int open_keys(struct sqlite_store *st, char *err, size_t errlen)
{
    sqlite3 *db = st->wdb;
    uint64_t base[STACK_HASHER_BASES] = {0};
    struct stack_key *fkeys = NULL, *frame_keys = NULL;
    int64_t pending = 0, max_fn = 0, keyed = 0, dups = 0;
    int rc = -1;

    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        rc = keys_dberr(db, err, errlen);
        goto out;
    }
    if ((rc = keys_bases(db, base, err, errlen)))
        goto out;
    if (stack_hasher__init(&st->hasher, base)) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
        goto out;
    }
    if ((rc = keys_functions(st, db, &pending, &max_fn, &fkeys, &frame_keys, err, errlen)))
        goto out;
    /* The index first: a key that another stack has already (the same
     * frames stored twice by an earlier version) is then refused, and that
     * row keeps no key: it is still read by id, and new profiles go to the
     * other. */
    if (sqlite3_exec(db, "CREATE UNIQUE INDEX IF NOT EXISTS stacks_key ON stacks(key)", NULL, NULL,
                     NULL) != SQLITE_OK) {
        rc = keys_dberr(db, err, errlen);
        goto out;
    }
    if ((rc = keys_stacks(st, db, pending, max_fn, fkeys, frame_keys, &keyed, &dups, err, errlen)))
        goto out;
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        rc = keys_dberr(db, err, errlen);
        goto out;
    }
    if (keyed || dups)
        log_info("store: %lld stored stacks keyed (stack key version %d); %lld the same as "
                 "another, left without a key",
                 (long long)keyed, STACK_KEY_VERSION, (long long)dups);
    rc = 0;
out:
    if (rc)
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    free(fkeys);
    free(frame_keys);
    return rc;
}

/* The columns that say which profile a row is (docs/internals/store.md,
 * "A profile sent again"): an index on them makes a profile sent again
 * after its 202 (an agent whose answer was lost) a lookup that finds it
 * (sqls_put's sel_profile). */
#define IDENTITY_COLUMNS "app, host, pid, time_ns, duration_ns, labels, content"
#define IDENTITY_NCOLUMNS 7

/* The number of rows of profiles that repeat another's identity, counted
 * through the identity index; -1 on a database error. */
static int64_t identity_dups(sqlite3 *db)
{
    sqlite3_stmt *q = NULL;
    int64_t n = -1;

    if (sqlite3_prepare_v2(db,
                           "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM "
                           "profiles INDEXED BY profiles_identity GROUP BY " IDENTITY_COLUMNS
                           " HAVING n > 1)",
                           -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return n;
}

/* The index profiles_identity: UNIQUE, so that even a write that skipped
 * the put's lookup could not store a profile twice; but a store written
 * before it may hold profiles twice already (retries counted twice), and
 * those rows are left as they were (which copy would be "the" one is
 * not for open to decide, and retention drops them in time): the index is
 * then a plain one, serving the same lookup, and each open logs how many
 * rows repeat another and tries UNIQUE again once none do. One
 * transaction. Returns 0, or -1 with err set. */
static int open_identity(sqlite3 *db, char *err, size_t errlen)
{
    sqlite3_stmt *q = NULL;
    int unique = -1; /* -1: no index yet */
    int64_t dups = 0;
    int rc = -1;

    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        goto dberr;
    /* An index of other columns (a build that had no content digest in
     * it) is made again. */
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM pragma_index_info('profiles_identity')", -1,
                           &q, NULL) != SQLITE_OK)
        goto dberr;
    if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) != 0 &&
        sqlite3_column_int(q, 0) != IDENTITY_NCOLUMNS &&
        sqlite3_exec(db, "DROP INDEX profiles_identity", NULL, NULL, NULL) != SQLITE_OK)
        goto dberr;
    sqlite3_finalize(q);
    q = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT \"unique\" FROM pragma_index_list('profiles') WHERE name = "
                           "'profiles_identity'",
                           -1, &q, NULL) != SQLITE_OK)
        goto dberr;
    if (sqlite3_step(q) == SQLITE_ROW)
        unique = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    q = NULL;
    if (unique == 1)
        goto commit;
    if (unique == 0 && (dups = identity_dups(db)) < 0)
        goto dberr;
    if (dups == 0) {
        int r =
            sqlite3_exec(db,
                         "DROP INDEX IF EXISTS profiles_identity;"
                         "CREATE UNIQUE INDEX profiles_identity ON profiles(" IDENTITY_COLUMNS ")",
                         NULL, NULL, NULL);
        if (r == SQLITE_OK) {
            if (unique == 0)
                log_info("store: no profile stored twice any more; its identity index is "
                         "unique again");
            goto commit;
        }
        if ((r & 0xff) != SQLITE_CONSTRAINT)
            goto dberr;
        /* A store from before the index, holding some profile twice. */
        if (sqlite3_exec(
                db,
                "CREATE INDEX IF NOT EXISTS profiles_identity ON profiles(" IDENTITY_COLUMNS ")",
                NULL, NULL, NULL) != SQLITE_OK ||
            (dups = identity_dups(db)) < 0)
            goto dberr;
    }
    log_warn("store: %lld stored profiles repeat another (sent again after being stored, "
             "by a server before the identity index): left as they are, counted twice until "
             "retention drops them; new ones are stored once",
             (long long)dups);
commit:
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto dberr;
    return 0;
dberr:
    snprintf(err, errlen, "sqlite: the profiles' identity index: %s", sqlite3_errmsg(db));
    sqlite3_finalize(q);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

static const struct store_ops sqlite_ops;

struct store *store_sqlite__open(const char *dir, char *err, size_t errlen)
{
    struct sqlite_store *st = calloc(1, sizeof(*st));
    char *e = NULL;

    if (!st) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    st->base.ops = &sqlite_ops;
    pthread_mutex_init(&st->wmu, NULL);
    pthread_mutex_init(&st->rmu, NULL);
    if (mkdir(dir, 0750) && errno != EEXIST) {
        snprintf(err, errlen, "cannot create --data-dir %s: %s", dir, strerror(errno));
        goto fail;
    }
    size_t len = strlen(dir) + 32;
    st->path = malloc(len);
    if (!st->path) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    snprintf(st->path, len, "%s/profiles.db", dir);
    if (sqls_open_db(st->path, &st->wdb, err, errlen))
        goto fail;
    sqlite3_stmt *had = NULL;
    bool had_rollups = false;
    if (sqlite3_prepare_v2(st->wdb, "SELECT 1 FROM sqlite_master WHERE name = 'rollups'", -1, &had,
                           NULL) == SQLITE_OK)
        had_rollups = sqlite3_step(had) == SQLITE_ROW;
    sqlite3_finalize(had);
    if (sqlite3_exec(st->wdb, schema, NULL, NULL, &e) != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: cannot create the schema in %s: %s", st->path, e);
        sqlite3_free(e);
        goto fail;
    }
    int levels = had_rollups ? rollup_levels(st->wdb) : 0;
    if (levels < SQLS_LEVELS && mark_all_dirty(st->wdb, levels, err, errlen))
        goto fail;
    if (add_column(st->wdb, "labels", "TEXT NOT NULL DEFAULT ''", err, errlen) ||
        add_column(st->wdb, "off_cpu_ns", "INTEGER NOT NULL DEFAULT 0", err, errlen) ||
        add_column(st->wdb, "content", "INTEGER NOT NULL DEFAULT 0", err, errlen) ||
        open_keys(st, err, errlen) || open_identity(st->wdb, err, errlen))
        goto fail;
    if (sqls_open_db(st->path, &st->rdb, err, errlen))
        goto fail;
    /* Queries read the database file mapped, not copied out page by page
     * with pread (a week's merge reads ~15 MB of blobs: ~6 % of its CPU in
     * the kernel's copies). Reads only: writes still go through the write
     * connection's own calls. Not fatal when refused: SQLite reads as
     * before. */
    sqlite3_exec(st->rdb, "PRAGMA mmap_size=4294967296", NULL, NULL, NULL);
    st->fn_ids = stack_keymap__new(CACHE_MAX);
    st->stack_ids = stack_keymap__new(STACK_CACHE_MAX);
    st->labelset_ids = hmap__new();
    if (!st->fn_ids || !st->stack_ids || !st->labelset_ids) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (prepare(st->wdb, "INSERT OR IGNORE INTO functions(name, file) VALUES(?, ?)", &st->ins_fn,
                err, errlen) ||
        prepare(st->wdb, "SELECT id FROM functions WHERE name = ? AND file = ?", &st->sel_fn, err,
                errlen) ||
        prepare(st->wdb, "INSERT INTO stacks(frames, key) VALUES(?, ?)", &st->ins_stack, err,
                errlen) ||
        prepare(st->wdb, "SELECT id FROM stacks WHERE key = ?", &st->sel_stack, err, errlen) ||
        prepare(st->wdb, "SELECT id FROM stacks WHERE frames = ?", &st->sel_frames, err, errlen) ||
        prepare(st->wdb, "INSERT OR IGNORE INTO labelsets(text) VALUES(?)", &st->ins_ls, err,
                errlen) ||
        prepare(st->wdb, "SELECT id FROM labelsets WHERE text = ?", &st->sel_ls, err, errlen) ||
        prepare(st->wdb,
                "INSERT INTO profiles(app, host, pid, container_id, time_ns, duration_ns, "
                "period_ns, samples, cpu_ns, bytes_in, data, labels, off_cpu_ns, content) "
                "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                &st->ins_profile, err, errlen) ||
        prepare(st->wdb,
                "SELECT 1 FROM profiles INDEXED BY profiles_identity WHERE app = ? AND host = ? "
                "AND pid = ? AND time_ns = ? AND duration_ns = ? AND labels = ? AND content = ?",
                &st->sel_profile, err, errlen) ||
        prepare(st->wdb, "INSERT OR IGNORE INTO rollup_dirty(app, level, bucket_ns) VALUES(?,?,?)",
                &st->ins_dirty, err, errlen) ||
        prepare_readers(st->wdb, &st->wr, err, errlen) ||
        prepare_readers(st->rdb, &st->rd, err, errlen) ||
        prepare(st->rdb, "SELECT time_ns, cpu_ns, off_cpu_ns FROM profiles WHERE " QUERY_FILTER,
                &st->q_timeline, err, errlen) ||
        prepare(st->rdb, "SELECT frames FROM stacks WHERE id = ?", &st->q_stack, err, errlen) ||
        prepare(st->rdb, "SELECT name, file FROM functions WHERE id = ?", &st->q_fn, err, errlen))
        goto fail;
    return &st->base;
fail:
    sqlite_close(&st->base);
    return NULL;
}

static void sqlite_close(struct store *s)
{
    struct sqlite_store *st = S(s);
    sqlite3_stmt *stmts[] = {st->ins_fn,      st->sel_fn,      st->ins_stack,   st->sel_stack,
                             st->sel_frames,  st->ins_ls,      st->sel_ls,      st->ins_profile,
                             st->sel_profile, st->ins_dirty,   st->wr.profiles, st->wr.rollups,
                             st->wr.rollup,   st->rd.profiles, st->rd.rollups,  st->rd.rollup,
                             st->q_timeline,  st->q_stack,     st->q_fn};

    for (size_t i = 0; i < sizeof(stmts) / sizeof(stmts[0]); i++)
        sqlite3_finalize(stmts[i]);
    sqlite3_close(st->wdb);
    sqlite3_close(st->rdb);
    stack_keymap__free(st->fn_ids);
    stack_keymap__free(st->stack_ids);
    hmap__free(st->labelset_ids);
    stack_hasher__free(&st->hasher);
    pthread_mutex_destroy(&st->wmu);
    pthread_mutex_destroy(&st->rmu);
    free(st->path);
    free(st);
}

static const struct store_ops sqlite_ops = {
    .hasher = sqls_hasher,
    .put = sqls_put,
    .group_begin = sqls_group_begin,
    .group_end = sqls_group_end,
    .put_mem = sqls_put_mem,
    .merge = sqls_merge,
    .applications = sqls_applications,
    .values = sqls_values,
    .timeline = sqls_timeline,
    .fn_timeline = sqls_fn_timeline,
    .retain = sqls_retain,
    .rollup = sqls_rollup,
    .size_bytes = sqls_size_bytes,
    .close = sqlite_close,
};

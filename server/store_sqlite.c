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
 *            samples, cpu_ns, bytes_in, data, labels)
 *   where labels are the identity labels, "\x1fk=v\x1fk=v\x1f" in key order
 *   rollups(id, app, level, bucket_ns, profiles, data)   unique (app, level, bucket_ns)
 *   rollup_dirty(app, level, bucket_ns)                 buckets to build again
 * where data is the profile's samples as varints: a 0 byte and the period,
 * then per distinct stack (stack id, labelset id + 1 or 0, samples, cpu_ns
 * less samples x period, zigzagged): CPU is nearly always samples x period,
 * so its 4 bytes a stack become 1 (blob_put). Stores from before hold
 * blobs without the 0 byte and the period, cpu_ns whole; both are read. A query reads the matching
 * profiles' data and sums by stack id; stacks and functions are read once
 * per query, through caches.
 *
 * Rollups: an application's profiles summed per 10-minute bucket (level 0)
 * and per 3-hour bucket (level 1), in the same data format (labelset 0). A
 * put marks its buckets dirty; sqlite_rollup builds dirty buckets once they
 * are complete (their end is ROLLUP_GRACE_NS in the past), under the write
 * lock, so no put can slip between the read and the write. A merge without
 * host or pid filter reads a current rollup (present and not dirty) for
 * every whole bucket of its range and raw profiles for the rest, in one
 * read transaction: a day is 8 rollups and the edges instead of 28,800
 * blobs for 20 processes.
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
#include "../common/clock.h"
#include "../common/hmap.h"
#include "../common/log.h"
#include "sat.h"
#include "stack_key.h"
#include "store.h"
#include "text.h"

/* Entries in each id cache before it is dropped and refilled from the
 * database: the caches are a speed-up, never the truth. */
#define CACHE_MAX 2000000
/* Stack keys cached: 24 bytes each, at most 2x that in the table. */
#define STACK_CACHE_MAX 4000000

#define N_LEVELS 2
static const int64_t level_ns[N_LEVELS] = {600ll * 1000000000, 10800ll * 1000000000};
/* Profiles come in up to a window (a minute) after they start, plus the
 * upload: a bucket is built once its end is this far behind. A later one
 * marks it dirty again. */
#define ROLLUP_GRACE_NS (120ll * 1000000000)

static int64_t bucket_of(int64_t t, int64_t len)
{
    int64_t b = t / len * len;
    return b > t ? b - len : b;
}

/* The statements a merge reads through, one set per connection: queries
 * read on rdb, the rollup builder on wdb inside its write transaction. */
struct readers {
    sqlite3_stmt *profiles; /* data of raw profiles: QUERY_FILTER */
    sqlite3_stmt *rollups;  /* current rollups of an app in a range */
    sqlite3_stmt *rollup;   /* one rollup's profiles and data */
};

struct sqlite_store {
    struct store base;
    char *path;
    sqlite3 *wdb, *rdb;
    pthread_mutex_t wmu, rmu;
    /* writer's caches: key -> id (rowid) */
    struct hmap *labelset_ids;
    struct stack_keymap *fn_ids, *stack_ids; /* function key, stack key -> id */
    struct stack_hasher hasher;
    sqlite3_stmt *ins_fn, *sel_fn, *ins_stack, *sel_stack, *sel_frames, *ins_ls, *sel_ls,
        *ins_profile, *ins_dirty;
    struct readers wr; /* the rollup builder's, on wdb */
    /* reader's statements */
    struct readers rd;
    sqlite3_stmt *q_timeline, *q_stack, *q_fn;
    /* Orphan collection (collect_orphans): while it runs, puts mark what
     * they use, under wmu, so nothing it found unused but a put just took
     * is deleted. */
    bool gc_active, gc_oom;
    struct bits *gc_stacks, *gc_fns, *gc_labelsets;
    int64_t gc_last_ns; /* when it last ran, monotonic; 0 never */
    int64_t gc_pending; /* profiles deleted since */
};

static struct sqlite_store *S(struct store *s)
{
    return (struct sqlite_store *)s;
}

/* --- varints (the protobuf kind: 7 bits a byte, low first) --- */

/* Writes v as a varint at p; returns the end. p needs 10 bytes of room. */
static inline unsigned char *wr_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (v & 0x7f) | 0x80;
        v >>= 7;
    }
    *p++ = v;
    return p;
}

/* --- data blobs: see the top of the file --- */

#define BLOB_ROW_MAX 40 /* four varints */

/* Starts a blob at p (11 bytes of room); returns the end. */
static unsigned char *blob_begin(unsigned char *p, int64_t period)
{
    *p++ = 0;
    return wr_varint(p, (uint64_t)period);
}

/* One stack's row at p (BLOB_ROW_MAX bytes of room); returns the end. The
 * arithmetic wraps the same way both ways, so any values come back exact. */
static inline unsigned char *blob_put(unsigned char *p, int64_t period, uint64_t sid, uint64_t ls,
                                      int64_t samples, int64_t cpu)
{
    int64_t d = (int64_t)((uint64_t)cpu - (uint64_t)samples * (uint64_t)period);
    p = wr_varint(p, sid);
    p = wr_varint(p, ls);
    p = wr_varint(p, (uint64_t)samples);
    return wr_varint(p, ((uint64_t)d << 1) ^ (uint64_t)(d >> 63));
}

static const unsigned char *get_varint(const unsigned char *p, const unsigned char *end,
                                       uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; p < end && shift < 64; shift += 7) {
        unsigned char c = *p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return p;
        }
    }
    return NULL;
}

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
static int bits_set(struct bits *b, uint64_t i)
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

/* Marks, under wmu, what a put uses while a collection runs. */
static void gc_mark_put(struct sqlite_store *st, const int64_t *sids, size_t nsids,
                        const int64_t *ls_ids, size_t nls)
{
    if (!st->gc_active)
        return;
    for (size_t i = 0; i < nsids; i++)
        if (bits_set(st->gc_stacks, sids[i]))
            st->gc_oom = true;
    for (size_t i = 0; i < nls; i++)
        if (bits_set(st->gc_labelsets, ls_ids[i]))
            st->gc_oom = true;
}

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
    "  data BLOB NOT NULL, labels TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX IF NOT EXISTS profiles_app_time ON profiles(app, time_ns);"
    "CREATE INDEX IF NOT EXISTS profiles_time ON profiles(time_ns);"
    "CREATE TABLE IF NOT EXISTS rollups(id INTEGER PRIMARY KEY, app TEXT NOT NULL,"
    "  level INTEGER NOT NULL, bucket_ns INTEGER NOT NULL, profiles INTEGER NOT NULL,"
    "  data BLOB NOT NULL, UNIQUE(app, level, bucket_ns));"
    "CREATE TABLE IF NOT EXISTS rollup_dirty(app TEXT NOT NULL, level INTEGER NOT NULL,"
    "  bucket_ns INTEGER NOT NULL, PRIMARY KEY(app, level, bucket_ns)) WITHOUT ROWID;";

/* Current rollups of ?1 starting in [?2, ?3): present and not dirty. */
#define ROLLUPS_IN_RANGE                                                                           \
    "SELECT level, bucket_ns, id FROM rollups r WHERE app = ?1 AND bucket_ns >= ?2 AND "           \
    "bucket_ns < ?3 AND NOT EXISTS (SELECT 1 FROM rollup_dirty d WHERE d.app = r.app AND "         \
    "d.level = r.level AND d.bucket_ns = r.bucket_ns) ORDER BY level, bucket_ns"

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st, char *err, size_t errlen)
{
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) == SQLITE_OK)
        return 0;
    snprintf(err, errlen, "sqlite: %s: %s", sql, sqlite3_errmsg(db));
    return -1;
}

static int open_db(const char *path, sqlite3 **db, char *err, size_t errlen)
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
    return 0;
}

static void sqlite_close(struct store *s);

/* The rows a store_query selects; bind_query fills its parameters. The
 * (app, time_ns) index serves it; pid and host only filter. */
#define LABEL_FILTER(n) " AND (?" #n " IS NULL OR instr(labels, ?" #n ") > 0)"
#define QUERY_FILTER                                                                               \
    "app = ?1 AND time_ns >= ?2 AND time_ns < ?3 AND (?4 = 0 OR pid = ?4) "                        \
    "AND (?5 IS NULL OR host = ?5)" LABEL_FILTER(6) LABEL_FILTER(7) LABEL_FILTER(8)                \
        LABEL_FILTER(9) LABEL_FILTER(10)

const char *const store_identity_keys[STORE_N_IDENTITY] = {"container_id", "pod", "namespace",
                                                           "container", "systemd_unit"};

static void bind_query(sqlite3_stmt *stmt, const struct store_query *q)
{
    sqlite3_reset(stmt);
    sqlite3_bind_text(stmt, 1, q->app, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, q->from_ns);
    sqlite3_bind_int64(stmt, 3, q->to_ns);
    sqlite3_bind_int64(stmt, 4, q->pid);
    if (q->host)
        sqlite3_bind_text(stmt, 5, q->host, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(stmt, 5);
    for (int i = 0; i < STORE_N_IDENTITY; i++) {
        if (q->identity[i]) {
            /* "\x1fkey=value\x1f": labels hold no control characters */
            char *m = sqlite3_mprintf("\x1f%s=%s\x1f", store_identity_keys[i], q->identity[i]);
            if (m)
                sqlite3_bind_text(stmt, 6 + i, m, -1, sqlite3_free);
            else
                sqlite3_bind_text(stmt, 6 + i, "\x1f\x1f", -1, SQLITE_STATIC); /* matches nothing */
        } else {
            sqlite3_bind_null(stmt, 6 + i);
        }
    }
}

static bool filters_identity(const struct store_query *q)
{
    for (int i = 0; i < STORE_N_IDENTITY; i++)
        if (q->identity[i])
            return true;
    return false;
}

static int prepare_readers(sqlite3 *db, struct readers *r, char *err, size_t errlen)
{
    return prepare(db, "SELECT data FROM profiles WHERE " QUERY_FILTER, &r->profiles, err,
                   errlen) ||
           prepare(db, ROLLUPS_IN_RANGE, &r->rollups, err, errlen) ||
           prepare(db, "SELECT profiles, data FROM rollups WHERE id = ?", &r->rollup, err, errlen);
}

/* A store made before identity labels: the column, empty for old rows. */
static int add_labels_column(sqlite3 *db, char *err, size_t errlen)
{
    sqlite3_stmt *c = NULL;
    bool has = false;

    if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('profiles') WHERE name = 'labels'",
                           -1, &c, NULL) == SQLITE_OK)
        has = sqlite3_step(c) == SQLITE_ROW;
    sqlite3_finalize(c);
    if (!has && sqlite3_exec(db, "ALTER TABLE profiles ADD COLUMN labels TEXT NOT NULL DEFAULT ''",
                             NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: adding the labels column: %s", sqlite3_errmsg(db));
        return -1;
    }
    return 0;
}

/* A store made before rollups existed: every bucket its profiles touch is
 * dirty, so the builder catches up in the background. */
static int mark_all_dirty(sqlite3 *db, char *err, size_t errlen)
{
    for (int l = 0; l < N_LEVELS; l++) {
        char sql[256];
        snprintf(sql, sizeof(sql),
                 "INSERT OR IGNORE INTO rollup_dirty(app, level, bucket_ns) SELECT DISTINCT app, "
                 "%d, time_ns - (((time_ns %% %lld) + %lld) %% %lld) FROM profiles",
                 l, (long long)level_ns[l], (long long)level_ns[l], (long long)level_ns[l]);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
            snprintf(err, errlen, "sqlite: marking rollups to build: %s", sqlite3_errmsg(db));
            return -1;
        }
    }
    return 0;
}

/* Keys as stack_key.h makes them now; stores made with another version (or
 * none) have their stacks keyed again when opened. */
#define STACK_KEY_VERSION 2

/* The stack key bases, drawn when the store is made; then every stack
 * without a key of this version gets one (a store made before keys, or
 * with another version), and keys are unique. One transaction: a store is
 * migrated whole or not at all. */
static int open_keys(struct sqlite_store *st, char *err, size_t errlen)
{
    static const char *const names[STACK_HASHER_BASES] = {"stack_base_a", "stack_base_b",
                                                          "stack_base_c", "stack_base_d"};
    sqlite3 *db = st->wdb;
    sqlite3_stmt *q = NULL, *up = NULL;
    uint64_t base[STACK_HASHER_BASES] = {0};
    struct stack_key *fkeys = NULL, *frame_keys = NULL;
    struct {
        int64_t id;
        struct stack_key key;
    } *todo = NULL;
    int got = 0, rc = -1, version = 0;
    bool has_key = false;

    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        goto dberr;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('stacks') WHERE name = 'key'", -1,
                           &q, NULL) != SQLITE_OK)
        goto dberr;
    has_key = sqlite3_step(q) == SQLITE_ROW;
    sqlite3_finalize(q);
    q = NULL;
    if (!has_key &&
        sqlite3_exec(db, "ALTER TABLE stacks ADD COLUMN key BLOB", NULL, NULL, NULL) != SQLITE_OK)
        goto dberr;
    if (sqlite3_prepare_v2(db, "SELECT k, v FROM meta", -1, &q, NULL) != SQLITE_OK)
        goto dberr;
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
            goto fail;
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
            goto dberr;
    }
    if (stack_hasher__init(&st->hasher, base)) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    /* Stacks without a key: each frames blob (function ids) -> the keys of
     * its functions -> its key. Function ids are rowids, dense from 1. */
    int64_t pending = 0, max_fn = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT (SELECT count(*) FROM stacks WHERE key IS NULL), "
                           "(SELECT coalesce(max(id), 0) FROM functions)",
                           -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW)
        goto dberr;
    pending = sqlite3_column_int64(q, 0);
    max_fn = sqlite3_column_int64(q, 1);
    sqlite3_finalize(q);
    q = NULL;
    if (pending) {
        if (max_fn > (1 << 28) || !(fkeys = calloc(max_fn + 1, sizeof(*fkeys))) ||
            !(frame_keys = malloc(STACK_KEY_MAX_FRAMES * sizeof(*frame_keys)))) {
            snprintf(err, errlen, "no memory to key %lld stored stacks", (long long)pending);
            goto fail;
        }
        if (sqlite3_prepare_v2(db, "SELECT id, name, file FROM functions", -1, &q, NULL) !=
            SQLITE_OK)
            goto dberr;
        while (sqlite3_step(q) == SQLITE_ROW) {
            int64_t id = sqlite3_column_int64(q, 0);
            const char *name = (const char *)sqlite3_column_text(q, 1);
            const char *file = (const char *)sqlite3_column_text(q, 2);
            if (id > 0 && id <= max_fn)
                fkeys[id] = stack_hasher__function(&st->hasher, name ? name : "",
                                                   sqlite3_column_bytes(q, 1), file ? file : "",
                                                   sqlite3_column_bytes(q, 2));
        }
        sqlite3_finalize(q);
        q = NULL;
    }
    /* The index first: a key that another stack has already (the same
     * frames stored twice by an earlier version) is then refused, and that
     * row keeps no key: it is still read by id, and new profiles go to the
     * other. */
    if (sqlite3_exec(db, "CREATE UNIQUE INDEX IF NOT EXISTS stacks_key ON stacks(key)", NULL, NULL,
                     NULL) != SQLITE_OK)
        goto dberr;
    /* Keys computed first, written after: a table is not updated while a
     * statement still reads it. */
    if (pending && !(todo = malloc(pending * sizeof(*todo)))) {
        snprintf(err, errlen, "no memory to key %lld stored stacks", (long long)pending);
        goto fail;
    }
    if (sqlite3_prepare_v2(db, "SELECT id, frames FROM stacks WHERE key IS NULL", -1, &q, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(db, "UPDATE stacks SET key = ? WHERE id = ?", -1, &up, NULL) !=
            SQLITE_OK)
        goto dberr;
    int64_t keyed = 0, dups = 0, ntodo = 0;
    while (ntodo < pending && sqlite3_step(q) == SQLITE_ROW) {
        const unsigned char *p = sqlite3_column_blob(q, 1); /* NULL when empty */
        const unsigned char *end = p ? p + sqlite3_column_bytes(q, 1) : p;
        size_t n = 0;
        uint64_t fid;
        while (p && p < end && n < STACK_KEY_MAX_FRAMES && (p = get_varint(p, end, &fid)))
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
            dups++;
            continue;
        }
        if (rc2 != SQLITE_DONE)
            goto dberr;
        keyed++;
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto dberr;
    if (keyed || dups)
        log_info("store: %lld stored stacks keyed (stack key version %d); %lld the same as "
                 "another, left without a key",
                 (long long)keyed, STACK_KEY_VERSION, (long long)dups);
    rc = 0;
    goto out;
dberr:
    snprintf(err, errlen, "sqlite: stack keys: %s", sqlite3_errmsg(db));
fail:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
out:
    sqlite3_finalize(q);
    sqlite3_finalize(up);
    free(fkeys);
    free(frame_keys);
    free(todo);
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
    if (open_db(st->path, &st->wdb, err, errlen))
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
    if (!had_rollups && mark_all_dirty(st->wdb, err, errlen))
        goto fail;
    if (add_labels_column(st->wdb, err, errlen) || open_keys(st, err, errlen))
        goto fail;
    if (open_db(st->path, &st->rdb, err, errlen))
        goto fail;
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
        prepare(
            st->wdb,
            "INSERT INTO profiles(app, host, pid, container_id, time_ns, duration_ns, "
            "period_ns, samples, cpu_ns, bytes_in, data, labels) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
            &st->ins_profile, err, errlen) ||
        prepare(st->wdb, "INSERT OR IGNORE INTO rollup_dirty(app, level, bucket_ns) VALUES(?,?,?)",
                &st->ins_dirty, err, errlen) ||
        prepare_readers(st->wdb, &st->wr, err, errlen) ||
        prepare_readers(st->rdb, &st->rd, err, errlen) ||
        prepare(st->rdb, "SELECT time_ns, cpu_ns FROM profiles WHERE " QUERY_FILTER,
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
    sqlite3_stmt *stmts[] = {st->ins_fn,      st->sel_fn,      st->ins_stack,  st->sel_stack,
                             st->sel_frames,  st->ins_ls,      st->sel_ls,     st->ins_profile,
                             st->ins_dirty,   st->wr.profiles, st->wr.rollups, st->wr.rollup,
                             st->rd.profiles, st->rd.rollups,  st->rd.rollup,  st->q_timeline,
                             st->q_stack,     st->q_fn};

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

/* --- put --- */

/* The id of a row keyed by (a, b) or a blob, inserted when new; the cache
 * first. Returns the id, or -1 on a database error. */
static int64_t intern_row(struct hmap **cache, sqlite3_stmt *ins, sqlite3_stmt *sel, const void *k1,
                          int n1, const char *k2, bool blob)
{
    char keybuf[8192];
    const void *key = k1;
    size_t klen = n1;
    int64_t id = -1;

    if (k2) { /* cache key: k1 NUL k2 */
        size_t n2 = strlen(k2);
        if ((size_t)n1 + 1 + n2 <= sizeof(keybuf)) {
            memcpy(keybuf, k1, n1);
            keybuf[n1] = '\0';
            memcpy(keybuf + n1 + 1, k2, n2);
            key = keybuf;
            klen = n1 + 1 + n2;
        } else {
            key = NULL; /* too long to cache: ask the database */
        }
    }
    if (!*cache && !(*cache = hmap__new()))
        key = NULL; /* no memory for a cache: the database answers */
    long ci = key ? hmap__find(*cache, key, klen) : -1;
    if (ci >= 0)
        return (int64_t)*hmap__val(*cache, ci);
    for (int pass = 0; pass < 2 && id < 0; pass++) {
        sqlite3_stmt *stmt = pass == 0 ? ins : sel;
        sqlite3_reset(stmt);
        if (blob)
            sqlite3_bind_blob(stmt, 1, k1, n1, SQLITE_STATIC);
        else
            sqlite3_bind_text(stmt, 1, k1, n1, SQLITE_STATIC);
        if (k2)
            sqlite3_bind_text(stmt, 2, k2, -1, SQLITE_STATIC);
        int rc = sqlite3_step(stmt);
        if (pass == 0) {
            if (rc != SQLITE_DONE)
                return -1;
            if (sqlite3_changes(sqlite3_db_handle(stmt)) > 0)
                id = sqlite3_last_insert_rowid(sqlite3_db_handle(stmt));
        } else if (rc == SQLITE_ROW) {
            id = sqlite3_column_int64(stmt, 0);
        } else {
            return -1;
        }
    }
    if (id >= 0 && key) {
        if (hmap__len(*cache) >= CACHE_MAX) {
            struct hmap *fresh = hmap__new();
            if (fresh) {
                hmap__free(*cache);
                *cache = fresh;
            }
        }
        long i = hmap__put(*cache, key, klen, NULL);
        if (i >= 0)
            *hmap__val(*cache, i) = id;
    }
    return id;
}

static int cmp_label(const void *a, const void *b)
{
    const struct store_label *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->value, y->value);
}

/* How many keys ahead lookups prefetch: enough to cover a cache miss. */
#define PREFETCH_AHEAD 8

/* The id of function i of p: the cache, else the database (inserted when
 * new). Resolved only for the functions of stacks new to the cache. 0 on a
 * database error. */
static int64_t function_id(struct sqlite_store *st, const struct store_profile *p, size_t i,
                           int64_t *fn_ids)
{
    const struct store_put_function *f = &p->functions[i];
    const char *file = f->f.file ? f->f.file : "";
    int64_t id = 0;

    if (fn_ids[i])
        return fn_ids[i];
    if ((id = stack_keymap__get(st->fn_ids, f->key)))
        return fn_ids[i] = id;
    sqlite3_reset(st->ins_fn);
    sqlite3_bind_text(st->ins_fn, 1, f->f.name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st->ins_fn, 2, file, -1, SQLITE_STATIC);
    if (sqlite3_step(st->ins_fn) != SQLITE_DONE)
        return 0;
    if (sqlite3_changes(st->wdb) > 0) {
        id = sqlite3_last_insert_rowid(st->wdb);
    } else {
        sqlite3_reset(st->sel_fn);
        sqlite3_bind_text(st->sel_fn, 1, f->f.name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st->sel_fn, 2, file, -1, SQLITE_STATIC);
        if (sqlite3_step(st->sel_fn) == SQLITE_ROW)
            id = sqlite3_column_int64(st->sel_fn, 0);
        sqlite3_reset(st->sel_fn);
    }
    if (id && stack_keymap__put(st->fn_ids, f->key, id))
        return 0;
    return fn_ids[i] = id;
}

/* The id of a stack not in the cache: the database's, else a new row with
 * its frames (function ids, leaf first). 0 on a database error. */
static int64_t stack_row(struct sqlite_store *st, const struct store_profile *p,
                         const struct store_stack *k, int64_t *fn_ids, struct buf *frames)
{
    unsigned char kb[16];
    int64_t id = 0;

    stack_key__encode(k->key, kb);
    sqlite3_reset(st->sel_stack);
    sqlite3_bind_blob(st->sel_stack, 1, kb, sizeof(kb), SQLITE_STATIC);
    int rc = sqlite3_step(st->sel_stack);
    if (rc == SQLITE_ROW)
        id = sqlite3_column_int64(st->sel_stack, 0);
    sqlite3_reset(st->sel_stack);
    if (rc == SQLITE_ROW || rc != SQLITE_DONE)
        return id;
    buf__reset(frames);
    for (uint32_t j = 0; j < k->nlocations; j++) {
        const struct store_location *l = &p->locations[k->locations[j]];
        for (uint32_t f = 0; f < l->nfunctions; f++) {
            unsigned char v[10];
            int64_t fid = function_id(st, p, l->functions[f], fn_ids);
            if (!fid || buf__append(frames, v, wr_varint(v, fid) - v))
                return 0;
            if (st->gc_active && bits_set(st->gc_fns, fid))
                st->gc_oom = true;
        }
    }
    sqlite3_reset(st->ins_stack);
    sqlite3_bind_blob(st->ins_stack, 1, frames->data ? frames->data : "", frames->len,
                      SQLITE_STATIC);
    sqlite3_bind_blob(st->ins_stack, 2, kb, sizeof(kb), SQLITE_STATIC);
    rc = sqlite3_step(st->ins_stack);
    sqlite3_reset(st->ins_stack);
    if (rc == SQLITE_DONE)
        return sqlite3_last_insert_rowid(st->wdb);
    if ((rc & 0xff) != SQLITE_CONSTRAINT)
        return 0;
    /* A store from before keys keeps frames UNIQUE: the same frames under
     * another key (a key from another version, say) are that row. */
    sqlite3_reset(st->sel_frames);
    sqlite3_bind_blob(st->sel_frames, 1, frames->data ? frames->data : "", frames->len,
                      SQLITE_STATIC);
    if (sqlite3_step(st->sel_frames) == SQLITE_ROW)
        id = sqlite3_column_int64(st->sel_frames, 0);
    sqlite3_reset(st->sel_frames);
    return id;
}

static const struct stack_hasher *sqlite_hasher(struct store *s)
{
    return &S(s)->hasher;
}

static int sqlite_put(struct store *s, const struct store_profile *p, char *err, size_t errlen)
{
    struct sqlite_store *st = S(s);
    int64_t *fn_ids = NULL, *ls_ids = NULL, *sids = NULL, total_samples = 0, total_cpu = 0;
    struct buf frames, data, text;
    int ret = -1;

    buf__init(&frames, 1 << 20);
    buf__init(&data, 512u << 20);
    buf__init(&text, 1 << 20);
    fn_ids = calloc(p->nfunctions + 1, sizeof(*fn_ids));
    ls_ids = malloc((p->nlabelsets + 1) * sizeof(*ls_ids));
    sids = malloc((p->nstacks + 1) * sizeof(*sids));
    int rr = buf__reserve(&data, 11 + p->nstacks * BLOB_ROW_MAX);
    if (!fn_ids || !ls_ids || !sids || rr) {
        snprintf(err, errlen, rr == -E2BIG ? "profile too large" : "out of memory");
        ret = rr == -E2BIG ? -E2BIG : -ENOMEM;
        goto out_nolock;
    }
    pthread_mutex_lock(&st->wmu);
    if (sqlite3_exec(st->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        goto dberr;
    for (size_t i = 0; i < p->nlabelsets; i++) {
        const struct store_labelset *ls = &p->labelsets[i];
        struct store_label sorted[64];
        size_t n = ls->n < 64 ? ls->n : 64;
        memcpy(sorted, ls->labels, n * sizeof(*sorted));
        qsort(sorted, n, sizeof(*sorted), cmp_label);
        buf__reset(&text);
        for (size_t j = 0; j < n; j++) {
            if ((j && buf__append(&text, "\x1f", 1)) ||
                buf__append(&text, sorted[j].key, strlen(sorted[j].key)) ||
                buf__append(&text, "=", 1) ||
                buf__append(&text, sorted[j].value, strlen(sorted[j].value))) {
                snprintf(err, errlen, "labels too long");
                ret = -E2BIG;
                goto rollback;
            }
        }
        ls_ids[i] = intern_row(&st->labelset_ids, st->ins_ls, st->sel_ls,
                               text.data ? text.data : "", text.len, NULL, false);
        if (ls_ids[i] < 0)
            goto dberr_rollback;
    }
    /* Stack ids: the cache, PREFETCH_AHEAD keys ahead so its misses
     * overlap, then the database for the stacks it lacks. */
    for (size_t i = 0; i < p->nstacks && i < PREFETCH_AHEAD; i++)
        stack_keymap__prefetch(st->stack_ids, p->stacks[i].key);
    for (size_t i = 0; i < p->nstacks; i++) {
        if (i + PREFETCH_AHEAD < p->nstacks)
            stack_keymap__prefetch(st->stack_ids, p->stacks[i + PREFETCH_AHEAD].key);
        sids[i] = stack_keymap__get(st->stack_ids, p->stacks[i].key);
    }
    for (size_t i = 0; i < p->nstacks; i++) {
        /* A stack twice in one profile (other labels) is in the cache by
         * its second time. */
        if (sids[i] || (sids[i] = stack_keymap__get(st->stack_ids, p->stacks[i].key)))
            continue;
        sids[i] = stack_row(st, p, &p->stacks[i], fn_ids, &frames);
        if (!sids[i])
            goto dberr_rollback;
        if (stack_keymap__put(st->stack_ids, p->stacks[i].key, sids[i])) {
            snprintf(err, errlen, "out of memory");
            goto rollback;
        }
    }
    gc_mark_put(st, sids, p->nstacks, ls_ids, p->nlabelsets);
    unsigned char *d = blob_begin((unsigned char *)data.data, p->period_ns);
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct store_stack *k = &p->stacks[i];
        d = blob_put(d, p->period_ns, sids[i],
                     k->labelset == STORE_NO_LABELS ? 0 : ls_ids[k->labelset] + 1, k->samples,
                     k->cpu_ns);
        sat__acc(&total_samples, k->samples);
        sat__acc(&total_cpu, k->cpu_ns);
    }
    data.len = d - (unsigned char *)data.data;
    sqlite3_stmt *ip = st->ins_profile;
    sqlite3_reset(ip);
    sqlite3_bind_text(ip, 1, p->app, -1, SQLITE_STATIC);
    sqlite3_bind_text(ip, 2, p->host ? p->host : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(ip, 3, p->pid);
    sqlite3_bind_text(ip, 4, p->identity[0] ? p->identity[0] : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(ip, 5, p->time_ns);
    sqlite3_bind_int64(ip, 6, p->duration_ns);
    sqlite3_bind_int64(ip, 7, p->period_ns);
    sqlite3_bind_int64(ip, 8, total_samples);
    sqlite3_bind_int64(ip, 9, total_cpu);
    sqlite3_bind_int64(ip, 10, p->bytes_in);
    sqlite3_bind_blob(ip, 11, data.data ? data.data : "", data.len, SQLITE_STATIC);
    buf__reset(&text);
    for (int i = 0; i < STORE_N_IDENTITY; i++) {
        const char *v = p->identity[i];
        if (v && *v &&
            ((!text.len && buf__append(&text, "\x1f", 1)) ||
             buf__append(&text, store_identity_keys[i], strlen(store_identity_keys[i])) ||
             buf__append(&text, "=", 1) || buf__append(&text, v, strlen(v)) ||
             buf__append(&text, "\x1f", 1))) {
            snprintf(err, errlen, "labels too long");
            ret = -E2BIG;
            goto rollback;
        }
    }
    sqlite3_bind_text(ip, 12, text.len ? text.data : "", text.len, SQLITE_STATIC);
    if (sqlite3_step(ip) != SQLITE_DONE)
        goto dberr_rollback;
    for (int l = 0; l < N_LEVELS; l++) {
        sqlite3_reset(st->ins_dirty);
        sqlite3_bind_text(st->ins_dirty, 1, p->app, -1, SQLITE_STATIC);
        sqlite3_bind_int(st->ins_dirty, 2, l);
        sqlite3_bind_int64(st->ins_dirty, 3, bucket_of(p->time_ns, level_ns[l]));
        if (sqlite3_step(st->ins_dirty) != SQLITE_DONE)
            goto dberr_rollback;
    }
    if (sqlite3_exec(st->wdb, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto dberr_rollback;
    ret = 0;
    goto out;
dberr_rollback:
    snprintf(err, errlen, "sqlite: %s", sqlite3_errmsg(st->wdb));
rollback:
    sqlite3_exec(st->wdb, "ROLLBACK", NULL, NULL, NULL);
    /* Rows the rollback undid may sit in the caches: start them over. */
    hmap__free(st->labelset_ids);
    st->labelset_ids = hmap__new();
    stack_keymap__clear(st->fn_ids);
    stack_keymap__clear(st->stack_ids);
    goto out;
dberr:
    snprintf(err, errlen, "sqlite: %s", sqlite3_errmsg(st->wdb));
out:
    pthread_mutex_unlock(&st->wmu);
out_nolock:
    free(fn_ids);
    free(ls_ids);
    free(sids);
    buf__free(&frames);
    buf__free(&data);
    buf__free(&text);
    return ret;
}

/* What sqlite_put allocates: ids per function, label set and stack, the
 * blob's rows reserved at their longest, and its three 1 MiB-capped
 * buffers (a stack's frames, a label set's text, the identity). */
static size_t sqlite_put_mem(struct store *s, const struct store_profile *p)
{
    (void)s;
    return (p->nfunctions + p->nlabelsets + p->nstacks + 3) * sizeof(int64_t) + 11 +
           p->nstacks * BLOB_ROW_MAX + 3 * ((1u << 20) + 1);
}

/* --- merge --- */

/* Sums by stack id. Stack ids are rowids, dense from 1: up to DENSE_MAX
 * they index an array directly; ids past it (or past the table's size
 * when the merge began) go through a hash map. */
#define DENSE_MAX (16u << 20)

struct acc_val {
    uint64_t sid;
    int64_t samples, cpu;
};

struct merge_acc {
    uint32_t *dense; /* stack id -> index into vals + 1 */
    uint64_t ndense;
    struct hmap *stacks; /* the rest: stack id -> index into vals */
    struct acc_val *vals;
    size_t nvals, cap;
};

static int acc_add(struct merge_acc *a, uint64_t sid, int64_t samples, int64_t cpu)
{
    uint64_t idx;

    if (sid < a->ndense && a->dense[sid]) {
        idx = a->dense[sid] - 1;
    } else {
        bool fresh = true;
        long i = -1;
        if (sid >= a->ndense) {
            i = hmap__put(a->stacks, &sid, sizeof(sid), &fresh);
            if (i < 0)
                return -ENOMEM;
        }
        if (fresh) {
            if (a->nvals == a->cap) {
                size_t cap = a->cap ? a->cap * 2 : 1024;
                struct acc_val *v = realloc(a->vals, cap * sizeof(*v));
                if (!v)
                    return -ENOMEM;
                a->vals = v;
                a->cap = cap;
            }
            a->vals[a->nvals] = (struct acc_val){sid, 0, 0};
            if (i >= 0)
                *hmap__val(a->stacks, i) = a->nvals;
            else
                a->dense[sid] = a->nvals + 1;
            idx = a->nvals++;
        } else {
            idx = *hmap__val(a->stacks, i);
        }
    }
    /* Saturating: ingest keeps each profile's totals in 64 bits, but many
     * profiles summed could pass them. */
    sat__acc(&a->vals[idx].samples, samples);
    sat__acc(&a->vals[idx].cpu, cpu);
    return 0;
}

/* Sums one profile's data blob into a. -EBADMSG for a corrupt blob. */
static int acc_blob(struct merge_acc *a, const unsigned char *p, size_t len)
{
    const unsigned char *end = p ? p + len : p; /* SQLite's empty blob is NULL */
    uint64_t sid, ls, samples, cpu, period = 0;
    bool delta = len && p[0] == 0; /* a stack id is never 0: the newer form */

    if (delta && !(p = get_varint(p + 1, end, &period)))
        return -EBADMSG;
    while (p < end) {
        if (!(p = get_varint(p, end, &sid)) || !(p = get_varint(p, end, &ls)) ||
            !(p = get_varint(p, end, &samples)) || !(p = get_varint(p, end, &cpu)))
            return -EBADMSG;
        if (delta) /* unzigzag, then add samples x period back, wrapping as it was taken */
            cpu = (cpu >> 1 ^ -(cpu & 1)) + samples * period;
        /* Ingest stores counts in [0, INT64_MAX]: anything else is a blob
         * damaged since, held to that range rather than summed negative. */
        int r = acc_add(a, sid, samples > INT64_MAX ? INT64_MAX : (int64_t)samples,
                        cpu > INT64_MAX ? 0 : (int64_t)cpu);
        if (r)
            return r;
    }
    return 0;
}

void store_merged__free(struct store_merged *m)
{
    if (!m)
        return;
    free(m->functions);
    for (size_t i = 0; i < m->nstacks; i++)
        free(m->stacks[i].frames);
    free(m->stacks);
    buf__free(m->mem);
    free(m->mem);
    free(m);
}

/* The dense index of a: stack ids are rowids, so MAX(id) bounds them. */
static int acc_init(struct merge_acc *a, sqlite3 *db)
{
    sqlite3_stmt *mx = NULL;

    memset(a, 0, sizeof(*a));
    a->stacks = hmap__new();
    if (!a->stacks)
        return -ENOMEM;
    if (sqlite3_prepare_v2(db, "SELECT MAX(id) FROM stacks", -1, &mx, NULL) == SQLITE_OK &&
        sqlite3_step(mx) == SQLITE_ROW) {
        uint64_t max = sqlite3_column_int64(mx, 0);
        if (max < DENSE_MAX && (a->dense = calloc(max + 1, sizeof(*a->dense))))
            a->ndense = max + 1;
    }
    sqlite3_finalize(mx);
    return 0;
}

static void acc_free(struct merge_acc *a)
{
    hmap__free(a->stacks);
    free(a->vals);
    free(a->dense);
}

/* Raw profiles of q's app, host and pid starting in [from, to). */
static int acc_raw(struct readers *r, const struct store_query *q, int64_t from, int64_t to,
                   struct merge_acc *a, int64_t *profiles)
{
    struct store_query qq = *q;
    int err = 0, rc;

    qq.from_ns = from;
    qq.to_ns = to;
    bind_query(r->profiles, &qq);
    while ((rc = sqlite3_step(r->profiles)) == SQLITE_ROW) {
        err =
            acc_blob(a, sqlite3_column_blob(r->profiles, 0), sqlite3_column_bytes(r->profiles, 0));
        if (err)
            break;
        (*profiles)++;
    }
    if (!err && rc != SQLITE_DONE)
        err = -EIO;
    sqlite3_reset(r->profiles);
    return err;
}

static int acc_rollup(struct readers *r, int64_t id, struct merge_acc *a, int64_t *profiles)
{
    int err = -EIO;

    sqlite3_reset(r->rollup);
    sqlite3_bind_int64(r->rollup, 1, id);
    if (sqlite3_step(r->rollup) == SQLITE_ROW) {
        err = acc_blob(a, sqlite3_column_blob(r->rollup, 1), sqlite3_column_bytes(r->rollup, 1));
        *profiles += sqlite3_column_int64(r->rollup, 0);
    }
    sqlite3_reset(r->rollup);
    return err;
}

struct rollup_ref {
    int64_t level, bucket, id;
};

static int cmp_ref(const void *a, const void *b)
{
    const struct rollup_ref *x = a, *y = b;
    if (x->level != y->level)
        return x->level < y->level ? -1 : 1;
    return x->bucket < y->bucket ? -1 : x->bucket > y->bucket;
}

/* Sums what q selects into a: for every whole bucket of the range a current
 * rollup of a level below max_level, coarsest first, where there is one
 * and q filters neither host nor pid; raw profiles for the rest. Counts
 * the profiles that went in. Returns 0 or -errno. Run inside one read (or
 * write) transaction, so rollups and raw profiles are of one moment. */
static int accumulate(struct readers *r, const struct store_query *q, int max_level,
                      struct merge_acc *a, int64_t *profiles)
{
    struct rollup_ref *refs = NULL;
    size_t nrefs = 0, cap = 0;
    int err = 0, rc;

    if (!q->host && !q->pid && !filters_identity(q) && max_level > 0) {
        sqlite3_reset(r->rollups);
        sqlite3_bind_text(r->rollups, 1, q->app, -1, SQLITE_STATIC);
        sqlite3_bind_int64(r->rollups, 2, q->from_ns);
        sqlite3_bind_int64(r->rollups, 3, q->to_ns);
        while ((rc = sqlite3_step(r->rollups)) == SQLITE_ROW) {
            struct rollup_ref ref = {sqlite3_column_int64(r->rollups, 0),
                                     sqlite3_column_int64(r->rollups, 1),
                                     sqlite3_column_int64(r->rollups, 2)};
            if (ref.level < 0 || ref.level >= max_level)
                continue;
            if (nrefs == cap) {
                cap = cap ? cap * 2 : 64;
                struct rollup_ref *n = realloc(refs, cap * sizeof(*n));
                if (!n) {
                    err = -ENOMEM;
                    break;
                }
                refs = n;
            }
            refs[nrefs++] = ref;
        }
        sqlite3_reset(r->rollups);
        if (!err && rc != SQLITE_DONE)
            err = -EIO;
        if (err)
            goto out;
    }
    int64_t t = q->from_ns, raw_from = 0;
    bool raw = false;
    while (t < q->to_ns) {
        struct rollup_ref *hit = NULL;
        int64_t len = 0;
        for (int l = max_level - 1; l >= 0 && !hit; l--) {
            len = level_ns[l];
            struct rollup_ref key = {l, t, 0};
            if (nrefs && bucket_of(t, len) == t && t <= q->to_ns - len)
                hit = bsearch(&key, refs, nrefs, sizeof(*refs), cmp_ref);
        }
        if (hit) {
            if (raw && (err = acc_raw(r, q, raw_from, t, a, profiles)))
                goto out;
            raw = false;
            if ((err = acc_rollup(r, hit->id, a, profiles)))
                goto out;
            t += len;
        } else {
            if (!raw)
                raw_from = t;
            raw = true;
            int64_t b = bucket_of(t, level_ns[0]);
            t = b > q->to_ns - level_ns[0] ? q->to_ns : b + level_ns[0];
        }
    }
    if (raw)
        err = acc_raw(r, q, raw_from, q->to_ns, a, profiles);
out:
    free(refs);
    return err;
}

static int sqlite_merge(struct store *s, const struct store_query *q, struct store_merged **out)
{
    struct sqlite_store *st = S(s);
    struct merge_acc a = {0};
    sqlite3_stmt *scan = NULL;
    struct hmap *fn_local = hmap__new(); /* function id -> local index */
    struct store_merged *m = calloc(1, sizeof(*m));
    struct buf *names = calloc(1, sizeof(*names));
    uint64_t *fn_global = NULL; /* local index -> function id */
    size_t *name_off = NULL;    /* local index -> (name offset, file offset) pairs */
    size_t nfn = 0, capfn = 0;
    int err = -ENOMEM;

    *out = NULL;
    if (!fn_local || !m || !names) {
        free(names);
        names = NULL;
        goto out_nolock;
    }
    buf__init(names, 1u << 30);
    m->mem = names;
    pthread_mutex_lock(&st->rmu);
    /* One read transaction: rollups, raw profiles and stacks of one moment. */
    if (sqlite3_exec(st->rdb, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        err = -EIO;
        goto out_unlock;
    }
    if ((err = acc_init(&a, st->rdb)) || (err = accumulate(&st->rd, q, N_LEVELS, &a, &m->profiles)))
        goto out;
    m->stacks = calloc(a.nvals + 1, sizeof(*m->stacks));
    if (!m->stacks) {
        err = -ENOMEM;
        goto out;
    }
    /* When the merge touches a good part of all stacks, one scan of the
     * table beats a point query per stack. */
    bool use_scan = a.ndense && a.nvals * 4 >= a.ndense;
    if (use_scan &&
        sqlite3_prepare_v2(st->rdb, "SELECT id, frames FROM stacks", -1, &scan, NULL) != SQLITE_OK)
        use_scan = false;
    for (size_t next = 0;;) {
        const unsigned char *p, *end;
        size_t vi;
        if (use_scan) {
            if (sqlite3_step(scan) != SQLITE_ROW)
                break;
            uint64_t id = sqlite3_column_int64(scan, 0);
            long k;
            if (id < a.ndense && a.dense[id])
                vi = a.dense[id] - 1;
            else if (id >= a.ndense && (k = hmap__find(a.stacks, &id, sizeof(id))) >= 0)
                vi = *hmap__val(a.stacks, k);
            else
                continue;
            p = sqlite3_column_blob(scan, 1); /* NULL for a stack of no frames */
            end = p ? p + sqlite3_column_bytes(scan, 1) : p;
        } else {
            if (next >= a.nvals)
                break;
            vi = next++;
            sqlite3_reset(st->q_stack);
            sqlite3_bind_int64(st->q_stack, 1, a.vals[vi].sid);
            if (sqlite3_step(st->q_stack) != SQLITE_ROW) {
                sqlite3_reset(st->q_stack);
                continue; /* deleted since: counts without a stack are dropped */
            }
            p = sqlite3_column_blob(st->q_stack, 0); /* NULL for a stack of no frames */
            end = p ? p + sqlite3_column_bytes(st->q_stack, 0) : p;
        }
        int64_t v[2] = {a.vals[vi].samples, a.vals[vi].cpu};
        struct store_merged_stack *ms = &m->stacks[m->nstacks];
        uint32_t cap = 16;
        ms->frames = malloc(cap * sizeof(uint32_t));
        if (!ms->frames) {
            err = -ENOMEM;
            goto out;
        }
        uint64_t fid;
        while (p && p < end && (p = get_varint(p, end, &fid))) {
            bool fresh;
            long li = hmap__put(fn_local, &fid, sizeof(fid), &fresh);
            if (li < 0) {
                err = -ENOMEM;
                goto out;
            }
            if (fresh) {
                if (nfn == capfn) {
                    capfn = capfn ? capfn * 2 : 256;
                    uint64_t *g = realloc(fn_global, capfn * sizeof(*g));
                    size_t *o = g ? realloc(name_off, capfn * 2 * sizeof(*o)) : NULL;
                    if (g)
                        fn_global = g;
                    if (!g || !o) {
                        err = -ENOMEM;
                        goto out;
                    }
                    name_off = o;
                }
                fn_global[nfn] = fid;
                *hmap__val(fn_local, li) = nfn++;
            }
            if (ms->nframes == cap) {
                cap *= 2;
                uint32_t *f = realloc(ms->frames, cap * sizeof(*f));
                if (!f) {
                    err = -ENOMEM;
                    goto out;
                }
                ms->frames = f;
            }
            ms->frames[ms->nframes++] = *hmap__val(fn_local, li);
        }
        sqlite3_reset(st->q_stack); /* an unfinished statement would pin the snapshot */
        ms->samples = v[0];
        ms->cpu_ns = v[1];
        m->nstacks++;
    }
    /* Names last, into one buffer: its pointers are fixed once it stops growing. */
    for (size_t i = 0; i < nfn; i++) {
        sqlite3_reset(st->q_fn);
        sqlite3_bind_int64(st->q_fn, 1, fn_global[i]);
        const char *name = "?", *file = "";
        if (sqlite3_step(st->q_fn) == SQLITE_ROW) {
            name = (const char *)sqlite3_column_text(st->q_fn, 0);
            file = (const char *)sqlite3_column_text(st->q_fn, 1);
        }
        name_off[2 * i] = names->len;
        int r1 = buf__append(names, name, strlen(name) + 1);
        name_off[2 * i + 1] = names->len;
        int r2 = r1 ? r1 : buf__append(names, file, strlen(file) + 1);
        sqlite3_reset(st->q_fn);
        if (r2) {
            err = r2;
            goto out;
        }
    }
    m->functions = calloc(nfn + 1, sizeof(*m->functions));
    if (!m->functions) {
        err = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < nfn; i++)
        m->functions[i] = (struct store_function){names->data + name_off[2 * i],
                                                  names->data + name_off[2 * i + 1]};
    m->nfunctions = nfn;
    err = 0;
out:
    sqlite3_finalize(scan);
    sqlite3_reset(st->q_stack);
    sqlite3_reset(st->q_fn);
    sqlite3_exec(st->rdb, "COMMIT", NULL, NULL, NULL);
out_unlock:
    pthread_mutex_unlock(&st->rmu);
out_nolock:
    acc_free(&a);
    hmap__free(fn_local);
    free(fn_global);
    free(name_off);
    if (err)
        store_merged__free(m);
    else
        *out = m;
    return err;
}

/* --- applications, timeline --- */

void store_apps__free(struct store_app *apps, size_t n)
{
    for (size_t i = 0; apps && i < n; i++) {
        free(apps[i].name);
        for (size_t j = 0; j < apps[i].nhosts; j++)
            free(apps[i].hosts[j]);
        free(apps[i].hosts);
    }
    free(apps);
}

static int cmp_app_cpu(const void *a, const void *b)
{
    const struct store_app *x = a, *y = b;
    if (x->cpu_ns != y->cpu_ns)
        return x->cpu_ns > y->cpu_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int sqlite_applications(struct store *s, int64_t from_ns, int64_t to_ns,
                               struct store_app **out, size_t *n)
{
    struct sqlite_store *st = S(s);
    sqlite3_stmt *q = NULL;
    struct store_app *apps = NULL;
    size_t napps = 0, cap = 0;
    int err = -EIO;

    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&st->rmu);
    if (sqlite3_prepare_v2(
            st->rdb,
            "SELECT app, host, MAX(time_ns + duration_ns), TOTAL(cpu_ns) FROM profiles"
            " WHERE time_ns >= ? AND time_ns < ? GROUP BY app, host ORDER BY app",
            -1, &q, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(q, 1, from_ns);
    sqlite3_bind_int64(q, 2, to_ns);
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *app = (const char *)sqlite3_column_text(q, 0);
        const char *host = (const char *)sqlite3_column_text(q, 1);
        if (!napps || strcmp(apps[napps - 1].name, app) != 0) {
            if (napps == cap) {
                cap = cap ? cap * 2 : 32;
                struct store_app *na = realloc(apps, cap * sizeof(*na));
                if (!na) {
                    err = -ENOMEM;
                    goto out;
                }
                apps = na;
            }
            memset(&apps[napps], 0, sizeof(apps[napps]));
            apps[napps].name = strdup(app);
            napps++;
            if (!apps[napps - 1].name) {
                err = -ENOMEM;
                goto out;
            }
        }
        struct store_app *a = &apps[napps - 1];
        char **h = realloc(a->hosts, (a->nhosts + 1) * sizeof(*h));
        if (!h || !(h[a->nhosts] = strdup(host))) {
            if (h)
                a->hosts = h;
            err = -ENOMEM;
            goto out;
        }
        a->hosts = h;
        a->nhosts++;
        int64_t last = sqlite3_column_int64(q, 2);
        if (last > a->last_seen_ns)
            a->last_seen_ns = last;
        /* TOTAL, not SUM: SQLite's SUM fails the whole query ("integer
         * overflow") once a sum passes 64 bits; TOTAL is a double, held to
         * int64 here. */
        double cpu = sqlite3_column_double(q, 3);
        sat__acc(&a->cpu_ns, cpu >= 9.2e18 ? INT64_MAX : cpu > 0 ? (int64_t)cpu : 0);
    }
    if (rc != SQLITE_DONE)
        goto out;
    if (napps)
        qsort(apps, napps, sizeof(*apps), cmp_app_cpu);
    err = 0;
out:
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->rmu);
    if (err) {
        store_apps__free(apps, napps);
    } else {
        *out = apps;
        *n = napps;
    }
    return err;
}

static int sqlite_timeline(struct store *s, const struct store_query *qq, int64_t step_ns,
                           int64_t **cpu_ns, size_t *nsteps)
{
    struct sqlite_store *st = S(s);
    sqlite3_stmt *q;
    int err = -EIO;

    *cpu_ns = NULL;
    *nsteps = 0;
    if (step_ns <= 0 || qq->to_ns <= qq->from_ns)
        return -EINVAL;
    size_t n = (qq->to_ns - qq->from_ns + step_ns - 1) / step_ns;
    if (n > 100000)
        return -E2BIG;
    int64_t *v = calloc(n + 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    pthread_mutex_lock(&st->rmu);
    q = st->q_timeline;
    bind_query(q, qq);
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        size_t i = (sqlite3_column_int64(q, 0) - qq->from_ns) / step_ns;
        if (i < n)
            sat__acc(&v[i], sqlite3_column_int64(q, 1));
    }
    if (rc == SQLITE_DONE)
        err = 0;
    sqlite3_reset(q); /* persistent: reset, and the read snapshot ends */
    pthread_mutex_unlock(&st->rmu);
    if (err) {
        free(v);
    } else {
        *cpu_ns = v;
        *nsteps = n;
    }
    return err;
}

/* --- label values --- */

void store_values__free(struct store_values *v)
{
    if (!v)
        return;
    for (int k = 0; k < STORE_N_IDENTITY + 2; k++) {
        for (size_t i = 0; i < v->n[k]; i++)
            free(v->v[k][i]);
        free(v->v[k]);
    }
    free(v);
}

/* Adds value to list k once, up to STORE_MAX_VALUES. */
static int values_add(struct store_values *v, struct hmap *seen, int k, const char *val, size_t len)
{
    char key[4200];
    bool fresh;

    if (!len || len + 2 > sizeof(key) || v->n[k] >= STORE_MAX_VALUES)
        return 0;
    key[0] = (char)('0' + k);
    memcpy(key + 1, val, len);
    if (hmap__put(seen, key, len + 1, &fresh) < 0)
        return -ENOMEM;
    if (!fresh)
        return 0;
    char **nv = realloc(v->v[k], (v->n[k] + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    v->v[k] = nv;
    if (!(nv[v->n[k]] = strndup(val, len)))
        return -ENOMEM;
    v->n[k]++;
    return 0;
}

static int sqlite_values(struct store *s, const struct store_query *q, struct store_values **out)
{
    struct sqlite_store *st = S(s);
    struct store_values *v = calloc(1, sizeof(*v));
    struct hmap *seen = hmap__new();
    sqlite3_stmt *c = NULL;
    int err = -ENOMEM, rc;

    *out = NULL;
    if (!v || !seen)
        goto out_nolock;
    pthread_mutex_lock(&st->rmu);
    err = -EIO;
    if (sqlite3_prepare_v2(st->rdb,
                           "SELECT DISTINCT host, pid, labels FROM profiles WHERE " QUERY_FILTER,
                           -1, &c, NULL) != SQLITE_OK)
        goto out;
    bind_query(c, q);
    err = 0;
    while (!err && (rc = sqlite3_step(c)) == SQLITE_ROW) {
        const char *host = (const char *)sqlite3_column_text(c, 0);
        char pid[24];
        int n = snprintf(pid, sizeof(pid), "%lld", (long long)sqlite3_column_int64(c, 1));
        err = values_add(v, seen, 0, host, strlen(host));
        if (!err && sqlite3_column_int64(c, 1))
            err = values_add(v, seen, 1, pid, n);
        /* "\x1fk=v\x1fk=v\x1f" */
        for (const char *p = (const char *)sqlite3_column_text(c, 2); !err && p && *p;) {
            const char *end = strchr(p + 1, '\x1f'), *eq;
            if (!end)
                break;
            for (int k = 0; k < STORE_N_IDENTITY && !err; k++) {
                size_t kl = strlen(store_identity_keys[k]);
                eq = p + 1 + kl;
                if (eq < end && *eq == '=' && strncmp(p + 1, store_identity_keys[k], kl) == 0)
                    err = values_add(v, seen, k + 2, eq + 1, end - eq - 1);
            }
            p = end;
            if (!p[1])
                break;
        }
    }
    if (!err && rc != SQLITE_DONE)
        err = -EIO;
out:
    sqlite3_finalize(c);
    pthread_mutex_unlock(&st->rmu);
out_nolock:
    hmap__free(seen);
    if (err)
        store_values__free(v);
    else
        *out = v;
    return err;
}

/* --- rollups --- */

/* Builds app's rollup of (level, bucket) from what lies below it. Called
 * with the write lock held, inside a write transaction. */
static int build_rollup(struct sqlite_store *st, const char *app, int level, int64_t bucket)
{
    struct store_query q = {app, bucket, bucket + level_ns[level], NULL, 0};
    struct merge_acc a = {0};
    sqlite3_stmt *w = NULL;
    struct buf data;
    int64_t profiles = 0;
    int err;

    buf__init(&data, 512u << 20);
    if ((err = acc_init(&a, st->wdb)) || (err = accumulate(&st->wr, &q, level, &a, &profiles)))
        goto out;
    /* The period the bucket's profiles had (CPU over samples), so its rows
     * keep their CPU in a byte or so too. */
    int64_t samples = 0, cpu = 0;
    bool over = false;
    for (size_t i = 0; i < a.nvals; i++) {
        over |= __builtin_add_overflow(samples, a.vals[i].samples, &samples);
        over |= __builtin_add_overflow(cpu, a.vals[i].cpu, &cpu);
    }
    int64_t period = samples > 0 && !over ? cpu / samples : 0; /* 0: CPU kept whole */
    /* Room as it goes, a block of rows at a time: a bucket of millions of
     * stacks takes only what its rows need. */
    if ((err = buf__reserve(&data, 11)))
        goto out;
    data.len = blob_begin((unsigned char *)data.data, period) - (unsigned char *)data.data;
    for (size_t i = 0; i < a.nvals; i++) {
        const struct acc_val *v = &a.vals[i];
        if (data.cap - data.len < BLOB_ROW_MAX + 1 &&
            (err = buf__reserve(&data, BLOB_ROW_MAX * 4096)) &&
            (err = buf__reserve(&data, BLOB_ROW_MAX)))
            goto out;
        unsigned char *d = (unsigned char *)data.data + data.len;
        data.len = blob_put(d, period, v->sid, 0, v->samples, v->cpu) - (unsigned char *)data.data;
    }
    err = -EIO;
    const char *sql = profiles ? "INSERT OR REPLACE INTO rollups(app, level, bucket_ns, profiles,"
                                 " data) VALUES(?1, ?2, ?3, ?4, ?5)"
                               : "DELETE FROM rollups WHERE app = ?1 AND level = ?2 AND "
                                 "bucket_ns = ?3";
    for (int pass = 0; pass < 2; pass++) {
        if (sqlite3_prepare_v2(st->wdb, sql, -1, &w, NULL) != SQLITE_OK)
            goto out;
        sqlite3_bind_text(w, 1, app, -1, SQLITE_STATIC);
        sqlite3_bind_int(w, 2, level);
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
    acc_free(&a);
    buf__free(&data);
    return err;
}

static int sqlite_rollup(struct store *s, int64_t now_ns, int64_t *built, int64_t *pending)
{
    struct sqlite_store *st = S(s);
    sqlite3_stmt *next = NULL;
    int err = 0;

    *built = *pending = 0;
    /* Finer levels first: a coarse bucket is built from the fine ones. */
    for (int l = 0; l < N_LEVELS && !err; l++) {
        int64_t complete_before = now_ns - ROLLUP_GRACE_NS - level_ns[l];
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
            sqlite3_bind_int(next, 1, l);
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
                          text__escape(esc, sizeof(esc), app), l, (long long)bucket,
                          strerror(-err));
                break;
            }
            (*built)++;
        }
    }
    sqlite3_finalize(next);
    /* What is still to build of the complete buckets, for /metrics. */
    pthread_mutex_lock(&st->rmu);
    for (int l = 0; l < N_LEVELS; l++) {
        sqlite3_stmt *c = NULL;
        if (sqlite3_prepare_v2(
                st->rdb, "SELECT COUNT(*) FROM rollup_dirty WHERE level = ? AND bucket_ns <= ?", -1,
                &c, NULL) == SQLITE_OK) {
            sqlite3_bind_int(c, 1, l);
            sqlite3_bind_int64(c, 2, now_ns - ROLLUP_GRACE_NS - level_ns[l]);
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
    for (int l = 0; l < N_LEVELS && !err; l++) {
        for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]) && !err; i++) {
            sqlite3_stmt *d = NULL;
            if (sqlite3_prepare_v2(st->wdb, sql[i], -1, &d, NULL) != SQLITE_OK) {
                err = -EIO;
                break;
            }
            sqlite3_bind_int(d, 1, l);
            sqlite3_bind_int64(d, 2, cutoff);
            if (sqlite3_bind_parameter_count(d) >= 3)
                sqlite3_bind_int64(d, 3, level_ns[l]);
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

    while (p && p < end && (p = get_varint(p, end, &fid)))
        if (bits_set(b, fid))
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
        if (p && p < end && p[0] == 0 && !(p = get_varint(p + 1, end, &v)))
            break; /* a corrupt blob marks nothing more; merges say so */
        while (!err && p && p < end) {
            if (!(p = get_varint(p, end, &sid)) || !(p = get_varint(p, end, &ls)) ||
                !(p = get_varint(p, end, &v)) || !(p = get_varint(p, end, &v)))
                break;
            err = bits_set(stacks, sid) || (ls && bits_set(labelsets, ls - 1)) ? -ENOMEM : 0;
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
    if (open_db(st->path, &g, err_msg, sizeof(err_msg)) ||
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

static int sqlite_retain(struct store *s, int64_t older_than_ns, int64_t *deleted)
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

static int64_t sqlite_size_bytes(struct store *s)
{
    struct sqlite_store *st = S(s);
    char wal[4096];

    snprintf(wal, sizeof(wal), "%s-wal", st->path);
    return file_size(st->path) + file_size(wal);
}

static const struct store_ops sqlite_ops = {
    .hasher = sqlite_hasher,
    .put = sqlite_put,
    .put_mem = sqlite_put_mem,
    .merge = sqlite_merge,
    .applications = sqlite_applications,
    .values = sqlite_values,
    .timeline = sqlite_timeline,
    .retain = sqlite_retain,
    .rollup = sqlite_rollup,
    .size_bytes = sqlite_size_bytes,
    .close = sqlite_close,
};

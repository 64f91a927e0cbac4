/* The SQLite store: one database file under --data-dir, in WAL mode with
 * synchronous=FULL, so a profile is on disk when put() returns.
 *
 * Tables:
 *   functions(id, name, file)        unique (name, file)
 *   stacks(id, frames)               frames: varint function ids, leaf first; unique
 *   labelsets(id, text)              "k=v\x1fk=v", keys sorted; unique
 *   profiles(id, app, host, pid, container_id, time_ns, duration_ns, period_ns,
 *            samples, cpu_ns, bytes_in, data)
 * where data is the profile's samples as varints: (stack id, labelset id + 1
 * or 0, samples, cpu_ns) per distinct stack. A query reads the matching
 * profiles' data and sums by stack id; stacks and functions are read once
 * per query, through caches.
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
#include "store.h"

/* Entries in each id cache before it is dropped and refilled from the
 * database: the caches are a speed-up, never the truth. */
#define CACHE_MAX 2000000

struct sqlite_store {
    struct store base;
    char *path;
    sqlite3 *wdb, *rdb;
    pthread_mutex_t wmu, rmu;
    /* writer's caches: key -> id (rowid) */
    struct hmap *fn_ids, *stack_ids, *labelset_ids;
    sqlite3_stmt *ins_fn, *sel_fn, *ins_stack, *sel_stack, *ins_ls, *sel_ls, *ins_profile;
    /* reader's statements */
    sqlite3_stmt *q_profiles, *q_timeline, *q_stack, *q_fn;
};

static struct sqlite_store *S(struct store *s)
{
    return (struct sqlite_store *)s;
}

/* --- varints (the protobuf kind: 7 bits a byte, low first) --- */

static int put_varint(struct buf *b, uint64_t v)
{
    unsigned char tmp[10];
    size_t n = 0;

    do {
        tmp[n] = v & 0x7f;
        v >>= 7;
        if (v)
            tmp[n] |= 0x80;
        n++;
    } while (v);
    return buf__append(b, tmp, n);
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

/* --- open --- */

static const char schema[] =
    "PRAGMA journal_mode=WAL;"
    "CREATE TABLE IF NOT EXISTS functions(id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    "  file TEXT NOT NULL, UNIQUE(name, file));"
    "CREATE TABLE IF NOT EXISTS stacks(id INTEGER PRIMARY KEY, frames BLOB NOT NULL UNIQUE);"
    "CREATE TABLE IF NOT EXISTS labelsets(id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);"
    "CREATE TABLE IF NOT EXISTS profiles(id INTEGER PRIMARY KEY, app TEXT NOT NULL,"
    "  host TEXT NOT NULL, pid INTEGER NOT NULL, container_id TEXT NOT NULL,"
    "  time_ns INTEGER NOT NULL, duration_ns INTEGER NOT NULL, period_ns INTEGER NOT NULL,"
    "  samples INTEGER NOT NULL, cpu_ns INTEGER NOT NULL, bytes_in INTEGER NOT NULL,"
    "  data BLOB NOT NULL);"
    "CREATE INDEX IF NOT EXISTS profiles_app_time ON profiles(app, time_ns);"
    "CREATE INDEX IF NOT EXISTS profiles_time ON profiles(time_ns);";

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
#define QUERY_FILTER                                                                               \
    "app = ?1 AND time_ns >= ?2 AND time_ns < ?3 AND (?4 = 0 OR pid = ?4) "                        \
    "AND (?5 IS NULL OR host = ?5)"

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
    if (sqlite3_exec(st->wdb, schema, NULL, NULL, &e) != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: cannot create the schema in %s: %s", st->path, e);
        sqlite3_free(e);
        goto fail;
    }
    if (open_db(st->path, &st->rdb, err, errlen))
        goto fail;
    st->fn_ids = hmap__new();
    st->stack_ids = hmap__new();
    st->labelset_ids = hmap__new();
    if (!st->fn_ids || !st->stack_ids || !st->labelset_ids) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (prepare(st->wdb, "INSERT OR IGNORE INTO functions(name, file) VALUES(?, ?)", &st->ins_fn,
                err, errlen) ||
        prepare(st->wdb, "SELECT id FROM functions WHERE name = ? AND file = ?", &st->sel_fn, err,
                errlen) ||
        prepare(st->wdb, "INSERT OR IGNORE INTO stacks(frames) VALUES(?)", &st->ins_stack, err,
                errlen) ||
        prepare(st->wdb, "SELECT id FROM stacks WHERE frames = ?", &st->sel_stack, err, errlen) ||
        prepare(st->wdb, "INSERT OR IGNORE INTO labelsets(text) VALUES(?)", &st->ins_ls, err,
                errlen) ||
        prepare(st->wdb, "SELECT id FROM labelsets WHERE text = ?", &st->sel_ls, err, errlen) ||
        prepare(st->wdb,
                "INSERT INTO profiles(app, host, pid, container_id, time_ns, duration_ns, "
                "period_ns, samples, cpu_ns, bytes_in, data) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                &st->ins_profile, err, errlen) ||
        prepare(st->rdb, "SELECT data FROM profiles WHERE " QUERY_FILTER, &st->q_profiles, err,
                errlen) ||
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
    sqlite3_stmt *stmts[] = {st->ins_fn,     st->sel_fn,  st->ins_stack,   st->sel_stack,
                             st->ins_ls,     st->sel_ls,  st->ins_profile, st->q_profiles,
                             st->q_timeline, st->q_stack, st->q_fn};

    for (size_t i = 0; i < sizeof(stmts) / sizeof(stmts[0]); i++)
        sqlite3_finalize(stmts[i]);
    sqlite3_close(st->wdb);
    sqlite3_close(st->rdb);
    hmap__free(st->fn_ids);
    hmap__free(st->stack_ids);
    hmap__free(st->labelset_ids);
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

static int sqlite_put(struct store *s, const struct store_profile *p, char *err, size_t errlen)
{
    struct sqlite_store *st = S(s);
    int64_t *fn_ids = NULL, *ls_ids = NULL, total_samples = 0, total_cpu = 0;
    struct buf frames, data, text;
    int ret = -1;

    buf__init(&frames, 1 << 20);
    buf__init(&data, 512u << 20);
    buf__init(&text, 1 << 20);
    fn_ids = calloc(p->nfunctions + 1, sizeof(*fn_ids));
    ls_ids = calloc(p->nlabelsets + 1, sizeof(*ls_ids));
    if (!fn_ids || !ls_ids) {
        snprintf(err, errlen, "out of memory");
        goto out_nolock;
    }
    pthread_mutex_lock(&st->wmu);
    if (sqlite3_exec(st->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        goto dberr;
    for (size_t i = 0; i < p->nfunctions; i++) {
        const struct store_function *f = &p->functions[i];
        fn_ids[i] = intern_row(&st->fn_ids, st->ins_fn, st->sel_fn, f->name, strlen(f->name),
                               f->file ? f->file : "", false);
        if (fn_ids[i] < 0)
            goto dberr_rollback;
    }
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
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct store_stack *k = &p->stacks[i];
        buf__reset(&frames);
        for (uint32_t j = 0; j < k->nframes; j++) {
            if (put_varint(&frames, fn_ids[k->frames[j]])) {
                snprintf(err, errlen, "stack too deep");
                ret = -E2BIG;
                goto rollback;
            }
        }
        int64_t sid = intern_row(&st->stack_ids, st->ins_stack, st->sel_stack,
                                 frames.data ? frames.data : "", frames.len, NULL, true);
        if (sid < 0)
            goto dberr_rollback;
        if (put_varint(&data, sid) ||
            put_varint(&data, k->labelset == STORE_NO_LABELS ? 0 : ls_ids[k->labelset] + 1) ||
            put_varint(&data, k->samples) || put_varint(&data, k->cpu_ns)) {
            snprintf(err, errlen, "profile too large");
            ret = -E2BIG;
            goto rollback;
        }
        total_samples += k->samples;
        total_cpu += k->cpu_ns;
    }
    sqlite3_stmt *ip = st->ins_profile;
    sqlite3_reset(ip);
    sqlite3_bind_text(ip, 1, p->app, -1, SQLITE_STATIC);
    sqlite3_bind_text(ip, 2, p->host ? p->host : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(ip, 3, p->pid);
    sqlite3_bind_text(ip, 4, p->container_id ? p->container_id : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(ip, 5, p->time_ns);
    sqlite3_bind_int64(ip, 6, p->duration_ns);
    sqlite3_bind_int64(ip, 7, p->period_ns);
    sqlite3_bind_int64(ip, 8, total_samples);
    sqlite3_bind_int64(ip, 9, total_cpu);
    sqlite3_bind_int64(ip, 10, p->bytes_in);
    sqlite3_bind_blob(ip, 11, data.data ? data.data : "", data.len, SQLITE_STATIC);
    if (sqlite3_step(ip) != SQLITE_DONE)
        goto dberr_rollback;
    if (sqlite3_exec(st->wdb, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto dberr_rollback;
    ret = 0;
    goto out;
dberr_rollback:
    snprintf(err, errlen, "sqlite: %s", sqlite3_errmsg(st->wdb));
rollback:
    sqlite3_exec(st->wdb, "ROLLBACK", NULL, NULL, NULL);
    /* Rows the rollback undid may sit in the caches: start them over. */
    hmap__free(st->fn_ids);
    hmap__free(st->stack_ids);
    hmap__free(st->labelset_ids);
    st->fn_ids = hmap__new();
    st->stack_ids = hmap__new();
    st->labelset_ids = hmap__new();
    goto out;
dberr:
    snprintf(err, errlen, "sqlite: %s", sqlite3_errmsg(st->wdb));
out:
    pthread_mutex_unlock(&st->wmu);
out_nolock:
    free(fn_ids);
    free(ls_ids);
    buf__free(&frames);
    buf__free(&data);
    buf__free(&text);
    return ret;
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
    a->vals[idx].samples += samples;
    a->vals[idx].cpu += cpu;
    return 0;
}

/* Sums one profile's data blob into a. -EBADMSG for a corrupt blob. */
static int acc_blob(struct merge_acc *a, const unsigned char *p, size_t len)
{
    const unsigned char *end = p + len;
    uint64_t sid, ls, samples, cpu;

    while (p < end) {
        if (!(p = get_varint(p, end, &sid)) || !(p = get_varint(p, end, &ls)) ||
            !(p = get_varint(p, end, &samples)) || !(p = get_varint(p, end, &cpu)))
            return -EBADMSG;
        int r = acc_add(a, sid, samples, cpu);
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
    int err = -ENOMEM, rc;

    *out = NULL;
    a.stacks = hmap__new();
    if (!fn_local || !m || !names || !a.stacks) {
        free(names);
        names = NULL;
        goto out_nolock;
    }
    buf__init(names, 1u << 30);
    m->mem = names;
    pthread_mutex_lock(&st->rmu);
    sqlite3_stmt *mx = NULL;
    if (sqlite3_prepare_v2(st->rdb, "SELECT MAX(id) FROM stacks", -1, &mx, NULL) == SQLITE_OK &&
        sqlite3_step(mx) == SQLITE_ROW) {
        uint64_t max = sqlite3_column_int64(mx, 0);
        if (max < DENSE_MAX && (a.dense = calloc(max + 1, sizeof(*a.dense))))
            a.ndense = max + 1;
    }
    sqlite3_finalize(mx);
    sqlite3_stmt *qs = st->q_profiles;
    bind_query(qs, q);
    while ((rc = sqlite3_step(qs)) == SQLITE_ROW) {
        err = acc_blob(&a, sqlite3_column_blob(qs, 0), sqlite3_column_bytes(qs, 0));
        if (err)
            goto out;
        m->profiles++;
    }
    if (rc != SQLITE_DONE) {
        err = -EIO;
        goto out;
    }
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
            p = sqlite3_column_blob(scan, 1);
            end = p + sqlite3_column_bytes(scan, 1);
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
            p = sqlite3_column_blob(st->q_stack, 0);
            end = p + sqlite3_column_bytes(st->q_stack, 0);
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
    sqlite3_reset(st->q_profiles);
    sqlite3_reset(st->q_stack);
    sqlite3_reset(st->q_fn);
    pthread_mutex_unlock(&st->rmu);
out_nolock:
    hmap__free(a.stacks);
    free(a.vals);
    free(a.dense);
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
    if (sqlite3_prepare_v2(st->rdb,
                           "SELECT app, host, MAX(time_ns + duration_ns), SUM(cpu_ns) FROM profiles"
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
        a->cpu_ns += sqlite3_column_int64(q, 3);
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
            v[i] += sqlite3_column_int64(q, 1);
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
    .put = sqlite_put,
    .merge = sqlite_merge,
    .applications = sqlite_applications,
    .timeline = sqlite_timeline,
    .retain = sqlite_retain,
    .size_bytes = sqlite_size_bytes,
    .close = sqlite_close,
};

/* The SQLite store's ingest: a profile's functions, stacks and label sets
 * interned, its row and data blob written, its rollup buckets marked dirty. */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/hmap.h"
#include "../common/log.h"
#include "sat.h"
#include "stack_key.h"
#include "store.h"
#include "store_common.h"
#include "store_sqlite_int.h"
#include "text.h"

/* Marks, under wmu, what a put uses while a collection runs. */
static void gc_mark_put(struct sqlite_store *st, const int64_t *sids, size_t nsids,
                        const int64_t *ls_ids, size_t nls)
{
    if (!st->gc_active)
        return;
    for (size_t i = 0; i < nsids; i++)
        if (sqls_bits_set(st->gc_stacks, sids[i]))
            st->gc_oom = true;
    for (size_t i = 0; i < nls; i++)
        if (sqls_bits_set(st->gc_labelsets, ls_ids[i]))
            st->gc_oom = true;
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
            if (!fid || buf__append(frames, v, varint__write(v, fid) - v))
                return 0;
            if (st->gc_active && sqls_bits_set(st->gc_fns, fid))
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

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* A digest of what p holds: each stack's key, labels and values, in order.
 * A profile sent again decodes to the same, byte for byte; two profiles
 * that share every identity column (two replicas of a Pyroscope client
 * that sends neither host nor pid, the same window) almost never do. As
 * SQLite's INTEGER: signed. */
static int64_t content_digest(const struct store_profile *p)
{
    uint64_t h = 14695981039346656037ull;

    for (size_t i = 0; i < p->nstacks; i++) {
        const struct store_stack *k = &p->stacks[i];
        int64_t v[3] = {k->samples, k->cpu_ns, k->off_cpu_ns};
        h = fnv(h, &k->key, sizeof(k->key));
        h = fnv(h, v, sizeof(v));
        if (k->labelset < p->nlabelsets)
            for (size_t l = 0; l < p->labelsets[k->labelset].n; l++) {
                const struct store_label *lb = &p->labelsets[k->labelset].labels[l];
                h = fnv(h, lb->key, strlen(lb->key) + 1);
                h = fnv(h, lb->value, strlen(lb->value) + 1);
            }
    }
    return (int64_t)h;
}

/* Whether a profile of p's identity (app, host, pid, start, duration,
 * labels text and content digest: store_sqlite.c's IDENTITY_COLUMNS) is
 * stored already: an agent sends a profile again when the answer to a
 * stored one was lost, and a batch may come again whole or in part. One
 * lookup in the identity index. Returns 1, 0, or -1 on a database error. */
static int stored_already(struct sqlite_store *st, const struct store_profile *p,
                          const struct buf *labels, int64_t content)
{
    sqlite3_stmt *q = st->sel_profile;

    sqlite3_reset(q);
    sqlite3_bind_text(q, 1, p->app, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, p->host ? p->host : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, p->pid);
    sqlite3_bind_int64(q, 4, p->time_ns);
    sqlite3_bind_int64(q, 5, p->duration_ns);
    sqlite3_bind_text(q, 6, labels->len ? labels->data : "", labels->len, SQLITE_STATIC);
    sqlite3_bind_int64(q, 7, content);
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

const struct stack_hasher *sqls_hasher(struct store *s)
{
    return &S(s)->hasher;
}

/* The store whose group this thread has open (sqls_group_begin), or NULL:
 * a thread's puts go into its own group only, and another thread's put
 * waits on wmu, which the group holds. */
static __thread struct sqlite_store *group_of_thread;

/* Forgets the writer's caches: rows a rollback undid may sit in them. */
static void caches_reset(struct sqlite_store *st)
{
    hmap__free(st->labelset_ids);
    st->labelset_ids = hmap__new();
    stack_keymap__clear(st->fn_ids);
    stack_keymap__clear(st->stack_ids);
}

int sqls_group_begin(struct store *s, char *err, size_t errlen)
{
    struct sqlite_store *st = S(s);

    if (group_of_thread) {
        snprintf(err, errlen, "a group is open already");
        return -EBUSY;
    }
    pthread_mutex_lock(&st->wmu);
    if (sqlite3_exec(st->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: %s", sqlite3_errmsg(st->wdb));
        pthread_mutex_unlock(&st->wmu);
        return -EIO;
    }
    group_of_thread = st;
    return 0;
}

int sqls_group_end(struct store *s, char *err, size_t errlen)
{
    struct sqlite_store *st = S(s);
    int ret = 0;

    if (group_of_thread != st) {
        snprintf(err, errlen, "no group is open");
        return -EINVAL;
    }
    group_of_thread = NULL;
    if (sqlite3_exec(st->wdb, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: %s", sqlite3_errmsg(st->wdb));
        sqlite3_exec(st->wdb, "ROLLBACK", NULL, NULL, NULL);
        caches_reset(st);
        ret = -EIO;
    }
    pthread_mutex_unlock(&st->wmu);
    return ret;
}

int sqls_put(struct store *s, const struct store_profile *p, char *err, size_t errlen)
{
    struct sqlite_store *st = S(s);
    /* In the thread's group: a savepoint of its transaction, which is
     * made durable at the group's end; alone: a transaction of its own. */
    bool grouped = group_of_thread == st;
    int64_t *fn_ids = NULL, *ls_ids = NULL, *sids = NULL, total_samples = 0, total_cpu = 0,
            total_off = 0;
    struct buf frames, data, text, ptext;
    int ret = -1;

    buf__init(&frames, 1 << 20);
    buf__init(&data, 512u << 20);
    buf__init(&text, 1 << 20);
    buf__init(&ptext, 1 << 20);
    fn_ids = calloc(p->nfunctions + 1, sizeof(*fn_ids));
    ls_ids = malloc((p->nlabelsets + 1) * sizeof(*ls_ids));
    sids = malloc((p->nstacks + 1) * sizeof(*sids));
    int rr = buf__reserve(&data, BLOB_HEAD_MAX + p->nstacks * BLOB_ROW_MAX);
    if (!fn_ids || !ls_ids || !sids || rr) {
        snprintf(err, errlen, rr == -E2BIG ? "profile too large" : "out of memory");
        ret = rr == -E2BIG ? -E2BIG : -ENOMEM;
        goto out_nolock;
    }
    if (!grouped)
        pthread_mutex_lock(&st->wmu);
    if (grouped && sqlite3_get_autocommit(st->wdb)) {
        /* SQLite rolled the group's transaction back on an error (a full
         * disk, an I/O error): a savepoint now would be a transaction of
         * its own, stored while the group's end reports it lost. */
        snprintf(err, errlen, "sqlite: the group's transaction was rolled back by an error");
        ret = -EIO;
        goto out;
    }
    if (sqlite3_exec(st->wdb, grouped ? "SAVEPOINT put" : "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
        SQLITE_OK)
        goto dberr;
    if (store_profile__labels_text(&ptext, p)) {
        snprintf(err, errlen, "labels past the store's limits");
        ret = -E2BIG;
        goto rollback;
    }
    int64_t content = content_digest(p);
    int had = stored_already(st, p, &ptext, content);
    if (had < 0)
        goto dberr_rollback;
    if (had) {
        /* Sent again after it was stored (its answer lost): stored, once. */
        sqlite3_exec(st->wdb, grouped ? "RELEASE put" : "ROLLBACK", NULL, NULL, NULL);
        ret = 0;
        goto out;
    }
    for (size_t i = 0; i < p->nlabelsets; i++) {
        if (store_labelset__text(&text, &p->labelsets[i])) {
            snprintf(err, errlen, "labels too long");
            ret = -E2BIG;
            goto rollback;
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
    bool off = false;
    for (size_t i = 0; i < p->nstacks && !off; i++)
        off = p->stacks[i].off_cpu_ns != 0;
    unsigned char *d = blob_begin((unsigned char *)data.data, p->period_ns, off);
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct store_stack *k = &p->stacks[i];
        d = blob_put(d, p->period_ns, sids[i],
                     k->labelset == STORE_NO_LABELS ? 0 : ls_ids[k->labelset] + 1, k->samples,
                     k->cpu_ns, off, k->off_cpu_ns);
        sat__acc(&total_samples, k->samples);
        sat__acc(&total_cpu, k->cpu_ns);
        sat__acc(&total_off, k->off_cpu_ns);
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
    sqlite3_bind_text(ip, 12, ptext.len ? ptext.data : "", ptext.len, SQLITE_STATIC);
    sqlite3_bind_int64(ip, 13, total_off);
    sqlite3_bind_int64(ip, 14, content);
    if (sqlite3_step(ip) != SQLITE_DONE)
        goto dberr_rollback;
    for (int l = 0; l < SQLS_LEVELS; l++) {
        sqlite3_reset(st->ins_dirty);
        sqlite3_bind_text(st->ins_dirty, 1, p->app, -1, SQLITE_STATIC);
        sqlite3_bind_int(st->ins_dirty, 2, sqls_levels[l].id);
        sqlite3_bind_int64(st->ins_dirty, 3, bucket_of(p->time_ns, sqls_levels[l].ns));
        if (sqlite3_step(st->ins_dirty) != SQLITE_DONE)
            goto dberr_rollback;
    }
    if (sqlite3_exec(st->wdb, grouped ? "RELEASE put" : "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto dberr_rollback;
    ret = 0;
    goto out;
dberr_rollback:
    snprintf(err, errlen, "sqlite: %s", sqlite3_errmsg(st->wdb));
rollback:
    /* Of a grouped put, its own rows only: the group's others stay. */
    sqlite3_exec(st->wdb, grouped ? "ROLLBACK TO put; RELEASE put" : "ROLLBACK", NULL, NULL, NULL);
    caches_reset(st);
    goto out;
dberr:
    snprintf(err, errlen, "sqlite: %s", sqlite3_errmsg(st->wdb));
out:
    if (!grouped)
        pthread_mutex_unlock(&st->wmu);
out_nolock:
    free(fn_ids);
    free(ls_ids);
    free(sids);
    buf__free(&frames);
    buf__free(&data);
    buf__free(&text);
    buf__free(&ptext);
    return ret;
}

/* What sqls_put allocates: ids per function, label set and stack, the
 * blob's rows reserved at their longest, and its three 1 MiB-capped
 * buffers (a stack's frames, a label set's text, the profile's labels). */
size_t sqls_put_mem(struct store *s, const struct store_profile *p)
{
    (void)s;
    return (p->nfunctions + p->nlabelsets + p->nstacks + 3) * sizeof(int64_t) + BLOB_HEAD_MAX +
           p->nstacks * BLOB_ROW_MAX + 3 * ((1u << 20) + 1);
}

/* The SQLite store's reads: merges (raw profiles and rollups summed by
 * stack), applications, timelines and label values, on the read connection. */
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

/* --- query parameters --- */

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
    struct buf spec;
    buf__init(&spec, 16u << 20);
    if (!q->nmatch)
        sqlite3_bind_null(stmt, 11);
    else if (store_match__spec(&spec, q->match, q->nmatch))
        sqlite3_bind_text(stmt, 11, "+\x1f\x1f", -1, SQLITE_STATIC); /* matches nothing */
    else
        sqlite3_bind_text(stmt, 11, spec.data, (int)spec.len, SQLITE_TRANSIENT);
    buf__free(&spec);
}

static bool filters_identity(const struct store_query *q)
{
    for (int i = 0; i < STORE_N_IDENTITY; i++)
        if (q->identity[i])
            return true;
    return q->nmatch > 0;
}

/* --- merge --- */

static int acc_add(struct merge_acc *a, uint64_t sid, int64_t samples, int64_t cpu, int64_t off)
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
            a->vals[a->nvals] = (struct acc_val){sid, 0, 0, 0};
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
    sat__acc(&a->vals[idx].off, off);
    return 0;
}

/* Sums one profile's data blob into a. -EBADMSG for a corrupt blob. */
static int acc_blob(struct merge_acc *a, const unsigned char *p, size_t len)
{
    const unsigned char *end = p ? p + len : p; /* SQLite's empty blob is NULL */
    uint64_t sid, ls, samples, cpu, off = 0, period = 0;
    bool delta = len && p[0] == 0; /* a stack id is never 0: the newer form */
    bool with_off = false;

    if (delta && !(p = varint__get(p + 1, end, &period)))
        return -EBADMSG;
    if (delta && p < end && *p == 0) { /* stack id 0: rows carry off-CPU time */
        with_off = true;
        p++;
    }
    while (p < end) {
        if (!(p = varint__get(p, end, &sid)) || !(p = varint__get(p, end, &ls)) ||
            !(p = varint__get(p, end, &samples)) || !(p = varint__get(p, end, &cpu)) ||
            (with_off && !(p = varint__get(p, end, &off))))
            return -EBADMSG;
        if (delta) /* unzigzag, then add samples x period back, wrapping as it was taken */
            cpu = (cpu >> 1 ^ -(cpu & 1)) + samples * period;
        /* Ingest stores counts in [0, INT64_MAX]: anything else is a blob
         * damaged since, held to that range rather than summed negative. */
        a->rows++;
        int r = acc_add(a, sid, samples > INT64_MAX ? INT64_MAX : (int64_t)samples,
                        cpu > INT64_MAX ? 0 : (int64_t)cpu, off > INT64_MAX ? 0 : (int64_t)off);
        if (r)
            return r;
    }
    return 0;
}

/* The dense index of a: stack ids are rowids, so MAX(id) bounds them. */
int sqls_acc_init(struct merge_acc *a, sqlite3 *db)
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

void sqls_acc_free(struct merge_acc *a)
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
    int64_t level, bucket, id; /* level: the index in sqls_levels */
};

static int cmp_ref(const void *a, const void *b)
{
    const struct rollup_ref *x = a, *y = b;
    if (x->level != y->level)
        return x->level < y->level ? -1 : 1;
    return x->bucket < y->bucket ? -1 : x->bucket > y->bucket;
}

/* Appends the current rollups of level index l starting in [from, to) to
 * *refs, in bucket order. Returns 0 or -errno. */
static int find_rollups(struct readers *r, const char *app, int l, int64_t from, int64_t to,
                        struct rollup_ref **refs, size_t *nrefs, size_t *cap)
{
    int err = 0, rc;

    if (from >= to)
        return 0;
    sqlite3_reset(r->rollups);
    sqlite3_bind_text(r->rollups, 1, app, -1, SQLITE_STATIC);
    sqlite3_bind_int64(r->rollups, 2, from);
    sqlite3_bind_int64(r->rollups, 3, to);
    sqlite3_bind_int(r->rollups, 4, sqls_levels[l].id);
    while ((rc = sqlite3_step(r->rollups)) == SQLITE_ROW) {
        if (*nrefs == *cap) {
            size_t c = *cap ? *cap * 2 : 64;
            struct rollup_ref *n = realloc(*refs, c * sizeof(*n));
            if (!n) {
                err = -ENOMEM;
                break;
            }
            *refs = n;
            *cap = c;
        }
        (*refs)[(*nrefs)++] = (struct rollup_ref){l, sqlite3_column_int64(r->rollups, 0),
                                                  sqlite3_column_int64(r->rollups, 1)};
    }
    sqlite3_reset(r->rollups);
    return err ? err : rc == SQLITE_DONE ? 0 : -EIO;
}

/* Sums what q selects into a: for every whole bucket of the range a current
 * rollup of a level below max_level, coarsest first, where there is one
 * and q filters neither host nor pid; raw profiles for the rest. Minutes
 * only at the range's ends, in the first and last 10-minute buckets it
 * cuts: inside, a 10-minute rollup serves, or raw profiles when it is
 * dirty (so a query reads at most 18 minute rollups, not a week's 10,080).
 * Counts the profiles that went in. Returns 0 or -errno. Run inside one
 * read (or write) transaction, so rollups and raw profiles are of one
 * moment. */
int sqls_accumulate(struct readers *r, const struct store_query *q, int max_level,
                    struct merge_acc *a, int64_t *profiles)
{
    struct rollup_ref *refs = NULL;
    size_t nrefs = 0, cap = 0;
    int err = 0;

    if (!q->host && !q->pid && !filters_identity(q)) {
        for (int l = 0; l < max_level && !err; l++) {
            if (l != SQLS_MINUTE || max_level == SQLS_MINUTE + 1) {
                err = find_rollups(r, q->app, l, q->from_ns, q->to_ns, &refs, &nrefs, &cap);
                continue;
            }
            int64_t len = sqls_levels[SQLS_MINUTE + 1].ns;
            int64_t head = bucket_of(q->from_ns, len), tail = bucket_of(q->to_ns, len);
            if (head < q->from_ns)
                head += len;
            if (head > tail) /* inside one 10-minute bucket */
                head = tail = q->to_ns;
            err = find_rollups(r, q->app, l, q->from_ns, head, &refs, &nrefs, &cap);
            if (!err)
                err = find_rollups(r, q->app, l, tail, q->to_ns, &refs, &nrefs, &cap);
        }
        if (err)
            goto out;
    }
    int64_t t = q->from_ns, raw_from = 0;
    bool raw = false;
    while (t < q->to_ns) {
        struct rollup_ref *hit = NULL;
        int64_t len = 0;
        for (int l = max_level - 1; l >= 0 && !hit; l--) {
            len = sqls_levels[l].ns;
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
            int64_t b = bucket_of(t, sqls_levels[0].ns);
            t = b > q->to_ns - sqls_levels[0].ns ? q->to_ns : b + sqls_levels[0].ns;
        }
    }
    if (raw)
        err = acc_raw(r, q, raw_from, q->to_ns, a, profiles);
out:
    free(refs);
    return err;
}

/* Names function i (its id the key) from q_fn, whose text stays until the next call. */
static void name_by_id(void *ctx, size_t i, const void *key, size_t len, const char **name,
                       const char **file)
{
    sqlite3_stmt *q = ctx;
    int64_t id;

    (void)i;
    if (len != sizeof(id))
        return;
    memcpy(&id, key, sizeof(id));
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, id);
    if (sqlite3_step(q) == SQLITE_ROW) {
        *name = (const char *)sqlite3_column_text(q, 0);
        *file = (const char *)sqlite3_column_text(q, 1);
    }
}

/* Function ids are rowids, dense from 1: their local indices are cached
 * by id (index + 1; 0 not met yet), so a frame costs no hash of its key. */
struct fn_cache {
    uint32_t *idx;
    uint64_t n;
};

static void fn_cache_init(struct fn_cache *fc, sqlite3 *db)
{
    sqlite3_stmt *mx = NULL;

    fc->idx = NULL;
    fc->n = 0;
    if (sqlite3_prepare_v2(db, "SELECT MAX(id) FROM functions", -1, &mx, NULL) == SQLITE_OK &&
        sqlite3_step(mx) == SQLITE_ROW) {
        uint64_t max = sqlite3_column_int64(mx, 0);
        if (max < DENSE_MAX && (fc->idx = calloc(max + 1, sizeof(*fc->idx))))
            fc->n = max + 1;
    }
    sqlite3_finalize(mx);
}

/* Appends a frame of function fid to b's last stack. */
static int frame_of(struct merged_builder *b, struct fn_cache *fc, uint64_t fid)
{
    if (b->skip) /* a stack without the query's value: no function of its own */
        return 0;
    if (fid < fc->n && fc->idx[fid])
        return merged_builder__frame_of(b, fc->idx[fid] - 1);
    int64_t id = (int64_t)fid;
    long li = merged_builder__function(b, &id, sizeof(id));
    if (li < 0)
        return (int)li;
    if (fid < fc->n)
        fc->idx[fid] = (uint32_t)li + 1;
    return merged_builder__frame_of(b, (uint32_t)li);
}

int sqls_merge(struct store *s, const struct store_query *q, struct store_merged **out)
{
    struct fn_cache fc = {0};
    struct sqlite_store *st = S(s);
    struct merge_acc a = {0};
    sqlite3_stmt *scan = NULL;
    struct merged_builder b;
    int64_t profiles = 0;
    int err;

    *out = NULL;
    if ((err = merged_builder__init(&b, q->value))) {
        merged_builder__free(&b);
        return err;
    }
    pthread_mutex_lock(&st->rmu);
    /* One read transaction: rollups, raw profiles and stacks of one moment. */
    if (sqlite3_exec(st->rdb, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        err = -EIO;
        goto out_unlock;
    }
    if ((err = sqls_acc_init(&a, st->rdb)) ||
        (err = sqls_accumulate(&st->rd, q, SQLS_LEVELS, &a, &profiles)))
        goto out;
    fn_cache_init(&fc, st->rdb);
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
        if ((err = merged_builder__stack(&b, a.vals[vi].samples, a.vals[vi].cpu, a.vals[vi].off)))
            goto out;
        uint64_t fid;
        while (p && p < end && (p = varint__get(p, end, &fid))) {
            if ((err = frame_of(&b, &fc, fid)))
                goto out;
        }
        sqlite3_reset(st->q_stack); /* an unfinished statement would pin the snapshot */
    }
    err = merged_builder__finish(&b, profiles, name_by_id, st->q_fn, out);
out:
    sqlite3_finalize(scan);
    sqlite3_reset(st->q_stack);
    sqlite3_reset(st->q_fn);
    sqlite3_exec(st->rdb, "COMMIT", NULL, NULL, NULL);
out_unlock:
    pthread_mutex_unlock(&st->rmu);
    sqls_acc_free(&a);
    free(fc.idx);
    if (err)
        merged_builder__free(&b);
    return err;
}

/* --- applications, timeline --- */

int sqls_applications(struct store *s, int64_t from_ns, int64_t to_ns, struct store_app **out,
                      size_t *n)
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
            "SELECT app, host, MAX(time_ns + duration_ns), TOTAL(cpu_ns), TOTAL(off_cpu_ns)"
            " FROM profiles"
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
        double cpu = sqlite3_column_double(q, 3), off = sqlite3_column_double(q, 4);
        sat__acc(&a->cpu_ns, cpu >= 9.2e18 ? INT64_MAX : cpu > 0 ? (int64_t)cpu : 0);
        sat__acc(&a->off_cpu_ns, off >= 9.2e18 ? INT64_MAX : off > 0 ? (int64_t)off : 0);
    }
    if (rc != SQLITE_DONE)
        goto out;
    store_apps__sort(apps, napps);
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

int sqls_timeline(struct store *s, const struct store_query *qq, int64_t step_ns, int64_t **cpu_ns,
                  size_t *nsteps)
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
            sat__acc(&v[i], store_value__of(qq->value, sqlite3_column_int64(q, 1),
                                            sqlite3_column_int64(q, 2)));
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

int sqls_values(struct store *s, const struct store_query *q, struct store_values **out)
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
        err = store_values__add(v, seen, 0, host, strlen(host));
        if (!err && sqlite3_column_int64(c, 1))
            err = store_values__add(v, seen, 1, pid, n);
        if (!err)
            err = store_values__add_identity(v, seen, (const char *)sqlite3_column_text(c, 2));
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

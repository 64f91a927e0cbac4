/* The ClickHouse store's ingest and reads: each read is one statement (one
 * round trip), summed in ClickHouse; only distinct stacks come back. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hmap.h"
#include "../common/log.h"
#include "sat.h"
#include "store_clickhouse_int.h"
#include "store_common.h"

const struct stack_hasher *chs_hasher(struct store *s)
{
    return &CH(s)->hasher;
}

/* --- ingest --- */

/* The rows (RowBinary) of the functions (want_fn[i]) and stacks
 * (want_st[i]) not yet stored for the profile's day, into rows[CH_FUNCTIONS]
 * and rows[CH_STACKS]. */
static int put_keys(const struct store_profile *p, const bool *want_fn, const bool *want_st,
                    struct buf *rows)
{
    int64_t day = p->time_ns / CH_DAY_NS;
    struct buf *r = &rows[CH_FUNCTIONS];
    int err = 0;

    for (size_t i = 0; !err && i < p->nfunctions; i++) {
        if (!want_fn[i])
            continue;
        const struct store_put_function *f = &p->functions[i];
        if (!(err = ch_rb__u64(r, (uint64_t)day)) && !(err = ch_rb__u64(r, f->key.a)) &&
            !(err = ch_rb__u64(r, f->key.b)) &&
            !(err = ch_rb__str(r, f->f.name, strlen(f->f.name))))
            err = ch_rb__str(r, f->f.file, strlen(f->f.file));
    }
    r = &rows[CH_STACKS];
    for (size_t i = 0; !err && i < p->nstacks; i++) {
        if (!want_st[i])
            continue;
        const struct store_stack *k = &p->stacks[i];
        uint64_t n = 0;
        for (uint32_t j = 0; j < k->nlocations; j++)
            n += p->locations[k->locations[j]].nfunctions;
        if (!(err = ch_rb__u64(r, (uint64_t)day)) && !(err = ch_rb__u64(r, k->key.a)))
            err = ch_rb__u64(r, k->key.b);
        /* The two lanes: fa, then fb. */
        for (int lane = 0; lane < 2 && !err; lane++) {
            err = ch_rb__varint(r, n);
            for (uint32_t j = 0; j < k->nlocations && !err; j++) {
                const struct store_location *l = &p->locations[k->locations[j]];
                for (uint32_t f = 0; f < l->nfunctions && !err; f++) {
                    struct stack_key fk = p->functions[l->functions[f]].key;
                    err = ch_rb__u64(r, lane ? fk.b : fk.a);
                }
            }
        }
    }
    return err;
}

/* The psamples rows (one a label set the stacks use: the stacks as arrays)
 * and the profile's row, into rows[CH_SAMPLES] and rows[CH_PROFILES]; ids
 * holds the first columns of both, lsq the label sets (lsq[ls_off[i]..
 * ls_off[i + 1]), the last one empty); order (p->nstacks) and first
 * (p->nlabelsets + 2) are room for the stacks ordered by label set. */
static int put_rows(const struct store_profile *p, const struct buf *ids, const struct buf *lsq,
                    const size_t *ls_off, size_t *order, size_t *first, struct buf *rows)
{
    struct buf *r = &rows[CH_SAMPLES];
    int64_t total_samples = 0, total_cpu = 0, total_off = 0;
    size_t nls = p->nlabelsets + 1;
    int err = 0;

    /* The stacks by label set (a counting sort): those of set i are
     * order[first[i]..first[i + 1]). */
    memset(first, 0, (nls + 1) * sizeof(*first));
    for (size_t i = 0; i < p->nstacks; i++) {
        uint32_t ls = p->stacks[i].labelset;
        first[(ls == STORE_NO_LABELS ? p->nlabelsets : ls) + 1]++;
    }
    for (size_t i = 0; i < nls; i++)
        first[i + 1] += first[i];
    for (size_t i = 0; i < p->nstacks; i++) {
        uint32_t ls = p->stacks[i].labelset;
        order[first[ls == STORE_NO_LABELS ? p->nlabelsets : ls]++] = i;
    }
    memmove(first + 1, first, nls * sizeof(*first));
    first[0] = 0;
    for (size_t ls = 0; ls < nls && !err; ls++) {
        size_t n = first[ls + 1] - first[ls];
        const size_t *o = order + first[ls];
        if (!n)
            continue;
        if ((err = buf__append(r, ids->data, ids->len)) ||
            (err = buf__append(r, lsq->data + ls_off[ls], ls_off[ls + 1] - ls_off[ls])))
            break;
        /* stack_a, stack_b, samples, cpu_ns, off_cpu_ns: an array each. */
        for (int col = 0; col < 5 && !err; col++) {
            err = ch_rb__varint(r, n);
            for (size_t j = 0; j < n && !err; j++) {
                const struct store_stack *k = &p->stacks[o[j]];
                uint64_t v = col == 0   ? k->key.a
                             : col == 1 ? k->key.b
                             : col == 2 ? (uint64_t)k->samples
                             : col == 3 ? (uint64_t)k->cpu_ns
                                        : (uint64_t)k->off_cpu_ns;
                err = ch_rb__u64(r, v);
            }
        }
    }
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct store_stack *k = &p->stacks[i];
        sat__acc(&total_samples, k->samples);
        sat__acc(&total_cpu, k->cpu_ns);
        sat__acc(&total_off, k->off_cpu_ns);
    }
    r = &rows[CH_PROFILES];
    if (err || (err = buf__append(r, ids->data, ids->len)) ||
        (err = ch_rb__u64(r, (uint64_t)p->duration_ns)) ||
        (err = ch_rb__u64(r, (uint64_t)p->period_ns)) ||
        (err = ch_rb__u64(r, (uint64_t)total_samples)) ||
        (err = ch_rb__u64(r, (uint64_t)total_cpu)) || (err = ch_rb__u64(r, (uint64_t)p->bytes_in)))
        return err;
    return ch_rb__u64(r, (uint64_t)total_off);
}

int chs_put(struct store *s, const struct store_profile *p, char *err, size_t errlen)
{
    struct ch_store *st = CH(s);
    struct ch_group *g = chs_group__current(st);
    struct buf rows[CH_N_INSERTS], ids, lsq, text;
    size_t *ls_off = malloc((p->nlabelsets + 2) * sizeof(*ls_off));
    size_t *first = malloc((p->nlabelsets + 2) * sizeof(*first));
    size_t *order = malloc((p->nstacks + 1) * sizeof(*order));
    bool *want_fn = calloc(p->nfunctions + 1, sizeof(bool));
    bool *want_st = calloc(p->nstacks + 1, sizeof(bool));
    bool submitted = false, locked = false;
    int64_t day = p->time_ns / CH_DAY_NS; /* the partition of its rows */
    int ret = -ENOMEM;

    /* A batch about to be written waits a little for this put (one of a
     * group goes with its group's end). */
    if (g)
        submitted = true;
    else
        chs_batch__arrive(st);

    for (int i = 0; i < CH_N_INSERTS; i++)
        buf__init(&rows[i], CH_MAX_STATEMENT);
    buf__init(&ids, 1 << 20);
    buf__init(&lsq, 256u << 20);
    buf__init(&text, 1 << 20);
    if (!ls_off || !first || !order || !want_fn || !want_st) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    /* (app, time_ns, host, pid, labels): every row's first columns. */
    if ((ret = ch_rb__str(&ids, p->app, strlen(p->app))) ||
        (ret = ch_rb__u64(&ids, (uint64_t)p->time_ns)) ||
        (ret = ch_rb__str(&ids, p->host ? p->host : "", p->host ? strlen(p->host) : 0)) ||
        (ret = ch_rb__u64(&ids, (uint64_t)p->pid)) ||
        (ret = store_profile__labels_text(&text, p)) ||
        (ret = ch_rb__str(&ids, text.data ? text.data : "", text.len)))
        goto too_big;
    /* Each label set encoded once; the last is the empty one. */
    for (size_t i = 0; i <= p->nlabelsets; i++) {
        ls_off[i] = lsq.len;
        if (i < p->nlabelsets && (ret = store_labelset__text(&text, &p->labelsets[i])))
            goto too_big;
        if ((ret = ch_rb__str(&lsq, i < p->nlabelsets && text.data ? text.data : "",
                              i < p->nlabelsets ? text.len : 0)))
            goto too_big;
    }
    ls_off[p->nlabelsets + 1] = lsq.len;
    /* The samples' and the profile's rows need no look-up: made before the
     * group's hold, so that the threads of a group make them at once. */
    if ((ret = put_rows(p, &ids, &lsq, ls_off, order, first, rows)))
        goto too_big;
    /* What the caches do not know as stored for this day, nor the group
     * holds. */
    /* A group shared by threads: its look-ups and its rows' adding in
     * one hold, so that two puts at once never both send a new key. */
    if (g)
        chs_group__lock(g);
    locked = g != NULL;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct store_stack *k = &p->stacks[i];
        if (stack_keymap__get(st->stacks, k->key) == day + 1 ||
            (g && chs_group__has(g, true, k->key, day)))
            continue;
        want_st[i] = true;
        for (uint32_t j = 0; j < k->nlocations; j++) {
            const struct store_location *l = &p->locations[k->locations[j]];
            for (uint32_t f = 0; f < l->nfunctions; f++) {
                struct stack_key fk = p->functions[l->functions[f]].key;
                if (!want_fn[l->functions[f]] && stack_keymap__get(st->fns, fk) != day + 1 &&
                    !(g && chs_group__has(g, false, fk, day)))
                    want_fn[l->functions[f]] = true;
            }
        }
    }
    pthread_mutex_unlock(&st->mu);
    if ((ret = put_keys(p, want_fn, want_st, rows)))
        goto too_big;
    if (g) {
        /* Written, and its keys remembered, at the group's end. */
        if ((ret = chs_group__add(g, rows, p, want_fn, want_st)) == -EAGAIN) {
            snprintf(err, errlen, "clickhouse did not take the profile's group (see the log)");
            goto out;
        }
        if (ret)
            goto too_big;
        goto out;
    }
    submitted = true;
    if ((ret = chs_batch__submit(st, rows))) {
        snprintf(err, errlen, "clickhouse did not take the profile (see the log)");
        ret = -EAGAIN;
        goto out;
    }
    /* Stored: remembered. A full cache empties itself (stack_keymap). */
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < p->nfunctions; i++)
        if (want_fn[i] && stack_keymap__put(st->fns, p->functions[i].key, day + 1))
            break;
    for (size_t i = 0; i < p->nstacks; i++)
        if (want_st[i] && stack_keymap__put(st->stacks, p->stacks[i].key, day + 1))
            break;
    pthread_mutex_unlock(&st->mu);
    ret = 0;
    goto out;
too_big:
    snprintf(err, errlen, ret == -E2BIG ? "profile too large" : "out of memory");
out:
    if (locked)
        chs_group__unlock(g);
    if (!submitted)
        chs_batch__leave(st);
    free(ls_off);
    free(first);
    free(order);
    free(want_fn);
    free(want_st);
    for (int i = 0; i < CH_N_INSERTS; i++)
        buf__free(&rows[i]);
    buf__free(&ids);
    buf__free(&lsq);
    buf__free(&text);
    return ret;
}

/* The statement's text at most: ~100 bytes a stack row, ~40 a frame, the
 * names quoted (x4), and the fixed buffers. */
size_t chs_put_mem(struct store *s, const struct store_profile *p)
{
    (void)s;
    size_t n = p->nstacks * 300 + p->nfunctions * 100 + p->nlocations * 64;
    for (size_t i = 0; i < p->nfunctions; i++)
        n += 4 * (strlen(p->functions[i].f.name) + strlen(p->functions[i].f.file));
    return n * 2 + 4 * (1u << 20);
}

/* --- reads --- */

/* The WHERE of a query: its app, range, and the filters it has. */
static int where(struct buf *b, const struct store_query *q)
{
    struct buf needle;
    int err;

    if ((err = buf__append(b, " WHERE app = ", 13)) ||
        (err = ch_sql__quote(b, q->app, strlen(q->app))) ||
        (err = ch_sql__appendf(b, " AND time_ns >= %lld AND time_ns < %lld", (long long)q->from_ns,
                               (long long)q->to_ns)))
        return err;
    if (q->pid && (err = ch_sql__appendf(b, " AND pid = %lld", (long long)q->pid)))
        return err;
    if (q->host && ((err = buf__append(b, " AND host = ", 12)) ||
                    (err = ch_sql__quote(b, q->host, strlen(q->host)))))
        return err;
    buf__init(&needle, 1 << 16);
    for (int i = 0; i < STORE_N_IDENTITY && !err; i++) {
        if (!q->identity[i])
            continue;
        if (!(err = store_identity__needle(&needle, i, q->identity[i])) &&
            !(err = buf__append(b, " AND position(labels, ", 22)) &&
            !(err = ch_sql__quote(b, needle.data, needle.len)))
            err = buf__append(b, ") > 0", 5);
    }
    for (size_t i = 0; i < q->nmatch && !err; i++) {
        if (i == STORE_MAX_MATCHES)
            err = -E2BIG;
        else if (!(err = store_match__needle(&needle, &q->match[i])) &&
                 !(err = buf__append(b, " AND position(labels, ", 22)) &&
                 !(err = ch_sql__quote(b, needle.data, needle.len)))
            err = buf__append(b, q->match[i].negate ? ") = 0" : ") > 0", 5);
    }
    buf__free(&needle);
    return err;
}

struct ch_fn {
    const char *name, *file;
};

static void name_by_index(void *ctx, size_t i, const void *key, size_t len, const char **name,
                          const char **file)
{
    struct ch_fn *names = ctx;

    (void)key;
    (void)len;
    if (names[i].name) {
        *name = names[i].name;
        *file = names[i].file;
    }
}

/* Names the builder's functions: from the cache, and those it lacks with
 * one more statement (functions by key in the query's days: listed when
 * few, else those of the stacks of K's rows), whose answer goes to ans and
 * into the cache. names[i] points into either. */
static int merge_names(struct ch_store *st, const struct store_query *q, const char *K,
                       const struct merged_builder *b, struct ch_fn *names, struct buf *ans)
{
    size_t nf = merged_builder__nfunctions(b), nmiss = 0;
    long long d0 = q->from_ns / CH_DAY_NS, d1 = (q->to_ns - 1) / CH_DAY_NS;
    struct hmap *miss = hmap__new();
    struct buf sql, list;
    int err = -ENOMEM;

    buf__init(&sql, 64u << 20);
    buf__init(&list, 64u << 20);
    if (!miss)
        goto out;
    err = 0;
    for (size_t i = 0; i < nf && !err; i++) {
        size_t len;
        const void *key = merged_builder__key(b, i, &len);
        uint64_t k[2];
        if (len != CH_FN_KEY_LEN || chs_names__get(st->names, key, &names[i].name, &names[i].file))
            continue;
        bool fresh;
        long j = hmap__put(miss, key, len, &fresh);
        if (j < 0) {
            err = -ENOMEM;
            break;
        }
        *hmap__val(miss, j) = i;
        memcpy(k, key, sizeof(k));
        /* key_a alone: a list of numbers is parsed far faster than one
         * of pairs; a row whose key_b differs is not asked for, below. */
        err = ch_sql__appendf(&list, "%s%llu", nmiss++ ? ", " : "", (unsigned long long)k[0]);
    }
    if (err || !nmiss)
        goto out;
    if ((err = ch_sql__appendf(&sql,
                               "SELECT key_a, key_b, name, file FROM %s.functions WHERE day >= "
                               "%lld AND day <= %lld AND key_a ",
                               st->db, d0, d1)))
        goto out;
    if (nmiss > CH_FETCH_LIST_MAX)
        err = ch_sql__appendf(&sql,
                              "GLOBAL IN (SELECT arrayJoin(fa) FROM %s.stacks WHERE day >= %lld "
                              "AND day <= %lld AND (key_a, key_b) GLOBAL IN (SELECT DISTINCT "
                              "stack_a, stack_b FROM (%s)))",
                              st->db, d0, d1, K);
    else
        err = ch_sql__appendf(&sql, "IN (%s)", list.data);
    if (err || (err = ch_sql__appendf(&sql, " LIMIT 1 BY key_a, key_b FORMAT TabSeparated")) ||
        (err = chs_exec(st, 0, &sql, ans)))
        goto out;
    struct ch_tsv t;
    char *f[4];
    int n;
    ch_tsv__init(&t, ans->data, ans->len);
    while ((n = ch_tsv__row(&t, f, 4)) == 4) {
        uint64_t k[2];
        if (ch_tsv__u64(f[0], &k[0]) || ch_tsv__u64(f[1], &k[1]))
            break;
        long j = hmap__find(miss, k, sizeof(k));
        if (j < 0)
            continue;
        size_t i = *hmap__val(miss, j);
        names[i] = (struct ch_fn){f[2], f[3]};
        chs_names__put(st->names, k, f[2], f[3]);
    }
    if (n != 0) {
        log_error("clickhouse: a garbled answer naming functions");
        err = -EAGAIN;
    }
out:
    hmap__free(miss);
    buf__free(&sql);
    buf__free(&list);
    return err;
}

/* Builds the merged result from the merge statement's rows (RowBinary):
 * kind 0, a stack's key and sums; 3, the count of profiles. The stacks'
 * frames and the functions' names come from the caches, or one statement
 * each for those they lack. */
static int merge_parse(struct ch_store *st, const struct store_query *q, const char *K,
                       struct buf *ans, struct store_merged **out)
{
    struct ch_fn *names = NULL;
    struct chs_stack *stacks = NULL;
    size_t nstacks = 0, cap = 0;
    uint64_t *own = NULL;
    int64_t profiles = 0;
    struct merged_builder b = {0};
    struct buf nans;
    struct ch_rbr r;
    int err = -ENOMEM;

    buf__init(&nans, CH_MAX_ANSWER);
    if ((err = merged_builder__init(&b, q->value)))
        goto out;
    ch_rbr__init(&r, ans->data, ans->len);
    while (!ch_rbr__done(&r)) {
        struct chs_stack k = {0};
        uint8_t kind;
        if (ch_rbr__u8(&r, &kind) || ch_rbr__u64(&r, &k.key[0]) || ch_rbr__u64(&r, &k.key[1]) ||
            ch_rbr__i64(&r, &k.samples) || ch_rbr__i64(&r, &k.cpu_ns) ||
            ch_rbr__i64(&r, &k.off_cpu_ns) || (kind != 0 && kind != 3))
            goto bad;
        if (kind == 3) {
            profiles = k.samples;
            continue;
        }
        if (nstacks == cap) {
            cap = cap ? cap * 2 : 1024;
            void *ns = realloc(stacks, cap * sizeof(*stacks));
            if (!ns)
                goto oom;
            stacks = ns;
        }
        stacks[nstacks++] = k;
    }
    if ((err = chs_frames__lookup(st, q, K, stacks, nstacks, &own)))
        goto out;
    /* A stack without frames in ClickHouse is left out, as a join would. */
    for (size_t i = 0; i < nstacks; i++) {
        if (!stacks[i].frames)
            continue;
        if ((err = merged_builder__stack(&b, stacks[i].samples, stacks[i].cpu_ns,
                                         stacks[i].off_cpu_ns)))
            goto out;
        for (uint32_t j = 0; j < stacks[i].nframes; j++)
            if ((err = merged_builder__frame(&b, &stacks[i].frames[2 * j], CH_FN_KEY_LEN)))
                goto out;
    }
    if (!(names = calloc(merged_builder__nfunctions(&b) + 1, sizeof(*names))))
        goto oom;
    if ((err = merge_names(st, q, K, &b, names, &nans)))
        goto out;
    err = merged_builder__finish(&b, profiles, name_by_index, names, out);
    goto out;
oom:
    err = -ENOMEM;
    goto out;
bad:
    log_error("clickhouse: a garbled answer to a merge");
    err = -EAGAIN;
out:
    merged_builder__free(&b);
    buf__free(&nans);
    free(names);
    free(stacks);
    free(own);
    return err;
}

/* The merge statement over rows R (stack_a, stack_b, samples, cpu_ns,
 * off_cpu_ns) and the count C: the samples summed per stack key
 * (saturating; kind 0), and the count of profiles (kind 3), in RowBinary
 * (41 bytes a row, nothing to parse). Only keys and sums come back: the frames of a key never
 * change, and the server keeps them (store_clickhouse_frames.c). */
static int merge_sql(struct buf *sql, const char *R, const char *C)
{
    static const char sums[] = CH_SAT_SUM("samples") " AS s, " CH_SAT_SUM(
        "cpu_ns") " AS c, " CH_SAT_SUM("off_cpu_ns") " AS o";

    return ch_sql__appendf(sql,
                           "SELECT 0, stack_a, stack_b, s, c, o FROM (SELECT stack_a, stack_b, %s "
                           "FROM (%s) GROUP BY stack_a, stack_b) UNION ALL SELECT 3, toUInt64(0), "
                           "toUInt64(0), toInt64(c), toInt64(0), toInt64(0) FROM (%s) "
                           "FORMAT RowBinary",
                           sums, R, C);
}

int chs_merge(struct store *s, const struct store_query *q, struct store_merged **out)
{
    struct ch_store *st = CH(s);
    struct buf sql, rows, keys, count, ans;
    const char *d = st->db;
    bool filtered = q->host || q->pid || q->nmatch;
    int err = 0;

    for (int i = 0; i < STORE_N_IDENTITY; i++)
        filtered |= q->identity[i] != NULL;
    *out = NULL;
    buf__init(&sql, 64u << 20);
    buf__init(&rows, 16u << 20);
    buf__init(&keys, 16u << 20);
    buf__init(&count, 16u << 20);
    buf__init(&ans, CH_MAX_ANSWER);
    /* The rows to sum: rollups where they serve (no filter), else raw. */
    if (!filtered) {
        if ((err = chs_rollup__rows(st, q, &rows, &keys, &count)))
            goto out;
    } else {
        for (int k = 0; k < 2 && !err; k++)
            if (!(err = ch_sql__appendf(k ? &keys : &rows,
                                        "SELECT " CH_SAMPLES_COLS " FROM (SELECT " CH_SAMPLES_COLS
                                        " FROM %s.psamples%s",
                                        d, k ? "" : " FINAL")) &&
                !(err = where(k ? &keys : &rows, q)))
                err = buf__append(k ? &keys : &rows, ")" CH_SAMPLES_JOIN,
                                  strlen(")" CH_SAMPLES_JOIN));
        if (err ||
            (err = ch_sql__appendf(&count, "SELECT toUInt64(count()) AS c FROM %s.profiles FINAL",
                                   d)) ||
            (err = where(&count, q)))
            goto out;
    }
    if ((err = merge_sql(&sql, rows.data, count.data)) || (err = chs_exec(st, 0, &sql, &ans)))
        goto out;
    err = merge_parse(st, q, keys.data, &ans, out);
out:
    buf__free(&sql);
    buf__free(&rows);
    buf__free(&keys);
    buf__free(&count);
    buf__free(&ans);
    return err == -E2BIG ? -EINVAL : err;
}

int chs_applications(struct store *s, int64_t from_ns, int64_t to_ns, struct store_app **out,
                     size_t *n)
{
    struct ch_store *st = CH(s);
    struct buf sql, ans;
    struct store_app *apps = NULL;
    size_t napps = 0, cap = 0;
    int err;

    *out = NULL;
    *n = 0;
    buf__init(&sql, 1 << 16);
    buf__init(&ans, 256u << 20);
    if ((err = ch_sql__appendf(
             &sql,
             "SELECT app, host, max(time_ns + duration_ns), " CH_SAT_SUM("cpu_ns") ", " CH_SAT_SUM(
                 "off_cpu_ns") " FROM %s.profiles FINAL WHERE "
                               "time_ns >= %lld AND time_ns < %lld "
                               "GROUP BY app, host ORDER BY app, host "
                               "FORMAT TabSeparated",
             st->db, (long long)from_ns, (long long)to_ns)) ||
        (err = chs_exec(st, 0, &sql, &ans)))
        goto out;
    struct ch_tsv t;
    char *f[5];
    int r;
    ch_tsv__init(&t, ans.data, ans.len);
    while ((r = ch_tsv__row(&t, f, 5)) == 5) {
        int64_t last, cpu, off;
        if (ch_tsv__i64(f[2], &last) || ch_tsv__i64(f[3], &cpu) || ch_tsv__i64(f[4], &off))
            break;
        if (!napps || strcmp(apps[napps - 1].name, f[0]) != 0) {
            if (napps == cap) {
                cap = cap ? cap * 2 : 32;
                struct store_app *na = realloc(apps, cap * sizeof(*na));
                if (!na)
                    goto oom;
                apps = na;
            }
            memset(&apps[napps], 0, sizeof(apps[napps]));
            if (!(apps[napps++].name = strdup(f[0])))
                goto oom;
        }
        struct store_app *a = &apps[napps - 1];
        char **h = realloc(a->hosts, (a->nhosts + 1) * sizeof(*h));
        if (!h)
            goto oom;
        a->hosts = h;
        if (!(h[a->nhosts] = strdup(f[1])))
            goto oom;
        a->nhosts++;
        if (last > a->last_seen_ns)
            a->last_seen_ns = last;
        sat__acc(&a->cpu_ns, cpu > 0 ? cpu : 0);
        sat__acc(&a->off_cpu_ns, off > 0 ? off : 0);
    }
    if (r != 0) {
        log_error("clickhouse: a garbled answer listing applications");
        err = -EAGAIN;
        goto out;
    }
    store_apps__sort(apps, napps);
    goto out;
oom:
    err = -ENOMEM;
out:
    buf__free(&sql);
    buf__free(&ans);
    if (err) {
        store_apps__free(apps, napps);
    } else {
        *out = apps;
        *n = napps;
    }
    return err;
}

int chs_timeline(struct store *s, const struct store_query *q, int64_t step_ns, int64_t **cpu_ns,
                 size_t *nsteps)
{
    struct ch_store *st = CH(s);
    struct buf sql, ans;
    int err;

    *cpu_ns = NULL;
    *nsteps = 0;
    if (step_ns <= 0 || q->to_ns <= q->from_ns)
        return -EINVAL;
    size_t n = (q->to_ns - q->from_ns + step_ns - 1) / step_ns;
    if (n > 100000)
        return -E2BIG;
    int64_t *v = calloc(n + 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    buf__init(&sql, 1 << 20);
    buf__init(&ans, 64u << 20);
    if ((err =
             ch_sql__appendf(&sql,
                             "SELECT intDiv(time_ns - %lld, %lld) AS i, " CH_SAT_SUM(
                                 "cpu_ns") ", " CH_SAT_SUM("off_cpu_ns") " FROM %s.profiles FINAL",
                             (long long)q->from_ns, (long long)step_ns, st->db)) ||
        (err = where(&sql, q)) ||
        (err = ch_sql__appendf(&sql, " GROUP BY i FORMAT TabSeparated")) ||
        (err = chs_exec(st, 0, &sql, &ans)))
        goto out;
    struct ch_tsv t;
    char *f[3];
    int r;
    ch_tsv__init(&t, ans.data, ans.len);
    while ((r = ch_tsv__row(&t, f, 3)) == 3) {
        int64_t i, c, o;
        if (ch_tsv__i64(f[0], &i) || ch_tsv__i64(f[1], &c) || ch_tsv__i64(f[2], &o))
            break;
        if (i >= 0 && (size_t)i < n)
            sat__acc(&v[i], store_value__of(q->value, c > 0 ? c : 0, o > 0 ? o : 0));
    }
    if (r != 0) {
        log_error("clickhouse: a garbled answer to a timeline");
        err = -EAGAIN;
    }
out:
    buf__free(&sql);
    buf__free(&ans);
    if (err) {
        free(v);
        return err == -E2BIG ? -EINVAL : err;
    }
    *cpu_ns = v;
    *nsteps = n;
    return 0;
}

int chs_values(struct store *s, const struct store_query *q, struct store_values **out)
{
    struct ch_store *st = CH(s);
    struct store_values *v = calloc(1, sizeof(*v));
    struct hmap *seen = hmap__new();
    struct buf sql, ans;
    int err = -ENOMEM;

    *out = NULL;
    buf__init(&sql, 1 << 20);
    buf__init(&ans, 256u << 20);
    if (!v || !seen)
        goto out;
    if ((err = ch_sql__appendf(&sql, "SELECT DISTINCT host, pid, labels FROM %s.profiles FINAL",
                               st->db)) ||
        (err = where(&sql, q)) ||
        (err = ch_sql__appendf(&sql, " LIMIT 100000 FORMAT TabSeparated")) ||
        (err = chs_exec(st, 0, &sql, &ans)))
        goto out;
    struct ch_tsv t;
    char *f[3];
    int r = 0;
    ch_tsv__init(&t, ans.data, ans.len);
    while (!err && (r = ch_tsv__row(&t, f, 3)) == 3) {
        int64_t pid;
        if (ch_tsv__i64(f[1], &pid)) {
            r = -EBADMSG;
            break;
        }
        err = store_values__add(v, seen, 0, f[0], strlen(f[0]));
        if (!err && pid)
            err = store_values__add(v, seen, 1, f[1], strlen(f[1]));
        if (!err)
            err = store_values__add_identity(v, seen, f[2]);
    }
    if (!err && r != 0) {
        log_error("clickhouse: a garbled answer listing label values");
        err = -EAGAIN;
    }
out:
    buf__free(&sql);
    buf__free(&ans);
    hmap__free(seen);
    if (err) {
        store_values__free(v);
        return err == -E2BIG ? -EINVAL : err;
    }
    *out = v;
    return 0;
}

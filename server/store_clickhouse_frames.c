/* The ClickHouse store's stacks for merges: a stack's key is a hash of its
 * frames, so the frames of a key never change, and the server keeps those
 * it has read. A merge then asks ClickHouse only for its sums per stack
 * key; the frames of keys not yet seen come from one more statement over
 * the stacks table (RowBinary: no text to parse), and stay. Entries are
 * never removed (their frames stay valid while the store is open); a full
 * cache takes no more, and merges then read the rest each time. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hmap.h"
#include "../common/log.h"
#include "store_clickhouse_int.h"

/* At most this many bytes of frames (16 a frame), and CH_FRAMES_MAX stacks. */
#define FRAMES_MAX_BYTES (256u << 20)

struct ch_frames {
    pthread_mutex_t mu;
    struct hmap *keys; /* 16-byte stack key -> index */
    struct frames_entry {
        uint64_t *f; /* n function keys, each its a then b lane */
        uint32_t n;
    } * entry;
    size_t cap, bytes;
};

struct ch_frames *chs_frames__new(void)
{
    struct ch_frames *f = calloc(1, sizeof(*f));

    if (!f)
        return NULL;
    if (!(f->keys = hmap__new())) {
        free(f);
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    return f;
}

void chs_frames__free(struct ch_frames *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < hmap__len(f->keys); i++)
        free(f->entry[i].f);
    free(f->entry);
    hmap__free(f->keys);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* The frames of key, or NULL (*n 0) when not cached. */
static const uint64_t *frames_get(struct ch_frames *f, const uint64_t key[2], uint32_t *n)
{
    const uint64_t *out = NULL;

    pthread_mutex_lock(&f->mu);
    long i = hmap__find(f->keys, key, CH_STACK_KEY_LEN);
    *n = i >= 0 ? f->entry[i].n : 0;
    out = i >= 0 ? f->entry[i].f : NULL;
    pthread_mutex_unlock(&f->mu);
    return out;
}

void chs_frames__put(struct ch_frames *f, const uint64_t key[2], const uint64_t *frames, uint32_t n)
{
    size_t bytes = (size_t)n * 16 + sizeof(struct frames_entry);

    pthread_mutex_lock(&f->mu);
    size_t len = hmap__len(f->keys);
    if (len >= CH_FRAMES_MAX || f->bytes + bytes > FRAMES_MAX_BYTES ||
        hmap__find(f->keys, key, CH_STACK_KEY_LEN) >= 0)
        goto out;
    if (len == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4096;
        struct frames_entry *e = realloc(f->entry, cap * sizeof(*e));
        if (!e)
            goto out;
        f->entry = e;
        f->cap = cap;
    }
    uint64_t *c = malloc(n ? n * 16 : 1);
    if (!c)
        goto out;
    memcpy(c, frames, (size_t)n * 16);
    long i = hmap__put(f->keys, key, CH_STACK_KEY_LEN, NULL);
    if (i < 0) {
        free(c);
        goto out;
    }
    f->entry[i] = (struct frames_entry){c, n};
    f->bytes += bytes;
out:
    pthread_mutex_unlock(&f->mu);
}

/* Reads the stacks of the keys in miss (key -> index into out), listed or
 * as the keys of K's rows, from the stacks table's days [d0, d1]: their
 * frames, interleaved, into *own (the caller frees it), out[i] pointing
 * there; and into the cache. */
static int fetch(struct ch_store *st, long long d0, long long d1, const char *K, struct hmap *miss,
                 struct chs_stack *out, uint64_t **own)
{
    struct buf sql, ans;
    size_t nmiss = hmap__len(miss), total = 0, used = 0;
    bool listed = nmiss <= CH_FETCH_LIST_MAX;
    int err;

    buf__init(&sql, 64u << 20);
    buf__init(&ans, CH_MAX_ANSWER);
    err = ch_sql__appendf(&sql,
                          "SELECT key_a, key_b, fa, fb FROM %s.stacks WHERE day >= %lld AND "
                          "day <= %lld AND ",
                          st->db, d0, d1);
    if (!err && !listed)
        err = ch_sql__appendf(&sql,
                              "(key_a, key_b) GLOBAL IN (SELECT DISTINCT stack_a, stack_b FROM "
                              "(%s)",
                              K);
    else if (!err)
        err = buf__append(&sql, "key_a IN (", 10);
    /* key_a alone: a list of numbers is parsed far faster than one of
     * pairs; a row whose key_b differs is not asked for, below. */
    for (size_t i = 0; listed && i < nmiss && !err; i++) {
        size_t len;
        uint64_t k[2];
        memcpy(k, hmap__key(miss, i, &len), sizeof(k));
        err = ch_sql__appendf(&sql, "%s%llu", i ? ", " : "", (unsigned long long)k[0]);
    }
    if (err || (err = ch_sql__appendf(&sql, ") LIMIT 1 BY key_a, key_b FORMAT RowBinary")) ||
        (err = chs_exec(st, 0, &sql, &ans)))
        goto out;
    /* Two passes: the frames' count first, for one block. */
    for (int pass = 0; pass < 2; pass++) {
        struct ch_rbr r;
        ch_rbr__init(&r, ans.data, ans.len);
        while (!ch_rbr__done(&r)) {
            uint64_t k[2], na, nb;
            const unsigned char *fa, *fb;
            if (ch_rbr__u64(&r, &k[0]) || ch_rbr__u64(&r, &k[1]) ||
                ch_rbr__u64_array(&r, &fa, &na, STACK_KEY_MAX_FRAMES) ||
                ch_rbr__u64_array(&r, &fb, &nb, STACK_KEY_MAX_FRAMES) || na != nb) {
                log_error("clickhouse: a garbled answer listing stacks");
                err = -EAGAIN;
                goto out;
            }
            long j = hmap__find(miss, k, sizeof(k));
            if (j < 0 || out[*hmap__val(miss, j)].frames)
                continue;
            if (!pass) {
                total += na;
                continue;
            }
            uint64_t *f = *own + 2 * used;
            for (uint64_t x = 0; x < na; x++) {
                f[2 * x] = ch_rbr__le64(fa + 8 * x);
                f[2 * x + 1] = ch_rbr__le64(fb + 8 * x);
            }
            used += na;
            out[*hmap__val(miss, j)].frames = f;
            out[*hmap__val(miss, j)].nframes = (uint32_t)na;
            chs_frames__put(st->frames, k, f, (uint32_t)na);
        }
        if (!pass && !(*own = malloc(total ? total * 16 : 1))) {
            err = -ENOMEM;
            goto out;
        }
    }
out:
    buf__free(&sql);
    buf__free(&ans);
    return err;
}

int chs_frames__lookup(struct ch_store *st, const struct store_query *q, const char *K,
                       struct chs_stack *stacks, size_t n, uint64_t **own)
{
    struct hmap *miss = hmap__new();
    int err = -ENOMEM;

    *own = NULL;
    if (!miss)
        goto out;
    for (size_t i = 0; i < n; i++) {
        stacks[i].frames = frames_get(st->frames, stacks[i].key, &stacks[i].nframes);
        if (stacks[i].frames)
            continue;
        bool fresh;
        long j = hmap__put(miss, stacks[i].key, CH_STACK_KEY_LEN, &fresh);
        if (j < 0)
            goto out;
        *hmap__val(miss, j) = i;
    }
    err = 0;
    if (hmap__len(miss))
        err = fetch(st, q->from_ns / CH_DAY_NS, (q->to_ns - 1) / CH_DAY_NS, K, miss, stacks, own);
out:
    hmap__free(miss);
    return err;
}

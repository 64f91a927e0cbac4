#include "offcpu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hmap.h"

struct entry {
    struct cx_sample *s; /* a copy of the record, its frames only */
    size_t bytes;
    uint64_t used_ns;
};

struct offcpu {
    struct hmap *index; /* struct cx_off_key -> index into entries */
    struct entry *entries;
    size_t n, cap, bytes;
    uint64_t refused;
};

struct offcpu *offcpu__new(void)
{
    struct offcpu *o = calloc(1, sizeof(*o));

    if (!o || !(o->index = hmap__new())) {
        free(o);
        return NULL;
    }
    return o;
}

void offcpu__free(struct offcpu *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->n; i++)
        free(o->entries[i].s);
    free(o->entries);
    hmap__free(o->index);
    free(o);
}

static struct cx_off_key key_of(const struct cx_sample *s)
{
    struct cx_off_key k;

    memset(&k, 0, sizeof(k)); /* padding is part of the key */
    k.tgid = s->hdr.tgid;
    k.tid = s->hdr.tid;
    k.id = s->off_id;
    return k;
}

int offcpu__put(struct offcpu *o, const struct cx_sample *s, uint64_t now_ns)
{
    size_t nf = (size_t)s->n_kernel + s->n_user;
    size_t bytes = offsetof(struct cx_sample, frames) + nf * sizeof(struct cx_frame);
    struct cx_off_key k = key_of(s);
    struct cx_sample *copy;
    bool fresh;
    long i;

    if (nf > CX_MAX_FRAMES)
        return -E2BIG;
    long at = hmap__find(o->index, &k, sizeof(k));
    if (at >= 0 && *hmap__val(o->index, at) < o->n) {
        /* The same key: the same stack (a hash collision aside), sent again
         * after a drain. Refreshed in place. */
        struct entry *e = &o->entries[*hmap__val(o->index, at)];
        e->used_ns = now_ns;
        return 0;
    }
    if (o->n >= OFFCPU_MAX_STACKS || o->bytes + bytes > OFFCPU_MAX_BYTES) {
        o->refused++;
        return -E2BIG;
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        struct entry *ne = realloc(o->entries, cap * sizeof(*ne));
        if (!ne)
            goto oom;
        o->entries = ne;
        o->cap = cap;
    }
    copy = malloc(bytes);
    if (!copy)
        goto oom;
    memcpy(copy, s, bytes);
    i = hmap__put(o->index, &k, sizeof(k), &fresh);
    if (i < 0) {
        free(copy);
        goto oom;
    }
    *hmap__val(o->index, i) = o->n;
    o->entries[o->n++] = (struct entry){copy, bytes, now_ns};
    o->bytes += bytes;
    return 0;
oom:
    o->refused++;
    return -ENOMEM;
}

const struct cx_sample *offcpu__get(struct offcpu *o, const struct cx_off_key *k, uint64_t now_ns)
{
    struct cx_off_key key;

    memset(&key, 0, sizeof(key));
    key.tgid = k->tgid;
    key.tid = k->tid;
    key.id = k->id;
    long i = hmap__find(o->index, &key, sizeof(key));
    if (i < 0 || *hmap__val(o->index, i) >= o->n)
        return NULL;
    struct entry *e = &o->entries[*hmap__val(o->index, i)];
    e->used_ns = now_ns;
    return e->s;
}

/* A stack used after now_ns (a record read after the caller took the
 * time) is fresh, not 2^64 ns old. */
static bool stale(const struct entry *e, uint64_t now_ns)
{
    return now_ns > e->used_ns && now_ns - e->used_ns >= OFFCPU_KEEP_NS;
}

int offcpu__sweep(struct offcpu *o, uint64_t now_ns)
{
    struct hmap *index = hmap__new();
    size_t kept = 0;

    if (!index)
        return -ENOMEM;
    /* The survivors' keys first: a failure leaves the table as it was. */
    for (size_t i = 0; i < o->n; i++) {
        if (stale(&o->entries[i], now_ns))
            continue;
        struct cx_off_key k = key_of(o->entries[i].s);
        long at = hmap__put(index, &k, sizeof(k), NULL);
        if (at < 0) {
            hmap__free(index);
            return -ENOMEM;
        }
        *hmap__val(index, at) = kept++;
    }
    kept = 0;
    o->bytes = 0;
    for (size_t i = 0; i < o->n; i++) {
        if (stale(&o->entries[i], now_ns)) {
            free(o->entries[i].s);
            continue;
        }
        o->bytes += o->entries[i].bytes;
        o->entries[kept++] = o->entries[i];
    }
    o->n = kept;
    hmap__free(o->index);
    o->index = index;
    return 0;
}

size_t offcpu__len(const struct offcpu *o)
{
    return o ? o->n : 0;
}

uint64_t offcpu__refused(const struct offcpu *o)
{
    return o ? o->refused : 0;
}

/* The ClickHouse store's cache of function names: a function's key is a
 * hash of its name and file, so the names of a key never change, and a
 * merge need not ask ClickHouse again for names it has seen. Entries are
 * never removed (their strings stay valid while the store is open); a full
 * cache takes no more, and merges then ask for the rest. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hmap.h"
#include "store_clickhouse_int.h"

/* At most this many bytes of names, and CH_NAMES_MAX functions. */
#define NAMES_MAX_BYTES (64u << 20)

struct ch_names {
    pthread_mutex_t mu;
    struct hmap *keys; /* 16-byte function key -> index */
    char **entry;      /* index -> "name\0file\0" */
    size_t cap, bytes;
};

struct ch_names *chs_names__new(void)
{
    struct ch_names *n = calloc(1, sizeof(*n));

    if (!n)
        return NULL;
    if (!(n->keys = hmap__new())) {
        free(n);
        return NULL;
    }
    pthread_mutex_init(&n->mu, NULL);
    return n;
}

void chs_names__free(struct ch_names *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < hmap__len(n->keys); i++)
        free(n->entry[i]);
    free(n->entry);
    hmap__free(n->keys);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

bool chs_names__get(struct ch_names *n, const void *key, const char **name, const char **file)
{
    bool found = false;

    pthread_mutex_lock(&n->mu);
    long i = hmap__find(n->keys, key, CH_FN_KEY_LEN);
    if (i >= 0) {
        *name = n->entry[i];
        *file = n->entry[i] + strlen(n->entry[i]) + 1;
        found = true;
    }
    pthread_mutex_unlock(&n->mu);
    return found;
}

void chs_names__put(struct ch_names *n, const void *key, const char *name, const char *file)
{
    size_t ln = strlen(name), lf = strlen(file);

    pthread_mutex_lock(&n->mu);
    size_t len = hmap__len(n->keys);
    if (len >= CH_NAMES_MAX || n->bytes + ln + lf + 2 > NAMES_MAX_BYTES ||
        hmap__find(n->keys, key, CH_FN_KEY_LEN) >= 0)
        goto out;
    if (len == n->cap) {
        size_t cap = n->cap ? n->cap * 2 : 4096;
        char **e = realloc(n->entry, cap * sizeof(*e));
        if (!e)
            goto out;
        n->entry = e;
        n->cap = cap;
    }
    char *s = malloc(ln + lf + 2);
    if (!s)
        goto out;
    memcpy(s, name, ln + 1);
    memcpy(s + ln + 1, file, lf + 1);
    bool fresh;
    long i = hmap__put(n->keys, key, CH_FN_KEY_LEN, &fresh);
    if (i < 0) {
        free(s);
        goto out;
    }
    n->entry[i] = s;
    n->bytes += ln + lf + 2;
out:
    pthread_mutex_unlock(&n->mu);
}

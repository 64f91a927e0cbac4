#include "hmap.h"

#include <stdlib.h>

#include "arena.h"
#include <string.h>
#include <sys/random.h>
#include <time.h>

struct entry {
    const unsigned char *key;
    uint32_t len;
    uint64_t hash;
    uint64_t val;
};

/* Keys live in chunks that never move, so key pointers stay valid. */
struct chunk {
    struct chunk *next;
    size_t used, size;
    unsigned char data[];
};

struct hmap {
    struct entry *entries;
    size_t n, cap;
    uint32_t *slots; /* index + 1; 0 is empty */
    size_t nslots;   /* a power of two */
    struct chunk *chunks;
    /* Where the map's memory comes from (hmap__new_in), freed with it;
     * NULL: malloc. */
    struct arena *arena;
};

static void *mem_calloc(struct arena *a, size_t n, size_t size)
{
    return a ? arena__calloc(a, n, size) : calloc(n, size);
}

static void mem_free(struct arena *a, void *p)
{
    if (!a)
        free(p);
}

/* A seed drawn once per process: keys can come from outside (a profile's
 * label indices at the server), and with a hash known in advance a sender
 * could choose keys that all collide. Nothing keeps a hash beyond the
 * process. */
static uint64_t seed;

__attribute__((constructor)) static void seed_init(void)
{
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
        seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&seed;
}

uint64_t hmap__hash(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ seed ^ (len * 0xff51afd7ed558ccdull);
    uint64_t w;

    while (len >= 8) {
        memcpy(&w, p, 8);
        h ^= w * 0xc4ceb9fe1a85ec53ull;
        h = (h << 31 | h >> 33) * 0x9e3779b97f4a7c15ull;
        p += 8;
        len -= 8;
    }
    w = 0;
    memcpy(&w, p, len);
    h ^= w * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

struct hmap *hmap__new_in(struct arena *a, size_t nslots)
{
    struct hmap *h = mem_calloc(a, 1, sizeof(*h));

    if (!h)
        return NULL;
    h->arena = a;
    h->nslots = 16;
    while (h->nslots < nslots && h->nslots < 64)
        h->nslots *= 2;
    h->slots = mem_calloc(a, h->nslots, sizeof(*h->slots));
    if (!h->slots) {
        mem_free(a, h);
        return NULL;
    }
    return h;
}

struct hmap *hmap__new(void)
{
    return hmap__new_in(NULL, 64);
}

void hmap__free(struct hmap *h)
{
    struct chunk *c, *next;

    if (!h || h->arena)
        return;
    for (c = h->chunks; c; c = next) {
        next = c->next;
        free(c);
    }
    free(h->entries);
    free(h->slots);
    free(h);
}

/* What hmap__clear keeps: slots up to 256 (cleared each time: a map reused
 * for small profiles after a big one would otherwise clear 16 KiB, four
 * pages, every time), entries up to 2,048 and one chunk of keys (at most
 * 64 KiB; neither is touched until used again). */
#define CLEAR_KEEP_SLOTS 256
#define CLEAR_KEEP_ENTRIES 2048

void hmap__clear(struct hmap *h)
{
    struct chunk *c, *next;

    if (h->chunks) {
        for (c = h->chunks->next; c; c = next) {
            next = c->next;
            mem_free(h->arena, c);
        }
        h->chunks->next = NULL;
        h->chunks->used = 0;
    }
    if (h->cap > CLEAR_KEEP_ENTRIES) {
        mem_free(h->arena, h->entries);
        h->entries = NULL;
        h->cap = 0;
    }
    h->n = 0;
    if (h->nslots > CLEAR_KEEP_SLOTS) {
        uint32_t *slots = mem_calloc(h->arena, 64, sizeof(*slots));
        if (slots) {
            mem_free(h->arena, h->slots);
            h->slots = slots;
            h->nslots = 64;
            return;
        }
    }
    memset(h->slots, 0, h->nslots * sizeof(*h->slots));
}

static long lookup(const struct hmap *h, const void *key, size_t len, uint64_t hash, size_t *slot)
{
    size_t mask = h->nslots - 1, i = hash & mask;

    for (;;) {
        uint32_t s = h->slots[i];
        if (!s) {
            *slot = i;
            return -1;
        }
        const struct entry *e = &h->entries[s - 1];
        if (e->hash == hash && e->len == len && memcmp(e->key, key, len) == 0)
            return s - 1;
        i = (i + 1) & mask;
    }
}

static int grow_slots(struct hmap *h)
{
    size_t n = h->nslots * 2, mask = n - 1;
    uint32_t *slots = mem_calloc(h->arena, n, sizeof(*slots));

    if (!slots)
        return -1;
    for (size_t e = 0; e < h->n; e++) {
        size_t i = h->entries[e].hash & mask;
        while (slots[i])
            i = (i + 1) & mask;
        slots[i] = e + 1;
    }
    mem_free(h->arena, h->slots);
    h->slots = slots;
    h->nslots = n;
    return 0;
}

static unsigned char *store_key(struct hmap *h, const void *key, size_t len)
{
    struct chunk *c = h->chunks;
    size_t need = (len + 7) & ~(size_t)7;

    if (!c || c->size - c->used < need) {
        /* Chunks grow with the map: most maps (one per process per window)
         * stay small, a few grow large. */
        size_t size = c ? c->size * 2 : 512;
        if (size > 65536)
            size = 65536;
        if (size < need)
            size = need;
        c = h->arena ? arena__alloc(h->arena, sizeof(*c) + size) : malloc(sizeof(*c) + size);
        if (!c)
            return NULL;
        c->size = size;
        c->used = 0;
        c->next = h->chunks;
        h->chunks = c;
    }
    unsigned char *p = c->data + c->used;
    if (len)
        memcpy(p, key, len);
    c->used += need;
    return p;
}

long hmap__put(struct hmap *h, const void *key, size_t len, bool *inserted)
{
    uint64_t hash = hmap__hash(key, len);
    size_t slot;
    long idx;

    if (inserted)
        *inserted = false;
    if (len > UINT32_MAX)
        return -1;
    idx = lookup(h, key, len, hash, &slot);
    if (idx >= 0)
        return idx;
    if (h->n >= UINT32_MAX - 1)
        return -1;
    /* Keep the load under 1/2 so probes stay short. */
    if ((h->n + 1) * 2 > h->nslots) {
        if (grow_slots(h))
            return -1;
        lookup(h, key, len, hash, &slot);
    }
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : h->nslots / 2;
        struct entry *e =
            h->arena ? arena__grow(h->arena, h->entries, h->cap * sizeof(*e), cap * sizeof(*e))
                     : realloc(h->entries, cap * sizeof(*e));
        if (!e)
            return -1;
        h->entries = e;
        h->cap = cap;
    }
    unsigned char *k = store_key(h, key, len);
    if (!k)
        return -1;
    h->entries[h->n] = (struct entry){.key = k, .len = len, .hash = hash, .val = 0};
    h->slots[slot] = h->n + 1;
    if (inserted)
        *inserted = true;
    return h->n++;
}

long hmap__find(const struct hmap *h, const void *key, size_t len)
{
    size_t slot;

    return lookup(h, key, len, hmap__hash(key, len), &slot);
}

size_t hmap__len(const struct hmap *h)
{
    return h->n;
}

const void *hmap__key(const struct hmap *h, size_t idx, size_t *len)
{
    if (len)
        *len = h->entries[idx].len;
    return h->entries[idx].key;
}

uint64_t *hmap__val(struct hmap *h, size_t idx)
{
    return &h->entries[idx].val;
}

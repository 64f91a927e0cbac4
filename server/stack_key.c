#include "stack_key.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static uint64_t mulmod(uint64_t x, uint64_t y)
{
    return stack_key__mod((unsigned __int128)x * y);
}

int stack_hasher__init(struct stack_hasher *h, const uint64_t base[STACK_HASHER_BASES])
{
    memset(h, 0, sizeof(*h));
    h->base_a = base[0] % STACK_KEY_P;
    h->base_b = base[1] % STACK_KEY_P;
    h->base_c = base[2] % STACK_KEY_P;
    h->base_d = base[3] % STACK_KEY_P;
    size_t n = STACK_KEY_MAX_FRAMES + STACK_KEY_SLACK + 1;
    h->pow_a = malloc(n * sizeof(*h->pow_a));
    h->pow_b = malloc(n * sizeof(*h->pow_b));
    h->pow_c = malloc(n * sizeof(*h->pow_c));
    h->pow_d = malloc(n * sizeof(*h->pow_d));
    if (!h->pow_a || !h->pow_b || !h->pow_c || !h->pow_d) {
        stack_hasher__free(h);
        return -ENOMEM;
    }
    h->pow_a[0] = h->pow_b[0] = h->pow_c[0] = h->pow_d[0] = 1;
    for (size_t i = 1; i < n; i++) {
        h->pow_a[i] = mulmod(h->pow_a[i - 1], h->base_a);
        h->pow_b[i] = mulmod(h->pow_b[i - 1], h->base_b);
        h->pow_c[i] = mulmod(h->pow_c[i - 1], h->base_c);
        h->pow_d[i] = mulmod(h->pow_d[i - 1], h->base_d);
    }
    return 0;
}

void stack_hasher__free(struct stack_hasher *h)
{
    if (!h)
        return;
    free(h->pow_a);
    free(h->pow_b);
    free(h->pow_c);
    free(h->pow_d);
    h->pow_a = h->pow_b = h->pow_c = h->pow_d = NULL;
}

int stack_hasher__new_bases(uint64_t base[STACK_HASHER_BASES])
{
    uint64_t r[STACK_HASHER_BASES];

    if (getrandom(r, sizeof(r), 0) != sizeof(r))
        return errno ? -errno : -EIO;
    /* near enough uniform in [2, P-2]: r has 64 bits, P 61 */
    for (int i = 0; i < STACK_HASHER_BASES; i++)
        base[i] = 2 + r[i] % (STACK_KEY_P - 3);
    return 0;
}

/* Horner's rule four chunks a step, and the last (up to four chunks and
 * the length) in one step: k * C^r + sum of t_j * C^(r-1-j). The same
 * value as one chunk a step (mod P), but one multiplication a step waits
 * for the one before instead of one a chunk: names are hashed at ingest,
 * and that chain was a tenth of the server's CPU. Products are below
 * 2^122, so a sum of six stays below 2^125. */
static void horner_str(const struct stack_hasher *h, struct stack_key *k, const char *s, size_t len)
{
    const uint64_t mark = 1ull << 56, low = mark - 1;
    const uint64_t *c = h->pow_c, *d = h->pow_d;
    uint64_t t[5];
    size_t i = 0, r = 0;

    for (; i + 29 <= len; i += 28) { /* 4 chunks, each read as 8 bytes */
        for (int j = 0; j < 4; j++) {
            memcpy(&t[j], s + i + 7 * j, 8);
            t[j] = (t[j] & low) | mark;
        }
        unsigned __int128 a = (unsigned __int128)k->a * c[4], b = (unsigned __int128)k->b * d[4];
        for (int j = 0; j < 4; j++) {
            a += (unsigned __int128)t[j] * c[3 - j];
            b += (unsigned __int128)t[j] * d[3 - j];
        }
        k->a = stack_key__mod(a);
        k->b = stack_key__mod(b);
    }
    /* At most 28 bytes left: up to four chunks, then the length + 1
     * (< 2^56: never a chunk's value, never 0). */
    for (; i < len; r++) {
        size_t n = len - i < 7 ? len - i : 7;
        uint64_t w = 0;
        if (i + 8 <= len)
            memcpy(&w, s + i, 8);
        else /* the last bytes, without reading past them */
            memcpy(&w, s + i, n);
        t[r] = (w & low) | mark;
        i += n;
    }
    t[r++] = (uint64_t)len + 1;
    unsigned __int128 a = (unsigned __int128)k->a * c[r], b = (unsigned __int128)k->b * d[r];
    for (size_t j = 0; j < r; j++) {
        a += (unsigned __int128)t[j] * c[r - 1 - j];
        b += (unsigned __int128)t[j] * d[r - 1 - j];
    }
    k->a = stack_key__mod(a);
    k->b = stack_key__mod(b);
}

struct stack_key stack_hasher__function(const struct stack_hasher *h, const char *name,
                                        size_t name_len, const char *file, size_t file_len)
{
    struct stack_key k = {0, 0};

    horner_str(h, &k, name, name_len);
    horner_str(h, &k, file, file_len);
    return k;
}

/* x^e mod P, by squaring: for strings longer than the power tables. */
static uint64_t powmod(uint64_t x, uint64_t e)
{
    uint64_t r = 1;

    for (; e; e >>= 1, x = mulmod(x, x))
        if (e & 1)
            r = mulmod(r, x);
    return r;
}

struct stack_strkey stack_hasher__string(const struct stack_hasher *h, const char *s, size_t len)
{
    struct stack_key k = {0, 0};
    size_t m = (len + 6) / 7 + 1; /* its chunks and its length */

    horner_str(h, &k, s, len);
    if (m <= STACK_KEY_MAX_FRAMES)
        return (struct stack_strkey){k.a, k.b, h->pow_c[m], h->pow_d[m]};
    return (struct stack_strkey){k.a, k.b, powmod(h->base_c, m), powmod(h->base_d, m)};
}

struct stack_part stack_hasher__part(const struct stack_hasher *h, const struct stack_key *keys,
                                     size_t n)
{
    struct stack_part p = {0, 0, (uint32_t)n};

    for (size_t i = 0; i < n && i <= STACK_KEY_MAX_FRAMES; i++) {
        /* + 1: a key can be 0, a frame must still count */
        p.a = stack_key__mod((unsigned __int128)(keys[i].a + 1) * h->pow_a[i] + p.a);
        p.b = stack_key__mod((unsigned __int128)(keys[i].b + 1) * h->pow_b[i] + p.b);
    }
    return p;
}

struct stack_key stack_hasher__stack(const struct stack_hasher *h, const struct stack_key *keys,
                                     size_t n)
{
    struct stack_part p = stack_hasher__part(h, keys, n);
    return (struct stack_key){p.a, p.b};
}

/* --- the table --- */

struct slot {
    uint64_t a, b; /* the key; an empty slot has id 0 */
    int64_t id;
};

struct stack_keymap {
    struct slot *slots;
    size_t mask, n, max;
};

static size_t slot_of(const struct stack_keymap *m, struct stack_key k)
{
    /* a and b are already uniform hashes: their bits need no mixing */
    return (k.a ^ (k.b << 17)) & m->mask;
}

struct stack_keymap *stack_keymap__new(size_t max)
{
    struct stack_keymap *m = calloc(1, sizeof(*m));

    if (!m)
        return NULL;
    m->mask = 1023;
    m->max = max;
    m->slots = calloc(m->mask + 1, sizeof(*m->slots));
    if (!m->slots) {
        free(m);
        return NULL;
    }
    return m;
}

void stack_keymap__free(struct stack_keymap *m)
{
    if (!m)
        return;
    free(m->slots);
    free(m);
}

void stack_keymap__clear(struct stack_keymap *m)
{
    memset(m->slots, 0, (m->mask + 1) * sizeof(*m->slots));
    m->n = 0;
}

void stack_keymap__prefetch(const struct stack_keymap *m, struct stack_key key)
{
    __builtin_prefetch(&m->slots[slot_of(m, key)]);
}

int64_t stack_keymap__get(const struct stack_keymap *m, struct stack_key key)
{
    for (size_t i = slot_of(m, key);; i = (i + 1) & m->mask) {
        const struct slot *s = &m->slots[i];
        if (!s->id)
            return 0;
        if (s->a == key.a && s->b == key.b)
            return s->id;
    }
}

static void place(struct slot *slots, size_t mask, struct slot s, size_t i)
{
    while (slots[i].id && !(slots[i].a == s.a && slots[i].b == s.b))
        i = (i + 1) & mask;
    slots[i] = s;
}

int stack_keymap__put(struct stack_keymap *m, struct stack_key key, int64_t id)
{
    if (m->n >= m->max)
        stack_keymap__clear(m); /* a cache: start over rather than grow without end */
    /* Load under 1/2: probes stay short. */
    if ((m->n + 1) * 2 > m->mask + 1) {
        size_t nmask = m->mask * 2 + 1;
        struct slot *ns = calloc(nmask + 1, sizeof(*ns));
        if (!ns)
            return -ENOMEM;
        for (size_t i = 0; i <= m->mask; i++) {
            if (m->slots[i].id) {
                struct stack_key k = {m->slots[i].a, m->slots[i].b};
                place(ns, nmask, m->slots[i], (k.a ^ (k.b << 17)) & nmask);
            }
        }
        free(m->slots);
        m->slots = ns;
        m->mask = nmask;
    }
    size_t i = slot_of(m, key);
    while (m->slots[i].id && !(m->slots[i].a == key.a && m->slots[i].b == key.b))
        i = (i + 1) & m->mask;
    if (!m->slots[i].id)
        m->n++;
    m->slots[i] = (struct slot){key.a, key.b, id};
    return 0;
}

void stack_keymap__del(struct stack_keymap *m, struct stack_key key)
{
    size_t i = slot_of(m, key);

    while (m->slots[i].id && !(m->slots[i].a == key.a && m->slots[i].b == key.b))
        i = (i + 1) & m->mask;
    if (!m->slots[i].id)
        return;
    /* Backward shift: the entries after it in its run move up where their
     * own slot allows, so no probe ever stops at a hole it should pass. */
    for (size_t j = (i + 1) & m->mask; m->slots[j].id; j = (j + 1) & m->mask) {
        struct stack_key k = {m->slots[j].a, m->slots[j].b};
        size_t home = slot_of(m, k);
        /* j may move to i when home is not in (i, j] (cyclically) */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = (struct slot){0, 0, 0};
    m->n--;
}

size_t stack_keymap__len(const struct stack_keymap *m)
{
    return m->n;
}

void stack_key__encode(struct stack_key k, unsigned char out[16])
{
    for (int i = 0; i < 8; i++) {
        out[i] = k.a >> (8 * i);
        out[8 + i] = k.b >> (8 * i);
    }
}

struct stack_key stack_key__decode(const unsigned char in[16])
{
    struct stack_key k = {0, 0};

    for (int i = 0; i < 8; i++) {
        k.a |= (uint64_t)in[i] << (8 * i);
        k.b |= (uint64_t)in[8 + i] << (8 * i);
    }
    return k;
}

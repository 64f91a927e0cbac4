/* ClickHouse's placement of rows on shards, in C (ch_shard.h). The hash is
 * CityHash v1.0.2 (Google, MIT licence) as ClickHouse's cityHash64 uses
 * it; tests/unit/test_ch_shard.c checks it against values ClickHouse
 * 18.16 computed. */
#include "ch_shard.h"

#include <errno.h>
#include <string.h>

static const uint64_t k0 = 0xc3a5c85c97cb3127ull;
static const uint64_t k1 = 0xb492b66fbe98f273ull;
static const uint64_t k2 = 0x9ae16a3b2f90404full;
static const uint64_t k3 = 0xc949d7c7509e6557ull;

static uint64_t fetch64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v; /* little-endian hosts, as the store's RowBinary */
}

static uint64_t fetch32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t rot(uint64_t v, int s)
{
    return s == 0 ? v : (v >> s) | (v << (64 - s));
}

static uint64_t shift_mix(uint64_t v)
{
    return v ^ (v >> 47);
}

/* CityHash's Hash128to64 of (lo, hi). */
static uint64_t len16(uint64_t lo, uint64_t hi)
{
    const uint64_t mul = 0x9ddfea08eb382d69ull;
    uint64_t a = (lo ^ hi) * mul;
    a ^= a >> 47;
    uint64_t b = (hi ^ a) * mul;
    b ^= b >> 47;
    return b * mul;
}

static uint64_t len0to16(const uint8_t *s, size_t len)
{
    if (len > 8) {
        uint64_t a = fetch64(s), b = fetch64(s + len - 8);
        return len16(a, rot(b + len, (int)len)) ^ b;
    }
    if (len >= 4) {
        uint64_t a = fetch32(s);
        return len16(len + (a << 3), fetch32(s + len - 4));
    }
    if (len > 0) {
        uint32_t y = (uint32_t)s[0] + ((uint32_t)s[len >> 1] << 8);
        uint32_t z = (uint32_t)len + ((uint32_t)s[len - 1] << 2);
        return shift_mix(y * k2 ^ z * k3) * k2;
    }
    return k2;
}

static uint64_t len17to32(const uint8_t *s, size_t len)
{
    uint64_t a = fetch64(s) * k1, b = fetch64(s + 8);
    uint64_t c = fetch64(s + len - 8) * k2, d = fetch64(s + len - 16) * k0;
    return len16(rot(a - b, 43) + rot(c, 30) + d, a + rot(b ^ k3, 20) - c + len);
}

static uint64_t len33to64(const uint8_t *s, size_t len)
{
    uint64_t z = fetch64(s + 24);
    uint64_t a = fetch64(s) + (len + fetch64(s + len - 16)) * k0;
    uint64_t b = rot(a + z, 52), c = rot(a, 37);
    a += fetch64(s + 8);
    c += rot(a, 7);
    a += fetch64(s + 16);
    uint64_t vf = a + z, vs = b + rot(a, 31) + c;
    a = fetch64(s + 16) + fetch64(s + len - 32);
    z = fetch64(s + len - 8);
    b = rot(a + z, 52);
    c = rot(a, 37);
    a += fetch64(s + len - 24);
    c += rot(a, 7);
    a += fetch64(s + len - 16);
    uint64_t wf = a + z, ws = b + rot(a, 31) + c;
    uint64_t r = shift_mix((vf + ws) * k2 + (wf + vs) * k0);
    return shift_mix(r * k0 + vs) * k2;
}

struct pair {
    uint64_t first, second;
};

static struct pair weak32(const uint8_t *s, uint64_t a, uint64_t b)
{
    uint64_t w = fetch64(s), x = fetch64(s + 8), y = fetch64(s + 16), z = fetch64(s + 24);
    a += w;
    b = rot(b + a + z, 21);
    uint64_t c = a;
    a += x;
    a += y;
    b += rot(a, 44);
    return (struct pair){a + z, b + c};
}

uint64_t ch_shard__city64(const void *data, size_t len)
{
    const uint8_t *s = data;

    if (len <= 16)
        return len0to16(s, len);
    if (len <= 32)
        return len17to32(s, len);
    if (len <= 64)
        return len33to64(s, len);
    /* Longer: the end first, then 64-byte chunks, 56 bytes of state. */
    uint64_t x = fetch64(s), y = fetch64(s + len - 16) ^ k1, z = fetch64(s + len - 56) ^ k0;
    struct pair v = weak32(s + len - 64, len, y);
    struct pair w = weak32(s + len - 32, len * k1, k0);
    z += shift_mix(v.second) * k1;
    x = rot(z + x, 39) * k1;
    y = rot(y, 33) * k1;
    len = (len - 1) & ~(size_t)63;
    do {
        x = rot(x + y + v.first + fetch64(s + 16), 37) * k1;
        y = rot(y + v.second + fetch64(s + 48), 42) * k1;
        x ^= w.second;
        y ^= v.first;
        z = rot(z ^ w.first, 33);
        v = weak32(s, v.second * k1, x + w.first);
        w = weak32(s + 32, z + w.second, y);
        uint64_t t = z;
        z = x;
        x = t;
        s += 64;
        len -= 64;
    } while (len);
    return len16(len16(v.first, w.first) + shift_mix(y) * k1 + z, len16(v.second, w.second) + x);
}

uint64_t ch_shard__int(uint64_t x)
{
    /* ClickHouse's intHash64 (a MurmurHash3 finaliser) of x with a salt. */
    x ^= 0x4cf2d2baae6da887ull;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

uint64_t ch_shard__combine(uint64_t acc, uint64_t h)
{
    return len16(acc, h);
}

/* A cursor over rows; every read checks the bytes are there. */
struct cur {
    const uint8_t *p, *end;
};

static int skip(struct cur *c, size_t n)
{
    if ((size_t)(c->end - c->p) < n)
        return -EINVAL;
    c->p += n;
    return 0;
}

static int u64(struct cur *c, uint64_t *v)
{
    if ((size_t)(c->end - c->p) < 8)
        return -EINVAL;
    memcpy(v, c->p, 8);
    c->p += 8;
    return 0;
}

static int varint(struct cur *c, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->p >= c->end)
            return -EINVAL;
        uint8_t b = *c->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -EINVAL;
}

/* A String: its bytes in *s, *n. */
static int str(struct cur *c, const uint8_t **s, uint64_t *n)
{
    if (varint(c, n))
        return -EINVAL;
    *s = c->p;
    return *n > (uint64_t)(c->end - c->p) ? -EINVAL : skip(c, (size_t)*n);
}

/* An Array of 8-byte values. */
static int arr8(struct cur *c)
{
    uint64_t n;
    if (varint(c, &n) || n > (uint64_t)(c->end - c->p) / 8)
        return -EINVAL;
    return skip(c, (size_t)n * 8);
}

/* Reads one row of key's table at c: its sharding key's value in *v. */
static int row(enum ch_shard_key key, struct cur *c, uint64_t *v)
{
    const uint8_t *app, *host, *s;
    uint64_t alen, hlen, n, t, pid;

    switch (key) {
    case CH_KEY_FUNCTIONS:
    case CH_KEY_STACKS:
        if (skip(c, 8) || u64(c, v) || skip(c, 8))
            return -EINVAL;
        if (key == CH_KEY_FUNCTIONS)
            return str(c, &s, &n) || str(c, &s, &n) ? -EINVAL : 0;
        return arr8(c) || arr8(c) ? -EINVAL : 0;
    case CH_KEY_PSAMPLES:
        if (str(c, &app, &alen) || u64(c, &t) || str(c, &host, &hlen) || u64(c, &pid) ||
            str(c, &s, &n) || str(c, &s, &n))
            return -EINVAL;
        for (int i = 0; i < 5; i++)
            if (arr8(c))
                return -EINVAL;
        *v = ch_shard__city64(app, (size_t)alen);
        *v = ch_shard__combine(*v, ch_shard__city64(host, (size_t)hlen));
        *v = ch_shard__combine(*v, ch_shard__int(pid));
        *v = ch_shard__combine(*v, ch_shard__int(t));
        return 0;
    case CH_KEY_PROFILES:
        if (str(c, &app, &alen) || skip(c, 8) || str(c, &s, &n) || skip(c, 8) || str(c, &s, &n) ||
            skip(c, 6 * 8))
            return -EINVAL;
        *v = ch_shard__city64(app, (size_t)alen);
        return 0;
    }
    return -EINVAL;
}

int ch_shard__split(enum ch_shard_key key, const void *rows, size_t len, const uint32_t *slot,
                    size_t nslots, struct buf *out, size_t nshards)
{
    struct cur c = {rows, rows ? (const uint8_t *)rows + len : NULL};

    /* Parsed whole first: a batch goes to every shard or to none. */
    while (c.p < c.end) {
        uint64_t v;
        if (row(key, &c, &v) || ch_shard__of(v, slot, nslots) >= nshards)
            return -EINVAL;
    }
    c.p = rows;
    while (c.p < c.end) {
        const uint8_t *start = c.p;
        uint64_t v;
        int err;
        (void)row(key, &c, &v);
        if ((err = buf__append(&out[ch_shard__of(v, slot, nslots)], start, (size_t)(c.p - start))))
            return err;
    }
    return 0;
}

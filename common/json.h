/* A small JSON writer into a capped buffer. Callers emit the punctuation
 * they need; json__str escapes a string (UTF-8 passes through, control
 * characters and quotes are escaped, invalid bytes become U+FFFD). */
#ifndef CODEXRAY_COMMON_JSON_H
#define CODEXRAY_COMMON_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"

/* Each returns 0 or buf__append's error; once one fails the buffer is left
 * as it was cut, and later calls fail the same way. */
int json__raw(struct buf *b, const char *s);
int json__str(struct buf *b, const char *s);
int json__strn(struct buf *b, const char *s, size_t n);
int json__i64(struct buf *b, int64_t v);
int json__f64(struct buf *b, double v);

/* The room json__put_i64 needs at p: it stores 8 bytes at a time, so it
 * may write past the number's end (at most this many bytes from p). */
#define JSON_I64_ROOM 24

/* v < 100,000,000 as its eight decimal digits (leading zeros kept), as
 * byte values 0-9, the most significant digit in the lowest byte: the
 * number split in halves, quarters, then digits, each step one multiply
 * on all lanes at once (SWAR), no chain of divisions. The reciprocals
 * are exact for the lanes' ranges: 10486 / 2^20 for n / 100 with
 * n < 10,000, 103 / 2^10 for n / 10 with n < 100. */
static inline __attribute__((always_inline)) uint64_t json__digits8(uint32_t v)
{
    uint64_t x = (v / 10000) | (uint64_t)(v % 10000) << 32;
    uint64_t h = (x * 10486) >> 20 & 0x0000007f0000007full;

    x = h | (x - h * 100) << 16;
    h = (x * 103) >> 10 & 0x000f000f000f000full;
    return h | (x - h * 10) << 8;
}

/* Stores the 8 ASCII bytes of digits (json__digits8's form), shifted
 * right by skip digits, at p. */
static inline __attribute__((always_inline)) void json__store8(char *p, uint64_t digits, int skip)
{
    uint64_t x = (digits + 0x3030303030303030ull) >> (8 * skip);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    memcpy(p, &x, 8);
}

/* 0 < v < 100,000,000 at p without leading zeros (8 bytes stored);
 * returns its length. */
static inline __attribute__((always_inline)) int json__put_head(char *p, uint32_t v)
{
    uint64_t d = json__digits8(v);
    int lead = __builtin_ctzll(d) >> 3; /* the zero digits before the first */

    json__store8(p, d, lead);
    return 8 - lead;
}

/* Writes v in decimal (as printf's "%lld") at p, which has JSON_I64_ROOM
 * bytes of room; returns its length (at most 20). Not NUL-terminated. For
 * writers of many numbers (a flame graph's million nodes, four numbers
 * each), inline: no printf, no copy. */
static inline __attribute__((always_inline)) int json__put_i64(char *p, int64_t v)
{
    uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
    char *s = p;

    if (v < 0)
        *s++ = '-';
    if (u < 10) {
        *s = (char)('0' + u);
        return (int)(s - p) + 1;
    }
    if (u < 100000000)
        return (int)(s - p) + json__put_head(s, (uint32_t)u);
    uint64_t hi = u / 100000000;
    if (hi < 100000000) {
        s += json__put_head(s, (uint32_t)hi);
    } else {
        s += json__put_head(s, (uint32_t)(hi / 100000000));
        json__store8(s, json__digits8((uint32_t)(hi % 100000000)), 0);
        s += 8;
    }
    json__store8(s, json__digits8((uint32_t)(u % 100000000)), 0);
    return (int)(s - p) + 8;
}

#endif

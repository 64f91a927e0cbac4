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

/* The most json__put_i64 writes: a sign and 19 digits. */
#define JSON_I64_ROOM 20

/* v < 100 as two digits at p. */
static inline __attribute__((always_inline)) void json__put2(char *p, uint32_t v)
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324"
                                "25262728293031323334353637383940414243444546474849"
                                "50515253545556575859606162636465666768697071727374"
                                "75767778798081828384858687888990919293949596979899";
    memcpy(p, pairs + 2 * v, 2);
}

/* v < 100,000,000 as eight digits, leading zeros kept: two halves, two
 * digits each from a table, the divisions independent of each other (no
 * chain of one division per digit pair). */
static inline __attribute__((always_inline)) void json__put8(char *p, uint32_t v)
{
    uint32_t a = v / 10000, b = v % 10000;

    json__put2(p, a / 100);
    json__put2(p + 2, a % 100);
    json__put2(p + 4, b / 100);
    json__put2(p + 6, b % 100);
}

/* v < 10,000 without leading zeros; returns its length. */
static inline __attribute__((always_inline)) int json__put4(char *p, uint32_t v)
{
    if (v >= 1000) {
        json__put2(p, v / 100);
        json__put2(p + 2, v % 100);
        return 4;
    }
    if (v >= 100) {
        *p = (char)('0' + v / 100);
        json__put2(p + 1, v % 100);
        return 3;
    }
    if (v >= 10) {
        json__put2(p, v);
        return 2;
    }
    *p = (char)('0' + v);
    return 1;
}

/* v < 100,000,000 without leading zeros; returns its length. */
static inline __attribute__((always_inline)) int json__put_head(char *p, uint32_t v)
{
    if (v < 10000)
        return json__put4(p, v);
    int n = json__put4(p, v / 10000);
    v %= 10000;
    json__put2(p + n, v / 100);
    json__put2(p + n + 2, v % 100);
    return n + 4;
}

/* Writes v in decimal (as printf's "%lld") at p, which has JSON_I64_ROOM
 * bytes of room; returns its length. Not NUL-terminated. For writers of
 * many numbers (a flame graph's 400,000 nodes, four numbers each):
 * inline, no printf, no copy. */
static inline __attribute__((always_inline)) int json__put_i64(char *p, int64_t v)
{
    uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
    char *s = p;

    if (v < 0)
        *s++ = '-';
    if (u < 100000000)
        return (int)(s - p) + json__put_head(s, (uint32_t)u);
    uint64_t hi = u / 100000000;
    if (hi < 100000000) {
        s += json__put_head(s, (uint32_t)hi);
    } else {
        s += json__put_head(s, (uint32_t)(hi / 100000000));
        json__put8(s, (uint32_t)(hi % 100000000));
        s += 8;
    }
    json__put8(s, (uint32_t)(u % 100000000));
    return (int)(s - p) + 8;
}

#endif

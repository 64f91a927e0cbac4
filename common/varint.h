/* Protobuf varints (7 bits a byte, low bits first, the top bit saying
 * "more"), the one decoder and encoder of the tree: pprof bodies, the
 * SQLite store's blobs and Go's pc-value tables all use them. Header-only
 * so the decoders' hot loops inline it. */
#ifndef CODEXRAY_COMMON_VARINT_H
#define CODEXRAY_COMMON_VARINT_H

#include <stdbool.h>
#include <stdint.h>

/* The longest varint: 64 bits at 7 a byte. */
#define VARINT_MAX_BYTES 10

/* Reads a varint at *pp, before end: true with *out set and *pp past it;
 * false, with *pp and *out unchanged, when it is cut short (end reached
 * with the top bit still set) or overlong (more than VARINT_MAX_BYTES).
 * Bits past 64 in the tenth byte are dropped, as protobuf does. The one-
 * and two-byte cases first: most varints (ids, indices, tags) are small. */
static inline __attribute__((always_inline)) bool varint__read(const uint8_t **pp,
                                                               const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;

    if (p < end && *p < 0x80) {
        *out = *p;
        *pp = p + 1;
        return true;
    }
    if (end - p >= 2 && p[1] < 0x80) {
        *out = (p[0] & 0x7f) | (uint64_t)p[1] << 7;
        *pp = p + 2;
        return true;
    }
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64 && p < end; shift += 7) {
        uint8_t c = *p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            *pp = p;
            return true;
        }
    }
    return false;
}

/* varint__read for chains of reads (p = varint__get(p, end, &v)): returns
 * the byte after the varint, or NULL when it is cut short or overlong. */
static inline const uint8_t *varint__get(const uint8_t *p, const uint8_t *end, uint64_t *out)
{
    return varint__read(&p, end, out) ? p : NULL;
}

/* Writes v as a varint at p (VARINT_MAX_BYTES of room); returns the byte
 * after it. Cannot fail. */
static inline uint8_t *varint__write(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (v & 0x7f) | 0x80;
        v >>= 7;
    }
    *p++ = v;
    return p;
}

#endif

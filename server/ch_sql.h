/* ClickHouse's text, both ways: the ONE function through which every value
 * from a request reaches SQL (ch_sql__quote), and a reader of the
 * TabSeparated answers the store asks for. ClickHouse 18.16 has no
 * server-side query parameters, so values go in as quoted literals; numbers
 * are printed by the store with %lld and need no quoting.
 */
#ifndef CODEXRAY_SERVER_CH_SQL_H
#define CODEXRAY_SERVER_CH_SQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"

/* Appends s (len bytes, any bytes at all, NULs too) to b as a ClickHouse
 * string literal: in single quotes, backslash and quote escaped with a
 * backslash, control bytes (below 0x20, and 0x7f) as \xHH; other bytes as
 * they are (ClickHouse strings are bytes). Returns 0, -E2BIG when b's cap
 * is reached or -ENOMEM (b is then as it was). */
int ch_sql__quote(struct buf *b, const char *s, size_t len) __attribute__((warn_unused_result));

/* Appends printf-style text to b. Returns 0 or -E2BIG. */
int ch_sql__appendf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), warn_unused_result));

/* Is name a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 64 bytes)?
 * Database and cluster names are checked with it, never quoted. */
bool ch_sql__identifier(const char *name);

/* --- RowBinary rows, how the store inserts: values go as bytes, never
 * through SQL text. Integers little-endian, 8 bytes for (U)Int64; a String
 * or an Array's length as a LEB128 varint before its bytes or elements.
 * Each returns 0, -E2BIG at b's cap or -ENOMEM. --- */
int ch_rb__u64(struct buf *b, uint64_t v) __attribute__((warn_unused_result));
int ch_rb__varint(struct buf *b, uint64_t v) __attribute__((warn_unused_result));
int ch_rb__str(struct buf *b, const char *s, size_t len) __attribute__((warn_unused_result));

/* --- TabSeparated answers: rows end in \n, fields split by \t, and \\,
 * \t, \n, \0, \b, \f, \r, \', \" escaped within a field --- */
struct ch_tsv {
    char *p, *end; /* what is left to read; the reader unescapes in place */
};

/* Starts reading text (len bytes), which the reader changes in place. */
void ch_tsv__init(struct ch_tsv *t, char *text, size_t len);

/* The next row's fields: up to max of them, each unescaped and NUL-ended
 * in place. Returns the number of fields (0 at the end), or -EBADMSG for a
 * row not ended by \n, a bad escape or more than max fields. */
int ch_tsv__row(struct ch_tsv *t, char **fields, int max);

/* A field as an integer: all of it must be one, in range. Returns 0 or -EBADMSG. */
int ch_tsv__i64(const char *s, int64_t *out);
int ch_tsv__u64(const char *s, uint64_t *out);

/* An Array(UInt64) field ("[1,2,3]", "[]") into out (up to max). Returns
 * the count or -EBADMSG (also past max). */
int ch_tsv__u64_array(const char *s, uint64_t *out, int max);

/* --- RowBinary answers: the insert's encoding read back. Numbers parse
 * at no cost, so merges ask for it where answers are large. Each reader
 * returns 0, or -EBADMSG when the value runs past the end (r unchanged). --- */
struct ch_rbr {
    const unsigned char *p, *end; /* what is left to read */
};

void ch_rbr__init(struct ch_rbr *r, const void *data, size_t len);
/* Is everything read? */
bool ch_rbr__done(const struct ch_rbr *r);
int ch_rbr__u8(struct ch_rbr *r, uint8_t *out);
int ch_rbr__u64(struct ch_rbr *r, uint64_t *out);
int ch_rbr__i64(struct ch_rbr *r, int64_t *out);
/* An Array(UInt64): *n elements (at most max, else -EBADMSG) at *elems, in
 * the answer (unaligned, little-endian: read them with ch_rbr__le64). */
int ch_rbr__u64_array(struct ch_rbr *r, const unsigned char **elems, uint64_t *n, uint64_t max);
/* The little-endian 8 bytes at p. */
uint64_t ch_rbr__le64(const unsigned char *p);

#endif

/* The batch upload's wire format: many profiles in one request
 * (POST /api/v1/profiles/batch), so an agent sends a window of hundreds of
 * processes in one HTTP exchange instead of one each. The agent writes it
 * (agent/ship.c), the server reads it (server/http_batch.c); the format
 * lives here once.
 *
 * Body:
 *
 *   codexray-batch 1\n
 *   then, per profile:
 *   QUERY\n        the query string /api/v1/profiles takes (service=...&pid=...),
 *                  values percent-encoded, at most BATCH_QUERY_MAX bytes
 *   LENGTH\n       the profile's size in bytes, decimal
 *   BYTES          the profile as /api/v1/profiles takes it (pprof, gzip or zstd)
 *
 * Answer (200 once the framing is read whole; 400 and nothing stored when
 * it is not): {"stored":N,"statuses":[S,...],"errors":[null|"why",...]},
 * one status per profile in order, each what POST /api/v1/profiles would
 * have answered for it alone. After a 5xx the rest are not tried and say
 * 503: what was stored before stays stored, so a client resends only the
 * profiles not answered 2xx or 4xx. */
#ifndef CODEXRAY_COMMON_BATCH_H
#define CODEXRAY_COMMON_BATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#define BATCH_MAGIC "codexray-batch 1\n"
#define BATCH_QUERY_MAX 8192
/* Profiles in one batch: the server refuses more, an agent sends fewer. */
#define BATCH_MAX_PROFILES 10000

/* One profile of a batch, pointing into the body. */
struct batch_entry {
    const char *query;
    size_t query_len;
    const void *data;
    size_t len;
};

/* Starts a batch in b (empty). Returns 0 or buf__append's error. */
int batch__begin(struct buf *b);

/* Appends one profile: query (no newline in it, at most BATCH_QUERY_MAX)
 * and its bytes. Returns 0, -EINVAL for a bad query, or buf__append's
 * error (b is then as it was). */
int batch__append(struct buf *b, const char *query, const void *data, size_t len);

/* Reading a batch: a cursor over the body. */
struct batch_reader {
    const char *p, *end;
    size_t n; /* entries read so far */
};

/* Starts reading body; false (why filled) when it is not a batch. */
bool batch__open(struct batch_reader *r, const void *body, size_t len, char *why, size_t whylen);

/* The next entry: 1 with e filled, 0 at the end, -1 for a malformed or
 * cut batch or one of more than BATCH_MAX_PROFILES entries (why filled).
 * Every length is checked against what is left: a hostile batch cannot
 * read past the body. */
int batch__next(struct batch_reader *r, struct batch_entry *e, char *why, size_t whylen);

/* Where to cut the next n entries after r's position into two halves of
 * about equal bytes (a profile's decoding time follows its size, and a
 * node's profiles differ in size by 20x or more): the count of entries
 * whose bytes first reach half of the n's, within 1..n-1 for n >= 2 (n / 2
 * when the entries cannot be read). r is not moved. */
size_t batch__halve(const struct batch_reader *r, size_t n);

/* The value of key in e's query, percent-decoded ('+' is a space, as in
 * any query string) into out. Returns 1 found, 0 absent, -1 when the value
 * is malformed (a bad or NUL escape) or does not fit out. The first of
 * repeated keys counts. */
int batch__arg(const struct batch_entry *e, const char *key, char *out, size_t outlen);

/* Reads the statuses of an answer into st[0..n). Returns 0 when it holds
 * exactly n, -1 otherwise (an answer of another form, cut or of another
 * batch). */
int batch__statuses(const char *answer, size_t len, int *st, size_t n);

/* The reason given for profile i in an answer's errors, its JSON escapes
 * left as they are, cut to fit out. Returns 0, or -1 when the answer has
 * none for i (null, or another form). */
int batch__error(const char *answer, size_t len, size_t i, char *out, size_t outlen);

#endif

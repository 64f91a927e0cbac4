/* The shipper's HTTP exchanges with codexray-server (libcurl): many
 * profiles in one POST /api/v1/profiles/batch (common/batch.h), the whole
 * body one zstd frame (Content-Encoding: zstd), or one POST
 * /api/v1/profiles each for a server older than the batch endpoint.
 * Used by the upload thread only (ship.c). */
#ifndef CODEXRAY_AGENT_SHIP_HTTP_H
#define CODEXRAY_AGENT_SHIP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"

/* One profile to send, in its spool form (spool.h); name is the spool
 * file's name (legacy files keep their identity there) or NULL. status is
 * filled: 202 stored, 400 or 413 refused for good (why says why), anything
 * else (-1 no answer, 5xx, 401...) not sent, to be tried again later. */
struct ship_item {
    const char *name;
    const struct buf *file;
    long status;
    char why[256];
};

/* Whether a status settles an item: stored (202), or refused for good
 * (400, 413: sending it again cannot succeed). Any other is tried again. */
static inline bool ship_item__settled(long status)
{
    return status == 202 || status == 400 || status == 413;
}

struct ship_http;

/* endpoint: the base URL without a trailing slash; api_key NULL for none.
 * NULL when out of memory or libcurl cannot start. */
struct ship_http *ship_http__new(const char *endpoint, const char *api_key);

/* Sends items [0, n) in order, in batches of at most BATCH_BYTES and
 * BATCH_PROFILES, and fills each one's status. Stops at the first that is
 * not sent (it and those after it keep a status that is neither 2xx nor
 * 400/413; *why says what failed). A server without the batch endpoint
 * (404, 405) is sent one request a profile, and asked again an hour later. A
 * batch refused as too large (413) is sent again in halves. */
void ship_http__send(struct ship_http *sh, struct ship_item *items, size_t n, char *why,
                     size_t whylen);

/* The most bytes and profiles the shipper puts in one request: the server's
 * default --max-body is 16 MiB, and it stores a batch's profiles one after
 * another (about 30 a second with ClickHouse on 2 cores). */
#define BATCH_BYTES (4u << 20)
#define BATCH_PROFILES 1000

/* Requests made since the start, and (*bytes) their bodies' bytes as
 * sent, for the log. */
uint64_t ship_http__requests(const struct ship_http *sh, uint64_t *bytes);

void ship_http__free(struct ship_http *sh);

#endif

/* The HTTP front: libmicrohttpd, routes, limits, auth, metrics. */
#ifndef CODEXRAY_SERVER_HTTP_H
#define CODEXRAY_SERVER_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "ingest.h"
#include "store.h"

struct http_opts {
    const char *listen;       /* "ADDR:PORT", "[v6]:PORT" */
    const char *api_key;      /* ingest's; NULL = no auth */
    const char *read_api_key; /* read APIs' and /metrics'; NULL = open */
    size_t max_body;          /* compressed request body */
    struct ingest_limits limits;
    unsigned threads;
    unsigned ingest_concurrency; /* bodies decoded at once; the rest wait */
    unsigned per_client;         /* connections one client address may hold */
    struct dbgsrv *debuginfod;   /* /debuginfod/ (debuginfod.h); NULL: not served */
};

struct http;

/* Starts serving. NULL with err filled (bad address, port taken). */
struct http *http__start(const struct http_opts *opts, struct store *st, char *err, size_t errlen);
/* The port it listens on: the one asked for, or the one the kernel chose
 * for port 0 (tests). 0 when it cannot tell; h may be NULL. */
uint16_t http__port(const struct http *h);

/* For /metrics: rollups built since start, and complete buckets waiting
 * for theirs. h may be NULL. */
void http__set_rollups(struct http *h, int64_t built_total, int64_t pending);

/* Stops and frees; h may be NULL. */
void http__stop(struct http *h);

#endif

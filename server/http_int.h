/* What http.c (the daemon, routing, ingest, the UI's files) and
 * http_api.c (the read API and /metrics) share; only they include it. */
#ifndef CODEXRAY_SERVER_HTTP_INT_H
#define CODEXRAY_SERVER_HTTP_INT_H

#include <microhttpd.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "http.h"

/* Why a request was refused, for codexray_requests_rejected_total. */
enum reject {
    REJ_BAD_REQUEST,
    REJ_UNAUTHORIZED,
    REJ_TOO_LARGE,
    REJ_NOT_FOUND,
    REJ_INTERNAL,
    REJ__COUNT
};

struct metrics {
    uint64_t profiles, bytes, rejects[REJ__COUNT];
    uint64_t queries, query_ns;
    int64_t rollups_built, rollups_pending;
};

struct http {
    struct http_opts opts;
    struct store *st;
    struct MHD_Daemon *d;
    struct metrics m;   /* updated with __atomic builtins */
    sem_t ingest_slots; /* opts.ingest_concurrency: bodies decoded at once */
};

/* --- http.c --- */

/* Adds v to the counter c (atomically: handlers run on several threads). */
void http_count(uint64_t *c, uint64_t v);
/* Queues len bytes of data with status and Content-Type type; owned: the
 * response frees data, else it copies it. */
enum MHD_Result http_respond(struct MHD_Connection *c, unsigned status, const char *type,
                             void *data, size_t len, bool owned);
/* Answers with {"error": msg}, counted by its reject reason. */
enum MHD_Result http_respond_error(struct http *h, struct MHD_Connection *c, unsigned status,
                                   const char *msg);
/* Answers with b's bytes, which the response takes over (b is left empty). */
enum MHD_Result http_respond_buf(struct MHD_Connection *c, unsigned status, const char *type,
                                 struct buf *b);
/* The query parameter key, or NULL. */
const char *http_arg(struct MHD_Connection *c, const char *key);
/* A pid parameter: 0 when s is NULL, -1 when not a process id. */
int http_parse_pid(const char *s, int64_t *pid);

/* --- http_api.c: the handlers of GET /api/v1/... and /metrics --- */

enum MHD_Result http_api__applications(struct http *h, struct MHD_Connection *c);
/* GET /api/v1/labels: what the UI's filters offer. */
enum MHD_Result http_api__labels(struct http *h, struct MHD_Connection *c);
enum MHD_Result http_api__profile(struct http *h, struct MHD_Connection *c);
enum MHD_Result http_api__timeline(struct http *h, struct MHD_Connection *c);
enum MHD_Result http_api__metrics(struct http *h, struct MHD_Connection *c);

#endif

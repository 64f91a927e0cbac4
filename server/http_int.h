/* What http.c (the daemon, routing, ingest, the UI's files), http_api.c
 * (the read API and /metrics), http_batch.c (many profiles in one
 * upload), http_pyroscope.c (Pyroscope's push API) and http_connect.c
 * (Pyroscope's querier API) share; only they include it. */
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
    uint64_t batches_split; /* batches decoded on two threads (http_batch.c) */
    int64_t rollups_built, rollups_pending;
};

struct http {
    struct http_opts opts;
    struct store *st;
    struct MHD_Daemon *d;
    struct metrics m;       /* updated with __atomic builtins */
    sem_t ingest_slots;     /* opts.ingest_concurrency: bodies decoded at once */
    int ingesting;          /* uploads holding or waiting for a slot (__atomic) */
    struct pyro_card *card; /* the other labels' distinct values (pyroscope.h) */
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
/* Counts a refusal with status in codexray_requests_rejected_total, by its
 * reason (http_respond_error does it for the answers it writes). */
void http_count_reject(struct http *h, unsigned status);

/* The answer when no ingest slot came free. */
#define HTTP_BUSY "busy: too many uploads at once, try again"
/* The room for why an upload was refused (ingest__profile's msg). */
#define HTTP_MSG_MAX 512
/* Takes one of the ingest slots (opts.ingest_concurrency), waiting up to
 * 30 s: false when none came free (answer 503, the client retries). A
 * slot taken is given back with http_slot_put. */
bool http_slot_take(struct http *h);
void http_slot_put(struct http *h);
/* For an upload already holding a slot: takes a second one, given back
 * with http_slot_put, only when one is free and no other upload holds or
 * waits for one (a batch's second half decoded beside its first would
 * otherwise only take a core from another upload). */
bool http_slot_spare(struct http *h);
/* One profile ingested as POST /api/v1/profiles ingests it, the caller
 * holding a slot: body (len bytes, borrowed) with identity id, within
 * opts.limits.max_memory. Returns ingest__profile's status (202 stored;
 * 400, 413, 500, 503 with msg saying why). A stored profile and its bytes
 * are counted in /metrics; a refused one is the caller's to count and
 * log. */
int http_ingest_one(struct http *h, const void *body, size_t len, const struct ingest_identity *id,
                    char *msg, size_t msglen);
/* Logs a refused upload of len bytes, what ("" or "profile 3 of a batch,
 * ") before it; service and msg come from the request and are escaped. */
void http_log_refused(const char *what, size_t len, const char *service, int status,
                      const char *msg);

/* Whether the request carries the ingest key (--api-key) as
 * Authorization: Bearer KEY or as basic auth's password (any user name:
 * what Pyroscope's clients and Grafana Alloy send); any request does when
 * there is no key. */
bool http_authorized_basic(struct http *h, struct MHD_Connection *c);

/* --- http_pyroscope.c --- */

/* POST /ingest and /pyroscope/ingest (Pyroscope's push API), its key and
 * size already checked: body (len bytes) read by its format (pprof, a
 * multipart part "profile", or folded lines) and ingested as one profile
 * of CPU under an ingest slot; 200 with an empty body once stored. */
enum MHD_Result http_pyroscope__ingest(struct http *h, struct MHD_Connection *c, const void *body,
                                       size_t len);

/* --- http_connect.c --- */

/* Pyroscope's querier API: POST CONNECT_PREFIX + METHOD. */
#define CONNECT_PREFIX "/querier.v1.QuerierService/"
/* Its requests are a few strings: a larger body is refused. */
#define CONNECT_MAX_BODY (1 << 20)

/* A Connect error: status with {"code": code, "message": msg}, counted by
 * its reject reason. */
enum MHD_Result http_connect__error(struct http *h, struct MHD_Connection *c, unsigned status,
                                    const char *code, const char *msg);
/* POST /querier.v1.QuerierService/METHOD, the read key already checked:
 * body (len bytes, binary protobuf or protojson by Content-Type) answered
 * in the same encoding, or a Connect error (invalid_argument 400,
 * unimplemented 404 for another method, unavailable 503 when the store
 * cannot answer). */
enum MHD_Result http_connect__handle(struct http *h, struct MHD_Connection *c, const char *url,
                                     const void *body, size_t len);

/* --- http_batch.c --- */

/* POST /api/v1/profiles/batch, its key and size already checked: body
 * (len bytes, a batch as common/batch.h writes one, or with
 * Content-Encoding: zstd one zstd stream of it, inflated under the ingest
 * slot within limits.max_decompressed and 10 x limits.max_ratio: 413
 * past them, 400 not zstd; 415 for another coding) read whole first, 400
 * and nothing stored when its framing is bad; then each profile ingested
 * in order under one ingest slot, and 200 with the statuses. */
enum MHD_Result http_batch__ingest(struct http *h, struct MHD_Connection *c, const void *body,
                                   size_t len);

/* --- http_api.c: the handlers of GET /api/v1/... and /metrics --- */

enum MHD_Result http_api__applications(struct http *h, struct MHD_Connection *c);
/* GET /api/v1/labels: what the UI's filters offer. */
enum MHD_Result http_api__labels(struct http *h, struct MHD_Connection *c);
enum MHD_Result http_api__profile(struct http *h, struct MHD_Connection *c);
enum MHD_Result http_api__timeline(struct http *h, struct MHD_Connection *c);
enum MHD_Result http_api__metrics(struct http *h, struct MHD_Connection *c);

#endif

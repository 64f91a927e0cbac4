/* POST /api/v1/profiles/batch: many profiles in one request (the format
 * in common/batch.h), each stored as POST /api/v1/profiles would store it
 * alone, under one ingest slot for the whole batch. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../common/batch.h"
#include "../common/json.h"
#include "../common/log.h"
#include "http_int.h"

/* Refused profiles logged in full per batch; the rest are only counted (one
 * more line, and one for those not tried): a batch of 10,000 bad profiles
 * writes at most 5 lines. */
#define LOG_LINES 3

/* The query keys of the identity, in the order of the pointers in
 * entry_identity; "pid" last. */
#define N_KEYS (2 + STORE_N_IDENTITY + 1)

static const char NOT_TRIED[] = "not tried: an earlier profile of the batch failed";

/* e's identity from its query as the single upload reads its query
 * string, the values decoded into room (roomlen bytes): service, host,
 * every key of store_identity_keys and pid; other keys ignored. room of
 * the query's length + 1 always holds them (a value decodes to no more
 * bytes than its key=value takes). Returns 0, or 400 with msg: a value
 * that is not valid percent-encoding (or a NUL), a pid that is not one. */
static int entry_identity(const struct batch_entry *e, char *room, size_t roomlen,
                          struct ingest_identity *id, char *msg, size_t msglen)
{
    const char *pid = NULL;
    const char **dst[N_KEYS] = {&id->service, &id->host};
    const char *keys[N_KEYS] = {"service", "host"};
    size_t used = 0;

    for (int i = 0; i < STORE_N_IDENTITY; i++) {
        keys[2 + i] = store_identity_keys[i];
        dst[2 + i] = &id->identity[i];
    }
    keys[N_KEYS - 1] = "pid";
    dst[N_KEYS - 1] = &pid;
    *id = (struct ingest_identity){0};
    for (int k = 0; k < N_KEYS; k++) {
        int r = batch__arg(e, keys[k], room + used, roomlen - used);
        if (r < 0) {
            snprintf(msg, msglen, "%s: not a valid percent-encoded value", keys[k]);
            return 400;
        }
        if (r == 1) {
            *dst[k] = room + used;
            used += strlen(room + used) + 1;
        }
    }
    if (http_parse_pid(pid, &id->pid)) {
        snprintf(msg, msglen, "pid: not a process id");
        return 400;
    }
    return 0;
}

/* The profiles of the batch that r has opened, n of them, ingested in
 * order; their statuses and errors written as JSON arrays into sts and
 * errs (*cut when one did not fit). Returns the number stored. The caller
 * holds an ingest slot. */
static size_t ingest_all(struct http *h, struct batch_reader *r, size_t n, struct buf *sts,
                         struct buf *errs, bool *cut)
{
    char room[BATCH_QUERY_MAX + 2], msg[HTTP_MSG_MAX], why[256];
    size_t stored = 0, refused = 0, i;
    struct batch_entry e;
    int status = 0;

    for (i = 0; i < n && status < 500 && batch__next(r, &e, why, sizeof(why)) == 1; i++) {
        struct ingest_identity id;

        if (!(status = entry_identity(&e, room, sizeof(room), &id, msg, sizeof(msg))))
            status = http_ingest_one(h, e.data, e.len, &id, msg, sizeof(msg));
        /* Sized for all, so only out of memory cuts them. */
        if (json__raw(sts, i ? "," : "") || json__i64(sts, status) ||
            json__raw(errs, i ? "," : "") ||
            (status == 202 ? json__raw(errs, "null") : json__str(errs, msg)))
            *cut = true;
        if (status == 202) {
            stored++;
            continue;
        }
        http_count_reject(h, status);
        if (refused++ < LOG_LINES) {
            char what[96];
            snprintf(what, sizeof(what), "profile %zu of a batch of %zu, ", i, n);
            http_log_refused(what, e.len, id.service, status, msg);
        }
    }
    if (refused > LOG_LINES)
        log_warn("ingest: refused %zu more profiles of that batch of %zu (not logged one by one)",
                 refused - LOG_LINES, n);
    if (i < n)
        log_warn("ingest: %zu profiles of that batch of %zu not tried after profile %zu's %d",
                 n - i, n, i - 1, status);
    /* After a 5xx (the store failed or is away) the rest would fail too,
     * each perhaps after the store's timeout: they are not tried, and the
     * client sends them again. */
    for (size_t k = i; k < n; k++) {
        if (json__raw(sts, k ? "," : "") || json__i64(sts, 503) || json__raw(errs, k ? "," : "") ||
            json__str(errs, NOT_TRIED))
            *cut = true;
        http_count_reject(h, 503);
    }
    return stored;
}

enum MHD_Result http_batch__ingest(struct http *h, struct MHD_Connection *c, const void *body,
                                   size_t len)
{
    struct batch_reader r, start;
    struct batch_entry e;
    struct buf sts, errs, out;
    char why[256];
    size_t n = 0, stored = 0;
    bool cut = false;
    int got;

    /* The framing first, whole: a batch cut short or lying about a length
     * is refused before anything of it is stored. */
    if (!batch__open(&r, body, len, why, sizeof(why)))
        return http_respond_error(h, c, 400, why);
    start = r;
    while ((got = batch__next(&r, &e, why, sizeof(why))) == 1)
        n++;
    if (got < 0)
        return http_respond_error(h, c, 400, why);
    /* At most BATCH_MAX_PROFILES statuses of 3 digits, and errors of
     * HTTP_MSG_MAX bytes each escaped to at most 6 (\u00XX): about 31 MB
     * at worst, 16 bytes a profile when all are stored. */
    buf__init(&sts, 16 + n * 4);
    buf__init(&errs, 16 + n * (6 * HTTP_MSG_MAX + 4));
    buf__init(&out, 64 + n * 4 + n * (6 * HTTP_MSG_MAX + 4));
    if (n) {
        /* One slot for the whole batch: it is decoded one profile at a
         * time, each within limits.max_memory, as a single upload is. */
        if (!http_slot_take(h))
            return http_respond_error(h, c, 503, "busy: too many uploads at once, try again");
        stored = ingest_all(h, &start, n, &sts, &errs, &cut);
        http_slot_put(h);
    }
    if (cut || json__raw(&out, "{\"stored\":") || json__i64(&out, (int64_t)stored) ||
        json__raw(&out, ",\"statuses\":[") || (sts.len && buf__append(&out, sts.data, sts.len)) ||
        json__raw(&out, "],\"errors\":[") || (errs.len && buf__append(&out, errs.data, errs.len)) ||
        json__raw(&out, "]}\n")) {
        /* Only when out of memory: what was stored stays stored, and the
         * client, with no statuses to read, sends the batch again. */
        buf__free(&sts);
        buf__free(&errs);
        buf__free(&out);
        return http_respond_error(h, c, 500, "out of memory writing the batch's answer");
    }
    buf__free(&sts);
    buf__free(&errs);
    return http_respond_buf(c, 200, "application/json", &out);
}

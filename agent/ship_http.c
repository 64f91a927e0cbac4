#include "ship_http.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "../common/batch.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "../common/zst.h"
#include "spool.h"

/* A batch is one zstd frame: the profiles of one host repeat each other's
 * names and paths, so 500 of them (529 KB) compress to 16.7 KB in 0.5 ms,
 * where compressing each alone gave 350 KB in 4.1 ms. */
#define BATCH_ZSTD_LEVEL 3

/* How long to wait for an answer: the server stores a batch's profiles one
 * after another before it answers. */
#define TIMEOUT_S 30
#define TIMEOUT_PER_PROFILE_MS 100
/* A server without the batch endpoint is asked again this much later (it
 * may have been upgraded). */
#define REPROBE_NS (3600ull * 1000000000ull)
#define ANSWER_MAX 65536

struct ship_http {
    CURL *c;
    char *endpoint;
    struct curl_slist *hdrs, *batch_hdrs; /* batch_hdrs: with Content-Encoding: zstd */
    struct zst_compressor *zst;
    struct buf body, zbody, answer;
    size_t max_bytes, max_profiles; /* halved on a batch the server found too large */
    uint64_t batch_again_ns;        /* 0, or no batch endpoint until then */
    size_t *at;                     /* a batch's profiles: their item indices */
    uint64_t requests, bytes;       /* made, and their bodies' bytes */
};

static size_t keep_answer(char *p, size_t size, size_t n, void *ud)
{
    struct buf *b = ud;
    size_t len = size * n, room = b->max - b->len;

    /* Only the start of a longer answer is kept; the rest is read on. */
    if (buf__append(b, p, len < room ? len : room)) {
    }
    return len;
}

/* The request headers: the content type, then auth and extra when not
 * NULL. NULL when out of memory. */
static struct curl_slist *headers(const char *auth, const char *extra)
{
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/octet-stream"), *n;

    if (h && auth && !(n = curl_slist_append(h, auth)))
        goto fail;
    if (h && extra && !(n = curl_slist_append(h, extra)))
        goto fail;
    return h;
fail:
    curl_slist_free_all(h);
    return NULL;
}

struct ship_http *ship_http__new(const char *endpoint, const char *api_key)
{
    struct ship_http *sh = calloc(1, sizeof(*sh));
    char auth[1024];

    if (!sh)
        return NULL;
    sh->c = curl_easy_init();
    sh->endpoint = strdup(endpoint);
    sh->at = calloc(BATCH_PROFILES, sizeof(*sh->at));
    sh->zst = zst_compressor__new(BATCH_ZSTD_LEVEL);
    if (api_key)
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", api_key);
    sh->hdrs = headers(api_key ? auth : NULL, NULL);
    sh->batch_hdrs = headers(api_key ? auth : NULL, "Content-Encoding: zstd");
    if (!sh->c || !sh->endpoint || !sh->at || !sh->hdrs || !sh->batch_hdrs || !sh->zst) {
        ship_http__free(sh);
        return NULL;
    }
    /* A batch stops at BATCH_BYTES but always takes its first profile,
     * which may be as large as the spool holds one. */
    buf__init(&sh->body, SPOOL_FILE_MAX + BATCH_QUERY_MAX + 64);
    buf__init(&sh->zbody, ZSTD_COMPRESSBOUND(SPOOL_FILE_MAX + BATCH_QUERY_MAX + 64));
    buf__init(&sh->answer, ANSWER_MAX);
    sh->max_bytes = BATCH_BYTES;
    sh->max_profiles = BATCH_PROFILES;
    curl_easy_setopt(sh->c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(sh->c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(sh->c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(sh->c, CURLOPT_POST, 1L);
    curl_easy_setopt(sh->c, CURLOPT_WRITEFUNCTION, keep_answer);
    curl_easy_setopt(sh->c, CURLOPT_WRITEDATA, &sh->answer);
    return sh;
}

uint64_t ship_http__requests(const struct ship_http *sh, uint64_t *bytes)
{
    *bytes = sh->bytes;
    return sh->requests;
}

void ship_http__free(struct ship_http *sh)
{
    if (!sh)
        return;
    curl_easy_cleanup(sh->c);
    curl_slist_free_all(sh->hdrs);
    curl_slist_free_all(sh->batch_hdrs);
    zst_compressor__free(sh->zst);
    buf__free(&sh->body);
    buf__free(&sh->zbody);
    buf__free(&sh->answer);
    free(sh->endpoint);
    free(sh->at);
    free(sh);
}

/* One POST of [data, data + len) to the endpoint's path (with its query).
 * Returns the HTTP status (the answer's start in sh->answer), or -1 with
 * why filled. */
static long post(struct ship_http *sh, const char *path, struct curl_slist *hdrs, const void *data,
                 size_t len, size_t profiles, char *why, size_t whylen)
{
    char url[4096 + BATCH_QUERY_MAX];
    long code = -1;

    snprintf(url, sizeof(url), "%s%s", sh->endpoint, path);
    buf__reset(&sh->answer);
    sh->requests++;
    sh->bytes += len;
    curl_easy_setopt(sh->c, CURLOPT_URL, url);
    curl_easy_setopt(sh->c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(sh->c, CURLOPT_POSTFIELDS, data);
    curl_easy_setopt(sh->c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(sh->c, CURLOPT_TIMEOUT_MS,
                     (long)(TIMEOUT_S * 1000 + TIMEOUT_PER_PROFILE_MS * profiles));
    CURLcode cr = curl_easy_perform(sh->c);
    if (cr == CURLE_OK)
        curl_easy_getinfo(sh->c, CURLINFO_RESPONSE_CODE, &code);
    else
        snprintf(why, whylen, "%s", curl_easy_strerror(cr));
    if (code >= 300)
        snprintf(why, whylen, "HTTP %ld: %.300s", code, sh->answer.data ? sh->answer.data : "");
    return code;
}

/* One profile alone, to POST /api/v1/profiles (a server without batches). */
static void send_one(struct ship_http *sh, struct ship_item *it)
{
    char query[SPOOL_HEADER_MAX], path[SPOOL_HEADER_MAX + 32];
    size_t body = 0;

    if (spool__query(it->name, it->file, query, sizeof(query), &body, it->why, sizeof(it->why))) {
        it->status = 400; /* it can never be sent */
        return;
    }
    snprintf(path, sizeof(path), "/api/v1/profiles?%s", query);
    it->status = post(sh, path, sh->hdrs, it->file->data + body, it->file->len - body, 1, it->why,
                      sizeof(it->why));
}

/* Builds a batch of items [0, n) within the caps in sh->body; the items it
 * holds are listed in sh->at. Items that can never be sent get 400. Returns
 * how many items it went through. */
static size_t build(struct ship_http *sh, struct ship_item *items, size_t n, size_t *nat)
{
    char query[SPOOL_HEADER_MAX];
    size_t i, body;

    *nat = 0;
    buf__reset(&sh->body);
    if (batch__begin(&sh->body))
        return 0;
    for (i = 0; i < n && *nat < sh->max_profiles; i++) {
        struct ship_item *it = &items[i];
        if (spool__query(it->name, it->file, query, sizeof(query), &body, it->why,
                         sizeof(it->why))) {
            it->status = 400;
            continue;
        }
        size_t len = it->file->len - body;
        /* The first always goes in: a batch of one is the most a profile
         * can be sent in. */
        if (*nat && sh->body.len + len > sh->max_bytes)
            break;
        if (batch__append(&sh->body, query, it->file->data + body, len)) {
            if (!*nat) {
                snprintf(it->why, sizeof(it->why), "larger than a batch can hold");
                it->status = 413;
                continue;
            }
            break;
        }
        sh->at[(*nat)++] = i;
    }
    return i;
}

/* Sends one batch (build's); fills the statuses of the items in it.
 * Returns the request's HTTP status. */
static long send_batch(struct ship_http *sh, struct ship_item *items, size_t nat, char *why,
                       size_t whylen)
{
    int st[BATCH_PROFILES];
    long code;

    buf__reset(&sh->zbody);
    if (zst_compressor__compress(sh->zst, sh->body.data, sh->body.len, &sh->zbody)) {
        snprintf(why, whylen, "cannot compress a batch of %zu bytes", sh->body.len);
        code = -1; /* out of memory: tried again later */
    } else {
        code = post(sh, "/api/v1/profiles/batch", sh->batch_hdrs, sh->zbody.data, sh->zbody.len,
                    nat, why, whylen);
    }

    /* Only the answer the batch endpoint gives counts: anything else that
     * claims success (a proxy, a stand-in) has not said what it stored. */
    if (code >= 200 && code < 300 &&
        (code != 200 || batch__statuses(sh->answer.data, sh->answer.len, st, nat) != 0)) {
        snprintf(why, whylen, "HTTP %ld to a batch of %zu, without its statuses", code, nat);
        code = -1;
    }
    for (size_t k = 0; k < nat; k++) {
        struct ship_item *it = &items[sh->at[k]];
        it->status = code == 200 ? st[k] : code;
        if (code != 200)
            snprintf(it->why, sizeof(it->why), "%s", why);
        else if (it->status != 202 &&
                 batch__error(sh->answer.data, sh->answer.len, k, it->why, sizeof(it->why)))
            snprintf(it->why, sizeof(it->why), "HTTP %ld", it->status);
    }
    return code;
}

void ship_http__send(struct ship_http *sh, struct ship_item *items, size_t n, char *why,
                     size_t whylen)
{
    size_t i = 0;

    for (size_t k = 0; k < n; k++)
        items[k].status = -1;
    while (i < n) {
        if (sh->batch_again_ns && clock__mono_ns() < sh->batch_again_ns) {
            send_one(sh, &items[i]);
            if (!ship_item__settled(items[i].status)) {
                snprintf(why, whylen, "%s", items[i].why);
                return;
            }
            i++;
            continue;
        }
        size_t nat, through = build(sh, items + i, n - i, &nat);
        if (!nat) {
            i += through; /* none could be sent: each has its reason */
            continue;
        }
        long code = send_batch(sh, items + i, nat, why, whylen);
        if (code == 404 || code == 405) {
            log_info("upload: %s has no batch endpoint (HTTP %ld): one request a profile, "
                     "asked again in an hour",
                     sh->endpoint, code);
            sh->batch_again_ns = clock__mono_ns() + REPROBE_NS;
            continue;
        }
        if (code == 413 && nat > 1) {
            /* The server's --max-body is below ours: halves until it fits. */
            sh->max_bytes = sh->body.len / 2 ? sh->body.len / 2 : 1;
            sh->max_profiles = nat / 2 ? nat / 2 : 1;
            log_info("upload: a batch of %zu bytes too large for the server; batches of at "
                     "most %zu bytes from now",
                     sh->body.len, sh->max_bytes);
            continue;
        }
        if (code == 200)
            sh->batch_again_ns = 0;
        for (size_t k = 0; k < nat; k++) {
            if (!ship_item__settled(items[i + sh->at[k]].status)) {
                snprintf(why, whylen, "%s", items[i + sh->at[k]].why);
                return;
            }
        }
        i += through;
    }
}

#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common/buf.h"
#include "../common/debugfile.h"
#include "../common/json.h"
#include "../common/log.h"
#include "debuginfod.h"
#include "pyroscope.h"
#include "text.h"
#include "http_int.h"
#include "ui_assets.h"

/* How long an upload (or a batch) waits for a slot before a 503: the
 * agent retries. */
#define INGEST_WAIT_S 30

struct request {
    struct buf body;
    bool started; /* the handler has seen it */
    bool too_big;
    bool nul;                     /* "%00" in the URI: a name or value would be cut short */
    bool too_many;                /* more query parameters than MAX_PARAMS */
    struct dbgsrv_upload *dbg_up; /* a debug file being uploaded (streamed to disk) */
    char dbg_why[256];            /* why its upload was refused before its body */
};

/* Query parameters a request may have: the API takes a dozen. */
#define MAX_PARAMS 64
/* Connections in all; one client address may hold opts.per_client of
 * them, so that no client can take all and keep everyone else out. */
#define MAX_CONNECTIONS 1000
/* Seconds a connection may sit idle, a slow header included. */
#define IDLE_TIMEOUT_S 15

/* Called with the raw URI before libmicrohttpd splits it: the request's
 * state starts here (the handler's *con_cls). Two things are caught here
 * because by the handler they are gone or too late: a "%00", which
 * decodes to a NUL that would cut a name short (/ui/index.html%00.js would
 * serve index.html), and a query string of hundreds of parameters, which
 * overflows libmicrohttpd's 32 KiB connection pool as it stores them
 * (0.9.75 then hangs the request until the timeout). For the latter the
 * query string is cut here, in the request line buffer that libmicrohttpd
 * hands over and parses next (the text after '?' ends at once), and the
 * handler answers 414. */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct http *h = cls;
    struct request *rq = calloc(1, sizeof(*rq));

    (void)c;
    if (!rq)
        return NULL; /* the handler tries again */
    buf__init(&rq->body, h->opts.max_body);
    rq->nul = strstr(uri, "%00") != NULL;
    char *q = strchr(uri, '?');
    size_t params = q ? 1 : 0;
    for (const char *p = q; p && *p; p++)
        params += *p == '&' || *p == ';';
    if (params > MAX_PARAMS) {
        rq->too_many = true;
        q[1] = '\0';
    }
    return rq;
}

void http_count(uint64_t *c, uint64_t v)
{
    __atomic_add_fetch(c, v, __ATOMIC_RELAXED);
}

enum MHD_Result http_respond(struct MHD_Connection *c, unsigned status, const char *type,
                             void *data, size_t len, bool owned)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, data, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

void http_count_reject(struct http *h, unsigned status)
{
    enum reject rj = status == 401                    ? REJ_UNAUTHORIZED
                     : status == 413 || status == 414 ? REJ_TOO_LARGE
                     : status == 404 || status == 405 ? REJ_NOT_FOUND
                     : status >= 500                  ? REJ_INTERNAL
                                                      : REJ_BAD_REQUEST;
    http_count(&h->m.rejects[rj], 1);
}

/* Answers with {"error": msg}. */
enum MHD_Result http_respond_error(struct http *h, struct MHD_Connection *c, unsigned status,
                                   const char *msg)
{
    struct buf b;

    http_count_reject(h, status);
    buf__init(&b, 1 << 16);
    if (json__raw(&b, "{\"error\":") || json__str(&b, msg) || json__raw(&b, "}\n")) {
        buf__free(&b);
        return http_respond(c, status, "text/plain", (void *)msg, strlen(msg), false);
    }
    return http_respond(c, status, "application/json", b.data, b.len, true);
}

enum MHD_Result http_respond_buf(struct MHD_Connection *c, unsigned status, const char *type,
                                 struct buf *b)
{
    enum MHD_Result r =
        http_respond(c, status, type, b->data ? b->data : "", b->len, b->data != NULL);
    b->data = NULL; /* the response owns it now */
    buf__free(b);
    return r;
}

const char *http_arg(struct MHD_Connection *c, const char *key)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
}

/* Constant time in the length of the expected key. */
static bool key_matches(const char *given, const char *want)
{
    size_t gl = strlen(given), wl = strlen(want);
    unsigned char diff = gl != wl;
    for (size_t i = 0; i < wl; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)(i < gl ? given[i] : 0);
    return diff == 0;
}

/* Whether the request carries key (Authorization: Bearer KEY); any request
 * does when key is NULL or empty. */
static bool has_key(struct MHD_Connection *c, const char *key)
{
    if (!key || !*key)
        return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    /* The scheme is case-insensitive (RFC 9110 11.1), then one or more spaces. */
    if (!a || strncasecmp(a, "Bearer ", 7) != 0)
        return false;
    for (a += 7; *a == ' ';)
        a++;
    return key_matches(a, key);
}

static bool authorized(struct http *h, struct MHD_Connection *c)
{
    return has_key(c, h->opts.api_key);
}

bool http_authorized_basic(struct http *h, struct MHD_Connection *c)
{
    const char *key = h->opts.api_key;
    char *pass = NULL;

    if (!key || !*key || has_key(c, key))
        return true;
    /* libmicrohttpd 0.9.76 deprecates this for
     * MHD_basic_auth_get_username_password3; Debian 12's 0.9.75 has only
     * this one. */
    char *user = MHD_basic_auth_get_username_password(c, &pass);
    bool ok = user && pass && key_matches(pass, key);
    MHD_free(user);
    MHD_free(pass);
    return ok;
}

int http_parse_pid(const char *s, int64_t *pid)
{
    char *end;
    if (!s) {
        *pid = 0;
        return 0;
    }
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || v <= 0 || v > 4194304)
        return -1;
    *pid = v;
    return 0;
}

bool http_slot_take(struct http *h)
{
    struct timespec until;

    __atomic_add_fetch(&h->ingesting, 1, __ATOMIC_SEQ_CST);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += INGEST_WAIT_S;
    while (sem_timedwait(&h->ingest_slots, &until))
        if (errno != EINTR) {
            __atomic_sub_fetch(&h->ingesting, 1, __ATOMIC_SEQ_CST);
            return false;
        }
    return true;
}

bool http_slot_spare(struct http *h)
{
    if (__atomic_add_fetch(&h->ingesting, 1, __ATOMIC_SEQ_CST) == 2 &&
        sem_trywait(&h->ingest_slots) == 0)
        return true;
    __atomic_sub_fetch(&h->ingesting, 1, __ATOMIC_SEQ_CST);
    return false;
}

void http_slot_put(struct http *h)
{
    __atomic_sub_fetch(&h->ingesting, 1, __ATOMIC_SEQ_CST);
    sem_post(&h->ingest_slots);
}

int http_ingest_one(struct http *h, const void *body, size_t len, const struct ingest_identity *id,
                    char *msg, size_t msglen)
{
    int status = ingest__profile(h->st, body, len, id, &h->opts.limits, msg, msglen);

    if (status == 202) {
        http_count(&h->m.profiles, 1);
        http_count(&h->m.bytes, len);
    }
    return status;
}

void http_log_refused(const char *what, size_t len, const char *service, int status,
                      const char *msg)
{
    /* Both come from the request (msg quotes the body's labels): one
     * escaped value cannot forge a line of the log. */
    char svc[256], why[1024];

    log_warn("ingest: refused %s%zu bytes from service=%s: %d %s", what, len,
             text__escape(svc, sizeof(svc), service), status, text__escape(why, sizeof(why), msg));
}

/* --- handlers --- */

static enum MHD_Result h_ingest(struct http *h, struct MHD_Connection *c, struct request *rq)
{
    struct ingest_identity id = {http_arg(c, "service"), http_arg(c, "host")};
    char msg[HTTP_MSG_MAX];

    for (int i = 0; i < STORE_N_IDENTITY; i++)
        id.identity[i] = http_arg(c, store_identity_keys[i]);
    if (http_parse_pid(http_arg(c, "pid"), &id.pid))
        return http_respond_error(h, c, 400, "pid: not a process id");
    /* At most ingest_concurrency bodies decoded at once, each within
     * limits.max_memory: what uploads take is bounded whatever comes in. */
    if (!http_slot_take(h))
        return http_respond_error(h, c, 503, HTTP_BUSY);
    int status =
        http_ingest_one(h, rq->body.data ? rq->body.data : "", rq->body.len, &id, msg, sizeof(msg));
    http_slot_put(h);
    if (status != 202) {
        http_log_refused("", rq->body.len, id.service, status, msg);
        return http_respond_error(h, c, status, msg);
    }
    return http_respond(c, 202, "application/json", "{\"status\":\"stored\"}\n", 20, false);
}

/* The web UI: "/" is index.html, "/ui/NAME" the embedded files. They are
 * revalidated by ETag on each load, so a new server binary shows at once. */
static enum MHD_Result h_ui(struct http *h, struct MHD_Connection *c, const char *url)
{
    const struct ui_asset *a = NULL;

    if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0)
        url = "/ui/index.html";
    for (size_t i = 0; i < ui_nassets && !a; i++)
        if (strcmp(ui_assets[i].path, url) == 0)
            a = &ui_assets[i];
    if (!a)
        return http_respond_error(h, c, 404, "no such file in the web UI");
    const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-None-Match");
    bool same = inm && strcmp(inm, a->etag) == 0;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(same ? 0 : a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", a->type);
    MHD_add_response_header(r, "ETag", a->etag);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; style-src 'self' 'unsafe-inline'");
    enum MHD_Result ret = MHD_queue_response(c, same ? 304 : 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* GET /debuginfod/buildid/ID/KIND: the file, or 404 (no one has it), 503
 * (upstream away or busy: the agent asks again later), 400 (a bad path). */
static enum MHD_Result h_debuginfod(struct http *h, struct MHD_Connection *c, const char *url)
{
    char id[DEBUGFILE_ID_MAX + 1], why[256] = "";
    const char *kind;
    uint64_t size;
    int fd;

    if (dbgsrv__parse_path(url, id, &kind))
        return http_respond_error(h, c, 400,
                                  "expected /debuginfod/buildid/ID/debuginfo or /executable, ID in "
                                  "lowercase hex");
    int r = dbgsrv__open(h->opts.debuginfod, id, kind, &fd, &size, why, sizeof(why));
    if (r)
        return http_respond_error(h, c, r == -ENOENT ? 404 : 503, why);
    struct MHD_Response *resp = MHD_create_response_from_fd64(size, fd);
    if (!resp) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
    enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* PUT or POST /debuginfod/buildid/ID/KIND with the ingest key: the body,
 * streamed to disk as it comes (rq->dbg_up, begun with the headers). */
static enum MHD_Result h_debuginfod_put(struct http *h, struct MHD_Connection *c,
                                        struct request *rq)
{
    char why[256];

    if (!rq->dbg_up)
        return http_respond_error(h, c, rq->dbg_why[0] ? 413 : 400,
                                  rq->dbg_why[0] ? rq->dbg_why : "bad upload");
    int r = dbgsrv__upload_finish(rq->dbg_up, why, sizeof(why));
    dbgsrv__upload_free(rq->dbg_up);
    rq->dbg_up = NULL;
    if (r) {
        char esc[512];
        log_warn("debuginfod: refused an upload: %s", text__escape(esc, sizeof(esc), why));
        return http_respond_error(h, c, 422, why);
    }
    return http_respond(c, 201, "application/json", "{\"status\":\"stored\"}\n", 20, false);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    struct http *h = cls;
    struct request *rq = *con_cls;
    bool post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0;
    bool dbg = h->opts.debuginfod && strncmp(url, "/debuginfod/", 12) == 0;
    bool dbg_put = dbg && (post || strcmp(method, "PUT") == 0);
    bool batch = strcmp(url, "/api/v1/profiles/batch") == 0;
    bool pyro = strcmp(url, "/ingest") == 0 || strcmp(url, "/pyroscope/ingest") == 0;
    bool ingest = batch || pyro || strcmp(url, "/api/v1/profiles") == 0;
    bool connect = post && strncmp(url, CONNECT_PREFIX, strlen(CONNECT_PREFIX)) == 0;

    (void)version;
    if (!rq) {
        rq = calloc(1, sizeof(*rq));
        if (!rq)
            return MHD_NO;
        buf__init(&rq->body, h->opts.max_body);
        *con_cls = rq;
    }
    if (!rq->started) {
        rq->started = true;
        if (rq->too_many) {
            char msg[96];
            snprintf(msg, sizeof(msg), "more than %d query parameters", MAX_PARAMS);
            return http_respond_error(h, c, 414, msg);
        }
        if (rq->nul)
            return http_respond_error(h, c, 400, "a NUL (%00) in the URI");
        if (dbg_put) {
            char id[DEBUGFILE_ID_MAX + 1];
            const char *kind, *cl;
            if (!authorized(h, c))
                return http_respond_error(h, c, 401, "missing or wrong API key (--api-key)");
            if (dbgsrv__parse_path(url, id, &kind))
                return http_respond_error(h, c, 400, "expected /debuginfod/buildid/ID/debuginfo");
            cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
            rq->dbg_up =
                dbgsrv__upload_begin(h->opts.debuginfod, id, kind, cl ? strtoull(cl, NULL, 10) : 0,
                                     rq->dbg_why, sizeof(rq->dbg_why));
            if (!rq->dbg_up)
                return http_respond_error(h, c, 413, rq->dbg_why);
        }
        if (connect) {
            /* Grafana's Pyroscope data source: a small body (the key is
             * checked once it is read: a client still sending it would
             * see a broken pipe rather than the answer). */
            const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
            if (cl && strtoull(cl, NULL, 10) > CONNECT_MAX_BODY)
                return http_connect__error(h, c, 429, "resource_exhausted",
                                           "a request body larger than 1 MiB");
        }
        if (post && ingest) {
            /* Refuse before reading a byte when we can. */
            if (!(pyro ? http_authorized_basic(h, c) : authorized(h, c)))
                return http_respond_error(h, c, 401,
                                          "missing or wrong API key: send "
                                          "Authorization: Bearer KEY");
            const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
            unsigned long long clen = cl ? strtoull(cl, NULL, 10) : 0;
            if (clen > h->opts.max_body) {
                char msg[128];
                snprintf(msg, sizeof(msg), "body larger than %zu bytes", h->opts.max_body);
                return http_respond_error(h, c, 413, msg);
            }
            /* Room for the body at once, rather than growing by doubling
             * (a copy each time), but at most 1 MiB before any of it has
             * come: a header alone must not take --max-body of memory. A
             * failure here just leaves it to grow. */
            if (clen && buf__reserve(&rq->body, clen < (1u << 20) ? clen : (1u << 20)))
                buf__reset(&rq->body);
        }
        return MHD_YES;
    }
    if (*upload_size && rq->dbg_up) {
        dbgsrv__upload_write(rq->dbg_up, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!rq->too_big && buf__append(&rq->body, upload, *upload_size))
            rq->too_big = true; /* read on to the end, keeping nothing */
        *upload_size = 0;
        return MHD_YES;
    }
    if (ingest) {
        if (!post)
            return http_respond_error(h, c, 405,
                                      batch  ? "POST a batch of profiles here (common/batch.h)"
                                      : pyro ? "POST a profile here (Pyroscope's push API)"
                                             : "POST a pprof profile here");
        if (!(pyro ? http_authorized_basic(h, c) : authorized(h, c)))
            return http_respond_error(h, c, 401, "missing or wrong API key");
        if (rq->too_big) {
            char msg[128];
            snprintf(msg, sizeof(msg), "body larger than %zu bytes", h->opts.max_body);
            return http_respond_error(h, c, 413, msg);
        }
        if (batch)
            return http_batch__ingest(h, c, rq->body.data ? rq->body.data : "", rq->body.len);
        if (pyro)
            return http_pyroscope__ingest(h, c, rq->body.data ? rq->body.data : "", rq->body.len);
        return h_ingest(h, c, rq);
    }
    if (connect) {
        if (!has_key(c, h->opts.read_api_key))
            return http_connect__error(h, c, 401, "unauthenticated",
                                       "missing or wrong read API key: send "
                                       "Authorization: Bearer KEY (--read-api-key)");
        if (rq->too_big)
            return http_connect__error(h, c, 429, "resource_exhausted", "request body too large");
        return http_connect__handle(h, c, url, rq->body.data ? rq->body.data : "", rq->body.len);
    }
    if (dbg_put)
        return h_debuginfod_put(h, c, rq);
    if (!get)
        return http_respond_error(h, c, 405, "only GET here");
    if (strcmp(url, "/healthz") == 0)
        return http_respond(c, 200, "text/plain", "ok\n", 3, false);
    /* Everything else that reads data: the read key when there is one (the
     * UI's files stay open; its data calls send the key). */
    bool reads = strncmp(url, "/api/", 5) == 0 || strcmp(url, "/metrics") == 0;
    if (reads && !has_key(c, h->opts.read_api_key))
        return http_respond_error(h, c, 401,
                                  "missing or wrong read API key: send Authorization: Bearer KEY "
                                  "(--read-api-key)");
    if (strcmp(url, "/api/v1/applications") == 0)
        return http_api__applications(h, c);
    if (strcmp(url, "/api/v1/profile") == 0)
        return http_api__profile(h, c);
    if (strcmp(url, "/api/v1/timeline") == 0)
        return http_api__timeline(h, c);
    if (strcmp(url, "/api/v1/labels") == 0)
        return http_api__labels(h, c);
    if (strcmp(url, "/metrics") == 0)
        return http_api__metrics(h, c);
    if (dbg) { /* the read key, or the agents' ingest key */
        if (!has_key(c, h->opts.read_api_key) &&
            !(h->opts.api_key && *h->opts.api_key && has_key(c, h->opts.api_key)))
            return http_respond_error(h, c, 401, "missing or wrong API key");
        return h_debuginfod(h, c, url);
    }
    if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0 || strncmp(url, "/ui/", 4) == 0)
        return h_ui(h, c, url);
    return http_respond_error(h, c, 404, "no such path");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct request *rq = *con_cls;

    (void)cls;
    (void)c;
    (void)toe;
    if (rq) {
        dbgsrv__upload_free(rq->dbg_up);
        buf__free(&rq->body);
        free(rq);
        *con_cls = NULL;
    }
}

static int parse_listen(const char *s, struct sockaddr_storage *ss, char *err, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(s, ':');
    char *end;

    memset(ss, 0, sizeof(*ss));
    if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host))
        goto bad;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || port < 0 || port > 65535)
        goto bad;
    memcpy(host, s, colon - s);
    host[colon - s] = '\0';
    if (host[0] == '[') {
        size_t l = strlen(host);
        if (host[l - 1] != ']')
            goto bad;
        host[l - 1] = '\0';
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(port);
        if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
            goto bad;
        return 0;
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
        goto bad;
    return 0;
bad:
    snprintf(err, errlen, "--listen %s: expected ADDR:PORT, e.g. 127.0.0.1:8080 or [::1]:8080", s);
    return -1;
}

struct http *http__start(const struct http_opts *opts, struct store *st, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    struct http *h;

    if (parse_listen(opts->listen, &ss, err, errlen))
        return NULL;
    h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->opts = *opts;
    h->st = st;
    if (!(h->card = pyro_card__new(PYRO_CARD_KEYS, PYRO_CARD_VALUES))) {
        snprintf(err, errlen, "out of memory");
        free(h);
        return NULL;
    }
    if (sem_init(&h->ingest_slots, 0, opts->ingest_concurrency ? opts->ingest_concurrency : 2)) {
        snprintf(err, errlen, "sem_init: %s", strerror(errno));
        pyro_card__free(h->card);
        free(h);
        return NULL;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(
        flags, 0, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, &ss, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)(opts->threads ? opts->threads : 4), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)IDLE_TIMEOUT_S,
        /* Per connection: headers and the read buffer bodies stream
         * through. libmicrohttpd's default, 32 KiB: it clears the pool for
         * each request, and maps a larger one anew for each connection
         * (mmap, then munmap with a TLB flush on every CPU: at 256 KiB
         * that was over 1 ms of CPU a connection). */
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)(opts->per_client ? opts->per_client : 64), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)(32 * 1024), MHD_OPTION_URI_LOG_CALLBACK, uri_seen, h, MHD_OPTION_NOTIFY_COMPLETED,
        completed, NULL, MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s (address in use, or not this machine's)",
                 opts->listen);
        sem_destroy(&h->ingest_slots);
        pyro_card__free(h->card);
        free(h);
        return NULL;
    }
    return h;
}

void http__stop(struct http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    sem_destroy(&h->ingest_slots);
    pyro_card__free(h->card);
    free(h);
}

uint16_t http__port(const struct http *h)
{
    const union MHD_DaemonInfo *i = h ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT) : NULL;

    return i ? i->port : 0;
}

void http__set_rollups(struct http *h, int64_t built_total, int64_t pending)
{
    if (!h)
        return;
    __atomic_store_n(&h->m.rollups_built, built_total, __ATOMIC_RELAXED);
    __atomic_store_n(&h->m.rollups_pending, pending, __ATOMIC_RELAXED);
}

/* POST /ingest and /pyroscope/ingest: Pyroscope's push API, what its SDKs
 * (Go, Java, Python, Ruby, .NET, Node.js) and Grafana Alloy's
 * pyroscope.write send. The query string names the application and its
 * labels (name=app{k=v,...}), the time (from, until) and the format; the
 * body is a pprof (format=pprof, or a multipart part "profile") or folded
 * lines. Each becomes one profile of CPU through ingest__profile, with
 * its limits. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../common/log.h"
#include "http_int.h"
#include "pyroscope.h"
#include "text.h"

/* Pyroscope's default sample rate (Hz) for folded lines. */
#define DEFAULT_SAMPLE_RATE 100
/* --max-ingest-memory per frame of folded lines: 1,048,576 frames in all
 * lines by default. */
#define PYRO_BYTES_PER_FRAME 512

/* The request's times: from and until by their digits, now when missing. */
static int times(struct MHD_Connection *c, int64_t *from, int64_t *until, char *msg, size_t msglen)
{
    struct timespec now;
    const char *f = http_arg(c, "from"), *u = http_arg(c, "until");

    clock_gettime(CLOCK_REALTIME, &now);
    int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    *from = *until = now_ns;
    if ((f && pyro_time__parse(f, from)) || (u && pyro_time__parse(u, until))) {
        snprintf(msg, msglen,
                 "from, until: Unix time in seconds, ms, us or ns (10, 13, 16 or 19 digits)");
        return -1;
    }
    if (!f && u)
        *from = *until;
    if (*until < *from) {
        snprintf(msg, msglen, "until is before from");
        return -1;
    }
    return 0;
}

/* The profile's identity: the application, host (label host, else
 * hostname), pid, the identity labels of the name's labels, and its other
 * labels into labels (STORE_MAX_LABELS), within the distinct values the
 * server keeps (h->card). Returns 0, or the status with msg. */
static int identity(struct http *h, const struct pyro_name *n, struct ingest_identity *id,
                    struct store_label *labels, char *msg, size_t msglen)
{
    id->service = n->app;
    id->host = pyro_name__label(n, "host");
    bool host_from_hostname = !id->host;
    if (!id->host)
        id->host = pyro_name__label(n, "hostname");
    for (int i = 0; i < STORE_N_IDENTITY; i++)
        id->identity[i] = pyro_name__label(n, store_identity_keys[i]);
    if (http_parse_pid(pyro_name__label(n, "pid"), &id->pid)) {
        snprintf(msg, msglen, "name: label pid is not a process id");
        return 400;
    }
    if (pyro_name__labels(n, host_from_hostname, labels, &id->nlabels, msg, msglen))
        return 400;
    id->labels = labels;
    if (pyro_card__take(h->card, labels, id->nlabels, true, msg, msglen))
        return 422;
    return 0;
}

/* What the body is: 'P' a pprof (raw or a multipart part, *p and *plen
 * pointing at it), 'F' folded lines, or 0 with the status in *status. */
static char body_kind(struct MHD_Connection *c, const void *body, size_t len, const void **p,
                      size_t *plen, int *status, char *msg, size_t msglen)
{
    const char *fmt = http_arg(c, "format");
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");

    *p = body;
    *plen = len;
    if (ct && strncasecmp(ct, "multipart/form-data", 19) == 0) {
        int e = pyro_multipart__part(body, len, ct, "profile", p, plen, msg, msglen);
        if (e == -ENOENT)
            snprintf(msg, msglen, "multipart: no part named \"profile\"");
        *status = e == -E2BIG ? 413 : 400;
        return e ? 0 : 'P';
    }
    if (fmt && strcmp(fmt, "pprof") == 0)
        return 'P';
    if (!fmt || !*fmt || strcmp(fmt, "folded") == 0 || strcmp(fmt, "lines") == 0 ||
        strcmp(fmt, "groups") == 0)
        return 'F';
    char esc[64];
    snprintf(msg, msglen,
             "format %s is not taken here: pprof (format=pprof or a multipart part \"profile\") "
             "or folded lines (no format)",
             text__escape(esc, sizeof(esc), fmt));
    *status = 415;
    return 0;
}

/* Folded lines into a pprof in *out (sampleRate Hz: each sample
 * 1e9/sampleRate ns of CPU). Returns 0 or the status with msg. */
static int folded(struct http *h, struct MHD_Connection *c, const void *body, size_t len,
                  const struct ingest_identity *id, struct buf *out, char *msg, size_t msglen)
{
    const char *sr = http_arg(c, "sampleRate");
    long rate = DEFAULT_SAMPLE_RATE;
    char *end;

    if (sr) {
        rate = strtol(sr, &end, 10);
        if (end == sr || *end || rate < 1 || rate > 1000000) {
            snprintf(msg, msglen, "sampleRate: a whole number of Hz from 1 to 1000000");
            return 400;
        }
    }
    const struct ingest_limits *lim = &h->opts.limits;
    /* The writer's tables take about 200 bytes a frame when every frame is
     * new (measured: 1.1 GB for 2 million frames unbounded): a frame per
     * 512 bytes of --max-ingest-memory keeps them well within it, and
     * they are freed before the pprof is ingested. */
    struct pyro_folded_limits fl = {lim->max_samples, lim->max_stack_depth, 4096,
                                    lim->max_memory / PYRO_BYTES_PER_FRAME};
    int e = pyro_folded__to_pprof(body, len, 1000000000 / rate, id->time_ns, id->duration_ns, &fl,
                                  out, msg, msglen);
    return e == -EINVAL ? 400 : e == -E2BIG ? 413 : e ? 500 : 0;
}

enum MHD_Result http_pyroscope__ingest(struct http *h, struct MHD_Connection *c, const void *body,
                                       size_t len)
{
    struct pyro_name n = {0};
    struct ingest_identity id = {.cpu_only = true};
    struct store_label labels[STORE_MAX_LABELS];
    struct buf pp;
    const void *p;
    size_t plen;
    char msg[HTTP_MSG_MAX];
    int64_t from, until;
    int status = 400;

    buf__init(&pp, h->opts.limits.max_decompressed);
    if (pyro_name__parse(http_arg(c, "name"), h->opts.limits.max_label_bytes, &n, msg,
                         sizeof(msg)) ||
        times(c, &from, &until, msg, sizeof(msg)) ||
        (status = identity(h, &n, &id, labels, msg, sizeof(msg))))
        goto out;
    status = 400;
    id.time_ns = from;
    id.duration_ns = until - from;
    char kind = body_kind(c, body, len, &p, &plen, &status, msg, sizeof(msg));
    if (!kind)
        goto out;
    /* At most ingest_concurrency uploads decoded at once, each within
     * limits.max_memory (the folded lines' pprof, made here, within
     * max_decompressed). */
    if (!http_slot_take(h)) {
        status = 503;
        snprintf(msg, sizeof(msg), HTTP_BUSY);
        goto out;
    }
    status = kind == 'F' ? folded(h, c, p, plen, &id, &pp, msg, sizeof(msg)) : 0;
    if (!status && kind == 'F')
        status = http_ingest_one(h, pp.data, pp.len, &id, msg, sizeof(msg));
    else if (!status)
        status = http_ingest_one(h, p, plen, &id, msg, sizeof(msg));
    http_slot_put(h);
out:
    buf__free(&pp);
    if (status == 202) {
        char cmsg[256];
        if (pyro_card__take(h->card, id.labels, id.nlabels, false, cmsg, sizeof(cmsg)))
            log_warn("pyroscope: %s", cmsg); /* stored; its values are just not counted */
        pyro_name__free(&n);
        return http_respond(c, 200, "text/plain", "", 0, false);
    }
    http_log_refused("a Pyroscope upload of ", len, n.app, status, msg);
    pyro_name__free(&n);
    return http_respond_error(h, c, status, msg);
}

/* Pyroscope's querier API, as Grafana's "Grafana Pyroscope" data source
 * and Pyroscope's own UI call it: Connect unary RPCs (POST
 * /querier.v1.QuerierService/METHOD, binary protobuf or JSON), five of
 * them, answered from the store through the same queries as /api/v1. A
 * series is an application (label service_name) on a host (label host),
 * grouped by one more label when asked; every label of the profiles
 * (identity and others, store.h) takes =, !=, =~ and !~, pid = only
 * (connect_scope.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../common/clock.h"
#include "../common/hmap.h"
#include "../common/json.h"
#include "connect_flame.h"
#include "connect_req.h"
#include "connect_scope.h"
#include "http_int.h"
#include "querier/v1/querier.pb-c.h"
#include "query.h"
#include "sat.h"

static const char *const methods[] = {
    [CM_PROFILE_TYPES] = "ProfileTypes",
    [CM_LABEL_NAMES] = "LabelNames",
    [CM_LABEL_VALUES] = "LabelValues",
    [CM_SELECT_SERIES] = "SelectSeries",
    [CM_SELECT_MERGE] = "SelectMergeStacktraces",
};

enum MHD_Result http_connect__error(struct http *h, struct MHD_Connection *c, unsigned status,
                                    const char *code, const char *msg)
{
    struct buf b;

    http_count_reject(h, status);
    buf__init(&b, 1 << 16);
    if (json__raw(&b, "{\"code\":") || json__str(&b, code) || json__raw(&b, ",\"message\":") ||
        json__str(&b, msg) || json__raw(&b, "}")) {
        buf__free(&b);
        return http_respond(c, status, "text/plain", (void *)msg, strlen(msg), false);
    }
    return http_respond_buf(c, status, "application/json", &b);
}

#define BAD(msg) http_connect__error(h, c, 400, "invalid_argument", msg)

/* The scope of selector over [start_ms, end_ms) for profile type t (NULL:
 * the selector's, connect_scope__init). */
static int scope__init(struct http *h, struct connect_scope *s, const char *selector,
                       int64_t start_ms, int64_t end_ms, bool by_host, const struct connect_type *t,
                       char *msg, size_t msglen)
{
    return connect_scope__init(h->st, s, selector, start_ms, end_ms, by_host, t, msg, msglen);
}

/* --- answers: a protobuf-c message packed, or its JSON written --- */

static enum MHD_Result answer_pb(struct http *h, struct MHD_Connection *c,
                                 const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *p = n < (1u << 30) ? malloc(n ? n : 1) : NULL;

    if (!p)
        return http_connect__error(h, c, 500, "internal", "response too large");
    protobuf_c_message_pack(m, p);
    return http_respond(c, 200, "application/proto", p, n, true);
}

static enum MHD_Result answer_json(struct http *h, struct MHD_Connection *c, struct buf *b, int err)
{
    if (err) {
        buf__free(b);
        return http_connect__error(h, c, 500, "internal", "response too large");
    }
    return http_respond_buf(c, 200, "application/json", b);
}

static int json_strs(struct buf *b, char *const *v, size_t n)
{
    int err = json__raw(b, "[");
    for (size_t i = 0; i < n && !err; i++) {
        err = i ? json__raw(b, ",") : 0;
        err = err ?: json__str(b, v[i]);
    }
    return err ?: json__raw(b, "]");
}

/* protojson writes 64-bit integers as strings. */
static int json_i64s(struct buf *b, int64_t v)
{
    int err = json__raw(b, "\"");
    err = err ?: json__i64(b, v);
    return err ?: json__raw(b, "\"");
}

static enum MHD_Result answer_names(struct http *h, struct MHD_Connection *c, bool json, char **v,
                                    size_t n, bool values)
{
    if (json) {
        struct buf b;
        buf__init(&b, 64u << 20);
        int err = json__raw(&b, "{\"names\":");
        err = err ?: json_strs(&b, v, n);
        err = err ?: json__raw(&b, "}");
        return answer_json(h, c, &b, err);
    }
    if (values) {
        Types__V1__LabelValuesResponse r = TYPES__V1__LABEL_VALUES_RESPONSE__INIT;
        r.names = v, r.n_names = n;
        return answer_pb(h, c, &r.base);
    }
    Types__V1__LabelNamesResponse r = TYPES__V1__LABEL_NAMES_RESPONSE__INIT;
    r.names = v, r.n_names = n;
    return answer_pb(h, c, &r.base);
}

/* The profile types over the request's range (0: the last hour): CPU;
 * off-CPU and wall too when some application has off-CPU time in it. */
static enum MHD_Result profile_types(struct http *h, struct MHD_Connection *c, bool json,
                                     const struct connect_req *r)
{
    struct store_app *apps;
    size_t napps, n = 1;
    int err;

    if (r->start_ms < 0 || r->end_ms < 0 || r->start_ms > 9000000000000ll ||
        r->end_ms > 9000000000000ll)
        return BAD("start, end: milliseconds since 1970 (before 2255)");
    int64_t to = r->end_ms ? r->end_ms * 1000000 : (int64_t)clock__real_ns();
    int64_t from = r->start_ms ? r->start_ms * 1000000 : to - 3600ll * 1000000000ll;
    if (to <= from)
        return BAD("start must be before end");
    if ((err = store__applications(h->st, from, to, &apps, &napps)))
        return http_connect__error(h, c, err == -EAGAIN ? 503 : 500,
                                   err == -EAGAIN ? "unavailable" : "internal", strerror(-err));
    for (size_t a = 0; a < napps; a++)
        if (apps[a].off_cpu_ns)
            n = CONNECT_N_TYPES;
    store_apps__free(apps, napps);
    if (json) {
        struct buf b;
        buf__init(&b, 1 << 16);
        err = json__raw(&b, "{\"profileTypes\":[");
        for (size_t i = 0; i < n && !err; i++) {
            err = json__raw(&b, i ? ",{\"ID\":" : "{\"ID\":");
            err = err ?: json__str(&b, connect_types[i].id);
            err = err ?: json__raw(&b, ",\"name\":");
            err = err ?: json__str(&b, connect_types[i].name);
            err = err ?: json__raw(&b, ",\"sampleType\":");
            err = err ?: json__str(&b, connect_types[i].sample);
            err = err
                      ?: json__raw(&b, ",\"sampleUnit\":\"nanoseconds\",\"periodType\":\"cpu\","
                                       "\"periodUnit\":\"nanoseconds\"}");
        }
        err = err ?: json__raw(&b, "]}");
        return answer_json(h, c, &b, err);
    }
    Types__V1__ProfileType t[CONNECT_N_TYPES], *tp[CONNECT_N_TYPES];
    Querier__V1__ProfileTypesResponse resp = QUERIER__V1__PROFILE_TYPES_RESPONSE__INIT;
    for (size_t i = 0; i < n; i++) {
        types__v1__profile_type__init(&t[i]);
        t[i].id = (char *)connect_types[i].id, t[i].name = (char *)connect_types[i].name;
        t[i].sample_type = (char *)connect_types[i].sample, t[i].sample_unit = "nanoseconds";
        t[i].period_type = "cpu", t[i].period_unit = "nanoseconds";
        tp[i] = &t[i];
    }
    resp.profile_types = tp, resp.n_profile_types = n;
    return answer_pb(h, c, &resp.base);
}

/* --- label names and values --- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds s to the set v (n entries, at most STORE_MAX_VALUES); sorted and
 * deduplicated later. */
static int set_add(char **v, size_t *n, const char *s)
{
    if (!s || !*s || *n == STORE_MAX_VALUES)
        return 0;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(v[i], s) == 0)
            return 0;
    v[(*n)++] = (char *)s;
    return 0;
}

/* The label names (names) or one label's values (LabelValues: name) of
 * the series the matchers select. */
static enum MHD_Result labels(struct http *h, struct MHD_Connection *c, bool json,
                              const struct connect_req *r, bool values)
{
    struct connect_scope s;
    struct store_values **vs = NULL;
    char msg[512], **out = NULL;
    size_t n = 0;
    int status;
    enum MHD_Result ret;

    if (r->nmatchers > 1)
        return BAD("matchers: one selector at most");
    if (values && (!r->name || !*r->name))
        return BAD("name: required");
    /* Values of host need a query per host, to apply host's matchers. */
    status = scope__init(h, &s, r->nmatchers ? r->matchers[0] : NULL, r->start_ms, r->end_ms,
                         values && strcmp(r->name, "host") == 0, NULL, msg, sizeof(msg));
    if (status)
        goto fail;
    vs = calloc(s.nq + 1, sizeof(*vs));
    out = calloc(STORE_MAX_VALUES, sizeof(*out));
    status = 500;
    snprintf(msg, sizeof(msg), "out of memory");
    if (!vs || !out)
        goto fail;
    bool have[STORE_N_IDENTITY + 2] = {0};
    const char *names[STORE_N_IDENTITY + 3] = {"host", "pid"};
    for (int i = 0; i < STORE_N_IDENTITY; i++)
        names[i + 2] = store_identity_keys[i];
    for (size_t i = 0; i < s.nq; i++) {
        int err = store__values(h->st, &s.q[i], &vs[i]);
        if (err) {
            status = err == -EAGAIN ? 503 : 500;
            snprintf(msg, sizeof(msg), "%s", strerror(-err));
            goto fail;
        }
        if (!vs[i]->matched) /* no profile of this series passes the labels' matchers */
            continue;
        if (values && strcmp(r->name, "service_name") == 0)
            set_add(out, &n, s.q[i].app);
        for (int k = 0; k < STORE_N_IDENTITY + 2; k++) {
            for (size_t j = 0; j < vs[i]->n[k]; j++) {
                /* a host of this series: another host's matchers do not apply */
                if (k == 0 && !connect_sel__match(&s.sel, "host", vs[i]->v[k][j]))
                    continue;
                have[k] = true;
                if (values && strcmp(r->name, names[k]) == 0)
                    set_add(out, &n, vs[i]->v[k][j]);
            }
        }
        /* The other labels, "key=value": split in place (vs is ours). */
        for (size_t j = 0; j < vs[i]->nlabels; j++) {
            char *p = vs[i]->labels[j], *eq = strchr(p, '=');
            if (!eq)
                continue;
            *eq = '\0';
            if (!values)
                set_add(out, &n, p);
            else if (strcmp(r->name, p) == 0)
                set_add(out, &n, eq + 1);
        }
    }
    if (!values) {
        for (size_t i = 0; i < s.nq; i++)
            if (vs[i]->matched)
                set_add(out, &n, "service_name");
        for (int k = 0; k < STORE_N_IDENTITY + 2; k++)
            if (have[k])
                set_add(out, &n, names[k]);
    }
    qsort(out, n, sizeof(*out), cmp_str);
    ret = answer_names(h, c, json, out, n, values);
    goto out;
fail:
    ret = status == 400
              ? BAD(msg)
              : http_connect__error(h, c, status, status == 503 ? "unavailable" : "internal", msg);
out:
    for (size_t i = 0; vs && i < s.nq; i++)
        store_values__free(vs[i]);
    free(vs);
    free(out);
    connect_scope__free(&s);
    return ret;
}

/* --- SelectSeries --- */

struct series {
    const char *app, *host; /* NULL when not grouped by it */
    const char *value;      /* of the group_by label; NULL: not grouped, or absent */
    int64_t *cpu;
};

/* Store reads one SelectSeries may make (a timeline per series and per
 * value of its group_by label). */
#define MAX_SERIES_READS 2000

/* The request's profile type, or NULL with msg filled. */
static const struct connect_type *profile_type_of(const struct connect_req *r, char *msg,
                                                  size_t msglen)
{
    const struct connect_type *t = connect_type__of(r->profile_type);
    if (!t)
        snprintf(msg, msglen, "profile_typeID: %s, %s or %s", connect_types[0].id,
                 connect_types[1].id, connect_types[2].id);
    return t;
}

/* A series' labels: service_name, host and the group_by label (label), those it has. */
static size_t series_labels(const struct series *g, const char *label, const char *names[3],
                            const char *values[3])
{
    size_t n = 0;
    const char *all[3] = {"service_name", "host", label}, *vals[3] = {g->app, g->host, g->value};

    for (int k = 0; k < 3; k++)
        if (vals[k])
            names[n] = all[k], values[n++] = vals[k];
    return n;
}

static int series_json(struct buf *b, const struct series *g, size_t ng, const char *label,
                       size_t nsteps, int64_t from_ms, double step_ms)
{
    int err = json__raw(b, "{\"series\":[");
    for (size_t i = 0; i < ng && !err; i++) {
        const char *names[3], *values[3];
        size_t nl = series_labels(&g[i], label, names, values);
        err = json__raw(b, i ? ",{\"labels\":[" : "{\"labels\":[");
        for (size_t k = 0; k < nl && !err; k++) {
            err = json__raw(b, k ? ",{\"name\":" : "{\"name\":");
            err = err ?: json__str(b, names[k]);
            err = err ?: json__raw(b, ",\"value\":");
            err = err ?: json__str(b, values[k]);
            err = err ?: json__raw(b, "}");
        }
        err = err ?: json__raw(b, "],\"points\":[");
        for (size_t k = 0; k < nsteps && !err; k++) {
            err = json__raw(b, k ? ",{\"value\":" : "{\"value\":");
            err = err ?: json__i64(b, g[i].cpu[k]);
            err = err ?: json__raw(b, ",\"timestamp\":");
            err = err ?: json_i64s(b, from_ms + (int64_t)llround(k * step_ms));
            err = err ?: json__raw(b, "}");
        }
        err = err ?: json__raw(b, "]}");
    }
    return err ?: json__raw(b, "]}");
}

static enum MHD_Result series_pb(struct http *h, struct MHD_Connection *c, const struct series *g,
                                 size_t ng, const char *label, size_t nsteps, int64_t from_ms,
                                 double step_ms)
{
    Querier__V1__SelectSeriesResponse r = QUERIER__V1__SELECT_SERIES_RESPONSE__INIT;
    Types__V1__Series *ser = calloc(ng + 1, sizeof(*ser));
    Types__V1__Series **serp = calloc(ng + 1, sizeof(*serp));
    Types__V1__LabelPair *lp = calloc(3 * ng + 1, sizeof(*lp));
    Types__V1__LabelPair **lpp = calloc(3 * ng + 1, sizeof(*lpp));
    Types__V1__Point *pt = calloc(ng * nsteps + 1, sizeof(*pt));
    Types__V1__Point **ptp = calloc(ng * nsteps + 1, sizeof(*ptp));
    enum MHD_Result ret;

    if (!ser || !serp || !lp || !lpp || !pt || !ptp) {
        ret = http_connect__error(h, c, 500, "internal", "out of memory");
        goto out;
    }
    size_t nl = 0;
    for (size_t i = 0; i < ng; i++) {
        types__v1__series__init(&ser[i]);
        serp[i] = &ser[i];
        ser[i].labels = &lpp[nl];
        const char *names[3], *values[3];
        size_t n = series_labels(&g[i], label, names, values);
        for (size_t k = 0; k < n; k++) {
            types__v1__label_pair__init(&lp[nl]);
            lp[nl].name = (char *)names[k];
            lp[nl].value = (char *)values[k];
            lpp[nl] = &lp[nl];
            nl++, ser[i].n_labels++;
        }
        ser[i].points = &ptp[i * nsteps];
        ser[i].n_points = nsteps;
        for (size_t k = 0; k < nsteps; k++) {
            Types__V1__Point *p = &pt[i * nsteps + k];
            types__v1__point__init(p);
            p->value = (double)g[i].cpu[k];
            p->timestamp = from_ms + (int64_t)llround(k * step_ms);
            ptp[i * nsteps + k] = p;
        }
    }
    r.series = serp, r.n_series = ng;
    ret = answer_pb(h, c, &r.base);
out:
    free(ser), free(serp), free(lp), free(lpp), free(pt), free(ptp);
    return ret;
}

/* Adds cpu (n steps, taken) to the group (app, host, value) of g. */
static int group_add(struct series **g, size_t *ng, size_t *cap, const char *app, const char *host,
                     const char *value, int64_t *cpu, size_t n)
{
    for (size_t k = 0; k < *ng; k++) {
        struct series *x = &(*g)[k];
        if ((!app || strcmp(x->app, app) == 0) && (!host || strcmp(x->host, host) == 0) &&
            (!value == !x->value) && (!value || strcmp(x->value, value) == 0)) {
            for (size_t j = 0; j < n; j++)
                sat__acc(&x->cpu[j], cpu[j]);
            free(cpu);
            return 0;
        }
    }
    if (*ng == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        struct series *ngp = realloc(*g, nc * sizeof(*ngp));
        if (!ngp) {
            free(cpu);
            return -ENOMEM;
        }
        *g = ngp, *cap = nc;
    }
    (*g)[(*ng)++] = (struct series){app, host, value, cpu};
    return 0;
}

struct vlist {
    const char **v;
    size_t n;
};

static int vlist_add(void *ctx, const char *value)
{
    struct vlist *l = ctx;
    l->v[l->n++] = value;
    return 0;
}

/* The timelines of series q grouped by label (NULL: not grouped): its
 * values in vals (kept by the caller: the groups point into it), each a
 * store read, and the rest (profiles without it) the whole less them.
 * *reads counts the store reads. Returns 0, or the status with msg. */
static int series_groups(struct http *h, const struct store_query *q, const char *app,
                         const char *host, const char *label, int64_t step,
                         struct store_values **vals, size_t *reads, struct series **g, size_t *ng,
                         size_t *cap, size_t *nsteps, char *msg, size_t msglen)
{
    struct store_label_match *m = NULL;
    struct vlist vl = {0};
    int64_t *cpu = NULL;
    size_t n;
    int err, status = 500;

    if ((err = store__timeline(h->st, q, step, &cpu, &n)))
        goto store_err;
    *nsteps = n;
    if (label) {
        if ((err = store__values(h->st, q, vals)))
            goto store_err;
        size_t nv = connect_scope__values(*vals, label, NULL, NULL);
        status = 400;
        if (nv >= STORE_MAX_VALUES || (*reads += nv) > MAX_SERIES_READS) {
            snprintf(msg, msglen,
                     "group_by: %s has too many values in the selected series (%d store reads at "
                     "most): narrow the selector",
                     label, MAX_SERIES_READS);
            goto out;
        }
        status = 500;
        snprintf(msg, msglen, "out of memory");
        if (!(vl.v = calloc(nv + 1, sizeof(*vl.v))) || !(m = calloc(q->nmatch + 1, sizeof(*m))))
            goto out;
        connect_scope__values(*vals, label, vlist_add, &vl);
        memcpy(m, q->match, q->nmatch * sizeof(*m));
        for (size_t i = 0; i < vl.n; i++) {
            struct store_query qv = *q;
            int64_t *part;
            size_t pn;
            m[q->nmatch] = (struct store_label_match){label, vl.v[i], 0};
            qv.match = m, qv.nmatch = q->nmatch + 1;
            if ((err = store__timeline(h->st, &qv, step, &part, &pn)))
                goto store_err;
            for (size_t j = 0; j < n && j < pn; j++)
                cpu[j] = cpu[j] > part[j] ? cpu[j] - part[j] : 0;
            if (group_add(g, ng, cap, app, host, vl.v[i], part, pn))
                goto out;
        }
    }
    err = group_add(g, ng, cap, app, host, NULL, cpu, n);
    cpu = NULL;
    status = err ? 500 : 0;
    goto out;
store_err:
    status = err == -EAGAIN ? 503 : 500;
    snprintf(msg, msglen, "%s", strerror(-err));
out:
    free(cpu);
    free(vl.v);
    free(m);
    return status;
}

/* One series per group of the selected (application, host) pairs, grouped
 * by service_name, host and one other label as group_by asks; each point
 * the profile type's nanoseconds (CPU, off-CPU or wall) in its step (the
 * timeline's TYPE_cores x step). */
static enum MHD_Result select_series(struct http *h, struct MHD_Connection *c, bool json,
                                     const struct connect_req *r)
{
    bool by_app = false, by_host = false;
    const char *label = NULL;
    struct connect_scope s;
    struct series *g = NULL;
    struct store_values **vals = NULL;
    size_t ng = 0, cap = 0, nsteps = 0, reads = 0;
    char msg[512];
    int status = 400;
    enum MHD_Result ret;

    memset(&s, 0, sizeof(s));
    const struct connect_type *t = profile_type_of(r, msg, sizeof(msg));
    if (!t)
        goto fail;
    for (size_t i = 0; i < r->ngroup_by; i++) {
        const char *gb = r->group_by[i];
        if (strcmp(gb, "service_name") == 0) {
            by_app = true;
        } else if (strcmp(gb, "host") == 0) {
            by_host = true;
        } else if (strcmp(gb, "pid") == 0 || strncmp(gb, "__", 2) == 0 || !*gb ||
                   strlen(gb) > STORE_LABEL_KEY_MAX ||
                   strspn(gb, "abcdefghijklmnopqrstuvwxyz"
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              "0123456789_.-") != strlen(gb) ||
                   (label && strcmp(label, gb))) {
            snprintf(msg, sizeof(msg),
                     "group_by: service_name, host and one other label of the profiles (not pid)");
            goto fail;
        } else {
            label = gb;
        }
    }
    if (!(r->step >= 1 && r->step <= 1e9)) {
        snprintf(msg, sizeof(msg), "step: seconds, at least 1");
        goto fail;
    }
    int64_t step = (int64_t)llround(r->step * 1e9);
    if ((status =
             scope__init(h, &s, r->selector, r->start_ms, r->end_ms, by_host, t, msg, sizeof(msg))))
        goto fail;
    status = 400;
    if ((s.to - s.from) / step > 10000) {
        snprintf(msg, sizeof(msg), "step: more than 10000 steps; take a larger step");
        goto fail;
    }
    status = 500;
    snprintf(msg, sizeof(msg), "out of memory");
    if (!(vals = calloc(s.nq + 1, sizeof(*vals))))
        goto fail;
    reads = s.nq;
    for (size_t i = 0; i < s.nq; i++) {
        const char *app = by_app ? s.q[i].app : NULL, *host = by_host ? s.q[i].host : NULL;
        if ((status = series_groups(h, &s.q[i], app, host, label, step, &vals[i], &reads, &g, &ng,
                                    &cap, &nsteps, msg, sizeof(msg))))
            goto fail;
    }
    /* A group with none of the type in the range is no series (as in
     * Pyroscope). */
    size_t kept = 0;
    for (size_t i = 0; i < ng; i++) {
        int64_t sum = 0;
        for (size_t j = 0; j < nsteps; j++)
            sat__acc(&sum, g[i].cpu[j]);
        if (sum)
            g[kept++] = g[i];
        else
            free(g[i].cpu);
    }
    ng = kept;
    int64_t from_ms = s.from / 1000000;
    if (json) {
        struct buf b;
        buf__init(&b, 256u << 20);
        ret = answer_json(h, c, &b, series_json(&b, g, ng, label, nsteps, from_ms, step / 1e6));
    } else {
        ret = series_pb(h, c, g, ng, label, nsteps, from_ms, step / 1e6);
    }
    goto out;
fail:
    ret = status == 400
              ? BAD(msg)
              : http_connect__error(h, c, status, status == 503 ? "unavailable" : "internal", msg);
out:
    for (size_t i = 0; g && i < ng; i++)
        free(g[i].cpu);
    free(g);
    for (size_t i = 0; vals && i < s.nq; i++)
        store_values__free(vals[i]);
    free(vals);
    connect_scope__free(&s);
    return ret;
}

/* --- SelectMergeStacktraces --- */

static int flame_json(struct buf *b, const struct connect_flame *f)
{
    int err = json__raw(b, "{\"flamegraph\":{\"names\":[");
    for (size_t i = 0; i < f->nnames && !err; i++) {
        err = i ? json__raw(b, ",") : 0;
        err = err ?: json__str(b, f->names[i]);
    }
    err = err ?: json__raw(b, "],\"levels\":[");
    for (size_t d = 0; d < f->nlevels && !err; d++) {
        err = json__raw(b, d ? ",{\"values\":[" : "{\"values\":[");
        for (size_t i = 0; i < f->nvalues[d] && !err; i++) {
            err = i ? json__raw(b, ",") : 0;
            err = err ?: json_i64s(b, f->levels[d][i]);
        }
        err = err ?: json__raw(b, "]}");
    }
    err = err ?: json__raw(b, "],\"total\":");
    err = err ?: json_i64s(b, f->total);
    err = err ?: json__raw(b, ",\"maxSelf\":");
    err = err ?: json_i64s(b, f->max_self);
    return err ?: json__raw(b, "}}");
}

static enum MHD_Result flame_pb(struct http *h, struct MHD_Connection *c,
                                const struct connect_flame *f)
{
    Querier__V1__SelectMergeStacktracesResponse r =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_RESPONSE__INIT;
    Querier__V1__FlameGraph fg = QUERIER__V1__FLAME_GRAPH__INIT;
    Querier__V1__Level *lv = calloc(f->nlevels + 1, sizeof(*lv));
    Querier__V1__Level **lvp = calloc(f->nlevels + 1, sizeof(*lvp));
    enum MHD_Result ret;

    if (!lv || !lvp) {
        ret = http_connect__error(h, c, 500, "internal", "out of memory");
        goto out;
    }
    for (size_t d = 0; d < f->nlevels; d++) {
        querier__v1__level__init(&lv[d]);
        lv[d].values = f->levels[d];
        lv[d].n_values = f->nvalues[d];
        lvp[d] = &lv[d];
    }
    fg.names = (char **)f->names, fg.n_names = f->nnames;
    fg.levels = lvp, fg.n_levels = f->nlevels;
    fg.total = f->total, fg.max_self = f->max_self;
    r.flamegraph = &fg;
    ret = answer_pb(h, c, &r.base);
out:
    free(lv);
    free(lvp);
    return ret;
}

/* The merged stacks of the selected series as a FlameGraph: the tree of
 * /api/v1/profile?format=flamegraph (interpreter frames without a name
 * folded, as there by default), max_nodes as there. */
static enum MHD_Result select_merge(struct http *h, struct MHD_Connection *c, bool json,
                                    const struct connect_req *r)
{
    struct connect_scope s;
    struct store_merged **parts = NULL, *all = NULL, *one;
    struct connect_flame f = {0};
    size_t nparts = 0;
    char msg[512];
    int status = 400, err;
    enum MHD_Result ret;

    memset(&s, 0, sizeof(s));
    const struct connect_type *t = profile_type_of(r, msg, sizeof(msg));
    if (!t)
        goto fail;
    if (r->format < 0 || r->format > 1) {
        ret = http_connect__error(h, c, 501, "unimplemented",
                                  "format: only the flame graph (PROFILE_FORMAT_FLAMEGRAPH)");
        goto out;
    }
    if (r->max_nodes < 0) {
        snprintf(msg, sizeof(msg), "max_nodes: 0 (all) or more");
        goto fail;
    }
    int64_t t0 = (int64_t)clock__mono_ns();
    if ((status =
             scope__init(h, &s, r->selector, r->start_ms, r->end_ms, false, t, msg, sizeof(msg))))
        goto fail;
    status = 500;
    snprintf(msg, sizeof(msg), "out of memory");
    if (!(parts = calloc(s.nq + 1, sizeof(*parts))))
        goto fail;
    for (; nparts < s.nq; nparts++) {
        if ((err = store__merge(h->st, &s.q[nparts], &parts[nparts]))) {
            status = err == -EAGAIN ? 503 : 500;
            snprintf(msg, sizeof(msg), "%s", strerror(-err));
            goto fail;
        }
    }
    if (nparts == 1) {
        one = parts[0];
    } else {
        if (connect_flame__merge(parts, nparts, &all))
            goto fail;
        one = all;
    }
    if (query__hide_interp(one) < 0 ||
        connect_flame__build(one, r->max_nodes > 0 ? (size_t)r->max_nodes : 0, &f))
        goto fail;
    if (json) {
        struct buf b;
        buf__init(&b, 1u << 30);
        ret = answer_json(h, c, &b, flame_json(&b, &f));
    } else {
        ret = flame_pb(h, c, &f);
    }
    http_count(&h->m.queries, 1);
    http_count(&h->m.query_ns, (int64_t)clock__mono_ns() - t0);
    goto out;
fail:
    ret = status == 400
              ? BAD(msg)
              : http_connect__error(h, c, status, status == 503 ? "unavailable" : "internal", msg);
out:
    connect_flame__free(&f);
    for (size_t i = 0; parts && i < nparts; i++)
        store_merged__free(parts[i]);
    free(parts);
    store_merged__free(all);
    connect_scope__free(&s);
    return ret;
}

/* --- the route --- */

enum MHD_Result http_connect__handle(struct http *h, struct MHD_Connection *c, const char *url,
                                     const void *body, size_t len)
{
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    const char *ce = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Encoding");
    const char *name = url + strlen(CONNECT_PREFIX);
    struct connect_req r;
    char msg[512];
    int m = -1;
    bool json;
    enum MHD_Result ret;

    for (int i = 0; i < (int)(sizeof(methods) / sizeof(*methods)); i++)
        if (strcmp(name, methods[i]) == 0)
            m = i;
    if (m < 0)
        return http_connect__error(h, c, 404, "unimplemented",
                                   "querier.v1.QuerierService: ProfileTypes, LabelNames, "
                                   "LabelValues, SelectSeries and SelectMergeStacktraces only");
    if (ct && strncasecmp(ct, "application/proto", 17) == 0 && (!ct[17] || ct[17] == ';'))
        json = false;
    else if (ct && strncasecmp(ct, "application/json", 16) == 0 && (!ct[16] || ct[16] == ';'))
        json = true;
    else
        return http_connect__error(h, c, 415, "invalid_argument",
                                   "Content-Type: application/proto or application/json");
    if (ce && strcasecmp(ce, "identity"))
        return http_connect__error(h, c, 501, "unimplemented",
                                   "Content-Encoding: only identity (no compression)");
    if (len > CONNECT_MAX_BODY) {
        snprintf(msg, sizeof(msg), "a request body larger than %d bytes", CONNECT_MAX_BODY);
        return http_connect__error(h, c, 429, "resource_exhausted", msg);
    }
    if (connect_req__decode(m, json, body, len, &r, msg, sizeof(msg)))
        return BAD(msg);
    switch (m) {
    case CM_PROFILE_TYPES:
        ret = profile_types(h, c, json, &r);
        break;
    case CM_LABEL_NAMES:
    case CM_LABEL_VALUES:
        ret = labels(h, c, json, &r, m == CM_LABEL_VALUES);
        break;
    case CM_SELECT_SERIES:
        ret = select_series(h, c, json, &r);
        break;
    default:
        ret = select_merge(h, c, json, &r);
        break;
    }
    connect_req__free(&r);
    return ret;
}

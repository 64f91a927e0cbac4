/* Pyroscope's querier API, as Grafana's "Grafana Pyroscope" data source
 * and Pyroscope's own UI call it: Connect unary RPCs (POST
 * /querier.v1.QuerierService/METHOD, binary protobuf or JSON), five of
 * them, answered from the store through the same queries as /api/v1. A
 * series is an application (label service_name) on a host (label host);
 * the identity labels and pid narrow it with = only. */
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
#include "http_int.h"
#include "querier/v1/querier.pb-c.h"
#include "query.h"
#include "sat.h"

/* The profile types, as Pyroscope names them (NAME:SAMPLE_TYPE:UNIT:
 * PERIOD_TYPE:PERIOD_UNIT; __name__ is NAME): CPU time, always; off-CPU
 * time (blocked: locks, I/O, sleeps) and wall time (the two summed) only
 * over a range where some profile has off-CPU time. */
static const struct ptype {
    const char *id, *name, *sample;
    enum store_value value;
} ptypes[] = {
    {"process_cpu:cpu:nanoseconds:cpu:nanoseconds", "process_cpu", "cpu", STORE_VALUE_CPU},
    {"off_cpu:off_cpu:nanoseconds:cpu:nanoseconds", "off_cpu", "off_cpu", STORE_VALUE_OFF_CPU},
    {"wall:wall:nanoseconds:cpu:nanoseconds", "wall", "wall", STORE_VALUE_WALL},
};
#define N_PTYPES (sizeof(ptypes) / sizeof(ptypes[0]))
/* The (application, host) pairs one query may span. */
#define MAX_SERIES 1000

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

/* What one query spans: the selector, the range, and the (application,
 * host) pairs it selects, each a store query. */
struct scope {
    struct connect_sel sel;
    int64_t from, to;
    struct store_app *apps;
    size_t napps;
    struct store_query *q;
    size_t nq;
    bool by_host; /* a query per host (else host is NULL: any) */
};

static void scope__free(struct scope *s)
{
    connect_sel__free(&s->sel);
    store_apps__free(s->apps, s->napps);
    free(s->q);
    memset(s, 0, sizeof(*s));
}

static int label_index(const char *name)
{
    for (int i = 0; i < STORE_N_IDENTITY; i++)
        if (strcmp(name, store_identity_keys[i]) == 0)
            return i;
    return -1;
}

/* [*from, *to) in ns of [start_ms, end_ms) (0: the last hour, up to
 * now): 0, or -1 with msg filled. */
static int range_of(int64_t start_ms, int64_t end_ms, int64_t *from, int64_t *to, char *msg,
                    size_t msglen)
{
    if (start_ms < 0 || end_ms < 0 || start_ms > 9000000000000ll || end_ms > 9000000000000ll) {
        snprintf(msg, msglen, "start, end: milliseconds since 1970 (before 2255)");
        return -1;
    }
    *to = end_ms ? end_ms * 1000000 : (int64_t)clock__real_ns();
    *from = start_ms ? start_ms * 1000000 : *to - 3600ll * 1000000000ll;
    if (*to <= *from) {
        snprintf(msg, msglen, "start must be before end");
        return -1;
    }
    return 0;
}

/* The profile type the selector's __profile_type__ and __name__ select:
 * t when given (NULL when they select another), else the first they
 * match. */
static const struct ptype *selected_type(const struct connect_sel *sel, const struct ptype *t)
{
    for (size_t i = 0; i < N_PTYPES; i++) {
        const struct ptype *p = &ptypes[i];
        if ((!t || t == p) && connect_sel__match(sel, "__profile_type__", p->id) &&
            connect_sel__match(sel, "__name__", p->name))
            return p;
    }
    return NULL;
}

/* Fills s for selector (NULL: all) over [start_ms, end_ms) (0: the last
 * hour, up to now), splitting by host when by_host, for profile type t
 * (NULL: the one the selector names, else CPU): its queries measure it,
 * and an off-CPU type spans only applications with off-CPU time in the
 * range. Returns 0, or an HTTP status with msg. */
static int scope__init(struct http *h, struct scope *s, const char *selector, int64_t start_ms,
                       int64_t end_ms, bool by_host, const struct ptype *t, char *msg,
                       size_t msglen)
{
    int64_t pid = 0;
    const char *identity[STORE_N_IDENTITY] = {0};
    int err;

    memset(s, 0, sizeof(*s));
    if (range_of(start_ms, end_ms, &s->from, &s->to, msg, msglen))
        return 400;
    if (connect_sel__parse(selector, &s->sel, msg, msglen))
        return 400;
    for (size_t i = 0; i < s->sel.n; i++) {
        const struct connect_matcher *m = &s->sel.m[i];
        if (strcmp(m->name, "service_name") == 0 || strcmp(m->name, "host") == 0) {
            by_host |= strcmp(m->name, "host") == 0;
            continue;
        }
        /* Pyroscope's labels of the profile type (what Grafana may add):
         * every series here has the same, so they select all or none. */
        if (strcmp(m->name, "__profile_type__") == 0 || strcmp(m->name, "__name__") == 0)
            continue;
        int k = label_index(m->name);
        if ((k < 0 && strcmp(m->name, "pid")) || m->op != '=' || !*m->value) {
            snprintf(msg, msglen,
                     "label selector: %s: service_name and host take =, !=, =~ and !~; pid, "
                     "container_id, pod, namespace, container and systemd_unit take = with a "
                     "value; there are no other labels",
                     m->name);
            return 400;
        }
        if (k >= 0)
            identity[k] = m->value;
        else if (http_parse_pid(m->value, &pid)) {
            snprintf(msg, msglen, "label selector: pid: not a process id");
            return 400;
        }
    }
    s->by_host = by_host;
    if (!(t = selected_type(&s->sel, t)))
        return 0; /* another profile type: no series */
    if ((err = store__applications(h->st, s->from, s->to, &s->apps, &s->napps))) {
        snprintf(msg, msglen, "%s", strerror(-err));
        return err == -EAGAIN ? 503 : 500;
    }
    for (size_t a = 0; a < s->napps; a++) {
        const struct store_app *app = &s->apps[a];
        if (!connect_sel__match(&s->sel, "service_name", app->name) ||
            (t->value == STORE_VALUE_OFF_CPU && !app->off_cpu_ns))
            continue;
        for (size_t k = 0; k < (by_host ? app->nhosts : 1); k++) {
            const char *host = by_host ? app->hosts[k] : NULL;
            if (by_host && !connect_sel__match(&s->sel, "host", host))
                continue;
            if (s->nq == MAX_SERIES) {
                snprintf(msg, msglen, "the selector spans more than %d series: narrow it",
                         MAX_SERIES);
                return 400;
            }
            if (!s->q && !(s->q = calloc(MAX_SERIES, sizeof(*s->q)))) {
                snprintf(msg, msglen, "out of memory");
                return 500;
            }
            struct store_query *q = &s->q[s->nq++];
            *q = (struct store_query){app->name, s->from, s->to, host, pid};
            memcpy(q->identity, identity, sizeof(identity));
            q->value = t->value;
        }
    }
    return 0;
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
    int64_t from, to;
    char msg[512];
    int err;

    if (range_of(r->start_ms, r->end_ms, &from, &to, msg, sizeof(msg)))
        return BAD(msg);
    if ((err = store__applications(h->st, from, to, &apps, &napps)))
        return http_connect__error(h, c, err == -EAGAIN ? 503 : 500,
                                   err == -EAGAIN ? "unavailable" : "internal", strerror(-err));
    for (size_t a = 0; a < napps; a++)
        if (apps[a].off_cpu_ns)
            n = N_PTYPES;
    store_apps__free(apps, napps);
    if (json) {
        struct buf b;
        buf__init(&b, 1 << 16);
        int err = json__raw(&b, "{\"profileTypes\":[");
        for (size_t i = 0; i < n && !err; i++) {
            err = json__raw(&b, i ? ",{\"ID\":" : "{\"ID\":");
            err = err ?: json__str(&b, ptypes[i].id);
            err = err ?: json__raw(&b, ",\"name\":");
            err = err ?: json__str(&b, ptypes[i].name);
            err = err ?: json__raw(&b, ",\"sampleType\":");
            err = err ?: json__str(&b, ptypes[i].sample);
            err = err
                      ?: json__raw(&b, ",\"sampleUnit\":\"nanoseconds\",\"periodType\":\"cpu\","
                                       "\"periodUnit\":\"nanoseconds\"}");
        }
        err = err ?: json__raw(&b, "]}");
        return answer_json(h, c, &b, err);
    }
    Types__V1__ProfileType t[N_PTYPES], *tp[N_PTYPES];
    Querier__V1__ProfileTypesResponse resp = QUERIER__V1__PROFILE_TYPES_RESPONSE__INIT;
    for (size_t i = 0; i < n; i++) {
        types__v1__profile_type__init(&t[i]);
        t[i].id = (char *)ptypes[i].id, t[i].name = (char *)ptypes[i].name;
        t[i].sample_type = (char *)ptypes[i].sample, t[i].sample_unit = "nanoseconds";
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
    struct scope s;
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
        if (!vs[i]->n[0]) /* no profile of this series passes the identity labels */
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
    }
    if (!values) {
        if (have[0])
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
    scope__free(&s);
    return ret;
}

/* --- SelectSeries --- */

struct series {
    const char *app, *host; /* NULL when not grouped by it */
    int64_t *cpu;
};

/* The request's profile type, or NULL with msg filled. */
static const struct ptype *profile_type_of(const struct connect_req *r, char *msg, size_t msglen)
{
    for (size_t i = 0; i < N_PTYPES; i++)
        if (r->profile_type && strcmp(r->profile_type, ptypes[i].id) == 0)
            return &ptypes[i];
    snprintf(msg, msglen, "profile_typeID: %s, %s or %s", ptypes[0].id, ptypes[1].id, ptypes[2].id);
    return NULL;
}

static int series_json(struct buf *b, const struct series *g, size_t ng, size_t nsteps,
                       int64_t from_ms, double step_ms)
{
    int err = json__raw(b, "{\"series\":[");
    for (size_t i = 0; i < ng && !err; i++) {
        err = json__raw(b, i ? ",{\"labels\":[" : "{\"labels\":[");
        if (!err && g[i].app) {
            err = json__raw(b, "{\"name\":\"service_name\",\"value\":");
            err = err ?: json__str(b, g[i].app);
            err = err ?: json__raw(b, g[i].host ? "}," : "}");
        }
        if (!err && g[i].host) {
            err = json__raw(b, "{\"name\":\"host\",\"value\":");
            err = err ?: json__str(b, g[i].host);
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
                                 size_t ng, size_t nsteps, int64_t from_ms, double step_ms)
{
    Querier__V1__SelectSeriesResponse r = QUERIER__V1__SELECT_SERIES_RESPONSE__INIT;
    Types__V1__Series *ser = calloc(ng + 1, sizeof(*ser));
    Types__V1__Series **serp = calloc(ng + 1, sizeof(*serp));
    Types__V1__LabelPair *lp = calloc(2 * ng + 1, sizeof(*lp));
    Types__V1__LabelPair **lpp = calloc(2 * ng + 1, sizeof(*lpp));
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
        for (int k = 0; k < 2; k++) {
            const char *v = k ? g[i].host : g[i].app;
            if (!v)
                continue;
            types__v1__label_pair__init(&lp[nl]);
            lp[nl].name = k ? "host" : "service_name";
            lp[nl].value = (char *)v;
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

/* One series per group of the selected (application, host) pairs, grouped
 * by service_name and host as group_by asks; each point the profile
 * type's nanoseconds (CPU, off-CPU or wall) in its step (the timeline's
 * TYPE_cores x step). */
static enum MHD_Result select_series(struct http *h, struct MHD_Connection *c, bool json,
                                     const struct connect_req *r)
{
    bool by_app = false, by_host = false;
    struct scope s;
    struct series *g = NULL;
    size_t ng = 0, nsteps = 0;
    char msg[512];
    int status = 400;
    enum MHD_Result ret;

    memset(&s, 0, sizeof(s));
    const struct ptype *t = profile_type_of(r, msg, sizeof(msg));
    if (!t)
        goto fail;
    for (size_t i = 0; i < r->ngroup_by; i++) {
        by_app |= strcmp(r->group_by[i], "service_name") == 0;
        by_host |= strcmp(r->group_by[i], "host") == 0;
        if (strcmp(r->group_by[i], "service_name") && strcmp(r->group_by[i], "host")) {
            snprintf(msg, sizeof(msg), "group_by: service_name and host only");
            goto fail;
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
    if (!(g = calloc(s.nq + 1, sizeof(*g))))
        goto fail;
    for (size_t i = 0; i < s.nq; i++) {
        int64_t *cpu;
        size_t n;
        int err = store__timeline(h->st, &s.q[i], step, &cpu, &n);
        if (err) {
            status = err == -EAGAIN ? 503 : 500;
            snprintf(msg, sizeof(msg), "%s", strerror(-err));
            goto fail;
        }
        nsteps = n;
        const char *app = by_app ? s.q[i].app : NULL, *host = by_host ? s.q[i].host : NULL;
        size_t k = 0;
        while (k < ng &&
               !((!app || strcmp(g[k].app, app) == 0) && (!host || strcmp(g[k].host, host) == 0)))
            k++;
        if (k == ng) {
            g[ng++] = (struct series){app, host, cpu};
            continue;
        }
        for (size_t j = 0; j < n; j++)
            sat__acc(&g[k].cpu[j], cpu[j]);
        free(cpu);
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
        ret = answer_json(h, c, &b, series_json(&b, g, ng, nsteps, from_ms, step / 1e6));
    } else {
        ret = series_pb(h, c, g, ng, nsteps, from_ms, step / 1e6);
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
    scope__free(&s);
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
    struct scope s;
    struct store_merged **parts = NULL, *all = NULL, *one;
    struct connect_flame f = {0};
    size_t nparts = 0;
    char msg[512];
    int status = 400, err;
    enum MHD_Result ret;

    memset(&s, 0, sizeof(s));
    const struct ptype *t = profile_type_of(r, msg, sizeof(msg));
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
    scope__free(&s);
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

/* The HTTP API's reads (applications, labels, profile, timeline) and
 * /metrics: each parses its query, asks the store and writes its answer.
 * The daemon, the routing, ingest and the UI's files are http.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/json.h"
#include "breakdown.h"
#include "fn_timeline.h"
#include "debuginfod.h"
#include "http_int.h"
#include "query.h"
#include "query_focus.h"
#include "query_search.h"

static const char *const reject_names[] = {"bad_request", "unauthorized", "too_large", "not_found",
                                           "internal"};

static int parse_range(struct MHD_Connection *c, int64_t *from, int64_t *to, char *msg, size_t n)
{
    int64_t now = (int64_t)clock__real_ns();
    const char *f = http_arg(c, "from"), *t = http_arg(c, "to");

    *to = now;
    *from = now - 3600ll * 1000000000ll;
    if (f && query__parse_time(f, now, from)) {
        snprintf(msg, n, "from: '%s' is neither Unix seconds nor now-DURATION", f);
        return -1;
    }
    if (t && query__parse_time(t, now, to)) {
        snprintf(msg, n, "to: '%s' is neither Unix seconds nor now-DURATION", t);
        return -1;
    }
    if (*to <= *from) {
        snprintf(msg, n, "from must be before to");
        return -1;
    }
    return 0;
}

/* Appends ,"key":["v",...] (without the comma when first), each value JSON-escaped. */
static int json_strs(struct buf *b, const char *key, char *const *v, size_t n, bool first)
{
    int err = json__raw(b, first ? "\"" : ",\"");
    err = err ?: json__raw(b, key);
    err = err ?: json__raw(b, "\":[");
    for (size_t i = 0; i < n && !err; i++) {
        err = i ? json__raw(b, ",") : 0;
        err = err ?: json__str(b, v[i]);
    }
    return err ?: json__raw(b, "]");
}

/* type=cpu|off_cpu|wall (absent: cpu). Returns 0 or -1 with msg. */
static int value_of(struct MHD_Connection *c, enum store_value *v, char *msg, size_t n)
{
    const char *t = http_arg(c, "type");

    if (query__parse_value(t, v)) {
        snprintf(msg, n, "type: '%.60s' is none of cpu, off_cpu, wall", t);
        return -1;
    }
    return 0;
}

/* Orders apps by their value of *v (ctx), most first, then by name. */
static int cmp_app_value(const void *a, const void *b, void *ctx)
{
    const struct store_app *x = a, *y = b;
    enum store_value v = *(const enum store_value *)ctx;
    int64_t vx = store_value__of(v, x->cpu_ns, x->off_cpu_ns);
    int64_t vy = store_value__of(v, y->cpu_ns, y->off_cpu_ns);
    if (vx != vy)
        return vx > vy ? -1 : 1;
    return strcmp(x->name, y->name);
}

enum MHD_Result http_api__applications(struct http *h, struct MHD_Connection *c)
{
    int64_t from, to;
    struct store_app *apps;
    size_t n;
    char msg[256];
    struct buf b;
    int err;

    enum store_value v;

    if (parse_range(c, &from, &to, msg, sizeof(msg)) || value_of(c, &v, msg, sizeof(msg)))
        return http_respond_error(h, c, 400, msg);
    if ((err = store__applications(h->st, from, to, &apps, &n)))
        return http_respond_error(h, c, err == -EAGAIN ? 503 : 500, strerror(-err));
    if (n)
        qsort_r(apps, n, sizeof(*apps), cmp_app_value, &v);
    buf__init(&b, 64u << 20);
    err = json__raw(&b, "{\"applications\":[");
    for (size_t i = 0; i < n && !err; i++) {
        err = json__raw(&b, i ? ",{\"name\":" : "{\"name\":");
        err = err ?: json__str(&b, apps[i].name);
        err = err ?: json_strs(&b, "hosts", apps[i].hosts, apps[i].nhosts, false);
        err = err ?: json__raw(&b, ",\"last_seen\":");
        err = err ?: json__f64(&b, apps[i].last_seen_ns / 1e9);
        err = err ?: json__raw(&b, ",\"cpu_cores\":");
        err = err ?: json__f64(&b, (double)apps[i].cpu_ns / (double)(to - from));
        err = err ?: json__raw(&b, ",\"off_cpu_cores\":");
        err = err ?: json__f64(&b, (double)apps[i].off_cpu_ns / (double)(to - from));
        err = err ?: json__raw(&b, "}");
    }
    err = err ?: json__raw(&b, "]}\n");
    store_apps__free(apps, n);
    if (err) {
        buf__free(&b);
        return http_respond_error(h, c, 500, "response too large");
    }
    return http_respond_buf(c, 200, "application/json", &b);
}

/* The label.KEY=VALUE arguments: the profile's other labels to match. */
struct label_args {
    struct store_label_match *m; /* STORE_MAX_LABELS */
    size_t n;
    const char *bad; /* what is wrong, when something is */
};

static enum MHD_Result label_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    struct label_args *a = cls;

    (void)kind;
    if (strncmp(key, "label.", 6))
        return MHD_YES;
    key += 6;
    if (!*key || !value || !*value)
        a->bad = "label.KEY=VALUE: a key and a value";
    else if (a->n == STORE_MAX_LABELS)
        a->bad = "label.KEY=VALUE: at most 16";
    else
        a->m[a->n++] = (struct store_label_match){key, value, 0};
    return a->bad ? MHD_NO : MHD_YES;
}

/* q from the request: app, range, host, pid, identity labels and
 * label.KEY=VALUE (into m, STORE_MAX_LABELS entries). */
static int query_of(struct MHD_Connection *c, struct store_query *q, struct store_label_match *m,
                    char *msg, size_t n)
{
    struct label_args la = {m, 0, NULL};

    memset(q, 0, sizeof(*q));
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, label_arg, &la);
    if (la.bad) {
        snprintf(msg, n, "%s", la.bad);
        return -1;
    }
    q->match = m;
    q->nmatch = la.n;
    q->app = http_arg(c, "app");
    if (!q->app || !*q->app) {
        snprintf(msg, n, "app: required");
        return -1;
    }
    q->host = http_arg(c, "host");
    if (q->host && !*q->host)
        q->host = NULL;
    if (http_parse_pid(http_arg(c, "pid"), &q->pid)) {
        snprintf(msg, n, "pid: not a process id");
        return -1;
    }
    for (int i = 0; i < STORE_N_IDENTITY; i++) {
        q->identity[i] = http_arg(c, store_identity_keys[i]);
        if (q->identity[i] && !*q->identity[i])
            q->identity[i] = NULL;
    }
    if (value_of(c, &q->value, msg, n))
        return -1;
    return parse_range(c, &q->from_ns, &q->to_ns, msg, n);
}

static int cmp_pair(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends ,"labels":{"key":["value",...],...}: the profiles' other labels
 * (v->labels, "key=value" pairs, sorted here). */
static int json_other_labels(struct buf *b, struct store_values *v)
{
    int err = json__raw(b, ",\"labels\":{");
    size_t kl = 0;

    if (v->nlabels)
        qsort(v->labels, v->nlabels, sizeof(*v->labels), cmp_pair);
    for (size_t i = 0; i < v->nlabels && !err; i++) {
        const char *p = v->labels[i], *eq = strchr(p, '=');
        if (!eq)
            continue;
        bool same = i && kl == (size_t)(eq - p) && strncmp(v->labels[i - 1], p, kl) == 0 &&
                    v->labels[i - 1][kl] == '=';
        if (!same) {
            char key[STORE_LABEL_KEY_MAX + 1];
            kl = (size_t)(eq - p);
            snprintf(key, sizeof(key), "%.*s", (int)kl, p);
            err = json__raw(b, i ? "]," : "");
            err = err ?: json__str(b, key);
            err = err ?: json__raw(b, ":[");
        } else {
            err = json__raw(b, ",");
        }
        err = err ?: json__str(b, eq + 1);
    }
    return err ?: json__raw(b, v->nlabels ? "]}" : "}");
}

enum MHD_Result http_api__labels(struct http *h, struct MHD_Connection *c)
{
    struct store_query q;
    struct store_label_match lm[STORE_MAX_LABELS];
    struct store_values *v = NULL;
    char msg[256];
    struct buf b;
    int err;

    if (query_of(c, &q, lm, msg, sizeof(msg)))
        return http_respond_error(h, c, 400, msg);
    if ((err = store__values(h->st, &q, &v)))
        return http_respond_error(h, c, err == -EAGAIN ? 503 : 500, strerror(-err));
    buf__init(&b, 64u << 20);
    err = json__raw(&b, "{");
    err = err ?: json_strs(&b, "host", v->v[0], v->n[0], true);
    err = err ?: json_strs(&b, "pid", v->v[1], v->n[1], false);
    for (int i = 0; i < STORE_N_IDENTITY && !err; i++)
        err = json_strs(&b, store_identity_keys[i], v->v[i + 2], v->n[i + 2], false);
    err = err ?: json_other_labels(&b, v);
    err = err ?: json__raw(&b, "}\n");
    store_values__free(v);
    if (err) {
        buf__free(&b);
        return http_respond_error(h, c, 500, "response too large");
    }
    return http_respond_buf(c, 200, "application/json", &b);
}

enum MHD_Result http_api__profile(struct http *h, struct MHD_Connection *c)
{
    struct store_query q;
    struct store_label_match lm[STORE_MAX_LABELS];
    struct store_merged *m = NULL;
    char msg[256];
    struct buf b;
    int err;
    const char *format = http_arg(c, "format"), *mn = http_arg(c, "max_nodes");
    const char *interp = http_arg(c, "interp"), *focus = http_arg(c, "focus");
    const char *search = http_arg(c, "search"); /* query_search.h */
    size_t max_nodes = 0;

    if (query_of(c, &q, lm, msg, sizeof(msg)))
        return http_respond_error(h, c, 400, msg);
    if (!format)
        format = "pprof";
    if (strcmp(format, "pprof") && strcmp(format, "collapsed") && strcmp(format, "flamegraph"))
        return http_respond_error(h, c, 400, "format: pprof, collapsed or flamegraph");
    if (mn) {
        char *end;
        long long v = strtoll(mn, &end, 10);
        if (end == mn || *end || v < 1)
            return http_respond_error(h, c, 400, "max_nodes: a whole number above 0");
        max_nodes = v;
    }
    if (interp && strcmp(interp, "hidden") && strcmp(interp, "shown"))
        return http_respond_error(h, c, 400, "interp: hidden or shown");
    struct store_merged none = {0}; /* focus= checked before any work */
    if (focus && (strlen(focus) > QUERY_FOCUS_MAX_BYTES || query__focus(&none, focus) < 0))
        return http_respond_error(
            h, c, 400,
            "focus: function names joined by ';', none empty, at most " QUERY_FOCUS_MAX_DEPTH_S
            " of them, " QUERY_FOCUS_MAX_BYTES_S " bytes");
    if (search && strcmp(format, "flamegraph"))
        return http_respond_error(h, c, 400, "search: with format=flamegraph only");
    if (search && query__search_check(search, msg, sizeof(msg)))
        return http_respond_error(h, c, 400, msg);
    int64_t t0 = (int64_t)clock__mono_ns();
    if ((err = store__merge(h->st, &q, &m)))
        return http_respond_error(h, c, err == -EAGAIN ? 503 : 500, strerror(-err));
    /* Interpreter frames without a name are folded unless asked for. */
    if ((!interp || strcmp(interp, "shown")) && query__hide_interp(m) < 0) {
        store_merged__free(m);
        return http_respond_error(h, c, 500, strerror(ENOMEM));
    }
    /* Only the stacks under one frame: a subtree the UI zooms into. */
    if (focus)
        query__focus(m, focus); /* checked above: cannot fail */
    buf__init(&b, 1u << 30);
    const char *type;
    if (strcmp(format, "pprof") == 0) {
        err = query__write_pprof(m, q.from_ns, q.to_ns, &b);
        type = "application/octet-stream";
    } else if (strcmp(format, "collapsed") == 0) {
        err = query__write_collapsed(m, &b);
        type = "text/plain; charset=utf-8";
    } else if (search) {
        err = query__write_search(m, search, 0, &b); /* checked above */
        type = "application/json";
    } else {
        err = query__write_flamegraph(m, max_nodes, &b);
        type = "application/json";
    }
    store_merged__free(m);
    http_count(&h->m.queries, 1);
    http_count(&h->m.query_ns, (int64_t)clock__mono_ns() - t0);
    if (err) {
        buf__free(&b);
        return http_respond_error(h, c, 500, strerror(-err));
    }
    return http_respond_buf(c, 200, type, &b);
}

/* Appends "KEY":[...]: a value per step over the step (cores busy for
 * CPU, threads blocked for off-CPU, both for wall). */
static int json_series(struct buf *b, const char *key, const int64_t *cpu, size_t n, int64_t step)
{
    int err = json__str(b, key);
    err = err ?: json__raw(b, ":[");
    for (size_t i = 0; i < n && !err; i++) {
        err = i ? json__raw(b, ",") : 0;
        err = err ?: json__f64(b, (double)cpu[i] / (double)step);
    }
    return err ?: json__raw(b, "]");
}

/* "TYPE_cores":[...], TYPE v's name (cpu, off_cpu, wall). */
static int json_cores(struct buf *b, enum store_value v, const int64_t *cpu, size_t n, int64_t step)
{
    char key[32];

    snprintf(key, sizeof(key), "%s_cores", query__value_name(v));
    return json_series(b, key, cpu, n, step);
}

/* ,"fn":NAME,"self_cores":[...],"total_cores":[...]: a function over time.
 * Returns 0, the store's -errno, or 1 when b is full. */
static int json_fn(struct http *h, const struct store_query *q, const char *fn, bool hide,
                   int64_t step, struct buf *b)
{
    int64_t *self = NULL, *total = NULL;
    size_t n = 0;
    int err = fn_timeline__get(h->st, q, step, fn, hide, &self, &total, &n);
    if (err)
        return err;
    err = json__raw(b, ",\"fn\":");
    err = err ?: json__str(b, fn);
    err = err ?: json__raw(b, ",");
    err = err ?: json_series(b, "self_cores", self, n, step);
    err = err ?: json__raw(b, ",");
    err = err ?: json_series(b, "total_cores", total, n, step);
    free(self);
    free(total);
    return err ? 1 : 0;
}

/* ,"group_by":LABEL,"values":N,"capped":B,"groups":[{"value":V|null,
 * "share":S,"TYPE_cores":[...]},...], TYPE v's name (cpu, off_cpu, wall) */
static int json_groups(struct buf *b, enum store_value v, const char *label,
                       const struct breakdown *bd, int64_t step)
{
    int err = json__raw(b, ",\"group_by\":");
    err = err ?: json__str(b, label);
    err = err ?: json__raw(b, ",\"values\":");
    err = err ?: json__f64(b, (double)bd->nvalues);
    err = err ?: json__raw(b, bd->capped ? ",\"capped\":true" : ",\"capped\":false");
    err = err ?: json__raw(b, ",\"groups\":[");
    for (size_t g = 0; g < bd->ngroups && !err; g++) {
        const struct breakdown_group *x = &bd->groups[g];
        err = json__raw(b, g ? ",{\"value\":" : "{\"value\":");
        err = err ?: (x->value ? json__str(b, x->value) : json__raw(b, "null"));
        err = err ?: json__raw(b, ",\"share\":");
        err = err ?: json__f64(b, bd->total_ns ? (double)x->total_ns / (double)bd->total_ns : 0);
        err = err ?: json__raw(b, ",");
        err = err ?: json_cores(b, v, x->cpu_ns, bd->nsteps, step);
        err = err ?: json__raw(b, "}");
    }
    return err ?: json__raw(b, "]");
}

enum MHD_Result http_api__timeline(struct http *h, struct MHD_Connection *c)
{
    struct store_query q;
    struct store_label_match lm[STORE_MAX_LABELS];
    char msg[256];
    int64_t step = 60ll * 1000000000ll, *cpu = NULL;
    size_t n = 0, top = 10;
    struct breakdown *bd = NULL;
    struct buf b;
    int err, label = -1;

    if (query_of(c, &q, lm, msg, sizeof(msg)))
        return http_respond_error(h, c, 400, msg);
    const char *s = http_arg(c, "step"), *gb = http_arg(c, "group_by"), *tp = http_arg(c, "top");
    const char *fn = http_arg(c, "fn"), *interp = http_arg(c, "interp");
    if (s && (query__parse_duration(s, &step) || step < 1000000000ll))
        return http_respond_error(h, c, 400, "step: a duration of at least 1s (60, 60s, 5m, 1h)");
    if ((q.to_ns - q.from_ns) / step > 10000)
        return http_respond_error(h, c, 400, "step: more than 10000 steps; take a larger step");
    if (gb && *gb && (label = breakdown__label_index(gb)) < 0)
        return http_respond_error(h, c, 400,
                                  "group_by: host, pid, container_id, pod, namespace, container, "
                                  "systemd_unit or another label of the profiles (region, ...)");
    if (tp) {
        char *end;
        long long v = strtoll(tp, &end, 10);
        if (end == tp || *end || v < 1 || v > BREAKDOWN_MAX_TOP)
            return http_respond_error(h, c, 400, "top: a whole number from 1 to 50");
        top = (size_t)v;
    }
    if (fn && (!*fn || label >= 0))
        return http_respond_error(h, c, 400,
                                  *fn ? "fn: not with group_by" : "fn: a function's name");
    if (interp && strcmp(interp, "hidden") && strcmp(interp, "shown"))
        return http_respond_error(h, c, 400, "interp: hidden or shown");
    if (label >= 0) {
        /* By label: one store read per value (at most STORE_MAX_VALUES). */
        if ((err = breakdown__timeline(h->st, &q, step, label, gb, top, &bd)))
            return http_respond_error(h, c, err == -EAGAIN ? 503 : 500, strerror(-err));
        cpu = bd->cpu_ns;
        n = bd->nsteps;
    } else if ((err = store__timeline(h->st, &q, step, &cpu, &n))) {
        return http_respond_error(h, c, err == -EAGAIN ? 503 : 500, strerror(-err));
    }
    buf__init(&b, 16u << 20);
    err = json__raw(&b, "{\"from\":");
    err = err ?: json__f64(&b, q.from_ns / 1e9);
    err = err ?: json__raw(&b, ",\"step\":");
    err = err ?: json__f64(&b, step / 1e9);
    err = err ?: json__raw(&b, ",\"type\":\"");
    err = err ?: json__raw(&b, query__value_name(q.value));
    err = err ?: json__raw(&b, "\",");
    err = err ?: json_cores(&b, q.value, cpu, n, step);
    err = err ?: (bd ? json_groups(&b, q.value, gb, bd, step) : 0);
    /* A function over time: its own read, beside the application's. */
    int ferr = err || !fn ? 0 : json_fn(h, &q, fn, !interp || strcmp(interp, "shown"), step, &b);
    err = err ?: json__raw(&b, "}\n");
    if (bd)
        breakdown__free(bd);
    else
        free(cpu);
    if (ferr < 0) {
        buf__free(&b);
        if (ferr == -E2BIG) /* only the fallback of stores without their own (fn_timeline.h) */
            return http_respond_error(h, c, 400,
                                      "step: too many steps for a function's timeline on this "
                                      "store; take a larger step");
        return http_respond_error(h, c, ferr == -EAGAIN ? 503 : 500, strerror(-ferr));
    }
    if (err || ferr) {
        buf__free(&b);
        return http_respond_error(h, c, 500, "response too large");
    }
    return http_respond_buf(c, 200, "application/json", &b);
}

enum MHD_Result http_api__metrics(struct http *h, struct MHD_Connection *c)
{
    struct buf b;
    char line[256];
    int n, err = 0;

    buf__init(&b, 1 << 20);
#define LINE(...)                                                                                  \
    do {                                                                                           \
        n = snprintf(line, sizeof(line), __VA_ARGS__);                                             \
        err = err ?: buf__append(&b, line, n);                                                     \
    } while (0)
    LINE("# TYPE codexray_profiles_ingested_total counter\n");
    LINE("codexray_profiles_ingested_total %llu\n",
         (unsigned long long)__atomic_load_n(&h->m.profiles, __ATOMIC_RELAXED));
    LINE("# TYPE codexray_bytes_ingested_total counter\n");
    LINE("codexray_bytes_ingested_total %llu\n",
         (unsigned long long)__atomic_load_n(&h->m.bytes, __ATOMIC_RELAXED));
    LINE("# TYPE codexray_batches_split_total counter\n");
    LINE("codexray_batches_split_total %llu\n",
         (unsigned long long)__atomic_load_n(&h->m.batches_split, __ATOMIC_RELAXED));
    LINE("# TYPE codexray_requests_rejected_total counter\n");
    for (int i = 0; i < REJ__COUNT; i++)
        LINE("codexray_requests_rejected_total{reason=\"%s\"} %llu\n", reject_names[i],
             (unsigned long long)__atomic_load_n(&h->m.rejects[i], __ATOMIC_RELAXED));
    LINE("# TYPE codexray_query_seconds summary\n");
    LINE("codexray_query_seconds_count %llu\n",
         (unsigned long long)__atomic_load_n(&h->m.queries, __ATOMIC_RELAXED));
    LINE("codexray_query_seconds_sum %.6f\n",
         __atomic_load_n(&h->m.query_ns, __ATOMIC_RELAXED) / 1e9);
    LINE("# TYPE codexray_store_bytes gauge\n");
    LINE("codexray_store_bytes %lld\n", (long long)store__size_bytes(h->st));
    LINE("# TYPE codexray_rollups_built_total counter\n");
    LINE("codexray_rollups_built_total %lld\n",
         (long long)__atomic_load_n(&h->m.rollups_built, __ATOMIC_RELAXED));
    LINE("# TYPE codexray_rollups_pending gauge\n");
    LINE("codexray_rollups_pending %lld\n",
         (long long)__atomic_load_n(&h->m.rollups_pending, __ATOMIC_RELAXED));
#undef LINE
    if (h->opts.debuginfod && !err)
        err = dbgsrv__metrics(h->opts.debuginfod, &b);
    if (err) {
        buf__free(&b);
        return http_respond_error(h, c, 500, "metrics too large");
    }
    return http_respond_buf(c, 200, "text/plain; version=0.0.4", &b);
}

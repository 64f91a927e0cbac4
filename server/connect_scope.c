/* A querier API call's selector and range as store queries (connect_scope.h). */
#include "connect_scope.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "http_int.h"

size_t connect_scope__values(const struct store_values *v, const char *key,
                             int (*fn)(void *ctx, const char *value), void *ctx)
{
    int k = -1;
    size_t n = 0, kl = strlen(key);
    bool stop = false;

    if (strcmp(key, "host") == 0)
        k = 0;
    else if (strcmp(key, "pid") == 0)
        k = 1;
    for (int i = 0; i < STORE_N_IDENTITY; i++)
        if (strcmp(key, store_identity_keys[i]) == 0)
            k = i + 2;
    if (k >= 0) {
        for (size_t i = 0; i < v->n[k] && !stop; i++)
            stop = fn && fn(ctx, v->v[k][i]);
        return v->n[k];
    }
    for (size_t i = 0; i < v->nlabels; i++) {
        const char *p = v->labels[i];
        if (strncmp(p, key, kl) || p[kl] != '=')
            continue;
        n++;
        if (!stop && fn)
            stop = fn(ctx, p + kl + 1);
    }
    return n;
}

void connect_scope__free(struct connect_scope *s)
{
    connect_sel__free(&s->sel);
    store_apps__free(s->apps, s->napps);
    free(s->q);
    free(s->match);
    for (size_t i = 0; i < s->nvals; i++)
        store_values__free(s->vals[i]);
    free(s->vals);
    memset(s, 0, sizeof(*s));
}

/* A name the selector may match on the profiles' labels (not
 * service_name, host, pid or the profile type's). */
static bool label_name(const char *n)
{
    size_t l = strlen(n);

    if (!l || l > STORE_LABEL_KEY_MAX)
        return false;
    for (size_t i = 0; i < l; i++)
        if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
              (n[i] >= '0' && n[i] <= '9') || n[i] == '_' || n[i] == '.' || n[i] == '-'))
            return false;
    return true;
}

static bool special(const char *n)
{
    return strcmp(n, "service_name") == 0 || strcmp(n, "host") == 0 || strcmp(n, "pid") == 0 ||
           strcmp(n, "__profile_type__") == 0 || strcmp(n, "__name__") == 0;
}

static int add_match(struct connect_scope *s, const char *key, const char *value, int negate,
                     char *msg, size_t msglen)
{
    if (s->nmatch == STORE_MAX_MATCHES) {
        snprintf(msg, msglen,
                 "label selector: its regular expressions exclude more than %d label values: "
                 "narrow them",
                 STORE_MAX_MATCHES);
        return 400;
    }
    s->match[s->nmatch++] = (struct store_label_match){key, value, negate};
    return 0;
}

struct resolve {
    struct connect_scope *s;
    const char *key;
    char *msg;
    size_t msglen;
    int status;
};

/* A value of the key that the key's matchers refuse: excluded. */
static int exclude(void *ctx, const char *value)
{
    struct resolve *r = ctx;

    if (!connect_sel__match(&r->s->sel, r->key, value))
        r->status = add_match(r->s, r->key, value, 1, r->msg, r->msglen);
    return r->status;
}

/* The store's label lists of every selected application over the range,
 * read once (for the regular expressions). */
static int read_values(struct store *st, struct connect_scope *s, char *msg, size_t msglen)
{
    if (s->vals)
        return 0;
    if (!(s->vals = calloc(s->napps + 1, sizeof(*s->vals)))) {
        snprintf(msg, msglen, "out of memory");
        return 500;
    }
    for (size_t a = 0; a < s->napps; a++) {
        if (!connect_sel__match(&s->sel, "service_name", s->apps[a].name))
            continue;
        struct store_query q = {s->apps[a].name, s->from, s->to};
        int err = store__values(st, &q, &s->vals[s->nvals]);
        if (err) {
            snprintf(msg, msglen, "%s", strerror(-err));
            return err == -EAGAIN ? 503 : 500;
        }
        s->nvals++;
    }
    return 0;
}

/* The matchers on key (not special) as store matches: = and != directly,
 * regular expressions (once per key: first) through the key's values. */
static int key_matches(struct store *st, struct connect_scope *s, const struct connect_matcher *m,
                       bool first, char *msg, size_t msglen)
{
    bool empty = !*m->value;
    int status;

    if (m->op == '=')
        return add_match(s, m->name, empty ? NULL : m->value, empty, msg, msglen);
    if (m->op == '!')
        return add_match(s, m->name, empty ? NULL : m->value, !empty, msg, msglen);
    if (!first)
        return 0;
    if ((status = read_values(st, s, msg, msglen)))
        return status;
    struct resolve r = {s, m->name, msg, msglen, 0};
    for (size_t i = 0; i < s->nvals && !r.status; i++) {
        if (connect_scope__values(s->vals[i], m->name, exclude, &r) >= STORE_MAX_VALUES) {
            snprintf(msg, msglen,
                     "label selector: %s has %d values or more in the range: match it with = "
                     "or != rather than a regular expression",
                     m->name, STORE_MAX_VALUES);
            return 400;
        }
    }
    if (r.status)
        return r.status;
    /* A profile without the label passes when "" does. */
    if (!connect_sel__match(&s->sel, m->name, ""))
        return add_match(s, m->name, NULL, 0, msg, msglen);
    return 0;
}

/* The selector's matchers checked, pid read, the labels' as matches. */
static int matchers(struct store *st, struct connect_scope *s, int64_t *pid, char *msg,
                    size_t msglen)
{
    int status;

    for (size_t i = 0; i < s->sel.n; i++) {
        const struct connect_matcher *m = &s->sel.m[i];
        if (strcmp(m->name, "pid") == 0) {
            if (m->op != '=' || http_parse_pid(m->value, pid) || !*pid) {
                snprintf(msg, msglen, "label selector: pid takes = and a process id");
                return 400;
            }
            continue;
        }
        if (special(m->name))
            continue;
        if (!label_name(m->name)) {
            snprintf(msg, msglen,
                     "label selector: %.64s is not a label name ([A-Za-z0-9_.-], at most %d bytes)",
                     m->name, STORE_LABEL_KEY_MAX);
            return 400;
        }
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = !(s->sel.m[j].has_re && strcmp(s->sel.m[j].name, m->name) == 0);
        if ((status = key_matches(st, s, m, first || !m->has_re, msg, msglen)))
            return status;
    }
    return 0;
}

const struct connect_type connect_types[CONNECT_N_TYPES] = {
    {"process_cpu:cpu:nanoseconds:cpu:nanoseconds", "process_cpu", "cpu", STORE_VALUE_CPU},
    {"off_cpu:off_cpu:nanoseconds:cpu:nanoseconds", "off_cpu", "off_cpu", STORE_VALUE_OFF_CPU},
    {"wall:wall:nanoseconds:cpu:nanoseconds", "wall", "wall", STORE_VALUE_WALL},
};

const struct connect_type *connect_type__of(const char *id)
{
    for (size_t i = 0; id && i < CONNECT_N_TYPES; i++)
        if (strcmp(id, connect_types[i].id) == 0)
            return &connect_types[i];
    return NULL;
}

/* The type sel's __profile_type__ and __name__ select: t when given
 * (NULL when they select another), else the first they match. */
static const struct connect_type *selected_type(const struct connect_sel *sel,
                                                const struct connect_type *t)
{
    for (size_t i = 0; i < CONNECT_N_TYPES; i++) {
        const struct connect_type *c = &connect_types[i];
        if ((!t || t == c) && connect_sel__match(sel, "__profile_type__", c->id) &&
            connect_sel__match(sel, "__name__", c->name))
            return c;
    }
    return NULL;
}

int connect_scope__init(struct store *st, struct connect_scope *s, const char *selector,
                        int64_t start_ms, int64_t end_ms, bool by_host,
                        const struct connect_type *t, char *msg, size_t msglen)
{
    int64_t pid = 0;
    int err, status;

    memset(s, 0, sizeof(*s));
    if (start_ms < 0 || end_ms < 0 || start_ms > 9000000000000ll || end_ms > 9000000000000ll) {
        snprintf(msg, msglen, "start, end: milliseconds since 1970 (before 2255)");
        return 400;
    }
    s->to = end_ms ? end_ms * 1000000 : (int64_t)clock__real_ns();
    s->from = start_ms ? start_ms * 1000000 : s->to - 3600ll * 1000000000ll;
    if (s->to <= s->from) {
        snprintf(msg, msglen, "start must be before end");
        return 400;
    }
    if (connect_sel__parse(selector, &s->sel, msg, msglen))
        return 400;
    for (size_t i = 0; i < s->sel.n; i++)
        by_host |= strcmp(s->sel.m[i].name, "host") == 0;
    s->by_host = by_host;
    if (!(t = selected_type(&s->sel, t)))
        return 0; /* another profile type: no series */
    if (!(s->match = calloc(STORE_MAX_MATCHES, sizeof(*s->match)))) {
        snprintf(msg, msglen, "out of memory");
        return 500;
    }
    if ((err = store__applications(st, s->from, s->to, &s->apps, &s->napps))) {
        snprintf(msg, msglen, "%s", strerror(-err));
        return err == -EAGAIN ? 503 : 500;
    }
    if ((status = matchers(st, s, &pid, msg, msglen)))
        return status;
    for (size_t a = 0; a < s->napps; a++) {
        const struct store_app *app = &s->apps[a];
        if (!connect_sel__match(&s->sel, "service_name", app->name) ||
            (t->value == STORE_VALUE_OFF_CPU && !app->off_cpu_ns))
            continue;
        for (size_t k = 0; k < (by_host ? app->nhosts : 1); k++) {
            const char *host = by_host ? app->hosts[k] : NULL;
            if (by_host && !connect_sel__match(&s->sel, "host", host))
                continue;
            if (s->nq == CONNECT_MAX_SERIES) {
                snprintf(msg, msglen, "the selector spans more than %d series: narrow it",
                         CONNECT_MAX_SERIES);
                return 400;
            }
            if (!s->q && !(s->q = calloc(CONNECT_MAX_SERIES, sizeof(*s->q)))) {
                snprintf(msg, msglen, "out of memory");
                return 500;
            }
            struct store_query *q = &s->q[s->nq++];
            *q = (struct store_query){app->name, s->from, s->to, host, pid};
            q->match = s->match;
            q->nmatch = s->nmatch;
            q->value = t->value;
        }
    }
    return 0;
}

/* The CPU by label: one timeline per value, the top ones kept (breakdown.h). */
#include "breakdown.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int breakdown__label_index(const char *label)
{
    if (!label)
        return -1;
    if (strcmp(label, "host") == 0)
        return 0;
    if (strcmp(label, "pid") == 0)
        return 1;
    for (int i = 0; i < STORE_N_IDENTITY; i++)
        if (strcmp(label, store_identity_keys[i]) == 0)
            return 2 + i;
    size_t n = strlen(label);
    if (!n || n > STORE_LABEL_KEY_MAX ||
        strspn(label, "abcdefghijklmnopqrstuvwxyz"
                      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != n)
        return -1;
    return strcmp(label, "service_name") && strncmp(label, "__", 2) ? BREAKDOWN_OTHER : -1;
}

/* The values of label (index idx) in vals, into *v (borrowed from vals),
 * their count in *n. Returns 0 or -ENOMEM. */
static int values_of(const struct store_values *vals, int idx, const char *label, const char ***v,
                     size_t *n)
{
    size_t kl = strlen(label), cnt = idx == BREAKDOWN_OTHER ? vals->nlabels : vals->n[idx];

    *n = 0;
    if (!(*v = calloc(cnt + 1, sizeof(**v))))
        return -ENOMEM;
    if (idx != BREAKDOWN_OTHER) {
        memcpy(*v, vals->v[idx], cnt * sizeof(**v));
        *n = cnt;
        return 0;
    }
    for (size_t i = 0; i < cnt; i++)
        if (strncmp(vals->labels[i], label, kl) == 0 && vals->labels[i][kl] == '=')
            (*v)[(*n)++] = vals->labels[i] + kl + 1;
    return 0;
}

void breakdown__free(struct breakdown *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->ngroups; i++) {
        free(b->groups[i].value);
        free(b->groups[i].cpu_ns);
    }
    free(b->groups);
    free(b->cpu_ns);
    free(b);
}

/* q narrowed to value v of label idx (another label: into m, q's matches
 * and one more); -EINVAL for a pid that is not one. */
static int narrow(struct store_query *q, int idx, const char *label, const char *v,
                  struct store_label_match *m)
{
    if (idx == BREAKDOWN_OTHER) {
        memcpy(m, q->match, q->nmatch * sizeof(*m));
        m[q->nmatch] = (struct store_label_match){label, v, 0};
        q->match = m;
        q->nmatch++;
    } else if (idx == 0) {
        q->host = v;
    } else if (idx == 1) {
        char *end;
        long long pid = strtoll(v, &end, 10);
        if (end == v || *end || pid <= 0)
            return -EINVAL;
        q->pid = pid;
    } else {
        q->identity[idx - 2] = v;
    }
    return 0;
}

static int64_t sum(const int64_t *v, size_t n)
{
    int64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return s;
}

/* Puts value v (its timeline cpu, taken) among b's top groups (ntop of at
 * most top, most CPU first) when it has more CPU than the last; what is
 * not kept is freed. */
static int keep_top(struct breakdown *b, size_t top, const char *v, int64_t *cpu, int64_t total)
{
    size_t n = b->ngroups;
    if (total <= 0 || (n == top && b->groups[n - 1].total_ns >= total)) {
        free(cpu);
        return 0;
    }
    char *dup = strdup(v);
    if (!dup) {
        free(cpu);
        return -ENOMEM;
    }
    if (n == top) { /* the last one makes room */
        free(b->groups[n - 1].value);
        free(b->groups[n - 1].cpu_ns);
        n--;
    }
    size_t at = n;
    while (at > 0 && b->groups[at - 1].total_ns < total)
        at--;
    memmove(&b->groups[at + 1], &b->groups[at], (n - at) * sizeof(*b->groups));
    b->groups[at] = (struct breakdown_group){dup, cpu, total};
    b->ngroups = n + 1;
    return 0;
}

int breakdown__timeline(struct store *st, const struct store_query *q, int64_t step_ns,
                        int label_idx, const char *label, size_t top, struct breakdown **out)
{
    struct breakdown *b = NULL;
    struct store_values *vals = NULL;
    struct store_label_match *m = NULL;
    const char **vs = NULL;
    size_t nv = 0;
    int err = 0;

    *out = NULL;
    if (label_idx < 0 || label_idx > BREAKDOWN_OTHER || top < 1 || top > BREAKDOWN_MAX_TOP ||
        q->nmatch >= STORE_MAX_MATCHES)
        return -EINVAL;
    b = calloc(1, sizeof(*b));
    if (!b || !(b->groups = calloc(top + 1, sizeof(*b->groups))) ||
        !(m = calloc(q->nmatch + 1, sizeof(*m)))) {
        err = -ENOMEM;
        goto out;
    }
    if ((err = store__timeline(st, q, step_ns, &b->cpu_ns, &b->nsteps)))
        goto out;
    b->total_ns = sum(b->cpu_ns, b->nsteps);
    if ((err = store__values(st, q, &vals)) || (err = values_of(vals, label_idx, label, &vs, &nv)))
        goto out;
    b->nvalues = nv;
    b->capped = (label_idx == BREAKDOWN_OTHER ? vals->nlabels : nv) >= STORE_MAX_VALUES;
    for (size_t i = 0; i < nv; i++) {
        const char *v = vs[i];
        struct store_query qv = *q;
        int64_t *cpu;
        size_t n;
        if (narrow(&qv, label_idx, label, v, m))
            continue; /* not a pid: no profile can have it */
        if ((err = store__timeline(st, &qv, step_ns, &cpu, &n)))
            goto out;
        if (n != b->nsteps) { /* the same range and step: never */
            free(cpu);
            err = -EIO;
            goto out;
        }
        if ((err = keep_top(b, top, v, cpu, sum(cpu, n))))
            goto out;
    }
    /* Other: the whole less the top values, never below 0 a step. */
    int64_t *other = malloc((b->nsteps ? b->nsteps : 1) * sizeof(*other));
    if (!other) {
        err = -ENOMEM;
        goto out;
    }
    for (size_t s = 0; s < b->nsteps; s++) {
        int64_t o = b->cpu_ns[s];
        for (size_t g = 0; g < b->ngroups; g++)
            o -= b->groups[g].cpu_ns[s];
        other[s] = o > 0 ? o : 0;
    }
    int64_t ot = sum(other, b->nsteps);
    if (ot > 0)
        b->groups[b->ngroups++] = (struct breakdown_group){NULL, other, ot};
    else
        free(other);
out:
    free(vs);
    free(m);
    store_values__free(vals);
    if (err) {
        breakdown__free(b);
        return err;
    }
    *out = b;
    return 0;
}

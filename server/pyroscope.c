#include "pyroscope.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../common/hmap.h"
#include "../common/pprof/pprof_writer.h"
#include "store_common.h"
#include "text.h"

/* --- the name --- */

static bool key_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == '-';
}

int pyro_name__parse(const char *name, size_t max, struct pyro_name *n, char *msg, size_t msglen)
{
    memset(n, 0, sizeof(*n));
    if (!name || !*name) {
        snprintf(msg, msglen, "no name: give name=APP or name=APP{key=value,...}");
        return -1;
    }
    n->copy = strdup(name);
    if (!n->copy) {
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    char *p = n->copy, *brace = strchr(p, '{');
    if (brace) {
        size_t l = strlen(brace);
        if (brace[l - 1] != '}') {
            snprintf(msg, msglen, "name: the labels' '{' has no closing '}' at its end");
            goto bad;
        }
        brace[l - 1] = '\0';
        *brace = '\0';
    }
    size_t al = strlen(p);
    if (al >= 4 && strcmp(p + al - 4, ".cpu") == 0)
        p[al -= 4] = '\0';
    if (al == 0 || al > max || strchr(p, '}')) {
        snprintf(msg, msglen, "name: the application must be 1 to %zu bytes before '{'", max);
        goto bad;
    }
    n->app = p;
    for (char *q = brace ? brace + 1 : NULL; q && *q;) {
        char *end = strchr(q, ',');
        if (end)
            *end = '\0';
        if (*q) {
            char *eq = strchr(q, '=');
            if (!eq || eq == q) {
                snprintf(msg, msglen, "name: a label is not key=value");
                goto bad;
            }
            *eq = '\0';
            for (const char *k = q; *k; k++)
                if (!key_char(*k)) {
                    snprintf(msg, msglen,
                             "name: a label's key has a character other than "
                             "[A-Za-z0-9_.-]");
                    goto bad;
                }
            const char *v = eq + 1;
            if (strpbrk(v, "{}=")) {
                snprintf(msg, msglen, "name: label %.64s: a value with '{', '}' or '='", q);
                goto bad;
            }
            if (strlen(q) > max || strlen(v) > max) {
                snprintf(msg, msglen, "name: label %.64s: longer than %zu bytes", q, max);
                goto bad;
            }
            if (pyro_name__label(n, q)) {
                snprintf(msg, msglen, "name: label %.64s given twice", q);
                goto bad;
            }
            if (n->nlabels == PYRO_MAX_LABELS) {
                snprintf(msg, msglen, "name: more than %d labels", PYRO_MAX_LABELS);
                goto bad;
            }
            n->labels[n->nlabels++] = (struct pyro_label){q, v};
        }
        q = end ? end + 1 : NULL;
    }
    return 0;
bad:
    pyro_name__free(n);
    return -1;
}

void pyro_name__free(struct pyro_name *n)
{
    if (!n)
        return;
    free(n->copy);
    memset(n, 0, sizeof(*n));
}

const char *pyro_name__label(const struct pyro_name *n, const char *key)
{
    for (size_t i = 0; n && i < n->nlabels; i++)
        if (strcmp(n->labels[i].key, key) == 0)
            return n->labels[i].value;
    return NULL;
}

int pyro_name__labels(const struct pyro_name *n, bool host_from_hostname, struct store_label *out,
                      size_t *nout, char *msg, size_t msglen)
{
    *nout = 0;
    for (size_t i = 0; i < n->nlabels; i++) {
        const struct pyro_label *l = &n->labels[i];
        if (store_label__reserved(l->key) || strncmp(l->key, "__", 2) == 0 ||
            (host_from_hostname && strcmp(l->key, "hostname") == 0))
            continue;
        if (*nout == STORE_MAX_LABELS) {
            snprintf(msg, msglen,
                     "name: more than %d labels besides host, pid and the identity "
                     "labels",
                     STORE_MAX_LABELS);
            return -1;
        }
        if (strlen(l->key) > STORE_LABEL_KEY_MAX) {
            snprintf(msg, msglen, "name: label %.64s...: a key longer than %d bytes", l->key,
                     STORE_LABEL_KEY_MAX);
            return -1;
        }
        const char *why = text__label_problem(l->value, STORE_LABEL_VALUE_MAX);
        if (why) {
            snprintf(msg, msglen,
                     "name: label %s: a value %s (at most %d bytes of UTF-8 without "
                     "control characters)",
                     l->key, why, STORE_LABEL_VALUE_MAX);
            return -1;
        }
        out[(*nout)++] = (struct store_label){l->key, l->value};
    }
    return 0;
}

/* --- the distinct values of other labels --- */

struct pyro_card {
    pthread_mutex_t mu;
    size_t max_keys, max_values;
    struct hmap *keys;  /* key -> its count of values (the value slot) */
    struct hmap *pairs; /* "key\0value" */
};

struct pyro_card *pyro_card__new(size_t max_keys, size_t max_values)
{
    struct pyro_card *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    pthread_mutex_init(&c->mu, NULL);
    if (!(c->keys = hmap__new()) || !(c->pairs = hmap__new())) {
        pyro_card__free(c);
        return NULL;
    }
    c->max_keys = max_keys;
    c->max_values = max_values;
    return c;
}

/* "key\0value" into b (STORE_LABEL_KEY_MAX + STORE_LABEL_VALUE_MAX + 2). */
static size_t pair_of(char *b, const struct store_label *l)
{
    size_t kl = strlen(l->key), vl = strlen(l->value);

    memcpy(b, l->key, kl + 1);
    memcpy(b + kl + 1, l->value, vl);
    return kl + 1 + vl;
}

int pyro_card__take(struct pyro_card *c, const struct store_label *l, size_t n, bool check_only,
                    char *msg, size_t msglen)
{
    char pb[STORE_LABEL_KEY_MAX + STORE_LABEL_VALUE_MAX + 2];
    size_t new_keys = 0;
    int err = 0;

    pthread_mutex_lock(&c->mu);
    /* First whether all fit (a key's new values in this profile: one, its
     * keys being distinct), then take them. */
    for (size_t i = 0; i < n && !err; i++) {
        if (strlen(l[i].key) > STORE_LABEL_KEY_MAX || strlen(l[i].value) > STORE_LABEL_VALUE_MAX) {
            snprintf(msg, msglen, "label %.64s: too long", l[i].key);
            err = -1;
            break;
        }
        if (hmap__find(c->pairs, pb, pair_of(pb, &l[i])) >= 0)
            continue;
        long k = hmap__find(c->keys, l[i].key, strlen(l[i].key));
        if (k < 0 && hmap__len(c->keys) + ++new_keys > c->max_keys) {
            snprintf(msg, msglen,
                     "label %s: the server already has %zu label keys besides the identity: "
                     "refused to keep the label lists bounded (use fewer distinct keys)",
                     l[i].key, c->max_keys);
            err = -1;
        } else if (k >= 0 && *hmap__val(c->keys, (size_t)k) >= c->max_values) {
            snprintf(msg, msglen,
                     "label %s: already %zu distinct values: refused to keep the label lists "
                     "bounded (a label is for a few values, such as a region, not an id)",
                     l[i].key, c->max_values);
            err = -1;
        }
    }
    for (size_t i = 0; i < n && !err && !check_only; i++) {
        bool fresh;
        if (hmap__put(c->pairs, pb, pair_of(pb, &l[i]), &fresh) < 0) {
            snprintf(msg, msglen, "out of memory");
            err = -1;
        } else if (fresh) {
            long k = hmap__put(c->keys, l[i].key, strlen(l[i].key), &fresh);
            if (k < 0) {
                snprintf(msg, msglen, "out of memory");
                err = -1;
            } else {
                (*hmap__val(c->keys, (size_t)k))++;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    return err;
}

void pyro_card__free(struct pyro_card *c)
{
    if (!c)
        return;
    hmap__free(c->keys);
    hmap__free(c->pairs);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* --- from, until --- */

int pyro_time__parse(const char *s, int64_t *ns)
{
    uint64_t v = 0;
    size_t d = 0;

    if (!s)
        return -1;
    for (; s[d]; d++) {
        if (s[d] < '0' || s[d] > '9' || d == 19)
            return -1;
        v = v * 10 + (uint64_t)(s[d] - '0'); /* 19 digits fit 64 bits */
    }
    if (d == 0)
        return -1;
    uint64_t scale = d <= 10 ? 1000000000ull : d <= 13 ? 1000000ull : d <= 16 ? 1000ull : 1;
    if (v > (uint64_t)INT64_MAX / scale)
        return -1;
    *ns = (int64_t)(v * scale);
    return 0;
}

/* --- multipart/form-data --- */

/* The boundary of content_type into out (at most 70 characters, RFC
 * 2046), quoted or not. Returns its length, or 0 when there is none. */
static size_t boundary_of(const char *ct, char *out, size_t outlen)
{
    if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0)
        return 0;
    for (const char *p = ct + 19; (p = strchr(p, ';'));) {
        for (p++; *p == ' ' || *p == '\t';)
            p++;
        if (strncasecmp(p, "boundary=", 9) != 0)
            continue;
        p += 9;
        bool quoted = *p == '"';
        p += quoted;
        size_t l = 0;
        while (p[l] && (quoted ? p[l] != '"' : p[l] != ';' && p[l] != ' ' && p[l] != '\t'))
            l++;
        if (l == 0 || l > 70 || l >= outlen)
            return 0;
        memcpy(out, p, l);
        out[l] = '\0';
        return l;
    }
    return 0;
}

static const char *find(const char *p, const char *end, const char *s, size_t sl)
{
    return end - p >= (ptrdiff_t)sl ? memmem(p, end - p, s, sl) : NULL;
}

/* The name="..." of a part's Content-Disposition among its headers
 * [h, hend), into out; false when it has none. */
static bool part_name(const char *h, const char *hend, char *out, size_t outlen)
{
    for (const char *line = h; line < hend;) {
        const char *eol = find(line, hend, "\r\n", 2);
        if (!eol)
            eol = hend;
        if ((size_t)(eol - line) > 20 && strncasecmp(line, "Content-Disposition:", 20) == 0) {
            for (const char *p = line + 20; p + 6 <= eol; p++) {
                if (strncmp(p, "name=\"", 6) != 0 || (p[-1] != ' ' && p[-1] != ';'))
                    continue;
                p += 6;
                const char *q = memchr(p, '"', eol - p);
                if (!q || (size_t)(q - p) >= outlen)
                    return false;
                memcpy(out, p, q - p);
                out[q - p] = '\0';
                return true;
            }
        }
        line = eol + 2;
    }
    return false;
}

int pyro_multipart__part(const void *body, size_t len, const char *content_type, const char *name,
                         const void **part, size_t *plen, char *msg, size_t msglen)
{
    char b[80], delim[84];
    size_t bl = boundary_of(content_type, b, sizeof(b));

    if (!bl) {
        snprintf(msg, msglen, "multipart/form-data without a boundary of 1 to 70 characters");
        return -EINVAL;
    }
    /* "--B" opens the first part; "\r\n--B" each next one, "--" after it
     * the end. */
    size_t dl = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", b);
    const char *p = body, *end = p + len;
    if (len < dl - 2 || memcmp(p, delim + 2, dl - 2) != 0) {
        snprintf(msg, msglen, "multipart: the body does not start with its boundary");
        return -EINVAL;
    }
    p += dl - 2;
    for (int n = 0;; n++) {
        if (end - p >= 2 && p[0] == '-' && p[1] == '-')
            return -ENOENT; /* the closing boundary */
        if (n == PYRO_MAX_PARTS) {
            snprintf(msg, msglen, "multipart: more than %d parts", PYRO_MAX_PARTS);
            return -E2BIG;
        }
        /* the boundary line's end, then headers up to a blank line */
        const char *hend =
            end - p >= 2 && p[0] == '\r' && p[1] == '\n' ? find(p, end, "\r\n\r\n", 4) : NULL;
        if (!hend) {
            snprintf(msg, msglen, "multipart: part %d has no end of its headers", n + 1);
            return -EINVAL;
        }
        const char *h = p, *data = hend + 4;
        const char *next = find(data, end, delim, dl);
        if (!next) {
            snprintf(msg, msglen, "multipart: part %d has no boundary after it", n + 1);
            return -EINVAL;
        }
        char pn[128];
        if (part_name(h + 2, hend, pn, sizeof(pn)) && strcmp(pn, name) == 0) {
            *part = data;
            *plen = next - data;
            return 0;
        }
        p = next + dl;
    }
}

/* --- folded lines --- */

/* One line's count: a positive decimal number of at most 18 digits. */
static int line_count(const char *p, const char *end, int64_t *v)
{
    int64_t n = 0;
    size_t d = 0;

    for (; p < end; p++, d++) {
        if (*p < '0' || *p > '9' || d == 18)
            return -1;
        n = n * 10 + (*p - '0');
    }
    if (d == 0 || n == 0)
        return -1;
    *v = n;
    return 0;
}

/* One line [p, end) (no '\n') added to w: its frames, root first, become
 * locations leaf first. frame: room for max_frame_bytes + 1. */
static int folded_line(struct pprof_writer *w, const char *p, const char *end, size_t lineno,
                       int64_t period_ns, const struct pyro_folded_limits *lim, uint64_t *locs,
                       char *frame, size_t *frames, char *msg, size_t msglen)
{
    const char *sp = end;
    int64_t count, values[2];

    while (sp > p && sp[-1] != ' ')
        sp--;
    if (sp == p || line_count(sp, end, &count)) {
        snprintf(msg, msglen, "line %zu: not 'frame;frame;... COUNT' with a positive count",
                 lineno);
        return -EINVAL;
    }
    if (__builtin_mul_overflow(count, period_ns, &values[1])) {
        snprintf(msg, msglen, "line %zu: count x period past 64 bits", lineno);
        return -EINVAL;
    }
    values[0] = count;
    end = sp - 1; /* the stack, before the space */
    size_t n = 0;
    for (const char *f = p; f <= end;) {
        const char *semi = memchr(f, ';', end - f);
        const char *fe = semi ? semi : end;
        if (fe == f || memchr(f, '\0', fe - f)) {
            snprintf(msg, msglen, "line %zu: an empty frame or a NUL", lineno);
            return -EINVAL;
        }
        if ((size_t)(fe - f) > lim->max_frame_bytes) {
            snprintf(msg, msglen, "line %zu: a frame longer than %zu bytes", lineno,
                     lim->max_frame_bytes);
            return -E2BIG;
        }
        if (n == lim->max_depth) {
            snprintf(msg, msglen, "line %zu: deeper than %zu frames", lineno, lim->max_depth);
            return -E2BIG;
        }
        if (++*frames > lim->max_frames) {
            snprintf(msg, msglen, "line %zu: more than %zu frames in all lines", lineno,
                     lim->max_frames);
            return -E2BIG;
        }
        memcpy(frame, f, fe - f);
        frame[fe - f] = '\0';
        struct pprof_line ln = {.function = frame};
        if (!(locs[n++] = pprof_writer__location(w, 0, 0, &ln, 1)))
            return -ENOMEM;
        f = fe + 1;
    }
    for (size_t i = 0; i < n / 2; i++) { /* root first to leaf first */
        uint64_t t = locs[i];
        locs[i] = locs[n - 1 - i];
        locs[n - 1 - i] = t;
    }
    return pprof_writer__add_sample(w, locs, n, values, NULL, 0) ? -ENOMEM : 0;
}

int pyro_folded__to_pprof(const void *body, size_t len, int64_t period_ns, int64_t time_ns,
                          int64_t duration_ns, const struct pyro_folded_limits *lim,
                          struct buf *out, char *msg, size_t msglen)
{
    struct pprof_writer *w = pprof_writer__new();
    uint64_t *locs = calloc(lim->max_depth + 1, sizeof(*locs));
    char *frame = malloc(lim->max_frame_bytes + 1);
    const char *p = body, *end = p + len;
    size_t lineno = 0, lines = 0, frames = 0;
    int err = -ENOMEM;

    if (!w || !locs || !frame)
        goto out;
    pprof_writer__add_sample_type(w, "samples", "count");
    pprof_writer__add_sample_type(w, "cpu", "nanoseconds");
    pprof_writer__set_period(w, "cpu", "nanoseconds", period_ns);
    pprof_writer__set_time(w, time_ns, duration_ns);
    while (p < end) {
        const char *nl = memchr(p, '\n', end - p), *le = nl ? nl : end;
        lineno++;
        if (le > p && le[-1] == '\r')
            le--;
        if (le > p) {
            if (++lines > lim->max_lines) {
                snprintf(msg, msglen, "more than %zu lines", lim->max_lines);
                err = -E2BIG;
                goto out;
            }
            if ((err = folded_line(w, p, le, lineno, period_ns, lim, locs, frame, &frames, msg,
                                   msglen)))
                goto out;
        }
        p = nl ? nl + 1 : end;
    }
    err = pprof_writer__encode(w, out, false);
    if (err == -ENOMEM)
        snprintf(msg, msglen, "out of memory");
    else if (err)
        snprintf(msg, msglen, "the profile made of the lines is past the body limit");
out:
    if (err == -ENOMEM)
        snprintf(msg, msglen, "out of memory");
    pprof_writer__free(w);
    free(locs);
    free(frame);
    return err;
}

#include "batch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int batch__begin(struct buf *b)
{
    return buf__append(b, BATCH_MAGIC, strlen(BATCH_MAGIC));
}

int batch__append(struct buf *b, const char *query, const void *data, size_t len)
{
    size_t ql = strlen(query), at = b->len;
    char num[24];
    int r, nl = snprintf(num, sizeof(num), "%zu\n", len);

    if (ql > BATCH_QUERY_MAX || memchr(query, '\n', ql))
        return -EINVAL;
    if ((r = buf__reserve(b, ql + 1 + nl + len)))
        return r;
    if ((r = buf__append(b, query, ql)) || (r = buf__append(b, "\n", 1)) ||
        (r = buf__append(b, num, nl)) || (r = buf__append(b, data, len))) {
        b->len = at; /* cannot happen after the reserve: a guard */
        return r;
    }
    return 0;
}

bool batch__open(struct batch_reader *r, const void *body, size_t len, char *why, size_t whylen)
{
    size_t ml = strlen(BATCH_MAGIC);

    r->p = body;
    r->end = r->p + len;
    r->n = 0;
    if (len < ml || memcmp(body, BATCH_MAGIC, ml) != 0) {
        snprintf(why, whylen, "not a batch: expected a body starting \"codexray-batch 1\"");
        return false;
    }
    r->p += ml;
    return true;
}

int batch__next(struct batch_reader *r, struct batch_entry *e, char *why, size_t whylen)
{
    size_t left = r->end - r->p, len = 0;
    const char *q = r->p, *nl, *d;

    if (!left)
        return 0;
    if (r->n >= BATCH_MAX_PROFILES) {
        snprintf(why, whylen, "more than %d profiles in one batch", BATCH_MAX_PROFILES);
        return -1;
    }
    nl = memchr(q, '\n', left < BATCH_QUERY_MAX + 1 ? left : BATCH_QUERY_MAX + 1);
    if (!nl) {
        snprintf(why, whylen, "profile %zu: its query is not ended or longer than %d bytes", r->n,
                 BATCH_QUERY_MAX);
        return -1;
    }
    /* The length: decimal digits, at most 19 (no overflow), then '\n'. */
    for (d = nl + 1; d < r->end && *d >= '0' && *d <= '9' && d - nl <= 19; d++)
        len = len * 10 + (size_t)(*d - '0');
    if (d == nl + 1 || d >= r->end || *d != '\n') {
        snprintf(why, whylen, "profile %zu: no length after its query", r->n);
        return -1;
    }
    d++;
    if (len > (size_t)(r->end - d)) {
        snprintf(why, whylen, "profile %zu: %zu bytes announced, %zu left in the body", r->n, len,
                 (size_t)(r->end - d));
        return -1;
    }
    e->query = q;
    e->query_len = nl - q;
    e->data = d;
    e->len = len;
    r->p = d + len;
    r->n++;
    return 1;
}

size_t batch__halve(const struct batch_reader *r, size_t n)
{
    struct batch_reader c = *r;
    struct batch_entry e;
    size_t total = 0, sum = 0, k = 0;
    char why[8];

    if (n < 2)
        return n;
    for (size_t i = 0; i < n; i++) {
        if (batch__next(&c, &e, why, sizeof(why)) != 1)
            return n / 2;
        total += e.len; /* no overflow: each within one body */
    }
    c = *r;
    while (k < n - 1 && batch__next(&c, &e, why, sizeof(why)) == 1) {
        k++;
        sum += e.len;
        if (sum >= total - sum)
            break;
    }
    return k ? k : 1;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes [s, end) into out; -1 for a bad or NUL escape or no room. */
static int decode(const char *s, const char *end, char *out, size_t outlen)
{
    size_t n = 0;

    for (; s < end; s++) {
        char c = *s;
        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            int hi = end - s > 2 ? hexval(s[1]) : -1, lo = hi >= 0 ? hexval(s[2]) : -1;
            if (lo < 0 || (hi | lo) == 0)
                return -1;
            c = (char)(hi << 4 | lo);
            s += 2;
        }
        if (n + 1 >= outlen)
            return -1;
        out[n++] = c;
    }
    if (!outlen)
        return -1;
    out[n] = '\0';
    return 0;
}

int batch__arg(const struct batch_entry *e, const char *key, char *out, size_t outlen)
{
    const char *p = e->query, *end = e->query + e->query_len;
    size_t kl = strlen(key);

    while (p < end) {
        const char *amp = memchr(p, '&', end - p), *pe = amp ? amp : end;
        if ((size_t)(pe - p) > kl && memcmp(p, key, kl) == 0 && p[kl] == '=')
            return decode(p + kl + 1, pe, out, outlen) ? -1 : 1;
        if ((size_t)(pe - p) == kl && memcmp(p, key, kl) == 0)
            return decode(pe, pe, out, outlen) ? -1 : 1; /* "key" alone: empty */
        p = pe + 1;
    }
    return 0;
}

int batch__statuses(const char *answer, size_t len, int *st, size_t n)
{
    static const char key[] = "\"statuses\":[";
    const char *p = memmem(answer, len, key, sizeof(key) - 1), *end = answer + len;
    size_t i = 0;

    if (!p)
        return -1;
    p += sizeof(key) - 1;
    while (p < end && *p != ']') {
        int v = 0, digits = 0;
        while (p < end && (*p == ' ' || *p == ','))
            p++;
        for (; p < end && *p >= '0' && *p <= '9' && digits < 4; p++, digits++)
            v = v * 10 + (*p - '0');
        if (!digits || i >= n)
            return -1;
        st[i++] = v;
        while (p < end && *p == ' ')
            p++;
    }
    return p < end && i == n ? 0 : -1;
}

int batch__error(const char *answer, size_t len, size_t i, char *out, size_t outlen)
{
    static const char key[] = "\"errors\":[";
    const char *p = memmem(answer, len, key, sizeof(key) - 1), *end = answer + len;
    size_t k = 0, n = 0;

    if (!p || !outlen)
        return -1;
    for (p += sizeof(key) - 1; p < end && *p != ']'; k++) {
        while (p < end && (*p == ' ' || *p == ','))
            p++;
        if (end - p >= 4 && memcmp(p, "null", 4) == 0) {
            if (k == i)
                return -1;
            p += 4;
        } else if (p < end && *p == '"') {
            for (p++; p < end && *p != '"'; p++) {
                if (*p == '\\' && p + 1 < end) {
                    if (k == i && n + 1 < outlen)
                        out[n++] = *p;
                    p++;
                }
                if (k == i && n + 1 < outlen)
                    out[n++] = *p;
            }
            if (p >= end)
                return -1;
            p++;
            if (k == i) {
                out[n] = '\0';
                return 0;
            }
        } else {
            return -1;
        }
    }
    return -1;
}

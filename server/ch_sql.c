/* ClickHouse's text both ways (ch_sql.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ch_sql.h"

int ch_sql__quote(struct buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    /* At most 4 bytes per byte, and the quotes. */
    if (len > (b->max - b->len) / 4)
        return -E2BIG;
    int r = buf__reserve(b, 4 * len + 2);
    if (r)
        return r;
    char *o = b->data + b->len;
    *o++ = '\'';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == '\'') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            *o++ = '\\';
            *o++ = 'x';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        } else {
            *o++ = (char)c;
        }
    }
    *o++ = '\'';
    *o = 0;
    b->len = o - b->data;
    return 0;
}

int ch_sql__appendf(struct buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n < sizeof(small))
        return buf__append(b, small, n);
    if (buf__reserve(b, n + 1))
        return -E2BIG;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, n + 1, fmt, ap);
    va_end(ap);
    b->len += n;
    return 0;
}

bool ch_sql__identifier(const char *s)
{
    size_t n = 0;

    if (!s || !((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_') ||
            n >= 64)
            return false;
    }
    return true;
}

int ch_rb__u64(struct buf *b, uint64_t v)
{
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(v >> (8 * i));
    return buf__append(b, le, 8);
}

int ch_rb__varint(struct buf *b, uint64_t v)
{
    unsigned char out[10];
    int n = 0;
    while (v >= 0x80) {
        out[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (unsigned char)v;
    return buf__append(b, out, n);
}

int ch_rb__str(struct buf *b, const char *s, size_t len)
{
    int err = ch_rb__varint(b, len);
    return err ? err : buf__append(b, s, len);
}

void ch_tsv__init(struct ch_tsv *t, char *text, size_t len)
{
    t->p = text;
    t->end = text + len;
}

int ch_tsv__row(struct ch_tsv *t, char **fields, int max)
{
    int n = 0;

    if (t->p >= t->end)
        return 0;
    char *r = t->p, *w = t->p;
    fields[n++] = w;
    for (;;) {
        if (r >= t->end)
            return -EBADMSG; /* a row not ended */
        char c = *r++;
        if (c == '\n') {
            *w = 0;
            break;
        }
        if (c == '\t') {
            *w++ = 0;
            if (n == max)
                return -EBADMSG;
            fields[n++] = w;
            continue;
        }
        if (c == '\\') {
            if (r >= t->end)
                return -EBADMSG;
            switch (*r++) {
            case '\\':
                c = '\\';
                break;
            case 't':
                c = '\t';
                break;
            case 'n':
                c = '\n';
                break;
            case 'r':
                c = '\r';
                break;
            case 'b':
                c = '\b';
                break;
            case 'f':
                c = '\f';
                break;
            case '0':
                c = '\0';
                break;
            case '\'':
                c = '\'';
                break;
            case '"':
                c = '"';
                break;
            default:
                return -EBADMSG;
            }
        }
        *w++ = c;
    }
    t->p = r;
    return n;
}

int ch_tsv__i64(const char *s, int64_t *out)
{
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (!*s || *e || errno || (*s != '-' && (*s < '0' || *s > '9')))
        return -EBADMSG;
    *out = v;
    return 0;
}

int ch_tsv__u64(const char *s, uint64_t *out)
{
    char *e;
    errno = 0;
    unsigned long long v = strtoull(s, &e, 10);
    if (*s < '0' || *s > '9' || *e || errno)
        return -EBADMSG;
    *out = v;
    return 0;
}

int ch_tsv__u64_array(const char *s, uint64_t *out, int max)
{
    int n = 0;

    if (*s++ != '[')
        return -EBADMSG;
    if (*s == ']')
        return s[1] ? -EBADMSG : 0;
    for (;;) {
        char *e;
        if (*s < '0' || *s > '9' || n == max)
            return -EBADMSG;
        errno = 0;
        out[n++] = strtoull(s, &e, 10);
        if (errno)
            return -EBADMSG;
        s = e;
        if (*s == ']')
            return s[1] ? -EBADMSG : n;
        if (*s++ != ',')
            return -EBADMSG;
    }
}

void ch_rbr__init(struct ch_rbr *r, const void *data, size_t len)
{
    r->p = data;
    r->end = r->p + (data ? len : 0);
}

bool ch_rbr__done(const struct ch_rbr *r)
{
    return r->p >= r->end;
}

uint64_t ch_rbr__le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int ch_rbr__u8(struct ch_rbr *r, uint8_t *out)
{
    if (r->end - r->p < 1)
        return -EBADMSG;
    *out = *r->p++;
    return 0;
}

int ch_rbr__u64(struct ch_rbr *r, uint64_t *out)
{
    if (r->end - r->p < 8)
        return -EBADMSG;
    *out = ch_rbr__le64(r->p);
    r->p += 8;
    return 0;
}

int ch_rbr__i64(struct ch_rbr *r, int64_t *out)
{
    uint64_t u;
    int err = ch_rbr__u64(r, &u);
    if (!err)
        *out = (int64_t)u;
    return err;
}

int ch_rbr__u64_array(struct ch_rbr *r, const unsigned char **elems, uint64_t *n, uint64_t max)
{
    const unsigned char *p = r->p;
    uint64_t v = 0;

    /* The length: a LEB128 varint of at most 10 bytes. */
    for (int shift = 0;; shift += 7) {
        if (p >= r->end || shift > 63)
            return -EBADMSG;
        v |= (uint64_t)(*p & 0x7f) << shift;
        if (!(*p++ & 0x80))
            break;
    }
    if (v > max || (uint64_t)(r->end - p) / 8 < v)
        return -EBADMSG;
    *elems = p;
    *n = v;
    r->p = p + 8 * v;
    return 0;
}

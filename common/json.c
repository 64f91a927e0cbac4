#include "json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int json__raw(struct buf *b, const char *s)
{
    return buf__append(b, s, strlen(s));
}

/* Length of a valid UTF-8 sequence starting at p (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t len;
    uint32_t cp;

    if (p[0] < 0x80)
        return 1;
    if ((p[0] & 0xe0) == 0xc0)
        len = 2, cp = p[0] & 0x1f;
    else if ((p[0] & 0xf0) == 0xe0)
        len = 3, cp = p[0] & 0x0f;
    else if ((p[0] & 0xf8) == 0xf0)
        len = 4, cp = p[0] & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    /* Overlong forms, surrogates and values past U+10FFFF are not valid. */
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        return 0;
    return len;
}

int json__strn(struct buf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    char esc[8];
    int err = buf__append(b, "\"", 1);

    for (size_t i = 0; !err && i < n;) {
        unsigned char c = p[i];
        /* A run of printable ASCII, most of a function's name: one append
         * (a flame graph writes thousands of names). */
        size_t run = i;
        while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
            run++;
        if (run > i) {
            err = buf__append(b, p + i, run - i);
            i = run;
            continue;
        }
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = c;
            err = buf__append(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            err = buf__append(b, esc, 6);
            i++;
        } else {
            size_t l = utf8_len(p + i, n - i);
            if (l == 0) {
                err = buf__append(b, "\xef\xbf\xbd", 3); /* U+FFFD */
                i++;
            } else {
                err = buf__append(b, p + i, l);
                i += l;
            }
        }
    }
    return err ? err : buf__append(b, "\"", 1);
}

int json__str(struct buf *b, const char *s)
{
    return json__strn(b, s ? s : "", s ? strlen(s) : 0);
}

int json__i64(struct buf *b, int64_t v)
{
    char tmp[JSON_I64_ROOM];
    int n = json__put_i64(tmp, v);
    return buf__append(b, tmp, n);
}

int json__f64(struct buf *b, double v)
{
    char tmp[64];
    int n;

    if (!isfinite(v))
        return buf__append(b, "null", 4);
    n = snprintf(tmp, sizeof(tmp), "%.15g", v);
    return buf__append(b, tmp, n);
}

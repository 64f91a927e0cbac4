#include "text.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The length of the UTF-8 sequence at s (1-4), or 0 when it is not valid
 * UTF-8 (cut short, overlong, a surrogate, past U+10FFFF). *cp: its code
 * point. */
static size_t utf8_seq(const unsigned char *s, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t v, min;

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, v = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, v = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also the NUL that ends a string cut short */
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

/* C0, DEL and C1 (U+0080-U+009F: 0x9b is a terminal's CSI). */
static bool is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

const char *text__label_problem(const char *s, size_t max)
{
    if (!s)
        return NULL;
    if (strlen(s) > max)
        return "longer than the limit";
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        uint32_t cp;
        size_t n = utf8_seq(p, &cp);
        if (!n)
            return "not valid UTF-8";
        if (is_control(cp))
            return "holds a control character";
        p += n;
    }
    return NULL;
}

char *text__escape(char *out, size_t outlen, const char *s)
{
    size_t o = 0;

    if (!s)
        s = "-";
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        uint32_t cp;
        size_t n = utf8_seq(p, &cp);
        char tmp[8];
        size_t tn;
        if (n && !is_control(cp) && cp != '\\') {
            memcpy(tmp, p, n);
            tn = n;
        } else if (*p == '\\') {
            memcpy(tmp, "\\\\", 2);
            tn = 2;
            n = 1;
        } else {
            tn = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", *p);
            n = 1;
        }
        if (o + tn + 4 > outlen) { /* room for "..." and the NUL */
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(out + o, tmp, tn);
        o += tn;
        p += n;
    }
    out[o] = '\0';
    return out;
}

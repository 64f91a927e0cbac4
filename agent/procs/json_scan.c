#include "json_scan.h"

#include <stdio.h>
#include <string.h>

static size_t skip_space(const char *s, size_t n, size_t k)
{
    while (k < n && (s[k] == ' ' || s[k] == '\n' || s[k] == '\t' || s[k] == '\r'))
        k++;
    return k;
}

/* s[i] is an opening quote: the index of its closing quote, or n. */
static size_t string_end(const char *s, size_t n, size_t i)
{
    for (i++; i < n && s[i] != '"';)
        i += s[i] == '\\' ? 2 : 1;
    return i < n ? i : n;
}

/* Decodes the string whose opening quote is s[k] into out. Returns whether
 * it ended (a name cut to fit still counts). */
static bool decode(const char *s, size_t n, size_t k, char *out, size_t outlen)
{
    size_t o = 0;

    for (k++; k < n && s[k] != '"'; k++) {
        char ch = s[k];
        if (ch == '\\' && k + 1 < n) {
            ch = s[++k];
            if (ch == 'u') {
                unsigned v = 0;
                if (k + 4 >= n || sscanf(s + k + 1, "%4x", &v) != 1)
                    return false;
                k += 4;
                ch = v >= 0x20 && v < 0x7f ? (char)v : '?';
            } else if (ch != '"' && ch != '\\' && ch != '/') {
                ch = '?'; /* \n, \t and friends: not in a name */
            }
        } else if ((unsigned char)ch < 0x20) {
            ch = '?';
        }
        if (o + 1 < outlen)
            out[o++] = ch;
    }
    if (outlen)
        out[o] = '\0';
    return k < n;
}

/* Where the value of key in the top-level object starts (spaces skipped),
 * or n when the object has no such key. Strings are skipped whole, so a key
 * inside a value or a nested object does not count. */
static size_t top_value(const char *s, size_t n, const char *key)
{
    size_t klen = strlen(key);
    int depth = 0;

    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == '"') {
            size_t start = i + 1, end = string_end(s, n, i);
            if (end >= n)
                return n;
            i = end;
            size_t k = skip_space(s, n, end + 1);
            if (depth != 1 || k >= n || s[k] != ':' || end - start != klen ||
                memcmp(s + start, key, klen) != 0)
                continue;
            return skip_space(s, n, k + 1);
        }
    }
    return n;
}

bool json_scan__top_string(const char *s, size_t n, const char *key, char *out, size_t outlen)
{
    size_t k = top_value(s, n, key);

    if (k < n && s[k] == '[') /* an array: its first element */
        k = skip_space(s, n, k + 1);
    return k < n && s[k] == '"' && decode(s, n, k, out, outlen);
}

bool json_scan__find_object(const char *s, size_t n, const char *key, const char *value,
                            const char **obj, size_t *objlen)
{
    size_t vlen = strlen(value), start = 0;
    int depth = 0;
    char got[256];

    if (vlen >= sizeof(got))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '"') {
            i = string_end(s, n, i);
        } else if (c == '{' || c == '[') {
            if (++depth == 2 && c == '{')
                start = i;
        } else if (c == '}' || c == ']') {
            if (depth-- == 2 && c == '}' &&
                json_scan__top_string(s + start, i + 1 - start, key, got, sizeof(got)) &&
                strcmp(got, value) == 0) {
                *obj = s + start;
                *objlen = i + 1 - start;
                return true;
            }
        }
    }
    return false;
}

bool json_scan__top_object(const char *s, size_t n, const char *key, const char **obj,
                           size_t *objlen)
{
    size_t k = top_value(s, n, key);
    int d = 0;

    if (k >= n || s[k] != '{')
        return false;
    /* Its closing brace, strings skipped whole. */
    for (size_t j = k; j < n; j++) {
        if (s[j] == '"') {
            j = string_end(s, n, j);
        } else if (s[j] == '{' || s[j] == '[') {
            d++;
        } else if ((s[j] == '}' || s[j] == ']') && --d == 0) {
            *obj = s + k;
            *objlen = j + 1 - k;
            return true;
        }
    }
    return false;
}

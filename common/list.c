/* One rule for every list-valued option (list.h). One pass over the value,
 * each byte looked at once, so no input can make it loop. */
#include "list.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct list {
    size_t n;
    char *items[LIST_MAX_ENTRIES];
    char text[]; /* the value, separators turned into NULs; items point here */
};

static bool is_sep(unsigned char c)
{
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_ctl(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

/* At most 40 bytes of an entry, for an error message; control bytes as '?'. */
static void excerpt(const char *s, char *out, size_t len)
{
    size_t i = 0;

    for (; s[i] && i < 40 && i + 4 < len; i++)
        out[i] = is_ctl((unsigned char)s[i]) ? '?' : s[i];
    if (s[i] && i + 4 < len) {
        memcpy(out + i, "...", 3);
        i += 3;
    }
    out[i] = '\0';
}

struct list *list__split(const char *text, char *err, size_t errlen)
{
    size_t len = text ? strnlen(text, LIST_MAX_TEXT + 1) : 0;
    struct list *l = NULL;

    if (len > LIST_MAX_TEXT) {
        snprintf(err, errlen, "longer than %d bytes", LIST_MAX_TEXT);
        return NULL;
    }
    l = malloc(sizeof(*l) + len + 1);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->n = 0;
    if (len)
        memcpy(l->text, text, len);
    l->text[len] = '\0';
    for (size_t i = 0; i < len;) {
        if (is_sep((unsigned char)l->text[i])) {
            l->text[i++] = '\0';
            continue;
        }
        size_t start = i;
        while (i < len && !is_sep((unsigned char)l->text[i])) {
            if (is_ctl((unsigned char)l->text[i])) {
                snprintf(err, errlen, "entry %zu has a control character (byte 0x%02x)", l->n + 1,
                         (unsigned char)l->text[i]);
                goto fail;
            }
            i++;
        }
        if (i - start > LIST_MAX_ENTRY) {
            snprintf(err, errlen, "entry %zu is %zu bytes long (at most %d)", l->n + 1, i - start,
                     LIST_MAX_ENTRY);
            goto fail;
        }
        if (l->n == LIST_MAX_ENTRIES) {
            snprintf(err, errlen, "more than %d entries", LIST_MAX_ENTRIES);
            goto fail;
        }
        l->items[l->n++] = l->text + start;
    }
    return l;
fail:
    list__free(l);
    return NULL;
}

size_t list__count(const struct list *l)
{
    return l ? l->n : 0;
}

const char *list__get(const struct list *l, size_t i)
{
    return l && i < l->n ? l->items[i] : NULL;
}

/* The length of s's scheme when s is SCHEME://HOST (something other than
 * a slash after the ://) or file:///PATH (libcurl's, which libdebuginfod
 * takes), else 0. */
static size_t url_scheme(const char *s)
{
    size_t i = 0;

    while ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
           (i && ((s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '-' || s[i] == '.')))
        i++;
    if (!i || strncmp(s + i, "://", 3) || !s[i + 3])
        return 0;
    if (s[i + 3] == '/' && !(i == 4 && !strncasecmp(s, "file", 4) && s[i + 4]))
        return 0;
    return i;
}

int list__urls(struct list *l, const char *const *schemes, char *err, size_t errlen)
{
    for (size_t i = 0; l && i < l->n; i++) {
        char *s = l->items[i], ex[48];
        excerpt(s, ex, sizeof(ex)); /* as given, for the message */
        size_t n = strlen(s);
        while (n && s[n - 1] == '/')
            s[--n] = '\0';
        size_t k = url_scheme(s);
        bool ok = k > 0;
        if (ok && schemes) {
            ok = false;
            for (size_t j = 0; schemes[j]; j++)
                ok |= strlen(schemes[j]) == k && !strncasecmp(s, schemes[j], k);
        }
        if (!ok) {
            char want[128] = "SCHEME://HOST";
            size_t w = 0;
            for (size_t j = 0; schemes && schemes[j] && w < sizeof(want); j++)
                w += (size_t)snprintf(want + w, sizeof(want) - w, "%s%s://",
                                      j ? (schemes[j + 1] ? ", " : " or ") : "", schemes[j]);
            snprintf(err, errlen, "entry %zu (\"%s\") is not a%s %s URL", i + 1, ex,
                     schemes && schemes[0] ? "n" : "", want);
            return -1;
        }
    }
    return 0;
}

char *list__join(const struct list *l, char sep)
{
    size_t len = 0;

    for (size_t i = 0; l && i < l->n; i++)
        len += strlen(l->items[i]) + 1;
    char *out = malloc(len + 1), *p = out;
    if (!out)
        return NULL;
    for (size_t i = 0; l && i < l->n; i++) {
        size_t n = strlen(l->items[i]);
        if (i)
            *p++ = sep;
        memcpy(p, l->items[i], n);
        p += n;
    }
    *p = '\0';
    return out;
}

char *list__join_urls(const char *text, const char *const *schemes, char sep, char *err,
                      size_t errlen)
{
    struct list *l = list__split(text, err, errlen);
    char *out = NULL;

    if (!l || list__urls(l, schemes, err, errlen))
        goto out;
    out = list__join(l, sep);
    if (!out)
        snprintf(err, errlen, "out of memory");
out:
    list__free(l);
    return out;
}

void list__free(struct list *l)
{
    free(l);
}

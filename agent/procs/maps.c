#include "maps.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *parse_hex(const char *p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = p;

    while (p < end) {
        char c = *p;
        unsigned d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            break;
        if (v >> 60)
            return NULL; /* more than 64 bits */
        v = v << 4 | d;
        p++;
    }
    if (p == s)
        return NULL;
    *out = v;
    return p;
}

static const char *parse_dec(const char *p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = p;

    while (p < end && *p >= '0' && *p <= '9') {
        if (v > (UINT64_MAX - 9) / 10)
            return NULL;
        v = v * 10 + (*p - '0');
        p++;
    }
    if (p == s)
        return NULL;
    *out = v;
    return p;
}

static const char *skip_spaces(const char *p, const char *end)
{
    while (p < end && *p == ' ')
        p++;
    return p;
}

/* "start-end perms offset major:minor inode   path" */
static bool parse_line(char *line, char *end, struct maps_entry *e)
{
    const char *p = line;
    uint64_t maj, min;

    memset(e, 0, sizeof(*e));
    if (!(p = parse_hex(p, end, &e->start)) || p >= end || *p++ != '-')
        return false;
    if (!(p = parse_hex(p, end, &e->end)) || e->end < e->start)
        return false;
    p = skip_spaces(p, end);
    if (end - p < 4)
        return false;
    memcpy(e->perms, p, 4);
    e->perms[4] = '\0';
    p = skip_spaces(p + 4, end);
    if (!(p = parse_hex(p, end, &e->offset)))
        return false;
    p = skip_spaces(p, end);
    if (!(p = parse_hex(p, end, &maj)) || p >= end || *p++ != ':')
        return false;
    if (!(p = parse_hex(p, end, &min)) || maj > UINT32_MAX || min > UINT32_MAX)
        return false;
    e->dev_major = maj;
    e->dev_minor = min;
    p = skip_spaces(p, end);
    if (!(p = parse_dec(p, end, &e->inode)))
        return false;
    p = skip_spaces(p, end);
    /* The rest is the path, spaces and all. */
    static const char deleted[] = " (deleted)";
    size_t n = end - p, dl = sizeof(deleted) - 1;
    if (n >= dl && memcmp(end - dl, deleted, dl) == 0) {
        e->deleted = true;
        end -= dl;
    }
    *end = '\0';
    e->path = p;
    return true;
}

int maps__parse(const char *text, size_t len, bool exec_only, struct maps *out, size_t *bad)
{
    size_t cap = 0, nbad = 0;
    char *line, *next, *end;

    memset(out, 0, sizeof(*out));
    out->text = malloc(len + 1);
    if (!out->text)
        return -ENOMEM;
    memcpy(out->text, text, len);
    out->text[len] = '\0';
    end = out->text + len;
    for (line = out->text; line < end; line = next) {
        char *nl = memchr(line, '\n', end - line);
        next = nl ? nl + 1 : end;
        char *le = nl ? nl : end;
        if (le == line)
            continue;
        struct maps_entry e;
        if (!parse_line(line, le, &e)) {
            nbad++;
            continue;
        }
        if (exec_only && e.perms[2] != 'x')
            continue;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 32;
            struct maps_entry *ne = realloc(out->e, cap * sizeof(*ne));
            if (!ne) {
                maps__free(out);
                return -ENOMEM;
            }
            out->e = ne;
        }
        out->e[out->n++] = e;
    }
    if (bad)
        *bad = nbad;
    return 0;
}

void maps__free(struct maps *m)
{
    if (!m)
        return;
    free(m->e);
    free(m->text);
    memset(m, 0, sizeof(*m));
}

const struct maps_entry *maps__find(const struct maps *m, uint64_t addr)
{
    size_t lo = 0, hi = m->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (addr < m->e[mid].start)
            hi = mid;
        else if (addr >= m->e[mid].end)
            lo = mid + 1;
        else
            return &m->e[mid];
    }
    return NULL;
}

#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/log.h"
#include "../common/str.h"
#include "output.h"

#define SPOOL_MAGIC "codexray-spool 1\n"
#define SPOOL_EXT ".cxspool"
#define LEGACY_EXT ".pb.gz"
#define HEADER_MAX SPOOL_HEADER_MAX
/* An encoded value: every byte may take three. */
#define ENC_MAX (3 * IDENTITY_NAME_MAX + 1)

/* Percent-encodes s: what is left is URL-safe as it stands, and holds no
 * '~', '/' or newline. Cuts at a whole character when out is too small. */
static void encode(char *out, size_t len, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    for (; *s && n + 4 < len; s++) {
        unsigned char c = *s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '.' || c == '_' || c == '-') {
            out[n++] = c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
}

static bool has_ext(const char *name, const char *ext)
{
    size_t l = strlen(name), e = strlen(ext);
    return l > e && strcmp(name + l - e, ext) == 0;
}

static int cmp_spooled(const void *a, const void *b)
{
    return strcmp(((const struct spooled *)a)->name, ((const struct spooled *)b)->name);
}

/* Lists the spool, oldest first. Caller frees *out. */
int spool__list(const char *dir, struct spooled **out, size_t *n, uint64_t *total)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    struct spooled *v = NULL;
    size_t cap = 0;

    *out = NULL;
    *n = 0;
    *total = 0;
    if (!d)
        return -errno;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        struct stat st;
        if ((!has_ext(de->d_name, SPOOL_EXT) && !has_ext(de->d_name, LEGACY_EXT)) ||
            l >= sizeof(v->name) || de->d_name[0] == '.')
            continue;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            struct spooled *nv = realloc(v, cap * sizeof(*nv));
            if (!nv) {
                closedir(d);
                free(v);
                return -ENOMEM;
            }
            v = nv;
        }
        str__copy(v[*n].name, sizeof(v[*n].name), de->d_name);
        v[*n].size = st.st_size;
        *total += st.st_size;
        (*n)++;
    }
    closedir(d);
    if (*n)
        qsort(v, *n, sizeof(*v), cmp_spooled);
    *out = v;
    return 0;
}

/* Appends "key=ENCODED\n" to b when value is not empty. */
static int header_line(struct buf *b, const char *key, const char *value)
{
    char enc[ENC_MAX];
    int r = 0;

    if (!value || !*value)
        return 0;
    encode(enc, sizeof(enc), value);
    if ((r = buf__append(b, key, strlen(key))) || (r = buf__append(b, "=", 1)) ||
        (r = buf__append(b, enc, strlen(enc))) || (r = buf__append(b, "\n", 1)))
        return r;
    return 0;
}

int spool__format(struct buf *b, const struct identity *id, uint32_t pid, const char *host,
                  const void *data, size_t len)
{
    char pids[16];
    size_t at = b->len;
    int r;

    snprintf(pids, sizeof(pids), "%u", pid);
    if ((r = buf__append(b, SPOOL_MAGIC, strlen(SPOOL_MAGIC))) ||
        (r = header_line(b, "service", id->service)) || (r = header_line(b, "host", host)) ||
        (r = header_line(b, "pid", pids)) ||
        (r = header_line(b, "container_id", id->container_id)) ||
        (r = header_line(b, "pod", id->pod)) || (r = header_line(b, "namespace", id->namespace)) ||
        (r = header_line(b, "container", id->container)) ||
        (r = header_line(b, "systemd_unit", id->systemd_unit)) || (r = buf__append(b, "\n", 1)))
        return r;
    if (b->len - at > HEADER_MAX)
        return -E2BIG; /* cannot happen with IDENTITY_NAME_MAX fields: a guard */
    return buf__append(b, data, len);
}

/* The query string of a spooled file, "service=...&host=...", and where its
 * body starts. Every key must be one we write and every value URL-safe as
 * it stands (a file edited or cut short is refused, not sent as garbage).
 * Returns 0, or -1 with why filled. */
static int parse_header(const struct buf *f, char *query, size_t qlen, size_t *body, char *why,
                        size_t whylen)
{
    static const char *const keys[] = {"service", "host",      "pid",       "container_id",
                                       "pod",     "namespace", "container", "systemd_unit"};
    size_t ml = strlen(SPOOL_MAGIC), q = 0, i;

    query[0] = '\0';
    if (f->len < ml || memcmp(f->data, SPOOL_MAGIC, ml) != 0) {
        snprintf(why, whylen, "not a spool file (no header)");
        return -1;
    }
    for (i = ml; i < f->len && i < HEADER_MAX;) {
        const char *line = f->data + i, *nl = memchr(line, '\n', f->len - i);
        if (!nl)
            break;
        size_t ll = nl - line;
        i += ll + 1;
        if (ll == 0) {
            *body = i;
            return 0;
        }
        const char *eq = memchr(line, '=', ll);
        bool known = false;
        for (size_t k = 0; eq && k < sizeof(keys) / sizeof(keys[0]); k++)
            known |= strlen(keys[k]) == (size_t)(eq - line) && !memcmp(line, keys[k], eq - line);
        for (const char *c = eq ? eq + 1 : line; known && c < nl; c++) {
            known = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-' || *c == '%';
        }
        if (!known) {
            snprintf(why, whylen, "bad spool header line: %.*s", (int)(ll < 64 ? ll : 64), line);
            return -1;
        }
        int w = snprintf(query + q, qlen - q, "%s%.*s", q ? "&" : "", (int)ll, line);
        if (w < 0 || (size_t)w >= qlen - q) {
            snprintf(why, whylen, "spool header too long");
            return -1;
        }
        q += w;
    }
    snprintf(why, whylen, "spool header not terminated");
    return -1;
}

/* The query string of a file an earlier agent spooled: SEQ~PID~HOST~SERVICE.pb.gz,
 * the encoded parts URL-safe as they are. */
static int parse_legacy_name(const char *name, char *query, size_t qlen, char *why, size_t whylen)
{
    char seq[32], pid[16], host[512], service[512], *q;

    if (sscanf(name, "%31[0-9]~%15[0-9]~%511[^~]~%511[^~]", seq, pid, host, service) != 4) {
        snprintf(why, whylen, "not a spool file name");
        return -1;
    }
    size_t sl = strlen(service);
    q = sl >= 6 ? service + sl - 6 : NULL;
    if (q && strcmp(q, LEGACY_EXT) == 0)
        *q = '\0'; /* only the suffix: a service may have ".pb.gz" inside */
    snprintf(query, qlen, "service=%s&host=%s&pid=%s", service, host, pid);
    return 0;
}

int spool__query(const char *name, const struct buf *f, char *query, size_t qlen, size_t *body,
                 char *why, size_t whylen)
{
    *body = 0;
    if (name && has_ext(name, LEGACY_EXT))
        return parse_legacy_name(name, query, qlen, why, whylen);
    return parse_header(f, query, qlen, body, why, whylen);
}

int spool__write(const char *dir, uint64_t *seq, uint32_t pid, const struct buf *f, uint64_t max,
                 uint64_t *total)
{
    char path[4096];
    struct spooled *v;
    size_t n;
    int err;

    /* Keep within the bound: the oldest files go first. The directory is
     * listed only then, for its real total and its oldest files. */
    if (*total + f->len > max && spool__list(dir, &v, &n, total) == 0) {
        size_t dropped = 0;
        for (size_t i = 0; i < n && (*total + f->len) > max; i++) {
            snprintf(path, sizeof(path), "%s/%s", dir, v[i].name);
            if (unlink(path) == 0) {
                *total -= v[i].size;
                dropped++;
            }
        }
        free(v);
        if (dropped)
            log_warn("spool: full (%llu bytes max): dropped the %zu oldest profiles",
                     (unsigned long long)max, dropped);
    }
    uint64_t s = clock__real_ns();
    if (s <= *seq)
        s = *seq + 1;
    *seq = s;
    if (snprintf(path, sizeof(path), "%s/%020llu~%u" SPOOL_EXT, dir, (unsigned long long)s, pid) >=
        (int)sizeof(path))
        return -ENAMETOOLONG;
    if (!(err = output__write_file(path, f->data, f->len, true)))
        *total += f->len;
    return err;
}

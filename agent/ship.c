#include "ship.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "../common/str.h"
#include "output.h"

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 60000
#define FILE_MAX (64u << 20)

struct shipper {
    struct ship_opts opts;
    char *endpoint, *api_key, *dir;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping, pending;
    uint64_t seq;
};

/* The spool: one file per profile, SEQ~PID.cxspool, SEQ (ns, 20 digits)
 * sorting oldest first. A file is a small text header, then the pprof as
 * it is sent (zstd-compressed; earlier agents spooled gzip, which the
 * server takes as well):
 *
 *   codexray-spool 1\n
 *   service=nginx\n          one line per query parameter, value URL-encoded
 *   host=web-1\n
 *   pid=1234\n
 *   systemd_unit=nginx.service\n
 *   \n
 *   <body>
 *
 * The header travels with the body in one file, written and renamed at
 * once, so the two can never disagree, and a new label is a new line, not a
 * new name format. Files of earlier agents, SEQ~PID~HOST~SERVICE.pb.gz (the
 * identity in the name, the body alone), are still read and sent. */
#define SPOOL_MAGIC "codexray-spool 1\n"
#define SPOOL_EXT ".cxspool"
#define LEGACY_EXT ".pb.gz"
#define HEADER_MAX 8192
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

struct spooled {
    char name[1024];
    uint64_t size;
};

static int cmp_spooled(const void *a, const void *b)
{
    return strcmp(((const struct spooled *)a)->name, ((const struct spooled *)b)->name);
}

/* Lists the spool, oldest first. Caller frees *out. */
static int list_spool(const char *dir, struct spooled **out, size_t *n, uint64_t *total)
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

struct shipper *shipper__start(const struct ship_opts *opts, char *err, size_t errlen);

static void *run(void *arg);

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

int shipper__enqueue(struct shipper *sh, const struct identity *id, uint32_t pid, const char *host,
                     uint64_t start_ns, const void *data, size_t len)
{
    char path[4096], pids[16];
    struct spooled *v;
    struct buf file;
    size_t n;
    uint64_t total;
    int r;

    (void)start_ns;
    snprintf(pids, sizeof(pids), "%u", pid);
    buf__init(&file, HEADER_MAX + len);
    if ((r = buf__append(&file, SPOOL_MAGIC, strlen(SPOOL_MAGIC))) ||
        (r = header_line(&file, "service", id->service)) ||
        (r = header_line(&file, "host", host)) || (r = header_line(&file, "pid", pids)) ||
        (r = header_line(&file, "container_id", id->container_id)) ||
        (r = header_line(&file, "pod", id->pod)) ||
        (r = header_line(&file, "namespace", id->namespace)) ||
        (r = header_line(&file, "container", id->container)) ||
        (r = header_line(&file, "systemd_unit", id->systemd_unit)) ||
        (r = buf__append(&file, "\n", 1)))
        goto out;
    if (file.len > HEADER_MAX) {
        r = -E2BIG; /* cannot happen with IDENTITY_NAME_MAX fields: a guard */
        goto out;
    }
    if ((r = buf__append(&file, data, len)))
        goto out;
    /* Keep within the bound: the oldest files go first. */
    if (list_spool(sh->dir, &v, &n, &total) == 0) {
        size_t dropped = 0;
        for (size_t i = 0; i < n && total + len > sh->opts.spool_max_bytes; i++) {
            snprintf(path, sizeof(path), "%s/%s", sh->dir, v[i].name);
            if (unlink(path) == 0) {
                total -= v[i].size;
                dropped++;
            }
        }
        free(v);
        if (dropped)
            log_warn("spool: full (%llu bytes max): dropped the %zu oldest profiles",
                     (unsigned long long)sh->opts.spool_max_bytes, dropped);
    }
    uint64_t seq = clock__real_ns();
    if (seq <= sh->seq)
        seq = sh->seq + 1;
    sh->seq = seq;
    if (snprintf(path, sizeof(path), "%s/%020llu~%u" SPOOL_EXT, sh->dir, (unsigned long long)seq,
                 pid) >= (int)sizeof(path)) {
        r = -ENAMETOOLONG;
        goto out;
    }
    r = output__write_file(path, file.data, file.len, true);
out:
    buf__free(&file);
    return r;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    struct buf *b = ud;
    size_t len = size * n;
    if (b && b->len < 4096 && buf__append(b, p, len < 4096 - b->len ? len : 4096 - b->len)) {
        /* only the start of an error body is kept for the log */
    }
    return len;
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

/* Uploads one spooled file. Returns the HTTP status, 400 for a file that can
 * never be sent, or -1 for no answer. */
static long upload(struct shipper *sh, CURL *c, const char *name, struct buf *file, char *why,
                   size_t whylen)
{
    char query[HEADER_MAX], url[4096 + HEADER_MAX];
    struct buf resp;
    size_t body = 0;
    long code = -1;

    if (has_ext(name, SPOOL_EXT) ? parse_header(file, query, sizeof(query), &body, why, whylen)
                                 : parse_legacy_name(name, query, sizeof(query), why, whylen))
        return 400;
    snprintf(url, sizeof(url), "%s/api/v1/profiles?%s", sh->endpoint, query);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/octet-stream");
    char auth[1024];
    if (sh->api_key) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", sh->api_key);
        h = curl_slist_append(h, auth);
    }
    buf__init(&resp, 4096);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, file->data + body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(file->len - body));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
    CURLcode cr = curl_easy_perform(c);
    if (cr == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    else
        snprintf(why, whylen, "%s", curl_easy_strerror(cr));
    if (code >= 300)
        snprintf(why, whylen, "HTTP %ld: %.300s", code, resp.data ? resp.data : "");
    curl_slist_free_all(h);
    buf__free(&resp);
    return code;
}

static void *run(void *arg)
{
    struct shipper *sh = arg;
    CURL *c = curl_easy_init();
    unsigned backoff = 0;
    struct buf body;
    char why[512];

    buf__init(&body, FILE_MAX);
    if (c) {
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    }
    for (;;) {
        pthread_mutex_lock(&sh->mu);
        if (backoff) {
            /* Exponential backoff with jitter: [backoff/2, backoff). */
            unsigned ms = backoff / 2 + (unsigned)(rand() % (backoff / 2 + 1));
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += ms / 1000;
            until.tv_nsec += (long)(ms % 1000) * 1000000;
            if (until.tv_nsec >= 1000000000) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000;
            }
            while (!sh->stopping && pthread_cond_timedwait(&sh->cv, &sh->mu, &until) != ETIMEDOUT)
                ;
        } else {
            while (!sh->stopping && !sh->pending)
                pthread_cond_wait(&sh->cv, &sh->mu);
        }
        /* On stop, one last pass: the final window goes out if it can. */
        bool last = sh->stopping;
        sh->pending = false;
        pthread_mutex_unlock(&sh->mu);
        if (!c)
            break;

        struct spooled *v;
        size_t n;
        uint64_t total, t0 = (clock__mono_ns() / 1000000), bytes = 0;
        unsigned sent = 0, refused = 0;
        bool failed = false;
        if (list_spool(sh->dir, &v, &n, &total)) {
            if (last)
                break; /* nothing to send; looping would spin once stopping */
            continue;
        }
        for (size_t i = 0; i < n && !failed; i++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", sh->dir, v[i].name);
            buf__reset(&body);
            int rr = buf__read_file(&body, AT_FDCWD, path);
            if (rr == -E2BIG) {
                log_error("upload: %s is larger than %u MiB, dropped", v[i].name, FILE_MAX >> 20);
                unlink(path); /* it would block the spool for good */
                continue;
            }
            if (rr) {
                snprintf(why, sizeof(why), "cannot read the spool: %s", strerror(-rr));
                failed = true; /* transient (EMFILE, EACCES...): keep it, retry later */
                break;
            }
            long code = upload(sh, c, v[i].name, &body, why, sizeof(why));
            if (code == 202) {
                unlink(path);
                sent++;
                bytes += body.len;
            } else if (code == 400 || code == 413) {
                /* The server will never take it: keeping it would block the rest. */
                log_error("upload: %s refused, dropped: %s", v[i].name, why);
                unlink(path);
                refused++;
            } else {
                failed = true;
            }
        }
        if (sent || refused)
            log_info("upload: profiles=%u bytes=%llu ms=%llu refused=%u pending=%zu", sent,
                     (unsigned long long)bytes,
                     (unsigned long long)((clock__mono_ns() / 1000000) - t0), refused,
                     n - sent - refused);
        if (failed) {
            backoff = backoff ? backoff * 2 : BACKOFF_MIN_MS;
            if (backoff > BACKOFF_MAX_MS)
                backoff = BACKOFF_MAX_MS;
            log_warn("upload: %s/api/v1/profiles failed (%s); %zu profiles spooled, retrying "
                     "within %u ms",
                     sh->endpoint, why, n - sent - refused, backoff);
        } else {
            backoff = 0;
        }
        free(v);
        if (last)
            break;
    }
    buf__free(&body);
    curl_easy_cleanup(c);
    return NULL;
}

struct shipper *shipper__start(const struct ship_opts *opts, char *err, size_t errlen)
{
    struct shipper *sh = calloc(1, sizeof(*sh));

    if (!sh) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sh->opts = *opts;
    sh->endpoint = strdup(opts->endpoint);
    sh->api_key = opts->api_key && *opts->api_key ? strdup(opts->api_key) : NULL;
    size_t l = strlen(opts->spool_dir) + 16;
    sh->dir = malloc(l);
    if (!sh->endpoint || !sh->dir || (opts->api_key && *opts->api_key && !sh->api_key)) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    /* The base URL without a trailing slash. */
    size_t el = strlen(sh->endpoint);
    while (el && sh->endpoint[el - 1] == '/')
        sh->endpoint[--el] = '\0';
    if (strncmp(sh->endpoint, "http://", 7) && strncmp(sh->endpoint, "https://", 8)) {
        snprintf(err, errlen, "--endpoint %s: expected http://HOST:PORT or https://...",
                 opts->endpoint);
        goto fail;
    }
    snprintf(sh->dir, l, "%s/spool", opts->spool_dir);
    if ((mkdir(opts->spool_dir, 0700) && errno != EEXIST) ||
        (mkdir(sh->dir, 0700) && errno != EEXIST)) {
        snprintf(err, errlen, "cannot create the spool %s: %s", sh->dir, strerror(errno));
        goto fail;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pthread_mutex_init(&sh->mu, NULL);
    pthread_cond_init(&sh->cv, NULL);
    sh->pending = true; /* whatever a previous run left */
    srand((unsigned)clock__real_ns());
    if (pthread_create(&sh->thread, NULL, run, sh)) {
        snprintf(err, errlen, "cannot start the upload thread");
        goto fail;
    }
    return sh;
fail:
    free(sh->endpoint);
    free(sh->api_key);
    free(sh->dir);
    free(sh);
    return NULL;
}

void shipper__flush(struct shipper *sh)
{
    if (!sh)
        return;
    pthread_mutex_lock(&sh->mu);
    sh->pending = true;
    pthread_cond_signal(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

void shipper__stop(struct shipper *sh)
{
    if (!sh)
        return;
    pthread_mutex_lock(&sh->mu);
    sh->stopping = true;
    pthread_cond_signal(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
    pthread_join(sh->thread, NULL);
    pthread_mutex_destroy(&sh->mu);
    pthread_cond_destroy(&sh->cv);
    curl_global_cleanup();
    free(sh->endpoint);
    free(sh->api_key);
    free(sh->dir);
    free(sh);
}

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

/* Spool file names: SEQ~PID~HOST~SERVICE.pb.gz; SEQ (ns, 20 digits) sorts
 * oldest first. Service and host are percent-encoded so any name survives. */
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
        if (l < 7 || strcmp(de->d_name + l - 6, ".pb.gz") != 0 || l >= sizeof(v->name))
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

int shipper__enqueue(struct shipper *sh, const char *service, uint32_t pid, const char *host,
                     uint64_t start_ns, const void *data, size_t len)
{
    char path[4096], es[512], eh[512];
    struct spooled *v;
    size_t n;
    uint64_t total;
    int r;

    (void)start_ns;
    encode(es, sizeof(es), service);
    encode(eh, sizeof(eh), host);
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
    if (snprintf(path, sizeof(path), "%s/%020llu~%u~%s~%s.pb.gz", sh->dir, (unsigned long long)seq,
                 pid, eh, es) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    r = output__write_file(path, data, len, true);
    if (r)
        return r;
    pthread_mutex_lock(&sh->mu);
    sh->pending = true;
    pthread_cond_signal(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
    return 0;
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

/* Uploads one spooled file. Returns the HTTP status, or -1 for no answer. */
static long upload(struct shipper *sh, CURL *c, const char *name, struct buf *body, char *why,
                   size_t whylen)
{
    char seq[32], pid[16], host[512], service[512], url[4096], *q;
    struct buf resp;
    long code = -1;

    /* SEQ~PID~HOST~SERVICE.pb.gz: the encoded parts are URL-safe as they are. */
    if (sscanf(name, "%31[0-9]~%15[0-9]~%511[^~]~%511[^~]", seq, pid, host, service) != 4) {
        snprintf(why, whylen, "not a spool file name");
        return 400;
    }
    size_t sl = strlen(service);
    q = sl >= 6 ? service + sl - 6 : NULL;
    if (q && strcmp(q, ".pb.gz") == 0)
        *q = '\0'; /* only the suffix: a service may have ".pb.gz" inside */
    snprintf(url, sizeof(url), "%s/api/v1/profiles?service=%s&host=%s&pid=%s", sh->endpoint,
             service, host, pid);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/octet-stream");
    char auth[1024];
    if (sh->api_key) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", sh->api_key);
        h = curl_slist_append(h, auth);
    }
    buf__init(&resp, 4096);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
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
        if (list_spool(sh->dir, &v, &n, &total))
            continue;
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

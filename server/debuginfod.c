#include "debuginfod.h"

#include <dirent.h>
#include <elfutils/debuginfod.h>
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

#include "../common/clock.h"
#include "../common/debugfile.h"
#include "../common/hmap.h"
#include "../common/log.h"

/* A miss upstream is remembered this long: a fleet asking for a build id no
 * one has does not ask upstream once per agent. Short: libdebuginfod calls
 * a server that timed out, with another that said 404, a miss too. */
#define MISS_TTL_NS (15ull * 1000000000ull)
/* Misses remembered at most; past it the table starts over. */
#define MISS_MAX 100000
/* Upstream fetches at once (HTTP worker threads they hold); more: 503. */
#define FETCHES_MAX 2
#define INFLIGHT_MAX 16

enum { M_HITS, M_MISSES, M_BYTES, M_FETCHES, M_FETCH_FAILED, M_UPLOADS, M_REFUSED, M__COUNT };
static const char *const metric_names[] = {"codexray_debuginfod_hits_total",
                                           "codexray_debuginfod_misses_total",
                                           "codexray_debuginfod_bytes_served_total",
                                           "codexray_debuginfod_upstream_fetches_total",
                                           "codexray_debuginfod_upstream_failures_total",
                                           "codexray_debuginfod_uploads_total",
                                           "codexray_debuginfod_refused_files_total"};

struct dbgsrv {
    struct dbgsrv_opts o;
    char *uploads, *cache, *client;
    bool upstream;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char inflight[INFLIGHT_MAX][DEBUGFILE_ID_MAX + 16]; /* "ID.KIND" being fetched */
    unsigned ninflight;
    struct hmap *misses; /* "ID.KIND" -> when the miss expires */
    uint64_t m[M__COUNT];
};

struct dbgsrv_upload {
    struct dbgsrv *s;
    char id[DEBUGFILE_ID_MAX + 1];
    const char *kind;
    char tmp[4096];
    int fd;
    uint64_t len;
    bool too_big, failed;
};

static void count(struct dbgsrv *s, int i, uint64_t v)
{
    __atomic_add_fetch(&s->m[i], v, __ATOMIC_RELAXED);
}

int dbgsrv__parse_path(const char *url, char *id, const char **kind)
{
    static const char prefix[] = "/debuginfod/buildid/";
    const char *p, *slash;
    size_t n;

    if (!url || strncmp(url, prefix, sizeof(prefix) - 1) != 0)
        return -1;
    p = url + sizeof(prefix) - 1;
    slash = strchr(p, '/');
    if (!slash || (n = (size_t)(slash - p)) > DEBUGFILE_ID_MAX)
        return -1;
    memcpy(id, p, n);
    id[n] = '\0';
    if (!debugfile__valid_id(id))
        return -1;
    if (strcmp(slash + 1, "debuginfo") == 0)
        *kind = "debuginfo";
    else if (strcmp(slash + 1, "executable") == 0)
        *kind = "executable";
    else
        return -1;
    return 0;
}

void dbgsrv__free(struct dbgsrv *s)
{
    if (!s)
        return;
    free(s->uploads);
    free(s->cache);
    free(s->client);
    hmap__free(s->misses);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

struct dbgsrv *dbgsrv__new(const struct dbgsrv_opts *o, char *err, size_t errlen)
{
    struct dbgsrv *s = calloc(1, sizeof(*s));
    char num[32];

    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->o = *o;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->uploads = debugfile__join(o->dir, "uploads");
    s->cache = debugfile__join(o->dir, "cache");
    s->client = debugfile__join(o->dir, "client");
    s->misses = hmap__new();
    if (!s->uploads || !s->cache || !s->client || !s->misses) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (debugfile__mkdir_p(s->uploads) || debugfile__mkdir_p(s->cache) ||
        debugfile__mkdir_p(s->client)) {
        snprintf(err, errlen, "cannot make the directories under %s: %s", o->dir, strerror(errno));
        goto fail;
    }
    s->upstream = o->upstream && *o->upstream;
    if (s->upstream) {
        setenv(DEBUGINFOD_URLS_ENV_VAR, o->upstream, 1);
        setenv(DEBUGINFOD_CACHE_PATH_ENV_VAR, s->client, 1);
        snprintf(num, sizeof(num), "%u", o->timeout_s);
        setenv(DEBUGINFOD_TIMEOUT_ENV_VAR, num, 1);
        snprintf(num, sizeof(num), "%u", o->timeout_s * 2);
        setenv(DEBUGINFOD_MAXTIME_ENV_VAR, num, 1);
        snprintf(num, sizeof(num), "%llu", (unsigned long long)o->file_max);
        setenv(DEBUGINFOD_MAXSIZE_ENV_VAR, num, 1);
        setenv(DEBUGINFOD_RETRY_LIMIT_ENV_VAR, "1", 1);
        unsetenv(DEBUGINFOD_PROGRESS_ENV_VAR);
    } else {
        unsetenv(DEBUGINFOD_URLS_ENV_VAR);
    }
    return s;
fail:
    dbgsrv__free(s);
    return NULL;
}

static int open_stored(const char *dir, const char *id, const char *kind, int *fd, uint64_t *size,
                       bool touch)
{
    char p[4096];
    struct stat st;

    snprintf(p, sizeof(p), "%s/%s.%s", dir, id, kind);
    *fd = open(p, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return -1;
    if (fstat(*fd, &st) || !S_ISREG(st.st_mode)) {
        close(*fd);
        *fd = -1;
        return -1;
    }
    *size = (uint64_t)st.st_size;
    if (touch) /* the cache keeps the most recently used */
        futimens(*fd, NULL);
    return 0;
}

/* libdebuginfod's cache entry for id: retries and misses are ours to time. */
static void forget_client_entry(struct dbgsrv *s, const char *id)
{
    char p[4096];
    DIR *d;
    struct dirent *de;

    snprintf(p, sizeof(p), "%s/%s", s->client, id);
    if (!(d = opendir(p)))
        return;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.')
            unlinkat(dirfd(d), de->d_name, 0);
    closedir(d);
    rmdir(p);
}

/* One upstream fetch of (id, kind) into cache/. Returns 0, -ENOENT,
 * -EAGAIN or -EIO with why. */
static int fetch(struct dbgsrv *s, const char *id, const char *kind, char *why, size_t n)
{
    debuginfod_client *c = debuginfod_begin();
    char *path = NULL, dst[4096];
    int fd, ret;

    if (!c) {
        snprintf(why, n, "cannot start elfutils' client");
        return -EAGAIN;
    }
    forget_client_entry(s, id);
    /* Else libdebuginfod 0.188 closes a number twice (see the function):
     * here a request's socket or a store's file could go. Two fetches at
     * once can still meet in that window, far more rarely. */
    debugfile__client_config_reset(s->client);
    count(s, M_FETCHES, 1);
    uint64_t t0 = clock__mono_ns();
    if (strcmp(kind, "executable") == 0)
        fd = debuginfod_find_executable(c, (const unsigned char *)id, 0, &path);
    else
        fd = debuginfod_find_debuginfo(c, (const unsigned char *)id, 0, &path);
    uint64_t ms = (clock__mono_ns() - t0) / 1000000;
    if (fd < 0) {
        /* libdebuginfod says ENOENT also when a server timed out and another
         * said 404: a miss that took the whole timeout may be a slow server. */
        bool miss = fd == -ENOENT && ms < (uint64_t)s->o.timeout_s * 1000;
        count(s, M_FETCH_FAILED, 1);
        ret = miss ? -ENOENT : -EAGAIN;
        snprintf(why, n, "upstream: %s",
                 miss ? "no upstream server has it"
                      : (fd == -ENOENT ? "an upstream server timed out" : strerror(-fd)));
        log_info("debuginfod: %s/%s from upstream: %s (%llu ms)", id, kind, why,
                 (unsigned long long)ms);
        goto out;
    }
    if (debugfile__check(fd, id, s->o.file_max, why, n)) {
        count(s, M_REFUSED, 1);
        log_warn("debuginfod: %s/%s from upstream refused: %s", id, kind, why);
        ret = -EIO;
        goto out;
    }
    snprintf(dst, sizeof(dst), "%s/%s.%s", s->cache, id, kind);
    if (rename(path, dst)) {
        snprintf(why, n, "cannot store it: %s", strerror(errno));
        ret = -EAGAIN;
        goto out;
    }
    utimensat(AT_FDCWD, dst, NULL, 0);
    debugfile__trim(s->cache, s->o.cache_max);
    log_info("debuginfod: %s/%s fetched from upstream in %llu ms", id, kind,
             (unsigned long long)ms);
    ret = 0;
out:
    if (fd >= 0)
        close(fd);
    free(path);
    forget_client_entry(s, id);
    debuginfod_end(c);
    return ret;
}

static long inflight_find(struct dbgsrv *s, const char *key)
{
    for (unsigned i = 0; i < s->ninflight; i++)
        if (strcmp(s->inflight[i], key) == 0)
            return i;
    return -1;
}

int dbgsrv__open(struct dbgsrv *s, const char *id, const char *kind, int *fd, uint64_t *size,
                 char *why, size_t whylen)
{
    char key[DEBUGFILE_ID_MAX + 16];
    int r;

    snprintf(key, sizeof(key), "%s.%s", id, kind);
    if (open_stored(s->uploads, id, kind, fd, size, false) == 0 ||
        open_stored(s->cache, id, kind, fd, size, true) == 0) {
        count(s, M_HITS, 1);
        count(s, M_BYTES, *size);
        return 0;
    }
    if (!s->upstream) {
        count(s, M_MISSES, 1);
        snprintf(why, whylen, "not uploaded, and no --debuginfod-upstream");
        return -ENOENT;
    }
    pthread_mutex_lock(&s->mu);
    /* Someone is fetching it: wait for that fetch, then look again. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2 * s->o.timeout_s + 5;
    bool waited = false;
    while (inflight_find(s, key) >= 0) {
        waited = true;
        if (pthread_cond_timedwait(&s->cv, &s->mu, &until))
            break;
    }
    if (waited || inflight_find(s, key) >= 0) {
        pthread_mutex_unlock(&s->mu);
        if (open_stored(s->cache, id, kind, fd, size, true) == 0) {
            count(s, M_HITS, 1);
            count(s, M_BYTES, *size);
            return 0;
        }
        count(s, M_MISSES, 1);
        snprintf(why, whylen, "the upstream fetch of it did not bring it");
        return -EAGAIN;
    }
    long mi = hmap__find(s->misses, key, strlen(key));
    if (mi >= 0 && *hmap__val(s->misses, mi) > clock__mono_ns()) {
        pthread_mutex_unlock(&s->mu);
        count(s, M_MISSES, 1);
        snprintf(why, whylen, "no upstream server has it (asked seconds ago)");
        return -ENOENT;
    }
    if (s->ninflight >= FETCHES_MAX) {
        pthread_mutex_unlock(&s->mu);
        count(s, M_MISSES, 1);
        snprintf(why, whylen, "busy: %d upstream fetches under way, ask again", FETCHES_MAX);
        return -EAGAIN;
    }
    snprintf(s->inflight[s->ninflight++], sizeof(s->inflight[0]), "%s", key);
    pthread_mutex_unlock(&s->mu);

    r = fetch(s, id, kind, why, whylen);

    pthread_mutex_lock(&s->mu);
    long i = inflight_find(s, key);
    if (i >= 0) {
        memmove(s->inflight[i], s->inflight[s->ninflight - 1], sizeof(s->inflight[0]));
        s->ninflight--;
    }
    if (r == -ENOENT) {
        if (hmap__len(s->misses) >= MISS_MAX) {
            struct hmap *fresh = hmap__new();
            if (fresh) {
                hmap__free(s->misses);
                s->misses = fresh;
            }
        }
        long k = hmap__put(s->misses, key, strlen(key), NULL);
        if (k >= 0)
            *hmap__val(s->misses, k) = clock__mono_ns() + MISS_TTL_NS;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (r == 0 && open_stored(s->cache, id, kind, fd, size, true) == 0) {
        count(s, M_HITS, 1);
        count(s, M_BYTES, *size);
        return 0;
    }
    count(s, M_MISSES, 1);
    return r ? r : -EAGAIN;
}

struct dbgsrv_upload *dbgsrv__upload_begin(struct dbgsrv *s, const char *id, const char *kind,
                                           uint64_t declared, char *why, size_t whylen)
{
    struct dbgsrv_upload *u;

    if (declared > s->o.file_max) {
        snprintf(why, whylen, "larger than %llu bytes (--debuginfod-file-max)",
                 (unsigned long long)s->o.file_max);
        return NULL;
    }
    u = calloc(1, sizeof(*u));
    if (!u) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    u->s = s;
    snprintf(u->id, sizeof(u->id), "%s", id);
    u->kind = kind;
    snprintf(u->tmp, sizeof(u->tmp), "%s/.upload-XXXXXX", s->uploads);
    u->fd = mkostemp(u->tmp, O_CLOEXEC);
    if (u->fd < 0) {
        snprintf(why, whylen, "cannot store it: %s", strerror(errno));
        free(u);
        return NULL;
    }
    return u;
}

void dbgsrv__upload_write(struct dbgsrv_upload *u, const void *p, size_t n)
{
    if (u->too_big || u->failed)
        return;
    if (u->len + n > u->s->o.file_max) {
        u->too_big = true;
        return;
    }
    const char *c = p;
    while (n) {
        ssize_t w = write(u->fd, c, n);
        if (w <= 0) {
            u->failed = true;
            return;
        }
        c += w;
        n -= (size_t)w;
        u->len += (uint64_t)w;
    }
}

int dbgsrv__upload_finish(struct dbgsrv_upload *u, char *why, size_t whylen)
{
    char dst[4096];

    if (u->too_big) {
        snprintf(why, whylen, "larger than %llu bytes (--debuginfod-file-max)",
                 (unsigned long long)u->s->o.file_max);
        goto refused;
    }
    if (u->failed) {
        snprintf(why, whylen, "cannot store it: %s", strerror(errno));
        return -1;
    }
    if (debugfile__check(u->fd, u->id, u->s->o.file_max, why, whylen))
        goto refused;
    snprintf(dst, sizeof(dst), "%s/%s.%s", u->s->uploads, u->id, u->kind);
    if (fchmod(u->fd, 0600) || rename(u->tmp, dst)) {
        snprintf(why, whylen, "cannot store it: %s", strerror(errno));
        return -1;
    }
    u->tmp[0] = '\0';
    count(u->s, M_UPLOADS, 1);
    log_info("debuginfod: %s/%s uploaded (%llu bytes)", u->id, u->kind, (unsigned long long)u->len);
    return 0;
refused:
    count(u->s, M_REFUSED, 1);
    return -1;
}

void dbgsrv__upload_free(struct dbgsrv_upload *u)
{
    if (!u)
        return;
    if (u->fd >= 0)
        close(u->fd);
    if (u->tmp[0])
        unlink(u->tmp);
    free(u);
}

int dbgsrv__metrics(struct dbgsrv *s, struct buf *b)
{
    char line[256];
    int n;

    for (int i = 0; i < M__COUNT; i++) {
        n = snprintf(line, sizeof(line), "# TYPE %s counter\n%s %llu\n", metric_names[i],
                     metric_names[i],
                     (unsigned long long)__atomic_load_n(&s->m[i], __ATOMIC_RELAXED));
        if (buf__append(b, line, (size_t)n))
            return -ENOMEM;
    }
    return 0;
}

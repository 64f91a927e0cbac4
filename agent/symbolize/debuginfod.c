#include "debuginfod.h"

#include <dirent.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../common/clock.h"
#include "../../common/debugfile.h"
#include "../../common/hmap.h"
#include "../../common/log.h"

#define QUEUE_MAX 1024
#define RETRY_FIRST_NS (10ull * 1000000000ull)
#define RETRY_MAX_NS (600ull * 1000000000ull)

struct entry {
    enum debuginfod_state state;
    bool queued;
    bool logged; /* the first failure was logged */
    unsigned failures;
    uint64_t retry_ns; /* FAILED: asked again from then on */
    char what[96];     /* a binary with this build id, for the logs */
    char why[256];
};

struct debuginfod {
    struct debuginfod_opts o;
    char *urls, *dir, *files, *client_dir, *auth;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv, idle_cv;
    bool stopping, busy;
    struct hmap *ids; /* build id -> index into entries */
    struct entry *entries;
    size_t nentries, cap;
    long queue[QUEUE_MAX];
    unsigned qhead, qn;
};

const char *debuginfod__urls(const struct debuginfod *d)
{
    return d->urls;
}

static void file_path(const struct debuginfod *d, const char *id, char *out, size_t n)
{
    snprintf(out, n, "%s/%s.debug", d->files, id);
}

/* libdebuginfod's own cache entry of id (a download, or the empty file that
 * marks a miss): removed before each try, since retries are ours to time. */
static void forget_client_entry(const struct debuginfod *d, const char *id)
{
    char p[4096];
    int n = snprintf(p, sizeof(p), "%s/%s", d->client_dir, id);
    DIR *dir;
    struct dirent *de;

    if (n < 0 || (size_t)n >= sizeof(p) || !(dir = opendir(p)))
        return;
    while ((de = readdir(dir)))
        if (de->d_name[0] != '.')
            unlinkat(dirfd(dir), de->d_name, 0);
    closedir(dir);
    rmdir(p);
}

static void reason(int rc, char *why, size_t n)
{
    switch (-rc) {
    case ENOENT:
        /* libdebuginfod says ENOENT for a 404 and for other HTTP errors
         * (a 503 from a server whose upstream is away) alike. */
        snprintf(why, n, "no server gave it (HTTP 404 or another error status)");
        break;
    case EFBIG:
        snprintf(why, n, "larger than the cap");
        break;
    case ETIME:
    case ETIMEDOUT:
        snprintf(why, n, "the server timed out");
        break;
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH:
        snprintf(why, n, "the server cannot be reached (%s)", strerror(-rc));
        break;
    case ENOSYS:
        snprintf(why, n, "no server configured");
        break;
    default:
        snprintf(why, n, "%s", strerror(-rc));
    }
}

static __thread struct debuginfod *progress_of;

/* Called by libdebuginfod as a download goes on: a non-zero return cuts it
 * short. Used for the size cap (when the server does not say the size up
 * front) and to stop at once. */
static int on_progress(debuginfod_client *c, long done, long total)
{
    struct debuginfod *d = progress_of;
    (void)c;
    (void)total;
    if (!d)
        return 0;
    if (done > 0 && (uint64_t)done > d->o.file_max)
        return 1;
    return __atomic_load_n(&d->stopping, __ATOMIC_RELAXED);
}

/* Fetches id into DIR/files (or finds it there). Returns 0 (fetched), 1
 * (found there), or -1 with why; *not_found when no server has it. */
static int fetch(struct debuginfod *d, debuginfod_client *c, const char *id, char *why, size_t n)
{
    char dst[4096], *path = NULL;
    struct stat st;
    int fd, ret = -1;

    file_path(d, id, dst, sizeof(dst));
    fd = open(dst, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) { /* kept from an earlier run: checked when stored, again now */
        ret = debugfile__check(fd, id, d->o.file_max, why, n);
        close(fd);
        if (ret == 0) {
            utimensat(AT_FDCWD, dst, NULL, 0);
            return 1;
        }
        unlink(dst);
    }
    forget_client_entry(d, id);
    /* Else libdebuginfod 0.188 closes a number twice, and the second close
     * may take a file another thread just opened (a spool file: EBADF). */
    debugfile__client_config_reset(d->client_dir);
    fd = debuginfod_find_debuginfo(c, (const unsigned char *)id, 0, &path);
    if (fd < 0) {
        reason(fd, why, n);
        goto out;
    }
    if (debugfile__check(fd, id, d->o.file_max, why, n)) {
        char w[200];
        snprintf(w, sizeof(w), "%s", why);
        snprintf(why, n, "refused what the server sent: %s", w);
        unlink(path);
        goto out;
    }
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size > d->o.cache_max) {
        snprintf(why, n, "%lld bytes, more than the whole cache (--debuginfod-cache-max)",
                 (long long)st.st_size);
        unlink(path);
        goto out;
    }
    if (rename(path, dst)) {
        snprintf(why, n, "cannot keep it in %s: %s", d->files, strerror(errno));
        unlink(path);
        goto out;
    }
    utimensat(AT_FDCWD, dst, NULL, 0); /* newest: the last to be trimmed */
    debugfile__trim(d->files, d->o.cache_max);
    ret = 0;
out:
    if (fd >= 0)
        close(fd);
    free(path);
    forget_client_entry(d, id);
    return ret;
}

static void *run(void *arg)
{
    /* Named for top, perf and the benchmark's per-thread figures. */
    pthread_setname_np(pthread_self(), "cx-debuginfod");
    struct debuginfod *d = arg;
    debuginfod_client *c = debuginfod_begin();
    char hdr[600];

    progress_of = d;
    if (c) {
        debuginfod_set_progressfn(c, on_progress);
        if (d->auth) {
            snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", d->auth);
            debuginfod_add_http_header(c, hdr);
        }
    } else {
        log_error("debuginfod: cannot start elfutils' client; no debug files will be fetched");
    }
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->qn && !d->stopping)
            pthread_cond_wait(&d->cv, &d->mu);
        if (d->stopping)
            break;
        long i = d->queue[d->qhead];
        d->qhead = (d->qhead + 1) % QUEUE_MAX;
        d->qn--;
        d->busy = true;
        size_t len;
        char id[DEBUGFILE_ID_MAX + 1], what[96], why[256] = "";
        const char *k = hmap__key(d->ids, i, &len);
        memcpy(id, k, len);
        id[len] = '\0';
        snprintf(what, sizeof(what), "%s", d->entries[i].what);
        pthread_mutex_unlock(&d->mu);

        uint64_t t0 = clock__mono_ns();
        int r = c ? fetch(d, c, id, why, sizeof(why)) : -1;
        uint64_t ms = (clock__mono_ns() - t0) / 1000000;
        if (!c)
            snprintf(why, sizeof(why), "no client");

        pthread_mutex_lock(&d->mu);
        struct entry *e = &d->entries[i];
        e->queued = false;
        d->busy = false;
        if (r >= 0) {
            e->state = DEBUGINFOD_READY;
            e->failures = 0;
            log_info("debuginfod: %s build_id=%s: debug file %s in %llu ms; its frames are "
                     "named from the next window",
                     what, id, r ? "found in the cache" : "fetched", (unsigned long long)ms);
        } else {
            e->state = DEBUGINFOD_FAILED;
            e->failures++;
            uint64_t wait = RETRY_FIRST_NS << (e->failures < 7 ? e->failures - 1 : 6);
            if (wait > RETRY_MAX_NS)
                wait = RETRY_MAX_NS;
            e->retry_ns = clock__mono_ns() + wait;
            snprintf(e->why, sizeof(e->why), "%s", why);
            /* A miss is the common case (most binaries have no debug file
             * anywhere): info; anything else (refused, unreachable) warns. */
            if (!e->logged)
                log__msg(strstr(why, "no server gave it") ? LOG_INFO : LOG_WARN,
                         "debuginfod: %s build_id=%s: no debug file: %s (asked %s in %llu ms; "
                         "asked again in %llu s, logged once)",
                         what, id, why, d->urls, (unsigned long long)ms,
                         (unsigned long long)(wait / 1000000000ull));
            else
                log_debug("debuginfod: %s build_id=%s: still no debug file: %s", what, id, why);
            e->logged = true;
        }
        if (!d->qn)
            pthread_cond_broadcast(&d->idle_cv);
    }
    pthread_mutex_unlock(&d->mu);
    progress_of = NULL;
    if (c)
        debuginfod_end(c);
    return NULL;
}

static void free_all(struct debuginfod *d)
{
    free(d->urls);
    free(d->dir);
    free(d->files);
    free(d->client_dir);
    free(d->auth);
    hmap__free(d->ids);
    free(d->entries);
    free(d);
}

struct debuginfod *debuginfod__start(const struct debuginfod_opts *o, char *err, size_t errlen)
{
    struct debuginfod *d = calloc(1, sizeof(*d));
    char num[32];
    int r;

    if (!d) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    d->o = *o;
    d->urls = strdup(o->urls);
    d->dir = strdup(o->dir);
    d->files = debugfile__join(o->dir, "files");
    d->client_dir = debugfile__join(o->dir, "client");
    d->auth = o->auth_token && *o->auth_token ? strdup(o->auth_token) : NULL;
    d->ids = hmap__new();
    if (!d->urls || !d->dir || !d->files || !d->client_dir || !d->ids ||
        (o->auth_token && *o->auth_token && !d->auth)) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (debugfile__mkdir_p(d->files) || debugfile__mkdir_p(d->client_dir)) {
        snprintf(err, errlen, "cannot make %s: %s", d->files, strerror(errno));
        goto fail;
    }
    /* What libdebuginfod reads (see the header: no other thread yet). */
    setenv(DEBUGINFOD_URLS_ENV_VAR, d->urls, 1);
    setenv(DEBUGINFOD_CACHE_PATH_ENV_VAR, d->client_dir, 1);
    snprintf(num, sizeof(num), "%u", o->timeout_s);
    setenv(DEBUGINFOD_TIMEOUT_ENV_VAR, num, 1);
    /* A whole download: the silence timeout alone lets a slow one go on. */
    snprintf(num, sizeof(num), "%u", o->timeout_s * 10);
    setenv(DEBUGINFOD_MAXTIME_ENV_VAR, num, 1);
    snprintf(num, sizeof(num), "%llu", (unsigned long long)o->file_max);
    setenv(DEBUGINFOD_MAXSIZE_ENV_VAR, num, 1);
    setenv(DEBUGINFOD_RETRY_LIMIT_ENV_VAR, "1", 1);
    unsetenv(DEBUGINFOD_PROGRESS_ENV_VAR);
    unsetenv(DEBUGINFOD_VERBOSE_ENV_VAR);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    pthread_cond_init(&d->idle_cv, NULL);
    r = pthread_create(&d->thread, NULL, run, d);
    if (r) {
        snprintf(err, errlen, "cannot start its thread: %s", strerror(r));
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->cv);
        pthread_cond_destroy(&d->idle_cv);
        goto fail;
    }
    return d;
fail:
    free_all(d);
    return NULL;
}

void debuginfod__stop(struct debuginfod *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    __atomic_store_n(&d->stopping, true, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&d->cv);
    pthread_cond_broadcast(&d->idle_cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    pthread_cond_destroy(&d->idle_cv);
    free_all(d);
}

/* Queues entry i; false when the queue is full (asked again next time). */
static bool enqueue(struct debuginfod *d, long i)
{
    if (d->entries[i].queued)
        return true;
    if (d->qn == QUEUE_MAX)
        return false;
    d->queue[(d->qhead + d->qn) % QUEUE_MAX] = i;
    d->qn++;
    d->entries[i].queued = true;
    pthread_cond_signal(&d->cv);
    return true;
}

enum debuginfod_state debuginfod__want(struct debuginfod *d, const char *id, const char *what,
                                       char *path, size_t pathlen, char *why, size_t whylen)
{
    enum debuginfod_state st = DEBUGINFOD_PENDING;
    long i;

    if (why && whylen)
        why[0] = '\0';
    if (!debugfile__valid_id(id)) {
        snprintf(why, whylen, "no usable build id");
        return DEBUGINFOD_FAILED;
    }
    pthread_mutex_lock(&d->mu);
    i = hmap__put(d->ids, id, strlen(id), NULL);
    if (i < 0)
        goto oom;
    if ((size_t)i >= d->nentries) { /* new (or left without an entry by an earlier failure) */
        if ((size_t)i >= d->cap) {
            size_t nc = d->cap ? d->cap * 2 : 64;
            while (nc <= (size_t)i)
                nc *= 2;
            struct entry *ne = realloc(d->entries, nc * sizeof(*ne));
            if (!ne)
                goto oom;
            d->entries = ne;
            d->cap = nc;
        }
        /* Zeroed: PENDING, not queued. */
        memset(&d->entries[d->nentries], 0, ((size_t)i + 1 - d->nentries) * sizeof(*d->entries));
        d->nentries = (size_t)i + 1;
    }
    struct entry *e = &d->entries[i];
    if (!e->what[0])
        snprintf(e->what, sizeof(e->what), "%s", what ? what : "?");
    if (e->state == DEBUGINFOD_READY) {
        file_path(d, id, path, pathlen);
        /* Trimmed since (or removed by hand): fetched again. */
        if (utimensat(AT_FDCWD, path, NULL, 0) == 0) {
            st = DEBUGINFOD_READY;
        } else {
            e->state = DEBUGINFOD_PENDING;
            enqueue(d, i);
        }
    } else if (e->state == DEBUGINFOD_FAILED) {
        if (!e->queued && clock__mono_ns() >= e->retry_ns)
            enqueue(d, i);
        st = DEBUGINFOD_FAILED;
        snprintf(why, whylen, "%s", e->why);
    } else if (!e->queued) {
        enqueue(d, i);
    }
    pthread_mutex_unlock(&d->mu);
    return st;
oom:
    pthread_mutex_unlock(&d->mu);
    snprintf(why, whylen, "out of memory");
    return DEBUGINFOD_FAILED;
}

bool debuginfod__wait_idle(struct debuginfod *d, unsigned timeout_ms)
{
    struct timespec until;
    bool idle;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&d->mu);
    while ((d->qn || d->busy) && !d->stopping)
        if (pthread_cond_timedwait(&d->idle_cv, &d->mu, &until))
            break;
    idle = !d->qn && !d->busy;
    pthread_mutex_unlock(&d->mu);
    return idle;
}

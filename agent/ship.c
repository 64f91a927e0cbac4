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
#include "ship_http.h"
#include "spool.h"

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 60000
/* Profiles waiting in memory: a few windows of a busy node. */
#define MEM_MAX (64ull << 20)
/* Refusals logged one by one in a pass; the rest are counted. */
#define REFUSED_LOGGED 3

/* A profile waiting in memory, in its spool form (spool.h). */
struct pending {
    struct pending *next;
    uint32_t pid;
    struct buf file;
};

struct shipper {
    struct ship_opts opts;
    char *endpoint, *api_key, *dir;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping, pending;
    /* Profiles waiting in memory, oldest first, and their bytes (at most
     * mem_max): the thread sends them straight from here, and writes them
     * to the spool only when an upload fails, the queue is full, or at
     * stop. Under mu. */
    struct pending *head, **tail;
    uint64_t mem_bytes, mem_max;
    /* Whether the spool directory may hold files: the thread lists it only
     * then, not once per window. Under mu. */
    bool spooled;
    /* The last pass failed: new profiles go to the spool at once, so none
     * waits in memory through a backoff of up to a minute. Under mu. */
    bool failing;
    /* Writing the spool (the worker and the thread both spill): the last
     * file's sequence number and the spool's size in bytes, listed once at
     * start and kept since, so a file written costs no listing while the
     * spool is within its bound. Under spill_mu. */
    pthread_mutex_t spill_mu;
    uint64_t seq, spool_bytes;
    /* The thread's: its HTTP exchanges, and one batch's profiles as it
     * sends them (BATCH_PROFILES each). */
    bool curl_up; /* curl_global_init done, to be undone */
    struct ship_http *http;
    struct ship_item *items;
    struct pending **batch;
    struct buf *files;
    size_t *spool_at;
};

/* The oldest profile waiting in memory, taken off the queue (under mu), or
 * NULL. */
static struct pending *pop(struct shipper *sh)
{
    struct pending *p = sh->head;

    if (p) {
        sh->head = p->next;
        if (!sh->head)
            sh->tail = &sh->head;
        sh->mem_bytes -= p->file.len;
        p->next = NULL;
    }
    return p;
}

/* Writes the list p to the spool, oldest first, and frees it. Called
 * without mu (the caller owns p by then). */
static void spill_list(struct shipper *sh, struct pending *p)
{
    pthread_mutex_lock(&sh->spill_mu);
    while (p) {
        struct pending *next = p->next;
        int r = spool__write(sh->dir, &sh->seq, p->pid, &p->file, sh->opts.spool_max_bytes,
                             &sh->spool_bytes);
        if (r)
            log_error("spool: cannot spool the profile of pid=%u: %s: it is lost", p->pid,
                      strerror(-r));
        buf__free(&p->file);
        free(p);
        p = next;
    }
    pthread_mutex_unlock(&sh->spill_mu);
}

/* Writes the list first (may be NULL), then the whole memory queue, to the
 * spool; with failing, new profiles go straight there until an upload
 * succeeds. Returns how many profiles were written. */
static size_t spill_all(struct shipper *sh, struct pending *first, bool failing)
{
    struct pending *all = first, **at = &all;
    size_t n = 0;

    while (*at)
        at = &(*at)->next;
    pthread_mutex_lock(&sh->mu);
    *at = sh->head;
    sh->head = NULL;
    sh->tail = &sh->head;
    sh->mem_bytes = 0;
    sh->spooled |= all != NULL;
    sh->failing |= failing;
    pthread_mutex_unlock(&sh->mu);
    for (at = &all; *at; at = &(*at)->next)
        n++;
    spill_list(sh, all);
    return n;
}

int shipper__enqueue(struct shipper *sh, const struct identity *id, uint32_t pid, const char *host,
                     uint64_t start_ns, const void *data, size_t len)
{
    struct pending *p = calloc(1, sizeof(*p)), *over = NULL, **otail = &over;
    int r;

    (void)start_ns;
    if (!p)
        return -ENOMEM;
    p->pid = pid;
    buf__init(&p->file, SPOOL_HEADER_MAX + len);
    if ((r = spool__format(&p->file, id, pid, host, data, len))) {
        buf__free(&p->file);
        free(p);
        return r;
    }
    pthread_mutex_lock(&sh->mu);
    /* Past the memory bound (a server slower than the windows come), the
     * oldest go to the spool, which has its own bound. */
    while (sh->head && (sh->failing || sh->mem_bytes + p->file.len > sh->mem_max)) {
        *otail = pop(sh);
        otail = &(*otail)->next;
    }
    if (sh->failing) {
        *otail = p;
    } else {
        *sh->tail = p;
        sh->tail = &p->next;
        sh->mem_bytes += p->file.len;
    }
    sh->spooled |= over != NULL;
    pthread_mutex_unlock(&sh->mu);
    spill_list(sh, over);
    return 0;
}

/* What one pass did, for its log line. */
struct pass {
    unsigned sent, refused;
    size_t left; /* still waiting, in the spool or in memory */
    bool failed;
    char why[512];
};

/* Counts one item's outcome in the pass. Returns false when it was not
 * sent and is to be tried again; a refusal is logged, naming the spool
 * file or else the pid (the first few of a pass: a server refusing a whole
 * window must not flood the log). */
static bool tally(struct pass *ps, const struct ship_item *it, uint32_t pid)
{
    if (!ship_item__settled(it->status))
        return false;
    if (it->status == 202) {
        ps->sent++;
        return true;
    }
    /* The server will never take it: keeping it would block the rest. */
    if (ps->refused++ >= REFUSED_LOGGED)
        return true;
    if (it->name)
        log_error("upload: %s refused (HTTP %ld), dropped: %s", it->name, it->status, it->why);
    else
        log_error("upload: the profile of pid=%u refused (HTTP %ld), dropped: %s", pid, it->status,
                  it->why);
    return true;
}

/* Sends the spool directory oldest first, in batches, deleting what the
 * server took. Stops at the first failure. Returns false when the
 * directory cannot be listed (it holds nothing to send then). */
static bool send_spool(struct shipper *sh, struct pass *ps)
{
    struct spooled *v;
    size_t n, i = 0, done = 0;
    uint64_t total;

    if (spool__list(sh->dir, &v, &n, &total))
        return false;
    while (i < n && !ps->failed) {
        size_t k = 0, bytes = 0;
        /* Read a batch's worth of files. */
        for (; i < n && k < BATCH_PROFILES && (!k || bytes + v[i].size <= BATCH_BYTES); i++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", sh->dir, v[i].name);
            buf__reset(&sh->files[k]);
            int rr = buf__read_file(&sh->files[k], AT_FDCWD, path);
            if (rr == -E2BIG) {
                log_error("upload: %s is larger than %u MiB, dropped", v[i].name,
                          SPOOL_FILE_MAX >> 20);
                unlink(path); /* it would block the spool for good */
                done++;
                continue;
            }
            if (rr) {
                snprintf(ps->why, sizeof(ps->why), "cannot read the spool: %s", strerror(-rr));
                ps->failed = true; /* transient (EMFILE, EACCES...): keep it, retry later */
                break;
            }
            sh->items[k] = (struct ship_item){.name = v[i].name, .file = &sh->files[k]};
            sh->spool_at[k++] = i;
            bytes += sh->files[k - 1].len;
        }
        if (k)
            ship_http__send(sh->http, sh->items, k, ps->why, sizeof(ps->why));
        for (size_t j = 0; j < k; j++) {
            struct spooled *f = &v[sh->spool_at[j]];
            char path[4096];
            if (!tally(ps, &sh->items[j], 0)) {
                ps->failed = true;
                continue; /* kept for the next pass */
            }
            snprintf(path, sizeof(path), "%s/%s", sh->dir, f->name);
            if (unlink(path) == 0) {
                pthread_mutex_lock(&sh->spill_mu);
                sh->spool_bytes -= sh->spool_bytes < f->size ? sh->spool_bytes : f->size;
                pthread_mutex_unlock(&sh->spill_mu);
            }
            done++;
        }
        /* After an outage a batch's files may be large: their memory is
         * not kept for the next pass. */
        for (size_t j = 0; j < k; j++)
            buf__free(&sh->files[j]);
    }
    ps->left += n - done;
    free(v);
    if (!ps->failed) {
        pthread_mutex_lock(&sh->mu);
        sh->spooled = false; /* until the next spill */
        pthread_mutex_unlock(&sh->mu);
    }
    return true;
}

/* Sends the memory queue oldest first, in batches. At the first failure,
 * what is left goes to the spool, to be sent from there after the
 * backoff. */
static void send_memory(struct shipper *sh, struct pass *ps)
{
    for (;;) {
        struct pending *keep = NULL, **kt = &keep;
        size_t k = 0;

        /* ship_http__send splits them into batches of BATCH_BYTES. */
        pthread_mutex_lock(&sh->mu);
        while (sh->head && k < BATCH_PROFILES) {
            sh->batch[k] = pop(sh);
            sh->items[k] = (struct ship_item){.file = &sh->batch[k]->file};
            k++;
        }
        pthread_mutex_unlock(&sh->mu);
        if (!k)
            return;
        ship_http__send(sh->http, sh->items, k, ps->why, sizeof(ps->why));
        for (size_t j = 0; j < k; j++) {
            struct pending *p = sh->batch[j];
            if (!tally(ps, &sh->items[j], p->pid)) {
                *kt = p;
                kt = &p->next;
                continue;
            }
            buf__free(&p->file);
            free(p);
        }
        if (keep) {
            ps->failed = true;
            ps->left += spill_all(sh, keep, true);
            return;
        }
    }
}

/* Waits for work (or the backoff's end, or stop); returns whether this is
 * the last pass, and whether the spool is to be read. */
static bool wait_for_work(struct shipper *sh, unsigned backoff, bool *spooled)
{
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
    *spooled = sh->spooled;
    pthread_mutex_unlock(&sh->mu);
    return last;
}

static void *run(void *arg)
{
    /* Named for top, perf and the benchmark's per-thread figures. */
    pthread_setname_np(pthread_self(), "cx-ship");
    struct shipper *sh = arg;
    unsigned backoff = 0;

    for (;;) {
        bool spooled, last = wait_for_work(sh, backoff, &spooled);
        struct pass ps = {0};
        uint64_t t0 = clock__mono_ns() / 1000000, bytes0, bytes1;
        uint64_t requests = ship_http__requests(sh->http, &bytes0);

        if (last) {
            /* Stopping: everything goes to disk first, so a stop cut short
             * (a service manager's SIGKILL after its timeout) loses
             * nothing; the last pass then sends from the spool. */
            spooled |= spill_all(sh, NULL, false) > 0;
        }
        /* The spool first: it holds the oldest profiles. */
        if (spooled)
            send_spool(sh, &ps);
        if (!ps.failed)
            send_memory(sh, &ps);
        if (ps.sent || ps.refused) {
            /* bytes: as sent, compressed. */
            requests = ship_http__requests(sh->http, &bytes1) - requests;
            log_info("upload: profiles=%u bytes=%llu requests=%llu ms=%llu refused=%u pending=%zu",
                     ps.sent, (unsigned long long)(bytes1 - bytes0), (unsigned long long)requests,
                     (unsigned long long)((clock__mono_ns() / 1000000) - t0), ps.refused, ps.left);
        }
        if (ps.failed) {
            /* While the server is away, every profile waits on disk: an
             * agent killed meanwhile loses nothing. */
            ps.left += spill_all(sh, NULL, true);
            backoff = backoff ? backoff * 2 : BACKOFF_MIN_MS;
            if (backoff > BACKOFF_MAX_MS)
                backoff = BACKOFF_MAX_MS;
            log_warn("upload: %s/api/v1/profiles failed (%s); %zu profiles spooled, retrying "
                     "within %u ms",
                     sh->endpoint, ps.why, ps.left, backoff);
        } else {
            pthread_mutex_lock(&sh->mu);
            sh->failing = false;
            pthread_mutex_unlock(&sh->mu);
            backoff = 0;
        }
        if (last)
            break;
    }
    /* Whatever could not be sent waits in the spool for the next start. */
    spill_all(sh, NULL, false);
    return NULL;
}

/* Frees what shipper__start allocated (the thread is not running). */
static void release(struct shipper *sh)
{
    ship_http__free(sh->http);
    if (sh->curl_up)
        curl_global_cleanup();
    for (size_t i = 0; sh->files && i < BATCH_PROFILES; i++)
        buf__free(&sh->files[i]);
    free(sh->files);
    free(sh->items);
    free(sh->batch);
    free(sh->spool_at);
    free(sh->endpoint);
    free(sh->api_key);
    free(sh->dir);
    free(sh);
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
    sh->curl_up = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    sh->http = ship_http__new(sh->endpoint, sh->api_key);
    sh->items = calloc(BATCH_PROFILES, sizeof(*sh->items));
    sh->batch = calloc(BATCH_PROFILES, sizeof(*sh->batch));
    sh->files = calloc(BATCH_PROFILES, sizeof(*sh->files));
    sh->spool_at = calloc(BATCH_PROFILES, sizeof(*sh->spool_at));
    if (!sh->http || !sh->items || !sh->batch || !sh->files || !sh->spool_at) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < BATCH_PROFILES; i++)
        buf__init(&sh->files[i], SPOOL_FILE_MAX);
    pthread_mutex_init(&sh->mu, NULL);
    pthread_mutex_init(&sh->spill_mu, NULL);
    /* What an earlier run left, listed once; kept up to date since. */
    struct spooled *v;
    size_t n;
    if (spool__list(sh->dir, &v, &n, &sh->spool_bytes) == 0)
        free(v);
    pthread_cond_init(&sh->cv, NULL);
    sh->pending = true; /* whatever a previous run left */
    sh->spooled = true;
    sh->tail = &sh->head;
    sh->mem_max = opts->spool_max_bytes < MEM_MAX ? opts->spool_max_bytes : MEM_MAX;
    srand((unsigned)clock__real_ns());
    if (pthread_create(&sh->thread, NULL, run, sh)) {
        snprintf(err, errlen, "cannot start the upload thread");
        pthread_mutex_destroy(&sh->mu);
        pthread_mutex_destroy(&sh->spill_mu);
        pthread_cond_destroy(&sh->cv);
        goto fail;
    }
    return sh;
fail:
    release(sh);
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
    pthread_mutex_destroy(&sh->spill_mu);
    pthread_cond_destroy(&sh->cv);
    release(sh);
}

/* codexray-server: stores every profile the agents send and merges them on
 * query. HTTP (http.c) -> ingest (ingest.c) -> store (store.h, SQLite by
 * default); queries merge in the store and are written by query.c. A
 * background thread builds rollups and deletes what is older than --retention. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/config.h"
#include "../common/list.h"
#include "../common/log.h"
#include "debuginfod.h"
#include "http.h"
#include "query.h"
#include "store.h"

#ifndef CODEXRAY_VERSION
#define CODEXRAY_VERSION "dev"
#endif

static const struct config_def server_opts[] = {
    {"config", CONFIG_STRING, "/etc/codexray/server.conf", 0, 0, "FILE",
     "config file of key = value lines"},
    {"listen", CONFIG_STRING, "127.0.0.1:8080", 0, 0, "ADDR:PORT", "where to serve HTTP"},
    {"data-dir", CONFIG_STRING, "./data", 0, 0, "DIR", "where the SQLite store lives"},
    {"clickhouse", CONFIG_STRING, NULL, 0, 0, "URL[,URL]",
     "keep profiles in ClickHouse at these HTTP URLs instead of SQLite"},
    {"clickhouse-cluster", CONFIG_STRING, NULL, 0, 0, "NAME",
     "the ClickHouse cluster to shard over (tables made on every URL given)"},
    {"clickhouse-database", CONFIG_STRING, "codexray", 0, 0, "DB", "the ClickHouse database"},
    {"clickhouse-insert", CONFIG_STRING, "shards", 0, 0, "shards|distributed",
     "on a cluster, insert into each shard's table directly (when every shard's URL is given) "
     "or through the Distributed tables"},
    {"clickhouse-timeout-ms", CONFIG_INT, "30000", 100, 3600000, "MS",
     "how long one ClickHouse request may take before the server answers 503"},
    {"api-key", CONFIG_STRING, NULL, 0, 0, "KEY",
     "require Authorization: Bearer KEY on ingest (or CODEXRAY_API_KEY)"},
    {"read-api-key", CONFIG_STRING, NULL, 0, 0, "KEY",
     "require Authorization: Bearer KEY on the read APIs, /metrics and the UI's data "
     "(or CODEXRAY_READ_API_KEY)"},
    {"retention", CONFIG_STRING, "7d", 0, 0, "DURATION", "delete profiles older than this"},
    {"max-body", CONFIG_INT, "16777216", 1024, 1l << 32, "BYTES", "largest request body"},
    {"max-decompressed", CONFIG_INT, "268435456", 1024, 1l << 34, "BYTES",
     "largest body (or zstd batch) once inflated"},
    {"max-ratio", CONFIG_INT, "100", 1, 100000, "N",
     "largest expansion ratio of a gzip or zstd body (of a zstd batch: 10 x N)"},
    {"max-ingest-memory", CONFIG_INT, "536870912", 1l << 20, 1l << 36, "BYTES",
     "most memory one upload may take once received (inflated body, tables, arrays)"},
    {"ingest-concurrency", CONFIG_INT, "2", 1, 256, "N",
     "uploads decoded at once (the rest wait): memory is at most N x --max-ingest-memory"},
    {"threads", CONFIG_INT, "4", 1, 256, "N", "HTTP worker threads"},
    {"max-connections-per-client", CONFIG_INT, "64", 1, 1000, "N",
     "connections one client address may hold (of 1,000 in all)"},
    {"log-level", CONFIG_STRING, "info", 0, 0, "LEVEL", "debug, info, warn or error"},
    {"debuginfod-upstream", CONFIG_STRING, NULL, 0, 0, "URLS",
     "debuginfod servers asked for debug files no agent uploaded (a list: commas or spaces); "
     "each file fetched once, kept under DATA_DIR/debuginfod, served at /debuginfod/"},
    {"debuginfod-cache-max", CONFIG_INT, "1073741824", 1048576, 1l << 42, "BYTES",
     "the upstream debug files kept; past it the least used go first"},
    {"debuginfod-file-max", CONFIG_INT, "536870912", 4096, 1l << 36, "BYTES",
     "the largest debug file taken, uploaded or fetched"},
    {"debuginfod-timeout", CONFIG_INT, "30", 1, 3600, "SECONDS",
     "an upstream debuginfod server silent this long is given up"},
};
#define N_OPTS (sizeof(server_opts) / sizeof(server_opts[0]))

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: codexray-server [FLAGS]\n"
               "\n"
               "Stores the profiles CodeXray agents send (POST /api/v1/profiles) and merges\n"
               "them on query (/api/v1/applications, /api/v1/profile, /api/v1/timeline).\n"
               "\n"
               "Flags (also CODEXRAY_<FLAG> variables and keys of the config file; flags win):\n");
    config__usage(server_opts, N_OPTS, f);
    fprintf(f, "  --help                       this text\n"
               "  --version                    print the version\n");
}

/* The background: rollups every few seconds, retention every minute. */
struct maintenance {
    struct store *st;
    struct http *h;
    int64_t keep_ns;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

#define ROLLUP_EVERY_S 5
#define RETAIN_EVERY_S 60

static void *maintenance_loop(void *arg)
{
    struct maintenance *r = arg;
    int64_t next_retain = 0, built_total = 0;

    pthread_mutex_lock(&r->mu);
    while (!r->done) {
        pthread_mutex_unlock(&r->mu);
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t now_ns = (int64_t)now.tv_sec * 1000000000ll + now.tv_nsec, n = 0, pending = 0;
        if (now.tv_sec >= next_retain) {
            next_retain = now.tv_sec + RETAIN_EVERY_S;
            if (store__retain(r->st, now_ns - r->keep_ns, &n))
                log_error("retention: delete failed");
            else if (n)
                log_info("retention: deleted %lld profiles older than the retention", (long long)n);
        }
        uint64_t t0 = clock__mono_ns();
        if (store__rollup(r->st, now_ns, &n, &pending) == 0 && n)
            log_debug("rollup: built %lld in %.0f ms, %lld pending", (long long)n,
                      (clock__mono_ns() - t0) / 1e6, (long long)pending);
        built_total += n;
        http__set_rollups(r->h, built_total, pending);
        pthread_mutex_lock(&r->mu);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += ROLLUP_EVERY_S;
        while (!r->done && pthread_cond_timedwait(&r->cv, &r->mu, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Freed memory stays in the process for the next query. A flame graph
 * query builds tens of MB (an hour's tree and its 8.5 MB of JSON); got
 * fresh from the kernel each is ~7,500 page faults, 15-20 us each on a VM:
 * 100-150 ms on a query of 45. glibc gives one arena to each thread and
 * hands big blocks back, so queries ran slow whenever they landed on a
 * cold arena. One arena, blocks up to 64 MiB from the heap and the heap
 * trimmed only past 256 MiB free: the first query pays, later ones do not.
 * The price: RSS stays at the largest query's (tens of MB), one malloc
 * lock for the request threads (ingest and queries allocate per request,
 * not per frame). */
static void malloc_keep(void)
{
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

int main(int argc, char **argv)
{
    struct config *c = NULL;
    struct store *st = NULL;
    struct http *h = NULL;
    struct dbgsrv *dbg = NULL;
    char err[1024], *upstream = NULL;
    int ret = 1;

    switch (config__wants_help_or_version(argc, argv)) {
    case 1:
        usage(stdout);
        return 0;
    case 2:
        printf("codexray-server %s\n", CODEXRAY_VERSION);
        return 0;
    }
    malloc_keep();
    c = config__new(server_opts, N_OPTS);
    if (!c)
        return 1;
    if (config__load_all(c, argc - 1, argv + 1, err, sizeof(err)))
        goto usage;
    enum log_level lvl;
    if (log__parse_level(config__str(c, "log-level"), &lvl)) {
        snprintf(err, sizeof(err), "--log-level must be debug, info, warn or error");
        goto usage;
    }
    log__set_level(lvl);
    int64_t keep_ns;
    if (query__parse_duration(config__str(c, "retention"), &keep_ns) || keep_ns <= 0) {
        snprintf(err, sizeof(err), "--retention: a duration such as 7d, 24h or 90m");
        goto usage;
    }

    /* A list as every list is read (common/list.h), handed to libdebuginfod
     * space-separated. */
    const char *up = config__str(c, "debuginfod-upstream");
    char why[512];
    if (up && *up && !(upstream = list__join_urls(up, NULL, ' ', why, sizeof(why)))) {
        snprintf(err, sizeof(err), "--debuginfod-upstream: %s", why);
        goto usage;
    }
    if (upstream && !*upstream) {
        snprintf(err, sizeof(err), "--debuginfod-upstream: no URL");
        goto usage;
    }

    /* First: it sets the environment libdebuginfod reads, before any thread. */
    char dbgdir[4096];
    snprintf(dbgdir, sizeof(dbgdir), "%s/debuginfod", config__str(c, "data-dir"));
    struct dbgsrv_opts dso = {dbgdir, upstream, (uint64_t)config__int(c, "debuginfod-cache-max"),
                              (uint64_t)config__int(c, "debuginfod-file-max"),
                              (unsigned)config__int(c, "debuginfod-timeout")};
    dbg = dbgsrv__new(&dso, err, sizeof(err));
    if (!dbg)
        log_warn("debuginfod: %s; /debuginfod/ is not served", err);
    const char *ch = config__str(c, "clickhouse");
    if (ch && *ch)
        st = store_clickhouse__open(ch, config__str(c, "clickhouse-cluster"),
                                    config__str(c, "clickhouse-database"),
                                    config__str(c, "clickhouse-insert"),
                                    config__int(c, "clickhouse-timeout-ms"), err, sizeof(err));
    else
        st = store_sqlite__open(config__str(c, "data-dir"), err, sizeof(err));
    if (!st) {
        log_error("store: %s", err);
        goto out;
    }
    struct http_opts ho = {
        .listen = config__str(c, "listen"),
        .api_key = config__str(c, "api-key"),
        .read_api_key = config__str(c, "read-api-key"),
        .max_body = config__int(c, "max-body"),
        .limits =
            {
                .max_memory = config__int(c, "max-ingest-memory"),
                .max_decompressed = config__int(c, "max-decompressed"),
                .max_ratio = config__int(c, "max-ratio"),
                .max_label_bytes = 4096,
                .max_samples = 10000000,
                .max_stack_depth = 2048,
                .max_frames = 64000000,
            },
        .threads = config__int(c, "threads"),
        .ingest_concurrency = config__int(c, "ingest-concurrency"),
        .per_client = config__int(c, "max-connections-per-client"),
        .debuginfod = dbg,
    };
    h = http__start(&ho, st, err, sizeof(err));
    if (!h) {
        log_error("http: %s", err);
        goto out;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct maintenance r = {st,   h, keep_ns, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                            false};
    pthread_t rt;
    if (pthread_create(&rt, NULL, maintenance_loop, &r)) {
        log_error("maintenance: cannot start its thread");
        goto out;
    }
    log_info("codexray-server %s started: listen=%s %s=%s retention=%s auth=%s "
             "read_auth=%s max_body=%ld",
             CODEXRAY_VERSION, ho.listen, ch && *ch ? "clickhouse" : "data_dir",
             ch && *ch ? ch : config__str(c, "data-dir"), config__str(c, "retention"),
             ho.api_key && *ho.api_key ? "api-key" : "none",
             ho.read_api_key && *ho.read_api_key ? "read-api-key" : "none", (long)ho.max_body);
    if (dbg)
        log_info("debuginfod: serving /debuginfod/ from %s (uploads%s%s)", dbgdir,
                 dso.upstream && *dso.upstream ? ", upstream " : "",
                 dso.upstream && *dso.upstream ? dso.upstream : "");
    while (!stop)
        pause();
    log_info("stopping");
    pthread_mutex_lock(&r.mu);
    r.done = true;
    pthread_cond_signal(&r.cv);
    pthread_mutex_unlock(&r.mu);
    pthread_join(rt, NULL);
    ret = 0;
out:
    http__stop(h);
    dbgsrv__free(dbg);
    store__close(st);
    config__free(c);
    free(upstream);
    return ret;
usage:
    fprintf(stderr, "codexray-server: %s\n\n", err);
    usage(stderr);
    config__free(c);
    free(upstream);
    return 2;
}

/* codexray-node-agent: profiles every process on the node.
 *
 *   codexray-node-agent [flags]           run: one profile per process per window
 *   codexray-node-agent record [flags]    one profile of a fixed span, then exit
 *
 * The loop: open -> load -> attach (collector__open), then poll the ring
 * buffer; each interval the window rotates to the worker, which names frames
 * and writes pprof. SIGINT/SIGTERM only set a flag; the last, partial window
 * is written before exit.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/log.h"
#include "cli.h"
#include "collect.h"
#include "node.h"
#include "ship.h"
#include "symbolize/debuginfod.h"
#include "worker.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

void cli__install_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: poll returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

bool cli__stopping(void)
{
    return stop;
}

static const struct config_def agent_opts[] = {
    {"config", CONFIG_STRING, "/etc/codexray/agent.conf", 0, 0, "FILE",
     "config file of key = value lines"},
    {"sample-rate", CONFIG_INT, "100", 1, 1000, "HZ", "samples per second per CPU"},
    {"sample-times", CONFIG_STRING, "dithered", 0, 0, "MODE",
     "dithered (periods drawn at random around 1/rate, never in step with the tick) or fixed"},
    {"interval", CONFIG_INT, "60", 1, 3600, "SECONDS",
     "collection window; one profile per process each"},
    {"output-dir", CONFIG_STRING, NULL, 0, 0, "DIR", "write each window's profiles into DIR"},
    {"endpoint", CONFIG_STRING, NULL, 0, 0, "URL",
     "ship each window to codexray-server at URL (URL/api/v1/profiles)"},
    {"api-key", CONFIG_STRING, NULL, 0, 0, "KEY", "sent as Authorization: Bearer KEY"},
    {"data-dir", CONFIG_STRING, "/var/lib/codexray-agent", 0, 0, "DIR",
     "where windows are spooled while the server is away"},
    {"spool-max", CONFIG_INT, "268435456", 1048576, 1l << 40, "BYTES",
     "the spool's bound; past it the oldest profiles go first"},
    {"kernel-stacks", CONFIG_BOOL, "false", 0, 0, NULL, "include kernel frames in profiles"},
    {"host", CONFIG_STRING, NULL, 0, 0, "NAME", "the host label (default: the hostname)"},
    {"unwind", CONFIG_STRING, "cfi", 0, 0, "MODE",
     "user stacks: cfi (tables from .eh_frame, frame pointers where there are none) or fp"},
    {"unwind-tables-max-mb", CONFIG_INT, "128", 1, 65536, "MIB",
     "memory for CFI tables in BPF, all binaries together"},
    {"log-level", CONFIG_STRING, "info", 0, 0, "LEVEL", "debug, info, warn or error"},
    CLI_DEBUGINFOD_OPTS,
};
#define N_AGENT_OPTS (sizeof(agent_opts) / sizeof(agent_opts[0]))

static void usage(FILE *f)
{
    fprintf(f, "Usage: codexray-node-agent [FLAGS]\n"
               "       codexray-node-agent record --duration SECONDS --output FILE [FLAGS]\n"
               "\n"
               "Profiles every process on this node with eBPF (CPU, sampled at 100 Hz by default)\n"
               "and writes one pprof profile per process per collection window.\n"
               "\n"
               "Flags (also CODEXRAY_<FLAG> variables and keys of the config file; flags win):\n");
    config__usage(agent_opts, N_AGENT_OPTS, f);
    fprintf(f, "  --help                       this text\n"
               "  --version                    print the version\n"
               "\n"
               "Run 'codexray-node-agent record --help' for the one-shot mode.\n");
}

/* Open files the agent would like: it holds one per binary it has seen (the
 * binary cache) and makes one BPF map per CFI table, so a node with a
 * thousand distinct binaries passes the usual soft limit of 1024 (systemd's
 * default) and then fails to read /proc, load tables or write profiles. */
#define WANT_OPEN_FILES 16384
/* How long the daemon waits, at start, for the CFI tables of the processes
 * already running before it counts samples. */
#define STARTUP_TABLES_MS 5000

/* Raises the soft limit of open files to the hard one (which systemd sets at
 * 524288), and says so when that is still short of WANT_OPEN_FILES. */
static void raise_open_files(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl))
        return;
    rlim_t was = rl.rlim_cur;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl))
            rl.rlim_cur = was;
    }
    if (rl.rlim_cur < WANT_OPEN_FILES)
        log_warn("limits: %llu open files at most (RLIMIT_NOFILE): the agent keeps one per "
                 "binary, so a node with more binaries than that loses names and CFI tables; "
                 "raise it (LimitNOFILE=, ulimit -n) to %u or more",
                 (unsigned long long)rl.rlim_cur, WANT_OPEN_FILES);
    else if (rl.rlim_cur != was)
        log_debug("limits: open files raised from %llu to %llu", (unsigned long long)was,
                  (unsigned long long)rl.rlim_cur);
}

int cli__common_setup(struct config *c, char *host, size_t hostlen)
{
    enum log_level lvl;

    if (log__parse_level(config__str(c, "log-level"), &lvl)) {
        fprintf(stderr, "codexray-node-agent: --log-level must be debug, info, warn or error\n");
        return 2;
    }
    log__set_level(lvl);
    raise_open_files();
    const char *h = config__str(c, "host");
    if (h && *h)
        snprintf(host, hostlen, "%s", h);
    else
        node__hostname("/proc", host, hostlen); /* the host's, not a container's */
    host[hostlen - 1] = '\0';
    return 0;
}

int cli__sample_opts(struct config *c, uint32_t only_tgid, struct sampler_opts *so)
{
    const char *times = config__str(c, "sample-times");

    so->sample_rate_hz = (unsigned)config__int(c, "sample-rate");
    so->only_tgid = only_tgid;
    so->fixed_period = strcmp(times, "fixed") == 0;
    if (!so->fixed_period && strcmp(times, "dithered") != 0) {
        fprintf(stderr, "codexray-node-agent: --sample-times must be dithered or fixed\n");
        return 2;
    }
    return 0;
}

int cli__unwind_opts(struct config *c, struct unwinder_opts *uo, const struct unwinder_opts **out)
{
    const char *mode = config__str(c, "unwind");

    *out = NULL;
    if (strcmp(mode, "fp") == 0)
        return 0;
    if (strcmp(mode, "cfi") != 0) {
        fprintf(stderr, "codexray-node-agent: --unwind must be cfi or fp\n");
        return 2;
    }
    uo->max_bytes = (uint64_t)config__int(c, "unwind-tables-max-mb") << 20;
    *out = uo;
    return 0;
}

static int run_agent(int argc, char **argv)
{
    struct config *c = config__new(agent_opts, N_AGENT_OPTS);
    struct worker *wk = NULL;
    struct shipper *sh = NULL;
    struct debuginfod *dbg = NULL;
    struct collector col;
    char err[1024], host[256];
    int ret = 1;

    memset(&col, 0, sizeof(col));
    if (!c)
        return 1;
    if (config__load_all(c, argc, argv, err, sizeof(err)))
        goto usage;
    if ((ret = cli__common_setup(c, host, sizeof(host))))
        goto out;
    ret = 1;

    const char *dir = config__str(c, "output-dir");
    struct stat st;
    if (dir && (stat(dir, &st) || !S_ISDIR(st.st_mode))) {
        log_error("output: --output-dir %s is not a directory", dir);
        goto out;
    }
    const char *endpoint = config__str(c, "endpoint");
    /* First: it sets the environment its client reads, before any thread. */
    dbg = cli__debuginfod(c, config__str(c, "data-dir"), endpoint, config__str(c, "api-key"));
    if (endpoint && *endpoint) {
        struct ship_opts sho = {endpoint, config__str(c, "api-key"), config__str(c, "data-dir"),
                                (uint64_t)config__int(c, "spool-max")};
        sh = shipper__start(&sho, err, sizeof(err));
        if (!sh) {
            log_error("upload: %s", err);
            goto out;
        }
    } else {
        endpoint = NULL;
    }
    if (!dir && !endpoint)
        log_warn("output: neither --endpoint nor --output-dir: profiles are built and counted but "
                 "go nowhere");

    bool kstacks = config__bool(c, "kernel-stacks");
    struct sampler_opts so;
    struct unwinder_opts uo;
    const struct unwinder_opts *uop = NULL;
    if ((ret = cli__sample_opts(c, 0, &so)) || (ret = cli__unwind_opts(c, &uo, &uop)))
        goto out;
    ret = 1;
    if (collector__open(&col, &so, kstacks, uop, err, sizeof(err))) {
        log_error("sampler: %s", err);
        goto out;
    }
    cli__install_signals();
    unsigned nprocs = collector__scan(&col, 0);
    /* The first window's stacks are walked with the tables of the processes
     * already running, as record's are: their tables are built first (a
     * node's worth takes 1-3 s), and what was sampled meanwhile (walked by
     * frame pointers, or lost while the ring was not read) is dropped. */
    if (col.unwinder) {
        uint64_t t0 = clock__mono_ns();
        if (!unwinder__settle(col.unwinder, STARTUP_TABLES_MS, t0))
            log_warn("unwind: CFI tables still building after %d s: until they are loaded, the "
                     "processes waiting for them are walked by frame pointers",
                     STARTUP_TABLES_MS / 1000);
        agg_window__free(collector__rotate(&col));
        log_debug("unwind: tables of the running processes built in %llu ms",
                  (unsigned long long)((clock__mono_ns() - t0) / 1000000));
    }

    struct worker_opts wo = {dir, sh, host, 1000000000ull / so.sample_rate_hz, kstacks, dbg};
    wk = worker__start(&wo);
    if (!wk) {
        log_error("worker: cannot start its thread: %s", strerror(errno));
        goto out;
    }
    log_info("codexray-node-agent %s started: sample_rate_hz=%u interval_s=%ld cpus=%u "
             "kernel_stacks=%s host=%s processes=%u outputs=%s%s%s%s bpf_prog_id=%d",
             CODEXRAY_VERSION, so.sample_rate_hz, config__int(c, "interval"),
             sampler__ncpus(col.sampler), kstacks ? "true" : "false", host, nprocs,
             dir ? "dir:" : "", dir ? dir : "", dir && endpoint ? "," : "",
             endpoint ? "endpoint" : (dir ? "" : "none"), sampler__prog_id(col.sampler));
    if (endpoint)
        log_info("upload: ProfilesEndpoint=%s/api/v1/profiles spool=%s/spool spool_max=%ld",
                 endpoint, config__str(c, "data-dir"), config__int(c, "spool-max"));

    uint64_t interval_ns = (uint64_t)config__int(c, "interval") * 1000000000ull;
    uint64_t next = clock__mono_ns() + interval_ns;
    while (!stop) {
        int r = collector__poll(&col, 100);
        if (r < 0 && r != -EINTR) {
            log_error("sampler: ring buffer poll failed: %s", strerror(-r));
            goto out;
        }
        if (clock__mono_ns() >= next) {
            struct agg_window *w = collector__rotate(&col);
            if (w)
                worker__submit(wk, w);
            next += interval_ns;
        }
    }
    log_info("stopping: writing the last window");
    struct agg_window *w = collector__rotate(&col);
    if (w)
        worker__submit(wk, w);
    ret = 0;
out:
    worker__stop(wk); /* the last window is spooled before the shipper's last pass */
    shipper__stop(sh);
    debuginfod__stop(dbg);
    collector__close(&col);
    config__free(c);
    return ret;
usage:
    fprintf(stderr, "codexray-node-agent: %s\n\n", err);
    usage(stderr);
    config__free(c);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "record") == 0)
        return cli__record(argc - 2, argv + 2);
    switch (config__wants_help_or_version(argc, argv)) {
    case 1:
        usage(stdout);
        return 0;
    case 2:
        printf("codexray-node-agent %s\n", CODEXRAY_VERSION);
        return 0;
    }
    return run_agent(argc - 1, argv + 1);
}

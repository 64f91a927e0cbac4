#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "../common/list.h"
#include "../common/log.h"
#include "node.h"
#include "sampler.h"
#include "unwind/unwinder.h"

/* --- signals --- */

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

/* --- the flags --- */

/* A flag and the modes it belongs to. Each mode's flags are listed (and
 * --help prints them) in this order. A new flag is one line here, and the
 * code of the modes that read it. */
struct cli_flag {
    unsigned modes; /* enum cli_mode bits */
    struct config_def def;
};

#define BOTH (CLI_RUN | CLI_RECORD)

static const struct cli_flag flags[] = {
    {CLI_RECORD,
     {"duration", CONFIG_INT, NULL, 1, 86400, "SECONDS", "how long to record (required)"}},
    {CLI_RECORD,
     {"output", CONFIG_STRING, NULL, 0, 0, "FILE", "where to write the gzipped pprof (required)"}},
    {CLI_RECORD, {"pid", CONFIG_INT, "0", 0, 4194304, "PID", "record only this process"}},
    {CLI_RUN,
     {"config", CONFIG_STRING, "/etc/codexray/agent.conf", 0, 0, "FILE",
      "config file of key = value lines"}},
    {BOTH, {"sample-rate", CONFIG_INT, "100", 1, 1000, "HZ", "samples per second per CPU"}},
    {BOTH,
     {"sample-times", CONFIG_STRING, "dithered", 0, 0, "MODE",
      "dithered (periods drawn at random around 1/rate, never in step with the tick) or fixed"}},
    {CLI_RUN,
     {"interval", CONFIG_INT, "60", 1, 3600, "SECONDS",
      "collection window; one profile per process each"}},
    {CLI_RUN,
     {"output-dir", CONFIG_STRING, NULL, 0, 0, "DIR", "write each window's profiles into DIR"}},
    {CLI_RUN,
     {"endpoint", CONFIG_STRING, NULL, 0, 0, "URL",
      "ship each window to codexray-server at URL (URL/api/v1/profiles)"}},
    {CLI_RUN, {"api-key", CONFIG_STRING, NULL, 0, 0, "KEY", "sent as Authorization: Bearer KEY"}},
    {CLI_RUN,
     {"data-dir", CONFIG_STRING, "/var/lib/codexray-agent", 0, 0, "DIR",
      "where windows are spooled while the server is away"}},
    {CLI_RUN,
     {"spool-max", CONFIG_INT, "268435456", 1048576, 1l << 40, "BYTES",
      "the spool's bound; past it the oldest profiles go first"}},
    /* One flag, its help worded for each mode's output. */
    {CLI_RUN,
     {"kernel-stacks", CONFIG_BOOL, "false", 0, 0, NULL, "include kernel frames in profiles"}},
    {CLI_RECORD, {"kernel-stacks", CONFIG_BOOL, "false", 0, 0, NULL, "include kernel frames"}},
    {BOTH,
     {"off-cpu", CONFIG_BOOL, "true", 0, 0, NULL,
      "also record where threads wait (off-CPU time, a third sample type off_cpu): a "
      "sched_switch program, duty-cycled above off-cpu-switch-rate"}},
    {BOTH,
     {"off-cpu-min-us", CONFIG_INT, "10", 0, 1000000, "US",
      "off-CPU blocks shorter than this are not counted"}},
    {BOTH,
     {"off-cpu-walks", CONFIG_INT, "1000", 10, 100000, "N",
      "off-CPU stack walks per second per CPU at most; blocks are sampled to it, weighted by "
      "the inverse of their probability"}},
    {BOTH,
     {"off-cpu-switch-rate", CONFIG_INT, "200000", 0, 1000000000, "N",
      "context switches a second (the whole machine) up to which the off-CPU hook stays "
      "attached; above, it is attached in random slots of time, a share N/rate of them, and "
      "the blocks weighted to match (0: always attached)"}},
    {BOTH,
     /* At least 50: 10 ms slots read 0.71-0.76 of the known waits'
      * time in three runs (50 ms: 0.90-1.00), a bias not found yet. */
     {"off-cpu-slot-ms", CONFIG_INT, "250", 50, 10000, "MS",
      "the length of the off-CPU hook's duty-cycle slots"}},
    {BOTH,
     {"off-cpu-duty-test", CONFIG_INT, "0", 0, 100, "PERCENT",
      "tests only: every slot attached with this probability whatever the switch rate (0: "
      "from off-cpu-switch-rate)"}},
    {BOTH, {"host", CONFIG_STRING, NULL, 0, 0, "NAME", "the host label (default: the hostname)"}},
    {BOTH,
     {"unwind", CONFIG_STRING, "cfi", 0, 0, "MODE",
      "user stacks: cfi (tables from .eh_frame, frame pointers where there are none) or fp"}},
    {BOTH,
     {"unwind-tables-max-mb", CONFIG_INT, "128", 1, 65536, "MIB",
      "memory for CFI tables in BPF, all binaries together"}},
    {BOTH, {"log-level", CONFIG_STRING, "info", 0, 0, "LEVEL", "debug, info, warn or error"}},
    {CLI_RECORD,
     {"data-dir", CONFIG_STRING, "/var/lib/codexray-agent", 0, 0, "DIR",
      "where debug files fetched from debuginfod are kept (DIR/debuginfod)"}},
    {BOTH,
     {"debuginfod", CONFIG_STRING, NULL, 0, 0, "URLS",
      "fetch debug files of stripped binaries from these debuginfod servers (a list: commas "
      "or spaces; "
      "default: $DEBUGINFOD_URLS, else ENDPOINT/debuginfod with --endpoint; \"none\": off)"}},
    {BOTH,
     {"debuginfod-cache-max", CONFIG_INT, "1073741824", 1048576, 1l << 42, "BYTES",
      "the debug files kept under DATA_DIR/debuginfod; past it the least used go first"}},
    {BOTH,
     {"debuginfod-file-max", CONFIG_INT, "536870912", 4096, 1l << 36, "BYTES",
      "the largest debug file taken"}},
    {BOTH,
     {"debuginfod-timeout", CONFIG_INT, "30", 1, 3600, "SECONDS",
      "a debuginfod server silent this long is given up (asked again later)"}},
};
#define N_FLAGS (sizeof(flags) / sizeof(flags[0]))

/* Each mode's flags, picked from the table on first use: config__new keeps
 * the array, so it lives as long as the process. */
static struct config_def mode_defs[2][N_FLAGS];
static size_t mode_ndefs[2];

static const struct config_def *defs_of(enum cli_mode mode, size_t *n)
{
    unsigned m = mode == CLI_RECORD;

    if (!mode_ndefs[m])
        for (size_t i = 0; i < N_FLAGS; i++)
            if (flags[i].modes & mode)
                mode_defs[m][mode_ndefs[m]++] = flags[i].def;
    *n = mode_ndefs[m];
    return mode_defs[m];
}

struct config *cli__config_new(enum cli_mode mode)
{
    size_t n;
    const struct config_def *d = defs_of(mode, &n);

    return config__new(d, n);
}

void cli__usage(enum cli_mode mode, FILE *f)
{
    size_t n;
    const struct config_def *d = defs_of(mode, &n);

    if (mode == CLI_RECORD) {
        fprintf(f,
                "Usage: codexray-node-agent record --duration SECONDS --output FILE [--pid PID]\n"
                "                                  [--kernel-stacks] [FLAGS]\n"
                "\n"
                "Records every process (or one) for SECONDS and writes one gzipped pprof,\n"
                "each sample labelled with its pid. Read it with 'go tool pprof FILE'.\n"
                "\n");
        config__usage(d, n, f);
        fprintf(f, "  --help                       this text\n");
        return;
    }
    fprintf(f, "Usage: codexray-node-agent [FLAGS]\n"
               "       codexray-node-agent record --duration SECONDS --output FILE [FLAGS]\n"
               "\n"
               "Profiles every process on this node with eBPF (CPU, sampled at 100 Hz by default)\n"
               "and writes one pprof profile per process per collection window.\n"
               "\n"
               "Flags (also CODEXRAY_<FLAG> variables and keys of the config file; flags win):\n");
    config__usage(d, n, f);
    fprintf(f, "  --help                       this text\n"
               "  --version                    print the version\n"
               "\n"
               "Run 'codexray-node-agent record --help' for the one-shot mode.\n");
}

int cli__usage_error(enum cli_mode mode, const char *why)
{
    fprintf(stderr, "codexray-node-agent%s: %s\n\n", mode == CLI_RECORD ? " record" : "", why);
    cli__usage(mode, stderr);
    return 2;
}

/* --- settings both modes read --- */

/* Open files the agent would like: it holds one per binary it has seen (the
 * binary cache) and makes one BPF map per CFI table, so a node with a
 * thousand distinct binaries passes the usual soft limit of 1024 (systemd's
 * default) and then fails to read /proc, load tables or write profiles. */
#define WANT_OPEN_FILES 16384

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
    /* A list flag is refused here, as a usage error, rather than when the
     * client starts (cli__debuginfod), where a bad DEBUGINFOD_URLS inherited
     * from the environment only turns debuginfod off. */
    const char *urls = config__str(c, "debuginfod");
    if (urls && *urls && strcmp(urls, "none") != 0) {
        char why[512];
        char *u = list__join_urls(urls, NULL, ' ', why, sizeof(why));
        bool ok = u && *u;
        if (u && !*u)
            snprintf(why, sizeof(why), "no URL (\"none\" turns it off)");
        free(u);
        if (!ok) {
            fprintf(stderr, "codexray-node-agent: --debuginfod: %s\n", why);
            return 2;
        }
    }
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
    so->off_cpu = config__bool(c, "off-cpu");
    so->off_min_ns = (uint64_t)config__int(c, "off-cpu-min-us") * 1000;
    so->off_walks_per_sec = (unsigned)config__int(c, "off-cpu-walks");
    so->off_duty_rate = (uint64_t)config__int(c, "off-cpu-switch-rate");
    so->off_duty_slot_ms = (unsigned)config__int(c, "off-cpu-slot-ms");
    so->off_duty_fixed_pct = (unsigned)config__int(c, "off-cpu-duty-test");
    so->kernel_stacks = config__bool(c, "kernel-stacks");
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

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
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/log.h"
#include "cli.h"
#include "collect.h"
#include "dither.h"
#include "record.h"
#include "ship.h"
#include "symbolize/debuginfod.h"
#include "symbolize/debugplain.h"
#include "symbolize/symbolizer.h"
#include "worker.h"

/* How long the daemon waits, at start, for the CFI tables of the processes
 * already running before it counts samples. */
#define STARTUP_TABLES_MS 5000
/* The sampling at start that picks which of those tables to build. */
#define STARTUP_WARMUP_MS 1000

/* The heap's shape, before any thread (issue 36: peak RSS 87-145 MiB with
 * 500 processes where the target is 64). glibc gives every thread that
 * allocates an arena of its own (up to 8 a core); the main loop, the
 * worker, the table builder and the shipper each kept what they had freed.
 * Two arenas share it out. A fixed mmap threshold keeps every block over
 * 128 KiB (a table's rows, a section read in, a window's buffers) out of
 * the arenas, handed back when freed: left dynamic, glibc raises it to the
 * largest block freed so far (up to 32 MiB), and those blocks stay in an
 * arena's top after a window. */
static void heap_setup(void)
{
#ifdef __GLIBC__
    mallopt(M_ARENA_MAX, 2);
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 512 * 1024);
#endif
}

static int run_agent(int argc, char **argv)
{
    struct config *c = cli__config_new(CLI_RUN);
    struct worker *wk = NULL;
    struct shipper *sh = NULL;
    struct debuginfod *dbg = NULL;
    struct debugplain *plain = NULL;
    struct collector col;
    char err[1024], host[256];
    int ret = 1;

    memset(&col, 0, sizeof(col));
    if (!c)
        return 1;
    if (config__load_all(c, argc, argv, err, sizeof(err))) {
        ret = cli__usage_error(CLI_RUN, err);
        goto out;
    }
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
    plain = cli__debug_plain(config__str(c, "data-dir"));
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
    /* The processes already running: their binaries' tables are built
     * when a sample of them comes (issue 36: on a busy node the scan
     * queued 207 tables, 18.8 MB of BPF memory, most never sampled), over
     * a warm-up of sampling whose window is dropped; then what those
     * samples asked for is built, as record's tables are, and the first
     * window starts with them loaded. What samples later in a cold
     * mapping is walked by frame pointers until its table is loaded. */
    unwinder__set_lazy(col.unwinder, true);
    unsigned nprocs = collector__scan(&col, 0);
    unwinder__set_lazy(col.unwinder, false);
    if (col.unwinder) {
        uint64_t t0 = clock__mono_ns(), warm_end = t0 + STARTUP_WARMUP_MS * 1000000ull;
        while (!cli__stopping() && clock__mono_ns() < warm_end) {
            int r = collector__poll(&col, 50);
            if (r < 0 && r != -EINTR) {
                log_error("sampler: ring buffer poll failed: %s", strerror(-r));
                goto out;
            }
        }
        if (!unwinder__settle(col.unwinder, STARTUP_TABLES_MS, clock__mono_ns()))
            log_warn("unwind: CFI tables still building after %d s: until they are loaded, the "
                     "processes waiting for them are walked by frame pointers",
                     STARTUP_TABLES_MS / 1000);
        agg_window__free(collector__rotate(&col));
        struct unwinder_stats us;
        unwinder__stats(col.unwinder, &us);
        log_info("unwind: start-up: %u tables built for what was sampled in %d ms, %u left "
                 "until sampled; ready in %llu ms",
                 us.tables, STARTUP_WARMUP_MS, us.cold,
                 (unsigned long long)((clock__mono_ns() - t0) / 1000000));
    }

    struct worker_opts wo = {dir, sh, host, dither__sample_ns(so.sample_rate_hz), kstacks, dbg};
    wk = worker__start(&wo);
    if (!wk) {
        log_error("worker: cannot start its thread: %s", strerror(errno));
        goto out;
    }
    log_info("codexray-node-agent %s started: sample_rate_hz=%u interval_s=%ld cpus=%u "
             "kernel_stacks=%s off_cpu=%s host=%s processes=%u outputs=%s%s%s%s bpf_prog_id=%d",
             CODEXRAY_VERSION, so.sample_rate_hz, config__int(c, "interval"),
             sampler__ncpus(col.sampler), kstacks ? "true" : "false",
             sampler__off_cpu(col.sampler) ? "true" : "false", host, nprocs, dir ? "dir:" : "",
             dir ? dir : "", dir && endpoint ? "," : "",
             endpoint ? "endpoint" : (dir ? "" : "none"), sampler__prog_id(col.sampler));
    if (endpoint)
        log_info("upload: ProfilesEndpoint=%s/api/v1/profiles spool=%s/spool spool_max=%ld",
                 endpoint, config__str(c, "data-dir"), config__int(c, "spool-max"));

    uint64_t interval_ns = (uint64_t)config__int(c, "interval") * 1000000000ull;
    uint64_t next = clock__mono_ns() + interval_ns;
    while (!cli__stopping()) {
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
    symbolizer__set_debug_plain(NULL);
    debugplain__free(plain);
    config__free(c);
    return ret;
}

int main(int argc, char **argv)
{
    heap_setup();
    if (argc > 1 && strcmp(argv[1], "record") == 0)
        return record__main(argc - 2, argv + 2);
    switch (config__wants_help_or_version(argc, argv)) {
    case 1:
        cli__usage(CLI_RUN, stdout);
        return 0;
    case 2:
        printf("codexray-node-agent %s\n", CODEXRAY_VERSION);
        return 0;
    }
    return run_agent(argc - 1, argv + 1);
}

/* `codexray-node-agent record`: one gzipped pprof of every process (or one)
 * over a fixed span, every sample labelled with its pid. What users reach
 * for in place of `perf record`. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/buf.h"
#include "../common/log.h"
#include "cli.h"
#include "collect.h"
#include "dither.h"
#include "output.h"
#include "profile.h"
#include "symbolize/debuginfod.h"
#include "record.h"

/* A recording is named once, at its end: the binaries it met that lack
 * names are asked of debuginfod first (a naming pass whose profile is
 * thrown away), and the debug files waited for, at most timeout_s. */
static void record_fetch_first(struct symbolizer *sym, struct debuginfod *dbg,
                               const struct agg_window *w, unsigned timeout_s)
{
    struct rt_namers *rt = rt_namers__new("/proc");
    struct profile_ctx ctx = {sym, NULL, "", 1, rt, clock__mono_ns()};
    struct profile_stats st = {0};
    struct pprof_writer *pw = rt ? profile__writer(&ctx, w->start_ns, 1) : NULL;

    for (size_t i = 0; pw && i < w->nprocs; i++)
        profile__add_proc(pw, &ctx, w->procs[i], &st);
    pprof_writer__free(pw);
    rt_namers__free(rt);
    if (!debuginfod__wait_idle(dbg, timeout_s * 1000u))
        log_warn("record: debuginfod still fetching after %u s: those binaries stay unnamed",
                 timeout_s);
    symbolizer__trim(sym); /* a new "window": what arrived is loaded */
}

int record__main(int argc, char **argv)
{
    struct config *c = cli__config_new(CLI_RECORD);
    struct symbolizer *sym = NULL;
    struct debuginfod *dbg = NULL;
    struct kallsyms *ks = NULL;
    struct rt_namers *rt = NULL;
    struct pprof_writer *pw = NULL;
    struct agg_window *w = NULL;
    struct collector col;
    char err[1024], host[256], rts[256];
    struct buf out;
    int ret = 1;

    memset(&col, 0, sizeof(col));
    buf__init(&out, 1u << 30);
    if (!c)
        return 1;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            cli__usage(CLI_RECORD, stdout);
            ret = 0;
            goto out;
        }
    }
    if (config__load_env(c, err, sizeof(err)) ||
        config__load_args(c, argc, argv, err, sizeof(err))) {
        ret = cli__usage_error(CLI_RECORD, err);
        goto out;
    }
    if (!config__is_set(c, "duration") || !config__str(c, "output")) {
        snprintf(err, sizeof(err), "record needs --duration SECONDS and --output FILE");
        {
            ret = cli__usage_error(CLI_RECORD, err);
            goto out;
        }
    }
    if ((ret = cli__common_setup(c, host, sizeof(host))))
        goto out;
    ret = 1;

    uint32_t pid = config__int(c, "pid");
    if (pid) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/%u", pid);
        if (access(p, F_OK)) {
            log_error("record: no process with pid %u", pid);
            goto out;
        }
    }
    /* Before any thread: it sets the environment its client reads. */
    dbg = cli__debuginfod(c, config__str(c, "data-dir"), NULL, NULL);
    bool kstacks = config__bool(c, "kernel-stacks");
    struct sampler_opts so;
    struct unwinder_opts uo;
    const struct unwinder_opts *uop = NULL;
    if ((ret = cli__sample_opts(c, pid, &so)) || (ret = cli__unwind_opts(c, &uo, &uop)))
        goto out;
    ret = 1;
    if (collector__open(&col, &so, kstacks, uop, err, sizeof(err))) {
        log_error("sampler: %s", err);
        goto out;
    }
    cli__install_signals();
    collector__scan(&col, pid);
    /* A short recording should not spend its first part waiting for the
     * tables the scan queued: give the builder up to two seconds. */
    if (col.unwinder && !unwinder__settle(col.unwinder, 2000, clock__mono_ns()))
        log_warn("unwind: CFI tables still building after 2 s: the first samples walk by frame "
                 "pointers");
    /* The recording starts now: samples taken while the tables were built
     * (walked by frame pointers) are not part of it. */
    if (col.unwinder)
        agg_window__free(collector__rotate(&col));
    const char *path = config__str(c, "output");
    long duration = config__int(c, "duration");
    log_info("record: sample_rate_hz=%u duration_s=%ld pid=%u kernel_stacks=%s output=%s cpus=%u "
             "unwind=%s bpf_prog_id=%d",
             so.sample_rate_hz, duration, pid, kstacks ? "true" : "false", path,
             sampler__ncpus(col.sampler), uop ? "cfi" : "fp", sampler__prog_id(col.sampler));
    uint64_t end = clock__mono_ns() + (uint64_t)duration * 1000000000ull;
    while (!cli__stopping() && clock__mono_ns() < end) {
        uint64_t left_ms = (end - clock__mono_ns()) / 1000000;
        int r = collector__poll(&col, left_ms > 100 ? 100 : (int)left_ms + 1);
        if (r < 0 && r != -EINTR) {
            log_error("sampler: ring buffer poll failed: %s", strerror(-r));
            goto out;
        }
    }
    w = collector__rotate(&col);
    if (!w) {
        log_error("record: out of memory");
        goto out;
    }

    /* Name the frames now; every process goes into one profile. */
    sym = symbolizer__new();
    if (sym && dbg) {
        symbolizer__set_debuginfod(sym, dbg);
        record_fetch_first(sym, dbg, w, (unsigned)config__int(c, "debuginfod-timeout"));
    }
    if (kstacks) {
        const char *why = NULL;
        ks = kallsyms__load(&why);
        if (!ks)
            log_warn("kallsyms: kernel frames will be unnamed: %s", why);
    }
    rt = rt_namers__new("/proc");
    struct profile_ctx ctx = {
        sym, ks, host, dither__sample_ns(so.sample_rate_hz), rt, clock__mono_ns()};
    struct profile_stats st = {0};
    pw = sym && rt ? profile__writer(&ctx, w->start_ns, w->end_ns - w->start_ns) : NULL;
    if (!pw) {
        log_error("record: out of memory");
        goto out;
    }
    for (size_t i = 0; i < w->nprocs; i++) {
        if (profile__add_proc(pw, &ctx, w->procs[i], &st)) {
            log_error("record: out of memory");
            goto out;
        }
    }
    int r = pprof_writer__encode(pw, &out, true);
    if (!r)
        r = output__write_file(path, out.data, out.len, true);
    if (r) {
        log_error("record: cannot write %s: %s", path, strerror(-r));
        goto out;
    }
    profile_stats__runtimes_str(&st, rts, sizeof(rts));
    log_info("record: wrote %s processes=%zu samples=%llu lost_samples=%llu truncated_stacks=%llu "
             "unnamed_frames=%.1f%% %s bytes=%zu excluded_samples_seen=%llu "
             "unwind_tables=%u unwind_table_bytes=%llu cfi_frames=%llu fp_frames=%llu "
             "vma_lookups=%llu vma_tables=%llu",
             path, w->nprocs, (unsigned long long)w->samples, (unsigned long long)w->lost,
             (unsigned long long)st.truncated_samples,
             st.frames ? 100.0 * st.unnamed_frames / st.frames : 0.0, rts, out.len,
             (unsigned long long)col.skipped_samples, w->unwind.tables,
             (unsigned long long)w->unwind.bytes,
             (unsigned long long)w->stats_delta[CX_STAT_CFI_FRAMES],
             (unsigned long long)w->stats_delta[CX_STAT_FP_FRAMES],
             (unsigned long long)w->stats_delta[CX_STAT_VMA_LOOKUPS],
             (unsigned long long)w->stats_delta[CX_STAT_VMA_TABLES]);
    ret = 0;
out:
    pprof_writer__free(pw);
    agg_window__free(w);
    collector__close(&col);
    kallsyms__free(ks);
    symbolizer__free(sym);
    debuginfod__stop(dbg);
    rt_namers__free(rt);
    buf__free(&out);
    config__free(c);
    return ret;
}

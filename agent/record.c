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
#include "symbolize/debugplain.h"
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

/* What one recording holds, from the arguments to the file written; every
 * pointer is NULL (or col zeroed) until its step makes it, and record__main
 * frees them all. */
struct record_run {
    struct config *c;
    struct symbolizer *sym;
    struct debuginfod *dbg;
    struct debugplain *plain; /* compressed debug files decompressed (cli__debug_plain) */
    struct kallsyms *ks;
    struct rt_namers *rt;
    struct pprof_writer *pw;
    struct agg_window *w;
    struct collector col;
    char host[256];
    uint32_t pid;
    bool kstacks;
    struct sampler_opts so;
    struct unwinder_opts uo;
    const struct unwinder_opts *uop;
    struct profile_stats st;
    struct buf out;
};

/* The arguments and the environment into r->c, and the agent's common set-up
 * (logging, host name into r->host). Returns true to go on; false with the
 * exit status in *ret (0 after --help, else the usage error's or the
 * set-up's). */
static bool record_args(struct record_run *r, int argc, char **argv, int *ret)
{
    char err[1024];

    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            cli__usage(CLI_RECORD, stdout);
            *ret = 0;
            return false;
        }
    }
    if (config__load_env(r->c, err, sizeof(err)) ||
        config__load_args(r->c, argc, argv, err, sizeof(err))) {
        *ret = cli__usage_error(CLI_RECORD, err);
        return false;
    }
    if (!config__is_set(r->c, "duration") || !config__str(r->c, "output")) {
        snprintf(err, sizeof(err), "record needs --duration SECONDS and --output FILE");
        {
            *ret = cli__usage_error(CLI_RECORD, err);
            return false;
        }
    }
    if ((*ret = cli__common_setup(r->c, r->host, sizeof(r->host))))
        return false;
    return true;
}

/* Opens the sampler (r->so, r->kstacks, r->uop), scans the processes, lets
 * the CFI tables build for up to 2 s, then samples for --duration (or until
 * a signal): the window in r->w. Returns 0, or -1 with the reason logged. */
static int record_sample(struct record_run *r, const char *path, long duration)
{
    char err[1024];

    if (collector__open(&r->col, &r->so, r->kstacks, r->uop, err, sizeof(err))) {
        log_error("sampler: %s", err);
        return -1;
    }
    cli__install_signals();
    collector__scan(&r->col, r->pid);
    /* A short recording should not spend its first part waiting for the
     * tables the scan queued: give the builder up to two seconds. */
    if (r->col.unwinder && !unwinder__settle(r->col.unwinder, 2000, clock__mono_ns()))
        log_warn("unwind: CFI tables still building after 2 s: the first samples walk by frame "
                 "pointers");
    /* The recording starts now: samples taken while the tables were built
     * (walked by frame pointers) are not part of it. */
    if (r->col.unwinder)
        agg_window__free(collector__rotate(&r->col));
    log_info("record: sample_rate_hz=%u duration_s=%ld pid=%u kernel_stacks=%s off_cpu=%s "
             "output=%s cpus=%u unwind=%s bpf_prog_id=%d",
             r->so.sample_rate_hz, duration, r->pid, r->kstacks ? "true" : "false",
             sampler__off_cpu(r->col.sampler) ? "true" : "false", path,
             sampler__ncpus(r->col.sampler), r->uop ? "cfi" : "fp",
             sampler__prog_id(r->col.sampler));
    uint64_t end = clock__mono_ns() + (uint64_t)duration * 1000000000ull;
    while (!cli__stopping() && clock__mono_ns() < end) {
        uint64_t left_ms = (end - clock__mono_ns()) / 1000000;
        int pr = collector__poll(&r->col, left_ms > 100 ? 100 : (int)left_ms + 1);
        if (pr < 0 && pr != -EINTR) {
            log_error("sampler: ring buffer poll failed: %s", strerror(-pr));
            return -1;
        }
    }
    r->w = collector__rotate(&r->col);
    if (!r->w) {
        log_error("record: out of memory");
        return -1;
    }
    return 0;
}

/* Names the frames of r->w (debuginfod first when r->dbg, kernel frames when
 * r->kstacks) into one profile of every process, in r->pw; its stats in
 * r->st. Returns 0, or -1 with the reason logged. */
static int record_name(struct record_run *r)
{
    r->sym = symbolizer__new();
    if (r->sym && r->dbg) {
        symbolizer__set_debuginfod(r->sym, r->dbg);
        record_fetch_first(r->sym, r->dbg, r->w, (unsigned)config__int(r->c, "debuginfod-timeout"));
    }
    if (r->kstacks) {
        const char *why = NULL;
        r->ks = kallsyms__load(&why);
        if (!r->ks)
            log_warn("kallsyms: kernel frames will be unnamed: %s", why);
    }
    r->rt = rt_namers__new("/proc");
    struct profile_ctx ctx = {
        r->sym,           r->ks,        r->host, dither__sample_ns(r->so.sample_rate_hz), r->rt,
        clock__mono_ns(), r->w->off_cpu};
    r->pw = r->sym && r->rt ? profile__writer(&ctx, r->w->start_ns, r->w->end_ns - r->w->start_ns)
                            : NULL;
    if (!r->pw) {
        log_error("record: out of memory");
        return -1;
    }
    for (size_t i = 0; i < r->w->nprocs; i++) {
        if (profile__add_proc(r->pw, &ctx, r->w->procs[i], &r->st)) {
            log_error("record: out of memory");
            return -1;
        }
    }
    return 0;
}

/* Encodes r->pw (gzipped) into r->out, writes it to path and logs what the
 * recording holds. Returns 0, or -1 with the reason logged. */
static int record_write(struct record_run *r, const char *path)
{
    struct agg_window *w = r->w;
    struct profile_stats *st = &r->st;
    char rts[256];

    int e = pprof_writer__encode(r->pw, &r->out, true);
    if (!e)
        e = output__write_file(path, r->out.data, r->out.len, true);
    if (e) {
        log_error("record: cannot write %s: %s", path, strerror(-e));
        return -1;
    }
    profile_stats__runtimes_str(st, rts, sizeof(rts));
    log_info("record: wrote %s processes=%zu samples=%llu lost_samples=%llu truncated_stacks=%llu "
             "unnamed_frames=%.1f%% %s bytes=%zu excluded_samples_seen=%llu "
             "unwind_tables=%u unwind_table_bytes=%llu cfi_frames=%llu fp_frames=%llu "
             "vma_lookups=%llu vma_tables=%llu",
             path, w->nprocs, (unsigned long long)w->samples, (unsigned long long)w->lost,
             (unsigned long long)st->truncated_samples,
             st->frames ? 100.0 * st->unnamed_frames / st->frames : 0.0, rts, r->out.len,
             (unsigned long long)r->col.skipped_samples, w->unwind.tables,
             (unsigned long long)w->unwind.bytes,
             (unsigned long long)w->stats_delta[CX_STAT_CFI_FRAMES],
             (unsigned long long)w->stats_delta[CX_STAT_FP_FRAMES],
             (unsigned long long)w->stats_delta[CX_STAT_VMA_LOOKUPS],
             (unsigned long long)w->stats_delta[CX_STAT_VMA_TABLES]);
    if (w->off_cpu) {
        char off[512];
        agg_window__off_str(w, off, sizeof(off));
        log_info("record: %s", off);
    }
    return 0;
}

int record__main(int argc, char **argv)
{
    struct record_run r;
    int ret = 1;

    memset(&r, 0, sizeof(r));
    r.c = cli__config_new(CLI_RECORD);
    buf__init(&r.out, 1u << 30);
    if (!r.c)
        return 1;
    if (!record_args(&r, argc, argv, &ret))
        goto out;
    ret = 1;

    r.pid = config__int(r.c, "pid");
    if (r.pid) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/%u", r.pid);
        if (access(p, F_OK)) {
            log_error("record: no process with pid %u", r.pid);
            goto out;
        }
    }
    /* Before any thread: it sets the environment its client reads. */
    r.dbg = cli__debuginfod(r.c, config__str(r.c, "data-dir"), NULL, NULL);
    r.plain = cli__debug_plain(config__str(r.c, "data-dir"));
    r.kstacks = config__bool(r.c, "kernel-stacks");
    if ((ret = cli__sample_opts(r.c, r.pid, &r.so)) || (ret = cli__unwind_opts(r.c, &r.uo, &r.uop)))
        goto out;
    ret = 1;
    const char *path = config__str(r.c, "output");
    if (record_sample(&r, path, config__int(r.c, "duration")))
        goto out;
    /* Name the frames now; every process goes into one profile. */
    if (record_name(&r))
        goto out;
    if (record_write(&r, path))
        goto out;
    ret = 0;
out:
    pprof_writer__free(r.pw);
    agg_window__free(r.w);
    collector__close(&r.col);
    kallsyms__free(r.ks);
    symbolizer__free(r.sym);
    symbolizer__set_debug_plain(NULL);
    debugplain__free(r.plain);
    debuginfod__stop(r.dbg);
    rt_namers__free(r.rt);
    buf__free(&r.out);
    config__free(r.c);
    return ret;
}

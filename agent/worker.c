#include "worker.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/buf.h"
#include "../common/gz.h"
#include "../common/log.h"
#include "collect.h"
#include "output.h"
#include "profile.h"
#include "ship.h"

#define QUEUE_MAX 4
#define PROFILE_MAX (256u << 20)

struct worker {
    struct worker_opts opts;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct agg_window *queue[QUEUE_MAX];
    unsigned head, n;
    bool stopping;

    struct symbolizer *sym;
    struct gz_deflater *gz; /* --output-dir files: gzip, as pprof tools read them */
    struct kallsyms *ks;
    bool ks_tried;
    struct rt_namers *rt;
    /* Kept from one profile to the next, emptied each time: the writer's
     * and the scratch maps' memory, and within a window the frames' names
     * (profile_cache.h). */
    struct pprof_writer *pw;
    struct profile_cache *pc;
};

/* Names one window's frames, writes its profiles, logs its summary, frees
 * it. took_ms is wall time, cpu_ms this thread's CPU: on a busy machine the
 * first can be many times the second. */
static void process(struct worker *wk, struct agg_window *w)
{
    struct profile_ctx ctx = {wk->sym,          NULL,  wk->opts.host, wk->opts.period_ns, wk->rt,
                              clock__mono_ns(), false, wk->pc};
    struct profile_stats st = {0};
    uint64_t t0 = clock__mono_ns(), c0 = clock__thread_ns(), bytes = 0;
    unsigned written = 0, failed = 0;
    char path[4096], rts[256], unnamed[512];
    struct buf raw, out;

    if (wk->opts.kernel_stacks && !wk->ks_tried) {
        const char *why = NULL;
        wk->ks_tried = true;
        wk->ks = kallsyms__load(&why);
        if (!wk->ks)
            log_warn("kallsyms: kernel frames will be unnamed: %s", why);
    }
    ctx.ks = wk->ks;
    ctx.off_cpu = w->off_cpu;
    buf__init(&raw, PROFILE_MAX);
    buf__init(&out, PROFILE_MAX);
    for (size_t i = 0; i < w->nprocs; i++) {
        const struct agg_proc *ap = w->procs[i];
        int r = 0;

        if (!ap->samples && !ap->lost && !ap->off_ns)
            continue;
        if (!wk->pw)
            wk->pw = profile__writer(&ctx, w->start_ns, w->end_ns - w->start_ns);
        else if (profile__writer_reset(wk->pw, &ctx, w->start_ns, w->end_ns - w->start_ns)) {
            pprof_writer__free(wk->pw);
            wk->pw = NULL;
        }
        struct pprof_writer *pw = wk->pw;
        r = pw ? profile__add_proc(pw, &ctx, ap, &st) : -ENOMEM;
        /* The file pages this profile's names were read from, handed back
         * now: held to the window's end, a first window's hundreds of
         * binaries added up (their DWARF, symbol names) to 10-15 MiB of
         * RSS at its peak. */
        symbolizer__drop_pages(wk->sym);
        buf__reset(&raw);
        if (!r)
            r = pprof_writer__encode(pw, &raw, false);
        /* Its stacks are in raw now: freed here, not with the window, so
         * they are gone before the window's last profiles are named (the
         * agent's peak, with every binary of the window loaded). */
        agg_window__drop_stacks(w, i);
        if (r) {
            log_error("profile: pid=%u service=%s: cannot build its profile: %s", ap->tgid,
                      ap->id.service, strerror(-r));
            failed++;
            continue;
        }
        if (wk->opts.output_dir) {
            buf__reset(&out);
            r = gz_deflater__compress(wk->gz, raw.data, raw.len, &out);
            if (!r)
                r = output__profile_name(path, sizeof(path), wk->opts.output_dir, ap->id.service,
                                         ap->tgid, w->start_ns);
            /* Not fsync'd: hundreds of files a window, and the rename already
             * keeps readers from half-written ones. */
            if (!r)
                r = output__write_file(path, out.data, out.len, false);
            if (r) {
                log_error("output: cannot write %s: %s", path, strerror(-r));
                failed++;
                continue;
            }
            bytes += out.len;
        }
        if (wk->opts.shipper) {
            /* Raw: the shipper compresses a whole batch at once, which
             * costs a tenth of compressing each profile and sends a
             * twentieth of the bytes (ship_http.c). */
            r = shipper__enqueue(wk->opts.shipper, &ap->id, ap->tgid, wk->opts.host, w->start_ns,
                                 raw.data, raw.len);
            if (r) {
                log_error("spool: cannot spool the profile of pid=%u: %s", ap->tgid, strerror(-r));
                failed++;
                continue;
            }
            bytes += raw.len;
        }
        written++;
    }
    buf__free(&raw);
    buf__free(&out);
    shipper__flush(wk->opts.shipper);
    profile_stats__runtimes_str(&st, rts, sizeof(rts));
    symbolizer__unnamed_summary(wk->sym, unnamed, sizeof(unnamed));
    log_info("window: processes=%zu samples=%llu lost_samples=%llu truncated_stacks=%llu "
             "unnamed_frames=%.1f%% unnamed_binaries=%s %s profiles=%u failed=%u bytes=%llu "
             "took_ms=%llu cpu_ms=%llu unwind_tables=%u unwind_table_bytes=%llu maps_reads=%llu "
             "identity_reads=%llu",
             w->nprocs, (unsigned long long)w->samples, (unsigned long long)w->lost,
             (unsigned long long)st.truncated_samples,
             st.frames ? 100.0 * st.unnamed_frames / st.frames : 0.0, unnamed, rts, written, failed,
             (unsigned long long)bytes, (unsigned long long)((clock__mono_ns() - t0) / 1000000),
             (unsigned long long)((clock__thread_ns() - c0) / 1000000), w->unwind.tables,
             (unsigned long long)w->unwind.bytes, (unsigned long long)w->maps_reads,
             (unsigned long long)w->identity_reads);
    log_debug("unwind: tables=%u table_bytes=%llu rows=%llu unsupported_rows=%llu pending=%u "
              "without_table=%u processes=%u build_ms=%llu cfi_frames=%llu fp_frames=%llu "
              "cfi_stopped=%llu",
              w->unwind.tables, (unsigned long long)w->unwind.bytes,
              (unsigned long long)w->unwind.rows, (unsigned long long)w->unwind.unsupported,
              w->unwind.pending, w->unwind.without, w->unwind.procs,
              (unsigned long long)w->unwind.build_ms,
              (unsigned long long)w->stats_delta[CX_STAT_CFI_FRAMES],
              (unsigned long long)w->stats_delta[CX_STAT_FP_FRAMES],
              (unsigned long long)w->stats_delta[CX_STAT_TRUNC_CFI]);
    if (w->off_cpu) {
        char off[512];
        agg_window__off_str(w, off, sizeof(off));
        log_info("window: %s", off);
    }
    if (w->dropped_oom)
        log_warn("window: %llu samples dropped: out of memory", (unsigned long long)w->dropped_oom);
    if (w->stats_delta[CX_STAT_KSTACK_ERR] || w->stats_delta[CX_STAT_LOST_EVENTS] ||
        w->stats_delta[CX_STAT_LOST_MAP_FULL] || w->stats_delta[CX_STAT_NO_USER_REGS])
        log_warn("unwinder: kernel_stack_errors=%llu lost_exec_exit_events=%llu "
                 "lost_counts_map_full=%llu no_user_regs=%llu",
                 (unsigned long long)w->stats_delta[CX_STAT_KSTACK_ERR],
                 (unsigned long long)w->stats_delta[CX_STAT_LOST_EVENTS],
                 (unsigned long long)w->stats_delta[CX_STAT_LOST_MAP_FULL],
                 (unsigned long long)w->stats_delta[CX_STAT_NO_USER_REGS]);
    /* Before the window's binaries go, and the symbolizer's strings its
     * names point at. */
    profile_cache__window_end(wk->pc);
    agg_window__free(w);
    symbolizer__trim(wk->sym);
    rt_namers__sweep(wk->rt, ctx.now_ns);
#ifdef __GLIBC__
    /* A window's naming and encoding freed most of what it took (a
     * thousand profiles' tables): given back now, not at the next window's
     * peak. */
    malloc_trim(0);
#endif
}

static void *run(void *arg)
{
    /* Named for top, perf and the benchmark's per-thread figures. */
    pthread_setname_np(pthread_self(), "cx-worker");
    struct worker *wk = arg;

    pthread_mutex_lock(&wk->mu);
    for (;;) {
        while (!wk->n && !wk->stopping)
            pthread_cond_wait(&wk->cv, &wk->mu);
        if (!wk->n)
            break;
        struct agg_window *w = wk->queue[wk->head];
        wk->head = (wk->head + 1) % QUEUE_MAX;
        wk->n--;
        pthread_mutex_unlock(&wk->mu);
        process(wk, w);
        pthread_mutex_lock(&wk->mu);
    }
    pthread_mutex_unlock(&wk->mu);
    return NULL;
}

struct worker *worker__start(const struct worker_opts *opts)
{
    struct worker *wk = calloc(1, sizeof(*wk));
    int r;

    if (!wk)
        return NULL;
    wk->opts = *opts;
    wk->sym = symbolizer__new();
    wk->gz = gz_deflater__new();
    wk->rt = rt_namers__new("/proc");
    wk->pc = profile_cache__new();
    if (!wk->sym || !wk->gz || !wk->rt || !wk->pc) {
        symbolizer__free(wk->sym);
        gz_deflater__free(wk->gz);
        rt_namers__free(wk->rt);
        profile_cache__free(wk->pc);
        free(wk);
        errno = ENOMEM;
        return NULL;
    }
    symbolizer__set_debuginfod(wk->sym, opts->debuginfod);
    pthread_mutex_init(&wk->mu, NULL);
    pthread_cond_init(&wk->cv, NULL);
    r = pthread_create(&wk->thread, NULL, run, wk);
    if (r) {
        symbolizer__free(wk->sym);
        gz_deflater__free(wk->gz);
        rt_namers__free(wk->rt);
        profile_cache__free(wk->pc);
        free(wk);
        errno = r;
        return NULL;
    }
    return wk;
}

void worker__submit(struct worker *wk, struct agg_window *w)
{
    struct agg_window *dropped = NULL;

    pthread_mutex_lock(&wk->mu);
    if (wk->n == QUEUE_MAX) {
        dropped = wk->queue[wk->head];
        wk->head = (wk->head + 1) % QUEUE_MAX;
        wk->n--;
    }
    wk->queue[(wk->head + wk->n) % QUEUE_MAX] = w;
    wk->n++;
    pthread_cond_signal(&wk->cv);
    pthread_mutex_unlock(&wk->mu);
    if (dropped) {
        log_error("window: the worker is %d windows behind; dropped the oldest (%llu samples)",
                  QUEUE_MAX, (unsigned long long)dropped->samples);
        agg_window__free(dropped);
    }
}

void worker__stop(struct worker *wk)
{
    if (!wk)
        return;
    pthread_mutex_lock(&wk->mu);
    wk->stopping = true;
    pthread_cond_signal(&wk->cv);
    pthread_mutex_unlock(&wk->mu);
    pthread_join(wk->thread, NULL);
    pthread_mutex_destroy(&wk->mu);
    pthread_cond_destroy(&wk->cv);
    symbolizer__free(wk->sym);
    gz_deflater__free(wk->gz);
    kallsyms__free(wk->ks);
    rt_namers__free(wk->rt);
    pprof_writer__free(wk->pw);
    profile_cache__free(wk->pc);
    free(wk);
}

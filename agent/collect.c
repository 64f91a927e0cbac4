#include "collect.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../common/log.h"
#include "node.h"

/* How long an exited process is kept for samples still in flight. */
#define EXIT_GRACE_NS (2ull * 1000 * 1000 * 1000)
/* How long a binary no process maps stays cached (a binary run again and
 * again, such as a compiler in a build, keeps its symbols). */
#define BINARY_GRACE_NS (10ull * 60 * 1000 * 1000 * 1000)
/* How often /proc is asked whether every process is still there when no
 * exit event was lost: every exit is seen by BPF (the scan at start runs
 * after it is attached), so this only covers what cannot be foreseen.
 * Asking at every window cost an access() and a read of /proc/PID/stat per
 * process: 1 us a sample with 500 processes and 30 s windows. */
#define ALIVE_CHECK_NS (10ull * 60 * 1000 * 1000 * 1000)

/* Keeps the BPF skip map in step with what the process table found in the
 * process's environment (first read, exec, a reused pid). */
static void sync_skip(struct collector *c, struct proc *p)
{
    if (!p || p->disabled == p->skipped)
        return;
    int r = sampler__skip(c->sampler, p->tgid, p->disabled);
    if (r == 0)
        p->skipped = p->disabled;
    else if (p->disabled && !c->skip_full_logged) {
        /* Its samples are still dropped below; BPF just keeps making them. */
        log_warn("sampler: cannot add pid=%u to the skip map: %s", p->tgid, strerror(-r));
        c->skip_full_logged = true;
    }
}

/* ld.so maps a program's libraries within a few milliseconds of its exec. */
#define EXEC_REREAD_NS (10ull * 1000 * 1000)
#define BUILDING_POLL_MS 5

/* An off-CPU stack's frames of a runtime (Python's code objects) are
 * named at the window's end, when its sums are drained: the process may
 * have exited by then and its memory be gone. Looked up now, while it
 * runs, they are in the runtime's cache for then (kept past the exit until
 * the process is forgotten: runtime_ops.proc_exited). A frame of a kind
 * no runtime owns (native, kernel, a marker) is refused by
 * runtimes__frame. s's frames were counted by offcpu__put. */
static void warm_runtime_frames(struct collector *c, const struct proc *p,
                                const struct cx_sample *s)
{
    size_t n = (size_t)s->n_kernel + s->n_user;

    for (size_t j = s->n_kernel; j < n; j++) {
        struct rt_frame_out out = {0};
        if (runtimes__frame(c->runtimes, p, &s->frames[j], &out) == 0)
            rt_obj__put(out.obj);
    }
}

static int on_record(void *ctx, const struct cx_record_hdr *h, size_t size)
{
    struct collector *c = ctx;
    uint64_t now = clock__mono_ns();
    struct proc *p;

    switch (h->kind) {
    case CX_REC_SAMPLE: {
        const struct cx_sample *s = (const void *)h;
        size_t need = offsetof(struct cx_sample, frames);
        if (size < need ||
            size < need + ((size_t)s->n_kernel + s->n_user) * sizeof(struct cx_frame)) {
            c->bad_records++;
            return 0;
        }
        p = procs__get(c->procs, h->tgid, s->comm, now);
        sync_skip(c, p);
        if (p && p->disabled)
            c->skipped_samples++; /* in flight before the skip map had it */
        else if (p) {
            agg_window__add(c->win, c->procs, p, s, now,
                            &(struct agg_frame_hook){runtimes__frame, c->runtimes});
            unwinder__sampled(c->unwinder, h->tgid, s->frames + s->n_kernel, s->n_user);
        } else
            c->win->dropped_oom++;
        break;
    }
    case CX_REC_OFFCPU: {
        const struct cx_sample *s = (const void *)h;
        size_t need = offsetof(struct cx_sample, frames);
        if (!c->off || size < need ||
            size < need + ((size_t)s->n_kernel + s->n_user) * sizeof(struct cx_frame)) {
            c->bad_records++;
            return 0;
        }
        /* Read now, while it lives: its sums are named at the window's end. */
        p = procs__get(c->procs, h->tgid, s->comm, now);
        sync_skip(c, p);
        if (p && !p->disabled) {
            if (offcpu__put(c->off, s, now) == 0)
                warm_runtime_frames(c, p, s);
            /* refused: counted there, its sums unknown */
            /* Its stack was walked as a CPU sample's: a cold table it
             * fell in is wanted as much. */
            unwinder__sampled(c->unwinder, h->tgid, s->frames + s->n_kernel, s->n_user);
        }
        break;
    }
    case CX_REC_EXEC: {
        const struct cx_proc_event *e = (const void *)h;
        bool whole = size >= sizeof(*e);
        sync_skip(c, procs__exec(c->procs, h->tgid, whole ? e->comm : NULL,
                                 whole ? e->cgroup_id : 0, whole ? e->start_ns : 0, now));
        if (c->exec_n < COLLECT_EXEC_PENDING) {
            unsigned at = (c->exec_head + c->exec_n++) % COLLECT_EXEC_PENDING;
            c->exec_tgid[at] = h->tgid;
            c->exec_due[at] = now + EXEC_REREAD_NS;
            /* When ld.so was done by (the exec's own time, BPF's clock is
             * this one): a read after it needs no other. */
            c->exec_mapped[at] =
                (h->time_ns && h->time_ns < now ? h->time_ns : now) + EXEC_REREAD_NS;
        }
        break;
    }
    case CX_REC_MAPS: {
        const struct cx_proc_event *e = (const void *)h;
        struct procs_hint hint = {0, 0, 0};
        if (size >= sizeof(*e))
            hint = (struct procs_hint){e->addr, e->ino, e->dev};
        procs__hint_maps(c->procs, h->tgid, h->time_ns, &hint, now);
        break;
    }
    case CX_REC_EXIT: {
        struct proc *gone = procs__exit(c->procs, h->tgid, now);
        if (gone && gone->skipped && sampler__skip(c->sampler, gone->tgid, false) == 0)
            gone->skipped = false; /* the pid may come back as another process */
        break;
    }
    default:
        c->bad_records++;
    }
    return 0;
}

static void on_maps_read(void *ctx, const struct proc *p, uint64_t now_ns)
{
    struct collector *c = ctx;

    unwinder__proc_maps(c->unwinder, p, now_ns);
    runtimes__proc_maps(c->runtimes, p, now_ns);
}

static void on_exited(void *ctx, uint32_t tgid, uint64_t now_ns)
{
    struct collector *c = ctx;

    unwinder__proc_gone(c->unwinder, tgid, now_ns);
    runtimes__proc_exited(c->runtimes, tgid, now_ns);
}

static void on_gone(void *ctx, uint32_t tgid, uint64_t now_ns)
{
    struct collector *c = ctx;

    unwinder__proc_gone(c->unwinder, tgid, now_ns);
    runtimes__proc_gone(c->runtimes, tgid, now_ns);
}

int collector__open(struct collector *c, const struct sampler_opts *o, bool kernel_stacks,
                    const struct unwinder_opts *uo, char *err, size_t errlen)
{
    char host_root[256], paths[5 * 300];
    struct identity_roots roots;

    memset(c, 0, sizeof(*c));
    c->kernel_stacks = kernel_stacks;
    /* A container's /proc would give pids that match nothing BPF reports. */
    if (node__check_pid_ns("/proc", err, errlen))
        return -1;
    /* In a container (or a unit with its own mounts) the runtimes' metadata
     * is read through the host's root. */
    node__host_root("/proc", host_root, sizeof(host_root));
    if (host_root[0])
        log_info("procs: container names read under %s (the host's root)", host_root);
    c->bc = binary_cache__new("/proc");
    c->procs = c->bc && identity__roots_under(host_root, &roots, paths, sizeof(paths))
                   ? procs__new(c->bc, "/proc", &roots)
                   : NULL;
    c->win = agg_window__new(clock__real_ns(), kernel_stacks);
    if (!c->bc || !c->procs || !c->win) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    struct sampler_opts so = *o;
    so.cfi = uo != NULL;
    c->sampler = sampler__open(&so, on_record, c, err, errlen);
    if (!c->sampler)
        goto fail;
    if (uo) {
        int tables_fd, procs_fd;
        sampler__unwind_fds(c->sampler, &tables_fd, &procs_fd);
        int files_fd =
            sampler__vma_fallback(c->sampler) ? sampler__map_fd(c->sampler, "file_unwind") : -1;
        c->unwinder = unwinder__new(tables_fd, procs_fd, files_fd, uo, err, errlen);
        if (!c->unwinder)
            goto fail;
    }
    if (sampler__off_cpu(c->sampler) && !(c->off = offcpu__new())) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    c->win->off_cpu = c->off != NULL;
    c->runtimes = runtimes__new(&(struct rt_env){"/proc", sampler__map_fd, c->sampler});
    if (!c->runtimes) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    procs__set_listener(c->procs, &(struct procs_listener){on_maps_read, on_exited, on_gone, c});
    /* Where BPF wakes this thread at a new program's first sample. */
    procs__lazy_exec(c->procs, sampler__vma_fallback(c->sampler));
    c->win->start_ns = clock__real_ns();
    return 0;
fail:
    collector__close(c);
    return -1;
}

static void sync_one(void *ctx, struct proc *p)
{
    sync_skip(ctx, p);
}

/* The processes the start-up's first pass put in the skip map, to check
 * against the table once it is read; past PRE_SKIP_MAX they wait for the
 * table (their samples are dropped in user space meanwhile). */
#define PRE_SKIP_MAX 256
struct pre_skip {
    struct collector *c;
    uint32_t tgid[PRE_SKIP_MAX];
    unsigned n;
};

static void pre_skip_one(void *ctx, uint32_t tgid)
{
    struct pre_skip *pre = ctx;

    if (pre->n < PRE_SKIP_MAX && sampler__skip(pre->c->sampler, tgid, true) == 0)
        pre->tgid[pre->n++] = tgid;
}

unsigned collector__scan(struct collector *c, uint32_t only_tgid)
{
    uint64_t now = clock__mono_ns();
    unsigned n;

    if (only_tgid) {
        struct proc *p = procs__get(c->procs, only_tgid, NULL, now);
        sync_skip(c, p);
        return p != NULL;
    }
    /* Excluded processes go into the skip map first, from their environ
     * alone: the whole scan below reads every process's maps and can take
     * seconds on a busy machine, and BPF samples from the start (at load 9
     * three samples of an excluded process reached user space meanwhile). */
    struct pre_skip pre = {c, {0}, 0};
    procs__scan_disabled(c->procs, pre_skip_one, &pre);
    n = procs__scan(c->procs, now);
    c->alive_checked_ns = now; /* the scan has just read /proc */
    /* Then the table's view, which the exit and exec events keep current. */
    procs__each(c->procs, sync_one, c);
    /* A pid skipped first that the table does not hold as excluded (gone
     * since, or exec'd into a program that is profiled) leaves the map: the
     * pid may come back as another process. */
    for (unsigned i = 0; i < pre.n; i++) {
        struct proc *p = procs__get(c->procs, pre.tgid[i], NULL, now);
        if (!p || !p->skipped)
            sampler__skip(c->sampler, pre.tgid[i], false);
    }
    return n;
}

/* Reads again the maps of processes exec'd EXEC_REREAD_NS ago, unless a
 * hint has had them read since, or they were first read that long after
 * the exec (a process read at its first sample): their libraries' tables
 * are then queued (first, see unwinder.h) and found by file by the walk,
 * for this process and every later one. */
static void reread_execs(struct collector *c, uint64_t now)
{
    while (c->exec_n && c->exec_due[c->exec_head] <= now) {
        uint32_t tgid = c->exec_tgid[c->exec_head];
        uint64_t mapped = c->exec_mapped[c->exec_head];
        c->exec_head = (c->exec_head + 1) % COLLECT_EXEC_PENDING;
        c->exec_n--;
        procs__reread_exec(c->procs, tgid, mapped, now);
    }
}

int collector__poll(struct collector *c, int timeout_ms)
{
    uint64_t now = clock__mono_ns();

    if (c->exec_n) {
        uint64_t due = c->exec_due[c->exec_head];
        int ms = due <= now ? 0 : (int)((due - now + 999999) / 1000000);
        if (ms < timeout_ms)
            timeout_ms = ms;
    }
    /* A table being built is loaded the moment it is done: a new process's
     * samples are walked by frame pointers until then. */
    if (timeout_ms > BUILDING_POLL_MS && unwinder__building(c->unwinder))
        timeout_ms = BUILDING_POLL_MS;
    int r = sampler__poll(c->sampler, timeout_ms);

    now = clock__mono_ns();
    reread_execs(c, now);
    unwinder__poll(c->unwinder, now);
    runtimes__poll(c->runtimes, now);
    return r;
}

static void on_lost(void *ctx, uint32_t tgid, uint64_t lost)
{
    struct collector *c = ctx;
    struct proc *p = procs__get(c->procs, tgid, NULL, clock__mono_ns());

    if (p)
        agg_window__add_lost(c->win, p, lost);
    else
        c->win->lost += lost;
}

/* One entry of the BPF off-CPU sums into the open window. */
static void on_off(void *ctx, const struct cx_off_key *k, const struct cx_off_val *v)
{
    struct collector *c = ctx;
    uint64_t now = clock__mono_ns();
    const struct cx_sample *s;
    struct proc *p;

    if (!v->ns)
        return; /* a block still going on: its stack is kept (offcpu.h) */
    s = offcpu__get(c->off, k, now);
    p = s ? procs__get(c->procs, k->tgid, NULL, now) : NULL;
    if (!s || !p || p->disabled) {
        log_debug("offcpu: pid=%u tid=%u id=%llx %.3f s not counted: %s", k->tgid, k->tid,
                  (unsigned long long)k->id, v->ns / 1e9,
                  !s   ? "stack unknown"
                  : !p ? "process gone"
                       : "process excluded");
        c->win->off_unknown_ns += v->ns;
        return;
    }
    agg_window__add_off(c->win, c->procs, p, s, v->ns, v->blocks, now,
                        &(struct agg_frame_hook){runtimes__frame, c->runtimes});
}

struct agg_window *collector__rotate(struct collector *c)
{
    uint64_t now_real = clock__real_ns(), now = clock__mono_ns(), stats[CX_STAT__COUNT];
    struct agg_window *next = agg_window__new(now_real, c->kernel_stacks), *w;

    if (!next)
        return NULL;
    next->off_cpu = c->off != NULL;
    /* Whatever is still in the ring buffer belongs to this window. */
    sampler__poll(c->sampler, 0);
    sampler__drain_lost(c->sampler, on_lost, c);
    if (c->off) {
        sampler__drain_off(c->sampler, on_off, c);
        /* Blocks still going on: their time so far is this window's. */
        sampler__credit_blocked(c->sampler, now, on_off, c);
        offcpu__sweep(c->off, now);
    }
    bool check_alive = now - c->alive_checked_ns >= ALIVE_CHECK_NS;
    if (sampler__stats(c->sampler, stats) == 0) {
        for (int i = 0; i < CX_STAT__COUNT; i++) {
            c->win->stats_delta[i] = stats[i] - c->prev_stats[i];
            c->prev_stats[i] = stats[i];
        }
        /* An exit event lost (the ring was full): its process would stay. */
        check_alive |= c->win->stats_delta[CX_STAT_LOST_EVENTS] > 0;
    } else {
        check_alive = true;
    }
    if (check_alive)
        c->alive_checked_ns = now;
    uint64_t maps_reads, identity_reads;
    procs__reads(c->procs, &maps_reads, &identity_reads);
    c->win->maps_reads = maps_reads - c->prev_maps_reads;
    c->win->identity_reads = identity_reads - c->prev_identity_reads;
    c->prev_maps_reads = maps_reads;
    c->prev_identity_reads = identity_reads;
    w = c->win;
    w->end_ns = now_real;
    c->win = next;
    unwinder__stats(c->unwinder, &w->unwind);
    procs__sweep(c->procs, now - EXIT_GRACE_NS, check_alive);
    unwinder__sweep(c->unwinder, now);
    runtimes__sweep(c->runtimes, now);
    binary_cache__sweep(c->bc, now > BINARY_GRACE_NS ? now - BINARY_GRACE_NS : 0);
    return w;
}

void collector__close(struct collector *c)
{
    /* Before the sampler: it owns the maps they empty. */
    runtimes__free(c->runtimes);
    offcpu__free(c->off);
    unwinder__free(c->unwinder);
    sampler__free(c->sampler);
    agg_window__free(c->win);
    procs__free(c->procs);
    binary_cache__free(c->bc);
    memset(c, 0, sizeof(*c));
}

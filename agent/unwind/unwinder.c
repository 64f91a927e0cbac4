#include "unwinder.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <malloc.h>
#include <linux/types.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../common/clock.h"
#include "../../common/log.h"
#include "../bpf/sample.h"
#include "../bpf/unwind.h"
#include "../procs/procs.h"
#include "cfi_table.h"
#include "file_unwind.h"
#include "go_table.h"
#include "unwinder_int.h"

/* --- the builder thread --- */

static void build_one(struct unwinder *u, struct table *t)
{
    struct cfi_table_opts co = {.max_rows = CX_CFI_MAX_ROWS};
    struct cfi_table *ct = NULL;
    char why[sizeof(t->why)] = "";
    uint64_t t0 = clock__mono_ns();

    if (t->bin->fd < 0)
        snprintf(why, sizeof(why), "cannot open: %s", strerror(t->bin->open_err));
    else if (!(t->nseg = binary__exec_segments(t->bin->fd, t->segs, MAX_SEGS)))
        snprintf(why, sizeof(why), "no executable segment");
    else if (cfi_table__build(t->bin->fd, &co, &ct, why, sizeof(why)))
        ct = NULL;
    else if (ct->n < 2)
        snprintf(why, sizeof(why), "no CFI");

    /* Go code has no CFI: its rows come from .gopclntab, beside cgo's C
     * code's .eh_frame rows where it has some. */
    struct cfi_table *gt = NULL;
    char gwhy[64];
    if (t->bin->fd >= 0 && t->nseg && go_table__build(t->bin->fd, &gt, gwhy, sizeof(gwhy)) == 0) {
        if (ct && ct->n >= 2) {
            struct cfi_table *m;
            if (go_table__merge(ct, gt, &m) == 0)
                ct = m;
            else
                ct = NULL; /* out of memory: both freed */
        } else {
            cfi_table__free(ct);
            ct = gt;
        }
    }
    if (ct && ct->n >= 2) {
        t->built = ct;
        ct = NULL;
    } else {
        snprintf(t->why, sizeof(t->why), "%s", why[0] ? why : "no CFI");
    }
    pthread_mutex_lock(&u->mu);
    u->build_ns += clock__mono_ns() - t0;
    t->qnext = u->done;
    u->done = t;
    u->unbuilt--;
    pthread_mutex_unlock(&u->mu);
    cfi_table__free(ct);
}

static void *builder(void *arg)
{
    /* Named for top, perf and the benchmark's per-thread figures. */
    pthread_setname_np(pthread_self(), "cx-unwind");
    struct unwinder *u = arg;

    pthread_mutex_lock(&u->mu);
    for (;;) {
        while (!u->queue && !u->stopping)
            pthread_cond_wait(&u->cv_work, &u->mu);
        if (u->stopping)
            break;
        struct table *t = u->queue;
        u->queue = t->qnext;
        if (!u->queue)
            u->queue_tail = &u->queue;
        t->qnext = NULL;
        pthread_mutex_unlock(&u->mu);
        build_one(u, t);
        pthread_mutex_lock(&u->mu);
        pthread_cond_broadcast(&u->cv_done);
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

/* --- tables --- */

static unsigned bin_bucket(const struct binary *b)
{
    return (unsigned)(((uintptr_t)b >> 4) * 0x9E3779B1u) % NBUCKETS;
}

/* Hands t to the builder: first after start-up (a process just started or
 * was just sampled: its samples are coming now, before any of the queue's),
 * else in the order asked. */
static void table_queue(struct unwinder *u, struct table *t)
{
    t->state = T_QUEUED;
    pthread_mutex_lock(&u->mu);
    if (u->settled && u->queue) {
        t->qnext = u->queue;
        u->queue = t;
    } else {
        *u->queue_tail = t;
        u->queue_tail = &t->qnext;
    }
    u->pending++;
    u->unbuilt++;
    pthread_cond_signal(&u->cv_work);
    pthread_mutex_unlock(&u->mu);
}

/* A cold table wanted now (sampled, or mapped by a process that cannot
 * wait): to the builder. */
static void table_warm(struct unwinder *u, struct table *t)
{
    u->ncold_tables--;
    table_queue(u, t);
}

/* The table of b, made on first sight: queued, or T_COLD while the
 * unwinder is lazy; a cold one is queued (and *queued set) when `wake`: a
 * process not of the lazy scan maps it, whose samples cannot wait for its
 * first one to be read. A process of the scan whose maps are read again (a
 * pc in JIT code) leaves its cold tables cold. NULL when out of memory. */
static struct table *table_get(struct unwinder *u, struct binary *b, bool wake, bool *queued)
{
    struct table **pp = &u->tables[bin_bucket(b)], *t;

    for (t = *pp; t; t = t->hnext) {
        if (t->bin != b)
            continue;
        if (t->state == T_COLD && !u->lazy && wake) {
            table_warm(u, t);
            *queued = true;
        }
        return t;
    }
    t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->bin = binary__get(b);
    t->slot = -1;
    t->map_fd = -1;
    t->hnext = *pp;
    *pp = t;
    if (u->lazy) {
        t->state = T_COLD;
        u->ncold_tables++;
    } else {
        table_queue(u, t);
    }
    return t;
}

/* --- processes --- */

static struct uproc **uproc_slot(struct unwinder *u, uint32_t tgid)
{
    struct uproc **pp = &u->procs[tgid % NBUCKETS];
    while (*pp && (*pp)->tgid != tgid)
        pp = &(*pp)->next;
    return pp;
}

static void drop_maps(struct unwinder *u, struct uproc *up, uint64_t now_ns)
{
    for (unsigned i = 0; i < up->n; i++) {
        struct table *t = up->m[i].t;
        if (--t->users == 0)
            t->unused_since_ns = now_ns;
    }
    free(up->m);
    up->m = NULL;
    up->n = 0;
    (void)u;
}

/* The row address of pc in mapping m: pc - bias. */
static bool map_bias(const struct umap *m, uint64_t *bias)
{
    if (!binary__map_bias(m->t->segs, m->t->nseg, m->start, m->offset, bias))
        return false;
    *bias += m->t->base;
    return true;
}

/* Writes (or removes) up's entry in proc_unwind from its loaded tables. */
static void uproc_sync(struct unwinder *u, struct uproc *up)
{
    struct cx_proc_unwind *v = u->scratch;
    __u32 key = up->tgid;

    memset(v, 0, sizeof(*v));
    up->waiting = false;
    up->ncold = 0;
    unsigned left_out = 0;
    for (unsigned i = 0; i < up->n; i++) {
        struct umap *m = &up->m[i];
        uint64_t bias;
        if (m->t->state == T_QUEUED)
            up->waiting = true;
        up->ncold += m->t->state == T_COLD;
        if (m->t->state != T_LOADED || !map_bias(m, &bias))
            continue;
        if (v->n == CX_UNWIND_MAX_MAPS) {
            left_out++;
            continue;
        }
        v->maps[v->n++] =
            (struct cx_unwind_map){m->start, m->end, bias, (__u32)m->t->slot, m->t->blocks};
    }
    if (left_out && !up->over_logged) {
        /* The walk's per-process list is fixed-size (BPF map values are);
         * the lowest-addressed mappings are in it, the rest fall back. */
        log_warn("unwind: pid=%u maps %u binaries with CFI tables (so far), more than the %d one "
                 "process's "
                 "walk holds: %u of them are walked by frame pointers",
                 up->tgid, v->n + left_out, CX_UNWIND_MAX_MAPS, left_out);
        up->over_logged = true;
    }
    if (v->n == 0) {
        if (up->in_bpf && bpf_map_delete_elem(u->procs_fd, &key) == 0) {
            up->in_bpf = false;
            u->nprocs_bpf--;
        }
        return;
    }
    if (bpf_map_update_elem(u->procs_fd, &key, v, BPF_ANY)) {
        if (!u->procs_full_logged)
            log_warn("unwind: cannot add pid=%u to proc_unwind (%s): walked by frame pointers",
                     up->tgid, strerror(errno));
        u->procs_full_logged = true;
        return;
    }
    if (!up->in_bpf)
        u->nprocs_bpf++;
    up->in_bpf = true;
}

/* A cold table was queued: the processes that map it wait for it (their
 * entries are written again once it is loaded, by unwinder__poll). */
static void uproc_sync_cold(struct unwinder *u)
{
    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct uproc *up = u->procs[b]; up; up = up->next)
            if (up->ncold) {
                unsigned cold = 0;
                for (unsigned i = 0; i < up->n; i++) {
                    cold += up->m[i].t->state == T_COLD;
                    up->waiting |= up->m[i].t->state == T_QUEUED;
                }
                up->ncold = cold;
            }
}

void unwinder__proc_maps(struct unwinder *u, const struct proc *p, uint64_t now_ns)
{
    struct uproc **pp, *up;
    struct umap *m;
    unsigned n = 0;

    if (!u)
        return;
    pp = uproc_slot(u, p->tgid);
    up = *pp;
    bool fresh = !up, queued = false;
    if (!up) {
        up = calloc(1, sizeof(*up));
        if (!up)
            return;
        up->tgid = p->tgid;
        *pp = up;
    }
    /* Whether its image predates the scan: not what its first maps read
     * says, made at its exec before ld.so maps its libraries. */
    if (fresh || up->generation != p->generation) {
        up->generation = p->generation;
        up->from_scan = u->lazy;
    }
    m = calloc(p->maps.n ? p->maps.n : 1, sizeof(*m));
    if (!m)
        return;
    for (size_t i = 0; i < p->maps.n; i++) {
        const struct proc_map *pm = &p->map[i];
        struct binary *bin = pm->bin;
        struct table *t;
        if (!bin && u->vdso && pm->name && strcmp(pm->name, "[vdso]") == 0)
            bin = u->vdso;
        if (!bin || !(t = table_get(u, bin, !up->from_scan, &queued)))
            continue;
        if (p->maps.e[i].inode) {
            const struct maps_entry *e = &p->maps.e[i];
            struct cx_file_key k = file_unwind__key(e->dev_major, e->dev_minor, e->inode);
            unwinder_table_add_file(u, t, &k);
        }
        t->users++;
        m[n++] = (struct umap){pm->start, pm->end, pm->offset, t};
    }
    drop_maps(u, up, now_ns);
    up->m = m;
    up->n = n;
    uproc_sync(u, up);
    /* The other processes that map what was queued wait for it too, or
     * their entries would never get it. */
    if (queued)
        uproc_sync_cold(u);
}

void unwinder__proc_gone(struct unwinder *u, uint32_t tgid, uint64_t now_ns)
{
    struct uproc **pp, *up;
    __u32 key = tgid;

    if (!u)
        return;
    pp = uproc_slot(u, tgid);
    up = *pp;
    if (!up)
        return;
    if (up->in_bpf) {
        bpf_map_delete_elem(u->procs_fd, &key);
        u->nprocs_bpf--;
    }
    drop_maps(u, up, now_ns);
    *pp = up->next;
    free(up);
}

/* --- the main loop's side --- */

/* Rules not covered are logged per binary (info); a clean table at debug. */
static void log_table(const struct table *t, const struct cfi_table *ct)
{
    char line[512];

    cfi_table__stats_str(&ct->stats, line, sizeof(line));
    if (unwinder_unsupported_rows(&ct->stats))
        log_info("unwind: %s: %s", t->bin->path, line);
    else
        log_debug("unwind: %s: %s", t->bin->path, line);
}

static void table_free(struct unwinder *u, struct table *t)
{
    unwinder_table_unload(u, t);
    cfi_table__free(t->built);
    binary__put(t->bin);
    free(t);
}

void unwinder__poll(struct unwinder *u, uint64_t now_ns)
{
    struct table *done, *t, *next;
    bool any = false;

    (void)now_ns;
    if (!u)
        return;
    pthread_mutex_lock(&u->mu);
    done = u->done;
    u->done = NULL;
    pthread_mutex_unlock(&u->mu);
    struct table *filled[COMMIT_MAX];
    unsigned nfilled = 0;
    for (t = done; t; t = next) {
        next = t->qnext;
        t->qnext = NULL;
        pthread_mutex_lock(&u->mu);
        u->pending--;
        pthread_mutex_unlock(&u->mu);
        any = true;
        if (t->built) {
            u->built_since_trim += (uint64_t)t->built->n * sizeof(struct cx_cfi_row);
            log_table(t, t->built);
            if (unwinder_table_fill(u, t) == 0) {
                filled[nfilled++] = t;
                if (nfilled == COMMIT_MAX) {
                    unwinder_commit_filled(u, filled, nfilled);
                    nfilled = 0;
                }
                continue;
            }
            log_warn("unwind: %s: no table: %s", t->bin->path, t->why);
            cfi_table__free(t->built);
            t->built = NULL;
        } else {
            log_debug("unwind: %s: no table: %s", t->bin->path, t->why);
        }
        t->state = T_NONE;
        u->without++;
    }
    unwinder_commit_filled(u, filled, nfilled);
    if (!any)
        return;
    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct uproc *up = u->procs[b]; up; up = up->next)
            if (up->waiting)
                uproc_sync(u, up);
    /* Building took several times a table's size in the builder's heap
     * (the .eh_frame read in, libdw's state, the rows twice), all freed by
     * now but kept by malloc: at the end of a burst (the first scan, a
     * batch of new programs), hand it back. */
    pthread_mutex_lock(&u->mu);
    bool idle = u->unbuilt == 0 && !u->done;
    pthread_mutex_unlock(&u->mu);
    if (idle && u->built_since_trim >= TRIM_AFTER_BYTES) {
#ifdef __GLIBC__
        malloc_trim(0);
#endif
        u->built_since_trim = 0;
    }
}

bool unwinder__building(const struct unwinder *u)
{
    bool busy;

    if (!u)
        return false;
    pthread_mutex_lock((pthread_mutex_t *)&u->mu);
    busy = u->pending > 0;
    pthread_mutex_unlock((pthread_mutex_t *)&u->mu);
    return busy;
}

void unwinder__sweep(struct unwinder *u, uint64_t now_ns)
{
    struct table *t;

    if (!u)
        return;
    for (unsigned b = 0; b < NBUCKETS; b++) {
        struct table **pp = &u->tables[b];
        while ((t = *pp)) {
            bool idle = t->state == T_LOADED || t->state == T_NONE || t->state == T_COLD;
            if (idle && t->users == 0 && now_ns - t->unused_since_ns > UNUSED_GRACE_NS) {
                *pp = t->hnext;
                if (t->state == T_NONE)
                    u->without--;
                if (t->state == T_COLD)
                    u->ncold_tables--;
                table_free(u, t);
            } else {
                pp = &t->hnext;
            }
        }
    }
}

bool unwinder__settle(struct unwinder *u, int timeout_ms, uint64_t now_ns)
{
    struct timespec ts;
    bool settled;

    if (!u)
        return true;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    /* Each table is loaded as it comes: built ones waiting for the end
     * would all be in memory at once. */
    for (;;) {
        bool timed_out = false;
        pthread_mutex_lock(&u->mu);
        while (u->unbuilt > 0 && !u->done && !u->stopping && !timed_out)
            timed_out = pthread_cond_timedwait(&u->cv_done, &u->mu, &ts) == ETIMEDOUT;
        settled = u->unbuilt == 0;
        pthread_mutex_unlock(&u->mu);
        unwinder__poll(u, now_ns);
        if (settled || timed_out || u->stopping) {
            u->settled = true;
            return settled;
        }
    }
}

void unwinder__set_lazy(struct unwinder *u, bool lazy)
{
    if (!u)
        return;
    if (u->lazy && !lazy) {
        /* The libraries most processes map (libc, ld.so, libstdc++) are
         * built now: small, and every process started from here on maps
         * them, whose first samples must not wait for a build. */
        for (unsigned b = 0; b < NBUCKETS; b++)
            for (struct table *t = u->tables[b]; t; t = t->hnext)
                if (t->state == T_COLD && t->users >= SHARED_USERS)
                    table_warm(u, t);
        for (unsigned b = 0; b < NBUCKETS; b++)
            for (struct uproc *up = u->procs[b]; up; up = up->next)
                uproc_sync(u, up);
    }
    u->lazy = lazy;
}

/* up's mapping holding addr, or NULL: the mappings are in address order,
 * as /proc lists them. */
static const struct umap *umap_at(const struct uproc *up, uint64_t addr)
{
    unsigned lo = 0, hi = up->n;

    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (addr < up->m[mid].start)
            hi = mid;
        else if (addr >= up->m[mid].end)
            lo = mid + 1;
        else
            return &up->m[mid];
    }
    return NULL;
}

void unwinder__sampled(struct unwinder *u, uint32_t tgid, const struct cx_frame *f, unsigned n)
{
    struct uproc *up;

    if (!u || !u->ncold_tables || !(up = *uproc_slot(u, tgid)) || !up->ncold)
        return;
    bool queued = false;
    for (unsigned i = 0; i < n; i++) {
        const struct umap *m = f[i].kind == CX_FRAME_NATIVE ? umap_at(up, f[i].addr) : NULL;
        if (m && m->t->state == T_COLD) {
            table_warm(u, m->t);
            queued = true;
        }
    }
    if (queued)
        uproc_sync_cold(u);
}

void unwinder__stats(const struct unwinder *u, struct unwinder_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!u)
        return;
    out->tables = u->loaded;
    out->bytes = u->bytes;
    out->rows = u->rows;
    out->without = u->without;
    out->procs = u->nprocs_bpf;
    out->unsupported = u->unsupported;
    pthread_mutex_lock((pthread_mutex_t *)&u->mu);
    out->pending = u->pending;
    out->cold = u->ncold_tables;
    out->build_ms = u->build_ns / 1000000;
    pthread_mutex_unlock((pthread_mutex_t *)&u->mu);
}

struct unwinder *unwinder__new(int tables_fd, int procs_fd, int files_fd,
                               const struct unwinder_opts *o, char *err, size_t errlen)
{
    struct unwinder *u = calloc(1, sizeof(*u));

    if (!u)
        goto oom;
    u->tables_fd = tables_fd;
    u->procs_fd = procs_fd;
    u->files_fd = files_fd;
    u->o = *o;
    u->queue_tail = &u->queue;
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->cv_work, NULL);
    pthread_cond_init(&u->cv_done, NULL);
    u->slot_used = calloc(CX_CFI_MAX_TABLES, 1);
    u->scratch = malloc(sizeof(*u->scratch));
    if (!u->slot_used || !u->scratch)
        goto oom;
    elf_version(EV_CURRENT);
    /* The vDSO has CFI but no file: its image stands in (binary.h). */
    u->vdso = binary__open_vdso();
    if (pthread_create(&u->th, NULL, builder, u)) {
        snprintf(err, errlen, "cannot start the CFI table builder thread");
        goto fail;
    }
    u->th_started = true;
    return u;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    unwinder__free(u);
    return NULL;
}

void unwinder__free(struct unwinder *u)
{
    if (!u)
        return;
    if (u->th_started) {
        pthread_mutex_lock(&u->mu);
        u->stopping = true;
        pthread_cond_broadcast(&u->cv_work);
        pthread_mutex_unlock(&u->mu);
        pthread_join(u->th, NULL);
    }
    u->closing = true;
    for (unsigned b = 0; b < NBUCKETS; b++) {
        struct uproc *up, *un;
        for (up = u->procs[b]; up; up = un) {
            un = up->next;
            unwinder__proc_gone(u, up->tgid, 0);
        }
    }
    for (unsigned b = 0; b < NBUCKETS; b++) {
        struct table *t, *tn;
        for (t = u->tables[b]; t; t = tn) {
            tn = t->hnext;
            table_free(u, t);
        }
    }
    binary__put(u->vdso);
    free(u->slot_used);
    free(u->scratch);
    pthread_cond_destroy(&u->cv_work);
    pthread_cond_destroy(&u->cv_done);
    pthread_mutex_destroy(&u->mu);
    free(u);
}

/* The V8 runtime (runtime.h): Node.js's JavaScript frames without
 * --perf-basic-prof.
 *
 * Tracker (main thread): finds V8 in each process's mappings (a binary
 * exporting V8's postmortem constants: node, libnode.so; v8_detect.h, once
 * per binary), puts the offsets the BPF walk needs in the "v8_procs" map
 * (v8.h), and turns each V8 frame of a sample into the function it ran
 * (v8_fn.h), read from the process's memory on first sight and cached per
 * process by address and fingerprint (V8_PROC_MAX_FNS a process,
 * V8_FNS_MAX_BYTES in all).
 *
 * Namer (worker): a V8 frame becomes a location with the function's name
 * ("(anonymous)" for one without: a script's top level, an arrow
 * function), its script and the line the function starts at.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proc_mem.h"
#include "../../../common/clock.h"
#include "../../../common/log.h"
#include "../../aggregate.h"
#include "../../procs/procs.h"
#include "../runtime.h"
#include "v8_detect.h"
#include "v8_fn.h"

#define NBUCKETS 1024
/* Functions cached per process; past it the process's cache starts over. */
#define V8_PROC_MAX_FNS 32768
/* Memory for functions, every process together. Past it no new one is read
 * (its frames say so) until processes' caches are cleared. */
#define V8_FNS_MAX_BYTES (64u << 20)

/* agg_frame.flags of a V8 frame without a function: why. */
enum v8_unnamed {
    V8U_UNREADABLE = 1,
    V8U_MOVED = 2,
    V8U_FULL = 3,
    V8U_NO_PROC = 4,
};

struct v8_bin {
    struct binary *bin; /* a reference */
    int found;          /* v8_detect__elf's answer */
    struct v8_binary info;
    struct v8_bin *next;
};

struct fn_entry {
    uint64_t addr;
    uint16_t tag;
    uint8_t why;     /* enum v8_unnamed when f is NULL */
    struct v8_fn *f; /* a reference, or NULL: could not be read */
    struct fn_entry *next;
};

struct v8_proc {
    uint32_t tgid;
    const struct v8_bin *vb;
    bool in_bpf;
    /* Its exit event came: out of BPF, its functions kept to name the
     * window that holds its last samples, until proc_gone. */
    bool exited;
    struct fn_entry **fns; /* NBUCKETS chains, made on first use */
    unsigned nfns;
    struct v8_proc *next;
};

struct v8_tracker {
    int procs_fd; /* v8_procs, -1 without BPF (tests) */
    struct v8_bin *bins[NBUCKETS];
    struct v8_proc *procs[NBUCKETS];
    struct v8_proc *last;
    uint64_t bytes;
    bool full_logged;
    uint64_t reads, read_failures, read_ns, cleared;
};

static unsigned ptr_bucket(const void *p)
{
    return (unsigned)(((uintptr_t)p >> 4) * 0x9E3779B1u) % NBUCKETS;
}

/* What b is, looked at on first sight and logged once. */
static const struct v8_bin *bin_get(struct v8_tracker *t, struct binary *b)
{
    struct v8_bin **pp = &t->bins[ptr_bucket(b)], *vb;

    for (vb = *pp; vb; vb = vb->next) {
        if (vb->bin == b)
            return vb;
    }
    vb = calloc(1, sizeof(*vb));
    if (!vb)
        return NULL;
    vb->bin = binary__get(b);
    vb->found = b->fd >= 0 ? v8_detect__elf(b->fd, &vb->info) : 0;
    vb->next = *pp;
    *pp = vb;
#if !defined(__x86_64__)
    if (vb->found == 1 && vb->info.usable) {
        vb->info.usable = false;
        snprintf(vb->info.why, sizeof(vb->info.why), "walked on x86_64 only yet");
    }
#endif
    if (vb->found == 1 && vb->info.usable)
        log_info("v8: %s: V8 (%u postmortem constants), its JavaScript frames are walked and named "
                 "from its own structures",
                 b->path, vb->info.nconsts);
    else if (vb->found == 1)
        log_warn("v8: %s: %s; JavaScript frames of its processes are not named from V8's "
                 "structures (start node with --perf-basic-prof to have them named from its perf "
                 "map)",
                 b->path, vb->info.why);
    return vb;
}

static struct v8_proc **proc_slot(struct v8_tracker *t, uint32_t tgid)
{
    struct v8_proc **pp = &t->procs[tgid % NBUCKETS];

    while (*pp && (*pp)->tgid != tgid)
        pp = &(*pp)->next;
    return pp;
}

static void fns_clear(struct v8_tracker *t, struct v8_proc *vp)
{
    for (unsigned b = 0; vp->fns && b < NBUCKETS; b++) {
        struct fn_entry *e, *en;
        for (e = vp->fns[b]; e; e = en) {
            en = e->next;
            if (e->f)
                t->bytes -= e->f->bytes;
            t->bytes -= sizeof(*e);
            rt_obj__put(e->f ? &e->f->obj : NULL);
            free(e);
        }
        vp->fns[b] = NULL;
    }
    vp->nfns = 0;
}

static void proc_drop(struct v8_tracker *t, uint32_t tgid)
{
    struct v8_proc **slot = proc_slot(t, tgid), *vp = *slot;

    if (!vp)
        return;
    rt_bpf__forget(t->procs_fd, tgid, &vp->in_bpf);
    *slot = vp->next;
    if (t->last == vp)
        t->last = NULL;
    fns_clear(t, vp);
    free(vp->fns);
    free(vp);
}

static void proc_set(struct v8_tracker *t, const struct proc *p, const struct v8_bin *vb)
{
    struct v8_proc **slot = proc_slot(t, p->tgid), *vp = *slot;
    struct cx_v8_proc v;
    __u32 key = p->tgid;

    /* The entry is put again at each reading of the maps: BPF drops it
     * at exec, which a process may do into the same node. */
    if (vp && (vp->vb != vb || vp->exited))
        fns_clear(t, vp); /* exec'd into another V8, or its pid reused */
    if (!vp) {
        vp = calloc(1, sizeof(*vp));
        if (!vp)
            return;
        vp->tgid = p->tgid;
        *slot = vp;
    }
    vp->vb = vb;
    vp->exited = false;
    if (t->procs_fd < 0)
        return;
    v8_detect__to_bpf(&vb->info.l, &v);
    if (bpf_map_update_elem(t->procs_fd, &key, &v, BPF_ANY)) {
        log_warn("v8: pid=%u: cannot add it to v8_procs: %s", p->tgid, strerror(errno));
        return;
    }
    if (!vp->in_bpf)
        log_debug("v8: pid=%u exe=%s: V8 at %s", p->tgid, p->exe, vb->bin->path);
    vp->in_bpf = true;
}

static void v8_proc_maps(void *tp, const struct proc *p, uint64_t now_ns)
{
    struct v8_tracker *t = tp;

    (void)now_ns;
    for (size_t i = 0; i < p->maps.n; i++) {
        const struct v8_bin *vb;
        if (!p->map[i].bin || !(vb = bin_get(t, p->map[i].bin)) || vb->found != 1 ||
            !vb->info.usable)
            continue;
        proc_set(t, p, vb);
        return;
    }
    proc_drop(t, p->tgid); /* no V8 (any more: exec'd into another program) */
}

static void v8_proc_exited(void *tp, uint32_t tgid, uint64_t now_ns)
{
    struct v8_tracker *t = tp;
    struct v8_proc *vp = *proc_slot(t, tgid);

    (void)now_ns;
    if (!vp)
        return;
    rt_bpf__forget(t->procs_fd, tgid, &vp->in_bpf);
    vp->exited = true;
}

static void v8_proc_gone(void *tp, uint32_t tgid, uint64_t now_ns)
{
    (void)now_ns;
    proc_drop(tp, tgid);
}

static struct fn_entry **entry_slot(struct v8_proc *vp, uint64_t addr)
{
    struct fn_entry **ep = &vp->fns[(addr >> 3) % NBUCKETS];

    while (*ep && (*ep)->addr != addr)
        ep = &(*ep)->next;
    return ep;
}

/* The function of the SharedFunctionInfo at addr with fingerprint tag:
 * cached, or read now. Returns a new reference, or NULL with *why. */
static struct v8_fn *fn_get(struct v8_tracker *t, struct v8_proc *vp, uint64_t addr, uint16_t tag,
                            uint8_t *why)
{
    struct fn_entry **ep, *e;
    const char *reason = NULL;

    if (!vp->fns && !(vp->fns = calloc(NBUCKETS, sizeof(*vp->fns)))) {
        *why = V8U_FULL;
        return NULL;
    }
    ep = entry_slot(vp, addr);
    e = *ep;
    if (e && e->tag == tag) {
        *why = e->why;
        return e->f ? (struct v8_fn *)rt_obj__get(&e->f->obj) : NULL;
    }
    if (t->bytes >= V8_FNS_MAX_BYTES) {
        if (!t->full_logged)
            log_warn("v8: functions hold %u MiB, the cap: JavaScript frames of functions not seen "
                     "before show as [v8: name cache full] until caches are cleared",
                     V8_FNS_MAX_BYTES >> 20);
        t->full_logged = true;
        *why = V8U_FULL;
        return NULL;
    }
    if (!e) {
        if (vp->nfns >= V8_PROC_MAX_FNS) {
            fns_clear(t, vp);
            t->cleared++;
            ep = entry_slot(vp, addr);
        }
        e = calloc(1, sizeof(*e));
        if (!e) {
            *why = V8U_FULL;
            return NULL;
        }
        e->addr = addr;
        *ep = e;
        vp->nfns++;
        t->bytes += sizeof(*e);
    }
    struct py_reader r = {proc_mem__read, (void *)(intptr_t)vp->tgid};
    uint64_t t0 = clock__thread_ns();
    struct v8_fn *f = v8_fn__read(&r, &vp->vb->info.l, addr, tag, &reason);
    t->read_ns += clock__thread_ns() - t0;
    t->reads++;
    if (e->f)
        t->bytes -= e->f->bytes;
    rt_obj__put(e->f ? &e->f->obj : NULL);
    e->tag = tag;
    e->f = f;
    if (!f) {
        t->read_failures++;
        e->why = strcmp(reason, "unreadable") == 0 || strcmp(reason, "out of memory") == 0
                     ? V8U_UNREADABLE
                     : V8U_MOVED;
        *why = e->why;
        return NULL;
    }
    t->bytes += f->bytes;
    e->why = 0;
    return (struct v8_fn *)rt_obj__get(&f->obj);
}

static int v8_frame(void *tp, const struct proc *p, const struct cx_frame *f,
                    struct rt_frame_out *out)
{
    struct v8_tracker *t = tp;
    struct v8_proc *vp = t->last;
    uint8_t why = 0;

    if (!vp || vp->tgid != p->tgid)
        vp = t->last = *proc_slot(t, p->tgid);
    if (!vp || !vp->vb) {
        out->flags = V8U_NO_PROC;
        return 0;
    }
    struct v8_fn *fn = fn_get(t, vp, f->addr, f->tag, &why);
    if (!fn) {
        out->flags = why ? why : V8U_UNREADABLE;
        return 0;
    }
    out->obj = &fn->obj;
    return 0;
}

static void v8_tracker_sweep(void *tp, uint64_t now_ns)
{
    struct v8_tracker *t = tp;

    (void)now_ns;
    if (t->bytes < V8_FNS_MAX_BYTES / 2)
        t->full_logged = false;
    log_debug("v8: fn_bytes=%llu reads=%llu read_failures=%llu read_ms=%llu caches_cleared=%llu",
              (unsigned long long)t->bytes, (unsigned long long)t->reads,
              (unsigned long long)t->read_failures, (unsigned long long)(t->read_ns / 1000000),
              (unsigned long long)t->cleared);
}

static void *v8_tracker_new(const struct rt_env *env, char *err, size_t errlen)
{
    struct v8_tracker *t = calloc(1, sizeof(*t));

    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->procs_fd = env->map_fd ? env->map_fd(env->sampler, "v8_procs") : -1;
    if (env->map_fd && t->procs_fd < 0) {
        snprintf(err, errlen, "the BPF programs have no v8_procs map");
        free(t);
        return NULL;
    }
    return t;
}

static void v8_tracker_free(void *tp)
{
    struct v8_tracker *t = tp;

    for (unsigned b = 0; b < NBUCKETS; b++) {
        while (t->procs[b])
            proc_drop(t, t->procs[b]->tgid);
        struct v8_bin *vb, *vn;
        for (vb = t->bins[b]; vb; vb = vn) {
            vn = vb->next;
            binary__put(vb->bin);
            free(vb);
        }
    }
    free(t);
}

/* --- the namer --- */

static const char *unnamed_label(unsigned why)
{
    switch (why) {
    case V8U_MOVED:
        return "[v8: function moved before it was read]";
    case V8U_FULL:
        return "[v8: name cache full]";
    case V8U_NO_PROC:
        return "[v8: runtime not known]";
    default:
        return "[v8: function unreadable]";
    }
}

static void *v8_namer_new(const char *proc_root)
{
    static int token;

    (void)proc_root;
    return &token; /* stateless: each frame carries what names it */
}

static void v8_namer_free(void *n)
{
    (void)n;
}

static uint64_t v8_name(void *n, struct rt_name_ctx *c, const struct agg_frame *f,
                        const struct rt_obj *obj, uint64_t map_id, unsigned *how)
{
    struct pprof_line l = {0};

    (void)n;
    (void)map_id;
    if (obj) {
        const struct v8_fn *fn = (const struct v8_fn *)obj;
        l.function = fn->name[0] ? fn->name : "(anonymous)";
        l.system_name = ""; /* see python.c: pprof would "simplify" some names */
        l.file = fn->file;
        l.line = fn->line;
        l.start_line = fn->line;
        *how = RT_COUNTED;
    } else {
        l.function = unnamed_label(f->flags);
        *how = RT_UNNAMED;
    }
    uint64_t id = pprof_writer__location(c->w, 0, 0, &l, 1);
    return id ? id : UINT64_MAX;
}

const struct runtime_ops rt_v8_ops = {
    .name = "v8",
    .kinds = {CX_FRAME_V8},
    .stat_name = "v8_frames",
    .tracker_new = v8_tracker_new,
    .tracker_free = v8_tracker_free,
    .proc_maps = v8_proc_maps,
    .proc_exited = v8_proc_exited,
    .proc_gone = v8_proc_gone,
    .frame = v8_frame,
    .tracker_sweep = v8_tracker_sweep,
    .namer_new = v8_namer_new,
    .namer_free = v8_namer_free,
    .name_frame = v8_name,
};

#include "runtimes.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../aggregate.h"

extern const struct runtime_ops rt_jit_ops;
extern const struct runtime_ops rt_python_ops;
extern const struct runtime_ops rt_v8_ops;
extern const struct runtime_ops rt_hotspot_ops;

/* The runtimes, in the order their namers are asked about native frames. */
static const struct runtime_ops *const all[] = {
    &rt_jit_ops,
    &rt_python_ops,
    &rt_v8_ops,
    &rt_hotspot_ops,
};
#define NRT (sizeof(all) / sizeof(all[0]))
_Static_assert(NRT <= RT_MAX, "more runtimes than RT_MAX");

struct rt_obj *rt_obj__get(struct rt_obj *o)
{
    if (o)
        __atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED);
    return o;
}

void rt_obj__put(struct rt_obj *o)
{
    if (o && __atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) == 0)
        o->free(o);
}

/* The runtime whose frames are of `kind`, or -1. */
void rt_bpf__forget(int map_fd, uint32_t tgid, bool *in_bpf)
{
    __u32 key = tgid;

    if (*in_bpf && map_fd >= 0)
        bpf_map_delete_elem(map_fd, &key);
    *in_bpf = false;
}

static int owner_of(unsigned kind)
{
    for (size_t i = 0; i < NRT; i++) {
        for (size_t k = 0; k < sizeof(all[i]->kinds) / sizeof(all[i]->kinds[0]); k++) {
            if (!all[i]->kinds[k])
                break;
            if (all[i]->kinds[k] == kind)
                return (int)i;
        }
    }
    return -1;
}

/* --- trackers --- */

struct runtimes {
    void *t[NRT]; /* NULL: the runtime has no tracker, or it did not start */
};

struct runtimes *runtimes__new(const struct rt_env *env)
{
    struct runtimes *r = calloc(1, sizeof(*r));
    char err[256];

    if (!r)
        return NULL;
    for (size_t i = 0; i < NRT; i++) {
        if (!all[i]->tracker_new)
            continue;
        err[0] = '\0';
        r->t[i] = all[i]->tracker_new(env, err, sizeof(err));
        if (!r->t[i])
            log_warn("runtime %s: not started: %s", all[i]->name, err[0] ? err : "out of memory");
    }
    return r;
}

void runtimes__free(struct runtimes *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < NRT; i++) {
        if (r->t[i])
            all[i]->tracker_free(r->t[i]);
    }
    free(r);
}

void runtimes__proc_maps(struct runtimes *r, const struct proc *p, uint64_t now_ns)
{
    for (size_t i = 0; r && i < NRT; i++) {
        if (r->t[i] && all[i]->proc_maps)
            all[i]->proc_maps(r->t[i], p, now_ns);
    }
}

void runtimes__proc_exited(struct runtimes *r, uint32_t tgid, uint64_t now_ns)
{
    for (size_t i = 0; r && i < NRT; i++) {
        if (!r->t[i])
            continue;
        if (all[i]->proc_exited)
            all[i]->proc_exited(r->t[i], tgid, now_ns);
        else if (all[i]->proc_gone)
            all[i]->proc_gone(r->t[i], tgid, now_ns);
    }
}

void runtimes__proc_gone(struct runtimes *r, uint32_t tgid, uint64_t now_ns)
{
    for (size_t i = 0; r && i < NRT; i++) {
        if (r->t[i] && all[i]->proc_gone)
            all[i]->proc_gone(r->t[i], tgid, now_ns);
    }
}

int runtimes__frame(void *ctx, const struct proc *p, const struct cx_frame *f,
                    struct rt_frame_out *out)
{
    struct runtimes *r = ctx;
    int i = owner_of(f->kind);

    if (!r || i < 0 || !r->t[i] || !all[i]->frame)
        return -ENOENT;
    return all[i]->frame(r->t[i], p, f, out);
}

void runtimes__sweep(struct runtimes *r, uint64_t now_ns)
{
    for (size_t i = 0; r && i < NRT; i++) {
        if (r->t[i] && all[i]->tracker_sweep)
            all[i]->tracker_sweep(r->t[i], now_ns);
    }
}

void runtimes__poll(struct runtimes *r, uint64_t now_ns)
{
    for (size_t i = 0; r && i < NRT; i++) {
        if (r->t[i] && all[i]->tracker_poll)
            all[i]->tracker_poll(r->t[i], now_ns);
    }
}

/* --- namers --- */

struct rt_namers {
    void *n[NRT];
    struct rt_name_ctx c[NRT]; /* the process being named, per runtime */
    bool in_proc;
};

struct rt_namers *rt_namers__new(const char *proc_root)
{
    struct rt_namers *n = calloc(1, sizeof(*n));

    if (!n)
        return NULL;
    for (size_t i = 0; i < NRT; i++) {
        if (!all[i]->namer_new)
            continue;
        n->n[i] = all[i]->namer_new(proc_root);
        if (!n->n[i]) {
            rt_namers__free(n);
            return NULL;
        }
    }
    return n;
}

void rt_namers__free(struct rt_namers *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < NRT; i++) {
        if (n->n[i])
            all[i]->namer_free(n->n[i]);
    }
    free(n);
}

void rt_namers__proc_begin(struct rt_namers *n, struct pprof_writer *w, const struct agg_proc *ap,
                           uint64_t now_ns)
{
    for (size_t i = 0; i < NRT; i++) {
        n->c[i] = (struct rt_name_ctx){w, ap, now_ns, NULL};
        if (n->n[i] && all[i]->proc_begin)
            all[i]->proc_begin(n->n[i], &n->c[i]);
    }
    n->in_proc = true;
}

void rt_namers__proc_end(struct rt_namers *n)
{
    if (!n->in_proc)
        return;
    for (size_t i = 0; i < NRT; i++) {
        if (n->n[i] && all[i]->proc_end)
            all[i]->proc_end(n->n[i], &n->c[i]);
        n->c[i] = (struct rt_name_ctx){0};
    }
    n->in_proc = false;
}

uint64_t rt_namers__name(struct rt_namers *n, const struct agg_frame *f, uint64_t map_id, int *stat,
                         bool *unnamed)
{
    const struct agg_proc *ap = n->c[0].ap;
    unsigned how = 0;
    uint64_t id;

    *stat = -1;
    *unnamed = false;
    if (f->kind != CX_FRAME_NATIVE) {
        int i = owner_of(f->kind);
        if (i < 0 || !n->n[i])
            return 0;
        const struct rt_obj *obj =
            f->map != AGG_NO_MAP && f->map < ap->nobjs ? ap->objs[f->map] : NULL;
        id = all[i]->name_frame(n->n[i], &n->c[i], f, obj, map_id, &how);
        if (id && id != UINT64_MAX) {
            *stat = (how & RT_COUNTED) && all[i]->stat_name ? i : -1;
            *unnamed = how & RT_UNNAMED;
        }
        return id;
    }
    /* A native frame: whoever claims it (JIT code), in list order. */
    for (size_t i = 0; i < NRT; i++) {
        if (!n->n[i] || !all[i]->name_frame || !all[i]->claims_native)
            continue;
        how = 0;
        id = all[i]->name_frame(n->n[i], &n->c[i], f, NULL, map_id, &how);
        if (id) {
            if (id != UINT64_MAX) {
                *stat = (how & RT_COUNTED) && all[i]->stat_name ? (int)i : -1;
                *unnamed = how & RT_UNNAMED;
            }
            return id;
        }
    }
    return 0;
}

const char *rt_namers__stat_name(int i)
{
    return i >= 0 && (size_t)i < NRT && all[i]->stat_name ? all[i]->stat_name : "";
}

void rt_namers__sweep(struct rt_namers *n, uint64_t now_ns)
{
    for (size_t i = 0; n && i < NRT; i++) {
        if (n->n[i] && all[i]->namer_sweep)
            all[i]->namer_sweep(n->n[i], now_ns);
    }
}

#include "aggregate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/arena.h"
#include "../common/hmap.h"
#include "runtimes/runtime.h"

/* Window serials: unique, so a process's remembered entry (proc->agg)
 * is never taken for one of another window at the same address. */
static uint64_t serials;

struct agg_window *agg_window__new(uint64_t start_ns, bool kernel_stacks)
{
    struct agg_window *w = calloc(1, sizeof(*w));

    if (!w)
        return NULL;
    w->start_ns = start_ns;
    w->kernel_stacks = kernel_stacks;
    w->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    /* Everything a window holds but its processes' stacks comes from one
     * arena: about 15 allocations per process per window otherwise (and
     * as many frees on the worker's thread), each a walk of cold free
     * lists on a busy node. */
    w->arena = arena__new(64 << 10);
    w->index = w->arena ? hmap__new_in(w->arena, 64) : NULL;
    if (!w->index) {
        arena__free(w->arena);
        free(w);
        return NULL;
    }
    return w;
}

/* Drops ap's references; its memory is the window's arena's, but for its
 * stacks' own arena. */
static void proc_free(struct agg_proc *ap)
{
    if (!ap)
        return;
    for (size_t i = 0; i < ap->nmaps; i++)
        binary__put(ap->maps[i].bin);
    for (size_t i = 0; i < ap->nobjs; i++)
        rt_obj__put(ap->objs[i]);
    arena__free(ap->stack_arena);
}

void agg_window__free(struct agg_window *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nprocs; i++)
        proc_free(w->procs[i]);
    arena__free(w->arena);
    free(w);
}

void agg_window__drop_stacks(struct agg_window *w, size_t i)
{
    struct agg_proc *ap = i < w->nprocs ? w->procs[i] : NULL;

    if (!ap)
        return;
    arena__free(ap->stack_arena);
    ap->stack_arena = NULL;
    ap->stacks = NULL;
    ap->off_stacks = NULL;
}

static void copy_identity(struct agg_proc *ap, const struct proc *p)
{
    ap->generation = p->generation;
    ap->start_time = p->start_time;
    memcpy(ap->comm, p->comm, sizeof(ap->comm));
    memcpy(ap->exe, p->exe, sizeof(ap->exe));
    ap->id = p->id;
}

struct agg_proc *agg_window__proc(struct agg_window *w, struct proc *p)
{
    struct agg_proc *ap;
    bool fresh;
    long i;

    if (p->agg && p->agg_serial == w->serial) {
        ap = p->agg;
        goto found;
    }
    /* By tgid: p's first sample in this window, or p is another struct
     * for the same tgid (a reused pid). */
    if ((i = hmap__put(w->index, &p->tgid, sizeof(p->tgid), &fresh)) < 0)
        return NULL;
    if (!fresh && *hmap__val(w->index, i) < w->nprocs) {
        ap = w->procs[*hmap__val(w->index, i)];
        goto found;
    }
    /* New, or an earlier try ran out of memory: make it now. Its stacks
     * get an arena of their own, freed once its profile is written
     * (agg_window__drop_stacks); a light process's fit its first 4 KiB. */
    ap = arena__calloc(w->arena, 1, sizeof(*ap));
    if (!ap || !(ap->stack_arena = arena__new(4096)) ||
        !(ap->stacks = hmap__new_in(ap->stack_arena, 16)) ||
        !(ap->map_index = hmap__new_in(w->arena, 16)) ||
        !(ap->obj_index = hmap__new_in(w->arena, 16)))
        goto fail;
    if (w->nprocs == w->cap_procs) {
        size_t cap = w->cap_procs ? w->cap_procs * 2 : 64;
        struct agg_proc **np =
            arena__grow(w->arena, w->procs, w->cap_procs * sizeof(*np), cap * sizeof(*np));
        if (!np)
            goto fail;
        w->procs = np;
        w->cap_procs = cap;
    }
    ap->tgid = p->tgid;
    copy_identity(ap, p);
    *hmap__val(w->index, i) = w->nprocs;
    w->procs[w->nprocs++] = ap;
found:
    if (ap->generation != p->generation)
        copy_identity(ap, p); /* exec'd: the window goes by its new name */
    p->agg = ap;
    p->agg_serial = w->serial;
    return ap;
fail:
    /* The index entry stays, pointing nowhere, so the next call tries again. */
    proc_free(ap);
    *hmap__val(w->index, i) = SIZE_MAX;
    return NULL;
}

static uint32_t map_id(struct agg_window *w, struct agg_proc *ap, const struct proc_map *m)
{
    struct {
        uint64_t start, end, offset;
        const void *bin;
    } key = {m->start, m->end, m->offset, m->bin};
    bool fresh;
    long i = hmap__put(ap->map_index, &key, sizeof(key), &fresh);

    if (i < 0)
        return AGG_NO_MAP;
    if (!fresh)
        return *hmap__val(ap->map_index, i);
    if (ap->nmaps == ap->cap_maps) {
        size_t cap = ap->cap_maps ? ap->cap_maps * 2 : 16;
        struct agg_map *nm =
            arena__grow(w->arena, ap->maps, ap->cap_maps * sizeof(*nm), cap * sizeof(*nm));
        if (!nm)
            goto fail;
        ap->maps = nm;
        ap->cap_maps = cap;
    }
    char *name = arena__strdup(w->arena, m->name ? m->name : "");
    if (!name)
        goto fail;
    ap->maps[ap->nmaps] = (struct agg_map){m->start, m->end, m->offset, binary__get(m->bin), name};
    *hmap__val(ap->map_index, i) = ap->nmaps;
    return ap->nmaps++;
fail:
    *hmap__val(ap->map_index, i) = AGG_NO_MAP;
    return AGG_NO_MAP;
}

/* The index of obj in ap->objs, taking over the caller's reference (which
 * is dropped when obj is there already). AGG_NO_MAP when out of memory. */
static uint32_t obj_id(struct agg_window *w, struct agg_proc *ap, struct rt_obj *obj)
{
    bool fresh;
    long i = hmap__put(ap->obj_index, &obj, sizeof(obj), &fresh);

    if (i < 0)
        goto fail;
    if (!fresh) {
        rt_obj__put(obj);
        return *hmap__val(ap->obj_index, i);
    }
    if (ap->nobjs == ap->cap_objs) {
        size_t cap = ap->cap_objs ? ap->cap_objs * 2 : 64;
        struct rt_obj **no =
            arena__grow(w->arena, ap->objs, ap->cap_objs * sizeof(*no), cap * sizeof(*no));
        if (!no) {
            /* The index entry stays: the object would be found, not held. */
            *hmap__val(ap->obj_index, i) = AGG_NO_MAP;
            goto fail;
        }
        ap->objs = no;
        ap->cap_objs = cap;
    }
    ap->objs[ap->nobjs] = obj;
    *hmap__val(ap->obj_index, i) = ap->nobjs;
    return ap->nobjs++;
fail:
    rt_obj__put(obj);
    return AGG_NO_MAP;
}

/* A frame of a runtime's kind into *a, through the hook. Returns false when
 * the frame is to be left out (no runtime knows the kind). */
static bool runtime_frame(struct agg_window *w, struct agg_proc *ap, const struct proc *p,
                          const struct cx_frame *f, const struct agg_frame_hook *hook,
                          struct agg_frame *a)
{
    struct rt_frame_out out = {0};

    if (!hook || hook->frame(hook->ctx, p, f, &out))
        return false;
    a->addr = out.addr;
    a->flags = out.flags;
    /* An object that could not be held leaves the frame unnamed, in place. */
    a->map = out.obj ? obj_id(w, ap, out.obj) : AGG_NO_MAP;
    return true;
}

/* A stack key as big as any. */
struct agg_key {
    struct agg_stack h;
    struct agg_frame f[CX_MAX_FRAMES + 1];
};

/* Fills key with s's thread and frames, from key->f[at] on (the frames
 * before are the caller's). Returns the frames in the key. */
static unsigned make_key(struct agg_window *w, struct procs *ps, struct proc *p,
                         struct agg_proc *ap, const struct cx_sample *s, uint64_t now_ns,
                         const struct agg_frame_hook *hook, struct agg_key *key, unsigned at)
{
    unsigned nk = s->n_kernel, nu = s->n_user, n = at;

    if (nk > CX_MAX_KERNEL_FRAMES)
        nk = CX_MAX_KERNEL_FRAMES;
    if (nk + nu > CX_MAX_FRAMES)
        nu = CX_MAX_FRAMES - nk;
    memset(&key->h, 0, sizeof(key->h)); /* padding is part of the key */
    key->h.tid = s->hdr.tid;
    memcpy(key->h.thread, s->comm, CX_COMM_LEN);
    key->h.thread[CX_COMM_LEN - 1] = '\0';
    for (unsigned j = 0; j < nk + nu; j++) {
        const struct cx_frame *f = &s->frames[j];
        struct agg_frame *a = &key->f[n];
        /* The leaves, and a pc a signal frame gave, are exact; every other
         * address is a return address. */
        bool leaf = j == 0 || j == nk || (f->kind == CX_FRAME_NATIVE && (f->aux & CX_AUX_EXACT_PC));

        if (j < nk && !w->kernel_stacks)
            continue;
        memset(a, 0, sizeof(*a));
        a->addr = f->addr;
        a->kind = f->kind;
        a->map = AGG_NO_MAP;
        if (f->kind != CX_FRAME_NATIVE && f->kind != CX_FRAME_KERNEL &&
            f->kind != CX_FRAME_TRUNCATED) {
            if (f->kind != CX_FRAME_OFFCPU && runtime_frame(w, ap, p, f, hook, a))
                n++;
            continue;
        }
        if (f->kind == CX_FRAME_TRUNCATED) {
            a->flags = f->aux & 0xff;
            a->addr = 0; /* where it stopped varies; the reason is what counts */
        } else {
            a->flags = leaf ? 0 : AGG_F_RETURN;
        }
        if (f->kind == CX_FRAME_NATIVE) {
            /* A return address belongs to the call before it. */
            const struct proc_map *m = procs__find_map(ps, p, f->addr - !leaf, leaf, now_ns);
            if (m) {
                unsigned slot = ((uintptr_t)m >> 5) & 15;
                if (ap->mcache[slot].m == m && ap->mcache[slot].gen == p->maps_read_ns) {
                    a->map = ap->mcache[slot].id;
                } else {
                    a->map = map_id(w, ap, m);
                    ap->mcache[slot].m = m;
                    ap->mcache[slot].gen = p->maps_read_ns;
                    ap->mcache[slot].id = a->map;
                }
            } else if (!leaf) {
                /* A return address in no executable mapping: the frame
                 * pointer walk went through code without frame pointers and
                 * read junk. Everything from here up is junk too. */
                a->kind = CX_FRAME_TRUNCATED;
                a->flags = AGG_TRUNC_NO_MAPPING;
                a->addr = 0;
                n++;
                break;
            }
        }
        n++;
    }
    key->h.nframes = n;
    return n;
}

int agg_window__add(struct agg_window *w, struct procs *ps, struct proc *p,
                    const struct cx_sample *s, uint64_t now_ns, const struct agg_frame_hook *hook)
{
    struct agg_key key;
    struct agg_proc *ap = agg_window__proc(w, p);
    unsigned n;
    long i;

    if (!ap) {
        w->dropped_oom++;
        return -ENOMEM;
    }
    n = make_key(w, ps, p, ap, s, now_ns, hook, &key, 0);
    i = hmap__put(ap->stacks, &key, sizeof(key.h) + n * sizeof(key.f[0]), NULL);
    if (i < 0) {
        w->dropped_oom++;
        return -ENOMEM;
    }
    (*hmap__val(ap->stacks, i))++;
    ap->samples++;
    w->samples++;
    return 0;
}

int agg_window__add_off(struct agg_window *w, struct procs *ps, struct proc *p,
                        const struct cx_sample *s, uint64_t ns, uint64_t blocks, uint64_t now_ns,
                        const struct agg_frame_hook *hook)
{
    struct agg_key key;
    struct agg_proc *ap = agg_window__proc(w, p);
    unsigned n;
    long i;

    if (!ap || (!ap->off_stacks && !(ap->off_stacks = hmap__new_in(ap->stack_arena, 16)))) {
        w->off_unknown_ns += ns;
        return -ENOMEM;
    }
    n = make_key(w, ps, p, ap, s, now_ns, hook, &key, 1);
    memset(&key.f[0], 0, sizeof(key.f[0]));
    key.f[0].kind = CX_FRAME_OFFCPU;
    key.f[0].map = AGG_NO_MAP;
    key.f[0].addr = s->off_class < CX_OFF__COUNT ? s->off_class : CX_OFF_OTHER;
    i = hmap__put(ap->off_stacks, &key, sizeof(key.h) + n * sizeof(key.f[0]), NULL);
    if (i < 0) {
        w->off_unknown_ns += ns;
        return -ENOMEM;
    }
    *hmap__val(ap->off_stacks, i) += ns;
    ap->off_ns += ns;
    w->off_ns += ns;
    w->off_blocks += blocks;
    return 0;
}

void agg_window__add_lost(struct agg_window *w, struct proc *p, uint64_t lost)
{
    struct agg_proc *ap = agg_window__proc(w, p);

    w->lost += lost;
    if (ap)
        ap->lost += lost;
}

void agg_window__off_str(const struct agg_window *w, char *out, size_t len)
{
    const uint64_t *d = w->stats_delta;

    snprintf(
        out, len,
        "off_cpu_s=%.3f off_cpu_unknown_s=%.3f blocks=%llu walked=%llu counted=%llu "
        "short=%llu over_budget=%llu sums_full=%llu start_full=%llu lost_stacks=%llu stale=%llu",
        w->off_ns / 1e9, w->off_unknown_ns / 1e9, (unsigned long long)d[CX_STAT_OFF_BLOCKS],
        (unsigned long long)d[CX_STAT_OFF_WALKS], (unsigned long long)d[CX_STAT_OFF_COUNTED],
        (unsigned long long)d[CX_STAT_OFF_SHORT], (unsigned long long)d[CX_STAT_OFF_OVER_BUDGET],
        (unsigned long long)d[CX_STAT_OFF_SUMS_FULL], (unsigned long long)d[CX_STAT_OFF_START_FULL],
        (unsigned long long)d[CX_STAT_OFF_LOST_RINGBUF], (unsigned long long)d[CX_STAT_OFF_STALE]);
}

/* The CPython runtime (runtime.h).
 *
 * Tracker (main thread): finds the interpreter in each process's mappings
 * (py_detect.h, once per binary), puts what the BPF walk needs in the
 * "py_procs" map (python.h), and turns each Python frame of a sample into
 * the code object it ran (py_code.h), read from the process's memory on
 * first sight and cached per process by address and fingerprint. Code
 * objects are shared between processes when their contents are equal (the
 * workers a server forks run the same code), and their memory is capped
 * (PY_CODES_MAX_BYTES).
 *
 * Namer (worker): a Python frame becomes a location with the function's
 * qualified name, its file, the line being run and the function's first
 * line.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proc_mem.h"
#include "../../../common/clock.h"
#include "../../../common/log.h"
#include "../../aggregate.h"
#include "../../procs/procs.h"
#include "../runtime.h"
#include "py_code.h"
#include "py_detect.h"

#define NBUCKETS 1024
/* Code objects cached per process; past it the process's cache starts over. */
#define PY_PROC_MAX_CODES 32768
/* Memory for code objects, every process together. Past it no new one is
 * read (its frames say so) until windows that held some are done. */
#define PY_CODES_MAX_BYTES (64u << 20)

/* agg_frame.flags of a Python frame without a code object: why. */
enum py_unnamed {
    PYU_UNREADABLE = 1,
    PYU_NOT_CODE = 2,
    PYU_CHANGED = 3,
    PYU_FULL = 4,
    PYU_NO_PROC = 5,
};

/* What was found in one binary. */
struct py_bin {
    struct binary *bin; /* a reference */
    int found;          /* py_detect__elf's answer */
    struct py_binary info;
    struct py_bin *next;
};

struct code_entry {
    uint64_t addr;
    uint16_t tag;
    uint8_t why;       /* enum py_unnamed when c is NULL */
    struct py_code *c; /* a reference, or NULL: could not be read */
    struct code_entry *next;
};

struct py_proc {
    uint32_t tgid;
    const struct py_bin *pb;
    uint64_t code_type; /* PyCode_Type in the process, 0 when unknown */
    bool in_bpf;
    /* Its exit event came: out of BPF, its codes kept to name the window
     * that holds its last samples, until proc_gone. */
    bool exited;
    struct code_entry **codes; /* NBUCKETS chains, made on first use */
    unsigned ncodes;
    struct py_proc *next;
};

struct interned {
    struct py_code *c; /* a reference */
    struct interned *next;
};

struct py_tracker {
    int procs_fd; /* py_procs, -1 without BPF (tests) */
    struct py_bin *bins[NBUCKETS];
    struct py_proc *procs[NBUCKETS];
    struct py_proc *last; /* the last one a frame was looked up in */
    struct interned *codes[NBUCKETS * 4];
    uint64_t code_bytes;
    bool full_logged;
    uint64_t reads, read_failures, read_ns, cleared;
};

/* --- binaries --- */

static unsigned ptr_bucket(const void *p)
{
    return (unsigned)(((uintptr_t)p >> 4) * 0x9E3779B1u) % NBUCKETS;
}

/* What b is, looked at on first sight and logged once. */
static const struct py_bin *bin_get(struct py_tracker *t, struct binary *b)
{
    struct py_bin **pp = &t->bins[ptr_bucket(b)], *pb;

    for (pb = *pp; pb; pb = pb->next) {
        if (pb->bin == b)
            return pb;
    }
    pb = calloc(1, sizeof(*pb));
    if (!pb)
        return NULL;
    pb->bin = binary__get(b);
    pb->found = b->fd >= 0 ? py_detect__elf(b->fd, b->path, &pb->info) : 0;
    pb->next = *pp;
    *pp = pb;
    if (pb->found == 1 && pb->info.usable)
        log_info("python: %s: CPython %u.%u, its frames are walked (layout: %s)%s", b->path,
                 pb->info.version >> 8, pb->info.version & 0xff, pb->info.layout_from,
                 pb->info.cold_from_jumps ? " (the evaluation function's cold part found by "
                                            "its jumps: the binary has no .symtab)"
                                          : "");
    else if (pb->found == 1)
        log_warn("python: %s: %s; Python frames of its processes are not shown, their native "
                 "frames are",
                 b->path, pb->info.why);
    return pb;
}

/* --- processes --- */

static struct py_proc **proc_slot(struct py_tracker *t, uint32_t tgid)
{
    struct py_proc **pp = &t->procs[tgid % NBUCKETS];

    while (*pp && (*pp)->tgid != tgid)
        pp = &(*pp)->next;
    return pp;
}

static void codes_clear(struct py_proc *pp)
{
    for (unsigned b = 0; pp->codes && b < NBUCKETS; b++) {
        struct code_entry *e, *en;
        for (e = pp->codes[b]; e; e = en) {
            en = e->next;
            rt_obj__put(e->c ? &e->c->obj : NULL);
            free(e);
        }
        pp->codes[b] = NULL;
    }
    pp->ncodes = 0;
}

static void proc_drop(struct py_tracker *t, uint32_t tgid)
{
    struct py_proc **slot = proc_slot(t, tgid), *pp = *slot;

    if (!pp)
        return;
    rt_bpf__forget(t->procs_fd, tgid, &pp->in_bpf);
    *slot = pp->next;
    if (t->last == pp)
        t->last = NULL;
    codes_clear(pp);
    free(pp->codes);
    free(pp);
}

/* The arenas of perf trampolines (-X perf): anonymous executable mappings
 * that start with a copy of the interpreter's trampoline. */
static void find_trampolines(const struct proc *p, const struct py_bin *pb, struct cx_py_proc *v)
{
    struct py_reader r = {proc_mem__read, (void *)(intptr_t)p->tgid};
    uint8_t code[sizeof(pb->info.tramp_code)];

    if (!pb->info.tramp_len)
        return;
    for (size_t i = 0; i < p->maps.n && v->n_tramp < CX_PY_MAX_TRAMP; i++) {
        const struct proc_map *m = &p->map[i];
        if (m->bin || (m->name && m->name[0] && strncmp(m->name, "[anon", 5) != 0))
            continue;
        if (r.read(r.ctx, m->start, code, pb->info.tramp_len) ||
            memcmp(code, pb->info.tramp_code, pb->info.tramp_len) != 0)
            continue;
        v->tramp_start[v->n_tramp] = m->start;
        v->tramp_end[v->n_tramp] = m->end;
        v->n_tramp++;
    }
    v->tramp_cfa = pb->info.tramp_cfa;
}

static void proc_set(struct py_tracker *t, const struct proc *p, const struct py_bin *pb,
                     uint64_t bias)
{
    struct py_proc **slot = proc_slot(t, p->tgid), *pp = *slot;
    struct cx_py_proc v;
    char why[160];

    if (pp && (pp->pb != pb || pp->exited))
        codes_clear(pp); /* exec'd into another interpreter, or its pid reused */
    if (!pp) {
        pp = calloc(1, sizeof(*pp));
        if (!pp)
            return;
        pp->tgid = p->tgid;
        *slot = pp;
    }
    pp->pb = pb;
    pp->exited = false;
    pp->code_type = pb->info.code_type ? pb->info.code_type + bias : 0;
    memset(&v, 0, sizeof(v));
    v.runtime = pb->info.runtime + bias;
    v.n_eval = pb->info.n_eval;
    v.version = pb->info.version;
    for (unsigned i = 0; i < pb->info.n_eval && i < CX_PY_MAX_EVAL; i++) {
        v.eval_start[i] = pb->info.eval_start[i] + bias;
        v.eval_end[i] = pb->info.eval_end[i] + bias;
    }
    if (py_layout__to_bpf(&pb->info.layout, &v.off, why, sizeof(why)))
        return; /* py_detect__elf checked it already */
    find_trampolines(p, pb, &v);
    __u32 key = p->tgid;
    if (t->procs_fd < 0)
        return;
    if (bpf_map_update_elem(t->procs_fd, &key, &v, BPF_ANY)) {
        log_warn("python: pid=%u: cannot add it to py_procs: %s", p->tgid, strerror(errno));
        return;
    }
    if (!pp->in_bpf)
        log_debug("python: pid=%u exe=%s: CPython %u.%u at %s", p->tgid, p->exe,
                  pb->info.version >> 8, pb->info.version & 0xff, pb->bin->path);
    pp->in_bpf = true;
}

static void py_proc_maps(void *tp, const struct proc *p, uint64_t now_ns)
{
    struct py_tracker *t = tp;

    (void)now_ns;
    for (size_t i = 0; i < p->maps.n; i++) {
        const struct proc_map *m = &p->map[i];
        const struct py_bin *pb;
        uint64_t bias;
        if (!m->bin || !(pb = bin_get(t, m->bin)) || pb->found != 1 || !pb->info.usable ||
            !binary__map_bias(pb->info.segs, pb->info.nsegs, m->start, m->offset, &bias))
            continue;
        proc_set(t, p, pb, bias);
        return;
    }
    /* No interpreter (any more: exec'd into another program). */
    proc_drop(t, p->tgid);
}

static void py_proc_exited(void *tp, uint32_t tgid, uint64_t now_ns)
{
    struct py_tracker *t = tp;
    struct py_proc *pp = *proc_slot(t, tgid);

    (void)now_ns;
    if (!pp)
        return;
    rt_bpf__forget(t->procs_fd, tgid, &pp->in_bpf);
    pp->exited = true;
}

static void py_proc_gone(void *tp, uint32_t tgid, uint64_t now_ns)
{
    (void)now_ns;
    proc_drop(tp, tgid);
}

/* --- code objects --- */

static bool same_code(const struct py_code *a, const struct py_code *b)
{
    return a->hash == b->hash && a->version == b->version && a->firstlineno == b->firstlineno &&
           a->nlines == b->nlines && strcmp(a->qualname, b->qualname) == 0 &&
           strcmp(a->name, b->name) == 0 && strcmp(a->filename, b->filename) == 0 &&
           (!a->nlines || memcmp(a->lines, b->lines, a->nlines) == 0);
}

/* The shared copy of c: an equal one already held (c is put), or c, now
 * held too. Returns a reference the caller owns. */
static struct py_code *intern(struct py_tracker *t, struct py_code *c)
{
    unsigned b = (unsigned)(c->hash % (NBUCKETS * 4));
    struct interned *in;

    for (in = t->codes[b]; in; in = in->next) {
        if (same_code(in->c, c)) {
            rt_obj__put(&c->obj);
            return (struct py_code *)rt_obj__get(&in->c->obj);
        }
    }
    in = malloc(sizeof(*in));
    if (!in)
        return c; /* held by the caller alone: still right, just not shared */
    in->c = (struct py_code *)rt_obj__get(&c->obj);
    in->next = t->codes[b];
    t->codes[b] = in;
    t->code_bytes += c->bytes + sizeof(*in);
    return c;
}

static struct code_entry **entry_slot(struct py_proc *pp, uint64_t addr)
{
    struct code_entry **ep = &pp->codes[(addr >> 4) % NBUCKETS];

    while (*ep && (*ep)->addr != addr)
        ep = &(*ep)->next;
    return ep;
}

/* The code object at addr in process pp with fingerprint tag: cached, or
 * read now. Returns a new reference, or NULL with *why. */
static struct py_code *code_get(struct py_tracker *t, struct py_proc *pp, uint64_t addr,
                                uint16_t tag, uint8_t *why)
{
    struct code_entry **ep, *e;
    const char *reason = NULL;

    if (!pp->codes && !(pp->codes = calloc(NBUCKETS, sizeof(*pp->codes)))) {
        *why = PYU_FULL;
        return NULL;
    }
    ep = entry_slot(pp, addr);
    e = *ep;
    if (e && (e->tag == tag || !tag)) {
        *why = e->why;
        return e->c ? (struct py_code *)rt_obj__get(&e->c->obj) : NULL;
    }
    if (t->code_bytes >= PY_CODES_MAX_BYTES) {
        if (!t->full_logged)
            log_warn("python: code objects hold %u MiB, the cap: frames of code objects not seen "
                     "before show as [python: name cache full] until windows free some",
                     PY_CODES_MAX_BYTES >> 20);
        t->full_logged = true;
        *why = PYU_FULL;
        return NULL;
    }
    if (!e) {
        if (pp->ncodes >= PY_PROC_MAX_CODES) {
            codes_clear(pp);
            t->cleared++;
            ep = entry_slot(pp, addr);
        }
        e = calloc(1, sizeof(*e));
        if (!e) {
            *why = PYU_FULL;
            return NULL;
        }
        e->addr = addr;
        *ep = e;
        pp->ncodes++;
    }
    struct py_reader r = {proc_mem__read, (void *)(intptr_t)pp->tgid};
    uint64_t t0 = clock__thread_ns();
    struct py_code *c =
        py_code__read(&r, &pp->pb->info.layout, pp->code_type, addr, tag, true, &reason);
    t->read_ns += clock__thread_ns() - t0;
    t->reads++;
    rt_obj__put(e->c ? &e->c->obj : NULL);
    e->tag = tag;
    e->c = NULL;
    if (!c) {
        t->read_failures++;
        e->why = strcmp(reason, "not a code object") == 0                      ? PYU_NOT_CODE
                 : strcmp(reason, "code object changed since the sample") == 0 ? PYU_CHANGED
                                                                               : PYU_UNREADABLE;
        *why = e->why;
        return NULL;
    }
    /* The fingerprint of this process's object: an equal one interned from
     * another process was fingerprinted from that process's pointers. */
    e->tag = c->tag;
    e->c = intern(t, c);
    e->why = 0;
    return (struct py_code *)rt_obj__get(&e->c->obj);
}

static int py_frame(void *tp, const struct proc *p, const struct cx_frame *f,
                    struct rt_frame_out *out)
{
    struct py_tracker *t = tp;
    struct py_proc *pp = t->last;
    uint8_t why = 0;

    if (f->kind == CX_FRAME_PYTHON_ERR) {
        out->flags = f->aux & 0xff;
        return 0;
    }
    if (!pp || pp->tgid != p->tgid)
        pp = t->last = *proc_slot(t, p->tgid);
    if (!pp || !pp->pb) {
        out->flags = PYU_NO_PROC;
        return 0;
    }
    /* Offsets in bytes: 3.10's f_lasti counts 2-byte code units; -1 (not
     * started yet) stays UINT32_MAX. */
    out->addr = f->aux;
    if (f->aux != UINT32_MAX && pp->pb->info.version == 0x030a)
        out->addr = (uint64_t)f->aux * 2;
    struct py_code *c = code_get(t, pp, f->addr, f->tag, &why);
    if (!c) {
        out->flags = why ? why : PYU_UNREADABLE;
        return 0;
    }
    out->obj = &c->obj;
    return 0;
}

/* Frees code objects no process and no window holds any more. */
static void py_tracker_sweep(void *tp, uint64_t now_ns)
{
    struct py_tracker *t = tp;
    uint64_t held = 0;
    unsigned n = 0;

    (void)now_ns;
    for (unsigned b = 0; b < NBUCKETS * 4; b++) {
        struct interned **pp = &t->codes[b], *in;
        while ((in = *pp)) {
            /* Only this table holds it, and only this thread hands out
             * references from here: nobody can take one meanwhile. */
            if (__atomic_load_n(&in->c->obj.refs, __ATOMIC_ACQUIRE) == 1) {
                *pp = in->next;
                t->code_bytes -= in->c->bytes + sizeof(*in);
                rt_obj__put(&in->c->obj);
                free(in);
            } else {
                held += in->c->bytes;
                n++;
                pp = &in->next;
            }
        }
    }
    if (t->code_bytes < PY_CODES_MAX_BYTES / 2)
        t->full_logged = false;
    log_debug("python: code_objects=%u code_bytes=%llu reads=%llu read_failures=%llu read_ms=%llu "
              "caches_cleared=%llu",
              n, (unsigned long long)held, (unsigned long long)t->reads,
              (unsigned long long)t->read_failures, (unsigned long long)(t->read_ns / 1000000),
              (unsigned long long)t->cleared);
}

static void *py_tracker_new(const struct rt_env *env, char *err, size_t errlen)
{
    struct py_tracker *t = calloc(1, sizeof(*t));

    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->procs_fd = env->map_fd ? env->map_fd(env->sampler, "py_procs") : -1;
    if (env->map_fd && t->procs_fd < 0) {
        snprintf(err, errlen, "the BPF programs have no py_procs map");
        free(t);
        return NULL;
    }
    return t;
}

static void py_tracker_free(void *tp)
{
    struct py_tracker *t = tp;

    for (unsigned b = 0; b < NBUCKETS; b++) {
        while (t->procs[b])
            proc_drop(t, t->procs[b]->tgid);
        struct py_bin *pb, *pn;
        for (pb = t->bins[b]; pb; pb = pn) {
            pn = pb->next;
            binary__put(pb->bin);
            free(pb);
        }
    }
    for (unsigned b = 0; b < NBUCKETS * 4; b++) {
        struct interned *in, *nx;
        for (in = t->codes[b]; in; in = nx) {
            nx = in->next;
            rt_obj__put(&in->c->obj);
            free(in);
        }
    }
    free(t);
}

/* --- the namer --- */

static const char *unnamed_label(unsigned why)
{
    switch (why) {
    case CX_PY_ERR_NO_THREAD:
        return "[python: thread state not found]";
    case CX_PY_ERR_READ:
        return "[python: frame unreadable]";
    default:
        return "[python]";
    }
}

static const char *no_code_label(unsigned why)
{
    switch (why) {
    case PYU_NOT_CODE: /* its memory holds another object now */
    case PYU_CHANGED:
        return "[python: code object freed before it was read]";
    case PYU_FULL:
        return "[python: name cache full]";
    case PYU_NO_PROC:
        return "[python: interpreter not known]";
    default:
        return "[python: code object unreadable]";
    }
}

static void *py_namer_new(const char *proc_root)
{
    static int token;

    (void)proc_root;
    return &token; /* stateless: each frame carries what names it */
}

static void py_namer_free(void *n)
{
    (void)n;
}

static uint64_t py_name(void *n, struct rt_name_ctx *c, const struct agg_frame *f,
                        const struct rt_obj *obj, uint64_t map_id, unsigned *how)
{
    struct pprof_line l = {0};

    (void)n;
    (void)map_id;
    if (f->kind == CX_FRAME_PYTHON && obj) {
        const struct py_code *code = (const struct py_code *)obj;
        l.function = code->qualname;
        /* Not the name again: pprof takes a function whose system name is
         * its name for an undemangled one and "simplifies" it, and
         * "<module>" or "<lambda>" look like C++ templates to it. */
        l.system_name = "";
        l.file = code->filename;
        l.line = py_code__line(code, (uint32_t)f->addr);
        l.start_line = code->firstlineno;
        *how = RT_COUNTED;
    } else {
        l.function = f->kind == CX_FRAME_PYTHON ? no_code_label(f->flags) : unnamed_label(f->flags);
        *how = RT_UNNAMED;
    }
    uint64_t id = pprof_writer__location(c->w, 0, 0, &l, 1);
    return id ? id : UINT64_MAX;
}

const struct runtime_ops rt_python_ops = {
    .name = "python",
    .kinds = {CX_FRAME_PYTHON, CX_FRAME_PYTHON_ERR},
    .stat_name = "python_frames",
    .tracker_new = py_tracker_new,
    .tracker_free = py_tracker_free,
    .proc_maps = py_proc_maps,
    .proc_exited = py_proc_exited,
    .proc_gone = py_proc_gone,
    .frame = py_frame,
    .tracker_sweep = py_tracker_sweep,
    .namer_new = py_namer_new,
    .namer_free = py_namer_free,
    .name_frame = py_name,
};

/* The HotSpot runtime (runtime.h): Java frames of a JVM started with no
 * flag, walked in BPF (hotspot.h) and named from the JVM's metadata.
 *
 * Tracker (main thread): finds libjvm.so in each process's mappings, reads
 * the JVM's VMStructs (hs_vm.h) once its code cache exists, and puts what
 * the walk needs in the "hs_procs" map. A JVM the walk does not know is
 * logged once and left to the perf-map path (jit/). Each Java frame of a
 * sample is named on first sight (hs_name.h), cached per process by its
 * Method* or CodeBlob.
 *
 * Namer (worker): a Java frame becomes a location with the class and
 * method name and the source file.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proc_mem.h"
#include "../../../common/log.h"
#include "../../aggregate.h"
#include "../../procs/procs.h"
#include "../runtime.h"
#include "hs_name.h"
#include "hs_vm.h"

#define NBUCKETS 256
#define NAME_BUCKETS 1024
/* Names cached per process; past it the process's cache starts over. */
#define HS_PROC_MAX_NAMES 65536
/* Memory for names, every process together: past it a process's cache
 * starts over, and while still past it no name is read (the frame says
 * so) until caches are cleared. */
#define HS_NAMES_MAX_BYTES (64u << 20)
/* A JVM whose code cache is not made yet is looked at again this often
 * (each look: ~10 reads of its memory), for HS_RETRY_FAST_NS after it was
 * found, then every HS_RETRY_SLOW_NS (a JVM in an embedding program that
 * creates it late). */
#define HS_RETRY_NS (50ull * 1000 * 1000)
#define HS_RETRY_FAST_NS (30ull * 1000 * 1000 * 1000)
#define HS_RETRY_SLOW_NS (5ull * 1000 * 1000 * 1000)

/* agg_frame.flags of a Java frame without a name: why. */
enum hs_unnamed {
    HSU_UNREADABLE = 1,
    HSU_NO_PROC = 2,
    HSU_FULL = 3,
};

struct hs_bin {
    struct binary *bin; /* a reference */
    int found;          /* hs_vm__syms's answer */
    struct hs_syms syms;
    struct hs_bin *next;
};

struct name_entry {
    uint64_t addr;
    uint32_t aux;
    uint16_t tag;
    struct hs_name *n; /* a reference, or NULL: could not be read */
    struct name_entry *next;
};

enum hs_state { HS_PENDING, HS_READY, HS_REFUSED };

struct hs_proc {
    uint32_t tgid;
    enum hs_state state;
    const struct hs_bin *hb;
    uint64_t bias;
    uint64_t found_ns, tried_ns;
    bool in_bpf;
    struct hs_vm vm;
    struct name_entry **names; /* NAME_BUCKETS chains, made on first use */
    unsigned nnames;
    size_t name_bytes;             /* names and the cache's entries */
    struct hs_name_cache *methods; /* made on first use */
    size_t methods_bytes;          /* its part of name_bytes */
    struct hs_proc *next;
};

struct hs_tracker {
    const char *proc_root;
    int procs_fd; /* hs_procs, -1 without BPF (tests) */
    struct hs_bin *bins[NBUCKETS];
    struct hs_proc *procs[NBUCKETS];
    unsigned pending;  /* processes in HS_PENDING */
    size_t name_bytes; /* of every process's cache */
    uint64_t reads, read_failures;
};

static unsigned ptr_bucket(const void *p)
{
    return (unsigned)(((uintptr_t)p >> 4) * 0x9E3779B1u) % NBUCKETS;
}

static bool is_libjvm(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;

    return slash && strcmp(slash + 1, "libjvm.so") == 0;
}

static const struct hs_bin *bin_get(struct hs_tracker *t, struct binary *b)
{
    struct hs_bin **pp = &t->bins[ptr_bucket(b)], *hb;

    for (hb = *pp; hb; hb = hb->next) {
        if (hb->bin == b)
            return hb;
    }
    hb = calloc(1, sizeof(*hb));
    if (!hb)
        return NULL;
    hb->bin = binary__get(b);
    hb->found = hs_vm__syms(b->fd, &hb->syms);
    hb->next = *pp;
    *pp = hb;
    if (hb->found != 1)
        log_warn("hotspot: %s: no VMStructs symbols (gHotSpotVMStructs...: not HotSpot, or "
                 "stripped of them): its JVMs' Java frames are named only from perf maps; fix "
                 "for HotSpot: start them with -XX:+PreserveFramePointer",
                 b->path);
    return hb;
}

static struct hs_proc **proc_slot(struct hs_tracker *t, uint32_t tgid)
{
    struct hs_proc **pp = &t->procs[tgid % NBUCKETS];

    while (*pp && (*pp)->tgid != tgid)
        pp = &(*pp)->next;
    return pp;
}

static void names_clear(struct hs_tracker *t, struct hs_proc *hp)
{
    for (unsigned b = 0; hp->names && b < NAME_BUCKETS; b++) {
        struct name_entry *e, *en;
        for (e = hp->names[b]; e; e = en) {
            en = e->next;
            rt_obj__put(e->n ? &e->n->obj : NULL);
            free(e);
        }
        hp->names[b] = NULL;
    }
    hs_name_cache__free(hp->methods);
    hp->methods = NULL;
    hp->methods_bytes = 0;
    hp->nnames = 0;
    t->name_bytes -= hp->name_bytes;
    hp->name_bytes = 0;
}

static void proc_drop(struct hs_tracker *t, uint32_t tgid)
{
    struct hs_proc **slot = proc_slot(t, tgid), *hp = *slot;

    if (!hp)
        return;
    rt_bpf__forget(t->procs_fd, tgid, &hp->in_bpf);
    *slot = hp->next;
    if (hp->state == HS_PENDING)
        t->pending--;
    names_clear(t, hp);
    free(hp->names);
    free(hp);
}

/* Whether process tgid's environment holds CODEXRAY_JAVA_WALK=off: its
 * Java frames are left to the perf-map path (runtimes/jit/). The first
 * ENVIRON_MAX bytes are looked at. */
#define ENVIRON_MAX (256u << 10)
static bool walk_off(const char *proc_root, uint32_t tgid)
{
    static const char want[] = "CODEXRAY_JAVA_WALK=off";
    char path[256];
    size_t len = 0;
    bool off = false;
    char *buf;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%u/environ", proc_root, tgid);
    if (!(f = fopen(path, "re")))
        return false;
    buf = malloc(ENVIRON_MAX);
    if (buf)
        len = fread(buf, 1, ENVIRON_MAX, f);
    fclose(f);
    for (size_t i = 0; buf && i < len;) {
        const char *e = buf + i, *nul = memchr(e, '\0', len - i);
        size_t el = nul ? (size_t)(nul - e) : len - i;
        if (el == sizeof(want) - 1 && memcmp(e, want, el) == 0) {
            off = true;
            break;
        }
        i += el + 1;
    }
    free(buf);
    return off;
}

/* Reads the JVM's description when it has none yet; puts it in hs_procs. */
static void proc_try(struct hs_tracker *t, struct hs_proc *hp, uint64_t now_ns)
{
    struct hs_mem m = {proc_mem__read, (void *)(intptr_t)hp->tgid};
    char why[200] = "";
    __u32 key = hp->tgid;
    int r;
    uint64_t every = now_ns - hp->found_ns < HS_RETRY_FAST_NS ? HS_RETRY_NS : HS_RETRY_SLOW_NS;

    if (hp->state != HS_PENDING || (hp->tried_ns && now_ns - hp->tried_ns < every))
        return;
    hp->tried_ns = now_ns;
    r = hs_vm__read(&m, &hp->hb->syms, hp->bias, &hp->vm, why, sizeof(why));
    if (r == 0)
        return; /* no code cache yet */
    t->pending--;
    if (r < 0) {
        hp->state = HS_REFUSED;
        log_warn("hotspot: pid=%u: %s; its Java frames are not walked (only perf maps name "
                 "them); fix: start it with -XX:+PreserveFramePointer",
                 hp->tgid, why);
        return;
    }
#if !defined(__x86_64__)
    hp->state = HS_REFUSED;
    log_info("hotspot: pid=%u: HotSpot %s: the Java walk is x86_64's only; fix: start it with "
             "-XX:+PreserveFramePointer",
             hp->tgid, hp->vm.release);
    return;
#endif
    hp->state = HS_READY;
    if (t->procs_fd >= 0 && bpf_map_update_elem(t->procs_fd, &key, &hp->vm.bpf, BPF_ANY)) {
        log_warn("hotspot: pid=%u: cannot add it to hs_procs: %s", hp->tgid, strerror(errno));
        return;
    }
    hp->in_bpf = t->procs_fd >= 0;
    log_info("hotspot: pid=%u: HotSpot %s: Java frames walked and named from its VMStructs "
             "(%u code heaps, interpreter at 0x%llx)",
             hp->tgid, hp->vm.release, hp->vm.bpf.n_heaps,
             (unsigned long long)hp->vm.bpf.interp_start);
}

static void hs_proc_maps(void *tp, const struct proc *p, uint64_t now_ns)
{
    struct hs_tracker *t = tp;
    struct hs_proc **slot, *hp;

    for (size_t i = 0; i < p->maps.n; i++) {
        const struct proc_map *m = &p->map[i];
        const struct hs_bin *hb;
        struct binary_seg segs[8];
        unsigned nsegs;
        uint64_t bias;
        if (!m->bin || !is_libjvm(m->bin->path) || !(hb = bin_get(t, m->bin)) || hb->found != 1)
            continue;
        nsegs = binary__exec_segments(m->bin->fd, segs, 8);
        if (!binary__map_bias(segs, nsegs, m->start, m->offset, &bias))
            continue;
        slot = proc_slot(t, p->tgid);
        hp = *slot;
        if (hp && (hp->hb != hb || hp->bias != bias || hp->found_ns < p->seen_ns)) {
            proc_drop(t, p->tgid); /* exec'd since (BPF dropped its entry) */
            hp = NULL;
        }
        if (!hp) {
            hp = calloc(1, sizeof(*hp));
            if (!hp)
                return;
            hp->tgid = p->tgid;
            hp->hb = hb;
            hp->bias = bias;
            hp->found_ns = now_ns;
            *proc_slot(t, p->tgid) = hp;
            t->pending++;
            if (walk_off(t->proc_root, p->tgid)) {
                t->pending--;
                hp->state = HS_REFUSED;
                log_info("hotspot: pid=%u: CODEXRAY_JAVA_WALK=off in its environment: its Java "
                         "frames are named from perf maps only (start it with "
                         "-XX:+PreserveFramePointer for whole stacks)",
                         p->tgid);
            }
        }
        proc_try(t, hp, now_ns);
        return;
    }
    proc_drop(t, p->tgid);
}

/* Out of BPF at its exit; what names its frames stays until proc_gone (a
 * short-lived JVM's last waits are named at the window's end). One still
 * pending was never walked: nothing to keep. A pid reused meanwhile is
 * told apart by hs_proc_maps (found_ns before the new program's seen_ns). */
static void hs_proc_exited(void *tp, uint32_t tgid, uint64_t now_ns)
{
    struct hs_tracker *t = tp;
    struct hs_proc *hp = *proc_slot(t, tgid);

    (void)now_ns;
    if (!hp)
        return;
    if (hp->state == HS_PENDING) {
        proc_drop(t, tgid);
        return;
    }
    rt_bpf__forget(t->procs_fd, tgid, &hp->in_bpf);
}

static void hs_proc_gone(void *tp, uint32_t tgid, uint64_t now_ns)
{
    (void)now_ns;
    proc_drop(tp, tgid);
}

static int hs_frame(void *tp, const struct proc *p, const struct cx_frame *f,
                    struct rt_frame_out *out)
{
    struct hs_tracker *t = tp;
    struct hs_proc *hp = *proc_slot(t, p->tgid);
    struct name_entry *e;
    unsigned b;

    out->addr = f->addr;
    if (!hp || hp->state != HS_READY) {
        out->flags = HSU_NO_PROC;
        return 0;
    }
    if (!hp->names && !(hp->names = calloc(NAME_BUCKETS, sizeof(*hp->names))))
        return -ENOMEM;
    b = (unsigned)(((f->addr >> 3) ^ f->aux) * 0x9E3779B1u) % NAME_BUCKETS;
    for (e = hp->names[b]; e; e = e->next) {
        if (e->addr == f->addr && e->aux == f->aux && e->tag == f->tag)
            break;
    }
    if (!e) {
        struct hs_mem m = {proc_mem__read, (void *)(intptr_t)p->tgid};
        const char *why = NULL;
        if (hp->nnames >= HS_PROC_MAX_NAMES || t->name_bytes >= HS_NAMES_MAX_BYTES)
            names_clear(t, hp);
        if (t->name_bytes >= HS_NAMES_MAX_BYTES) {
            out->flags = HSU_FULL;
            return 0;
        }
        e = calloc(1, sizeof(*e));
        if (!e)
            return -ENOMEM;
        t->reads++;
        e->addr = f->addr;
        e->aux = f->aux;
        e->tag = f->tag;
        if (!hp->methods)
            hp->methods = hs_name_cache__new(); /* NULL: names read without */
        e->n = hs_name__read(&m, &hp->vm, hp->methods, f->addr, f->aux, f->tag, &why);
        if (!e->n && !why) {
            free(e);
            return -ENOMEM;
        }
        if (!e->n)
            t->read_failures++;
        e->next = hp->names[b];
        hp->names[b] = e;
        hp->nnames++;
        size_t mb = hs_name_cache__bytes(hp->methods);
        size_t bytes = sizeof(*e) + (e->n ? e->n->bytes : 0) + mb - hp->methods_bytes;
        hp->methods_bytes = mb;
        hp->name_bytes += bytes;
        t->name_bytes += bytes;
    }
    if (!e->n) {
        out->flags = HSU_UNREADABLE;
        return 0;
    }
    out->obj = rt_obj__get(&e->n->obj);
    return 0;
}

static void hs_tracker_sweep(void *tp, uint64_t now_ns)
{
    struct hs_tracker *t = tp;

    for (unsigned b = 0; b < NBUCKETS; b++) {
        for (struct hs_proc *hp = t->procs[b]; hp; hp = hp->next)
            proc_try(t, hp, now_ns);
    }
    log_debug("hotspot: names_read=%llu read_failures=%llu name_bytes=%zu",
              (unsigned long long)t->reads, (unsigned long long)t->read_failures, t->name_bytes);
}

static void hs_tracker_poll(void *tp, uint64_t now_ns)
{
    struct hs_tracker *t = tp;

    for (unsigned b = 0; t->pending && b < NBUCKETS; b++) {
        for (struct hs_proc *hp = t->procs[b]; hp; hp = hp->next)
            proc_try(t, hp, now_ns);
    }
}

static void *hs_tracker_new(const struct rt_env *env, char *err, size_t errlen)
{
    struct hs_tracker *t = calloc(1, sizeof(*t));

    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->proc_root = env->proc_root;
    t->procs_fd = env->map_fd ? env->map_fd(env->sampler, "hs_procs") : -1;
    if (env->map_fd && t->procs_fd < 0) {
        snprintf(err, errlen, "the BPF programs have no hs_procs map");
        free(t);
        return NULL;
    }
    return t;
}

static void hs_tracker_free(void *tp)
{
    struct hs_tracker *t = tp;

    for (unsigned b = 0; b < NBUCKETS; b++) {
        while (t->procs[b])
            proc_drop(t, t->procs[b]->tgid);
        struct hs_bin *hb, *hn;
        for (hb = t->bins[b]; hb; hb = hn) {
            hn = hb->next;
            binary__put(hb->bin);
            free(hb);
        }
    }
    free(t);
}

/* --- the namer --- */

static void *hs_namer_new(const char *proc_root)
{
    static int token;

    (void)proc_root;
    return &token; /* stateless: each frame carries its name */
}

static void hs_namer_free(void *n)
{
    (void)n;
}

static uint64_t hs_name(void *n, struct rt_name_ctx *c, const struct agg_frame *f,
                        const struct rt_obj *obj, uint64_t map_id, unsigned *how)
{
    struct pprof_line l = {0}, ls[HS_NAME_MAX_DEPTH];

    (void)n;
    (void)map_id;
    if (f->kind != CX_FRAME_JAVA)
        return 0;
    if (obj) {
        /* One location, the methods inlined at the pc innermost first, as
         * pprof puts a location's inlined lines. */
        const struct hs_name *hn = (const struct hs_name *)obj;
        for (unsigned i = 0; i < hn->n; i++) {
            memset(&ls[i], 0, sizeof(ls[i]));
            ls[i].function = hn->lines[i].function;
            ls[i].system_name = "";
            ls[i].file = hn->lines[i].file;
            ls[i].line = hn->lines[i].line;
        }
        *how = RT_COUNTED;
        uint64_t id = pprof_writer__location(c->w, 0, 0, ls, hn->n);
        return id ? id : UINT64_MAX;
    } else {
        l.function = f->flags == HSU_NO_PROC ? "[java: JVM not known]"
                     : f->flags == HSU_FULL  ? "[java: name cache full]"
                                             : "[java: unreadable]";
        *how = RT_UNNAMED;
    }
    uint64_t id = pprof_writer__location(c->w, 0, 0, &l, 1);
    return id ? id : UINT64_MAX;
}

const struct runtime_ops rt_hotspot_ops = {
    .name = "hotspot",
    .kinds = {CX_FRAME_JAVA},
    .stat_name = "java_frames",
    .tracker_new = hs_tracker_new,
    .tracker_free = hs_tracker_free,
    .proc_maps = hs_proc_maps,
    .proc_exited = hs_proc_exited,
    .proc_gone = hs_proc_gone,
    .frame = hs_frame,
    .tracker_sweep = hs_tracker_sweep,
    .tracker_poll = hs_tracker_poll,
    .namer_new = hs_namer_new,
    .namer_free = hs_namer_free,
    .name_frame = hs_name,
};

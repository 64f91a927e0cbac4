#include "profile.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/hmap.h"
#include "../common/interp_frames.h"
#include "../common/log.h"
#include "runtimes/runtimes.h"

#define KERNEL_START 0xffff800000000000ull

/* Sets w's sample types, period and time. 0 or -ENOMEM. */
static int writer_setup(struct pprof_writer *w, const struct profile_ctx *c, uint64_t start_ns,
                        uint64_t duration_ns)
{
    if (pprof_writer__add_sample_type(w, "samples", "count") ||
        pprof_writer__add_sample_type(w, "cpu", "nanoseconds") ||
        (c->off_cpu && pprof_writer__add_sample_type(w, "off_cpu", "nanoseconds")))
        return -ENOMEM;
    pprof_writer__set_period(w, "cpu", "nanoseconds", c->period_ns);
    pprof_writer__set_time(w, start_ns, duration_ns);
    return 0;
}

struct pprof_writer *profile__writer(const struct profile_ctx *c, uint64_t start_ns,
                                     uint64_t duration_ns)
{
    struct pprof_writer *w = pprof_writer__new();

    if (w && writer_setup(w, c, start_ns, duration_ns)) {
        pprof_writer__free(w);
        return NULL;
    }
    return w;
}

int profile__writer_reset(struct pprof_writer *w, const struct profile_ctx *c, uint64_t start_ns,
                          uint64_t duration_ns)
{
    pprof_writer__reset(w);
    return writer_setup(w, c, start_ns, duration_ns);
}

static const char *off_class_name(uint64_t class)
{
    static const char *const names[CX_OFF__COUNT] = {
        [CX_OFF_OTHER] = "[off-CPU: other]",   [CX_OFF_LOCK] = "[off-CPU: lock]",
        [CX_OFF_POLL] = "[off-CPU: poll]",     [CX_OFF_SLEEP] = "[off-CPU: sleep]",
        [CX_OFF_IO] = "[off-CPU: io]",         [CX_OFF_PIPE] = "[off-CPU: pipe]",
        [CX_OFF_SOCKET] = "[off-CPU: socket]",
    };
    return class < CX_OFF__COUNT ? names[class] : names[CX_OFF_OTHER];
}

static const char *trunc_name(unsigned reason)
{
    switch (reason) {
    case CX_TRUNC_DEPTH:
        return "[truncated: deeper than the walk's limit]";
    case CX_TRUNC_FAULT:
        return "[truncated: frame pointer chain broken]";
    case CX_TRUNC_NO_REGS:
        return "[truncated: no user registers]";
    case CX_TRUNC_CFI_RULE:
        return "[truncated: CFI rule not supported]";
    case CX_TRUNC_CFI_BAD:
        return "[truncated: CFI gave a bad frame]";
    case CX_TRUNC_EXEC:
        return "[in execve: the program is being replaced]";
    case CX_TRUNC_LR:
        return "[truncated: return address in the link register above the first frame]";
    case AGG_TRUNC_NO_MAPPING:
        return "[truncated: return address in no known mapping]";
    default:
        return "[truncated]";
    }
}

/* Functions a process's or thread's stack starts in. A frame-pointer walk
 * that breaks just above one of them has still seen the whole stack: libc,
 * built without frame pointers, leaves garbage in the register there. */
static bool is_entry_function(const char *name)
{
    static const char *const entries[] = {
        "__libc_start_call_main",
        "__libc_start_main",
        "__libc_start_main_impl",
        "_start",
        "start_thread",
        "__clone",
        "__clone3",
        "clone",
        "clone3",
        "thread_start",
    };
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
        if (strcmp(name, entries[i]) == 0)
            return true;
    }
    return false;
}

static uint64_t add_mapping(struct pprof_writer *w, const struct profile_ctx *c,
                            const struct agg_map *m)
{
    struct pprof_mapping_info mi = {m->start,
                                    m->end,
                                    m->offset,
                                    m->name,
                                    m->bin && m->bin->build_id[0] ? m->bin->build_id : NULL,
                                    true,
                                    false,
                                    false,
                                    false};

    if (m->bin)
        mi.has_filenames = mi.has_line_numbers = mi.has_inline_frames =
            symbolizer__has_dwarf(c->sym, m->bin);
    return pprof_writer__mapping(w, &mi);
}

/* What profile__add_proc's passes over the stacks share. */
struct proc_pass {
    struct pprof_writer *w;
    const struct profile_ctx *c;
    const struct agg_proc *ap;
    struct profile_stats *st;
    struct hmap *seen;        /* frame -> V_* value */
    struct hmap *seen_interp; /* frame -> location id, marked */
    uint64_t kernel_map;
    /* The pprof mapping id of each of ap's maps (0: not added yet): a
     * process's frames lie in a few mappings, and adding one interns its
     * path and build id and looks the binary up each time. */
    uint64_t *map_ids;
    char pid[16];
};

/* The pprof mapping of ap's map m, added on first use. 0: out of memory. */
static uint64_t map_id(struct proc_pass *pp, const struct agg_map *m)
{
    uint64_t *id = &pp->map_ids[m - pp->ap->maps];

    if (!*id)
        *id = add_mapping(pp->w, pp->c, m);
    return *id;
}

/* Names one frame and interns its location. *named says whether it has a
 * real name, *entry whether it is where a stack starts, *stat which
 * runtime's count it adds to (-1: none). interp: a native frame without a
 * name gets the interpreter's mark as its file (interp_frames.h). Returns
 * the location id, 0 when out of memory. */
static uint64_t frame_location(struct proc_pass *pp, const struct agg_frame *f, bool interp,
                               bool *named, bool *entry, int *stat)
{
    struct pprof_writer *w = pp->w;
    const struct profile_ctx *c = pp->c;
    const struct agg_proc *ap = pp->ap;
    uint64_t *kernel_map = &pp->kernel_map;
    struct pprof_line lines[SYM_MAX_INLINE];
    char label[512], file[PATH_MAX + sizeof(CX_INTERP_FILE_PREFIX)];
    bool ret = f->flags & AGG_F_RETURN, unnamed;
    uint64_t addr = ret ? f->addr - 1 : f->addr, id;

    *named = false;
    *entry = false;
    *stat = -1;
    if (f->kind == CX_FRAME_TRUNCATED) {
        /* Named for what it is: a marker, not a frame that lacks a name. */
        *named = true;
        lines[0] = (struct pprof_line){trunc_name(f->flags & 0xff), NULL, NULL, 0};
        return pprof_writer__location(w, 0, 0, lines, 1);
    }
    if (f->kind == CX_FRAME_OFFCPU) {
        *named = true;
        lines[0] = (struct pprof_line){off_class_name(f->addr), NULL, NULL, 0};
        return pprof_writer__location(w, 0, 0, lines, 1);
    }
    if (f->kind == CX_FRAME_KERNEL) {
        const char *module = "", *name = c->ks ? kallsyms__lookup(c->ks, addr, &module) : NULL;
        if (!*kernel_map) {
            struct pprof_mapping_info mi = {
                KERNEL_START, UINT64_MAX, 0, "[kernel.kallsyms]", NULL, true, false, false, false};
            *kernel_map = pprof_writer__mapping(w, &mi);
        }
        if (name) {
            *named = true;
            snprintf(file, sizeof(file), "[%s]", module[0] ? module : "kernel.kallsyms");
            lines[0] = (struct pprof_line){name, NULL, file, 0};
        } else {
            snprintf(label, sizeof(label), "[kernel]+0x%" PRIx64, f->addr);
            lines[0] = (struct pprof_line){label, NULL, NULL, 0};
        }
        return pprof_writer__location(w, *kernel_map, addr, lines, 1);
    }
    if (f->kind != CX_FRAME_NATIVE) {
        /* A runtime's own frame (a Python function). */
        id = c->rt ? rt_namers__name(c->rt, f, 0, stat, &unnamed) : 0;
        if (id) {
            *named = !unnamed;
            return id == UINT64_MAX ? 0 : id;
        }
        snprintf(label, sizeof(label), "[frame of kind %u]", f->kind);
        lines[0] = (struct pprof_line){label, NULL, NULL, 0};
        return pprof_writer__location(w, 0, 0, lines, 1);
    }

    const struct agg_map *m = f->map == AGG_NO_MAP ? NULL : &ap->maps[f->map];
    if (c->rt) {
        /* Code a runtime generated (JIT code in anonymous memory). */
        id = rt_namers__name(c->rt, f, m ? map_id(pp, m) : 0, stat, &unnamed);
        if (id) {
            *named = !unnamed;
            return id == UINT64_MAX ? 0 : id;
        }
    }
    if (!m) {
        snprintf(label, sizeof(label), "[unknown]+0x%" PRIx64, f->addr);
        lines[0] = (struct pprof_line){label, NULL, NULL, 0};
        return pprof_writer__location(w, 0, addr, lines, 1);
    }
    uint64_t file_off = f->addr - m->start + m->offset;
    struct binary *sb = m->bin;
    if (!sb && strcmp(m->name, "[vdso]") == 0)
        sb = symbolizer__vdso(c->sym); /* the same image in every process */
    /* Named already in this window, for another process of the binary. */
    const struct pprof_line *kept;
    unsigned nkept =
        sb && c->cache ? profile_cache__get(c->cache, sb, file_off, ret, &kept, entry) : 0;
    if (nkept) {
        *named = true;
        return pprof_writer__location(w, map_id(pp, m), addr, kept, nkept);
    }
    const struct sym_result *r = sb ? symbolizer__lookup(c->sym, sb, file_off, ret) : NULL;
    uint64_t mid = map_id(pp, m);
    if (r && r->named) {
        *named = true;
        *entry = is_entry_function(r->lines[r->n - 1].function);
        for (unsigned i = 0; i < r->n; i++)
            lines[i] = (struct pprof_line){r->lines[i].function, r->lines[i].system_name,
                                           r->lines[i].file, r->lines[i].line};
        if (c->cache)
            profile_cache__put(c->cache, sb, file_off, ret, lines, r->n, *entry);
        return pprof_writer__location(w, mid, addr, lines, r->n);
    }
    /* Never a bare address: the binary and where in it, for addr2line -e. */
    const char *base = m->bin ? m->bin->name : (m->name[0] ? m->name : "[anon]");
    if (!m->bin) {
        const char *slash = strrchr(base, '/');
        if (slash && slash[1])
            base = slash + 1;
    }
    snprintf(label, sizeof(label), "%s+0x%" PRIx64, base, r ? r->elf_addr : file_off);
    snprintf(file, sizeof(file), "%s%s", interp ? CX_INTERP_FILE_PREFIX : "", m->name);
    lines[0] = (struct pprof_line){label, NULL, file, 0};
    return pprof_writer__location(w, mid, addr, lines, 1);
}

#define N_PLACE_LABELS 5

/* The labels that say where the process runs, only those that apply (an
 * empty label would make every filter on it match nothing useful). Returns
 * how many were written to out. */
static size_t place_labels(const struct identity *id, struct pprof_label *out)
{
    const struct {
        const char *key, *value;
    } all[N_PLACE_LABELS] = {
        {"container_id", id->container_id}, {"pod", id->pod},
        {"namespace", id->namespace},       {"container", id->container},
        {"systemd_unit", id->systemd_unit},
    };
    size_t n = 0;

    for (size_t i = 0; i < N_PLACE_LABELS; i++) {
        if (all[i].value[0])
            out[n++] = (struct pprof_label){all[i].key, all[i].value, 0, NULL};
    }
    return n;
}

/* The value kept per distinct frame: the location id, and what
 * frame_location said of it. */
#define V_NAMED (1ull << 63)
#define V_ENTRY (1ull << 62)
#define V_STAT_SHIFT 56 /* the runtime's count + 1, 4 bits; 0: none */
#define V_ID(v) ((v) & ((1ull << V_STAT_SHIFT) - 1))

static bool is_runtime_frame(const struct agg_frame *f)
{
    return f->kind != CX_FRAME_NATIVE && f->kind != CX_FRAME_KERNEL &&
           f->kind != CX_FRAME_TRUNCATED && f->kind != CX_FRAME_OFFCPU;
}

#define MAX_INTERP_BINS 4

/* Where an interpreter's frames may be marked in stack s: returns the index
 * of its outermost runtime frame (frames below it, leaf-ward, are between
 * or above the program's frames; 0: none), and in bins the interpreter's
 * binaries: those of the native frames that call a runtime frame (the
 * evaluation function's caller, its frame replaced by the program's). A
 * rule of the stack's shape, so it serves any runtime whose frames stand
 * in for its interpreter's. */
static uint32_t interp_span(const struct agg_proc *ap, const struct agg_stack *s,
                            const struct binary **bins, unsigned *nbins)
{
    uint32_t outer = 0;

    *nbins = 0;
    for (uint32_t j = 0; j < s->nframes; j++) {
        const struct agg_frame *f = &s->frames[j], *up = j + 1 < s->nframes ? f + 1 : NULL;
        if (!is_runtime_frame(f))
            continue;
        outer = j;
        if (!up || up->kind != CX_FRAME_NATIVE || up->map == AGG_NO_MAP || !ap->maps[up->map].bin)
            continue;
        const struct binary *b = ap->maps[up->map].bin;
        unsigned k = 0;
        while (k < *nbins && bins[k] != b)
            k++;
        if (k == *nbins && *nbins < MAX_INTERP_BINS)
            bins[(*nbins)++] = b;
    }
    return *nbins ? outer : 0;
}

/* Whether frame f, at j in its stack and named without a name, is an
 * interpreter's: below the outermost runtime frame (interp_span's outer),
 * in one of its binaries. */
static bool is_interp_frame(const struct agg_proc *ap, const struct agg_frame *f, uint32_t j,
                            uint32_t outer, const struct binary *const *bins, unsigned nbins)
{
    if (j >= outer || f->kind != CX_FRAME_NATIVE || f->map == AGG_NO_MAP)
        return false;
    for (unsigned k = 0; k < nbins; k++) {
        if (ap->maps[f->map].bin == bins[k])
            return true;
    }
    return false;
}

/* Adds the stacks of h (counts; off: off-CPU nanoseconds, which stay out
 * of the frame statistics). Returns 0 or -ENOMEM. */
static int add_stacks(struct proc_pass *pp, struct hmap *h, bool off)
{
    const struct profile_ctx *c = pp->c;
    const struct agg_proc *ap = pp->ap;
    struct profile_stats *st = pp->st;
    uint64_t locs[CX_MAX_FRAMES + 1];
    char tid[16], thread[CX_COMM_LEN];

    for (size_t i = 0; i < hmap__len(h); i++) {
        const struct agg_stack *s = hmap__key(h, i, NULL);
        uint64_t value = *hmap__val(h, i), count = off ? 0 : value;
        uint32_t nloc = 0;
        bool prev_entry = false, last_truncated = false;
        const struct binary *bins[MAX_INTERP_BINS];
        unsigned nbins;
        uint32_t outer = interp_span(ap, s, bins, &nbins);
        for (uint32_t j = 0; j < s->nframes && j < CX_MAX_FRAMES + 1; j++) {
            bool fresh;
            long k = hmap__put(pp->seen, &s->frames[j], sizeof(s->frames[j]), &fresh);
            if (k < 0)
                return -ENOMEM;
            uint64_t *v = hmap__val(pp->seen, k);
            if (fresh) {
                bool named, entry;
                int stat;
                uint64_t id = frame_location(pp, &s->frames[j], false, &named, &entry, &stat);
                if (!id)
                    return -ENOMEM;
                *v = id | (named ? V_NAMED : 0) | (entry ? V_ENTRY : 0) |
                     (uint64_t)(stat + 1) << V_STAT_SHIFT;
            }
            if (s->frames[j].kind == CX_FRAME_TRUNCATED && prev_entry)
                continue; /* the stack was whole after all */
            prev_entry = *v & V_ENTRY;
            /* A sample inside execve is not a walk that failed. */
            last_truncated = s->frames[j].kind == CX_FRAME_TRUNCATED &&
                             (s->frames[j].flags & 0xff) != CX_TRUNC_EXEC;
            locs[nloc++] = V_ID(*v);
            if (!(*v & V_NAMED) && is_interp_frame(ap, &s->frames[j], j, outer, bins, nbins)) {
                /* The same frame, marked: a location of its own. */
                long ki = hmap__put(pp->seen_interp, &s->frames[j], sizeof(s->frames[j]), &fresh);
                if (ki < 0)
                    return -ENOMEM;
                uint64_t *vi = hmap__val(pp->seen_interp, ki);
                if (fresh) {
                    bool named, entry;
                    int stat;
                    *vi = frame_location(pp, &s->frames[j], true, &named, &entry, &stat);
                    if (!*vi)
                        return -ENOMEM;
                }
                locs[nloc - 1] = *vi;
                st->interp_frames += count;
            }
            if (!last_truncated) {
                unsigned stat = (*v >> V_STAT_SHIFT) & 15;
                st->frames += count;
                st->unnamed_frames += *v & V_NAMED ? 0 : count;
                if (stat && stat <= RT_MAX)
                    st->runtime_frames[stat - 1] += count;
            }
        }
        st->samples += count;
        if (last_truncated)
            st->truncated_samples += count;
        snprintf(tid, sizeof(tid), "%u", s->tid);
        memcpy(thread, s->thread, sizeof(thread));
        struct pprof_label labels[6 + N_PLACE_LABELS] = {
            {"pid", pp->pid, 0, NULL},
            {"tid", tid, 0, NULL},
            {"thread", thread, 0, NULL},
            {"comm", ap->comm, 0, NULL},
            {"service", ap->id.service, 0, NULL},
            {"host", c->host, 0, NULL},
        };
        size_t nl = 6 + place_labels(&ap->id, labels + 6);
        int64_t values[3] = {(int64_t)count, (int64_t)(count * c->period_ns),
                             /* Saturated: a sum past 63 bits would read as
                              * negative, and the server refuses the profile. */
                             off ? (int64_t)(value > INT64_MAX ? INT64_MAX : value) : 0};
        if (pprof_writer__add_sample(pp->w, locs, nloc, values, labels, nl))
            return -ENOMEM;
    }
    return 0;
}

int profile__add_proc(struct pprof_writer *w, const struct profile_ctx *c,
                      const struct agg_proc *ap, struct profile_stats *st)
{
    /* The scratch maps: the window's, emptied, when there is a cache. */
    struct proc_pass pp = {w,
                           c,
                           ap,
                           st,
                           c->cache ? profile_cache__seen(c->cache, 0) : hmap__new(),
                           c->cache ? profile_cache__seen(c->cache, 1) : hmap__new(),
                           0,
                           c->cache ? profile_cache__ids(c->cache, ap->nmaps)
                                    : calloc(ap->nmaps + 1, sizeof(uint64_t)),
                           ""};
    int err = -ENOMEM;

    if (!pp.seen || !pp.seen_interp || !pp.map_ids)
        goto out;
    if (c->rt)
        rt_namers__proc_begin(c->rt, w, ap, c->now_ns);
    snprintf(pp.pid, sizeof(pp.pid), "%u", ap->tgid);
    /* pprof takes the first mapping for the main binary: put the
     * executable's first, whatever frame happens to be named first. */
    for (size_t i = 0; i < ap->nmaps; i++) {
        if (ap->maps[i].bin && strcmp(ap->maps[i].bin->name, ap->exe) == 0) {
            if (!map_id(&pp, &ap->maps[i]))
                goto out;
            break;
        }
    }
    if (add_stacks(&pp, ap->stacks, false) ||
        (c->off_cpu && ap->off_stacks && add_stacks(&pp, ap->off_stacks, true)))
        goto out;
    if (ap->lost) {
        struct pprof_line l = {"[lost samples: ring buffer full]", NULL, NULL, 0};
        uint64_t id = pprof_writer__location(w, 0, 0, &l, 1);
        struct pprof_label labels[4 + N_PLACE_LABELS] = {
            {"pid", pp.pid, 0, NULL},
            {"comm", ap->comm, 0, NULL},
            {"service", ap->id.service, 0, NULL},
            {"host", c->host, 0, NULL},
        };
        size_t nl = 4 + place_labels(&ap->id, labels + 4);
        int64_t values[3] = {(int64_t)ap->lost, (int64_t)(ap->lost * c->period_ns), 0};
        if (!id || pprof_writer__add_sample(w, &id, 1, values, labels, nl))
            goto out;
    }
    err = 0;
out:
    if (c->rt && pp.seen && pp.seen_interp)
        rt_namers__proc_end(c->rt);
    if (!c->cache) {
        hmap__free(pp.seen);
        hmap__free(pp.seen_interp);
        free(pp.map_ids);
    }
    return err;
}

void profile_stats__runtimes_str(const struct profile_stats *st, char *out, size_t len)
{
    size_t at = 0;

    out[0] = '\0';
    for (int i = 0; i < RT_MAX && at < len; i++) {
        const char *name = rt_namers__stat_name(i);
        if (!name[0])
            continue;
        int n = snprintf(out + at, len - at, "%s%s=%.1f%%", at ? " " : "", name,
                         st->frames ? 100.0 * st->runtime_frames[i] / st->frames : 0.0);
        if (n < 0)
            break;
        at += (size_t)n;
    }
    if (at < len)
        snprintf(out + at, len - at, "%sinterp_frames=%.1f%%", at ? " " : "",
                 st->frames ? 100.0 * st->interp_frames / st->frames : 0.0);
}

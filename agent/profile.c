#include "profile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/hmap.h"
#include "../common/log.h"
#include "symbolize/jvm.h"

#define KERNEL_START 0xffff800000000000ull
/* How often a process's perf map is looked at again; it is read further
 * only when it grew. */
#define JIT_RECHECK_NS (1000ull * 1000 * 1000)
/* perfmap_cache__once keys */
#define HINT_NODE 1
#define HINT_JVM_FP 2
#define JVM_GAVE_UP 3
/* A JVM is asked for its perf map once it is this old (it handles SIGQUIT
 * only once it has started), then again at most this often while its
 * samples find code the map does not name yet. */
#define JVM_MIN_AGE_MS 3000
#define JVM_ATTACH_EVERY_NS (30ull * 1000 * 1000 * 1000)
#define JVM_ATTACH_TIMEOUT_MS 3000

/* A process's perf map, fetched on its first frame in anonymous code. */
struct jit_state {
    struct perfmap *pm;
    bool tried;
    bool missed; /* a frame in anonymous code had no perf map to name it */
    const char *why;
};

struct pprof_writer *profile__writer(const struct profile_ctx *c, uint64_t start_ns,
                                     uint64_t duration_ns)
{
    struct pprof_writer *w = pprof_writer__new();

    if (!w)
        return NULL;
    if (pprof_writer__add_sample_type(w, "samples", "count") ||
        pprof_writer__add_sample_type(w, "cpu", "nanoseconds")) {
        pprof_writer__free(w);
        return NULL;
    }
    pprof_writer__set_period(w, "cpu", "nanoseconds", c->period_ns);
    pprof_writer__set_time(w, start_ns, duration_ns);
    return w;
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

/* Whether code in m (NULL: in no mapping) may be a JIT's: anonymous
 * executable memory, or a memfd (.NET maps its code twice, through one). */
static bool maybe_jit(const struct agg_map *m)
{
    if (!m)
        return true;
    if (strncmp(m->name, "/memfd:", 7) == 0)
        return true;
    return !m->bin && (m->name[0] == '\0' || strncmp(m->name, "[anon", 5) == 0);
}

static bool all_digits(const char *s, const char *end)
{
    if (s == end)
        return false;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9')
            return false;
    }
    return true;
}

/* A perf-map name as a pprof line. V8's, "JS:*hot_a /app/w.js:3:15" (the
 * kind, an optimization tier mark, the function, where it starts), becomes
 * hot_a in /app/w.js at line 3; HotSpot's interpreter stub is
 * [interpreter]; anything else is kept as written. fn and file are the
 * caller's buffers. */
static struct pprof_line jit_line(const char *name, char *fn, size_t fnlen, char *file,
                                  size_t filelen)
{
    static const char *const v8_kinds[] = {"JS:", "LazyCompile:", "Function:", "Script:", "Eval:"};
    struct pprof_line l = {name, name, NULL, 0};

    if (strcmp(name, "Interpreter") == 0) {
        l.function = "[interpreter]";
        return l;
    }
    for (size_t i = 0; i < sizeof(v8_kinds) / sizeof(v8_kinds[0]); i++) {
        size_t kl = strlen(v8_kinds[i]);
        if (strncmp(name, v8_kinds[i], kl) != 0)
            continue;
        const char *p = name + kl;
        if (*p && strchr("*~^+-", *p))
            p++;
        const char *sp = strchr(p, ' ');
        size_t n = sp ? (size_t)(sp - p) : strlen(p);
        if (n == 0)
            snprintf(fn, fnlen, "(anonymous)");
        else
            snprintf(fn, fnlen, "%.*s", (int)n, p);
        l.function = fn;
        if (sp && sp[1]) {
            /* "file:line:col", the file may itself hold colons (a URL). */
            const char *where = sp + 1, *end = where + strlen(where);
            const char *c2 = strrchr(where, ':');
            const char *c1 = NULL;
            if (c2 && c2 > where) {
                for (const char *q = c2 - 1; q >= where; q--) {
                    if (*q == ':') {
                        c1 = q;
                        break;
                    }
                }
            }
            if (c1 && all_digits(c1 + 1, c2) && all_digits(c2 + 1, end)) {
                snprintf(file, filelen, "%.*s", (int)(c1 - where), where);
                l.line = strtoll(c1 + 1, NULL, 10);
            } else {
                snprintf(file, filelen, "%s", where);
            }
            l.file = file;
        }
        return l;
    }
    return l;
}

/* Names a frame in possible JIT code from the process's perf map. Returns
 * the location id, 0 when the map does not name it, UINT64_MAX when out of
 * memory. */
static uint64_t jit_location(struct pprof_writer *w, const struct profile_ctx *c,
                             const struct agg_proc *ap, struct jit_state *js, uint64_t map_id,
                             uint64_t addr, bool *named)
{
    char fn[512], file[1024];
    const char *name;

    if (!js->tried) {
        js->tried = true;
        js->pm = perfmap_cache__get(c->jit, ap->tgid, ap->start_time, c->now_ns, JIT_RECHECK_NS,
                                    &js->why);
    }
    name = js->pm ? perfmap__lookup(js->pm, addr) : NULL;
    if (!name) {
        js->missed = !js->pm;
        return 0;
    }
    struct pprof_line l = jit_line(name, fn, sizeof(fn), file, sizeof(file));
    uint64_t id = pprof_writer__location(w, map_id, addr, &l, 1);
    *named = id != 0;
    return id ? id : UINT64_MAX;
}

/* Names one frame and interns its location. *named says whether it has a
 * real name, *entry whether it is where a stack starts. Returns the location
 * id, 0 when out of memory. */
static uint64_t frame_location(struct pprof_writer *w, const struct profile_ctx *c,
                               const struct agg_proc *ap, struct jit_state *js,
                               const struct agg_frame *f, uint64_t *kernel_map, bool *named,
                               bool *entry, bool *jit)
{
    struct pprof_line lines[SYM_MAX_INLINE];
    char label[512];
    bool ret = f->flags & AGG_F_RETURN;
    uint64_t addr = ret ? f->addr - 1 : f->addr;

    *named = false;
    *entry = false;
    *jit = false;
    if (f->kind == CX_FRAME_TRUNCATED) {
        /* Named for what it is: a marker, not a frame that lacks a name. */
        *named = true;
        lines[0] = (struct pprof_line){trunc_name(f->flags & 0xff), NULL, NULL, 0};
        return pprof_writer__location(w, 0, 0, lines, 1);
    }
    if (f->kind == CX_FRAME_KERNEL) {
        const char *module = "", *name = c->ks ? kallsyms__lookup(c->ks, addr, &module) : NULL;
        char file[128];
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

    const struct agg_map *m = f->map == AGG_NO_MAP ? NULL : &ap->maps[f->map];
    if (c->jit && maybe_jit(m)) {
        uint64_t id = jit_location(w, c, ap, js, m ? add_mapping(w, c, m) : 0, addr, named);
        if (id) {
            *jit = *named;
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
    const struct sym_result *r = sb ? symbolizer__lookup(c->sym, sb, file_off, ret) : NULL;
    uint64_t map_id = add_mapping(w, c, m);
    if (r && r->named) {
        *named = true;
        *entry = is_entry_function(r->lines[r->n - 1].function);
        for (unsigned i = 0; i < r->n; i++)
            lines[i] = (struct pprof_line){r->lines[i].function, r->lines[i].system_name,
                                           r->lines[i].file, r->lines[i].line};
        return pprof_writer__location(w, map_id, addr, lines, r->n);
    }
    /* Never a bare address: the binary and where in it, for addr2line -e. */
    const char *base = m->bin ? m->bin->name : (m->name[0] ? m->name : "[anon]");
    if (!m->bin) {
        const char *slash = strrchr(base, '/');
        if (slash && slash[1])
            base = slash + 1;
    }
    snprintf(label, sizeof(label), "%s+0x%" PRIx64, base, r ? r->elf_addr : file_off);
    lines[0] = (struct pprof_line){label, NULL, m->name, 0};
    return pprof_writer__location(w, map_id, addr, lines, 1);
}

/* The executable is java, or a frame was in libjvm.so (a launcher of its
 * own that loads the JVM). */
static bool is_jvm(const struct agg_proc *ap)
{
    if (strcmp(ap->exe, "java") == 0)
        return true;
    for (size_t i = 0; i < ap->nmaps; i++) {
        const char *slash = ap->maps[i].name ? strrchr(ap->maps[i].name, '/') : NULL;
        if (slash && strcmp(slash + 1, "libjvm.so") == 0)
            return true;
    }
    return false;
}

/* A HotSpot JVM: the PreserveFramePointer hint once, and when its samples
 * hit JIT code its perf map does not name (none yet, or code compiled
 * since), it is asked to write the map (jvm.h), rate-limited, never while
 * it is starting, never when SIGQUIT would not reach its handler (-Xrs). */
static void jvm_prepare(const struct profile_ctx *c, const struct agg_proc *ap,
                        struct jit_state *js)
{
    static const char proc_root[] = "/proc";
    char reply[256];
    bool miss = false;

    if (!c->jit || !is_jvm(ap))
        return;
    if (!jvm__has_arg(proc_root, ap->tgid, "-XX:+PreserveFramePointer") &&
        perfmap_cache__once(c->jit, ap->tgid, ap->start_time, HINT_JVM_FP))
        log_info("perfmap: pid=%u exe=%s service=%s: a JVM without -XX:+PreserveFramePointer: "
                 "its stacks end at the first JIT-compiled frame; fix: start it with "
                 "-XX:+PreserveFramePointer",
                 ap->tgid, ap->exe, ap->id.service);
    struct perfmap *pm =
        perfmap_cache__get(c->jit, ap->tgid, ap->start_time, c->now_ns, JIT_RECHECK_NS, NULL);
    for (size_t i = 0; i < hmap__len(ap->stacks) && !miss; i++) {
        const struct agg_stack *s = hmap__key(ap->stacks, i, NULL);
        for (uint32_t j = 0; j < s->nframes && !miss; j++) {
            const struct agg_frame *f = &s->frames[j];
            if (f->kind != CX_FRAME_NATIVE || f->map == AGG_NO_MAP || !maybe_jit(&ap->maps[f->map]))
                continue;
            uint64_t addr = f->flags & AGG_F_RETURN ? f->addr - 1 : f->addr;
            miss = !pm || !perfmap__lookup(pm, addr);
        }
    }
    if (!miss || procs__age_ms(ap->start_time) < JVM_MIN_AGE_MS ||
        perfmap_cache__seen(c->jit, ap->tgid, ap->start_time, JVM_GAVE_UP) ||
        jvm__has_arg(proc_root, ap->tgid, "-Xrs") ||
        jvm__has_arg(proc_root, ap->tgid, "-XX:+ReduceSignalUsage") ||
        jvm__has_arg(proc_root, ap->tgid, "-XX:+DisableAttachMechanism") ||
        !perfmap_cache__due(c->jit, ap->tgid, ap->start_time, c->now_ns, JVM_ATTACH_EVERY_NS))
        return;
    uint64_t t0 = clock__mono_ns();
    int r = jvm__write_perfmap(proc_root, ap->tgid, JVM_ATTACH_TIMEOUT_MS, reply, sizeof(reply));
    for (char *p = reply; *p; p++) {
        if (*p == '\n')
            *p = ' ';
    }
    if (r) {
        /* Not again: each SIGQUIT a JVM does not take as an attach request
         * prints a thread dump on its output. */
        perfmap_cache__once(c->jit, ap->tgid, ap->start_time, JVM_GAVE_UP);
        log_warn("perfmap: pid=%u exe=%s: the JVM did not write its perf map (Compiler.perfmap "
                 "through its attach socket): %s %s; not asked again",
                 ap->tgid, ap->exe, strerror(-r), reply);
    } else
        log_debug("perfmap: pid=%u exe=%s: Compiler.perfmap in %llu ms: %s", ap->tgid, ap->exe,
                  (unsigned long long)((clock__mono_ns() - t0) / 1000000), reply);
    /* Read what it wrote, whole (it rewrote the file in place), for this
     * window already. */
    perfmap_cache__invalidate(c->jit, ap->tgid, ap->start_time);
    js->tried = true;
    js->pm = perfmap_cache__get(c->jit, ap->tgid, ap->start_time, c->now_ns, 0, &js->why);
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

int profile__add_proc(struct pprof_writer *w, const struct profile_ctx *c,
                      const struct agg_proc *ap, struct profile_stats *st)
{
    uint64_t locs[CX_MAX_FRAMES], kernel_map = 0;
    char pid[16], tid[16], thread[CX_COMM_LEN];
    /* frame -> location id | named << 63 | entry << 62 | jit << 61 */
    struct hmap *seen = hmap__new();
    struct jit_state js = {0};
    int err = -ENOMEM;

    if (!seen)
        return -ENOMEM;
    jvm_prepare(c, ap, &js);
    snprintf(pid, sizeof(pid), "%u", ap->tgid);
    /* pprof takes the first mapping for the main binary: put the
     * executable's first, whatever frame happens to be named first. */
    for (size_t i = 0; i < ap->nmaps; i++) {
        if (ap->maps[i].bin && strcmp(ap->maps[i].bin->name, ap->exe) == 0) {
            if (!add_mapping(w, c, &ap->maps[i]))
                goto out;
            break;
        }
    }
    for (size_t i = 0; i < hmap__len(ap->stacks); i++) {
        const struct agg_stack *s = hmap__key(ap->stacks, i, NULL);
        uint64_t count = *hmap__val(ap->stacks, i);
        uint32_t nloc = 0;
        bool prev_entry = false, last_truncated = false;
        for (uint32_t j = 0; j < s->nframes; j++) {
            bool fresh;
            long k = hmap__put(seen, &s->frames[j], sizeof(s->frames[j]), &fresh);
            if (k < 0)
                goto out;
            uint64_t *v = hmap__val(seen, k);
            if (fresh) {
                bool named, entry, jit;
                uint64_t id =
                    frame_location(w, c, ap, &js, &s->frames[j], &kernel_map, &named, &entry, &jit);
                if (!id)
                    goto out;
                *v = id | (uint64_t)named << 63 | (uint64_t)entry << 62 | (uint64_t)jit << 61;
            }
            if (s->frames[j].kind == CX_FRAME_TRUNCATED && prev_entry)
                continue; /* the stack was whole after all */
            prev_entry = (*v >> 62) & 1;
            last_truncated = s->frames[j].kind == CX_FRAME_TRUNCATED;
            locs[nloc++] = *v & ~(7ull << 61);
            if (!last_truncated) {
                st->frames += count;
                st->unnamed_frames += (*v >> 63) ? 0 : count;
                st->jit_frames += (*v >> 61) & 1 ? count : 0;
            }
        }
        st->samples += count;
        if (last_truncated)
            st->truncated_samples += count;
        snprintf(tid, sizeof(tid), "%u", s->tid);
        memcpy(thread, s->thread, sizeof(thread));
        struct pprof_label labels[6 + N_PLACE_LABELS] = {
            {"pid", pid, 0, NULL},
            {"tid", tid, 0, NULL},
            {"thread", thread, 0, NULL},
            {"comm", ap->comm, 0, NULL},
            {"service", ap->id.service, 0, NULL},
            {"host", c->host, 0, NULL},
        };
        size_t nl = 6 + place_labels(&ap->id, labels + 6);
        int64_t values[2] = {(int64_t)count, (int64_t)(count * c->period_ns)};
        if (pprof_writer__add_sample(w, locs, nloc, values, labels, nl))
            goto out;
    }
    if (ap->lost) {
        struct pprof_line l = {"[lost samples: ring buffer full]", NULL, NULL, 0};
        uint64_t id = pprof_writer__location(w, 0, 0, &l, 1);
        struct pprof_label labels[4 + N_PLACE_LABELS] = {
            {"pid", pid, 0, NULL},
            {"comm", ap->comm, 0, NULL},
            {"service", ap->id.service, 0, NULL},
            {"host", c->host, 0, NULL},
        };
        size_t nl = 4 + place_labels(&ap->id, labels + 4);
        int64_t values[2] = {(int64_t)ap->lost, (int64_t)(ap->lost * c->period_ns)};
        if (!id || pprof_writer__add_sample(w, &id, 1, values, labels, nl))
            goto out;
    }
    if (js.missed && strncmp(ap->exe, "node", 4) == 0 &&
        perfmap_cache__once(c->jit, ap->tgid, ap->start_time, HINT_NODE))
        log_info("perfmap: pid=%u exe=%s service=%s: JavaScript frames unnamed (shown as "
                 "[anon]+0xADDR): %s; fix: start node with --perf-basic-prof (or "
                 "--perf-basic-prof-only-functions)",
                 ap->tgid, ap->exe, ap->id.service, js.why ? js.why : "no perf map");
    err = 0;
out:
    hmap__free(seen);
    return err;
}

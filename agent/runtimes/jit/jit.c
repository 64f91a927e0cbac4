/* The JIT runtime: code that a JIT compiler (V8, HotSpot, .NET, LuaJIT...)
 * generated in anonymous memory, named from the process's perf map
 * (perfmap.h); a HotSpot JVM is asked to write its map (jvm_attach.h); a
 * process that could write one and does not gets a hint in the log.
 *
 * Only a namer: nothing is walked differently in BPF (JIT frames are walked
 * by frame pointer) and nothing is read while the process runs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../common/clock.h"
#include "../../../common/hmap.h"
#include "../../../common/log.h"
#include "../../aggregate.h"
#include "../runtime.h"
#include "jvm_attach.h"
#include "perfmap.h"

/* How often a process's perf map is looked at again; it is read further
 * only when it grew. */
#define JIT_RECHECK_NS (1000ull * 1000 * 1000)
/* A process's perf map is forgotten once it has had no sample this long. */
#define PERFMAP_GRACE_NS (10ull * 60 * 1000 * 1000 * 1000)
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

/* The process being named: its perf map, fetched on its first frame in
 * anonymous code. */
struct jit_proc {
    struct perfmap *pm;
    bool tried;
    bool missed; /* a frame in anonymous code had no perf map to name it */
    const char *why;
};

struct jit_namer {
    char *proc_root;
    struct perfmap_cache *cache;
    struct jit_proc cur;
};

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
    struct pprof_line l = {name, name, NULL, 0, 0};

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

/* Whether a sample of ap hit code the perf map pm (NULL: none) does not
 * name. */
static bool jit_misses(const struct agg_proc *ap, struct perfmap *pm)
{
    for (size_t i = 0; i < hmap__len(ap->stacks); i++) {
        const struct agg_stack *s = hmap__key(ap->stacks, i, NULL);
        for (uint32_t j = 0; j < s->nframes; j++) {
            const struct agg_frame *f = &s->frames[j];
            if (f->kind != CX_FRAME_NATIVE || f->map == AGG_NO_MAP || !maybe_jit(&ap->maps[f->map]))
                continue;
            uint64_t addr = f->flags & AGG_F_RETURN ? f->addr - 1 : f->addr;
            if (!pm || !perfmap__lookup(pm, addr))
                return true;
        }
    }
    return false;
}

/* Why a JVM did not write its perf map: the call that failed, its error,
 * and what a user can change (the unit's hardening, a capability). */
static void log_jvm_fail(const struct agg_proc *ap, int r, const struct jvm_attach_fail *fail,
                         const char *reply)
{
    const char *hint = jvm__fail_hint(fail);

    if (fail->step == JVM_STEP_NONE) {
        log_warn("perfmap: pid=%u exe=%s: the JVM did not write its perf map (Compiler.perfmap "
                 "through its attach socket): %s %s; not asked again",
                 ap->tgid, ap->exe, strerror(-r), reply);
        return;
    }
    log_warn("perfmap: pid=%u exe=%s: the JVM did not write its perf map (Compiler.perfmap "
             "through its attach socket): %s failed: %s%s%s; not asked again",
             ap->tgid, ap->exe, jvm__step_name(fail->step),
             fail->err ? strerror(fail->err) : "timed out", hint[0] ? "; likely cause: " : "",
             hint);
}

/* Whether the BPF walk showed Java frames of ap (runtimes/hotspot/): it
 * knows the JVM, which then needs neither a perf map nor the flag. */
static bool java_walked(const struct agg_proc *ap)
{
    for (size_t i = 0; i < hmap__len(ap->stacks); i++) {
        const struct agg_stack *s = hmap__key(ap->stacks, i, NULL);
        for (uint32_t j = 0; j < s->nframes; j++) {
            if (s->frames[j].kind == CX_FRAME_JAVA)
                return true;
        }
    }
    return false;
}

/* A HotSpot JVM the walk does not know (java_walked): the
 * PreserveFramePointer hint once, and when its samples
 * hit JIT code its perf map does not name (none yet, or code compiled
 * since), it is asked to write the map (jvm_attach.h), rate-limited, never
 * while it is starting, never when SIGQUIT would not reach its handler
 * (-Xrs). */
static void jvm_prepare(struct jit_namer *jn, const struct agg_proc *ap, uint64_t now_ns)
{
    const char *root = jn->proc_root;
    char reply[256];

    if (!is_jvm(ap) || java_walked(ap))
        return;
    /* Only a live JVM whose command line was read: one that has exited by
     * now (its window is named after it) says nothing either way. */
    if (jvm__arg_state(root, ap->tgid, "-XX:+PreserveFramePointer") == 0 &&
        perfmap_cache__once(jn->cache, ap->tgid, ap->start_time, HINT_JVM_FP))
        log_info("perfmap: pid=%u exe=%s service=%s: a JVM without -XX:+PreserveFramePointer: "
                 "its stacks end at the first JIT-compiled frame; fix: start it with "
                 "-XX:+PreserveFramePointer",
                 ap->tgid, ap->exe, ap->id.service);
    struct perfmap *pm =
        perfmap_cache__get(jn->cache, ap->tgid, ap->start_time, now_ns, JIT_RECHECK_NS, NULL);
    if (!jit_misses(ap, pm) || procs__age_ms(ap->start_time) < JVM_MIN_AGE_MS ||
        perfmap_cache__seen(jn->cache, ap->tgid, ap->start_time, JVM_GAVE_UP) ||
        jvm__has_arg(root, ap->tgid, "-Xrs") ||
        jvm__has_arg(root, ap->tgid, "-XX:+ReduceSignalUsage") ||
        jvm__has_arg(root, ap->tgid, "-XX:+DisableAttachMechanism") ||
        !perfmap_cache__due(jn->cache, ap->tgid, ap->start_time, now_ns, JVM_ATTACH_EVERY_NS))
        return;
    uint64_t t0 = clock__mono_ns();
    struct jvm_attach_fail fail;
    int r = jvm__write_perfmap(root, ap->tgid, JVM_ATTACH_TIMEOUT_MS, reply, sizeof(reply), &fail);
    for (char *p = reply; *p; p++) {
        if (*p == '\n')
            *p = ' ';
    }
    if (r) {
        /* Not again: each SIGQUIT a JVM does not take as an attach request
         * prints a thread dump on its output. */
        perfmap_cache__once(jn->cache, ap->tgid, ap->start_time, JVM_GAVE_UP);
        log_jvm_fail(ap, r, &fail, reply);
    } else
        log_debug("perfmap: pid=%u exe=%s: Compiler.perfmap in %llu ms: %s", ap->tgid, ap->exe,
                  (unsigned long long)((clock__mono_ns() - t0) / 1000000), reply);
    /* Read what it wrote, whole (it rewrote the file in place), for this
     * window already. */
    perfmap_cache__invalidate(jn->cache, ap->tgid, ap->start_time);
    jn->cur.tried = true;
    jn->cur.pm = perfmap_cache__get(jn->cache, ap->tgid, ap->start_time, now_ns, 0, &jn->cur.why);
}

static void *jit_namer_new(const char *proc_root)
{
    struct jit_namer *jn = calloc(1, sizeof(*jn));

    if (!jn)
        return NULL;
    jn->proc_root = strdup(proc_root);
    jn->cache = perfmap_cache__new(proc_root);
    if (!jn->proc_root || !jn->cache) {
        perfmap_cache__free(jn->cache);
        free(jn->proc_root);
        free(jn);
        return NULL;
    }
    return jn;
}

static void jit_namer_free(void *n)
{
    struct jit_namer *jn = n;

    perfmap_cache__free(jn->cache);
    free(jn->proc_root);
    free(jn);
}

static void jit_proc_begin(void *n, struct rt_name_ctx *c)
{
    struct jit_namer *jn = n;

    memset(&jn->cur, 0, sizeof(jn->cur));
    c->proc = &jn->cur;
    jvm_prepare(jn, c->ap, c->now_ns);
}

/* A native frame in possible JIT code, named from the process's perf map. */
static uint64_t jit_name(void *n, struct rt_name_ctx *c, const struct agg_frame *f,
                         const struct rt_obj *obj, uint64_t map_id, unsigned *how)
{
    struct jit_namer *jn = n;
    struct jit_proc *js = c->proc;
    const struct agg_proc *ap = c->ap;
    char fn[512], file[1024];
    const char *name;

    (void)obj;
    if (f->kind != CX_FRAME_NATIVE || !maybe_jit(f->map == AGG_NO_MAP ? NULL : &ap->maps[f->map]))
        return 0;
    uint64_t addr = f->flags & AGG_F_RETURN ? f->addr - 1 : f->addr;
    if (!js->tried) {
        js->tried = true;
        js->pm = perfmap_cache__get(jn->cache, ap->tgid, ap->start_time, c->now_ns, JIT_RECHECK_NS,
                                    &js->why);
    }
    name = js->pm ? perfmap__lookup(js->pm, addr) : NULL;
    if (!name) {
        js->missed = !js->pm;
        return 0;
    }
    struct pprof_line l = jit_line(name, fn, sizeof(fn), file, sizeof(file));
    uint64_t id = pprof_writer__location(c->w, map_id, addr, &l, 1);
    *how = RT_COUNTED;
    return id ? id : UINT64_MAX;
}

static void jit_proc_end(void *n, struct rt_name_ctx *c)
{
    struct jit_namer *jn = n;
    struct jit_proc *js = c->proc;
    const struct agg_proc *ap = c->ap;

    if (js && js->missed && strncmp(ap->exe, "node", 4) == 0 &&
        perfmap_cache__once(jn->cache, ap->tgid, ap->start_time, HINT_NODE))
        log_info("perfmap: pid=%u exe=%s service=%s: JavaScript frames unnamed (shown as "
                 "[anon]+0xADDR): %s; fix: start node with --perf-basic-prof (or "
                 "--perf-basic-prof-only-functions)",
                 ap->tgid, ap->exe, ap->id.service, js->why ? js->why : "no perf map");
}

static void jit_namer_sweep(void *n, uint64_t now_ns)
{
    struct jit_namer *jn = n;

    if (now_ns > PERFMAP_GRACE_NS)
        perfmap_cache__sweep(jn->cache, now_ns - PERFMAP_GRACE_NS);
}

const struct runtime_ops rt_jit_ops = {
    .name = "jit",
    .stat_name = "jit_frames",
    .claims_native = true,
    .namer_new = jit_namer_new,
    .namer_free = jit_namer_free,
    .proc_begin = jit_proc_begin,
    .name_frame = jit_name,
    .proc_end = jit_proc_end,
    .namer_sweep = jit_namer_sweep,
};

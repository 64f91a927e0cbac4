/* The path after the BPF side, on this very process: samples whose frames
 * are addresses of functions in this test binary go through the process
 * table, a window and the profile builder, and come out named in pprof. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../agent/aggregate.h"
#include "../../agent/profile.h"
#include "../../common/gz.h"
#include "../../common/hmap.h"
#include "profile.pb-c.h"

__attribute__((noinline)) int cx_test_leaf(int x)
{
    return x * 3 + 1;
}

__attribute__((noinline)) int cx_test_caller(int x)
{
    return cx_test_leaf(x) + 1;
}

static void fill(struct cx_sample *s, uint32_t tid, bool with_kernel)
{
    memset(s, 0, sizeof(*s));
    s->hdr.kind = CX_REC_SAMPLE;
    s->hdr.tgid = getpid();
    s->hdr.tid = tid;
    strcpy(s->comm, "worker-1");
    unsigned n = 0;
    if (with_kernel) {
        s->frames[n++] =
            (struct cx_frame){.addr = 0xffffffff81000100ull, .kind = CX_FRAME_KERNEL, .aux = 0};
        s->n_kernel = 1;
    }
    s->frames[n++] = (struct cx_frame){
        .addr = (uint64_t)(uintptr_t)cx_test_leaf + 2, .kind = CX_FRAME_NATIVE, .aux = 0};
    s->frames[n++] = (struct cx_frame){
        .addr = (uint64_t)(uintptr_t)cx_test_caller + 8, .kind = CX_FRAME_NATIVE, .aux = 0};
    s->frames[n++] =
        (struct cx_frame){.addr = 0, .kind = CX_FRAME_TRUNCATED, .aux = CX_TRUNC_DEPTH};
    s->n_user = 3;
}

static const char *str(const Perftools__Profiles__Profile *p, int64_t i)
{
    return p->string_table[i];
}

static void test_window_to_pprof(void **state)
{
    (void)state;
    struct binary_cache *bc = binary_cache__new("/proc");
    struct procs *ps = procs__new(bc, "/proc", NULL);
    struct agg_window *w = agg_window__new(1700000000000000000ull, false);
    struct cx_sample s;

    assert_non_null(ps);
    struct proc *p = procs__get(ps, getpid(), "x", 1);
    assert_non_null(p);
    assert_int_equal(p->maps_err, 0);
    assert_string_equal(p->exe, "test_aggregate");

    fill(&s, 100, true);
    for (int i = 0; i < 3; i++)
        assert_int_equal(agg_window__add(w, ps, p, &s, 2, NULL), 0);
    fill(&s, 101, false);
    assert_int_equal(agg_window__add(w, ps, p, &s, 2, NULL), 0);
    agg_window__add_lost(w, p, 5);
    w->end_ns = w->start_ns + 60000000000ull;

    assert_int_equal(w->nprocs, 1);
    struct agg_proc *ap = w->procs[0];
    assert_int_equal(ap->samples, 4);
    assert_int_equal(ap->lost, 5);
    /* Two threads: two stacks; the kernel frame was left out. */
    assert_int_equal(hmap__len(ap->stacks), 2);
    const struct agg_stack *st = hmap__key(ap->stacks, 0, NULL);
    assert_int_equal(st->nframes, 3);
    assert_int_equal(*hmap__val(ap->stacks, 0), 3);

    /* The process may go: the window has what it needs. */
    procs__exit(ps, getpid(), 3);
    procs__sweep(ps, 4, false);
    assert_int_equal(procs__count(ps), 0);

    struct symbolizer *sym = symbolizer__new();
    struct profile_ctx ctx = {sym, NULL, "testhost", 10000000};
    struct profile_stats pst = {0};
    struct pprof_writer *pw = profile__writer(&ctx, w->start_ns, w->end_ns - w->start_ns);
    assert_int_equal(profile__add_proc(pw, &ctx, ap, &pst), 0);
    struct buf out, raw;
    buf__init(&out, 1 << 20);
    buf__init(&raw, 1 << 20);
    assert_int_equal(pprof_writer__encode(pw, &out, true), 0);
    assert_int_equal(gz__decompress(out.data, out.len, &raw, 0), 0);
    Perftools__Profiles__Profile *pp =
        perftools__profiles__profile__unpack(NULL, raw.len, (uint8_t *)raw.data);
    assert_non_null(pp);

    assert_int_equal(pp->n_sample, 3); /* two stacks and the lost samples */
    int64_t total = 0;
    bool leaf_first = false, lost = false;
    for (size_t i = 0; i < pp->n_sample; i++) {
        Perftools__Profiles__Sample *sm = pp->sample[i];
        total += sm->value[0];
        assert_int_equal(sm->value[1], sm->value[0] * 10000000);
        Perftools__Profiles__Location *l0 = pp->location[sm->location_id[0] - 1];
        const char *fn = str(pp, pp->function[l0->line[l0->n_line - 1]->function_id - 1]->name);
        if (strcmp(fn, "cx_test_leaf") == 0) {
            leaf_first = true;
            assert_int_equal(sm->n_location_id, 3);
            Perftools__Profiles__Location *l1 = pp->location[sm->location_id[1] - 1];
            assert_string_equal(
                str(pp, pp->function[l1->line[l1->n_line - 1]->function_id - 1]->name),
                "cx_test_caller");
            Perftools__Profiles__Location *l2 = pp->location[sm->location_id[2] - 1];
            assert_non_null(
                strstr(str(pp, pp->function[l2->line[0]->function_id - 1]->name), "[truncated"));
            bool has_pid = false, has_service = false, has_thread = false;
            for (size_t k = 0; k < sm->n_label; k++) {
                const char *key = str(pp, sm->label[k]->key), *v = str(pp, sm->label[k]->str);
                has_pid |= strcmp(key, "pid") == 0 && atoi(v) == getpid();
                has_service |= strcmp(key, "service") == 0 && strcmp(v, "test_aggregate") == 0;
                has_thread |= strcmp(key, "thread") == 0 && strcmp(v, "worker-1") == 0;
            }
            assert_true(has_pid && has_service && has_thread);
        } else if (strstr(fn, "[lost samples")) {
            lost = true;
            assert_int_equal(sm->value[0], 5);
        }
    }
    assert_true(leaf_first);
    assert_true(lost);
    assert_int_equal(total, 9);
    assert_int_equal(pst.truncated_samples, 4);
    assert_int_equal(pst.unnamed_frames, 0);
    /* The first mapping is the executable, as pprof expects. */
    assert_non_null(strstr(str(pp, pp->mapping[0]->filename), "test_aggregate"));

    /* Once its profile is written its stacks go (the worker frees them
     * before naming the next process); its mappings and their binaries
     * stay until the window is freed. */
    size_t nmaps = ap->nmaps;
    assert_true(nmaps > 0);
    agg_window__drop_stacks(w, 0);
    assert_null(ap->stacks);
    assert_null(ap->off_stacks);
    assert_int_equal(ap->nmaps, nmaps);
    assert_non_null(ap->maps[0].bin);
    assert_int_equal(ap->samples, 4);
    agg_window__drop_stacks(w, 1); /* no such process: nothing */

    perftools__profiles__profile__free_unpacked(pp, NULL);
    buf__free(&out);
    buf__free(&raw);
    pprof_writer__free(pw);
    agg_window__free(w);
    procs__free(ps);
    binary_cache__free(bc);
    symbolizer__free(sym);
}

static void test_kernel_frames_kept_when_asked(void **state)
{
    (void)state;
    struct binary_cache *bc = binary_cache__new("/proc");
    struct procs *ps = procs__new(bc, "/proc", NULL);
    struct agg_window *w = agg_window__new(0, true);
    struct cx_sample s;
    struct proc *p = procs__get(ps, getpid(), NULL, 1);

    fill(&s, 100, true);
    assert_int_equal(agg_window__add(w, ps, p, &s, 2, NULL), 0);
    const struct agg_stack *st = hmap__key(w->procs[0]->stacks, 0, NULL);
    assert_int_equal(st->nframes, 4);
    assert_int_equal(st->frames[0].kind, CX_FRAME_KERNEL);
    assert_int_equal(st->frames[0].flags, 0);            /* the leaf: exact */
    assert_int_equal(st->frames[1].flags, 0);            /* the user leaf: exact */
    assert_int_equal(st->frames[2].flags, AGG_F_RETURN); /* a caller */
    assert_int_not_equal(st->frames[1].map, AGG_NO_MAP);
    agg_window__free(w);
    procs__free(ps);
    binary_cache__free(bc);
}

/* The name of the outermost line of the sample's i-th location. */
static const char *loc_fn(const Perftools__Profiles__Profile *pp,
                          const Perftools__Profiles__Sample *sm, size_t i,
                          const Perftools__Profiles__Function **fn)
{
    Perftools__Profiles__Location *l = pp->location[sm->location_id[i] - 1];
    *fn = pp->function[l->line[0]->function_id - 1];
    return str(pp, (*fn)->name);
}

/* JIT code: frames in this process's anonymous executable memory, named
 * from its /tmp/perf-PID.map (V8's names split into function and
 * file:line, HotSpot's Interpreter as [interpreter]); an address the map
 * does not hold stays [anon]+0xADDR. */
static void test_jit_frames_from_perf_map(void **state)
{
    (void)state;
    char path[64];
    uint8_t *code = mmap(NULL, 0x4000, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t base = (uint64_t)(uintptr_t)code;
    FILE *f;

    assert_true(code != MAP_FAILED);
    snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%llx 100 JS:*hot_a /app/work.js:3:15\n", (unsigned long long)base + 0x100);
    fprintf(f, "0x%016llx 0x100 Interpreter\n", (unsigned long long)base + 0x1000);
    fprintf(f, "%llX 80 instance void [App] App.Worker::Run()[Optimized]\n",
            (unsigned long long)base + 0x2000);
    fclose(f);

    struct binary_cache *bc = binary_cache__new("/proc");
    struct procs *ps = procs__new(bc, "/proc", NULL);
    struct agg_window *w = agg_window__new(0, false);
    struct proc *p = procs__get(ps, getpid(), NULL, 1);
    struct cx_sample s;

    memset(&s, 0, sizeof(s));
    s.hdr.kind = CX_REC_SAMPLE;
    s.hdr.tgid = getpid();
    s.hdr.tid = getpid();
    s.frames[0] =
        (struct cx_frame){.addr = base + 0x140, .kind = CX_FRAME_NATIVE, .aux = 0}; /* hot_a */
    s.frames[1] =
        (struct cx_frame){.addr = base + 0x2010, .kind = CX_FRAME_NATIVE, .aux = 0}; /* .NET's */
    s.frames[2] = (struct cx_frame){
        .addr = base + 0x1080, .kind = CX_FRAME_NATIVE, .aux = 0}; /* interpreter */
    s.frames[3] = (struct cx_frame){
        .addr = base + 0x3000, .kind = CX_FRAME_NATIVE, .aux = 0}; /* not in the map */
    s.n_user = 4;
    assert_int_equal(agg_window__add(w, ps, p, &s, 2, NULL), 0);

    struct symbolizer *sym = symbolizer__new();
    struct rt_namers *rt = rt_namers__new("/proc");
    struct profile_ctx ctx = {sym, NULL, "testhost", 10000000, rt, 1};
    struct profile_stats pst = {0};
    struct pprof_writer *pw = profile__writer(&ctx, 0, 1);
    assert_int_equal(profile__add_proc(pw, &ctx, w->procs[0], &pst), 0);
    struct buf out, raw;
    buf__init(&out, 1 << 20);
    buf__init(&raw, 1 << 20);
    assert_int_equal(pprof_writer__encode(pw, &out, true), 0);
    assert_int_equal(gz__decompress(out.data, out.len, &raw, 0), 0);
    Perftools__Profiles__Profile *pp =
        perftools__profiles__profile__unpack(NULL, raw.len, (uint8_t *)raw.data);
    assert_non_null(pp);
    assert_int_equal(pp->n_sample, 1);
    const Perftools__Profiles__Sample *sm = pp->sample[0];
    const Perftools__Profiles__Function *fn;
    assert_int_equal(sm->n_location_id, 4);
    assert_string_equal(loc_fn(pp, sm, 0, &fn), "hot_a");
    assert_string_equal(str(pp, fn->filename), "/app/work.js");
    assert_string_equal(str(pp, fn->system_name), "JS:*hot_a /app/work.js:3:15");
    assert_int_equal(pp->location[sm->location_id[0] - 1]->line[0]->line, 3);
    assert_string_equal(loc_fn(pp, sm, 1, &fn), "instance void [App] App.Worker::Run()[Optimized]");
    assert_string_equal(loc_fn(pp, sm, 2, &fn), "[interpreter]");
    assert_non_null(strstr(loc_fn(pp, sm, 3, &fn), "[anon]+0x"));
    char stats[128];
    profile_stats__runtimes_str(&pst, stats, sizeof(stats));
    assert_non_null(strstr(stats, "jit_frames=75.0%"));
    assert_int_equal(pst.unnamed_frames, 1);

    perftools__profiles__profile__free_unpacked(pp, NULL);
    buf__free(&out);
    buf__free(&raw);
    pprof_writer__free(pw);
    agg_window__free(w);
    procs__free(ps);
    binary_cache__free(bc);
    symbolizer__free(sym);
    rt_namers__free(rt);
    unlink(path);
    munmap(code, 0x4000);
}

/* The window's hook for runtime frames: the address kept, no object. */
static int py_hook(void *ctx, const struct proc *p, const struct cx_frame *f,
                   struct rt_frame_out *out)
{
    (void)ctx;
    (void)p;
    *out = (struct rt_frame_out){f->addr, NULL, 0};
    return 0;
}

/* Code of this binary that is in no function (an assembler-local label has
 * no symbol): frames there have no name. */
__asm__(".section .text.cx_no_function, \"ax\", @progbits\n"
        ".p2align 4\n"
        /* a function with a size ends where the nameless code starts, so
         * no symbol without a size before it lends it its name */
        ".type cx_sized_before, @function\n"
        "cx_sized_before:\n"
        "ret\n"
        ".size cx_sized_before, 1\n"
        ".Lcx_no_function:\n"
        ".fill 64, 1, 0x90\n"
        ".section .data.rel.ro\n"
        ".p2align 3\n"
        "cx_no_function_at:\n"
        ".quad .Lcx_no_function\n"
        ".text\n");
extern const uint64_t cx_no_function_at;

/* An interpreter's frames without a name, above the outermost runtime frame
 * and in the binary that calls runtime frames (this test binary here), get
 * the file "[interpreter]PATH"; the same frame below the runtime frames,
 * unnamed frames of another mapping (anonymous memory) and named frames do
 * not. */
static void test_interp_frames_marked(void **state)
{
    (void)state;
    uint8_t *anon = mmap(NULL, 0x1000, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t nofn = cx_no_function_at + 8;
    assert_true(anon != MAP_FAILED);
    struct binary_cache *bc = binary_cache__new("/proc");
    struct procs *ps = procs__new(bc, "/proc", NULL);
    struct agg_window *w = agg_window__new(0, false);
    struct proc *p = procs__get(ps, getpid(), NULL, 1);
    struct agg_frame_hook hook = {py_hook, NULL};
    struct cx_sample s;

    memset(&s, 0, sizeof(s));
    s.hdr.kind = CX_REC_SAMPLE;
    s.hdr.tgid = getpid();
    s.hdr.tid = getpid();
    const struct cx_frame fr[] = {
        {.addr = nofn, .kind = CX_FRAME_NATIVE},                                    /* 0: marked */
        {.addr = (uint64_t)(uintptr_t)anon + 8, .kind = CX_FRAME_NATIVE},           /* 1: not its */
        {.addr = 0x1111, .kind = CX_FRAME_PYTHON},                                  /* 2 */
        {.addr = nofn + 16, .kind = CX_FRAME_NATIVE},                               /* 3: marked */
        {.addr = (uint64_t)(uintptr_t)cx_test_leaf + 2, .kind = CX_FRAME_NATIVE},   /* 4: named */
        {.addr = 0x2222, .kind = CX_FRAME_PYTHON},                                  /* 5 */
        {.addr = (uint64_t)(uintptr_t)cx_test_caller + 8, .kind = CX_FRAME_NATIVE}, /* 6 */
        {.addr = nofn, .kind = CX_FRAME_NATIVE}, /* 7: below the program's frames */
    };
    memcpy(s.frames, fr, sizeof(fr));
    s.n_user = 8;
    assert_int_equal(agg_window__add(w, ps, p, &s, 2, &hook), 0);
    assert_int_equal(w->nprocs, 1);

    struct symbolizer *sym = symbolizer__new();
    struct profile_ctx ctx = {sym, NULL, "testhost", 10000000, NULL, 1};
    struct profile_stats pst = {0};
    struct pprof_writer *pw = profile__writer(&ctx, 0, 1);
    assert_int_equal(profile__add_proc(pw, &ctx, w->procs[0], &pst), 0);
    struct buf out, raw;
    buf__init(&out, 1 << 20);
    buf__init(&raw, 1 << 20);
    assert_int_equal(pprof_writer__encode(pw, &out, true), 0);
    assert_int_equal(gz__decompress(out.data, out.len, &raw, 0), 0);
    Perftools__Profiles__Profile *pp =
        perftools__profiles__profile__unpack(NULL, raw.len, (uint8_t *)raw.data);
    assert_non_null(pp);
    assert_int_equal(pp->n_sample, 1);
    const Perftools__Profiles__Sample *sm = pp->sample[0];
    const Perftools__Profiles__Function *fn;
    assert_int_equal(sm->n_location_id, 8);
    const bool marked[8] = {true, false, false, true, false, false, false, false};
    for (int j = 0; j < 8; j++) {
        const char *name = loc_fn(pp, sm, j, &fn), *file = str(pp, fn->filename);
        bool is = strncmp(file, "[interpreter]", 13) == 0;
        if (is != marked[j])
            fail_msg("frame %d (%s, %s): marked %d, expected %d", j, name, file, is, marked[j]);
        if (is) {
            assert_non_null(strstr(name, "test_aggregate+0x"));
            assert_non_null(strstr(file + 13, "/test_aggregate"));
        }
    }
    /* The same address marked above the program's frames and not below. */
    assert_true(sm->location_id[0] != sm->location_id[7]);
    assert_non_null(strstr(loc_fn(pp, sm, 7, &fn), "test_aggregate+0x"));
    assert_int_equal(pst.interp_frames, 2);
    char stats[128];
    profile_stats__runtimes_str(&pst, stats, sizeof(stats));
    assert_non_null(strstr(stats, "interp_frames=25.0%"));

    perftools__profiles__profile__free_unpacked(pp, NULL);
    buf__free(&out);
    buf__free(&raw);
    pprof_writer__free(pw);
    agg_window__free(w);
    procs__free(ps);
    binary_cache__free(bc);
    symbolizer__free(sym);
    munmap(anon, 0x1000);
}

/* Off-CPU (OFFCPU_CONTRACT): with ctx.off_cpu, a third sample type
 * off_cpu/nanoseconds; an off-CPU stack is [off-CPU: CLASS], then the
 * kernel frames (kept when asked), then the user frames, with values
 * [0, 0, ns]; a CPU sample [n, cpu_ns, 0]. Without it, the two types. */
static void test_off_cpu_samples(void **state)
{
    (void)state;
    struct binary_cache *bc = binary_cache__new("/proc");
    struct procs *ps = procs__new(bc, "/proc", NULL);
    struct agg_window *w = agg_window__new(1700000000000000000ull, true);
    struct cx_sample s;
    struct proc *p = procs__get(ps, getpid(), "x", 1);

    assert_non_null(p);
    fill(&s, 100, true);
    assert_int_equal(agg_window__add(w, ps, p, &s, 2, NULL), 0);
    fill(&s, 100, true);
    s.hdr.kind = CX_REC_OFFCPU;
    s.off_class = CX_OFF_LOCK;
    assert_int_equal(agg_window__add_off(w, ps, p, &s, 3000000, 2, 2, NULL), 0);
    assert_int_equal(agg_window__add_off(w, ps, p, &s, 4000000, 1, 2, NULL), 0);
    s.off_class = 99; /* out of range: other */
    assert_int_equal(agg_window__add_off(w, ps, p, &s, 1000, 1, 2, NULL), 0);
    w->end_ns = w->start_ns + 60000000000ull;
    struct agg_proc *ap = w->procs[0];
    assert_int_equal(ap->off_ns, 7001000);
    assert_int_equal(w->off_blocks, 4);
    assert_int_equal(hmap__len(ap->off_stacks), 2);

    struct symbolizer *sym = symbolizer__new();
    for (int on = 0; on < 2; on++) {
        struct profile_ctx ctx = {sym, NULL, "testhost", 10000000};
        ctx.off_cpu = on;
        struct profile_stats pst = {0};
        struct pprof_writer *pw = profile__writer(&ctx, w->start_ns, w->end_ns - w->start_ns);
        assert_int_equal(profile__add_proc(pw, &ctx, ap, &pst), 0);
        struct buf out, raw;
        buf__init(&out, 1 << 20);
        buf__init(&raw, 1 << 20);
        assert_int_equal(pprof_writer__encode(pw, &out, true), 0);
        assert_int_equal(gz__decompress(out.data, out.len, &raw, 0), 0);
        Perftools__Profiles__Profile *pp =
            perftools__profiles__profile__unpack(NULL, raw.len, (uint8_t *)raw.data);
        assert_non_null(pp);
        assert_int_equal(pp->n_sample_type, on ? 3 : 2);
        assert_string_equal(str(pp, pp->sample_type[0]->type), "samples");
        assert_string_equal(str(pp, pp->sample_type[1]->type), "cpu");
        if (on) {
            assert_string_equal(str(pp, pp->sample_type[2]->type), "off_cpu");
            assert_string_equal(str(pp, pp->sample_type[2]->unit), "nanoseconds");
        }
        assert_int_equal(pp->n_sample, on ? 3 : 1);
        bool lock = false, other = false;
        for (size_t i = 0; i < pp->n_sample; i++) {
            Perftools__Profiles__Sample *sm = pp->sample[i];
            const Perftools__Profiles__Function *fn;
            const char *f0 = loc_fn(pp, sm, 0, &fn);
            if (sm->value[0]) {
                assert_int_equal(sm->value[0], 1);
                assert_int_equal(sm->value[1], 10000000);
                if (on)
                    assert_int_equal(sm->value[2], 0);
                assert_null(strstr(f0, "off-CPU"));
                continue;
            }
            assert_int_equal(sm->value[1], 0);
            /* [off-CPU: CLASS], the kernel frame, the user frames. */
            assert_int_equal(sm->n_location_id, 5);
            assert_string_equal(loc_fn(pp, sm, 2, &fn), "cx_test_leaf");
            if (strcmp(f0, "[off-CPU: lock]") == 0) {
                lock = true;
                assert_int_equal(sm->value[2], 7000000);
            } else {
                assert_string_equal(f0, "[off-CPU: other]");
                other = true;
                assert_int_equal(sm->value[2], 1000);
            }
        }
        assert_true(lock == on && other == on);
        /* Off-CPU stacks stay out of the CPU samples' statistics. */
        assert_int_equal(pst.samples, 1);
        perftools__profiles__profile__free_unpacked(pp, NULL);
        buf__free(&out);
        buf__free(&raw);
        pprof_writer__free(pw);
    }
    agg_window__free(w);
    procs__free(ps);
    binary_cache__free(bc);
    symbolizer__free(sym);
}

/* Encodes ap's profile through w (reset first when reset), raw, into out. */
static void encode_proc(struct pprof_writer *w, bool reset, const struct profile_ctx *ctx,
                        const struct agg_window *win, const struct agg_proc *ap, struct buf *out)
{
    struct profile_stats pst = {0};

    if (reset)
        assert_int_equal(profile__writer_reset(w, ctx, win->start_ns, 60000000000ull), 0);
    assert_int_equal(profile__add_proc(w, ctx, ap, &pst), 0);
    buf__reset(out);
    assert_int_equal(pprof_writer__encode(w, out, false), 0);
}

static bool has_function(const struct buf *b, const char *name)
{
    Perftools__Profiles__Profile *pp =
        perftools__profiles__profile__unpack(NULL, b->len, (const uint8_t *)b->data);
    bool found = false;

    assert_non_null(pp);
    for (size_t i = 0; i < pp->n_function; i++)
        found |= strcmp(str(pp, pp->function[i]->name), name) == 0;
    perftools__profiles__profile__free_unpacked(pp, NULL);
    return found;
}

/* The profiles of one window share their frames' names (profile_cache.h):
 * the second process of a binary is named from the cache, byte for byte
 * as without it, and a writer reset between profiles writes as a new one. */
static void test_frame_names_shared_in_window(void **state)
{
    (void)state;
    struct binary_cache *bc = binary_cache__new("/proc");
    struct procs *ps = procs__new(bc, "/proc", NULL);
    struct agg_window *w = agg_window__new(1700000000000000000ull, false);
    struct symbolizer *sym = symbolizer__new();
    struct profile_cache *pc = profile_cache__new();
    struct profile_ctx plain = {sym, NULL, "testhost", 10000000}, cached = plain;
    struct cx_sample s;
    struct buf want, got;

    assert_non_null(pc);
    cached.cache = pc;
    struct proc *p = procs__get(ps, getpid(), "x", 1);
    assert_non_null(p);
    fill(&s, 100, false);
    assert_int_equal(agg_window__add(w, ps, p, &s, 2, NULL), 0);
    const struct agg_proc *ap = w->procs[0];
    buf__init(&want, 1 << 20);
    buf__init(&got, 1 << 20);

    struct pprof_writer *fresh = profile__writer(&plain, w->start_ns, 60000000000ull);
    encode_proc(fresh, false, &plain, w, ap, &want);
    pprof_writer__free(fresh);
    assert_true(has_function(&want, "cx_test_leaf"));

    /* First through the cache: it keeps the two named frames. */
    struct pprof_writer *reused = profile__writer(&cached, w->start_ns, 60000000000ull);
    encode_proc(reused, false, &cached, w, ap, &got);
    assert_int_equal(profile_cache__len(pc), 2);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.data, want.data, want.len);
    /* Again (another process of the binary): from the cache, the same. */
    encode_proc(reused, true, &cached, w, ap, &got);
    assert_int_equal(profile_cache__len(pc), 2);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.data, want.data, want.len);

    /* What the cache holds is what the profile shows: a name put for the
     * leaf's (binary, offset) replaces the symbolizer's. */
    profile_cache__window_end(pc);
    assert_int_equal(profile_cache__len(pc), 0);
    const struct agg_stack *st = hmap__key(ap->stacks, 0, NULL);
    const struct agg_frame *leaf = &st->frames[0];
    const struct agg_map *m = &ap->maps[leaf->map];
    uint64_t off = leaf->addr - m->start + m->offset;
    const struct pprof_line *lines;
    bool entry;
    struct pprof_line seeded = {"seeded_leaf", NULL, "seeded.c", 7};
    profile_cache__put(pc, m->bin, off, false, &seeded, 1, false);
    assert_int_equal(profile_cache__get(pc, m->bin, off, false, &lines, &entry), 1);
    assert_string_equal(lines[0].function, "seeded_leaf");
    /* Another offset, the same offset as a return address, another
     * binary: not kept. */
    assert_int_equal(profile_cache__get(pc, m->bin, off + 1, false, &lines, &entry), 0);
    assert_int_equal(profile_cache__get(pc, m->bin, off, true, &lines, &entry), 0);
    assert_int_equal(profile_cache__get(pc, (const struct binary *)pc, off, false, &lines, &entry),
                     0);
    encode_proc(reused, true, &cached, w, ap, &got);
    assert_true(has_function(&got, "seeded_leaf"));
    assert_false(has_function(&got, "cx_test_leaf"));
    assert_true(has_function(&got, "cx_test_caller"));

    /* A new window forgets it. */
    profile_cache__window_end(pc);
    encode_proc(reused, true, &cached, w, ap, &got);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.data, want.data, want.len);

    pprof_writer__free(reused);
    buf__free(&want);
    buf__free(&got);
    profile_cache__free(pc);
    agg_window__free(w);
    procs__free(ps);
    binary_cache__free(bc);
    symbolizer__free(sym);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_to_pprof),
        cmocka_unit_test(test_off_cpu_samples),
        cmocka_unit_test(test_kernel_frames_kept_when_asked),
        cmocka_unit_test(test_jit_frames_from_perf_map),
        cmocka_unit_test(test_interp_frames_marked),
        cmocka_unit_test(test_frame_names_shared_in_window),
    };
    return cmocka_run_group_tests_name("aggregate", tests, NULL, NULL);
}

#include "sampler.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/log.h"
#include "caps.h"
#include "dither.h"
#include "offhook.h"
#include "preflight.h"
#include "ring.h"
#include "sampler.skel.h"
#include "unwind/pac_mask.h"

/* The ring buffer: 1 MiB a CPU, 4 to 64 MiB. A record is a whole
 * struct cx_sample (about 10 KiB) whatever its depth, so a CPU at 100 Hz
 * puts ~1 MiB a second through it and the agent drains it every 100 ms
 * (sooner when it is half full): a tenth of that is in use at a time. All
 * its pages count in the agent's RSS from the start (the kernel maps them
 * at once), once each (ring.h: libbpf's consumer mapped them twice). */
static unsigned ringbuf_bytes(int ncpus)
{
    unsigned want = (unsigned)(ncpus > 64 ? 64 : ncpus) << 20, bytes = 4u << 20;
    while (bytes < want)
        bytes <<= 1; /* a power of two, as BPF wants */
    return bytes;
}

struct sampler {
    struct sampler_bpf *skel;
    struct ring *rb;
    struct bpf_link **links;
    int *pfds;
    unsigned npfds; /* possible CPUs: pfds[cpu], -1 for one not attached */
    unsigned ncpus;
    sampler_record_fn fn;
    void *ctx;
    bool dithered, vma, off, fault_hook;
    size_t off_start_len; /* the off_start array's mapped bytes (map_off_start) */
    struct dither dither;
    uint64_t segment_start_ns, segment_ns; /* the last draw; the last segment's length */
    struct offhook *hook;                  /* the sched_switch hook's duty cycle (off only) */
};

/* Maps the off_start array (page-rounded, as the kernel maps an array's
 * values) and sets off_start_len; NULL with errno set on failure. Mapped only
 * while a window's end credits blocks: the kernel maps all its pages at once
 * and keeps none back, so kept mapped it was 3 MiB of the agent's RSS at
 * every moment (its 65,536 slots), at the first window's naming too. */
static void *map_off_start(struct sampler *s)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t len = CX_OFF_START_WAY * sizeof(struct cx_off_start_set);
    void *m;

    len = (len + page - 1) / page * page;
    m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(s->skel->maps.off_start),
             0);
    if (m == MAP_FAILED)
        return NULL;
    s->off_start_len = len;
    return m;
}

static int on_record(void *ctx, void *data, size_t size)
{
    struct sampler *s = ctx;

    if (size < sizeof(struct cx_record_hdr))
        return 0;
    return s->fn(s->ctx, data, size);
}

/* libbpf prints through this; its warnings go to our log at debug level so a
 * failed load can be explained with --log-level debug. A verifier's log
 * comes as one message of many lines, the reason at its end: its first and
 * last lines are logged, each on its own. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    enum { HEAD = 8, TAIL = 40 };
    char *text = NULL;
    size_t nlines = 1, i = 0;

    if (level == LIBBPF_DEBUG || vasprintf(&text, fmt, ap) < 0)
        return 0;
    for (const char *p = text; *p; p++)
        nlines += *p == '\n' && p[1];
    for (char *line = text; line && *line; i++) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (i < HEAD || i + TAIL >= nlines)
            log_debug("libbpf: %s", line);
        else if (i == HEAD)
            log_debug("libbpf: [... %zu lines ...]", nlines - HEAD - TAIL);
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return 0;
}

static int check_privileges(char *err, size_t errlen)
{
    /* CAP_BPF and CAP_PERFMON (5.8+) or, before them, CAP_SYS_ADMIN. */
    bool bpf = caps__have(CAP_BPF) || caps__have(CAP_SYS_ADMIN);
    bool perf = caps__have(CAP_PERFMON) || caps__have(CAP_SYS_ADMIN);

    if (bpf && perf)
        return 0;
    snprintf(
        err, errlen,
        "missing privileges: need %s%s%s (or CAP_SYS_ADMIN, or run as root); reading other "
        "processes' binaries also needs CAP_SYS_ADMIN or CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH",
        bpf ? "" : "CAP_BPF", !bpf && !perf ? " and " : "", perf ? "" : "CAP_PERFMON");
    return -1;
}

/* The oldest kernel the agent is tested on (make test-kernels). */
#define KERNEL_FLOOR_MAJOR 5
#define KERNEL_FLOOR_MINOR 10

static int check_kernel(char *err, size_t errlen)
{
    struct utsname u;
    unsigned major = 0, minor = 0;

    if (uname(&u) == 0 && sscanf(u.release, "%u.%u", &major, &minor) == 2 &&
        (major < KERNEL_FLOOR_MAJOR ||
         (major == KERNEL_FLOOR_MAJOR && minor < KERNEL_FLOOR_MINOR))) {
        snprintf(err, errlen,
                 "Linux %u.%u is older than the oldest kernel the agent runs on, %d.%d (see the "
                 "README's Requirements)",
                 major, minor, KERNEL_FLOOR_MAJOR, KERNEL_FLOOR_MINOR);
        return -1;
    }
    if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
        snprintf(err, errlen,
                 "the kernel has no BTF (/sys/kernel/btf/vmlinux is missing): build it with "
                 "CONFIG_DEBUG_INFO_BTF=y (most distributions since 2020 do)");
        return -1;
    }
    if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1) {
        snprintf(err, errlen, "the kernel has no BPF ring buffer (needs Linux 5.8 or newer)");
        return -1;
    }
    return 0;
}

/* Whether a perf_event program may use a hash map that is not
 * preallocated (Linux 6.1 on: BPF's own allocator). Before, the verifier
 * refuses the program: "perf_event programs can only use preallocated hash
 * map". Probed with the smallest such program. */
static bool nonprealloc_maps_ok(void)
{
    LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_NO_PREALLOC);
    int map = bpf_map_create(BPF_MAP_TYPE_HASH, "cx_probe", 4, 4, 1, &mo), prog;
    if (map < 0)
        return false;
    struct bpf_insn insns[] = {
        /* *(u32 *)(fp - 4) = 0; r2 = fp - 4; r1 = map; call lookup; r0 = 0; exit */
        {.code = BPF_ST | BPF_MEM | BPF_W, .dst_reg = BPF_REG_10, .off = -4, .imm = 0},
        {.code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10},
        {.code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .imm = -4},
        {.code = BPF_LD | BPF_DW | BPF_IMM,
         .dst_reg = BPF_REG_1,
         .src_reg = BPF_PSEUDO_MAP_FD,
         .imm = map},
        {.code = 0},
        {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_map_lookup_elem},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT},
    };
    prog = bpf_prog_load(BPF_PROG_TYPE_PERF_EVENT, "cx_probe", "GPL", insns,
                         sizeof(insns) / sizeof(insns[0]), NULL);
    close(map);
    if (prog < 0)
        return false;
    close(prog);
    return true;
}

/* THREAD_SIZE, the kernel stack's size: 16 KiB on x86_64 and arm64, twice
 * that with KASAN (the kernel's config says, where it can be read); on arm64
 * with vmapped stacks at least a page (64 KiB with 64 KiB pages). */
static unsigned long kernel_thread_size(void)
{
    char path[256], line[256];
    struct utsname u;
    unsigned long size = 16384;
    bool vmap_stack = false;
    FILE *f;

    if (uname(&u))
        return size;
    snprintf(path, sizeof(path), "/boot/config-%s", u.release);
    f = fopen(path, "re");
    if (!f)
        return size;
    while (fgets(line, sizeof(line), f)) {
        if (strcmp(line, "CONFIG_KASAN=y\n") == 0)
            size = 32768;
        else if (strcmp(line, "CONFIG_VMAP_STACK=y\n") == 0)
            vmap_stack = true;
    }
    fclose(f);
    /* x86_64's pages are 4 KiB: this changes nothing there. */
    long page = sysconf(_SC_PAGESIZE);
    if (vmap_stack && page > 0 && (unsigned long)page > size)
        size = (unsigned long)page;
    return size;
}

/* Before Linux 6.1 the hash maps the sampler reads are preallocated: each
 * entry's memory is taken at load, so they are made smaller. */
#define OLD_KERNEL_UNWIND_PROCS 2048
#define OLD_KERNEL_PY_PROCS 4096
#define OLD_KERNEL_V8_PROCS 1024

/* What the kernel does not have, and the path taken instead (logged). */
static void adapt_to_kernel(struct sampler_bpf *skel)
{
    struct utsname u;
    const char *release = uname(&u) ? "?" : u.release;

    if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, NULL) != 1) {
        skel->rodata->thread_size = kernel_thread_size();
        log_info("sampler: kernel %s: no bpf_task_pt_regs (Linux 5.15): user registers read "
                 "from the top of the task's kernel stack (%lu KiB)",
                 release, (unsigned long)skel->rodata->thread_size >> 10);
    }
    if (!nonprealloc_maps_ok()) {
        bpf_map__set_map_flags(skel->maps.proc_unwind, 0);
        bpf_map__set_max_entries(skel->maps.proc_unwind, OLD_KERNEL_UNWIND_PROCS);
        bpf_map__set_map_flags(skel->maps.py_procs, 0);
        bpf_map__set_max_entries(skel->maps.py_procs, OLD_KERNEL_PY_PROCS);
        bpf_map__set_map_flags(skel->maps.v8_procs, 0);
        bpf_map__set_max_entries(skel->maps.v8_procs, OLD_KERNEL_V8_PROCS);
        log_info("sampler: kernel %s: perf_event programs take only preallocated hash maps "
                 "(before Linux 6.1): CFI walks for %d processes at once, Python walks for %d, "
                 "V8 walks for %d",
                 release, OLD_KERNEL_UNWIND_PROCS, OLD_KERNEL_PY_PROCS, OLD_KERNEL_V8_PROCS);
    }
}

/* Off-CPU's programs and maps on (off) or out of the way (off false, or
 * a kernel without what they need: *off is cleared, logged). */
static void adapt_off_cpu(struct sampler *s, const struct sampler_opts *opts, bool *off)
{
    struct sampler_bpf *skel = s->skel;

    if (*off && libbpf_find_vmlinux_btf_id("sched_switch", BPF_TRACE_RAW_TP) <= 0) {
        log_warn("sampler: off-CPU time off: the kernel has no BTF-typed sched_switch "
                 "tracepoint (tp_btf, Linux 5.5)");
        *off = false;
    }
    bpf_program__set_autoload(skel->progs.cx_on_switch, *off);
    bpf_program__set_autoload(skel->progs.cx_off_walk_user, *off);
    /* Only ever tail-called; cx_on_switch attached by the duty cycle. */
    bpf_program__set_autoattach(skel->progs.cx_off_walk_user, false);
    bpf_program__set_autoattach(skel->progs.cx_on_switch, false);
    if (!*off) {
        bpf_map__set_max_entries(skel->maps.off_start, 1);
        bpf_map__set_max_entries(skel->maps.off_sums, 1);
        return;
    }
    skel->rodata->off_min_ns = opts->off_min_ns;
    skel->rodata->off_kernel_stacks = opts->kernel_stacks;
    if (opts->off_walks_per_sec) {
        uint64_t per = (uint64_t)opts->off_walks_per_sec * (CX_OFF_PERIOD_NS / 1000000) / 1000;
        skel->rodata->off_walks_per_period = per < 1 ? 1 : per > UINT32_MAX ? UINT32_MAX : per;
    }
}

/* The duty cycle started (off only): its first slot watched. */
static int duty_start(struct sampler *s, const struct sampler_opts *opts)
{
    struct offduty_opts o = {(uint64_t)opts->off_duty_slot_ms * 1000000, opts->off_duty_rate,
                             opts->off_duty_fixed_pct * CX_OFF_ONE / 100};

    s->hook = offhook__start(s->skel->progs.cx_on_switch, (uint64_t *)&s->skel->bss->off_duty, &o);
    return s->hook ? 0 : -errno;
}

/* Opens the BPF object, sets it up for opts and this kernel (off: with
 * off-CPU's programs) and loads it, the walkers in their program arrays.
 * Returns 0, or -1 with err filled (s->skel then for the caller to free). */
static int open_load(struct sampler *s, const struct sampler_opts *opts, bool off, char *err,
                     size_t errlen)
{
    int r;

    s->skel = sampler_bpf__open();
    if (!s->skel) {
        snprintf(err, errlen, "cannot open the BPF object: %s", strerror(errno));
        return -1;
    }
    s->skel->rodata->target_tgid = opts->only_tgid;
    adapt_to_kernel(s->skel);
    /* One of the two walkers is loaded: with bpf_find_vma where the kernel
     * has it (and CFI is on), else without, which every kernel takes. */
    s->vma = opts->cfi &&
             libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_find_vma, NULL) == 1;
    s->skel->rodata->use_vma = s->vma;
    bpf_program__set_autoload(s->skel->progs.cx_walk_user, !s->vma);
    bpf_program__set_autoload(s->skel->progs.cx_walk_user_vma, s->vma);
    bpf_program__set_autoload(s->skel->progs.cx_on_exec, !s->vma);
    bpf_program__set_autoload(s->skel->progs.cx_on_exec_vma, s->vma);
    /* Optional: without the tracepoint, new processes' first samples in
     * libraries rely on their one lookup a sample. */
    s->fault_hook = s->vma && libbpf_find_vmlinux_btf_id("page_fault_user", BPF_TRACE_RAW_TP) > 0;
    bpf_program__set_autoload(s->skel->progs.cx_on_fault, s->fault_hook);
    bpf_program__set_autoattach(s->skel->progs.cx_on_fault, false);
    if (!s->vma) {
        bpf_map__set_max_entries(s->skel->maps.file_unwind, 1);
        bpf_map__set_max_entries(s->skel->maps.vma_learned, 1);
        bpf_map__set_max_entries(s->skel->maps.fresh_tgids, 1);
    }
#if defined(__aarch64__)
    /* Return addresses signed by PAC are stripped with the kernel's mask. */
    enum pac_mask_source pac_src;
    s->skel->rodata->cx_pac_mask = pac_mask__get(&pac_src);
    log_info("sampler: pointer authentication mask 0x%016llx (%s)",
             (unsigned long long)s->skel->rodata->cx_pac_mask,
             pac_src == PAC_MASK_KERNEL   ? "the kernel's"
             : pac_src == PAC_MASK_NO_PAC ? "no PAC on this CPU"
                                          : "from the address size: ptrace refused");
#endif
    s->skel->rodata->ringbuf_wakeup_bytes = ringbuf_bytes(s->npfds) / 2;
    bpf_map__set_max_entries(s->skel->maps.events, ringbuf_bytes(s->npfds));
    adapt_off_cpu(s, opts, &off);
    r = sampler_bpf__load(s->skel);
    if (r) {
        snprintf(err, errlen,
                 "the kernel refused the BPF programs (%s); run with --log-level debug for the "
                 "verifier's log",
                 strerror(-r));
        return -1;
    }

    __u32 zero = 0;
    int walker =
        bpf_program__fd(s->vma ? s->skel->progs.cx_walk_user_vma : s->skel->progs.cx_walk_user);
    if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.walkers), &zero, &walker, BPF_ANY)) {
        snprintf(err, errlen, "cannot put the walker in its program array: %s", strerror(errno));
        return -1;
    }
    int off_walker = off ? bpf_program__fd(s->skel->progs.cx_off_walk_user) : -1;
    if (off &&
        bpf_map_update_elem(bpf_map__fd(s->skel->maps.off_walkers), &zero, &off_walker, BPF_ANY)) {
        snprintf(err, errlen, "cannot put the off-CPU walker in its program array: %s",
                 strerror(errno));
        return -1;
    }
    if (off) {
        /* Mapped here once to fail early; then only for each credit. */
        void *m = map_off_start(s);
        if (!m) {
            snprintf(err, errlen, "cannot map the off-CPU start array: %s", strerror(errno));
            return -1;
        }
        munmap(m, s->off_start_len);
    }
    s->off = off;
    return 0;
}

struct sampler *sampler__open(const struct sampler_opts *opts, sampler_record_fn fn, void *ctx,
                              char *err, size_t errlen)
{
    struct sampler *s = NULL;
    int r, ncpus;

    libbpf_set_print(libbpf_print);
    /* A refused bpf() or perf_event_open() is explained as such (seccomp,
     * capabilities, paranoid, lockdown), not as a kernel lacking a feature. */
    if (check_privileges(err, errlen) || preflight__bpf(err, errlen) ||
        preflight__perf_event(err, errlen) || check_kernel(err, errlen))
        return NULL;
    ncpus = libbpf_num_possible_cpus();
    if (ncpus <= 0) {
        snprintf(err, errlen, "cannot count CPUs: %s", strerror(-ncpus));
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        goto oom;
    s->fn = fn;
    s->ctx = ctx;
    s->ncpus = ncpus;
    s->npfds = ncpus;
    s->dithered = !opts->fixed_period;
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
        seed = clock__mono_ns() ^ ((uint64_t)getpid() << 32);
    dither__init(&s->dither, opts->sample_rate_hz, seed);
    s->segment_ns = dither__segment_ns(&s->dither);
    s->segment_start_ns = clock__mono_ns();
    s->links = calloc(ncpus, sizeof(*s->links));
    s->pfds = malloc(ncpus * sizeof(*s->pfds));
    if (!s->links || !s->pfds)
        goto oom;
    for (int i = 0; i < ncpus; i++)
        s->pfds[i] = -1;

    if (open_load(s, opts, opts->off_cpu, err, errlen)) {
        if (!opts->off_cpu)
            goto fail;
        /* Never at the cost of CPU profiles: without off-CPU, once more. */
        log_warn("sampler: off-CPU time off: %s", err);
        sampler_bpf__destroy(s->skel);
        s->skel = NULL;
        if (open_load(s, opts, false, err, errlen))
            goto fail;
    }

    /* attach: the scheduler tracepoints, then one perf event per CPU */
    r = sampler_bpf__attach(s->skel);
    if (r == 0 && s->fault_hook) {
        s->skel->links.cx_on_fault = bpf_program__attach(s->skel->progs.cx_on_fault);
        if (!s->skel->links.cx_on_fault)
            log_info("sampler: cannot attach to page_fault_user (%s): a new process's libraries "
                     "are found by one lookup a sample",
                     strerror(errno));
    }
    if (r) {
        snprintf(err, errlen, "cannot attach the exec/exit tracepoints: %s", strerror(-r));
        goto fail;
    }
    if (s->off && (r = duty_start(s, opts))) {
        snprintf(err, errlen, "cannot attach the off-CPU hook (sched_switch): %s", strerror(-r));
        goto fail;
    }
    unsigned attached = 0;
    for (int cpu = 0; cpu < ncpus; cpu++) {
        struct perf_event_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.size = sizeof(attr);
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_CPU_CLOCK;
        /* A period in nanoseconds, not a frequency (the kernel's frequency
         * mode adjusts the period to the events counted, which for a clock
         * is just noise): every sample stands for 1/rate seconds of CPU, on
         * average when dithered. */
        attr.sample_period = s->dithered ? dither__period(&s->dither, s->segment_ns)
                                         : dither__sample_ns(opts->sample_rate_hz);
        attr.freq = 0;
        int fd = syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            if (errno == ENODEV || errno == ENOENT)
                continue; /* a possible CPU that is offline */
            snprintf(err, errlen, "perf_event_open(cpu-clock, cpu %d): %s", cpu, strerror(errno));
            goto fail;
        }
        s->pfds[cpu] = fd;
        s->links[cpu] = bpf_program__attach_perf_event(s->skel->progs.cx_on_cpu_clock, fd);
        if (!s->links[cpu]) {
            snprintf(err, errlen, "cannot attach to the perf event on cpu %d: %s", cpu,
                     strerror(errno));
            goto fail;
        }
        attached++;
    }
    if (attached == 0) {
        snprintf(err, errlen, "no online CPU accepted a cpu-clock perf event");
        goto fail;
    }
    s->ncpus = attached;
    s->rb = ring__new(bpf_map__fd(s->skel->maps.events), bpf_map__max_entries(s->skel->maps.events),
                      on_record, s);
    if (!s->rb) {
        snprintf(err, errlen, "cannot map the ring buffer: %s", strerror(errno));
        goto fail;
    }
    return s;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    sampler__free(s);
    return NULL;
}

/* Each CPU's period drawn again (dither.h). A failed ioctl leaves that CPU
 * at its last period, which is still a sampling rate near the right one. */
static void redraw_periods(struct sampler *s)
{
    uint64_t now = clock__mono_ns();

    uint64_t want = dither__segment_ns(&s->dither);

    if (!s->dithered || now - s->segment_start_ns < want)
        return;
    /* The next segment will last about as long as this one did (the poll's
     * cadence), within bounds that keep a stalled caller's gap out. */
    s->segment_ns = now - s->segment_start_ns;
    if (s->segment_ns > 2 * want)
        s->segment_ns = 2 * want;
    s->segment_start_ns = now;
    for (unsigned i = 0; i < s->npfds; i++) {
        uint64_t period = dither__period(&s->dither, s->segment_ns);
        if (s->pfds[i] >= 0 && ioctl(s->pfds[i], PERF_EVENT_IOC_PERIOD, &period) != 0)
            log_debug("sampler: PERF_EVENT_IOC_PERIOD on cpu %u: %s", i, strerror(errno));
    }
}

int sampler__poll(struct sampler *s, int timeout_ms)
{
    if (s->hook) {
        /* Back by the duty cycle's next slot. */
        uint64_t due = offhook__due_ns(s->hook), now = clock__mono_ns();
        int ms = due <= now ? 0 : (int)((due - now + 999999) / 1000000);
        if (timeout_ms < 0 || ms < timeout_ms)
            timeout_ms = ms;
    }
    int n = ring__poll(s->rb, timeout_ms);

    redraw_periods(s);
    if (s->hook)
        offhook__step(s->hook, clock__mono_ns());
    if (n < 0)
        return n;
    /* Samples do not wake the poll: after the wait, take whatever is there. */
    int m = ring__consume(s->rb);
    return m < 0 ? m : n + m;
}

int sampler__stats(struct sampler *s, uint64_t out[CX_STAT__COUNT])
{
    int fd = bpf_map__fd(s->skel->maps.stats);
    int ncpu = libbpf_num_possible_cpus();
    uint64_t *vals = calloc(ncpu, sizeof(uint64_t));

    if (!vals)
        return -ENOMEM;
    for (uint32_t k = 0; k < CX_STAT__COUNT; k++) {
        out[k] = 0;
        if (bpf_map_lookup_elem(fd, &k, vals) == 0) {
            for (int c = 0; c < ncpu; c++)
                out[k] += vals[c];
        }
    }
    free(vals);
    /* The blocks are counted in the budget (offcpu.bpf.h: no lookup of
     * the stats map for each). */
    if (s->off) {
        struct cx_off_budget *b = calloc(ncpu, sizeof(*b));
        uint32_t zero = 0;

        if (!b)
            return -ENOMEM;
        if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.off_budget), &zero, b) == 0) {
            for (int c = 0; c < ncpu; c++)
                out[CX_STAT_OFF_BLOCKS] += b[c].blocks;
        }
        free(b);
    }
    return 0;
}

int sampler__drain_lost(struct sampler *s, void (*fn)(void *ctx, uint32_t tgid, uint64_t lost),
                        void *ctx)
{
    int fd = bpf_map__fd(s->skel->maps.lost_by_tgid);
    uint32_t key, next;
    uint64_t val;
    uint32_t *keys = NULL;
    size_t n = 0, cap = 0;

    /* Collect the keys first: deleting while walking restarts the walk. */
    for (int r = bpf_map_get_next_key(fd, NULL, &next); r == 0;
         r = bpf_map_get_next_key(fd, &key, &next)) {
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            uint32_t *k = realloc(keys, cap * sizeof(*k));
            if (!k) {
                free(keys);
                return -ENOMEM;
            }
            keys = k;
        }
        keys[n++] = next;
        key = next;
    }
    for (size_t i = 0; i < n; i++) {
        if (bpf_map_lookup_and_delete_elem(fd, &keys[i], &val) == 0 ||
            (bpf_map_lookup_elem(fd, &keys[i], &val) == 0 &&
             bpf_map_delete_elem(fd, &keys[i]) == 0))
            fn(ctx, keys[i], val);
    }
    free(keys);
    return 0;
}

int sampler__skip(struct sampler *s, uint32_t tgid, bool skip)
{
    int fd = bpf_map__fd(s->skel->maps.skip_tgids);
    uint8_t one = 1;

    if (skip)
        return bpf_map_update_elem(fd, &tgid, &one, BPF_ANY) ? -errno : 0;
    if (bpf_map_delete_elem(fd, &tgid) && errno != ENOENT)
        return -errno;
    return 0;
}

void sampler__unwind_fds(const struct sampler *s, int *tables_fd, int *procs_fd)
{
    *tables_fd = bpf_map__fd(s->skel->maps.cfi_tables);
    *procs_fd = bpf_map__fd(s->skel->maps.proc_unwind);
}

bool sampler__off_cpu(const struct sampler *s)
{
    return s && s->off;
}

int sampler__drain_off(struct sampler *s,
                       void (*fn)(void *ctx, const struct cx_off_key *k,
                                  const struct cx_off_val *v),
                       void *ctx)
{
    int fd = bpf_map__fd(s->skel->maps.off_sums);
    struct cx_off_key key, next, *keys = NULL;
    struct cx_off_val val;
    size_t n = 0, cap = 0;
    int got = 0;

    if (!s->off)
        return 0;
    /* Keys first, as in sampler__drain_lost; the map's bound bounds them. */
    for (int r = bpf_map_get_next_key(fd, NULL, &next); r == 0 && n < CX_OFF_SUMS_ENTRIES;
         r = bpf_map_get_next_key(fd, &key, &next)) {
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            struct cx_off_key *k = realloc(keys, cap * sizeof(*k));
            if (!k) {
                free(keys);
                return -ENOMEM;
            }
            keys = k;
        }
        keys[n++] = next;
        key = next;
    }
    for (size_t i = 0; i < n; i++) {
        /* Taken and deleted at once where the kernel can (5.14); else what a
         * switch-in adds between the two is lost. */
        if (bpf_map_lookup_and_delete_elem(fd, &keys[i], &val) == 0 ||
            (bpf_map_lookup_elem(fd, &keys[i], &val) == 0 &&
             bpf_map_delete_elem(fd, &keys[i]) == 0)) {
            fn(ctx, &keys[i], &val);
            got++;
        }
    }
    free(keys);
    return got;
}

/* Whether thread tid of tgid is gone (its blocked slot then stale). */
static bool thread_gone(uint32_t tgid, uint32_t tid)
{
    return syscall(SYS_tgkill, (pid_t)tgid, (pid_t)tid, 0) != 0 && errno == ESRCH;
}

int sampler__credit_blocked(struct sampler *s, uint64_t now_ns,
                            void (*fn)(void *ctx, const struct cx_off_key *k,
                                       const struct cx_off_val *v),
                            void *ctx)
{
    int got = 0;
    struct cx_off_start *slots;

    if (!s || !s->off)
        return 0;
    slots = map_off_start(s);
    if (!slots) {
        /* Their time is counted at their switch-in instead, in a later window. */
        log_warn("off-CPU: cannot map the start array to credit blocked threads: %s",
                 strerror(errno));
        return 0;
    }
    /* The sets' slots in a row (struct cx_off_start_set). */
    _Static_assert(sizeof(struct cx_off_start_set) == 2 * sizeof(struct cx_off_start),
                   "a set is its two slots, no padding");
    for (size_t i = 0; i < 2 * CX_OFF_START_WAY; i++) {
        struct cx_off_start *slot = &slots[i];
        uint64_t start = __atomic_load_n(&slot->start_ns, __ATOMIC_ACQUIRE);

        if (!start || start >= now_ns)
            continue;
        /* Read before the swap: if the slot changed hands since the load,
         * its start_ns changed too and the swap fails. */
        struct cx_off_key k = slot->key;
        uint32_t p16 = slot->p16, tag = slot->tag, f16 = slot->f16, csw = slot->csw;
        /* A thread that ended without its switch-in (none should), or, with
         * unwatched time since start (the duty cycle), one that ran since
         * (its switch count moved: the switch-in went unseen): freed, not
         * counted. Otherwise it is still blocked now. */
        bool stale = thread_gone(k.tgid, k.tid);
        if (!stale && !offhook__watched_since(s->hook, start)) {
            int64_t c = offduty__task_csw(NULL, k.tgid, k.tid);
            stale = c >= 0 && (uint32_t)c != csw;
            if (c < 0 && c != -ENOENT)
                continue; /* unknown: left for the switch-in or the next window */
            stale |= c == -ENOENT;
        }
        uint64_t to = stale ? 0 : now_ns;
        if (!__atomic_compare_exchange_n(&slot->start_ns, &start, to, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        if (!to) {
            /* Freed: its count in the switch-ins' filter goes too. */
            __atomic_fetch_sub(&s->skel->bss->off_pending[tag >> (32 - CX_OFF_PEND_BITS)], 1,
                               __ATOMIC_ACQ_REL);
            continue;
        }
        /* Weighted by its probability so far: the walk's and its switch-out
         * slot's being watched (sample.h); blocks 0: the block is counted
         * once, at its end. */
        struct cx_off_val v = {cx_off_weight(now_ns - start, p16, f16, 0), 0};
        fn(ctx, &k, &v);
        got++;
    }
    munmap(slots, s->off_start_len);
    return got;
}

bool sampler__vma_fallback(const struct sampler *s)
{
    return s && s->vma;
}

int sampler__map_fd(const struct sampler *s, const char *name)
{
    struct bpf_map *m = s ? bpf_object__find_map_by_name(s->skel->obj, name) : NULL;

    return m ? bpf_map__fd(m) : -ENOENT;
}

unsigned sampler__ncpus(const struct sampler *s)
{
    return s->ncpus;
}

int sampler__prog_id(const struct sampler *s)
{
    struct bpf_prog_info info;
    __u32 len = sizeof(info);

    memset(&info, 0, sizeof(info));
    if (bpf_obj_get_info_by_fd(bpf_program__fd(s->skel->progs.cx_on_cpu_clock), &info, &len))
        return -1;
    return info.id;
}

void sampler__free(struct sampler *s)
{
    if (!s)
        return;
    ring__free(s->rb);
    for (unsigned i = 0; s->links && s->pfds && i < s->npfds; i++) {
        /* The link owns the perf event's fd once it exists. */
        if (s->links[i])
            bpf_link__destroy(s->links[i]);
        else if (s->pfds[i] >= 0)
            close(s->pfds[i]);
    }
    free(s->links);
    free(s->pfds);
    offhook__free(s->hook);
    sampler_bpf__destroy(s->skel);
    free(s);
}

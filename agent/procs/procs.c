#include "procs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../common/buf.h"
#include "../../common/log.h"
#include "../../common/str.h"
#include "cgroup_id.h"
#include "cmdline_name.h"
#include "runtime_roots.h"

#define NBUCKETS 4096
/* A maps file bigger than this is cut there (a JVM has a few thousand lines). */
#define MAPS_MAX (16u << 20)
/* Mappings asked of the kernel one by one (maps__query): executable ones,
 * which a JVM has a few hundred of. */
#define MAPS_QUERY_MAX 65536
/* The scratch buffer (cgroup, environ, command line, maps) is kept between
 * reads up to this size, and given back when a read made it larger. */
#define SCRATCH_KEEP (256u << 10)
/* How often a miss may read the maps again: often just after exec, while
 * ld.so is still mapping libraries, then at most once a second. */
#define REREAD_YOUNG_NS (20ull * 1000 * 1000)
#define REREAD_MIN_NS (1000ull * 1000 * 1000)
#define YOUNG_NS (2000ull * 1000 * 1000)
/* A sample this long after the exit event means a new process has the pid. */
#define REUSE_CHECK_NS (100ull * 1000 * 1000)
/* /proc/PID/cgroup has one line per hierarchy (a dozen); anything longer is
 * cut, and the lines read so far still count. */
#define CGROUP_MAX (64u << 10)
/* The environment is looked at this far: the kernel hands over the whole
 * env area, which a process can make as large as its stack limit allows. */
#define ENVIRON_MAX (1u << 20)
/* How long what the container runtimes' daemons said of their data roots is
 * trusted before /proc is walked again (sooner after a miss). */
#define RUNTIMES_TTL_NS (60ull * 1000 * 1000 * 1000)

struct procs {
    struct binary_cache *bc;
    char *proc_root;
    char *docker_root, *log_root, *kubelet_root, *containers_root, *host_root; /* NULL: defaults */
    struct buf scratch;         /* cgroup and environ text, reused */
    struct cgroup_ids *cgroups; /* NULL: no cgroup2 hierarchy */
    struct runtime_roots *runtimes;
    struct proc *buckets[NBUCKETS];
    unsigned count;
    /* /proc/PID of the process being read (pid_dir): its files opened
     * relative to it, not by a whole path each. */
    int dir_fd;
    uint32_t dir_tgid;
    int root_fd;                         /* proc_root, -1 when it cannot be opened */
    uint64_t maps_reads, identity_reads; /* procs__reads */
    bool lazy_exec;                      /* procs__lazy_exec */
    bool no_query;                       /* the kernel has no PROCMAP_QUERY */
    struct procs_listener listener;
};

/* strdup that keeps NULL as NULL. Returns false when out of memory. */
static bool dup_opt(char **dst, const char *src)
{
    *dst = src ? strdup(src) : NULL;
    return !src || *dst;
}

struct procs *procs__new(struct binary_cache *bc, const char *proc_root,
                         const struct identity_roots *roots)
{
    struct procs *ps = calloc(1, sizeof(*ps));

    if (!ps)
        return NULL;
    ps->bc = bc;
    ps->dir_fd = -1;
    buf__init(&ps->scratch, ENVIRON_MAX);
    ps->root_fd = open(proc_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ps->proc_root = strdup(proc_root);
    if (!ps->proc_root || !dup_opt(&ps->docker_root, roots ? roots->docker : NULL) ||
        !dup_opt(&ps->log_root, roots ? roots->log : NULL) ||
        !dup_opt(&ps->kubelet_root, roots ? roots->kubelet : NULL) ||
        !dup_opt(&ps->containers_root, roots ? roots->containers : NULL) ||
        !dup_opt(&ps->host_root, roots ? roots->host : NULL)) {
        procs__free(ps);
        return NULL;
    }
    ps->runtimes = runtime_roots__new(proc_root, ps->host_root, RUNTIMES_TTL_NS);
    if (!ps->runtimes) {
        procs__free(ps);
        return NULL;
    }
    ps->cgroups = cgroup_ids__open(ps->host_root);
    return ps;
}

static void drop_maps(struct proc *p)
{
    for (size_t i = 0; p->map && i < p->maps.n; i++)
        binary__put(p->map[i].bin);
    free(p->map);
    p->map = NULL;
    maps__free(&p->maps);
}

static void proc_free(struct proc *p)
{
    if (!p)
        return;
    drop_maps(p);
    free(p);
}

void procs__free(struct procs *ps)
{
    if (!ps)
        return;
    for (size_t b = 0; b < NBUCKETS; b++) {
        struct proc *p = ps->buckets[b], *next;
        for (; p; p = next) {
            next = p->next;
            proc_free(p);
        }
    }
    if (ps->dir_fd >= 0)
        close(ps->dir_fd);
    if (ps->root_fd >= 0)
        close(ps->root_fd);
    free(ps->proc_root);
    free(ps->docker_root);
    free(ps->log_root);
    free(ps->kubelet_root);
    free(ps->containers_root);
    free(ps->host_root);
    cgroup_ids__free(ps->cgroups);
    runtime_roots__free(ps->runtimes);
    buf__free(&ps->scratch);
    free(ps);
}

/* /proc/PID as a directory descriptor, opened once for all the files read
 * of one process in a row (its identity and maps at exec: seven of them),
 * and closed by pid_dir_done before the call that opened it returns:
 * resolving the whole path was a fifth of the cost of reading them. Held
 * no longer, as it would name the old process after its pid is reused.
 * -1 when the process is gone (reads then fail as they would by path). */
static int pid_dir(struct procs *ps, uint32_t tgid)
{
    char name[16], *at = name + sizeof(name);
    uint32_t v = tgid;

    if (ps->dir_fd >= 0 && ps->dir_tgid == tgid)
        return ps->dir_fd;
    if (ps->dir_fd >= 0)
        close(ps->dir_fd);
    /* The pid's digits, relative to /proc's descriptor: no format, and no
     * walk of proc_root's path for every process. */
    *--at = '\0';
    do
        *--at = (char)('0' + v % 10);
    while ((v /= 10) && at > name);
    ps->dir_fd = ps->root_fd < 0 ? -1 : openat(ps->root_fd, at, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ps->dir_tgid = tgid;
    return ps->dir_fd;
}

static void pid_dir_done(struct procs *ps)
{
    if (ps->dir_fd >= 0)
        close(ps->dir_fd);
    ps->dir_fd = -1;
    if (ps->scratch.cap > SCRATCH_KEEP)
        buf__free(&ps->scratch);
}

/* A file of /proc/PID; -errno as buf__read_file. */
static int read_pid_file(struct procs *ps, uint32_t tgid, const char *what, struct buf *b)
{
    int dfd = pid_dir(ps, tgid);

    return dfd < 0 ? -ENOENT : buf__read_file(b, dfd, what);
}

static void read_small(struct procs *ps, uint32_t tgid, const char *what, char *out, size_t len)
{
    struct buf b;

    buf__init(&b, len - 1);
    if (read_pid_file(ps, tgid, what, &b) == 0 || b.len > 0) {
        size_t n = b.len;
        while (n && (b.data[n - 1] == '\n' || b.data[n - 1] == '\0'))
            n--;
        memcpy(out, b.data, n);
        out[n] = '\0';
    }
    buf__free(&b);
}

/* The process's start time in clock ticks since boot, or 0. */
static uint64_t read_start_time(struct procs *ps, uint32_t tgid)
{
    char stat[1024];
    const char *p;
    int field;

    read_small(ps, tgid, "stat", stat, sizeof(stat));
    /* After the last ')' (the name may hold any character): field 3 on. */
    p = strrchr(stat, ')');
    if (!p)
        return 0;
    for (field = 2; *p && field < 22; p++) {
        if (*p == ' ')
            field++;
    }
    return field == 22 ? strtoull(p, NULL, 10) : 0;
}

/* Reads /proc/PID/<what> into ps->scratch, at most max bytes. Returns the
 * bytes read (0 when it could not be read: a vanished process, a kernel
 * thread's empty environ). */
static size_t read_capped(struct procs *ps, uint32_t tgid, const char *what, size_t max)
{
    buf__reset(&ps->scratch);
    ps->scratch.max = max;
    int r = read_pid_file(ps, tgid, what, &ps->scratch);
    return r == 0 || r == -E2BIG ? ps->scratch.len : 0;
}

long long procs__age_ms(uint64_t start_ticks)
{
    struct timespec ts;
    long hz = sysconf(_SC_CLK_TCK);

    if (!start_ticks || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts))
        return -1;
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 -
           (long long)(start_ticks * 1000 / (uint64_t)hz);
}

/* The name a process goes by outside a unit, container or pod: its
 * executable's, or for an interpreter what it runs (cmdline_name.h), from
 * its command line as it is now: at first sight and after exec, before
 * most programs would rewrite it (setproctitle). */
static void read_name(struct procs *ps, struct proc *p, char *out, size_t len)
{
    str__copy(out, len, p->exe);
    if (cmdline_name__interpreter(p->exe)) {
        size_t n = read_capped(ps, p->tgid, "cmdline", CMDLINE_NAME_READ_MAX);
        cmdline_name__derive(p->exe, ps->scratch.data, n, out, len);
    }
}

/* Service, container, pod and unit from the cgroup; whether the environment
 * opts out. Read at first sight and after exec: a process is placed in its
 * cgroup before it execs (systemd, runc), and exec brings a new environment. */
static void read_service(struct procs *ps, struct proc *p)
{
    struct identity_roots roots = {ps->docker_root,     ps->log_root,  ps->kubelet_root,
                                   ps->containers_root, ps->host_root, ps->runtimes};
    bool was_disabled = p->disabled;
    const char *cgroup;
    char by_id[4200], name[PROC_NAME_MAX];
    size_t n;

    read_name(ps, p, name, sizeof(name));
    /* A cgroup seen before (by the exec's id) is not read again: on a build
     * node every compiler runs in the same one, and the read was a fifth
     * of a process's. */
    cgroup = cgroup_ids__cached(ps->cgroups, p->cgroup_id, &n);
    if (!cgroup) {
        n = read_capped(ps, p->tgid, "cgroup", CGROUP_MAX);
        cgroup = ps->scratch.data;
        if (n)
            cgroup_ids__remember(ps->cgroups, p->cgroup_id, cgroup, n);
    }
    if (n == 0 && (n = cgroup_ids__line(ps->cgroups, p->cgroup_id, by_id, sizeof(by_id))))
        cgroup = by_id; /* gone already: the cgroup it exec'd in */
    identity__resolve(cgroup, n, &roots, name[0] ? name : NULL, &p->id);
    n = read_capped(ps, p->tgid, "environ", ENVIRON_MAX);
    p->disabled = identity__profiling_disabled(ps->scratch.data, n);
    if (p->disabled && !was_disabled)
        log_info("procs: pid=%u exe=%s service=%s not profiled: CODEXRAY_PROFILING=disabled in "
                 "its environment",
                 p->tgid, p->exe, p->id.service);
    log_debug("procs: pid=%u exe=%s service=%s container_id=%.12s pod=%s namespace=%s "
              "container=%s systemd_unit=%s named %lld ms after its start%s",
              p->tgid, p->exe, p->id.service, p->id.container_id, p->id.pod, p->id.namespace,
              p->id.container, p->id.systemd_unit, procs__age_ms(p->start_time),
              cgroup == by_id ? " (exited by then: its cgroup found by the exec's cgroup id)" : "");
}

/* The identity read anew; with `given`, p's start time and comm are the
 * exec event's (BPF read them from the task as /proc would give them), and
 * /proc is not asked for them: two reads fewer at every exec. */
static void read_identity(struct procs *ps, struct proc *p, bool given)
{
    char target[4096];
    int dfd;
    ssize_t n;

    ps->identity_reads++;
    p->generation++;
    if (!given) {
        p->start_time = read_start_time(ps, p->tgid);
        read_small(ps, p->tgid, "comm", p->comm, sizeof(p->comm));
    }
    dfd = pid_dir(ps, p->tgid);
    n = dfd < 0 ? -1 : readlinkat(dfd, "exe", target, sizeof(target) - 1);
    if (n > 0) {
        target[n] = '\0';
        static const char deleted[] = " (deleted)";
        size_t dl = sizeof(deleted) - 1;
        if ((size_t)n > dl && strcmp(target + n - dl, deleted) == 0)
            target[n - dl] = '\0';
        const char *base = strrchr(target, '/');
        str__copy(p->exe, sizeof(p->exe), base ? base + 1 : target);
    } else {
        /* Kernel threads and vanished processes have no exe: use the name. */
        str__copy(p->exe, sizeof(p->exe), p->comm);
    }
    read_service(ps, p);
}

/* A process's executable mappings into *out: asked of the kernel one
 * mapping at a time (maps__query) where it can, else read as text and
 * parsed. Returns 0, -E2BIG (*out holds the first part) or -errno. */
static int load_maps(struct procs *ps, uint32_t tgid, struct maps *out)
{
    int dfd = pid_dir(ps, tgid), fd, r;
    size_t bad = 0;

    memset(out, 0, sizeof(*out));
    if (dfd < 0)
        return -ENOENT;
    fd = openat(dfd, "maps", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    if (!ps->no_query) {
        /* The text of cc1's maps is 60 lines formatted by the kernel for
         * the dozen executable ones kept: on the loaded bench, reading it
         * was a third of the main thread's time spent on a new process. */
        r = maps__query(fd, true, MAPS_QUERY_MAX, MAPS_MAX, out);
        if (r == 0 || r == -E2BIG || r == -ENOMEM) {
            close(fd);
            return r;
        }
        if (r == -ENOTTY || r == -EINVAL) {
            ps->no_query = true;
            log_debug("procs: no PROCMAP_QUERY (Linux 6.11) here: maps read as text");
        }
        /* Anything else (a path longer than PATH_MAX, a gone process): the
         * text says what it can. */
    }
    buf__reset(&ps->scratch);
    ps->scratch.max = MAPS_MAX;
    r = buf__read_fd(&ps->scratch, fd);
    close(fd);
    if (r && r != -E2BIG)
        return r;
    if (maps__parse(ps->scratch.data, ps->scratch.len, true, out, &bad))
        return -ENOMEM;
    return r;
}

static void read_maps(struct procs *ps, struct proc *p, uint64_t now_ns)
{
    struct maps m;
    /* A re-read of the same image (not after an exec) that finds nothing
     * keeps what was read: the process has exited (a zombie's maps are
     * empty, a reaped one's gone) while its samples are still being
     * aggregated, and without its maps their return addresses would look
     * like junk and cut every stack. */
    bool keep = !p->maps_stale && p->maps.n > 0;
    int r;

    ps->maps_reads++;
    r = load_maps(ps, p->tgid, &m);
    if (keep && ((r && r != -E2BIG) || m.n == 0)) {
        p->maps_read_ns = now_ns;
        maps__free(&m);
        return;
    }
    drop_maps(p);
    p->maps_read_ns = now_ns;
    p->maps_stale = false;
    if (r == -ENOMEM) {
        p->maps_err = ENOMEM;
        goto out;
    }
    if (r && r != -E2BIG) {
        p->maps_err = -r;
        goto out;
    }
    if (r == -E2BIG)
        log_warn("procs: pid=%u maps larger than %u MiB or %u executable mappings, the first "
                 "part kept only",
                 p->tgid, MAPS_MAX >> 20, MAPS_QUERY_MAX);
    p->maps = m;
    p->maps_err = 0;
    p->map = calloc(p->maps.n + 1, sizeof(*p->map));
    if (!p->map) {
        maps__free(&p->maps);
        p->maps_err = ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < p->maps.n; i++) {
        const struct maps_entry *e = &p->maps.e[i];
        p->map[i] = (struct proc_map){e->start, e->end, e->offset, NULL, e->path};
        if (e->inode != 0 && e->path[0] == '/')
            p->map[i].bin = binary_cache__get(ps->bc, p->tgid, e, now_ns);
    }
out:
    if (ps->listener.maps_read)
        ps->listener.maps_read(ps->listener.ctx, p, now_ns);
}

static struct proc **slot(struct procs *ps, uint32_t tgid)
{
    struct proc **pp = &ps->buckets[tgid % NBUCKETS];
    while (*pp && (*pp)->tgid != tgid)
        pp = &(*pp)->next;
    return pp;
}

static struct proc *get(struct procs *ps, uint32_t tgid, const char *comm, uint64_t now_ns)
{
    struct proc **pp = slot(ps, tgid), *p = *pp;

    if (p) {
        /* A pid in /proc again, with another start time: reused (a fork
         * without exec), a new process. Not a pid gone from /proc (0): that
         * is the exited process itself, whose off-CPU sums and samples are
         * still being named after its exit; read again, it would lose its
         * name and identity to a vanished /proc entry. */
        uint64_t st =
            p->exited && now_ns - p->exited_ns > REUSE_CHECK_NS ? read_start_time(ps, tgid) : 0;
        if (st && st != p->start_time) {
            p->exited = false;
            p->maps_stale = true;
            p->cgroup_id = 0;
            p->start_given = false; /* an exec's, of the one before */
        }
        if (p->maps_stale) {
            p->seen_ns = now_ns;
            read_identity(ps, p, p->start_given);
            p->start_given = false;
            read_maps(ps, p, now_ns);
        }
        return p;
    }
    p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->tgid = tgid;
    if (comm)
        str__copy(p->comm, sizeof(p->comm), comm);
    p->seen_ns = now_ns;
    read_identity(ps, p, false);
    read_maps(ps, p, now_ns);
    *pp = p;
    ps->count++;
    return p;
}

struct proc *procs__get(struct procs *ps, uint32_t tgid, const char *comm, uint64_t now_ns)
{
    struct proc *p = get(ps, tgid, comm, now_ns);

    pid_dir_done(ps);
    return p;
}

const struct proc_map *procs__find_map(struct procs *ps, struct proc *p, uint64_t addr, bool reread,
                                       uint64_t now_ns)
{
    const struct maps_entry *e = maps__find(&p->maps, addr);

    bool young = now_ns - p->seen_ns < YOUNG_NS;
    uint64_t min = young ? REREAD_YOUNG_NS : REREAD_MIN_NS;
    if (!e && (reread || young) && !p->exited && now_ns - p->maps_read_ns >= min) {
        /* A library loaded since (dlopen) or JIT code: look again, at a rate
         * that keeps a process full of anonymous code from costing much.
         * Return addresses too while the process is young: maps read at its
         * exec predate the libraries ld.so maps next, and every stack would
         * end truncated in libc's __libc_start_call_main. */
        read_maps(ps, p, now_ns);
        pid_dir_done(ps);
        e = maps__find(&p->maps, addr);
    }
    return e ? &p->map[e - p->maps.e] : NULL;
}

void procs__reread_exec(struct procs *ps, uint32_t tgid, uint64_t mapped_ns, uint64_t now_ns)
{
    struct proc *p = *slot(ps, tgid);

    /* A read since the exec's own (a hint's: ld.so had mapped every
     * library by the time it ran code in one) already found the libraries,
     * and so did a first read made after mapped_ns (lazy: at the process's
     * first sample, often long after its exec). */
    if (p && !p->exited && !p->maps_stale && p->maps_read_ns <= p->seen_ns &&
        p->maps_read_ns < mapped_ns)
        read_maps(ps, p, now_ns);
    pid_dir_done(ps);
}

/* Whether maps m hold the mapping hint h tells of: one starting at its
 * address, of its file. A mapping at the address is not enough: after a
 * dlclose and a dlopen of another library the new one can lie where the
 * old one did, and the maps read before would name its code with the old
 * one's symbols until the next read. */
static bool maps_hold(const struct maps *m, const struct procs_hint *h)
{
    const struct maps_entry *e = h->addr ? maps__find(m, h->addr) : NULL;

    return e && e->start == h->addr && e->inode == h->ino && e->dev_major == h->dev >> 20 &&
           e->dev_minor == (h->dev & 0xfffff);
}

void procs__hint_maps(struct procs *ps, uint32_t tgid, uint64_t hint_ns, const struct procs_hint *h,
                      uint64_t now_ns)
{
    struct proc *p = *slot(ps, tgid);

    /* Only maps read before the hint, and without its mapping, miss what
     * it tells of. ld.so maps every library before it runs code in any, so
     * the read for the first library's hint finds them all, and the hints
     * after it (one per library) cost nothing. Without addr they did
     * whenever they came after that read (each wakes this thread): a
     * compiler's dozen libraries were a dozen reads of its maps, and on a
     * build node a third of the agent's CPU. ld.so's own hint, its first
     * code, finds it in the maps read at exec. */
    if (p && !p->exited && !p->maps_stale && p->maps_read_ns <= hint_ns && !maps_hold(&p->maps, h))
        read_maps(ps, p, now_ns);
    pid_dir_done(ps);
}

/* Clock ticks since boot (/proc/PID/stat's unit) of a time in ns since
 * boot, as the kernel's nsec_to_clock_t; 0 when unknown. */
static uint64_t boot_ns_to_ticks(uint64_t ns)
{
    long hz = sysconf(_SC_CLK_TCK);

    return hz > 0 && hz <= 1000000000 ? ns / (1000000000ull / (uint64_t)hz) : 0;
}

struct proc *procs__exec(struct procs *ps, uint32_t tgid, const char *comm, uint64_t cgroup_id,
                         uint64_t start_ns, uint64_t now_ns)
{
    struct proc **pp = slot(ps, tgid), *p = *pp;
    uint64_t start_ticks = comm && start_ns ? boot_ns_to_ticks(start_ns) : 0;

    if (!p) {
        /* New: made here rather than in procs__get, whose first read must
         * already know the cgroup id. */
        p = calloc(1, sizeof(*p));
        if (!p)
            return NULL;
        p->tgid = tgid;
        *pp = p;
        ps->count++;
    }
    if (comm)
        str__copy(p->comm, sizeof(p->comm), comm);
    p->cgroup_id = cgroup_id;
    p->maps_stale = true;
    p->exited = false; /* a reused pid */
    p->start_given = start_ticks != 0;
    if (start_ticks)
        p->start_time = start_ticks;
    /* Lazy: read at its first sample (most of a build's processes have
     * none). Not a process excluded before the exec, which BPF does not
     * sample: its new environment decides now. */
    if (ps->lazy_exec && !p->skipped) {
        /* What an earlier process with the pid said of its environment
         * (its exit took it out of the skip map) would keep this one out
         * of BPF's samples, and so unread, for good. */
        p->disabled = false;
        return p;
    }
    p = get(ps, tgid, NULL, now_ns);
    pid_dir_done(ps);
    return p;
}

void procs__lazy_exec(struct procs *ps, bool on)
{
    ps->lazy_exec = on;
}

struct proc *procs__exit(struct procs *ps, uint32_t tgid, uint64_t now_ns)
{
    struct proc *p = *slot(ps, tgid);

    if (p && !p->exited) {
        p->exited = true;
        p->exited_ns = now_ns;
        if (ps->listener.exited)
            ps->listener.exited(ps->listener.ctx, tgid, now_ns);
    }
    return p;
}

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s))
            return false;
    }
    return true;
}

unsigned procs__scan(struct procs *ps, uint64_t now_ns)
{
    DIR *d = opendir(ps->proc_root);
    struct dirent *de;
    unsigned n = 0;

    if (!d)
        return 0;
    while ((de = readdir(d))) {
        if (!all_digits(de->d_name))
            continue;
        unsigned long tgid = strtoul(de->d_name, NULL, 10);
        if (tgid == 0 || tgid > UINT32_MAX)
            continue;
        if (procs__get(ps, tgid, NULL, now_ns))
            n++;
    }
    closedir(d);
    return n;
}

unsigned procs__scan_disabled(struct procs *ps, void (*fn)(void *ctx, uint32_t tgid), void *ctx)
{
    DIR *d = opendir(ps->proc_root);
    struct dirent *de;
    unsigned n = 0;

    if (!d)
        return 0;
    while ((de = readdir(d))) {
        if (!all_digits(de->d_name))
            continue;
        unsigned long tgid = strtoul(de->d_name, NULL, 10);
        if (tgid == 0 || tgid > UINT32_MAX)
            continue;
        size_t len = read_capped(ps, (uint32_t)tgid, "environ", ENVIRON_MAX);
        pid_dir_done(ps);
        if (identity__profiling_disabled(ps->scratch.data, len)) {
            fn(ctx, (uint32_t)tgid);
            n++;
        }
    }
    closedir(d);
    return n;
}

void procs__sweep(struct procs *ps, uint64_t exited_before_ns, bool check_alive)
{
    char path[128];

    for (size_t b = 0; b < NBUCKETS; b++) {
        struct proc **pp = &ps->buckets[b];
        while (*pp) {
            struct proc *p = *pp;
            bool gone = p->exited && p->exited_ns < exited_before_ns;
            if (!p->exited && check_alive) {
                snprintf(path, sizeof(path), "%s/%u", ps->proc_root, p->tgid);
                bool away = (access(path, F_OK) != 0 && errno == ENOENT) ||
                            read_start_time(ps, p->tgid) != p->start_time;
                pid_dir_done(ps);
                if (away) {
                    /* Its exit event was lost (or its pid already reused):
                     * let it go next time round. */
                    p->exited = true;
                    p->exited_ns = exited_before_ns;
                }
            }
            if (gone) {
                *pp = p->next;
                if (ps->listener.gone)
                    ps->listener.gone(ps->listener.ctx, p->tgid, exited_before_ns);
                proc_free(p);
                ps->count--;
            } else {
                pp = &p->next;
            }
        }
    }
}

void procs__each(struct procs *ps, void (*fn)(void *ctx, struct proc *p), void *ctx)
{
    for (size_t b = 0; b < NBUCKETS; b++) {
        for (struct proc *p = ps->buckets[b]; p; p = p->next)
            fn(ctx, p);
    }
}

void procs__set_listener(struct procs *ps, const struct procs_listener *l)
{
    ps->listener = *l;
}

unsigned procs__count(const struct procs *ps)
{
    return ps->count;
}

void procs__reads(const struct procs *ps, uint64_t *maps, uint64_t *identities)
{
    *maps = ps->maps_reads;
    *identities = ps->identity_reads;
}

#include "perfmap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../../common/buf.h"

/* How far back from the last entry starting at or below an address a lookup
 * looks for a later, overlapping one. */
#define OVERLAP_SCAN 32
/* How much of a perf map is read at a time. */
#define READ_CHUNK (1u << 20)
/* /proc/PID/status is a few KiB. */
#define STATUS_MAX (16u << 10)

struct pm_entry {
    uint64_t start, end; /* [start, end) */
    uint32_t name;       /* offset into names */
    uint32_t seq;        /* order in the file: later wins */
};

struct perfmap {
    struct pm_entry *e;
    size_t n, cap, sorted; /* e[0, sorted) is in order */
    struct buf names;
    size_t bad;
    bool capped;
    bool skipping; /* inside a line too long to keep */
    /* The file as last read. */
    uint64_t dev, ino, offset;
};

struct perfmap *perfmap__new(void)
{
    struct perfmap *pm = calloc(1, sizeof(*pm));

    if (pm)
        buf__init(&pm->names, PERFMAP_MAX_BYTES);
    return pm;
}

void perfmap__free(struct perfmap *pm)
{
    if (!pm)
        return;
    free(pm->e);
    buf__free(&pm->names);
    free(pm);
}

static void perfmap_reset(struct perfmap *pm)
{
    pm->n = pm->sorted = 0;
    buf__reset(&pm->names);
    pm->bad = 0;
    pm->capped = pm->skipping = false;
    pm->offset = 0;
}

/* Hex with an optional 0x, then at least one space or tab. */
static const char *parse_hex(const char *p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *s;

    if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    for (s = p; p < end; p++) {
        unsigned d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            break;
        if (v >> 60)
            return NULL;
        v = v << 4 | d;
    }
    if (p == s || p == end || (*p != ' ' && *p != '\t'))
        return NULL;
    *out = v;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* One line, without its newline. Returns 0, 1 when it does not parse, or
 * -ENOMEM. */
static int parse_line(struct perfmap *pm, const char *p, const char *end)
{
    uint64_t start, size;

    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (!(p = parse_hex(p, end, &start)) || !(p = parse_hex(p, end, &size)))
        return 1;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    if (p == end || size == 0 || start + size < start)
        return 1;
    if (pm->n >= PERFMAP_MAX_ENTRIES) {
        pm->capped = true;
        return 0;
    }
    if (pm->n == pm->cap) {
        size_t cap = pm->cap ? pm->cap * 2 : 256;
        struct pm_entry *ne = realloc(pm->e, cap * sizeof(*ne));
        if (!ne)
            return -ENOMEM;
        pm->e = ne;
        pm->cap = cap;
    }
    size_t off = pm->names.len, len = end - p;
    int r = buf__append(&pm->names, p, len + 1);
    if (r == -E2BIG) {
        pm->capped = true;
        return 0;
    }
    if (r)
        return r;
    /* Names end up in profiles and logs: no control characters. */
    for (char *c = pm->names.data + off; c < pm->names.data + off + len; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    }
    pm->names.data[off + len] = '\0';
    pm->e[pm->n] = (struct pm_entry){start, start + size, (uint32_t)off, (uint32_t)pm->n};
    pm->n++;
    return 0;
}

long perfmap__feed(struct perfmap *pm, const char *text, size_t len)
{
    const char *p = text, *end = text + len;

    while (p < end) {
        const char *nl = memchr(p, '\n', end - p);
        if (!nl) {
            if ((size_t)(end - p) < PERFMAP_MAX_LINE)
                break; /* the rest of the line comes later */
            /* Too long to be a line of ours: drop it, and what follows of it. */
            if (!pm->skipping)
                pm->bad++;
            pm->skipping = true;
            p = end;
            break;
        }
        if (pm->skipping) {
            pm->skipping = false;
        } else if ((size_t)(nl - p) > PERFMAP_MAX_LINE) {
            pm->bad++;
        } else if (nl > p) {
            int r = parse_line(pm, p, nl);
            if (r < 0)
                return r;
            pm->bad += r;
        }
        p = nl + 1;
    }
    return p - text;
}

static int entry_cmp(const void *a, const void *b)
{
    const struct pm_entry *x = a, *y = b;

    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void perfmap__sort(struct perfmap *pm)
{
    if (pm->sorted == pm->n)
        return;
    qsort(pm->e, pm->n, sizeof(*pm->e), entry_cmp);
    pm->sorted = pm->n;
}

const char *perfmap__lookup(const struct perfmap *pm, uint64_t addr)
{
    size_t lo = 0, hi = pm->sorted;
    const struct pm_entry *best = NULL;

    /* The first entry starting above addr. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pm->e[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo, k = 0; i > 0 && k < OVERLAP_SCAN; i--, k++) {
        const struct pm_entry *e = &pm->e[i - 1];
        if (addr < e->end && (!best || e->seq > best->seq))
            best = e;
    }
    return best ? pm->names.data + best->name : NULL;
}

size_t perfmap__count(const struct perfmap *pm)
{
    return pm->n;
}

size_t perfmap__bad(const struct perfmap *pm)
{
    return pm->bad;
}

bool perfmap__capped(const struct perfmap *pm)
{
    return pm->capped;
}

int perfmap__read_fd(struct perfmap *pm, int fd)
{
    struct stat st;
    char *chunk = NULL;
    size_t want;
    int err = 0;

    if (fstat(fd, &st))
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    if ((uint64_t)st.st_dev != pm->dev || (uint64_t)st.st_ino != pm->ino ||
        (uint64_t)st.st_size < pm->offset) {
        /* Another file, or the same one written anew. */
        perfmap_reset(pm);
        pm->dev = st.st_dev;
        pm->ino = st.st_ino;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size > PERFMAP_MAX_BYTES) {
        size = PERFMAP_MAX_BYTES;
        pm->capped = true;
    }
    if (size <= pm->offset)
        return 0;
    /* In chunks: a big map is not held twice. */
    chunk = malloc(READ_CHUNK);
    if (!chunk)
        return -ENOMEM;
    while (pm->offset < size) {
        want = size - pm->offset < READ_CHUNK ? size - pm->offset : READ_CHUNK;
        ssize_t r = pread(fd, chunk, want, pm->offset);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            err = -errno;
            goto out;
        }
        if (r == 0)
            break; /* shrank under us */
        long used = perfmap__feed(pm, chunk, r);
        if (used < 0) {
            err = used;
            goto out;
        }
        pm->offset += used;
        if (used == 0)
            break; /* a partial last line: the rest comes later */
    }
out:
    perfmap__sort(pm);
    free(chunk);
    return err;
}

/* The pid in the process's own namespace, and its real and effective uid,
 * from status. Returns 0 or a negative errno. */
static int read_status(const char *proc_root, uint32_t pid, uint32_t *nspid, uint32_t uid[2])
{
    char path[128];
    struct buf b;
    int err;

    snprintf(path, sizeof(path), "%s/%u/status", proc_root, pid);
    buf__init(&b, STATUS_MAX);
    err = buf__read_file(&b, AT_FDCWD, path);
    if (err == -E2BIG)
        err = 0;
    if (err)
        goto out;
    err = -EINVAL;
    *nspid = pid; /* kernels before 4.1 have no NSpid: one namespace */
    bool have_uid = false;
    for (char *line = b.data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, "NSpid:", 6) == 0) {
            char *last = NULL;
            for (char *t = line + 6; *t; t++) {
                if (*t >= '0' && *t <= '9' && (t[-1] == '\t' || t[-1] == ' ' || t[-1] == ':'))
                    last = t;
            }
            unsigned long v = last ? strtoul(last, NULL, 10) : 0;
            if (!v || v > UINT32_MAX)
                goto out;
            *nspid = v;
        } else if (strncmp(line, "Uid:", 4) == 0) {
            unsigned long r, e;
            if (sscanf(line + 4, "%lu %lu", &r, &e) != 2)
                goto out;
            uid[0] = r;
            uid[1] = e;
            have_uid = true;
        }
        line = nl ? nl + 1 : NULL;
    }
    err = have_uid ? 0 : -EINVAL;
out:
    buf__free(&b);
    return err;
}

/* name (a file in /tmp) inside the root dirfd, no symlink leading out. */
static int open_in_root(int root, const char *name)
{
    char path[64];
    struct open_how how = {
        .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };

    snprintf(path, sizeof(path), "tmp/%s", name);
    long fd = syscall(SYS_openat2, root, path, &how, sizeof(how));
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM && errno != E2BIG))
        return fd >= 0 ? (int)fd : -errno;
    /* Before Linux 5.6 (or a seccomp filter that hides openat2): /tmp and
     * the file itself, neither followed if a symlink. */
    int tmp = openat(root, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tmp < 0)
        return -errno;
    fd = openat(tmp, name, how.flags);
    int err = fd < 0 ? -errno : 0;
    close(tmp);
    return fd >= 0 ? (int)fd : err;
}

int perfmap__open_proc(const char *proc_root, uint32_t pid)
{
    char path[128], name[48];
    uint32_t nspid = 0, uid[2] = {0, 0};
    struct stat st;
    int root = -1, fd = -1, err;

    err = read_status(proc_root, pid, &nspid, uid);
    if (err)
        goto out;
    snprintf(path, sizeof(path), "%s/%u/root", proc_root, pid);
    root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        err = -errno;
        goto out;
    }
    snprintf(name, sizeof(name), "perf-%u.map", nspid);
    fd = open_in_root(root, name);
    if (fd < 0) {
        err = fd;
        goto out;
    }
    if (fstat(fd, &st)) {
        err = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        err = -EINVAL;
        goto out;
    }
    /* Anyone may write into /tmp: a map of another user's is not this
     * process's. */
    if (st.st_uid != 0 && st.st_uid != uid[0] && st.st_uid != uid[1]) {
        err = -EPERM;
        goto out;
    }
    err = 0;
out:
    if (root >= 0)
        close(root);
    if (err && fd >= 0)
        close(fd);
    return err ? err : fd;
}

/* --- the cache, one perfmap per process --- */

#define CACHE_BUCKETS 256

struct pm_proc {
    uint32_t tgid;
    uint64_t start_time;
    uint64_t used_ns, checked_ns;
    bool checked;
    bool reread; /* perfmap_cache__invalidate */
    int err;     /* the last open's or read's, 0 when pm is good */
    struct perfmap *pm;
    uint64_t once; /* perfmap_cache__once keys given out */
    uint64_t due_ns;
    bool due_set;
    struct pm_proc *next;
};

struct perfmap_cache {
    char *proc_root;
    struct pm_proc *b[CACHE_BUCKETS];
};

struct perfmap_cache *perfmap_cache__new(const char *proc_root)
{
    struct perfmap_cache *c = calloc(1, sizeof(*c));

    if (!c || !(c->proc_root = strdup(proc_root))) {
        free(c);
        return NULL;
    }
    return c;
}

static void pm_proc_free(struct pm_proc *p)
{
    if (p)
        perfmap__free(p->pm);
    free(p);
}

void perfmap_cache__free(struct perfmap_cache *c)
{
    if (!c)
        return;
    perfmap_cache__sweep(c, UINT64_MAX);
    free(c->proc_root);
    free(c);
}

static struct pm_proc *cache_proc(struct perfmap_cache *c, uint32_t tgid, uint64_t start_time)
{
    struct pm_proc **pp = &c->b[tgid % CACHE_BUCKETS], *p;

    for (p = *pp; p && p->tgid != tgid; p = p->next)
        ;
    if (p && start_time && p->start_time && p->start_time != start_time) {
        /* The pid belongs to another process now. */
        perfmap__free(p->pm);
        struct pm_proc *next = p->next;
        *p = (struct pm_proc){.tgid = tgid, .next = next};
    }
    if (!p) {
        p = calloc(1, sizeof(*p));
        if (!p)
            return NULL;
        p->tgid = tgid;
        p->next = *pp;
        *pp = p;
    }
    if (start_time)
        p->start_time = start_time;
    return p;
}

static const char *why_of(int err)
{
    switch (err) {
    case -ENOENT:
        return "no /tmp/perf-PID.map in its root";
    case -EPERM:
        return "its /tmp/perf-PID.map belongs to another user";
    case -EINVAL:
        return "its /tmp/perf-PID.map is not a regular file";
    case -ELOOP:
    case -EXDEV:
        return "its /tmp/perf-PID.map is a symlink";
    case -ESTALE:
        return "its /tmp/perf-PID.map predates it (left by an earlier process of the same pid)";
    case -ENOMEM:
        return "out of memory";
    default:
        return "its /tmp/perf-PID.map cannot be read";
    }
}

/* True when the file at fd was last written before the process that started
 * start_ticks (clock ticks after boot, /proc/PID/stat's field 22) began: a
 * map left in /tmp by an earlier process of the same pid, whose names would
 * be wrong here. A second of slack for clocks' granularity. */
static bool older_than_process(int fd, uint64_t start_ticks)
{
    struct timespec real, boot;
    struct stat st;
    long hz = sysconf(_SC_CLK_TCK);

    if (!start_ticks || hz <= 0 || fstat(fd, &st) || clock_gettime(CLOCK_REALTIME, &real) ||
        clock_gettime(CLOCK_BOOTTIME, &boot))
        return false;
    double started = (double)real.tv_sec + real.tv_nsec / 1e9 -
                     ((double)boot.tv_sec + boot.tv_nsec / 1e9) + (double)start_ticks / (double)hz;
    double written = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
    return written + 1.0 < started;
}

struct perfmap *perfmap_cache__get(struct perfmap_cache *c, uint32_t tgid, uint64_t start_time,
                                   uint64_t now_ns, uint64_t recheck_ns, const char **why)
{
    struct pm_proc *p = cache_proc(c, tgid, start_time);
    int fd;

    if (!p) {
        if (why)
            *why = why_of(-ENOMEM);
        return NULL;
    }
    p->used_ns = now_ns;
    if (!p->checked || p->reread || now_ns - p->checked_ns >= recheck_ns) {
        p->checked = true;
        if (p->reread && p->pm)
            perfmap_reset(p->pm);
        p->reread = false;
        p->checked_ns = now_ns;
        fd = perfmap__open_proc(c->proc_root, tgid);
        if (fd >= 0 && older_than_process(fd, start_time)) {
            close(fd);
            fd = -ESTALE;
        }
        if (fd < 0) {
            p->err = fd;
        } else {
            if (!p->pm)
                p->pm = perfmap__new();
            p->err = p->pm ? perfmap__read_fd(p->pm, fd) : -ENOMEM;
            close(fd);
        }
    }
    /* A map gone with its process, or one that failed to read further: what
     * was read is still good. */
    if (!p->pm || !perfmap__count(p->pm)) {
        if (why)
            *why = why_of(p->err ? p->err : -ENOENT);
        return NULL;
    }
    return p->pm;
}

bool perfmap_cache__once(struct perfmap_cache *c, uint32_t tgid, uint64_t start_time, unsigned key)
{
    struct pm_proc *p = cache_proc(c, tgid, start_time);
    uint64_t bit = 1ull << (key % 64);

    if (!p || (p->once & bit))
        return false;
    p->once |= bit;
    return true;
}

void perfmap_cache__invalidate(struct perfmap_cache *c, uint32_t tgid, uint64_t start_time)
{
    struct pm_proc *p = cache_proc(c, tgid, start_time);

    if (p)
        p->reread = true;
}

bool perfmap_cache__seen(struct perfmap_cache *c, uint32_t tgid, uint64_t start_time, unsigned key)
{
    struct pm_proc *p = cache_proc(c, tgid, start_time);

    return p && (p->once & 1ull << (key % 64));
}

bool perfmap_cache__due(struct perfmap_cache *c, uint32_t tgid, uint64_t start_time,
                        uint64_t now_ns, uint64_t every_ns)
{
    struct pm_proc *p = cache_proc(c, tgid, start_time);

    if (!p || (p->due_set && now_ns - p->due_ns < every_ns))
        return false;
    p->due_set = true;
    p->due_ns = now_ns;
    return true;
}

void perfmap_cache__sweep(struct perfmap_cache *c, uint64_t unused_before_ns)
{
    for (size_t i = 0; i < CACHE_BUCKETS; i++) {
        struct pm_proc **pp = &c->b[i];
        while (*pp) {
            struct pm_proc *p = *pp;
            if (p->used_ns < unused_before_ns) {
                *pp = p->next;
                pm_proc_free(p);
            } else {
                pp = &p->next;
            }
        }
    }
}

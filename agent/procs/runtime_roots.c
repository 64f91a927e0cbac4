#include "runtime_roots.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../common/buf.h"
#include "../../common/log.h"
#include "../../common/str.h"
#include "json_scan.h"
#include "podman_meta.h"

/* A daemon's command line: dockerd's is a few hundred bytes; anything this
 * long is cut, and the flags read so far still count. */
#define CMDLINE_MAX (64u << 10)
#define ARGS_MAX 512
/* daemon.json, config.toml and storage.conf are a few KiB. */
#define CONF_MAX (1u << 20)
/* /proc's entries looked at in one walk: pid_max is at most 4M. */
#define PROC_ENTRIES_MAX (1u << 22)
/* Places kept per runtime over all users, and users whose own places
 * (their homes' defaults and configurations) are known. */
#define ENTRIES_MAX 32
#define USERS_MAX 64
#define MISSES_MAX 4096
/* After a miss, /proc is walked again if the last walk is this old; each
 * walk that finds nothing new doubles it (up to the time to live), so a
 * container whose name is nowhere costs a walk a minute, not one a
 * process. */
#define RESCAN_MISS_NS (5ull * 1000 * 1000 * 1000)
#define PATH_LEN 4096

struct list {
    struct runtime_dir d[ENTRIES_MAX];
    size_t n;
};

struct runtime_roots {
    char *proc_root, *host_root;
    uint64_t ttl_ns, walked_ns;
    uint64_t miss_wait_ns; /* after a miss, walk again when the last walk is this old */
    bool walked;
    struct list lists[RUNTIME_COUNT];
    char rootless_path[PATH_LEN]; /* storage.conf's rootless_storage_path, or "" */
    unsigned users[USERS_MAX];    /* uids whose own places are in the lists */
    size_t nusers;
    struct runtime_dir out[RUNTIME_ROOTS_MAX];
    uint64_t misses[MISSES_MAX]; /* containers whose miss was logged */
    size_t nmisses;
    bool misses_full;
};

static const char *const runtime_names[RUNTIME_COUNT] = {"Docker", "containerd", "Podman"};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A path from a flag or a configuration becomes part of a path under the
 * host's root: absolute, no way up, nothing that would garble a log line. */
static bool safe_path(const char *p)
{
    if (p[0] != '/' || strstr(p, ".."))
        return false;
    for (const char *c = p; *c; c++) {
        if ((unsigned char)*c < 0x20)
            return false;
    }
    return true;
}

/* Adds host_root + path to rt's places for uid, unless there already or
 * unusable. `why` is printf-style: where it was learned. */
static void add(struct runtime_roots *rr, enum runtime rt, unsigned uid, const char *path,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void add(struct runtime_roots *rr, enum runtime rt, unsigned uid, const char *path,
                const char *fmt, ...)
{
    struct list *l = &rr->lists[rt];
    char full[PATH_LEN];
    va_list ap;

    if (!safe_path(path) || l->n >= ENTRIES_MAX ||
        snprintf(full, sizeof(full), "%s%s", rr->host_root, path) >= (int)sizeof(full))
        return;
    size_t fl = strlen(full);
    while (fl > 1 && full[fl - 1] == '/') /* "/data/docker/" is "/data/docker" */
        full[--fl] = '\0';
    for (size_t i = 0; i < l->n; i++) {
        if (l->d[i].uid == uid && strcmp(l->d[i].path, full) == 0)
            return;
    }
    struct runtime_dir *d = &l->d[l->n++];
    str__copy(d->path, sizeof(d->path), full);
    d->uid = uid;
    va_start(ap, fmt);
    vsnprintf(d->why, sizeof(d->why), fmt, ap);
    va_end(ap);
}

/* Reads host_root + path (capped) into b: a regular file, and for a
 * user's daemon (uid not 0) one that user owns, so that a rootless daemon's
 * --config-file cannot make the agent read root's files. Returns whether
 * anything was read. */
static bool read_conf(struct runtime_roots *rr, const char *path, unsigned uid, struct buf *b)
{
    char full[PATH_LEN];
    struct stat st;
    bool ok;

    buf__reset(b);
    if (!safe_path(path) ||
        snprintf(full, sizeof(full), "%s%s", rr->host_root, path) >= (int)sizeof(full))
        return false;
    int fd = open(full, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return false;
    ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uid == 0 || st.st_uid == uid);
    if (ok) {
        int r = buf__read_fd(b, fd);
        ok = (r == 0 || r == -E2BIG) && b->data && b->len > 0;
    }
    close(fd);
    return ok;
}

/* The string value of `key` in TOML text: in table `table` ("" for the
 * top level, before any [header]), as a "basic" or 'literal' string on one
 * line. Just enough for containerd's config.toml and containers'
 * storage.conf; anything else (a multi-line string, an inline table) is not
 * found. */
static bool toml_string(const char *s, size_t n, const char *table, const char *key, char *out,
                        size_t len)
{
    size_t kl = strlen(key), tl = strlen(table);
    bool in_table = tl == 0;

    for (size_t i = 0; i < n;) {
        const char *line = s + i, *nl = memchr(line, '\n', n - i);
        size_t ll = nl ? (size_t)(nl - line) : n - i, k = 0;
        i += ll + 1;
        while (k < ll && (line[k] == ' ' || line[k] == '\t'))
            k++;
        if (k >= ll || line[k] == '#')
            continue;
        if (line[k] == '[') {
            const char *h = line + k, *end = memchr(h, ']', ll - k);
            while (h < line + ll && (*h == '[' || *h == ' '))
                h++;
            size_t hl = end && end > h ? (size_t)(end - h) : 0;
            while (hl > 0 && h[hl - 1] == ' ')
                hl--;
            in_table = tl > 0 && hl == tl && memcmp(h, table, tl) == 0;
            continue;
        }
        if (!in_table || ll - k < kl || memcmp(line + k, key, kl) != 0)
            continue;
        k += kl;
        while (k < ll && (line[k] == ' ' || line[k] == '\t'))
            k++;
        if (k >= ll || line[k] != '=')
            continue;
        k++;
        while (k < ll && (line[k] == ' ' || line[k] == '\t'))
            k++;
        if (k >= ll || (line[k] != '"' && line[k] != '\''))
            return false;
        char q = line[k++];
        size_t o = 0;
        for (; k < ll && line[k] != q; k++) {
            if (q == '"' && line[k] == '\\') /* a path has no escapes worth keeping */
                return false;
            if (o + 1 >= len)
                return false;
            out[o++] = line[k];
        }
        out[o] = '\0';
        return k < ll && o > 0;
    }
    return false;
}

/* The value of a flag in argv: "--flag value" or "--flag=value", the first
 * of any of the names. NULL when absent. */
static const char *flag(char **argv, size_t argc, const char *const *names)
{
    for (size_t i = 1; i < argc; i++) {
        for (const char *const *nm = names; *nm; nm++) {
            size_t l = strlen(*nm);
            if (strcmp(argv[i], *nm) == 0 && i + 1 < argc)
                return argv[i + 1];
            if (strncmp(argv[i], *nm, l) == 0 && argv[i][l] == '=')
                return argv[i] + l + 1;
        }
    }
    return NULL;
}

/* The real uid of a process from its status, or -1. */
static long proc_uid(int pfd, const char *pid)
{
    char path[64], text[4096];
    snprintf(path, sizeof(path), "%s/status", pid);
    int fd = openat(pfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    const char *u = strstr(text, "\nUid:");
    char *end;
    if (!u)
        return -1;
    long uid = strtol(u + 5, &end, 10);
    return end == u + 5 || uid < 0 ? -1 : uid;
}

static bool home_of(struct runtime_roots *rr, unsigned uid, char *out, size_t len)
{
    return podman_meta__home(rr->host_root, uid, out, len);
}

static void learn_dockerd(struct runtime_roots *rr, const char *pid, unsigned uid, char **argv,
                          size_t argc, struct buf *b)
{
    static const char *const root_flags[] = {"--data-root", "-g", "--graph", NULL};
    static const char *const conf_flags[] = {"--config-file", NULL};
    char home[PATH_LEN] = "", conf[PATH_LEN], root[PATH_LEN];
    const char *v = flag(argv, argc, root_flags);

    if (v) {
        add(rr, RUNTIME_DOCKER, uid, v, "dockerd pid %s: --data-root", pid);
        return;
    }
    if (uid != 0 && !home_of(rr, uid, home, sizeof(home)))
        return;
    v = flag(argv, argc, conf_flags);
    if (v)
        str__copy(conf, sizeof(conf), v);
    else if (uid == 0)
        str__copy(conf, sizeof(conf), "/etc/docker/daemon.json");
    else if (snprintf(conf, sizeof(conf), "%s/.config/docker/daemon.json", home) >=
             (int)sizeof(conf))
        return;
    if (read_conf(rr, conf, uid, b) &&
        (json_scan__top_string(b->data, b->len, "data-root", root, sizeof(root)) ||
         json_scan__top_string(b->data, b->len, "graph", root, sizeof(root)))) {
        add(rr, RUNTIME_DOCKER, uid, root, "dockerd pid %s: data-root in %s", pid, conf);
        return;
    }
    if (uid == 0)
        add(rr, RUNTIME_DOCKER, 0, "/var/lib/docker", "dockerd pid %s: default", pid);
    else if (snprintf(root, sizeof(root), "%s/.local/share/docker", home) < (int)sizeof(root))
        add(rr, RUNTIME_DOCKER, uid, root, "dockerd pid %s: rootless default", pid);
}

static void learn_containerd(struct runtime_roots *rr, const char *pid, unsigned uid, char **argv,
                             size_t argc, struct buf *b)
{
    static const char *const state_flags[] = {"--state", NULL};
    static const char *const root_flags[] = {"--root", NULL};
    static const char *const conf_flags[] = {"--config", "-c", NULL};
    const char *conf = flag(argv, argc, conf_flags);
    const char *fs = flag(argv, argc, state_flags), *fr = flag(argv, argc, root_flags);
    char state[PATH_LEN] = "", root[PATH_LEN] = "";
    const char *from = "--state";

    if (!conf)
        conf = "/etc/containerd/config.toml";
    bool have_conf = read_conf(rr, conf, uid, b);
    if (fr)
        str__copy(root, sizeof(root), fr);
    else if (!have_conf || !toml_string(b->data, b->len, "", "root", root, sizeof(root)))
        str__copy(root, sizeof(root), "/var/lib/containerd");
    if (fs) {
        str__copy(state, sizeof(state), fs);
    } else if (have_conf && toml_string(b->data, b->len, "", "state", state, sizeof(state))) {
        from = "state in config";
    } else {
        str__copy(state, sizeof(state), "/run/containerd");
        from = "default state";
    }
    /* The metadata under root is a bolt database; the names the CRI gave a
     * task are in its bundle, under state. */
    add(rr, RUNTIME_CONTAINERD, uid, state, "containerd pid %s: %s (%s), root %.60s", pid, from,
        conf, root);
}

/* conmon runs one Podman container: its bundle is
 * <graphroot>/<driver>-containers/<id>/userdata, and podman's own --root is
 * among its exit command's arguments. */
static void learn_conmon(struct runtime_roots *rr, const char *pid, unsigned uid, char **argv,
                         size_t argc)
{
    static const char *const bundle_flags[] = {"-b", "--bundle", NULL};
    const char *v = flag(argv, argc, bundle_flags);
    char root[PATH_LEN];

    for (size_t i = 1; i + 3 < argc; i++) {
        if (strcmp(argv[i], "--exit-command-arg") == 0 && strcmp(argv[i + 1], "--root") == 0 &&
            strcmp(argv[i + 2], "--exit-command-arg") == 0) {
            add(rr, RUNTIME_PODMAN, uid, argv[i + 3], "conmon pid %s: podman --root", pid);
            break;
        }
    }
    if (!v || str__copy(root, sizeof(root), v) >= sizeof(root))
        return;
    /* Three components off: userdata, the id, <driver>-containers. */
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(root, '/');
        if (!slash || slash == root)
            return;
        if (up == 2 && strstr(slash, "-containers") == NULL)
            return;
        *slash = '\0';
    }
    add(rr, RUNTIME_PODMAN, uid, root, "conmon pid %s: its bundle", pid);
}

static void learn_process(struct runtime_roots *rr, int pfd, const char *pid, struct buf *b)
{
    char path[64], comm[32];
    char *argv[ARGS_MAX];
    size_t argc = 0;

    snprintf(path, sizeof(path), "%s/comm", pid);
    int fd = openat(pfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    ssize_t n = read(fd, comm, sizeof(comm) - 1);
    close(fd);
    if (n <= 0)
        return;
    comm[n] = '\0';
    comm[strcspn(comm, "\n")] = '\0';
    int which = strcmp(comm, "dockerd") == 0      ? 0
                : strcmp(comm, "containerd") == 0 ? 1
                : strcmp(comm, "conmon") == 0     ? 2
                : strcmp(comm, "podman") == 0     ? 3
                                                  : -1;
    if (which < 0)
        return;
    long uid = proc_uid(pfd, pid);
    snprintf(path, sizeof(path), "%s/cmdline", pid);
    buf__reset(b);
    int r = buf__read_file(b, pfd, path);
    if (uid < 0 || (r != 0 && r != -E2BIG) || !b->data || b->len == 0)
        return;
    /* The arguments, NUL-separated; the text is NUL-terminated by buf. */
    for (size_t i = 0; i < b->len && argc < ARGS_MAX;) {
        argv[argc++] = b->data + i;
        i += strlen(b->data + i) + 1;
    }
    /* The config files are read into a buffer of their own: argv points into b. */
    struct buf cb;
    buf__init(&cb, CONF_MAX);
    if (which == 0) {
        learn_dockerd(rr, pid, (unsigned)uid, argv, argc, &cb);
    } else if (which == 1) {
        learn_containerd(rr, pid, (unsigned)uid, argv, argc, &cb);
    } else if (which == 2) {
        learn_conmon(rr, pid, (unsigned)uid, argv, argc);
    } else {
        static const char *const root_flags[] = {"--root", NULL};
        const char *v = flag(argv, argc, root_flags);
        if (v)
            add(rr, RUNTIME_PODMAN, (unsigned)uid, v, "podman pid %s: --root", pid);
    }
    buf__free(&cb);
}

/* What needs no daemon: Podman's system storage.conf, and every runtime's
 * default, last. */
static void learn_system(struct runtime_roots *rr, struct buf *b)
{
    static const char *const confs[] = {"/etc/containers/storage.conf",
                                        "/usr/share/containers/storage.conf"};
    char v[PATH_LEN];

    rr->rootless_path[0] = '\0';
    for (size_t i = 0; i < 2; i++) {
        if (!read_conf(rr, confs[i], 0, b))
            continue;
        if (toml_string(b->data, b->len, "storage", "graphroot", v, sizeof(v)))
            add(rr, RUNTIME_PODMAN, 0, v, "graphroot in %s", confs[i]);
        if (!toml_string(b->data, b->len, "storage", "rootless_storage_path", rr->rootless_path,
                         sizeof(rr->rootless_path)))
            rr->rootless_path[0] = '\0';
        break; /* the first found is the one Podman reads */
    }
    add(rr, RUNTIME_DOCKER, 0, "/var/lib/docker", "default");
    add(rr, RUNTIME_CONTAINERD, 0, "/run/containerd", "default");
    add(rr, RUNTIME_PODMAN, 0, "/var/lib/containers/storage", "default");
}

static void walk(struct runtime_roots *rr)
{
    struct buf b;
    int pfd = open(rr->proc_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int dfd = pfd >= 0 ? fcntl(pfd, F_DUPFD_CLOEXEC, 0) : -1;
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    struct dirent *de;
    unsigned seen = 0;

    if (dfd >= 0 && !d)
        close(dfd);

    for (int i = 0; i < RUNTIME_COUNT; i++)
        rr->lists[i].n = 0;
    rr->nusers = 0;
    buf__init(&b, CMDLINE_MAX);
    while (d && seen++ < PROC_ENTRIES_MAX && (de = readdir(d))) {
        if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
            learn_process(rr, pfd, de->d_name, &b);
    }
    if (d)
        closedir(d);
    if (pfd >= 0)
        close(pfd);
    buf__free(&b);
    buf__init(&b, CONF_MAX);
    learn_system(rr, &b);
    buf__free(&b);
    rr->walked = true;
    rr->walked_ns = now_ns();
}

/* Replaces $HOME, $UID and $USER in storage.conf's rootless_storage_path. */
static bool expand_rootless(const char *tmpl, const char *home, unsigned uid, char *out, size_t len)
{
    char uidtxt[16];
    size_t o = 0;

    snprintf(uidtxt, sizeof(uidtxt), "%u", uid);
    for (const char *p = tmpl; *p;) {
        const char *rep = NULL;
        if (strncmp(p, "$HOME", 5) == 0) {
            rep = home;
            p += 5;
        } else if (strncmp(p, "$UID", 4) == 0) {
            rep = uidtxt;
            p += 4;
        } else if (strncmp(p, "$USER", 5) == 0) {
            return false; /* the user's name: not worth a second passwd lookup */
        }
        size_t rl = rep ? strlen(rep) : 1;
        if (o + rl >= len)
            return false;
        memcpy(out + o, rep ? rep : p, rl);
        o += rl;
        if (!rep)
            p++;
    }
    out[o] = '\0';
    return true;
}

/* The places a rootless user's runtimes use when no daemon of theirs said
 * otherwise: their storage.conf and the defaults in their home. */
static void learn_user(struct runtime_roots *rr, unsigned uid)
{
    char home[PATH_LEN], path[PATH_LEN], v[PATH_LEN];
    struct buf b;

    for (size_t i = 0; i < rr->nusers; i++) {
        if (rr->users[i] == uid)
            return;
    }
    if (rr->nusers >= USERS_MAX)
        return;
    rr->users[rr->nusers++] = uid;
    if (!home_of(rr, uid, home, sizeof(home)))
        return;
    buf__init(&b, CONF_MAX);
    if (snprintf(path, sizeof(path), "%s/.config/containers/storage.conf", home) <
            (int)sizeof(path) &&
        read_conf(rr, path, uid, &b) &&
        toml_string(b.data, b.len, "storage", "graphroot", v, sizeof(v)))
        add(rr, RUNTIME_PODMAN, uid, v, "graphroot in %s", path);
    if (rr->rootless_path[0] && expand_rootless(rr->rootless_path, home, uid, v, sizeof(v)))
        add(rr, RUNTIME_PODMAN, uid, v, "rootless_storage_path in storage.conf");
    if (snprintf(v, sizeof(v), "%s/.local/share/containers/storage", home) < (int)sizeof(v))
        add(rr, RUNTIME_PODMAN, uid, v, "rootless default");
    if (snprintf(path, sizeof(path), "%s/.config/docker/daemon.json", home) < (int)sizeof(path) &&
        read_conf(rr, path, uid, &b) &&
        json_scan__top_string(b.data, b.len, "data-root", v, sizeof(v)))
        add(rr, RUNTIME_DOCKER, uid, v, "data-root in %s", path);
    if (snprintf(v, sizeof(v), "%s/.local/share/docker", home) < (int)sizeof(v))
        add(rr, RUNTIME_DOCKER, uid, v, "rootless default");
    buf__free(&b);
}

struct runtime_roots *runtime_roots__new(const char *proc_root, const char *host_root,
                                         uint64_t ttl_ns)
{
    struct runtime_roots *rr = calloc(1, sizeof(*rr));

    if (!rr)
        return NULL;
    rr->proc_root = strdup(proc_root ? proc_root : "/proc");
    rr->host_root = strdup(host_root ? host_root : "");
    rr->ttl_ns = ttl_ns;
    rr->miss_wait_ns = RESCAN_MISS_NS;
    if (!rr->proc_root || !rr->host_root) {
        runtime_roots__free(rr);
        return NULL;
    }
    return rr;
}

void runtime_roots__free(struct runtime_roots *rr)
{
    if (!rr)
        return;
    free(rr->proc_root);
    free(rr->host_root);
    free(rr);
}

/* rt's places for uid as they are now, into rr->out. */
static size_t filter(struct runtime_roots *rr, enum runtime rt, unsigned uid)
{
    const struct list *l = &rr->lists[rt];
    size_t n = 0;

    if (uid != 0)
        learn_user(rr, uid);
    for (size_t i = 0; i < l->n && n < RUNTIME_ROOTS_MAX; i++) {
        if (l->d[i].uid == uid)
            rr->out[n++] = l->d[i];
    }
    return n;
}

size_t runtime_roots__dirs(struct runtime_roots *rr, enum runtime rt, unsigned uid,
                           const struct runtime_dir **out)
{
    if (!rr->walked || rr->ttl_ns == 0 || now_ns() - rr->walked_ns >= rr->ttl_ns)
        walk(rr);
    *out = rr->out;
    return filter(rr, rt, uid);
}

bool runtime_roots__rescan(struct runtime_roots *rr, enum runtime rt, unsigned uid)
{
    char before[RUNTIME_ROOTS_MAX][PATH_LEN];
    size_t nb, na;

    if (rr->walked && rr->ttl_ns != 0 && now_ns() - rr->walked_ns < rr->miss_wait_ns)
        return false;
    nb = rr->walked ? filter(rr, rt, uid) : 0;
    for (size_t i = 0; i < nb; i++)
        str__copy(before[i], sizeof(before[i]), rr->out[i].path);
    walk(rr);
    na = filter(rr, rt, uid);
    bool changed = na != nb;
    for (size_t i = 0; !changed && i < na; i++)
        changed = strcmp(before[i], rr->out[i].path) != 0;
    if (changed)
        rr->miss_wait_ns = RESCAN_MISS_NS;
    else if (rr->miss_wait_ns < rr->ttl_ns)
        rr->miss_wait_ns *= 2;
    return changed;
}

/* What would make the name findable, per runtime. */
static const char *const fixes[RUNTIME_COUNT] = {
    "the agent finds dockerd's data root from dockerd's command line (--data-root) or its "
    "daemon.json (data-root), read through the host's root: run the agent in the host's PID "
    "namespace (--pid host, hostPID: true) so it sees dockerd, and keep the data root readable "
    "there",
    "the agent finds the CRI's names in the kubelet's /var/log/pods and in containerd's task "
    "bundles under its state directory (containerd --state, or state in its config.toml): run "
    "the agent in the host's PID namespace so it sees containerd, and keep /var/log and the "
    "state directory readable there",
    "the agent finds Podman's storage from conmon's command line, a running podman's --root, "
    "or graphroot in storage.conf (/etc/containers/storage.conf, a user's "
    "~/.config/containers/storage.conf): run the agent in the host's PID namespace and keep "
    "the graphroot readable there"};

void runtime_roots__report_miss(struct runtime_roots *rr, enum runtime rt, unsigned uid,
                                const char *cid, const char *also, const char *named)
{
    char tried[2048] = "", user[32] = "";
    size_t used = 0, n;
    uint64_t key = 0;

    for (size_t i = 0; i < 16 && cid[i]; i++)
        key = key << 4 | (uint64_t)(cid[i] <= '9' ? cid[i] - '0' : (cid[i] | 0x20) - 'a' + 10);
    for (size_t i = 0; i < rr->nmisses; i++) {
        if (rr->misses[i] == key)
            return;
    }
    if (rr->nmisses >= MISSES_MAX) {
        if (!rr->misses_full)
            log_warn("procs: %zu containers' names not found; further ones are not logged",
                     rr->nmisses);
        rr->misses_full = true;
        return;
    }
    rr->misses[rr->nmisses++] = key;
    n = rr->walked ? filter(rr, rt, uid) : 0;
    for (size_t i = 0; i < n && used < sizeof(tried); i++) {
        int w = snprintf(tried + used, sizeof(tried) - used, "%s%s (%s)", i ? ", " : "",
                         rr->out[i].path, rr->out[i].why);
        used += w > 0 ? (size_t)w : 0;
    }
    if (uid)
        snprintf(user, sizeof(user), " of user %u", uid);
    log_warn("procs: %s container %.64s%s: its name was not found in %s%s%s; named %s. To "
             "fix: %s",
             runtime_names[rt], cid, user, also ? also : "", also && n ? ", " : "", n ? tried : "",
             named, fixes[rt]);
}

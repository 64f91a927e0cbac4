#include "identity.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../common/buf.h"
#include "../../common/str.h"
#include "container_meta.h"

/* Directory entries looked at in one listing: a node has hundreds of pods,
 * never this many; a directory someone filled on purpose costs no more. */
#define DIR_ENTRIES_MAX 100000
#define PATH_MAX_LEN 4096

/* Kubernetes' alphabet for generated name suffixes (k8s.io/apimachinery
 * util/rand SafeEncodeString): no vowels, no 0, 1 or 3. */
static const char k8s_alphabet[] = "bcdfghjklmnpqrstvwxz2456789";

/* Ranked: the most specific wins. */
enum kind { KIND_NONE, KIND_SYSTEMD, KIND_DOCKER, KIND_PODMAN, KIND_K8S };

/* Which runtime a container id's path component names. */
enum cid_from { CID_PLAIN, CID_DOCKER_SCOPE, CID_LIBPOD };

/* What one cgroup path says, before any file is read. */
struct parsed {
    enum kind kind;
    char unit[IDENTITY_NAME_MAX]; /* the last *.service component */
    char cid[IDENTITY_ID_MAX];    /* container id, 64 hex */
    char pod_uid[80];             /* with dashes, as the kubelet's directories have it */
    long user;                    /* the uid of a user@UID.service above it, or -1 */
};

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return n > 0;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static bool starts_with(const char *s, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    return n >= k && memcmp(s, prefix, k) == 0;
}

/* A container id in one path component: "<64hex>", "cri-containerd-<64hex>.scope",
 * "crio-<64hex>.scope" (or without .scope, cgroupfs), "docker-<64hex>.scope",
 * Podman's "libpod-<64hex>[.scope]". */
static bool component_cid(const char *c, size_t n, char out[IDENTITY_ID_MAX], enum cid_from *from)
{
    static const struct {
        const char *prefix;
        enum cid_from from;
    } prefixes[] = {{"cri-containerd-", CID_PLAIN},
                    {"crio-", CID_PLAIN},
                    {"docker-", CID_DOCKER_SCOPE},
                    {"containerd-", CID_PLAIN},
                    {"libpod-", CID_LIBPOD}};
    *from = CID_PLAIN;
    if (ends_with(c, n, ".scope"))
        n -= 6;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        if (starts_with(c, n, prefixes[i].prefix)) {
            size_t k = strlen(prefixes[i].prefix);
            *from = prefixes[i].from;
            c += k;
            n -= k;
            break;
        }
    }
    /* crio-conmon-<id> and libpod-conmon-<id> (the monitors, not the
     * containers) land here too. */
    if (n != 64 || !is_hex(c, n))
        return false;
    memcpy(out, c, 64);
    out[64] = '\0';
    return true;
}

/* The uid of a user manager's unit, "user@1000.service", or -1. */
static long component_user(const char *c, size_t n)
{
    long uid = 0;

    if (!starts_with(c, n, "user@") || !ends_with(c, n, ".service") || n <= 13 || n > 23)
        return -1;
    for (size_t i = 5; i < n - 8; i++) {
        if (c[i] < '0' || c[i] > '9')
            return -1;
        uid = uid * 10 + (c[i] - '0');
    }
    return uid;
}

/* The pod uid of a kubepods component: "pod<uid>" (cgroupfs) or
 * "kubepods[-<qos>]-pod<uid with _ for ->.slice" (systemd). Only hex and
 * dashes are taken: the uid becomes part of a path. */
static bool component_pod_uid(const char *c, size_t n, char *out, size_t outlen)
{
    const char *u = NULL;
    size_t un = 0;

    if (starts_with(c, n, "pod")) {
        u = c + 3;
        un = n - 3;
    } else if (starts_with(c, n, "kubepods") && ends_with(c, n, ".slice")) {
        for (size_t i = 0; i + 4 <= n - 6; i++) {
            if (memcmp(c + i, "-pod", 4) == 0) {
                u = c + i + 4;
                un = n - 6 - (i + 4);
                break;
            }
        }
    }
    if (!u || un < 8 || un >= outlen)
        return false;
    for (size_t i = 0; i < un; i++) {
        char ch = u[i] == '_' ? '-' : u[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || ch == '-'))
            return false;
        out[i] = ch;
    }
    out[un] = '\0';
    return true;
}

static void parse_path(const char *path, size_t len, struct parsed *p)
{
    bool kube = false, after_docker = false;

    memset(p, 0, sizeof(*p));
    p->user = -1;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && path[j] != '/')
            j++;
        const char *c = path + i;
        size_t n = j - i;
        enum cid_from from;
        char cid[IDENTITY_ID_MAX];

        if (n > 0) {
            if (starts_with(c, n, "kubepods"))
                kube = true;
            if (kube && !p->pod_uid[0])
                component_pod_uid(c, n, p->pod_uid, sizeof(p->pod_uid));
            if (component_user(c, n) >= 0)
                p->user = component_user(c, n);
            if (component_cid(c, n, cid, &from)) {
                if (kube && p->pod_uid[0]) {
                    memcpy(p->cid, cid, sizeof(cid));
                } else if (from == CID_LIBPOD) {
                    /* /libpod_parent/libpod-<id> (cgroupfs), machine.slice/
                     * libpod-<id>.scope, user@UID.service/.../libpod-<id>.scope */
                    memcpy(p->cid, cid, sizeof(cid));
                    p->kind = KIND_PODMAN;
                } else if (after_docker || from == CID_DOCKER_SCOPE) {
                    /* /docker/<id> (cgroupfs) or docker-<id>.scope (systemd);
                     * the innermost wins for a container in a container. */
                    memcpy(p->cid, cid, sizeof(cid));
                    p->kind = KIND_DOCKER;
                }
            }
            after_docker = n == 6 && memcmp(c, "docker", 6) == 0;
            if (n > 8 && ends_with(c, n, ".service") && n < sizeof(p->unit)) {
                memcpy(p->unit, c, n);
                p->unit[n] = '\0';
            }
        }
        i = j + 1;
    }
    if (kube && p->pod_uid[0]) {
        p->kind = KIND_K8S;
        p->unit[0] = '\0'; /* a unit above kubepods (kubelet.service) is not the pod's */
    } else if (p->kind == KIND_DOCKER || p->kind == KIND_PODMAN) {
        p->unit[0] = '\0'; /* user@UID.service is the rootless container's manager */
    } else {
        p->cid[0] = '\0';
        if (p->unit[0])
            p->kind = KIND_SYSTEMD;
    }
}

static void docker_names(const struct identity_roots *r, const struct parsed *p,
                         struct identity *out)
{
    char name[IDENTITY_NAME_MAX];

    str__copy(out->container_id, sizeof(out->container_id), p->cid);
    snprintf(out->service, sizeof(out->service), "%.12s", p->cid);
    if (container_meta__docker(r, p->user > 0 ? (unsigned)p->user : 0, p->cid, name,
                               sizeof(name))) {
        str__copy(out->container, sizeof(out->container), name);
        str__copy(out->service, sizeof(out->service), name);
    }
}

/* A Podman container: its name from the storage of root's containers, or
 * of the user's whose manager (user@UID.service) it runs under. */
static void podman_names(const struct identity_roots *r, const struct parsed *p,
                         struct identity *out)
{
    char name[IDENTITY_NAME_MAX];

    str__copy(out->container_id, sizeof(out->container_id), p->cid);
    snprintf(out->service, sizeof(out->service), "%.12s", p->cid);
    if (container_meta__podman(r, p->user > 0 ? (unsigned)p->user : 0, p->cid, name,
                               sizeof(name))) {
        str__copy(out->container, sizeof(out->container), name);
        str__copy(out->service, sizeof(out->service), name);
    }
}

/* Calls fn for each entry of dir (not . or ..) until it returns true.
 * Returns whether one did. Entries are names only: nothing is followed. */
static bool each_entry(const char *dir, bool (*fn)(const char *name, void *ctx), void *ctx)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    DIR *d;
    struct dirent *de;
    bool found = false;
    unsigned seen = 0;

    if (fd < 0)
        return false;
    d = fdopendir(fd);
    if (!d) {
        close(fd);
        return false;
    }
    while (!found && seen++ < DIR_ENTRIES_MAX && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        found = fn(de->d_name, ctx);
    }
    closedir(d);
    return found;
}

struct pod_match {
    const char *uid;
    struct identity *out;
};

/* /var/log/pods/<namespace>_<pod>_<uid>: namespaces and pod names are DNS
 * names, so they hold no '_'. */
static bool match_pod_dir(const char *name, void *ctx)
{
    struct pod_match *m = ctx;
    size_t n = strlen(name), ul = strlen(m->uid);
    const char *us = strchr(name, '_');

    if (!us || n < ul + 3 || name[n - ul - 1] != '_' || strcmp(name + n - ul, m->uid) != 0)
        return false;
    size_t nsl = us - name, podl = n - ul - 1 - (nsl + 1);
    if (nsl == 0 || podl == 0 || podl >= IDENTITY_NAME_MAX || nsl >= IDENTITY_NAME_MAX)
        return false;
    memcpy(m->out->namespace, name, nsl);
    m->out->namespace[nsl] = '\0';
    memcpy(m->out->pod, us + 1, podl);
    m->out->pod[podl] = '\0';
    return true;
}

struct container_match {
    char prefix[2 * IDENTITY_NAME_MAX + 4]; /* <pod>_<namespace>_ */
    char suffix[IDENTITY_ID_MAX + 8];       /* -<id>.log */
    struct identity *out;
};

/* /var/log/containers/<pod>_<namespace>_<container>-<id>.log */
static bool match_container_log(const char *name, void *ctx)
{
    struct container_match *m = ctx;
    size_t n = strlen(name), pl = strlen(m->prefix), sl = strlen(m->suffix);

    if (n <= pl + sl || strncmp(name, m->prefix, pl) != 0 || strcmp(name + n - sl, m->suffix) != 0)
        return false;
    size_t cl = n - pl - sl;
    if (cl >= IDENTITY_NAME_MAX)
        return false;
    memcpy(m->out->container, name + pl, cl);
    m->out->container[cl] = '\0';
    return true;
}

struct only_one {
    char name[IDENTITY_NAME_MAX];
    unsigned n;
};

static bool count_entry(const char *name, void *ctx)
{
    struct only_one *o = ctx;
    if (o->n++ == 0)
        str__copy(o->name, sizeof(o->name), name);
    return o->n > 1; /* two are enough to know it is not one */
}

/* The one entry of dir, when it has exactly one. */
static bool sole_entry(const char *dir, char *out, size_t len)
{
    struct only_one o = {{0}, 0};

    each_entry(dir, count_entry, &o);
    if (o.n != 1)
        return false;
    str__copy(out, len, o.name);
    return true;
}

static void k8s_names_kubelet(const struct identity_roots *r, const struct parsed *p,
                              struct identity *out)
{
    char path[PATH_MAX_LEN];
    struct pod_match pm = {p->pod_uid, out};

    str__copy(out->container_id, sizeof(out->container_id), p->cid);
    snprintf(path, sizeof(path), "%s/pods", r->log);
    if (!each_entry(path, match_pod_dir, &pm))
        goto container;
    if (p->cid[0]) {
        struct container_match cm;
        cm.out = out;
        snprintf(cm.prefix, sizeof(cm.prefix), "%s_%s_", out->pod, out->namespace);
        snprintf(cm.suffix, sizeof(cm.suffix), "-%s.log", p->cid);
        snprintf(path, sizeof(path), "%s/containers", r->log);
        if (each_entry(path, match_container_log, &cm))
            return;
    }
    /* No log symlink for this id (the pause container has none): a pod of
     * one container still says which. */
    if (snprintf(path, sizeof(path), "%s/pods/%s_%s_%s", r->log, out->namespace, out->pod,
                 p->pod_uid) < (int)sizeof(path) &&
        p->cid[0] && sole_entry(path, out->container, sizeof(out->container)))
        return;
container:
    if (p->cid[0] && snprintf(path, sizeof(path), "%s/pods/%s/containers", r->kubelet, p->pod_uid) <
                         (int)sizeof(path))
        sole_entry(path, out->container, sizeof(out->container));
}

/* The kubelet's directories first; what they lack from containerd's bundle. */
static void k8s_names(const struct identity_roots *r, const struct parsed *p, struct identity *out)
{
    k8s_names_kubelet(r, p, out);
    if (p->cid[0] && (!out->pod[0] || !out->container[0]))
        container_meta__cri(r, p->cid, p->pod_uid, out);
}

/* Lines of /proc/PID/cgroup in the order they are trusted: the v2 line
 * ("0::"), then v1's name=systemd, then the controllers. */
static int line_rank(const char *hier, size_t hl, const char *ctl, size_t cl)
{
    if (hl == 1 && hier[0] == '0' && cl == 0)
        return 0;
    if (cl == 12 && memcmp(ctl, "name=systemd", 12) == 0)
        return 1;
    return 2;
}

bool identity__roots_under(const char *prefix, struct identity_roots *out, char *storage,
                           size_t len)
{
    static const char *const paths[] = {"/var/lib/docker", "/var/log", "/var/lib/kubelet",
                                        "/var/lib/containers/storage", ""};
    const char **slots[] = {&out->docker, &out->log, &out->kubelet, &out->containers, &out->host};
    size_t used = 0;

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        int n = snprintf(storage + used, len - used, "%s%s", prefix, paths[i]);
        if (n < 0 || (size_t)n >= len - used) {
            memset(out, 0, sizeof(*out));
            return false;
        }
        *slots[i] = storage + used;
        used += n + 1;
    }
    return true;
}

void identity__resolve(const char *cgroup, size_t len, const struct identity_roots *roots,
                       const char *exe, struct identity *out)
{
    struct identity_roots r = {"/var/lib/docker", "/var/log", "/var/lib/kubelet",
                               "/var/lib/containers/storage", ""};
    struct parsed best, cur;
    int best_rank = 3;

    if (roots) {
        r.docker = roots->docker ? roots->docker : r.docker;
        r.log = roots->log ? roots->log : r.log;
        r.kubelet = roots->kubelet ? roots->kubelet : r.kubelet;
        r.containers = roots->containers ? roots->containers : r.containers;
        r.host = roots->host ? roots->host : r.host;
        r.runtimes = roots->runtimes;
    }
    memset(out, 0, sizeof(*out));
    memset(&best, 0, sizeof(best));
    for (size_t i = 0; cgroup && i < len;) {
        const char *line = cgroup + i, *nl = memchr(line, '\n', len - i);
        size_t ll = nl ? (size_t)(nl - line) : len - i;
        const char *c1 = memchr(line, ':', ll);
        const char *c2 = c1 ? memchr(c1 + 1, ':', ll - (c1 + 1 - line)) : NULL;
        i += ll + 1;
        if (!c2)
            continue;
        int rank = line_rank(line, c1 - line, c1 + 1, c2 - c1 - 1);
        parse_path(c2 + 1, line + ll - (c2 + 1), &cur);
        /* The most specific kind wins; between equals, the more trusted line. */
        if (cur.kind > best.kind || (cur.kind == best.kind && cur.kind && rank < best_rank)) {
            best = cur;
            best_rank = rank;
        }
    }
    switch (best.kind) {
    case KIND_K8S:
        k8s_names(&r, &best, out);
        if (out->pod[0])
            identity__pod_owner(out->pod, out->service, sizeof(out->service));
        break;
    case KIND_DOCKER:
        docker_names(&r, &best, out);
        break;
    case KIND_PODMAN:
        podman_names(&r, &best, out);
        break;
    case KIND_SYSTEMD: {
        str__copy(out->systemd_unit, sizeof(out->systemd_unit), best.unit);
        size_t n = strlen(best.unit) - 8; /* ".service" */
        const char *at = memchr(best.unit, '@', n);
        if (at && at > best.unit)
            n = at - best.unit;
        snprintf(out->service, sizeof(out->service), "%.*s", (int)n, best.unit);
        break;
    }
    case KIND_NONE:
        break;
    }
    if (!out->service[0])
        str__copy(out->service, sizeof(out->service), exe && *exe ? exe : "unknown");
}

static bool in_alphabet(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!s[i] || !strchr(k8s_alphabet, s[i]))
            return false;
    }
    return n > 0;
}

static bool all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
    }
    return n > 0;
}

void identity__pod_owner(const char *pod, char *out, size_t len)
{
    size_t n = strlen(pod);
    const char *dash = memrchr(pod, '-', n);

    if (dash && dash > pod) {
        const char *suf = dash + 1;
        size_t sl = pod + n - suf, base = dash - pod;
        if (sl == 5 && in_alphabet(suf, sl)) {
            /* DaemonSet, Job, or a ReplicaSet's pod if a template hash precedes. */
            const char *d2 = memrchr(pod, '-', base);
            if (d2 && d2 > pod) {
                const char *h = d2 + 1;
                size_t hl = dash - h;
                if (hl >= 6 && hl <= 10 && (in_alphabet(h, hl) || all_digits(h, hl)))
                    base = d2 - pod;
            }
            n = base;
        } else if (sl <= 5 && all_digits(suf, sl)) {
            n = base; /* a StatefulSet's ordinal */
        }
    }
    snprintf(out, len, "%.*s", (int)n, pod);
}

bool identity__profiling_disabled(const char *environ, size_t len)
{
    static const char want[] = "CODEXRAY_PROFILING=disabled";
    size_t wl = sizeof(want) - 1;

    for (size_t i = 0; environ && i < len;) {
        const char *e = environ + i, *nul = memchr(e, '\0', len - i);
        size_t el = nul ? (size_t)(nul - e) : len - i;
        if (el == wl && memcmp(e, want, wl) == 0)
            return true;
        i += el + 1;
    }
    return false;
}

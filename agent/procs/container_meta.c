#include "container_meta.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "../../common/buf.h"
#include "../../common/str.h"
#include "json_scan.h"
#include "podman_meta.h"
#include "runtime_roots.h"

/* Docker's config.v2.json holds the container's environment too; past this
 * the name is looked for in what was read, and the short id used if absent. */
#define DOCKER_CONFIG_MAX (1u << 20)
/* An OCI bundle's config.json: the annotations come after the process (its
 * environment) and the mounts; a few KiB usually. */
#define BUNDLE_CONFIG_MAX (4u << 20)
#define PATH_LEN 4096

/* Looks for something in one place: returns whether it was found there. */
typedef bool (*find_in_fn)(const char *root, void *ctx);

/* fn over the places runtime rt may keep the metadata of uid's containers
 * (roots->runtimes'), then `extra` (a root identity__resolve was given) if
 * not among them. After a miss everywhere, once more if /proc says the
 * places changed. */
static bool find(const struct identity_roots *r, enum runtime rt, unsigned uid, const char *extra,
                 find_in_fn fn, void *ctx)
{
    for (int pass = 0; pass < 2; pass++) {
        const struct runtime_dir *d = NULL;
        size_t n = r->runtimes ? runtime_roots__dirs(r->runtimes, rt, uid, &d) : 0;
        bool extra_listed = false;
        for (size_t i = 0; i < n; i++) {
            if (fn(d[i].path, ctx))
                return true;
            extra_listed |= extra && strcmp(d[i].path, extra) == 0;
        }
        if (extra && !extra_listed && fn(extra, ctx))
            return true;
        if (pass == 1 || !r->runtimes || !runtime_roots__rescan(r->runtimes, rt, uid))
            return false;
    }
    return false;
}

struct name_ctx {
    const char *cid;
    char *out;
    size_t len;
};

static bool docker_in(const char *root, void *ctx)
{
    struct name_ctx *c = ctx;
    char path[PATH_LEN], name[IDENTITY_NAME_MAX];
    struct buf b;
    bool found = false;

    /* cid is 64 hex: nothing in it can leave the directory. */
    if (snprintf(path, sizeof(path), "%s/containers/%s/config.v2.json", root, c->cid) >=
        (int)sizeof(path))
        return false;
    buf__init(&b, DOCKER_CONFIG_MAX);
    int r = buf__read_file(&b, AT_FDCWD, path);
    if ((r == 0 || r == -E2BIG) && b.data &&
        json_scan__top_string(b.data, b.len, "Name", name, sizeof(name))) {
        const char *nm = name[0] == '/' ? name + 1 : name;
        found = *nm != '\0';
        if (found)
            str__copy(c->out, c->len, nm);
    }
    buf__free(&b);
    return found;
}

bool container_meta__docker(const struct identity_roots *r, unsigned uid, const char *cid,
                            char *out, size_t len)
{
    struct name_ctx c = {cid, out, len};
    char named[16];

    if (find(r, RUNTIME_DOCKER, uid, r->docker, docker_in, &c))
        return true;
    snprintf(named, sizeof(named), "%.12s", cid);
    if (r->runtimes)
        runtime_roots__report_miss(r->runtimes, RUNTIME_DOCKER, uid, cid, NULL, named);
    return false;
}

static bool podman_in(const char *root, void *ctx)
{
    struct name_ctx *c = ctx;
    return podman_meta__name(root, c->cid, c->out, c->len);
}

bool container_meta__podman(const struct identity_roots *r, unsigned uid, const char *cid,
                            char *out, size_t len)
{
    struct name_ctx c = {cid, out, len};
    char user_storage[PATH_LEN], named[16];
    const char *extra = r->containers;

    if (uid > 0)
        extra = podman_meta__user_storage(r->host, uid, user_storage, sizeof(user_storage))
                    ? user_storage
                    : NULL;
    if (find(r, RUNTIME_PODMAN, uid, extra, podman_in, &c))
        return true;
    snprintf(named, sizeof(named), "%.12s", cid);
    if (r->runtimes)
        runtime_roots__report_miss(r->runtimes, RUNTIME_PODMAN, uid, cid, NULL, named);
    return false;
}

struct cri_ctx {
    const char *cid, *pod_uid;
    struct identity *out;
};

static bool cri_in(const char *state, void *ctx)
{
    struct cri_ctx *c = ctx;
    char path[PATH_LEN], pod[IDENTITY_NAME_MAX], ns[IDENTITY_NAME_MAX], uid[80];
    char container[IDENTITY_NAME_MAX] = "";
    const char *ann;
    size_t annlen;
    struct buf b;
    bool found = false;

    if (snprintf(path, sizeof(path), "%s/io.containerd.runtime.v2.task/k8s.io/%s/config.json",
                 state, c->cid) >= (int)sizeof(path))
        return false;
    buf__init(&b, BUNDLE_CONFIG_MAX);
    int r = buf__read_file(&b, AT_FDCWD, path);
    if ((r != 0 && r != -E2BIG) || !b.data ||
        !json_scan__top_object(b.data, b.len, "annotations", &ann, &annlen) ||
        !json_scan__top_string(ann, annlen, "io.kubernetes.cri.sandbox-name", pod, sizeof(pod)) ||
        !json_scan__top_string(ann, annlen, "io.kubernetes.cri.sandbox-namespace", ns,
                               sizeof(ns)) ||
        !pod[0] || !ns[0])
        goto out;
    /* Another pod's bundle (an id reused, a file put there): not ours. */
    if (json_scan__top_string(ann, annlen, "io.kubernetes.cri.sandbox-uid", uid, sizeof(uid)) &&
        strcmp(uid, c->pod_uid) != 0)
        goto out;
    /* The pause container (container-type "sandbox") has no container name. */
    json_scan__top_string(ann, annlen, "io.kubernetes.cri.container-name", container,
                          sizeof(container));
    if (!c->out->pod[0]) {
        str__copy(c->out->pod, sizeof(c->out->pod), pod);
        str__copy(c->out->namespace, sizeof(c->out->namespace), ns);
    }
    if (!c->out->container[0] && strcmp(pod, c->out->pod) == 0)
        str__copy(c->out->container, sizeof(c->out->container), container);
    found = true;
out:
    buf__free(&b);
    return found;
}

void container_meta__cri(const struct identity_roots *r, const char *cid, const char *pod_uid,
                         struct identity *out)
{
    struct cri_ctx c = {cid, pod_uid, out};
    char also[PATH_LEN + 32];
    bool need_pod = !out->pod[0];

    if (!r->runtimes)
        return;
    /* Rescans and a log line only for what matters: the pod's name. The
     * pause container's missing name is no miss. */
    if (!need_pod) {
        const struct runtime_dir *d = NULL;
        size_t n = runtime_roots__dirs(r->runtimes, RUNTIME_CONTAINERD, 0, &d);
        for (size_t i = 0; i < n && !cri_in(d[i].path, &c); i++)
            ;
        return;
    }
    if (find(r, RUNTIME_CONTAINERD, 0, NULL, cri_in, &c))
        return;
    snprintf(also, sizeof(also), "%s/pods (the kubelet's)", r->log);
    runtime_roots__report_miss(r->runtimes, RUNTIME_CONTAINERD, 0, cid, also, "by its executable");
}

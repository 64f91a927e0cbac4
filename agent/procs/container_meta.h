/* A container's name from its runtime's metadata, wherever that runtime
 * keeps it: the places runtime_roots learned from the running daemons and
 * their configurations, then the roots identity__resolve was given. Used
 * by identity.c only. When a name is not found anywhere, /proc is walked
 * again once (a daemon may have moved) and the miss is logged once per
 * container (runtime_roots__report_miss). */
#ifndef CODEXRAY_AGENT_PROCS_CONTAINER_META_H
#define CODEXRAY_AGENT_PROCS_CONTAINER_META_H

#include <stdbool.h>
#include <stddef.h>

#include "identity.h"

/* Docker's name for container cid (64 hex) of user uid (0, or a rootless
 * dockerd's user), without its leading '/': "Name" in
 * <data root>/containers/<cid>/config.v2.json. Returns false when not
 * found; out is then unspecified. */
bool container_meta__docker(const struct identity_roots *r, unsigned uid, const char *cid,
                            char *out, size_t len);

/* Podman's name for container cid of user uid (0: root's containers): the
 * first of its "names" in <graphroot>/overlay-containers/containers.json. */
bool container_meta__podman(const struct identity_roots *r, unsigned uid, const char *cid,
                            char *out, size_t len);

/* The names the CRI gave the task cid in containerd's bundle,
 * <state>/io.containerd.runtime.v2.task/k8s.io/<cid>/config.json
 * (annotations io.kubernetes.cri.sandbox-name, -namespace, container-name),
 * filling what out lacks of pod, namespace and container. A bundle whose
 * io.kubernetes.cri.sandbox-uid is not pod_uid is not this pod's. Logs a
 * miss when the pod's name is still unknown. */
void container_meta__cri(const struct identity_roots *r, const char *cid, const char *pod_uid,
                         struct identity *out);

#endif

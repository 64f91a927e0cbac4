/* Where the node's container runtimes keep the metadata that names their
 * containers, learned from the runtimes themselves rather than assumed:
 *   - Docker: the data root (containers/<id>/config.v2.json) from dockerd's
 *     command line (--data-root, -g, --graph), else the "data-root" (or old
 *     "graph") of its daemon.json (--config-file, default
 *     /etc/docker/daemon.json; a rootless dockerd's
 *     ~/.config/docker/daemon.json), else /var/lib/docker (rootless:
 *     ~/.local/share/docker);
 *   - containerd: the state directory, where each task's bundle and its
 *     config.json (with the CRI's pod and container names) are:
 *     io.containerd.runtime.v2.task/<namespace>/<id>/config.json, from
 *     containerd's --state, else `state` in its config.toml (--config, -c,
 *     default /etc/containerd/config.toml), else /run/containerd; --root and
 *     `root` are recorded for the log;
 *   - Podman (no daemon): the graphroot (overlay-containers/containers.json)
 *     from each conmon's command line (its bundle -b and podman's --root
 *     among its exit command's arguments), a running podman's --root, then
 *     `graphroot` in /etc/containers/storage.conf (else
 *     /usr/share/containers/storage.conf), else /var/lib/containers/storage;
 *     for a rootless user: `graphroot` in ~/.config/containers/storage.conf,
 *     else `rootless_storage_path` of the system's storage.conf ($HOME, $UID
 *     and $USER replaced), else ~/.local/share/containers/storage.
 * The daemons are found by name (/proc/PID/comm) under proc_root; their
 * files are read through host_root ("" or "/proc/1/root"). A daemon of user
 * U only says where the containers of U are (a rootless daemon cannot
 * rename root's containers, nor one user's another's).
 *
 * What is learned is kept: /proc is walked again only when asked after the
 * time to live (a minute in the agent), or after a miss when the last walk
 * is more than 5 s old, so a daemon restarted with a new root is noticed
 * (that wait doubles, up to the time to live, while walks find nothing
 * new, and is 5 s again once one does).
 * Every file is read capped (command lines 64 KiB, configurations 1 MiB)
 * without following a final symlink; paths from flags and configurations
 * are used only when absolute and without "..". Main thread only. */
#ifndef CODEXRAY_AGENT_PROCS_RUNTIME_ROOTS_H
#define CODEXRAY_AGENT_PROCS_RUNTIME_ROOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Places kept per runtime: a node runs one or two daemons of each. */
#define RUNTIME_ROOTS_MAX 16

enum runtime { RUNTIME_DOCKER, RUNTIME_CONTAINERD, RUNTIME_PODMAN, RUNTIME_COUNT };

/* One place where a runtime's metadata may be. */
struct runtime_dir {
    char path[4096]; /* under host_root */
    char why[256];   /* where it was learned: "dockerd pid 812 --data-root", "default" */
    unsigned uid;    /* whose containers: 0 for the system's */
};

struct runtime_roots;

/* A cache over the processes under proc_root ("/proc") and the files under
 * host_root ("" or "/proc/1/root"); ttl_ns is how long a walk of /proc is
 * trusted (0: every call walks, as the tests want). Returns NULL when out
 * of memory. Nothing is read until the first question. */
struct runtime_roots *runtime_roots__new(const char *proc_root, const char *host_root,
                                         uint64_t ttl_ns);

/* Frees rr; NULL is fine. */
void runtime_roots__free(struct runtime_roots *rr);

/* The places where runtime rt may keep the metadata of a container of user
 * uid (0: the system's; another uid: that user's rootless runtime), most
 * likely first, the defaults last. Walks /proc first when what was learned
 * is older than the time to live. Sets *out to an array of the count
 * returned (at least 1 unless out of memory), valid until the next call
 * into rr. */
size_t runtime_roots__dirs(struct runtime_roots *rr, enum runtime rt, unsigned uid,
                           const struct runtime_dir **out);

/* After a container's name was not found in any place: walks /proc again
 * when the last walk is more than 5 s old (a daemon may have restarted with
 * a new root; longer after fruitless walks, see above). Returns whether the places of rt for uid
 * changed, that is whether looking again may find what was missed. */
bool runtime_roots__rescan(struct runtime_roots *rr, enum runtime rt, unsigned uid);

/* Logs once per container (by id; 4,096 are remembered, past that one last
 * line says further misses go unlogged) that the name of container cid of
 * runtime rt (user uid) was not found: the places tried (runtime_roots__dirs
 * plus `also`, a caller's text or NULL), the name used instead and what
 * would fix it. */
void runtime_roots__report_miss(struct runtime_roots *rr, enum runtime rt, unsigned uid,
                                const char *cid, const char *also, const char *named);

#endif

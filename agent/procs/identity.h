/* A process's identity as the node knows it: the service it belongs to and
 * where it runs (systemd unit, Docker container, Kubernetes pod), read from
 * the text of /proc/PID/cgroup and the files Docker and the kubelet leave on
 * the node. Also whether its environment opts out of profiling.
 *
 * Pure functions over text plus reads under configurable roots, so the unit
 * tests build the layouts in a temporary directory. Every file read is capped
 * and opened without following a final symlink; ids taken from the cgroup
 * path are checked (hex, uid characters) before they become part of a path.
 */
#ifndef CODEXRAY_AGENT_PROCS_IDENTITY_H
#define CODEXRAY_AGENT_PROCS_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>

#define IDENTITY_NAME_MAX 256
#define IDENTITY_ID_MAX 65 /* a 64-hex container id and its NUL */

/* Empty strings where a field does not apply. */
struct identity {
    char service[IDENTITY_NAME_MAX];      /* never empty once identity__resolve ran */
    char container_id[IDENTITY_ID_MAX];   /* full 64-hex id (Docker or a CRI runtime) */
    char pod[IDENTITY_NAME_MAX];          /* Kubernetes pod name */
    char namespace[IDENTITY_NAME_MAX];    /* its namespace */
    char container[IDENTITY_NAME_MAX];    /* the container's name: in the pod, or Docker's */
    char systemd_unit[IDENTITY_NAME_MAX]; /* e.g. nginx.service */
};

struct runtime_roots;

/* Where the node's files are. NULL members take the defaults. An agent in
 * a container reads them through the host's root (identity__host_roots). */
struct identity_roots {
    const char *docker;     /* /var/lib/docker: containers/<id>/config.v2.json */
    const char *log;        /* /var/log: pods/<ns>_<pod>_<uid>/<container>/, containers/<...>.log */
    const char *kubelet;    /* /var/lib/kubelet: pods/<uid>/containers/<container>/ */
    const char *containers; /* /var/lib/containers/storage: Podman's (root's) containers */
    const char *host;       /* "": the host's root, before /etc/passwd and the homes
                             * of rootless Podman's users */
    struct runtime_roots *runtimes; /* NULL: only the roots above; else where the running
                                     * daemons keep their containers' metadata
                                     * (runtime_roots.h), tried first */
};

/* The roots above as seen through `prefix` ("" or "/proc/1/root"), in
 * storage the caller provides and keeps while *out is used: `storage` of
 * len bytes (5 paths; 5 * 4096 is always enough); runtimes is left NULL.
 * Returns false when they do not fit, leaving *out for the defaults (all
 * NULL). */
bool identity__roots_under(const char *prefix, struct identity_roots *out, char *storage,
                           size_t len);

/* Fills *out from the text of /proc/PID/cgroup (len bytes, not necessarily
 * NUL-terminated, v1 and v2 lines alike) and the files under roots; `exe` is
 * the process's own name (the executable's base name, or what an interpreter
 * runs: cmdline_name.h), the service when nothing more specific is
 * known ("unknown" when exe is NULL or empty). The rules, most specific
 * first:
 *   - a Kubernetes container (kubepods, systemd or cgroupfs driver;
 *     containerd, CRI-O or dockershim): pod, namespace and container from
 *     the kubelet's log directories, else from containerd's task bundle
 *     (the CRI's annotations, under containerd's state directory), the
 *     service being the pod's owner (identity__pod_owner); exe when the
 *     pod's name cannot be found;
 *   - a Podman container (libpod-<id>, under libpod_parent, machine.slice
 *     or a user's manager user@UID.service for rootless ones; not conmon):
 *     the first of its names in containers/storage's containers.json (root's,
 *     or under the user's home; the graphroots roots->runtimes knows
 *     first), else the first 12 characters of its id;
 *   - a Docker container (/docker/<id>, docker-<id>.scope): the container's
 *     name from config.v2.json without its leading '/' (in the data roots
 *     roots->runtimes knows first, then roots->docker), else the first 12
 *     characters of its id;
 *   - a systemd service (the last *.service component): the unit without
 *     ".service" and without an "@instance" part (getty@tty1.service ->
 *     getty); scopes and slices (sessions, user.slice) are not services;
 *   - otherwise exe.
 * This function cannot fail: what it cannot read it leaves out. */
void identity__resolve(const char *cgroup, size_t len, const struct identity_roots *roots,
                       const char *exe, struct identity *out);

/* The owner's name of a pod (what the service is): strips a ReplicaSet's
 * "-<template hash>-<5 random>" (web-7d4b9c8f6-x2x7k -> web), a DaemonSet's
 * or Job's "-<5 random>" (agent-x2x7k -> agent) or a StatefulSet's
 * "-<ordinal>" (db-0 -> db). The random parts are in Kubernetes' alphabet of
 * consonants and digits (bcdfghjklmnpqrstvwxz2456789), which is how a name
 * that merely contains dashes (my-app, kube-proxy) is left whole. Writes at
 * most len bytes, NUL included. */
void identity__pod_owner(const char *pod, char *out, size_t len);

/* Whether an environment (the text of /proc/PID/environ: NUL-separated
 * VAR=value entries, len bytes) holds exactly CODEXRAY_PROFILING=disabled. */
bool identity__profiling_disabled(const char *environ, size_t len);

#endif

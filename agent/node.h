/* The node the agent runs on, as opposed to the container or the systemd
 * unit it may run in: whether its /proc shows the host's processes, where
 * the host's root is, and the host's name. An agent in a container sees the
 * host through PID 1 of the host's PID namespace (/proc/1/root,
 * /proc/1/ns/uts), so no mount beyond the host's PID namespace is needed. */
#ifndef CODEXRAY_AGENT_NODE_H
#define CODEXRAY_AGENT_NODE_H

#include <stddef.h>

/* The inode of the initial PID namespace, the one whose pids BPF reports
 * (PROC_PID_INIT_INO in the kernel's include/linux/proc_ns.h). */
#define NODE_INIT_PID_NS_INO 0xEFFFFFFCu

/* 0 when the processes under proc_root ("/proc") are the host's: PID 1 there
 * is in the initial PID namespace, or, where PID 1 cannot be looked at, the
 * agent itself is. -1 with err saying so, and what fixes it (--pid host,
 * hostPID: true), when they are a container's: the pids BPF reports would
 * then match nothing the agent can read. */
int node__check_pid_ns(const char *proc_root, char *err, size_t errlen);

/* Whether a pid namespace link's text ("pid:[4026531836]") is the initial
 * namespace. */
int node__is_init_pid_ns(const char *link);

/* Where the host's root is, for reading what container runtimes keep on the
 * node: "" when the agent shares PID 1's mount namespace, or cannot tell;
 * "<proc_root>/1/root" when it has a mount namespace of its own (a
 * container, a systemd unit with ProtectSystem=) and that root can be
 * opened; where PID 1 cannot be looked at, the root of the first user-space
 * process in the initial mount namespace (kthreadd's), "<proc_root>/PID/root".
 * Writes at most len bytes, NUL included. */
void node__host_root(const char *proc_root, char *out, size_t len);

/* The host's name, whatever the agent's UTS namespace: PID 1's, read by a
 * short-lived thread that joins PID 1's UTS namespace (setns needs
 * CAP_SYS_ADMIN), or kthreadd's where PID 1 is hidden; else the first line of the host's
 * /etc/hostname; else the agent's own (gethostname); "unknown" when none answers. Writes at most
 * len bytes, NUL included. */
void node__hostname(const char *proc_root, char *out, size_t len);

#endif

/* HotSpot JVMs: making a running JVM write its perf map (the names of its
 * JIT-compiled code, /tmp/perf-PID.map) through its dynamic-attach socket,
 * as `jcmd PID Compiler.perfmap` does, without an agent jar or a restart.
 *
 * The attach protocol (HotSpot's attachListener_linux.cpp): a file
 * `.attach_pid<PID>` in the JVM's working directory or /tmp, SIGQUIT, and
 * the JVM listens on the UNIX socket `/tmp/.java_pid<PID>`; a request is
 * "1\0jcmd\0Compiler.perfmap\0\0\0" (protocol version, command, three
 * arguments), the reply "<code>\n<output>". PID is the JVM's pid in its own
 * namespace. All of it happens in a short-lived child that enters the JVM's
 * mount namespace (setns), so a container's paths are its own and cannot
 * point the agent at the host's files; the agent itself never changes
 * namespace; the child then takes the JVM's uid and gid, as the JVM only
 * answers its own user (or root). Needs CAP_SYS_ADMIN and CAP_SYS_CHROOT
 * (setns into a mount namespace), CAP_SETUID and CAP_SETGID.
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_JIT_JVM_ATTACH_H
#define CODEXRAY_AGENT_RUNTIMES_JIT_JVM_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Asks JVM `pid` (a pid of the agent's namespace) to write its perf map,
 * waiting at most timeout_ms in all. reply gets the JVM's answer (capped at
 * len - 1, NUL-terminated; "" when there is none). Returns 0 when the JVM
 * answered 0, -ETIMEDOUT when it did not open its socket or answer in time
 * (a JVM started with -XX:+DisableAttachMechanism, or busy), -EPROTO when it
 * answered an error (in reply), or a negative errno. Blocks the caller. */
int jvm__write_perfmap(const char *proc_root, uint32_t pid, int timeout_ms, char *reply,
                       size_t len);

/* True when the process's command line holds `flag` as one argument (read
 * from <proc_root>/PID/cmdline, capped at 1 MiB). */
bool jvm__has_arg(const char *proc_root, uint32_t pid, const char *flag);

/* Like jvm__has_arg, told apart from not knowing: 1 when the command line
 * holds `flag`, 0 when it was read and does not, -1 when it cannot be read
 * or is empty (the process has exited, or is a zombie). */
int jvm__arg_state(const char *proc_root, uint32_t pid, const char *flag);

#endif

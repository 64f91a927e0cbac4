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
 * answers its own user (or root). The SIGQUIT goes through the JVM's /proc
 * directory as a pidfd, so it reaches the process the agent read whatever
 * the agent's own PID namespace numbers it. Needs CAP_SYS_ADMIN and
 * CAP_SYS_CHROOT (setns into a mount namespace), CAP_SETUID and CAP_SETGID.
 * A failure names the call that failed (struct jvm_attach_fail) and what
 * would let it work (jvm__fail_hint).
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_JIT_JVM_ATTACH_H
#define CODEXRAY_AGENT_RUNTIMES_JIT_JVM_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The step of an attach that failed: each is one call, made by the agent
 * (OPEN_NS, FORK) or by its attach child, which reports it through a pipe.
 * Append only. */
enum jvm_attach_step {
    JVM_STEP_NONE,        /* nothing failed, or nothing is known */
    JVM_STEP_OPEN_NS,     /* open(<proc_root>/PID) or its ns/mnt */
    JVM_STEP_FORK,        /* pipe2() or fork() of the attach child */
    JVM_STEP_SETNS,       /* setns(CLONE_NEWNS): the JVM's mount namespace */
    JVM_STEP_CHDIR,       /* chdir("/") in it */
    JVM_STEP_SETGROUPS,   /* setgroups(0): to take the JVM's user */
    JVM_STEP_SETGID,      /* setresgid(): the JVM's gid */
    JVM_STEP_SETUID,      /* setresuid(): the JVM's uid */
    JVM_STEP_SIGNAL,      /* SIGQUIT to the JVM */
    JVM_STEP_WAIT_SOCKET, /* the JVM did not open /tmp/.java_pidN in time */
    JVM_STEP_CONNECT,     /* socket() or connect() to /tmp/.java_pidN */
    JVM_STEP_REQUEST,     /* write() of the request */
    JVM_STEP_WAIT_REPLY,  /* the JVM did not answer in time */
    JVM_STEP_CHILD,       /* the child died or reported nothing */
};

/* Why an attach failed: the step and the errno of its call (0 for a
 * timeout or a child that said nothing). */
struct jvm_attach_fail {
    enum jvm_attach_step step;
    int err;
};

/* Asks JVM `pid` (as <proc_root> numbers it: the host's pids, the ones BPF
 * reports, even where the agent runs in a PID namespace below the host's)
 * to write its perf map, waiting at most timeout_ms in all. reply gets the
 * JVM's answer (capped at len - 1, NUL-terminated; "" when there is none).
 * Returns 0 when the JVM answered 0, -ETIMEDOUT when it did not open its
 * socket or answer in time (a JVM started with -XX:+DisableAttachMechanism,
 * or busy), -EPROTO when it answered an error (in reply), or a negative
 * errno (the failed call's, or -EIO when the child died without saying).
 * On failure, *fail (may be NULL) says which call failed and with what
 * errno; on success its step is JVM_STEP_NONE. Blocks the caller. */
int jvm__write_perfmap(const char *proc_root, uint32_t pid, int timeout_ms, char *reply, size_t len,
                       struct jvm_attach_fail *fail);

/* The call behind a step, for a log line ("setns(CLONE_NEWNS) into the
 * JVM's mount namespace"); a static string. */
const char *jvm__step_name(enum jvm_attach_step step);

/* What a user can change so that a failed step works (capabilities, the
 * systemd unit's hardening, the JVM's flags), or "" when nothing is known
 * to help; a static string. */
const char *jvm__fail_hint(const struct jvm_attach_fail *fail);

/* True when the process's command line holds `flag` as one argument (read
 * from <proc_root>/PID/cmdline, capped at 1 MiB). */
bool jvm__has_arg(const char *proc_root, uint32_t pid, const char *flag);

/* Like jvm__has_arg, told apart from not knowing: 1 when the command line
 * holds `flag`, 0 when it was read and does not, -1 when it cannot be read
 * or is empty (the process has exited, or is a zombie). */
int jvm__arg_state(const char *proc_root, uint32_t pid, const char *flag);

#endif

#include "jvm_attach.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../../common/buf.h"

#define CMDLINE_MAX (1u << 20)
#define STATUS_MAX (16u << 10)

static const char request[] = "1\0jcmd\0Compiler.perfmap\0\0"; /* and the literal's NUL */

static long long mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* The pid in its own namespace (the last NSpid), or 0; and the effective
 * uid and gid; from the status file of the process directory dir (pid is
 * its name there). */
static uint32_t ns_pid(int dir, uint32_t pid, uint32_t *uid, uint32_t *gid)
{
    struct buf b;
    uint32_t v = 0;
    unsigned long ruid, e;

    buf__init(&b, STATUS_MAX);
    int r = buf__read_file(&b, dir, "status");
    if (r == 0 || r == -E2BIG) {
        const char *l = b.len ? strstr(b.data, "\nNSpid:") : NULL;
        if (l) {
            const char *end = strchr(l + 1, '\n');
            for (const char *p = l + 7; *p && (!end || p < end); p++) {
                if (*p >= '0' && *p <= '9' && (p[-1] == '\t' || p[-1] == ' ' || p[-1] == ':')) {
                    unsigned long n = strtoul(p, NULL, 10);
                    v = n <= UINT32_MAX ? (uint32_t)n : 0;
                }
            }
        } else {
            v = pid; /* no pid namespaces */
        }
        l = strstr(b.data, "\nUid:");
        if (!l || sscanf(l + 5, "%lu %lu", &ruid, &e) != 2)
            v = 0;
        else
            *uid = e;
        l = strstr(b.data, "\nGid:");
        if (!l || sscanf(l + 5, "%lu %lu", &ruid, &e) != 2)
            v = 0;
        else
            *gid = e;
    }
    buf__free(&b);
    return v;
}

/* What the attach child tells the agent, first thing on its pipe (the
 * JVM's reply follows): the step and errno of the call that failed, if one
 * did. Its exit code says how it went: 0 ok, 1 timeout, 2 error reply, 3
 * other failure. */
struct child_report {
    int32_t step;
    int32_t err;
};

/* What the child knows before it forks: where to go and who to be. */
struct child_plan {
    uint32_t pid; /* the JVM, as <proc_root> names it */
    uint32_t uid, gid;
    int proc; /* <proc_root>/<pid>: the JVM itself, however its pid is numbered here */
    int mnt;  /* the JVM's mount namespace */
    long long deadline;
    char attach_path[64], sock_path[64];
};

/* A failed call in the child: its step and errno; returns the exit code. */
static int child_fail(struct child_report *rep, int code, enum jvm_attach_step step, int err)
{
    rep->step = step;
    rep->err = err;
    return code;
}

/* SIGQUIT to the JVM, through its /proc directory as a pidfd (Linux 5.1):
 * the very process the agent read, never one that took its pid since, and
 * found whatever pid the agent's own PID namespace would give it (the pids
 * of <proc_root> are those the kernel reports to BPF, the host's; the agent
 * may run in a namespace below, as under a systemd booted in a container).
 * kill() only where the call does not exist. Returns 0 or -1 with errno. */
static int signal_jvm(const struct child_plan *pl)
{
    if (syscall(SYS_pidfd_send_signal, pl->proc, SIGQUIT, NULL, 0) == 0)
        return 0;
    if (errno != ENOSYS)
        return -1;
    return kill(pl->pid, SIGQUIT);
}

/* In the child: asks the JVM to open its socket, unless it has, and waits
 * for it. Returns 0, or the exit code with rep filled. */
static int child_wake(const struct child_plan *pl, struct child_report *rep, bool *made)
{
    struct stat st;

    if (lstat(pl->sock_path, &st) == 0 && S_ISSOCK(st.st_mode))
        return 0;
    /* Not listening yet: ask it to start. */
    int fd = open(pl->attach_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        *made = true;
        close(fd);
    }
    if (signal_jvm(pl))
        return child_fail(rep, 3, JVM_STEP_SIGNAL, errno);
    while (lstat(pl->sock_path, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        if (mono_ms() >= pl->deadline)
            return child_fail(rep, 1, JVM_STEP_WAIT_SOCKET, 0);
        sleep_ms(20);
    }
    return 0;
}

/* In the child, inside the JVM's mount namespace: the exchange. Reads the
 * reply into reply (*got bytes) and returns the exit code, rep filled. */
static int child_exchange(const struct child_plan *pl, struct child_report *rep, char *reply,
                          size_t len, size_t *got)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    bool made = false;
    int s = -1, code;

    memcpy(sa.sun_path, pl->sock_path, sizeof(pl->sock_path));
    code = child_wake(pl, rep, &made);
    if (code)
        goto out;
    s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa))) {
        code = child_fail(rep, 3, JVM_STEP_CONNECT, errno);
        goto out;
    }
    if (write(s, request, sizeof(request)) != (ssize_t)sizeof(request)) {
        code = child_fail(rep, 3, JVM_STEP_REQUEST, errno);
        goto out;
    }
    for (;;) {
        struct pollfd p = {s, POLLIN, 0};
        long long left = pl->deadline - mono_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            code = child_fail(rep, 1, JVM_STEP_WAIT_REPLY, 0);
            goto out;
        }
        ssize_t n = read(s, reply + *got, len - *got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        *got += n;
        if (*got == len)
            break; /* enough to say how it went */
    }
    code = *got >= 2 && reply[0] == '0' && reply[1] == '\n' ? 0 : 2;
out:
    if (s >= 0)
        close(s);
    if (made)
        unlink(pl->attach_path);
    return code;
}

/* In the child: the JVM's mount namespace, and its root and /tmp with it;
 * then the JVM's own user: its socket is its user's alone, it takes
 * requests from its user (or root), and the signal needs no privilege.
 * Returns 0, or the exit code with rep filled. */
static int child_enter(const struct child_plan *pl, struct child_report *rep)
{
    if (setns(pl->mnt, CLONE_NEWNS))
        return child_fail(rep, 3, JVM_STEP_SETNS, errno);
    if (chdir("/"))
        return child_fail(rep, 3, JVM_STEP_CHDIR, errno);
    if (pl->uid == 0)
        return 0;
    if (setgroups(0, NULL))
        return child_fail(rep, 3, JVM_STEP_SETGROUPS, errno);
    if (setresgid(pl->gid, pl->gid, pl->gid))
        return child_fail(rep, 3, JVM_STEP_SETGID, errno);
    if (setresuid(pl->uid, pl->uid, pl->uid))
        return child_fail(rep, 3, JVM_STEP_SETUID, errno);
    return 0;
}

/* The attach child's whole life. Only async-signal-safe calls (the parent
 * has threads). Writes its report, then the reply, to out; never returns. */
static void child_main(const struct child_plan *pl, int out)
{
    struct child_report rep = {0};
    char reply[1024];
    size_t got = 0;
    int code = child_enter(pl, &rep);

    if (!code)
        code = child_exchange(pl, &rep, reply, sizeof(reply), &got);
    if (write(out, &rep, sizeof(rep)) != (ssize_t)sizeof(rep) ||
        (got && write(out, reply, got) < 0))
        code = 3;
    _exit(code);
}

/* Reads up to n bytes from fd, until EOF; returns how many. */
static size_t read_all(int fd, void *p, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += r;
    }
    return got;
}

/* The plan for JVM `pid`: its /proc directory and mount namespace
 * (opened), its namespace pid, user and paths. Returns 0, -ESRCH (gone) or
 * a negative errno; plan_free undoes it either way. */
static int plan_init(struct child_plan *pl, const char *proc_root, uint32_t pid, long long deadline)
{
    char path[128];
    uint32_t nspid;

    memset(pl, 0, sizeof(*pl));
    pl->proc = pl->mnt = -1;
    pl->pid = pid;
    pl->deadline = deadline;
    snprintf(path, sizeof(path), "%s/%u", proc_root, pid);
    pl->proc = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pl->proc < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    nspid = ns_pid(pl->proc, pid, &pl->uid, &pl->gid);
    if (!nspid)
        return -ESRCH;
    /* HotSpot looks for the file in its working directory, then /tmp. */
    snprintf(pl->attach_path, sizeof(pl->attach_path), "/tmp/.attach_pid%u", nspid);
    snprintf(pl->sock_path, sizeof(pl->sock_path), "/tmp/.java_pid%u", nspid);
    pl->mnt = openat(pl->proc, "ns/mnt", O_RDONLY | O_CLOEXEC);
    return pl->mnt < 0 ? -errno : 0;
}

/* Closes what plan_init opened; pl may be NULL. */
static void plan_free(struct child_plan *pl)
{
    if (!pl)
        return;
    if (pl->mnt >= 0)
        close(pl->mnt);
    if (pl->proc >= 0)
        close(pl->proc);
    pl->proc = pl->mnt = -1;
}

static int exit_err(int status)
{
    if (!WIFEXITED(status))
        return -ECHILD;
    switch (WEXITSTATUS(status)) {
    case 0:
        return 0;
    case 1:
        return -ETIMEDOUT;
    case 2:
        return -EPROTO;
    default:
        return -EIO;
    }
}

int jvm__write_perfmap(const char *proc_root, uint32_t pid, int timeout_ms, char *reply, size_t len,
                       struct jvm_attach_fail *fail)
{
    struct jvm_attach_fail none, *f = fail ? fail : &none;
    struct child_report rep = {0};
    struct child_plan pl;
    int pipefd[2] = {-1, -1}, err, status;
    pid_t child = -1;
    size_t got;

    if (len)
        reply[0] = '\0';
    f->step = JVM_STEP_NONE;
    f->err = 0;
    err = plan_init(&pl, proc_root, pid, mono_ms() + timeout_ms);
    if (err) {
        if (err != -ESRCH)
            *f = (struct jvm_attach_fail){JVM_STEP_OPEN_NS, -err};
        goto out;
    }
    if (pipe2(pipefd, O_CLOEXEC) || (child = fork()) < 0) {
        err = -errno;
        *f = (struct jvm_attach_fail){JVM_STEP_FORK, errno};
        goto out;
    }
    if (child == 0) {
        close(pipefd[0]);
        child_main(&pl, pipefd[1]);
    }
    close(pipefd[1]);
    pipefd[1] = -1;
    if (read_all(pipefd[0], &rep, sizeof(rep)) == sizeof(rep)) {
        got = len ? read_all(pipefd[0], reply, len - 1) : 0;
        if (len)
            reply[got] = '\0';
    } else
        rep = (struct child_report){JVM_STEP_CHILD, 0};
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    err = exit_err(status);
    if (err && err != -EPROTO)
        *f = (struct jvm_attach_fail){rep.step ? rep.step : JVM_STEP_CHILD, rep.err};
    /* A failed call's own errno says more than the exit code's -EIO. */
    if (err == -EIO && rep.err)
        err = -rep.err;
out:
    plan_free(&pl);
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    return err;
}

const char *jvm__step_name(enum jvm_attach_step step)
{
    switch (step) {
    case JVM_STEP_NONE:
        return "none";
    case JVM_STEP_OPEN_NS:
        return "open of /proc/PID or /proc/PID/ns/mnt";
    case JVM_STEP_FORK:
        return "fork of the attach child";
    case JVM_STEP_SETNS:
        return "setns(CLONE_NEWNS) into the JVM's mount namespace";
    case JVM_STEP_CHDIR:
        return "chdir(\"/\") in the JVM's mount namespace";
    case JVM_STEP_SETGROUPS:
        return "setgroups() to take the JVM's user";
    case JVM_STEP_SETGID:
        return "setresgid() to the JVM's gid";
    case JVM_STEP_SETUID:
        return "setresuid() to the JVM's uid";
    case JVM_STEP_SIGNAL:
        return "SIGQUIT to the JVM";
    case JVM_STEP_WAIT_SOCKET:
        return "waiting for the JVM's attach socket /tmp/.java_pidN";
    case JVM_STEP_CONNECT:
        return "connect() to the JVM's attach socket";
    case JVM_STEP_REQUEST:
        return "write() of the request to the JVM's attach socket";
    case JVM_STEP_WAIT_REPLY:
        return "waiting for the JVM's answer";
    case JVM_STEP_CHILD:
        return "the attach child (it died before it said how it went)";
    }
    return "an unknown step";
}

const char *jvm__fail_hint(const struct jvm_attach_fail *fail)
{
    bool denied = fail->err == EPERM || fail->err == EACCES;

    switch (fail->step) {
    case JVM_STEP_SETNS:
        return denied ? "the agent needs CAP_SYS_ADMIN and CAP_SYS_CHROOT, and under systemd a "
                        "unit that lets it join a mount namespace: RestrictNamespaces= must "
                        "allow mnt, and SystemCallFilter= must allow setns"
                      : "";
    case JVM_STEP_SETGROUPS:
    case JVM_STEP_SETGID:
    case JVM_STEP_SETUID:
        return denied ? "the agent needs CAP_SETUID and CAP_SETGID (under systemd: in "
                        "CapabilityBoundingSet= and AmbientCapabilities=), and SystemCallFilter= "
                        "must allow @setuid"
                      : "";
    case JVM_STEP_SIGNAL:
        if (fail->err == EINVAL)
            return "the JVM is in a PID namespace that is neither the agent's nor below it: run "
                   "the agent in the host's PID namespace";
        return fail->err == EPERM ? "SystemCallFilter= (or a seccomp profile) must allow "
                                    "pidfd_send_signal"
                                  : "";
    case JVM_STEP_WAIT_SOCKET:
    case JVM_STEP_WAIT_REPLY:
        return "a JVM started with -XX:+DisableAttachMechanism, or one too busy to answer";
    case JVM_STEP_CONNECT:
        return denied ? "the JVM's attach socket is another user's" : "";
    default:
        return "";
    }
}

int jvm__arg_state(const char *proc_root, uint32_t pid, const char *flag)
{
    char path[128];
    struct buf b;
    int state = -1;

    snprintf(path, sizeof(path), "%s/%u/cmdline", proc_root, pid);
    buf__init(&b, CMDLINE_MAX);
    int r = buf__read_file(&b, AT_FDCWD, path);
    if ((r == 0 || r == -E2BIG) && b.len > 0) {
        state = 0;
        for (size_t i = 0; i < b.len; i += strlen(b.data + i) + 1) {
            if (strcmp(b.data + i, flag) == 0) {
                state = 1;
                break;
            }
        }
    }
    buf__free(&b);
    return state;
}

bool jvm__has_arg(const char *proc_root, uint32_t pid, const char *flag)
{
    return jvm__arg_state(proc_root, pid, flag) == 1;
}

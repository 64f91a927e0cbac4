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
 * uid and gid. */
static uint32_t ns_pid(const char *proc_root, uint32_t pid, uint32_t *uid, uint32_t *gid)
{
    char path[128];
    struct buf b;
    uint32_t v = 0;
    unsigned long ruid, e;

    snprintf(path, sizeof(path), "%s/%u/status", proc_root, pid);
    buf__init(&b, STATUS_MAX);
    int r = buf__read_file(&b, AT_FDCWD, path);
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

/* In the child, inside the JVM's mount namespace: the whole exchange.
 * Only async-signal-safe calls (the parent has threads). Writes the reply
 * to out and returns the exit code: 0 ok, 1 timeout, 2 error reply, 3
 * other failure. */
static int child_attach(uint32_t pid, const char *attach_path, const char *sock_path,
                        long long deadline, int out)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    bool made = false;
    int s = -1, code = 3;
    char reply[1024];
    size_t got = 0;

    if (strlen(sock_path) >= sizeof(sa.sun_path))
        return 3;
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    if (lstat(sock_path, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        /* Not listening yet: ask it to start. */
        int fd = open(attach_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            made = true;
            close(fd);
        }
        if (kill(pid, SIGQUIT))
            goto out;
        code = 1;
        while (lstat(sock_path, &st) != 0 || !S_ISSOCK(st.st_mode)) {
            if (mono_ms() >= deadline)
                goto out;
            sleep_ms(20);
        }
    }
    code = 3;
    s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)))
        goto out;
    if (write(s, request, sizeof(request)) != (ssize_t)sizeof(request))
        goto out;
    code = 1;
    for (;;) {
        struct pollfd p = {s, POLLIN, 0};
        long long left = deadline - mono_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            goto out;
        ssize_t n = read(s, reply + got, sizeof(reply) - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += n;
        if (got == sizeof(reply) - 1)
            break; /* enough to say how it went */
    }
    code = got >= 2 && reply[0] == '0' && reply[1] == '\n' ? 0 : 2;
    if (write(out, reply, got) < 0)
        code = 3;
out:
    if (s >= 0)
        close(s);
    if (made)
        unlink(attach_path);
    return code;
}

int jvm__write_perfmap(const char *proc_root, uint32_t pid, int timeout_ms, char *reply, size_t len)
{
    char path[128], attach_path[64], sock_path[64];
    long long deadline = mono_ms() + timeout_ms;
    int mnt = -1, pipefd[2] = {-1, -1}, err, status;
    pid_t child = -1;
    size_t got = 0;
    uint32_t uid = 0, gid = 0, nspid = ns_pid(proc_root, pid, &uid, &gid);

    if (len)
        reply[0] = '\0';
    if (!nspid)
        return -ESRCH;
    /* HotSpot looks for the file in its working directory, then /tmp. */
    snprintf(attach_path, sizeof(attach_path), "/tmp/.attach_pid%u", nspid);
    snprintf(sock_path, sizeof(sock_path), "/tmp/.java_pid%u", nspid);
    snprintf(path, sizeof(path), "%s/%u/ns/mnt", proc_root, pid);
    mnt = open(path, O_RDONLY | O_CLOEXEC);
    if (mnt < 0) {
        err = -errno;
        goto out;
    }
    if (pipe2(pipefd, O_CLOEXEC)) {
        err = -errno;
        goto out;
    }
    child = fork();
    if (child < 0) {
        err = -errno;
        goto out;
    }
    if (child == 0) {
        close(pipefd[0]);
        /* The mount namespace, and its root and /tmp with it; then the JVM's
         * own user: its socket is its user's alone, it takes requests from
         * its user (or root), and the signal needs no privilege. */
        if (setns(mnt, CLONE_NEWNS) || chdir("/"))
            _exit(3);
        if (uid != 0 &&
            (setgroups(0, NULL) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid)))
            _exit(3);
        _exit(child_attach(pid, attach_path, sock_path, deadline, pipefd[1]));
    }
    close(pipefd[1]);
    pipefd[1] = -1;
    while (len && got < len - 1) {
        ssize_t n = read(pipefd[0], reply + got, len - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += n;
    }
    if (len)
        reply[got] = '\0';
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status)) {
        err = -ECHILD;
        goto out;
    }
    switch (WEXITSTATUS(status)) {
    case 0:
        err = 0;
        break;
    case 1:
        err = -ETIMEDOUT;
        break;
    case 2:
        err = -EPROTO;
        break;
    default:
        err = -EIO;
    }
out:
    if (mnt >= 0)
        close(mnt);
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    return err;
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

#include "node.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/buf.h"
#include "../common/log.h"
#include "../common/str.h"

#define PATH_LEN 512

int node__is_init_pid_ns(const char *link)
{
    unsigned long ino = 0;
    char close_br = 0;

    return sscanf(link, "pid:[%lu%c", &ino, &close_br) == 2 && close_br == ']' &&
           ino == NODE_INIT_PID_NS_INO;
}

/* The text of a namespace link, "" when it cannot be read. */
static void read_ns_link(const char *path, char *out, size_t len)
{
    ssize_t n = readlink(path, out, len - 1);

    out[n > 0 ? n : 0] = '\0';
}

int node__check_pid_ns(const char *proc_root, char *err, size_t errlen)
{
    char path[PATH_LEN], pid1[64], self[64];

    snprintf(path, sizeof(path), "%s/1/ns/pid", proc_root);
    read_ns_link(path, pid1, sizeof(pid1));
    if (!pid1[0]) {
        /* PID 1 hidden (some sandboxes' init refuses even root): pid 2 is
         * kthreadd in the host's /proc, a process of the container in a
         * container's; either tells whose /proc it is. */
        snprintf(path, sizeof(path), "%s/2/ns/pid", proc_root);
        read_ns_link(path, pid1, sizeof(pid1));
    }
    snprintf(path, sizeof(path), "%s/self/ns/pid", proc_root);
    read_ns_link(path, self, sizeof(self));
    if (node__is_init_pid_ns(pid1) || (!pid1[0] && (!self[0] || node__is_init_pid_ns(self))))
        return 0;
    snprintf(err, errlen,
             "the agent does not see the host's processes: PID 1 of its /proc is in a PID "
             "namespace of a container (%s, the host's is pid:[%u]), so the pids the kernel "
             "reports would match nothing it can read and every frame would go unnamed; run it "
             "in the host's PID namespace: `docker run --pid host` or `podman run --pid host`, "
             "`hostPID: true` in a Kubernetes pod spec",
             pid1[0] ? pid1 : self, NODE_INIT_PID_NS_INO);
    return -1;
}

/* Whether two namespace files are the same namespace. False when either
 * cannot be looked at. */
static int same_ns(const char *a, const char *b)
{
    struct stat sa, sb;

    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
           sa.st_dev == sb.st_dev;
}

/* Whether <proc_root>/<pid>/root opens as a directory; then its path is
 * written to out. */
static int root_of(const char *proc_root, unsigned pid, char *out, size_t len)
{
    char path[PATH_LEN];

    snprintf(path, sizeof(path), "%s/%u/root", proc_root, pid);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || strlen(path) >= len) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    close(fd);
    str__copy(out, len, path);
    return 1;
}

/* How many /proc entries are looked at for a process in the initial mount
 * namespace: the first user-space processes of a host are the boot's. */
#define HOST_ROOT_SCAN_MAX 4096

/* A user-space process (kernel threads have an empty command line) in the
 * mount namespace of the file init_mnt, whose root opens. */
static int root_in_ns(const char *proc_root, const char *init_mnt, char *out, size_t len)
{
    char path[PATH_LEN], cmd[2];
    DIR *d = opendir(proc_root);
    struct dirent *de;
    int found = 0;
    unsigned seen = 0;

    if (!d)
        return 0;
    while (!found && seen++ < HOST_ROOT_SCAN_MAX && (de = readdir(d))) {
        char *end;
        unsigned long pid = strtoul(de->d_name, &end, 10);
        if (*end || pid <= 2)
            continue;
        snprintf(path, sizeof(path), "%s/%lu/cmdline", proc_root, pid);
        FILE *f = fopen(path, "re");
        size_t n = f ? fread(cmd, 1, sizeof(cmd), f) : 0;
        if (f)
            fclose(f);
        snprintf(path, sizeof(path), "%s/%lu/ns/mnt", proc_root, pid);
        found = n > 0 && same_ns(path, init_mnt) && root_of(proc_root, (unsigned)pid, out, len);
    }
    closedir(d);
    return found;
}

void node__host_root(const char *proc_root, char *out, size_t len)
{
    char self[PATH_LEN], other[PATH_LEN];
    struct stat st;

    str__copy(out, len, "");
    snprintf(self, sizeof(self), "%s/self/ns/mnt", proc_root);
    snprintf(other, sizeof(other), "%s/1/ns/mnt", proc_root);
    if (stat(other, &st) == 0) {
        if (same_ns(self, other) || root_of(proc_root, 1, out, len))
            return;
    }
    /* PID 1 hidden (some sandboxes' init refuses even root): the initial
     * mount namespace is kthreadd's (pid 2), and a process in it lends its
     * root. */
    snprintf(other, sizeof(other), "%s/2/ns/mnt", proc_root);
    if (stat(other, &st) || same_ns(self, other))
        return;
    if (!root_in_ns(proc_root, other, out, len))
        log_debug("node: no process of the host's mount namespace lends its root: container "
                  "names are read under the agent's own root");
}

struct uts_query {
    int fd;
    char name[256];
    int ok;
};

/* A thread of its own: joining a UTS namespace changes only the calling
 * thread's, and this one ends right after. */
static void *uts_thread(void *arg)
{
    struct uts_query *q = arg;

    q->ok = setns(q->fd, CLONE_NEWUTS) == 0 && gethostname(q->name, sizeof(q->name)) == 0;
    if (!q->ok)
        log_debug("node: cannot read the host's name from its UTS namespace: %s", strerror(errno));
    return NULL;
}

/* The host's name from the UTS namespace of pid (1, or kthreadd's, 2: the
 * initial one). */
static int hostname_from_ns(const char *proc_root, unsigned pid, char *out, size_t len)
{
    char self[PATH_LEN], pid1[PATH_LEN];
    struct uts_query q = {-1, {0}, 0};
    pthread_t t;

    snprintf(self, sizeof(self), "%s/self/ns/uts", proc_root);
    snprintf(pid1, sizeof(pid1), "%s/%u/ns/uts", proc_root, pid);
    if (same_ns(self, pid1))
        return gethostname(out, len) == 0;
    q.fd = open(pid1, O_RDONLY | O_CLOEXEC);
    if (q.fd < 0)
        return 0;
    if (pthread_create(&t, NULL, uts_thread, &q) == 0)
        pthread_join(t, NULL);
    close(q.fd);
    q.name[sizeof(q.name) - 1] = '\0';
    if (q.ok && q.name[0])
        str__copy(out, len, q.name);
    return q.ok && q.name[0];
}

/* The first line of the host's /etc/hostname. */
static int hostname_from_file(const char *proc_root, char *out, size_t len)
{
    char path[PATH_LEN];
    struct buf b;
    int ok = 0;

    snprintf(path, sizeof(path), "%s/1/root/etc/hostname", proc_root);
    buf__init(&b, 4096);
    int r = buf__read_file(&b, AT_FDCWD, path);
    if ((r == 0 || r == -E2BIG) && b.data) {
        size_t n = strcspn(b.data, "\n \t\r");
        if (n > 0 && n < len) {
            memcpy(out, b.data, n);
            out[n] = '\0';
            ok = 1;
        }
    }
    buf__free(&b);
    return ok;
}

void node__hostname(const char *proc_root, char *out, size_t len)
{
    if (len == 0)
        return;
    /* PID 1 may be hidden (some sandboxes' init refuses even root): the
     * initial UTS namespace is also kthreadd's. */
    if (hostname_from_ns(proc_root, 1, out, len) || hostname_from_ns(proc_root, 2, out, len) ||
        hostname_from_file(proc_root, out, len))
        return;
    if (gethostname(out, len))
        str__copy(out, len, "unknown");
    out[len - 1] = '\0';
}

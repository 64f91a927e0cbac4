#include "cgroup_id.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../../common/log.h"

/* The kernel's FILEID_KERNFS (include/linux/exportfs.h): a cgroup2 file
 * handle is the 64-bit kernfs node id, which is the cgroup id (Linux 5.5
 * on; the agent asks for 5.10). */
#define HANDLE_TYPE_KERNFS 0xfe

/* Cgroups whose /proc/PID/cgroup text is remembered (cgroup_ids__cached):
 * a slot an id, by its hash; a build node's thousands of processes a
 * minute run in a few. */
#define CACHE_SLOTS 256
/* "0::" + a path as cgroup_ids__line gives it + "\n". */
#define CACHE_TEXT_MAX (4096 + 8)

struct cgroup_ids {
    int mount_fd;
    struct {
        uint64_t id;
        char *text;
        size_t len;
    } cache[CACHE_SLOTS];
    char prefix[4096]; /* the hierarchy's root as /proc/self/fd shows it */
    size_t prefix_len;
};

static int fd_path(int fd, char *out, size_t len)
{
    char link[64];

    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, len - 1);
    if (n <= 0 || (size_t)n >= len - 1)
        return -1;
    out[n] = '\0';
    return 0;
}

struct cgroup_ids *cgroup_ids__open(const char *host_root)
{
    static const char *const at[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    struct cgroup_ids *c = calloc(1, sizeof(*c));
    char path[4096];

    if (!c)
        return NULL;
    c->mount_fd = -1;
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]) && c->mount_fd < 0; i++) {
        struct statfs sf;
        snprintf(path, sizeof(path), "%s%s", host_root ? host_root : "", at[i]);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0 && fstatfs(fd, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
            c->mount_fd = fd;
        else if (fd >= 0)
            close(fd);
    }
    if (c->mount_fd < 0 || fd_path(c->mount_fd, c->prefix, sizeof(c->prefix))) {
        log_debug("procs: no cgroup2 hierarchy under %s/sys/fs/cgroup: a process gone before "
                  "its exec is handled is named by its executable",
                  host_root ? host_root : "");
        cgroup_ids__free(c);
        return NULL;
    }
    c->prefix_len = strlen(c->prefix);
    if (c->prefix_len == 1) /* "/": the paths below start with it already */
        c->prefix_len = 0;
    return c;
}

void cgroup_ids__free(struct cgroup_ids *c)
{
    if (!c)
        return;
    if (c->mount_fd >= 0)
        close(c->mount_fd);
    for (size_t i = 0; i < CACHE_SLOTS; i++)
        free(c->cache[i].text);
    free(c);
}

static size_t slot_of(uint64_t id)
{
    return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 56) % CACHE_SLOTS;
}

const char *cgroup_ids__cached(struct cgroup_ids *c, uint64_t id, size_t *len)
{
    size_t s = slot_of(id);

    if (!c || !id || c->cache[s].id != id)
        return NULL;
    *len = c->cache[s].len;
    return c->cache[s].text;
}

void cgroup_ids__remember(struct cgroup_ids *c, uint64_t id, const char *text, size_t len)
{
    char line[CACHE_TEXT_MAX];
    size_t s;

    /* One "0::" line or nothing: a host with cgroup v1 lines too (every
     * process's text has a dozen) is not asked for the id's path each time. */
    if (!c || !id || len < 4 || len >= sizeof(line) || memcmp(text, "0::", 3) != 0 ||
        memchr(text, '\n', len) != text + len - 1)
        return;
    /* The id's own path: the text is of the cgroup the process is in now,
     * which may not be the one it exec'd in; and a host with cgroup v1
     * lines too has more in it than the id says. */
    if (cgroup_ids__line(c, id, line, sizeof(line)) != len || memcmp(line, text, len) != 0)
        return;
    char *copy = malloc(len + 1);
    if (!copy)
        return;
    memcpy(copy, text, len);
    copy[len] = '\0';
    s = slot_of(id);
    free(c->cache[s].text);
    c->cache[s].id = id;
    c->cache[s].text = copy;
    c->cache[s].len = len;
}

size_t cgroup_ids__line(struct cgroup_ids *c, uint64_t id, char *out, size_t len)
{
    union {
        struct file_handle fh;
        char room[sizeof(struct file_handle) + sizeof(uint64_t)];
    } h;
    char path[4096];

    if (!c || !id || len == 0)
        return 0;
    out[0] = '\0';
    h.fh.handle_bytes = sizeof(id);
    h.fh.handle_type = HANDLE_TYPE_KERNFS;
    memcpy(h.fh.f_handle, &id, sizeof(id));
    int fd = open_by_handle_at(c->mount_fd, &h.fh, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int r = fd_path(fd, path, sizeof(path));
    close(fd);
    /* The root itself is "0::/"; anything else must lie below the root. */
    if (r || strncmp(path, c->prefix, c->prefix_len) != 0)
        return 0;
    const char *rel = path + c->prefix_len;
    if (rel[0] == '\0')
        rel = "/";
    else if (rel[0] != '/')
        return 0;
    int n = snprintf(out, len, "0::%s\n", rel);
    if (n < 0 || (size_t)n >= len) {
        out[0] = '\0';
        return 0;
    }
    return (size_t)n;
}

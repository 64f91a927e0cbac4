#include "debuglink.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static uint32_t file_crc(int fd)
{
    unsigned char buf[1 << 16];
    uLong crc = crc32(0, Z_NULL, 0);
    off_t off = 0;
    ssize_t n;

    while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
        crc = crc32(crc, buf, (uInt)n);
        off += n;
    }
    return (uint32_t)crc;
}

static int try_one(const char *cand, const struct stat *self, uint32_t crc, char **path)
{
    struct stat st;
    int fd = open(cand, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

    if (fd < 0)
        return -1;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
        (self && st.st_dev == self->st_dev && st.st_ino == self->st_ino) ||
        (crc && file_crc(fd) != crc) || !(*path = strdup(cand))) {
        close(fd);
        return -1;
    }
    return fd;
}

int debuglink__open(const char *file, const char *link, uint32_t crc, char **path)
{
    char dir[4096], cand[8192];
    struct stat self;
    bool have_self;
    int fd;

    *path = NULL;
    if (!link || !*link)
        return -1;
    have_self = file && stat(file, &self) == 0;
    if (link[0] == '/')
        return try_one(link, have_self ? &self : NULL, crc, path);
    if (!file)
        return -1;
    const char *slash = strrchr(file, '/');
    size_t dl = slash ? (size_t)(slash - file) : 0;
    if (dl >= sizeof(dir))
        return -1;
    memcpy(dir, file, dl);
    dir[dl] = '\0';
    const char *const fmts[] = {"%s/%s", "%s/.debug/%s", "/usr/lib/debug%s/%s"};
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
        int n = snprintf(cand, sizeof(cand), fmts[i], dl ? dir : ".", link);
        if (n < 0 || (size_t)n >= sizeof(cand))
            continue;
        if ((fd = try_one(cand, have_self ? &self : NULL, crc, path)) >= 0)
            return fd;
    }
    return -1;
}

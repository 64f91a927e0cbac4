#include "output.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int output__write_file(const char *path, const void *data, size_t len, bool durable)
{
    char tmp[4096];
    const char *p = data;
    int fd, err = 0;

    /* A fresh name, created exclusively: nothing planted in a shared
     * directory is ever written through. */
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return -errno;
    fchmod(fd, 0644);
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            err = -errno;
            break;
        }
        p += n;
        len -= n;
    }
    if (!err && durable && fsync(fd))
        err = -errno;
    if (close(fd) && !err)
        err = -errno;
    if (!err && rename(tmp, path))
        err = -errno;
    if (err)
        unlink(tmp);
    return err;
}

int output__profile_name(char *out, size_t len, const char *dir, const char *service, uint32_t pid,
                         uint64_t start_ns)
{
    char safe[256], stamp[32];
    time_t t = start_ns / 1000000000ull;
    struct tm tm;
    size_t i;

    for (i = 0; service[i] && i < sizeof(safe) - 1; i++) {
        char ch = service[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        safe[i] = ok ? ch : '_';
    }
    safe[i] = '\0';
    if (!safe[0])
        snprintf(safe, sizeof(safe), "_");
    else if (safe[0] == '.')
        safe[0] = '_'; /* no hidden files, no ".." */
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
    if (snprintf(out, len, "%s/%s.%u.%s.pb.gz", dir, safe, pid, stamp) >= (int)len)
        return -ENAMETOOLONG;
    return 0;
}

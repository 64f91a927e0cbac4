#include "buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void buf__init(struct buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

int buf__reserve(struct buf *b, size_t n)
{
    size_t want;
    char *d;

    if (n > b->max - b->len)
        return -E2BIG;
    want = b->len + n + 1; /* room for the NUL */
    if (want > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < want)
            cap *= 2;
        if (cap > b->max + 1)
            cap = b->max + 1;
        d = realloc(b->data, cap);
        if (!d)
            return -ENOMEM;
        b->data = d;
        b->cap = cap;
    }
    return 0;
}

int buf__append(struct buf *b, const void *p, size_t n)
{
    int err = buf__reserve(b, n);

    if (err)
        return err;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

void buf__reset(struct buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void buf__free(struct buf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

int buf__read_fd(struct buf *b, int fd)
{
    char chunk[16384];
    ssize_t n;
    int err;

    for (;;) {
        n = read(fd, chunk, sizeof(chunk));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        if ((size_t)n > b->max - b->len) {
            err = buf__append(b, chunk, b->max - b->len);
            return err ? err : -E2BIG;
        }
        err = buf__append(b, chunk, n);
        if (err)
            return err;
    }
    if (!b->data)
        return buf__append(b, "", 0); /* always a valid empty string */
    return 0;
}

int buf__read_file(struct buf *b, int dirfd, const char *path)
{
    int fd, err;

    fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    err = buf__read_fd(b, fd);
    close(fd);
    return err;
}

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

/* Read sizes: the first read asks for what the buffer already holds room
 * for (a reused buffer takes a whole /proc file in one read), and a fresh
 * one for READ_FIRST; each later read for as much again as it holds, up to
 * READ_STEP. */
#define READ_FIRST 4096u
#define READ_STEP (256u << 10)

int buf__read_fd(struct buf *b, int fd)
{
    ssize_t n;
    int err;

    /* Straight into the buffer, without a bounce through a chunk on the
     * stack: every page the agent touches after a sleep costs it (a copy
     * touched the chunk's pages and the buffer's). */
    for (;;) {
        size_t room = b->cap > b->len + 1 ? b->cap - b->len - 1 : 0;
        /* A reused buffer may hold more room than this read's cap. */
        if (room > b->max - b->len)
            room = b->max - b->len;
        if (room == 0 && b->len >= b->max) {
            /* At the cap: one byte more says whether the file goes on. */
            char one;
            do
                n = read(fd, &one, 1);
            while (n < 0 && errno == EINTR);
            if (n < 0)
                return -errno;
            if (!b->data && (err = buf__append(b, "", 0)))
                return err;
            return n ? -E2BIG : 0;
        }
        if (room == 0) {
            size_t want = b->len < READ_FIRST ? READ_FIRST : b->len;
            if (want > READ_STEP)
                want = READ_STEP;
            if (want > b->max - b->len)
                want = b->max - b->len;
            err = buf__reserve(b, want);
            if (err)
                return err;
            room = b->cap - b->len - 1;
            if (room > b->max - b->len)
                room = b->max - b->len;
        }
        n = read(fd, b->data + b->len, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (b->data)
                b->data[b->len] = '\0';
            return -errno;
        }
        if (n == 0)
            break;
        b->len += (size_t)n;
        b->data[b->len] = '\0';
    }
    if (!b->data)
        return buf__append(b, "", 0); /* always a valid empty string */
    b->data[b->len] = '\0';
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

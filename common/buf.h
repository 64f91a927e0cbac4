/* A growable byte buffer with a cap fixed at init, for anything filled from
 * outside (files under /proc, HTTP bodies, decompression): growth past the
 * cap fails instead of taking memory without end.
 */
#ifndef CODEXRAY_COMMON_BUF_H
#define CODEXRAY_COMMON_BUF_H

#include <stddef.h>

struct buf {
    char *data; /* NUL-terminated after every append, for text use */
    size_t len;
    size_t cap;
    size_t max; /* the most len may ever reach */
};

/* Starts empty; nothing is allocated until the first append. */
void buf__init(struct buf *b, size_t max);

/* Appends n bytes. Returns 0, -E2BIG when len would pass max (nothing is
 * appended), or -ENOMEM. */
int buf__append(struct buf *b, const void *p, size_t n) __attribute__((warn_unused_result));

/* Makes room for n more bytes (and the NUL) without appending: a writer
 * fills data + len and then raises len. Returns 0, -E2BIG when len + n
 * would pass max, or -ENOMEM. */
int buf__reserve(struct buf *b, size_t n) __attribute__((warn_unused_result));

/* Drops the contents, keeps the memory. */
void buf__reset(struct buf *b);

/* Frees the memory; b may be NULL. The buffer is left empty and reusable. */
void buf__free(struct buf *b);

/* Reads a whole file at `path` relative to dirfd (AT_FDCWD for none) into b.
 * Returns 0, -E2BIG when the file is bigger than b's cap (b holds the first
 * max bytes), or a negative errno from open/read. Does not follow a final
 * symlink. */
int buf__read_file(struct buf *b, int dirfd, const char *path) __attribute__((warn_unused_result));

/* Same, from an open descriptor, which it does not close. */
int buf__read_fd(struct buf *b, int fd) __attribute__((warn_unused_result));

#endif

/* gzip in and out of memory, with caps on what decompression may produce. */
#ifndef CODEXRAY_COMMON_GZ_H
#define CODEXRAY_COMMON_GZ_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/* Appends the gzip stream of in[0..len) to out. Returns 0, -E2BIG when out's
 * cap is reached, -ENOMEM, or -EIO for a zlib failure. */
int gz__compress(const void *in, size_t len, struct buf *out) __attribute__((warn_unused_result));

/* A compressor kept between calls (libdeflate's, level 6): its state is
 * hundreds of KiB, and making it anew for each of hundreds of small
 * profiles a window costs more than compressing them. One thread at a
 * time. */
struct gz_deflater;

/* Returns NULL when out of memory. */
struct gz_deflater *gz_deflater__new(void);
/* d may be NULL. */
void gz_deflater__free(struct gz_deflater *d);
/* As gz__compress, reusing d's state. */
int gz_deflater__compress(struct gz_deflater *d, const void *in, size_t len, struct buf *out)
    __attribute__((warn_unused_result));

/* True when p starts with the gzip magic bytes. */
bool gz__is_gzip(const void *p, size_t len);

/* Appends the decompressed bytes of a gzip stream (one or more members) to
 * out. Stops early, before producing them all, when out reaches its cap or
 * when the output would grow past max_ratio times the input (0: no ratio
 * limit): a gzip bomb costs at most the cap. Returns 0, -E2BIG for either
 * limit, -EBADMSG for data that is not whole gzip members (bytes after the
 * last one included), or -ENOMEM; on failure out is as it was. */
int gz__decompress(const void *in, size_t len, struct buf *out, size_t max_ratio)
    __attribute__((warn_unused_result));

#endif

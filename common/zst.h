/* zstd in and out of memory, with the same caps as gz.h. The agent ships
 * its profiles zstd-compressed: the server inflates them 3.6 times faster
 * than gzip (0.35 ms against 1.25 ms for a 520 KiB profile here), and the
 * agent compresses them 5 times faster, for the same size. */
#ifndef CODEXRAY_COMMON_ZST_H
#define CODEXRAY_COMMON_ZST_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/* The largest window a frame decoded in pieces may ask for: 8 MiB (the
 * agent's frames use 2 MiB at most). One asking for more is refused, not
 * given the memory. (A frame whose content fits the output whole is
 * decoded straight into it and needs no window of its own.) */
#define ZST_WINDOW_LOG_MAX 23

/* True when p starts with a zstd frame's magic number. */
bool zst__is_zstd(const void *p, size_t len);

/* A compressor kept between calls (its state is about 1 MiB). One thread at a time. */
struct zst_compressor;

/* level: zstd's, 1-19. Returns NULL when out of memory. */
struct zst_compressor *zst_compressor__new(int level);
/* c may be NULL. */
void zst_compressor__free(struct zst_compressor *c);
/* Appends one zstd frame of in[0..len) to out. Returns 0, -E2BIG when out's
 * cap is reached, -ENOMEM, or -EIO for a zstd failure. */
int zst_compressor__compress(struct zst_compressor *c, const void *in, size_t len, struct buf *out)
    __attribute__((warn_unused_result));

/* Appends the decompressed bytes of one or more zstd frames to out, as
 * gz__decompress does for gzip: stops at out's cap or at max_ratio times
 * the input (0: no ratio limit), before producing more. Returns 0, -E2BIG
 * for either limit, -EBADMSG for data that is not whole frames (a window
 * past ZST_WINDOW_LOG_MAX included), or -ENOMEM; on failure out is as it
 * was. Thread-safe: each thread keeps its own decompression context. */
int zst__decompress(const void *in, size_t len, struct buf *out, size_t max_ratio)
    __attribute__((warn_unused_result));

#endif

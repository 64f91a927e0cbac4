#include "gz.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

bool gz__is_gzip(const void *p, size_t len)
{
    const unsigned char *b = p;
    return len >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

struct gz_deflater {
    z_stream z;
};

struct gz_deflater *gz_deflater__new(void)
{
    struct gz_deflater *d = calloc(1, sizeof(*d));

    if (!d)
        return NULL;
    /* 16 + MAX_WBITS: a gzip header and trailer rather than zlib's. */
    if (deflateInit2(&d->z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(d);
        return NULL;
    }
    return d;
}

void gz_deflater__free(struct gz_deflater *d)
{
    if (!d)
        return;
    deflateEnd(&d->z);
    free(d);
}

int gz_deflater__compress(struct gz_deflater *d, const void *in, size_t len, struct buf *out)
{
    unsigned char chunk[65536];
    z_stream *z = &d->z;
    int zr, err = 0;

    if (deflateReset(z) != Z_OK)
        return -EIO;
    z->next_in = (unsigned char *)in;
    z->avail_in = len;
    do {
        z->next_out = chunk;
        z->avail_out = sizeof(chunk);
        zr = deflate(z, Z_FINISH);
        if (zr == Z_STREAM_ERROR)
            return -EIO;
        err = buf__append(out, chunk, sizeof(chunk) - z->avail_out);
        if (err)
            return err;
    } while (zr != Z_STREAM_END);
    return 0;
}

int gz__compress(const void *in, size_t len, struct buf *out)
{
    struct gz_deflater *d = gz_deflater__new();
    int err;

    if (!d)
        return -ENOMEM;
    err = gz_deflater__compress(d, in, len, out);
    gz_deflater__free(d);
    return err;
}

int gz__decompress(const void *in, size_t len, struct buf *out, size_t max_ratio)
{
    unsigned char chunk[65536];
    size_t produced = 0;
    z_stream z;
    int zr, err = 0;

    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return -ENOMEM;
    z.next_in = (unsigned char *)in;
    z.avail_in = len;
    for (;;) {
        z.next_out = chunk;
        z.avail_out = sizeof(chunk);
        zr = inflate(&z, Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END) {
            err = zr == Z_MEM_ERROR ? -ENOMEM : -EBADMSG;
            goto out;
        }
        size_t got = sizeof(chunk) - z.avail_out;
        produced += got;
        if (max_ratio && produced / max_ratio > len) {
            err = -E2BIG;
            goto out;
        }
        err = buf__append(out, chunk, got);
        if (err)
            goto out;
        if (zr == Z_STREAM_END)
            break;
        if (z.avail_in == 0 && got == 0) {
            err = -EBADMSG; /* truncated: input gone before the stream ended */
            goto out;
        }
    }
out:
    inflateEnd(&z);
    return err;
}

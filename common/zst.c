#include "zst.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

bool zst__is_zstd(const void *p, size_t len)
{
    const unsigned char *b = p;
    return len >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd;
}

struct zst_compressor {
    ZSTD_CCtx *cctx;
    int level;
};

struct zst_compressor *zst_compressor__new(int level)
{
    struct zst_compressor *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->cctx = ZSTD_createCCtx();
    c->level = level;
    if (!c->cctx) {
        free(c);
        return NULL;
    }
    return c;
}

void zst_compressor__free(struct zst_compressor *c)
{
    if (!c)
        return;
    ZSTD_freeCCtx(c->cctx);
    free(c);
}

int zst_compressor__compress(struct zst_compressor *c, const void *in, size_t len, struct buf *out)
{
    size_t bound = ZSTD_compressBound(len);
    int err = buf__reserve(out, bound);

    if (err)
        return err;
    size_t n = ZSTD_compressCCtx(c->cctx, out->data + out->len, bound, in, len, c->level);
    if (ZSTD_isError(n))
        return -EIO;
    out->len += n;
    out->data[out->len] = '\0';
    return 0;
}

/* One decompression context per thread, made on first use: about 130 KiB
 * plus the window, which ZST_WINDOW_LOG_MAX bounds. */
static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;
static int dctx_key_err;

static void dctx_free(void *p)
{
    ZSTD_freeDCtx(p);
}

static void dctx_key_make(void)
{
    dctx_key_err = pthread_key_create(&dctx_key, dctx_free);
}

static ZSTD_DCtx *thread_dctx(void)
{
    ZSTD_DCtx *d;

    if (pthread_once(&dctx_once, dctx_key_make) || dctx_key_err)
        return NULL;
    d = pthread_getspecific(dctx_key);
    if (d)
        return d;
    d = ZSTD_createDCtx();
    if (!d)
        return NULL;
    if (ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, ZST_WINDOW_LOG_MAX)) ||
        pthread_setspecific(dctx_key, d)) {
        ZSTD_freeDCtx(d);
        return NULL;
    }
    return d;
}

int zst__decompress(const void *in, size_t len, struct buf *out, size_t max_ratio)
{
    size_t start = out->len, limit = out->max - out->len, produced = 0;
    ZSTD_DCtx *d = thread_dctx();
    int err = 0;

    if (!d)
        return -ENOMEM;
    if (max_ratio && len <= SIZE_MAX / max_ratio && len * max_ratio < limit)
        limit = len * max_ratio;
    ZSTD_DCtx_reset(d, ZSTD_reset_session_only);
    /* The first frame's declared size is a first guess (a sender can lie):
     * room for it, then doubling, never past the limit. */
    unsigned long long declared = ZSTD_getFrameContentSize(in, len);
    if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR &&
        declared > limit)
        return -E2BIG; /* says so itself: not a byte inflated */
    size_t guess = declared == ZSTD_CONTENTSIZE_UNKNOWN || declared == ZSTD_CONTENTSIZE_ERROR
                       ? len * 4
                   : declared < limit ? (size_t)declared
                                      : limit;
    if (guess < 4096)
        guess = 4096;
    ZSTD_inBuffer ib = {in, len, 0};
    for (;;) {
        size_t room = limit - produced;
        size_t want = guess > produced ? guess - produced : 65536;
        if (want > room)
            want = room;
        if (want == 0) {
            err = -E2BIG; /* a cap or the ratio, before inflating any further */
            break;
        }
        if (out->cap - out->len < want + 1 && (err = buf__reserve(out, want)))
            break;
        size_t avail = out->cap - out->len - 1; /* buf keeps a NUL after the data */
        if (avail > room)
            avail = room;
        ZSTD_outBuffer ob = {out->data + out->len, avail, 0};
        size_t in_before = ib.pos;
        size_t ret = ZSTD_decompressStream(d, &ob, &ib);
        if (ZSTD_isError(ret)) {
            err = -EBADMSG;
            break;
        }
        out->len += ob.pos;
        produced += ob.pos;
        if (ret == 0 && ib.pos == ib.size)
            break; /* every frame whole */
        if (ob.pos < avail && (ib.pos == ib.size || ib.pos == in_before)) {
            err = -EBADMSG; /* the input ends inside a frame, or is not zstd past here */
            break;
        }
        if (ob.pos == avail && guess <= produced)
            guess = produced * 2;
    }
    if (err)
        out->len = start;
    if (out->data)
        out->data[out->len] = '\0';
    return err;
}

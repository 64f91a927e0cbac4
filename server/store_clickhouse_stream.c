/* Streamed INSERTs for the ClickHouse store: a group's rows go to
 * ClickHouse while the rest of its profiles are still being decoded, so
 * ClickHouse parses them on its core while the server decodes on another,
 * instead of the whole batch's rows waiting for the last profile and the
 * upload then waiting for ClickHouse. A stream is one INSERT (chunked HTTP
 * through libcurl, in a thread of its own) fed from a bounded ring: the
 * writer blocks while it is full, so memory stays at the ring's size
 * whatever the group holds. ClickHouse acknowledges it once, at its end:
 * the group's profiles are still acknowledged together, or fail together. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "store_clickhouse_int.h"

/* The ring between the writer and curl: big enough that a large
 * profile's rows (~100 KiB) rarely wait for ClickHouse, small against a
 * group's 64 MiB. */
#define RING (1u << 20)

struct ch_stream {
    struct ch_store *st;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *ring;
    size_t head, len; /* the bytes waiting start at head, len of them */
    bool eof;         /* the writer has ended it */
    bool abort;       /* ... and wants none of it stored */
    bool done;        /* the request has returned, with result */
    int result;
};

/* curl's read callback: what the ring holds, waiting for the writer while
 * it is empty; 0 (the body's end) once it is ended and drained. */
static size_t on_read(char *dst, size_t size, size_t n, void *ctx)
{
    struct ch_stream *s = ctx;
    size_t want = size * n, got = 0;

    pthread_mutex_lock(&s->mu);
    while (!s->len && !s->eof)
        pthread_cond_wait(&s->cv, &s->mu);
    if (s->abort) {
        /* A body cut short: ClickHouse stores nothing of it. */
        pthread_mutex_unlock(&s->mu);
        return CURL_READFUNC_ABORT;
    }
    while (got < want && s->len) {
        size_t run = RING - s->head;
        if (run > s->len)
            run = s->len;
        if (run > want - got)
            run = want - got;
        memcpy(dst + got, s->ring + s->head, run);
        got += run;
        s->head = (s->head + run) % RING;
        s->len -= run;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return got;
}

static void *stream_thread(void *arg)
{
    struct ch_stream *s = arg;
    int r = chs_exec_read(s->st, 0, on_read, s);

    pthread_mutex_lock(&s->mu);
    s->result = r ? -EAGAIN : 0;
    s->done = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int chs_stream__write(struct ch_stream *s, const void *p, size_t n)
{
    const char *src = p;
    int err = 0;

    pthread_mutex_lock(&s->mu);
    while (n && !err) {
        while (s->len == RING && !s->done)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->done) {
            /* It returned before its end: ClickHouse refused it, or
             * went away. */
            err = -EAGAIN;
            break;
        }
        size_t tail = (s->head + s->len) % RING;
        size_t run = RING - tail;
        if (run > RING - s->len)
            run = RING - s->len;
        if (run > n)
            run = n;
        memcpy(s->ring + tail, src, run);
        s->len += run;
        src += run;
        n -= run;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return err;
}

int chs_stream__open(struct ch_store *st, const char *head, struct ch_stream **out)
{
    struct ch_stream *s = calloc(1, sizeof(*s));
    int err = -ENOMEM;

    *out = NULL;
    if (!s || !(s->ring = malloc(RING)))
        goto fail;
    s->st = st;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->th, NULL, stream_thread, s)) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        err = -EAGAIN;
        goto fail;
    }
    /* The statement's text first: the rows follow it in the body. */
    if ((err = chs_stream__write(s, head, strlen(head)))) {
        chs_stream__close(s, false);
        return err;
    }
    *out = s;
    return 0;
fail:
    if (s)
        free(s->ring);
    free(s);
    return err;
}

void chs_stream__end(struct ch_stream *s, bool commit)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    if (!s->eof)
        s->abort = !commit;
    s->eof = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

int chs_stream__close(struct ch_stream *s, bool commit)
{
    int err;

    if (!s)
        return 0;
    chs_stream__end(s, commit);
    pthread_join(s->th, NULL);
    err = s->abort ? -EAGAIN : s->result;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->ring);
    free(s);
    return err;
}

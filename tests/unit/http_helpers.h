/* What the tests of server/http.c share (test_http.c, test_http_pyroscope.c):
 * a server on a real loopback socket (127.0.0.1, a port the kernel picks)
 * with a SQLite store in a temporary directory behind it, and one request
 * at a time on a connection of its own. Every socket has generous
 * timeouts, so a busy machine makes them slow, never wrong. */
#ifndef CODEXRAY_TESTS_HTTP_HELPERS_H
#define CODEXRAY_TESTS_HTTP_HELPERS_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "../../server/http.h"
#include "server_helpers.h"

#define KEY "ingest-secret"
#define RKEY "read-secret"

struct fixture {
    char dir[256];
    struct store *st;
    struct http *h;
    uint16_t port;
};

/* One request on a connection of its own ("Connection: close"), the whole
 * answer read: its status, and its body in *resp (caller frees). head:
 * extra header lines, each ending in \r\n. Content-Length is sent unless
 * head has Transfer-Encoding. */
static inline int request(uint16_t port, const char *method, const char *path, const char *head,
                          const void *body, size_t len, struct buf *resp)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct timeval tv = {60, 0};
    char hdr[8192];

    assert_true(fd >= 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    bool chunked = head && strstr(head, "Transfer-Encoding");
    int n =
        snprintf(hdr, sizeof(hdr), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s",
                 method, path, head ? head : "");
    if (body && !chunked)
        n += snprintf(hdr + n, sizeof(hdr) - n, "Content-Length: %zu\r\n", len);
    n += snprintf(hdr + n, sizeof(hdr) - n, "\r\n");
    assert_true(n < (int)sizeof(hdr));
    /* The server may answer (413) and close before the body is all sent:
     * a failed send is not the test's failure, the answer is. */
    bool ok = send(fd, hdr, n, MSG_NOSIGNAL) == n;
    for (size_t off = 0; ok && body && off < len;) {
        ssize_t w = send(fd, (const char *)body + off, len - off, MSG_NOSIGNAL);
        ok = w > 0;
        off += w > 0 ? (size_t)w : 0;
    }
    shutdown(fd, SHUT_WR);
    struct buf r;
    buf__init(&r, 64u << 20);
    char tmp[65536];
    ssize_t got;
    while ((got = recv(fd, tmp, sizeof(tmp), 0)) > 0)
        assert_int_equal(buf__append(&r, tmp, got), 0);
    close(fd);
    int status = 0;
    if (r.len < 12 || sscanf(r.data, "HTTP/1.%*c %d", &status) != 1)
        fail_msg("%s %s: no answer (%zd, %s)", method, path, got, r.len ? r.data : "");
    const char *b = strstr(r.data, "\r\n\r\n");
    buf__init(resp, 64u << 20);
    if (b)
        assert_int_equal(buf__append(resp, b + 4, r.len - (b + 4 - r.data)), 0);
    buf__free(&r);
    return status;
}

/* The status only; the body must hold `has` when given. */
static inline void expect(struct fixture *f, const char *method, const char *path, const char *head,
                          const void *body, size_t len, int status, const char *has)
{
    struct buf r;
    int got = request(f->port, method, path, head, body, len, &r);
    if (got != status || (has && !strstr(r.data ? r.data : "", has)))
        fail_msg("%s %s: %d '%.300s', want %d '%s'", method, path, got, r.data ? r.data : "",
                 status, has ? has : "");
    buf__free(&r);
}

/* A server whose inflated bodies are capped at max_decompressed. */
static inline int setup_with(void **state, size_t max_decompressed, size_t max_ratio)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char err[512];

    f->st = store__open_tmp(f->dir, sizeof(f->dir));
    struct http_opts o = {
        .listen = "127.0.0.1:0",
        .api_key = KEY,
        .read_api_key = RKEY,
        .max_body = 256u << 10,
        .limits = {.max_memory = 64u << 20,
                   .max_decompressed = max_decompressed,
                   .max_ratio = max_ratio,
                   .max_label_bytes = 256,
                   .max_samples = 100000,
                   .max_stack_depth = 64,
                   .max_frames = 1000000},
        .threads = 2,
        .ingest_concurrency = 2,
        .per_client = 16,
    };
    f->h = http__start(&o, f->st, err, sizeof(err));
    if (!f->h)
        fail_msg("http__start: %s", err);
    f->port = http__port(f->h);
    assert_true(f->port != 0);
    *state = f;
    return 0;
}

static inline int setup(void **state)
{
    return setup_with(state, 32u << 20, 100);
}

/* --max-decompressed 64 KiB and --max-ratio 10, for zstd batches near
 * both limits. */
static inline int setup_small(void **state)
{
    return setup_with(state, 64u << 10, 10);
}

static inline int teardown(void **state)
{
    struct fixture *f = *state;
    http__stop(f->h);
    store__close(f->st);
    tmpdir__remove(f->dir);
    free(f);
    return 0;
}

#endif

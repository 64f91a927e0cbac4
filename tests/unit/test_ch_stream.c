/* store_clickhouse_stream.c: a streamed INSERT against a local HTTP
 * server played here (no ClickHouse): the body arrives whole and in
 * order, chunked, past the ring's size; a body cut short (close without
 * commit) ends without its last chunk, so ClickHouse would store none of
 * it; an error answer, or a server that answers before reading, fails the
 * stream and every later write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../server/store_clickhouse_int.h"

/* What the server does with the request. */
enum mode { ANSWER_200, ANSWER_500, ANSWER_EARLY };

struct fake {
    int lfd;
    enum mode mode;
    char url[64];
    pthread_t th;
    /* What it read: the body, unchunked; whether the last chunk came. */
    char *body;
    size_t len;
    bool whole;
    bool chunked;
};

static int read_line(FILE *f, char *line, size_t n)
{
    return fgets(line, (int)n, f) ? 0 : -1;
}

static void *serve(void *arg)
{
    struct fake *fk = arg;
    char line[1024];
    int fd = accept(fk->lfd, NULL, NULL);
    FILE *f = fd >= 0 ? fdopen(dup(fd), "r") : NULL;

    if (!f)
        return NULL;
    while (read_line(f, line, sizeof(line)) == 0 && strcmp(line, "\r\n"))
        if (strncasecmp(line, "Transfer-Encoding: chunked", 26) == 0)
            fk->chunked = true;
    if (fk->mode == ANSWER_EARLY) {
        const char *a = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 9\r\n"
                        "Connection: close\r\n\r\nCode: 1, ";
        (void)!write(fd, a, strlen(a));
        shutdown(fd, SHUT_RDWR);
        goto out;
    }
    for (;;) {
        unsigned long n;
        if (read_line(f, line, sizeof(line)) || sscanf(line, "%lx", &n) != 1)
            break; /* cut short */
        if (n == 0) {
            fk->whole = true;
            read_line(f, line, sizeof(line));
            break;
        }
        fk->body = realloc(fk->body, fk->len + n);
        if (!fk->body || fread(fk->body + fk->len, 1, n, f) != n)
            break;
        fk->len += n;
        read_line(f, line, sizeof(line)); /* the chunk's CRLF */
    }
    if (fk->whole) {
        const char *a =
            fk->mode == ANSWER_200
                ? "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
                : "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 8\r\n\r\nCode: 1,";
        (void)!write(fd, a, strlen(a));
    }
out:
    fclose(f);
    close(fd);
    return NULL;
}

static void fake_start(struct fake *fk, enum mode mode)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);

    memset(fk, 0, sizeof(*fk));
    fk->mode = mode;
    fk->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fk->lfd >= 0);
    assert_int_equal(bind(fk->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fk->lfd, 1), 0);
    assert_int_equal(getsockname(fk->lfd, (struct sockaddr *)&a, &alen), 0);
    snprintf(fk->url, sizeof(fk->url), "http://127.0.0.1:%d", ntohs(a.sin_port));
    assert_int_equal(pthread_create(&fk->th, NULL, serve, fk), 0);
}

static void fake_end(struct fake *fk)
{
    pthread_join(fk->th, NULL);
    close(fk->lfd);
    free(fk->body);
}

/* A store with the one node, as open leaves it for requests. */
static void store_for(struct ch_store *st, const char **node, const char *url)
{
    memset(st, 0, sizeof(*st));
    *node = url;
    st->nodes = node;
    st->nnodes = 1;
    st->timeout_ms = 10000;
}

static const char HEAD[] = "INSERT INTO db.t (a) FORMAT RowBinary\n";

static void test_stream_whole(void **state)
{
    (void)state;
    struct fake fk;
    struct ch_store st;
    struct ch_stream *s;
    const char *node;
    /* 3 MiB in uneven writes: past the 1 MiB ring, so the writer waits. */
    size_t total = 3u << 20, at = 0;
    char *rows = malloc(total);

    assert_non_null(rows);
    for (size_t i = 0; i < total; i++)
        rows[i] = (char)(i * 131 + i / 4099);
    fake_start(&fk, ANSWER_200);
    store_for(&st, &node, fk.url);
    assert_int_equal(chs_stream__open(&st, HEAD, &s), 0);
    for (size_t n = 1; at < total; n = n * 3 + 7) {
        size_t k = n < total - at ? n : total - at;
        assert_int_equal(chs_stream__write(s, rows + at, k), 0);
        at += k;
    }
    assert_int_equal(chs_stream__close(s, true), 0);
    pthread_join(fk.th, NULL);
    assert_true(fk.chunked && fk.whole);
    assert_int_equal(fk.len, strlen(HEAD) + total);
    assert_memory_equal(fk.body + strlen(HEAD), rows, total);
    close(fk.lfd);
    free(fk.body);
    free(rows);
}

static void test_stream_body_compared(void **state)
{
    (void)state;
    struct fake fk;
    struct ch_store st;
    struct ch_stream *s;
    const char *node;
    char rows[5000];

    for (size_t i = 0; i < sizeof(rows); i++)
        rows[i] = (char)(i % 251);
    fake_start(&fk, ANSWER_200);
    store_for(&st, &node, fk.url);
    assert_int_equal(chs_stream__open(&st, HEAD, &s), 0);
    assert_int_equal(chs_stream__write(s, rows, 17), 0);
    assert_int_equal(chs_stream__write(s, rows + 17, sizeof(rows) - 17), 0);
    assert_int_equal(chs_stream__close(s, true), 0);
    pthread_join(fk.th, NULL);
    assert_true(fk.chunked && fk.whole);
    assert_int_equal(fk.len, strlen(HEAD) + sizeof(rows));
    assert_memory_equal(fk.body, HEAD, strlen(HEAD));
    assert_memory_equal(fk.body + strlen(HEAD), rows, sizeof(rows));
    close(fk.lfd);
    free(fk.body);
}

static void test_stream_cut_short(void **state)
{
    (void)state;
    struct fake fk;
    struct ch_store st;
    struct ch_stream *s;
    const char *node;

    fake_start(&fk, ANSWER_200);
    store_for(&st, &node, fk.url);
    assert_int_equal(chs_stream__open(&st, HEAD, &s), 0);
    assert_int_equal(chs_stream__write(s, "rows", 4), 0);
    /* Without commit: the body never ends, so nothing of it is stored. */
    assert_int_equal(chs_stream__close(s, false), -EAGAIN);
    pthread_join(fk.th, NULL);
    assert_false(fk.whole);
    close(fk.lfd);
    free(fk.body);
}

static void test_stream_errors(void **state)
{
    (void)state;
    struct fake fk;
    struct ch_store st;
    struct ch_stream *s;
    const char *node;
    static char big[4u << 20];

    /* An error answer once the body is read: the close says so. */
    fake_start(&fk, ANSWER_500);
    store_for(&st, &node, fk.url);
    assert_int_equal(chs_stream__open(&st, HEAD, &s), 0);
    assert_int_equal(chs_stream__write(s, "rows", 4), 0);
    assert_int_equal(chs_stream__close(s, true), -EAGAIN);
    fake_end(&fk);
    /* An answer before the body, the connection closed: a write past
     * what the socket and the ring take fails, and so does the close. */
    fake_start(&fk, ANSWER_EARLY);
    store_for(&st, &node, fk.url);
    assert_int_equal(chs_stream__open(&st, HEAD, &s), 0);
    int w = 0;
    for (int i = 0; i < 8 && !w; i++)
        w = chs_stream__write(s, big, sizeof(big));
    assert_int_equal(w, -EAGAIN);
    assert_int_equal(chs_stream__close(s, true), -EAGAIN);
    fake_end(&fk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_whole),
        cmocka_unit_test(test_stream_body_compared),
        cmocka_unit_test(test_stream_cut_short),
        cmocka_unit_test(test_stream_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* server/http.c on a real loopback socket (127.0.0.1, a port the kernel
 * picks): routes, keys, limits and their status codes, with a SQLite store
 * in a temporary directory behind it. Runs as any user. Every socket has
 * generous timeouts, so a busy machine makes it slow, never wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <sqlite3.h>

#include "../../common/batch.h"
#include "../../common/zst.h"
#include "../../server/http.h"
#include "http_helpers.h"

#define AUTH "Authorization: Bearer " KEY "\r\n"
#define RAUTH "Authorization: Bearer " RKEY "\r\n"

static const struct tstack STACKS[] = {
    {{"leaf", "a", "main"}, 3, {"service", "web", "host", "h1", NULL}},
    {{"b", "main"}, 1, {"service", "web", "host", "h1", NULL}},
};

/* A profile posted with the key is stored (202) and read back through the
 * read APIs: applications, labels, the merged profile as folded stacks and
 * the flame-graph tree, the timeline; /healthz and /metrics answer. */
static void test_ingest_and_read(void **state)
{
    struct fixture *f = *state;
    struct buf p, r;
    char path[256];
    int64_t now = (int64_t)time(NULL) * SEC;

    buf__init(&p, 1u << 20);
    tprofile(&p, now - 120 * SEC, STACKS, 2, true);
    expect(f, "GET", "/healthz", NULL, NULL, 0, 200, "ok");
    expect(f, "POST", "/api/v1/profiles", AUTH, p.data, p.len, 202, "stored");
    expect(f, "GET", "/api/v1/applications", RAUTH, NULL, 0, 200, "\"name\":\"web\"");
    expect(f, "GET", "/api/v1/labels?app=web", RAUTH, NULL, 0, 200, "h1");
    assert_int_equal(
        request(f->port, "GET", "/api/v1/profile?app=web&format=collapsed", RAUTH, NULL, 0, &r),
        200);
    assert_non_null(strstr(r.data, "main;a;leaf 3"));
    assert_non_null(strstr(r.data, "main;b 1"));
    buf__free(&r);
    expect(f, "GET", "/api/v1/profile?app=web&format=flamegraph", RAUTH, NULL, 0, 200, "leaf");
    /* pprof out: gzipped, so its magic bytes */
    assert_int_equal(request(f->port, "GET", "/api/v1/profile?app=web", RAUTH, NULL, 0, &r), 200);
    assert_true(r.len > 2 && (uint8_t)r.data[0] == 0x1f && (uint8_t)r.data[1] == 0x8b);
    buf__free(&r);
    snprintf(path, sizeof(path), "/api/v1/timeline?app=web&from=now-10m&step=60s");
    /* 4 samples of 10 ms in one minute: 40 ms / 60 s of a core */
    expect(f, "GET", path, RAUTH, NULL, 0, 200, "0.000666666666666667");
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200, "codexray_profiles_ingested_total 1\n");
    expect(f, "GET", "/", NULL, NULL, 0, 200, "<html");
    buf__free(&p);
}

/* interp=hidden (the default) folds the interpreter's frames without a name
 * (file "[interpreter]PATH") into the Python functions that run them, in
 * every format; interp=shown keeps them; the samples are the same. */
static void test_interp_frames(void **state)
{
    struct fixture *f = *state;
    static const struct tstack py[] = {
        {{"python3.11+0x20\t[interpreter]/usr/bin/python3.11", "inner\tapp.py",
          "python3.11+0x10\t[interpreter]/usr/bin/python3.11", "outer\tapp.py",
          "python3.11+0x99\t/usr/bin/python3.11", "main"},
         5,
         {"service", "py", NULL}},
        {{"PyLong_FromLong", "python3.11+0x20\t[interpreter]/usr/bin/python3.11", "inner\tapp.py",
          "python3.11+0x10\t[interpreter]/usr/bin/python3.11", "outer\tapp.py",
          "python3.11+0x99\t/usr/bin/python3.11", "main"},
         2,
         {"service", "py", NULL}},
    };
    struct buf p, r;

    buf__init(&p, 1u << 20);
    tprofile(&p, (int64_t)time(NULL) * SEC - 120 * SEC, py, 2, true);
    expect(f, "POST", "/api/v1/profiles", AUTH, p.data, p.len, 202, "stored");
    const char *hidden[] = {"/api/v1/profile?app=py&format=collapsed",
                            "/api/v1/profile?app=py&format=collapsed&interp=hidden"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(request(f->port, "GET", hidden[i], RAUTH, NULL, 0, &r), 200);
        assert_non_null(strstr(r.data, "main;python3.11+0x99;outer;inner 5\n"));
        assert_non_null(strstr(r.data, "main;python3.11+0x99;outer;inner;PyLong_FromLong 2\n"));
        assert_null(strstr(r.data, "python3.11+0x10"));
        buf__free(&r);
    }
    assert_int_equal(request(f->port, "GET", "/api/v1/profile?app=py&format=collapsed&interp=shown",
                             RAUTH, NULL, 0, &r),
                     200);
    assert_non_null(
        strstr(r.data, "main;python3.11+0x99;outer;python3.11+0x10;inner;python3.11+0x20 5\n"));
    buf__free(&r);
    /* The flame graph: the same total, inner's self time is the whole of
     * its stack's (5 samples of 10 ms), and no interpreter frame. */
    assert_int_equal(
        request(f->port, "GET", "/api/v1/profile?app=py&format=flamegraph", RAUTH, NULL, 0, &r),
        200);
    assert_non_null(strstr(r.data, "\"total\":70000000,\"samples\":7"));
    buf__free(&r);
    assert_int_equal(request(f->port, "GET",
                             "/api/v1/profile?app=py&format=flamegraph&interp=shown", RAUTH, NULL,
                             0, &r),
                     200);
    assert_non_null(strstr(r.data, "\"total\":70000000,\"samples\":7"));
    buf__free(&r);
    expect(f, "GET", "/api/v1/profile?app=py&interp=folded", RAUTH, NULL, 0, 400, "interp");
    buf__free(&p);
}

/* Keys: ingest without or with the wrong key, reads without the read key:
 * 401, nothing stored. */
static void test_keys(void **state)
{
    struct fixture *f = *state;
    struct buf p;

    buf__init(&p, 1u << 20);
    tprofile(&p, (int64_t)time(NULL) * SEC, STACKS, 2, false);
    expect(f, "POST", "/api/v1/profiles", NULL, p.data, p.len, 401, "API key");
    expect(f, "POST", "/api/v1/profiles", "Authorization: Bearer nope\r\n", p.data, p.len, 401,
           NULL);
    expect(f, "GET", "/api/v1/applications", NULL, NULL, 0, 401, "read API key");
    expect(f, "GET", "/api/v1/applications", AUTH, NULL, 0, 401, NULL); /* not the read key */
    expect(f, "GET", "/metrics", NULL, NULL, 0, 401, NULL);
    expect(f, "GET", "/api/v1/applications", RAUTH, NULL, 0, 200, "\"applications\":[]");
    buf__free(&p);
}

/* 400: a body that is not a profile, a NUL in the URI, times that are not
 * times (NaN and infinity among them), a bad pid, a missing app. */
static void test_bad_requests(void **state)
{
    struct fixture *f = *state;

    expect(f, "POST", "/api/v1/profiles", AUTH, "not a profile", 13, 400, "error");
    expect(f, "POST", "/api/v1/profiles?service=x&pid=abc", AUTH, "", 0, 400, "pid");
    expect(f, "GET", "/ui/index.html%00.js", NULL, NULL, 0, 400, "NUL");
    expect(f, "GET", "/api/v1/applications?from=nan", RAUTH, NULL, 0, 400, "from");
    expect(f, "GET", "/api/v1/applications?from=now-nan", RAUTH, NULL, 0, 400, "from");
    expect(f, "GET", "/api/v1/applications?to=inf", RAUTH, NULL, 0, 400, "to");
    expect(f, "GET", "/api/v1/applications?from=now-1h&to=now-2h", RAUTH, NULL, 0, 400, "before");
    expect(f, "GET", "/api/v1/profile", RAUTH, NULL, 0, 400, "app");
    expect(f, "GET", "/api/v1/profile?app=web&format=svg", RAUTH, NULL, 0, 400, "format");
    expect(f, "GET", "/api/v1/timeline?app=web&step=nan", RAUTH, NULL, 0, 400, "step");
}

/* type=: an off-CPU profile read back as cpu, off_cpu and wall, on the
 * profile, the timeline and the applications; any other type a 400. */
static void test_types(void **state)
{
    struct fixture *f = *state;
    static const struct tstack off[] = {
        {{"leaf", "a", "main"}, 3, {"service", "web", NULL}, 0},
        {{"[off-CPU: sleep]", "nanosleep", "main"}, 0, {"service", "web", NULL}, 6 * SEC},
    };
    struct buf p;

    buf__init(&p, 1u << 20);
    tprofile_types(&p, (int64_t)time(NULL) * SEC - 120 * SEC, off, 2, true, TOFF_THIRD);
    expect(f, "POST", "/api/v1/profiles", AUTH, p.data, p.len, 202, "stored");
    expect(f, "GET", "/api/v1/profile?app=web&format=collapsed&type=off_cpu", RAUTH, NULL, 0, 200,
           "main;nanosleep;[off-CPU: sleep] 6000000000\n");
    expect(f, "GET", "/api/v1/profile?app=web&format=flamegraph&type=wall", RAUTH, NULL, 0, 200,
           "\"type\":\"wall\",\"total\":6030000000,");
    expect(f, "GET", "/api/v1/profile?app=web&format=flamegraph", RAUTH, NULL, 0, 200,
           "\"type\":\"cpu\",\"total\":30000000,");
    /* 6 s blocked in one minute: 0.1 threads (in the step 2 or 3 minutes back) */
    expect(f, "GET", "/api/v1/timeline?app=web&from=now-10m&step=60s&type=off_cpu", RAUTH, NULL, 0,
           200, "\"type\":\"off_cpu\",\"off_cpu_cores\":[0,");
    expect(f, "GET", "/api/v1/timeline?app=web&from=now-10m&step=60s&type=off_cpu", RAUTH, NULL, 0,
           200, ",0.1,");
    expect(f, "GET", "/api/v1/applications?from=now-10m&type=off_cpu", RAUTH, NULL, 0, 200,
           "\"off_cpu_cores\":0.01}");
    expect(f, "GET", "/api/v1/profile?app=web&type=offcpu", RAUTH, NULL, 0, 400,
           "type: 'offcpu' is none of cpu, off_cpu, wall");
    expect(f, "GET", "/api/v1/timeline?app=web&type=WALL", RAUTH, NULL, 0, 400, "type:");
    expect(f, "GET", "/api/v1/applications?type=", RAUTH, NULL, 0, 400, "type:");
    buf__free(&p);
}

/* 404 and 405: paths that are not there, methods a path does not take. */
static void test_not_found(void **state)
{
    struct fixture *f = *state;

    expect(f, "GET", "/nope", NULL, NULL, 0, 404, "no such path");
    expect(f, "GET", "/ui/nope.js", NULL, NULL, 0, 404, "web UI");
    expect(f, "GET", "/api/v1/profiles", NULL, NULL, 0, 405, "POST");
    expect(f, "DELETE", "/api/v1/applications", RAUTH, NULL, 0, 405, NULL);
}

/* 413 and 414: a body past --max-body, announced (refused before it is
 * read) or chunked (counted as it comes); a query string of more than 64
 * parameters. The server still answers afterwards. */
static void test_limits(void **state)
{
    struct fixture *f = *state;
    size_t big = (256u << 10) + 1;
    char *body = calloc(1, big + 64);
    char path[2048];

    assert_non_null(body);
    expect(f, "POST", "/api/v1/profiles", AUTH, body, big, 413, "body larger than");
    /* chunked: one chunk of the whole, no Content-Length */
    int n = snprintf(body, 64, "%zx\r\n", big);
    memmove(body + n, body + 64, 0);
    memset(body + n, 'x', big);
    memcpy(body + n + big, "\r\n0\r\n\r\n", 7);
    expect(f, "POST", "/api/v1/profiles", AUTH "Transfer-Encoding: chunked\r\n", body, n + big + 7,
           413, "body larger than");
    free(body);
    size_t len = snprintf(path, sizeof(path), "/api/v1/applications?");
    for (int i = 0; i < 65; i++)
        len += snprintf(path + len, sizeof(path) - len, "%sp%d=1", i ? "&" : "", i);
    expect(f, "GET", path, RAUTH, NULL, 0, 414, "query parameters");
    /* 64 are fine */
    len = snprintf(path, sizeof(path), "/api/v1/applications?");
    for (int i = 0; i < 64; i++)
        len += snprintf(path + len, sizeof(path) - len, "%sp%d=1", i ? "&" : "", i);
    expect(f, "GET", path, RAUTH, NULL, 0, 200, "applications");
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200, "reason=\"too_large\"} 3\n");
}

/* --- POST /api/v1/profiles/batch --- */

static const struct tstack BSTACKS[] = {
    {{"work", "main"}, 5, {NULL}},
    {{"idle", "main"}, 2, {NULL}},
};

/* A good profile (no labels: its identity is the query's) appended to the
 * batch b under query q, gzipped when gz (as the agent once sent them) or
 * as it is (what it puts in a zstd batch). */
static void batch_profile(struct buf *b, const char *q, bool gz)
{
    struct buf p;

    buf__init(&p, 1u << 20);
    tprofile(&p, ((int64_t)time(NULL) - 120) * SEC, BSTACKS, 2, gz);
    assert_int_equal(batch__append(b, q, p.data, p.len), 0);
    buf__free(&p);
}

static void batch_good(struct buf *b, const char *q)
{
    batch_profile(b, q, true);
}

/* Posts batch b with the key; the answer must be 200 with n statuses
 * (read back by the agent's reader, batch__statuses) equal to want, and
 * "stored":stored. Its body is left in *resp (caller frees). */
static void batch_expect_h(struct fixture *f, const char *head, const struct buf *b, size_t n,
                           const int *want, int stored, struct buf *resp)
{
    int got[16],
        status = request(f->port, "POST", "/api/v1/profiles/batch", head, b->data, b->len, resp);
    char s[64];

    assert_true(n <= 16);
    if (status != 200)
        fail_msg("batch: %d '%.300s', want 200", status, resp->data ? resp->data : "");
    if (batch__statuses(resp->data, resp->len, got, n))
        fail_msg("batch: the answer's statuses do not read back: '%.600s'", resp->data);
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("batch: profile %zu answered %d, want %d: '%.600s'", i, got[i], want[i],
                     resp->data);
    snprintf(s, sizeof(s), "{\"stored\":%d,\"statuses\":[", stored);
    if (strncmp(resp->data, s, strlen(s)) != 0)
        fail_msg("batch: '%.300s' does not start '%s'", resp->data, s);
}

static void batch_expect(struct fixture *f, const struct buf *b, size_t n, const int *want,
                         int stored, struct buf *resp)
{
    batch_expect_h(f, AUTH, b, n, want, stored, resp);
}

/* The collapsed stacks of app (from every process), which must hold has
 * (NULL: app must have nothing). */
static void app_has(struct fixture *f, const char *app, const char *has)
{
    char path[256];
    struct buf r;

    snprintf(path, sizeof(path), "/api/v1/profile?app=%s&from=now-1h&format=collapsed", app);
    assert_int_equal(request(f->port, "GET", path, RAUTH, NULL, 0, &r), 200);
    if (has ? !strstr(r.data ? r.data : "", has) : r.len != 0)
        fail_msg("%s: '%.300s', want '%s'", app, r.data ? r.data : "", has ? has : "nothing");
    buf__free(&r);
}

/* A batch of good profiles: each stored under its own query's identity
 * (service, host, pid, pod; an unknown key ignored), read back by app and
 * by label, counted in /metrics as single uploads are. */
static void test_batch_stored(void **state)
{
    struct fixture *f = *state;
    static const int want[] = {202, 202, 202};
    struct buf b, r;
    char m[128];

    buf__init(&b, 4u << 20);
    assert_int_equal(batch__begin(&b), 0);
    batch_good(&b, "service=b-web&host=h1&pid=11&pod=web-7f");
    batch_good(&b, "service=b-api&host=h2&pid=22&future_key=x");
    batch_good(&b, "service=b+db&host=h%2F3&pid=33");
    batch_expect(f, &b, 3, want, 3, &r);
    assert_non_null(strstr(r.data, "\"errors\":[null,null,null]}"));
    buf__free(&r);
    app_has(f, "b-web", "main;work 5");
    app_has(f, "b-api", "main;idle 2");
    app_has(f, "b%20db", "main;work 5"); /* '+' is a space, as in a query string */
    expect(f, "GET", "/api/v1/labels?app=b-web", RAUTH, NULL, 0, 200, "\"pod\":[\"web-7f\"]");
    expect(f, "GET", "/api/v1/labels?app=b-web", RAUTH, NULL, 0, 200, "\"pid\":[\"11\"]");
    expect(f, "GET", "/api/v1/labels?app=b%20db", RAUTH, NULL, 0, 200, "\"host\":[\"h/3\"]");
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200, "codexray_profiles_ingested_total 3\n");
    /* the bytes of the three profiles: the body less its framing */
    size_t framing = strlen(BATCH_MAGIC), bytes = b.len;
    struct batch_reader rd;
    struct batch_entry e;
    char why[256];
    assert_true(batch__open(&rd, b.data, b.len, why, sizeof(why)));
    while (batch__next(&rd, &e, why, sizeof(why)) == 1)
        framing += (size_t)((const char *)e.data - e.query);
    bytes -= framing;
    snprintf(m, sizeof(m), "codexray_bytes_ingested_total %zu\n", bytes);
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200, m);
    buf__free(&b);
}

/* Good and bad mixed: each answered as it would be alone, in order; the
 * bad ones (a body that is not pprof, a service with a control character,
 * a bad pid, a bad escape) stored nothing and are counted as rejects; the
 * good ones are stored. */
static void test_batch_mixed(void **state)
{
    struct fixture *f = *state;
    static const int want[] = {202, 400, 400, 400, 400, 202};
    struct buf b, r;

    buf__init(&b, 4u << 20);
    assert_int_equal(batch__begin(&b), 0);
    batch_good(&b, "service=m-one&pid=1");
    assert_int_equal(batch__append(&b, "service=m-bad", "not a profile", 13), 0);
    batch_good(&b, "service=m%01ctl&pid=3");
    batch_good(&b, "service=m-pid&pid=12x");
    batch_good(&b, "service=m-esc%2");
    batch_good(&b, "service=m-two&pid=6");
    batch_expect(f, &b, 6, want, 2, &r);
    assert_non_null(strstr(r.data, "\"errors\":[null,\""));
    assert_non_null(strstr(r.data, "control characters"));
    assert_non_null(strstr(r.data, "\"pid: not a process id\""));
    assert_non_null(strstr(r.data, "percent-encoded"));
    assert_non_null(strstr(r.data, "\",null]}"));
    buf__free(&r);
    app_has(f, "m-one", "main;work 5");
    app_has(f, "m-two", "main;idle 2");
    app_has(f, "m-pid", NULL);
    app_has(f, "m-bad", NULL);
    expect(f, "GET", "/api/v1/applications", RAUTH, NULL, 0, 200, NULL);
    assert_int_equal(request(f->port, "GET", "/api/v1/applications", RAUTH, NULL, 0, &r), 200);
    assert_null(strstr(r.data, "ctl"));
    buf__free(&r);
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200, "codexray_profiles_ingested_total 2\n");
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200,
           "codexray_requests_rejected_total{reason=\"bad_request\"} 4\n");
    buf__free(&b);
}

/* A batch whose framing is bad (cut short, not a batch) is 400 and
 * stores nothing, not even its good first profiles; the wrong key 401,
 * too big 413 (announced or chunked), GET 405. An empty batch is 200 with
 * no statuses. */
static void test_batch_refused(void **state)
{
    struct fixture *f = *state;
    struct buf b, r;
    size_t big = (256u << 10) + 1;

    buf__init(&b, 4u << 20);
    assert_int_equal(batch__begin(&b), 0);
    batch_good(&b, "service=r-one");
    batch_good(&b, "service=r-two");
    expect(f, "POST", "/api/v1/profiles/batch", AUTH, b.data, b.len - 1, 400, "left in the body");
    expect(f, "POST", "/api/v1/profiles/batch", AUTH, b.data + 1, b.len - 1, 400, "not a batch");
    expect(f, "POST", "/api/v1/profiles/batch", AUTH, "", 0, 400, "not a batch");
    app_has(f, "r-one", NULL);
    expect(f, "POST", "/api/v1/profiles/batch", NULL, b.data, b.len, 401, "API key");
    expect(f, "POST", "/api/v1/profiles/batch", "Authorization: Bearer nope\r\n", b.data, b.len,
           401, NULL);
    app_has(f, "r-one", NULL);
    expect(f, "GET", "/api/v1/profiles/batch", AUTH, NULL, 0, 405, "POST a batch");
    expect(f, "PUT", "/api/v1/profiles/batch", AUTH, b.data, b.len, 405, NULL);
    /* past --max-body: a good batch padded with a profile of junk */
    char *junk = calloc(1, big);
    assert_non_null(junk);
    assert_int_equal(batch__append(&b, "service=r-big", junk, big), 0);
    expect(f, "POST", "/api/v1/profiles/batch", AUTH, b.data, b.len, 413, "body larger than");
    /* chunked: no Content-Length, counted as it comes */
    struct buf ch;
    char hex[32];
    int hn = snprintf(hex, sizeof(hex), "%zx\r\n", b.len);
    buf__init(&ch, 8u << 20);
    assert_int_equal(buf__append(&ch, hex, hn), 0);
    assert_int_equal(buf__append(&ch, b.data, b.len), 0);
    assert_int_equal(buf__append(&ch, "\r\n0\r\n\r\n", 7), 0);
    expect(f, "POST", "/api/v1/profiles/batch", AUTH "Transfer-Encoding: chunked\r\n", ch.data,
           ch.len, 413, "body larger than");
    buf__free(&ch);
    free(junk);
    app_has(f, "r-one", NULL);
    app_has(f, "r-big", NULL);
    /* the magic alone: a batch of none */
    buf__reset(&b);
    assert_int_equal(batch__begin(&b), 0);
    batch_expect(f, &b, 0, NULL, 0, &r);
    assert_string_equal(r.data, "{\"stored\":0,\"statuses\":[],\"errors\":[]}\n");
    buf__free(&r);
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200, "codexray_profiles_ingested_total 0\n");
    buf__free(&b);
}

/* The store failing (its database locked by another writer past its
 * 10 s wait): that profile 500, the rest not tried (503, even the one that
 * would be 400), nothing stored; the same batch sent again once the lock
 * is gone is stored whole. */
static void test_batch_store_fails(void **state)
{
    struct fixture *f = *state;
    static const int fails[] = {500, 503, 503};
    static const int again[] = {202, 400, 202};
    char db[300];
    sqlite3 *lock;
    struct buf b, r;

    buf__init(&b, 4u << 20);
    assert_int_equal(batch__begin(&b), 0);
    batch_good(&b, "service=s-one");
    assert_int_equal(batch__append(&b, "service=s-bad", "not a profile", 13), 0);
    batch_good(&b, "service=s-two");
    snprintf(db, sizeof(db), "%s/profiles.db", f->dir);
    assert_int_equal(sqlite3_open(db, &lock), SQLITE_OK);
    assert_int_equal(sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    batch_expect(f, &b, 3, fails, 0, &r);
    assert_non_null(strstr(r.data, "the store failed"));
    assert_non_null(strstr(r.data, "not tried: an earlier profile of the batch failed"));
    buf__free(&r);
    assert_int_equal(sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(lock);
    app_has(f, "s-one", NULL);
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200,
           "codexray_requests_rejected_total{reason=\"internal\"} 3\n");
    batch_expect(f, &b, 3, again, 2, &r);
    buf__free(&r);
    app_has(f, "s-one", "main;work 5");
    app_has(f, "s-two", "main;idle 2");
    buf__free(&b);
}

/* --- a zstd batch: Content-Encoding: zstd, the whole body one stream --- */

#define ZAUTH AUTH "Content-Encoding: zstd\r\n"

/* p[0..len) as one zstd frame into out (its content size declared, as
 * the agent's compressor declares it). */
static void zstd_of(const void *p, size_t len, struct buf *out)
{
    struct zst_compressor *z = zst_compressor__new(3);

    assert_non_null(z);
    buf__init(out, 64u << 20);
    assert_int_equal(zst_compressor__compress(z, p, len, out), 0);
    zst_compressor__free(z);
}

/* A batch as the agent now writes it, its profiles as they are, with a
 * gzipped and a zstd one among them, and two bad ones: not pprof, a bad
 * pid. Services pre-one, pre-bad, pre-pid, pre-two, pre-three. */
static void zstd_mixed(struct buf *b, const char *pre)
{
    struct buf p, z;
    char q[128];

    buf__init(b, 4u << 20);
    assert_int_equal(batch__begin(b), 0);
    snprintf(q, sizeof(q), "service=%s-one&host=h1&pid=11&pod=p1", pre);
    batch_profile(b, q, false);
    snprintf(q, sizeof(q), "service=%s-bad", pre);
    assert_int_equal(batch__append(b, q, "not a profile", 13), 0);
    snprintf(q, sizeof(q), "service=%s-pid&pid=12x", pre);
    batch_profile(b, q, false);
    snprintf(q, sizeof(q), "service=%s-two&pid=22", pre);
    batch_profile(b, q, true);
    buf__init(&p, 1u << 20);
    tprofile(&p, ((int64_t)time(NULL) - 120) * SEC, BSTACKS, 2, false);
    zstd_of(p.data, p.len, &z);
    snprintf(q, sizeof(q), "service=%s-three&pid=33", pre);
    assert_int_equal(batch__append(b, q, z.data, z.len), 0);
    buf__free(&z);
    buf__free(&p);
}

/* The bytes of b's profiles answered 202 (want[i]), as /metrics counts
 * them: each profile as the batch holds it once inflated. */
static size_t stored_bytes(const struct buf *b, const int *want)
{
    struct batch_reader rd;
    struct batch_entry e;
    char why[256];
    size_t n = 0;

    assert_true(batch__open(&rd, b->data, b->len, why, sizeof(why)));
    for (size_t i = 0; batch__next(&rd, &e, why, sizeof(why)) == 1; i++)
        n += want[i] == 202 ? e.len : 0;
    return n;
}

/* A zstd batch is taken as the same batch sent as it is: the same answer
 * word for word, its profiles stored under their own identity and read
 * back, counted in /metrics (bytes: the profiles inflated). */
static void test_batch_zstd(void **state)
{
    struct fixture *f = *state;
    static const int want[] = {202, 400, 400, 202, 202};
    struct buf plain, zplain, z, r1, r2;
    char m[128];

    zstd_mixed(&plain, "zr");
    zstd_mixed(&zplain, "zz");
    zstd_of(zplain.data, zplain.len, &z);
    assert_true(z.len < zplain.len);
    batch_expect(f, &plain, 5, want, 3, &r1);
    batch_expect_h(f, ZAUTH, &z, 5, want, 3, &r2);
    assert_string_equal(r2.data, r1.data);
    assert_non_null(strstr(r2.data, "\"pid: not a process id\""));
    buf__free(&r1);
    buf__free(&r2);
    app_has(f, "zz-one", "main;work 5");
    app_has(f, "zz-two", "main;idle 2");
    app_has(f, "zz-three", "main;work 5");
    app_has(f, "zz-bad", NULL);
    app_has(f, "zz-pid", NULL);
    expect(f, "GET", "/api/v1/labels?app=zz-one", RAUTH, NULL, 0, 200, "\"pod\":[\"p1\"]");
    expect(f, "GET", "/api/v1/labels?app=zz-one", RAUTH, NULL, 0, 200, "\"host\":[\"h1\"]");
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200, "codexray_profiles_ingested_total 6\n");
    snprintf(m, sizeof(m), "codexray_bytes_ingested_total %zu\n",
             stored_bytes(&plain, want) + stored_bytes(&zplain, want));
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200, m);
    buf__free(&z);
    buf__free(&zplain);
    buf__free(&plain);
}

/* A zstd body that cannot be inflated stores nothing: cut short, not
 * zstd, empty: 400; a bomb past 10 x --max-ratio (one frame declaring its
 * size, or hidden behind a small honest first frame): 413 naming the flag.
 * Another Content-Encoding (gzip, br, a list, the header twice): 415
 * naming what is taken, after the key's 401. identity and zstd in any
 * case are taken. */
static void test_batch_zstd_refused(void **state)
{
    struct fixture *f = *state;
    static const char *const other[] = {
        "Content-Encoding: gzip\r\n",
        "Content-Encoding: br\r\n",
        "Content-Encoding: zstd, gzip\r\n",
        "Content-Encoding: zstd\r\nContent-Encoding: zstd\r\n",
    };
    struct buf b, z, bomb, two, r;
    char head[256];
    size_t zeros = 16u << 20;

    zstd_mixed(&b, "zx");
    zstd_of(b.data, b.len, &z);
    expect(f, "POST", "/api/v1/profiles/batch", ZAUTH, z.data, z.len - 1, 400,
           "not whole zstd frames");
    expect(f, "POST", "/api/v1/profiles/batch", ZAUTH, b.data, b.len, 400, "not whole zstd frames");
    expect(f, "POST", "/api/v1/profiles/batch", ZAUTH, "", 0, 400, "not whole zstd frames");
    /* 16 MiB of zeros: a frame of a few hundred bytes, so the ratio (1,000
     * here) stops it long before --max-decompressed (32 MiB) would. */
    char *zero = calloc(1, zeros);
    assert_non_null(zero);
    zstd_of(zero, zeros, &bomb);
    free(zero);
    assert_true(bomb.len * 1000 < (32u << 20));
    expect(f, "POST", "/api/v1/profiles/batch", ZAUTH, bomb.data, bomb.len, 413,
           "(10 x --max-ratio): raise --max-ratio");
    zstd_of(BATCH_MAGIC, strlen(BATCH_MAGIC), &two);
    assert_int_equal(buf__append(&two, bomb.data, bomb.len), 0);
    expect(f, "POST", "/api/v1/profiles/batch", ZAUTH, two.data, two.len, 413,
           "(10 x --max-ratio): raise --max-ratio");
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        snprintf(head, sizeof(head), AUTH "%s", other[i]);
        expect(f, "POST", "/api/v1/profiles/batch", head, z.data, z.len, 415,
               "as it is (no Content-Encoding, or identity) or as one zstd stream (zstd)");
        expect(f, "POST", "/api/v1/profiles/batch", other[i], z.data, z.len, 401, NULL);
    }
    app_has(f, "zx-one", NULL);
    app_has(f, "zx-two", NULL);
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200,
           "codexray_requests_rejected_total{reason=\"too_large\"} 2\n");
    expect(f, "GET", "/metrics", RAUTH, NULL, 0, 200,
           "codexray_requests_rejected_total{reason=\"bad_request\"} 7\n");
    /* taken: identity with a batch as it is; zstd in another case */
    buf__reset(&b);
    assert_int_equal(batch__begin(&b), 0);
    batch_profile(&b, "service=zx-id", false);
    expect(f, "POST", "/api/v1/profiles/batch", AUTH "Content-Encoding: identity\r\n", b.data,
           b.len, 200, "{\"stored\":1,");
    buf__free(&z);
    buf__reset(&b);
    assert_int_equal(batch__begin(&b), 0);
    batch_profile(&b, "service=zx-case", false);
    zstd_of(b.data, b.len, &z);
    expect(f, "POST", "/api/v1/profiles/batch", AUTH "content-encoding:  ZStd \r\n", z.data, z.len,
           200, "{\"stored\":1,");
    app_has(f, "zx-id", "main;work 5");
    app_has(f, "zx-case", "main;work 5");
    assert_int_equal(request(f->port, "GET", "/metrics", RAUTH, NULL, 0, &r), 200);
    assert_non_null(strstr(r.data, "codexray_profiles_ingested_total 2\n"));
    buf__free(&r);
    buf__free(&two);
    buf__free(&bomb);
    buf__free(&z);
    buf__free(&b);
}

/* A batch of n copies of a plain profile, service svc, a pid each and a
 * pod of 8 hex digits that zstd cannot foresee: the batch compresses
 * about 25 to 30 times (25,717 bytes to 1,015 for 100 profiles, 77,417 to
 * 2,581 for 300), far from both limits below. */
static void copies(struct buf *b, const char *svc, int n)
{
    char q[128];

    buf__init(b, 4u << 20);
    assert_int_equal(batch__begin(b), 0);
    for (int i = 0; i < n; i++) {
        snprintf(q, sizeof(q), "service=%s&pid=%d&pod=%08x", svc, 100 + i,
                 (unsigned)(i + 1) * 2654435761u);
        batch_profile(b, q, false);
    }
}

/* --max-decompressed 64 KiB, --max-ratio 10: a zstd batch inflating more
 * than 10 times (the single upload's ratio) but less than 100 and within
 * 64 KiB is stored whole; one inflating past 64 KiB (its ratio under
 * 100) is 413 naming --max-decompressed, and stores nothing. */
static void test_batch_zstd_limits(void **state)
{
    struct fixture *f = *state;
    struct buf b, z, r;

    copies(&b, "l-ok", 100);
    zstd_of(b.data, b.len, &z);
    assert_true(b.len < (64u << 10) && b.len > z.len * 10 && b.len < z.len * 100);
    assert_int_equal(request(f->port, "POST", "/api/v1/profiles/batch", ZAUTH, z.data, z.len, &r),
                     200);
    assert_non_null(strstr(r.data, "{\"stored\":100,"));
    buf__free(&r);
    buf__free(&z);
    buf__free(&b);
    copies(&b, "l-big", 300);
    zstd_of(b.data, b.len, &z);
    assert_true(b.len > (64u << 10) && z.len * 100 > (64u << 10));
    expect(f, "POST", "/api/v1/profiles/batch", ZAUTH, z.data, z.len, 413,
           "past 65536 bytes (--max-decompressed): raise --max-decompressed");
    app_has(f, "l-ok", "main;work 500");
    app_has(f, "l-big", NULL);
    buf__free(&z);
    buf__free(&b);
}

/* group_by=LABEL: the timeline per value of a label, the top values by CPU
 * (top=N) first with their share, the rest as "other" (value null); a
 * label that is none, a top out of range: 400. */
static void test_timeline_group_by(void **state)
{
    struct fixture *f = *state;
    static const struct tstack st[] = {
        {{"work", "main"}, 6, {"service", "gb", "host", "h1", "pid", "101", NULL}},
        {{"idle", "main"}, 3, {"service", "gb", "host", "h1", "pid", "202", NULL}},
        {{"tick", "main"}, 1, {"service", "gb", "host", "h2", "pid", "303", NULL}},
    };
    struct buf p, r;

    /* One profile per process, as the agent sends them. */
    for (int i = 0; i < 3; i++) {
        buf__init(&p, 1u << 20);
        tprofile(&p, (int64_t)time(NULL) * SEC - 120 * SEC, &st[i], 1, true);
        expect(f, "POST", "/api/v1/profiles", AUTH, p.data, p.len, 202, "stored");
        buf__free(&p);
    }
    assert_int_equal(request(f->port, "GET",
                             "/api/v1/timeline?app=gb&from=now-10m&step=60s&group_by=pid", RAUTH,
                             NULL, 0, &r),
                     200);
    /* 10 samples in all; pid 101 has 6, 202 has 3, 303 has 1: biggest first. */
    const char *g101 = strstr(r.data, "{\"value\":\"101\",\"share\":0.6,");
    const char *g202 = strstr(r.data, "{\"value\":\"202\",\"share\":0.3,");
    const char *g303 = strstr(r.data, "{\"value\":\"303\",\"share\":0.1,");
    assert_non_null(g101);
    assert_non_null(g202);
    assert_non_null(g303);
    assert_true(g101 < g202 && g202 < g303);
    assert_non_null(strstr(r.data, "\"group_by\":\"pid\",\"values\":3,\"capped\":false"));
    assert_null(strstr(r.data, "\"value\":null")); /* nothing left for other */
    buf__free(&r);
    /* top=1: the rest is other; by host: h1 has 9 of 10. */
    assert_int_equal(request(f->port, "GET",
                             "/api/v1/timeline?app=gb&from=now-10m&step=60s&group_by=pid&top=1",
                             RAUTH, NULL, 0, &r),
                     200);
    assert_non_null(strstr(r.data, "\"groups\":[{\"value\":\"101\",\"share\":0.6,"));
    assert_non_null(strstr(r.data, "{\"value\":null,\"share\":0.4,"));
    assert_null(strstr(r.data, "\"202\""));
    buf__free(&r);
    assert_int_equal(request(f->port, "GET",
                             "/api/v1/timeline?app=gb&from=now-10m&step=60s&group_by=host", RAUTH,
                             NULL, 0, &r),
                     200);
    assert_non_null(strstr(r.data, "\"groups\":[{\"value\":\"h1\",\"share\":0.9,"));
    assert_non_null(strstr(r.data, "{\"value\":\"h2\",\"share\":0.1,"));
    buf__free(&r);
    /* A filter and a group: pid 202 of h1 only. */
    expect(f, "GET", "/api/v1/timeline?app=gb&from=now-10m&pid=202&group_by=pid", RAUTH, NULL, 0,
           200, "\"groups\":[{\"value\":\"202\",\"share\":1,");
    expect(f, "GET", "/api/v1/timeline?app=gb&group_by=u%3Did", RAUTH, NULL, 0, 400, "group_by:");
    expect(f, "GET", "/api/v1/timeline?app=gb&group_by=service_name", RAUTH, NULL, 0, 400,
           "group_by:");
    expect(f, "GET", "/api/v1/timeline?app=gb&group_by=pid&top=0", RAUTH, NULL, 0, 400, "top:");
    expect(f, "GET", "/api/v1/timeline?app=gb&group_by=pid&top=51", RAUTH, NULL, 0, 400, "top:");
    expect(f, "GET", "/api/v1/timeline?app=gb&group_by=pid&top=x", RAUTH, NULL, 0, 400, "top:");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ingest_and_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interp_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeline_group_by, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_mixed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_store_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_zstd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_zstd_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_zstd_limits, setup_small, teardown),
    };
    return cmocka_run_group_tests_name("http", tests, NULL, NULL);
}

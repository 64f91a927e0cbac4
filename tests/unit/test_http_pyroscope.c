/* POST /ingest (server/http_pyroscope.c, server/pyroscope.c) on a real
 * loopback socket: each body shape (pprof raw and in a multipart part,
 * folded lines), the units of from/until, the keys (Bearer, basic auth),
 * profile types kept apart (a wall profile's CPU column kept, a heap
 * profile refused 422), hostile names, labels and bodies, sizes. The
 * real Pyroscope client is tests/integration/pyroscope_tests.py's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>

#include "../../server/pyroscope.h"
#include "http_helpers.h"

#define AUTH "Authorization: Bearer " KEY "\r\n"
/* user:ingest-secret and user:wrong */
#define BASIC "Authorization: Basic dXNlcjppbmdlc3Qtc2VjcmV0\r\n"
#define BASIC_BAD "Authorization: Basic dXNlcjp3cm9uZw==\r\n"
#define MS 1000000ll

enum kind { WALL_CPU, WALL_ONLY, HEAP, CPU_ONLY };

/* A profile as @pyroscope/nodejs sends one: samples/count, wall/nanoseconds
 * and cpu/nanoseconds, period type wall; main;work;hot used 30 ms of CPU
 * in 5 wall samples, main;idle none in 10 (its CPU column 0). WALL_ONLY:
 * without the cpu column (wall.collectCpuTime off). HEAP: inuse_objects/count
 * and inuse_space/bytes. */
static void node_pprof(struct buf *out, int64_t time_ns, enum kind kind, bool gzip)
{
    bool heap = kind == HEAP;
    struct pprof_writer *w = pprof_writer__new();
    static const char *const hot[] = {"hot", "work", "main"}, *const idle[] = {"idle", "main"};
    uint64_t lh[3], li[2];

    assert_non_null(w);
    if (kind == CPU_ONLY) {
        pprof_writer__add_sample_type(w, "cpu", "nanoseconds");
        pprof_writer__set_period(w, "cpu", "nanoseconds", 10 * MS);
    } else if (heap) {
        pprof_writer__add_sample_type(w, "inuse_objects", "count");
        pprof_writer__add_sample_type(w, "inuse_space", "bytes");
        pprof_writer__set_period(w, "space", "bytes", 524288);
    } else {
        pprof_writer__add_sample_type(w, "samples", "count");
        pprof_writer__add_sample_type(w, "wall", "nanoseconds");
        if (kind == WALL_CPU)
            pprof_writer__add_sample_type(w, "cpu", "nanoseconds");
        pprof_writer__set_period(w, "wall", "nanoseconds", 10 * MS);
    }
    pprof_writer__set_time(w, time_ns, 10 * SEC);
    for (int i = 0; i < 3; i++) {
        struct pprof_line l = {hot[i], NULL, "app.js", 3, 1};
        lh[i] = pprof_writer__location(w, 0, 0, &l, 1);
    }
    for (int i = 0; i < 2; i++) {
        struct pprof_line l = {idle[i], NULL, "app.js", 3, 1};
        li[i] = pprof_writer__location(w, 0, 0, &l, 1);
    }
    int64_t vh[3] = {5, 50 * MS, 30 * MS}, vi[3] = {10, 100 * MS, 0};
    if (kind == CPU_ONLY) { /* the one value is the CPU */
        vh[0] = 30 * MS;
        vi[0] = 0;
    }
    assert_int_equal(pprof_writer__add_sample(w, lh, 3, vh, NULL, 0), 0);
    assert_int_equal(pprof_writer__add_sample(w, li, 2, vi, NULL, 0), 0);
    assert_int_equal(pprof_writer__encode(w, out, gzip), 0);
    pprof_writer__free(w);
}

/* The CPU of stack `folded` of app, all time; -1 when app has no data. */
static int64_t cpu_of(struct fixture *f, const char *app, const char *folded)
{
    int64_t cpu = 0;
    struct store_merged *m = merge_all(f->st, app);
    folded_samples(m, folded, &cpu);
    store_merged__free(m);
    return cpu;
}

/* format=pprof, a raw gzipped pprof (what @pyroscope/nodejs 0.6.4 sends,
 * sampleRate=17 and all): the CPU column kept, the idle wall samples not,
 * the name's host and identity labels kept; a heap profile is 422 naming
 * its types, and stores nothing. */
static void test_pprof(void **state)
{
    struct fixture *f = *state;
    struct buf p, r;
    int64_t now = (int64_t)time(NULL);
    char path[512];

    buf__init(&p, 1u << 20);
    node_pprof(&p, (now - 60) * SEC, WALL_CPU, true);
    snprintf(path, sizeof(path),
             "/ingest?format=pprof&from=%lld&name=nodeapp%%7Botel.scope.name%%3Dcom.grafana."
             "pyroscope%%2Fnodejs%%2Chost%%3Dh1%%2Cpod%%3Dp1%%2Cregion%%3Dx1%%7D&spyName=nodespy"
             "&until=%lld&sampleRate=17",
             (long long)now - 60, (long long)now - 50);
    expect(f, "POST", path, AUTH "Content-Type: application/octet-stream\r\n", p.data, p.len, 200,
           NULL);
    assert_int_equal(cpu_of(f, "nodeapp", "main;work;hot"), 30 * MS);
    assert_int_equal(cpu_of(f, "nodeapp", "main;idle"), 0);
    assert_int_equal(request(f->port, "GET", "/api/v1/profile?app=nodeapp&format=collapsed",
                             "Authorization: Bearer " RKEY "\r\n", NULL, 0, &r),
                     200);
    assert_non_null(strstr(r.data, "main;work;hot 5"));
    assert_null(strstr(r.data, "idle"));
    buf__free(&r);
    expect(f, "GET", "/api/v1/labels?app=nodeapp", "Authorization: Bearer " RKEY "\r\n", NULL, 0,
           200, "\"p1\"");
    expect(f, "GET", "/api/v1/labels?app=nodeapp", "Authorization: Bearer " RKEY "\r\n", NULL, 0,
           200, "\"h1\"");
    /* the same path, /pyroscope/ingest, a plain pprof */
    buf__reset(&p);
    node_pprof(&p, (now - 60) * SEC, WALL_CPU, false);
    expect(f, "POST", "/pyroscope/ingest?format=pprof&name=nodeapp2", AUTH, p.data, p.len, 200,
           NULL);
    assert_int_equal(cpu_of(f, "nodeapp2", "main;work;hot"), 30 * MS);
    /* heap: not CPU */
    buf__reset(&p);
    node_pprof(&p, (now - 60) * SEC, HEAP, true);
    expect(f, "POST", "/ingest?format=pprof&name=heapapp", AUTH, p.data, p.len, 422,
           "inuse_objects/count, inuse_space/bytes");
    assert_int_equal(cpu_of(f, "heapapp", "main;work;hot"), 0);
    /* cpu/nanoseconds alone: the CPU kept, each sample counted once (not
     * its nanoseconds as samples, which the claims check would refuse) */
    buf__reset(&p);
    node_pprof(&p, (now - 60) * SEC, CPU_ONLY, true);
    expect(f, "POST", "/ingest?format=pprof&name=cpuonly", AUTH, p.data, p.len, 200, NULL);
    assert_int_equal(cpu_of(f, "cpuonly", "main;work;hot"), 30 * MS);
    struct store_merged *m = merge_all(f->st, "cpuonly");
    assert_int_equal(folded_samples(m, "main;work;hot", NULL), 1);
    assert_int_equal(folded_samples(m, "main;idle", NULL), 0);
    store_merged__free(m);
    /* wall without its CPU: not CPU either, nor mistaken for it */
    buf__reset(&p);
    node_pprof(&p, (now - 60) * SEC, WALL_ONLY, true);
    expect(f, "POST", "/ingest?format=pprof&name=wallapp", AUTH, p.data, p.len, 422,
           "samples/count, wall/nanoseconds");
    assert_int_equal(cpu_of(f, "wallapp", "main;work;hot"), 0);
    buf__free(&p);
}

/* A multipart body of parts (name, bytes, length), boundary B. */
static void multipart(struct buf *b, const char *const *names, const struct buf *const *bodies,
                      size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char h[256];
        int l = snprintf(h, sizeof(h),
                         "--B0und\r\nContent-Disposition: form-data; name=\"%s\"; "
                         "filename=\"%s\"\r\nContent-Type: application/octet-stream\r\n\r\n",
                         names[i], names[i]);
        assert_int_equal(buf__append(b, h, l), 0);
        assert_int_equal(buf__append(b, bodies[i]->data, bodies[i]->len), 0);
        assert_int_equal(buf__append(b, "\r\n", 2), 0);
    }
    assert_int_equal(buf__append(b, "--B0und--\r\n", 11), 0);
}

#define MP "Content-Type: multipart/form-data; boundary=B0und\r\n"

/* What @pyroscope/nodejs 0.6.1 sent (a part "profile", no format), with a
 * sample_type_config part before it; bad multipart bodies refused. */
static void test_multipart(void **state)
{
    struct fixture *f = *state;
    struct buf p, cfg, b;
    int64_t now = (int64_t)time(NULL);

    buf__init(&p, 1u << 20);
    buf__init(&cfg, 1024);
    buf__init(&b, 1u << 20);
    node_pprof(&p, (now - 60) * SEC, WALL_CPU, true);
    assert_int_equal(buf__append(&cfg, "{\"cpu\":{\"units\":\"nanoseconds\"}}", 31), 0);
    const char *names[] = {"sample_type_config", "profile"};
    const struct buf *bodies[] = {&cfg, &p};
    multipart(&b, names, bodies, 2);
    expect(f, "POST", "/ingest?name=mpapp%7Bhost%3Dh2%7D", AUTH MP, b.data, b.len, 200, NULL);
    assert_int_equal(cpu_of(f, "mpapp", "main;work;hot"), 30 * MS);
    /* no part "profile" */
    buf__reset(&b);
    multipart(&b, names, bodies, 1);
    expect(f, "POST", "/ingest?name=mpapp", AUTH MP, b.data, b.len, 400, "no part named");
    /* more parts than PYRO_MAX_PARTS before it */
    buf__reset(&b);
    const char *many[PYRO_MAX_PARTS + 1];
    const struct buf *mb[PYRO_MAX_PARTS + 1];
    for (int i = 0; i <= PYRO_MAX_PARTS; i++) {
        many[i] = i == PYRO_MAX_PARTS ? "profile" : "x";
        mb[i] = i == PYRO_MAX_PARTS ? &p : &cfg;
    }
    multipart(&b, many, mb, PYRO_MAX_PARTS + 1);
    expect(f, "POST", "/ingest?name=mpapp", AUTH MP, b.data, b.len, 413, "more than 16 parts");
    /* cut short, no boundary, a boundary that is not there */
    buf__reset(&b);
    multipart(&b, names, bodies, 2);
    expect(f, "POST", "/ingest?name=mpapp", AUTH MP, b.data, b.len / 2, 400, "multipart");
    expect(f, "POST", "/ingest?name=mpapp", AUTH "Content-Type: multipart/form-data\r\n", b.data,
           b.len, 400, "boundary");
    expect(f, "POST", "/ingest?name=mpapp",
           AUTH "Content-Type: multipart/form-data; boundary=\"other\"\r\n", b.data, b.len, 400,
           "does not start with its boundary");
    buf__free(&p);
    buf__free(&cfg);
    buf__free(&b);
}

/* Folded lines: each count x 1e9/sampleRate ns of CPU (100 Hz by default),
 * lines of a stack added; bad lines refused with their number. */
static void test_folded(void **state)
{
    struct fixture *f = *state;
    static const char body[] = "main;work;hot 30\r\nmain;idle 10\n\nmain;work;hot 2\n";
    int64_t now = (int64_t)time(NULL);
    char path[256];

    snprintf(path, sizeof(path), "/ingest?name=folded&from=%lld&until=%lld", (long long)now - 60,
             (long long)now - 50);
    expect(f, "POST", path, AUTH, body, sizeof(body) - 1, 200, NULL);
    assert_int_equal(cpu_of(f, "folded", "main;work;hot"), 32 * 10 * MS);
    assert_int_equal(cpu_of(f, "folded", "main;idle"), 10 * 10 * MS);
    snprintf(path, sizeof(path), "/ingest?name=folded1k&format=folded&sampleRate=1000&from=%lld",
             (long long)now - 60);
    expect(f, "POST", path, AUTH, body, sizeof(body) - 1, 200, NULL);
    assert_int_equal(cpu_of(f, "folded1k", "main;work;hot"), 32 * MS);
    static const char *const bad[] = {"main;hot\n",
                                      "main;hot -3\n",
                                      "main;hot 0\n",
                                      "main;;hot 3\n",
                                      "main;hot 3x\n",
                                      " 3\n",
                                      "main;hot 99999999999999999999\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        expect(f, "POST", "/ingest?name=bad", AUTH, bad[i], strlen(bad[i]), 400, "line 1");
    expect(f, "POST", "/ingest?name=bad", AUTH, "a 1\nb\0c 2\n", 10, 400, "line 2");
    expect(f, "POST", "/ingest?name=bad&sampleRate=0", AUTH, "a 1\n", 4, 400, "sampleRate");
    expect(f, "POST", "/ingest?name=bad&sampleRate=1e3", AUTH, "a 1\n", 4, 400, "sampleRate");
    /* deeper than max_stack_depth (64) */
    char deep[65 * 2 + 8];
    size_t n = 0;
    for (int i = 0; i < 65; i++)
        n += snprintf(deep + n, sizeof(deep) - n, "%sf", i ? ";" : "");
    n += snprintf(deep + n, sizeof(deep) - n, " 1\n");
    expect(f, "POST", "/ingest?name=bad", AUTH, deep, n, 413, "deeper than 64");
    /* frames in all lines past max_frames (the writer's tables' bound;
     * the server's is --max-ingest-memory / 512, more than --max-body
     * holds here) */
    struct pyro_folded_limits fl = {100, 64, 4096, 10};
    struct buf out;
    char msg[256];
    buf__init(&out, 1u << 20);
    static const char over[] = "a;b;c 1\na;b;c 1\na;b;c;d;e 1\n"; /* 11 frames */
    assert_int_equal(
        pyro_folded__to_pprof(over, sizeof(over) - 1, 10 * MS, 0, 0, &fl, &out, msg, sizeof(msg)),
        -E2BIG);
    assert_non_null(strstr(msg, "line 3: more than 10 frames in all lines"));
    buf__reset(&out);
    assert_int_equal(pyro_folded__to_pprof("a;b;c 1\na;b;c 1\na;b;c 1\n", 24, 10 * MS, 0, 0, &fl,
                                           &out, msg, sizeof(msg)),
                     0);
    assert_true(out.len > 0);
    buf__free(&out);
    expect(f, "POST", "/ingest?name=bad&format=jfr", AUTH, "a 1\n", 4, 415, "jfr");
    expect(f, "POST", "/ingest?name=bad&format=trie", AUTH, "a 1\n", 4, 415, "folded lines");
    assert_int_equal(cpu_of(f, "bad", "a"), 0);
}

/* from and until in seconds, ms, us and ns, told by their digits: each
 * upload lands at the same second; other shapes are 400. */
static void test_units(void **state)
{
    struct fixture *f = *state;
    int64_t t = (int64_t)time(NULL) - 300;
    static const char *const mul[] = {"", "000", "000000", "000000000"};
    char path[256], app[32];

    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "/ingest?name=units%d&from=%lld%s&until=%lld%s", i,
                 (long long)t, mul[i], (long long)t + 10, mul[i]);
        expect(f, "POST", path, AUTH, "a;b 1\n", 6, 200, NULL);
    }
    snprintf(path, sizeof(path), "/api/v1/applications?from=%lld&to=%lld", (long long)t,
             (long long)t + 1);
    for (int i = 0; i < 4; i++) {
        snprintf(app, sizeof(app), "\"units%d\"", i);
        expect(f, "GET", path, "Authorization: Bearer " RKEY "\r\n", NULL, 0, 200, app);
    }
    /* and not a second later */
    snprintf(path, sizeof(path), "/api/v1/applications?from=%lld&to=%lld", (long long)t + 1,
             (long long)t + 100);
    struct buf r;
    assert_int_equal(
        request(f->port, "GET", path, "Authorization: Bearer " RKEY "\r\n", NULL, 0, &r), 200);
    assert_null(strstr(r.data, "units"));
    buf__free(&r);
    static const char *const bad[] = {"from=-5",
                                      "from=1.5",
                                      "from=now",
                                      "from=",
                                      "from=12345678901234567890",
                                      "until=1&from=2",
                                      "from=9223372036854775807"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        snprintf(path, sizeof(path), "/ingest?name=u&%s", bad[i]);
        expect(f, "POST", path, AUTH, "a 1\n", 4, 400, NULL);
    }
    /* the pure function: digits and units */
    int64_t ns;
    assert_int_equal(pyro_time__parse("1700000000", &ns), 0);
    assert_int_equal(ns, 1700000000 * SEC);
    assert_int_equal(pyro_time__parse("1700000000123", &ns), 0);
    assert_int_equal(ns, 1700000000123 * MS);
    assert_int_equal(pyro_time__parse("1700000000123456", &ns), 0);
    assert_int_equal(ns, 1700000000123456 * 1000);
    assert_int_equal(pyro_time__parse("1700000000123456789", &ns), 0);
    assert_int_equal(ns, 1700000000123456789);
    assert_int_equal(pyro_time__parse("9999999999", &ns), -1); /* seconds past 64 bits of ns */
    assert_int_equal(pyro_time__parse("99999999999", &ns), 0); /* ms: they fit */
    assert_int_equal(ns, 99999999999 * MS);
    assert_int_equal(pyro_time__parse("99999999999999999999", &ns), -1);
}

/* The ingest key as Bearer or as basic auth's password; nothing else. */
static void test_keys(void **state)
{
    struct fixture *f = *state;

    expect(f, "POST", "/ingest?name=k", NULL, "a 1\n", 4, 401, "API key");
    expect(f, "POST", "/ingest?name=k", "Authorization: Bearer wrong\r\n", "a 1\n", 4, 401, NULL);
    expect(f, "POST", "/ingest?name=k", BASIC_BAD, "a 1\n", 4, 401, NULL);
    expect(f, "POST", "/ingest?name=k", "Authorization: Basic !!!\r\n", "a 1\n", 4, 401, NULL);
    expect(f, "POST", "/ingest?name=k", "Authorization: Bearer " RKEY "\r\n", "a 1\n", 4, 401,
           NULL);
    expect(f, "POST", "/ingest?name=k", BASIC "X-Scope-OrgID: tenant1\r\n", "a 1\n", 4, 200, NULL);
    expect(f, "POST", "/pyroscope/ingest?name=k", AUTH, "a 1\n", 4, 200, NULL);
    assert_int_equal(cpu_of(f, "k", "a"), 2 * 10 * MS);
    /* basic auth stays off the other ingest paths */
    expect(f, "POST", "/api/v1/profiles?service=k", BASIC, "x", 1, 401, NULL);
    expect(f, "GET", "/ingest", NULL, NULL, 0, 405, "POST");
}

/* Hostile names and labels: each refused 400 with why, nothing stored. */
static void test_names(void **state)
{
    struct fixture *f = *state;
    static const char *const bad[] = {
        "",                            /* no name */
        "name=",                       /* empty */
        "name=%7Ba%3Db%7D",            /* {a=b}: no application */
        "name=app%7Ba%3Db",            /* no closing brace */
        "name=app%7Ba%7D",             /* not key=value */
        "name=app%7B%3Db%7D",          /* no key */
        "name=app%7Ba%20b%3Dc%7D",     /* a space in a key */
        "name=app%7Ba%3Db%3Dc%7D",     /* '=' in a value */
        "name=app%7Ba%3D1%2Ca%3D2%7D", /* a key twice */
        "name=app%7Bhost%3Da%01b%7D",  /* a control character in the host */
        "name=app%7Bpid%3D-1%7D",      /* not a pid */
        "name=a%FFb",                  /* not UTF-8 */
        "name=.cpu",                   /* nothing but the suffix */
    };
    char path[512];

    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        snprintf(path, sizeof(path), "/ingest?%s", bad[i]);
        struct buf r;
        int st = request(f->port, "POST", path, AUTH, "a 1\n", 4, &r);
        if (st != 400)
            fail_msg("%s: %d %s", path, st, r.data ? r.data : "");
        buf__free(&r);
    }
    /* a value over max_label_bytes (256), 65 labels */
    char big[2048];
    size_t n = (size_t)snprintf(big, sizeof(big), "/ingest?name=app%%7Bk%%3D");
    memset(big + n, 'v', 300);
    snprintf(big + n + 300, sizeof(big) - n - 300, "%%7D");
    expect(f, "POST", big, AUTH, "a 1\n", 4, 400, "longer than 256");
    n = (size_t)snprintf(big, sizeof(big), "/ingest?name=app%%7B");
    for (int i = 0; i < 65; i++)
        n += snprintf(big + n, sizeof(big) - n, "%sk%d=v", i ? "," : "", i);
    snprintf(big + n, sizeof(big) - n, "%%7D");
    expect(f, "POST", big, AUTH, "a 1\n", 4, 400, "more than 64 labels");
    /* ".cpu" is dropped from the application, labels with '.' and '/'
     * in their values taken */
    expect(f, "POST", "/ingest?name=dotted.cpu%7Bk.x%3Da%2Fb.c%2C%7D", AUTH, "a 1\n", 4, 200, NULL);
    assert_int_equal(cpu_of(f, "dotted", "a"), 10 * MS);
}

/* Bodies past --max-body (256 KiB here) are 413, whatever their format. */
static void test_sizes(void **state)
{
    struct fixture *f = *state;
    size_t len = 300u << 10;
    char *big = malloc(len);

    assert_non_null(big);
    for (size_t i = 0; i < len; i += 4)
        memcpy(big + i, "a 1\n", 4);
    expect(f, "POST", "/ingest?name=big", AUTH, big, len, 413, "larger than");
    expect(f, "POST", "/ingest?name=big&format=pprof", AUTH, big, len, 413, "larger than");
    /* a pprof that is not one: 400 */
    expect(f, "POST", "/ingest?name=big&format=pprof", AUTH, big, 4096, 400, NULL);
    free(big);
}

/* The other labels' distinct values: bounded per key and in keys, all or
 * none of a profile's taken, a check taking nothing, refusals naming the
 * label; and a name's other labels picked and bounded. */
static void test_label_bounds(void **state)
{
    struct pyro_card *c = pyro_card__new(2, 3);
    char msg[256];
    struct store_label a[] = {{"region", "eu"}, {"tier", "x"}};

    (void)state;
    assert_non_null(c);
    assert_int_equal(pyro_card__take(c, a, 2, false, msg, sizeof(msg)), 0);
    assert_int_equal(pyro_card__take(c, a, 2, false, msg, sizeof(msg)), 0); /* seen: free */
    struct store_label z = {"zone", "1"};
    assert_int_equal(pyro_card__take(c, &z, 1, false, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "label zone: the server already has 2 label keys"));
    struct store_label r[] = {{"region", "us"}, {"region", "ap"}, {"region", "sa"}};
    assert_int_equal(pyro_card__take(c, &r[0], 1, true, msg, sizeof(msg)), 0);
    assert_int_equal(pyro_card__take(c, &r[0], 1, false, msg, sizeof(msg)), 0);
    assert_int_equal(pyro_card__take(c, &r[1], 1, true, msg, sizeof(msg)), 0);
    assert_int_equal(pyro_card__take(c, &r[1], 1, true, msg, sizeof(msg)), 0); /* took nothing */
    assert_int_equal(pyro_card__take(c, &r[1], 1, false, msg, sizeof(msg)), 0);
    assert_int_equal(pyro_card__take(c, &r[2], 1, false, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "label region: already 3 distinct values"));
    /* all or none: tier's new value is not taken with region's refused one */
    struct store_label both[] = {{"tier", "y"}, {"region", "sa"}};
    assert_int_equal(pyro_card__take(c, both, 2, false, msg, sizeof(msg)), -1);
    struct store_label ty[] = {{"tier", "w"}, {"tier", "v"}}; /* x, w, v: y was not taken */
    assert_int_equal(pyro_card__take(c, &ty[0], 1, false, msg, sizeof(msg)), 0);
    assert_int_equal(pyro_card__take(c, &ty[1], 1, false, msg, sizeof(msg)), 0);
    pyro_card__free(c);
    pyro_card__free(NULL);

    struct pyro_name n;
    struct store_label out[STORE_MAX_LABELS];
    size_t nout;
    assert_int_equal(pyro_name__parse("app{host=h,hostname=x,pid=3,pod=p,service_name=s,"
                                      "__session_id__=9,region=eu,otel.scope.name=a/b}",
                                      4096, &n, msg, sizeof(msg)),
                     0);
    assert_int_equal(pyro_name__labels(&n, false, out, &nout, msg, sizeof(msg)), 0);
    assert_int_equal(nout, 3);
    assert_string_equal(out[0].key, "hostname"); /* host was given: hostname is a label */
    assert_string_equal(out[1].key, "region");
    assert_string_equal(out[2].key, "otel.scope.name");
    assert_int_equal(pyro_name__labels(&n, true, out, &nout, msg, sizeof(msg)), 0);
    assert_int_equal(nout, 2);
    pyro_name__free(&n);
    assert_int_equal(pyro_name__parse("app{v=\xff\xfe}", 4096, &n, msg, sizeof(msg)), 0);
    assert_int_equal(pyro_name__labels(&n, false, out, &nout, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "not valid UTF-8"));
    pyro_name__free(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pprof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_folded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_units, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sizes, setup, teardown),
        cmocka_unit_test(test_label_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

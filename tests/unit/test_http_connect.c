/* Pyroscope's querier API (server/http_connect.c, connect_req.c,
 * connect_flame.c) on a real loopback socket: each RPC in binary protobuf
 * (requests and answers through protobuf-c) and in JSON, the flame graph's
 * levels to the exact values of a known tree, the merge of two hosts, the
 * selectors' operators and anchoring, and refusals as Connect errors
 * (unauthenticated, unimplemented, invalid_argument with hostile
 * selectors and JSON, a body past its cap). The real Connect client is
 * tests/integration/pyroscope_tests.py's (tests/pyroscope/query.js). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>

#include "http_helpers.h"
#include "querier/v1/querier.pb-c.h"

#define RAUTH "Authorization: Bearer " RKEY "\r\n"
#define PB RAUTH "Content-Type: application/proto\r\nConnect-Protocol-Version: 1\r\n"
#define JS RAUTH "Content-Type: application/json\r\nConnect-Protocol-Version: 1\r\n"
#define TYPE "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
#define P "/querier.v1.QuerierService/"

static int64_t now_s;

/* web on h1 (main;a;b 30 samples, main;c 10) and h2 (main;a;b 5), db on
 * h1 (main;q 7); 10 ms a sample. */
static void ingest(struct fixture *f)
{
    static const struct tstack h1[] = {{{"b", "a", "main"}, 30, {NULL}},
                                       {{"c", "main"}, 10, {NULL}}},
                               h2[] = {{{"b", "a", "main"}, 5, {NULL}}},
                               db[] = {{{"q", "main"}, 7, {NULL}}};
    struct {
        const char *q;
        const struct tstack *st;
        size_t n;
    } in[] = {{"service=web&host=h1&pod=p1", h1, 2},
              {"service=web&host=h2", h2, 1},
              {"service=db&host=h1", db, 1}};
    char path[128];

    now_s = (int64_t)time(NULL);
    for (size_t i = 0; i < 3; i++) {
        struct buf p;
        buf__init(&p, 1u << 20);
        tprofile(&p, (now_s - 600) * SEC, in[i].st, in[i].n, false);
        snprintf(path, sizeof(path), "/api/v1/profiles?%s", in[i].q);
        expect(f, "POST", path, "Authorization: Bearer " KEY "\r\n", p.data, p.len, 202, NULL);
        buf__free(&p);
    }
}

/* POSTs message m in binary to METHOD; the answer's status, its body in r. */
static int call_pb(struct fixture *f, const char *method, const ProtobufCMessage *m, struct buf *r)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(n + 1);
    char path[128];

    assert_non_null(b);
    protobuf_c_message_pack(m, b);
    snprintf(path, sizeof(path), P "%s", method);
    int st = request(f->port, "POST", path, PB, b, n, r);
    free(b);
    return st;
}

static void call_json(struct fixture *f, const char *method, const char *body, int status,
                      const char *has)
{
    char path[128];
    snprintf(path, sizeof(path), P "%s", method);
    expect(f, "POST", path, JS, body, strlen(body), status, has);
}

static void test_profile_types(void **state)
{
    struct fixture *f = *state;
    Querier__V1__ProfileTypesRequest rq = QUERIER__V1__PROFILE_TYPES_REQUEST__INIT;
    struct buf r;

    assert_int_equal(call_pb(f, "ProfileTypes", &rq.base, &r), 200);
    Querier__V1__ProfileTypesResponse *a =
        querier__v1__profile_types_response__unpack(NULL, r.len, (uint8_t *)r.data);
    assert_non_null(a);
    assert_int_equal(a->n_profile_types, 1);
    assert_string_equal(a->profile_types[0]->id, TYPE);
    assert_string_equal(a->profile_types[0]->sample_unit, "nanoseconds");
    querier__v1__profile_types_response__free_unpacked(a, NULL);
    buf__free(&r);
    call_json(f, "ProfileTypes", "{}", 200, "\"ID\":\"" TYPE "\"");
    call_json(f, "ProfileTypes", " { \"start\" : \"0\" , \"end\": 0 } ", 200, TYPE);
    /* refusals */
    expect(f, "POST", P "ProfileTypes", "Content-Type: application/json\r\n", "{}", 2, 401,
           "\"code\":\"unauthenticated\"");
    expect(f, "POST", P "ProfileTypes",
           "Authorization: Bearer wrong\r\nContent-Type: application/json\r\n", "{}", 2, 401,
           "unauthenticated");
    call_json(f, "SelectMergeProfile", "{}", 404, "\"code\":\"unimplemented\"");
    call_json(f, "Diff", "{}", 404, "unimplemented");
    expect(f, "POST", P "ProfileTypes", RAUTH "Content-Type: text/plain\r\n", "{}", 2, 415,
           "application/proto");
    expect(f, "POST", P "ProfileTypes", RAUTH, "{}", 2, 415, "Content-Type");
    expect(f, "POST", P "ProfileTypes", JS "Content-Encoding: gzip\r\n", "{}", 2, 501, "identity");
    expect(f, "POST", P "LabelNames", PB, "\xff\xff\xff", 3, 400, "invalid_argument");
    /* past max_body (256 KiB here) and past 1 MiB: resource_exhausted */
    size_t big = 300u << 10;
    char *junk = calloc(1, big);
    assert_non_null(junk);
    expect(f, "POST", P "ProfileTypes", JS, junk, big, 429, "resource_exhausted");
    free(junk);
    expect(f, "POST", P "ProfileTypes", JS "Content-Length: 2000000\r\n", NULL, 0, 429,
           "resource_exhausted");
}

/* The flame graph's levels rebuilt (the first parent whose span holds a
 * node, as Grafana's levelsToTree) into "name:total:self" lines by depth. */
static void check_levels(const Querier__V1__FlameGraph *fg, const char *const *want, size_t nwant)
{
    assert_int_equal(fg->n_levels, nwant);
    for (size_t d = 0; d < fg->n_levels; d++) {
        char line[512] = "";
        size_t n = 0;
        int64_t at = 0;
        const Querier__V1__Level *l = fg->levels[d];
        assert_int_equal(l->n_values % 4, 0);
        for (size_t i = 0; i < l->n_values; i += 4) {
            assert_true(l->values[i] >= 0);
            at += l->values[i];
            assert_true(l->values[i + 3] >= 0 && (size_t)l->values[i + 3] < fg->n_names);
            n += snprintf(line + n, sizeof(line) - n, "%s%lld:%s:%lld:%lld", i ? " " : "",
                          (long long)at, fg->names[l->values[i + 3]], (long long)l->values[i + 1],
                          (long long)l->values[i + 2]);
            at += l->values[i + 1];
        }
        if (strcmp(line, want[d]))
            fail_msg("level %zu: '%s', want '%s'", d, line, want[d]);
    }
}

static Querier__V1__SelectMergeStacktracesResponse *merge(struct fixture *f, const char *sel,
                                                          int64_t max_nodes)
{
    Querier__V1__SelectMergeStacktracesRequest rq =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    struct buf r;

    rq.profile_typeid = TYPE;
    rq.label_selector = (char *)sel;
    rq.start = (now_s - 3600) * 1000;
    rq.end = (now_s + 60) * 1000;
    rq.max_nodes = max_nodes;
    int st = call_pb(f, "SelectMergeStacktraces", &rq.base, &r);
    if (st != 200)
        fail_msg("%s: %d %s", sel, st, r.data);
    Querier__V1__SelectMergeStacktracesResponse *a =
        querier__v1__select_merge_stacktraces_response__unpack(NULL, r.len, (uint8_t *)r.data);
    buf__free(&r);
    assert_non_null(a);
    assert_non_null(a->flamegraph);
    return a;
}

#define MSEC 10000000ll /* a sample */

static void test_flamegraph(void **state)
{
    struct fixture *f = *state;
    char want_h1[4][128], want_web[4][128];

    ingest(f);
    /* web on h1: 40 samples; main 40 > a 30 > b 30, c 10; offsets left to right */
    snprintf(want_h1[0], 128, "0:total:%lld:0", 40 * MSEC);
    snprintf(want_h1[1], 128, "0:main:%lld:0", 40 * MSEC);
    snprintf(want_h1[2], 128, "0:a:%lld:0 %lld:c:%lld:%lld", 30 * MSEC, 30 * MSEC, 10 * MSEC,
             10 * MSEC);
    snprintf(want_h1[3], 128, "0:b:%lld:%lld", 30 * MSEC, 30 * MSEC);
    const char *w1[] = {want_h1[0], want_h1[1], want_h1[2], want_h1[3]};
    Querier__V1__SelectMergeStacktracesResponse *a =
        merge(f, "{service_name=\"web\", host=\"h1\"}", 0);
    check_levels(a->flamegraph, w1, 4);
    assert_int_equal(a->flamegraph->total, 40 * MSEC);
    assert_int_equal(a->flamegraph->max_self, 30 * MSEC);
    querier__v1__select_merge_stacktraces_response__free_unpacked(a, NULL);
    /* the pod label (=) picks the same */
    a = merge(f, "{service_name=\"web\",pod=\"p1\"}", 0);
    check_levels(a->flamegraph, w1, 4);
    querier__v1__select_merge_stacktraces_response__free_unpacked(a, NULL);
    /* both hosts: web's whole 45 samples, merged across the two results
     * (by host regex, a query per host) as in one (by name) */
    snprintf(want_web[0], 128, "0:total:%lld:0", 45 * MSEC);
    snprintf(want_web[1], 128, "0:main:%lld:0", 45 * MSEC);
    snprintf(want_web[2], 128, "0:a:%lld:0 %lld:c:%lld:%lld", 35 * MSEC, 35 * MSEC, 10 * MSEC,
             10 * MSEC);
    snprintf(want_web[3], 128, "0:b:%lld:%lld", 35 * MSEC, 35 * MSEC);
    const char *ww[] = {want_web[0], want_web[1], want_web[2], want_web[3]};
    const char *sels[] = {"{service_name=\"web\"}", "{service_name=\"web\",host=~\"h.*\"}",
                          "{service_name!=\"db\", host!=\"h3\"}", "{service_name=~\"w.b\"}"};
    for (size_t i = 0; i < 4; i++) {
        a = merge(f, sels[i], 0);
        check_levels(a->flamegraph, ww, 4);
        querier__v1__select_merge_stacktraces_response__free_unpacked(a, NULL);
    }
    /* Pyroscope's profile-type labels: this type selects all, another none */
    a = merge(f, "{service_name=\"web\",__profile_type__=\"" TYPE "\",__name__=~\"process_.*\"}",
              0);
    check_levels(a->flamegraph, ww, 4);
    querier__v1__select_merge_stacktraces_response__free_unpacked(a, NULL);
    a = merge(f, "{service_name=\"web\",__profile_type__=\"memory:a:b:c:d\"}", 0);
    assert_int_equal(a->flamegraph->total, 0);
    querier__v1__select_merge_stacktraces_response__free_unpacked(a, NULL);
    /* everything: web and db under one main */
    a = merge(f, "{}", 0);
    assert_int_equal(a->flamegraph->total, 52 * MSEC);
    assert_int_equal(a->flamegraph->levels[1]->values[1], 52 * MSEC);
    querier__v1__select_merge_stacktraces_response__free_unpacked(a, NULL);
    /* anchored: "we" is not "web"; no data is an empty total */
    a = merge(f, "{service_name=~\"we\"}", 0);
    assert_int_equal(a->flamegraph->total, 0);
    querier__v1__select_merge_stacktraces_response__free_unpacked(a, NULL);
    /* max_nodes 3: c and b folded into "other" */
    a = merge(f, "{service_name=\"web\",host=\"h1\"}", 3);
    assert_int_equal(a->flamegraph->total, 40 * MSEC);
    assert_true(a->flamegraph->n_levels <= 3);
    querier__v1__select_merge_stacktraces_response__free_unpacked(a, NULL);
    /* JSON: protojson, 64-bit integers as strings */
    char body[512];
    snprintf(body, sizeof(body),
             "{\"profileTypeID\":\"" TYPE "\",\"labelSelector\":\"{service_name=\\\"web\\\","
             "host=\\\"h1\\\"}\",\"start\":\"%lld\",\"end\":%lld}",
             (long long)(now_s - 3600) * 1000, (long long)(now_s + 60) * 1000);
    char has[128];
    snprintf(has, sizeof(has), "{\"values\":[\"0\",\"%lld\",\"0\",\"0\"]}", 40 * MSEC);
    call_json(f, "SelectMergeStacktraces", body, 200, has);
    call_json(f, "SelectMergeStacktraces", body, 200, "\"names\":[\"total\",\"other\"");
    call_json(f, "SelectMergeStacktraces", body, 200, "\"maxSelf\":\"300000000\"");
}

static void test_labels_series(void **state)
{
    struct fixture *f = *state;
    char body[512];

    ingest(f);
    call_json(f, "LabelValues", "{\"name\":\"service_name\"}", 200, "{\"names\":[\"db\",\"web\"]}");
    call_json(f, "LabelValues", "{\"name\":\"host\",\"matchers\":[\"{service_name=\\\"web\\\"}\"]}",
              200, "{\"names\":[\"h1\",\"h2\"]}");
    call_json(f, "LabelValues",
              "{\"name\":\"host\",\"matchers\":[\"{service_name=\\\"web\\\",host!=\\\"h1\\\"}\"]}",
              200, "{\"names\":[\"h2\"]}");
    call_json(f, "LabelValues", "{\"name\":\"pod\",\"matchers\":[\"{service_name=\\\"web\\\"}\"]}",
              200, "{\"names\":[\"p1\"]}");
    call_json(f, "LabelValues", "{\"name\":\"service_name\",\"matchers\":[\"{host=\\\"h2\\\"}\"]}",
              200, "{\"names\":[\"web\"]}");
    call_json(f, "LabelNames", "{\"matchers\":[\"{service_name=\\\"db\\\"}\"]}", 200,
              "{\"names\":[\"host\",\"service_name\"]}");
    call_json(f, "LabelNames", "{\"matchers\":[\"{service_name=\\\"web\\\"}\"]}", 200,
              "{\"names\":[\"host\",\"pod\",\"service_name\"]}");
    call_json(f, "LabelNames", "{}", 200, "\"service_name\"");
    /* binary */
    Types__V1__LabelValuesRequest lv = TYPES__V1__LABEL_VALUES_REQUEST__INIT;
    char *m[] = {"{service_name=~\"w.*\"}"};
    struct buf r;
    lv.name = "host", lv.matchers = m, lv.n_matchers = 1;
    assert_int_equal(call_pb(f, "LabelValues", &lv.base, &r), 200);
    Types__V1__LabelValuesResponse *v =
        types__v1__label_values_response__unpack(NULL, r.len, (uint8_t *)r.data);
    assert_non_null(v);
    assert_int_equal(v->n_names, 2);
    assert_string_equal(v->names[0], "h1");
    assert_string_equal(v->names[1], "h2");
    types__v1__label_values_response__free_unpacked(v, NULL);
    buf__free(&r);
    /* SelectSeries: web's CPU in the step holding now-600 s, by host */
    Querier__V1__SelectSeriesRequest ss = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    char *gb[] = {"host"};
    ss.profile_typeid = TYPE, ss.label_selector = "{service_name=\"web\"}";
    ss.start = (now_s - 1200) * 1000, ss.end = now_s * 1000, ss.step = 60;
    ss.group_by = gb, ss.n_group_by = 1;
    assert_int_equal(call_pb(f, "SelectSeries", &ss.base, &r), 200);
    Querier__V1__SelectSeriesResponse *sr =
        querier__v1__select_series_response__unpack(NULL, r.len, (uint8_t *)r.data);
    buf__free(&r);
    assert_non_null(sr);
    assert_int_equal(sr->n_series, 2);
    double want[2] = {40.0 * MSEC, 5.0 * MSEC};
    for (size_t i = 0; i < 2; i++) {
        Types__V1__Series *s = sr->series[i];
        assert_int_equal(s->n_labels, 1);
        assert_string_equal(s->labels[0]->name, "host");
        assert_int_equal(s->n_points, 20);
        double sum = 0;
        for (size_t k = 0; k < s->n_points; k++) {
            sum += s->points[k]->value;
            assert_int_equal(s->points[k]->timestamp, (now_s - 1200 + 60 * (int64_t)k) * 1000);
        }
        assert_true(sum == want[strcmp(s->labels[0]->value, "h1") ? 1 : 0]);
    }
    querier__v1__select_series_response__free_unpacked(sr, NULL);
    snprintf(body, sizeof(body),
             "{\"profileTypeID\":\"" TYPE "\",\"labelSelector\":\"{}\",\"start\":\"%lld\","
             "\"end\":\"%lld\",\"step\":60,\"groupBy\":[\"service_name\"]}",
             (long long)(now_s - 1200) * 1000, (long long)now_s * 1000);
    call_json(f, "SelectSeries", body, 200, "{\"name\":\"service_name\",\"value\":\"db\"}");
    call_json(f, "SelectSeries", body, 200, "\"points\":[{\"value\":0,\"timestamp\":\"");
    /* refusals */
    call_json(f, "SelectMergeStacktraces",
              "{\"profileTypeID\":\"" TYPE "\",\"format\":\"PROFILE_FORMAT_TREE\"}", 501,
              "\"code\":\"unimplemented\"");
    call_json(f, "SelectMergeStacktraces", "{\"profileTypeID\":\"" TYPE "\",\"format\":\"x\"}", 501,
              "only the flame graph");
    call_json(f, "SelectMergeStacktraces",
              "{\"profileTypeID\":\"" TYPE "\",\"format\":\"PROFILE_FORMAT_FLAMEGRAPH\"}", 200,
              "\"flamegraph\"");
    call_json(f, "SelectMergeStacktraces", "{\"profileTypeID\":\"" TYPE "\",\"format\":2}", 501,
              "unimplemented");
    call_json(f, "SelectSeries", "{\"profileTypeID\":\"" TYPE "\",\"step\":0.5}", 400,
              "step: seconds, at least 1");
    call_json(f, "SelectSeries", "{\"profileTypeID\":\"" TYPE "\",\"step\":1,\"start\":1}", 400,
              "more than 10000 steps");
    call_json(f, "SelectSeries",
              "{\"profileTypeID\":\"" TYPE "\",\"step\":60,\"groupBy\":[\"pid\"]}", 400,
              "one other label of the profiles (not pid)");
    call_json(f, "SelectSeries",
              "{\"profileTypeID\":\"" TYPE "\",\"step\":60,\"groupBy\":[\"pod\",\"region\"]}", 400,
              "one other label");
    call_json(f, "SelectSeries", "{\"profileTypeID\":\"memory:x:y:z:w\",\"step\":60}", 400,
              "profile_typeID: " TYPE ", off_cpu:off_cpu:nanoseconds:cpu:nanoseconds or "
              "wall:wall:nanoseconds:cpu:nanoseconds");
    /* Off-CPU over CPU profiles alone: a known type, no series. */
    call_json(f, "SelectSeries",
              "{\"profileTypeID\":\"off_cpu:off_cpu:nanoseconds:cpu:nanoseconds\",\"step\":60}",
              200, "{\"series\":[]}");
    call_json(f, "LabelValues", "{}", 400, "name: required");
    call_json(f, "LabelNames", "{\"matchers\":[\"{}\",\"{}\"]}", 400, "one selector at most");
    call_json(f, "LabelNames", "{\"start\":5,\"end\":4}", 400, "start must be before end");
    call_json(f, "LabelNames", "{\"end\":\"-4\"}", 400, "milliseconds");
}

/* Hostile selectors and JSON: each refused as invalid_argument, saying why. */
static void test_hostile(void **state)
{
    struct fixture *f = *state;
    static const char *const sel[][2] = {
        {"service_name=\\\"x\\\"", "expected '{'"},
        {"{service_name=\\\"x}", "unterminated"},
        {"{service_name==\\\"x\\\"}", "expected a quoted value"},
        {"{9a=\\\"x\\\"}", "expected a label name"},
        {"{a\\\"x\\\"}", "expected =, !=, =~ or !~"},
        {"{service_name=\\\"x\\\"} junk", "something after"},
        {"{service_name=\\\"x\\\" host=\\\"y\\\"}", "expected ',' or '}'"},
        {"{pid=\\\"abc\\\"}", "pid takes = and a process id"},
        {"{pid!=\\\"1\\\"}", "pid takes = and a process id"},
        {"{service_name=~\\\"[[:nope:]]\\\"}", "a bad regular expression"},
        {"{host=~\\\"(a*)*\\\\\\\\2\\\"}", "a backreference"},
        {"{host=~\\\"a++\\\"}", "a repetition of nothing or of a repetition"},
        {"{host=~\\\"*a\\\"}", "a repetition of nothing"},
        {"{host=~\\\"(a{100}){100}\\\"}", "counted repetitions past 1000"},
        {"{host=~\\\"a{1001}\\\"}", "at most 1000"},
        {"{host=~\\\"h1)|(x\\\"}", "without its '('"},
        {"{host=~\\\"(h1\\\"}", "without its ')'"},
        {"{host=~\\\"[a\\\"}", "unterminated bracket"},
    };
    char body[8192];

    for (size_t i = 0; i < sizeof(sel) / sizeof(*sel); i++) {
        snprintf(body, sizeof(body), "{\"profileTypeID\":\"" TYPE "\",\"labelSelector\":\"%s\"}",
                 sel[i][0]);
        call_json(f, "SelectMergeStacktraces", body, 400, sel[i][1]);
    }
    /* 33 matchers; a regular expression of 1025 bytes */
    int n = snprintf(body, sizeof(body), "{\"profileTypeID\":\"" TYPE "\",\"labelSelector\":\"{");
    for (int i = 0; i < 33; i++)
        n += snprintf(body + n, sizeof(body) - n, "%shost=\\\"h\\\"", i ? "," : "");
    snprintf(body + n, sizeof(body) - n, "}\"}");
    call_json(f, "SelectMergeStacktraces", body, 400, "more than 32 matchers");
    n = snprintf(body, sizeof(body),
                 "{\"profileTypeID\":\"" TYPE "\",\"labelSelector\":\"{host=~\\\"");
    memset(body + n, 'a', 1025);
    snprintf(body + n + 1025, sizeof(body) - n - 1025, "\\\"}\"}");
    call_json(f, "SelectMergeStacktraces", body, 400, "longer than 1024 bytes");
    /* JSON */
    static const char *const js[][2] = {
        {"", "expected an object"},
        {"[]", "expected an object"},
        {"{\"name\":\"host\"", "expected ',' or '}'"},
        {"{\"name\":\"host\"} x", "something after the object"},
        {"{\"name\":\"ho\\qst\"}", "a bad escape"},
        {"{\"name\":\"\\ud800\"}", "a bad escape"},
        {"{\"name\":\"\\u0000\"}", "a bad escape"},
        {"{\"name\":\"a\nb\"}", "control character"},
        {"{\"name\":\"a\",\"name\":\"b\"}", "a field given twice"},
        {"{\"start\":\"12x\"}", "expected a whole number"},
        {"{\"start\":}", "expected a number"},
        {"{\"matchers\":\"x\"}", "expected a list of strings"},
        {"{\"name\" \"x\"}", "expected ':'"},
        {"{\"name\":\"x", "unterminated"},
    };
    for (size_t i = 0; i < sizeof(js) / sizeof(*js); i++)
        call_json(f, "LabelValues", js[i][0], 400, js[i][1]);
    /* deep nesting in an unknown field; 65 strings in a list */
    n = snprintf(body, sizeof(body), "{\"x\":");
    for (int i = 0; i < 40; i++)
        body[n++] = '[';
    for (int i = 0; i < 40; i++)
        body[n++] = ']';
    snprintf(body + n, sizeof(body) - n, "}");
    call_json(f, "LabelNames", body, 400, "nested too deep");
    n = snprintf(body, sizeof(body), "{\"matchers\":[");
    for (int i = 0; i < 65; i++)
        n += snprintf(body + n, sizeof(body) - n, "%s\"{}\"", i ? "," : "");
    snprintf(body + n, sizeof(body) - n, "]}");
    call_json(f, "LabelNames", body, 400, "more than 64 strings");
    /* unknown fields skipped, nesting within bounds; a pair of surrogates */
    call_json(f, "LabelNames", "{\"x\":[{\"y\":[1,2,{\"z\":null}]}],\"w\":true,\"v\":-1.5e3}", 200,
              "{\"names\":[");
    call_json(f, "LabelValues", "{\"name\":\"\\ud83d\\ude00\"}", 200, "{\"names\":[]}");
}

/* The profiles' other labels, from Pyroscope's /ingest: listed, matched
 * with each operator, grouped by. shop: region=eu,tier=x (main;a;b 30
 * samples), region=us (main;a;c 10), no region (main;a;d 5). */
static void test_other_labels(void **state)
{
    struct fixture *f = *state;
    static const struct {
        const char *labels, *body;
    } in[] = {{"{region=eu,tier=x,__session_id__=1}", "main;a;b 30\n"},
              {"{region=us}", "main;a;c 10\n"},
              {"", "main;a;d 5\n"}};
    char path[512];

    now_s = (int64_t)time(NULL);
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "/ingest?name=shop%s&from=%lld&until=%lld", in[i].labels,
                 (long long)now_s - 600, (long long)now_s - 590);
        expect(f, "POST", path, "Authorization: Bearer " KEY "\r\n", in[i].body, strlen(in[i].body),
               200, NULL);
    }
    call_json(f, "LabelNames", "{\"matchers\":[\"{service_name=\\\"shop\\\"}\"]}", 200,
              "{\"names\":[\"region\",\"service_name\",\"tier\"]}");
    call_json(f, "LabelValues", "{\"name\":\"region\"}", 200, "{\"names\":[\"eu\",\"us\"]}");
    call_json(f, "LabelValues",
              "{\"name\":\"region\",\"matchers\":[\"{service_name=\\\"shop\\\",tier=\\\"x\\\"}\"]}",
              200, "{\"names\":[\"eu\"]}");
    static const struct {
        const char *sel;
        int64_t samples;
    } want[] = {
        {"{service_name=\"shop\"}", 45},
        {"{service_name=\"shop\",region=\"eu\"}", 30},
        {"{service_name=\"shop\",region!=\"eu\"}", 15},
        {"{service_name=\"shop\",region=\"\"}", 5},
        {"{service_name=\"shop\",region!=\"\"}", 40},
        {"{service_name=\"shop\",region=~\"e.*\"}", 30},
        {"{service_name=\"shop\",region=~\"e\"}", 0},
        {"{service_name=\"shop\",region!~\"e.*\"}", 15},
        {"{service_name=\"shop\",region=~\"eu|us\"}", 40},
        {"{service_name=\"shop\",region=~\"eu|\"}", 35},
        {"{service_name=\"shop\",region=~\".*\"}", 45},
        {"{service_name=\"shop\",region=~\".+\"}", 40},
        {"{service_name=\"shop\",region=\"us\",tier=\"x\"}", 0},
        {"{service_name=\"shop\",tier=\"x\",region=~\"eu\"}", 30},
        {"{service_name=\"shop\",__session_id__=\"1\"}", 0}, /* not kept */
        {"{service_name=\"shop\",nope=\"\"}", 45},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++) {
        Querier__V1__SelectMergeStacktracesResponse *a = merge(f, want[i].sel, 0);
        if (a->flamegraph->total != want[i].samples * MSEC)
            fail_msg("%s: %lld, want %lld", want[i].sel, (long long)a->flamegraph->total,
                     (long long)(want[i].samples * MSEC));
        querier__v1__select_merge_stacktraces_response__free_unpacked(a, NULL);
    }
    /* SelectSeries by region: eu, us, and the profiles without it */
    Querier__V1__SelectSeriesRequest ss = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    char *gb[] = {"region", "service_name"};
    struct buf r;
    ss.profile_typeid = TYPE, ss.label_selector = "{service_name=\"shop\"}";
    ss.start = (now_s - 1200) * 1000, ss.end = now_s * 1000, ss.step = 60;
    ss.group_by = gb, ss.n_group_by = 2;
    assert_int_equal(call_pb(f, "SelectSeries", &ss.base, &r), 200);
    Querier__V1__SelectSeriesResponse *sr =
        querier__v1__select_series_response__unpack(NULL, r.len, (uint8_t *)r.data);
    buf__free(&r);
    assert_non_null(sr);
    assert_int_equal(sr->n_series, 3);
    bool seen[3] = {false};
    for (size_t i = 0; i < sr->n_series; i++) {
        Types__V1__Series *s = sr->series[i];
        double sum = 0;
        for (size_t k = 0; k < s->n_points; k++)
            sum += s->points[k]->value;
        assert_string_equal(s->labels[0]->name, "service_name");
        if (s->n_labels == 1) {
            assert_true(sum == 5.0 * MSEC);
            seen[2] = true;
            continue;
        }
        assert_int_equal(s->n_labels, 2);
        assert_string_equal(s->labels[1]->name, "region");
        bool eu = strcmp(s->labels[1]->value, "eu") == 0;
        assert_true(sum == (eu ? 30.0 : 10.0) * MSEC);
        seen[eu ? 0 : 1] = true;
    }
    assert_true(seen[0] && seen[1] && seen[2]);
    querier__v1__select_series_response__free_unpacked(sr, NULL);
    call_json(f, "SelectSeries",
              "{\"profileTypeID\":\"" TYPE "\",\"step\":60,\"groupBy\":[\"tier\"]}", 200,
              "{\"name\":\"tier\",\"value\":\"x\"}");
    /* our API: label.KEY=VALUE, /labels' "labels", timeline group_by */
    expect(f, "GET", "/api/v1/profile?app=shop&from=now-20m&format=collapsed&label.region=eu",
           RAUTH, NULL, 0, 200, "main;a;b 30\n");
    expect(f, "GET", "/api/v1/profile?app=shop&from=now-20m&format=collapsed&label.region=us",
           RAUTH, NULL, 0, 200, "main;a;c 10\n");
    expect(f, "GET", "/api/v1/labels?app=shop&from=now-20m", RAUTH, NULL, 0, 200,
           "\"labels\":{\"region\":[\"eu\",\"us\"],\"tier\":[\"x\"]}");
    expect(f, "GET", "/api/v1/timeline?app=shop&from=now-20m&step=60s&group_by=region", RAUTH, NULL,
           0, 200, "\"group_by\":\"region\",\"values\":2,\"capped\":false");
    expect(f, "GET", "/api/v1/timeline?app=shop&from=now-20m&step=60s&group_by=region", RAUTH, NULL,
           0, 200, "{\"value\":\"eu\",\"share\":0.666");
    /* refused at ingest, saying why */
    snprintf(path, sizeof(path), "/ingest?name=shop{k=%0300d}", 7);
    expect(f, "POST", path, "Authorization: Bearer " KEY "\r\n", "a 1\n", 4, 400,
           "longer than 256 bytes");
    char many[512];
    int n = snprintf(many, sizeof(many), "/ingest?name=shop{");
    for (int i = 0; i < 17; i++)
        n += snprintf(many + n, sizeof(many) - n, "%sk%d=v", i ? "," : "", i);
    snprintf(many + n, sizeof(many) - n, "}");
    expect(f, "POST", many, "Authorization: Bearer " KEY "\r\n", "a 1\n", 4, 400,
           "more than 16 labels");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_profile_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flamegraph, setup, teardown),
        cmocka_unit_test_setup_teardown(test_labels_series, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_labels, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* server/ingest.c: request bodies built here (by the agent's pprof writer,
 * or by hand where no writer would make them) through ingest__profile into
 * a SQLite store in a temporary directory, and read back. Runs as any user. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../server/ingest.h"
#include "server_helpers.h"

#define T0 (1764763200ll * SEC)

static const struct ingest_limits LIM = {
    .max_memory = 64u << 20,
    .max_decompressed = 32u << 20,
    .max_ratio = 100,
    .max_label_bytes = 256,
    .max_samples = 1000,
    .max_stack_depth = 32,
    .max_frames = 100000,
};

static int ingest(struct store *st, const struct buf *b, const char *service,
                  const struct ingest_limits *lim, char *msg, size_t n)
{
    struct ingest_identity id = {service, NULL, {NULL}, 0};
    msg[0] = '\0';
    return ingest__profile(st, b->data ? b->data : "", b->len, &id, lim ? lim : &LIM, msg, n);
}

/* Profiles from the agent's writer, plain and gzipped, stored and merged:
 * identical samples within a profile become one stack, the same stack in
 * two profiles one stack of the merge, counts summed; the identity comes
 * from the labels (service, host, pid) unless the query string names it. */
static void test_good_profiles_read_back(void **state)
{
    char dir[256], msg[512];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    (void)state;

#define L "service", "svc", "host", "h1", "pid", "42", NULL
    const struct tstack stacks[] = {
        {{"leaf", "a", "main"}, 3, {L}},
        {{"leaf2", "b", "main"}, 2, {L}},
        {{"c", "main"}, 1, {L}},
        {{"leaf", "a", "main"}, 3, {L}}, /* the first again */
    };
#undef L
    struct buf plain, gz;
    buf__init(&plain, 1u << 20);
    buf__init(&gz, 1u << 20);
    tprofile(&plain, T0, stacks, 4, false);
    tprofile(&gz, T0 + 60 * SEC, stacks, 4, true);
    assert_int_equal(ingest(st, &plain, NULL, NULL, msg, sizeof(msg)), 202);
    assert_int_equal(ingest(st, &gz, NULL, NULL, msg, sizeof(msg)), 202);

    struct store_merged *m = merge_all(st, "svc");
    int64_t cpu;
    assert_int_equal(m->profiles, 2);
    assert_int_equal(m->nstacks, 3);
    assert_int_equal(folded_samples(m, "main;a;leaf", &cpu), 12);
    assert_int_equal(cpu, 12 * 10000000ll);
    assert_int_equal(folded_samples(m, "main;b;leaf2", NULL), 4);
    assert_int_equal(folded_samples(m, "main;c", NULL), 2);
    store_merged__free(m);

    /* the pid every sample names is the profile's */
    struct store_query q = {.app = "svc", .from_ns = 0, .to_ns = INT64_MAX, .pid = 42};
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->profiles, 2);
    store_merged__free(m);
    q.pid = 43;
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->profiles, 0);
    assert_int_equal(m->nstacks, 0);
    store_merged__free(m);

    /* ?service= wins over the label */
    assert_int_equal(ingest(st, &plain, "other", NULL, msg, sizeof(msg)), 202);
    struct store_app *apps = NULL;
    size_t napps = 0;
    assert_int_equal(store__applications(st, 0, INT64_MAX, &apps, &napps), 0);
    assert_int_equal(napps, 2);
    for (size_t i = 0; i < napps; i++) {
        assert_true(strcmp(apps[i].name, "svc") == 0 || strcmp(apps[i].name, "other") == 0);
        assert_int_equal(apps[i].nhosts, 1);
        assert_string_equal(apps[i].hosts[0], "h1");
        assert_int_equal(apps[i].cpu_ns, (strcmp(apps[i].name, "svc") == 0 ? 18 : 9) * 10000000ll);
    }
    store_apps__free(apps, napps);
    buf__free(&plain);
    buf__free(&gz);
    store__close(st);
    tmpdir__remove(dir);
}

/* A profile as a writer of the knobs below would make it, one location a
 * frame (function 1 "fn" at location 1 unless changed). */
struct knobs {
    int64_t time_ns, duration_ns;
    int ntypes, nvalues;                    /* sample types (samples, cpu); values a sample */
    int64_t samples, cpu;                   /* each sample's values */
    uint64_t loc_id;                        /* the samples' location */
    uint64_t fn_id;                         /* the location's function */
    int depth, nsamples;                    /* the location repeated depth times; samples */
    bool distinct;                          /* sample i i frames deeper: each a stack of its own */
    const char *service, *host, *container; /* labels; NULL: none */
    bool mapped; /* location 1 without lines, in mapping /usr/lib/libx.so */
};

static const struct knobs GOOD = {T0, 60 * SEC, 2,     2,     5,    50000000, 1,    1,
                                  1,  1,        false, "svc", NULL, NULL,     false};

static void kprofile(struct buf *b, const struct knobs *k)
{
    const char *strings[] = {"",
                             "samples",
                             "count",
                             "cpu",
                             "nanoseconds",
                             "fn",
                             "fn.c",
                             "service",
                             k->service ? k->service : "",
                             "host",
                             k->host ? k->host : "",
                             "container_id",
                             k->container ? k->container : "",
                             "/usr/lib/libx.so"};
    struct buf m, s;

    buf__init(b, 64u << 20);
    pb__int(b, 9, (uint64_t)k->time_ns);
    pb__int(b, 10, (uint64_t)k->duration_ns);
    for (int i = 0; i < k->ntypes; i++) {
        buf__init(&m, 1024);
        pb__int(&m, 1, i ? 3 : 1);
        pb__int(&m, 2, i ? 4 : 2);
        pb__msg(b, 1, &m);
    }
    for (int i = 0; i < k->nsamples; i++) {
        buf__init(&s, 1u << 20);
        for (int d = 0; d < k->depth + (k->distinct ? i : 0); d++)
            pb__int(&s, 1, k->loc_id);
        for (int v = 0; v < k->nvalues; v++)
            pb__int(&s, 2, (uint64_t)(v ? k->cpu : k->samples));
        const char *const *lab[] = {&k->service, &k->host, &k->container};
        for (int l = 0; l < 3; l++) {
            if (!*lab[l])
                continue;
            buf__init(&m, 1024);
            pb__int(&m, 1, 7 + 2 * l);
            pb__int(&m, 2, 8 + 2 * l);
            pb__msg(&s, 3, &m);
        }
        pb__msg(b, 2, &s);
    }
    if (k->mapped) {
        buf__init(&m, 1024);
        pb__int(&m, 1, 1);
        pb__int(&m, 2, 0x10000);
        pb__int(&m, 3, 0x20000);
        pb__int(&m, 4, 0x1000);
        pb__int(&m, 5, 13);
        pb__msg(b, 3, &m);
    }
    buf__init(&m, 1024);
    pb__int(&m, 1, 1);
    if (k->mapped) {
        pb__int(&m, 2, 1);
        pb__int(&m, 3, 0x10234);
    } else {
        buf__init(&s, 64);
        pb__int(&s, 1, k->fn_id);
        pb__msg(&m, 4, &s);
    }
    pb__msg(b, 4, &m);
    buf__init(&m, 64);
    pb__int(&m, 1, 1);
    pb__int(&m, 2, 5);
    pb__int(&m, 4, 6);
    pb__msg(b, 5, &m);
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
        pb__str(b, 6, strings[i]);
}

/* Ingests the knobs' profile: the status, and msg holding `why`. */
static void expect(struct store *st, const struct knobs *k, const struct ingest_limits *lim,
                   int status, const char *why)
{
    struct buf b;
    char msg[512];

    kprofile(&b, k);
    int got = ingest(st, &b, NULL, lim, msg, sizeof(msg));
    if (got != status || (why && !strstr(msg, why)))
        fail_msg("got %d '%s', want %d '%s'", got, msg, status, why ? why : "");
    buf__free(&b);
}

static void assert_nothing_stored(struct store *st)
{
    struct store_app *apps = NULL;
    size_t n = 99;
    assert_int_equal(store__applications(st, 0, INT64_MAX, &apps, &n), 0);
    assert_int_equal(n, 0);
    store_apps__free(apps, n);
}

/* The knobs' good profile goes in (in a store of its own: the bad cases
 * below are each one change from it), with its location without lines
 * named from its mapping's file, never a bare address. */
static void test_hand_built_good(void **state)
{
    char dir[256];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    (void)state;

    expect(st, &GOOD, NULL, 202, NULL);
    struct knobs k = GOOD;
    k.mapped = true;
    k.time_ns += 60 * SEC;
    expect(st, &k, NULL, 202, NULL);
    struct store_merged *m = merge_all(st, "svc");
    assert_int_equal(m->profiles, 2);
    assert_int_equal(folded_samples(m, "fn", NULL), 5);
    assert_int_equal(folded_samples(m, "libx.so+0x1234", NULL), 5);
    store_merged__free(m);
    store__close(st);
    tmpdir__remove(dir);
}

/* What a profile claims: refused with 400 and why, nothing stored. */
static void test_bad_claims(void **state)
{
    char dir[256];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    struct knobs k;
    (void)state;

#define BADK(field, value, why)                                                                    \
    k = GOOD;                                                                                      \
    k.field = value;                                                                               \
    expect(st, &k, NULL, 400, why)
    BADK(time_ns, -1, "time_nanos");
    BADK(time_ns, 5000000000ll * SEC, "not between 1970 and 2100");
    BADK(duration_ns, 2 * 86400 * SEC, "duration_nanos");
    BADK(duration_ns, -5, "duration_nanos");
    BADK(cpu, INT64_MAX / 2, "cores can use");
    BADK(samples, 1ll << 40, "one a microsecond");
    BADK(samples, -1, "negative value");
    BADK(cpu, -7, "negative value");
    BADK(nvalues, 1, "1 values for 2 sample types");
    BADK(ntypes, 0, "no sample_type");
    BADK(loc_id, 7, "location id 7 not defined");
    BADK(fn_id, 9, "function id 9 not defined");
#undef BADK
    /* totals past 64 bits: two samples of INT64_MAX/2 + 1 each */
    k = GOOD;
    k.nsamples = 2;
    k.ntypes = k.nvalues = 1;
    k.samples = INT64_MAX / 2 + 1;
    expect(st, &k, NULL, 400, "past 64 bits");

    /* bodies that are not whole: cut short, gzip that is not */
    struct buf b, c;
    char msg[512];
    kprofile(&b, &GOOD);
    for (size_t cut = 1; cut < b.len; cut += 7) {
        struct buf part = {b.data, cut, cut};
        int s = ingest(st, &part, NULL, NULL, msg, sizeof(msg));
        /* a cut that ends between fields is a smaller profile: then some
         * other rule refuses it, never a 5xx, never stored */
        if (s != 400)
            fail_msg("cut at %zu: %d %s", cut, s, msg);
    }
    buf__init(&c, 1u << 20);
    assert_int_equal(gz__compress(b.data, b.len, &c), 0);
    c.data[c.len / 2] ^= 0x55;
    c.len -= 4;
    assert_int_equal(ingest(st, &c, NULL, NULL, msg, sizeof(msg)), 400);
    assert_non_null(strstr(msg, "gzip"));
    buf__free(&b);
    buf__free(&c);
    assert_nothing_stored(st);
    store__close(st);
    tmpdir__remove(dir);
}

/* Past a limit: 413 and why, nothing stored. */
static void test_oversize(void **state)
{
    char dir[256], msg[512];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    struct knobs k;
    struct ingest_limits lim = LIM;
    (void)state;

    k = GOOD;
    k.nsamples = 1001;
    expect(st, &k, NULL, 413, "more than the limit of 1000");
    k = GOOD;
    k.depth = 33;
    expect(st, &k, NULL, 413, "deeper than 32 frames");
    k = GOOD;
    k.nsamples = 32; /* 32 stacks of 1 to 32 frames: 528 */
    k.distinct = true;
    lim.max_frames = 500;
    expect(st, &k, &lim, 413, "more than 500 frames in all distinct stacks");
    lim.max_frames = 528; /* just enough */
    k.service = "deep";
    expect(st, &k, &lim, 202, NULL);
    k.service = "svc";
    lim = LIM;
    lim.max_memory = 4096;
    expect(st, &k, &lim, 413, "bytes of memory a request may use");

    /* a gzip bomb: 8 MiB of one byte, past 100 times its size */
    struct buf zeros, bomb;
    buf__init(&zeros, 16u << 20);
    buf__init(&bomb, 16u << 20);
    assert_int_equal(buf__reserve(&zeros, 8u << 20), 0);
    memset(zeros.data, 0, 8u << 20);
    zeros.len = 8u << 20;
    assert_int_equal(gz__compress(zeros.data, zeros.len, &bomb), 0);
    assert_int_equal(ingest(st, &bomb, "svc", NULL, msg, sizeof(msg)), 413);
    assert_non_null(strstr(msg, "inflates past the limit"));
    buf__free(&zeros);
    buf__free(&bomb);
    struct store_merged *m = merge_all(st, "deep");
    assert_int_equal(m->nstacks, 32);
    store_merged__free(m);
    m = merge_all(st, "svc");
    assert_int_equal(m->profiles, 0);
    store_merged__free(m);
    store__close(st);
    tmpdir__remove(dir);
}

/* Who sent it: a service is required, and every identity label is short
 * UTF-8 without control characters, from the labels or the query string. */
static void test_bad_identity(void **state)
{
    char dir[256], msg[512], longhost[300];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    struct knobs k;
    (void)state;

    k = GOOD;
    k.service = NULL;
    expect(st, &k, NULL, 400, "no service");
    k.service = "";
    expect(st, &k, NULL, 400, "no service");
    k.service = "a\x01z";
    expect(st, &k, NULL, 400, "service");
    k.service = "bad\xff utf8";
    expect(st, &k, NULL, 400, "service");
    k = GOOD;
    k.host = "h\nforged log line";
    expect(st, &k, NULL, 400, "host");
    k = GOOD;
    k.container = "c\x1b[31m";
    expect(st, &k, NULL, 400, "container_id");
    memset(longhost, 'h', sizeof(longhost) - 1);
    longhost[sizeof(longhost) - 1] = '\0';
    k = GOOD;
    k.host = longhost;
    expect(st, &k, NULL, 400, "longer than 256 bytes");

    /* the query string's identity is checked the same way */
    struct buf b;
    kprofile(&b, &GOOD);
    struct ingest_identity id = {"svc", longhost, {NULL}, 0};
    assert_int_equal(ingest__profile(st, b.data, b.len, &id, &LIM, msg, sizeof(msg)), 400);
    assert_non_null(strstr(msg, "host"));
    id.host = "h1";
    id.identity[2] = "ns\x7f";
    assert_int_equal(ingest__profile(st, b.data, b.len, &id, &LIM, msg, sizeof(msg)), 400);
    assert_non_null(strstr(msg, "namespace"));
    buf__free(&b);
    assert_nothing_stored(st);
    store__close(st);
    tmpdir__remove(dir);
}

/* The off-CPU time of the stack "root;...;leaf" of m, 0 when it has none. */
static int64_t folded_off(const struct store_merged *m, const char *folded)
{
    for (size_t i = 0; i < m->nstacks; i++) {
        char s[512];
        size_t len = 0;
        for (uint32_t j = m->stacks[i].nframes; j-- > 0 && len < sizeof(s);)
            len += snprintf(s + len, sizeof(s) - len, "%s%s", len ? ";" : "",
                            m->functions[m->stacks[i].frames[j]].name);
        if (len < sizeof(s) && strcmp(s, folded) == 0)
            return m->stacks[i].off_cpu_ns;
    }
    return 0;
}

/* Off-CPU profiles as the agent writes them (OFFCPU_CONTRACT.md: a third
 * type off_cpu/nanoseconds, off-CPU samples [0, 0, ns]) and with the type
 * first: found by name, stored beside the CPU, merged by value; negative
 * or impossible off-CPU time refused with its reason. */
static void test_off_cpu(void **state)
{
    char dir[256], msg[512];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    (void)state;

#define L "service", "svc", "host", "h1", "pid", "42", NULL
    struct tstack stacks[] = {
        {{"leaf", "a", "main"}, 3, {L}, 0},
        {{"[off-CPU: lock]", "futex_wait", "a", "main"}, 0, {L}, 5 * SEC},
        {{"leaf2", "b", "main"}, 2, {L}, SEC},
    };
#undef L
    struct buf b;
    buf__init(&b, 1u << 20);
    tprofile_types(&b, T0, stacks, 3, true, TOFF_THIRD);
    assert_int_equal(ingest(st, &b, NULL, NULL, msg, sizeof(msg)), 202);
    buf__reset(&b);
    tprofile_types(&b, T0 + 60 * SEC, stacks, 3, false, TOFF_FIRST);
    assert_int_equal(ingest(st, &b, NULL, NULL, msg, sizeof(msg)), 202);
    buf__reset(&b);
    tprofile(&b, T0 + 120 * SEC, stacks, 3, false); /* CPU only, as before */
    assert_int_equal(ingest(st, &b, NULL, NULL, msg, sizeof(msg)), 202);

    struct store_merged *m = merge_all(st, "svc");
    int64_t cpu;
    assert_int_equal(m->nstacks, 2); /* the off-CPU stack is no CPU stack */
    assert_int_equal(folded_samples(m, "main;a;leaf", &cpu), 9);
    assert_int_equal(cpu, 9 * 10000000ll);
    assert_int_equal(folded_samples(m, "main;b;leaf2", NULL), 6);
    store_merged__free(m);
    struct store_query q = {.app = "svc", .from_ns = 0, .to_ns = INT64_MAX};
    q.value = STORE_VALUE_OFF_CPU;
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->profiles, 3);
    assert_int_equal(m->nstacks, 2);
    assert_true(folded_off(m, "main;a;futex_wait;[off-CPU: lock]") == 10 * SEC);
    assert_true(folded_off(m, "main;b;leaf2") == 2 * SEC);
    store_merged__free(m);

    /* refused, nothing stored */
    stacks[1].off_ns = -1;
    buf__reset(&b);
    tprofile_types(&b, T0 + 180 * SEC, stacks, 3, false, TOFF_THIRD);
    assert_int_equal(ingest(st, &b, NULL, NULL, msg, sizeof(msg)), 400);
    assert_non_null(strstr(msg, "negative value"));
    stacks[1].off_ns = INT64_MAX / 2; /* 4.6e18 ns in a minute: 77 million threads */
    buf__reset(&b);
    tprofile_types(&b, T0 + 180 * SEC, stacks, 3, false, TOFF_THIRD);
    assert_int_equal(ingest(st, &b, NULL, NULL, msg, sizeof(msg)), 400);
    assert_non_null(strstr(msg, "threads can wait"));
    stacks[1].off_ns = INT64_MAX;
    stacks[2].off_ns = INT64_MAX;
    buf__reset(&b);
    tprofile_types(&b, T0 + 180 * SEC, stacks, 3, false, TOFF_THIRD);
    assert_int_equal(ingest(st, &b, NULL, NULL, msg, sizeof(msg)), 400);
    assert_non_null(strstr(msg, "past 64 bits"));
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->profiles, 3);
    store_merged__free(m);
    buf__free(&b);
    store__close(st);
    tmpdir__remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_profiles_read_back),
        cmocka_unit_test(test_hand_built_good),
        cmocka_unit_test(test_bad_claims),
        cmocka_unit_test(test_oversize),
        cmocka_unit_test(test_bad_identity),
        cmocka_unit_test(test_off_cpu),
    };
    return cmocka_run_group_tests_name("ingest", tests, NULL, NULL);
}

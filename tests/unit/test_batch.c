/* batch: the many-profiles upload's framing, written and read back, and
 * every malformed or hostile body refused with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/batch.h"

/* What batch__append writes, batch__next reads back: queries and bytes
 * intact (a body may hold newlines and digits), in order. */
static void test_round_trip(void **state)
{
    static const char *const q[] = {"service=web%26x&pid=1", "service=a+b&host=h", ""};
    static const char *const d[] = {"BODY\n12\nx", "", "\n\n"};
    struct batch_reader r;
    struct batch_entry e;
    struct buf b;
    char why[256];

    (void)state;
    buf__init(&b, 1 << 20);
    assert_int_equal(batch__begin(&b), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(batch__append(&b, q[i], d[i], strlen(d[i])), 0);
    assert_true(batch__open(&r, b.data, b.len, why, sizeof(why)));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(batch__next(&r, &e, why, sizeof(why)), 1);
        assert_int_equal(e.query_len, strlen(q[i]));
        assert_memory_equal(e.query, q[i], e.query_len);
        assert_int_equal(e.len, strlen(d[i]));
        assert_memory_equal(e.data, d[i], e.len);
    }
    assert_int_equal(batch__next(&r, &e, why, sizeof(why)), 0);
    /* A query with a newline would break the framing: refused. */
    assert_int_equal(batch__append(&b, "a=1\nb=2", "x", 1), -EINVAL);
    buf__free(&b);
}

/* Values decoded as a query string's are; a bad escape, a NUL or a value
 * too long for the caller is an error, not a cut value. */
static void test_args(void **state)
{
    static const char qs[] = "service=web%26admin%3D1+x&pid=12&empty=&bare&bad=%4&nul=%00&svc=a";
    struct batch_entry e = {qs, strlen(qs), "", 0};
    char out[16];

    (void)state;
    assert_int_equal(batch__arg(&e, "service", out, sizeof(out)), 1);
    assert_string_equal(out, "web&admin=1 x");
    assert_int_equal(batch__arg(&e, "pid", out, sizeof(out)), 1);
    assert_string_equal(out, "12");
    assert_int_equal(batch__arg(&e, "empty", out, sizeof(out)), 1);
    assert_string_equal(out, "");
    assert_int_equal(batch__arg(&e, "bare", out, sizeof(out)), 1);
    assert_string_equal(out, "");
    assert_int_equal(batch__arg(&e, "host", out, sizeof(out)), 0);
    assert_int_equal(batch__arg(&e, "serv", out, sizeof(out)), 0); /* a prefix is not the key */
    assert_int_equal(batch__arg(&e, "bad", out, sizeof(out)), -1);
    assert_int_equal(batch__arg(&e, "nul", out, sizeof(out)), -1);
    assert_int_equal(batch__arg(&e, "service", out, 8), -1);
}

/* Cut, lying or hostile bodies: -1 with a reason, never a read past the
 * body (run under the sanitizers too). */
static void test_refused(void **state)
{
    static const struct {
        const char *body;
        int good; /* entries read before the error */
    } bad[] = {
        {"codexray-batch 1\nservice=a\n", 0},                       /* no length */
        {"codexray-batch 1\nservice=a\n5\nabc", 0},                 /* shorter than announced */
        {"codexray-batch 1\nservice=a\n3x\nabc", 0},                /* not a number */
        {"codexray-batch 1\nservice=a\n\nabc", 0},                  /* empty length */
        {"codexray-batch 1\nservice=a\n99999999999999999999\n", 0}, /* overflow */
        {"codexray-batch 1\nservice=a\n1\nxservice=b\n", 1},        /* second cut */
        {"codexray-batch 1\nservice=a", 0},                         /* query not ended */
    };
    struct batch_reader r;
    struct batch_entry e;
    char why[256];

    (void)state;
    assert_false(batch__open(&r, "codexray-batch 2\n", 17, why, sizeof(why)));
    assert_false(batch__open(&r, "", 0, why, sizeof(why)));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t len = strlen(bad[i].body);
        char *copy = malloc(len); /* exactly the body: a read past it is caught by ASan */
        memcpy(copy, bad[i].body, len);
        assert_true(batch__open(&r, copy, len, why, sizeof(why)));
        for (int k = 0; k < bad[i].good; k++)
            assert_int_equal(batch__next(&r, &e, why, sizeof(why)), 1);
        why[0] = '\0';
        assert_int_equal(batch__next(&r, &e, why, sizeof(why)), -1);
        assert_true(why[0] != '\0');
        free(copy);
    }
}

/* More than BATCH_MAX_PROFILES entries: refused at the first one past it. */
static void test_too_many(void **state)
{
    struct batch_reader r;
    struct batch_entry e;
    struct buf b;
    char why[256];
    size_t n = 0;
    int got;

    (void)state;
    buf__init(&b, 64 << 20);
    assert_int_equal(batch__begin(&b), 0);
    for (int i = 0; i <= BATCH_MAX_PROFILES; i++)
        assert_int_equal(batch__append(&b, "pid=1", "", 0), 0);
    assert_true(batch__open(&r, b.data, b.len, why, sizeof(why)));
    while ((got = batch__next(&r, &e, why, sizeof(why))) == 1)
        n++;
    assert_int_equal(got, -1);
    assert_int_equal(n, BATCH_MAX_PROFILES);
    assert_non_null(strstr(why, "more than"));
    buf__free(&b);
}

/* The answer's statuses: exactly as many as were sent, or an error. */
static void test_statuses(void **state)
{
    static const char ok[] =
        "{\"stored\":2,\"statuses\":[202, 400,202],\"errors\":[null,\"bad\",null]}";
    int st[4];

    (void)state;
    assert_int_equal(batch__statuses(ok, strlen(ok), st, 3), 0);
    assert_int_equal(st[0], 202);
    assert_int_equal(st[1], 400);
    assert_int_equal(st[2], 202);
    assert_int_equal(batch__statuses(ok, strlen(ok), st, 2), -1); /* another batch's */
    assert_int_equal(batch__statuses(ok, strlen(ok), st, 4), -1);
    assert_int_equal(batch__statuses(ok, 30, st, 3), -1); /* cut */
    assert_int_equal(batch__statuses("{\"status\":\"stored\"}", 19, st, 1), -1);
    assert_int_equal(batch__statuses("{\"statuses\":[202,]}", 19, st, 1), -1);
    assert_int_equal(batch__statuses("{\"statuses\":[]}", 15, st, 0), 0);
}

/* The reasons of an answer, by profile; null or another form is none. */
static void test_errors(void **state)
{
    static const char a[] = "{\"stored\":1,\"statuses\":[400,202,413],"
                            "\"errors\":[\"bad \\\"x\\\" here\",null, \"too big\"]}";
    char out[64], small[4];

    (void)state;
    assert_int_equal(batch__error(a, strlen(a), 0, out, sizeof(out)), 0);
    assert_string_equal(out, "bad \\\"x\\\" here");
    assert_int_equal(batch__error(a, strlen(a), 1, out, sizeof(out)), -1);
    assert_int_equal(batch__error(a, strlen(a), 2, out, sizeof(out)), 0);
    assert_string_equal(out, "too big");
    assert_int_equal(batch__error(a, strlen(a), 3, out, sizeof(out)), -1);
    assert_int_equal(batch__error(a, strlen(a), 0, small, sizeof(small)), 0);
    assert_string_equal(small, "bad");
    assert_int_equal(batch__error(a, 60, 0, out, sizeof(out)), -1); /* cut */
    assert_int_equal(batch__error("{\"errors\":[7]}", 14, 0, out, sizeof(out)), -1);
}

/* Reads the batch of the given entry sizes in b and returns where
 * batch__halve cuts it, from entry `from` on (n entries). */
static size_t halve_of(const size_t *len, size_t count, size_t from, size_t n)
{
    static char data[4096];
    struct batch_reader r;
    struct batch_entry e;
    struct buf b;
    char why[256];
    size_t k;

    buf__init(&b, 1 << 20);
    assert_int_equal(batch__begin(&b), 0);
    for (size_t i = 0; i < count; i++)
        assert_int_equal(batch__append(&b, "pid=1", data, len[i]), 0);
    assert_true(batch__open(&r, b.data, b.len, why, sizeof(why)));
    for (size_t i = 0; i < from; i++)
        assert_int_equal(batch__next(&r, &e, why, sizeof(why)), 1);
    struct batch_reader before = r;
    k = batch__halve(&r, n);
    assert_memory_equal(&before, &r, sizeof(r)); /* not moved */
    buf__free(&b);
    return k;
}

/* A batch is cut into halves of about equal bytes, not equal counts: a
 * window's many small profiles first and few large ones last (as the
 * bench and a node send them) would leave nearly all the decoding to one
 * half. Always 1..n-1 entries a half. */
static void test_halve(void **state)
{
    /* 150 small then 50 large: the large ones split between the halves. */
    size_t mixed[200];
    for (size_t i = 0; i < 200; i++)
        mixed[i] = i < 150 ? 50 : 1000;
    static const size_t even[] = {100, 100, 100, 100};
    static const size_t big_first[] = {4000, 1, 1, 1};
    static const size_t big_last[] = {1, 1, 1, 4000};
    static const size_t empty[] = {0, 0, 0};

    (void)state;
    /* 150 * 50 + 50 * 1000 = 57,500 bytes: 150 small and 22 large reach
     * half (29,500; 28,500 with 21), where a cut by count takes 100. */
    assert_int_equal(halve_of(mixed, 200, 0, 200), 172);
    assert_int_equal(halve_of(even, 4, 0, 4), 2);
    assert_int_equal(halve_of(big_first, 4, 0, 4), 1);
    assert_int_equal(halve_of(big_last, 4, 0, 4), 3);
    assert_int_equal(halve_of(empty, 3, 0, 3), 1);
    /* From the reader's position, over its next n only. */
    assert_int_equal(halve_of(big_last, 4, 1, 2), 1);
    assert_int_equal(halve_of(even, 4, 0, 1), 1);
    /* Fewer entries than n (a cut batch): counts, as before. */
    assert_int_equal(halve_of(even, 4, 0, 6), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip), cmocka_unit_test(test_args),
        cmocka_unit_test(test_refused),    cmocka_unit_test(test_too_many),
        cmocka_unit_test(test_statuses),   cmocka_unit_test(test_errors),
        cmocka_unit_test(test_halve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

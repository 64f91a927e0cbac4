/* ch_shard: ClickHouse's cityHash64 and Distributed placement computed in
 * the server, checked against values ClickHouse 18.16 computed (the
 * vectors below: `SELECT cityHash64(...)` on the test cluster's node), and
 * the split of an INSERT's RowBinary rows by shard, hostile rows refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../server/ch_shard.h"
#include "../../server/ch_sql.h"

/* The test string of length l, as the vectors were made:
 * chr(97 + (i * 7 + l) % 26) for i in 0..l. */
static void text(char *s, size_t l)
{
    for (size_t i = 0; i < l; i++)
        s[i] = (char)(97 + (i * 7 + l) % 26);
}

static const struct {
    size_t len;
    uint64_t hash;
} strings[] = {
#include "ch_shard_vectors.h"
};

static void test_city64_as_clickhouse(void **state)
{
    (void)state;
    char s[400] = {0};
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
        text(s, strings[i].len);
        uint64_t got = ch_shard__city64(s, strings[i].len);
        if (got != strings[i].hash)
            fail_msg("length %zu: %llu, ClickHouse %llu", strings[i].len, (unsigned long long)got,
                     (unsigned long long)strings[i].hash);
    }
}

/* cityHash64(app, host, toInt64(pid), toInt64(time_ns)) as ClickHouse. */
static uint64_t key4(const char *app, const char *host, int64_t pid, int64_t t)
{
    uint64_t h = ch_shard__city64(app, strlen(app));
    h = ch_shard__combine(h, ch_shard__city64(host, strlen(host)));
    h = ch_shard__combine(h, ch_shard__int((uint64_t)pid));
    return ch_shard__combine(h, ch_shard__int((uint64_t)t));
}

static void test_psamples_key_as_clickhouse(void **state)
{
    (void)state;
    char a40[40], h70[70];
    text(a40, 40);
    text(h70, 70);
    char a[41], h[71];
    memcpy(a, a40, 40);
    a[40] = 0;
    memcpy(h, h70, 70);
    h[70] = 0;
#include "ch_shard_keys.h"
}

static const uint32_t two[] = {0, 1};

/* A functions row: day, key_a, key_b, name, file. */
static void fn_row(struct buf *b, uint64_t key_a, const char *name)
{
    assert_int_equal(ch_rb__u64(b, 19000), 0);
    assert_int_equal(ch_rb__u64(b, key_a), 0);
    assert_int_equal(ch_rb__u64(b, ~key_a), 0);
    assert_int_equal(ch_rb__str(b, name, strlen(name)), 0);
    assert_int_equal(ch_rb__str(b, "f.c", 3), 0);
}

static void test_split_by_key_and_weight(void **state)
{
    (void)state;
    struct buf rows, want[2], out[2];
    buf__init(&rows, 1 << 20);
    for (int i = 0; i < 2; i++) {
        buf__init(&want[i], 1 << 20);
        buf__init(&out[i], 1 << 20);
    }
    /* Weights 1 and 1: key_a % 2. */
    for (uint64_t k = 0; k < 10; k++) {
        fn_row(&rows, k * 1000003, k % 3 ? "x" : "a longer name");
        fn_row(&want[(k * 1000003) % 2], k * 1000003, k % 3 ? "x" : "a longer name");
    }
    assert_int_equal(ch_shard__split(CH_KEY_FUNCTIONS, rows.data, rows.len, two, 2, out, 2), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(out[i].len, want[i].len);
        assert_memory_equal(out[i].data, want[i].data, want[i].len);
    }
    /* Weights 2 and 1: slots 0, 0, 1 (ClickHouse's slot_to_shard). */
    static const uint32_t w21[] = {0, 0, 1};
    for (int i = 0; i < 2; i++) {
        buf__reset(&want[i]);
        buf__reset(&out[i]);
    }
    for (uint64_t k = 0; k < 10; k++)
        fn_row(&want[k % 3 == 2], k, "n");
    buf__reset(&rows);
    for (uint64_t k = 0; k < 10; k++)
        fn_row(&rows, k, "n");
    assert_int_equal(ch_shard__split(CH_KEY_FUNCTIONS, rows.data, rows.len, w21, 3, out, 2), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(out[i].len, want[i].len);
        assert_memory_equal(out[i].data, want[i].data, want[i].len);
    }
    buf__free(&rows);
    for (int i = 0; i < 2; i++) {
        buf__free(&want[i]);
        buf__free(&out[i]);
    }
}

/* A psamples row: app, time_ns, host, pid, labels, labelset, 5 arrays of n. */
static void ps_row(struct buf *b, const char *app, const char *host, int64_t pid, int64_t t,
                   uint64_t n)
{
    assert_int_equal(ch_rb__str(b, app, strlen(app)), 0);
    assert_int_equal(ch_rb__u64(b, (uint64_t)t), 0);
    assert_int_equal(ch_rb__str(b, host, strlen(host)), 0);
    assert_int_equal(ch_rb__u64(b, (uint64_t)pid), 0);
    assert_int_equal(ch_rb__str(b, "k=v", 3), 0);
    assert_int_equal(ch_rb__str(b, "", 0), 0);
    for (int a = 0; a < 5; a++) {
        assert_int_equal(ch_rb__varint(b, n), 0);
        for (uint64_t i = 0; i < n; i++)
            assert_int_equal(ch_rb__u64(b, i * 31 + (uint64_t)a), 0);
    }
}

static void test_split_psamples_and_profiles(void **state)
{
    (void)state;
    struct buf rows, want[2], out[2];
    buf__init(&rows, 1 << 22);
    for (int i = 0; i < 2; i++) {
        buf__init(&want[i], 1 << 22);
        buf__init(&out[i], 1 << 22);
    }
    int per[2] = {0, 0};
    for (int64_t p = 0; p < 40; p++) {
        char app[32];
        snprintf(app, sizeof(app), "app%d\n'\\", (int)(p % 5));
        int64_t t = 1700000000000000000ll + p * 60000000000ll;
        ps_row(&rows, app, "host-1", 1000 + p, t, (uint64_t)(p * 7 % 50));
        int s = (int)(key4(app, "host-1", 1000 + p, t) % 2);
        ps_row(&want[s], app, "host-1", 1000 + p, t, (uint64_t)(p * 7 % 50));
        per[s]++;
    }
    /* Both shards take rows (else the test says little). */
    assert_true(per[0] > 0 && per[1] > 0);
    assert_int_equal(ch_shard__split(CH_KEY_PSAMPLES, rows.data, rows.len, two, 2, out, 2), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(out[i].len, want[i].len);
        assert_memory_equal(out[i].data, want[i].data, want[i].len);
    }
    /* profiles: app, time_ns, host, pid, labels, 6 Int64; by cityHash64(app). */
    buf__reset(&rows);
    for (int i = 0; i < 2; i++) {
        buf__reset(&want[i]);
        buf__reset(&out[i]);
    }
    for (int a = 0; a < 20; a++) {
        char app[16];
        snprintf(app, sizeof(app), "svc-%d", a);
        struct buf *dst[2] = {&rows, &want[ch_shard__city64(app, strlen(app)) % 2]};
        for (int d = 0; d < 2; d++) {
            assert_int_equal(ch_rb__str(dst[d], app, strlen(app)), 0);
            assert_int_equal(ch_rb__u64(dst[d], 5), 0);
            assert_int_equal(ch_rb__str(dst[d], "h", 1), 0);
            assert_int_equal(ch_rb__u64(dst[d], 7), 0);
            assert_int_equal(ch_rb__str(dst[d], "", 0), 0);
            for (int k = 0; k < 6; k++)
                assert_int_equal(ch_rb__u64(dst[d], (uint64_t)k), 0);
        }
    }
    assert_int_equal(ch_shard__split(CH_KEY_PROFILES, rows.data, rows.len, two, 2, out, 2), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(out[i].len, want[i].len);
        assert_memory_equal(out[i].data, want[i].data, want[i].len);
    }
    buf__free(&rows);
    for (int i = 0; i < 2; i++) {
        buf__free(&want[i]);
        buf__free(&out[i]);
    }
}

/* Rows that do not parse are refused whole: nothing reaches a shard. */
static void test_split_refuses_bad_rows(void **state)
{
    (void)state;
    struct buf rows, out[2];
    buf__init(&rows, 1 << 20);
    for (int i = 0; i < 2; i++)
        buf__init(&out[i], 1 << 20);
    /* No rows (an empty buffer's NULL): nothing, no error. */
    assert_int_equal(ch_shard__split(CH_KEY_PSAMPLES, rows.data, rows.len, two, 2, out, 2), 0);
    assert_int_equal(out[0].len + out[1].len, 0);
    for (int64_t p = 0; p < 4; p++)
        ps_row(&rows, "a", "h", p, p, 3);
    /* Cut anywhere inside the last row. */
    for (size_t cut = 1; cut < 60; cut++) {
        assert_int_equal(
            ch_shard__split(CH_KEY_PSAMPLES, rows.data, rows.len - cut, two, 2, out, 2), -EINVAL);
        assert_int_equal(out[0].len + out[1].len, 0);
    }
    /* An array claiming more elements than there are bytes. */
    struct buf bad;
    buf__init(&bad, 1 << 10);
    assert_int_equal(ch_rb__str(&bad, "a", 1), 0);
    assert_int_equal(ch_rb__u64(&bad, 1), 0);
    assert_int_equal(ch_rb__str(&bad, "h", 1), 0);
    assert_int_equal(ch_rb__u64(&bad, 1), 0);
    assert_int_equal(ch_rb__str(&bad, "", 0), 0);
    assert_int_equal(ch_rb__str(&bad, "", 0), 0);
    assert_int_equal(ch_rb__varint(&bad, UINT64_MAX / 4), 0);
    assert_int_equal(ch_shard__split(CH_KEY_PSAMPLES, bad.data, bad.len, two, 2, out, 2), -EINVAL);
    /* A string length past the end, and a varint of 11 bytes. */
    buf__reset(&bad);
    assert_int_equal(ch_rb__varint(&bad, 1000), 0);
    assert_int_equal(ch_shard__split(CH_KEY_PROFILES, bad.data, bad.len, two, 2, out, 2), -EINVAL);
    buf__reset(&bad);
    for (int i = 0; i < 11; i++)
        assert_int_equal(buf__append(&bad, "\xff", 1), 0);
    assert_int_equal(ch_shard__split(CH_KEY_FUNCTIONS, bad.data, bad.len, two, 2, out, 2), -EINVAL);
    /* A slot naming a shard that is not there. */
    static const uint32_t wrong[] = {0, 5};
    buf__reset(&bad);
    fn_row(&bad, 1, "n");
    assert_int_equal(ch_shard__split(CH_KEY_FUNCTIONS, bad.data, bad.len, wrong, 2, out, 2),
                     -EINVAL);
    assert_int_equal(out[0].len + out[1].len, 0);
    buf__free(&bad);
    buf__free(&rows);
    for (int i = 0; i < 2; i++)
        buf__free(&out[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_city64_as_clickhouse),
        cmocka_unit_test(test_psamples_key_as_clickhouse),
        cmocka_unit_test(test_split_by_key_and_weight),
        cmocka_unit_test(test_split_psamples_and_profiles),
        cmocka_unit_test(test_split_refuses_bad_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

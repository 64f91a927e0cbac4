#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/json.h"

/* json__put_i64 against printf's "%lld": the same text, the length
 * returned, and nothing stored past it. */
static void check_i64(int64_t v)
{
    char want[32], got[JSON_I64_ROOM + 8];
    int n = snprintf(want, sizeof(want), "%lld", (long long)v);

    memset(got, 0x7f, sizeof(got));
    int len = json__put_i64(got, v);
    if (len != n || memcmp(got, want, n) != 0) {
        got[len > 0 && len < JSON_I64_ROOM ? len : 0] = '\0';
        fail_msg("%lld written as \"%s\" (%d bytes)", (long long)v, got, len);
    }
    assert_true(len <= JSON_I64_ROOM);
    for (size_t i = len; i < sizeof(got); i++)
        assert_int_equal(got[i], 0x7f);
}

/* Every number below 2,000,000 and its negative; each four-digit group's
 * every value in the low and the high eight digits. */
static void test_i64_small_exhaustive(void **state)
{
    (void)state;
    for (int64_t v = 0; v < 2000000; v++) {
        check_i64(v);
        check_i64(-v);
    }
    for (int64_t q = 0; q < 10000; q++) {
        check_i64(q * 10000 + (q * 7919) % 10000);
        check_i64(q * 10000 + 9999 - q);
        check_i64((q * 10000 + q) * 100000000 + 99999999 - q * 10000);
    }
}

/* Each power of ten and its neighbours (each digit count's first and last
 * number), the ends of int64_t, and many random numbers of every length. */
static void test_i64_boundaries_random(void **state)
{
    (void)state;
    uint64_t p = 1;
    for (int k = 0; k <= 19; k++, p *= 10) {
        for (int64_t d = -2; d <= 2; d++) {
            uint64_t u = p + (uint64_t)d;
            if (u > INT64_MAX)
                continue;
            check_i64((int64_t)u);
            check_i64(-(int64_t)u);
        }
    }
    check_i64(INT64_MAX);
    check_i64(INT64_MIN);
    check_i64(INT64_MIN + 1);
    srand(37);
    for (int i = 0; i < 2000000; i++) {
        uint64_t u = (uint64_t)rand() << 62 ^ (uint64_t)rand() << 31 ^ (uint64_t)rand();
        u >>= rand() % 64; /* every bit length */
        check_i64((int64_t)u);
    }
}

/* json__i64 appends the same text into a buffer. */
static void test_i64_buf(void **state)
{
    (void)state;
    struct buf b;
    buf__init(&b, 1 << 20);
    assert_int_equal(json__i64(&b, -1234567890123456789ll), 0);
    assert_int_equal(json__raw(&b, ","), 0);
    assert_int_equal(json__i64(&b, 0), 0);
    assert_string_equal(b.data, "-1234567890123456789,0");
    assert_int_equal(b.len, 22);
    buf__free(&b);
}

/* Hostile names: quotes, backslashes and control characters escaped,
 * invalid UTF-8 (a lone continuation byte, a cut sequence, an overlong
 * form, a surrogate, past U+10FFFF) each byte U+FFFD, valid UTF-8 kept. */
static void test_str_hostile(void **state)
{
    (void)state;
    struct buf b;
    buf__init(&b, 1 << 20);
    const char in[] = "a\"b\\c\n\x01\x1f\x7f"
                      "\x80"
                      "\xc3"
                      "\xc0\xaf"
                      "\xed\xa0\x80"
                      "\xf4\x90\x80\x80"
                      "\xc3\xa9\xe2\x82\xac\xf0\x9f\x94\xa5";
    assert_int_equal(json__strn(&b, in, sizeof(in) - 1), 0);
    const char want[] = "\"a\\\"b\\\\c\\u000a\\u0001\\u001f\x7f"
                        "\xef\xbf\xbd"
                        "\xef\xbf\xbd"
                        "\xef\xbf\xbd\xef\xbf\xbd"
                        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                        "\xc3\xa9\xe2\x82\xac\xf0\x9f\x94\xa5\"";
    assert_string_equal(b.data, want);
    /* A NUL inside a counted name is a control character too. */
    buf__reset(&b);
    assert_int_equal(json__strn(&b, "x\0y", 3), 0);
    assert_string_equal(b.data, "\"x\\u0000y\"");
    /* NULL is the empty string. */
    buf__reset(&b);
    assert_int_equal(json__str(&b, NULL), 0);
    assert_string_equal(b.data, "\"\"");
    buf__free(&b);
}

/* A name past the buffer's cap: an error, nothing past the cap. */
static void test_str_huge(void **state)
{
    (void)state;
    size_t n = 1 << 20;
    char *name = malloc(n + 1);
    assert_non_null(name);
    memset(name, '"', n); /* each doubles when escaped */
    name[n] = '\0';
    struct buf b;
    buf__init(&b, n);
    assert_int_not_equal(json__str(&b, name), 0);
    assert_true(b.len <= n);
    buf__free(&b);
    buf__init(&b, 4 * n);
    assert_int_equal(json__str(&b, name), 0);
    assert_int_equal(b.len, 2 * n + 2);
    for (size_t i = 1; i + 1 < b.len; i += 2)
        assert_true(b.data[i] == '\\' && b.data[i + 1] == '"');
    buf__free(&b);
    free(name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_i64_small_exhaustive),
        cmocka_unit_test(test_i64_boundaries_random),
        cmocka_unit_test(test_i64_buf),
        cmocka_unit_test(test_str_hostile),
        cmocka_unit_test(test_str_huge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

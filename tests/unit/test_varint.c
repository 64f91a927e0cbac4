#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "../../common/varint.h"

/* Every length from 1 to 10 bytes, written and read back, the reader
 * stopping exactly at the varint's end (a byte after it is not read). */
static void test_round_trip(void **state)
{
    (void)state;
    const uint64_t vals[] = {
        0,          1,          0x7f,       0x80,       0x3fff,     0x4000,
        0x1fffff,   0x200000,   UINT32_MAX, 1ull << 35, 1ull << 42, 1ull << 49,
        1ull << 56, 1ull << 63, UINT64_MAX, 300,        123456789,  0x0123456789abcdefull};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        uint8_t buf[VARINT_MAX_BYTES + 1];
        memset(buf, 0xff, sizeof(buf));
        uint8_t *e = varint__write(buf, vals[i]);
        size_t n = e - buf, want = 1;
        for (uint64_t v = vals[i]; v >= 0x80; v >>= 7)
            want++;
        assert_int_equal(n, want);
        assert_true(n <= VARINT_MAX_BYTES);
        const uint8_t *p = buf;
        uint64_t out = 0;
        /* the byte after it (0xff, a continuation) must not be taken */
        assert_true(varint__read(&p, buf + sizeof(buf), &out));
        assert_int_equal(out, vals[i]);
        assert_ptr_equal(p, e);
        out = 0;
        assert_ptr_equal(varint__get(buf, e, &out), e);
        assert_int_equal(out, vals[i]);
    }
}

/* A varint cut short: false, *pp and *out untouched, for every cut. */
static void test_truncated(void **state)
{
    (void)state;
    uint8_t buf[VARINT_MAX_BYTES];
    uint8_t *e = varint__write(buf, UINT64_MAX);
    assert_int_equal(e - buf, 10);
    for (size_t cut = 0; cut < 10; cut++) {
        const uint8_t *p = buf;
        uint64_t out = 42;
        assert_false(varint__read(&p, buf + cut, &out));
        assert_ptr_equal(p, buf);
        assert_int_equal(out, 42);
        assert_null(varint__get(buf, buf + cut, &out));
    }
    /* two bytes, the second still saying "more", the end after it */
    const uint8_t two[] = {0x80, 0x80};
    const uint8_t *p = two;
    uint64_t out;
    assert_false(varint__read(&p, two + 2, &out));
}

/* Overlong: 11 bytes with the top bit set in the first ten is refused,
 * whatever follows; ten bytes are the most, the tenth's bits past 64
 * dropped as protobuf does; redundant zero groups within ten are fine. */
static void test_overlong(void **state)
{
    (void)state;
    uint8_t buf[16];
    memset(buf, 0x80, sizeof(buf));
    buf[10] = 0x01;
    const uint8_t *p = buf;
    uint64_t out = 7;
    assert_false(varint__read(&p, buf + sizeof(buf), &out));
    assert_ptr_equal(p, buf);
    assert_int_equal(out, 7);
    assert_null(varint__get(buf, buf + sizeof(buf), &out));

    memset(buf, 0xff, sizeof(buf));
    buf[9] = 0x7f; /* 10 bytes: 63 bits of ones, then 0x7f at bit 63 */
    p = buf;
    assert_true(varint__read(&p, buf + sizeof(buf), &out));
    assert_int_equal(out, UINT64_MAX);
    assert_ptr_equal(p, buf + 10);

    const uint8_t padded[] = {0x81, 0x80, 0x80, 0x00}; /* 1, in four bytes */
    p = padded;
    assert_true(varint__read(&p, padded + sizeof(padded), &out));
    assert_int_equal(out, 1);
    assert_ptr_equal(p, padded + 4);
}

/* Nothing to read: false, the empty range never dereferenced. */
static void test_empty(void **state)
{
    (void)state;
    const uint8_t b[1] = {0};
    const uint8_t *p = b;
    uint64_t out = 9;
    assert_false(varint__read(&p, b, &out));
    assert_int_equal(out, 9);
    assert_null(varint__get(b, b, &out));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_overlong),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

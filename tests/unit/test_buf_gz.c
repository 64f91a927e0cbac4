#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/buf.h"
#include "../../common/gz.h"

static void test_buf_cap(void **state)
{
    (void)state;
    struct buf b;

    buf__init(&b, 10);
    assert_int_equal(buf__append(&b, "12345", 5), 0);
    assert_int_equal(buf__append(&b, "67890", 5), 0);
    assert_int_equal(buf__append(&b, "x", 1), -E2BIG);
    assert_int_equal(b.len, 10);
    assert_string_equal(b.data, "1234567890");
    buf__free(&b);
    buf__free(NULL);
}

static void test_read_file_capped(void **state)
{
    (void)state;
    char path[] = "/tmp/cx-test-XXXXXX";
    int fd = mkstemp(path);
    struct buf b;

    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello world", 11), 11);
    close(fd);
    buf__init(&b, 5);
    assert_int_equal(buf__read_file(&b, AT_FDCWD, path), -E2BIG);
    assert_int_equal(b.len, 5);
    buf__free(&b);
    buf__init(&b, 100);
    assert_int_equal(buf__read_file(&b, AT_FDCWD, path), 0);
    assert_string_equal(b.data, "hello world");
    buf__free(&b);
    unlink(path);
    buf__init(&b, 100);
    assert_int_equal(buf__read_file(&b, AT_FDCWD, path), -ENOENT);
    buf__free(&b);
}

static void test_gzip_round_trip(void **state)
{
    (void)state;
    struct buf z, out;
    char data[100000];

    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = "abcdefgh"[i % 8] + (i % 1000 == 0);
    buf__init(&z, 1 << 20);
    buf__init(&out, 1 << 20);
    assert_int_equal(gz__compress(data, sizeof(data), &z), 0);
    assert_true(gz__is_gzip(z.data, z.len));
    assert_true(z.len < sizeof(data) / 10);
    assert_int_equal(gz__decompress(z.data, z.len, &out, 0), 0);
    assert_int_equal(out.len, sizeof(data));
    assert_memory_equal(out.data, data, sizeof(data));

    /* Truncated: refused, not a partial success. */
    buf__reset(&out);
    assert_int_equal(gz__decompress(z.data, z.len / 2, &out, 0), -EBADMSG);
    /* Not gzip at all. */
    buf__reset(&out);
    assert_int_equal(gz__decompress("not gzip data", 13, &out, 0), -EBADMSG);
    buf__free(&z);
    buf__free(&out);
}

/* RFC 1952 members back to back are one stream (the first, bigger than
 * the last member's ISIZE hint, makes the output grow); anything else after
 * the last member is refused; so is a member whose ISIZE (its last 4
 * bytes) lies, either way. */
static void test_gzip_members_and_lies(void **state)
{
    (void)state;
    struct buf z, out;
    char a[120000], b[5000];

    for (size_t i = 0; i < sizeof(a); i++)
        a[i] = (char)(i * 7 % 251);
    for (size_t i = 0; i < sizeof(b); i++)
        b[i] = (char)(i * 13 % 241);
    buf__init(&z, 1 << 20);
    buf__init(&out, 1 << 20);
    assert_int_equal(gz__compress(a, sizeof(a), &z), 0);
    size_t first = z.len;
    assert_int_equal(gz__compress(b, sizeof(b), &z), 0);
    assert_int_equal(gz__decompress(z.data, z.len, &out, 0), 0);
    assert_int_equal(out.len, sizeof(a) + sizeof(b));
    assert_memory_equal(out.data, a, sizeof(a));
    assert_memory_equal(out.data + sizeof(a), b, sizeof(b));

    /* Trailing bytes that are not a member. */
    buf__reset(&out);
    assert_int_equal(buf__append(&z, "junk-after-the-end", 18), 0);
    assert_int_equal(gz__decompress(z.data, z.len, &out, 0), -EBADMSG);
    assert_int_equal(out.len, 0);

    /* ISIZE says 16 bytes. */
    buf__reset(&out);
    memcpy(z.data + first - 4, "\x10\0\0\0", 4);
    assert_int_equal(gz__decompress(z.data, first, &out, 0), -EBADMSG);
    /* ISIZE says 4 GiB - 1: the guess is held to the cap, then refused. */
    buf__reset(&z);
    assert_int_equal(gz__compress(a, sizeof(a), &z), 0);
    buf__reset(&out);
    memcpy(z.data + z.len - 4, "\xff\xff\xff\xff", 4);
    assert_int_equal(gz__decompress(z.data, z.len, &out, 0), -EBADMSG);
    assert_int_equal(out.len, 0);
    buf__free(&z);
    buf__free(&out);
}

static void test_gzip_bomb_is_cut(void **state)
{
    (void)state;
    struct buf z, out;
    char *zeros = calloc(1, 64 << 20);

    assert_non_null(zeros);
    buf__init(&z, 1 << 20);
    assert_int_equal(gz__compress(zeros, 64 << 20, &z), 0);
    free(zeros);
    /* 64 MiB of zeros packs ~1000:1; a ratio limit of 100 stops it early. */
    buf__init(&out, 256 << 20);
    assert_int_equal(gz__decompress(z.data, z.len, &out, 100), -E2BIG);
    assert_true(out.len <= z.len * 100 + 65536);
    buf__free(&out);
    /* And a cap on the output does too. */
    buf__init(&out, 1 << 20);
    assert_int_equal(gz__decompress(z.data, z.len, &out, 0), -E2BIG);
    assert_true(out.len <= 1 << 20);
    buf__free(&out);
    buf__free(&z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_cap),          cmocka_unit_test(test_read_file_capped),
        cmocka_unit_test(test_gzip_round_trip),  cmocka_unit_test(test_gzip_members_and_lies),
        cmocka_unit_test(test_gzip_bomb_is_cut),
    };
    return cmocka_run_group_tests_name("buf_gz", tests, NULL, NULL);
}

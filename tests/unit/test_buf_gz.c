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
#include "../../common/zst.h"
#include <zstd.h>

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
    /* Reused with a lower cap than its room (the process table's scratch
     * buffer): the cap still holds, and a file of exactly the cap fits. */
    buf__reset(&b);
    b.max = 5;
    assert_int_equal(buf__read_file(&b, AT_FDCWD, path), -E2BIG);
    assert_string_equal(b.data, "hello");
    buf__reset(&b);
    b.max = 11;
    assert_int_equal(buf__read_file(&b, AT_FDCWD, path), 0);
    assert_string_equal(b.data, "hello world");
    buf__free(&b);
    /* A cap of 0: nothing read, still a valid empty string. */
    buf__init(&b, 0);
    assert_int_equal(buf__read_file(&b, AT_FDCWD, path), -E2BIG);
    assert_non_null(b.data);
    assert_string_equal(b.data, "");
    buf__free(&b);
    /* Bigger than one read's first ask (4 KiB): read whole. */
    static char big[300000];
    memset(big, 'x', sizeof(big));
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, big, sizeof(big)), (ssize_t)sizeof(big));
    close(fd);
    buf__init(&b, sizeof(big));
    assert_int_equal(buf__read_file(&b, AT_FDCWD, path), 0);
    assert_int_equal(b.len, sizeof(big));
    assert_memory_equal(b.data, big, sizeof(big));
    buf__reset(&b);
    b.max = sizeof(big) - 1;
    assert_int_equal(buf__read_file(&b, AT_FDCWD, path), -E2BIG);
    assert_int_equal(b.len, sizeof(big) - 1);
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

static void test_zstd_round_trip_and_frames(void **state)
{
    (void)state;
    struct zst_compressor *c = zst_compressor__new(3);
    struct buf z, out;
    char data[100000];

    assert_non_null(c);
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = "profile"[i % 7] + (i / 1000) % 3;
    buf__init(&z, 1 << 20);
    assert_int_equal(zst_compressor__compress(c, data, sizeof(data), &z), 0);
    assert_true(zst__is_zstd(z.data, z.len));
    assert_false(gz__is_gzip(z.data, z.len));
    buf__init(&out, 1 << 20);
    assert_int_equal(zst__decompress(z.data, z.len, &out, 0), 0);
    assert_int_equal(out.len, sizeof(data));
    assert_memory_equal(out.data, data, sizeof(data));
    /* Two frames back to back are one stream, as zstd defines it. */
    size_t one = z.len;
    assert_int_equal(zst_compressor__compress(c, "tail", 4, &z), 0);
    buf__reset(&out);
    assert_int_equal(zst__decompress(z.data, z.len, &out, 0), 0);
    assert_int_equal(out.len, sizeof(data) + 4);
    assert_memory_equal(out.data + sizeof(data), "tail", 4);
    /* Cut short, or garbage after the last frame: refused, out untouched. */
    buf__reset(&out);
    assert_int_equal(buf__append(&out, "kept", 4), 0);
    assert_int_equal(zst__decompress(z.data, one - 5, &out, 0), -EBADMSG);
    assert_int_equal(out.len, 4);
    assert_int_equal(zst__decompress(z.data, 10, &out, 0), -EBADMSG);
    char junk[200];
    memcpy(junk, z.data + one, z.len - one);
    memcpy(junk + (z.len - one), "garbage!", 8);
    assert_int_equal(zst__decompress(junk, z.len - one + 8, &out, 0), -EBADMSG);
    assert_int_equal(out.len, 4);
    assert_string_equal(out.data, "kept");
    buf__free(&out);
    buf__free(&z);
    zst_compressor__free(c);
    zst_compressor__free(NULL);
}

static void test_zstd_bomb_and_window(void **state)
{
    (void)state;
    struct zst_compressor *c = zst_compressor__new(3);
    char *zeros = calloc(1, 64 << 20);
    struct buf z, out;

    assert_non_null(c);
    assert_non_null(zeros);
    buf__init(&z, 128 << 20); /* room for zstd's worst case; the frame is ~2 KiB */
    assert_int_equal(zst_compressor__compress(c, zeros, 64 << 20, &z), 0);
    /* 64 MiB of zeros packs thousands to one: the ratio stops it early... */
    buf__init(&out, 256 << 20);
    assert_int_equal(zst__decompress(z.data, z.len, &out, 100), -E2BIG);
    assert_int_equal(out.len, 0);
    assert_true(out.cap <= z.len * 100 + 65536);
    buf__free(&out);
    /* ...and so does the cap on the output. */
    buf__init(&out, 1 << 20);
    assert_int_equal(zst__decompress(z.data, z.len, &out, 0), -E2BIG);
    assert_true(out.cap <= (1 << 20) + 1);
    buf__free(&out);
    /* A frame that says it inflates past the limit is refused unread. */
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    assert_non_null(cc);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, 27);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_enableLongDistanceMatching, 1);
    buf__reset(&z);
    size_t n = ZSTD_compress2(cc, z.data, z.max, zeros, 64 << 20);
    assert_false(ZSTD_isError(n));
    buf__init(&out, 16 << 20);
    assert_int_equal(zst__decompress(z.data, n, &out, 0), -E2BIG);
    assert_int_equal(out.cap, 0);
    buf__free(&out);
    /* One that does not say, and asks for a 128 MiB window, is refused,
     * not given it. */
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
    n = ZSTD_compress2(cc, z.data, z.max, zeros, 64 << 20);
    assert_false(ZSTD_isError(n));
    ZSTD_freeCCtx(cc);
    buf__init(&out, 256 << 20);
    assert_int_equal(zst__decompress(z.data, n, &out, 0), -EBADMSG);
    buf__free(&out);
    buf__free(&z);
    free(zeros);
    zst_compressor__free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_cap),
        cmocka_unit_test(test_read_file_capped),
        cmocka_unit_test(test_gzip_round_trip),
        cmocka_unit_test(test_gzip_members_and_lies),
        cmocka_unit_test(test_gzip_bomb_is_cut),
        cmocka_unit_test(test_zstd_round_trip_and_frames),
        cmocka_unit_test(test_zstd_bomb_and_window),
    };
    return cmocka_run_group_tests_name("buf_gz", tests, NULL, NULL);
}

/* Debug files fetched by build id: the id's spelling, the checks made
 * before one is used, the cache bound (common/debugfile.c); the agent's
 * client taking a file kept from an earlier run, and refusing a bad one,
 * with no server up (agent/symbolize/debuginfod.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../../agent/symbolize/binary.h"
#include "../../agent/symbolize/debuginfod.h"
#include "../../agent/symbolize/debuglink.h"
#include "../../common/debugfile.h"

#define DEBUG_FILE "build/fixtures/split.debug" /* fp_c's, objcopy --only-keep-debug */
#define OTHER_FILE "build/fixtures/cxx"

static void read_id(const char *path, char *hex)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(binary__read_build_id(fd, hex), 0);
    close(fd);
}

static void test_valid_id(void **state)
{
    (void)state;
    char long_id[DEBUGFILE_ID_MAX + 3];

    assert_true(debugfile__valid_id("459c42dee68c3e90ee9fa9ef063597ff98368475"));
    assert_true(debugfile__valid_id("0011223344556677"));
    memset(long_id, 'a', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    assert_false(debugfile__valid_id(long_id)); /* 130 digits */
    long_id[DEBUGFILE_ID_MAX] = '\0';
    assert_true(debugfile__valid_id(long_id));              /* 128: the most */
    assert_false(debugfile__valid_id("459C42DEE68C3E90"));  /* uppercase */
    assert_false(debugfile__valid_id("459c42dee68c3e9"));   /* odd */
    assert_false(debugfile__valid_id("0123"));              /* too short */
    assert_false(debugfile__valid_id("../../etc/passwd"));  /* a path */
    assert_false(debugfile__valid_id("00112233/44556677")); /* a slash */
    assert_false(debugfile__valid_id("0011223344556677 ")); /* trailing space */
    assert_false(debugfile__valid_id(""));
    assert_false(debugfile__valid_id(NULL));
}

static int copy_prefix(const char *from, const char *to, long n)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[4096];
    long done = 0;
    size_t r;

    assert_non_null(in);
    assert_non_null(out);
    while ((n < 0 || done < n) && (r = fread(buf, 1, sizeof(buf), in)) > 0) {
        if (n >= 0 && done + (long)r > n)
            r = (size_t)(n - done);
        fwrite(buf, 1, r, out);
        done += (long)r;
    }
    fclose(in);
    fclose(out);
    return 0;
}

static void test_check(void **state)
{
    (void)state;
    char id[BINARY_BUILD_ID_MAX * 2 + 1], other[BINARY_BUILD_ID_MAX * 2 + 1], why[256];
    char tmp[] = "/tmp/cx-debugfile-XXXXXX";
    struct stat st;
    int fd;

    read_id(DEBUG_FILE, id);
    read_id(OTHER_FILE, other);
    assert_int_equal(stat(DEBUG_FILE, &st), 0);
    fd = open(DEBUG_FILE, O_RDONLY);
    assert_int_equal(debugfile__check(fd, id, 1 << 30, why, sizeof(why)), 0);
    /* Another binary's id: refused, the id it does carry named. */
    assert_int_equal(debugfile__check(fd, other, 1 << 30, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "its build id is"));
    /* Over the cap. */
    assert_int_equal(debugfile__check(fd, id, (uint64_t)st.st_size - 1, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "over the cap"));
    close(fd);

    /* Cut short anywhere past the header: refused, never read past its end. */
    assert_true(mkstemp(tmp) >= 0);
    for (long n = 64; n < st.st_size; n += st.st_size / 7) {
        copy_prefix(DEBUG_FILE, tmp, n);
        fd = open(tmp, O_RDONLY);
        assert_int_equal(debugfile__check(fd, id, 1 << 30, why, sizeof(why)), -1);
        close(fd);
    }
    copy_prefix(DEBUG_FILE, tmp, st.st_size / 2);
    fd = open(tmp, O_RDONLY);
    assert_int_equal(debugfile__check(fd, id, 1 << 30, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "truncated"));
    close(fd);
    /* Not ELF at all. */
    FILE *f = fopen(tmp, "wb");
    fputs("<html>404</html>", f);
    fclose(f);
    fd = open(tmp, O_RDONLY);
    assert_int_equal(debugfile__check(fd, id, 1 << 30, why, sizeof(why)), -1);
    assert_string_equal(why, "not an ELF file");
    close(fd);
    unlink(tmp);
}

static void write_file(const char *dir, const char *name, size_t size, time_t mtime)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < size; i++)
        fputc('x', f);
    fclose(f);
    struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
}

static bool exists(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static void test_trim_oldest_first(void **state)
{
    (void)state;
    char dir[] = "/tmp/cx-trim-XXXXXX";

    assert_non_null(mkdtemp(dir));
    write_file(dir, "a.debug", 1000, 1000); /* oldest */
    write_file(dir, "b.debug", 1000, 3000);
    write_file(dir, "c.debug", 1000, 2000);
    write_file(dir, "d.debug", 1000, 5000); /* newest */
    write_file(dir, ".upload-x", 500, 1);   /* being written: counted, kept */
    /* Under the bound: nothing goes. */
    assert_int_equal(debugfile__trim(dir, 5000), 0);
    /* 4500 bytes in all, bound 2600: a, c (the oldest two) go -> 2500. */
    assert_int_equal(debugfile__trim(dir, 2600), 2);
    assert_false(exists(dir, "a.debug"));
    assert_false(exists(dir, "c.debug"));
    assert_true(exists(dir, "b.debug"));
    assert_true(exists(dir, "d.debug"));
    assert_true(exists(dir, ".upload-x"));
    /* Touched (used): b becomes the newest, d goes first. */
    write_file(dir, "b.debug", 1000, 9000);
    assert_int_equal(debugfile__trim(dir, 1600), 1);
    assert_true(exists(dir, "b.debug"));
    assert_false(exists(dir, "d.debug"));
    assert_int_equal(debugfile__trim("/nonexistent-dir", 1), -1);
    unlink("/dev/null/x"); /* nothing */
    char p[512];
    snprintf(p, sizeof(p), "%s/b.debug", dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/.upload-x", dir);
    unlink(p);
    rmdir(dir);
}

/* The agent's client with no server up: a file kept from an earlier run is
 * checked and used; a bad one is refused, the fetch fails, the reason kept. */
static void test_client_cache_without_server(void **state)
{
    (void)state;
    char dir[] = "/tmp/cx-dbgd-XXXXXX", id[BINARY_BUILD_ID_MAX * 2 + 1],
         other[BINARY_BUILD_ID_MAX * 2 + 1], p[512], path[4096], why[256], err[256];

    assert_non_null(mkdtemp(dir));
    read_id(DEBUG_FILE, id);
    read_id(OTHER_FILE, other);
    snprintf(p, sizeof(p), "%s/files", dir);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/files/%s.debug", dir, id);
    copy_prefix(DEBUG_FILE, p, -1);
    snprintf(p, sizeof(p), "%s/files/%s.debug", dir, other); /* not other's debug file */
    copy_prefix(DEBUG_FILE, p, -1);
    struct debuginfod_opts o = {"http://127.0.0.1:1", dir, 1 << 30, 1 << 30, 2, NULL};
    struct debuginfod *d = debuginfod__start(&o, err, sizeof(err));
    assert_non_null(d);
    assert_int_equal(debuginfod__want(d, id, "fp_c", path, sizeof(path), why, sizeof(why)),
                     DEBUGINFOD_PENDING);
    assert_int_equal(debuginfod__want(d, other, "cxx", path, sizeof(path), why, sizeof(why)),
                     DEBUGINFOD_PENDING);
    assert_true(debuginfod__wait_idle(d, 30000));
    assert_int_equal(debuginfod__want(d, id, "fp_c", path, sizeof(path), why, sizeof(why)),
                     DEBUGINFOD_READY);
    snprintf(p, sizeof(p), "%s/files/%s.debug", dir, id);
    assert_string_equal(path, p);
    assert_int_equal(debuginfod__want(d, other, "cxx", path, sizeof(path), why, sizeof(why)),
                     DEBUGINFOD_FAILED);
    assert_true(why[0] != '\0');
    snprintf(p, sizeof(p), "%s/files/%s.debug", dir, other);
    assert_int_not_equal(access(p, F_OK), 0); /* the bad one is gone */
    assert_int_equal(debuginfod__want(d, "../x", "bad", path, sizeof(path), why, sizeof(why)),
                     DEBUGINFOD_FAILED);
    debuginfod__stop(d);
    debuginfod__stop(NULL);
    snprintf(p, sizeof(p), "rm -rf %s", dir);
    assert_int_equal(system(p), 0);
}

/* The symbolizer's local search by .gnu_debuglink (used in place of
 * libdwfl's once DEBUGINFOD_URLS is set): beside the binary, CRC checked. */
static void test_debuglink_search(void **state)
{
    (void)state;
    unsigned char buf[1 << 16];
    uLong crc = crc32(0, Z_NULL, 0);
    FILE *f = fopen(DEBUG_FILE, "rb");
    size_t n;
    char *path = NULL;
    int fd;

    assert_non_null(f);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        crc = crc32(crc, buf, (uInt)n);
    fclose(f);
    fd = debuglink__open("build/fixtures/debuglink_c", "split.debug", (uint32_t)crc, &path);
    assert_true(fd >= 0);
    assert_string_equal(path, "build/fixtures/split.debug");
    close(fd);
    free(path);
    /* A CRC that differs: not this binary's debug file. */
    assert_int_equal(
        debuglink__open("build/fixtures/debuglink_c", "split.debug", (uint32_t)crc ^ 1, &path), -1);
    assert_null(path);
    /* The binary itself is never its own debug file; no link, nothing. */
    assert_int_equal(debuglink__open("build/fixtures/debuglink_c", "debuglink_c", 0, &path), -1);
    assert_int_equal(debuglink__open("build/fixtures/debuglink_c", NULL, 0, &path), -1);
    assert_int_equal(debuglink__open("build/fixtures/debuglink_c", "absent.debug", 0, &path), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_id),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_trim_oldest_first),
        cmocka_unit_test(test_client_cache_without_server),
        cmocka_unit_test(test_debuglink_search),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "../../agent/procs/maps.h"

static const char sample[] =
    "55d0c0a00000-55d0c0a02000 r--p 00000000 fe:01 1311 /usr/bin/cat\n"
    "55d0c0a02000-55d0c0a07000 r-xp 00002000 fe:01 1311 /usr/bin/cat\n"
    "7f1e2a000000-7f1e2a021000 rw-p 00000000 00:00 0 \n"
    "7f1e2a228000-7f1e2a3bd000 r-xp 00028000 fe:01 2047 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "7f1e2a400000-7f1e2a401000 r-xp 00000000 08:10 99 /tmp/dir with spaces/lib.so (deleted)\n"
    "garbage line\n"
    "7ffd5a5f2000-7ffd5a5f4000 r-xp 00000000 00:00 0                          [vdso]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]";

static void test_parse_exec_only(void **state)
{
    (void)state;
    struct maps m;
    size_t bad = 0;

    assert_int_equal(maps__parse(sample, strlen(sample), true, &m, &bad), 0);
    assert_int_equal(bad, 1);
    assert_int_equal(m.n, 5);
    assert_int_equal(m.e[0].start, 0x55d0c0a02000ull);
    assert_int_equal(m.e[0].end, 0x55d0c0a07000ull);
    assert_int_equal(m.e[0].offset, 0x2000);
    assert_int_equal(m.e[0].dev_major, 0xfe);
    assert_int_equal(m.e[0].dev_minor, 1);
    assert_int_equal(m.e[0].inode, 1311);
    assert_string_equal(m.e[0].path, "/usr/bin/cat");
    assert_string_equal(m.e[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    assert_string_equal(m.e[2].path, "/tmp/dir with spaces/lib.so");
    assert_true(m.e[2].deleted);
    assert_string_equal(m.e[3].path, "[vdso]");
    assert_string_equal(m.e[4].path, "[vsyscall]");
    assert_int_equal(m.e[4].end, 0xffffffffff601000ull);

    assert_ptr_equal(maps__find(&m, 0x7f1e2a228000ull), &m.e[1]);
    assert_ptr_equal(maps__find(&m, 0x7f1e2a3bcfffull), &m.e[1]);
    assert_null(maps__find(&m, 0x7f1e2a3bd000ull));
    assert_null(maps__find(&m, 0));
    maps__free(&m);
    maps__free(NULL);
}

static void test_parse_all_and_hostile(void **state)
{
    (void)state;
    struct maps m;
    size_t bad = 0;

    assert_int_equal(maps__parse(sample, strlen(sample), false, &m, &bad), 0);
    assert_int_equal(m.n, 7);
    assert_string_equal(m.e[2].path, "");
    assert_string_equal(m.e[2].perms, "rw-p");
    maps__free(&m);

    /* Overlong numbers, end before start, truncated lines: skipped, no crash. */
    static const char hostile[] = "1ffffffffffffffff-2 r-xp 0 0:0 0 x\n"
                                  "2000-1000 r-xp 0 0:0 0 x\n"
                                  "1000-2000 r-\n"
                                  "1000-2000 r-xp 0 0:0\n"
                                  "1000-2000 r-xp 0 0:0 99999999999999999999999 x\n";
    assert_int_equal(maps__parse(hostile, strlen(hostile), false, &m, &bad), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(bad, 5);
    maps__free(&m);
    assert_int_equal(maps__parse("", 0, true, &m, &bad), 0);
    assert_int_equal(m.n, 0);
    maps__free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_exec_only),
        cmocka_unit_test(test_parse_all_and_hostile),
    };
    return cmocka_run_group_tests_name("maps", tests, NULL, NULL);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../common/buf.h"

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

/* The same process's maps as text and asked of the kernel one mapping at a
 * time agree entry by entry (but [vsyscall], no mapping of the process),
 * with a deleted file and a path with spaces among them. */
static void check_query_matches_text(bool exec_only)
{
    char dir[] = "/tmp/cx-maps-XXXXXX", path[128];
    struct maps t, q;
    struct buf b;
    size_t bad = 0, j = 0;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/a lib (x).so", dir);
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    assert_true(f >= 0);
    assert_int_equal(ftruncate(f, 8192), 0);
    void *m = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE, f, 4096);
    assert_true(m != MAP_FAILED);
    void *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    assert_true(sh != MAP_FAILED);
    close(f);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);

    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    int r = maps__query(fd, exec_only, 1u << 20, 16u << 20, &q);
    if (r == -ENOTTY || r == -EINVAL) {
        close(fd);
        munmap(m, 8192);
        munmap(sh, 4096);
        skip(); /* before Linux 6.11 */
    }
    assert_int_equal(r, 0);
    buf__init(&b, 16u << 20);
    assert_int_equal(buf__read_fd(&b, fd), 0);
    close(fd);
    assert_int_equal(maps__parse(b.data, b.len, exec_only, &t, &bad), 0);
    assert_int_equal(bad, 0);
    bool saw_deleted = false;
    for (size_t i = 0; i < t.n; i++) {
        if (strcmp(t.e[i].path, "[vsyscall]") == 0 || (!exec_only && t.e[i].inode == 0))
            continue;
        /* All mappings: the files' only, as a malloc between the two reads
         * may add or merge anonymous ones. */
        while (!exec_only && j < q.n && q.e[j].inode == 0)
            j++;
        assert_true(j < q.n);
        const struct maps_entry *a = &t.e[i], *c = &q.e[j++];
        assert_int_equal(a->start, c->start);
        assert_int_equal(a->end, c->end);
        assert_int_equal(a->offset, c->offset);
        assert_int_equal(a->dev_major, c->dev_major);
        assert_int_equal(a->dev_minor, c->dev_minor);
        assert_int_equal(a->inode, c->inode);
        assert_string_equal(a->perms, c->perms);
        assert_int_equal(a->deleted, c->deleted);
        assert_string_equal(a->path, c->path);
        saw_deleted |= a->deleted && (uintptr_t)m == a->start && strstr(a->path, "a lib (x).so");
    }
    while (!exec_only && j < q.n && q.e[j].inode == 0)
        j++;
    assert_int_equal(j, q.n);
    assert_true(saw_deleted);
    assert_ptr_equal(maps__find(&q, (uintptr_t)m + 100), &q.e[maps__find(&q, (uintptr_t)m) - q.e]);
    maps__free(&t);
    maps__free(&q);

    /* Caps: the first entries are kept. */
    fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    assert_int_equal(maps__query(fd, exec_only, 2, 16u << 20, &q), -E2BIG);
    assert_int_equal(q.n, 2);
    maps__free(&q);
    assert_int_equal(maps__query(fd, exec_only, 1u << 20, 8, &q), -E2BIG);
    size_t names = 0;
    for (size_t i = 0; i < q.n; i++)
        names += strlen(q.e[i].path) + 1;
    assert_true(names <= 8);
    maps__free(&q);
    close(fd);
    buf__free(&b);
    munmap(m, 8192);
    munmap(sh, 4096);
}

static void test_query_matches_text(void **state)
{
    (void)state;
    check_query_matches_text(true);
    check_query_matches_text(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_exec_only),
        cmocka_unit_test(test_parse_all_and_hostile),
        cmocka_unit_test(test_query_matches_text),
    };
    return cmocka_run_group_tests_name("maps", tests, NULL, NULL);
}

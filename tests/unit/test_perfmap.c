#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/time.h>
#include <time.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../agent/runtimes/jit/perfmap.h"

static struct perfmap *parsed(const char *text)
{
    struct perfmap *pm = perfmap__new();

    assert_non_null(pm);
    assert_int_equal(perfmap__feed(pm, text, strlen(text)), (long)strlen(text));
    perfmap__sort(pm);
    return pm;
}

/* V8's --perf-basic-prof: no 0x, names with a kind prefix and file:line. */
static void test_v8_format(void **state)
{
    (void)state;
    struct perfmap *pm = parsed("3f1a2c0c0040 1c0 JS:*hot_a /tmp/work.js:3:15\n"
                                "3f1a2c0c0300 80 JS:~run /tmp/work.js:10:13\n"
                                "3f1a2c0c0000 40 Builtin:ArgumentsAdaptorTrampoline\n"
                                "3f1a2c0c0400 20 RegExp:[a-z]+ \n");

    assert_int_equal(perfmap__count(pm), 4);
    assert_int_equal(perfmap__bad(pm), 0);
    assert_string_equal(perfmap__lookup(pm, 0x3f1a2c0c0040), "JS:*hot_a /tmp/work.js:3:15");
    assert_string_equal(perfmap__lookup(pm, 0x3f1a2c0c01ff), "JS:*hot_a /tmp/work.js:3:15");
    assert_null(perfmap__lookup(pm, 0x3f1a2c0c0200)); /* a gap */
    assert_string_equal(perfmap__lookup(pm, 0x3f1a2c0c0000), "Builtin:ArgumentsAdaptorTrampoline");
    assert_string_equal(perfmap__lookup(pm, 0x3f1a2c0c037f), "JS:~run /tmp/work.js:10:13");
    assert_string_equal(perfmap__lookup(pm, 0x3f1a2c0c0410), "RegExp:[a-z]+"); /* trailing space */
    assert_null(perfmap__lookup(pm, 0x3f1a2c0c0420));
    assert_null(perfmap__lookup(pm, 0));
    assert_null(perfmap__lookup(pm, UINT64_MAX));
    perfmap__free(pm);
    perfmap__free(NULL);
}

/* HotSpot's Compiler.perfmap: 0x and zero-padded, Java signatures. */
static void test_hotspot_format(void **state)
{
    (void)state;
    struct perfmap *pm =
        parsed("0x00007f3a6c000000 0x0000000000000180 Interpreter\n"
               "0x00007f3a6c4a2e10 0x00000000000001d8 void Work.hotA(int)\n"
               "0x00007F3A6C4A3000 0x0000000000000100 [CodeHeap 'non-profiled nmethods']\n");

    assert_int_equal(perfmap__count(pm), 3);
    assert_string_equal(perfmap__lookup(pm, 0x7f3a6c000010), "Interpreter");
    assert_string_equal(perfmap__lookup(pm, 0x7f3a6c4a2f00), "void Work.hotA(int)");
    assert_string_equal(perfmap__lookup(pm, 0x7f3a6c4a30ff), "[CodeHeap 'non-profiled nmethods']");
    perfmap__free(pm);
}

/* .NET's DOTNET_PerfMapEnabled=1: upper-case hex, no 0x, long signatures
 * with spaces and brackets; and a CRLF line. */
static void test_dotnet_format(void **state)
{
    (void)state;
    struct perfmap *pm = parsed(
        "7F8B4C1A0000 5C [PreStub]\n"
        "7F8B4C1A1480 1B2 instance void [App] App.Worker::HotA(int32)[Optimized]\n"
        "7F8B4C1A1700 E4 void [System.Private.CoreLib] System.Threading.Thread::StartCallback()"
        "[Tier0]\r\n");

    assert_int_equal(perfmap__count(pm), 3);
    assert_string_equal(perfmap__lookup(pm, 0x7f8b4c1a0000), "[PreStub]");
    assert_string_equal(perfmap__lookup(pm, 0x7f8b4c1a1631),
                        "instance void [App] App.Worker::HotA(int32)[Optimized]");
    assert_null(perfmap__lookup(pm, 0x7f8b4c1a1632));
    assert_string_equal(
        perfmap__lookup(pm, 0x7f8b4c1a1700),
        "void [System.Private.CoreLib] System.Threading.Thread::StartCallback()[Tier0]");
    perfmap__free(pm);
}

/* Code freed and its memory reused: the entry written last wins, whatever
 * its start. */
static void test_overlap_last_wins(void **state)
{
    (void)state;
    struct perfmap *pm = parsed("1000 1000 old_big\n"
                                "1800 100 newer_inside\n"
                                "1000 1000 newest_same\n"
                                "1c00 10 newest_small\n");

    assert_string_equal(perfmap__lookup(pm, 0x1000), "newest_same");
    assert_string_equal(perfmap__lookup(pm, 0x1850), "newest_same");
    assert_string_equal(perfmap__lookup(pm, 0x1c05), "newest_small");
    assert_string_equal(perfmap__lookup(pm, 0x1fff), "newest_same");
    perfmap__free(pm);
}

static void test_hostile_lines(void **state)
{
    (void)state;
    char big[PERFMAP_MAX_LINE + 100];
    struct perfmap *pm = perfmap__new();

    static const char text[] = "\n"
                               "garbage\n"
                               "1000\n"
                               "1000 \n"
                               "1000 10\n"     /* no name */
                               "1000 10    \n" /* blank name */
                               "zz00 10 x\n"   /* not hex */
                               "1000 0 zero\n" /* empty range */
                               "fffffffffffffff0 20 wraps\n"
                               "10000000000000000 10 too_wide\n"
                               "0x 10 nodigits\n"
                               "2000 10 ctl\x01\x1b[31mred\n"
                               "  3000\t10\tok tabs\n";
    assert_int_equal(perfmap__feed(pm, text, sizeof(text) - 1), (long)sizeof(text) - 1);
    perfmap__sort(pm);
    assert_int_equal(perfmap__count(pm), 2);
    assert_int_equal(perfmap__bad(pm), 10);
    assert_string_equal(perfmap__lookup(pm, 0x2000), "ctl??[31mred");
    assert_string_equal(perfmap__lookup(pm, 0x3000), "ok tabs");

    /* A line too long, cut in two feeds: dropped whole, the next one kept. */
    memset(big, 'a', sizeof(big));
    memcpy(big, "4000 10 ", 8);
    assert_int_equal(perfmap__feed(pm, big, sizeof(big)), (long)sizeof(big));
    assert_int_equal(perfmap__feed(pm, "aaaa\n5000 10 after\n", 19), 19);
    perfmap__sort(pm);
    assert_null(perfmap__lookup(pm, 0x4000));
    assert_string_equal(perfmap__lookup(pm, 0x5000), "after");
    assert_int_equal(perfmap__bad(pm), 11);

    /* A partial last line is left for later. */
    assert_int_equal(perfmap__feed(pm, "6000 10 late", 12), 0);
    assert_int_equal(perfmap__feed(pm, "6000 10 later\n7000", 18), 14);
    perfmap__sort(pm);
    assert_string_equal(perfmap__lookup(pm, 0x6000), "later");
    perfmap__free(pm);
}

static void test_entry_cap(void **state)
{
    (void)state;
    size_t n = PERFMAP_MAX_ENTRIES + 10, len = 0;
    char *text = malloc(n * 16);
    struct perfmap *pm = perfmap__new();

    assert_non_null(text);
    for (size_t i = 0; i < n; i++)
        len += snprintf(text + len, 16, "%zx 1 f\n", i + 1);
    assert_int_equal(perfmap__feed(pm, text, len), (long)len);
    perfmap__sort(pm);
    assert_int_equal(perfmap__count(pm), PERFMAP_MAX_ENTRIES);
    assert_true(perfmap__capped(pm));
    assert_string_equal(perfmap__lookup(pm, 1), "f");
    assert_null(perfmap__lookup(pm, PERFMAP_MAX_ENTRIES + 5));
    free(text);
    perfmap__free(pm);
}

static void write_file(const char *path, const char *text, const char *mode)
{
    FILE *f = fopen(path, mode);

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* n lines of about 25 bytes each, over 1 MiB for n = 120000 and more. */
static void f_big(const char *path, int n)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%x 100 a_rather_long_function_name_%d\n", 0x10000 + i * 0x100, i);
    fclose(f);
}

/* Read as it grows, from where the last read stopped; read whole again
 * when replaced. */
static void test_read_grows(void **state)
{
    (void)state;
    char dir[] = "/tmp/cx-perfmap-XXXXXX", path[128], path2[128];
    struct perfmap *pm = perfmap__new();
    int fd;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/perf-1.map", dir);
    write_file(path, "1000 10 first\n2000 10 sec", "w");
    fd = open(path, O_RDONLY);
    assert_int_equal(perfmap__read_fd(pm, fd), 0);
    assert_int_equal(perfmap__count(pm), 1);
    assert_null(perfmap__lookup(pm, 0x2000));
    write_file(path, "ond\n3000 10 third\n", "a");
    assert_int_equal(perfmap__read_fd(pm, fd), 0);
    assert_int_equal(perfmap__count(pm), 3);
    assert_string_equal(perfmap__lookup(pm, 0x2000), "second");
    assert_string_equal(perfmap__lookup(pm, 0x3000), "third");
    assert_int_equal(perfmap__read_fd(pm, fd), 0); /* nothing new */
    assert_int_equal(perfmap__count(pm), 3);
    close(fd);

    /* Replaced by another file: only its entries. */
    snprintf(path2, sizeof(path2), "%s/new", dir);
    write_file(path2, "9000 10 fresh\n", "w");
    assert_int_equal(rename(path2, path), 0);
    fd = open(path, O_RDONLY);
    assert_int_equal(perfmap__read_fd(pm, fd), 0);
    assert_int_equal(perfmap__count(pm), 1);
    assert_null(perfmap__lookup(pm, 0x1000));
    assert_string_equal(perfmap__lookup(pm, 0x9000), "fresh");
    close(fd);

    /* Bigger than one read: every line, none cut at a chunk's edge. */
    struct perfmap *big = perfmap__new();
    f_big(path, 120000);
    fd = open(path, O_RDONLY);
    assert_int_equal(perfmap__read_fd(big, fd), 0);
    close(fd);
    assert_int_equal(perfmap__count(big), 120000);
    assert_int_equal(perfmap__bad(big), 0);
    assert_string_equal(perfmap__lookup(big, 0x10000 + 119999 * 0x100),
                        "a_rather_long_function_name_119999");
    perfmap__free(big);

    /* Not a regular file. */
    fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_int_equal(perfmap__read_fd(pm, fd), -EINVAL);
    close(fd);
    unlink(path);
    rmdir(dir);
    perfmap__free(pm);
}

/* A fake /proc: PID/status and PID/root (a directory here). */
struct fake {
    char dir[64], proc[96], root[128], tmp[160], map[192];
};

static void fake_proc(struct fake *f, const char *status)
{
    char p[256];

    snprintf(f->dir, sizeof(f->dir), "/tmp/cx-perfmap-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->proc, sizeof(f->proc), "%s/proc", f->dir);
    snprintf(f->root, sizeof(f->root), "%s/proc/123/root", f->dir);
    snprintf(f->tmp, sizeof(f->tmp), "%s/tmp", f->root);
    snprintf(f->map, sizeof(f->map), "%s/perf-45.map", f->tmp);
    assert_int_equal(mkdir(f->proc, 0700), 0);
    snprintf(p, sizeof(p), "%s/123", f->proc);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(mkdir(f->root, 0700), 0);
    snprintf(p, sizeof(p), "%s/123/status", f->proc);
    write_file(p, status, "w");
}

static void fake_free(struct fake *f)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
}

static void test_open_proc(void **state)
{
    (void)state;
    char status[256], outside[512];
    struct fake f;
    int fd;

    snprintf(status, sizeof(status), "Name:\tnode\nUid:\t%u\t%u\t%u\t%u\nNSpid:\t123\t45\n",
             getuid(), geteuid(), geteuid(), geteuid());
    fake_proc(&f, status);
    /* No /tmp, then no map. */
    assert_int_equal(perfmap__open_proc(f.proc, 123), -ENOENT);
    assert_int_equal(mkdir(f.tmp, 0777), 0);
    assert_int_equal(perfmap__open_proc(f.proc, 123), -ENOENT);
    assert_int_equal(perfmap__open_proc(f.proc, 999), -ENOENT); /* no such process */
    /* The map by the pid in the process's namespace. */
    write_file(f.map, "1000 10 inside\n", "w");
    fd = perfmap__open_proc(f.proc, 123);
    assert_true(fd >= 0);
    struct perfmap *pm = perfmap__new();
    assert_int_equal(perfmap__read_fd(pm, fd), 0);
    assert_string_equal(perfmap__lookup(pm, 0x1000), "inside");
    close(fd);
    perfmap__free(pm);

    /* A symlink to a file of the host's is not followed. */
    snprintf(outside, sizeof(outside), "%s/outside.map", f.dir);
    write_file(outside, "1000 10 outside\n", "w");
    unlink(f.map);
    assert_int_equal(symlink(outside, f.map), 0);
    fd = perfmap__open_proc(f.proc, 123);
    assert_true(fd == -ELOOP || fd == -EXDEV);
    unlink(f.map);

    /* /tmp a symlink to the host's directory: resolved inside the root. */
    char tmp2[320];
    snprintf(tmp2, sizeof(tmp2), "%s/hosttmp", f.dir);
    assert_int_equal(mkdir(tmp2, 0700), 0);
    snprintf(outside, sizeof(outside), "%s/perf-45.map", tmp2);
    write_file(outside, "1000 10 host\n", "w");
    assert_int_equal(rmdir(f.tmp), 0);
    assert_int_equal(symlink(tmp2, f.tmp), 0);
    fd = perfmap__open_proc(f.proc, 123);
    assert_true(fd < 0);

    /* A FIFO is not read (nor waited on). */
    assert_int_equal(unlink(f.tmp), 0);
    assert_int_equal(mkdir(f.tmp, 0777), 0);
    assert_int_equal(mkfifo(f.map, 0600), 0);
    assert_int_equal(perfmap__open_proc(f.proc, 123), -EINVAL);
    unlink(f.map);
    fake_free(&f);

    /* A map another user owns: not this process's. */
    snprintf(status, sizeof(status), "Uid:\t4242\t4242\t4242\t4242\nNSpid:\t123\t45\n");
    fake_proc(&f, status);
    assert_int_equal(mkdir(f.tmp, 0777), 0);
    write_file(f.map, "1000 10 planted\n", "w");
    if (geteuid() == 0)
        assert_int_equal(chown(f.map, 777, 777), 0);
    assert_int_equal(perfmap__open_proc(f.proc, 123), -EPERM);
    fake_free(&f);
}

static void test_cache(void **state)
{
    (void)state;
    char status[256], more[64];
    struct fake f;
    const char *why = NULL;
    struct perfmap_cache *c;

    snprintf(status, sizeof(status), "Uid:\t%u\t%u\t0\t0\nNSpid:\t45\n", getuid(), geteuid());
    fake_proc(&f, status);
    /* NSpid 45 for pid 123 (the status says so), so the map is perf-45. */
    c = perfmap_cache__new(f.proc);
    assert_non_null(c);
    assert_null(perfmap_cache__get(c, 123, 7, 1000, 100, &why));
    assert_non_null(why);
    assert_int_equal(mkdir(f.tmp, 0777), 0);
    write_file(f.map, "1000 10 a\n", "w");
    /* Not looked at again before recheck_ns. */
    assert_null(perfmap_cache__get(c, 123, 7, 1050, 100, NULL));
    struct perfmap *pm = perfmap_cache__get(c, 123, 7, 1100, 100, NULL);
    assert_non_null(pm);
    assert_string_equal(perfmap__lookup(pm, 0x1000), "a");
    snprintf(more, sizeof(more), "2000 10 b\n");
    write_file(f.map, more, "a");
    pm = perfmap_cache__get(c, 123, 7, 1300, 100, NULL);
    assert_string_equal(perfmap__lookup(pm, 0x2000), "b");
    /* Gone with its process: the map read is kept. */
    unlink(f.map);
    pm = perfmap_cache__get(c, 123, 7, 1500, 100, NULL);
    assert_non_null(pm);
    assert_string_equal(perfmap__lookup(pm, 0x1000), "a");
    /* Written anew in place, same inode, longer: read whole when told. */
    write_file(f.map, "1000 10 a\n3000 10 c\n2000 10 b2\n", "w");
    perfmap_cache__invalidate(c, 123, 7);
    pm = perfmap_cache__get(c, 123, 7, 1510, 100, NULL);
    assert_int_equal(perfmap__count(pm), 3);
    assert_string_equal(perfmap__lookup(pm, 0x2000), "b2");
    assert_string_equal(perfmap__lookup(pm, 0x3000), "c");
    unlink(f.map);
    /* Once per process. */
    assert_false(perfmap_cache__seen(c, 123, 7, 1));
    assert_true(perfmap_cache__once(c, 123, 7, 1));
    assert_true(perfmap_cache__seen(c, 123, 7, 1));
    assert_false(perfmap_cache__once(c, 123, 7, 1));
    assert_true(perfmap_cache__once(c, 123, 7, 2));
    /* A reused pid starts afresh. */
    assert_true(perfmap_cache__once(c, 123, 8, 1));
    assert_null(perfmap_cache__get(c, 123, 8, 1600, 100, NULL));
    perfmap_cache__sweep(c, 2000);
    assert_true(perfmap_cache__once(c, 123, 8, 1));
    /* A map written an hour before the process started (a pid reused):
     * not its names. */
    struct timespec boot;
    assert_int_equal(clock_gettime(CLOCK_BOOTTIME, &boot), 0);
    uint64_t now_ticks = (uint64_t)boot.tv_sec * (uint64_t)sysconf(_SC_CLK_TCK);
    write_file(f.map, "1000 10 old\n", "w");
    struct timeval hour_ago[2];
    gettimeofday(&hour_ago[0], NULL);
    hour_ago[0].tv_sec -= 3600;
    hour_ago[1] = hour_ago[0];
    assert_int_equal(utimes(f.map, hour_ago), 0);
    assert_null(perfmap_cache__get(c, 123, now_ticks, 3000, 100, &why));
    assert_non_null(strstr(why, "predates"));
    /* The same file written since: read. */
    write_file(f.map, "1000 10 new\n", "w");
    pm = perfmap_cache__get(c, 123, now_ticks, 3200, 100, NULL);
    assert_non_null(pm);
    assert_string_equal(perfmap__lookup(pm, 0x1000), "new");
    unlink(f.map);
    perfmap_cache__free(c);
    perfmap_cache__free(NULL);
    fake_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v8_format),     cmocka_unit_test(test_hotspot_format),
        cmocka_unit_test(test_dotnet_format), cmocka_unit_test(test_overlap_last_wins),
        cmocka_unit_test(test_hostile_lines), cmocka_unit_test(test_entry_cap),
        cmocka_unit_test(test_read_grows),    cmocka_unit_test(test_open_proc),
        cmocka_unit_test(test_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* debuginfod (the agent's client): its thread must close no file
 * descriptor it does not own. elfutils 0.188 (Debian 12's libdebuginfod)
 * reads a non-empty cache_clean_interval_s with fdopen + fclose and then
 * close()s the number again (elfutils PR29696): in the agent, a spool file
 * the worker opened under that number in between was closed under it, and
 * the profile was lost with EBADF. Here that other thread's open is made
 * to land in the window, every time: fclose and close are interposed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../agent/symbolize/debuginfod.h"

#define VICTIMS_MAX 16

static int victims[VICTIMS_MAX], nvictims, bad_closes, config_reads;

/* Every close of the process: those of a number that is not open are
 * counted (in a threaded process, each could have closed another's file). */
int close(int fd)
{
    long r = syscall(SYS_close, fd);
    if (r < 0 && errno == EBADF && fd >= 0)
        __atomic_add_fetch(&bad_closes, 1, __ATOMIC_RELAXED);
    return (int)r;
}

/* fclose of one of libdebuginfod's config files: the stream is closed, then
 * "another thread" opens a file at once, which takes the lowest free
 * number, the one just freed. */
int fclose(FILE *f)
{
    static int (*real)(FILE *);
    char link[64], path[4096];
    int fd = fileno(f), victim;
    ssize_t n = -1;

    if (!real)
        real = (int (*)(FILE *))dlsym(RTLD_NEXT, "fclose");
    if (fd >= 0) {
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, path, sizeof(path) - 1);
    }
    int r = real(f);
    if (n > 0) {
        path[n] = '\0';
        const char *base = strrchr(path, '/');
        if (base &&
            (strcmp(base, "/cache_clean_interval_s") == 0 ||
             strcmp(base, "/max_unused_age_s") == 0 || strcmp(base, "/cache_miss_s") == 0)) {
            config_reads++;
            victim = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (victim == fd && nvictims < VICTIMS_MAX)
                victims[nvictims++] = victim;
            else if (victim >= 0)
                syscall(SYS_close, victim);
        }
    }
    return r;
}

/* Three build ids asked of a server that is not there: three queries, each
 * after the first finding libdebuginfod's config files in place. Every
 * file another thread opened meanwhile is still open after them. */
static void test_no_foreign_close(void **state)
{
    static const char *const ids[] = {"1111111111111111111111111111111111111111",
                                      "2222222222222222222222222222222222222222",
                                      "3333333333333333333333333333333333333333"};
    char dir[] = "/tmp/cx-test-debuginfod-XXXXXX", path[4096], why[256], p[4096];
    struct stat st;
    (void)state;

    assert_non_null(mkdtemp(dir));
    struct debuginfod_opts o = {.urls = "http://127.0.0.1:1",
                                .dir = dir,
                                .cache_max = 1 << 20,
                                .file_max = 1 << 20,
                                .timeout_s = 5};
    struct debuginfod *d = debuginfod__start(&o, why, sizeof(why));
    assert_non_null(d);
    for (size_t i = 0; i < 3; i++) {
        /* One at a time: each query is one window. */
        debuginfod__want(d, ids[i], "test", path, sizeof(path), why, sizeof(why));
        assert_true(debuginfod__wait_idle(d, 60000));
        assert_int_equal(debuginfod__want(d, ids[i], "test", path, sizeof(path), why, sizeof(why)),
                         DEBUGINFOD_FAILED);
    }
    /* libdebuginfod did go through its config step (it writes the file). */
    snprintf(p, sizeof(p), "%s/client/cache_clean_interval_s", dir);
    assert_int_equal(stat(p, &st), 0);
    debuginfod__stop(d);

    for (int i = 0; i < nvictims; i++) {
        if (fcntl(victims[i], F_GETFD) < 0)
            fail_msg("fd %d, opened by another thread after libdebuginfod's fclose, was closed "
                     "by libdebuginfod (%d config reads through fdopen)",
                     victims[i], config_reads);
        syscall(SYS_close, victims[i]);
    }
    assert_int_equal(bad_closes, 0);
    snprintf(p, sizeof(p), "rm -rf '%s'", dir);
    assert_int_equal(system(p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_foreign_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

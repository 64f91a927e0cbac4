#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/config.h"

static const struct config_def defs[] = {
    {"sample-rate", CONFIG_INT, "100", 1, 1000, "HZ", "rate"},
    {"output-dir", CONFIG_STRING, NULL, 0, 0, "DIR", "dir"},
    {"kernel-stacks", CONFIG_BOOL, "false", 0, 0, NULL, "kernel"},
};

static char *write_tmp(const char *text)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/cx-conf-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_defaults(void **state)
{
    (void)state;
    struct config *c = config__new(defs, 3);
    assert_int_equal(config__int(c, "sample-rate"), 100);
    assert_null(config__str(c, "output-dir"));
    assert_false(config__bool(c, "kernel-stacks"));
    assert_false(config__is_set(c, "sample-rate"));
    config__free(c);
}

static void test_precedence_file_env_flags(void **state)
{
    (void)state;
    char err[256];
    struct config *c = config__new(defs, 3);
    char *path = write_tmp("# a comment\nsample_rate = 50\noutput-dir = \"/tmp/x\"\n\n"
                           "kernel_stacks=yes\n");
    assert_int_equal(config__load_file(c, path, true, err, sizeof(err)), 0);
    assert_int_equal(config__int(c, "sample-rate"), 50);
    assert_string_equal(config__str(c, "output-dir"), "/tmp/x");
    assert_true(config__bool(c, "kernel-stacks"));

    setenv("CODEXRAY_SAMPLE_RATE", "60", 1);
    assert_int_equal(config__load_env(c, err, sizeof(err)), 0);
    assert_int_equal(config__int(c, "sample-rate"), 60);
    unsetenv("CODEXRAY_SAMPLE_RATE");

    char *argv[] = {"--sample-rate", "70", "--kernel-stacks=false", "--output-dir=/o"};
    assert_int_equal(config__load_args(c, 4, argv, err, sizeof(err)), 0);
    assert_int_equal(config__int(c, "sample-rate"), 70);
    assert_false(config__bool(c, "kernel-stacks"));
    assert_string_equal(config__str(c, "output-dir"), "/o");
    /* --no-NAME: a boolean off, whatever came before it. */
    char *on[] = {"--kernel-stacks"}, *off[] = {"--no-kernel-stacks"};
    assert_int_equal(config__load_args(c, 1, on, err, sizeof(err)), 0);
    assert_true(config__bool(c, "kernel-stacks"));
    assert_int_equal(config__load_args(c, 1, off, err, sizeof(err)), 0);
    assert_false(config__bool(c, "kernel-stacks"));
    unlink(path);
    config__free(c);
}

static void test_errors_are_stated(void **state)
{
    (void)state;
    char err[256];
    struct config *c = config__new(defs, 3);

    char *a1[] = {"--nope"};
    assert_int_equal(config__load_args(c, 1, a1, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "unknown flag '--nope'"));
    char *a2[] = {"--sample-rate", "0"};
    assert_int_equal(config__load_args(c, 2, a2, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "from 1 to 1000"));
    char *a3[] = {"--sample-rate"};
    assert_int_equal(config__load_args(c, 1, a3, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "needs a value"));
    char *a4[] = {"stray"};
    assert_int_equal(config__load_args(c, 1, a4, err, sizeof(err)), -1);
    char *a5[] = {"--sample_rate=5"};
    assert_int_equal(config__load_args(c, 1, a5, err, sizeof(err)), -1);
    /* --no- only before a boolean, and bare. */
    char *a6[] = {"--no-sample-rate"};
    assert_int_equal(config__load_args(c, 1, a6, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "unknown flag '--no-sample-rate'"));
    char *a7[] = {"--no-kernel-stacks=true"};
    assert_int_equal(config__load_args(c, 1, a7, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "unknown flag '--no-kernel-stacks'"));
    char *a8[] = {"--no-"};
    assert_int_equal(config__load_args(c, 1, a8, err, sizeof(err)), -1);
    /* Nothing above changed the value. */
    assert_int_equal(config__int(c, "sample-rate"), 100);

    char *path = write_tmp("bogus = 1\n");
    assert_int_equal(config__load_file(c, path, true, err, sizeof(err)), -1);
    assert_non_null(strstr(err, ":1: unknown key 'bogus'"));
    unlink(path);
    path = write_tmp("sample_rate\n");
    assert_int_equal(config__load_file(c, path, true, err, sizeof(err)), -1);
    unlink(path);
    /* A missing default file is fine; a missing named one is not. */
    assert_int_equal(config__load_file(c, "/nonexistent/agent.conf", false, err, sizeof(err)), 0);
    assert_int_equal(config__load_file(c, "/nonexistent/agent.conf", true, err, sizeof(err)), -1);
    setenv("CODEXRAY_KERNEL_STACKS", "maybe", 1);
    assert_int_equal(config__load_env(c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "CODEXRAY_KERNEL_STACKS"));
    unsetenv("CODEXRAY_KERNEL_STACKS");
    config__free(c);
    config__free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_precedence_file_env_flags),
        cmocka_unit_test(test_errors_are_stated),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}

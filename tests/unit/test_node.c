/* node: whether /proc shows the host's processes, where the host's root
 * is; preflight: what a refused bpf() or perf_event_open() is put down to.
 * A fake /proc of symlinks (readlink reads a dangling link as the kernel's
 * namespace links read): no root, no containers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../agent/node.h"
#include "../../agent/preflight.h"

static char root[64];

static void fake_ns(const char *pid, const char *ns, const char *target)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/%s", root, pid);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%s/ns", root, pid);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%s/ns/%s", root, pid, ns);
    unlink(path);
    assert_int_equal(symlink(target, path), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/cx-node-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_init_pid_ns(void **state)
{
    (void)state;
    assert_true(node__is_init_pid_ns("pid:[4026531836]"));
    assert_false(node__is_init_pid_ns("pid:[4026532210]"));
    assert_false(node__is_init_pid_ns("pid:[4026531836"));
    assert_false(node__is_init_pid_ns("mnt:[4026531836]"));
    assert_false(node__is_init_pid_ns(""));
}

static void test_check_pid_ns(void **state)
{
    char err[1024];

    (void)state;
    /* The host's /proc: PID 1 in the initial namespace, the agent anywhere
     * (under systemd-nspawn with the host's /proc bound, its own differs). */
    fake_ns("1", "pid", "pid:[4026531836]");
    fake_ns("self", "pid", "pid:[4026532210]");
    assert_int_equal(node__check_pid_ns(root, err, sizeof(err)), 0);

    /* A container's /proc (docker run without --pid host): refused, and
     * the message says what fixes it. */
    fake_ns("1", "pid", "pid:[4026532210]");
    err[0] = '\0';
    assert_int_equal(node__check_pid_ns(root, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "pid:[4026532210]"));
    assert_non_null(strstr(err, "--pid host"));
    assert_non_null(strstr(err, "hostPID: true"));

    /* PID 1 cannot be looked at: pid 2 (kthreadd in the host's /proc)
     * tells, else the agent's own namespace decides. */
    char path[256];
    snprintf(path, sizeof(path), "%s/1/ns/pid", root);
    unlink(path);
    assert_int_equal(node__check_pid_ns(root, err, sizeof(err)), -1);
    fake_ns("2", "pid", "pid:[4026531836]");
    assert_int_equal(node__check_pid_ns(root, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/2/ns/pid", root);
    unlink(path);
    fake_ns("self", "pid", "pid:[4026531836]");
    assert_int_equal(node__check_pid_ns(root, err, sizeof(err)), 0);
}

static void test_host_root(void **state)
{
    char out[256] = "x";

    (void)state;
    /* No PID 1 to compare with: the agent's own root. */
    node__host_root(root, out, sizeof(out));
    assert_string_equal(out, "");
    /* The real /proc, where the tests share PID 1's mount namespace, or do
     * not and then read through its root. */
    node__host_root("/proc", out, sizeof(out));
    assert_true(strcmp(out, "") == 0 || strcmp(out, "/proc/1/root") == 0);
}

static void test_hostname(void **state)
{
    char out[256], mine[256];

    (void)state;
    /* A /proc without PID 1: the agent's own name. */
    node__hostname(root, out, sizeof(out));
    assert_int_equal(gethostname(mine, sizeof(mine)), 0);
    assert_string_equal(out, mine);
}

static void test_explain(void **state)
{
    char m[2048];

    (void)state;
    /* Capable, refused: seccomp first, with the flags that fix it; never a
     * kernel version. */
    preflight__explain("bpf()", EPERM, true, -100, m, sizeof(m));
    assert_non_null(strstr(m, "bpf() was refused (Operation not permitted)"));
    assert_non_null(strstr(m, "seccomp"));
    assert_non_null(strstr(m, "--security-opt seccomp=unconfined"));
    assert_non_null(strstr(m, "Unconfined"));
    assert_non_null(strstr(m, "lockdown"));
    assert_null(strstr(m, "Linux 5"));
    assert_null(strstr(m, "paranoid"));

    preflight__explain("perf_event_open()", EACCES, true, 3, m, sizeof(m));
    assert_non_null(strstr(m, "perf_event_open() was refused (Permission denied)"));
    assert_non_null(strstr(m, "seccomp=unconfined"));
    assert_non_null(strstr(m, "kernel.perf_event_paranoid=3"));
    assert_null(strstr(m, "lockdown"));
    /* paranoid 2 or unknown is not a cause worth naming. */
    preflight__explain("perf_event_open()", EACCES, true, 2, m, sizeof(m));
    assert_null(strstr(m, "paranoid"));

    /* Not capable: the capability, in the names engines know. */
    preflight__explain("perf_event_open()", EPERM, false, 2, m, sizeof(m));
    assert_non_null(strstr(m, "CAP_PERFMON"));
    assert_non_null(strstr(m, "--cap-add SYS_ADMIN"));
    preflight__explain("bpf()", EPERM, false, -100, m, sizeof(m));
    assert_non_null(strstr(m, "CAP_BPF"));

    /* Another error is said as it is. */
    preflight__explain("bpf()", EINVAL, true, -100, m, sizeof(m));
    assert_string_equal(m, "bpf() failed: Invalid argument");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_pid_ns), cmocka_unit_test(test_check_pid_ns),
        cmocka_unit_test(test_host_root),   cmocka_unit_test(test_hostname),
        cmocka_unit_test(test_explain),
    };
    return cmocka_run_group_tests_name("node", tests, setup, teardown);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../agent/runtimes/jit/jvm_attach.h"

/* A pid no process can have (above pid_max's limit): the socket path is
 * ours alone, and no signal is sent as long as the socket is there. */
#define FAKE_NSPID 4194399u

struct server {
    int ls;
    char got[128];
    size_t n;
    const char *answer;
};

/* Plays the JVM's side of the attach socket: reads one request, answers. */
static void *serve(void *arg)
{
    struct server *sv = arg;
    int c = accept(sv->ls, NULL, NULL);

    if (c < 0)
        return NULL;
    for (;;) {
        ssize_t r = read(c, sv->got + sv->n, sizeof(sv->got) - sv->n);
        if (r <= 0)
            break;
        sv->n += r;
        /* Complete: version, command and three arguments, five NULs. */
        size_t nuls = 0;
        for (size_t i = 0; i < sv->n; i++)
            nuls += sv->got[i] == '\0';
        if (nuls >= 5)
            break;
    }
    if (write(c, sv->answer, strlen(sv->answer)) < 0)
        fail();
    close(c);
    return NULL;
}

static void fake_proc(char *dir, size_t len)
{
    char p[256];
    FILE *f;

    snprintf(dir, len, "/tmp/cx-jvm-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof(p), "%s/77", dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/77/ns", dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/77/ns/mnt", dir);
    assert_int_equal(symlink("/proc/self/ns/mnt", p), 0);
    snprintf(p, sizeof(p), "%s/77/status", dir);
    f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f, "Name:\tjava\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nNSpid:\t77\t%u\n", FAKE_NSPID);
    fclose(f);
    snprintf(p, sizeof(p), "%s/77/cmdline", dir);
    f = fopen(p, "w");
    assert_non_null(f);
    fwrite("java\0-XX:+PreserveFramePointer\0-cp\0x\0", 1, 38, f);
    fclose(f);
}

static void run_attach(const char *answer, int want, const char *want_reply)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct server sv = {.answer = answer};
    char dir[64], cmd[128], reply[64];
    pthread_t t;

    fake_proc(dir, sizeof(dir));
    snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/.java_pid%u", FAKE_NSPID);
    unlink(sa.sun_path);
    sv.ls = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(sv.ls >= 0);
    assert_int_equal(bind(sv.ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(sv.ls, 1), 0);
    assert_int_equal(pthread_create(&t, NULL, serve, &sv), 0);

    assert_int_equal(jvm__write_perfmap(dir, 77, 3000, reply, sizeof(reply), NULL), want);
    pthread_join(t, NULL);
    /* The request, byte for byte, as jcmd sends it. */
    static const char request[] = "1\0jcmd\0Compiler.perfmap\0\0";
    assert_int_equal(sv.n, sizeof(request));
    assert_memory_equal(sv.got, request, sizeof(request));
    assert_string_equal(reply, want_reply);
    close(sv.ls);
    unlink(sa.sun_path);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_attach_protocol(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip(); /* setns needs CAP_SYS_ADMIN, even into its own namespace */
        return;
    }
    run_attach("0\n", 0, "0\n");
    run_attach("1\nCompiler.perfmap is not available\n", -EPROTO,
               "1\nCompiler.perfmap is not available\n");
}

static void test_no_process(void **state)
{
    (void)state;
    char reply[16] = "x";

    assert_int_equal(jvm__write_perfmap("/nonexistent", 77, 100, reply, sizeof(reply), NULL),
                     -ESRCH);
    assert_string_equal(reply, "");
}

/* A failed call in the attach child is named, with its errno: here the
 * "mount namespace" is a network namespace (setns says EINVAL), then a
 * plain directory stands for the JVM's /proc entry (no socket, so the child
 * signals it: the pidfd call says EBADF, and no pid is signalled instead). */
static void test_failure_named(void **state)
{
    (void)state;
    struct jvm_attach_fail fail;
    char dir[64], p[256], cmd[128], reply[16];

    fake_proc(dir, sizeof(dir));
    snprintf(p, sizeof(p), "%s/77/ns/mnt", dir);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(symlink("/proc/self/ns/net", p), 0);
    assert_int_equal(jvm__write_perfmap(dir, 77, 1000, reply, sizeof(reply), &fail), -EINVAL);
    assert_int_equal(fail.step, JVM_STEP_SETNS);
    assert_int_equal(fail.err, EINVAL);
    assert_string_equal(reply, "");
    assert_non_null(strstr(jvm__step_name(fail.step), "setns"));

    if (geteuid() == 0) { /* setns into a mount namespace needs CAP_SYS_ADMIN */
        assert_int_equal(unlink(p), 0);
        assert_int_equal(symlink("/proc/self/ns/mnt", p), 0);
        snprintf(p, sizeof(p), "/tmp/.java_pid%u", FAKE_NSPID);
        unlink(p);
        assert_int_equal(jvm__write_perfmap(dir, 77, 1000, reply, sizeof(reply), &fail), -EBADF);
        assert_int_equal(fail.step, JVM_STEP_SIGNAL);
        assert_int_equal(fail.err, EBADF);
        snprintf(p, sizeof(p), "/tmp/.attach_pid%u", FAKE_NSPID);
        assert_int_equal(access(p, F_OK), -1); /* the child removed what it made */
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* The hints name what a user changes: the unit's options, capabilities. */
static void test_fail_hint(void **state)
{
    (void)state;
    struct jvm_attach_fail f = {JVM_STEP_SETNS, EPERM};

    assert_non_null(strstr(jvm__fail_hint(&f), "RestrictNamespaces="));
    assert_non_null(strstr(jvm__fail_hint(&f), "CAP_SYS_CHROOT"));
    f = (struct jvm_attach_fail){JVM_STEP_SETUID, EPERM};
    assert_non_null(strstr(jvm__fail_hint(&f), "CAP_SETUID"));
    f = (struct jvm_attach_fail){JVM_STEP_SIGNAL, EINVAL};
    assert_non_null(strstr(jvm__fail_hint(&f), "PID namespace"));
    f = (struct jvm_attach_fail){JVM_STEP_WAIT_SOCKET, 0};
    assert_non_null(strstr(jvm__fail_hint(&f), "DisableAttachMechanism"));
    f = (struct jvm_attach_fail){JVM_STEP_CHDIR, ENOENT};
    assert_string_equal(jvm__fail_hint(&f), "");
}

static void test_has_arg(void **state)
{
    (void)state;
    char dir[64], cmd[128];

    fake_proc(dir, sizeof(dir));
    assert_true(jvm__has_arg(dir, 77, "-XX:+PreserveFramePointer"));
    assert_true(jvm__has_arg(dir, 77, "java"));
    assert_false(jvm__has_arg(dir, 77, "-XX:+Preserve"));
    assert_false(jvm__has_arg(dir, 77, "-Xrs"));
    assert_false(jvm__has_arg(dir, 78, "java"));
    /* Told apart: read and absent, read and present, not readable (gone). */
    assert_int_equal(jvm__arg_state(dir, 77, "-Xrs"), 0);
    assert_int_equal(jvm__arg_state(dir, 77, "-XX:+PreserveFramePointer"), 1);
    assert_int_equal(jvm__arg_state(dir, 78, "-XX:+PreserveFramePointer"), -1);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attach_protocol), cmocka_unit_test(test_no_process),
        cmocka_unit_test(test_failure_named),   cmocka_unit_test(test_fail_hint),
        cmocka_unit_test(test_has_arg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

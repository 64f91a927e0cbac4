/* cmdline_name: an interpreter's process named by the script, module, jar
 * or class it runs, from the text of /proc/PID/cmdline; every shape the
 * rules name, the ones they leave to the executable's name, and hostile
 * command lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "../../agent/procs/cmdline_name.h"

/* A command line as the kernel gives it: the literal's bytes, NULs
 * included, without the literal's own final NUL. */
#define CL(lit) lit, sizeof(lit) - 1

/* The name derived for exe and a command line, or "" when none. */
static const char *named(const char *exe, const char *cmdline, size_t len)
{
    static char out[256];

    memset(out, 'x', sizeof(out));
    if (!cmdline_name__derive(exe, cmdline, len, out, sizeof(out)))
        return "";
    assert_true(strlen(out) <= CMDLINE_NAME_MAX);
    return out;
}

static void test_interpreters(void **state)
{
    (void)state;
    static const char *const yes[] = {
        "python",      "python2", "python3", "python3.11", "python3.11d", "python3.13t",
        "python3.7dm", "pypy",    "pypy3",   "pypy3.10",   "pypy3.10-c",  "java",
        "node",        "nodejs",  "ruby",    "ruby3.1",    "perl",        "perl5.36.0",
        "sh",          "bash",    "dash",    "zsh",        "ksh",         "mksh"};
    static const char *const no[] = {
        "python-foo", "python3.11-config", "pythonista", "javac", "nodemon",   "rubyx",
        "perlbug",    "bashbug",           "php",        "",      "cpu_split", "3.11",
        "python3."};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (!cmdline_name__interpreter(yes[i]))
            fail_msg("%s not an interpreter", yes[i]);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        if (cmdline_name__interpreter(no[i]))
            fail_msg("%s taken for an interpreter", no[i]);
    }
    assert_false(cmdline_name__interpreter(NULL));
}

static void test_python(void **state)
{
    (void)state;
    /* A script with a shebang: the kernel's argv is [interpreter, script, args]. */
    assert_string_equal(named("python3.11", CL("/usr/bin/python3\0/usr/bin/pylint\0x.py\0")),
                        "pylint");
    assert_string_equal(named("python3.11", CL("python3\0/usr/bin/pylint\0")), "pylint");
    assert_string_equal(named("python3.11", CL("python3\0-m\0pylint\0src\0")), "pylint");
    assert_string_equal(named("python3.11", CL("python3\0-mpylint\0")), "pylint");
    assert_string_equal(named("python3.11", CL("python3\0-um\0http.server\08000\0")),
                        "http.server");
    assert_string_equal(named("python3.11", CL("python\0-u\0app.py\0--port\08080\0")), "app");
    assert_string_equal(named("python3.11", CL("/venv/bin/python\0./app.pyw\0")), "app");
    assert_string_equal(named("python3.11", CL("python3\0manage.py\0runserver\0")), "manage");
    /* Options with a value, attached or not; a shebang's options in one token. */
    assert_string_equal(
        named("python3.11", CL("python3\0-W\0ignore\0-X\0dev\0-Wdefault\0-B\0srv.py\0")), "srv");
    assert_string_equal(named("python3.11", CL("/usr/bin/python3\0-W ignore\0/opt/x/tool\0")),
                        "tool");
    assert_string_equal(named("python3.11", CL("python3\0--check-hash-based-pycs\0always\0a.py\0")),
                        "a");
    assert_string_equal(named("python3.11", CL("python3\0--\0job.py\0")), "job");
    /* A package or directory run: its name. */
    assert_string_equal(named("python3.11", CL("python3\0/srv/billing/__main__.py\0")), "billing");
    assert_string_equal(named("python3.11", CL("python3\0/srv/billing/\0")), "billing");
    assert_string_equal(named("python3.11", CL("python3\0app.zip\0")), "app.zip");
    assert_string_equal(named("pypy3.10-c", CL("pypy3\0bench.py\0")), "bench");
    assert_string_equal(named("python3.13t", CL("python3.13t\0bench.py\0")), "bench");
    /* No script: inline code, stdin, a REPL, a version query. */
    assert_string_equal(named("python3.11", CL("python3\0-c\0import app; app.main()\0")), "");
    assert_string_equal(named("python3.11", CL("python3\0-uc\0pass\0")), "");
    assert_string_equal(named("python3.11", CL("python3\0-\0")), "");
    assert_string_equal(named("python3.11", CL("python3\0")), "");
    assert_string_equal(named("python3.11", CL("python3\0-i\0")), "");
    assert_string_equal(named("python3.11", CL("python3\0-V\0")), "");
    assert_string_equal(named("python3.11", CL("python3\0-m\0")), "");
    assert_string_equal(named("python3.11", CL("python3\0-W\0")), "");
}

static void test_java(void **state)
{
    (void)state;
    assert_string_equal(named("java", CL("java\0-jar\0app.jar\0")), "app");
    assert_string_equal(
        named("java", CL("/usr/lib/jvm/java-17/bin/java\0-Xmx1g\0-Dspring.profiles.active=prod\0"
                         "-XX:+UseG1GC\0--add-opens\0java.base/java.lang=ALL-UNNAMED\0-jar\0"
                         "/srv/spring-petclinic-3.1.0-SNAPSHOT.jar\0--server.port=8080\0")),
        "spring-petclinic");
    assert_string_equal(named("java", CL("java\0-jar\0h2-2.1.214.jar\0")), "h2");
    assert_string_equal(named("java", CL("java\0-jar\0my-app-2fa.jar\0")), "my-app-2fa");
    assert_string_equal(named("java", CL("java\0-jar\0app-17.jar\0")), "app-17");
    assert_string_equal(
        named("java", CL("java\0-cp\0/a.jar:/b.jar\0-Xss2m\0com.example.billing.Main\0x\0")),
        "Main");
    assert_string_equal(named("java", CL("java\0-classpath\0lib/*\0-ea\0-server\0"
                                         "org.apache.zookeeper.server.quorum.QuorumPeerMain\0")),
                        "QuorumPeerMain");
    assert_string_equal(named("java", CL("java\0--class-path\0x\0-javaagent:/a.jar=x\0"
                                         "-verbose:gc\0--add-opens=a/b=c\0kafka.Kafka\0")),
                        "Kafka");
    assert_string_equal(named("java", CL("java\0-m\0com.example.app/com.example.app.Server\0")),
                        "Server");
    assert_string_equal(named("java", CL("java\0-p\0mods\0--module\0com.example.app\0")),
                        "com.example.app");
    assert_string_equal(named("java", CL("java\0--module=com.example.app/com.example.App\0")),
                        "App");
    assert_string_equal(named("java", CL("java\0--source\0"
                                         "21\0scripts/Hello.java\0")),
                        "Hello");
    assert_string_equal(named("java", CL("java\0Outer$Inner\0")), "Outer_Inner");
    /* No main class: a version query, options from a file, a cut command line. */
    assert_string_equal(named("java", CL("java\0-version\0")), "");
    assert_string_equal(named("java", CL("java\0@/tmp/args\0")), "");
    assert_string_equal(named("java", CL("java\0-cp\0")), "");
    assert_string_equal(named("java", CL("java\0-jar\0")), "");
    assert_string_equal(named("java", CL("java\0-jar\0.jar\0")), "");
    assert_string_equal(named("java", CL("java\0com.example.\0")), "");
}

static void test_node(void **state)
{
    (void)state;
    assert_string_equal(named("node", CL("node\0server.js\0")), "server");
    assert_string_equal(named("node", CL("/usr/bin/node\0/srv/app/bin/www\0")), "www");
    assert_string_equal(named("node", CL("node\0-r\0dotenv/config\0--require\0ts-node/register\0"
                                         "--inspect=0.0.0.0:9229\0--enable-source-maps\0"
                                         "dist/main.mjs\0--port\0")),
                        "main");
    assert_string_equal(named("node", CL("node\0--max-old-space-size=4096\0--import\0tsx\0"
                                         "--env-file\0.env\0api.ts\0")),
                        "api");
    assert_string_equal(named("node", CL("node\0/usr/bin/npm\0start\0")), "npm");
    assert_string_equal(named("nodejs", CL("nodejs\0worker.cjs\0")), "worker");
    assert_string_equal(named("node", CL("node\0-e\0require('x')\0")), "");
    assert_string_equal(named("node", CL("node\0--eval=1\0")), "");
    assert_string_equal(named("node", CL("node\0-pe\0"
                                         "1+1\0")),
                        "");
    assert_string_equal(named("node", CL("node\0")), "");
    assert_string_equal(named("node", CL("node\0.\0")), "");
    /* A value of an option we do not know taken for the script: digits are
     * no name. */
    assert_string_equal(named("node", CL("node\0--some-new-option\0"
                                         "4096\0app.js\0")),
                        "");
}

static void test_others(void **state)
{
    (void)state;
    assert_string_equal(named("ruby3.1", CL("ruby\0-Ilib\0-r\0bundler/setup\0-W0\0bin/rails\0s\0")),
                        "rails");
    assert_string_equal(named("ruby", CL("ruby\0-S\0rake\0db:migrate\0")), "rake");
    assert_string_equal(named("ruby", CL("ruby\0-e\0puts 1\0")), "");
    assert_string_equal(named("perl", CL("/usr/bin/perl\0-w\0-MData::Dumper\0-I\0lib\0"
                                         "/usr/sbin/munin-node.pl\0")),
                        "munin-node");
    /* -Mfeature=say holds an 'e': attached to -M, not perl's -e. */
    assert_string_equal(named("perl", CL("perl\0-Mfeature=say\0x.pl\0")), "x");
    assert_string_equal(named("perl", CL("perl\0-le\0print 1\0")), "");
    assert_string_equal(named("perl", CL("perl\0-l0\0-0777\0-i.bak\0x.pl\0")), "x");
    assert_string_equal(named("ruby", CL("ruby\0-W:no-deprecated\0app.rb\0")), "app");
    assert_string_equal(named("ruby", CL("ruby\0-0777ne\0print\0")), "");
    assert_string_equal(named("bash", CL("/bin/bash\0/usr/local/bin/backup.sh\0--full\0")),
                        "backup");
    assert_string_equal(named("dash", CL("/bin/sh\0-e\0-o\0nounset\0+o\0xtrace\0./run\0")), "run");
    assert_string_equal(named("bash", CL("bash\0--norc\0--rcfile\0/x\0job.bash\0")), "job");
    assert_string_equal(named("dash", CL("sh\0-c\0exec foo\0")), "");
    assert_string_equal(named("bash", CL("-bash\0")), "");
    assert_string_equal(named("bash", CL("bash\0-s\0arg\0")), "");
    assert_string_equal(named("bash", CL("bash\0-ex\0")), "");
}

/* An executable that is no interpreter, or an argv[0] that is not the
 * interpreter's (exec -a, setproctitle): the executable's name stands. */
static void test_not_ours(void **state)
{
    (void)state;
    assert_string_equal(named("cpu_split", CL("cpu_split\0app.py\0")), "");
    assert_string_equal(named(NULL, CL("python3\0app.py\0")), "");
    assert_string_equal(named("python3.11", CL("gunicorn: worker [app]\0\0\0\0\0")), "");
    assert_string_equal(named("python3.11", CL("gunicorn: master [app:app]")), "");
    assert_string_equal(named("python3.11", CL("celery\0worker\0")), "");
    assert_string_equal(named("python3.11", CL("node\0app.py\0")), "");
    assert_string_equal(named("java", CL("python3\0-jar\0a.jar\0")), "");
    assert_string_equal(named("python3.11", NULL, 0), "");
    assert_string_equal(named("python3.11", "", 0), "");
}

static void test_hostile(void **state)
{
    (void)state;
    char out[16];

    /* No NUL at the end (the kernel's text of a rewritten command line). */
    assert_string_equal(named("python3.11", CL("python3\0app.py")), "app");
    /* Only NULs; an empty argv[0]. */
    assert_string_equal(named("python3.11", CL("\0\0\0\0")), "");
    assert_string_equal(named("python3.11", CL("python3\0\0app.py\0")), "");
    /* Control characters, escape sequences, non-UTF-8, spaces, slashes: '_'. */
    assert_string_equal(named("python3.11", CL("python3\0/x/my app\x1b[31m\xff\xfe.py\0")),
                        "my_app__31m__");
    assert_string_equal(named("python3.11", CL("python3\0-m\0a/../../b\n\0")), "a_.._.._b_");
    /* Nothing but such bytes: no name. */
    assert_string_equal(named("python3.11", CL("python3\0\x1b\x07\xff.py\0")), "");
    assert_string_equal(named("python3.11", CL("python3\0/\0")), "");
    assert_string_equal(named("python3.11", CL("python3\0.py\0")), "");
    assert_string_equal(named("python3.11", CL("python3\0---\0")), "");
    /* A name far longer than a name: cut at CMDLINE_NAME_MAX, and at what
     * the caller has room for. */
    size_t big = 100000;
    char *cl = malloc(big);
    assert_non_null(cl);
    memcpy(cl, "python3\0", 8);
    memset(cl + 8, 'a', big - 8);
    const char *n = named("python3.11", cl, big);
    assert_int_equal(strlen(n), CMDLINE_NAME_MAX);
    assert_true(cmdline_name__derive("python3.11", cl, big, out, sizeof(out)));
    assert_int_equal(strlen(out), sizeof(out) - 1);
    assert_false(cmdline_name__derive("python3.11", cl, big, out, 0));
    assert_false(cmdline_name__derive("python3.11", cl, big, out, 1));
    /* Cut to where no letter or digit is left: no name. */
    assert_false(cmdline_name__derive("python3.11", CL("python3\0__a.py\0"), out, 3));
    assert_true(cmdline_name__derive("python3.11", CL("python3\0__a.py\0"), out, 4));
    assert_string_equal(out, "__a");
    /* Options by the thousand before the script: a thousand are looked
     * through, more are given up on. */
    size_t at = 8;
    for (int i = 0; i < 1000; i++, at += 3)
        memcpy(cl + at, "-B\0", 3);
    memcpy(cl + at, "app.py\0", 7);
    assert_string_equal(named("python3.11", cl, at + 7), "app");
    for (int i = 0; i < 30000; i++, at += 3)
        memcpy(cl + at, "-B\0", 3);
    memcpy(cl + at, "app.py\0", 7);
    assert_string_equal(named("python3.11", cl, at + 7), "");
    free(cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interpreters), cmocka_unit_test(test_python),
        cmocka_unit_test(test_java),         cmocka_unit_test(test_node),
        cmocka_unit_test(test_others),       cmocka_unit_test(test_not_ours),
        cmocka_unit_test(test_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

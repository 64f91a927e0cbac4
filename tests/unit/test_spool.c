/* spool: the form a profile waits in (memory or disk), the query string
 * read back from it, the directory's order and bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/spool.h"

static void format(struct buf *b, const char *service, const char *host, const char *body)
{
    struct identity id = {0};

    snprintf(id.service, sizeof(id.service), "%s", service);
    snprintf(id.systemd_unit, sizeof(id.systemd_unit), "%s.service", service);
    buf__init(b, 1 << 20);
    assert_int_equal(spool__format(b, &id, 1234, host, body, strlen(body)), 0);
}

/* What spool__format writes, spool__query reads back: every value
 * URL-encoded (a hostile name cannot add a parameter), the body intact. */
static void test_round_trip(void **state)
{
    struct buf b;
    char q[SPOOL_HEADER_MAX], why[256];
    size_t body;

    (void)state;
    format(&b, "web&admin=1 x/y", "h 1\n", "BODY\n\nbytes");
    assert_int_equal(spool__query(NULL, &b, q, sizeof(q), &body, why, sizeof(why)), 0);
    assert_string_equal(q, "service=web%26admin%3D1%20x%2Fy&host=h%201%0A&pid=1234&"
                           "systemd_unit=web%26admin%3D1%20x%2Fy.service");
    assert_int_equal(b.len - body, strlen("BODY\n\nbytes"));
    assert_memory_equal(b.data + body, "BODY\n\nbytes", b.len - body);
    buf__free(&b);
}

/* A file edited or cut short is refused with a reason, not sent. */
static void test_refused(void **state)
{
    static const char *const bad[] = {
        "",                                     /* empty */
        "codexray-spool 2\nservice=a\n\nx",     /* another version */
        "codexray-spool 1\nservice=a\n",        /* header not ended */
        "codexray-spool 1\nadmin=1\n\nx",       /* a key we never write */
        "codexray-spool 1\nservice=a&b=c\n\nx", /* a value not encoded */
        "codexray-spool 1\nservice a\n\nx",     /* no '=' */
    };
    char q[SPOOL_HEADER_MAX], why[256];
    size_t body;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct buf b;
        buf__init(&b, 4096);
        assert_int_equal(buf__append(&b, bad[i], strlen(bad[i])), 0);
        why[0] = '\0';
        assert_int_equal(spool__query("1~2.cxspool", &b, q, sizeof(q), &body, why, sizeof(why)),
                         -1);
        assert_true(why[0] != '\0');
        buf__free(&b);
    }
}

/* An earlier agent's file: the identity is in its name. */
static void test_legacy_name(void **state)
{
    struct buf b;
    char q[SPOOL_HEADER_MAX], why[256];
    size_t body = 99;

    (void)state;
    buf__init(&b, 4096);
    assert_int_equal(buf__append(&b, "gz", 2), 0);
    assert_int_equal(spool__query("00000000000000000001~42~old%20host~my%2Fsvc.pb.gz", &b, q,
                                  sizeof(q), &body, why, sizeof(why)),
                     0);
    assert_string_equal(q, "service=my%2Fsvc&host=old%20host&pid=42");
    assert_int_equal(body, 0);
    buf__free(&b);
}

/* Files are listed oldest first, and writing past the bound drops the
 * oldest. */
static void test_write_order_and_bound(void **state)
{
    char dir[] = "/tmp/cx-spool-test-XXXXXX";
    struct spooled *v;
    size_t n;
    uint64_t total, seq = 0, kept = 0;
    struct buf b;

    (void)state;
    assert_non_null(mkdtemp(dir));
    format(&b, "svc", "h", "0123456789");
    for (int i = 0; i < 5; i++)
        assert_int_equal(spool__write(dir, &seq, 100 + i, &b, 1 << 20, &kept), 0);
    assert_int_equal(kept, 5 * b.len);
    assert_int_equal(spool__list(dir, &v, &n, &total), 0);
    assert_int_equal(n, 5);
    assert_int_equal(total, 5 * b.len);
    for (size_t i = 0; i < n; i++) {
        char want[32];
        snprintf(want, sizeof(want), "~%zu.cxspool", 100 + i);
        assert_non_null(strstr(v[i].name, want));
    }
    free(v);
    /* Room for three: the three oldest go, so the new one fits beside two. */
    assert_int_equal(spool__write(dir, &seq, 200, &b, 3 * b.len, &kept), 0);
    assert_int_equal(kept, 3 * b.len);
    assert_int_equal(spool__list(dir, &v, &n, &total), 0);
    assert_int_equal(n, 3);
    assert_non_null(strstr(v[0].name, "~103.cxspool"));
    assert_non_null(strstr(v[2].name, "~200.cxspool"));
    for (size_t i = 0; i < n; i++) {
        char path[2048];
        snprintf(path, sizeof(path), "%s/%s", dir, v[i].name);
        unlink(path);
    }
    free(v);
    rmdir(dir);
    buf__free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_legacy_name),
        cmocka_unit_test(test_write_order_and_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The server's debuginfod paths: what is served, and hostile ids refused
 * before they come near a file name (server/debuginfod.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "../../common/debugfile.h"
#include "../../server/debuginfod.h"

static void test_parse_path(void **state)
{
    (void)state;
    char id[DEBUGFILE_ID_MAX + 1];
    const char *kind = NULL;

    assert_int_equal(dbgsrv__parse_path("/debuginfod/buildid/"
                                        "459c42dee68c3e90ee9fa9ef063597ff98368475/debuginfo",
                                        id, &kind),
                     0);
    assert_string_equal(id, "459c42dee68c3e90ee9fa9ef063597ff98368475");
    assert_string_equal(kind, "debuginfo");
    assert_int_equal(
        dbgsrv__parse_path("/debuginfod/buildid/0011223344556677/executable", id, &kind), 0);
    assert_string_equal(kind, "executable");
    static const char *const bad[] = {
        "/debuginfod/buildid/0011223344556677/source/etc/passwd", /* sources: not served */
        "/debuginfod/buildid/0011223344556677/section/.text",
        "/debuginfod/buildid/0011223344556677/debuginfo/",
        "/debuginfod/buildid/0011223344556677/debuginfox",
        "/debuginfod/buildid/0011223344556677",
        "/debuginfod/buildid/../../../../etc/passwd/debuginfo",
        "/debuginfod/buildid/..%2f..%2fetc/debuginfo",
        "/debuginfod/buildid/00112233445566AA/debuginfo", /* uppercase */
        "/debuginfod/buildid/001122334455667/debuginfo",  /* odd */
        "/debuginfod/buildid//debuginfo",
        "/debuginfod/buildid/0011223344556677//debuginfo",
        "/debuginfod/buildid/" /* 130 digits */
        "0000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "000000000000000000000000000000000000000000000000/debuginfo",
        "/debuginfod/0011223344556677/debuginfo",
        "/api/v1/profiles",
        "",
        NULL,
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(dbgsrv__parse_path(bad[i], id, &kind), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

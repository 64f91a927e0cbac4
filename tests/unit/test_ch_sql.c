/* ch_sql: the one function quoting values into ClickHouse SQL, and the
 * reader of TabSeparated answers; and store_clickhouse__open's reading of
 * the --clickhouse list, which needs no ClickHouse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "../../server/ch_sql.h"
#include "../../server/store.h"

/* ClickHouse's reading of a quoted literal (readQuotedString: a backslash
 * takes the next byte, \xHH a byte in hex, \n \t \r \b \f \0 \a \v \e their
 * controls) written out again here, independently of the quoter. Returns
 * the bytes read in out, or -1 when the literal does not end where it
 * should (its closing quote is not the last byte). */
static int unquote(const char *q, size_t len, char *out)
{
    size_t i = 1, n = 0;

    if (len < 2 || q[0] != '\'')
        return -1;
    while (i < len) {
        char c = q[i++];
        if (c == '\'')
            return i == len ? (int)n : -1;
        if (c == '\\') {
            if (i >= len)
                return -1;
            c = q[i++];
            if (c == 'x') {
                unsigned v;
                if (i + 2 > len || sscanf(q + i, "%2x", &v) != 1)
                    return -1;
                c = (char)v;
                i += 2;
            } else if (c == 'n') {
                c = '\n';
            } else if (c == 't') {
                c = '\t';
            } else if (c == '0') {
                c = 0;
            }
        }
        out[n++] = c;
    }
    return -1;
}

static const char *const hostile[] = {
    "plain",
    "",
    "o'brien",
    "'",
    "\\",
    "\\'",
    "'; DROP TABLE codexray.samples; --",
    "a\\' OR 1=1 --",
    "tab\there\nnewline\rcr",
    "\x1f"
    "container_id=x\x1f",
    "\x7f\x01\x02",
    "ends with backslash\\",
    "unicode \xc3\xa9\xe2\x82\xac \xf0\x9f\x94\xa5",
    "invalid utf-8 \xff\xfe",
    "%s%n%x",
    "''''''",
    "\\x27 not a quote",
};

static void test_quote_round_trips_hostile_names(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
        struct buf b;
        char back[512];
        size_t len = strlen(hostile[i]);
        buf__init(&b, 1 << 20);
        assert_int_equal(ch_sql__quote(&b, hostile[i], len), 0);
        assert_int_equal(strlen(b.data), b.len); /* NUL-ended, no NUL inside */
        int n = unquote(b.data, b.len, back);
        assert_int_equal(n, (int)len);
        assert_memory_equal(back, hostile[i], len);
        /* No control byte goes through raw (a log line, a TSV row stay whole). */
        for (size_t j = 0; j < b.len; j++)
            assert_true((unsigned char)b.data[j] >= 0x20 && b.data[j] != 0x7f);
        buf__free(&b);
    }
}

static void test_quote_nul_and_exact_forms(void **state)
{
    struct buf b;
    char back[16];

    (void)state;
    buf__init(&b, 1 << 20);
    assert_int_equal(ch_sql__quote(&b, "a\0b", 3), 0);
    assert_string_equal(b.data, "'a\\x00b'");
    assert_int_equal(unquote(b.data, b.len, back), 3);
    assert_memory_equal(back, "a\0b", 3);
    buf__reset(&b);
    assert_int_equal(ch_sql__quote(&b, "it's \\", 6), 0);
    assert_string_equal(b.data, "'it\\'s \\\\'");
    buf__free(&b);
}

static void test_quote_respects_the_cap(void **state)
{
    struct buf b;

    (void)state;
    buf__init(&b, 10);
    assert_int_equal(ch_sql__quote(&b, "abc", 3), -E2BIG); /* 4 x 3 + 2 > 10 */
    assert_int_equal(b.len, 0);
    assert_int_equal(ch_sql__quote(&b, "ab", 2), 0);
    buf__free(&b);
}

static void test_row_binary(void **state)
{
    struct buf b;

    (void)state;
    buf__init(&b, 1 << 20);
    assert_int_equal(ch_rb__u64(&b, 0x0102030405060708ull), 0);
    assert_memory_equal(b.data, "\x08\x07\x06\x05\x04\x03\x02\x01", 8);
    buf__reset(&b);
    assert_int_equal(ch_rb__varint(&b, 300), 0); /* LEB128: 0xac 0x02 */
    assert_int_equal(b.len, 2);
    assert_memory_equal(b.data, "\xac\x02", 2);
    buf__reset(&b);
    /* A hostile string goes as its bytes, length first: nothing to escape. */
    const char *h = "'; DROP TABLE x; --\x00\n\\";
    assert_int_equal(ch_rb__str(&b, h, 22), 0);
    assert_int_equal(b.len, 23);
    assert_int_equal((unsigned char)b.data[0], 22);
    assert_memory_equal(b.data + 1, h, 22);
    buf__free(&b);
    buf__init(&b, 4);
    assert_int_equal(ch_rb__u64(&b, 1), -E2BIG);
    buf__free(&b);
}

/* Reading RowBinary answers: bytes as ClickHouse writes a row of (UInt8,
 * UInt64, Int64, Array(UInt64)), and every truncation of them refused. */
static void test_row_binary_reader(void **state)
{
    static const unsigned char row[] = {
        3,                                              /* UInt8 */
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* UInt64 */
        0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* Int64 -2 */
        2,                                              /* an array of 2 */
        1,    0,    0,    0,    0,    0,    0,    0,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    const unsigned char *el;
    struct ch_rbr r;
    uint64_t u, n;
    int64_t i;
    uint8_t k;

    (void)state;
    ch_rbr__init(&r, row, sizeof(row));
    assert_int_equal(ch_rbr__u8(&r, &k), 0);
    assert_int_equal(k, 3);
    assert_int_equal(ch_rbr__u64(&r, &u), 0);
    assert_true(u == 0x0102030405060708ull);
    assert_int_equal(ch_rbr__i64(&r, &i), 0);
    assert_true(i == -2);
    assert_int_equal(ch_rbr__u64_array(&r, &el, &n, 2), 0);
    assert_true(n == 2 && ch_rbr__le64(el) == 1 && ch_rbr__le64(el + 8) == UINT64_MAX);
    assert_true(ch_rbr__done(&r));
    assert_int_equal(ch_rbr__u8(&r, &k), -EBADMSG);
    /* Past max, and every cut of the row: refused, nothing read past it. */
    ch_rbr__init(&r, row + 17, sizeof(row) - 17);
    assert_int_equal(ch_rbr__u64_array(&r, &el, &n, 1), -EBADMSG);
    for (size_t cut = 0; cut < sizeof(row); cut++) {
        int err = 0;
        ch_rbr__init(&r, row, cut);
        if (!(err = ch_rbr__u8(&r, &k)) && !(err = ch_rbr__u64(&r, &u)) &&
            !(err = ch_rbr__i64(&r, &i)))
            err = ch_rbr__u64_array(&r, &el, &n, 2);
        assert_int_equal(err, -EBADMSG);
    }
    /* A length whose varint never ends, or claims more than is there. */
    static const unsigned char endless[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                            0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    ch_rbr__init(&r, endless, sizeof(endless));
    assert_int_equal(ch_rbr__u64_array(&r, &el, &n, UINT64_MAX), -EBADMSG);
    static const unsigned char huge[] = {0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0x01};
    ch_rbr__init(&r, huge, sizeof(huge));
    assert_int_equal(ch_rbr__u64_array(&r, &el, &n, UINT64_MAX), -EBADMSG);
}

static void test_identifier(void **state)
{
    (void)state;
    assert_true(ch_sql__identifier("codexray"));
    assert_true(ch_sql__identifier("_cx_2"));
    assert_false(ch_sql__identifier(""));
    assert_false(ch_sql__identifier(NULL));
    assert_false(ch_sql__identifier("2cx"));
    assert_false(ch_sql__identifier("cx; DROP"));
    assert_false(ch_sql__identifier("cx.db"));
    assert_false(ch_sql__identifier("c`x"));
    char longname[80];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = 0;
    assert_false(ch_sql__identifier(longname));
}

static void test_tsv_rows_and_escapes(void **state)
{
    char text[] = "a\\tb\t12\t[1,2,3]\n"
                  "x\\\\y\\n\t-5\t[]\n";
    struct ch_tsv t;
    char *f[3];
    int64_t v;
    uint64_t arr[4];

    (void)state;
    ch_tsv__init(&t, text, sizeof(text) - 1);
    assert_int_equal(ch_tsv__row(&t, f, 3), 3);
    assert_string_equal(f[0], "a\tb");
    assert_int_equal(ch_tsv__i64(f[1], &v), 0);
    assert_int_equal(v, 12);
    assert_int_equal(ch_tsv__u64_array(f[2], arr, 4), 3);
    assert_true(arr[0] == 1 && arr[1] == 2 && arr[2] == 3);
    assert_int_equal(ch_tsv__row(&t, f, 3), 3);
    assert_string_equal(f[0], "x\\y\n");
    assert_int_equal(ch_tsv__i64(f[1], &v), 0);
    assert_int_equal(v, -5);
    assert_int_equal(ch_tsv__u64_array(f[2], arr, 4), 0);
    assert_int_equal(ch_tsv__row(&t, f, 3), 0);
}

static void test_tsv_garbage_is_refused(void **state)
{
    struct ch_tsv t;
    char *f[2];
    uint64_t arr[2], u;
    int64_t v;

    (void)state;
    char cut[] = "a\tb"; /* no newline: cut short */
    ch_tsv__init(&t, cut, sizeof(cut) - 1);
    assert_int_equal(ch_tsv__row(&t, f, 2), -EBADMSG);
    char wide[] = "a\tb\tc\n"; /* more fields than asked */
    ch_tsv__init(&t, wide, sizeof(wide) - 1);
    assert_int_equal(ch_tsv__row(&t, f, 2), -EBADMSG);
    char esc[] = "a\\q\n"; /* unknown escape */
    ch_tsv__init(&t, esc, sizeof(esc) - 1);
    assert_int_equal(ch_tsv__row(&t, f, 2), -EBADMSG);
    char html[] = "<html>Code: 500</html>";
    ch_tsv__init(&t, html, sizeof(html) - 1);
    assert_int_equal(ch_tsv__row(&t, f, 2), -EBADMSG);
    assert_int_equal(ch_tsv__i64("", &v), -EBADMSG);
    assert_int_equal(ch_tsv__i64("12x", &v), -EBADMSG);
    assert_int_equal(ch_tsv__i64("99999999999999999999", &v), -EBADMSG);
    assert_int_equal(ch_tsv__u64("-1", &u), -EBADMSG);
    assert_int_equal(ch_tsv__u64("18446744073709551615", &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(ch_tsv__u64_array("[1,2,3]", arr, 2), -EBADMSG); /* past max */
    assert_int_equal(ch_tsv__u64_array("[1,]", arr, 2), -EBADMSG);
    assert_int_equal(ch_tsv__u64_array("1,2", arr, 2), -EBADMSG);
    assert_int_equal(ch_tsv__u64_array("[1]x", arr, 2), -EBADMSG);
    assert_int_equal(ch_tsv__u64_array("[-1]", arr, 2), -EBADMSG);
}

/* The --clickhouse list (CodeXray issue 30): "http://ch:8123/", a URL as
 * copied from a browser, spun store_clickhouse__open at 100 % CPU before
 * it opened a connection (the loop's next entry started at the trimmed
 * slash, forever), so this test hung; alarm() turns a hang into a failure.
 * Now every list either reaches ClickHouse, with its slashes dropped (here
 * port 1 of loopback: refused at once), or is refused naming the flag. */
static void test_open_url_lists(void **state)
{
    (void)state;
    char big[1100] = "http://";
    memset(big + 7, 'h', sizeof(big) - 8);
    big[sizeof(big) - 1] = '\0';
    const struct {
        const char *urls, *why;
    } cases[] = {
        {"http://127.0.0.1:1/", "at http://127.0.0.1:1: "},
        {"http://127.0.0.1:1//,", "at http://127.0.0.1:1: "},
        {" http://127.0.0.1:1/ ,, http://127.0.0.1:2/ ", "at http://127.0.0.1:1: "},
        {"http://127.0.0.1:1/\thttp://127.0.0.1:2/", "at http://127.0.0.1:1: "},
        {"", "--clickhouse: no URL"},
        {",,,", "--clickhouse: no URL"},
        {" , / ", "--clickhouse: entry 1 (\"/\") is not an http:// or https:// URL"},
        {"ftp://ch", "--clickhouse: entry 1 (\"ftp://ch\") is not an http://"},
        {"http://", "--clickhouse: entry 1 (\"http://\")"},
        {"ch:8123", "--clickhouse: entry 1 (\"ch:8123\")"},
        {"http://a,http://b\x01", "--clickhouse: entry 2 has a control character"},
        {big, "--clickhouse: URL 1 is longer than 1000 bytes"},
    };
    alarm(300); /* milliseconds of work; a bound only a hang reaches */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[512] = "";
        struct store *st =
            store_clickhouse__open(cases[i].urls, NULL, "codexray", NULL, 5000, err, sizeof(err));
        assert_null(st);
        if (!strstr(err, cases[i].why))
            fail_msg("--clickhouse \"%.40s\": \"%s\", want \"%s\"", cases[i].urls, err,
                     cases[i].why);
    }
    alarm(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quote_round_trips_hostile_names),
        cmocka_unit_test(test_quote_nul_and_exact_forms),
        cmocka_unit_test(test_quote_respects_the_cap),
        cmocka_unit_test(test_row_binary),
        cmocka_unit_test(test_row_binary_reader),
        cmocka_unit_test(test_identifier),
        cmocka_unit_test(test_tsv_rows_and_escapes),
        cmocka_unit_test(test_tsv_garbage_is_refused),
        cmocka_unit_test(test_open_url_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

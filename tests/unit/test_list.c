/* common/list.c: the one reader of every list-valued option. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/list.h"

static const char *const http[] = {"http", "https", NULL};

/* Splits text, which must be accepted, and checks its entries against want
 * (NULL-terminated). */
static void expect(const char *text, const char *const *want)
{
    char err[256] = "";
    struct list *l = list__split(text, err, sizeof(err));
    size_t n = 0;

    if (!l)
        fail_msg("\"%s\" refused: %s", text ? text : "(null)", err);
    while (want[n])
        n++;
    assert_int_equal(list__count(l), n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(list__get(l, i), want[i]);
    assert_null(list__get(l, n));
    list__free(l);
}

/* Splits text, which must be refused with a message containing why. */
static void refused(const char *text, const char *why)
{
    char err[256] = "";
    struct list *l = list__split(text, err, sizeof(err));

    assert_null(l);
    if (!strstr(err, why))
        fail_msg("\"%.40s\": \"%s\", want \"%s\"", text, err, why);
}

static void test_plain(void **state)
{
    (void)state;
    expect("a", (const char *[]){"a", NULL});
    expect("a,b,c", (const char *[]){"a", "b", "c", NULL});
    expect("http://ch:8123", (const char *[]){"http://ch:8123", NULL});
}

/* Spaces after commas, around entries, tabs and newlines (a config file's
 * value or a variable written over lines): separators, never in an entry. */
static void test_spaces(void **state)
{
    (void)state;
    expect("a, b", (const char *[]){"a", "b", NULL});
    expect("  a ,  b  ,c  ", (const char *[]){"a", "b", "c", NULL});
    expect("a b\tc\nd\r\ne", (const char *[]){"a", "b", "c", "d", "e", NULL});
    expect("http://a:8123/ http://b:8123/",
           (const char *[]){"http://a:8123/", "http://b:8123/", NULL});
}

/* The stated rule: empty entries are skipped. */
static void test_empty_entries(void **state)
{
    (void)state;
    expect(",a", (const char *[]){"a", NULL});
    expect("a,", (const char *[]){"a", NULL});
    expect("a,,b", (const char *[]){"a", "b", NULL});
    expect("a, ,b", (const char *[]){"a", "b", NULL});
    expect(",, a ,,, b ,,", (const char *[]){"a", "b", NULL});
}

/* Nothing but separators, or nothing at all: an empty list, which the
 * caller refuses when its flag needs an entry. */
static void test_only_separators(void **state)
{
    (void)state;
    expect(NULL, (const char *[]){NULL});
    expect("", (const char *[]){NULL});
    expect(",", (const char *[]){NULL});
    expect(",,,,", (const char *[]){NULL});
    expect(" , \t,\n ", (const char *[]){NULL});
    assert_int_equal(list__count(NULL), 0);
    assert_null(list__get(NULL, 0));
    list__free(NULL);
}

/* The URL the issue hung on, as copied from a browser, and its kin:
 * trailing slashes are dropped, whatever follows them in the list. */
static void test_trailing_slashes(void **state)
{
    (void)state;
    const char *in[] = {"http://ch:8123/", "http://ch:8123//", " http://ch:8123/ ,",
                        "http://ch:8123/,", "http://ch:8123///,,,"};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        char err[256] = "";
        struct list *l = list__split(in[i], err, sizeof(err));
        assert_non_null(l);
        assert_int_equal(list__urls(l, http, err, sizeof(err)), 0);
        assert_int_equal(list__count(l), 1);
        assert_string_equal(list__get(l, 0), "http://ch:8123");
        list__free(l);
    }
    char err[256] = "";
    struct list *l = list__split("http://a:8123/, https://b/path/, HTTP://C", err, sizeof(err));
    assert_int_equal(list__urls(l, http, err, sizeof(err)), 0);
    assert_int_equal(list__count(l), 3);
    assert_string_equal(list__get(l, 0), "http://a:8123");
    assert_string_equal(list__get(l, 1), "https://b/path");
    assert_string_equal(list__get(l, 2), "HTTP://C");
    list__free(l);
}

/* Checks that list__urls refuses text's entry, naming it and its number. */
static void bad_url(const char *text, const char *const *schemes, const char *why)
{
    char err[256] = "";
    struct list *l = list__split(text, err, sizeof(err));

    assert_non_null(l);
    assert_int_equal(list__urls(l, schemes, err, sizeof(err)), -1);
    if (!strstr(err, why))
        fail_msg("\"%s\": \"%s\", want \"%s\"", text, err, why);
    list__free(l);
}

static void test_urls_refused(void **state)
{
    (void)state;
    bad_url("http://", http, "entry 1 (\"http://\") is not an http:// or https:// URL");
    bad_url("http:///", http, "entry 1 (\"http:///\")");
    bad_url("http://a, ftp://b", http, "entry 2 (\"ftp://b\") is not an http:// or https://");
    bad_url("ch:8123", http, "entry 1 (\"ch:8123\")");
    bad_url("http:/ch", http, "entry 1");
    bad_url("/", http, "entry 1 (\"/\")");
    bad_url("://x", NULL, "is not a SCHEME://HOST URL");
    bad_url("1http://x", NULL, "entry 1");
    bad_url("x", NULL, "entry 1 (\"x\")");
    /* a long entry is cut in the message */
    char big[600];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    bad_url(big, http, "xxx...\") is not");
    /* Any scheme when none is named: debuginfod's libcurl takes file:///PATH
     * too, but not a file URL of no path. */
    char err[256];
    char *s = list__join_urls("https://d.example/, file:///srv/debug/, svn+ssh://h/p", NULL, ' ',
                              err, sizeof(err));
    assert_non_null(s);
    assert_string_equal(s, "https://d.example file:///srv/debug svn+ssh://h/p");
    free(s);
    assert_null(list__join_urls("file:///", NULL, ' ', err, sizeof(err)));
    assert_null(list__join_urls("http:///x", NULL, ' ', err, sizeof(err)));
    s = list__join_urls("FILE:///x", NULL, ' ', err, sizeof(err));
    assert_non_null(s);
    free(s);
}

/* Caps: the value's length, the number of entries, an entry's length. */
static void test_caps(void **state)
{
    (void)state;
    char *s = malloc(LIST_MAX_TEXT + 2);
    assert_non_null(s);

    /* at the caps: accepted */
    memset(s, ',', LIST_MAX_TEXT);
    s[LIST_MAX_TEXT] = '\0';
    expect(s, (const char *[]){NULL});
    size_t n = 0;
    for (int i = 0; i < LIST_MAX_ENTRIES; i++)
        n += (size_t)snprintf(s + n, LIST_MAX_TEXT + 2 - n, "%se%d", i ? "," : "", i);
    char err[256];
    struct list *l = list__split(s, err, sizeof(err));
    assert_non_null(l);
    assert_int_equal(list__count(l), LIST_MAX_ENTRIES);
    assert_string_equal(list__get(l, LIST_MAX_ENTRIES - 1), "e255");
    list__free(l);
    memset(s, 'a', LIST_MAX_ENTRY);
    s[LIST_MAX_ENTRY] = '\0';
    l = list__split(s, err, sizeof(err));
    assert_non_null(l);
    assert_int_equal(strlen(list__get(l, 0)), LIST_MAX_ENTRY);
    list__free(l);

    /* one past: refused */
    memset(s, ',', LIST_MAX_TEXT + 1);
    s[LIST_MAX_TEXT + 1] = '\0';
    refused(s, "longer than 65536 bytes");
    n = 0;
    for (int i = 0; i <= LIST_MAX_ENTRIES; i++)
        n += (size_t)snprintf(s + n, LIST_MAX_TEXT + 2 - n, "%se%d", i ? "," : "", i);
    refused(s, "more than 256 entries");
    memset(s, 'a', LIST_MAX_ENTRY + 1);
    memcpy(s + LIST_MAX_ENTRY + 1, ",b", 3);
    refused(s, "entry 1 is 2049 bytes long (at most 2048)");
    free(s);
}

/* Huge input: 64 MiB of URLs is refused at once, without being copied. */
static void test_huge(void **state)
{
    (void)state;
    size_t len = 64u << 20;
    char *s = malloc(len + 1);
    assert_non_null(s);
    for (size_t i = 0; i < len; i++)
        s[i] = "http://ch:8123/,"[i % 16];
    s[len] = '\0';
    refused(s, "longer than");
    free(s);
}

/* A control character could reach a request line or a log line: refused,
 * with the entry and the byte named. */
static void test_control_characters(void **state)
{
    (void)state;
    refused("a\x01"
            "b",
            "entry 1 has a control character (byte 0x01)");
    refused("a, http://h/\x7f", "entry 2 has a control character (byte 0x7f)");
    refused("a,\x1b[31m", "entry 2");
}

static void test_join(void **state)
{
    (void)state;
    char err[256];
    struct list *l = list__split(" a ,, b c,", err, sizeof(err));
    char *s = list__join(l, ' ');
    assert_string_equal(s, "a b c");
    /* joined and split again: the same list */
    struct list *again = list__split(s, err, sizeof(err));
    assert_int_equal(list__count(again), 3);
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(list__get(again, i), list__get(l, i));
    free(s);
    list__free(again);
    list__free(l);
    s = list__join(NULL, ',');
    assert_string_equal(s, "");
    free(s);
    s = list__join_urls(" , ,", http, ' ', err, sizeof(err));
    assert_string_equal(s, "");
    free(s);
    s = list__join_urls("http://a/,https://b//", http, ' ', err, sizeof(err));
    assert_string_equal(s, "http://a https://b");
    free(s);
    assert_null(list__join_urls("http://a,\x01", http, ' ', err, sizeof(err)));
    assert_non_null(strstr(err, "control character"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_spaces),
        cmocka_unit_test(test_empty_entries),
        cmocka_unit_test(test_only_separators),
        cmocka_unit_test(test_trailing_slashes),
        cmocka_unit_test(test_urls_refused),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_huge),
        cmocka_unit_test(test_control_characters),
        cmocka_unit_test(test_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "../../common/hmap.h"

static void test_put_find_and_order(void **state)
{
    (void)state;
    struct hmap *h = hmap__new();
    bool ins;
    char key[32];

    assert_non_null(h);
    for (int i = 0; i < 10000; i++) {
        int n = snprintf(key, sizeof(key), "key-%d", i);
        long idx = hmap__put(h, key, n, &ins);
        assert_int_equal(idx, i); /* ids are insertion order */
        assert_true(ins);
        *hmap__val(h, idx) = i * 3;
    }
    assert_int_equal(hmap__len(h), 10000);
    for (int i = 0; i < 10000; i++) {
        int n = snprintf(key, sizeof(key), "key-%d", i);
        long idx = hmap__put(h, key, n, &ins);
        assert_int_equal(idx, i);
        assert_false(ins);
        assert_int_equal(*hmap__val(h, idx), i * 3);
        size_t len;
        const char *k = hmap__key(h, idx, &len);
        assert_int_equal(len, n);
        assert_memory_equal(k, key, n);
    }
    assert_int_equal(hmap__find(h, "absent", 6), -1);
    hmap__free(h);
}

static void test_binary_keys_and_prefixes(void **state)
{
    (void)state;
    struct hmap *h = hmap__new();
    unsigned char a[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};

    /* Keys that are prefixes of each other, or differ only past 8 bytes. */
    long i8 = hmap__put(h, a, 8, NULL), i9 = hmap__put(h, a, 9, NULL),
         i0 = hmap__put(h, "", 0, NULL);
    assert_true(i8 >= 0 && i9 >= 0 && i0 >= 0);
    assert_int_not_equal(i8, i9);
    assert_int_not_equal(i0, i8);
    a[8] = 9;
    assert_int_equal(hmap__find(h, a, 9), -1);
    assert_int_equal(hmap__find(h, "", 0), i0);
    hmap__free(h);
    hmap__free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_find_and_order),
        cmocka_unit_test(test_binary_keys_and_prefixes),
    };
    return cmocka_run_group_tests_name("hmap", tests, NULL, NULL);
}

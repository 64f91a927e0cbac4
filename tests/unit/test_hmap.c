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

/* A cleared map is empty and numbers from 0 again, small or large (past
 * what it keeps), and its old keys are gone. */
static void test_clear_and_reuse(void **state)
{
    (void)state;
    struct hmap *h = hmap__new();
    const int sizes[] = {10, 20000, 3, 0, 5000, 70};
    char key[32];
    bool ins;

    for (int r = 0; r < (int)(sizeof(sizes) / sizeof(sizes[0])); r++) {
        hmap__clear(h);
        assert_int_equal(hmap__len(h), 0);
        for (int i = 0; i < sizes[r]; i++) {
            int n = snprintf(key, sizeof(key), "r%d-key-%d", r, i);
            assert_int_equal(hmap__put(h, key, n, &ins), i);
            assert_true(ins);
            assert_int_equal(*hmap__val(h, i), 0);
            *hmap__val(h, i) = i + 1;
        }
        for (int i = 0; i < sizes[r]; i++) {
            int n = snprintf(key, sizeof(key), "r%d-key-%d", r, i);
            assert_int_equal(hmap__find(h, key, n), i);
            size_t len;
            assert_memory_equal(hmap__key(h, i, &len), key, n);
            assert_int_equal(*hmap__val(h, i), i + 1);
        }
        for (int i = 0; r && i < sizes[r - 1]; i++) { /* the last round's keys are gone */
            int n = snprintf(key, sizeof(key), "r%d-key-%d", r - 1, i);
            assert_int_equal(hmap__find(h, key, n), -1);
        }
    }
    hmap__free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_find_and_order),
        cmocka_unit_test(test_binary_keys_and_prefixes),
        cmocka_unit_test(test_clear_and_reuse),
    };
    return cmocka_run_group_tests_name("hmap", tests, NULL, NULL);
}

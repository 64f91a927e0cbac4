#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "../../common/arena.h"
#include "../../common/hmap.h"

/* Blocks are 16-aligned, distinct, and keep their bytes while others are
 * made, across many chunks and blocks bigger than a chunk. */
static void test_blocks_kept_and_aligned(void **state)
{
    (void)state;
    struct arena *a = arena__new(256);
    unsigned char *p[2000];
    size_t sz[2000];

    assert_non_null(a);
    for (int i = 0; i < 2000; i++) {
        sz[i] = (size_t)(i * 37) % 700 + (i % 500 == 0 ? 3 << 20 : 0);
        p[i] = arena__alloc(a, sz[i]);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 16, 0);
        memset(p[i], i & 0xff, sz[i]);
    }
    for (int i = 0; i < 2000; i++)
        for (size_t j = 0; j < sz[i]; j++)
            if (p[i][j] != (i & 0xff))
                fail_msg("block %d byte %zu overwritten", i, j);
    assert_true(arena__bytes(a) >= 4 * (3u << 20));
    arena__free(a);
    arena__free(NULL);
}

/* The last block grows in place while its chunk has room, else moves with
 * its bytes; calloc zeroes and refuses an overflowing count. */
static void test_grow_and_calloc(void **state)
{
    (void)state;
    struct arena *a = arena__new(4096);
    char *s, *t, *u;

    assert_non_null(a);
    s = arena__alloc(a, 100);
    memset(s, 'x', 100);
    t = arena__grow(a, s, 100, 1000);
    assert_ptr_equal(t, s); /* in place */
    u = arena__alloc(a, 10);
    assert_non_null(u);
    t = arena__grow(a, s, 1000, 2000); /* no longer the last: moved */
    assert_non_null(t);
    assert_ptr_not_equal(t, s);
    for (int i = 0; i < 100; i++)
        assert_int_equal(t[i], 'x');
    t = arena__grow(a, t, 2000, 100000); /* past the chunk: moved */
    assert_non_null(t);
    for (int i = 0; i < 100; i++)
        assert_int_equal(t[i], 'x');
    int *z = arena__calloc(a, 1000, sizeof(int));
    assert_non_null(z);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(z[i], 0);
    assert_null(arena__calloc(a, SIZE_MAX / 2, 4));
    assert_null(arena__alloc(a, (size_t)2 << 30));
    assert_string_equal(arena__strdup(a, "codexray"), "codexray");
    arena__free(a);
}

/* A map in an arena works as a malloc'd one, and hmap__free leaves its
 * memory to the arena (the test runs under ASan in make sanitize: a free
 * of arena memory would be caught). */
static void test_hmap_in_arena(void **state)
{
    (void)state;
    struct arena *a = arena__new(1024);
    struct hmap *h = hmap__new_in(a, 16), *g = hmap__new_in(a, 64);
    char key[32];
    bool ins;

    assert_non_null(h);
    assert_non_null(g);
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(key, sizeof(key), "stack-%d", i);
        long idx = hmap__put(h, key, n, &ins);
        assert_int_equal(idx, i);
        assert_true(ins);
        *hmap__val(h, idx) = i;
        assert_int_equal(hmap__put(g, key, n, NULL), i); /* interleaved with h's growth */
    }
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(key, sizeof(key), "stack-%d", i);
        long idx = hmap__find(h, key, n);
        assert_int_equal(idx, i);
        assert_int_equal(*hmap__val(h, idx), i);
        size_t len;
        assert_memory_equal(hmap__key(g, i, &len), key, n);
        assert_int_equal(len, n);
    }
    /* Cleared, its memory stays the arena's (a free of it: ASan). */
    hmap__clear(h);
    assert_int_equal(hmap__len(h), 0);
    assert_int_equal(hmap__find(h, "stack-7", 7), -1);
    assert_int_equal(hmap__put(h, "again", 5, &ins), 0);
    assert_true(ins);
    hmap__free(h);
    hmap__free(g);
    arena__free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_kept_and_aligned),
        cmocka_unit_test(test_grow_and_calloc),
        cmocka_unit_test(test_hmap_in_arena),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

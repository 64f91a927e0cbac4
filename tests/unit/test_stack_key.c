#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/stack_key.h"

/* A slow, plain reference: arithmetic mod P one step at a time. */
static uint64_t ref_mul(uint64_t a, uint64_t b)
{
    return (uint64_t)((unsigned __int128)a * b % STACK_KEY_P);
}

static uint64_t ref_pow(uint64_t x, unsigned e)
{
    uint64_t r = 1;
    while (e--)
        r = ref_mul(r, x);
    return r;
}

static const uint64_t bases[STACK_HASHER_BASES] = {123456789012345ull, 987654321098765ull,
                                                   555555555555555ull, 31337313373133ull};

/* The function key by its definition: Horner over the 7-byte chunks of
 * name (marked with bit 56), len + 1, the chunks of file, len + 1. */
static uint64_t ref_str(uint64_t h, uint64_t base, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i += 7) {
        uint64_t w = 0;
        for (size_t j = 0; j < 7 && i + j < len; j++)
            w |= (uint64_t)(unsigned char)s[i + j] << (8 * j);
        h = (ref_mul(h, base) + (w | 1ull << 56)) % STACK_KEY_P;
    }
    return (ref_mul(h, base) + len + 1) % STACK_KEY_P;
}

static struct stack_key ref_function(const char *name, const char *file)
{
    struct stack_key k;
    k.a = ref_str(ref_str(0, bases[2], name, strlen(name)), bases[2], file, strlen(file));
    k.b = ref_str(ref_str(0, bases[3], name, strlen(name)), bases[3], file, strlen(file));
    return k;
}

static void test_mod_arithmetic(void **state)
{
    (void)state;
    uint64_t r = 88172645463325252ull;
    for (int i = 0; i < 100000; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        unsigned __int128 x = (unsigned __int128)r * (r >> 3) + (i % 7 == 0 ? ~(uint64_t)0 : 0);
        if (i % 11 == 0) /* values near the top of the range */
            x = ~(unsigned __int128)0 - r;
        assert_int_equal(stack_key__mod(x), (uint64_t)(x % STACK_KEY_P));
    }
    assert_int_equal(stack_key__mod(STACK_KEY_P), 0);
    assert_int_equal(stack_key__mod((unsigned __int128)STACK_KEY_P * STACK_KEY_P), 0);
}

static void test_function_keys(void **state)
{
    (void)state;
    struct stack_hasher h;
    assert_int_equal(stack_hasher__init(&h, bases), 0);
    /* Every length around the chunk boundaries, against the reference, and
     * joined from string shares the same as whole. */
    char name[64], file[64];
    /* Past 28 bytes a name is hashed four chunks a step: up to 62, each
     * boundary of that too, with bytes of every value but NUL. */
    for (size_t n = 0; n < 63; n++) {
        for (size_t i = 0; i < n; i++)
            name[i] = (char)(1 + (i * 97 + n * 31) % 255);
        name[n] = '\0';
        snprintf(file, sizeof(file), "src/%zu.c", n * 13);
        struct stack_key k = stack_hasher__function(&h, name, n, file, strlen(file));
        struct stack_key want = ref_function(name, file);
        assert_int_equal(k.a, want.a);
        assert_int_equal(k.b, want.b);
        struct stack_key j = stack_hasher__join(stack_hasher__string(&h, name, n),
                                                stack_hasher__string(&h, file, strlen(file)));
        assert_int_equal(j.a, k.a);
        assert_int_equal(j.b, k.b);
    }
    /* Where the name ends is part of the key. */
    struct stack_key x = stack_hasher__function(&h, "ab", 2, "c", 1);
    struct stack_key y = stack_hasher__function(&h, "a", 1, "bc", 2);
    struct stack_key z = stack_hasher__function(&h, "abc", 3, "", 0);
    assert_true(x.a != y.a && x.a != z.a && y.a != z.a);
    /* A 7-byte name and the same with a NUL after it (as a chunk reads). */
    x = stack_hasher__function(&h, "abcdefg", 7, "", 0);
    y = stack_hasher__function(&h, "abcdefg\0", 8, "", 0);
    assert_true(x.a != y.a || x.b != y.b);
    /* A string longer than the power tables. */
    size_t big = 7 * (STACK_KEY_MAX_FRAMES + 10);
    char *s = malloc(big);
    assert_non_null(s);
    memset(s, 'x', big);
    struct stack_strkey sk = stack_hasher__string(&h, s, big);
    assert_int_equal(sk.pc, ref_pow(bases[2], big / 7 + 1));
    assert_int_equal(sk.a, ref_str(0, bases[2], s, big));
    free(s);
    stack_hasher__free(&h);
}

static void test_stack_keys(void **state)
{
    (void)state;
    struct stack_hasher h;
    assert_int_equal(stack_hasher__init(&h, bases), 0);
    struct stack_key f[40];
    for (int i = 0; i < 40; i++) {
        char n[16];
        snprintf(n, sizeof(n), "fn%d", i);
        f[i] = stack_hasher__function(&h, n, strlen(n), "f.c", 3);
    }
    /* The reference: sum of (key + 1) * A^i. */
    uint64_t want = 0;
    for (int i = 0; i < 40; i++)
        want = (want + ref_mul((f[i].a + 1) % STACK_KEY_P, ref_pow(bases[0], i))) % STACK_KEY_P;
    struct stack_key whole = stack_hasher__stack(&h, f, 40);
    assert_int_equal(whole.a, want);
    /* Summed by locations of 1, 3, 2, 34 frames (inlined runs), the same. */
    size_t runs[] = {1, 3, 2, 34};
    struct stack_sum sum;
    stack_sum__init(&sum);
    size_t at = 0;
    for (size_t r = 0; r < 4; r++) {
        struct stack_part p = stack_hasher__part(&h, f + at, runs[r]);
        assert_true(stack_sum__add(&sum, &h, p.a, p.b, p.nframes));
        at += runs[r];
    }
    struct stack_key k = stack_sum__key(&sum);
    assert_int_equal(k.a, whole.a);
    assert_int_equal(k.b, whole.b);
    /* Order, length and a repeated frame all change the key. */
    struct stack_key swapped[40];
    memcpy(swapped, f, sizeof(f));
    swapped[3] = f[4], swapped[4] = f[3];
    assert_true(stack_hasher__stack(&h, swapped, 40).a != whole.a);
    assert_true(stack_hasher__stack(&h, f, 39).a != whole.a);
    struct stack_key rec[2] = {f[0], f[0]};
    assert_true(stack_hasher__stack(&h, rec, 2).a != stack_hasher__stack(&h, rec, 1).a);
    /* Many terms: the 128-bit sums are folded as they go. */
    struct stack_key *deep = malloc(STACK_KEY_MAX_FRAMES * sizeof(*deep));
    assert_non_null(deep);
    for (int i = 0; i < STACK_KEY_MAX_FRAMES; i++)
        deep[i] = (struct stack_key){STACK_KEY_P - 2 - i, STACK_KEY_P - 3 - i};
    uint64_t wd = 0;
    for (int i = 0; i < STACK_KEY_MAX_FRAMES; i++)
        wd = (wd + ref_mul(deep[i].a + 1, ref_pow(bases[0], i))) % STACK_KEY_P;
    stack_sum__init(&sum);
    for (int i = 0; i < STACK_KEY_MAX_FRAMES; i++) {
        struct stack_part p = stack_hasher__part(&h, deep + i, 1);
        assert_true(stack_sum__add(&sum, &h, p.a, p.b, 1));
    }
    assert_int_equal(stack_sum__key(&sum).a, wd);
    assert_false(stack_sum__add(&sum, &h, 1, 1, 1)); /* past the deepest */
    free(deep);
    stack_hasher__free(&h);
    stack_hasher__free(&h);
}

static void test_keymap(void **state)
{
    (void)state;
    struct stack_keymap *m = stack_keymap__new(1000);
    assert_non_null(m);
    for (int64_t i = 1; i <= 900; i++)
        assert_int_equal(stack_keymap__put(m, (struct stack_key){i * 7919, i}, i), 0);
    for (int64_t i = 1; i <= 900; i++)
        assert_int_equal(stack_keymap__get(m, (struct stack_key){i * 7919, i}), i);
    assert_int_equal(stack_keymap__get(m, (struct stack_key){7919, 2}), 0);
    assert_int_equal(stack_keymap__put(m, (struct stack_key){7919, 1}, 5), 0); /* replaced */
    assert_int_equal(stack_keymap__get(m, (struct stack_key){7919, 1}), 5);
    assert_int_equal(stack_keymap__len(m), 900);
    /* Past its bound it starts over rather than grow. */
    for (int64_t i = 901; i <= 1100; i++)
        assert_int_equal(stack_keymap__put(m, (struct stack_key){i * 7919, i}, i), 0);
    assert_true(stack_keymap__len(m) <= 1000);
    assert_int_equal(stack_keymap__get(m, (struct stack_key){1100 * 7919, 1100}), 1100);
    unsigned char b[16];
    struct stack_key k = {0x0123456789abcdefull & STACK_KEY_P, 42};
    stack_key__encode(k, b);
    struct stack_key back = stack_key__decode(b);
    assert_int_equal(back.a, k.a);
    assert_int_equal(back.b, k.b);
    stack_keymap__clear(m);
    assert_int_equal(stack_keymap__len(m), 0);
    stack_keymap__free(m);
    stack_keymap__free(NULL);

    /* Deleting from one long run of keys that all want the same slot (and
     * a run that wraps past the table's end): whatever is left is found. */
    for (uint64_t base = 0; base < 2; base++) {
        m = stack_keymap__new(1000);
        assert_non_null(m);
        for (int64_t i = 1; i <= 300; i++)
            assert_int_equal(
                stack_keymap__put(m, (struct stack_key){(uint64_t)i << 20 | base * 1020, 0}, i), 0);
        for (int64_t i = 1; i <= 300; i += 3)
            stack_keymap__del(m, (struct stack_key){(uint64_t)i << 20 | base * 1020, 0});
        stack_keymap__del(m, (struct stack_key){12345, 6789}); /* absent: nothing */
        for (int64_t i = 1; i <= 300; i++)
            assert_int_equal(
                stack_keymap__get(m, (struct stack_key){(uint64_t)i << 20 | base * 1020, 0}),
                i % 3 == 1 ? 0 : i);
        assert_int_equal(stack_keymap__len(m), 200);
        stack_keymap__free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mod_arithmetic),
        cmocka_unit_test(test_function_keys),
        cmocka_unit_test(test_stack_keys),
        cmocka_unit_test(test_keymap),
    };
    return cmocka_run_group_tests_name("stack_key", tests, NULL, NULL);
}

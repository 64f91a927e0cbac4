/* pac_mask: the bits pointer authentication puts in an arm64 return
 * address, as the kernel computes them, and how the machine's mask is had
 * (the kernel's, through ptrace, on arm64; none elsewhere). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../agent/unwind/pac_mask.h"

static void test_for_va_bits(void **state)
{
    (void)state;
    /* GENMASK_ULL(54, va_bits): 48-bit, 39-bit and 52-bit kernels */
    assert_int_equal(pac_mask__for_va_bits(48), 0x007f000000000000ull);
    assert_int_equal(pac_mask__for_va_bits(39), 0x007fff8000000000ull);
    assert_int_equal(pac_mask__for_va_bits(52), 0x0070000000000000ull);
    assert_int_equal(pac_mask__for_va_bits(54), 0x0040000000000000ull);
    /* nothing sensible: no mask rather than one that eats the address */
    assert_int_equal(pac_mask__for_va_bits(31), 0);
    assert_int_equal(pac_mask__for_va_bits(55), 0);
    assert_int_equal(pac_mask__for_va_bits(64), 0);
}

static void test_va_bits(void **state)
{
    (void)state;
    assert_int_equal(pac_mask__va_bits(0x0000ffffd0000000ull), 48); /* a stack, 48-bit VA */
    assert_int_equal(pac_mask__va_bits(0x0000007fff000000ull), 39); /* 39-bit VA */
    assert_int_equal(pac_mask__va_bits(0x00007ffc12345000ull), 47); /* x86_64's user half */
    assert_int_equal(pac_mask__va_bits(1), 1);
    assert_int_equal(pac_mask__va_bits(0), 0);
}

/* The machine's mask never covers this process's own addresses. */
static void test_get(void **state)
{
    (void)state;
    enum pac_mask_source src;
    uint64_t m = pac_mask__get(&src);
    int local;

#if defined(__aarch64__)
    assert_true(src == PAC_MASK_KERNEL || src == PAC_MASK_NO_PAC || src == PAC_MASK_VA_BITS);
    if (src == PAC_MASK_NO_PAC)
        assert_int_equal(m, 0);
    else
        assert_true(m != 0 && (m >> 55) == 0 && (m & 0xffffffffull) == 0);
#else
    assert_int_equal(src, PAC_MASK_NONE);
    assert_int_equal(m, 0);
#endif
    assert_int_equal((uint64_t)(uintptr_t)&test_get & m, 0);
    assert_int_equal((uint64_t)(uintptr_t)&local & m, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_for_va_bits),
        cmocka_unit_test(test_va_bits),
        cmocka_unit_test(test_get),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

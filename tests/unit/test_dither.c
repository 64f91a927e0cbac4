/* dither: the sampling periods drawn around 1/rate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../agent/dither.h"

/* Over many draws, the mean frequency is the rate plus 1/(2 x segment)
 * (what a restart of the timer loses), within 0.3 %; every frequency is
 * within the spread; and the draws are spread out, not a few values. */
static void check_rate(unsigned rate, uint64_t extra_ns)
{
    struct dither d;
    dither__init(&d, rate, 42);
    uint64_t segment_ns = dither__segment_ns(&d) + extra_ns;
    double sum = 0, lo = 1e18, hi = 0, want = rate + 1e9 / (2.0 * segment_ns);
    int n = 200000, buckets[10] = {0};

    /* A segment holds at least DITHER_SEGMENT_PERIODS periods. */
    assert_true(segment_ns * rate >= DITHER_SEGMENT_PERIODS * 1000000000ull - rate);
    for (int i = 0; i < n; i++) {
        double f = 1e9 / (double)dither__period(&d, segment_ns);
        sum += f;
        lo = f < lo ? f : lo;
        hi = f > hi ? f : hi;
        int b = (int)((f / want - 0.8) / 0.04);
        buckets[b < 0 ? 0 : b > 9 ? 9 : b]++;
    }
    print_message("    %u Hz, segment %llu ms: mean %.3f Hz (want %.3f), %.2f-%.2f\n", rate,
                  (unsigned long long)(segment_ns / 1000000), sum / n, want, lo, hi);
    assert_true(sum / n > want * 0.997 && sum / n < want * 1.003);
    assert_true(lo >= want * 0.799 && hi <= want * 1.201);
    assert_true(lo < want * 0.81 && hi > want * 1.19);
    for (int b = 0; b < 10; b++) /* uniform: each tenth of the range ~10 % */
        assert_true(buckets[b] > n / 10 * 0.9 && buckets[b] < n / 10 * 1.1);
}

static void test_mean_and_spread(void **state)
{
    (void)state;
    /* The segment as asked, or longer by the poll's lateness. */
    check_rate(100, 0);
    check_rate(99, 0);
    check_rate(250, 50000000);
    check_rate(1, 0);
    check_rate(19, 99000000);
    check_rate(1000, 0);
}

/* Two seeds give two different sequences (each agent its own times). */
static void test_seeds(void **state)
{
    (void)state;
    struct dither a, b;
    int same = 0;

    dither__init(&a, 100, 1);
    dither__init(&b, 100, 2);
    for (int i = 0; i < 100; i++)
        same += dither__period(&a, DITHER_SEGMENT_NS) == dither__period(&b, DITHER_SEGMENT_NS);
    assert_true(same < 10);
}

/* What a sample stands for: 1/rate seconds, truncated to whole ns; the
 * mean of the dithered periods' frequencies is that rate (above). */
static void test_sample_ns(void **state)
{
    (void)state;
    assert_int_equal(dither__sample_ns(100), 10000000);
    assert_int_equal(dither__sample_ns(1), 1000000000);
    assert_int_equal(dither__sample_ns(1000), 1000000);
    assert_int_equal(dither__sample_ns(3), 333333333);
    assert_int_equal(dither__sample_ns(0), 1000000000); /* as dither__init takes 0 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mean_and_spread),
        cmocka_unit_test(test_seeds),
        cmocka_unit_test(test_sample_ns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* offduty: the off-CPU hook's duty cycle (agent/offduty.h) and the weights
 * a block counted under it gets (agent/bpf/sample.h cx_off_weight). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/types.h>

#include "../../agent/bpf/sample.h"
#include "../../agent/offduty.h"

#define MS 1000000ull

static void test_f_from_rate(void **state)
{
    (void)state;
    assert_int_equal(offduty__f16(0, 125000), 65536);
    assert_int_equal(offduty__f16(125000, 125000), 65536);
    assert_int_equal(offduty__f16(1000000, 0), 65536); /* rate0 0: always watched */
    assert_int_equal(offduty__f16(1000000, 125000), 8192);
    assert_int_equal(offduty__f16(250000, 125000), 32768);
    assert_int_equal(offduty__f16(10000000000ull, 1), OFFDUTY_MIN_F16); /* the floor */
}

static void test_weights(void **state)
{
    (void)state;
    uint64_t dt = 3000000; /* 3 ms */
    assert_true(cx_off_weight(dt, 65536, 65536, 0) == dt);
    assert_true(cx_off_weight(dt, 65536, 32768, 0) == 2 * dt);
    /* Both ends watched, in two slots: 1 / (f_a f_b). */
    assert_true(cx_off_weight(dt, 65536, 32768, 16384) == 8 * dt);
    /* With the walk's p too. */
    assert_true(cx_off_weight(dt, 16384, 32768, 16384) == 32 * dt);
    /* Not a power of two: 1/3 of 65536 is 21845.33, kept to 1e-4. */
    double w = (double)cx_off_weight(dt, 65536, 21845, 0) / dt;
    assert_true(w > 3.0 && w < 3.0002);
    /* No wrap: days at the smallest probabilities saturate. */
    uint64_t days = 3 * 86400 * 1000000000ull;
    assert_true(cx_off_weight(days, 1, 1, 1) == 1ull << 63);
    assert_true(cx_off_weight(days, 65536, 64, 64) > days);
    assert_true(cx_off_weight(0, 1, 64, 64) == 0);
}

/* Slots begin only when due, numbered 1, 2, ... and f follows the switch
 * rate of the slot just ended. */
static void test_slots(void **state)
{
    (void)state;
    struct offduty_opts o = {250 * MS, 125000, 0};
    struct offduty_slot first, next;
    struct offduty *d = offduty__new(&o, 7, 1000 * MS, 5000, &first);

    assert_non_null(d);
    assert_int_equal(first.id, 1);
    assert_int_equal(first.f16, 65536);
    assert_true(first.watched);
    assert_true(offduty__due_ns(d) == 1250 * MS);
    assert_false(offduty__tick(d, 1249 * MS, 9000, &next));
    /* 50,000 switches in 250 ms: 200,000 a second, f = 125/200. */
    assert_true(offduty__tick(d, 1250 * MS, 55000, &next));
    assert_int_equal(next.id, 2);
    assert_int_equal(next.f16, 125000ull * 65536 / 200000);
    /* 10,000 in 500 ms (a late poll): 20,000 a second, watched in full. */
    assert_true(offduty__tick(d, 1750 * MS, 65000, &next));
    assert_int_equal(next.id, 3);
    assert_int_equal(next.f16, 65536);
    assert_true(next.watched);
    /* A count gone back (unreadable /proc/stat): rate 0, watched. */
    assert_true(offduty__tick(d, 2000 * MS, 0, &next));
    assert_int_equal(next.f16, 65536);
    offduty__free(d);
    offduty__free(NULL);
}

/* The draws: watched a share f of slots, and independently of the slot
 * before (a periodic pattern would show as P(watched | last watched) far
 * from f). */
static void test_draws(void **state)
{
    (void)state;
    struct offduty_opts o = {1 * MS, 0, 65536 * 3 / 10};
    struct offduty_slot s, prev = {0, 0, false};
    struct offduty *d = offduty__new(&o, 12345, 0, 0, &s);
    int n = 200000, watched = 0, after_w = 0, w_after_w = 0;

    for (int i = 1; i <= n; i++) {
        assert_true(offduty__tick(d, (uint64_t)i * MS, 0, &s));
        assert_int_equal(s.f16, 65536 * 3 / 10);
        watched += s.watched;
        if (i > 1 && prev.watched) {
            after_w++;
            w_after_w += s.watched;
        }
        prev = s;
    }
    print_message("    watched %.4f of slots, %.4f after a watched one (f 0.3)\n",
                  (double)watched / n, (double)w_after_w / after_w);
    assert_true(watched > n * 0.29 && watched < n * 0.31);
    assert_true(w_after_w > after_w * 0.29 && w_after_w < after_w * 0.31);
    offduty__free(d);
}

/* Blocks of known lengths under the duty cycle, counted as the BPF program
 * counts them (both ends' slots watched) and weighted by cx_off_weight: the
 * estimate of each length's total is the truth within 3 %, blocks longer
 * than a slot included; without the 1/f_b factor the long blocks come out
 * short by about f. */
static void estimate(uint32_t f16, bool with_fb, double out[2])
{
    const uint64_t slot = 250 * MS, lens[2] = {3 * MS, 600 * MS};
    enum { NSLOT = 40000 };
    static bool watched[NSLOT];
    struct offduty_opts o = {slot, 0, f16};
    struct offduty_slot s;
    struct offduty *d = offduty__new(&o, 99, 0, 0, &s);
    double truth[2] = {0, 0}, got[2] = {0, 0};

    watched[0] = s.watched;
    for (int i = 1; i < NSLOT; i++) {
        assert_true(offduty__tick(d, (uint64_t)i * slot, 0, &s));
        watched[i] = s.watched;
    }
    /* One thread per length: blocks back to back with 1 ms of running. */
    for (int k = 0; k < 2; k++) {
        for (uint64_t t = 0; t + lens[k] < (NSLOT - 1) * slot; t += lens[k] + MS) {
            uint64_t a = t / slot, b = (t + lens[k]) / slot;
            truth[k] += lens[k];
            if (watched[a] && watched[b])
                got[k] += cx_off_weight(lens[k], 65536, f16, a != b && with_fb ? f16 : 0);
        }
        out[k] = got[k] / truth[k];
    }
    offduty__free(d);
}

static void test_unbiased(void **state)
{
    (void)state;
    double r[2];

    for (uint32_t f16 = 65536 / 5; f16 <= 65536; f16 += 65536 / 5) {
        estimate(f16, true, r);
        print_message("    f %.2f: short blocks %.4f, long %.4f of the truth\n", f16 / 65536.0,
                      r[0], r[1]);
        assert_true(r[0] > 0.97 && r[0] < 1.03);
        assert_true(r[1] > 0.97 && r[1] < 1.03);
    }
    estimate(65536 / 2, false, r);
    print_message("    without 1/f_b at f 0.5: long blocks %.4f\n", r[1]);
    assert_true(r[1] < 0.6);
}

static char tmpdir[64];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_read_ctxt(void **state)
{
    (void)state;
    char path[128], *text = malloc(20000);
    assert_non_null(text);
    snprintf(path, sizeof(path), "%s/stat", tmpdir);
    /* A long intr line before it, with a "ctxt " inside a piece. */
    strcpy(text, "cpu  1 2 3\nintr 5");
    for (int i = 0; i < 3000; i++)
        strcat(text, i == 40 ? " ctxt 7" : " 0");
    strcat(text, "\nctxt 123456789012\nbtime 1\n");
    write_file(path, text);
    assert_true(offduty__read_ctxt(path) == 123456789012ull);
    write_file(path, "cpu 1\n");
    assert_true(offduty__read_ctxt(path) == 0);
    snprintf(path, sizeof(path), "%s/none", tmpdir);
    assert_true(offduty__read_ctxt(path) == 0);
    free(text);
}

static void test_task_csw(void **state)
{
    (void)state;
    char path[160];

    snprintf(path, sizeof(path), "%s/10", tmpdir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/10/task", tmpdir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/10/task/11", tmpdir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/10/task/11/status", tmpdir);
    write_file(path, "Name:\tvoluntary_ctxt_switches: 999\nState:\tS (sleeping)\n"
                     "voluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t7\n");
    assert_int_equal(offduty__task_csw(tmpdir, 10, 11), 157);
    write_file(path, "Name:\tx\nvoluntary_ctxt_switches:\t150\n");
    assert_int_equal(offduty__task_csw(tmpdir, 10, 11), -EIO);
    assert_int_equal(offduty__task_csw(tmpdir, 10, 12), -ENOENT);
    /* The real one: this thread's. */
    assert_true(offduty__task_csw(NULL, getpid(), getpid()) >= 0);
}

static int setup(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/test_offduty.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[96];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f_from_rate), cmocka_unit_test(test_weights),
        cmocka_unit_test(test_slots),       cmocka_unit_test(test_draws),
        cmocka_unit_test(test_unbiased),    cmocka_unit_test(test_read_ctxt),
        cmocka_unit_test(test_task_csw),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* file_unwind: the by-file entries agree with binary__map_bias, which the
 * per-process entries use, for every mapping offset a segment can have. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../agent/unwind/file_unwind.h"

/* The row address BPF computes (unwind.bpf.h, cx_vma_cb) for pc in a
 * mapping at start of file offset off: 0 when no segment holds it. */
static uint64_t bpf_bias(const struct cx_file_unwind *v, uint64_t start, uint64_t off, int *found)
{
    *found = 0;
    for (uint32_t i = 0; i < v->nseg; i++) {
        if (off >= v->seg[i].page_off && off < v->seg[i].end_off) {
            *found = 1;
            return start - off - v->seg[i].delta;
        }
    }
    return 0;
}

static void test_same_bias_as_per_process_entries(void **state)
{
    (void)state;
    /* A PIE (text at 0x1000), a non-PIE executable (0x400000, text at file
     * 0x258000 as cc1plus), and libc (text at 0x26000), each with a table
     * base above its text start. */
    const struct binary_seg cases[][1] = {{{0x1000, 0x31d, 0x1000}},
                                          {{0x258000, 0x1533000, 0x658000}},
                                          {{0x26000, 0x156000, 0x26000}}};
    const uint64_t bases[] = {0x1020, 0x658020, 0x26100};
    for (int c = 0; c < 3; c++) {
        struct cx_file_unwind v;
        assert_true(file_unwind__value(7, 99, bases[c], cases[c], 1, &v));
        assert_int_equal(v.table, 7);
        assert_int_equal(v.blocks, 99);
        uint64_t start = 0x7f0000000000ull + 0x1000ull * (uint64_t)c;
        uint64_t off = cases[c][0].offset & ~4095ull, want;
        int found;
        assert_true(binary__map_bias(cases[c], 1, start, off, &want));
        assert_int_equal(bpf_bias(&v, start, off, &found), want + bases[c]);
        assert_true(found);
        /* A mapping of another part of the file holds no text. */
        bpf_bias(&v, start, cases[c][0].offset + cases[c][0].filesz + 4096, &found);
        assert_false(found);
    }
}

static void test_keys(void **state)
{
    (void)state;
    /* /proc/PID/maps says fe:00 for the kernel's dev_t 0xfe00000. */
    struct cx_file_key k = file_unwind__key(0xfe, 0, 332835);
    assert_int_equal(k.dev, 0xfe00000);
    assert_int_equal(k.ino, 332835);
    assert_int_equal(k.pad, 0);
    k = file_unwind__key(8, 0x12345, 1);
    assert_int_equal(k.dev, (8u << 20) | 0x12345);
}

static void test_segments_capped(void **state)
{
    (void)state;
    struct binary_seg segs[CX_FILE_MAX_SEGS + 3];
    struct cx_file_unwind v;
    for (unsigned i = 0; i < CX_FILE_MAX_SEGS + 3; i++)
        segs[i] = (struct binary_seg){0x1000 * (i + 1), 0x800, 0x1000 * (i + 1)};
    assert_true(file_unwind__value(1, 1, 0, segs, CX_FILE_MAX_SEGS + 3, &v));
    assert_int_equal(v.nseg, CX_FILE_MAX_SEGS);
    assert_false(file_unwind__value(1, 1, 0, segs, 0, &v));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bias_as_per_process_entries),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_segments_capped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

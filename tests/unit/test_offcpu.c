/* The table of off-CPU stacks user space was sent (agent/offcpu.h): a sum
 * drained later finds its stack by key, across a sweep, until it has gone
 * unused for OFFCPU_KEEP_NS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../agent/offcpu.h"

static struct cx_sample *stack(uint32_t tgid, uint32_t tid, uint64_t id, unsigned nframes)
{
    struct cx_sample *s = calloc(1, sizeof(*s));

    s->hdr.kind = CX_REC_OFFCPU;
    s->hdr.tgid = tgid;
    s->hdr.tid = tid;
    s->off_id = id;
    s->off_class = CX_OFF_LOCK;
    s->n_user = nframes;
    for (unsigned i = 0; i < nframes; i++)
        s->frames[i] = (struct cx_frame){0x1000 + i, CX_FRAME_NATIVE, 0, 0};
    return s;
}

static void test_put_get_sweep(void **state)
{
    (void)state;
    struct offcpu *o = offcpu__new();
    struct cx_sample *a = stack(10, 11, 0xabc, 5), *b = stack(10, 12, 0xabc, 7);
    struct cx_off_key ka = {10, 11, 0xabc}, kb = {10, 12, 0xabc}, kc = {10, 11, 0xabd};
    const uint64_t t0 = 1000;

    assert_non_null(o);
    assert_int_equal(offcpu__put(o, a, t0), 0);
    assert_int_equal(offcpu__put(o, b, t0 + 5), 0);
    assert_int_equal(offcpu__put(o, a, t0 + 6), 0); /* sent again: one entry */
    assert_int_equal(offcpu__len(o), 2);
    const struct cx_sample *g = offcpu__get(o, &ka, t0 + 7);
    assert_non_null(g);
    assert_int_equal(g->hdr.tid, 11);
    assert_int_equal(g->n_user, 5);
    assert_int_equal(g->frames[4].addr, 0x1004);
    assert_null(offcpu__get(o, &kc, t0 + 7));
    /* b unused past the keep time, a used just before: a stays. */
    assert_int_equal(offcpu__get(o, &kb, t0 + 5)->hdr.tid, 12);
    assert_non_null(offcpu__get(o, &ka, t0 + OFFCPU_KEEP_NS));
    assert_int_equal(offcpu__sweep(o, t0 + 5 + OFFCPU_KEEP_NS), 0);
    assert_int_equal(offcpu__len(o), 1);
    assert_null(offcpu__get(o, &kb, t0 + 5 + OFFCPU_KEEP_NS));
    g = offcpu__get(o, &ka, t0 + 5 + OFFCPU_KEEP_NS);
    assert_non_null(g);
    assert_int_equal(g->n_user, 5);
    /* A sweep that keeps everything keeps every key findable. */
    assert_int_equal(offcpu__put(o, b, t0 + 6 + OFFCPU_KEEP_NS), 0);
    assert_int_equal(offcpu__sweep(o, t0 + 7 + OFFCPU_KEEP_NS), 0);
    assert_non_null(offcpu__get(o, &ka, t0 + 8 + OFFCPU_KEEP_NS));
    assert_non_null(offcpu__get(o, &kb, t0 + 8 + OFFCPU_KEEP_NS));
    /* Used after the sweep's time (read after the caller took it): kept. */
    assert_int_equal(offcpu__sweep(o, t0), 0);
    assert_int_equal(offcpu__len(o), 2);
    offcpu__free(o);
    free(a);
    free(b);
}

static void test_bounds(void **state)
{
    (void)state;
    struct offcpu *o = offcpu__new();
    struct cx_sample *s = stack(1, 1, 1, 3);

    /* A record claiming more frames than a walk makes is refused. */
    s->n_user = CX_MAX_FRAMES + 1;
    assert_int_equal(offcpu__put(o, s, 1), -E2BIG);
    s->n_user = 3;
    for (unsigned i = 0; i < OFFCPU_MAX_STACKS; i++) {
        s->off_id = i + 1;
        assert_int_equal(offcpu__put(o, s, 1), 0);
    }
    s->off_id = OFFCPU_MAX_STACKS + 1;
    assert_int_equal(offcpu__put(o, s, 1), -E2BIG);
    assert_int_equal(offcpu__refused(o), 1);
    assert_int_equal(offcpu__len(o), OFFCPU_MAX_STACKS);
    offcpu__free(o);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_sweep),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

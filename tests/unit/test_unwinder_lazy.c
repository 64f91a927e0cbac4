/* unwinder: which cold tables (start-up scan, not sampled) a process's maps
 * queue, and who waits for them. Bookkeeping only: no BPF (the maps' fds
 * are -1), nothing polled, so a queued table stays T_QUEUED. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../agent/procs/procs.h"
#include "../../agent/symbolize/binary.h"
#include "../../agent/unwind/unwinder.h"
#include "../../agent/unwind/unwinder_int.h"

/* A binary that cannot be opened: its build fails at once, harmlessly. */
static struct binary *fake_bin(const char *path)
{
    struct binary *b = calloc(1, sizeof(*b));
    assert_non_null(b);
    b->refs = 1;
    b->fd = -1;
    b->open_err = ENOENT;
    b->path = strdup(path);
    b->name = strrchr(b->path, '/') + 1;
    return b;
}

/* Process tgid, image generation gen, mapping bins[0..n) in address order. */
static void maps_read(struct unwinder *u, uint32_t tgid, unsigned gen, struct binary **bins,
                      unsigned n)
{
    struct maps_entry e[8];
    struct proc_map pm[8];
    struct proc p;

    memset(&p, 0, sizeof(p));
    memset(e, 0, sizeof(e));
    p.tgid = tgid;
    p.generation = gen;
    for (unsigned i = 0; i < n; i++) {
        uint64_t start = 0x400000ull + 0x100000ull * i;
        e[i] = (struct maps_entry){.start = start, .end = start + 0x1000, .path = bins[i]->path};
        pm[i] = (struct proc_map){start, start + 0x1000, 0, bins[i], bins[i]->path};
    }
    p.maps.e = e;
    p.maps.n = n;
    p.map = pm;
    unwinder__proc_maps(u, &p, 1);
}

static struct uproc *uproc_of(struct unwinder *u, uint32_t tgid)
{
    for (struct uproc *up = u->procs[tgid % NBUCKETS]; up; up = up->next)
        if (up->tgid == tgid)
            return up;
    fail_msg("no entry for pid %u", tgid);
    return NULL;
}

static enum table_state state_of(struct unwinder *u, uint32_t tgid, const struct binary *b)
{
    struct uproc *up = uproc_of(u, tgid);
    for (unsigned i = 0; i < up->n; i++)
        if (up->m[i].t->bin == b)
            return up->m[i].t->state;
    fail_msg("pid %u does not map %s", tgid, b->path);
    return T_NONE;
}

static struct unwinder *lazy_unwinder(void)
{
    struct unwinder_opts o = {.max_bytes = 1 << 20};
    char err[128];
    struct unwinder *u = unwinder__new(-1, -1, -1, &o, err, sizeof(err));
    assert_non_null(u);
    return u;
}

/* A cold table a new process queues: a process of the scan mapping it
 * waits for it too (its entry is written again when it loads). */
static void test_scan_process_waits_for_table_new_one_queued(void **state)
{
    (void)state;
    struct binary *x = fake_bin("/lazy/libx.so"), *a_exe = fake_bin("/lazy/a");
    struct unwinder *u = lazy_unwinder();

    unwinder__set_lazy(u, true);
    maps_read(u, 100, 1, (struct binary *[]){a_exe, x}, 2);
    unwinder__set_lazy(u, false);
    assert_int_equal(state_of(u, 100, x), T_COLD);
    assert_false(uproc_of(u, 100)->waiting);

    maps_read(u, 200, 1, (struct binary *[]){x}, 1);
    assert_int_equal(state_of(u, 200, x), T_QUEUED);
    assert_true(uproc_of(u, 200)->waiting);
    assert_true(uproc_of(u, 100)->waiting);
    assert_int_equal(uproc_of(u, 100)->ncold, 1); /* a_exe still cold */

    unwinder__free(u);
    binary__put(x);
    binary__put(a_exe);
}

/* A new process's first maps read (at its exec) has only its executable:
 * the libraries it maps after, read later, are queued all the same. A
 * process of the scan re-read leaves its cold tables cold, until it
 * execs. */
static void test_new_process_later_reads_queue_cold(void **state)
{
    (void)state;
    struct binary *x = fake_bin("/lazy/libx.so"), *y = fake_bin("/lazy/liby.so");
    struct binary *a_exe = fake_bin("/lazy/a"), *b_exe = fake_bin("/lazy/b");
    struct unwinder *u = lazy_unwinder();

    unwinder__set_lazy(u, true);
    maps_read(u, 100, 1, (struct binary *[]){a_exe, x, y}, 3);
    unwinder__set_lazy(u, false);
    assert_int_equal(state_of(u, 100, x), T_COLD);

    maps_read(u, 200, 1, (struct binary *[]){b_exe}, 1); /* at its exec */
    maps_read(u, 200, 1, (struct binary *[]){b_exe, x}, 2);
    assert_int_equal(state_of(u, 200, x), T_QUEUED);

    /* The scan's process, read again (JIT code): y stays cold. */
    maps_read(u, 100, 1, (struct binary *[]){a_exe, x, y}, 3);
    assert_int_equal(state_of(u, 100, y), T_COLD);
    /* After an exec it is a new image: y is queued. */
    maps_read(u, 100, 2, (struct binary *[]){a_exe, y}, 2);
    assert_int_equal(state_of(u, 100, y), T_QUEUED);

    unwinder__free(u);
    binary__put(x);
    binary__put(y);
    binary__put(a_exe);
    binary__put(b_exe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_process_waits_for_table_new_one_queued),
        cmocka_unit_test(test_new_process_later_reads_queue_cold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* cfi_blocks: the index user space builds over a table's blocks leads the
 * search BPF runs (bpf/cfi_index.h, the same code, with array reads for map
 * lookups) to the block a plain search over every block finds, for tables
 * of every depth of index, at every block's edges and at random addresses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "../../agent/unwind/cfi_blocks.h"

struct arr {
    const struct cx_cfi_block *a;
    uint32_t total;
};

/* A lookup in the BPF array: NULL past its end, as the kernel's. */
static const void *get(const void *ctx, const __u32 *key)
{
    const struct arr *r = ctx;
    return *key < r->total ? (const void *)&r->a[*key] : NULL;
}
#define CX_CFI_GET(ctx, keyp) get(ctx, keyp)
#include "../../agent/bpf/cfi_index.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* The last block whose first pc <= rel, or -1: what the index must give
 * (when it gives a block whose first pc is above rel, BPF finds no row,
 * which is right only when this is -1). */
static long long plain(const struct cx_cfi_block *a, uint32_t blocks, uint32_t rel)
{
    /* A plain binary search over the blocks' first pcs. */
    long long lo = -1, hi = blocks; /* first pc of lo <= rel < first pc of hi */
    while (hi - lo > 1) {
        long long mid = lo + (hi - lo) / 2;
        if (a[mid].rows[0].pc <= rel)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static void check(const struct cx_cfi_block *a, uint32_t blocks, uint32_t total, uint32_t rel)
{
    struct arr r = {a, total};
    long long want = plain(a, blocks, rel), got = cx_cfi_descend(&r, blocks, rel);

    if (want < 0) {
        /* Below every row: any block, or none, as long as its rows start above. */
        assert_true(got < 0 || a[got].rows[0].pc > rel);
        return;
    }
    if (got != want)
        fail_msg("rel %#x: block %lld, want %lld (%u blocks)", rel, got, want, blocks);
}

/* A table of n rows from pc 0x1000, 1-64 bytes apart. */
static void one_table(uint32_t n, unsigned random_probes)
{
    struct cx_cfi_row *rows = malloc(sizeof(*rows) * n);
    uint32_t pc = 0x1000, blocks = 0, total = 0;

    assert_non_null(rows);
    for (uint32_t i = 0; i < n; i++) {
        rows[i] = (struct cx_cfi_row){.pc = pc, .cfa_off = (__s16)(i & 0x7fff), .rule = 1};
        pc += 1 + next32() % 64;
    }
    struct cx_cfi_block *a = cfi_blocks__build(rows, n, &blocks, &total);
    assert_non_null(a);
    assert_int_equal(blocks, (n + CX_CFI_BLOCK_ROWS - 1) / CX_CFI_BLOCK_ROWS);
    assert_int_equal(total, cx_cfi_total(blocks));
    /* The rows are there as given, then padding. */
    for (uint32_t i = 0; i < n; i += 1 + n / 1000)
        assert_int_equal(a[i / CX_CFI_BLOCK_ROWS].rows[i % CX_CFI_BLOCK_ROWS].pc, rows[i].pc);
    if (n % CX_CFI_BLOCK_ROWS)
        assert_int_equal(a[blocks - 1].rows[CX_CFI_BLOCK_ROWS - 1].pc, UINT32_MAX);
    /* Every block's first pc, one below it and its last row. */
    for (uint32_t b = 0; b < blocks; b++) {
        uint32_t first = a[b].rows[0].pc;
        check(a, blocks, total, first);
        check(a, blocks, total, first - 1);
        check(a, blocks, total,
              a[b].rows[CX_CFI_BLOCK_ROWS - 1].pc == UINT32_MAX
                  ? rows[n - 1].pc
                  : a[b].rows[CX_CFI_BLOCK_ROWS - 1].pc);
    }
    check(a, blocks, total, 0);
    check(a, blocks, total, pc + 100000);
    check(a, blocks, total, UINT32_MAX - 1);
    for (unsigned i = 0; i < random_probes; i++)
        check(a, blocks, total, 0x1000 + next32() % (pc - 0x1000 + 64));
    /* At the padding itself nothing is found. */
    struct arr r = {a, total};
    long long got = cx_cfi_descend(&r, blocks, UINT32_MAX);
    assert_true(got < 0 || a[got].rows[0].pc == UINT32_MAX || got == (long long)blocks - 1);
    free(a);
    free(rows);
}

static void test_levels(void **state)
{
    (void)state;
    assert_int_equal(cx_cfi_levels(1), 0);
    assert_int_equal(cx_cfi_levels(2), 1);
    assert_int_equal(cx_cfi_levels(32), 1);
    assert_int_equal(cx_cfi_levels(33), 2);
    assert_int_equal(cx_cfi_levels(1024), 2);
    assert_int_equal(cx_cfi_levels(1025), 3);
    assert_int_equal(cx_cfi_levels(32768), 3);
    assert_int_equal(cx_cfi_levels(32769), 4);
    /* The largest table fits in the levels there are. */
    assert_int_equal(cx_cfi_levels(CX_CFI_MAX_ROWS / CX_CFI_BLOCK_ROWS), 4);
    /* gcc's cc1: 29,912 blocks, 935 + 30 + 1 index blocks. */
    assert_int_equal(cx_cfi_total(29912), 29912 + 935 + 30 + 1);
    assert_int_equal(cx_cfi_total(1), 1);
    assert_int_equal(cx_cfi_total(2), 3);
}

static void test_small_tables(void **state)
{
    (void)state;
    const uint32_t sizes[] = {1, 2, 15, 16, 17, 31, 33, 255, 256, 257, 511, 512, 513};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        one_table(sizes[i], 2000);
}

static void test_level_edges(void **state)
{
    (void)state;
    /* 32 and 33 blocks, 1,024 and 1,025 (two and three levels). */
    const uint32_t sizes[] = {32 * 16, 32 * 16 + 1, 1024 * 16, 1024 * 16 + 1, 1024 * 16 - 3};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        one_table(sizes[i], 20000);
}

static void test_four_levels(void **state)
{
    (void)state;
    /* 32,769 blocks: the fourth level. */
    one_table(32768 * 16 + 5, 50000);
}

static void test_bad_sizes(void **state)
{
    (void)state;
    struct cx_cfi_row row = {.pc = 0x1000};
    uint32_t b = 7, t = 7;
    assert_null(cfi_blocks__build(&row, 0, &b, &t));
    assert_null(cfi_blocks__build(&row, CX_CFI_MAX_ROWS + 1, &b, &t));
    assert_int_equal(b, 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),      cmocka_unit_test(test_small_tables),
        cmocka_unit_test(test_level_edges), cmocka_unit_test(test_four_levels),
        cmocka_unit_test(test_bad_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

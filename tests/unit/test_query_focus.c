/* server/query_focus.c: a merged result narrowed to the stacks under a
 * path of function names, and the paths it refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/query_focus.h"

/* Functions: 0 main, 1 serve, 2 parse, 3 main (another file), 4 idle. */
static struct store_function fns[] = {
    {"main", "a.c"}, {"serve", "a.c"}, {"parse", "b.c"}, {"main", "c.c"}, {"idle", ""},
};
/* Leaf first, as the stores give them. */
static uint32_t s0[] = {2, 1, 0}; /* main;serve;parse */
static uint32_t s1[] = {1, 0};    /* main;serve */
static uint32_t s2[] = {4, 0};    /* main;idle */
static uint32_t s3[] = {2, 1, 3}; /* main(c.c);serve;parse */
static uint32_t s4[] = {1};       /* serve */

static void merged(struct store_merged *m, struct store_merged_stack *st)
{
    struct store_merged_stack in[] = {
        {s0, 3, 1, 10, 0}, {s1, 2, 1, 20, 0},  {s2, 2, 1, 40, 0},
        {s3, 3, 1, 80, 0}, {s4, 1, 1, 160, 0},
    };
    memcpy(st, in, sizeof(in));
    memset(m, 0, sizeof(*m));
    m->functions = fns;
    m->nfunctions = 5;
    m->stacks = st;
    m->nstacks = 5;
}

static int64_t cpu_of(const struct store_merged *m)
{
    int64_t sum = 0;
    for (size_t i = 0; i < m->nstacks; i++)
        sum += m->stacks[i].cpu_ns;
    return sum;
}

static void test_focus_keeps_the_stacks_under_the_path(void **state)
{
    struct store_merged m;
    struct store_merged_stack st[5];

    (void)state;
    merged(&m, st);
    /* main;serve: s0, s1 and s3 (a main of another file is "main" too). */
    assert_int_equal(query__focus(&m, "main;serve"), 3);
    assert_int_equal(m.nstacks, 3);
    assert_int_equal(cpu_of(&m), 10 + 20 + 80);
    merged(&m, st);
    assert_int_equal(query__focus(&m, "main;serve;parse"), 2);
    assert_int_equal(cpu_of(&m), 10 + 80);
    merged(&m, st);
    assert_int_equal(query__focus(&m, "main"), 4);
    assert_int_equal(cpu_of(&m), 150);
    /* A name is matched whole, not as a prefix. */
    merged(&m, st);
    assert_int_equal(query__focus(&m, "mai"), 0);
    merged(&m, st);
    assert_int_equal(query__focus(&m, "main;serve;parse;deeper"), 0);
    assert_int_equal(m.nstacks, 0);
}

static void test_focus_refuses_bad_paths(void **state)
{
    struct store_merged m;
    struct store_merged_stack st[5];

    (void)state;
    merged(&m, st);
    const char *bad[] = {"", ";", "main;", ";main", "main;;serve"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(query__focus(&m, bad[i]), -1);
        assert_int_equal(m.nstacks, 5); /* untouched */
    }
    assert_int_equal(query__focus(&m, NULL), -1);
    assert_int_equal(query__focus(NULL, "main"), -1);
    /* One name more than the cap. */
    size_t n = QUERY_FOCUS_MAX_DEPTH + 1;
    char *deep = malloc(2 * n);
    assert_non_null(deep);
    for (size_t k = 0; k < n; k++) {
        deep[2 * k] = 'f';
        deep[2 * k + 1] = ';';
    }
    deep[2 * n - 1] = 0;
    assert_int_equal(query__focus(&m, deep), -1);
    assert_int_equal(m.nstacks, 5);
    deep[2 * (n - 1) - 1] = 0; /* exactly the cap */
    assert_int_equal(query__focus(&m, deep), 0);
    free(deep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_focus_keeps_the_stacks_under_the_path),
        cmocka_unit_test(test_focus_refuses_bad_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

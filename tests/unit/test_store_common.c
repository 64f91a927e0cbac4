/* store_common: what both stores share. The merged-result builder numbers
 * functions by first appearance and names them through the store; label
 * texts and their needles; label values from identity texts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/store_common.h"

static void name_of(void *ctx, size_t i, const void *key, size_t len, const char **name,
                    const char **file)
{
    static char buf[32];
    int64_t id;

    (void)ctx;
    (void)i;
    assert_int_equal(len, sizeof(id));
    memcpy(&id, key, sizeof(id));
    if (id == 99)
        return; /* unknown: "?" */
    snprintf(buf, sizeof(buf), "fn%lld", (long long)id);
    *name = buf;
    *file = "f.c";
}

static void test_builder(void **state)
{
    struct merged_builder b;
    struct store_merged *m;
    int64_t ids[] = {7, 3, 7, 99};

    (void)state;
    assert_int_equal(merged_builder__init(&b, STORE_VALUE_CPU), 0);
    assert_int_equal(merged_builder__stack(&b, 5, 50, 0), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(merged_builder__frame(&b, &ids[i], sizeof(ids[i])), 0);
    assert_int_equal(merged_builder__stack(&b, 1, 10, 0), 0); /* no frames */
    assert_int_equal(merged_builder__stack(&b, 2, 20, 0), 0);
    /* A deep one: capacity grows past 16. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(merged_builder__frame(&b, &ids[i % 4], sizeof(ids[0])), 0);
    assert_int_equal(merged_builder__nfunctions(&b), 3);
    assert_int_equal(merged_builder__finish(&b, 4, name_of, NULL, &m), 0);
    assert_int_equal(m->profiles, 4);
    assert_int_equal(m->nfunctions, 3);
    assert_string_equal(m->functions[0].name, "fn7");
    assert_string_equal(m->functions[1].name, "fn3");
    assert_string_equal(m->functions[1].file, "f.c");
    assert_string_equal(m->functions[2].name, "?");
    assert_string_equal(m->functions[2].file, "");
    assert_int_equal(m->nstacks, 3);
    assert_int_equal(m->stacks[0].nframes, 3);
    assert_int_equal(m->stacks[0].frames[0], 0);
    assert_int_equal(m->stacks[0].frames[1], 1);
    assert_int_equal(m->stacks[0].frames[2], 0);
    assert_true(m->stacks[0].samples == 5 && m->stacks[0].cpu_ns == 50);
    assert_int_equal(m->stacks[1].nframes, 0);
    assert_int_equal(m->stacks[2].nframes, 100);
    static const uint32_t want[4] = {0, 1, 0, 2};
    for (int i = 0; i < 100; i++)
        assert_int_equal(m->stacks[2].frames[i], want[i % 4]);
    store_merged__free(m);
    merged_builder__free(&b); /* after finish: a no-op */
}

/* One merge's stacks as each value keeps them: CPU drops the off-CPU-only
 * stack, off-CPU the CPU-only one (their frames too), wall keeps all. */
static void test_builder_values(void **state)
{
    static const int64_t counts[3][3] = {{4, 40, 0}, {0, 0, 700}, {1, 10, 300}};
    static const size_t kept[3] = {2, 2, 3};
    int64_t ids[] = {1, 2, 3};

    (void)state;
    for (int v = STORE_VALUE_CPU; v <= STORE_VALUE_WALL; v++) {
        struct merged_builder b;
        struct store_merged *m;
        assert_int_equal(merged_builder__init(&b, (enum store_value)v), 0);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(merged_builder__stack(&b, counts[i][0], counts[i][1], counts[i][2]),
                             0);
            assert_int_equal(merged_builder__frame(&b, &ids[i], sizeof(ids[i])), 0);
        }
        assert_int_equal(merged_builder__finish(&b, 1, name_of, NULL, &m), 0);
        assert_int_equal(m->value, v);
        assert_int_equal(m->nstacks, kept[v]);
        /* only the kept stacks' functions were met */
        assert_int_equal(m->nfunctions, kept[v]);
        int64_t cpu = 0, off = 0;
        for (size_t i = 0; i < m->nstacks; i++) {
            assert_int_equal(m->stacks[i].nframes, 1);
            cpu += m->stacks[i].cpu_ns;
            off += m->stacks[i].off_cpu_ns;
        }
        assert_int_equal(cpu, v == STORE_VALUE_OFF_CPU ? 10 : 50);
        assert_int_equal(off, v == STORE_VALUE_CPU ? 300 : 1000);
        store_merged__free(m);
    }
    assert_true(store_value__of(STORE_VALUE_WALL, INT64_MAX - 1, 5) == INT64_MAX);
    assert_true(store_value__of(STORE_VALUE_WALL, 3, 4) == 7);
    assert_true(store_value__of(STORE_VALUE_OFF_CPU, 3, 4) == 4);
}

static void test_label_texts(void **state)
{
    struct buf b;
    struct store_label l[] = {{"pod", "p1"}, {"container", "c"}, {"app", "x=y"}};
    struct store_labelset ls = {l, 3};
    const char *id[STORE_N_IDENTITY] = {NULL, "web-1", "", "app", NULL};

    (void)state;
    buf__init(&b, 1 << 16);
    assert_int_equal(store_labelset__text(&b, &ls), 0);
    assert_string_equal(b.data, "app=x=y\x1f"
                                "container=c\x1fpod=p1");
    assert_int_equal(store_identity__text(&b, id), 0);
    assert_string_equal(b.data, "\x1fpod=web-1\x1f"
                                "container=app\x1f");
    const char *none[STORE_N_IDENTITY] = {0};
    assert_int_equal(store_identity__text(&b, none), 0);
    assert_int_equal(b.len, 0);
    assert_int_equal(store_identity__needle(&b, 1, "web-1"), 0);
    assert_string_equal(b.data, "\x1fpod=web-1\x1f");
    buf__free(&b);
    buf__init(&b, 8);
    assert_int_equal(store_identity__text(&b, id), -E2BIG);
    buf__free(&b);
}

static void test_values_from_identity(void **state)
{
    struct store_values *v = calloc(1, sizeof(*v));
    struct hmap *seen = hmap__new();

    (void)state;
    assert_int_equal(store_values__add_identity(v, seen, "\x1fpod=a\x1fnamespace=n\x1f"), 0);
    assert_int_equal(store_values__add_identity(v, seen, "\x1fpod=a\x1fpod=b\x1f"), 0);
    assert_int_equal(store_values__add_identity(v, seen, "garbage without separators"), 0);
    assert_int_equal(v->n[2 + 1], 2); /* pod: a, b once each */
    assert_string_equal(v->v[3][0], "a");
    assert_string_equal(v->v[3][1], "b");
    assert_int_equal(v->n[2 + 2], 1);
    assert_string_equal(v->v[4][0], "n");
    store_values__free(v);
    hmap__free(seen);
}

/* A profile's other labels after its identity labels, keys sorted,
 * empty values left out; what is past store.h's rules refused. */
static void test_other_labels_text(void **state)
{
    struct buf b;
    struct store_label l[] = {{"region", "eu"}, {"otel.scope.name", "com.x/y"}, {"empty", ""}};
    struct store_profile p = {.app = "a", .labels = l, .nlabels = 3};

    (void)state;
    p.identity[1] = "web-1";
    buf__init(&b, 1 << 16);
    assert_int_equal(store_profile__labels_text(&b, &p), 0);
    assert_string_equal(b.data, "\x1fpod=web-1\x1fotel.scope.name=com.x/y\x1fregion=eu\x1f");
    p.identity[1] = NULL;
    assert_int_equal(store_profile__labels_text(&b, &p), 0);
    assert_string_equal(b.data, "\x1fotel.scope.name=com.x/y\x1fregion=eu\x1f");
    /* each refused: a reserved key, a bad key, a key twice, a control
     * character, a long value, too many */
    static const struct store_label bad[][2] = {
        {{"pod", "x"}, {"b", "y"}},
        {{"host", "x"}, {"b", "y"}},
        {{"a=b", "x"}, {"b", "y"}},
        {{"", "x"}, {"b", "y"}},
        {{"a", "x"}, {"a", "y"}},
        {{"a", "x\x1f"}, {"b", "y"}},
        {{"service_name", "x"}, {"b", "y"}},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        p.labels = bad[i], p.nlabels = 2;
        assert_int_equal(store_profile__labels_text(&b, &p), -E2BIG);
    }
    char longv[STORE_LABEL_VALUE_MAX + 2];
    memset(longv, 'v', sizeof(longv) - 1);
    longv[sizeof(longv) - 1] = '\0';
    struct store_label lv = {"k", longv};
    p.labels = &lv, p.nlabels = 1;
    assert_int_equal(store_profile__labels_text(&b, &p), -E2BIG);
    longv[STORE_LABEL_VALUE_MAX] = '\0';
    assert_int_equal(store_profile__labels_text(&b, &p), 0);
    struct store_label many[STORE_MAX_LABELS + 1];
    char keys[STORE_MAX_LABELS + 1][8];
    for (int i = 0; i <= STORE_MAX_LABELS; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        many[i] = (struct store_label){keys[i], "v"};
    }
    p.labels = many, p.nlabels = STORE_MAX_LABELS;
    assert_int_equal(store_profile__labels_text(&b, &p), 0);
    p.nlabels = STORE_MAX_LABELS + 1;
    assert_int_equal(store_profile__labels_text(&b, &p), -E2BIG);
    buf__free(&b);
}

/* Matches as needles: =, present, and both negated, over a labels text. */
static void test_matches(void **state)
{
    const char *t = "\x1fpod=web-1\x1fregion=eu\x1ftier=gold\x1f";
    struct buf spec;
    static const struct {
        struct store_label_match m[2];
        size_t n;
        bool want;
    } c[] = {
        {{{"region", "eu", 0}}, 1, true},
        {{{"region", "e", 0}}, 1, false}, /* the whole value */
        {{{"region", "eu", 1}}, 1, false},
        {{{"region", "us", 1}}, 1, true},
        {{{"region", NULL, 0}}, 1, true},
        {{{"zone", NULL, 1}}, 1, true},
        {{{"zone", NULL, 0}}, 1, false},
        {{{"pod", "web-1", 0}, {"tier", "gold", 0}}, 2, true},
        {{{"pod", "web-1", 0}, {"tier", "gold", 1}}, 2, false},
        {{{"gion", "eu", 0}}, 1, false}, /* a key's tail is no key */
        {{{0}}, 0, true},
    };

    (void)state;
    buf__init(&spec, 1 << 16);
    for (size_t i = 0; i < sizeof(c) / sizeof(*c); i++) {
        assert_int_equal(store_match__spec(&spec, c[i].m, c[i].n), 0);
        if (store_match__test(t, strlen(t), spec.data ? spec.data : "", spec.len) != c[i].want)
            fail_msg("case %zu: want %d", i, c[i].want);
    }
    assert_int_equal(store_match__test("", 0, "+\x1fk=", 4), false);
    buf__free(&spec);
}

/* Other labels listed as "k=v" pairs beside the identity lists. */
static void test_values_other_labels(void **state)
{
    struct store_values *v = calloc(1, sizeof(*v));
    struct hmap *seen = hmap__new();

    (void)state;
    assert_int_equal(store_values__add_identity(v, seen, ""), 0);
    assert_true(v->matched);
    assert_int_equal(v->nlabels, 0);
    assert_int_equal(
        store_values__add_identity(v, seen, "\x1fpod=a\x1fregion=eu\x1fotel.scope.name=x/y\x1f"),
        0);
    assert_int_equal(store_values__add_identity(v, seen, "\x1fregion=eu\x1fregion=us\x1f"), 0);
    assert_int_equal(v->n[3], 1);
    assert_int_equal(v->nlabels, 3);
    assert_string_equal(v->labels[0], "region=eu");
    assert_string_equal(v->labels[1], "otel.scope.name=x/y");
    assert_string_equal(v->labels[2], "region=us");
    store_values__free(v);
    hmap__free(seen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builder),
        cmocka_unit_test(test_builder_values),
        cmocka_unit_test(test_label_texts),
        cmocka_unit_test(test_values_from_identity),
        cmocka_unit_test(test_other_labels_text),
        cmocka_unit_test(test_matches),
        cmocka_unit_test(test_values_other_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* server/query.c: time ranges as users write them, and the flame-graph tree
 * of a merged result (its order, its folding, its sums). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/gz.h"
#include "../../common/pprof/pprof_reader.h"
#include "../../server/query.h"

#define NOW (1764763200ll * 1000000000ll)

static void test_parse_time_refuses_non_finite(void **state)
{
    int64_t v = 12345;

    (void)state;
    /* strtod reads all of these; none is a time. */
    const char *bad[] = {"nan",     "NaN",      "now-nan", "inf",       "-inf",     "infinity",
                         "now-inf", "now-nans", "1e400",   "now-1e400", "now-infm", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(query__parse_time(bad[i], NOW, &v), -1);
        assert_int_equal(v, 12345); /* untouched */
    }
    assert_int_equal(query__parse_time("now-15m", NOW, &v), 0);
    assert_int_equal(v, NOW - 15ll * 60 * 1000000000ll);
    assert_int_equal(query__parse_time("1764763200.5", NOW, &v), 0);
    assert_int_equal(v, NOW + 500000000ll);
}

static void test_parse_duration_refuses_non_finite(void **state)
{
    int64_t v = 7;

    (void)state;
    const char *bad[] = {"nan", "nans", "nanm", "inf", "infh", "-1", "1e300", "5x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(query__parse_duration(bad[i], &v), -1);
    assert_int_equal(v, 7);
    assert_int_equal(query__parse_duration("2h", &v), 0);
    assert_int_equal(v, 7200ll * 1000000000ll);
}

/* --- a merged result made by hand, and the flame graph read back --- */

struct fixture {
    struct store_merged m;
    char **names;
};

/* nfn functions named f0, f1, ...; nstacks stacks of room. */
static void fixture_init(struct fixture *fx, size_t nfn, size_t nstacks)
{
    memset(fx, 0, sizeof(*fx));
    fx->m.functions = calloc(nfn, sizeof(*fx->m.functions));
    fx->names = calloc(nfn, sizeof(*fx->names));
    fx->m.stacks = calloc(nstacks, sizeof(*fx->m.stacks));
    assert_non_null(fx->m.functions);
    assert_non_null(fx->names);
    assert_non_null(fx->m.stacks);
    for (size_t i = 0; i < nfn; i++) {
        char name[32];
        snprintf(name, sizeof(name), "f%zu", i);
        fx->names[i] = strdup(name);
        assert_non_null(fx->names[i]);
        fx->m.functions[i] = (struct store_function){fx->names[i], ""};
    }
    fx->m.nfunctions = nfn;
    fx->m.profiles = 1;
}

/* A stack of the given functions, root first (stored leaf first). */
static void fixture_stack(struct fixture *fx, const uint32_t *root_first, uint32_t n,
                          int64_t samples, int64_t cpu)
{
    struct store_merged_stack *s = &fx->m.stacks[fx->m.nstacks++];

    s->frames = malloc(n * sizeof(*s->frames));
    assert_non_null(s->frames);
    for (uint32_t j = 0; j < n; j++)
        s->frames[j] = root_first[n - 1 - j];
    s->nframes = n;
    s->samples = samples;
    s->cpu_ns = cpu;
}

static void fixture_free(struct fixture *fx)
{
    for (size_t i = 0; i < fx->m.nstacks; i++)
        free(fx->m.stacks[i].frames);
    for (size_t i = 0; i < fx->m.nfunctions; i++)
        free(fx->names[i]);
    free(fx->m.stacks);
    free(fx->m.functions);
    free(fx->names);
}

/* The flame graph's JSON: its total and its nodes as flat integers. */
struct graph {
    long long total;
    long long *nodes; /* name, total, self, children; four a node */
    size_t n;         /* nodes */
};

static void graph_of(struct fixture *fx, size_t max_nodes, struct graph *g)
{
    struct buf b;

    buf__init(&b, 1u << 30);
    assert_int_equal(query__write_flamegraph(&fx->m, max_nodes, &b), 0);
    const char *t = strstr(b.data, "\"total\":");
    assert_non_null(t);
    g->total = strtoll(t + 8, NULL, 10);
    const char *p = strstr(b.data, "\"nodes\":[");
    assert_non_null(p);
    p += 9;
    size_t cap = 1024, k = 0;
    g->nodes = malloc(cap * sizeof(*g->nodes));
    assert_non_null(g->nodes);
    while (*p && *p != ']') {
        char *end;
        if (k == cap) {
            cap *= 2;
            g->nodes = realloc(g->nodes, cap * sizeof(*g->nodes));
            assert_non_null(g->nodes);
        }
        g->nodes[k++] = strtoll(p, &end, 10);
        assert_true(end != p);
        p = *end == ',' ? end + 1 : end;
    }
    assert_int_equal(k % 4, 0);
    g->n = k / 4;
    buf__free(&b);
}

/* Checks a node and its subtree, from nodes[*at]: each total is its self
 * plus its children's totals, and children come widest first. Returns the
 * node's total. */
static long long check_subtree(const struct graph *g, size_t *at)
{
    size_t i = (*at)++;
    long long total = g->nodes[4 * i + 1], sum = g->nodes[4 * i + 2], prev = -1;

    for (long long c = 0; c < g->nodes[4 * i + 3]; c++) {
        bool other = g->nodes[4 * *at] == 1;
        long long ct = check_subtree(g, at);
        if (!other) { /* "other" goes after the last child, whatever its size */
            assert_true(prev < 0 || ct <= prev);
            prev = ct;
        }
        sum += ct;
    }
    assert_int_equal(sum, total);
    return total;
}

/* Two stacks whose CPU together passes 64 bits: the total holds at
 * INT64_MAX instead of wrapping negative. */
static void test_flamegraph_sums_saturate(void **state)
{
    struct fixture fx;
    struct graph g;
    uint32_t a[] = {0, 1}, b[] = {0, 2};

    (void)state;
    fixture_init(&fx, 3, 2);
    fixture_stack(&fx, a, 2, 1, INT64_MAX - 5);
    fixture_stack(&fx, b, 2, 1, 5000000000000000000ll);
    graph_of(&fx, 0, &g);
    assert_int_equal(g.total, INT64_MAX);
    assert_int_equal(g.nodes[1], INT64_MAX);     /* the root */
    assert_int_equal(g.nodes[4 + 1], INT64_MAX); /* f0, under both */
    for (size_t i = 0; i < g.n; i++)
        assert_true(g.nodes[4 * i + 1] >= 0 && g.nodes[4 * i + 2] >= 0);
    free(g.nodes);
    fixture_free(&fx);
}

/* Numbers of 18 and 19 digits: the text outgrows what is reserved for it
 * up front (24 bytes a node), so the writer grows the buffer as it goes,
 * every number still exact; with a cap below the answer, an error and
 * nothing past the cap. */
static void test_flamegraph_long_numbers_cap(void **state)
{
    enum { N = 20000 };
    const int64_t big = 100000000000000000ll; /* 10^17 */
    struct fixture fx;
    struct graph g;

    (void)state;
    fixture_init(&fx, N, N);
    for (uint32_t i = 0; i < N; i++)
        fixture_stack(&fx, &i, 1, 1, big + (int64_t)i * 7919);
    graph_of(&fx, 0, &g);
    assert_int_equal(g.n, N + 1);
    for (size_t k = 1; k < g.n; k++) {
        int64_t v = g.nodes[4 * k + 1];
        assert_true(v >= big && (v - big) % 7919 == 0);
        assert_int_equal(g.nodes[4 * k] - 2, (v - big) / 7919); /* its function */
        assert_int_equal(g.nodes[4 * k + 2], v);                /* self: a leaf */
        assert_int_equal(g.nodes[4 * k + 3], 0);
        if (k > 1) /* widest first */
            assert_true(v < g.nodes[4 * (k - 1) + 1]);
    }
    struct buf b;
    buf__init(&b, 1u << 30);
    assert_int_equal(query__write_flamegraph(&fx.m, 0, &b), 0);
    size_t whole = b.len;
    assert_true(whole > (size_t)(N + 1) * 24);
    buf__free(&b);
    buf__init(&b, (N + 1) * 24 + 4096);
    assert_int_not_equal(query__write_flamegraph(&fx.m, 0, &b), 0);
    assert_true(b.len <= (size_t)(N + 1) * 24 + 4096);
    buf__free(&b);
    free(g.nodes);
    fixture_free(&fx);
}

/* A root with many children: all there, widest first, ties in the order
 * they came. */
static void test_flamegraph_wide_sorted(void **state)
{
    enum { N = 20000 };
    struct fixture fx;
    struct graph g;

    (void)state;
    fixture_init(&fx, N, N);
    for (uint32_t i = 0; i < N; i++)
        fixture_stack(&fx, &i, 1, 1, (int64_t)(i * 7919u % 1000u) + 1);
    graph_of(&fx, 0, &g);
    assert_int_equal(g.n, N + 1);
    assert_int_equal(g.nodes[3], N);
    size_t at = 0;
    check_subtree(&g, &at);
    assert_int_equal(at, g.n);
    free(g.nodes);
    fixture_free(&fx);
}

/* Deep stacks, each its own root, folded to max_nodes: at most that many
 * nodes, every total still the sum of what is under it, the root's total
 * unchanged, and the widest kept over the narrowest. */
static void test_flamegraph_deep_folded(void **state)
{
    enum { STACKS = 200, DEPTH = 300 };
    struct fixture fx;
    struct graph g;
    uint32_t *frames = malloc(DEPTH * sizeof(*frames));

    (void)state;
    assert_non_null(frames);
    fixture_init(&fx, STACKS * DEPTH, STACKS);
    for (uint32_t s = 0; s < STACKS; s++) {
        for (uint32_t d = 0; d < DEPTH; d++)
            frames[d] = s * DEPTH + d;
        fixture_stack(&fx, frames, DEPTH, 1, 1000 + s);
    }
    for (size_t max = 1; max <= 200000; max *= 7) {
        graph_of(&fx, max, &g);
        long long want = 0;
        for (uint32_t s = 0; s < STACKS; s++)
            want += 1000 + s;
        assert_int_equal(g.total, want);
        assert_int_equal(g.nodes[1], want);
        size_t at = 0;
        check_subtree(&g, &at);
        assert_int_equal(at, g.n);
        /* The root, "other" and whole chains: the root's kept children are
         * the widest stacks, each with its whole depth (a chain of equal
         * totals folds at its top). */
        size_t cap = max < 2 ? 2 : max;
        assert_true(g.n <= cap);
        size_t kept = g.nodes[3] - (g.n > 1 && g.nodes[4 * (g.n - 1)] == 1 ? 1 : 0);
        if (max >= (size_t)STACKS * DEPTH + 1)
            assert_int_equal(g.n, STACKS * DEPTH + 1);
        else
            assert_int_equal(g.n, 1 + kept * DEPTH + 1);
        if (kept)
            assert_int_equal(g.nodes[4 + 1], 1000 + STACKS - 1);
        free(g.nodes);
    }
    free(frames);
    fixture_free(&fx);
}

/* --- random stacks against a tree built the plain way --- */

/* A node of the reference tree: children in a plain array, found by a
 * linear search, every total summed as stacks go in. */
struct ref_node {
    uint32_t name;
    long long total, self;
    struct ref_node *kids;
    size_t nkids;
};

static struct ref_node *ref_child(struct ref_node *p, uint32_t name)
{
    for (size_t i = 0; i < p->nkids; i++)
        if (p->kids[i].name == name)
            return &p->kids[i];
    p->kids = realloc(p->kids, (p->nkids + 1) * sizeof(*p->kids));
    assert_non_null(p->kids);
    p->kids[p->nkids] = (struct ref_node){name, 0, 0, NULL, 0};
    return &p->kids[p->nkids++];
}

/* Widest first; among equals the larger function index first (the order
 * the server's tree has always given ties). */
static int ref_cmp(const void *a, const void *b)
{
    const struct ref_node *x = a, *y = b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return x->name > y->name ? -1 : x->name < y->name;
}

/* Appends n's subtree as the flame graph's nodes (name + 2, total, self,
 * children), children sorted, and frees it. */
static void ref_emit(struct ref_node *n, bool root, long long *out, size_t *k)
{
    if (n->nkids) /* qsort wants an array, even of none */
        qsort(n->kids, n->nkids, sizeof(*n->kids), ref_cmp);
    out[(*k)++] = root ? 0 : (long long)n->name + 2;
    out[(*k)++] = n->total;
    out[(*k)++] = n->self;
    out[(*k)++] = (long long)n->nkids;
    for (size_t i = 0; i < n->nkids; i++)
        ref_emit(&n->kids[i], false, out, k);
    free(n->kids);
}

/* Random stacks over few functions (shared prefixes, stacks that are
 * prefixes of others, the same stack twice, empty stacks, zero values):
 * the flame graph is node for node the tree built the plain way, and
 * folded it keeps every total the sum of what is under it. */
static void test_flamegraph_random_exact(void **state)
{
    enum {
        ROUNDS = 40,
        STACKS = 3000,
        NFN = 9,
        DEPTH = 12
    }; /* past 1,024 stacks: sort_stacks' counting sort */
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    uint32_t frames[DEPTH];

    (void)state;
    for (int r = 0; r < ROUNDS; r++) {
        struct fixture fx;
        struct graph g;
        struct ref_node root = {0, 0, 0, NULL, 0};
        size_t nstacks = 1 + r * STACKS / ROUNDS;

        fixture_init(&fx, NFN, nstacks);
        for (size_t i = 0; i < nstacks; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t n = (uint32_t)(rng >> 33) % (DEPTH + 1);
            if (i && (rng >> 20) % 8 == 0) { /* a stack seen before, or its prefix */
                struct store_merged_stack *o = &fx.m.stacks[(rng >> 40) % i];
                n = n < o->nframes ? n : o->nframes;
                for (uint32_t d = 0; d < n; d++)
                    frames[d] = o->frames[o->nframes - 1 - d];
            } else {
                for (uint32_t d = 0; d < n; d++) {
                    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                    frames[d] = (uint32_t)(rng >> 35) % (d < 3 ? 2 : NFN);
                }
            }
            long long cpu = (rng >> 14) % 5 == 0 ? 0 : (long long)((rng >> 24) % 1000000007);
            fixture_stack(&fx, frames, n, cpu ? 1 : 0, cpu);
            struct ref_node *at = &root;
            at->total += cpu;
            for (uint32_t d = 0; d < n; d++) {
                at = ref_child(at, frames[d]);
                at->total += cpu;
            }
            at->self += cpu;
        }
        /* At most a node a frame, and the root. */
        long long *want = malloc((nstacks * DEPTH + 1) * 4 * sizeof(*want));
        size_t k = 0;
        assert_non_null(want);
        ref_emit(&root, true, want, &k);
        graph_of(&fx, 0, &g);
        assert_int_equal(g.total, root.total);
        assert_int_equal(g.n * 4, k);
        for (size_t i = 0; i < k; i++)
            assert_int_equal(g.nodes[i], want[i]);
        free(g.nodes);
        for (size_t max = 3; max < k / 4; max *= 3) {
            graph_of(&fx, max, &g);
            size_t at = 0;
            assert_true(g.n <= max);
            assert_int_equal(check_subtree(&g, &at), root.total);
            assert_int_equal(at, g.n);
            free(g.nodes);
        }
        free(want);
        fixture_free(&fx);
    }
}

/* The interpreter's frames without a name (marked by their file) are taken
 * out wherever they are, their time going to the frame below (a Python
 * function's self time); named native frames stay; a stack of nothing but
 * such frames keeps its samples at the root; totals are unchanged. */
static void test_hide_interp(void **state)
{
    (void)state;
    struct fixture fx;
    enum { MAIN, OUTER, I1, INNER, NAMED, I2 };
    fixture_init(&fx, 6, 3);
    fx.m.functions[OUTER].file = "app.py";
    fx.m.functions[INNER].file = "app.py";
    fx.m.functions[I1].file = "[interpreter]/usr/bin/python3.11";
    fx.m.functions[I2].file = "[interpreter]/usr/bin/python3.11";
    fx.m.functions[NAMED].file = "/usr/bin/python3.11"; /* unmarked: stays */
    fixture_stack(&fx, (uint32_t[]){MAIN, OUTER, I1, INNER, I2}, 5, 3, 30);
    fixture_stack(&fx, (uint32_t[]){MAIN, OUTER, I1, INNER, NAMED, I2}, 6, 2, 20);
    fixture_stack(&fx, (uint32_t[]){I2}, 1, 1, 10);

    struct graph before, after;
    graph_of(&fx, 0, &before);
    assert_int_equal(query__hide_interp(&fx.m), 2 + 2 + 1);
    assert_int_equal(fx.m.stacks[0].nframes, 3);
    assert_int_equal(fx.m.stacks[0].frames[0], INNER); /* the leaf now */
    assert_int_equal(fx.m.stacks[1].nframes, 4);
    assert_int_equal(fx.m.stacks[1].frames[0], NAMED);
    assert_int_equal(fx.m.stacks[1].frames[1], INNER);
    assert_int_equal(fx.m.stacks[2].nframes, 0);
    assert_int_equal(fx.m.stacks[0].samples + fx.m.stacks[1].samples + fx.m.stacks[2].samples, 6);
    graph_of(&fx, 0, &after);
    assert_int_equal(after.total, before.total);
    size_t at = 0;
    assert_int_equal(check_subtree(&after, &at), 60);
    /* all(self 10) -> main -> outer -> inner(self 30) -> NAMED(self 20) */
    assert_int_equal(after.n, 5);
    assert_int_equal(after.nodes[2], 10);
    assert_int_equal(after.nodes[4 * 3 + 0], INNER + 2);
    assert_int_equal(after.nodes[4 * 3 + 2], 30);
    assert_int_equal(after.nodes[4 * 4 + 0], NAMED + 2);
    assert_int_equal(after.nodes[4 * 4 + 2], 20);
    /* The other writers take the stack left with no frame. */
    struct buf b;
    buf__init(&b, 1u << 20);
    assert_int_equal(query__write_collapsed(&fx.m, &b), 0);
    assert_non_null(strstr(b.data, "f0;f1;f3 3\n"));
    assert_non_null(strstr(b.data, "f0;f1;f3;f4 2\n"));
    b.len = 0;
    assert_int_equal(query__write_pprof(&fx.m, 0, 1000, &b), 0);
    assert_true(b.len > 2);
    buf__free(&b);
    /* Nothing marked: nothing taken out. */
    assert_int_equal(query__hide_interp(&fx.m), 0);
    free(before.nodes);
    free(after.nodes);
    fixture_free(&fx);
}

/* --- off-CPU and wall: what each writer draws of a merge's value --- */

/* f0;f1 on CPU (1 sample, 100 ns), f0;f2 blocked 1000 ns, of m->value v. */
static void fixture_offcpu(struct fixture *fx, enum store_value v)
{
    static const uint32_t a[] = {0, 1}, b[] = {0, 2};
    fixture_init(fx, 3, 2);
    fixture_stack(fx, a, 2, 1, 100);
    fixture_stack(fx, b, 2, 0, 0);
    fx->m.stacks[1].off_cpu_ns = 1000;
    fx->m.value = v;
}

static void test_values(void **state)
{
    static const long long totals[3] = {100, 1000, 1100};
    static const char *const collapsed[3] = {"f0;f1 1\n", "f0;f2 1000\n",
                                             "f0;f1 100\nf0;f2 1000\n"};
    static const char *const types[3] = {"\"type\":\"cpu\"", "\"type\":\"off_cpu\"",
                                         "\"type\":\"wall\""};
    static const size_t ntypes[3] = {3, 3, 4}; /* off_cpu present: written for cpu too */
    (void)state;

    enum store_value v;
    assert_int_equal(query__parse_value(NULL, &v), 0);
    assert_int_equal(v, STORE_VALUE_CPU);
    assert_int_equal(query__parse_value("wall", &v), 0);
    assert_int_equal(v, STORE_VALUE_WALL);
    assert_int_equal(query__parse_value("off-cpu", &v), -1);
    assert_int_equal(query__parse_value("", &v), -1);
    for (int i = STORE_VALUE_CPU; i <= STORE_VALUE_WALL; i++) {
        struct fixture fx;
        struct graph g;
        struct buf b;
        fixture_offcpu(&fx, (enum store_value)i);
        graph_of(&fx, 0, &g);
        assert_int_equal(g.total, totals[i]);
        assert_int_equal(g.nodes[1], totals[i]); /* the root */
        free(g.nodes);
        buf__init(&b, 1u << 20);
        assert_int_equal(query__write_flamegraph(&fx.m, 0, &b), 0);
        assert_non_null(strstr(b.data, types[i]));
        buf__reset(&b);
        assert_int_equal(query__write_collapsed(&fx.m, &b), 0);
        assert_int_equal(b.len, strlen(collapsed[i]));
        assert_memory_equal(b.data, collapsed[i], b.len);
        /* pprof: the types by name, the asked one the default */
        buf__reset(&b);
        assert_int_equal(query__write_pprof(&fx.m, 0, 60, &b), 0);
        struct buf raw;
        buf__init(&raw, 1u << 20);
        assert_int_equal(gz__decompress(b.data, b.len, &raw, 1000), 0);
        struct pprof_reader r;
        char err[256];
        assert_int_equal(pprof_reader__read(&r, raw.data, raw.len, 1u << 20, err, sizeof(err)), 0);
        assert_int_equal(r.nsample_types, ntypes[i]);
        assert_string_equal(r.strings[r.sample_types[2].type], "off_cpu");
        assert_string_equal(r.strings[r.default_sample_type], query__value_name(v = i));
        uint64_t locs[8];
        int64_t vals[4];
        struct pprof_rsample s = {locs, 0, 8, vals, 0, 4, NULL, 0, 0};
        assert_int_equal(pprof_reader__sample(&r, 1, &s, err, sizeof(err)), 0);
        assert_true(vals[0] == 0 && vals[1] == 0 && vals[2] == 1000);
        if (i == STORE_VALUE_WALL)
            assert_true(vals[3] == 1000);
        pprof_reader__free(&r);
        buf__free(&raw);
        buf__free(&b);
        fixture_free(&fx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_time_refuses_non_finite),
        cmocka_unit_test(test_parse_duration_refuses_non_finite),
        cmocka_unit_test(test_flamegraph_sums_saturate),
        cmocka_unit_test(test_flamegraph_wide_sorted),
        cmocka_unit_test(test_flamegraph_long_numbers_cap),
        cmocka_unit_test(test_flamegraph_deep_folded),
        cmocka_unit_test(test_flamegraph_random_exact),
        cmocka_unit_test(test_hide_interp),
        cmocka_unit_test(test_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

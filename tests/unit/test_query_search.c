/* server/query_search.c: the paths down to the frames a search matches,
 * their totals checked against the stacks one by one, the terms it
 * refuses and its caps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/query_search.h"

/* Functions: 0 main, 1 serve, 2 parse, 3 tiny_handler, 4 Tiny_Helper, 5 idle. */
static struct store_function fns[] = {
    {"main", "a.c"},         {"serve", "a.c"},    {"parse", "b.c"},
    {"tiny_handler", "h.c"}, {"Tiny_Helper", ""}, {"idle", ""},
};
/* Leaf first, as the stores give them. */
static uint32_t s0[] = {2, 1, 0};    /* main;serve;parse */
static uint32_t s1[] = {3, 1, 0};    /* main;serve;tiny_handler */
static uint32_t s2[] = {4, 3, 1, 0}; /* main;serve;tiny_handler;Tiny_Helper */
static uint32_t s3[] = {5, 0};       /* main;idle */
static uint32_t s4[] = {1, 0};       /* main;serve */
static uint32_t s5[] = {4, 5, 0};    /* main;idle;Tiny_Helper */

static void merged(struct store_merged *m, struct store_merged_stack *st)
{
    struct store_merged_stack in[] = {
        {s0, 3, 1, 5000, 0}, {s1, 3, 1, 10, 0},  {s2, 4, 1, 20, 0},
        {s3, 2, 1, 4000, 0}, {s4, 2, 1, 300, 0}, {s5, 3, 1, 7, 0},
    };
    memcpy(st, in, sizeof(in));
    memset(m, 0, sizeof(*m));
    m->functions = fns;
    m->nfunctions = sizeof(fns) / sizeof(fns[0]);
    m->stacks = st;
    m->nstacks = sizeof(in) / sizeof(in[0]);
    m->profiles = 1;
}

/* The answer, read back: names, and nodes as a path ("main;serve") with
 * total and self. */
struct answer {
    char names[64][64];
    size_t nnames;
    char path[256][512];
    int64_t total[256], self[256];
    size_t n;
    int64_t matched, paths, kept, root;
    int capped;
};

static int64_t field(const char *js, const char *key)
{
    const char *p = strstr(js, key);
    assert_non_null(p);
    return strtoll(p + strlen(key), NULL, 10);
}

/* Parses what query__write_search wrote (the test's names hold no
 * escapes) and walks its nodes depth first into paths. */
static void parse(const char *js, struct answer *a)
{
    memset(a, 0, sizeof(*a));
    a->matched = field(js, "\"matched\":");
    a->paths = field(js, "\"paths\":");
    a->kept = field(js, "\"kept\":");
    a->root = field(js, "\"total\":");
    a->capped = strstr(js, "\"capped\":true") != NULL;
    const char *p = strstr(js, "\"names\":[");
    assert_non_null(p);
    p += 9;
    while (*p == '"' || *p == ',') {
        if (*p == ',') {
            p++;
            continue;
        }
        const char *e = strchr(p + 1, '"');
        snprintf(a->names[a->nnames++], 64, "%.*s", (int)(e - p - 1), p + 1);
        p = e + 1;
    }
    p = strstr(js, "\"nodes\":[");
    assert_non_null(p);
    p += 9;
    /* A stack of (path length, children left) while walking. */
    size_t plen[1100], left[1100], sp = 0;
    char cur[512] = "";
    while (*p && *p != ']') {
        char *e;
        long long nm = strtoll(p, &e, 10), tot = strtoll(e + 1, &e, 10);
        long long self = strtoll(e + 1, &e, 10), kids = strtoll(e + 1, &e, 10);
        p = *e == ',' ? e + 1 : e;
        while (sp && left[sp - 1] == 0) {
            sp--;
            cur[plen[sp]] = 0;
        }
        size_t at = strlen(cur);
        if (sp) {
            left[sp - 1]--;
            snprintf(cur + at, sizeof(cur) - at, "%s%s", at ? ";" : "", a->names[nm]);
        }
        assert_true(a->n < 256);
        snprintf(a->path[a->n], 512, "%s", cur);
        a->total[a->n] = tot;
        a->self[a->n++] = self;
        plen[sp] = at;
        left[sp++] = (size_t)kids;
    }
}

/* The stacks' time through the path (names joined by ';'; "" the root),
 * and of those ending there: what the full tree's node holds. */
static void brute(const struct store_merged *m, const char *path, int64_t *total, int64_t *self)
{
    *total = *self = 0;
    for (size_t i = 0; i < m->nstacks; i++) {
        const struct store_merged_stack *s = &m->stacks[i];
        char p[512] = "";
        uint32_t k = 0;
        int through = !*path;
        for (; k < s->nframes && !through; k++) {
            size_t at = strlen(p);
            snprintf(p + at, sizeof(p) - at, "%s%s", at ? ";" : "",
                     m->functions[s->frames[s->nframes - 1 - k]].name);
            through = strcmp(p, path) == 0;
        }
        if (through) {
            *total += s->cpu_ns;
            if (k == s->nframes)
                *self += s->cpu_ns;
        }
    }
}

static void search(const struct store_merged *m, const char *term, size_t max, struct answer *a)
{
    struct buf b;
    buf__init(&b, 1 << 20);
    assert_int_equal(query__write_search(m, term, max, &b), 0);
    parse((const char *)b.data, a);
    buf__free(&b);
}

/* Whether the answer has a node at path; checks every node's total and
 * self against the stacks, and that an "other" child is what its parent
 * does not show. */
static int has(const struct store_merged *m, const struct answer *a, const char *path)
{
    int found = 0;
    for (size_t i = 0; i < a->n; i++) {
        const char *last = strrchr(a->path[i], ';');
        last = last ? last + 1 : a->path[i];
        if (strcmp(last, "other") == 0)
            continue;
        int64_t t, s;
        brute(m, a->path[i], &t, &s);
        assert_int_equal(a->total[i], t);
        assert_int_equal(a->self[i], s);
        found |= strcmp(a->path[i], path) == 0;
    }
    return found;
}

static void test_search_paths_exact(void **state)
{
    struct store_merged m;
    struct store_merged_stack st[6];
    struct answer a;

    (void)state;
    merged(&m, st);
    /* Case-insensitive: tiny_handler (under serve) and Tiny_Helper under
     * idle; the Tiny_Helper below tiny_handler is inside a match already. */
    search(&m, "TINY", 0, &a);
    assert_int_equal(a.root, 5000 + 10 + 20 + 4000 + 300 + 7);
    assert_int_equal(a.matched, 10 + 20 + 7);
    assert_int_equal(a.paths, 2);
    assert_int_equal(a.kept, 2);
    assert_false(a.capped);
    assert_true(has(&m, &a, "main;serve;tiny_handler"));
    assert_true(has(&m, &a, "main;idle;Tiny_Helper"));
    assert_true(has(&m, &a, "main;serve"));
    assert_false(has(&m, &a, "main;serve;parse")); /* folded into serve's other */
    /* The rest of each frame in an "other" child: serve's is parse's
     * 5000 (its own 300 is its self). */
    int other = 0;
    for (size_t i = 0; i < a.n; i++)
        if (strcmp(a.path[i], "main;serve;other") == 0) {
            other = 1;
            assert_int_equal(a.total[i], 5000);
        }
    assert_true(other);
    /* Only the functions used are named. */
    assert_int_equal(a.nnames, 2 + 5); /* main serve tiny_handler idle Tiny_Helper */
}

static void test_search_regex(void **state)
{
    struct store_merged m;
    struct store_merged_stack st[6];
    struct answer a;

    (void)state;
    merged(&m, st);
    search(&m, "/^tiny_/", 0, &a); /* case-sensitive: not Tiny_Helper */
    assert_int_equal(a.matched, 30);
    assert_int_equal(a.paths, 1);
    assert_true(has(&m, &a, "main;serve;tiny_handler"));
    assert_false(has(&m, &a, "main;idle;Tiny_Helper"));
    search(&m, "/^tiny_/i", 0, &a);
    assert_int_equal(a.paths, 2);
    assert_int_equal(a.matched, 37);
    /* No match: the root alone, all of it "other". */
    search(&m, "nothing_like_it", 0, &a);
    assert_int_equal(a.paths, 0);
    assert_int_equal(a.matched, 0);
    assert_int_equal(a.n, 2);
    assert_string_equal(a.path[1], "other");
    assert_int_equal(a.total[1], a.root);
}

static void test_search_caps_paths(void **state)
{
    struct store_merged m;
    struct store_merged_stack st[6];
    struct answer a;

    (void)state;
    merged(&m, st);
    /* "a" matches main at the root of every stack: one path. */
    search(&m, "a", 0, &a);
    assert_int_equal(a.paths, 1);
    assert_int_equal(a.matched, a.root);
    /* Two paths (parse is under serve, inside a match) capped at one: the
     * largest kept, and said. */
    search(&m, "/^(serve|idle|parse)$/", 1, &a);
    assert_int_equal(a.paths, 2);
    assert_int_equal(a.kept, 1);
    assert_true(a.capped);
    assert_true(has(&m, &a, "main;serve")); /* 5330 */
    assert_false(has(&m, &a, "main;idle")); /* 4007 */
    assert_int_equal(a.matched, a.root);    /* every stack counted */
    search(&m, "/^(serve|idle|parse)$/", 2, &a);
    assert_false(a.capped);
    assert_true(has(&m, &a, "main;idle"));
}

static void test_search_caps_depth(void **state)
{
    struct store_merged m;
    struct store_merged_stack st[6], deep;
    struct answer a;
    uint32_t n = QUERY_SEARCH_MAX_DEPTH + 1, *frames = malloc(n * sizeof(*frames));

    (void)state;
    assert_non_null(frames);
    merged(&m, st);
    /* main, then serve QUERY_SEARCH_MAX_DEPTH times, then parse at the leaf. */
    for (uint32_t k = 0; k < n; k++)
        frames[k] = k == 0 ? 2 : k == n - 1 ? 0 : 1;
    deep = (struct store_merged_stack){frames, n, 1, 99, 0};
    m.stacks = &deep;
    m.nstacks = 1;
    search(&m, "parse", 0, &a); /* deeper than the cap: counted, not drawn */
    assert_int_equal(a.matched, 99);
    assert_int_equal(a.paths, 0);
    assert_true(a.capped);
    frames[0] = 1;
    frames[1] = 2; /* parse at depth QUERY_SEARCH_MAX_DEPTH - 1: the deepest drawn */
    struct buf b;
    buf__init(&b, 1 << 20);
    assert_int_equal(query__write_search(&m, "parse", 0, &b), 0);
    assert_non_null(strstr(b.data, "\"paths\":1,\"kept\":1,\"capped\":false"));
    buf__free(&b);
    free(frames);
}

/* An expression whose compiled form would be huge is refused before
 * regcomp builds it: glibc expands every bounded repeat into copies, and
 * "(a{1,32767})" alone took over 3 GB (a{1,1000}: 10 MB; a nest of repeats
 * multiplies), from one GET. Backreferences (glibc's extension, whose
 * matching can take exponential time) are refused too; ordinary
 * expressions, repeats included, are still taken. */
static void test_search_refuses_costly_expressions(void **state)
{
    char msg[256];

    (void)state;
    /* 65025 copies (156 MB in regcomp, taken before the cap). */
    assert_int_equal(query__search_check("/(a{1,255}){1,255}/", msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "too large"));
    assert_int_equal(query__search_check("/x(y(a{1,50}|b){1,50})/i", msg, sizeof(msg)), -1);
    assert_int_equal(query__search_check("/[a-z]+{1,300}{1,300}/", msg, sizeof(msg)), -1);
    assert_int_equal(query__search_check("/(a+)+\\1/", msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "backreference"));
    /* Taken: the UI's usual searches, a bracket holding what would
     * otherwise be syntax, a repeat within the cap. */
    assert_int_equal(query__search_check("/^(hot_a|hot_b)$/", msg, sizeof(msg)), 0);
    assert_int_equal(query__search_check("/[{(]a{2}[)}]\\{9/", msg, sizeof(msg)), 0);
    assert_int_equal(query__search_check("/[]{]x{1,100}/", msg, sizeof(msg)), 0);
    assert_int_equal(query__search_check("/(ab|cd)[0-9]{1,100}/", msg, sizeof(msg)), 0);
    assert_int_equal(query__search_check("/a\\.b\\\\1/", msg, sizeof(msg)), 0);
}

static void test_search_refuses_bad_terms(void **state)
{
    struct store_merged m;
    struct store_merged_stack st[6];
    char msg[256], big[QUERY_SEARCH_MAX_BYTES + 2];
    struct buf b;

    (void)state;
    merged(&m, st);
    assert_int_equal(query__search_check("", msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "not empty"));
    assert_int_equal(query__search_check(NULL, msg, sizeof(msg)), -1);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    assert_int_equal(query__search_check(big, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "at most " QUERY_SEARCH_MAX_BYTES_S " bytes"));
    big[sizeof(big) - 2] = 0; /* exactly the cap */
    assert_int_equal(query__search_check(big, msg, sizeof(msg)), 0);
    assert_int_equal(query__search_check("/a(b/", msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "not a POSIX extended regular expression"));
    /* Not an expression (as the UI reads it): a substring, taken. */
    assert_int_equal(query__search_check("/", msg, sizeof(msg)), 0);
    assert_int_equal(query__search_check("//", msg, sizeof(msg)), 0);
    assert_int_equal(query__search_check("/a(b/X", msg, sizeof(msg)), 0);
    buf__init(&b, 1 << 20);
    assert_int_equal(query__write_search(&m, "/a(b/", 0, &b), -EINVAL);
    assert_int_equal(b.len, 0);
    /* An answer past the buffer's cap: refused, not cut. */
    buf__free(&b);
    buf__init(&b, 64);
    assert_int_equal(query__write_search(&m, "tiny", 0, &b), -E2BIG);
    buf__free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_paths_exact),
        cmocka_unit_test(test_search_regex),
        cmocka_unit_test(test_search_caps_paths),
        cmocka_unit_test(test_search_caps_depth),
        cmocka_unit_test(test_search_refuses_bad_terms),
        cmocka_unit_test(test_search_refuses_costly_expressions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
